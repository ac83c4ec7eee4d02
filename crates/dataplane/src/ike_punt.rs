//! Punt and inject: IKE datagrams between the graph and the control plane.
//!
//! Why not a kernel UDP socket: vecgate owns its netdevs through AF_PACKET
//! and an nftables ingress guard drops every frame before the host stack
//! (`vecgate_io::netdev`), so a socket on UDP 500 / 4500 in the gateway's
//! namespace never receives anything, and the host's routes do not know
//! vecgate's VRFs. IKE (RFC 7296 §2, RFC 3948 §2.2) therefore travels
//! through the dataplane like any local traffic:
//!
//! * **punt** — ip-local hands UDP to port 500, and UDP to port 4500 that
//!   starts with the 4-byte non-ESP marker, for one of our addresses, to
//!   [`Punt::punt`]: the UDP payload is copied into a preallocated slot and
//!   queued with its addresses and underlay VRF. A full queue (or no free
//!   slot) drops the datagram and counts it; IKE retransmits. No
//!   allocation, no lock and no blocking in the worker.
//! * **inject** — the control plane hands a datagram to [`Punt::inject`];
//!   every worker drains the queue once per loop ([`Punt::drain_inject`]),
//!   wraps the payload in IPv4/IPv6 + UDP built here and routes it in the
//!   given VRF through ip4/ip6-lookup, exactly as an encapsulated packet
//!   leaves (so ARP/ND, the FIB and the output ports are the dataplane's).
//!
//! Each direction recycles its own fixed set of slots of [`SLOT_SIZE`]
//! bytes (a free list in a bounded channel): a flood that fills every
//! punt slot leaves the control plane its transmit slots, so its
//! retransmissions, liveness checks and rekeys still leave. The caller of `inject` passes
//! the UDP payload as the IKE library produced it (non-ESP marker included
//! on port 4500); `punt` delivers it the same way, marker included, as
//! the library expects.

use crate::graph::flags;
use crossbeam_channel::{bounded, Receiver, Sender};
use packet::buffer::{Packet, Pool};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wire::checksum;

/// IKE's port (RFC 7296 §2).
pub const IKE_PORT: u16 = 500;
/// NAT-T port (RFC 3948).
pub const NAT_T_PORT: u16 = 4500;
/// Largest UDP payload carried: IKE messages are fragmented (RFC 7383)
/// well below this; anything larger is dropped and counted.
pub const SLOT_SIZE: usize = 8192;
/// Slots per [`Punt`] by default.
pub const DEFAULT_SLOTS: usize = 256;

const IP4_HDR: usize = 20;
const IP6_HDR: usize = 40;
const UDP_HDR: usize = 8;

/// One datagram in a slot.
pub struct Datagram {
    buf: Box<[u8]>,
    len: usize,
    /// Our address and port.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
    /// Index of the underlay VRF in the tables (`Meta::vrf`).
    pub vrf: u16,
}

impl Datagram {
    /// The UDP payload.
    pub fn data(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

impl std::fmt::Debug for Datagram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Datagram")
            .field("len", &self.len)
            .field("local", &self.local)
            .field("remote", &self.remote)
            .field("vrf", &self.vrf)
            .finish()
    }
}

/// Why [`Punt::inject`] refused a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectError {
    /// Larger than [`SLOT_SIZE`] (or than an IP packet can be).
    TooLarge,
    /// Local and remote are of different families.
    MixedFamilies,
    /// Every slot is in use or the queue is full.
    Full,
}

impl std::fmt::Display for InjectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InjectError::TooLarge => "datagram too large",
            InjectError::MixedFamilies => "local and remote address families differ",
            InjectError::Full => "inject queue full",
        })
    }
}

/// Counters of the punt path (`show` commands, tests).
#[derive(Debug, Default)]
pub struct PuntCounters {
    /// Datagrams queued to the control plane.
    pub punted: AtomicU64,
    /// Dropped: no free slot or queue full.
    pub punt_full: AtomicU64,
    /// Dropped: larger than a slot.
    pub punt_too_large: AtomicU64,
    /// Datagrams built and routed by a worker.
    pub injected: AtomicU64,
    /// Dropped by a worker: no packet buffer.
    pub inject_no_buffer: AtomicU64,
}

/// The punt / inject channels shared by the workers and the control thread.
pub struct Punt {
    free_tx: Sender<Box<[u8]>>,
    free_rx: Receiver<Box<[u8]>>,
    /// Transmit's own slots (never shared with the punt direction).
    tx_free_tx: Sender<Box<[u8]>>,
    tx_free_rx: Receiver<Box<[u8]>>,
    up_tx: Sender<Datagram>,
    up_rx: Receiver<Datagram>,
    down_tx: Sender<Datagram>,
    down_rx: Receiver<Datagram>,
    ip_id: AtomicU64,
    pub counters: PuntCounters,
}

impl std::fmt::Debug for Punt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Punt")
            .field("free", &self.free_rx.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl Punt {
    /// Preallocates `slots` slots for each direction (the only
    /// allocation of this path).
    pub fn new(slots: usize) -> Arc<Punt> {
        let slots = slots.max(1);
        let (free_tx, free_rx) = bounded(slots);
        let (tx_free_tx, tx_free_rx) = bounded(slots);
        for _ in 0..slots {
            let _ = free_tx.try_send(vec![0u8; SLOT_SIZE].into_boxed_slice());
            let _ = tx_free_tx.try_send(vec![0u8; SLOT_SIZE].into_boxed_slice());
        }
        let (up_tx, up_rx) = bounded(slots);
        let (down_tx, down_rx) = bounded(slots);
        Arc::new(Punt {
            free_tx,
            free_rx,
            tx_free_tx,
            tx_free_rx,
            up_tx,
            up_rx,
            down_tx,
            down_rx,
            ip_id: AtomicU64::new(1),
            counters: PuntCounters::default(),
        })
    }

    /// Whether ip-local should punt a UDP datagram to `dport` whose payload
    /// starts with `payload` (RFC 3948 §2.2: on 4500 only the non-ESP
    /// marker announces IKE; anything else there is ESP or a keepalive).
    #[inline]
    pub fn wants(dport: u16, payload: &[u8]) -> bool {
        dport == IKE_PORT
            || (dport == NAT_T_PORT && payload.len() > 4 && payload[..4] == [0, 0, 0, 0])
    }

    /// Queues a copy of `payload` for the control plane (worker side).
    /// `false` when dropped (counted).
    pub fn punt(&self, payload: &[u8], local: SocketAddr, remote: SocketAddr, vrf: u16) -> bool {
        if payload.len() > SLOT_SIZE {
            self.counters.punt_too_large.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let Ok(mut buf) = self.free_rx.try_recv() else {
            self.counters.punt_full.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        buf[..payload.len()].copy_from_slice(payload);
        let d = Datagram {
            buf,
            len: payload.len(),
            local,
            remote,
            vrf,
        };
        match self.up_tx.try_send(d) {
            Ok(()) => {
                self.counters.punted.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(e) => {
                self.release(e.into_inner());
                self.counters.punt_full.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Waits up to `timeout` for a punted datagram (control side); give it
    /// back with [`Punt::release`] when done.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Datagram> {
        self.up_rx.recv_timeout(timeout).ok()
    }

    /// Returns a datagram's slot to the free list.
    pub fn release(&self, d: Datagram) {
        let _ = self.free_tx.try_send(d.buf);
    }

    /// Queues `payload` to be sent from `local` to `remote`, routed in
    /// underlay VRF index `vrf` (control side).
    pub fn inject(
        &self,
        payload: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        vrf: u16,
    ) -> Result<(), InjectError> {
        if payload.len() > SLOT_SIZE {
            return Err(InjectError::TooLarge);
        }
        if local.is_ipv4() != remote.is_ipv4() {
            return Err(InjectError::MixedFamilies);
        }
        let mut buf = self.tx_free_rx.try_recv().map_err(|_| InjectError::Full)?;
        buf[..payload.len()].copy_from_slice(payload);
        let d = Datagram {
            buf,
            len: payload.len(),
            local,
            remote,
            vrf,
        };
        self.down_tx.try_send(d).map_err(|e| {
            self.release_tx(e.into_inner());
            InjectError::Full
        })
    }

    /// Returns an injected datagram's slot to the transmit free list.
    fn release_tx(&self, d: Datagram) {
        let _ = self.tx_free_tx.try_send(d.buf);
    }

    /// Builds up to `max` queued injections into packets from `pool`,
    /// appended to `v4` / `v6` for ip4-lookup / ip6-lookup (worker side).
    pub fn drain_inject(
        &self,
        pool: &mut Pool,
        v4: &mut Vec<Packet>,
        v6: &mut Vec<Packet>,
        max: usize,
    ) {
        for _ in 0..max {
            let Ok(d) = self.down_rx.try_recv() else {
                return;
            };
            match pool.alloc() {
                Some(mut p) => {
                    let id = self.ip_id.fetch_add(1, Ordering::Relaxed) as u16;
                    if build(&mut p, &d, id) {
                        self.counters.injected.fetch_add(1, Ordering::Relaxed);
                        if d.local.is_ipv4() {
                            v4.push(p);
                        } else {
                            v6.push(p);
                        }
                    } else {
                        pool.free(p);
                        self.counters
                            .inject_no_buffer
                            .fetch_add(1, Ordering::Relaxed);
                    }
                }
                None => {
                    self.counters
                        .inject_no_buffer
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            self.release_tx(d);
        }
    }
}

/// Writes IP + UDP + payload of `d` into `p` and sets the metadata of a
/// locally originated packet routed in `d.vrf`. `false` if it cannot fit.
fn build(p: &mut Packet, d: &Datagram, ip_id: u16) -> bool {
    let payload = d.data();
    let udp_len = UDP_HDR + payload.len();
    let hdr = match (d.local.ip(), d.remote.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => IP4_HDR,
        (IpAddr::V6(_), IpAddr::V6(_)) => IP6_HDR,
        _ => return false,
    };
    if udp_len > usize::from(u16::MAX) - hdr {
        return false;
    }
    let Some(area) = p.push_back(hdr + udp_len) else {
        return false;
    };
    let (ip, rest) = area.split_at_mut(hdr);
    let (udp, body) = rest.split_at_mut(UDP_HDR);
    body.copy_from_slice(payload);
    udp[0..2].copy_from_slice(&d.local.port().to_be_bytes());
    udp[2..4].copy_from_slice(&d.remote.port().to_be_bytes());
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    let sum = match (d.local.ip(), d.remote.ip()) {
        (IpAddr::V4(s), IpAddr::V4(t)) => {
            // RFC 791 header: no options, DF clear (IKE may need IP
            // fragmentation on a small-MTU path when RFC 7383 is off).
            ip.fill(0);
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&((IP4_HDR + udp_len) as u16).to_be_bytes());
            ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
            ip[8] = 64;
            ip[9] = 17;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&t.octets());
            let c = checksum::checksum(ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            checksum::pseudo_header_v4(&s, &t, 17, udp_len as u16)
        }
        (IpAddr::V6(s), IpAddr::V6(t)) => {
            ip.fill(0);
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            ip[6] = 17;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&t.octets());
            checksum::pseudo_header_v6(&s, &t, 17, udp_len as u32)
        }
        _ => return false,
    };
    // UDP checksum over pseudo header + UDP (mandatory over IPv6, RFC 8200
    // §8.1; zero is sent as all ones, RFC 768).
    let c = !checksum::combine(&[sum, checksum::data(udp), checksum::data(body)]);
    let c = if c == 0 { 0xffff } else { c };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    p.meta.vrf = d.vrf;
    p.meta.flags = flags::LOCAL;
    p.meta.l3_offset = 0;
    p.meta.aux = 0;
    p.meta.offload = Default::default();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn wants_ike_only() {
        assert!(Punt::wants(500, &[1, 2, 3]));
        assert!(Punt::wants(4500, &[0, 0, 0, 0, 0x11]));
        // ESP (non-zero SPI) and the NAT keepalive stay in the dataplane.
        assert!(!Punt::wants(4500, &[0, 0, 1, 0, 0x11]));
        assert!(!Punt::wants(4500, &[0xff]));
        assert!(!Punt::wants(53, &[0, 0, 0, 0, 1]));
    }

    #[test]
    fn punt_is_bounded_and_slots_recycle() {
        let p = Punt::new(2);
        let (l, r) = (sa("192.0.2.1:500"), sa("192.0.2.2:500"));
        assert!(p.punt(b"one", l, r, 0));
        assert!(p.punt(b"two", l, r, 0));
        assert!(!p.punt(b"three", l, r, 0), "no free slot");
        assert_eq!(p.counters.punt_full.load(Ordering::Relaxed), 1);
        assert!(!p.punt(&[0u8; SLOT_SIZE + 1], l, r, 0));
        assert_eq!(p.counters.punt_too_large.load(Ordering::Relaxed), 1);
        let d = p.recv_timeout(Duration::from_millis(10)).unwrap();
        assert_eq!(d.data(), b"one");
        assert_eq!((d.local, d.remote), (l, r));
        p.release(d);
        assert!(p.punt(b"four", l, r, 3));
        assert_eq!(p.recv_timeout(Duration::ZERO).unwrap().data(), b"two");
        let d = p.recv_timeout(Duration::ZERO).unwrap();
        assert_eq!((d.data(), d.vrf), (&b"four"[..], 3));
    }

    #[test]
    fn inject_builds_ipv4_udp() {
        let p = Punt::new(4);
        let mut pool = Pool::new(4);
        let payload = [0u8, 0, 0, 0, 0xaa, 0xbb, 0xcc];
        p.inject(&payload, sa("192.0.2.1:4500"), sa("198.51.100.7:4500"), 2)
            .unwrap();
        assert_eq!(
            p.inject(&payload, sa("192.0.2.1:4500"), sa("[2001:db8::1]:4500"), 2),
            Err(InjectError::MixedFamilies)
        );
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        p.drain_inject(&mut pool, &mut v4, &mut v6, 8);
        assert_eq!((v4.len(), v6.len()), (1, 0));
        let pk = &v4[0];
        let d = pk.data();
        assert_eq!(d.len(), 20 + 8 + payload.len());
        assert_eq!(d[0], 0x45);
        assert_eq!(d[9], 17);
        assert!(checksum::verify(&d[..20]));
        assert_eq!(&d[12..16], &[192, 0, 2, 1]);
        assert_eq!(&d[16..20], &[198, 51, 100, 7]);
        assert_eq!(u16::from_be_bytes([d[20], d[21]]), 4500);
        assert_eq!(
            u16::from_be_bytes([d[24], d[25]]) as usize,
            8 + payload.len()
        );
        let ph = checksum::pseudo_header_v4(
            &"192.0.2.1".parse().unwrap(),
            &"198.51.100.7".parse().unwrap(),
            17,
            (8 + payload.len()) as u16,
        );
        assert_eq!(checksum::combine(&[ph, checksum::data(&d[20..])]), 0xffff);
        assert_eq!(&d[28..], &payload);
        assert_eq!(pk.meta.vrf, 2);
        assert_ne!(pk.meta.flags & flags::LOCAL, 0);
        // The slot went back: all four are free again.
        for _ in 0..4 {
            assert!(p.punt(b"x", sa("192.0.2.1:500"), sa("192.0.2.2:500"), 0));
        }
    }

    #[test]
    fn a_full_punt_direction_leaves_inject_its_slots() {
        let p = Punt::new(2);
        let (l, r) = (sa("192.0.2.1:500"), sa("192.0.2.2:500"));
        // A flood holds every punt slot (queued, not yet taken).
        assert!(p.punt(b"a", l, r, 0) && p.punt(b"b", l, r, 0));
        assert!(!p.punt(b"c", l, r, 0));
        // The control plane still transmits, with both of its slots.
        p.inject(b"dpd", l, r, 0).unwrap();
        p.inject(b"rekey", l, r, 0).unwrap();
        assert_eq!(p.inject(b"x", l, r, 0), Err(InjectError::Full));
        let mut pool = Pool::new(4);
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        p.drain_inject(&mut pool, &mut v4, &mut v6, 8);
        assert_eq!(v4.len(), 2);
        // Injected slots go back to transmit, not to the punt flood.
        assert!(!p.punt(b"d", l, r, 0));
        p.inject(b"again", l, r, 0).unwrap();
    }

    #[test]
    fn inject_builds_ipv6_udp() {
        let p = Punt::new(1);
        let mut pool = Pool::new(1);
        p.inject(b"ike", sa("[2001:db8::1]:500"), sa("[2001:db8::2]:500"), 0)
            .unwrap();
        assert_eq!(
            p.inject(b"ike", sa("[2001:db8::1]:500"), sa("[2001:db8::2]:500"), 0),
            Err(InjectError::Full)
        );
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        p.drain_inject(&mut pool, &mut v4, &mut v6, 8);
        assert_eq!(v6.len(), 1);
        let d = v6[0].data();
        assert_eq!(d[0] >> 4, 6);
        assert_eq!((d[6], d[7]), (17, 64));
        assert_eq!(u16::from_be_bytes([d[4], d[5]]), 8 + 3);
        let ph = checksum::pseudo_header_v6(
            &"2001:db8::1".parse().unwrap(),
            &"2001:db8::2".parse().unwrap(),
            17,
            11,
        );
        assert_eq!(checksum::combine(&[ph, checksum::data(&d[40..])]), 0xffff);
        assert_eq!(&d[48..], b"ike");
        // No packet buffer: counted, slot recycled.
        let mut empty = Pool::new(0);
        p.inject(b"x", sa("[2001:db8::1]:500"), sa("[2001:db8::2]:500"), 0)
            .unwrap();
        p.drain_inject(&mut empty, &mut v4, &mut v6, 8);
        assert_eq!(p.counters.inject_no_buffer.load(Ordering::Relaxed), 1);
        assert!(p
            .inject(b"y", sa("[2001:db8::1]:500"), sa("[2001:db8::2]:500"), 0)
            .is_ok());
    }
}
