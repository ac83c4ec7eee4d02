//! Two gateways joined by a tunnel over MockPorts: encapsulation,
//! decapsulation, drop reasons, tenant isolation, MSS clamping, PMTU,
//! a super-packet through the tunnel and RSC on / off.

use crate::counters::CounterSnapshot;
use crate::fib::Prefix;
use crate::tables::{IfFlags, Route, SharedTables, Tables, TablesBuilder};
use crate::testing::{arp, dissect, eth, icmp4_echo, ipv4, ipv6, MockHandle, MockPort, Seen};
use crate::tunnel::{derived_mac, TunnelDef, TunnelKind};
use crate::worker::{Worker, WorkerConfig};
use packet::{Gso, Offload, Port};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use wire::arp::Operation;

const LAN: [[u8; 6]; 2] = [[2, 0, 0, 0xa, 0, 1], [2, 0, 0, 0xb, 0, 1]];
const WAN: [[u8; 6]; 2] = [[2, 0, 0, 0xa, 0, 2], [2, 0, 0, 0xb, 0, 2]];
const HOST: [[u8; 6]; 2] = [[2, 0, 0, 0xa, 1, 1], [2, 0, 0, 0xb, 1, 1]];

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}
fn p(s: &str) -> Prefix {
    s.parse().unwrap()
}
fn host_ip(side: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, side as u8 + 1, 0, 10)
}

#[derive(Clone)]
struct Opts {
    kind: TunnelKind,
    ethernet: bool,
    key: Option<u32>,
    checksum: bool,
    sequence: bool,
    v6_outer: bool,
    lan_offloads: bool,
    rsc: bool,
    /// The underlay: MTU, and whether its ports take offloads (a veth:
    /// partial checksums reach the peer as they were sent).
    wan_mtu: u32,
    wan_offloads: bool,
}

fn opts(kind: TunnelKind) -> Opts {
    Opts {
        kind,
        ethernet: kind != TunnelKind::Gre,
        key: Some(0x1234),
        checksum: false,
        sequence: false,
        v6_outer: false,
        lan_offloads: false,
        rsc: true,
        wan_mtu: 1500,
        wan_offloads: false,
    }
}

fn outer(side: usize, v6: bool) -> IpAddr {
    if v6 {
        format!("2001:db8:ff::{}", side + 1).parse().unwrap()
    } else {
        format!("192.0.2.{}", side + 1).parse().unwrap()
    }
}

/// Tables of gateway `side` (0 = A, 1 = B): lan (port 0, VRF 1), wan
/// (port 1, VRF 0), the tunnel on virtual port 2 in VRF 1.
fn tables(side: usize, o: &Opts) -> Tables {
    tables_at(side, o, 2)
}

/// [`tables`] with the tunnel on virtual port `vport`.
fn tables_at(side: usize, o: &Opts, vport: u16) -> Tables {
    let other = 1 - side;
    let mut b = TablesBuilder::new();
    b.add_vrf(1, "t1");
    let lan = Prefix::new(IpAddr::V4(Ipv4Addr::new(10, side as u8 + 1, 0, 1)), 24).unwrap();
    b.add_interface(0, "lan", LAN[side], 1500, 1, &[lan]);
    b.set_flags(
        0,
        IfFlags {
            offloads: o.lan_offloads,
            rsc: o.rsc,
            ipv6: true,
        },
    );
    let wan = if o.v6_outer {
        Prefix::new(outer(side, true), 64).unwrap()
    } else {
        Prefix::new(outer(side, false), 24).unwrap()
    };
    b.add_interface(1, "wan", WAN[side], o.wan_mtu, 0, &[wan]);
    b.set_flags(
        1,
        IfFlags {
            offloads: o.wan_offloads,
            rsc: o.rsc,
            ipv6: true,
        },
    );
    let def = TunnelDef {
        kind: o.kind,
        local: outer(side, o.v6_outer),
        remote: outer(other, o.v6_outer),
        key: o.key,
        underlay_vrf: 0,
        ethernet: o.ethernet,
        checksum: o.checksum,
        sequence: o.sequence,
        udp_port: 4789,
    };
    let probe = crate::tunnel::Tunnel::new(vport, def.clone(), 0).unwrap();
    let mtu = o.wan_mtu - probe.mtu_overhead() as u32;
    let tun_addr = Prefix::new(IpAddr::V4(Ipv4Addr::new(10, 9, 0, side as u8 + 1)), 24).unwrap();
    let addrs = if o.ethernet { vec![tun_addr] } else { vec![] };
    b.add_interface(
        vport,
        "tun",
        derived_mac(&format!("gw{side}"), "tun"),
        mtu,
        1,
        &addrs,
    );
    b.add_tunnel(vport, def);
    let remote_lan = p(&format!("10.{}.0.0/24", other + 1));
    let route = if o.ethernet {
        Route::Via {
            next_hop: IpAddr::V4(Ipv4Addr::new(10, 9, 0, other as u8 + 1)),
            port: None,
        }
    } else {
        Route::Port { port: vport }
    };
    b.add_route(1, remote_lan, route);
    b.build().unwrap()
}

struct Pair {
    w: Vec<Worker>,
    shared: Vec<Arc<SharedTables>>,
    lan: Vec<MockHandle>,
    wan: Vec<MockHandle>,
    now: u64,
    /// Every underlay frame seen, A→B and B→A.
    underlay: Vec<Vec<u8>>,
    /// Their offload state (a partial checksum crosses a veth as is).
    underlay_offload: Vec<Offload>,
    /// Received by the host behind each side (non-ARP), with offload state.
    got: [Vec<(Vec<u8>, Offload)>; 2],
}

impl Pair {
    fn new(o: &Opts) -> Pair {
        let mut pr = Pair {
            w: Vec::new(),
            shared: Vec::new(),
            lan: Vec::new(),
            wan: Vec::new(),
            now: 1,
            underlay: Vec::new(),
            underlay_offload: Vec::new(),
            got: [Vec::new(), Vec::new()],
        };
        for side in 0..2 {
            let shared = SharedTables::new(tables(side, o));
            let (l, lh) = MockPort::new("lan", LAN[side], 1500);
            let (w, wh) = MockPort::new("wan", WAN[side], o.wan_mtu);
            let ports: Vec<Box<dyn Port>> = vec![
                Box::new(l.with_offloads(o.lan_offloads)),
                Box::new(w.with_offloads(o.wan_offloads)),
            ];
            pr.w.push(Worker::new(
                side,
                ports,
                shared.clone(),
                WorkerConfig::default(),
            ));
            pr.shared.push(shared);
            pr.lan.push(lh);
            pr.wan.push(wh);
        }
        pr
    }

    /// Runs both gateways until quiet: the wire between the wan ports
    /// carries everything, hosts answer ARP for themselves.
    fn pump(&mut self) {
        for _ in 0..20 {
            let mut moved = false;
            for side in 0..2 {
                self.w[side].step(self.now);
                for (f, o) in self.wan[side].take_tx_with() {
                    self.underlay.push(f.clone());
                    self.underlay_offload.push(o);
                    self.wan[1 - side].inject_with(f, o);
                    moved = true;
                }
                for (f, o) in self.lan[side].take_tx_with() {
                    if f.len() >= 14 && f[12..14] == [8, 6] {
                        if let Seen::Arp(_, a) = dissect(&f) {
                            if a.target_protocol_addr == host_ip(side) {
                                self.lan[side].inject(eth(
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
                    self.got[side].push((f, o));
                }
            }
            self.now += 1;
            if !moved {
                break;
            }
        }
    }

    fn send(&mut self, side: usize, ip: Vec<u8>) {
        self.lan[side].inject(eth(LAN[side], HOST[side], 0x0800, &ip));
        self.pump();
    }

    fn snap(&self, side: usize) -> CounterSnapshot {
        self.w[side].counters().snapshot()
    }
}

fn echo(from: usize, len: usize) -> Vec<u8> {
    ipv4(
        host_ip(from),
        host_ip(1 - from),
        1,
        64,
        true,
        &icmp4_echo(9, 1, &vec![0x5a; len]),
    )
}

/// Round trip H_A → H_B and back; returns the IP packet H_B got.
fn ping_both_ways(pr: &mut Pair) -> Vec<u8> {
    pr.send(0, echo(0, 100));
    assert_eq!(pr.got[1].len(), 1, "H_B got the echo");
    let (f, _) = pr.got[1].remove(0);
    let Seen::Icmp4(e, ip, ty, _, _) = dissect(&f) else {
        panic!("not icmp")
    };
    assert_eq!((ip.src_addr, ip.dst_addr, ty), (host_ip(0), host_ip(1), 8));
    assert_eq!(ip.ttl, 62, "one hop per gateway");
    assert_eq!(e.dst_addr.0, HOST[1]);
    pr.send(1, echo(1, 100));
    assert_eq!(pr.got[0].len(), 1, "H_A got the reverse packet");
    pr.got[0].clear();
    f
}

/// The GRE header (flags, protocol, key) of an IPv4/IPv6 underlay frame.
fn gre_of(f: &[u8]) -> (u16, u16, Option<u32>) {
    let l4 = if f[12..14] == [0x86, 0xdd] {
        14 + 40
    } else {
        14 + 20
    };
    let g = wire::gre::Gre::new_checked(&f[l4..]).unwrap();
    (
        u16::from_be_bytes([f[l4], f[l4 + 1]]),
        g.protocol_type(),
        g.key(),
    )
}

fn data_frames(pr: &Pair) -> Vec<&Vec<u8>> {
    pr.underlay
        .iter()
        .filter(|f| f[12..14] != [8, 6] && f.len() > 60)
        .collect()
}

/// Underlay data frames sent by A (to B's outer address).
fn a_to_b(pr: &Pair) -> Vec<Vec<u8>> {
    data_frames(pr)
        .into_iter()
        .filter(|f| f[0..6] == WAN[1])
        .cloned()
        .collect()
}

#[test]
fn gre_ip_inner_over_ipv4() {
    let mut pr = Pair::new(&opts(TunnelKind::Gre));
    ping_both_ways(&mut pr);
    let frames = data_frames(&pr);
    assert_eq!(frames.len(), 2);
    for f in frames {
        let Seen::Ip4(_, ip) = dissect(f) else {
            panic!()
        };
        assert_eq!(ip.protocol, 47);
        assert_eq!(gre_of(f), (0x2000, 0x0800, Some(0x1234)));
    }
    assert_eq!(pr.snap(1).packets("gre-input"), 1);
}

#[test]
fn gre_checksum_and_sequence_over_ipv6() {
    let mut o = opts(TunnelKind::Gre);
    o.checksum = true;
    o.sequence = true;
    o.v6_outer = true;
    let mut pr = Pair::new(&o);
    ping_both_ways(&mut pr);
    pr.send(0, echo(0, 50));
    assert_eq!(pr.got[1].len(), 1);
    pr.got[1].clear();
    let frames: Vec<Vec<u8>> = data_frames(&pr)
        .into_iter()
        .filter(|f| f[12..14] == [0x86, 0xdd] && f[20] == 47)
        .cloned()
        .collect();
    assert_eq!(frames.len(), 3);
    let seqs: Vec<u32> = frames
        .iter()
        .map(|f| {
            let g = wire::gre::Gre::new_checked(&f[54..]).unwrap();
            assert!(g.verify_checksum(), "GRE checksum");
            assert_eq!(gre_of(f).0, 0xb000);
            g.sequence_number().unwrap()
        })
        .collect();
    // A sent seq 0 then 1; B sent 0.
    assert_eq!(seqs, vec![0, 0, 1]);
    // A replayed frame is out of order; a corrupted one fails the checksum.
    let old = frames[0].clone();
    pr.wan[1].inject(old.clone());
    let mut bad = frames[2].clone();
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    pr.wan[1].inject(bad);
    pr.pump();
    assert!(pr.got[1].is_empty(), "{}", pr.snap(1).show_errors());
    let s = pr.snap(1);
    assert_eq!(s.error("gre-input", "out-of-order"), 1);
    assert_eq!(s.error("gre-input", "bad-checksum"), 1);
}

#[test]
fn gre_teb_vxlan_and_nvgre_carry_ethernet() {
    for kind in [TunnelKind::Gre, TunnelKind::Vxlan, TunnelKind::Nvgre] {
        let mut o = opts(kind);
        o.ethernet = true;
        o.key = Some(0x12345);
        let mut pr = Pair::new(&o);
        let inner = ping_both_ways(&mut pr);
        let frames = data_frames(&pr);
        assert!(frames.len() >= 2, "{kind:?}: ARP over the tunnel then data");
        for f in &frames {
            let Seen::Ip4(_, ip) = dissect(f) else {
                panic!()
            };
            match kind {
                TunnelKind::Vxlan => {
                    assert_eq!(ip.protocol, 17);
                    let sport = u16::from_be_bytes([f[34], f[35]]);
                    assert!(sport >= 49152, "RFC 7348 §5 source port {sport}");
                    assert_eq!(u16::from_be_bytes([f[36], f[37]]), 4789);
                    assert_eq!(f[42], 0x08, "I flag");
                    assert_eq!(&f[46..49], &[0x01, 0x23, 0x45], "VNI");
                }
                TunnelKind::Nvgre => {
                    let (flags, proto, key) = gre_of(f);
                    assert_eq!((flags, proto), (0x2000, 0x6558));
                    assert_eq!(key.unwrap() >> 8, 0x12345, "VSID");
                }
                TunnelKind::Gre => {
                    assert_eq!(gre_of(f), (0x2000, 0x6558, Some(0x12345)));
                }
            }
        }
        // The inner frame H_B got came from B's LAN side, the data kept.
        assert_eq!(inner.len(), 14 + 20 + 8 + 100);
    }
}

#[test]
fn vxlan_flows_get_distinct_source_ports_and_nvgre_flow_ids() {
    for kind in [TunnelKind::Vxlan, TunnelKind::Nvgre] {
        let mut pr = Pair::new(&opts(kind));
        ping_both_ways(&mut pr);
        pr.underlay.clear();
        let mut ids = std::collections::HashSet::new();
        for sport in 0..16u16 {
            let mut udp = vec![0u8; 16];
            udp[0..2].copy_from_slice(&(1000 + sport).to_be_bytes());
            udp[2..4].copy_from_slice(&53u16.to_be_bytes());
            udp[4..6].copy_from_slice(&16u16.to_be_bytes());
            pr.send(0, ipv4(host_ip(0), host_ip(1), 17, 64, false, &udp));
        }
        for f in data_frames(&pr) {
            let entropy = match kind {
                TunnelKind::Vxlan => u16::from_be_bytes([f[34], f[35]]),
                _ => u16::from(f[14 + 20 + 7]),
            };
            ids.insert(entropy);
        }
        assert!(
            ids.len() >= 8,
            "{kind:?}: {} distinct values for 16 flows",
            ids.len()
        );
    }
}

#[test]
fn drop_reasons() {
    let mut pr = Pair::new(&opts(TunnelKind::Gre));
    ping_both_ways(&mut pr);
    let good = a_to_b(&pr)[0].clone();
    let csum = |f: &mut Vec<u8>| {
        f[24] = 0;
        f[25] = 0;
        let c = wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    };
    let mut wrong_key = good.clone();
    wrong_key[41] ^= 1;
    let mut wrong_src = good.clone();
    wrong_src[29] = 9;
    csum(&mut wrong_src);
    let mut version = good.clone();
    version[35] = 1;
    let mut routing = good.clone();
    routing[34] |= 0x40;
    for f in [wrong_key, wrong_src, version, routing] {
        pr.wan[1].inject(f);
    }
    pr.pump();
    assert!(pr.got[1].is_empty(), "nothing leaks into the overlay");
    let s = pr.snap(1);
    assert_eq!(s.error("gre-input", "unknown-key"), 1);
    assert_eq!(s.error("gre-input", "unknown-peer"), 1);
    assert_eq!(s.error("gre-input", "bad-version"), 1);
    assert_eq!(s.error("gre-input", "bad-flags"), 1);

    let mut pr = Pair::new(&opts(TunnelKind::Vxlan));
    ping_both_ways(&mut pr);
    let good = a_to_b(&pr).last().unwrap().to_vec();
    let mut no_i = good.clone();
    no_i[42] = 0;
    let mut vni = good.clone();
    vni[48] ^= 1;
    pr.wan[1].inject(no_i);
    pr.wan[1].inject(vni);
    pr.pump();
    assert!(pr.got[1].is_empty());
    let s = pr.snap(1);
    assert_eq!(s.error("vxlan-input", "i-flag-clear"), 1);
    assert_eq!(s.error("vxlan-input", "unknown-vni"), 1);

    let mut o = opts(TunnelKind::Nvgre);
    o.key = Some(0x5000);
    let mut pr = Pair::new(&o);
    ping_both_ways(&mut pr);
    let good = a_to_b(&pr).last().unwrap().to_vec();
    // NVGRE with the C bit (and room for the checksum word): refused.
    let mut c = good[..38].to_vec();
    c[34] |= 0x80;
    c.extend_from_slice(&[0, 0, 0, 0]);
    c.extend_from_slice(&good[38..]);
    let l = (c.len() - 14) as u16;
    c[16..18].copy_from_slice(&l.to_be_bytes());
    csum(&mut c);
    // Fix up the GRE checksum so only the NVGRE rule can refuse it.
    let g = wire::checksum::checksum(&c[34..]);
    c[38..40].copy_from_slice(&g.to_be_bytes());
    pr.wan[1].inject(c);
    pr.pump();
    assert!(pr.got[1].is_empty());
    assert_eq!(
        pr.snap(1).error("gre-input", "nvgre-checksum-or-sequence"),
        1
    );
}

#[test]
fn tenants_with_the_same_prefixes_stay_isolated() {
    // B has two tenants: VRF 1 behind port 0 reached by key 1, VRF 2
    // behind port 2 reached by key 2; both use 10.2.0.0/24.
    let mut b = TablesBuilder::new();
    b.add_vrf(1, "t1").add_vrf(2, "t2");
    b.add_interface(0, "lan1", LAN[1], 1500, 1, &[p("10.2.0.1/24")]);
    b.add_interface(1, "wan", WAN[1], 1500, 0, &[p("192.0.2.2/24")]);
    b.add_interface(
        2,
        "lan2",
        [2, 0, 0, 0xc, 0, 1],
        1500,
        2,
        &[p("10.2.0.1/24")],
    );
    for (port, key, vrf) in [(3u16, 1u32, 1u32), (4, 2, 2)] {
        b.add_interface(
            port,
            "tun",
            derived_mac("b", &key.to_string()),
            1476,
            vrf,
            &[],
        );
        b.add_tunnel(
            port,
            TunnelDef {
                kind: TunnelKind::Gre,
                local: "192.0.2.2".parse().unwrap(),
                remote: "192.0.2.1".parse().unwrap(),
                key: Some(key),
                underlay_vrf: 0,
                ethernet: false,
                checksum: false,
                sequence: false,
                udp_port: 4789,
            },
        );
        b.add_route(vrf, p("10.1.0.0/24"), Route::Port { port });
    }
    let t = b.build().unwrap();
    let shared = SharedTables::new(t);
    let (l1, h1) = MockPort::new("lan1", LAN[1], 1500);
    let (w, hw) = MockPort::new("wan", WAN[1], 1500);
    let (l2, h2) = MockPort::new("lan2", [2, 0, 0, 0xc, 0, 1], 1500);
    let ports: Vec<Box<dyn Port>> = vec![Box::new(l1), Box::new(w), Box::new(l2)];
    let mut wk = Worker::new(0, ports, shared, WorkerConfig::default());
    // Tenant 2's packet: GRE key 2 from 192.0.2.1, inner 10.1.0.10 → 10.2.0.10.
    let inner = echo(0, 64);
    let mut gre = vec![0x20, 0, 0x08, 0, 0, 0, 0, 2];
    gre.extend_from_slice(&inner);
    let f = eth(
        WAN[1],
        WAN[0],
        0x0800,
        &ipv4(v4("192.0.2.1"), v4("192.0.2.2"), 47, 64, false, &gre),
    );
    hw.inject(f);
    wk.step(1);
    wk.step(2);
    // Tenant 2 resolves 10.2.0.10 on lan2 only; tenant 1's LAN sees nothing.
    let out2 = h2.take_tx();
    assert_eq!(out2.len(), 1);
    let Seen::Arp(_, a) = dissect(&out2[0]) else {
        panic!("ARP on lan2")
    };
    assert_eq!(a.target_protocol_addr, v4("10.2.0.10"));
    assert!(h1.take_tx().is_empty(), "tenant 1 never sees tenant 2");
    // Tenant 1's reply can only leave in tenant 1's tunnel (key 1).
    h1.inject(eth(LAN[1], HOST[1], 0x0800, &echo(1, 64)));
    wk.step(3);
    let out = hw.take_tx();
    let gre: Vec<_> = out.iter().filter(|f| f[12..14] == [8, 0]).collect();
    assert!(gre.is_empty() || gre.iter().all(|f| gre_of(f).2 == Some(1)));
}

#[test]
fn mss_clamped_and_pmtu_answered() {
    let mut pr = Pair::new(&opts(TunnelKind::Gre));
    ping_both_ways(&mut pr);
    // SYN with MSS 1460 → clamped to 1472 - 40 on the way into the tunnel.
    let mut syn = vec![0u8; 24];
    syn[0..2].copy_from_slice(&40000u16.to_be_bytes());
    syn[2..4].copy_from_slice(&80u16.to_be_bytes());
    syn[12] = 6 << 4;
    syn[13] = 0x02;
    syn[20..24].copy_from_slice(&[2, 4, 0x05, 0xb4]);
    let ph = wire::checksum::pseudo_header_v4(&host_ip(0), &host_ip(1), 6, 24);
    let c = !wire::checksum::combine(&[ph, wire::checksum::data(&syn)]);
    syn[16..18].copy_from_slice(&c.to_be_bytes());
    pr.send(0, ipv4(host_ip(0), host_ip(1), 6, 64, true, &syn));
    let (f, _) = pr.got[1].remove(0);
    assert_eq!(
        u16::from_be_bytes([f[56], f[57]]),
        1500 - 28 - 40,
        "GRE+key: tunnel MTU 1472 - 40"
    );
    assert!(
        crate::offload::csum::verify_l4_at(&f, 14),
        "checksum updated"
    );
    // 1500-byte DF packet: the tunnel MTU is 1472 → frag-needed with it.
    pr.send(0, echo(0, 1500 - 28));
    assert!(pr.got[1].is_empty());
    let (f, _) = pr.got[0].remove(0);
    let Seen::Icmp4(_, _, ty, code, body) = dissect(&f) else {
        panic!()
    };
    assert_eq!((ty, code), (3, 4));
    assert_eq!(u16::from_be_bytes([body[6], body[7]]), 1472);
}

fn tcp_super(mss: u16, payload: usize, seq: u32) -> (Vec<u8>, Offload) {
    crate::testing::tcp4_super(
        (LAN[0], HOST[0]),
        (host_ip(0), host_ip(1)),
        mss,
        payload,
        seq,
    )
}

fn super_through(kind: TunnelKind, rsc: bool) -> Pair {
    let mut o = opts(kind);
    o.lan_offloads = true;
    o.rsc = rsc;
    let mut pr = Pair::new(&o);
    ping_both_ways(&mut pr);
    pr.underlay.clear();
    let (f, off) = tcp_super(1400, 20_000, 1);
    pr.lan[0].inject_with(f, off);
    pr.pump();
    pr
}

#[test]
fn super_packet_is_segmented_after_encap_and_coalesced_after_decap() {
    for kind in [TunnelKind::Gre, TunnelKind::Vxlan, TunnelKind::Nvgre] {
        let pr = super_through(kind, true);
        let frames = data_frames(&pr);
        assert_eq!(frames.len(), 15, "{kind:?}: 20000 / 1400");
        for f in &frames {
            assert!(
                f.len() <= 1514,
                "{kind:?}: underlay frame {} > MTU",
                f.len()
            );
            let Seen::Ip4(_, ip) = dissect(f) else {
                panic!()
            };
            let inner_l3 = 14 + ip.payload_len + 20
                - (ip.payload_len + 20 - (f.len() - 14 - 20 - ip.payload_len))
                + match kind {
                    TunnelKind::Gre => 20 + 8,
                    TunnelKind::Vxlan => 20 + 16 + 14,
                    TunnelKind::Nvgre => 20 + 8 + 14,
                };
            assert!(
                crate::offload::csum::verify_l4_at(f, inner_l3),
                "{kind:?}: inner TCP checksum"
            );
        }
        assert_eq!(
            pr.snap(0).error("tunnel-encap", "segmented-super-packets"),
            1
        );
        // B coalesced the 15 segments back into one super-packet.
        assert_eq!(pr.got[1].len(), 1, "{kind:?}");
        let (f, o) = &pr.got[1][0];
        assert_eq!(o.gso, Gso::TcpV4);
        assert_eq!(f.len(), 14 + 40 + 20_000);
        let s = pr.snap(1);
        assert_eq!(s.error("rsc-output", "coalesced-segments"), 14);
        assert_eq!(s.error("rsc-output", "super-packets-out"), 1);

        let pr = super_through(kind, false);
        assert_eq!(pr.got[1].len(), 15, "rsc off: segments as they came");
        assert!(pr.got[1].iter().all(|(_, o)| o.gso == Gso::None));
        assert_eq!(pr.snap(1).error("rsc-output", "coalesced-segments"), 0);
    }
}

/// Over a large-MTU underlay whose ports take offloads (veth), a
/// super-packet crosses whole with its inner TCP checksum still partial:
/// neither gateway walks the payload for it, the host behind B finishes it
/// (here: the test, as its NIC would) and it verifies. With the GRE
/// checksum (C bit) the outer checksum covers the inner bytes: those are
/// final before encapsulation and the GRE checksum verifies.
#[test]
fn partial_inner_checksum_crosses_a_large_underlay_whole() {
    for checksum in [false, true] {
        let mut o = opts(TunnelKind::Gre);
        o.lan_offloads = true;
        o.wan_offloads = true;
        o.wan_mtu = 65_000;
        o.checksum = checksum;
        let mut pr = Pair::new(&o);
        ping_both_ways(&mut pr);
        pr.underlay.clear();
        pr.underlay_offload.clear();
        let (f, off) = tcp_super(1400, 20_000, 1);
        pr.lan[0].inject_with(f.clone(), off);
        pr.pump();
        let data: Vec<usize> = (0..pr.underlay.len())
            .filter(|&i| pr.underlay[i].len() > 20_000)
            .collect();
        assert_eq!(data.len(), 1, "checksum {checksum}: one whole GRE packet");
        let (u, uo) = (&pr.underlay[data[0]], pr.underlay_offload[data[0]]);
        // GRE with its key (0x1234), and the checksum word with C.
        let gre_len = if checksum { 12 } else { 8 };
        let inner_l3 = 14 + 20 + gre_len;
        if checksum {
            assert!(!uo.needs_csum, "covered by the GRE checksum: final");
            assert!(crate::offload::csum::verify_l4_at(u, inner_l3));
            assert_eq!(wire::checksum::data(&u[34..]), 0xffff, "GRE checksum");
        } else {
            assert!(uo.needs_csum, "left for the egress port");
            assert_eq!(usize::from(uo.csum_start), inner_l3 + 20);
            assert_eq!(uo.csum_offset, 16);
            assert!(
                !crate::offload::csum::verify_l4_at(u, inner_l3),
                "not summed"
            );
        }
        assert_eq!(pr.got[1].len(), 1);
        let (mut g, go) = pr.got[1].remove(0);
        assert_eq!(g.len(), 14 + 40 + 20_000);
        // Segments sized for the host's link again (offload::tso::mark).
        assert_eq!(
            (go.gso, go.gso_size),
            (Gso::TcpV4, 1460),
            "a super-packet for the host"
        );
        assert!(go.needs_csum);
        finish_partial(&mut g, &go);
        assert!(crate::offload::csum::verify_l4_at(&g, 14));
        assert_eq!(g[54..], f[54..], "payload intact");
    }
}

#[test]
fn rsc_switch_applies_on_the_next_vector() {
    let mut pr = super_through(TunnelKind::Gre, true);
    assert_eq!(pr.got[1].len(), 1);
    pr.got[1].clear();
    let mut o = opts(TunnelKind::Gre);
    o.lan_offloads = true;
    o.rsc = false;
    pr.shared[1].store(tables(1, &o));
    let (f, off) = tcp_super(1400, 20_000, 20_001);
    pr.lan[0].inject_with(f, off);
    pr.pump();
    assert_eq!(pr.got[1].len(), 15);
    let mut seq = 20_001u32;
    for (f, _) in &pr.got[1] {
        assert_eq!(
            u32::from_be_bytes([f[38], f[39], f[40], f[41]]),
            seq,
            "in order"
        );
        seq += (f.len() - 54) as u32;
    }
    let _ = ipv6;
}

/// Turns A's VXLAN segment `seg` into what a Linux VXLAN device hands to a
/// veth and AF_PACKET reports to vecgate: the inner TCP checksum left
/// partial (CHECKSUM_PARTIAL: only the pseudo-header sum in the field),
/// the outer UDP checksum not final, and, when `payload` exceeds `mss`,
/// one encapsulated super-packet (`SKB_GSO_TCPV4 | SKB_GSO_UDP_TUNNEL`,
/// which the vnet header reports as plain GSO_TCPV4 with `csum_start` at
/// the inner TCP header and `hdr_len` as a mere hint).
fn kernel_vxlan_frame(seg: &[u8], payload: usize, mss: u16) -> (Vec<u8>, Offload) {
    use crate::offload::csum::{finish, sum};
    const IN3: usize = 14 + 20 + 8 + 8 + 14;
    const IN4: usize = IN3 + 20;
    let mut f = seg[..IN4 + 20].to_vec();
    f.extend((0..payload).map(|i| (i * 13) as u8));
    let n = f.len();
    f[16..18].copy_from_slice(&((n - 14) as u16).to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = finish(sum(&f[14..34], 0));
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f[38..40].copy_from_slice(&((n - 34) as u16).to_be_bytes());
    f[40..42].copy_from_slice(&[0xde, 0xad]);
    f[IN3 + 2..IN3 + 4].copy_from_slice(&((n - IN3) as u16).to_be_bytes());
    f[IN3 + 10..IN3 + 12].copy_from_slice(&[0, 0]);
    let c = finish(sum(&f[IN3..IN4], 0));
    f[IN3 + 10..IN3 + 12].copy_from_slice(&c.to_be_bytes());
    let src = Ipv4Addr::new(f[IN3 + 12], f[IN3 + 13], f[IN3 + 14], f[IN3 + 15]);
    let dst = Ipv4Addr::new(f[IN3 + 16], f[IN3 + 17], f[IN3 + 18], f[IN3 + 19]);
    let ph = wire::checksum::pseudo_header_v4(&src, &dst, 6, (n - IN4) as u16);
    f[IN4 + 16..IN4 + 18].copy_from_slice(&ph.to_be_bytes());
    let gso = payload > usize::from(mss);
    let o = Offload {
        needs_csum: true,
        csum_valid: false,
        csum_start: IN4 as u16,
        csum_offset: 16,
        gso: if gso { Gso::TcpV4 } else { Gso::None },
        gso_size: if gso { mss } else { 0 },
        hdr_len: if gso { 128 } else { 0 },
    };
    (f, o)
}

/// What the host's NIC would do with a NEEDS_CSUM frame: finish the sum.
fn finish_partial(f: &mut [u8], o: &Offload) {
    use crate::offload::csum::{finish, sum};
    let (s, at) = (
        usize::from(o.csum_start),
        usize::from(o.csum_start + o.csum_offset),
    );
    let c = finish(sum(&f[s..], 0));
    f[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// Kernel VXLAN interop: TCP from a Linux VXLAN device over veth
/// arrives with its inner checksum partial and, with offloads on, as whole
/// encapsulated super-packets. Decapsulation must hand both on with the
/// inner checksum still to be finished (it used to reset the offload state:
/// the host got TCP with a pseudo-header checksum and dropped it, so pings
/// worked and TCP stalled), and a super-packet stays one.
#[test]
fn kernel_vxlan_partial_checksum_and_super_packet_survive_decap() {
    let pr = super_through(TunnelKind::Vxlan, false);
    let seg = a_to_b(&pr)[0].clone();
    for (payload, rsc) in [
        (1000usize, false),
        (1000, true),
        (20_000, true),
        (20_000, false),
    ] {
        let mut o = opts(TunnelKind::Vxlan);
        o.lan_offloads = true;
        o.rsc = rsc;
        let mut pr = Pair::new(&o);
        ping_both_ways(&mut pr);
        let (f, off) = kernel_vxlan_frame(&seg, payload, 1398);
        pr.wan[1].inject_with(f, off);
        pr.pump();
        assert_eq!(
            pr.got[1].len(),
            1,
            "{payload} B, rsc {rsc}: one frame to H_B"
        );
        let (mut f, o) = pr.got[1].remove(0);
        assert_eq!(f.len(), 14 + 40 + payload);
        assert!(o.needs_csum, "the inner checksum is still partial");
        assert_eq!((o.csum_start, o.csum_offset), (34, 16));
        if payload > 1398 {
            assert_eq!((o.gso, o.gso_size, o.hdr_len), (Gso::TcpV4, 1398, 54));
        } else {
            assert_eq!(o.gso, Gso::None);
        }
        finish_partial(&mut f, &o);
        assert!(
            crate::offload::csum::verify_l4_at(&f, 14),
            "finished checksum is right"
        );
        assert!(
            f[54..]
                .iter()
                .enumerate()
                .all(|(i, &b)| b == (i * 13) as u8),
            "payload intact"
        );
    }
}

/// The same frames towards a host port without offloads: the gateway
/// finishes the checksum itself, and segments the super-packet.
#[test]
fn kernel_vxlan_super_packet_to_a_port_without_offloads() {
    let pr = super_through(TunnelKind::Vxlan, false);
    let seg = a_to_b(&pr)[0].clone();
    let mut pr = Pair::new(&opts(TunnelKind::Vxlan));
    ping_both_ways(&mut pr);
    let (f, off) = kernel_vxlan_frame(&seg, 20_000, 1398);
    pr.wan[1].inject_with(f, off);
    pr.pump();
    assert_eq!(pr.got[1].len(), 15, "20000 / 1398");
    let mut data = Vec::new();
    for (f, o) in &pr.got[1] {
        assert!(!o.needs_csum && o.gso == Gso::None);
        assert!(f.len() <= 1514);
        assert!(
            crate::offload::csum::verify_l4_at(f, 14),
            "segment checksum"
        );
        data.extend_from_slice(&f[54..]);
    }
    assert_eq!(
        data,
        (0..20_000).map(|i| (i * 13) as u8).collect::<Vec<u8>>()
    );
}

/// A tunnel published live on a virtual port far beyond the worker's
/// physical ports (as the API's live add does) carries traffic and is
/// counted on that port; the old port, gone from the tables, counts
/// nothing more.
#[test]
fn live_tunnel_on_a_high_virtual_port_is_counted() {
    let o = opts(TunnelKind::Gre);
    let mut pr = Pair::new(&o);
    ping_both_ways(&mut pr);
    let vport = 2 + crate::graph::MAX_VIRTUAL_PORTS as u16 - 1;
    for side in 0..2 {
        pr.shared[side].store(tables_at(side, &o, vport));
    }
    let before: Vec<_> = (0..2).map(|s| pr.snap(s).ports[2]).collect();
    ping_both_ways(&mut pr);
    for (side, old) in before.iter().enumerate() {
        let snap = pr.snap(side);
        let c = snap.ports[usize::from(vport)];
        assert_eq!(
            (c.tx_packets, c.rx_packets, c.drops),
            (1, 1, 0),
            "side {side}"
        );
        assert!(c.tx_bytes >= 100 && c.rx_bytes >= 100);
        assert_eq!(snap.ports[2], *old, "old port idle");
    }
}
