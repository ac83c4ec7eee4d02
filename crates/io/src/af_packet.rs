//! AF_PACKET backend: a TPACKET_V2 mmap ring for receive, `sendmmsg` for
//! transmit, virtio-net headers in both directions so 64 KB TCP/UDP
//! super-packets cross the kernel boundary unsegmented.
//!
//! Receive: the ring's slots are sized to the netdev's MTU (2 KiB for
//! 1500), so a ring of a few MiB holds thousands of wire-sized frames and
//! absorbs the bursts a peer's segmentation makes (a 64 KB super-packet
//! sent over a 1500-byte link is 45 frames at once). A frame larger than
//! its slot — a GSO super-packet, or a frame over the MTU — is not cut: with
//! PACKET_COPY_THRESH the kernel marks the slot TP_STATUS_COPY and queues
//! the whole skb on the socket (net/packet/af_packet.c `tpacket_rcv`), and
//! `rx_burst` reads it with one `recvmsg` straight into a pool buffer: the
//! kernel writes a super-packet once, where a 64 KB ring slot would cost a
//! copy into the ring and another out of it. The kernel wakes the worker
//! for every frame and `rx_burst` drains every slot that is ready (a burst
//! when busy), copying each wire-sized frame into a pool buffer sized to it
//! (a small one, `packet::Pool::alloc_for`) and handing the slot back at
//! once. TPACKET_V3 was tried first: it hands
//! over whole blocks only when full or after a retire timeout of at least
//! 1 ms, which delayed small packets (TCP ACKs) by up to that much at every
//! hop. With PACKET_VNET_HDR the kernel writes the 10-byte `virtio_net_hdr`
//! directly in front of the frame (`tp_mac - 10`) inside the ring (`netoff
//! += vnet_hdr_sz`, header at `h.raw + macoff - sz`), and in front of the
//! data `recvmsg` returns.
//!
//! Transmit: `sendmmsg` with one iovec per packet, the virtio-net header
//! written into the packet's headroom in front of the frame (two iovecs,
//! header and frame, only for a packet without that room), up to
//! [`sys::MMSG_BATCH`] packets per syscall. A TX ring (TPACKET_V2) would need
//! 64 KB+ frames and builds the skb from ring pages, which is limited to
//! MAX_SKB_FRAGS pages — a 64 KB frame does not always fit; `sendmmsg` copies
//! once and has no such limit.
//!
//! Worker spreading: every worker opens its own socket on the same netdev and
//! all of them join one PACKET_FANOUT group in HASH mode (flow hash, as RSS)
//! with FLAG_DEFRAG so fragments of one datagram reach the same worker.

use crate::error::IoError;
use crate::netdev;
use crate::sys;
use crate::vnet::{self, VNET_HDR_LEN};
use packet::tx_check::{self, TxLimits};
use packet::PortDrops;
use packet::{Offload, Packet, Pool, Port, Sent};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// Options of an AF_PACKET port.
#[derive(Clone, Debug)]
pub struct AfPacketOpts {
    /// PACKET_FANOUT group shared by all workers' sockets on the netdev.
    pub fanout: Option<u16>,
    /// Exchange virtio-net headers (GSO super-packets, checksum offload).
    pub vnet_hdr: bool,
    /// Transmit straight to the driver, skipping the qdisc layer.
    pub qdisc_bypass: bool,
    /// Receive frames for every MAC address (vecgate answers for its own).
    pub promisc: bool,
    /// Receive ring slots, rounded up to whole blocks; 0: as many as fill
    /// [`RING_BYTES`] (4096 slots of 2 KiB for a 1500-byte MTU). A GRE
    /// flow over a 1500-byte underlay lost 9 % of its frames to a full ring
    /// of 510 slots (`rx_missed`), none with 2040.
    pub frames: u32,
    /// Bytes per ring slot (header, virtio-net header and frame); 0: sized
    /// to the netdev's MTU ([`slot_size_for_mtu`]). Larger frames take the
    /// copy path (see the module doc); [`SLOT_MAX`] holds any 64 KB frame in
    /// its slot, for a reader that uses the ring in place (the I/O floor).
    pub slot_size: usize,
    /// Socket receive buffer: what the frames larger than a slot may hold
    /// in the socket's queue before the kernel drops them.
    pub rcvbuf: usize,
    /// Socket send buffer (bytes in flight in the kernel before EAGAIN).
    pub sndbuf: usize,
}

impl Default for AfPacketOpts {
    fn default() -> Self {
        AfPacketOpts {
            fanout: None,
            vnet_hdr: true,
            qdisc_bypass: true,
            promisc: true,
            frames: 0,
            slot_size: 0,
            rcvbuf: 32 << 20,
            sndbuf: 4 << 20,
        }
    }
}

/// Counters of one port (plain integers: one worker owns the port).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Frames dropped because the kernel truncated them or the ring
    /// descriptors were inconsistent.
    pub rx_bad: u64,
    /// Frames with a virtio-net header vecgate cannot represent (UFO...).
    pub rx_bad_vnet: u64,
    /// Frames larger than their ring slot that the kernel could not queue
    /// whole (socket receive buffer full): lost, as a full ring loses.
    pub rx_copy_full: u64,
    /// Frames that took the copy path (larger than a ring slot).
    pub rx_copied: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Packets the kernel did not take (socket buffer full, device busy).
    pub tx_dropped: u64,
    /// Packets the kernel rejected as malformed (EINVAL, EMSGSIZE).
    pub tx_rejected: u64,
    /// Packets refused before the kernel saw them: they broke the transmit
    /// invariant ([`packet::tx_check`], checked in debug builds).
    pub tx_invalid: u64,
}

// Offsets in `struct tpacket2_hdr`.
const H_STATUS: usize = 0;
const H_LEN: usize = 4;
const H_SNAPLEN: usize = 8;
const H_MAC: usize = 12;
const H_VLAN_TCI: usize = 24;
const H_VLAN_TPID: usize = 26;
/// TPACKET2_HDRLEN: the aligned header plus the `sockaddr_ll` after it.
const H_SIZE: usize = 32 + 20;
/// Bytes of a slot in front of the frame: the header, padding to the
/// frame's alignment and the virtio-net header (`tpacket_rcv`: netoff =
/// TPACKET_ALIGN(tp_hdrlen + 16) + vnet header, mac = netoff - 14).
const SLOT_OVERHEAD: usize = 96;
/// The largest slot: a 64 KB GSO frame, its virtio-net header and the
/// tpacket2 header, rounded to whole pages (17 pages).
pub const SLOT_MAX: usize = 17 * 4096;
/// The largest slot sized from an MTU: larger frames take the copy path
/// (one `recvmsg` per frame is cheap next to copying 16 KB or more).
const SLOT_MTU_MAX: usize = 16 * 1024;
/// Ring memory per socket when the slot count is not given.
pub const RING_BYTES: usize = 8 << 20;
/// One ring block: the kernel allocates each block as one power-of-two run
/// of pages (net/packet/af_packet.c `alloc_pg_vec`, order = get_order(block
/// size)), so a block of one 17-page frame would cost 32 pages. 256 pages
/// hold 15 such frames with one page to spare, or 512 slots of 2 KiB.
const BLOCK_SIZE: usize = 256 * 4096;

/// Ring slot size for a netdev of `mtu`: the smallest power of two from
/// 2 KiB that holds a frame of the MTU with two VLAN tags behind the
/// slot's header, at most 16 KiB.
pub fn slot_size_for_mtu(mtu: u32) -> usize {
    let need = SLOT_OVERHEAD + 14 + 8 + mtu as usize;
    need.next_power_of_two().clamp(2048, SLOT_MTU_MAX)
}

/// Ring geometry: slot size and how many slots a block holds.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    slot: usize,
    per_block: usize,
}

impl Geometry {
    /// Ring offset of slot `i` (frames never straddle blocks: kernel
    /// `packet_lookup_frame`).
    #[inline]
    fn offset(self, i: usize) -> usize {
        i / self.per_block * BLOCK_SIZE + i % self.per_block * self.slot
    }
}

/// One worker's AF_PACKET socket on one netdev.
pub struct AfPacketPort {
    name: String,
    ifindex: i32,
    fd: OwnedFd,
    ring: sys::Mmap,
    geo: Geometry,
    frame_nr: usize,
    /// Next ring slot to look at.
    slot: usize,
    mac: [u8; 6],
    mtu: u32,
    vnet_hdr: bool,
    qdisc_bypass: bool,
    udp_gso: bool,
    dead: bool,
    stats: PortStats,
    /// `stats` as of the last [`Port::take_drops`].
    reported: PortStats,
}

impl std::fmt::Debug for AfPacketPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfPacketPort")
            .field("name", &self.name)
            .field("ifindex", &self.ifindex)
            .field("vnet_hdr", &self.vnet_hdr)
            .field("udp_gso", &self.udp_gso)
            .finish()
    }
}

impl AfPacketPort {
    /// Opens a socket on `ifname` (in the calling thread's network namespace).
    pub fn open(ifname: &str, opts: AfPacketOpts) -> Result<Self, IoError> {
        let ifindex = netdev::ifindex(ifname)?;
        let mac = netdev::mac(ifname)?;
        let mtu = netdev::mtu(ifname)?;
        let err = |op: &'static str| move |e: io::Error| IoError::sys(op, ifname, e);

        // Protocol 0: nothing is queued before the ring and the bind exist.
        let fd = sys::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => IoError::PermissionDenied {
                what: format!("AF_PACKET socket for '{ifname}'"),
            },
            _ => IoError::Sys {
                op: "socket(AF_PACKET)",
                source: e,
            },
        })?;
        // TPACKET_V2: the kernel wakes the reader for every frame. (V3
        // hands over whole blocks, only when one is full or its retire timer
        // fires — a millisecond of latency per hop that throttled every TCP
        // flow's ACK clock.)
        sys::setsockopt(&fd, sys::SOL_PACKET, sys::PACKET_VERSION, &sys::TPACKET_V2)
            .map_err(err("PACKET_VERSION"))?;
        if opts.vnet_hdr {
            // Must precede the ring setup (EBUSY afterwards).
            sys::setsockopt(&fd, sys::SOL_PACKET, sys::PACKET_VNET_HDR, &1i32)
                .map_err(err("PACKET_VNET_HDR"))?;
        }
        // Whole blocks only: the kernel wants frame_nr = blocks × frames
        // per block.
        let slot = match opts.slot_size {
            0 => slot_size_for_mtu(mtu),
            n => n.clamp(2048, SLOT_MAX).next_multiple_of(16),
        };
        let geo = Geometry {
            slot,
            per_block: BLOCK_SIZE / slot,
        };
        let frames = match opts.frames {
            0 => RING_BYTES / slot,
            n => n as usize,
        };
        let block_nr = frames.clamp(8, 16384).div_ceil(geo.per_block);
        let frame_nr = (block_nr * geo.per_block) as u32;
        let req = sys::TpacketReq3 {
            block_size: BLOCK_SIZE as u32,
            block_nr: block_nr as u32,
            frame_size: slot as u32,
            frame_nr,
            retire_blk_tov: 0,
            sizeof_priv: 0,
            feature_req_word: 0,
        };
        sys::setsockopt(&fd, sys::SOL_PACKET, sys::PACKET_RX_RING, &req)
            .map_err(err("PACKET_RX_RING"))?;
        let ring = sys::Mmap::ring(&fd, BLOCK_SIZE * block_nr).map_err(err("mmap rx ring"))?;
        // Frames larger than a slot are queued whole on the socket (any
        // non-zero value turns that on), up to the receive buffer.
        sys::setsockopt(&fd, sys::SOL_PACKET, sys::PACKET_COPY_THRESH, &1i32)
            .map_err(err("PACKET_COPY_THRESH"))?;
        let rcvbuf = opts.rcvbuf.min(i32::MAX as usize) as i32;
        if sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &rcvbuf).is_err() {
            sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &rcvbuf)
                .map_err(err("SO_RCVBUF"))?;
        }
        sys::bind_packet(&fd, ifindex, sys::ETH_P_ALL).map_err(err("bind"))?;
        if opts.promisc {
            sys::add_promisc_membership(&fd, ifindex).map_err(err("PACKET_MR_PROMISC"))?;
        }
        sys::setsockopt(&fd, sys::SOL_PACKET, sys::PACKET_IGNORE_OUTGOING, &1i32)
            .map_err(err("PACKET_IGNORE_OUTGOING"))?;
        if opts.qdisc_bypass {
            sys::setsockopt(&fd, sys::SOL_PACKET, sys::PACKET_QDISC_BYPASS, &1i32)
                .map_err(err("PACKET_QDISC_BYPASS"))?;
        }
        let sndbuf = opts.sndbuf.min(i32::MAX as usize) as i32;
        if sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &sndbuf).is_err() {
            sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &sndbuf)
                .map_err(err("SO_SNDBUF"))?;
        }
        if let Some(group) = opts.fanout {
            let arg: u32 = u32::from(group)
                | ((sys::PACKET_FANOUT_HASH | sys::PACKET_FANOUT_FLAG_DEFRAG) << 16);
            sys::setsockopt(&fd, sys::SOL_PACKET, sys::PACKET_FANOUT, &arg)
                .map_err(err("PACKET_FANOUT"))?;
        }
        Ok(AfPacketPort {
            name: ifname.to_string(),
            ifindex,
            fd,
            ring,
            geo,
            frame_nr: frame_nr as usize,
            slot: 0,
            mac,
            mtu,
            vnet_hdr: opts.vnet_hdr,
            // Without the qdisc bypass the kernel segments what the netdev
            // cannot; with it, only what the netdev takes may be sent.
            udp_gso: opts.vnet_hdr
                && (!opts.qdisc_bypass || crate::netdev::udp_segmentation(ifname).unwrap_or(false)),
            qdisc_bypass: opts.qdisc_bypass,
            dead: false,
            stats: PortStats::default(),
            reported: PortStats::default(),
        })
    }

    /// Interface index the socket is bound to.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// Port counters.
    pub fn stats(&self) -> PortStats {
        self.stats
    }

    /// Kernel-side counters since the last call (PACKET_STATISTICS):
    /// (packets, drops) — drops are frames lost because the ring was full.
    /// The kernel resets them on every read, and [`Port::take_drops`] reads
    /// them too: call one or the other on a port, not both.
    pub fn kernel_stats(&self) -> io::Result<(u32, u32)> {
        let s: sys::TpacketStats =
            sys::getsockopt(self.fd.as_raw_fd(), sys::SOL_PACKET, sys::PACKET_STATISTICS)?;
        Ok((s.packets, s.drops))
    }

    /// Link state of the netdev now (asked in the socket's namespace).
    pub fn link_state(&self) -> Result<netdev::LinkState, IoError> {
        netdev::link_state_on(self.fd.as_raw_fd(), &self.name)
    }

    /// Whether the netdev this socket is bound to still exists (same name,
    /// same ifindex, in the socket's namespace) and no send reported it
    /// gone. When false, the worker drops the port and re-opens it once the
    /// netdev is back. A syscall: call it on POLLERR or after an error, not
    /// per burst.
    pub fn is_alive(&self) -> bool {
        !self.dead && netdev::ifindex_on(self.fd.as_raw_fd(), &self.name).ok() == Some(self.ifindex)
    }

    /// Takes the socket's pending error (SO_ERROR), if any: the kernel sets
    /// ENETDOWN when the netdev goes down or is unregistered, and poll()
    /// then reports POLLERR on [`Port::poll_fd`] until it is taken.
    pub fn take_error(&self) -> Option<io::Error> {
        match sys::getsockopt::<i32>(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ERROR) {
            Ok(0) => None,
            Ok(e) => Some(io::Error::from_raw_os_error(e)),
            Err(e) => Some(e),
        }
    }

    /// Frames ready in the receive ring from the next slot on, at most
    /// `max`: the I/O floor ([`crate::floor`]) reads them where they lie
    /// with [`Self::ring_frame`] and hands the slots back with
    /// [`Self::ring_release`], never copying them out.
    pub fn ring_ready(&self, max: usize) -> usize {
        let mut n = 0;
        while n < max.min(self.frame_nr) {
            let h = self.geo.offset((self.slot + n) % self.frame_nr);
            if self.ring.load_status(h + H_STATUS) & sys::TP_STATUS_USER == 0 {
                break;
            }
            n += 1;
        }
        n
    }

    /// The `i`-th ready frame (`i` < [`Self::ring_ready`]): its virtio-net
    /// header (zeros without vnet headers) and its bytes in the ring slot.
    /// None for a descriptor the kernel left inconsistent or a frame whose
    /// VLAN tag was taken out (the floor does not put tags back).
    pub fn ring_frame(&self, i: usize) -> Option<([u8; VNET_HDR_LEN], &[u8])> {
        let h = self.geo.offset((self.slot + i) % self.frame_nr);
        let r = &self.ring;
        let status = r.load_status(h + H_STATUS);
        let snaplen = r.u32_at(h + H_SNAPLEN)? as usize;
        let len = r.u32_at(h + H_LEN)? as usize;
        let mac = r.u16_at(h + H_MAC)? as usize;
        let hdr_len = if self.vnet_hdr { VNET_HDR_LEN } else { 0 };
        if status & sys::TP_STATUS_USER == 0
            || status & sys::TP_STATUS_VLAN_VALID != 0
            || snaplen != len
            || mac < H_SIZE + hdr_len
            || mac + snaplen > self.geo.slot
        {
            return None;
        }
        let mut vnet = [0u8; VNET_HDR_LEN];
        if self.vnet_hdr {
            vnet.copy_from_slice(r.bytes(h + mac - VNET_HDR_LEN, VNET_HDR_LEN)?);
        }
        Some((vnet, r.bytes(h + mac, snaplen)?))
    }

    /// Hands the next `n` ring slots back to the kernel (after every read
    /// of them), counting them as received.
    pub fn ring_release(&mut self, n: usize) {
        for _ in 0..n.min(self.frame_nr) {
            let h = self.geo.offset(self.slot);
            if let Some(len) = self.ring.u32_at(h + H_SNAPLEN) {
                self.stats.rx_bytes += u64::from(len);
            }
            self.stats.rx_packets += 1;
            self.ring.store_status(h + H_STATUS, sys::TP_STATUS_KERNEL);
            self.slot = (self.slot + 1) % self.frame_nr;
        }
    }

    /// Sends each entry of `msgs` (virtio-net header, header to prepend,
    /// frame) as one packet, [`sys::MMSG_BATCH`] per syscall; what the
    /// kernel does not take at once is dropped and counted, as
    /// [`Port::tx_burst`] does. Returns how many were sent.
    pub fn send_iov3(&mut self, msgs: &[[&[u8]; 3]]) -> io::Result<usize> {
        let mut j = 0;
        let mut result = Ok(());
        while j < msgs.len() {
            let end = msgs.len().min(j + sys::MMSG_BATCH);
            match sys::sendmmsg_iov3(self.fd.as_raw_fd(), &msgs[j..end]) {
                Ok(0) => break,
                Ok(k) => {
                    for m in &msgs[j..j + k] {
                        self.stats.tx_bytes += (m[1].len() + m[2].len()) as u64;
                    }
                    self.stats.tx_packets += k as u64;
                    j += k;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.stats.tx_dropped += 1;
                    j += 1;
                }
                Err(e) if crate::error::is_device_gone(&e) => {
                    result = Err(e);
                    break;
                }
                Err(_) => {
                    self.stats.tx_rejected += 1;
                    j += 1;
                }
            }
        }
        self.stats.tx_dropped += (msgs.len() - j) as u64;
        result.map(|()| j)
    }

    /// Takes the packets that break the transmit invariant out of `pkts`,
    /// counted and logged (the first few) instead of handed to a kernel
    /// that would drop them, or send what the graph did not count.
    fn refuse_invalid(&mut self, pkts: &mut Vec<Packet>, pool: &mut Pool) {
        let lim = TxLimits::ethernet(self.mtu, self.vnet_hdr, self.udp_gso);
        let (name, mut seen) = (&self.name, self.stats.tx_invalid);
        let n = tx_check::refuse_invalid(pkts, pool, &lim, |fault, p| {
            seen += 1;
            if seen <= 16 {
                tracing::error!(
                    port = %name,
                    %fault,
                    len = p.len(),
                    offload = ?p.meta.offload,
                    "frame breaks the transmit invariant: not sent"
                );
            }
        });
        self.stats.tx_invalid += n as u64;
    }

    /// Whether the socket exchanges virtio-net headers.
    pub fn vnet_hdr(&self) -> bool {
        self.vnet_hdr
    }

    /// The VLAN tag the kernel took out of the frame at slot `h` (offload),
    /// reported beside it: (TPID, TCI).
    fn vlan_of(&self, h: usize, status: u32) -> Result<Option<(u16, u16)>, RxError> {
        if status & sys::TP_STATUS_VLAN_VALID == 0 {
            return Ok(None);
        }
        let tci = self.ring.u16_at(h + H_VLAN_TCI).ok_or(RxError::Desc)?;
        let tpid = if status & sys::TP_STATUS_VLAN_TPID_VALID != 0 {
            self.ring.u16_at(h + H_VLAN_TPID).ok_or(RxError::Desc)?
        } else {
            0x8100
        };
        Ok(Some((tpid, tci)))
    }

    /// The virtio-net header as offload state (none without vnet headers),
    /// its offsets moved behind a reinserted VLAN tag.
    fn offload_of(&self, hdr: &[u8; VNET_HDR_LEN], vlan: bool) -> Result<Offload, RxError> {
        if !self.vnet_hdr {
            return Ok(Offload::default());
        }
        let mut off = vnet::decode(hdr).map_err(|_| RxError::Vnet)?;
        if vlan {
            if off.needs_csum {
                off.csum_start = off.csum_start.saturating_add(4);
            }
            if off.hdr_len != 0 {
                off.hdr_len = off.hdr_len.saturating_add(4);
            }
        }
        Ok(off)
    }

    /// Copies the frame held in the slot at `h` (absolute ring offset) into
    /// `pkt`, putting back a VLAN tag taken out by offload so the graph sees
    /// the frame as it was on the wire.
    fn copy_frame(&self, h: usize, status: u32, pkt: &mut Packet) -> Result<(), RxError> {
        let r = &self.ring;
        let snaplen = r.u32_at(h + H_SNAPLEN).ok_or(RxError::Desc)? as usize;
        let len = r.u32_at(h + H_LEN).ok_or(RxError::Desc)? as usize;
        let mac = r.u16_at(h + H_MAC).ok_or(RxError::Desc)? as usize;
        let hdr_len = if self.vnet_hdr { VNET_HDR_LEN } else { 0 };
        if snaplen != len || mac < H_SIZE + hdr_len || mac + snaplen > self.geo.slot {
            // Cut to the slot without being queued whole: the socket's
            // receive buffer was full.
            return Err(if snaplen < len && mac + snaplen <= self.geo.slot {
                RxError::CopyFull
            } else {
                RxError::Desc
            });
        }
        let start = h + mac;
        let mut hdr = [0u8; VNET_HDR_LEN];
        if self.vnet_hdr {
            hdr.copy_from_slice(
                r.bytes(start - VNET_HDR_LEN, VNET_HDR_LEN)
                    .ok_or(RxError::Desc)?,
            );
        }
        let frame = r.bytes(start, snaplen).ok_or(RxError::Desc)?;
        let vlan = if snaplen >= 12 {
            self.vlan_of(h, status)?
        } else {
            None
        };
        let off = self.offload_of(&hdr, vlan.is_some())?;
        let area = pkt.rx_area();
        let extra = if vlan.is_some() { 4 } else { 0 };
        if snaplen + extra > area.len() {
            return Err(RxError::Desc);
        }
        match vlan {
            None => area[..snaplen].copy_from_slice(frame),
            Some((tpid, tci)) => {
                area[..12].copy_from_slice(&frame[..12]);
                area[12..14].copy_from_slice(&tpid.to_be_bytes());
                area[14..16].copy_from_slice(&tci.to_be_bytes());
                area[16..snaplen + 4].copy_from_slice(&frame[12..]);
            }
        }
        pkt.set_len(snaplen + extra);
        pkt.meta.offload = off;
        Ok(())
    }

    /// Reads the frame of the TP_STATUS_COPY slot at `h`, queued whole on
    /// the socket, straight into `pkt` (one copy, by the kernel).
    fn recv_frame(&mut self, h: usize, status: u32, pkt: &mut Packet) -> Result<(), RxError> {
        let vlan = self.vlan_of(h, status)?;
        let extra = if vlan.is_some() { 4 } else { 0 };
        let hdr_len = if self.vnet_hdr { VNET_HDR_LEN } else { 0 };
        let mut hdr = [0u8; VNET_HDR_LEN];
        let area = pkt.rx_area();
        if area.len() < extra + 14 {
            return Err(RxError::Desc);
        }
        let room = area.len() - extra;
        let n = sys::recv_trunc2(self.fd.as_raw_fd(), &mut hdr[..hdr_len], &mut area[extra..])
            .map_err(|_| RxError::Desc)?;
        let flen = n.checked_sub(hdr_len).ok_or(RxError::Desc)?;
        if flen > room || flen < 14 {
            return Err(RxError::Desc);
        }
        if let Some((tpid, tci)) = vlan {
            area.copy_within(4..16, 0);
            area[12..14].copy_from_slice(&tpid.to_be_bytes());
            area[14..16].copy_from_slice(&tci.to_be_bytes());
        }
        let off = self.offload_of(&hdr, vlan.is_some())?;
        pkt.set_len(flen + extra);
        pkt.meta.offload = off;
        self.stats.rx_copied += 1;
        Ok(())
    }
}

/// Why a received frame was not handed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RxError {
    /// Inconsistent descriptor, or a frame larger than a buffer.
    Desc,
    /// A virtio-net header vecgate cannot represent.
    Vnet,
    /// Larger than a slot and not queued whole (receive buffer full).
    CopyFull,
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<Packet>,
        max: usize,
    ) -> io::Result<usize> {
        let (mut n, mut budget) = (0, 0);
        while budget < max {
            let h = self.geo.offset(self.slot);
            let status = self.ring.load_status(h + H_STATUS);
            if status & sys::TP_STATUS_USER == 0 {
                break;
            }
            // A buffer sized to the frame: a wire-sized one in the slot
            // (and a VLAN tag to put back), anything for the copy path.
            let copied = status & sys::TP_STATUS_COPY != 0;
            let want = if copied {
                usize::MAX
            } else {
                self.ring
                    .u32_at(h + H_SNAPLEN)
                    .map_or(usize::MAX, |n| n as usize + 4)
            };
            let Some(mut pkt) = pool.alloc_for(want) else {
                // Out of buffers: leave the frame in the ring, the kernel
                // drops (and counts) once the ring is full.
                break;
            };
            let r = if copied {
                self.recv_frame(h, status, &mut pkt)
            } else {
                self.copy_frame(h, status, &mut pkt)
            };
            // Hand the slot back only after every read of it.
            self.ring.store_status(h + H_STATUS, sys::TP_STATUS_KERNEL);
            self.slot = (self.slot + 1) % self.frame_nr;
            match r {
                Ok(()) => {
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += pkt.len() as u64;
                    budget += pkt.wire_segments();
                    out.push(pkt);
                    n += 1;
                }
                Err(e) => {
                    match e {
                        RxError::Desc => self.stats.rx_bad += 1,
                        RxError::Vnet => self.stats.rx_bad_vnet += 1,
                        RxError::CopyFull => self.stats.rx_copy_full += 1,
                    }
                    pool.free(pkt);
                }
            }
        }
        Ok(n)
    }

    fn tx_burst(&mut self, pkts: &mut Vec<Packet>, pool: &mut Pool) -> io::Result<Sent> {
        if tx_check::ENABLED {
            self.refuse_invalid(pkts, pool);
        }
        let total = pkts.len();
        let hdr_len = if self.vnet_hdr { VNET_HDR_LEN } else { 0 };
        let mut sent = Sent::default();
        let mut i = 0;
        let mut rejected = 0;
        let mut result = Ok(());
        'outer: while i < total {
            let chunk = (total - i).min(sys::MMSG_BATCH);
            let mut hdrs = [[0u8; VNET_HDR_LEN]; sys::MMSG_BATCH];
            let mut frames: [&[u8]; sys::MMSG_BATCH] = [&[]; sys::MMSG_BATCH];
            // The virtio-net header goes into each packet's headroom, so
            // the kernel imports one iovec per packet, not two (a separate
            // header iovec only if some packet has no room in front).
            let inline = hdr_len > 0 && pkts[i..i + chunk].iter().all(|p| p.headroom() >= hdr_len);
            for j in 0..chunk {
                let p = &mut pkts[i + j];
                if self.vnet_hdr {
                    hdrs[j] = vnet::encode(&p.meta.offload);
                    if inline {
                        if let Some(h) = p.push_front(hdr_len) {
                            h.copy_from_slice(&hdrs[j]);
                        }
                    }
                }
            }
            for j in 0..chunk {
                frames[j] = pkts[i + j].data();
            }
            let hdr_in_frame = if inline { hdr_len } else { 0 };
            let mut j = 0;
            while j < chunk {
                let r = if inline {
                    sys::sendmmsg_frames(self.fd.as_raw_fd(), &frames[j..chunk])
                } else {
                    sys::sendmmsg_hdr_frames(
                        self.fd.as_raw_fd(),
                        &hdrs[j..chunk],
                        hdr_len,
                        &frames[j..chunk],
                    )
                };
                match r {
                    Ok(0) => break 'outer,
                    Ok(k) => {
                        for f in &frames[j..j + k] {
                            sent.add(f.len() - hdr_in_frame);
                        }
                        j += k;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 'outer,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if crate::error::is_device_gone(&e) => {
                        if matches!(e.raw_os_error(), Some(libc::ENXIO) | Some(libc::ENODEV)) {
                            self.dead = true;
                        }
                        result = Err(e);
                        break 'outer;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                        // The device refused this one packet (queue busy).
                        j += 1;
                    }
                    Err(_) => {
                        // Malformed packet (EINVAL, EMSGSIZE...): skip it.
                        rejected += 1;
                        j += 1;
                    }
                }
            }
            i += chunk;
        }
        self.stats.tx_packets += sent.packets as u64;
        self.stats.tx_bytes += sent.bytes;
        self.stats.tx_rejected += rejected as u64;
        self.stats.tx_dropped += (total - sent.packets - rejected) as u64;
        pool.free_all(pkts);
        result.map(|()| sent)
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
        self.vnet_hdr
    }

    fn udp_gso(&self) -> bool {
        self.udp_gso
    }

    fn recheck(&mut self) {
        if self.vnet_hdr && self.qdisc_bypass {
            self.udp_gso = crate::netdev::udp_segmentation(&self.name).unwrap_or(false);
        }
    }

    /// One getsockopt(PACKET_STATISTICS), which also resets the kernel's
    /// counters, plus the backend's own since the previous call. A failed
    /// read (socket gone) reports no ring drops rather than an error.
    fn take_drops(&mut self) -> PortDrops {
        let ring_full = self.kernel_stats().map_or(0, |(_, drops)| u64::from(drops));
        let (s, r) = (self.stats, self.reported);
        self.reported = s;
        PortDrops {
            rx_ring_full: ring_full + s.rx_copy_full.wrapping_sub(r.rx_copy_full),
            rx_bad: (s.rx_bad + s.rx_bad_vnet).wrapping_sub(r.rx_bad + r.rx_bad_vnet),
            tx_rejected: (s.tx_rejected + s.tx_invalid).wrapping_sub(r.tx_rejected + r.tx_invalid),
            tx_full: s.tx_dropped.wrapping_sub(r.tx_dropped),
        }
    }

    fn is_alive(&self) -> bool {
        Self::is_alive(self)
    }
}
