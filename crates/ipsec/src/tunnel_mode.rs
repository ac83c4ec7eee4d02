//! ESP tunnel mode (RFC 4303): encapsulation and decapsulation in place in a
//! [`packet::Packet`].
//!
//! Outbound, the packet's data is the inner IP packet. Padding, pad length
//! and next header are appended in the tailroom, ESP header + IV and the
//! outer header(s) are prepended in the headroom, the payload is encrypted
//! where it lies: no copy, no allocation.
//!
//! Inbound, the packet's data starts at the ESP header (the caller stripped
//! the outer IP and, for NAT-T, UDP header). The order of operations follows
//! RFC 4303 §3.4: lengths and SPI, the replay pre-check (§3.4.3, before any
//! crypto), ICV verification (§3.4.4), only then the replay window update,
//! decryption, padding check (§2.4) and trailer removal.

use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use aws_lc_rs::rand;
use packet::Packet;
use wire::esp::{padding_len, EspTrailer, HEADER_LEN, TRAILER_LEN};

use crate::lifetime::LifetimeEvent;
use crate::sa::sum_words;
use crate::seqstore::Take;
use crate::transform::{Unit, CHUNK};
use crate::{EspError, OutboundSa};

mod inbound;

/// IP protocol numbers of the inner packet (next header in tunnel mode).
const NH_IPV4: u8 = 4;
const NH_IPV6: u8 = 41;

/// What a successfully decrypted packet was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decrypted {
    /// The inner packet is IPv6 (next header 41), else IPv4 (4).
    pub inner_v6: bool,
    /// Full (ESN-inferred) sequence number.
    pub seq: u64,
    /// Length of the inner packet, which starts right behind the ESP
    /// header and IV ([`InboundSa::esp_front`]).
    pub inner_len: usize,
}

/// Folds a one's-complement sum to 16 bits.
#[inline]
fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Sequence numbers left when a 32-bit SA reports its soft lifetime even
/// with no configured limit, as IKE's default child packet limit
/// (2^32 - 2^24): the IKE thread rekeys, and a static SA's operator is
/// warned 2^24 packets before `seq-exhausted` stops it (RFC 4303 §3.3.3).
/// Judged on the sequence number, which survives restarts, not on the
/// packet counter, which starts again at zero.
pub const SEQ_SOFT_MARGIN: u64 = 1 << 24;

impl OutboundSa {
    /// Exclusive upper end of the sequence space: without ESN the last
    /// number is 2^32 - 1; with ESN 2^64 - 2 (the range type cannot hold
    /// 2^64 - 1, a number no SA lives to reach).
    pub fn seq_end(&self) -> u64 {
        self.seq.last() + 1
    }

    /// Hands out up to `n` consecutive sequence numbers for a batch; several
    /// workers may call it concurrently (one compare-and-swap per batch).
    /// The range is shorter than `n` when the space is nearly used up.
    /// Numbers never wrap (RFC 4303 §3.3.3: the sender "MUST NOT" cycle):
    /// once exhausted this returns `seq-exhausted`, marks the SA expired and
    /// reports [`LifetimeEvent::Hard`] (through
    /// [`crate::lifetime::LifetimeState::take_event`]); later calls return
    /// `sa-expired`. Numbers already handed out stay usable. Numbers above
    /// the durable ceiling of a key that outlives the process are refused
    /// as `seq-not-durable` until the control thread has written the next
    /// block ([`crate::seqstore`]).
    pub fn reserve(&self, n: u64) -> Result<Range<u64>, EspError> {
        if self.lifetime.is_hard_expired() || self.exhausted.load(Relaxed) {
            return Err(EspError::SaExpired);
        }
        match self.seq.take(n) {
            Take::Ok(r) => {
                if !self.esn && r.end > u64::from(u32::MAX) + 1 - SEQ_SOFT_MARGIN {
                    self.lifetime.raise_soft();
                }
                Ok(r)
            }
            Take::Wait => Err(EspError::SeqNotDurable),
            Take::Retired => {
                // An IKE SA rekeys on it (a static one only logs it).
                self.lifetime.raise_soft();
                Err(EspError::SeqUnsafeAfterTakeover)
            }
            Take::Exhausted => {
                if !self.exhausted.swap(true, Relaxed) {
                    self.lifetime.raise_hard();
                }
                Err(EspError::SeqExhausted)
            }
        }
    }

    /// Encrypts one inner IPv4/IPv6 packet in place and prepends the outer
    /// headers; `seq` comes from [`OutboundSa::reserve`]. On error the
    /// packet is unusable and must be dropped.
    pub fn encrypt(&self, pkt: &mut Packet, inner_is_v6: bool, seq: u64) -> Result<(), EspError> {
        self.lifetime.check_now()?;
        let bytes = pkt.len() as u64;
        let nh = if inner_is_v6 { NH_IPV6 } else { NH_IPV4 };
        self.seal(pkt, nh, seq, None)?;
        self.lifetime.account(1, bytes);
        Ok(())
    }

    /// Encrypts a vector: reserves its sequence numbers once, checks the
    /// lifetime once, seals each packet (the inner family is read from the
    /// IP version nibble). `status[i]` receives the result of `pkts[i]`
    /// (packets beyond `status.len()` are not touched). An `Err` return means
    /// nothing was encrypted (expired SA, exhausted sequence numbers); an
    /// `Ok` carries a lifetime event crossed by this batch, if any.
    ///
    /// The packets go [`CHUNK`] at a time through three passes: framing
    /// (trailer, ESP header, IV), the cipher and ICV over the whole chunk
    /// (side by side on the multi-buffer engine), the outer headers.
    pub fn encrypt_batch(
        &self,
        pkts: &mut [Packet],
        status: &mut [Result<(), EspError>],
    ) -> Result<Option<LifetimeEvent>, EspError> {
        let n = pkts.len().min(status.len());
        let mut event = self.lifetime.check_now()?;
        let seqs = self.reserve(n as u64)?;
        let (mut bytes, mut ok) = (0u64, 0u64);
        let chunks = pkts[..n]
            .chunks_mut(CHUNK)
            .zip(status[..n].chunks_mut(CHUNK));
        for (c, (pkts, status)) in chunks.enumerate() {
            let first = seqs.start + (c * CHUNK) as u64;
            let mut inner = [0usize; CHUNK];
            let mut ivs = [0u8; 16 * CHUNK];
            let cbc = !self.alg.is_aead();
            // RFC 3602 §2.1: CBC IVs must be unpredictable; one call to the
            // generator for the chunk.
            if cbc && rand::fill(&mut ivs[..16 * pkts.len()]).is_err() {
                status.fill(Err(EspError::Crypto));
                continue;
            }
            for (i, (p, st)) in pkts.iter_mut().zip(status.iter_mut()).enumerate() {
                let seq = first + i as u64;
                inner[i] = p.len();
                let iv = cbc.then(|| &ivs[16 * i..16 * i + 16]);
                *st = if seq >= seqs.end {
                    Err(EspError::SeqExhausted)
                } else if self
                    .selectors
                    .as_ref()
                    .is_some_and(|s| !s.allows_outbound(p.data()))
                {
                    // Not what the peer agreed to receive under this SA (its
                    // sequence number stays unused: gaps are allowed).
                    Err(EspError::PolicyMismatch)
                } else {
                    match p.data().first().map(|b| b >> 4) {
                        Some(4) => self.lay_out(p, NH_IPV4, seq, iv),
                        Some(6) => self.lay_out(p, NH_IPV6, seq, iv),
                        _ => Err(EspError::BadInner),
                    }
                };
            }
            let len = pkts.len();
            let mut units: [Option<Unit<'_>>; CHUNK] = [const { None }; CHUNK];
            for (i, ((p, st), u)) in pkts
                .iter_mut()
                .zip(status.iter())
                .zip(&mut units)
                .enumerate()
            {
                if st.is_ok() {
                    let esp = p.data_mut().get_mut(self.template.len..);
                    *u = esp.map(|esp| Unit {
                        esp,
                        seq: first + i as u64,
                    });
                }
            }
            self.transform.seal(&mut units[..len], status);
            for (i, (p, st)) in pkts.iter_mut().zip(status.iter_mut()).enumerate() {
                if st.is_ok() {
                    *st = self.put_outer(p, first + i as u64);
                }
                if st.is_ok() {
                    ok += 1;
                    bytes += inner[i] as u64;
                }
            }
        }
        if let Some(e) = self.lifetime.account(ok, bytes) {
            event = Some(e);
        }
        Ok(event)
    }

    /// Last sequence number the SA may send: 2^32 - 1, or 2^64 - 1 with ESN.
    fn last_seq(&self) -> u64 {
        if self.esn {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        }
    }

    /// ESP header and IV: the bytes in front of the inner packet.
    pub fn esp_front(&self) -> usize {
        HEADER_LEN + self.alg.iv_len()
    }

    /// Length of the ESP packet (header, IV, inner packet, padding,
    /// trailer, ICV) that seals an inner packet of `inner_len` bytes;
    /// never shorter for a longer inner packet.
    pub fn esp_len(&self, inner_len: usize) -> usize {
        let pad = padding_len(inner_len, self.alg.block_size());
        self.esp_front() + inner_len + pad + TRAILER_LEN + self.alg.icv_len()
    }

    /// Frames the ESP packet `esp` (exactly [`OutboundSa::esp_len`] of
    /// `inner_len` bytes) whose inner packet already lies behind the room
    /// for header and IV: writes the trailer (§2.4), header and IV,
    /// leaving the cipher and the ICV to [`crate::transform::Transform::seal`].
    fn frame(
        &self,
        esp: &mut [u8],
        inner_len: usize,
        next_header: u8,
        seq: u64,
        iv: Option<&[u8]>,
    ) -> Result<(), EspError> {
        let alg = self.alg;
        let iv_len = alg.iv_len();
        let front = self.esp_front();
        if esp.len() != self.esp_len(inner_len) {
            return Err(EspError::NoRoom);
        }
        let pad = padding_len(inner_len, alg.block_size());
        let ct_end = esp.len() - alg.icv_len();

        // Trailer: padding 1, 2, 3, ..., pad length, next header (§2.4).
        EspTrailer {
            pad_len: pad as u8,
            next_header,
        }
        .emit(&mut esp[front + inner_len..ct_end])
        .map_err(|_| EspError::Crypto)?;

        // ESP header and IV.
        esp[0..4].copy_from_slice(&self.spi.to_be_bytes());
        esp[4..8].copy_from_slice(&(seq as u32).to_be_bytes());
        let ivb = &mut esp[HEADER_LEN..front];
        match iv {
            Some(v) if v.len() == iv_len => ivb.copy_from_slice(v),
            Some(_) => return Err(EspError::Crypto),
            // RFC 4106 §3.1: the IV must not repeat under one key; the
            // sequence number never does.
            None if alg.is_aead() => ivb.copy_from_slice(&seq.to_be_bytes()),
            // RFC 3602 §2.1: CBC IVs must be unpredictable.
            None => rand::fill(ivb).map_err(|_| EspError::Crypto)?,
        }
        Ok(())
    }

    /// Frames and seals one ESP packet in place ([`OutboundSa::frame`],
    /// then the cipher): the slice of a UDP GSO datagram.
    fn seal_esp(
        &self,
        esp: &mut [u8],
        inner_len: usize,
        next_header: u8,
        seq: u64,
    ) -> Result<(), EspError> {
        if seq == 0 || seq > self.last_seq() {
            return Err(EspError::SeqExhausted);
        }
        self.frame(esp, inner_len, next_header, seq, None)?;
        self.seal_units(esp, seq)
    }

    /// The cipher and ICV over one framed ESP packet.
    fn seal_units(&self, esp: &mut [u8], seq: u64) -> Result<(), EspError> {
        let mut res = [Ok(())];
        self.transform
            .seal(&mut [Some(Unit { esp, seq })], &mut res);
        res[0]
    }

    /// Checks the room, grows the packet around its inner packet and
    /// frames it ([`OutboundSa::frame`]): the packet's data is then the
    /// outer headers' room (uninitialised) followed by the ESP packet.
    fn lay_out(
        &self,
        pkt: &mut Packet,
        next_header: u8,
        seq: u64,
        iv: Option<&[u8]>,
    ) -> Result<(), EspError> {
        if seq == 0 || seq > self.last_seq() {
            return Err(EspError::SeqExhausted);
        }
        let inner_len = pkt.len();
        let esp_len = self.esp_len(inner_len);
        let tl = &self.template;
        let ip_len = esp_len + tl.len - if tl.v6 { 40 } else { 0 };
        if ip_len > usize::from(u16::MAX) {
            return Err(EspError::BadInner);
        }
        let front = self.esp_front();
        let back = esp_len - front - inner_len;
        if pkt.headroom() < tl.len + front || pkt.tailroom() < back {
            return Err(EspError::NoRoom);
        }
        pkt.push_back(back).ok_or(EspError::NoRoom)?;
        pkt.push_front(front).ok_or(EspError::NoRoom)?;
        self.frame(pkt.data_mut(), inner_len, next_header, seq, iv)?;
        pkt.push_front(tl.len).ok_or(EspError::NoRoom)?;
        Ok(())
    }

    /// The encapsulation proper. `next_header` is 4 or 41 in tunnel mode
    /// (other values only in known-answer tests); `iv` overrides the IV for
    /// those tests (production IVs are the sequence number for the AEADs,
    /// random for CBC).
    pub(crate) fn seal(
        &self,
        pkt: &mut Packet,
        next_header: u8,
        seq: u64,
        iv: Option<&[u8]>,
    ) -> Result<(), EspError> {
        self.lay_out(pkt, next_header, seq, iv)?;
        let esp = pkt
            .data_mut()
            .get_mut(self.template.len..)
            .ok_or(EspError::NoRoom)?;
        self.seal_units(esp, seq)?;
        self.put_outer(pkt, seq)
    }

    /// Fills in the outer header(s) in front of a sealed ESP packet from
    /// the template: lengths, the IPv4 ID and checksum, the UDP length (and
    /// the IPv6 UDP checksum, over the encrypted payload).
    fn put_outer(&self, pkt: &mut Packet, seq: u64) -> Result<(), EspError> {
        let tl = &self.template;
        let total = pkt.len();
        let o = pkt.data_mut().get_mut(..tl.len).ok_or(EspError::NoRoom)?;
        o.copy_from_slice(&tl.bytes[..tl.len]);
        if tl.v6 {
            let plen = (total - 40) as u16;
            o[4..6].copy_from_slice(&plen.to_be_bytes());
            if tl.udp {
                o[44..46].copy_from_slice(&plen.to_be_bytes());
                // IPv6 forbids a zero UDP checksum in general (RFC 8200
                // §8.1); compute it over the encrypted payload.
                let data = pkt.data_mut();
                let s =
                    u64::from(tl.v6_pseudo) + u64::from(plen) + u64::from(sum_words(&data[40..]));
                let mut c = !fold(s);
                if c == 0 {
                    c = 0xffff;
                }
                data[46..48].copy_from_slice(&c.to_be_bytes());
            }
        } else {
            let len = total as u16;
            let id = seq as u16;
            o[2..4].copy_from_slice(&len.to_be_bytes());
            o[4..6].copy_from_slice(&id.to_be_bytes());
            let c = !fold(u64::from(tl.v4_sum) + u64::from(len) + u64::from(id));
            o[10..12].copy_from_slice(&c.to_be_bytes());
            if tl.udp {
                // RFC 3948 §2.1: the UDP checksum is transmitted as zero.
                o[24..26].copy_from_slice(&(len - 20).to_be_bytes());
            }
        }
        Ok(())
    }
}

/// Seals the ESP packets of one super-packet where the caller lays them
/// out: as the slices of a UDP GSO datagram (RFC 3948 ESP in UDP), so that
/// each inner segment is copied once, into its place on the wire, and
/// encrypted there (no cut-then-join). Made by [`crate::TunnelTx::sealer`]
/// for one inner packet's flow: the lifetime and the selectors are checked
/// once, sequence numbers reserved once ([`SliceSealer::reserve`]); what it
/// sealed is accounted to the SA's lifetime when it is dropped.
pub struct SliceSealer {
    sa: Arc<OutboundSa>,
    seqs: Range<u64>,
    next_header: u8,
    packets: u64,
    bytes: u64,
}

impl SliceSealer {
    /// `inner`: the super-packet's IP header onwards, whose addresses (and
    /// ports) every segment repeats.
    pub(crate) fn new(sa: Arc<OutboundSa>, inner: &[u8]) -> Result<Self, EspError> {
        sa.lifetime.check_now()?;
        if sa
            .selectors
            .as_ref()
            .is_some_and(|s| !s.allows_outbound(inner))
        {
            return Err(EspError::PolicyMismatch);
        }
        let next_header = match inner.first().map(|b| b >> 4) {
            Some(4) => NH_IPV4,
            Some(6) => NH_IPV6,
            _ => return Err(EspError::BadInner),
        };
        Ok(SliceSealer {
            sa,
            seqs: 0..0,
            next_header,
            packets: 0,
            bytes: 0,
        })
    }

    /// Reserves the sequence numbers of `n` packets; slice `i` is sealed
    /// with the `i`-th. Fewer than `n` near the end of the sequence space:
    /// the slices beyond fail as `seq-exhausted`.
    pub fn reserve(&mut self, n: usize) -> Result<(), EspError> {
        self.seqs = self.sa.reserve(n as u64)?;
        Ok(())
    }

    /// Outer IP and UDP header of the SA (lengths, ID and checksums to be
    /// filled in by the caller).
    pub fn outer(&self) -> &[u8] {
        &self.sa.template.bytes[..self.sa.template.len]
    }

    /// The sequence number slice `i` gets: the outer IPv4 ID, as
    /// [`OutboundSa::encrypt`] numbers single packets.
    pub fn seq(&self, i: usize) -> u64 {
        self.seqs.start + i as u64
    }

    /// Bytes in front of each inner packet (ESP header and IV).
    pub fn front(&self) -> usize {
        self.sa.esp_front()
    }

    /// Length of the ESP packet around an inner packet of `inner_len`.
    pub fn esp_len(&self, inner_len: usize) -> usize {
        self.sa.esp_len(inner_len)
    }

    /// Seals slice `i`: `esp` is [`SliceSealer::esp_len`] of `inner_len`
    /// long with the inner packet at [`SliceSealer::front`].
    pub fn seal(&mut self, esp: &mut [u8], inner_len: usize, i: usize) -> Result<(), EspError> {
        let seq = self.seq(i);
        if seq >= self.seqs.end {
            return Err(EspError::SeqExhausted);
        }
        self.sa.seal_esp(esp, inner_len, self.next_header, seq)?;
        self.packets += 1;
        self.bytes += inner_len as u64;
        Ok(())
    }
}

impl Drop for SliceSealer {
    fn drop(&mut self) {
        // Crossing a limit raises the SA's event for the control thread
        // (LifetimeState::take_event), as for encrypt_batch.
        let _ = self.sa.lifetime.account(self.packets, self.bytes);
    }
}

#[cfg(test)]
#[path = "esp_vectors.rs"]
mod vectors;
