//! The I/O floor: the smallest forwarder on vecgate's own AF_PACKET path,
//! what the benchmark suite measures vecgate against.
//!
//! Two netdevs, `a` (the hosts' side) and `b`. Each worker drains the
//! receive ring of one, and sends every frame straight from its ring slot
//! with one `sendmmsg` per burst (iovecs: virtio-net header, a header to
//! prepend, the frame where it lies), then hands the slots back. Nothing
//! else: the kernel copies the frame into its skb once (ring → skb), the
//! least a userspace path over AF_PACKET can copy besides the kernel →
//! ring copy of receive.
//!
//! - [`Mode::Route`]: the Ethernet addresses are replaced (a new 14-byte
//!   header in front of the frame's payload), nothing else; super-packets
//!   keep their virtio-net header as received.
//! - [`Mode::Gre`]: the tunnel twin. `a` → `b` prepends a precomputed
//!   Ethernet + IPv4 + GRE header (RFC 2784, no key) to the frame's IP
//!   packet, patching only the IPv4 total length and checksum; `b` → `a`
//!   strips it and gives a super-packet that is larger than `a`'s MTU its
//!   segmentation size back (what a receiver's coalescing does).
//!
//! With `driver = "af_xdp"` the same happens over AF_XDP sockets: each
//! frame is written once, from the receiving socket's UMEM into a transmit
//! frame of the other's, behind the same header (no super-packets: XDP
//! carries no GSO metadata, so hosts send frames of one MTU).
//!
//! No neighbour resolution (the next hops' MACs are given), no table
//! lookup, no counters beyond the ports'. Like vecgate, it installs the
//! ingress guard (tcx, or nftables) on both netdevs, pins worker `i` to the `i`-th
//! CPU it may run on, and with several workers joins each netdev's sockets
//! in one PACKET_FANOUT group.

use crate::af_packet::{AfPacketOpts, AfPacketPort};
use crate::af_xdp::{AfXdpOpts, AfXdpPort};
use crate::error::IoError;
use crate::netdev::{self, IngressGuard};
use crate::vnet::{self, VNET_HDR_LEN};
use packet::idle::{IdleSpin, DEFAULT_IDLE_SPIN_US};
use packet::{Gso, Port};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Frames forwarded per burst (one `sendmmsg`).
const BURST: usize = 64;
/// Ethernet + IPv4 (no options) + GRE base header.
const GRE_OUTER: usize = 14 + 20 + 4;

/// What the floor does to a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Replace the Ethernet addresses only.
    Route,
    /// GRE between `local` and `remote` on `b`; IPv4 inner packets only.
    Gre { local: Ipv4Addr, remote: Ipv4Addr },
}

/// One floor forwarder.
#[derive(Clone, Debug)]
pub struct FloorConfig {
    pub a: String,
    pub b: String,
    /// Destination MAC of frames sent on `a` (the host behind it).
    pub a_peer: [u8; 6],
    /// Destination MAC of frames sent on `b`.
    pub b_peer: [u8; 6],
    pub mode: Mode,
    pub workers: usize,
    /// Exchange virtio-net headers (super-packets), as vecgate does.
    pub vnet_hdr: bool,
    /// "af_packet" or "af_xdp" (both netdevs; AF_XDP worker `i` binds
    /// queue `i`, so the netdevs need a queue per worker).
    pub driver: String,
}

/// Per direction, what a worker needs to build the prepended header.
#[derive(Clone, Copy)]
struct Dir {
    /// Ethernet header of frames sent out (dst, src, IPv4 type).
    eth: [u8; 14],
    /// Encapsulate in GRE (`a` → `b` in GRE mode).
    encap: Option<IpTemplate>,
    /// Decapsulate GRE (`b` → `a` in GRE mode): the outer source and
    /// destination expected, and the MTU super-packets are segmented to.
    decap: Option<(Ipv4Addr, Ipv4Addr, usize)>,
}

/// The outer IPv4 header with the total length and checksum left to
/// patch; `sum` is the one's-complement sum of every other word.
#[derive(Clone, Copy)]
struct IpTemplate {
    hdr: [u8; 20],
    sum: u32,
}

impl IpTemplate {
    fn new(src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        let mut hdr = [0u8; 20];
        hdr[0] = 0x45;
        hdr[6] = 0x40; // DF
        hdr[8] = 64;
        hdr[9] = 47; // GRE
        hdr[12..16].copy_from_slice(&src.octets());
        hdr[16..20].copy_from_slice(&dst.octets());
        let sum = hdr
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        IpTemplate { hdr, sum }
    }

    /// The header for an IP payload of `len` bytes (GRE header included).
    fn fill(&self, out: &mut [u8], len: usize) {
        let total = (20 + len) as u16;
        let mut s = self.sum + u32::from(total);
        s = (s & 0xffff) + (s >> 16);
        s = (s & 0xffff) + (s >> 16);
        out[..20].copy_from_slice(&self.hdr);
        out[2..4].copy_from_slice(&total.to_be_bytes());
        out[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
    }
}

/// Runs the floor until `stop` is set: opens every worker's ports, installs
/// the ingress guards, calls `ready` once all are open, and forwards.
pub fn run(cfg: &FloorConfig, stop: Arc<AtomicBool>, ready: impl FnOnce()) -> Result<(), IoError> {
    let workers = cfg.workers.max(1);
    let _guards = [
        IngressGuard::install(&cfg.a)?,
        IngressGuard::install(&cfg.b)?,
    ];
    let (a_mac, b_mac) = (netdev::mac(&cfg.a)?, netdev::mac(&cfg.b)?);
    let a_mtu = netdev::mtu(&cfg.a)? as usize;
    let eth = |dst: [u8; 6], src: [u8; 6]| {
        let mut e = [0u8; 14];
        e[..6].copy_from_slice(&dst);
        e[6..12].copy_from_slice(&src);
        e[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        e
    };
    let (to_b, to_a) = match cfg.mode {
        Mode::Route => (
            Dir {
                eth: eth(cfg.b_peer, b_mac),
                encap: None,
                decap: None,
            },
            Dir {
                eth: eth(cfg.a_peer, a_mac),
                encap: None,
                decap: None,
            },
        ),
        Mode::Gre { local, remote } => (
            Dir {
                eth: eth(cfg.b_peer, b_mac),
                encap: Some(IpTemplate::new(local, remote)),
                decap: None,
            },
            Dir {
                eth: eth(cfg.a_peer, a_mac),
                encap: None,
                decap: Some((remote, local, a_mtu)),
            },
        ),
    };
    if cfg.driver == "af_xdp" {
        return run_xdp(cfg, workers, to_b, to_a, stop, ready);
    }
    if cfg.driver != "af_packet" {
        return Err(IoError::UnknownDriver(cfg.driver.clone()));
    }
    // Distinct fanout groups per netdev, per process.
    let group = (std::process::id() as u16).wrapping_mul(2);
    let mut ports = Vec::new();
    for _ in 0..workers {
        // Slots that hold any frame whole: the floor sends from them.
        let opts = |g: u16| AfPacketOpts {
            fanout: (workers > 1).then_some(g),
            vnet_hdr: cfg.vnet_hdr,
            frames: 510,
            slot_size: crate::af_packet::SLOT_MAX,
            ..AfPacketOpts::default()
        };
        let a = AfPacketPort::open(&cfg.a, opts(group))?;
        let b = AfPacketPort::open(&cfg.b, opts(group.wrapping_add(1)))?;
        ports.push((a, b));
    }
    ready();
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    std::thread::scope(|s| {
        for (w, (mut a, mut b)) in ports.into_iter().enumerate() {
            let core = cores.get(w % cores.len().max(1)).copied();
            let stop = stop.clone();
            s.spawn(move || {
                if let Some(c) = core {
                    core_affinity::set_for_current(c);
                }
                worker(&mut a, &mut b, &to_b, &to_a, &stop);
            });
        }
    });
    Ok(())
}

/// The AF_XDP floor: the same loop over AF_XDP sockets, each frame written
/// once from the receiving socket's UMEM into the sending socket's (copy
/// mode on veth cannot share them); no virtio-net headers (XDP has none).
fn run_xdp(
    cfg: &FloorConfig,
    workers: usize,
    to_b: Dir,
    to_a: Dir,
    stop: Arc<AtomicBool>,
    ready: impl FnOnce(),
) -> Result<(), IoError> {
    let mut ports = Vec::new();
    for w in 0..workers {
        let opts = AfXdpOpts {
            queue: u32::try_from(w).unwrap_or(u32::MAX),
            workers: u32::try_from(workers).unwrap_or(u32::MAX),
            ..AfXdpOpts::default()
        };
        let a = AfXdpPort::open(&cfg.a, opts.clone())?;
        let b = AfXdpPort::open(&cfg.b, opts)?;
        ports.push((a, b));
    }
    ready();
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    std::thread::scope(|s| {
        for (w, (mut a, mut b)) in ports.into_iter().enumerate() {
            let core = cores.get(w % cores.len().max(1)).copied();
            let stop = stop.clone();
            s.spawn(move || {
                if let Some(c) = core {
                    core_affinity::set_for_current(c);
                }
                let mut spin = IdleSpin::new(DEFAULT_IDLE_SPIN_US);
                while !stop.load(Ordering::Relaxed) {
                    let n = xdp_forward(&mut a, &mut b, &to_b) + xdp_forward(&mut b, &mut a, &to_a);
                    if n > 0 {
                        spin.busy();
                    } else if !spin.keep_polling() {
                        idle(&a, &b);
                    }
                }
            });
        }
    });
    Ok(())
}

fn xdp_forward(rx: &mut AfXdpPort, tx: &mut AfXdpPort, dir: &Dir) -> usize {
    rx.forward_to(tx, BURST as u32, |frame, buf| {
        let (mut v, mut h, mut payload) = ([0u8; VNET_HDR_LEN], [0u8; GRE_OUTER], &[][..]);
        let hl = prepare(dir, [0; VNET_HDR_LEN], frame, &mut v, &mut h, &mut payload)?;
        buf[..hl].copy_from_slice(&h[..hl]);
        Some((hl, frame.len() - payload.len()))
    })
    .unwrap_or(0)
}

/// Blocks until either port has something to receive (at most 100 ms),
/// once the spin after the last packet is over.
fn idle(a: &dyn Port, b: &dyn Port) {
    let (Some(fa), Some(fb)) = (a.poll_fd(), b.poll_fd()) else {
        return;
    };
    let mut fds = [
        PollFd::new(&fa, PollFlags::IN),
        PollFd::new(&fb, PollFlags::IN),
    ];
    let timeout = Timespec {
        tv_sec: 0,
        tv_nsec: 100_000_000,
    };
    let _ = poll(&mut fds, Some(&timeout));
}

fn worker(a: &mut AfPacketPort, b: &mut AfPacketPort, to_b: &Dir, to_a: &Dir, stop: &AtomicBool) {
    // Waits as vecgate's workers do by default ([`packet::idle`]).
    let mut spin = IdleSpin::new(DEFAULT_IDLE_SPIN_US);
    while !stop.load(Ordering::Relaxed) {
        let n = forward(a, b, to_b) + forward(b, a, to_a);
        if n > 0 {
            spin.busy();
        } else if !spin.keep_polling() {
            idle(a, b);
        }
    }
}

/// One burst from `rx` to `tx`; returns the frames taken from the ring.
fn forward(rx: &mut AfPacketPort, tx: &mut AfPacketPort, dir: &Dir) -> usize {
    let n = rx.ring_ready(BURST);
    if n == 0 {
        return 0;
    }
    let mut vnets = [[0u8; VNET_HDR_LEN]; BURST];
    let mut heads = [[0u8; GRE_OUTER]; BURST];
    let mut frames: [&[u8]; BURST] = [&[]; BURST];
    let mut head_lens = [0usize; BURST];
    let mut k = 0;
    for i in 0..n {
        let Some((vnet, frame)) = rx.ring_frame(i) else {
            continue;
        };
        if let Some(len) = prepare(
            dir,
            vnet,
            frame,
            &mut vnets[k],
            &mut heads[k],
            &mut frames[k],
        ) {
            head_lens[k] = len;
            k += 1;
        }
    }
    let vnet_len = if tx.vnet_hdr() { VNET_HDR_LEN } else { 0 };
    let mut msgs: [[&[u8]; 3]; BURST] = [[&[]; 3]; BURST];
    for j in 0..k {
        msgs[j] = [&vnets[j][..vnet_len], &heads[j][..head_lens[j]], frames[j]];
    }
    let _ = tx.send_iov3(&msgs[..k]);
    rx.ring_release(n);
    n
}

/// Builds the virtio-net header and prepended header of one frame and
/// points `payload` at the part of the frame sent as it lies; returns the
/// prepended header's length, None to drop the frame.
fn prepare<'a>(
    dir: &Dir,
    vnet_in: [u8; VNET_HDR_LEN],
    frame: &'a [u8],
    vnet_out: &mut [u8; VNET_HDR_LEN],
    head: &mut [u8; GRE_OUTER],
    payload: &mut &'a [u8],
) -> Option<usize> {
    if frame.len() < 14 {
        return None;
    }
    if let Some(ip) = &dir.encap {
        if frame[12..14] != [0x08, 0x00] {
            return None;
        }
        let inner = &frame[14..];
        head[..14].copy_from_slice(&dir.eth);
        ip.fill(&mut head[14..34], 4 + inner.len());
        head[34..38].copy_from_slice(&[0, 0, 0x08, 0x00]);
        // The outer packet fits the underlay whole (or the kernel refuses
        // it): no segmentation; a pending inner checksum moves with it.
        let mut off = vnet::decode(&vnet_in).ok()?;
        off.gso = Gso::None;
        off.gso_size = 0;
        off.hdr_len = 0;
        if off.needs_csum {
            off.csum_start = off.csum_start.checked_add((GRE_OUTER - 14) as u16)?;
        }
        *vnet_out = vnet::encode(&off);
        *payload = inner;
        return Some(GRE_OUTER);
    }
    if let Some((src, dst, mtu)) = dir.decap {
        let f = frame;
        if f.len() < GRE_OUTER + 20
            || f[12..14] != [0x08, 0x00]
            || f[14] != 0x45
            || f[23] != 47
            || f[26..30] != src.octets()
            || f[30..34] != dst.octets()
            || f[34..38] != [0, 0, 0x08, 0x00]
        {
            return None;
        }
        let inner = &f[GRE_OUTER..];
        let mut off = vnet::decode(&vnet_in).ok()?;
        if off.needs_csum {
            off.csum_start = off.csum_start.checked_sub((GRE_OUTER - 14) as u16)?;
        }
        // A super-packet larger than the hosts' MTU gets its segment size
        // back (TCP over IPv4 with a pending checksum only).
        let ihl = usize::from(inner[0] & 0x0f) * 4;
        if inner.len() > mtu && off.needs_csum && inner[9] == 6 && inner.len() >= ihl + 20 {
            let doff = usize::from(inner[ihl + 12] >> 4) * 4;
            off.gso = Gso::TcpV4;
            off.gso_size = u16::try_from(mtu.checked_sub(ihl + doff)?).ok()?;
            off.hdr_len = u16::try_from(14 + ihl + doff).ok()?;
        } else {
            off.gso = Gso::None;
        }
        *vnet_out = vnet::encode(&off);
        head[..14].copy_from_slice(&dir.eth);
        *payload = inner;
        return Some(14);
    }
    // Route: the same frame behind new Ethernet addresses.
    *vnet_out = vnet_in;
    head[..12].copy_from_slice(&dir.eth[..12]);
    *payload = &frame[12..];
    Some(12)
}

/// What [`generate`] sends: UDP/IPv4 frames of `frame_len` bytes (without
/// the FCS; at least 60) from `src` to `dst`, to `dst_mac`.
#[derive(Clone, Debug)]
pub struct GenConfig {
    pub ifname: String,
    /// "af_xdp" or "af_packet".
    pub driver: String,
    pub dst_mac: [u8; 6],
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub frame_len: usize,
    pub seconds: f64,
    /// Stop after this many frames (the kernel took them all) or after
    /// `seconds`, whichever comes first.
    pub count: Option<u64>,
}

/// The small-packet generator (the traffic of the small-packet rows):
/// sends `cfg`'s frames as fast as the backend takes them, for
/// `cfg.seconds`, 64 per burst, with eight UDP source ports so flows
/// spread over a gateway's workers.
/// Returns (frames the kernel took, seconds). The figure a test or bench
/// judges is the receiver's own counter, never this one.
pub fn generate(cfg: &GenConfig) -> Result<(u64, f64), IoError> {
    use packet::Pool;
    use std::time::Instant;
    let mut port = crate::open_port(&cfg.driver, &cfg.ifname, 0, 1, 1)?;
    let len = cfg.frame_len.clamp(60, 1514);
    let mut frame = vec![0u8; len];
    frame[..6].copy_from_slice(&cfg.dst_mac);
    frame[6..12].copy_from_slice(&port.mac());
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = IpTemplate::new(cfg.src, cfg.dst);
    ip.fill(&mut frame[14..34], len - 34);
    frame[23] = 17; // UDP, checksum redone below
    frame[24..26].copy_from_slice(&[0, 0]);
    let sum: u32 = frame[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    frame[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    frame[36..38].copy_from_slice(&9u16.to_be_bytes()); // discard
    frame[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    let mut pool = Pool::new(256);
    let mut burst = Vec::with_capacity(BURST);
    let (mut sent, mut seq) = (0u64, 0u16);
    let start = Instant::now();
    let limit = cfg.count.unwrap_or(u64::MAX);
    while sent < limit && start.elapsed().as_secs_f64() < cfg.seconds {
        let want = usize::try_from(limit - sent).unwrap_or(BURST).min(BURST);
        while burst.len() < want {
            let Some(mut p) = pool.alloc() else { break };
            seq = seq.wrapping_add(1);
            frame[34..36].copy_from_slice(&(40000 + (seq & 7)).to_be_bytes());
            if !p.set_data(&frame) {
                pool.free(p);
                break;
            }
            burst.push(p);
        }
        match port.tx_burst(&mut burst, &mut pool) {
            Ok(n) => sent += n.packets as u64,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(IoError::sys("transmit", &cfg.ifname, e)),
        }
    }
    Ok((sent, start.elapsed().as_secs_f64()))
}

/// Cold and hot `memcpy` bandwidth of one core, in GB/s (10^9 bytes of
/// destination written per second): `cold` copies between two 256 MiB
/// buffers (far past any cache), `hot` copies a 64 KiB buffer over and
/// over (in L1/L2). The figures a copy-bound datapath is bound by.
pub fn memcpy_bandwidth() -> (f64, f64) {
    use std::hint::black_box;
    use std::time::Instant;
    fn rate(size: usize, min_secs: f64) -> f64 {
        let src = vec![0x5au8; size];
        let mut dst = vec![0u8; size];
        dst.copy_from_slice(&src); // fault every page in first
        let mut best = 0f64;
        for _ in 0..3 {
            let t = Instant::now();
            let mut bytes = 0usize;
            while t.elapsed().as_secs_f64() < min_secs || bytes == 0 {
                dst.copy_from_slice(black_box(&src));
                black_box(&mut dst);
                bytes += size;
            }
            best = best.max(bytes as f64 / t.elapsed().as_secs_f64() / 1e9);
        }
        best
    }
    (rate(256 << 20, 0.2), rate(64 << 10, 0.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outer_header_checksum_verifies() {
        let t = IpTemplate::new(Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2));
        for len in [24usize, 1480, 65_000] {
            let mut h = [0u8; 20];
            t.fill(&mut h, len);
            let mut s: u32 = h
                .chunks(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum();
            s = (s & 0xffff) + (s >> 16);
            s = (s & 0xffff) + (s >> 16);
            assert_eq!(s, 0xffff, "len {len}");
            assert_eq!(usize::from(u16::from_be_bytes([h[2], h[3]])), 20 + len);
        }
    }

    #[test]
    fn gre_round_trip_restores_the_frame_and_its_offload() {
        let a = Dir {
            eth: [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 8, 0],
            encap: Some(IpTemplate::new(
                Ipv4Addr::new(192, 0, 2, 1),
                Ipv4Addr::new(192, 0, 2, 2),
            )),
            decap: None,
        };
        let b = Dir {
            eth: [3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 8, 0],
            encap: None,
            decap: Some((
                Ipv4Addr::new(192, 0, 2, 1),
                Ipv4Addr::new(192, 0, 2, 2),
                1500,
            )),
        };
        // A 4000-byte TCP super-packet with a pending checksum.
        let mut frame = vec![0u8; 14 + 4000];
        frame[12] = 8;
        frame[14] = 0x45;
        frame[23] = 6;
        frame[14 + 20 + 12] = 8 << 4; // 32-byte TCP header
        let off = packet::Offload {
            needs_csum: true,
            csum_start: 34,
            csum_offset: 16,
            gso: Gso::TcpV4,
            gso_size: 1448,
            hdr_len: 66,
            ..Default::default()
        };
        let (mut v, mut h, mut p) = ([0u8; 10], [0u8; GRE_OUTER], &[][..]);
        assert_eq!(
            prepare(&a, vnet::encode(&off), &frame, &mut v, &mut h, &mut p),
            Some(38)
        );
        let mut wire = h.to_vec();
        wire.extend_from_slice(p);
        assert_eq!(wire.len(), 38 + 4000);
        let o = vnet::decode(&v).unwrap();
        assert_eq!((o.gso, o.csum_start), (Gso::None, 58));
        let (mut v2, mut h2, mut p2) = ([0u8; 10], [0u8; GRE_OUTER], &[][..]);
        assert_eq!(prepare(&b, v, &wire, &mut v2, &mut h2, &mut p2), Some(14));
        assert_eq!(p2, &frame[14..]);
        let o2 = vnet::decode(&v2).unwrap();
        assert_eq!(
            (o2.gso, o2.gso_size, o2.hdr_len, o2.csum_start),
            (Gso::TcpV4, 1448, 66, 34)
        );
        // Not GRE from the peer: dropped.
        let mut other = wire.clone();
        other[29] = 9;
        let mut p3 = &[][..];
        assert_eq!(prepare(&b, v, &other, &mut v2, &mut h2, &mut p3), None);
    }
}
