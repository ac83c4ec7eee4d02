//! Test support: an in-memory [`MockPort`] and frame builders / dissectors
//! written with the `wire` crate's Reprs (independent of the nodes' own
//! byte handling). Compiled for this crate's tests and with the `testing`
//! feature.

use packet::buffer::{Gso, Offload, Packet, Pool};
use packet::port::{Port, PortDrops, Sent};
use packet::tx_check::{self, TxFault, TxLimits};
use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use wire::arp::{ArpRepr, Operation};
use wire::ethernet::{EthernetRepr, Frame, MacAddr};
use wire::icmpv4::Icmpv4Repr;
use wire::icmpv6::Icmpv6Repr;
use wire::ipv4::Ipv4Repr;
use wire::ipv6::Ipv6Repr;

#[derive(Default)]
struct Queues {
    rx: VecDeque<(Vec<u8>, Offload)>,
    tx: Vec<(Vec<u8>, Offload)>,
    /// Reported (and reset) by the next `take_drops`.
    drops: PortDrops,
    /// Packets one `tx_burst` takes at most; the rest count as `tx_full`.
    tx_room: Option<usize>,
    /// Frames that broke the transmit invariant ([`tx_check`]): refused
    /// and kept here when [`MockHandle::refuse_invalid`] is on, otherwise
    /// the burst panics.
    invalid: Vec<(TxFault, usize)>,
    refuse_invalid: bool,
}

/// The test side of a [`MockPort`]: inject frames, collect transmitted ones.
#[derive(Clone)]
pub struct MockHandle {
    q: Arc<Mutex<Queues>>,
    fail: Arc<AtomicBool>,
}

impl MockHandle {
    pub fn inject(&self, frame: Vec<u8>) {
        self.inject_with(frame, Offload::default());
    }

    pub fn inject_with(&self, frame: Vec<u8>, o: Offload) {
        self.q
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rx
            .push_back((frame, o));
    }

    /// Frames transmitted since the last call.
    pub fn take_tx(&self) -> Vec<Vec<u8>> {
        self.take_tx_with().into_iter().map(|(f, _)| f).collect()
    }

    pub fn take_tx_with(&self) -> Vec<(Vec<u8>, Offload)> {
        std::mem::take(&mut self.q.lock().unwrap_or_else(|e| e.into_inner()).tx)
    }

    /// Adds to the drops the port reports at its next `take_drops`, as a
    /// backend would after the kernel lost frames.
    pub fn add_drops(&self, d: PortDrops) {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        q.drops.rx_ring_full += d.rx_ring_full;
        q.drops.rx_bad += d.rx_bad;
        q.drops.tx_rejected += d.tx_rejected;
        q.drops.tx_full += d.tx_full;
    }

    /// Limits how many packets one `tx_burst` accepts (a full ring); the
    /// rest are refused and reported as `tx_full`. `None`: unlimited.
    pub fn set_tx_room(&self, room: Option<usize>) {
        self.q.lock().unwrap_or_else(|e| e.into_inner()).tx_room = room;
    }

    /// Refuses a frame that breaks the transmit invariant and counts it as
    /// `tx_rejected`, as a backend does in a debug build, instead of
    /// panicking (the default: every test that transmits checks it).
    pub fn refuse_invalid(&self, on: bool) {
        self.q
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refuse_invalid = on;
    }

    /// Frames refused since the last call: why, and their length.
    pub fn take_invalid(&self) -> Vec<(TxFault, usize)> {
        std::mem::take(&mut self.q.lock().unwrap_or_else(|e| e.into_inner()).invalid)
    }

    /// Makes every burst fail (netdev gone) until reset.
    pub fn set_fail(&self, fail: bool) {
        self.fail.store(fail, Ordering::Relaxed);
    }
}

/// An in-memory port.
pub struct MockPort {
    name: String,
    mac: [u8; 6],
    mtu: u32,
    offloads: bool,
    udp_gso: bool,
    h: MockHandle,
}

impl MockPort {
    pub fn new(name: &str, mac: [u8; 6], mtu: u32) -> (Self, MockHandle) {
        let h = MockHandle {
            q: Arc::default(),
            fail: Arc::default(),
        };
        (
            MockPort {
                name: name.to_string(),
                mac,
                mtu,
                offloads: false,
                udp_gso: false,
                h: h.clone(),
            },
            h,
        )
    }

    pub fn with_offloads(mut self, on: bool) -> Self {
        self.offloads = on;
        self
    }

    /// Also sends UDP GSO datagrams whole ([`Port::udp_gso`]).
    pub fn with_udp_gso(mut self, on: bool) -> Self {
        self.udp_gso = on;
        self
    }
}

impl Port for MockPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<Packet>,
        max: usize,
    ) -> io::Result<usize> {
        if self.h.fail.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(
                rustix::io::Errno::NODEV.raw_os_error(),
            ));
        }
        let mut q = self.h.q.lock().unwrap_or_else(|e| e.into_inner());
        let (mut n, mut budget) = (0, 0);
        while budget < max {
            let Some((f, o)) = q.rx.pop_front() else {
                break;
            };
            // Sized to the frame, as the real backends take them.
            let Some(mut p) = pool.alloc_for(f.len()) else {
                q.rx.push_front((f, o));
                break;
            };
            p.set_data(&f);
            p.meta.offload = o;
            budget += p.wire_segments();
            out.push(p);
            n += 1;
        }
        Ok(n)
    }

    fn tx_burst(&mut self, pkts: &mut Vec<Packet>, pool: &mut Pool) -> io::Result<Sent> {
        if self.h.fail.load(Ordering::Relaxed) {
            pool.free_all(pkts);
            return Err(io::Error::from_raw_os_error(
                rustix::io::Errno::NODEV.raw_os_error(),
            ));
        }
        let mut q = self.h.q.lock().unwrap_or_else(|e| e.into_inner());
        let n = pkts.len().min(q.tx_room.unwrap_or(usize::MAX));
        q.drops.tx_full += (pkts.len() - n) as u64;
        let lim = TxLimits::ethernet(self.mtu, self.offloads, self.udp_gso());
        let mut sent = Sent::default();
        for p in pkts.drain(..n) {
            match tx_check::check(p.data(), &p.meta.offload, &lim) {
                Ok(_) => {
                    q.tx.push((p.data().to_vec(), p.meta.offload));
                    sent.add(p.len());
                }
                Err(f) if q.refuse_invalid => {
                    q.invalid.push((f, p.len()));
                    q.drops.tx_rejected += 1;
                }
                Err(f) => panic!(
                    "port {}: transmit invariant broken ({f}): {} bytes, {:?}",
                    self.name,
                    p.len(),
                    p.meta.offload
                ),
            }
            pool.free(p);
        }
        pool.free_all(pkts);
        Ok(sent)
    }

    fn poll_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn mtu(&self) -> u32 {
        self.mtu
    }

    fn offloads(&self) -> bool {
        self.offloads
    }

    fn udp_gso(&self) -> bool {
        self.offloads && self.udp_gso
    }

    fn take_drops(&mut self) -> PortDrops {
        std::mem::take(&mut self.h.q.lock().unwrap_or_else(|e| e.into_inner()).drops)
    }
}

/// An Ethernet frame `src_mac` → `dst_mac` holding a TCP super-packet
/// (IPv4 `src` → `dst`, ports 40000 → 5201, ACK, sequence number `seq`)
/// of `payload` bytes (a pattern that does not repeat every 256 bytes), as
/// a host with TSO hands it over: checksum partial, marked `TcpV4` with
/// `mss`.
pub fn tcp4_super(
    (dst_mac, src_mac): ([u8; 6], [u8; 6]),
    (src, dst): (Ipv4Addr, Ipv4Addr),
    mss: u16,
    payload: usize,
    seq: u32,
) -> (Vec<u8>, Offload) {
    let mut tcp = vec![0u8; 20 + payload];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x10;
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    for (i, b) in tcp[20..].iter_mut().enumerate() {
        *b = (i * 7 + i / 251) as u8;
    }
    let ph = wire::checksum::pseudo_header_v4(&src, &dst, 6, tcp.len() as u16);
    tcp[16..18].copy_from_slice(&ph.to_be_bytes());
    let frame = eth(dst_mac, src_mac, 0x0800, &ipv4(src, dst, 6, 64, true, &tcp));
    let o = Offload {
        needs_csum: true,
        csum_valid: false,
        csum_start: 34,
        csum_offset: 16,
        gso: Gso::TcpV4,
        gso_size: mss,
        hdr_len: 54,
    };
    (frame, o)
}

/// Ethernet frame around `payload`.
pub fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let r = EthernetRepr {
        src_addr: MacAddr(src),
        dst_addr: MacAddr(dst),
        vlan: None,
        inner_vlan: None,
        ethertype,
    };
    let mut b = vec![0u8; r.buffer_len(payload.len())];
    r.emit(&mut Frame::new_unchecked(&mut b[..]));
    b[r.header_len()..].copy_from_slice(payload);
    b
}

/// ARP packet (28 bytes).
pub fn arp(op: Operation, sha: [u8; 6], spa: Ipv4Addr, tha: [u8; 6], tpa: Ipv4Addr) -> Vec<u8> {
    let r = ArpRepr {
        operation: op,
        source_hardware_addr: MacAddr(sha),
        source_protocol_addr: spa,
        target_hardware_addr: MacAddr(tha),
        target_protocol_addr: tpa,
    };
    let mut b = vec![0u8; wire::arp::ETH_IPV4_LEN];
    r.emit(&mut wire::arp::Packet::new_unchecked(&mut b[..]));
    b
}

/// IPv4 packet with a valid header checksum.
pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, ttl: u8, df: bool, payload: &[u8]) -> Vec<u8> {
    let r = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: proto,
        payload_len: payload.len(),
        ttl,
        tos: 0,
        ident: 0x1234,
        dont_frag: df,
        more_frags: false,
        frag_offset: 0,
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut wire::ipv4::Packet::new_unchecked(&mut b[..]))
        .expect("ipv4 emit");
    b[20..].copy_from_slice(payload);
    b
}

/// ICMP echo request.
pub fn icmp4_echo(ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
    let r = Icmpv4Repr::EchoRequest {
        ident,
        seq_no,
        data,
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut wire::icmpv4::Packet::new_unchecked(&mut b[..]))
        .expect("icmp emit");
    b
}

/// IPv6 packet.
pub fn ipv6(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next_header: u8,
    hop_limit: u8,
    payload: &[u8],
) -> Vec<u8> {
    let r = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header,
        payload_len: payload.len(),
        hop_limit,
        traffic_class: 0,
        flow_label: 0,
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut wire::ipv6::Packet::new_unchecked(&mut b[..]))
        .expect("ipv6 emit");
    b[40..].copy_from_slice(payload);
    b
}

/// ICMPv6 message with its checksum for `src`/`dst`.
pub fn icmp6(src: Ipv6Addr, dst: Ipv6Addr, r: &Icmpv6Repr<'_>) -> Vec<u8> {
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(
        &src,
        &dst,
        &mut wire::icmpv6::Packet::new_unchecked(&mut b[..]),
    )
    .expect("icmpv6 emit");
    b
}

/// What a transmitted frame is, as an independent dissector (the `wire`
/// Reprs, which verify every checksum) sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Arp(EthernetRepr, ArpRepr),
    Icmp4(EthernetRepr, Ipv4Repr, u8, u8, Vec<u8>),
    Icmp6(EthernetRepr, Ipv6Repr, u8, u8, Vec<u8>),
    Ip4(EthernetRepr, Ipv4Repr),
    Ip6(EthernetRepr, Ipv6Repr),
}

/// Dissects a frame; panics (test helper) on anything invalid, including a
/// bad checksum.
pub fn dissect(f: &[u8]) -> Seen {
    let fr = Frame::new_checked(f).expect("ethernet");
    let e = EthernetRepr::parse(&fr).expect("ethernet repr");
    let pl = &f[e.header_len()..];
    match e.ethertype {
        0x0806 => Seen::Arp(
            e,
            ArpRepr::parse(&wire::arp::Packet::new_checked(pl).expect("arp")).expect("arp repr"),
        ),
        0x0800 => {
            let p = wire::ipv4::Packet::new_checked(pl).expect("ipv4");
            let r = Ipv4Repr::parse(&p).expect("ipv4 repr (checksum)");
            let body = &pl[p.header_len()..p.header_len() + r.payload_len];
            // A fragment's ICMP checksum covers data it does not hold.
            if r.protocol == 1 && !r.more_frags && r.frag_offset == 0 {
                let ip = wire::icmpv4::Packet::new_checked(body).expect("icmp");
                assert!(ip.verify_checksum(), "icmp checksum");
                Seen::Icmp4(e, r, body[0], body[1], body.to_vec())
            } else {
                Seen::Ip4(e, r)
            }
        }
        0x86dd => {
            let p = wire::ipv6::Packet::new_checked(pl).expect("ipv6");
            let r = Ipv6Repr::parse(&p).expect("ipv6 repr");
            let body = &pl[40..40 + r.payload_len];
            if r.next_header == 58 {
                let ip = wire::icmpv6::Packet::new_checked(body).expect("icmpv6");
                assert!(
                    ip.verify_checksum(&r.src_addr, &r.dst_addr),
                    "icmpv6 checksum"
                );
                Seen::Icmp6(e, r, body[0], body[1], body.to_vec())
            } else {
                Seen::Ip6(e, r)
            }
        }
        t => panic!("unexpected ethertype {t:#x}"),
    }
}
