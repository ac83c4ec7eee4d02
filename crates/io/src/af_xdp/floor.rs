//! The I/O floor's forward over AF_XDP ([`crate::floor`]): one UMEM-to-UMEM
//! write per frame, nothing else, to measure vecgate against.

use super::{complete_partial_csum, AfXdpPort, TxRoom, CHUNK, FRAME_SIZE};
use rustix::net::xdp::{XdpDesc, XdpDescOptions};
use std::io;

/// Bytes in front of a multi-buffer frame in the scratch buffer: room for
/// the header `head` puts in front.
const SCRATCH_HEAD: usize = 64;

impl AfXdpPort {
    /// The I/O floor's forward ([`crate::floor`]): up to `max` received
    /// frames are written once, straight from this socket's UMEM into free
    /// transmit frames of `to`'s, and transmitted; the receive frames go
    /// back to the fill ring at once. `head(frame, buf)` puts the header to
    /// send in front into `buf` and returns (its length, how many bytes of
    /// the frame it replaces), or None to drop the frame. A checksum the
    /// sender left partial is completed, as [`Port::rx_burst`] does.
    /// A multi-buffer frame (a descriptor chain) is put together in a
    /// scratch buffer first, and sent as a chain: two copies, as vecgate
    /// makes of every frame. Returns the descriptors taken from the receive
    /// ring.
    pub fn forward_to(
        &mut self,
        to: &mut AfXdpPort,
        max: u32,
        mut head: impl FnMut(&[u8], &mut [u8; 64]) -> Option<(usize, usize)>,
    ) -> io::Result<usize> {
        to.reap();
        let k = self.rx.peek(max.min(CHUNK));
        if k == 0 {
            if to.tx_pending {
                to.kick()?;
            }
            return Ok(0);
        }
        let k = k.min(self.fill.free(k));
        let mut room = TxRoom::new(&mut to.tx, to.tx_free.len(), k);
        let frame_mask = !(FRAME_SIZE as u64 - 1);
        let (mut filled, mut slot, mut sent, mut i) = (0u32, 0u32, 0u32, 0u32);
        while i < k {
            let d = self.rx.read_desc(i);
            if d.options != XdpDescOptions::empty() {
                // A multi-buffer frame: its chain may end past `k`.
                if self.scratch.is_empty() && self.multi_buf {
                    self.scratch = vec![0; SCRATCH_HEAD + packet::buffer::MAX_FRAME];
                }
                let mut buf = std::mem::take(&mut self.scratch);
                let r = self.rx_chain(i, filled, buf.get_mut(SCRATCH_HEAD..).unwrap_or_default());
                let Some((descs, refilled, len)) = r else {
                    self.scratch = buf;
                    break; // the rest of the chain is not in the ring yet
                };
                i += descs;
                filled += refilled;
                match len {
                    None => self.stats.rx_bad += 1,
                    Some(len) => {
                        self.stats.rx_packets += 1;
                        self.stats.rx_bytes += len as u64;
                        self.stats.rx_multi += 1;
                        let mut h = [0u8; 64];
                        let frame = &buf[SCRATCH_HEAD..SCRATCH_HEAD + len];
                        match head(frame, &mut h) {
                            Some((hl, skip)) if skip <= len && hl <= SCRATCH_HEAD => {
                                // The header goes right in front of what it
                                // keeps of the frame: one contiguous frame.
                                let start = SCRATCH_HEAD + skip - hl;
                                buf[start..start + hl].copy_from_slice(&h[..hl]);
                                let out = &mut buf[start..SCRATCH_HEAD + len];
                                if complete_partial_csum(out) {
                                    self.stats.rx_csum_completed += 1;
                                }
                                match to.tx_need(out.len()) {
                                    Some(need) if room.fits(&mut to.tx, slot, need) => {
                                        to.write_frames(slot, out);
                                        slot += need;
                                        sent += 1;
                                        to.stats.tx_bytes += out.len() as u64;
                                    }
                                    Some(_) => to.stats.tx_full += 1,
                                    None => to.stats.tx_too_big += 1,
                                }
                            }
                            _ => to.stats.tx_too_big += 1,
                        }
                    }
                }
                self.scratch = buf;
                continue;
            }
            i += 1;
            let len = d.len as usize;
            let in_frame = (d.addr % FRAME_SIZE as u64) as usize + len <= FRAME_SIZE;
            let src = self.umem.bytes(d.addr, len).filter(|_| in_frame);
            match src {
                None => self.stats.rx_bad += 1,
                Some(src) => {
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += len as u64;
                    let mut h = [0u8; 64];
                    match head(src, &mut h) {
                        Some((hl, skip)) if skip <= len && hl <= h.len() => {
                            let out_len = hl + len - skip;
                            let addr = if out_len <= FRAME_SIZE && room.fits(&mut to.tx, slot, 1) {
                                to.tx_free.pop()
                            } else {
                                None
                            };
                            match addr.and_then(|a| Some((a, to.umem.bytes_mut(a, out_len)?))) {
                                Some((addr, dst)) => {
                                    dst[..hl].copy_from_slice(&h[..hl]);
                                    dst[hl..].copy_from_slice(&src[skip..]);
                                    if complete_partial_csum(dst) {
                                        self.stats.rx_csum_completed += 1;
                                    }
                                    to.tx.write_desc(
                                        slot,
                                        &XdpDesc {
                                            addr,
                                            len: out_len as u32,
                                            options: XdpDescOptions::empty(),
                                        },
                                    );
                                    slot += 1;
                                    sent += 1;
                                    to.stats.tx_bytes += out_len as u64;
                                }
                                None => to.stats.tx_full += 1,
                            }
                        }
                        _ => to.stats.tx_too_big += 1,
                    }
                }
            }
            if (d.addr as usize) < self.umem.len() / 2 {
                self.fill.write_addr(filled, d.addr & frame_mask);
                filled += 1;
            }
        }
        self.rx.release(i);
        self.fill.submit(filled);
        to.tx.submit(slot);
        to.stats.tx_packets += u64::from(sent);
        if slot > 0 || to.tx_pending {
            to.kick()?;
        }
        if self.fill.needs_wakeup() && self.zero_copy {
            let _ = rustix::net::recv(
                &self.fd,
                &mut [0u8; 0][..],
                rustix::net::RecvFlags::DONTWAIT,
            );
        }
        Ok(i as usize)
    }
}
