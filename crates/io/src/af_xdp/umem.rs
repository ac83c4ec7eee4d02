//! The UMEM's frames: the receive half (chains put back together, frames
//! handed back to the fill ring) and the transmit half (free list, the
//! ring slots a burst may fill, frames written as one descriptor or a
//! chain, completions reaped).

use super::chain::{self, Chain, RxArea};
use super::{AfXdpPort, FRAME_SIZE, MAX_TX_DESCS};
use crate::xdp_sys::Ring;
use rustix::net::xdp::{XdpDesc, XdpDescOptions};

/// The transmit ring slots one burst may fill: at most the free transmit
/// frames at its start (every descriptor takes one). The ring is asked for
/// one slot per packet first, and again for more when chains have used
/// those up.
pub(super) struct TxRoom {
    frames: u32,
    asked: u32,
    room: u32,
}

impl TxRoom {
    pub(super) fn new(tx: &mut Ring, frames: usize, want: u32) -> TxRoom {
        let frames = u32::try_from(frames).unwrap_or(u32::MAX);
        TxRoom {
            frames,
            asked: want,
            room: tx.free(want).min(frames),
        }
    }

    /// Whether `need` more descriptors fit behind the `slot` written.
    #[inline]
    pub(super) fn fits(&mut self, tx: &mut Ring, slot: u32, need: u32) -> bool {
        let end = slot.saturating_add(need);
        if end > self.room && self.room == self.asked {
            self.asked = end;
            self.room = tx.free(end).min(self.frames);
        }
        end <= self.room
    }
}

impl AfXdpPort {
    /// The receive half of the UMEM.
    pub(super) fn rx_area(&self) -> RxArea {
        RxArea {
            frame: FRAME_SIZE as u64,
            end: (self.umem.len() / 2) as u64,
        }
    }

    /// Takes the multi-buffer frame whose first descriptor is the `used`-th
    /// after the receive ring's consumer: copies it into `buf` (checking
    /// every descriptor, [`chain::assemble`]) and writes its frames to the
    /// fill ring from slot `filled` on. Returns (descriptors consumed,
    /// frames refilled, the frame's length or `None` if it was dropped), or
    /// `None` with nothing consumed when the chain's last descriptor is not
    /// in the ring yet.
    pub(super) fn rx_chain(
        &mut self,
        used: u32,
        filled: u32,
        buf: &mut [u8],
    ) -> Option<(u32, u32, Option<usize>)> {
        let size = self.rx.size();
        let ready = self.rx.peek_fresh(size);
        let view = ready.saturating_sub(used);
        let area = self.rx_area();
        let rx = &self.rx;
        let r = chain::assemble(|i| rx.read_desc(used + i), view, &self.umem, area, buf);
        let (descs, len) = match r {
            Chain::Frame { descs, len } => (descs, Some(len)),
            Chain::Dropped { descs, .. } => (descs, None),
            // The kernel publishes whole chains: one that fills the ring
            // without an end never gets one. Dropped, or the ring would
            // stay stuck.
            Chain::Incomplete if ready == size => (view, None),
            Chain::Incomplete => return None,
        };
        // Not reachable (the fill ring has a slot for every receive frame).
        if self.fill.free(filled + descs) < filled + descs {
            return None;
        }
        let mut refilled = 0;
        for i in 0..descs {
            let a = self.rx.read_desc(used + i).addr;
            if a < area.end {
                self.fill
                    .write_addr(filled + refilled, a & !(FRAME_SIZE as u64 - 1));
                refilled += 1;
            }
        }
        Some((descs, refilled, len))
    }

    /// Descriptors a frame of `len` bytes takes on the transmit ring, or
    /// `None` if this port cannot send it: empty, longer than a UMEM frame
    /// without multi-buffer, or than [`MAX_TX_DESCS`] frames with it.
    #[inline]
    pub(super) fn tx_need(&self, len: usize) -> Option<u32> {
        match len {
            0 => None,
            1..=FRAME_SIZE => Some(1),
            _ => match chain::tx_descs(len, FRAME_SIZE) {
                n if self.multi_buf && n <= MAX_TX_DESCS => Some(n as u32),
                _ => None,
            },
        }
    }

    /// Writes `data` to the transmit ring from `slot` on: one descriptor per
    /// UMEM frame, all but the last with XDP_PKT_CONTD (a chain when it
    /// takes several). The caller has secured the slots ([`TxRoom::fits`]);
    /// the frames are checked here before anything is written, so a part of
    /// a frame is never produced. Returns whether it was written.
    pub(super) fn write_frames(&mut self, slot: u32, data: &[u8]) -> bool {
        let need = chain::tx_descs(data.len(), FRAME_SIZE);
        let Some(first) = self.tx_free.len().checked_sub(need) else {
            return false;
        };
        let addrs = self.tx_free[first..].iter();
        for (j, (&addr, piece)) in addrs.zip(data.chunks(FRAME_SIZE)).enumerate() {
            if let Some(dst) = self.umem.bytes_mut(addr, piece.len()) {
                dst.copy_from_slice(piece);
            }
            let options = if j + 1 < need {
                XdpDescOptions::XDP_PKT_CONTD
            } else {
                XdpDescOptions::empty()
            };
            self.tx.write_desc(
                slot + j as u32,
                &XdpDesc {
                    addr,
                    len: piece.len() as u32,
                    options,
                },
            );
        }
        self.tx_free.truncate(first);
        self.stats.tx_multi += u64::from(need > 1);
        true
    }

    /// Moves completed transmit frames back to the free list.
    pub(super) fn reap(&mut self) {
        let n = self.comp.peek(self.comp.size());
        let end = self.tx_base + self.tx_free.capacity() as u64 * FRAME_SIZE as u64;
        for i in 0..n {
            let a = self.comp.read_addr(i) & !(FRAME_SIZE as u64 - 1);
            // Only our own transmit frames go back, never more than exist.
            if a >= self.tx_base && a < end && self.tx_free.len() < self.tx_free.capacity() {
                self.tx_free.push(a);
            }
        }
        self.comp.release(n);
    }
}
