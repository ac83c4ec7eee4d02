//! The I/O floor's forward over AF_XDP ([`crate::floor`]): one UMEM-to-UMEM
//! write per frame, nothing else, to measure vecgate against.

use super::{complete_partial_csum, AfXdpPort, CHUNK, FRAME_SIZE};
use rustix::net::xdp::{XdpDesc, XdpDescOptions};
use std::io;

impl AfXdpPort {
    /// The I/O floor's forward ([`crate::floor`]): up to `max` received
    /// frames are written once, straight from this socket's UMEM into free
    /// transmit frames of `to`'s, and transmitted; the receive frames go
    /// back to the fill ring at once. `head(frame, buf)` puts the header to
    /// send in front into `buf` and returns (its length, how many bytes of
    /// the frame it replaces), or None to drop the frame. A checksum the
    /// sender left partial is completed, as [`Port::rx_burst`] does.
    /// Returns the frames taken from the receive ring.
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
        let room = to.tx.free(k).min(to.tx_free.len() as u32);
        let frame_mask = !(FRAME_SIZE as u64 - 1);
        let (mut filled, mut slot) = (0u32, 0u32);
        for i in 0..k {
            let d = self.rx.read_desc(i);
            let len = d.len as usize;
            let in_frame = (d.addr % FRAME_SIZE as u64) as usize + len <= FRAME_SIZE;
            let src = self
                .umem
                .bytes(d.addr, len)
                .filter(|_| in_frame && d.options == XdpDescOptions::empty());
            match src {
                None => self.stats.rx_bad += 1,
                Some(src) => {
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += len as u64;
                    let mut h = [0u8; 64];
                    match head(src, &mut h) {
                        Some((hl, skip)) if skip <= len && hl <= h.len() => {
                            let out_len = hl + len - skip;
                            let addr = if slot < room && out_len <= FRAME_SIZE {
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
        self.rx.release(k);
        self.fill.submit(filled);
        to.tx.submit(slot);
        to.stats.tx_packets += u64::from(slot);
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
        Ok(k as usize)
    }
}
