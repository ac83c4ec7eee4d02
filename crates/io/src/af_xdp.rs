//! AF_XDP backend: an XSK socket per worker, its own UMEM, and a tiny XDP
//! program that redirects every received frame to the socket of the queue
//! it arrived on. For small packets: the kernel skips the skb and the
//! AF_PACKET tap on receive, which is where AF_PACKET spends its time.
//!
//! Here the port and its receive and transmit bursts; the program, map
//! and link of a netdev in `attach.rs`, the socket's setup and kick in
//! `socket.rs`, the UMEM's frames in `umem.rs`, multi-buffer chains in
//! `chain.rs`, checksum completion in `csum.rs`.
//!
//! # The XDP program and what vecgate leaves on the host
//!
//! Six hand-assembled eBPF instructions ([`crate::xdp_sys::redirect_program`]):
//! `bpf_redirect_map(xskmap, ctx->rx_queue_index, XDP_DROP)`. It is loaded
//! with `bpf(BPF_PROG_LOAD)` and attached through a BPF *link*
//! (`BPF_LINK_CREATE`), native mode first, generic (SKB) mode when the
//! driver has no native XDP. A link is detached when its last descriptor
//! closes — when the last port of the netdev is dropped, or the process
//! exits or crashes — so nothing stays behind on the host, unlike a
//! netlink-attached program (the AF_PACKET backend's ingress guard is a
//! BPF link too, [`crate::IngressGuard`]).
//!
//! Frames on a queue without a socket are dropped, not passed: vecgate owns
//! the netdev, the host stack must not answer ARP/ping or send RSTs there
//! (what [`crate::IngressGuard`] does for AF_PACKET). Redirected frames never
//! reach the stack, so no ingress guard is needed for `af_xdp`.
//!
//! # Several workers
//!
//! Worker `i` binds its socket to queue `i`; the netdev needs at least as
//! many receive queues as there are workers ([`IoError::TooFewQueues`]
//! otherwise, with the fix). All sockets of one netdev share one XSKMAP,
//! program and link: an [`Attachment`] created by the first port opened on
//! the netdev (per network namespace and ifindex) and held in an `Arc` by
//! every port; a process-wide registry of weak references lets later opens
//! (other workers, or a worker re-opening after the netdev came back) find
//! it. The last port dropped closes the link. A socket leaves the XSKMAP by
//! itself when it is closed (the kernel removes map entries pointing at a
//! released socket, and only those).
//!
//! # Memory and rings
//!
//! One UMEM per socket of `frames` 4 KiB frames: the first half circulates
//! between the fill ring, the kernel and the rx ring; the second half is
//! the transmit pool (free list → tx ring → completion ring → free list).
//! Every ring has as many slots as the frames that can be in it, so the
//! fill and completion rings never overflow. Ring indexes are read and
//! published once per burst (see [`crate::xdp_sys::Ring`]).
//!
//! Receive copies each frame into a pool packet (descriptors are checked
//! against the UMEM and the frame size first) and gives the frame straight
//! back to the fill ring. Transmit copies packets into free frames,
//! produces descriptors and kicks the kernel with `send(MSG_DONTWAIT)` when
//! the tx ring asks for a wakeup. In copy mode the kernel sends at most 32
//! descriptors per kick (`__xsk_generic_xmit`) and answers EAGAIN while
//! some remain, so the kick repeats; what is still queued after that is
//! kicked again at the next burst.
//!
//! # Frames larger than one UMEM frame (multi-buffer)
//!
//! A UMEM frame is one page, and on receive the kernel writes a frame
//! `XDP_PACKET_HEADROOM` (256) bytes into it: one receive descriptor holds
//! at most [`RX_FRAME_ROOM`] = 3840 bytes. Without multi-buffer that was
//! the limit, and measured on kernel 6.18 over veth it bit twice, silently:
//!
//! - A veth refuses a program without BPF_F_XDP_HAS_FRAGS once the peer's
//!   MTU exceeds what one page holds after the XDP headroom and the
//!   `skb_shared_info` (3506 bytes: `veth_xdp_set`, "Peer MTU is too large
//!   to set XDP", ERANGE), so at MTU 4088 or 9000 the attach fell back to
//!   generic (SKB) mode, with one info line.
//! - There, a socket bound without XDP_USE_SG drops every frame longer
//!   than 3840 bytes (`xsk_rcv_check`: `rx_dropped`, seen as RX-missed):
//!   at MTU 4088 frames of 3841..4102 bytes were lost, at MTU 9000
//!   everything over 3840 — 9000-byte pings went unanswered and TCP with
//!   its MSS of 8960 stalled. Transmit refused packets over 4096 bytes
//!   (`tx_too_big`, TX-errors).
//!
//! Now (kernel `Documentation/networking/af_xdp.rst`, "Multi-Buffer
//! Support"; Linux 6.6) the program is loaded with BPF_F_XDP_HAS_FRAGS
//! (the veth then keeps native mode up to 3506 + 17 pages of MTU) and the
//! socket is bound with XDP_USE_SG. A frame longer than one descriptor
//! holds arrives as a chain: every descriptor but the last has
//! XDP_PKT_CONTD in its options. Receive puts the chain back together in
//! one pool packet (`chain::assemble`: every descriptor checked against
//! the receive half of the UMEM and one frame, the total capped at the
//! packet buffer's [`packet::buffer::MAX_FRAME`]; a chain with a bad
//! descriptor or too long is dropped whole and counted once in `rx_bad`)
//! and gives every frame of it back to the fill ring. The kernel only
//! publishes whole chains, but a batch may end inside one: a chain is
//! taken only once its last descriptor is in the ring (a chain that fills
//! the whole ring without an end is dropped, or the ring would stay
//! stuck). Transmit splits a packet longer than a UMEM frame (4096 bytes
//! each: no headroom on transmit) over as many descriptors, all but the
//! last with XDP_PKT_CONTD, after securing every slot and frame the chain
//! needs, so a part of a packet is never submitted; each descriptor is
//! completed on its own and frees its frame. At most 18 descriptors a
//! packet (the copy mode's limit with the smallest CONFIG_MAX_SKB_FRAGS);
//! a 64 KB pool buffer takes 17. In zero-copy mode the NIC's own limit
//! applies instead (NETDEV_A_DEV_XDP_ZC_MAX_SEGS, usually 5 or more: a
//! 9000-byte frame takes 3); vecgate does not ask for it (veth has no
//! zero-copy). A frame that fits one UMEM frame is copied into a pool
//! buffer sized to it (a small one, `packet::Pool::alloc_for`); a chain
//! into a large one (its length is known only at its end).
//!
//! A kernel without it (before 6.6 the bind refuses XDP_USE_SG with
//! EINVAL; before 5.18 BPF_PROG_LOAD refuses the flag) gets the
//! single-buffer socket and program, with a warning; a port whose MTU then
//! needs frames over 3840 bytes (MTU over [`SINGLE_BUFFER_MAX_MTU`] =
//! 3826, 3822 with a VLAN tag) is refused ([`IoError::XdpMtu`], with the
//! limit and the fixes) rather than opened to lose its big frames. A
//! zero-copy driver without multi-buffer needs nothing of this: without
//! XDP_ZEROCOPY the kernel falls back to copy mode, which has it.
//!
//! # Offloads and checksums
//!
//! AF_XDP carries no GSO or checksum metadata: [`Port::offloads`] is false,
//! the graph segments super-packets and completes checksums before
//! transmit. On receive, attaching an XDP program to a veth turns GSO off
//! on its peer (`veth_fix_features`), so frames arrive at most one MTU
//! long. The peer's TCP may still leave the L4 checksum to "hardware"
//! (CHECKSUM_PARTIAL): measured on kernel 6.18, such frames are redirected
//! with the checksum field holding only the pseudo-header sum, and the
//! information that it is partial is gone. `veth_xdp_rcv_skb` turns the
//! skb into an `xdp_buff` without resolving the checksum (it never calls
//! `skb_checksum_help`), and XDP has no way to see `ip_summed`/`csum_start`
//! (the XDP rx metadata kfuncs give hash, timestamp and VLAN only;
//! BPF_F_XDP_HAS_FRAGS changes the MTU limit, not checksums). Turning the
//! peer's tx checksumming off would fix it only for hosts vecgate does not
//! own. So receive completes them: [`complete_partial_csum`] recognises a
//! TCP/UDP checksum field equal to the folded pseudo-header sum that does
//! not verify, and writes the real checksum (a frame from the wire never
//! looks like that unless it is corrupt *and* matches one 16-bit value).

use crate::netdev;
use crate::xdp_sys::{Ring, Umem};
use packet::tx_check::{self, TxLimits};
use packet::PortDrops;
use packet::{Packet, Pool, Port, Sent};
use rustix::net::sockopt;
use rustix::net::xdp::{XdpDesc, XdpDescOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

mod attach;
mod chain;
mod csum;
mod floor;
mod socket;
mod umem;
pub use attach::Attachment;
pub use csum::complete_partial_csum;
use umem::TxRoom;

/// Bytes per UMEM frame (one page; the kernel's copy mode leaves
/// XDP_PACKET_HEADROOM of it unused on receive, so one frame takes a
/// received frame of up to [`RX_FRAME_ROOM`] bytes).
pub const FRAME_SIZE: usize = 4096;
/// `XDP_PACKET_HEADROOM`: bytes the kernel keeps in front of every
/// received frame in its UMEM frame.
const XDP_PACKET_HEADROOM: usize = 256;
/// Largest frame one receive descriptor carries (3840 bytes).
pub const RX_FRAME_ROOM: usize = FRAME_SIZE - XDP_PACKET_HEADROOM;
/// Largest MTU a port serves without multi-buffer: an untagged frame of
/// [`RX_FRAME_ROOM`] bytes (3826; a VLAN-tagged frame 4 bytes less).
pub const SINGLE_BUFFER_MAX_MTU: u32 = (RX_FRAME_ROOM - 14) as u32;
/// Most descriptors one transmitted frame may take: the kernel's copy mode
/// takes up to CONFIG_MAX_SKB_FRAGS + 1 (at least 18, af_xdp.rst). A pool
/// buffer ([`packet::buffer::MAX_FRAME`]) needs 17.
const MAX_TX_DESCS: usize = 18;
/// Most frames copied per ring pass (bounds the work between index stores).
const CHUNK: u32 = 64;
/// Frames the kernel's copy-mode transmit takes per kick.
const KERNEL_TX_BATCH: u32 = 32;

/// How the XDP program is attached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpMode {
    /// Native (driver) mode, generic when the driver has none.
    #[default]
    Auto,
    /// Native mode only.
    Native,
    /// Generic (SKB) mode only: works on every netdev, slower.
    Generic,
}

/// Options of an AF_XDP port.
#[derive(Clone, Debug)]
pub struct AfXdpOpts {
    /// Receive queue to bind (the worker's index).
    pub queue: u32,
    /// Workers sharing the netdev: it needs that many receive queues.
    pub workers: u32,
    /// UMEM frames (4 KiB each), half for receive, half for transmit;
    /// rounded to a power of two in 64..=32768.
    pub frames: u32,
    /// Attach mode of the XDP program (shared by the netdev's ports: the
    /// first port opened decides).
    pub mode: XdpMode,
    /// Refuse zero-copy even where the driver offers it. By default the
    /// kernel picks zero-copy when it can and copy mode otherwise (veth).
    pub force_copy: bool,
    /// Ask for multi-buffer AF_XDP (frames longer than one UMEM frame, see
    /// the module docs); `false` opens the port as kernels before 6.6 do:
    /// frames up to [`RX_FRAME_ROOM`] bytes, MTU up to
    /// [`SINGLE_BUFFER_MAX_MTU`]. Shared by the netdev's ports like
    /// `mode` for the XDP program's part.
    pub multi_buffer: bool,
}

impl Default for AfXdpOpts {
    fn default() -> Self {
        AfXdpOpts {
            queue: 0,
            workers: 1,
            frames: 4096,
            mode: XdpMode::Auto,
            force_copy: false,
            multi_buffer: true,
        }
    }
}

/// Counters of one AF_XDP port (plain integers: one worker owns the port).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpPortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Frames dropped on receive: a descriptor outside the receive half of
    /// the UMEM or across a frame boundary, or a chain longer than a pool
    /// buffer (each dropped frame counts once, whatever its descriptors).
    pub rx_bad: u64,
    /// Received frames that took several descriptors (multi-buffer).
    pub rx_multi: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Sent frames that took several descriptors (multi-buffer).
    pub tx_multi: u64,
    /// Packets not sent: tx ring or transmit frames exhausted.
    pub tx_full: u64,
    /// Packets not sent: empty, or larger than a UMEM frame without
    /// multi-buffer (larger than 18 of them with it).
    pub tx_too_big: u64,
    /// Packets refused before the ring: they broke the transmit invariant
    /// ([`packet::tx_check`], checked in debug builds).
    pub tx_invalid: u64,
    /// Kicks the kernel refused with a non-transient error.
    pub tx_kick_errors: u64,
    /// Received TCP/UDP frames whose checksum was left partial by the
    /// sender's kernel and completed here (see the module docs).
    pub rx_csum_completed: u64,
}

/// Kernel counters (XDP_STATISTICS, cumulative) as of the last read.
#[derive(Clone, Copy, Debug, Default)]
struct KernelStats {
    rx_dropped: u64,
    rx_ring_full: u64,
    rx_invalid: u64,
    tx_invalid: u64,
}

/// One worker's AF_XDP socket on one queue of one netdev.
pub struct AfXdpPort {
    name: String,
    ifindex: i32,
    queue: u32,
    // Field order is drop order: rings and socket before the UMEM, the
    // shared attachment last.
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    fd: OwnedFd,
    /// An AF_INET socket of the same namespace, for netdev ioctls (an XSK
    /// socket answers none).
    ctl: OwnedFd,
    umem: Umem,
    /// Free transmit frames (UMEM offsets); capacity fixed at open.
    tx_free: Vec<u64>,
    /// First UMEM offset of the transmit half.
    tx_base: u64,
    mac: [u8; 6],
    mtu: u32,
    zero_copy: bool,
    /// The socket is bound with XDP_USE_SG: frames may take several
    /// descriptors, on receive and on transmit.
    multi_buf: bool,
    /// The I/O floor's buffer for multi-buffer frames (allocated at the
    /// first one, [`AfXdpPort::forward_to`]; empty in vecgate's ports).
    scratch: Vec<u8>,
    /// Descriptors were left in the tx ring after the last kick.
    tx_pending: bool,
    dead: bool,
    stats: XdpPortStats,
    reported: XdpPortStats,
    kernel: KernelStats,
    attach: Arc<Attachment>,
}

impl std::fmt::Debug for AfXdpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdpPort")
            .field("name", &self.name)
            .field("ifindex", &self.ifindex)
            .field("queue", &self.queue)
            .field("zero_copy", &self.zero_copy)
            .field("native", &self.attach.native)
            .field("multi_buffer", &self.multi_buf)
            .finish()
    }
}

impl AfXdpPort {
    /// Port counters.
    pub fn stats(&self) -> XdpPortStats {
        self.stats
    }

    /// Whether the socket runs in zero-copy mode (never on veth).
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether the XDP program runs in native (driver) mode.
    pub fn native(&self) -> bool {
        self.attach.native
    }

    /// Whether frames may take several UMEM frames (multi-buffer: the
    /// socket is bound with XDP_USE_SG).
    pub fn multi_buffer(&self) -> bool {
        self.multi_buf
    }

    /// The queue this socket is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<Packet>,
        max: usize,
    ) -> io::Result<usize> {
        if self.tx_pending {
            self.reap();
            self.kick()?;
        }
        let max = u32::try_from(max).unwrap_or(u32::MAX);
        let mut n = 0u32;
        let frame_mask = !(FRAME_SIZE as u64 - 1);
        let mut more = true;
        while n < max && more {
            let k = self.rx.peek((max - n).min(CHUNK));
            if k == 0 {
                break;
            }
            // The fill ring has a slot for every receive frame: room for
            // each one consumed here.
            let k = k.min(self.fill.free(k));
            let (mut used, mut filled) = (0, 0);
            while used < k {
                let d = self.rx.read_desc(used);
                // A buffer sized to a single-descriptor frame; a chain's
                // length is known only at its end: a large one.
                let want = if d.options == XdpDescOptions::empty() {
                    d.len as usize
                } else {
                    usize::MAX
                };
                let Some(mut pkt) = pool.alloc_for(want) else {
                    more = false;
                    break;
                };
                if d.options != XdpDescOptions::empty() {
                    // The first descriptor of a multi-buffer frame (or a
                    // malformed one): its chain may end past `k`.
                    match self.rx_chain(used, filled, pkt.rx_area()) {
                        Some((descs, refilled, len)) => {
                            used += descs;
                            filled += refilled;
                            match len {
                                Some(len) => {
                                    pkt.set_len(len);
                                    if complete_partial_csum(pkt.data_mut()) {
                                        self.stats.rx_csum_completed += 1;
                                    }
                                    self.stats.rx_packets += 1;
                                    self.stats.rx_bytes += len as u64;
                                    self.stats.rx_multi += u64::from(descs > 1);
                                    out.push(pkt);
                                    n += 1;
                                }
                                None => {
                                    self.stats.rx_bad += 1;
                                    pool.free(pkt);
                                }
                            }
                        }
                        None => {
                            // The rest of the chain is not in the ring yet.
                            pool.free(pkt);
                            more = false;
                            break;
                        }
                    }
                    continue;
                }
                used += 1;
                let len = d.len as usize;
                let in_frame = (d.addr % FRAME_SIZE as u64) as usize + len <= FRAME_SIZE;
                let ok = match self.umem.bytes(d.addr, len) {
                    Some(src) if in_frame && len <= pkt.rx_area().len() => {
                        pkt.rx_area()[..len].copy_from_slice(src);
                        pkt.set_len(len);
                        if complete_partial_csum(pkt.data_mut()) {
                            self.stats.rx_csum_completed += 1;
                        }
                        true
                    }
                    _ => false,
                };
                if (d.addr as usize) < self.umem.len() / 2 {
                    self.fill.write_addr(filled, d.addr & frame_mask);
                    filled += 1;
                }
                if ok {
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += len as u64;
                    out.push(pkt);
                    n += 1;
                } else {
                    self.stats.rx_bad += 1;
                    pool.free(pkt);
                }
            }
            // Frames copied: hand the descriptors and frames back at once.
            self.rx.release(used);
            self.fill.submit(filled);
        }
        if n > 0 && self.fill.needs_wakeup() && self.zero_copy {
            let _ = rustix::net::recv(
                &self.fd,
                &mut [0u8; 0][..],
                rustix::net::RecvFlags::DONTWAIT,
            );
        }
        Ok(n as usize)
    }

    fn tx_burst(&mut self, pkts: &mut Vec<Packet>, pool: &mut Pool) -> io::Result<Sent> {
        if tx_check::ENABLED {
            // No offloads here: plain frames within the MTU only.
            let lim = TxLimits::ethernet(self.mtu, false, false);
            let n = tx_check::refuse_invalid(pkts, pool, &lim, |fault, p| {
                tracing::error!(port = %self.name, %fault, len = p.len(), "frame breaks the transmit invariant: not sent");
            });
            self.stats.tx_invalid += n as u64;
        }
        self.reap();
        let want = u32::try_from(pkts.len()).unwrap_or(u32::MAX);
        let mut room = TxRoom::new(&mut self.tx, self.tx_free.len(), want);
        let (mut slot, mut sent) = (0u32, Sent::default());
        for p in pkts.iter() {
            let data = p.data();
            let Some(need) = self.tx_need(data.len()) else {
                self.stats.tx_too_big += 1;
                continue;
            };
            if !room.fits(&mut self.tx, slot, need) {
                self.stats.tx_full += 1;
                continue;
            }
            if need == 1 {
                let Some(addr) = self.tx_free.pop() else {
                    self.stats.tx_full += 1;
                    continue;
                };
                match self.umem.bytes_mut(addr, data.len()) {
                    Some(dst) => dst.copy_from_slice(data),
                    None => {
                        // Not reachable: free frames are all inside the UMEM.
                        self.stats.tx_full += 1;
                        continue;
                    }
                }
                self.tx.write_desc(
                    slot,
                    &XdpDesc {
                        addr,
                        len: data.len() as u32,
                        options: XdpDescOptions::empty(),
                    },
                );
            } else if !self.write_frames(slot, data) {
                self.stats.tx_full += 1; // not reachable (room <= frames)
                continue;
            }
            slot += need;
            sent.add(data.len());
        }
        self.tx.submit(slot);
        self.stats.tx_packets += sent.packets as u64;
        self.stats.tx_bytes += sent.bytes;
        pool.free_all(pkts);
        if slot > 0 || self.tx_pending {
            self.kick()?;
        }
        Ok(sent)
    }

    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn mtu(&self) -> u32 {
        self.mtu
    }

    fn offloads(&self) -> bool {
        false
    }

    fn is_alive(&self) -> bool {
        !self.dead
            && netdev::ifindex_on(self.ctl.as_raw_fd(), &self.name).ok() == Some(self.ifindex)
    }

    /// XDP_STATISTICS (cumulative in the kernel: reported as differences)
    /// plus the port's own counters. The kernel's `rx_dropped` (fill ring
    /// empty, or a frame larger than a UMEM frame) counts as ring-full: the
    /// worker did not hand frames back fast enough.
    fn take_drops(&mut self) -> PortDrops {
        let k = match sockopt::xdp_statistics(&self.fd) {
            Ok(s) => KernelStats {
                rx_dropped: s.rx_dropped,
                rx_ring_full: s.rx_ring_full.unwrap_or(0),
                rx_invalid: s.rx_invalid_descs,
                tx_invalid: s.tx_invalid_descs,
            },
            Err(_) => self.kernel,
        };
        let p = self.kernel;
        self.kernel = k;
        let (s, r) = (self.stats, self.reported);
        self.reported = s;
        PortDrops {
            rx_ring_full: k.rx_dropped.wrapping_sub(p.rx_dropped)
                + k.rx_ring_full.wrapping_sub(p.rx_ring_full),
            rx_bad: k.rx_invalid.wrapping_sub(p.rx_invalid) + s.rx_bad.wrapping_sub(r.rx_bad),
            tx_rejected: k.tx_invalid.wrapping_sub(p.tx_invalid)
                + (s.tx_too_big + s.tx_invalid).wrapping_sub(r.tx_too_big + r.tx_invalid),
            tx_full: s.tx_full.wrapping_sub(r.tx_full),
        }
    }
}
