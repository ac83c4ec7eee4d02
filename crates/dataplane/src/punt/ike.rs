//! Punt and inject: IKE datagrams between the graph and the control plane.
//!
//! Why not a kernel UDP socket: vecgate owns its netdevs through AF_PACKET
//! and an ingress guard drops every frame before the host stack
//! (`vecgate_io::netdev`), so a socket on UDP 500 / 4500 in the gateway's
//! namespace never receives anything, and the host's routes do not know
//! vecgate's VRFs. IKE (RFC 7296 §2, RFC 3948 §2.2) therefore travels
//! through the dataplane like any local traffic:
//!
//! * **punt** — ip-local hands UDP to port 500, and UDP to port 4500 that
//!   starts with the 4-byte non-ESP marker, for one of our addresses, to
//!   [`IkePunt::punt`]: the UDP payload is copied into a preallocated slot and
//!   queued with its addresses and underlay VRF. A full queue (or no free
//!   slot) drops the datagram and counts it; IKE retransmits. No
//!   allocation, no lock and no blocking in the worker.
//! * **inject** — the control plane hands a datagram to [`IkePunt::inject`];
//!   every worker drains the queue once per loop ([`IkePunt::drain_inject`]),
//!   wraps the payload in IPv4/IPv6 + UDP built here and routes it in the
//!   given VRF through ip4/ip6-lookup, exactly as an encapsulated packet
//!   leaves (so ARP/ND, the FIB and the output ports are the dataplane's).
//!
//! Each direction has its own fixed slots ([`crate::punt::slot_queue`]): a
//! flood that fills every punt slot leaves the control plane its transmit
//! slots, so its retransmissions, liveness checks and rekeys still leave.
//! Inbound, datagrams that carry an SPI of one of our live IKE SAs (the
//! control plane publishes them, [`IkePunt::set_known_spis`]) go to a queue
//! of their own ([`Class::Known`]), which the control plane serves first:
//! a spoofed flood — IKE_SA_INITs, or anything else without an SPI only
//! the peer knows — fills the other queue only, and never starves DPD,
//! rekeys and the answers to our requests (RFC 7296 §2.6: the SPIs, not
//! the addresses, identify an IKE SA). The caller of `inject` passes the
//! UDP payload as the IKE library produced it (non-ESP marker included on
//! port 4500); `punt` delivers it the same way, marker included, as the
//! library expects.

use crate::graph::flags;
use crate::punt::slot_queue::{PushError, Slot, SlotQueue};
use arc_swap::ArcSwap;
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
/// Slots per [`IkePunt`] direction by default.
pub const DEFAULT_SLOTS: usize = 256;
/// Slots of the inbound queue of datagrams for our live IKE SAs
/// ([`Class::Known`]): a few exchanges' worth per SA, fragments included.
pub const KNOWN_SLOTS: usize = 64;

const IP4_HDR: usize = 20;
const IP6_HDR: usize = 40;
const UDP_HDR: usize = 8;

/// Which inbound queue a datagram took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// It carries an SPI of a live IKE SA of ours ([`IkePunt::set_known_spis`]).
    Known,
    /// Anything else: new IKE_SA_INITs, strangers, floods (and transmit).
    Other,
}

/// A datagram's addresses and underlay VRF.
#[derive(Debug, Clone, Copy)]
pub struct Endpoints {
    /// Our address and port.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
    /// Index of the underlay VRF in the tables (`Meta::vrf`).
    pub vrf: u16,
    /// The queue it came through.
    pub class: Class,
}

/// One datagram in a slot: `data()` is the UDP payload; `local`, `remote`,
/// `vrf` and `class` its [`Endpoints`].
pub type Datagram = Slot<Endpoints>;

/// Why [`IkePunt::inject`] refused a datagram.
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
    /// Datagrams queued to the control plane (both classes).
    pub punted: AtomicU64,
    /// Dropped: no free slot or queue full (both classes).
    pub punt_full: AtomicU64,
    /// Dropped: larger than a slot.
    pub punt_too_large: AtomicU64,
    /// Of `punted`: for a live IKE SA of ours ([`Class::Known`]).
    pub punted_known: AtomicU64,
    /// Of `punt_full`: for a live IKE SA of ours.
    pub punt_full_known: AtomicU64,
    /// Datagrams built and routed by a worker.
    pub injected: AtomicU64,
    /// Dropped by a worker: no packet buffer.
    pub inject_no_buffer: AtomicU64,
}

/// The punt / inject queues shared by the workers and the control thread.
pub struct IkePunt {
    /// Inbound, for our live IKE SAs: served first.
    known: SlotQueue<Endpoints>,
    /// Inbound, everything else.
    other: SlotQueue<Endpoints>,
    /// Outbound (never shares a slot with the inbound queues).
    tx: SlotQueue<Endpoints>,
    /// Our SPIs of live IKE SAs, sorted.
    spis: ArcSwap<Vec<u64>>,
    ip_id: AtomicU64,
    pub counters: PuntCounters,
}

impl std::fmt::Debug for IkePunt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IkePunt")
            .field("known", &self.known)
            .field("other", &self.other)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl IkePunt {
    /// Preallocates `slots` slots for the inbound queue of other
    /// datagrams and for transmit, [`KNOWN_SLOTS`] for the known queue
    /// (the only allocation of this path).
    pub fn new(slots: usize) -> Arc<IkePunt> {
        Arc::new(IkePunt {
            known: SlotQueue::new(KNOWN_SLOTS, SLOT_SIZE),
            other: SlotQueue::new(slots, SLOT_SIZE),
            tx: SlotQueue::new(slots, SLOT_SIZE),
            spis: ArcSwap::from_pointee(Vec::new()),
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

    /// Publishes the SPIs of our live IKE SAs (control side): datagrams
    /// carrying one go to the known queue.
    pub fn set_known_spis(&self, mut spis: Vec<u64>) {
        spis.retain(|s| *s != 0);
        spis.sort_unstable();
        spis.dedup();
        if **self.spis.load() != spis {
            self.spis.store(Arc::new(spis));
        }
    }

    /// The class of an IKE message (`payload`, marker included on the
    /// NAT-T port): known when its initiator's or responder's SPI (RFC
    /// 7296 §3.1) is one of ours.
    fn class_of(&self, payload: &[u8], local: SocketAddr) -> Class {
        let msg = if local.port() == NAT_T_PORT {
            payload.get(4..).unwrap_or_default()
        } else {
            payload
        };
        let spi = |r: std::ops::Range<usize>| {
            msg.get(r)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map_or(0, u64::from_be_bytes)
        };
        let known = self.spis.load();
        let ours = |s: u64| s != 0 && known.binary_search(&s).is_ok();
        if !known.is_empty() && (ours(spi(0..8)) || ours(spi(8..16))) {
            Class::Known
        } else {
            Class::Other
        }
    }

    /// Queues a copy of `payload` for the control plane (worker side):
    /// Ok with the queue it took, Err with the queue that was full (or
    /// `Other` when larger than a slot); counted either way.
    pub fn punt_class(
        &self,
        payload: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        vrf: u16,
    ) -> Result<Class, Class> {
        let class = self.class_of(payload, local);
        let q = match class {
            Class::Known => &self.known,
            Class::Other => &self.other,
        };
        let c = &self.counters;
        let meta = Endpoints {
            local,
            remote,
            vrf,
            class,
        };
        match q.push_copy(payload, meta) {
            Ok(()) => {
                c.punted.fetch_add(1, Ordering::Relaxed);
                if class == Class::Known {
                    c.punted_known.fetch_add(1, Ordering::Relaxed);
                }
                Ok(class)
            }
            Err(PushError::TooLarge) => {
                c.punt_too_large.fetch_add(1, Ordering::Relaxed);
                Err(Class::Other)
            }
            Err(_) => {
                c.punt_full.fetch_add(1, Ordering::Relaxed);
                if class == Class::Known {
                    c.punt_full_known.fetch_add(1, Ordering::Relaxed);
                }
                Err(class)
            }
        }
    }

    /// [`IkePunt::punt_class`], `false` when dropped.
    pub fn punt(&self, payload: &[u8], local: SocketAddr, remote: SocketAddr, vrf: u16) -> bool {
        self.punt_class(payload, local, remote, vrf).is_ok()
    }

    /// Waits up to `timeout` for a punted datagram of either class, known
    /// first (control side); give it back with [`IkePunt::release`].
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Datagram> {
        if let Some(d) = self.known.try_pop().or_else(|| self.other.try_pop()) {
            return Some(d);
        }
        crossbeam_channel::select! {
            recv(self.known.receiver()) -> d => d.ok(),
            recv(self.other.receiver()) -> d => d.ok(),
            default(timeout) => None,
        }
    }

    /// A queued datagram of `class`, without waiting.
    pub fn try_recv(&self, class: Class) -> Option<Datagram> {
        match class {
            Class::Known => self.known.try_pop(),
            Class::Other => self.other.try_pop(),
        }
    }

    /// Returns a datagram's slot to its queue's free list.
    pub fn release(&self, d: Datagram) {
        match d.class {
            Class::Known => self.known.release(d),
            Class::Other => self.other.release(d),
        }
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
        if local.is_ipv4() != remote.is_ipv4() {
            return Err(InjectError::MixedFamilies);
        }
        let meta = Endpoints {
            local,
            remote,
            vrf,
            class: Class::Other,
        };
        self.tx.push_copy(payload, meta).map_err(|e| match e {
            PushError::TooLarge => InjectError::TooLarge,
            _ => InjectError::Full,
        })
    }

    /// Transmit slots free now.
    pub fn inject_free(&self) -> usize {
        self.tx.free()
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
            let Some(d) = self.tx.try_pop() else {
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
            self.tx.release(d);
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
        assert!(IkePunt::wants(500, &[1, 2, 3]));
        assert!(IkePunt::wants(4500, &[0, 0, 0, 0, 0x11]));
        // ESP (non-zero SPI) and the NAT keepalive stay in the dataplane.
        assert!(!IkePunt::wants(4500, &[0, 0, 1, 0, 0x11]));
        assert!(!IkePunt::wants(4500, &[0xff]));
        assert!(!IkePunt::wants(53, &[0, 0, 0, 0, 1]));
    }

    #[test]
    fn punt_is_bounded_and_slots_recycle() {
        let p = IkePunt::new(2);
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
        let p = IkePunt::new(4);
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
        let p = IkePunt::new(2);
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

    /// An IKE header with these SPIs (RFC 7296 §3.1), then `rest`.
    fn ike(spi_i: u64, spi_r: u64) -> Vec<u8> {
        let mut m = spi_i.to_be_bytes().to_vec();
        m.extend_from_slice(&spi_r.to_be_bytes());
        m.extend_from_slice(&[33, 0x20, 37, 0x08, 0, 0, 0, 1, 0, 0, 0, 28]);
        m
    }

    #[test]
    fn a_flood_fills_its_own_queue_not_the_known_sas_one() {
        let p = IkePunt::new(4);
        let (l, r) = (sa("192.0.2.1:500"), sa("192.0.2.2:500"));
        p.set_known_spis(vec![0x1111, 0, 0x2222]);
        // A flood (new INITs, other SPIs) from the peer's own address
        // fills the other queue.
        for i in 0..10u64 {
            let _ = p.punt(&ike(0x9000 + i, 0), l, r, 0);
        }
        assert_eq!(p.counters.punt_full.load(Ordering::Relaxed), 6);
        assert_eq!(p.punt_class(&ike(0x77, 0), l, r, 0), Err(Class::Other));
        // Our SAs' datagrams (either SPI ours) still get through, on
        // 500 and behind the non-ESP marker on 4500.
        assert_eq!(p.punt_class(&ike(0x1111, 0x5), l, r, 0), Ok(Class::Known));
        assert_eq!(p.punt_class(&ike(0x6, 0x2222), l, r, 0), Ok(Class::Known));
        let mut natt = vec![0u8; 4];
        natt.extend_from_slice(&ike(0x6, 0x2222));
        let (l4, r4) = (sa("192.0.2.1:4500"), sa("192.0.2.2:4500"));
        assert_eq!(p.punt_class(&natt, l4, r4, 0), Ok(Class::Known));
        // A zero SPI is nobody's.
        assert_eq!(p.punt_class(&ike(0, 0), l, r, 0), Err(Class::Other));
        assert_eq!(p.counters.punted_known.load(Ordering::Relaxed), 3);
        assert_eq!(p.counters.punt_full_known.load(Ordering::Relaxed), 0);
        // The control plane is handed the known ones first.
        for _ in 0..3 {
            let d = p.recv_timeout(Duration::ZERO).unwrap();
            assert_eq!(d.class, Class::Known);
            p.release(d);
        }
        let d = p.recv_timeout(Duration::ZERO).unwrap();
        assert_eq!(d.class, Class::Other);
        p.release(d);
        assert!(p.try_recv(Class::Known).is_none());
        // Slots went back to their own queue.
        assert!(p.punt(&ike(0x1111, 0), l, r, 0));
        assert!(p.punt(&ike(0x99, 0), l, r, 0));
        assert!(!p.punt(&ike(0x98, 0), l, r, 0));
    }

    #[test]
    fn inject_builds_ipv6_udp() {
        let p = IkePunt::new(1);
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
