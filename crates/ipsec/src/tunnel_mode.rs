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
use std::sync::{Arc, MutexGuard};

use aws_lc_rs::cipher::{DecryptionContext, EncryptionContext};
use aws_lc_rs::iv::FixedLength;
use aws_lc_rs::{aead, constant_time, hmac, rand};
use packet::Packet;
use wire::esp::{padding_len, EspTrailer, HEADER_LEN, NEXT_HEADER_NONE, TRAILER_LEN};

use crate::lifetime::LifetimeEvent;
use crate::replay::ReplayWindow;
use crate::sa::{sum_words, Transform};
use crate::seqstore::Take;
use crate::{EspError, InboundSa, OutboundSa};

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

/// AAD of the AEAD transforms (RFC 4106 §5, RFC 7634 §2.1): SPI ‖ seq (32
/// bit), or SPI ‖ seq-hi ‖ seq-lo with ESN. Returns the buffer and length.
#[inline]
fn aead_aad(spi: u32, seq: u64, esn: bool) -> ([u8; 12], usize) {
    let mut a = [0u8; 12];
    a[..4].copy_from_slice(&spi.to_be_bytes());
    if esn {
        a[4..12].copy_from_slice(&seq.to_be_bytes());
        (a, 12)
    } else {
        a[4..8].copy_from_slice(&(seq as u32).to_be_bytes());
        (a, 8)
    }
}

/// Nonce = 4-byte salt ‖ 8-byte explicit IV (RFC 4106 §4, RFC 7634 §2).
#[inline]
fn aead_nonce(salt: &[u8; 4], iv: &[u8]) -> Result<aead::Nonce, EspError> {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(salt);
    n.get_mut(4..12)
        .ok_or(EspError::Crypto)?
        .copy_from_slice(iv.get(..8).ok_or(EspError::Crypto)?);
    Ok(aead::Nonce::assume_unique_for_key(n))
}

/// HMAC over ESP header ‖ IV ‖ ciphertext, with the high ESN bits appended
/// implicitly (RFC 4303 §2.2.1, §3.3.2.1): they are not sent but covered.
#[inline]
fn cbc_mac(key: &hmac::Key, head: &[u8], ct: &[u8], seq: u64, esn: bool) -> hmac::Tag {
    let mut ctx = hmac::Context::with_key(key);
    ctx.update(head);
    ctx.update(ct);
    if esn {
        ctx.update(&((seq >> 32) as u32).to_be_bytes());
    }
    ctx.sign()
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
    pub fn encrypt_batch(
        &self,
        pkts: &mut [Packet],
        status: &mut [Result<(), EspError>],
    ) -> Result<Option<LifetimeEvent>, EspError> {
        let n = pkts.len().min(status.len());
        let mut event = self.lifetime.check_now()?;
        let seqs = self.reserve(n as u64)?;
        let mut bytes = 0u64;
        let mut ok = 0u64;
        for (i, (p, st)) in pkts.iter_mut().zip(status.iter_mut()).enumerate() {
            let seq = seqs.start + i as u64;
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
                let len = p.len() as u64;
                let r = match p.data().first().map(|b| b >> 4) {
                    Some(4) => self.seal(p, NH_IPV4, seq, None),
                    Some(6) => self.seal(p, NH_IPV6, seq, None),
                    _ => Err(EspError::BadInner),
                };
                if r.is_ok() {
                    bytes += len;
                    ok += 1;
                }
                r
            };
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

    /// Seals the ESP packet `esp` (exactly [`OutboundSa::esp_len`] of
    /// `inner_len` bytes) whose inner packet already lies behind the room
    /// for header and IV: writes the trailer (§2.4), header and IV,
    /// encrypts where the bytes lie and appends the ICV. No outer header:
    /// the caller lays the packet out (in a packet's buffer, or as one
    /// slice of a UDP GSO datagram).
    fn seal_esp(
        &self,
        esp: &mut [u8],
        inner_len: usize,
        next_header: u8,
        seq: u64,
        iv: Option<&[u8]>,
    ) -> Result<(), EspError> {
        let alg = self.alg;
        let (iv_len, icv_len) = (alg.iv_len(), alg.icv_len());
        let front = self.esp_front();
        if esp.len() != self.esp_len(inner_len) {
            return Err(EspError::NoRoom);
        }
        let pad = padding_len(inner_len, alg.block_size());
        let ct_end = esp.len() - icv_len;

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

        // Encrypt and compute the ICV.
        let (head, rest) = esp.split_at_mut(front);
        let (ct, icv) = rest.split_at_mut(ct_end - front);
        match &self.transform {
            Transform::Aead { key, salt } => {
                let nonce = aead_nonce(salt, &head[HEADER_LEN..])?;
                let (aad, alen) = aead_aad(self.spi, seq, self.esn);
                let tag = key
                    .seal_in_place_separate_tag(nonce, aead::Aad::from(&aad[..alen]), ct)
                    .map_err(|_| EspError::Crypto)?;
                icv.copy_from_slice(tag.as_ref());
            }
            Transform::CbcEnc { key, mac } => {
                let iv16: [u8; 16] = head[HEADER_LEN..]
                    .try_into()
                    .map_err(|_| EspError::Crypto)?;
                key.less_safe_encrypt(ct, EncryptionContext::Iv128(FixedLength::from(iv16)))
                    .map_err(|_| EspError::Crypto)?;
                let tag = cbc_mac(mac, head, ct, seq, self.esn);
                icv.copy_from_slice(&tag.as_ref()[..icv_len]);
            }
            Transform::CbcDec { .. } => return Err(EspError::Crypto),
        }
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
        self.seal_esp(pkt.data_mut(), inner_len, next_header, seq, iv)?;

        // Outer header(s) from the template.
        let total = pkt.len() + tl.len;
        let o = pkt.push_front(tl.len).ok_or(EspError::NoRoom)?;
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
        self.sa
            .seal_esp(esp, inner_len, self.next_header, seq, None)?;
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

impl InboundSa {
    fn window(&self) -> MutexGuard<'_, ReplayWindow> {
        // A poisoned lock only means another worker panicked mid-update of
        // plain integers; the window is still consistent enough to use.
        self.replay.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Length and SPI checks; returns the low 32 sequence bits.
    #[inline]
    fn precheck(&self, d: &[u8]) -> Result<u32, EspError> {
        let alg = self.alg;
        let min_ct = if alg.is_aead() {
            TRAILER_LEN
        } else {
            alg.block_size()
        };
        let fixed = HEADER_LEN + alg.iv_len() + alg.icv_len();
        if d.len() < fixed + min_ct {
            return Err(EspError::Truncated);
        }
        if !alg.is_aead() && (d.len() - fixed) % alg.block_size() != 0 {
            return Err(EspError::BadLength);
        }
        if u32::from_be_bytes([d[0], d[1], d[2], d[3]]) != self.spi {
            return Err(EspError::BadSpi);
        }
        Ok(u32::from_be_bytes([d[4], d[5], d[6], d[7]]))
    }

    /// ESP header and IV: where the inner packet starts in an ESP packet.
    pub fn esp_front(&self) -> usize {
        HEADER_LEN + self.alg.iv_len()
    }

    /// Phase 2: ICV verification (and, for AEADs, decryption in place) of
    /// the ESP packet `esp`.
    #[inline]
    fn verify(&self, esp: &mut [u8], seq: u64) -> Result<(), EspError> {
        let (iv_len, icv_len) = (self.alg.iv_len(), self.alg.icv_len());
        let (head, rest) = esp.split_at_mut(HEADER_LEN + iv_len);
        let ct_len = rest.len() - icv_len;
        let (ct, icv) = rest.split_at_mut(ct_len);
        match &self.transform {
            Transform::Aead { key, salt } => {
                let nonce = aead_nonce(salt, &head[HEADER_LEN..])?;
                let (aad, alen) = aead_aad(self.spi, seq, self.esn);
                key.open_in_place_separate_tag(nonce, aead::Aad::from(&aad[..alen]), icv, ct)
                    .map_err(|_| EspError::IcvFail)?;
            }
            Transform::CbcDec { mac, .. } => {
                let tag = cbc_mac(mac, head, ct, seq, self.esn);
                constant_time::verify_slices_are_equal(&tag.as_ref()[..icv_len], icv)
                    .map_err(|_| EspError::IcvFail)?;
            }
            Transform::CbcEnc { .. } => return Err(EspError::Crypto),
        }
        Ok(())
    }

    /// Phase 4: CBC decryption and trailer validation of the ESP packet
    /// `esp`; the inner packet is then `inner_len` bytes at
    /// [`InboundSa::esp_front`].
    #[inline]
    fn finish(&self, esp: &mut [u8], seq: u64) -> Result<Decrypted, EspError> {
        let (iv_len, icv_len) = (self.alg.iv_len(), self.alg.icv_len());
        let front = HEADER_LEN + iv_len;
        let ct_end = esp.len() - icv_len;
        let (head, rest) = esp.split_at_mut(front);
        let ct = &mut rest[..ct_end - front];
        if let Transform::CbcDec { key, .. } = &self.transform {
            let iv16: [u8; 16] = head[HEADER_LEN..]
                .try_into()
                .map_err(|_| EspError::Crypto)?;
            key.decrypt(ct, DecryptionContext::Iv128(FixedLength::from(iv16)))
                .map_err(|_| EspError::Crypto)?;
        }
        let (t, n) = EspTrailer::parse(ct).map_err(|_| EspError::BadPadding)?;
        let nh = t.next_header;
        let inner = &ct[..n];
        let version = inner.first().map(|b| b >> 4);
        match nh {
            NH_IPV4 if version == Some(4) && n >= 20 => {}
            NH_IPV6 if version == Some(6) && n >= 40 => {}
            NH_IPV4 | NH_IPV6 => return Err(EspError::BadInner),
            NEXT_HEADER_NONE => return Err(EspError::Dummy),
            _ => return Err(EspError::BadNextHeader),
        }
        Ok(Decrypted {
            inner_v6: nh == NH_IPV6,
            seq,
            inner_len: n,
        })
    }

    /// Leaves the inner packet of a decrypted ESP packet in `pkt`.
    fn strip(&self, pkt: &mut Packet, d: &Decrypted) -> Result<(), EspError> {
        if !pkt.pull_front(self.esp_front()) {
            return Err(EspError::Truncated);
        }
        pkt.truncate(d.inner_len);
        Ok(())
    }

    /// Decapsulates one ESP packet (data starting at the ESP header) in
    /// place, leaving the inner IP packet. On error the packet must be
    /// dropped with [`EspError::as_str`] as the reason.
    pub fn decrypt(&self, pkt: &mut Packet) -> Result<Decrypted, EspError> {
        self.lifetime.check_now()?;
        let lo = self.precheck(pkt.data())?;
        let seq = {
            let w = self.window();
            let seq = w.infer(lo).ok_or(EspError::TooOld)?;
            w.check(seq)?;
            seq
        };
        self.verify(pkt.data_mut(), seq)?;
        self.window().update(seq)?;
        let d = self.finish(pkt.data_mut(), seq)?;
        self.strip(pkt, &d)?;
        self.lifetime.account(1, pkt.len() as u64);
        Ok(d)
    }

    /// Decapsulates a vector with one lock of the replay window for all the
    /// pre-checks and one for all the updates. `out[i]` receives the result
    /// of `pkts[i]` (packets beyond `out.len()` are not touched). Returns a
    /// lifetime event crossed by this batch, or `lifetime-hard` when the SA
    /// refused the whole batch.
    pub fn decrypt_batch(
        &self,
        pkts: &mut [Packet],
        out: &mut [Result<Decrypted, EspError>],
    ) -> Result<Option<LifetimeEvent>, EspError> {
        let event = self.open_units(pkts, out)?;
        for (p, o) in pkts.iter_mut().zip(out.iter_mut()) {
            if let Ok(d) = *o {
                if let Err(e) = self.strip(p, &d) {
                    *o = Err(e);
                }
            }
        }
        Ok(event)
    }

    /// Opens the ESP packets that lie in `buf` at `esp[i]` (the slices of a
    /// UDP GSO datagram, RFC 3948), each where it lies: `out[i]` receives
    /// the result of slice `i`, whose inner packet is then at
    /// `esp[i].start + esp_front()`, `inner_len` long. Same checks, order
    /// and locking as [`InboundSa::decrypt_batch`]; a range outside `buf`
    /// is `truncated`.
    pub fn open_slices(
        &self,
        buf: &mut [u8],
        esp: &[Range<usize>],
        out: &mut [Result<Decrypted, EspError>],
    ) -> Result<Option<LifetimeEvent>, EspError> {
        self.open_units(&mut Slices { buf, esp }, out)
    }

    /// The four phases of RFC 4303 §3.4 over a batch of ESP packets.
    fn open_units(
        &self,
        units: &mut (impl EspUnits + ?Sized),
        out: &mut [Result<Decrypted, EspError>],
    ) -> Result<Option<LifetimeEvent>, EspError> {
        let mut event = self.lifetime.check_now()?;
        let n = units.count().min(out.len());
        let out = &mut out[..n];
        // Phase 1: lengths, SPI, ESN inference and replay pre-check.
        {
            let w = self.window();
            for (i, o) in out.iter_mut().enumerate() {
                *o = units
                    .esp(i)
                    .ok_or(EspError::Truncated)
                    .and_then(|d| self.precheck(d))
                    .and_then(|lo| {
                        let seq = w.infer(lo).ok_or(EspError::TooOld)?;
                        w.check(seq)?;
                        Ok(Decrypted {
                            inner_v6: false,
                            seq,
                            inner_len: 0,
                        })
                    });
            }
        }
        // Phase 2: ICV verification, no lock held.
        for (i, o) in out.iter_mut().enumerate() {
            if let Ok(d) = *o {
                let r = units
                    .esp(i)
                    .ok_or(EspError::Truncated)
                    .and_then(|e| self.verify(e, d.seq));
                if let Err(e) = r {
                    *o = Err(e);
                }
            }
        }
        // Phase 3: window updates for the authentic packets.
        {
            let mut w = self.window();
            for o in out.iter_mut() {
                if let Ok(d) = *o {
                    if let Err(e) = w.update(d.seq) {
                        *o = Err(e);
                    }
                }
            }
        }
        // Phase 4: decrypt (CBC), check the trailer.
        let (mut ok, mut bytes) = (0u64, 0u64);
        for (i, o) in out.iter_mut().enumerate() {
            if let Ok(d) = *o {
                *o = units
                    .esp(i)
                    .ok_or(EspError::Truncated)
                    .and_then(|e| self.finish(e, d.seq));
                if let Ok(d) = o {
                    ok += 1;
                    bytes += d.inner_len as u64;
                }
            }
        }
        if let Some(e) = self.lifetime.account(ok, bytes) {
            event = Some(e);
        }
        Ok(event)
    }
}

/// ESP packets to open as one batch: a vector of packets, or the slices of
/// one buffer.
trait EspUnits {
    fn count(&self) -> usize;
    /// The bytes of ESP packet `i` (from its ESP header to its ICV).
    fn esp(&mut self, i: usize) -> Option<&mut [u8]>;
}

impl EspUnits for [Packet] {
    fn count(&self) -> usize {
        self.len()
    }
    fn esp(&mut self, i: usize) -> Option<&mut [u8]> {
        self.get_mut(i).map(|p| p.data_mut())
    }
}

struct Slices<'a> {
    buf: &'a mut [u8],
    esp: &'a [Range<usize>],
}

impl EspUnits for Slices<'_> {
    fn count(&self) -> usize {
        self.esp.len()
    }
    fn esp(&mut self, i: usize) -> Option<&mut [u8]> {
        let r = self.esp.get(i)?.clone();
        self.buf.get_mut(r)
    }
}

#[cfg(test)]
#[path = "esp_vectors.rs"]
mod vectors;
