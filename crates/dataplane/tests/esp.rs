//! The ESP graph nodes with real SAs: two gateways (and, for one SA over
//! several cores, two workers on one side) joined by MockPorts.
//! H_A — gwA ==ESP== gwB — H_B: round trips for every algorithm and both
//! outer families, NAT-T, drop reasons (replay, bit flip, wrong SPI,
//! truncation, policy), IKE / keepalive classification, make-before-break
//! SA switch.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use dataplane::counters::CounterSnapshot;
use dataplane::esp::EspTunnelDef;
use dataplane::fib::Prefix;
use dataplane::tables::{IfFlags, Route, SharedTables, Tables, TablesBuilder};
use dataplane::testing::{
    arp, dissect, eth, icmp4_echo, ipv4, tcp4_super, MockHandle, MockPort, Seen,
};
use dataplane::worker::{Worker, WorkerConfig};
use packet::buffer::{Gso, Offload};
use packet::Port;
use vecgate_ipsec::EspRegistry;
use vecgate_ipsec::{
    Algorithm, InboundSa, Lifetime, OutboundSa, SaConfig, Selector, Selectors, TunnelEndpoints,
    UdpEncap,
};
use wire::arp::Operation;
use zeroize::Zeroizing;

const LAN: [[u8; 6]; 2] = [[2, 0, 0, 0xa, 0, 1], [2, 0, 0, 0xb, 0, 1]];
const WAN: [[u8; 6]; 2] = [[2, 0, 0, 0xa, 0, 2], [2, 0, 0, 0xb, 0, 2]];
const HOST: [[u8; 6]; 2] = [[2, 0, 0, 0xa, 1, 1], [2, 0, 0, 0xb, 1, 1]];
const TUN_MAC: [u8; 6] = [2, 0, 0, 0xe, 0, 1];

fn host_ip(side: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, side as u8 + 1, 0, 10)
}

fn outer(side: usize, v6: bool) -> IpAddr {
    if v6 {
        format!("2001:db8:ff::{}", side + 1).parse().unwrap()
    } else {
        format!("192.0.2.{}", side + 1).parse().unwrap()
    }
}

/// SPI of the SA carrying side `from`'s traffic (generation `gen`).
fn spi(from: usize, gen: u32) -> u32 {
    0x1000 + gen * 0x100 + from as u32
}

fn key(alg: Algorithm, from: usize, gen: u32) -> Zeroizing<Vec<u8>> {
    Zeroizing::new(
        (0..alg.key_len())
            .map(|i| (i as u8).wrapping_mul(7) ^ (from as u8 * 0x55) ^ gen as u8)
            .collect(),
    )
}

#[derive(Clone, Copy)]
struct Opts {
    alg: Algorithm,
    v6: bool,
    nat_t: bool,
}

fn sa_cfg(o: Opts, side: usize, from: usize, gen: u32) -> SaConfig {
    SaConfig {
        spi: spi(from, gen),
        algorithm: o.alg,
        key: key(o.alg, from, gen),
        esn: true,
        replay_window: 256,
        lifetime: Lifetime::default(),
        tunnel: TunnelEndpoints {
            local: outer(side, o.v6),
            remote: outer(1 - side, o.v6),
        },
        encap: o.nat_t.then_some(UdpEncap {
            sport: 4500,
            dport: 4500,
        }),
        df: true,
    }
}

/// Tables of side `side`: lan port 0 (VRF 1), wan port 1 (VRF 0), the
/// ESP tunnel on virtual port 2 (VRF 1);
/// `wan_offloads`: the wan interface sends super-packets.
fn tables(side: usize, o: Opts, reg: &EspRegistry, traffic: &str, wan_offloads: bool) -> Tables {
    let mut b = TablesBuilder::new();
    b.add_vrf(1, "t1");
    let lan = Prefix::new(IpAddr::V4(Ipv4Addr::new(10, side as u8 + 1, 0, 1)), 24).unwrap();
    b.add_interface(0, "lan", LAN[side], 1500, 1, &[lan]);
    let wan = Prefix::new(outer(side, o.v6), if o.v6 { 64 } else { 24 }).unwrap();
    b.add_interface(1, "wan", WAN[side], 1500, 0, &[wan]);
    b.set_flags(
        1,
        IfFlags {
            offloads: wan_offloads,
            ..IfFlags::default()
        },
    );
    let tx = reg.tunnel_tx(7).unwrap();
    let mtu = 1500 - tx.overhead() as u32;
    b.add_interface(2, "esp0", TUN_MAC, mtu, 1, &[]);
    b.add_esp_tunnel(
        2,
        EspTunnelDef {
            id: 7,
            local: outer(side, o.v6),
            remote: outer(1 - side, o.v6),
            underlay_vrf: 0,
            nat_t: o.nat_t,
            traffic: vec![traffic.parse().unwrap()],
            tx,
        },
    );
    b.set_esp_sad(reg.sad());
    let remote: Prefix = format!("10.{}.0.0/24", 2 - side).parse().unwrap();
    b.add_route(1, remote, Route::Port { port: 2 });
    b.build().unwrap()
}

fn registry(side: usize, o: Opts) -> EspRegistry {
    let reg = EspRegistry::new();
    reg.add_tunnel(
        7,
        "esp0",
        OutboundSa::new(sa_cfg(o, side, side, 0)).unwrap(),
    )
    .unwrap();
    reg.install_inbound(7, InboundSa::new(sa_cfg(o, side, 1 - side, 0)).unwrap())
        .unwrap();
    reg
}

struct Pair {
    /// Workers; `w[2]`, if present, is a second worker of side A with its
    /// own ports, sharing A's tables and SAs.
    w: Vec<Worker>,
    reg: Vec<EspRegistry>,
    lan: Vec<MockHandle>,
    wan: Vec<MockHandle>,
    now: u64,
    underlay: Vec<Vec<u8>>,
    /// The offload state of each `underlay` frame (a UDP GSO datagram when
    /// the wan ports take offloads).
    underlay_off: Vec<Offload>,
    got: [Vec<Vec<u8>>; 2],
    /// A→B ESP frames are recorded but not delivered ("in flight").
    hold: bool,
}

impl Pair {
    fn new(o: Opts, workers_a: usize) -> Pair {
        Self::with_traffic(o, workers_a, ["10.2.0.0/24", "10.1.0.0/24"])
    }

    /// `traffic[side]`: the inbound selector of side `side`.
    fn with_traffic(o: Opts, workers_a: usize, traffic: [&str; 2]) -> Pair {
        Self::build(o, workers_a, traffic, (false, false))
    }

    /// `offloads`: side A's host port takes super-packets, and so do both
    /// wan ports (UDP GSO datagrams cross the underlay whole, as over veth).
    fn build(o: Opts, workers_a: usize, traffic: [&str; 2], offloads: (bool, bool)) -> Pair {
        let (lan_offloads_a, wan_offloads) = offloads;
        let mut pr = Pair {
            w: Vec::new(),
            reg: Vec::new(),
            lan: Vec::new(),
            wan: Vec::new(),
            now: 1,
            underlay: Vec::new(),
            underlay_off: Vec::new(),
            got: [Vec::new(), Vec::new()],
            hold: false,
        };
        let mut shared = Vec::new();
        for (side, sel) in traffic.iter().enumerate() {
            let reg = registry(side, o);
            shared.push(SharedTables::new(tables(side, o, &reg, sel, wan_offloads)));
            pr.reg.push(reg);
        }
        let sides: Vec<usize> = [0, 1]
            .into_iter()
            .chain((1..workers_a).map(|_| 0))
            .collect();
        for (i, side) in sides.into_iter().enumerate() {
            let (l, lh) = MockPort::new("lan", LAN[side], 1500);
            let l = l.with_offloads(lan_offloads_a && side == 0);
            let (w, wh) = MockPort::new("wan", WAN[side], 1500);
            let w = w.with_offloads(wan_offloads).with_udp_gso(wan_offloads);
            let ports: Vec<Box<dyn Port>> = vec![Box::new(l), Box::new(w)];
            pr.w.push(Worker::new(
                i,
                ports,
                shared[side].clone(),
                WorkerConfig::default(),
            ));
            pr.lan.push(lh);
            pr.wan.push(wh);
        }
        pr
    }

    fn side(i: usize) -> usize {
        usize::from(i == 1)
    }

    /// Runs every worker until quiet; the underlay wire joins each worker's
    /// wan port to the other side's first worker (B is worker 1); hosts
    /// answer ARP for themselves and peer routers answer ARP on the wan.
    fn pump(&mut self) {
        for _ in 0..30 {
            let mut moved = false;
            for i in 0..self.w.len() {
                let side = Self::side(i);
                self.w[i].step(self.now);
                for (f, off) in self.wan[i].take_tx_with() {
                    moved = true;
                    if f[12..14] == [8, 6] {
                        if let Seen::Arp(_, a) = dissect(&f) {
                            if a.operation == Operation::Request {
                                // The other side answers for its address.
                                self.wan[i].inject(eth(
                                    WAN[side],
                                    WAN[1 - side],
                                    0x0806,
                                    &arp(
                                        Operation::Reply,
                                        WAN[1 - side],
                                        a.target_protocol_addr,
                                        WAN[side],
                                        a.source_protocol_addr,
                                    ),
                                ));
                            }
                        }
                        continue;
                    }
                    if matches!(l4_of(&f).1, 17 | 50) {
                        self.underlay.push(f.clone());
                        self.underlay_off.push(off);
                        if self.hold && side == 0 {
                            continue;
                        }
                    }
                    let to = if side == 0 { 1 } else { 0 };
                    self.wan[to].inject_with(f, off);
                }
                for f in self.lan[i].take_tx() {
                    if f[12..14] == [8, 6] {
                        if let Seen::Arp(_, a) = dissect(&f) {
                            if a.target_protocol_addr == host_ip(side) {
                                self.lan[i].inject(eth(
                                    LAN[side],
                                    HOST[side],
                                    0x0806,
                                    &arp(
                                        Operation::Reply,
                                        HOST[side],
                                        host_ip(side),
                                        LAN[side],
                                        a.source_protocol_addr,
                                    ),
                                ));
                                moved = true;
                            }
                        }
                        continue;
                    }
                    self.got[side].push(f);
                }
            }
            self.now += 1;
            if !moved {
                break;
            }
        }
    }

    /// Host of worker `i`'s side sends `ip` into worker `i`'s lan port.
    fn send_on(&mut self, i: usize, ip: Vec<u8>) {
        let side = Self::side(i);
        self.lan[i].inject(eth(LAN[side], HOST[side], 0x0800, &ip));
        self.pump();
    }

    fn inject_wan(&mut self, i: usize, f: Vec<u8>) {
        self.wan[i].inject(f);
        self.pump();
    }

    fn snap(&self, i: usize) -> CounterSnapshot {
        self.w[i].counters().snapshot()
    }
}

fn echo(from: usize, seq: u16, len: usize) -> Vec<u8> {
    ipv4(
        host_ip(from),
        host_ip(1 - from),
        1,
        64,
        true,
        &icmp4_echo(9, seq, &vec![0x5a; len]),
    )
}

/// The ESP (or UDP) payload start of an underlay frame and its protocol.
fn l4_of(f: &[u8]) -> (usize, u8) {
    if f[12..14] == [0x86, 0xdd] {
        (14 + 40, f[14 + 6])
    } else {
        (14 + 20, f[14 + 9])
    }
}

/// Offset of the ESP header in an underlay frame.
fn esp_off(f: &[u8]) -> usize {
    let (l4, proto) = l4_of(f);
    if proto == 17 {
        l4 + 8
    } else {
        l4
    }
}

fn round_trip(o: Opts) {
    let mut pr = Pair::new(o, 1);
    let ip = echo(0, 1, 300);
    pr.send_on(0, ip.clone());
    assert_eq!(pr.got[1].len(), 1, "{:?}: H_B got the echo", o.alg);
    let f = pr.got[1].remove(0);
    let Seen::Icmp4(e, r, ty, _, body) = dissect(&f) else {
        panic!("not icmp")
    };
    assert_eq!(
        (r.src_addr, r.dst_addr, ty, r.ttl),
        (host_ip(0), host_ip(1), 8, 62)
    );
    assert_eq!(e.dst_addr.0, HOST[1]);
    assert_eq!(&body[8..], &ip[28..], "payload intact");
    pr.send_on(1, echo(1, 1, 50));
    assert_eq!(pr.got[0].len(), 1, "H_A got the reverse packet");
    // Every underlay frame is ESP (in UDP 4500 with NAT-T), none cleartext.
    assert_eq!(pr.underlay.len(), 2);
    for f in &pr.underlay {
        let (l4, proto) = l4_of(f);
        if o.nat_t {
            assert_eq!(proto, 17);
            assert_eq!(&f[l4..l4 + 4], &[0x11, 0x94, 0x11, 0x94], "ports 4500");
        } else {
            assert_eq!(proto, 50);
        }
        let s = esp_off(f);
        let got = u32::from_be_bytes(f[s..s + 4].try_into().unwrap());
        assert!(got == spi(0, 0) || got == spi(1, 0));
        assert!(!f.windows(32).any(|w| w == [0x5a; 32]), "no cleartext");
    }
    let b = pr.snap(1);
    assert_eq!(b.error("esp-decrypt", "decrypted"), 1);
    assert_eq!(pr.snap(0).error("esp-encrypt", "encrypted"), 1);
}

#[test]
fn every_algorithm_v4_outer() {
    for alg in Algorithm::ALL {
        round_trip(Opts {
            alg,
            v6: false,
            nat_t: false,
        });
    }
}

#[test]
fn every_algorithm_v6_outer() {
    for alg in Algorithm::ALL {
        round_trip(Opts {
            alg,
            v6: true,
            nat_t: false,
        });
    }
}

#[test]
fn nat_t_v4_and_v6() {
    for v6 in [false, true] {
        round_trip(Opts {
            alg: Algorithm::AesGcm128,
            v6,
            nat_t: true,
        });
    }
}

const GCM: Opts = Opts {
    alg: Algorithm::AesGcm128,
    v6: false,
    nat_t: false,
};

/// One captured A→B ESP frame (and the pair, with B having seen it).
fn captured(o: Opts) -> (Pair, Vec<u8>) {
    let mut pr = Pair::new(o, 1);
    pr.send_on(0, echo(0, 1, 100));
    assert_eq!(pr.got[1].len(), 1);
    pr.got[1].clear();
    let f = pr.underlay.last().unwrap().clone();
    (pr, f)
}

#[test]
fn replayed_packet_dropped_and_counted() {
    let (mut pr, f) = captured(GCM);
    pr.inject_wan(1, f);
    assert!(pr.got[1].is_empty(), "a replay never reaches H_B");
    assert_eq!(pr.snap(1).error("esp-decrypt", "replay"), 1);
}

#[test]
fn bit_flip_wrong_spi_truncation_dropped_by_reason() {
    let (mut pr, f) = captured(GCM);
    let s = esp_off(&f);
    // A fresh packet, held back, so the replay check does not hide the
    // ICV failure.
    pr.hold = true;
    pr.send_on(0, echo(0, 2, 100));
    pr.hold = false;
    let mut g = pr.underlay.pop().unwrap();
    pr.underlay.clear();
    let last = g.len() - 20;
    g[last] ^= 0x01;
    pr.inject_wan(1, g.clone());
    let mut w = f.clone();
    w[s + 3] ^= 0x40;
    pr.inject_wan(1, w);
    // Truncated: shorter than header + IV + ICV, IP length fixed up.
    let mut t = f[..s + 20].to_vec();
    let ip_len = (t.len() - 14) as u16;
    t[16..18].copy_from_slice(&ip_len.to_be_bytes());
    t[24..26].copy_from_slice(&[0, 0]);
    let c = !fold(&t[14..34]);
    t[24..26].copy_from_slice(&c.to_be_bytes());
    pr.inject_wan(1, t);
    assert!(pr.got[1].is_empty(), "nothing reaches H_B");
    let b = pr.snap(1);
    assert_eq!(b.error("esp-decrypt", "icv-fail"), 1);
    assert_eq!(b.error("esp-decrypt", "bad-spi"), 1);
    assert_eq!(b.error("esp-decrypt", "truncated"), 1);
    assert_eq!(b.error("esp-decrypt", "decrypted"), 1, "only the first");
    // The genuine packet whose copy was bit-flipped still goes through
    // (the forgery did not advance the window).
    g[last] ^= 0x01;
    pr.inject_wan(1, g);
    assert_eq!(pr.got[1].len(), 1);
}

fn fold(h: &[u8]) -> u16 {
    let mut s: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[test]
fn inner_source_outside_selectors_is_policy_mismatch() {
    // B accepts only 10.99.0.0/24 from the tunnel.
    let mut pr = Pair::with_traffic(GCM, 1, ["10.2.0.0/24", "10.99.0.0/24"]);
    pr.send_on(0, echo(0, 1, 64));
    assert!(pr.got[1].is_empty());
    let b = pr.snap(1);
    assert_eq!(b.error("esp-decrypt", "policy-mismatch"), 1);
    assert_eq!(b.error("esp-decrypt", "decrypted"), 0);
}

/// An authentic ESP packet (valid SPI, valid ICV, fresh sequence number)
/// sent by a host on B's LAN — tenant VRF 1 — to B's own LAN address: the
/// SPI is known but the SA belongs to the underlay (VRF 0, 192.0.2.2 from
/// 192.0.2.1), so it is dropped as "wrong-underlay" before any crypto,
/// counted on the SA too, and H_B never sees its inner packet. Then the
/// same frame, unchanged, on the underlay goes through (the refusal did not
/// touch the replay window). Before, esp-decrypt found the SA by SPI alone
/// and delivered the tenant's packet into the tunnel's VRF.
#[test]
fn esp_with_a_valid_spi_in_a_tenant_vrf_is_wrong_underlay() {
    let (mut pr, _) = captured(GCM);
    pr.hold = true;
    pr.send_on(0, echo(0, 2, 100));
    pr.hold = false;
    let genuine = pr.underlay.pop().unwrap();
    // The tenant's copy: to B's LAN MAC and address, from a LAN host.
    let mut t = genuine.clone();
    t[0..6].copy_from_slice(&LAN[1]);
    t[6..12].copy_from_slice(&HOST[1]);
    t[26..30].copy_from_slice(&host_ip(1).octets());
    t[30..34].copy_from_slice(&[10, 2, 0, 1]);
    t[24..26].copy_from_slice(&[0, 0]);
    let c = !fold(&t[14..34]);
    t[24..26].copy_from_slice(&c.to_be_bytes());
    pr.lan[1].inject(t);
    pr.pump();
    assert!(pr.got[1].is_empty(), "the tenant's ESP reached H_B");
    let b = pr.snap(1);
    assert_eq!(b.error("esp-decrypt", "wrong-underlay"), 1);
    assert_eq!(b.error("esp-decrypt", "decrypted"), 1, "only the first");
    let sa = pr.reg[1].list().into_iter().find(|i| !i.outbound).unwrap();
    assert_eq!(sa.drops, vec![("wrong-underlay", 1)]);
    // From the wrong source on the underlay (no NAT-T): refused too.
    let mut w = genuine.clone();
    w[26..30].copy_from_slice(&[192, 0, 2, 77]);
    w[24..26].copy_from_slice(&[0, 0]);
    let c = !fold(&w[14..34]);
    w[24..26].copy_from_slice(&c.to_be_bytes());
    pr.inject_wan(1, w);
    assert_eq!(pr.snap(1).error("esp-decrypt", "wrong-underlay"), 2);
    pr.inject_wan(1, genuine);
    assert_eq!(pr.got[1].len(), 1, "the genuine packet still decrypts");
}

/// UDP datagram (checksum 0, allowed over IPv4) from `src` to `dst`.
fn udp(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&12u16.to_be_bytes());
    u.extend_from_slice(&[0, 0, b'q', b'u', b'e', b'r']);
    ipv4(src, dst, 17, 64, true, &u)
}

fn sel(start: Ipv4Addr, end: Ipv4Addr, proto: u8, ports: (u16, u16)) -> Selector {
    Selector {
        start: start.into(),
        end: end.into(),
        proto,
        start_port: ports.0,
        end_port: ports.1,
    }
}

/// B negotiated narrower than its configured `traffic` (10.1.0.0/24 →
/// anything): only UDP from 10.1.0.0/24 to H_B's port 53. A peer that does
/// not keep to it (A's SA has no selectors, as a misbehaving or compromised
/// peer) gets only the packet inside through: a wrong destination port, a
/// wrong protocol and a wrong destination address are authentic, decrypted
/// and then dropped as "policy-mismatch" (node and SA counters), never
/// delivered. Outbound, H_B's answer inside the selectors leaves and one
/// outside (ICMP) is refused before encryption. Before, only the inner
/// source was checked against `traffic`: all three were delivered.
#[test]
fn decrypted_packets_outside_the_negotiated_selectors_are_dropped() {
    let mut pr = Pair::new(GCM, 1);
    let (a, b) = (host_ip(0), host_ip(1));
    let sels = Selectors {
        local: vec![sel(b, b, 17, (53, 53))],
        remote: vec![sel(
            Ipv4Addr::new(10, 1, 0, 0),
            Ipv4Addr::new(10, 1, 0, 255),
            17,
            (0, 65535),
        )],
    };
    pr.reg[1].remove_inbound(spi(0, 0)).unwrap();
    pr.reg[1]
        .install_inbound(
            7,
            InboundSa::new(sa_cfg(GCM, 1, 0, 0))
                .unwrap()
                .with_selectors(sels.clone()),
        )
        .unwrap();
    pr.reg[1]
        .set_outbound(
            7,
            Some(
                OutboundSa::new(sa_cfg(GCM, 1, 1, 0))
                    .unwrap()
                    .with_selectors(sels),
            ),
        )
        .unwrap();
    let inside = udp(a, 4000, b, 53);
    for ip in [
        udp(a, 4000, b, 54),
        echo(0, 1, 32),
        udp(a, 4000, Ipv4Addr::new(10, 2, 0, 11), 53),
        inside.clone(),
    ] {
        pr.send_on(0, ip);
    }
    let s = pr.snap(1);
    assert_eq!(s.error("esp-decrypt", "policy-mismatch"), 3);
    assert_eq!(s.error("esp-decrypt", "decrypted"), 1);
    assert_eq!(pr.got[1].len(), 1, "only the packet inside reached H_B");
    let f = &pr.got[1][0];
    assert_eq!(&f[14 + 20..14 + 24], &inside[20..24], "ports 4000 → 53");
    let sa = pr.reg[1].list().into_iter().find(|i| !i.outbound).unwrap();
    assert_eq!(sa.drops, vec![("policy-mismatch", 3)]);
    // Outbound: the answer inside leaves, an echo outside does not.
    pr.got[0].clear();
    pr.send_on(1, udp(b, 53, a, 4000));
    pr.send_on(1, echo(1, 1, 32));
    let s = pr.snap(1);
    assert_eq!(s.error("esp-encrypt", "policy-mismatch"), 1);
    assert_eq!(pr.got[0].len(), 1, "H_A got the answer only");
    assert_eq!(pr.snap(0).error("esp-decrypt", "decrypted"), 1);
}

#[test]
fn nat_t_ike_and_keepalive_are_classified() {
    let o = Opts { nat_t: true, ..GCM };
    let (mut pr, f) = captured(o);
    let (l4, _) = l4_of(&f);
    let mk = |payload: &[u8]| {
        let mut g = f[..l4 + 8].to_vec();
        g.extend_from_slice(payload);
        let ip_len = (g.len() - 14) as u16;
        g[16..18].copy_from_slice(&ip_len.to_be_bytes());
        g[l4 + 4..l4 + 6].copy_from_slice(&(ip_len - 20).to_be_bytes());
        g[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
        g[24..26].copy_from_slice(&[0, 0]);
        let c = !fold(&g[14..34]);
        g[24..26].copy_from_slice(&c.to_be_bytes());
        g
    };
    let mut ike = vec![0u8; 4];
    ike.extend_from_slice(&[0x11; 28]);
    pr.inject_wan(1, mk(&ike));
    pr.inject_wan(1, mk(&[0xff]));
    let b = pr.snap(1);
    assert_eq!(b.error("esp-decrypt", "ike-to-control-plane"), 1);
    assert_eq!(b.error("esp-decrypt", "nat-keepalive"), 1);
    assert!(pr.got[1].is_empty());
}

#[test]
fn one_sa_two_workers_no_replay_drops() {
    let mut pr = Pair::new(GCM, 2);
    // Worker 0 and worker 2 are both side A, sharing one outbound SA.
    for k in 0..20u16 {
        let i = if k % 2 == 0 { 0 } else { 2 };
        pr.send_on(i, echo(0, k, 80));
    }
    assert_eq!(pr.got[1].len(), 20, "all reach H_B");
    let mut seqs: Vec<u32> = pr
        .underlay
        .iter()
        .map(|f| {
            let s = esp_off(f);
            u32::from_be_bytes(f[s + 4..s + 8].try_into().unwrap())
        })
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 20, "unique sequence numbers across workers");
    let b = pr.snap(1);
    assert_eq!(b.error("esp-decrypt", "replay"), 0);
    assert_eq!(b.error("esp-decrypt", "decrypted"), 20);
}

#[test]
fn make_before_break_switch() {
    let mut pr = Pair::new(GCM, 1);
    pr.send_on(0, echo(0, 1, 64));
    assert_eq!(pr.got[1].len(), 1);
    // A packet still "in flight" under the old SA.
    pr.hold = true;
    pr.send_on(0, echo(0, 2, 64));
    pr.hold = false;
    let in_flight = pr.underlay.pop().unwrap();
    pr.got[1].clear();
    // 1. B installs the new inbound SA; 2. A switches outbound.
    pr.reg[1]
        .install_inbound(7, InboundSa::new(sa_cfg(GCM, 1, 0, 1)).unwrap())
        .unwrap();
    let old = pr.reg[0]
        .switch_outbound(7, OutboundSa::new(sa_cfg(GCM, 0, 0, 1)).unwrap())
        .unwrap();
    assert_eq!(old.spi(), spi(0, 0));
    pr.underlay.clear();
    pr.send_on(0, echo(0, 3, 64));
    assert_eq!(pr.got[1].len(), 1, "new SA works");
    let f = pr.underlay.last().unwrap();
    let s = esp_off(f);
    assert_eq!(
        u32::from_be_bytes(f[s..s + 4].try_into().unwrap()),
        spi(0, 1)
    );
    // The old inbound SA still accepts its stragglers.
    pr.inject_wan(1, in_flight.clone());
    assert_eq!(pr.got[1].len(), 2, "old SA still accepted");
    // 3. Remove the old one: a late copy is now an unknown SPI.
    pr.reg[1].remove_inbound(spi(0, 0)).unwrap();
    pr.inject_wan(1, in_flight);
    assert_eq!(pr.got[1].len(), 2);
    assert_eq!(pr.snap(1).error("esp-decrypt", "bad-spi"), 1);
    let list = pr.reg[1].list();
    assert!(list.iter().any(|s| !s.outbound && s.spi == spi(0, 1)));
    assert!(!list.iter().any(|s| s.spi == spi(0, 0)));
    let _ = Arc::strong_count(&old);
}

/// A TCP super-packet from H_A to H_B: `payload` bytes in segments of `mss`.
fn tcp_super(mss: u16, payload: usize, seq: u32) -> (Vec<u8>, Offload) {
    tcp4_super(
        (LAN[0], HOST[0]),
        (host_ip(0), host_ip(1)),
        mss,
        payload,
        seq,
    )
}

/// A NAT-T pair whose first echo went through (ARP learned, SAs working);
/// `wan_offloads`: UDP GSO datagrams cross the underlay whole.
fn natt_pair(v6: bool, wan_offloads: bool) -> Pair {
    let o = Opts {
        nat_t: true,
        v6,
        ..GCM
    };
    let mut pr = Pair::build(o, 1, ["10.2.0.0/24", "10.1.0.0/24"], (true, wan_offloads));
    pr.send_on(0, echo(0, 1, 64));
    assert_eq!(pr.got[1].len(), 1, "v6 {v6}: ARP and SAs work");
    pr.got[1].clear();
    pr.underlay.clear();
    pr.underlay_off.clear();
    pr
}

/// One's-complement sum of `parts` (odd lengths padded), folded: 0xffff
/// over a packet whose checksum is right.
fn sum16(parts: &[&[u8]], extra: u32) -> u32 {
    let mut s = extra;
    for b in parts {
        s += b
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum::<u32>();
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s
}

/// ESP in UDP of a TCP super-packet is sealed straight into a UDP GSO
/// datagram (esp-encrypt's packed path): on the wire, after UDP
/// segmentation, every packet is byte for byte what sealing its segment on
/// its own with the same SA and sequence number gives (UDP checksum aside
/// over IPv4, where it is optional, RFC 3948 §2.1, but checked when set),
/// and the peer decrypts all of them into the original bytes.
#[test]
fn nat_t_super_packet_is_sealed_straight_into_udp_gso_datagrams() {
    for v6 in [false, true] {
        let o = Opts {
            nat_t: true,
            v6,
            ..GCM
        };
        let mut pr = natt_pair(v6, false);
        let (mss, payload) = (1300u16, 20_000usize);
        let (f, off) = tcp_super(mss, payload, 1000);
        let original = f[54..].to_vec();
        pr.lan[0].inject_with(f, off);
        pr.pump();
        let a = pr.snap(0);
        assert_eq!(a.error("esp-encrypt", "packed-super-packets"), 1, "v6 {v6}");
        assert_eq!(a.error("esp-encrypt", "udp-gso-datagrams"), 1, "v6 {v6}");
        let nseg = payload.div_ceil(usize::from(mss));
        assert_eq!(a.error("esp-encrypt", "encrypted"), 1 + nseg as u64);
        let ours = outer(0, v6);
        let wire: Vec<&Vec<u8>> = pr
            .underlay
            .iter()
            .filter(|f| {
                let src: IpAddr = if v6 {
                    IpAddr::V6(<[u8; 16]>::try_from(&f[22..38]).unwrap().into())
                } else {
                    IpAddr::V4(<[u8; 4]>::try_from(&f[26..30]).unwrap().into())
                };
                src == ours
            })
            .collect();
        assert_eq!(wire.len(), nseg, "v6 {v6}: one ESP packet per segment");
        // The reference: the same SA, freshly keyed, sealing one by one;
        // and an independent inbound SA opening what crossed the wire.
        let reference = OutboundSa::new(sa_cfg(o, 0, 0, 0)).unwrap();
        let opener = InboundSa::new(sa_cfg(o, 1, 0, 0)).unwrap();
        let mut pool = packet::Pool::new(4);
        let mut rebuilt = Vec::new();
        for (k, f) in wire.iter().enumerate() {
            let ip = &f[14..];
            assert!(ip.len() <= 1500, "v6 {v6}: fits the underlay");
            let (l4, proto) = l4_of(f);
            assert_eq!(proto, 17);
            let udp = &f[l4..];
            let ulen = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
            assert_eq!(ulen, udp.len(), "v6 {v6}: UDP length");
            let ucsum = u16::from_be_bytes([udp[6], udp[7]]);
            if v6 || ucsum != 0 {
                // Pseudo-header: addresses, protocol, length.
                let addrs = if v6 { &f[22..54] } else { &f[26..34] };
                let s = sum16(&[addrs, udp], 17 + ulen as u32);
                assert_eq!(s, 0xffff, "v6 {v6}: segment {k}: UDP checksum");
            }
            if !v6 {
                assert_eq!(sum16(&[&ip[..20]], 0), 0xffff, "IPv4 header checksum");
            }
            let esp = &f[l4 + 8..];
            let seq = u32::from_be_bytes(esp[4..8].try_into().unwrap());
            assert_eq!(seq as usize, 2 + k, "v6 {v6}: consecutive sequence numbers");
            let mut pkt = pool.alloc().unwrap();
            pkt.set_data(esp);
            opener.decrypt(&mut pkt).expect("authentic");
            let inner = pkt.data().to_vec();
            pool.free(pkt);
            assert_eq!(sum16(&[&inner[..20]], 0), 0xffff, "inner IPv4 header");
            let tcp = &inner[20..];
            let t = sum16(&[&inner[12..20], tcp], 6 + tcp.len() as u32);
            assert_eq!(t, 0xffff, "v6 {v6}: segment {k}: inner TCP checksum");
            let tseq = u32::from_be_bytes(tcp[4..8].try_into().unwrap());
            assert_eq!(tseq as usize, 1000 + k * usize::from(mss));
            rebuilt.extend_from_slice(&tcp[20..]);
            // Sealed on its own, the segment gives the same bytes.
            let mut one = pool.alloc().unwrap();
            one.set_data(&inner);
            reference.encrypt(&mut one, false, u64::from(seq)).unwrap();
            let mut got = ip.to_vec();
            let mut want = one.data().to_vec();
            pool.free(one);
            if !v6 {
                // Optional over IPv4 (RFC 3948 §2.1): zero when sealed alone.
                got[26..28].copy_from_slice(&[0, 0]);
                want[26..28].copy_from_slice(&[0, 0]);
            }
            assert!(got == want, "v6 {v6}: segment {k}: bytes on the wire");
        }
        assert!(rebuilt == original, "v6 {v6}: the data, in order");
        // And the gateway on the other side delivered all of it.
        let b = pr.snap(1);
        assert_eq!(b.error("esp-decrypt", "decrypted"), 1 + nseg as u64);
        assert_eq!(b.error("esp-decrypt", "replay"), 0);
        let delivered: usize = pr.got[1].iter().map(|f| f.len() - 54).sum();
        assert_eq!(delivered, payload, "v6 {v6}: H_B got every byte");
    }
}

/// The other way: B receives A's ESP-in-UDP packets as one UDP GSO
/// datagram (wan ports with offloads, as over veth) and opens them where
/// they lie: one TCP super-packet reaches B's host port (cut there into the
/// segments H_B gets, every checksum right, every byte in order). A slice
/// changed in flight fails its ICV alone: the others are delivered one by
/// one; the datagram replayed is refused slice by slice.
#[test]
fn nat_t_datagram_is_opened_in_place() {
    for v6 in [false, true] {
        let mut pr = natt_pair(v6, true);
        let (mss, payload) = (1300u16, 20_000usize);
        let nseg = payload.div_ceil(usize::from(mss));
        let (f, off) = tcp_super(mss, payload, 1000);
        let original = f[54..].to_vec();
        pr.lan[0].inject_with(f.clone(), off);
        pr.pump();
        let dg = pr.underlay.iter().position(|f| f.len() > 1514);
        let dg = dg.expect("the ESP packets crossed as one datagram");
        assert_eq!(pr.underlay_off[dg].gso, Gso::UdpL4);
        let b = pr.snap(1);
        assert_eq!(b.error("ip-local", "udp-gso-esp"), 1, "v6 {v6}");
        assert_eq!(b.error("esp-decrypt", "datagrams-opened"), 1);
        assert_eq!(b.error("esp-decrypt", "datagrams-merged"), 1);
        assert_eq!(b.error("esp-decrypt", "decrypted"), 1 + nseg as u64);
        assert_eq!(b.error("ip-local", "udp-gso-split"), 0, "nothing cut");
        let check = |got: &[Vec<u8>], skip: Option<usize>| {
            let mut rebuilt = Vec::new();
            for (k, f) in got.iter().enumerate() {
                let ip = &f[14..];
                assert_eq!(sum16(&[&ip[..20]], 0), 0xffff, "inner IPv4 header");
                let tcp = &ip[20..];
                let t = sum16(&[&ip[12..20], tcp], 6 + tcp.len() as u32);
                assert_eq!(t, 0xffff, "v6 {v6}: segment {k}: TCP checksum");
                rebuilt.extend_from_slice(&tcp[20..]);
            }
            let mut want = original.clone();
            if let Some(k) = skip {
                let m = usize::from(mss);
                want.drain(k * m..((k + 1) * m).min(payload));
            }
            assert!(rebuilt == want, "v6 {v6}: the data, in order");
        };
        assert_eq!(pr.got[1].len(), nseg, "v6 {v6}: cut for H_B's port");
        check(&pr.got[1], None);
        // The datagram again: a replay, refused slice by slice.
        let (g, goff) = (pr.underlay[dg].clone(), pr.underlay_off[dg]);
        pr.got[1].clear();
        pr.wan[1].inject_with(g.clone(), goff);
        pr.pump();
        let b = pr.snap(1);
        assert_eq!(b.error("esp-decrypt", "replay"), nseg as u64, "v6 {v6}");
        assert!(pr.got[1].is_empty());
        // A fresh datagram with slice 3 changed in flight.
        pr.hold = true;
        pr.underlay.clear();
        pr.underlay_off.clear();
        pr.lan[0].inject_with(f, off);
        pr.pump();
        pr.hold = false;
        let dg = pr.underlay.iter().position(|f| f.len() > 1514).unwrap();
        let (mut g, goff) = (pr.underlay[dg].clone(), pr.underlay_off[dg]);
        let body = l4_of(&g).0 + 8;
        let slice = usize::from(goff.gso_size);
        g[body + 3 * slice + 100] ^= 0x40;
        pr.wan[1].inject_with(g, goff);
        pr.pump();
        let b = pr.snap(1);
        assert_eq!(b.error("esp-decrypt", "icv-fail"), 1, "v6 {v6}");
        assert_eq!(b.error("esp-decrypt", "datagrams-opened"), 3);
        assert_eq!(b.error("esp-decrypt", "datagrams-merged"), 1);
        assert_eq!(pr.got[1].len(), nseg - 1, "v6 {v6}: the rest, one by one");
        check(&pr.got[1], Some(3));
    }
}

/// The ESP packets on the underlay frames `frames` that side A sent (a UDP
/// GSO datagram counts as the packets it is cut into).
fn esp_packets_from_a(frames: &[Vec<u8>], offs: &[Offload], v6: bool) -> usize {
    frames
        .iter()
        .zip(offs)
        .filter(|(f, _)| {
            let src: IpAddr = if v6 {
                IpAddr::V6(<[u8; 16]>::try_from(&f[22..38]).unwrap().into())
            } else {
                IpAddr::V4(<[u8; 4]>::try_from(&f[26..30]).unwrap().into())
            };
            src == outer(0, v6)
        })
        .map(|(f, o)| {
            if o.gso == Gso::UdpL4 {
                let body = l4_of(f).0 + 8;
                (f.len() - body).div_ceil(usize::from(o.gso_size))
            } else {
                1
            }
        })
        .sum()
}

/// Every UDP GSO datagram esp-encrypt hands a wan port with offloads is
/// one the kernel sends whole (`packet::gso_limit`), for every algorithm,
/// both outer families and a sweep of segment sizes: the wan MockPort
/// checks each frame (`packet::tx_check`) and panics on one the kernel
/// would refuse. AES-GCM's 1424-byte ESP packets (MSS 1350 over IPv4)
/// once made 65 546-byte frames, which Linux drops on the direct transmit
/// path while vecgate counted them as sent. Every segment reaches B.
#[test]
fn nat_t_datagrams_fit_what_the_kernel_sends_whole() {
    for alg in Algorithm::ALL {
        for v6 in [false, true] {
            let o = Opts {
                alg,
                v6,
                nat_t: true,
            };
            let mut pr = Pair::build(o, 1, ["10.2.0.0/24", "10.1.0.0/24"], (true, true));
            pr.send_on(0, echo(0, 1, 64));
            assert_eq!(pr.got[1].len(), 1, "{alg:?} v6 {v6}: ARP and SAs work");
            let payload = 64_000usize;
            let mut seq = 1000u32;
            let mut want_esp = 1;
            // Over half the tunnel MTU: one ESP packet per segment.
            for mss in [1350u16, 1349, 1346, 1300, 1222, 1000, 800] {
                pr.got[1].clear();
                pr.underlay.clear();
                pr.underlay_off.clear();
                let (f, off) = tcp_super(mss, payload, seq);
                seq = seq.wrapping_add(payload as u32);
                pr.lan[0].inject_with(f, off);
                pr.pump();
                let nseg = payload.div_ceil(usize::from(mss));
                want_esp += nseg as u64;
                let what = format!("{alg:?} v6 {v6} mss {mss}");
                let a = pr.snap(0);
                assert_eq!(a.error("esp-encrypt", "encrypted"), want_esp, "{what}");
                let on_wire = esp_packets_from_a(&pr.underlay, &pr.underlay_off, v6);
                assert_eq!(on_wire, nseg, "{what}: every ESP packet left");
                assert!(
                    pr.underlay_off.iter().any(|o| o.gso == Gso::UdpL4),
                    "{what}: sent as UDP GSO datagrams"
                );
                let b = pr.snap(1);
                assert_eq!(b.error("esp-decrypt", "decrypted"), want_esp, "{what}");
                let delivered: usize = pr.got[1].iter().map(|f| f.len() - 54).sum();
                assert_eq!(delivered, payload, "{what}: H_B got every byte");
            }
        }
    }
}
