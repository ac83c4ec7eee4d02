//! Decapsulation: the four phases of RFC 4303 §3.4 over a batch of ESP
//! packets, each opened where it lies (a vector of packets, or the slices
//! of one UDP GSO datagram).

use std::ops::Range;
use std::sync::MutexGuard;

use packet::Packet;
use wire::esp::{EspTrailer, HEADER_LEN, NEXT_HEADER_NONE, TRAILER_LEN};

use super::{Decrypted, NH_IPV4, NH_IPV6};
use crate::lifetime::LifetimeEvent;
use crate::replay::ReplayWindow;
use crate::transform::{Unit, CHUNK};
use crate::{EspError, InboundSa};

impl InboundSa {
    pub(crate) fn window(&self) -> MutexGuard<'_, ReplayWindow> {
        // A poisoned lock only means another worker panicked mid-update of
        // plain integers; the window is still consistent enough to use.
        self.replay.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Length and SPI checks; returns the low 32 sequence bits.
    #[inline]
    pub(crate) fn precheck(&self, d: &[u8]) -> Result<u32, EspError> {
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

    /// Phase 2 of one packet: ICV verification (and, for AEADs,
    /// decryption in place) of the ESP packet `esp`.
    #[cfg(test)]
    pub(crate) fn verify(&self, esp: &mut [u8], seq: u64) -> Result<(), EspError> {
        let mut res = [Ok(())];
        self.transform
            .verify(&mut [Some(Unit { esp, seq })], &mut res);
        res[0]
    }

    /// Phase 4 of one packet: CBC decryption and the trailer.
    #[cfg(test)]
    pub(crate) fn finish(&self, esp: &mut [u8], seq: u64) -> Result<Decrypted, EspError> {
        let mut res = [Ok(())];
        self.transform.decrypt(
            &mut [Some(Unit {
                esp: &mut *esp,
                seq,
            })],
            &mut res,
        );
        res[0]?;
        self.trailer(esp, seq)
    }

    /// The trailer of a deciphered ESP packet (RFC 4303 §2.4, §3.4.4.1):
    /// padding, and a next header that is the inner packet's family; the
    /// inner packet is then `inner_len` bytes at [`InboundSa::esp_front`].
    fn trailer(&self, esp: &[u8], seq: u64) -> Result<Decrypted, EspError> {
        let front = self.esp_front();
        let ct_end = esp.len().saturating_sub(self.alg.icv_len());
        let ct = esp.get(front..ct_end).ok_or(EspError::Truncated)?;
        let (t, n) = EspTrailer::parse(ct).map_err(|_| EspError::BadPadding)?;
        let nh = t.next_header;
        let version = ct.first().map(|b| b >> 4);
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
    pub(crate) fn strip(&self, pkt: &mut Packet, d: &Decrypted) -> Result<(), EspError> {
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
        let mut out = [Err(EspError::Crypto)];
        self.open_units(std::slice::from_mut(pkt), &mut out)?;
        let d = out[0]?;
        self.strip(pkt, &d)?;
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
    /// and locking as [`InboundSa::decrypt_batch`]. The ranges are in
    /// ascending order and do not overlap, as a datagram's slices; a range
    /// outside `buf` or overlapping an earlier one is `truncated`.
    pub fn open_slices(
        &self,
        buf: &mut [u8],
        esp: &[Range<usize>],
        out: &mut [Result<Decrypted, EspError>],
    ) -> Result<Option<LifetimeEvent>, EspError> {
        self.open_units(&mut Slices { buf, esp }, out)
    }

    /// The four phases of RFC 4303 §3.4 over a batch of ESP packets; the
    /// crypto of phases 2 and 4 runs over [`CHUNK`] packets at a time.
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
            for (o, d) in out.iter_mut().zip(units.iter(0..n)) {
                *o = d
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
        // Phase 2: ICV verification (and the AEADs' decryption), no lock
        // held.
        by_chunk(
            units,
            out,
            |c, r| self.transform.verify(c, r),
            |o, r, _| {
                if let (Ok(_), Err(e)) = (&o, r) {
                    *o = Err(e);
                }
            },
        );
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
        by_chunk(
            units,
            out,
            |c, r| self.transform.decrypt(c, r),
            |o, r, u| {
                let Ok(d) = *o else { return };
                *o = r.and_then(|()| {
                    let u = u.ok_or(EspError::Truncated)?;
                    self.trailer(u.esp, d.seq)
                });
                if let Ok(d) = o {
                    ok += 1;
                    bytes += d.inner_len as u64;
                }
            },
        );
        if let Some(e) = self.lifetime.account(ok, bytes) {
            event = Some(e);
        }
        Ok(event)
    }
}

/// Runs a crypto `step` over the packets of `out` still good, [`CHUNK`]
/// at a time (each as a [`Unit`] over its bytes in `units`), then `fold`s
/// each packet's result (and its unit) into its entry of `out`.
fn by_chunk<U: EspUnits + ?Sized>(
    units: &mut U,
    out: &mut [Result<Decrypted, EspError>],
    step: impl Fn(&mut [Option<Unit<'_>>], &mut [Result<(), EspError>]),
    mut fold: impl FnMut(&mut Result<Decrypted, EspError>, Result<(), EspError>, Option<&Unit<'_>>),
) {
    let n = out.len();
    for start in (0..n).step_by(CHUNK) {
        let end = (start + CHUNK).min(n);
        let out = &mut out[start..end];
        let mut chunk: [Option<Unit<'_>>; CHUNK] = [const { None }; CHUNK];
        let mut res = [Ok(()); CHUNK];
        for ((u, o), d) in chunk.iter_mut().zip(out.iter()).zip(units.iter(start..end)) {
            if let (Ok(o), Some(esp)) = (o, d) {
                *u = Some(Unit { esp, seq: o.seq });
            }
        }
        step(&mut chunk[..out.len()], &mut res[..out.len()]);
        for ((o, r), u) in out.iter_mut().zip(res).zip(&chunk) {
            fold(o, r, u.as_ref());
        }
    }
}

/// ESP packets to open as one batch: a vector of packets, or the slices of
/// one buffer.
trait EspUnits {
    fn count(&self) -> usize;
    /// The bytes of ESP packets `r` (from the ESP header to the ICV), all
    /// at once (disjoint); `None` for one that is not there.
    fn iter(&mut self, r: Range<usize>) -> impl Iterator<Item = Option<&mut [u8]>>;
}

impl EspUnits for [Packet] {
    fn count(&self) -> usize {
        self.len()
    }
    fn iter(&mut self, r: Range<usize>) -> impl Iterator<Item = Option<&mut [u8]>> {
        self.get_mut(r)
            .into_iter()
            .flatten()
            .map(|p| Some(p.data_mut()))
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
    fn iter(&mut self, r: Range<usize>) -> impl Iterator<Item = Option<&mut [u8]>> {
        // Cut the buffer front to back: each range after the previous one.
        let mut rest: &mut [u8] = &mut *self.buf;
        let mut at = 0usize;
        self.esp.get(r).unwrap_or(&[]).iter().map(move |e| {
            if e.start < at || e.end < e.start || e.end - at > rest.len() {
                return None;
            }
            let tail = std::mem::take(&mut rest);
            let (_, from) = tail.split_at_mut(e.start - at);
            let (mine, after) = from.split_at_mut(e.end - e.start);
            rest = after;
            at = e.end;
            Some(mine)
        })
    }
}
