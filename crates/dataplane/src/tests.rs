//! End-to-end tests of the worker and graph with [`MockPort`]s: frames are
//! built and checked with the `wire` crate's Reprs (see `testing`).

use crate::counters::CounterSnapshot;
use crate::fib::Prefix;
use crate::tables::{link_local_eui64, solicited_node, Route, SharedTables, TablesBuilder};
use crate::testing::{
    arp, dissect, eth, icmp4_echo, icmp6, ipv4, ipv6, MockHandle, MockPort, Seen,
};
use crate::worker::{Worker, WorkerConfig};
use packet::Port;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use wire::arp::Operation;
use wire::ethernet::MacAddr;
use wire::icmpv6::Icmpv6Repr;

const GW0: [u8; 6] = [2, 0, 0, 0, 0, 1];
const GW1: [u8; 6] = [2, 0, 0, 0, 0, 2];
const H1: [u8; 6] = [2, 0, 0, 0, 1, 1];
const H2: [u8; 6] = [2, 0, 0, 0, 2, 2];
const BCAST: [u8; 6] = [0xff; 6];

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}
fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}
fn p(s: &str) -> Prefix {
    s.parse().unwrap()
}

struct Rig {
    w: Worker,
    shared: Arc<SharedTables>,
    h: Vec<MockHandle>,
    now: u64,
}

impl Rig {
    /// lan0 (port 0): 10.1.0.1/24, 2001:db8:1::1/64; lan1 (port 1, MTU
    /// `mtu1`): 10.2.0.1/24, 2001:db8:2::1/64; 10.9.0.0/16 via 10.2.0.254.
    fn new(mtu1: u32, cfg: WorkerConfig) -> Rig {
        let mut b = TablesBuilder::new();
        b.add_interface(
            0,
            "lan0",
            GW0,
            1500,
            0,
            &[p("10.1.0.1/24"), p("2001:db8:1::1/64")],
        )
        .add_interface(
            1,
            "lan1",
            GW1,
            mtu1,
            0,
            &[p("10.2.0.1/24"), p("2001:db8:2::1/64")],
        )
        .add_route(
            0,
            p("10.9.0.0/16"),
            Route::Via {
                next_hop: "10.2.0.254".parse().unwrap(),
                port: None,
            },
        );
        Self::with_tables(b, &[("lan0", GW0), ("lan1", GW1)], cfg)
    }

    fn with_tables(b: TablesBuilder, ports: &[(&str, [u8; 6])], cfg: WorkerConfig) -> Rig {
        let shared = SharedTables::new(b.build().unwrap());
        let mut hs = Vec::new();
        let mut ps: Vec<Box<dyn Port>> = Vec::new();
        for (n, m) in ports {
            let (port, h) = MockPort::new(n, *m, 1500);
            ps.push(Box::new(port));
            hs.push(h);
        }
        Rig {
            w: Worker::new(0, ps, shared.clone(), cfg),
            shared,
            h: hs,
            now: 1,
        }
    }

    fn step(&mut self) {
        self.w.step(self.now);
    }

    /// Advances the clock by `ms` in 100 ms steps.
    fn advance(&mut self, ms: u64) {
        let end = self.now + ms;
        while self.now < end {
            self.now = (self.now + 100).min(end);
            self.step();
        }
    }

    fn tx(&self, port: usize) -> Vec<Seen> {
        self.h[port].take_tx().iter().map(|f| dissect(f)).collect()
    }

    fn snap(&self) -> CounterSnapshot {
        self.w.counters().snapshot()
    }

    /// Teaches the gateway `ip` → `mac` on `port` with an ARP request to
    /// the gateway, and discards the reply.
    fn learn4(&mut self, port: usize, mac: [u8; 6], ip: Ipv4Addr, gw: Ipv4Addr) {
        self.h[port].inject(eth(
            BCAST,
            mac,
            0x0806,
            &arp(Operation::Request, mac, ip, [0; 6], gw),
        ));
        self.step();
        assert_eq!(self.tx(port).len(), 1);
    }
}

fn echo4(src: &str, dst: &str, ttl: u8, df: bool, len: usize) -> Vec<u8> {
    let data = vec![0xabu8; len];
    ipv4(v4(src), v4(dst), 1, ttl, df, &icmp4_echo(7, 1, &data))
}

#[test]
fn arp_request_for_our_address_is_answered() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.h[0].inject(eth(
        BCAST,
        H1,
        0x0806,
        &arp(
            Operation::Request,
            H1,
            v4("10.1.0.5"),
            [0; 6],
            v4("10.1.0.1"),
        ),
    ));
    r.step();
    let out = r.tx(0);
    assert_eq!(out.len(), 1);
    let Seen::Arp(e, a) = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(e.dst_addr, MacAddr(H1));
    assert_eq!(e.src_addr, MacAddr(GW0));
    assert_eq!(a.operation, Operation::Reply);
    assert_eq!(a.source_hardware_addr, MacAddr(GW0));
    assert_eq!(a.source_protocol_addr, v4("10.1.0.1"));
    assert_eq!(a.target_hardware_addr, MacAddr(H1));
    assert_eq!(a.target_protocol_addr, v4("10.1.0.5"));
    // The requester was learned (RFC 826: we are the target).
    assert_eq!(r.w.ctx().neigh.get(0, v4("10.1.0.5").into()).unwrap().1, H1);
    assert!(r.tx(1).is_empty());
}

#[test]
fn arp_for_another_address_is_ignored() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.h[0].inject(eth(
        BCAST,
        H1,
        0x0806,
        &arp(
            Operation::Request,
            H1,
            v4("10.1.0.5"),
            [0; 6],
            v4("10.1.0.77"),
        ),
    ));
    r.step();
    assert!(r.tx(0).is_empty());
    assert_eq!(r.snap().error("arp-input", "not-for-us"), 1);
    assert!(r.w.ctx().neigh.get(0, v4("10.1.0.5").into()).is_none());
}

#[test]
fn ping_v4_gets_echo_reply() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.1.0.1", 64, false, 56),
    ));
    r.step();
    let out = r.tx(0);
    assert_eq!(out.len(), 1, "{out:?}");
    let Seen::Icmp4(e, ip, ty, code, body) = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!((e.dst_addr, e.src_addr), (MacAddr(H1), MacAddr(GW0)));
    assert_eq!(
        (ip.src_addr, ip.dst_addr, ip.ttl),
        (v4("10.1.0.1"), v4("10.1.0.5"), 64)
    );
    assert_eq!((*ty, *code), (0, 0));
    assert_eq!(&body[8..], &[0xab; 56][..]);
}

#[test]
fn ping_v4_unknown_sender_resolves_then_replies() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.1.0.1", 64, false, 8),
    ));
    r.step();
    let out = r.tx(0);
    let [Seen::Arp(e, a)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(e.dst_addr, MacAddr(BCAST));
    assert_eq!(
        (a.operation, a.target_protocol_addr, a.source_protocol_addr),
        (Operation::Request, v4("10.1.0.5"), v4("10.1.0.1"))
    );
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0806,
        &arp(Operation::Reply, H1, v4("10.1.0.5"), GW0, v4("10.1.0.1")),
    ));
    r.step();
    let out = r.tx(0);
    let [Seen::Icmp4(e, _, 0, 0, _)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(e.dst_addr, MacAddr(H1));
}

#[test]
fn ping_v6_after_neighbor_solicitation() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    let (h, gw) = (v6("2001:db8:1::5"), v6("2001:db8:1::1"));
    let sn = solicited_node(gw);
    let ns = icmp6(
        h,
        sn,
        &Icmpv6Repr::NeighborSolicit {
            target: gw,
            lladdr: Some(MacAddr(H1)),
        },
    );
    r.h[0].inject(eth(
        [0x33, 0x33, 0xff, 0, 0, 1],
        H1,
        0x86dd,
        &ipv6(h, sn, 58, 255, &ns),
    ));
    r.step();
    let out = r.tx(0);
    let [Seen::Icmp6(e, ip, 136, 0, body)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!((e.dst_addr, e.src_addr), (MacAddr(H1), MacAddr(GW0)));
    assert_eq!((ip.src_addr, ip.dst_addr, ip.hop_limit), (gw, h, 255));
    let na = Icmpv6Repr::parse(
        &ip.src_addr,
        &ip.dst_addr,
        &wire::icmpv6::Packet::new_checked(&body[..]).unwrap(),
    )
    .unwrap();
    let Icmpv6Repr::NeighborAdvert {
        flags,
        target,
        lladdr,
    } = na
    else {
        panic!("{na:?}")
    };
    assert_eq!((target, lladdr), (gw, Some(MacAddr(GW0))));
    assert_eq!(flags & 0xe0, 0xe0, "router, solicited, override");

    let echo = icmp6(
        h,
        gw,
        &Icmpv6Repr::EchoRequest {
            ident: 9,
            seq_no: 3,
            data: b"hello",
        },
    );
    r.h[0].inject(eth(GW0, H1, 0x86dd, &ipv6(h, gw, 58, 64, &echo)));
    r.step();
    let out = r.tx(0);
    let [Seen::Icmp6(e, ip, 129, 0, body)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(e.dst_addr, MacAddr(H1));
    assert_eq!((ip.src_addr, ip.dst_addr), (gw, h));
    assert_eq!(&body[8..], b"hello");
}

#[test]
fn ping_v6_link_local() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    let gw_ll = link_local_eui64(GW0);
    let h_ll = link_local_eui64(H1);
    let ns = icmp6(
        h_ll,
        gw_ll,
        &Icmpv6Repr::NeighborSolicit {
            target: gw_ll,
            lladdr: Some(MacAddr(H1)),
        },
    );
    r.h[0].inject(eth(GW0, H1, 0x86dd, &ipv6(h_ll, gw_ll, 58, 255, &ns)));
    r.step();
    assert_eq!(r.tx(0).len(), 1);
    let echo = icmp6(
        h_ll,
        gw_ll,
        &Icmpv6Repr::EchoRequest {
            ident: 1,
            seq_no: 1,
            data: b"x",
        },
    );
    r.h[0].inject(eth(GW0, H1, 0x86dd, &ipv6(h_ll, gw_ll, 58, 64, &echo)));
    r.step();
    let out = r.tx(0);
    let [Seen::Icmp6(_, ip, 129, 0, _)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!((ip.src_addr, ip.dst_addr), (gw_ll, h_ll));
}

#[test]
fn forwarding_resolves_then_releases_with_ttl_decremented() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 100),
    ));
    r.step();
    assert!(r.tx(0).is_empty());
    let out = r.tx(1);
    let [Seen::Arp(e, a)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!((e.dst_addr, e.src_addr), (MacAddr(BCAST), MacAddr(GW1)));
    assert_eq!(
        (a.source_protocol_addr, a.target_protocol_addr),
        (v4("10.2.0.1"), v4("10.2.0.7"))
    );
    assert_eq!(r.w.ctx().neigh.queued(1, v4("10.2.0.7").into()), 1);
    r.h[1].inject(eth(
        GW1,
        H2,
        0x0806,
        &arp(Operation::Reply, H2, v4("10.2.0.7"), GW1, v4("10.2.0.1")),
    ));
    r.step();
    let out = r.tx(1);
    let [Seen::Icmp4(e, ip, 8, 0, _)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!((e.dst_addr, e.src_addr), (MacAddr(H2), MacAddr(GW1)));
    assert_eq!(
        (ip.src_addr, ip.dst_addr, ip.ttl),
        (v4("10.1.0.5"), v4("10.2.0.7"), 63)
    );
    // The next one goes straight through, and so does a routed one via a
    // gateway once that is known.
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 9, false, 10),
    ));
    r.step();
    let out = r.tx(1);
    let [Seen::Icmp4(_, ip, 8, 0, _)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(ip.ttl, 8);
    let s = r.snap();
    assert_eq!(s.ports[0].rx_packets, 2);
    assert_eq!(s.ports[1].tx_packets, 3);
    assert_eq!(s.packets("ip4-lookup"), 2);
    assert!(s.show_runtime().contains("ip-rewrite"));
}

#[test]
fn via_route_resolves_gateway() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.learn4(1, H2, v4("10.2.0.254"), v4("10.2.0.1"));
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.9.3.3", 64, false, 10),
    ));
    r.step();
    let out = r.tx(1);
    let [Seen::Icmp4(e, ip, 8, 0, _)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(e.dst_addr, MacAddr(H2));
    assert_eq!((ip.dst_addr, ip.ttl), (v4("10.9.3.3"), 63));
}

#[test]
fn ttl_one_gets_time_exceeded() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    let orig = echo4("10.1.0.5", "10.2.0.7", 1, false, 20);
    r.h[0].inject(eth(GW0, H1, 0x0800, &orig));
    r.step();
    assert!(r.tx(1).is_empty());
    let out = r.tx(0);
    let [Seen::Icmp4(e, ip, 11, 0, body)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(e.dst_addr, MacAddr(H1));
    assert_eq!((ip.src_addr, ip.dst_addr), (v4("10.1.0.1"), v4("10.1.0.5")));
    // The whole original (it is short) is quoted, TTL untouched.
    assert_eq!(&body[8..], &orig[..]);
}

#[test]
fn no_route_gets_net_unreachable_v4_and_v6() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "192.0.2.1", 64, false, 20),
    ));
    r.step();
    let out = r.tx(0);
    let [Seen::Icmp4(_, ip, 3, 0, _)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(ip.dst_addr, v4("10.1.0.5"));

    let h = v6("2001:db8:1::5");
    let ns = icmp6(
        h,
        v6("2001:db8:1::1"),
        &Icmpv6Repr::NeighborSolicit {
            target: v6("2001:db8:1::1"),
            lladdr: Some(MacAddr(H1)),
        },
    );
    r.h[0].inject(eth(
        GW0,
        H1,
        0x86dd,
        &ipv6(h, v6("2001:db8:1::1"), 58, 255, &ns),
    ));
    r.step();
    r.tx(0);
    let echo = icmp6(
        h,
        v6("2001:db8:99::1"),
        &Icmpv6Repr::EchoRequest {
            ident: 1,
            seq_no: 1,
            data: b"x",
        },
    );
    r.h[0].inject(eth(
        GW0,
        H1,
        0x86dd,
        &ipv6(h, v6("2001:db8:99::1"), 58, 64, &echo),
    ));
    r.step();
    let out = r.tx(0);
    let [Seen::Icmp6(_, ip, 1, 0, _)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!((ip.src_addr, ip.dst_addr), (v6("2001:db8:1::1"), h));
}

#[test]
fn too_big_with_df_gets_frag_needed_with_mtu() {
    let mut r = Rig::new(1400, WorkerConfig::default());
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    r.learn4(1, H2, v4("10.2.0.7"), v4("10.2.0.1"));
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, true, 1472),
    ));
    r.step();
    assert!(r.tx(1).is_empty());
    let out = r.tx(0);
    let [Seen::Icmp4(_, ip, 3, 4, body)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(ip.dst_addr, v4("10.1.0.5"));
    assert_eq!(u16::from_be_bytes([body[6], body[7]]), 1400);
    // RFC 1812 §4.3.2.3: at most 576 bytes in all.
    assert_eq!(ip.payload_len + 20, 576);
    // Without DF it is fragmented (RFC 791): every fragment at most 1400
    // bytes, TTL decremented once, all to the neighbour.
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 2972),
    ));
    r.step();
    let out = r.tx(1);
    assert_eq!(out.len(), 3, "{out:?}");
    let mut data = 0;
    for (i, s) in out.iter().enumerate() {
        let f = match s {
            Seen::Icmp4(e, ip, ..) | Seen::Ip4(e, ip) => {
                assert_eq!(e.dst_addr, MacAddr(H2));
                ip
            }
            other => panic!("{other:?}"),
        };
        assert!(f.payload_len + 20 <= 1400);
        assert_eq!(f.ttl, 63);
        assert_eq!(f.more_frags, i < 2);
        assert_eq!(usize::from(f.frag_offset), data);
        data += f.payload_len;
    }
    assert_eq!(data, 2980);
    // Exactly at the MTU it passes.
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, true, 1372),
    ));
    r.step();
    assert_eq!(r.tx(1).len(), 1);
}

#[test]
fn too_big_v6_gets_packet_too_big() {
    let mut r = Rig::new(1400, WorkerConfig::default());
    let h = v6("2001:db8:1::5");
    let gw = v6("2001:db8:1::1");
    let ns = icmp6(
        h,
        gw,
        &Icmpv6Repr::NeighborSolicit {
            target: gw,
            lladdr: Some(MacAddr(H1)),
        },
    );
    r.h[0].inject(eth(GW0, H1, 0x86dd, &ipv6(h, gw, 58, 255, &ns)));
    r.step();
    r.tx(0);
    let dst = v6("2001:db8:2::7");
    let echo = icmp6(
        h,
        dst,
        &Icmpv6Repr::EchoRequest {
            ident: 1,
            seq_no: 1,
            data: &[0; 1400],
        },
    );
    r.h[0].inject(eth(GW0, H1, 0x86dd, &ipv6(h, dst, 58, 64, &echo)));
    r.step();
    let out = r.tx(0);
    let [Seen::Icmp6(_, ip, 2, 0, body)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(
        u32::from_be_bytes([body[4], body[5], body[6], body[7]]),
        1400
    );
    assert_eq!(ip.payload_len + 40, 1280);
}

#[test]
fn vrf_isolation_with_identical_prefixes() {
    let mut b = TablesBuilder::new();
    b.add_vrf(7, "blue")
        .add_interface(
            0,
            "red0",
            [2, 0, 0, 0, 0, 0x10],
            1500,
            0,
            &[p("10.1.0.1/24")],
        )
        .add_interface(
            1,
            "red1",
            [2, 0, 0, 0, 0, 0x11],
            1500,
            0,
            &[p("10.2.0.1/24")],
        )
        .add_interface(
            2,
            "blue0",
            [2, 0, 0, 0, 0, 0x12],
            1500,
            7,
            &[p("10.1.0.1/24")],
        )
        .add_interface(
            3,
            "blue1",
            [2, 0, 0, 0, 0, 0x13],
            1500,
            7,
            &[p("10.2.0.1/24")],
        );
    let macs = [
        [2, 0, 0, 0, 0, 0x10],
        [2, 0, 0, 0, 0, 0x11],
        [2, 0, 0, 0, 0, 0x12],
        [2, 0, 0, 0, 0, 0x13],
    ];
    let mut r = Rig::with_tables(
        b,
        &[
            ("red0", macs[0]),
            ("red1", macs[1]),
            ("blue0", macs[2]),
            ("blue1", macs[3]),
        ],
        WorkerConfig::default(),
    );
    let hr = [2, 0, 0, 0, 9, 1];
    let hb = [2, 0, 0, 0, 9, 2];
    r.learn4(1, hr, v4("10.2.0.7"), v4("10.2.0.1"));
    r.learn4(3, hb, v4("10.2.0.7"), v4("10.2.0.1"));
    r.h[0].inject(eth(
        macs[0],
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 1),
    ));
    r.h[2].inject(eth(
        macs[2],
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 2),
    ));
    r.step();
    let red = r.tx(1);
    let blue = r.tx(3);
    let [Seen::Icmp4(e, ip, 8, 0, _)] = &red[..] else {
        panic!("{red:?}")
    };
    assert_eq!(e.dst_addr, MacAddr(hr));
    assert_eq!(ip.payload_len, 9);
    let [Seen::Icmp4(e, ip, 8, 0, _)] = &blue[..] else {
        panic!("{blue:?}")
    };
    assert_eq!(e.dst_addr, MacAddr(hb));
    assert_eq!(ip.payload_len, 10);
    assert!(r.tx(0).is_empty() && r.tx(2).is_empty());
}

#[test]
fn malformed_frames_are_dropped_with_reasons_and_good_one_passes() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.learn4(1, H2, v4("10.2.0.7"), v4("10.2.0.1"));
    let good = eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 30),
    );
    // Every truncation of a valid frame, with the good frame in the middle
    // of the same vector.
    for n in 0..good.len() {
        r.h[0].inject(good[..n].to_vec());
        if n == 40 {
            r.h[0].inject(good.clone());
        }
    }
    r.step();
    let out = r.tx(1);
    assert_eq!(out.len(), 1, "only the good frame is forwarded");
    let s = r.snap();
    assert_eq!(s.error("ethernet-input", "too-short"), 14);
    assert_eq!(s.error("ip4-input", "too-short"), 20);
    assert_eq!(s.error("ip4-input", "bad-length"), (good.len() - 34) as u64);

    let ip = echo4("10.1.0.5", "10.2.0.7", 64, false, 30);
    let mut bad_ihl = ip.clone();
    bad_ihl[0] = 0x44;
    let mut big_ihl = ip.clone();
    big_ihl[0] = 0x4f;
    let mut bad_len = ip.clone();
    bad_len[2..4].copy_from_slice(&2000u16.to_be_bytes());
    let mut bad_csum = ip.clone();
    bad_csum[10] ^= 0xff;
    let mut bad_ver = ip.clone();
    bad_ver[0] = 0x55;
    for f in [&bad_ihl, &big_ihl, &bad_len, &bad_csum, &bad_ver] {
        r.h[0].inject(eth(GW0, H1, 0x0800, f));
    }
    r.h[0].inject(good.clone());
    // IPv6: 9 chained destination-options headers to us (beyond the walk
    // limit), and a hop-by-hop header that is not first.
    let me = v6("2001:db8:1::1");
    let h = v6("2001:db8:1::5");
    let mut chain = Vec::new();
    for _ in 0..9 {
        chain.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
    }
    r.h[0].inject(eth(GW0, H1, 0x86dd, &ipv6(h, me, 60, 64, &chain)));
    let hbh_late = [0u8, 0, 1, 4, 0, 0, 0, 0, 58, 0, 1, 4, 0, 0, 0, 0];
    r.h[0].inject(eth(GW0, H1, 0x86dd, &ipv6(h, me, 60, 64, &hbh_late)));
    // Extension header length running past the packet.
    r.h[0].inject(eth(
        GW0,
        H1,
        0x86dd,
        &ipv6(h, me, 60, 64, &[58, 200, 0, 0, 0, 0, 0, 0]),
    ));
    // VLAN-tagged frame.
    let mut tagged = good.clone();
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    r.h[0].inject(tagged);
    r.step();
    assert_eq!(r.tx(1).len(), 1);
    let s = r.snap();
    assert_eq!(
        s.error("ip4-input", "bad-ihl"),
        2,
        "IHL below 5 and beyond the packet"
    );
    assert_eq!(
        s.error("ip4-input", "bad-length"),
        (good.len() - 34) as u64 + 1
    );
    assert_eq!(s.error("ip4-input", "bad-checksum"), 1);
    assert_eq!(s.error("ip4-input", "bad-version"), 1);
    assert_eq!(s.error("ip-local", "bad-ext-header"), 3);
    assert_eq!(s.error("ethernet-input", "vlan-tagged"), 1);

    // 64 KB of garbage, as IPv4, IPv6 and raw: each dropped by exactly one
    // reason of the node that looked at it, and a good frame still passes.
    let total = |s: &CounterSnapshot, node: &str| -> u64 {
        s.nodes
            .iter()
            .find(|n| n.name == node)
            .map_or(0, |n| n.errors.iter().map(|(_, c)| c).sum())
    };
    let before = r.snap();
    let garbage: Vec<u8> = (0..65_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    r.h[0].inject(eth(GW0, H1, 0x0800, &garbage));
    r.h[0].inject(eth(GW0, H1, 0x86dd, &garbage));
    r.h[0].inject(garbage.clone());
    r.h[0].inject(good.clone());
    r.step();
    assert_eq!(r.tx(1).len(), 1);
    let after = r.snap();
    assert_eq!(total(&after, "ip4-input") - total(&before, "ip4-input"), 1);
    assert_eq!(total(&after, "ip6-input") - total(&before, "ip6-input"), 1);
    assert_eq!(
        total(&after, "ethernet-input") - total(&before, "ethernet-input"),
        1
    );
    // Nothing leaked.
    r.advance(100);
    assert!(r.w.ctx().pool.is_full(), "every buffer back");
}

#[test]
fn neighbour_aging_reprobe_and_unresolved_drop() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    // Resolve 10.2.0.7 by forwarding.
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 1),
    ));
    r.step();
    r.tx(1);
    r.h[1].inject(eth(
        GW1,
        H2,
        0x0806,
        &arp(Operation::Reply, H2, v4("10.2.0.7"), GW1, v4("10.2.0.1")),
    ));
    r.step();
    assert_eq!(r.tx(1).len(), 1);
    let ip = v4("10.2.0.7").into();
    r.advance(30_100);
    assert_eq!(
        r.w.ctx().neigh.get(1, ip).unwrap().0,
        crate::neighbour::State::Stale
    );
    assert!(r.tx(1).is_empty());
    // Used while stale: forwarded at once, then re-probed by unicast.
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 1),
    ));
    r.step();
    assert_eq!(r.tx(1).len(), 1);
    r.advance(100);
    let out = r.tx(1);
    let [Seen::Arp(e, a)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(
        (e.dst_addr, a.target_protocol_addr),
        (MacAddr(H2), v4("10.2.0.7"))
    );
    // Nobody answers: after the probes the entry is gone.
    r.advance(3_100);
    assert_eq!(r.tx(1).len(), 2, "two more unicast probes");
    assert!(r.w.ctx().neigh.get(1, ip).is_none());
    // A new packet starts a broadcast resolution that fails after 3 tries.
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 1),
    ));
    r.step();
    r.advance(3_100);
    let out = r.tx(1);
    assert_eq!(out.len(), 3);
    assert!(out
        .iter()
        .all(|s| matches!(s, Seen::Arp(e, _) if e.dst_addr == MacAddr(BCAST))));
    assert_eq!(r.snap().error("ip-rewrite", "neighbour-unresolved"), 1);
    assert!(r.w.ctx().pool.is_full(), "every buffer back");
}

#[test]
fn icmp_errors_are_rate_limited() {
    let cfg = WorkerConfig {
        icmp_rate: 10,
        icmp_burst: 5,
        ..Default::default()
    };
    let mut r = Rig::new(1500, cfg);
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    for _ in 0..20 {
        r.h[0].inject(eth(
            GW0,
            H1,
            0x0800,
            &echo4("10.1.0.5", "10.2.0.7", 1, false, 1),
        ));
    }
    r.step();
    let icmp = |v: Vec<Seen>| {
        v.into_iter()
            .filter(|s| matches!(s, Seen::Icmp4(_, _, 11, 0, _)))
            .count()
    };
    assert_eq!(icmp(r.tx(0)), 5);
    assert_eq!(r.snap().error("icmp-error", "rate-limited"), 15);
    // A second later the bucket has refilled (10 per second, burst 5).
    r.advance(1000);
    for _ in 0..20 {
        r.h[0].inject(eth(
            GW0,
            H1,
            0x0800,
            &echo4("10.1.0.5", "10.2.0.7", 1, false, 1),
        ));
    }
    r.step();
    assert_eq!(icmp(r.tx(0)), 5);
}

/// Tenant A's TTL-1 flood spends VRF A's ICMP budget only: tenant B, in
/// its own VRF behind the same worker, still gets its "fragmentation
/// needed" (its PMTU discovery) and its own time-exceeded errors. Before
/// (one budget per worker) B's errors were all rate-limited.
#[test]
fn one_tenants_icmp_flood_does_not_spend_anothers_budget() {
    const GW2: [u8; 6] = [2, 0, 0, 0, 0, 0x12];
    const GW3: [u8; 6] = [2, 0, 0, 0, 0, 0x13];
    const HB1: [u8; 6] = [2, 0, 0, 0, 0, 0x22];
    const HB2: [u8; 6] = [2, 0, 0, 0, 0, 0x23];
    let cfg = WorkerConfig {
        icmp_rate: 10,
        icmp_burst: 5,
        ..Default::default()
    };
    // The same addresses in both tenants; B's far side has MTU 1400.
    let mut b = TablesBuilder::new();
    b.add_vrf(1, "a")
        .add_vrf(2, "b")
        .add_interface(0, "a-lan", GW0, 1500, 1, &[p("10.1.0.1/24")])
        .add_interface(1, "a-wan", GW1, 1500, 1, &[p("10.2.0.1/24")])
        .add_interface(2, "b-lan", GW2, 1500, 2, &[p("10.1.0.1/24")])
        .add_interface(3, "b-wan", GW3, 1400, 2, &[p("10.2.0.1/24")]);
    let mut r = Rig::with_tables(
        b,
        &[
            ("a-lan", GW0),
            ("a-wan", GW1),
            ("b-lan", GW2),
            ("b-wan", GW3),
        ],
        cfg,
    );
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    r.learn4(2, HB1, v4("10.1.0.5"), v4("10.1.0.1"));
    r.learn4(3, HB2, v4("10.2.0.7"), v4("10.2.0.1"));
    let flood = echo4("10.1.0.5", "10.2.0.7", 1, false, 1);
    for _ in 0..50 {
        r.h[0].inject(eth(GW0, H1, 0x0800, &flood));
    }
    r.step();
    // B, after A's flood, in the same millisecond: one DF packet too big
    // for b-wan, then two TTL-1 packets.
    r.h[2].inject(eth(
        GW2,
        HB1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, true, 1472),
    ));
    for _ in 0..2 {
        r.h[2].inject(eth(GW2, HB1, 0x0800, &flood));
    }
    r.step();
    let a = r.tx(0);
    assert_eq!(
        a.iter()
            .filter(|s| matches!(s, Seen::Icmp4(_, _, 11, 0, _)))
            .count(),
        5,
        "A gets its burst"
    );
    let out = r.tx(2);
    let too_big: Vec<u16> = out
        .iter()
        .filter_map(|s| match s {
            Seen::Icmp4(e, ip, 3, 4, body) if e.dst_addr == MacAddr(HB1) => {
                assert_eq!(ip.dst_addr, v4("10.1.0.5"));
                Some(u16::from_be_bytes([body[6], body[7]]))
            }
            _ => None,
        })
        .collect();
    assert_eq!(too_big, vec![1400], "B's frag-needed: {out:?}");
    let exceeded = out
        .iter()
        .filter(|s| matches!(s, Seen::Icmp4(e, _, 11, 0, _) if e.dst_addr == MacAddr(HB1)))
        .count();
    assert_eq!(exceeded, 2, "{out:?}");
    assert!(r.tx(3).is_empty(), "nothing crossed to b-wan");
    assert_eq!(r.snap().error("icmp-error", "rate-limited"), 45);
}

/// Tenant A's 5000 unsolicited ARP replies and 5000 ARP requests, from
/// 5000 on-link sender addresses (plus 1000 off-link ones), 5000
/// unsolicited NAs with the S flag and 1000 TTL-1 packets fill only its
/// port's quota and spend only its ICMP budget; tenant B still resolves a
/// new next hop, forwards through it and gets its time-exceeded (the
/// issue's tenant test, in one run). Before (one table of 4096 for all
/// ports, no eviction) B's packet was dropped without even an ARP request,
/// and (one ICMP budget per worker) its error was rate-limited away.
#[test]
fn one_tenants_arp_flood_leaves_another_tenant_resolving() {
    let mut b = TablesBuilder::new();
    b.add_vrf(1, "a")
        .add_vrf(2, "b")
        .add_interface(
            0,
            "a-lan",
            GW0,
            1500,
            1,
            &[p("10.1.0.1/16"), p("2001:db8:a::1/64")],
        )
        .add_interface(1, "b-lan", GW1, 1500, 2, &[p("10.2.0.1/24")])
        .add_route(
            2,
            p("10.9.0.0/16"),
            Route::Via {
                next_hop: "10.2.0.9".parse().unwrap(),
                port: None,
            },
        );
    let mut r = Rig::with_tables(
        b,
        &[("a-lan", GW0), ("b-lan", GW1)],
        WorkerConfig::default(),
    );
    let quota = r.w.ctx().neigh.config().max_per_port;
    for i in 0..5000u32 {
        let ip = Ipv4Addr::from(0x0a01_0000 + 2 + i);
        let mac = [2, 0xaa, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8];
        let op = if i % 2 == 0 {
            Operation::Reply
        } else {
            Operation::Request
        };
        r.h[0].inject(eth(
            GW0,
            mac,
            0x0806,
            &arp(op, mac, ip, GW0, v4("10.1.0.1")),
        ));
        r.h[0].inject(eth(
            GW0,
            mac,
            0x0806,
            &arp(Operation::Request, mac, ip, [0; 6], v4("10.1.0.1")),
        ));
        if i < 1000 {
            // Off-link senders are never learned.
            let off = Ipv4Addr::from(0x0a63_0000 + i);
            r.h[0].inject(eth(
                GW0,
                mac,
                0x0806,
                &arp(Operation::Reply, mac, off, GW0, v4("10.1.0.1")),
            ));
        }
        if i < 1000 {
            // TTL 1, forwarded on A's own link: time-exceeded, from A's
            // budget only.
            r.h[0].inject(eth(
                GW0,
                mac,
                0x0800,
                &echo4(&ip.to_string(), "10.1.200.1", 1, false, 1),
            ));
        }
        {
            // Solicited NAs nobody solicited, for on-link targets.
            let t = Ipv6Addr::from(0x2001_0db8_000a_0000_0000_0000_0001_0000u128 + u128::from(i));
            let na = icmp6(
                t,
                v6("2001:db8:a::1"),
                &Icmpv6Repr::NeighborAdvert {
                    flags: wire::icmpv6::na_flags::SOLICITED | wire::icmpv6::na_flags::OVERRIDE,
                    target: t,
                    lladdr: Some(MacAddr(mac)),
                },
            );
            r.h[0].inject(eth(
                GW0,
                mac,
                0x86dd,
                &ipv6(t, v6("2001:db8:a::1"), 58, 255, &na),
            ));
        }
        if i % 100 == 99 {
            r.step();
            let _ = r.tx(0);
        }
    }
    r.step();
    let _ = r.tx(0);
    // Last, what only an answer to our own request could teach: 2000
    // replies nobody asked for and 2000 gratuitous ARPs from on-link
    // addresses that sent nothing else (with the old rule they were
    // learned and pushed the request senders out of A's quota).
    let spoofed = |i: u32| Ipv4Addr::from(0x0a01_8000 + i);
    for i in 0..2000u32 {
        let ip = spoofed(i);
        let mac = [2, 0xbb, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8];
        r.h[0].inject(eth(
            GW0,
            mac,
            0x0806,
            &arp(Operation::Reply, mac, ip, GW0, v4("10.1.0.1")),
        ));
        r.h[0].inject(eth(
            BCAST,
            mac,
            0x0806,
            &arp(Operation::Request, mac, ip, [0; 6], ip),
        ));
        if i % 100 == 99 {
            r.step();
            let _ = r.tx(0);
        }
    }
    r.step();
    let _ = r.tx(0);
    // Tenant B: a packet to a new next hop is held, its ARP request goes
    // out, the answer releases it.
    r.learn4(1, H2, v4("10.2.0.7"), v4("10.2.0.1"));
    r.h[1].inject(eth(
        GW1,
        H2,
        0x0800,
        &echo4("10.2.0.7", "10.9.1.1", 64, false, 1),
    ));
    r.step();
    let out = r.tx(1);
    let [Seen::Arp(e, a)] = &out[..] else {
        panic!("B's next hop is not being resolved: {out:?}")
    };
    assert_eq!(
        (e.dst_addr, a.target_protocol_addr),
        (MacAddr(BCAST), v4("10.2.0.9"))
    );
    const NH: [u8; 6] = [2, 0, 0, 0, 2, 9];
    r.h[1].inject(eth(
        GW1,
        NH,
        0x0806,
        &arp(Operation::Reply, NH, v4("10.2.0.9"), GW1, v4("10.2.0.1")),
    ));
    r.step();
    let out = r.tx(1);
    let [Seen::Icmp4(e, ip, 8, 0, _)] = &out[..] else {
        panic!("B's packet not forwarded: {out:?}")
    };
    assert_eq!((e.dst_addr, ip.dst_addr), (MacAddr(NH), v4("10.9.1.1")));
    // A's TTL-1 flood ran out of A's budget; B's own TTL-1 packet, in the
    // same millisecond, still gets its time-exceeded.
    assert!(r.snap().error("icmp-error", "rate-limited") >= 900);
    r.h[1].inject(eth(
        GW1,
        H2,
        0x0800,
        &echo4("10.2.0.7", "10.9.1.1", 1, false, 1),
    ));
    r.step();
    let out = r.tx(1);
    let [Seen::Icmp4(e, ip, 11, 0, _)] = &out[..] else {
        panic!("B got no time-exceeded: {out:?}")
    };
    assert_eq!((e.dst_addr, ip.dst_addr), (MacAddr(H2), v4("10.2.0.7")));
    let on_a = r.w.ctx().neigh.entries().filter(|e| e.0 == 0).count();
    assert_eq!(on_a, quota, "tenant A's port holds its quota");
    // Nothing that only answered a question nobody asked was learned:
    // no NA target (every NA was unsolicited), no reply-only or
    // gratuitous sender.
    assert!(
        !r.w.ctx().neigh.entries().any(|e| e.0 == 0 && e.1.is_ipv6()),
        "an unsolicited NA created an entry"
    );
    let learned_spoof =
        r.w.ctx()
            .neigh
            .entries()
            .filter(|e| (0..2000).any(|i| e.1 == std::net::IpAddr::from(spoofed(i))))
            .count();
    assert_eq!(
        learned_spoof, 0,
        "unsolicited replies / gratuitous ARP created entries"
    );
    assert!(
        !r.w.ctx()
            .neigh
            .entries()
            .any(|e| e.1 == std::net::IpAddr::from(v4("10.99.0.1"))),
        "an off-link sender was learned"
    );
    assert!(r.w.ctx().neigh.evicted() > 0);
}

/// The request goes out from one worker, the reply is hashed to another:
/// the shared solicited set lets the second worker learn it (and the
/// first complete through the hints); the same reply for an address
/// nobody asked about creates nothing anywhere.
#[test]
fn a_reply_creates_an_entry_only_for_a_solicitation_of_any_worker() {
    let shared = crate::neighbour::NeighbourShared::new(64, 60_000);
    let mut a = Rig::new(1500, WorkerConfig::default());
    let mut b = Rig::new(1500, WorkerConfig::default());
    a.w.set_neighbour_shared(shared.clone());
    b.w.set_neighbour_shared(shared.clone());
    let reply = |ip: &str| {
        eth(
            GW1,
            H2,
            0x0806,
            &arp(Operation::Reply, H2, v4(ip), GW1, v4("10.2.0.1")),
        )
    };
    // Unsolicited: nobody learns 10.2.0.8.
    b.h[1].inject(reply("10.2.0.8"));
    b.step();
    assert!(b.w.ctx().neigh.get(1, v4("10.2.0.8").into()).is_none());
    // A forwards to 10.2.0.7: its ARP request goes out ...
    a.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 1),
    ));
    a.step();
    assert!(matches!(&a.tx(1)[..], [Seen::Arp(..)]));
    // ... and the reply reaches B, which learns it as an answer.
    b.h[1].inject(reply("10.2.0.7"));
    b.step();
    assert_eq!(
        b.w.ctx().neigh.get(1, v4("10.2.0.7").into()),
        Some((crate::neighbour::State::Reachable, H2))
    );
    // A's held packet leaves through the hint.
    b.advance(100);
    a.advance(200);
    let out = a.tx(1);
    let [Seen::Icmp4(e, _, 8, 0, _)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(e.dst_addr, MacAddr(H2));
    // Still nothing for the unsolicited address, on either worker.
    b.h[1].inject(reply("10.2.0.8"));
    b.step();
    a.step();
    assert!(a.w.ctx().neigh.get(1, v4("10.2.0.8").into()).is_none());
    assert!(b.w.ctx().neigh.get(1, v4("10.2.0.8").into()).is_none());
}

/// RFC 4861 §7.2.5: an NA with the S flag creates an entry only as the
/// answer to our NS; an unsolicited one only updates an existing entry.
#[test]
fn a_solicited_na_creates_an_entry_only_after_our_ns() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    let gw = v6("2001:db8:2::1");
    let na = |t: Ipv6Addr, mac: [u8; 6]| {
        let m = icmp6(
            t,
            gw,
            &Icmpv6Repr::NeighborAdvert {
                flags: wire::icmpv6::na_flags::SOLICITED | wire::icmpv6::na_flags::OVERRIDE,
                target: t,
                lladdr: Some(MacAddr(mac)),
            },
        );
        eth(GW1, mac, 0x86dd, &ipv6(t, gw, 58, 255, &m))
    };
    let (h, other) = (v6("2001:db8:2::7"), v6("2001:db8:2::8"));
    r.h[1].inject(na(other, H2));
    r.step();
    assert!(r.w.ctx().neigh.get(1, other.into()).is_none());
    // Forwarding to h sends an NS; the NA answering it is learned.
    r.h[0].inject(eth(
        GW0,
        H1,
        0x86dd,
        &ipv6(v6("2001:db8:1::5"), h, 17, 64, &[0u8; 16]),
    ));
    r.step();
    assert!(r.tx(1).iter().any(|s| matches!(s, Seen::Icmp6(..))));
    r.h[1].inject(na(h, H2));
    r.step();
    assert_eq!(r.w.ctx().neigh.get(1, h.into()).map(|e| e.1), Some(H2));
    // A later NA with override updates the entry that now exists.
    r.h[1].inject(na(h, H1));
    r.step();
    assert_eq!(r.w.ctx().neigh.get(1, h.into()).map(|e| e.1), Some(H1));
    assert!(r.w.ctx().neigh.get(1, other.into()).is_none());
}

#[test]
fn no_error_about_errors_or_broadcasts() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    // An ICMP time-exceeded message with TTL 1 in transit: no error back.
    let err = {
        let mut m = vec![11u8, 0, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&[0x45; 28]);
        let c = wire::checksum::checksum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        ipv4(v4("10.1.0.5"), v4("10.2.0.7"), 1, 1, false, &m)
    };
    r.h[0].inject(eth(GW0, H1, 0x0800, &err));
    // TTL 1 to us via L2 broadcast: no error either.
    r.h[0].inject(eth(
        BCAST,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 1, false, 1),
    ));
    r.step();
    assert!(r.tx(0).is_empty());
    let s = r.snap();
    assert_eq!(s.error("icmp-error", "about-an-error"), 1);
    assert_eq!(s.error("icmp-error", "about-multicast"), 1);
}

#[test]
fn trace_records_the_path() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.learn4(1, H2, v4("10.2.0.7"), v4("10.2.0.1"));
    r.w.trace_arm(1);
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 1),
    ));
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 1),
    ));
    r.step();
    let lines = r.w.trace_drain();
    let text = lines.join("\n");
    assert!(
        text.contains("ip4-lookup: 10.2.0.7 -> connected port lan1"),
        "{text}"
    );
    assert!(text.contains("interface-output: lan1"), "{text}");
    // Only one packet traced.
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("ethernet-input"))
            .count(),
        1
    );
}

#[test]
fn announce_sends_gratuitous_arp_and_unsolicited_na() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.w.announce_all(1);
    let out = r.tx(0);
    assert_eq!(out.len(), 3, "{out:?}");
    let Seen::Arp(e, a) = &out[0] else { panic!() };
    assert_eq!(e.dst_addr, MacAddr(BCAST));
    assert_eq!(
        (a.source_protocol_addr, a.target_protocol_addr),
        (v4("10.1.0.1"), v4("10.1.0.1"))
    );
    let targets: Vec<Ipv6Addr> = out[1..]
        .iter()
        .map(|s| {
            let Seen::Icmp6(e, ip, 136, 0, body) = s else {
                panic!("{s:?}")
            };
            assert_eq!(e.dst_addr, MacAddr([0x33, 0x33, 0, 0, 0, 1]));
            assert_eq!(ip.hop_limit, 255);
            assert_eq!(body[4] & 0x20, 0x20, "override");
            let mut t = [0u8; 16];
            t.copy_from_slice(&body[8..24]);
            Ipv6Addr::from(t)
        })
        .collect();
    assert_eq!(targets, vec![link_local_eui64(GW0), v6("2001:db8:1::1")]);
}

#[test]
fn failed_port_goes_down_and_is_reopened() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    let reopened: Arc<std::sync::Mutex<Option<MockHandle>>> = Arc::default();
    let slot = reopened.clone();
    r.w.set_port_factory(Box::new(move |i, name| {
        assert_eq!((i, name), (1, "lan1"));
        let (p, h) = MockPort::new(name, GW1, 1500);
        *slot.lock().unwrap() = Some(h);
        Ok(Box::new(p) as Box<dyn Port>)
    }));
    r.h[1].set_fail(true);
    r.step();
    assert!(!r.w.port_is_up(1));
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 1),
    ));
    r.step();
    assert_eq!(r.snap().error("ip-rewrite", "interface-down"), 1);
    r.advance(1000);
    assert!(r.w.port_is_up(1));
    let h = reopened.lock().unwrap().clone().unwrap();
    // Announced on the way up.
    assert!(h
        .take_tx()
        .iter()
        .any(|f| matches!(dissect(f), Seen::Arp(..))));
}

#[test]
fn neighbour_learned_on_one_worker_helps_another() {
    let shared = crate::neighbour::NeighbourShared::new(64, 60_000);
    let mut a = Rig::new(1500, WorkerConfig::default());
    let mut b = Rig::new(1500, WorkerConfig::default());
    a.w.set_neighbour_shared(shared.clone());
    b.w.set_neighbour_shared(shared.clone());
    a.learn4(1, H2, v4("10.2.0.7"), v4("10.2.0.1"));
    a.advance(100); // timer: publish
    b.step();
    b.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.2.0.7", 64, false, 1),
    ));
    b.step();
    let out = b.tx(1);
    let [Seen::Icmp4(e, _, 8, 0, _)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(e.dst_addr, MacAddr(H2));
}

#[test]
fn tables_swap_takes_effect_on_next_vector() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    r.learn4(1, H2, v4("10.2.0.254"), v4("10.2.0.1"));
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "198.51.100.1", 64, false, 1),
    ));
    r.step();
    assert!(matches!(&r.tx(0)[..], [Seen::Icmp4(_, _, 3, 0, _)]));
    // Publish a default route: the next vector uses it.
    let mut b = TablesBuilder::new();
    b.add_interface(0, "lan0", GW0, 1500, 0, &[p("10.1.0.1/24")])
        .add_interface(1, "lan1", GW1, 1500, 0, &[p("10.2.0.1/24")])
        .add_route(
            0,
            p("0.0.0.0/0"),
            Route::Via {
                next_hop: "10.2.0.254".parse().unwrap(),
                port: None,
            },
        );
    r.shared.store(b.build().unwrap());
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "198.51.100.1", 64, false, 1),
    ));
    r.step();
    let out = r.tx(1);
    let [Seen::Icmp4(e, ip, 8, 0, _)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!((e.dst_addr, ip.dst_addr), (MacAddr(H2), v4("198.51.100.1")));
}

/// A TCP/IPv4 super-packet of `payload` bytes (GSO TcpV4, partial
/// checksum as the kernel hands it over: pseudo-header sum in the field).
fn tcp_super_packet(payload: usize, mss: u16) -> (Vec<u8>, packet::Offload) {
    let (src, dst) = (v4("10.1.0.5"), v4("10.2.0.7"));
    let mut tcp = vec![0u8; 20 + payload];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18; // PSH, ACK
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    for (i, b) in tcp[20..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let ph = wire::checksum::pseudo_header_v4(&src, &dst, 6, tcp.len() as u16);
    tcp[16..18].copy_from_slice(&ph.to_be_bytes());
    let frame = eth(GW0, H1, 0x0800, &ipv4(src, dst, 6, 64, true, &tcp));
    let o = packet::Offload {
        needs_csum: true,
        csum_valid: false,
        csum_start: 34,
        csum_offset: 16,
        gso: packet::Gso::TcpV4,
        gso_size: mss,
        hdr_len: 54,
    };
    (frame, o)
}

#[test]
fn gso_super_packet_is_segmented_for_a_port_without_offloads() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.learn4(1, H2, v4("10.2.0.7"), v4("10.2.0.1"));
    let (f, o) = tcp_super_packet(4000, 1448);
    r.h[0].inject_with(f, o);
    r.step();
    let out = r.h[1].take_tx_with();
    assert_eq!(out.len(), 3, "4000 bytes in segments of 1448");
    let mut total = 0;
    for (f, o) in &out {
        assert_eq!(o.gso, packet::Gso::None);
        let Seen::Ip4(e, ip) = dissect(f) else {
            panic!()
        };
        assert_eq!((e.dst_addr, ip.ttl), (MacAddr(H2), 63));
        assert!(ip.payload_len + 20 <= 1500);
        assert!(
            crate::offload::csum::verify_l4_at(f, 14),
            "TCP checksum of each segment"
        );
        total += ip.payload_len - 20;
    }
    assert_eq!(total, 4000);
}

/// Receive bursts are budgeted in wire-sized packets: 300 super-packets of
/// 44 segments each, taken in one vector, would need 13 200 buffers for
/// their segments (the pool has 2 × 2048) and segmentation would drop what
/// does not fit (a NAT-T gateway lost whole UDP GSO datagrams so, 8 TCP
/// streams: 37 k retransmits in 6 s). A few per vector, all are forwarded.
#[test]
fn a_queue_of_super_packets_is_cut_without_running_out_of_buffers() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.learn4(1, H2, v4("10.2.0.7"), v4("10.2.0.1"));
    let (f, o) = tcp_super_packet(44 * 1448, 1448);
    for _ in 0..300 {
        r.h[0].inject_with(f.clone(), o);
    }
    let (mut segments, mut steps) = (0, 0);
    while segments < 300 * 44 && steps < 1000 {
        r.step();
        steps += 1;
        let out = r.h[1].take_tx();
        assert!(
            out.len() <= 2 * packet::buffer::VECTOR_SIZE,
            "{} segments in one vector",
            out.len()
        );
        segments += out.len();
    }
    assert_eq!(r.snap().error("interface-output", "segmentation-failed"), 0);
    assert_eq!(segments, 300 * 44, "every segment forwarded");
}

#[test]
fn gso_super_packet_is_judged_by_segment_size() {
    let mut r = Rig::new(1400, WorkerConfig::default());
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    r.learn4(1, H2, v4("10.2.0.7"), v4("10.2.0.1"));
    // Segments of 1448 + 40 bytes of headers exceed 1400 with DF: too big.
    let (f, o) = tcp_super_packet(4000, 1448);
    r.h[0].inject_with(f, o);
    r.step();
    assert!(r.h[1].take_tx().is_empty());
    let out = r.tx(0);
    let [Seen::Icmp4(_, _, 3, 4, body)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(u16::from_be_bytes([body[6], body[7]]), 1400);
    // Segments of 1360 fit although the super-packet is 4040 bytes.
    let (f, o) = tcp_super_packet(4000, 1360);
    r.h[0].inject_with(f, o);
    r.step();
    assert_eq!(r.h[1].take_tx().len(), 3);
}

/// The kernel reports `skb_headlen()` as the vnet header's `hdr_len`, which
/// covers payload when TCP put data in the linear area (small
/// retransmissions). A 2-segment super-packet with such a hint must still be
/// judged by its real headers: it was refused as "too big" once, which
/// stalled every flow through two gateways in series.
#[test]
fn gso_hdr_len_hint_covering_payload_is_not_taken_for_headers() {
    let mut r = Rig::new(1500, WorkerConfig::default());
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    r.learn4(1, H2, v4("10.2.0.7"), v4("10.2.0.1"));
    let (f, mut o) = tcp_super_packet(2896, 1448);
    o.hdr_len = f.len() as u16;
    r.h[0].inject_with(f, o);
    r.step();
    assert!(r.tx(0).is_empty(), "no ICMP error back to the sender");
    let payload: usize = r.h[1]
        .take_tx()
        .iter()
        .map(|f| match dissect(f) {
            Seen::Ip4(_, ip) => ip.payload_len - 20,
            other => panic!("{other:?}"),
        })
        .sum();
    assert_eq!(payload, 2896, "every byte forwarded");
}

/// `busy_poll`: the idle loop never sleeps (an idle worker that blocks in
/// poll(2) turns about once per TIMER_MS: 100 000 turns would take hours),
/// still answers, and still stops.
#[test]
fn run_busy_poll_never_sleeps_answers_and_stops() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let cfg = WorkerConfig {
        busy_poll: true,
        ..WorkerConfig::default()
    };
    let r = Rig::new(1500, cfg);
    let h = r.h.clone();
    let mut w = r.w;
    let beat = w.heartbeat();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        w.run(&s2);
        w
    });
    // Until the loop has turned 100 000 times with nothing to do (a busy
    // machine may keep the thread off a core for a while), capped.
    let t0 = std::time::Instant::now();
    while beat.load(Ordering::Relaxed) < 100_000
        && t0.elapsed() < std::time::Duration::from_secs(60)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let turns = beat.load(Ordering::Relaxed);
    h[0].inject(eth(
        BCAST,
        H1,
        0x0806,
        &arp(
            Operation::Request,
            H1,
            v4("10.1.0.5"),
            [0; 6],
            v4("10.1.0.1"),
        ),
    ));
    let is_reply = |s: &Seen| matches!(s, Seen::Arp(_, a) if a.operation == Operation::Reply);
    let mut out: Vec<Seen> = Vec::new();
    let t0 = std::time::Instant::now();
    while !out.iter().any(is_reply) && t0.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(5));
        out.extend(h[0].take_tx().iter().map(|f| dissect(f)));
    }
    stop.store(true, Ordering::Relaxed);
    let w = t.join().unwrap();
    assert!(
        turns >= 100_000,
        "idle loop turned only {turns} times: it sleeps"
    );
    assert!(out.iter().any(is_reply), "{out:?}");
    assert_eq!(w.counters().snapshot().ports[0].rx_packets, 1);
}

/// The default spin after the last packet (`idle_spin_us`, 50 µs) ends:
/// a worker that saw traffic and then none goes back to sleeping in poll,
/// turning about once per TIMER_MS, never busy.
#[test]
fn run_spins_after_traffic_then_sleeps() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let cfg = WorkerConfig {
        idle_spin_us: 10_000,
        ..WorkerConfig::default()
    };
    let r = Rig::new(1500, cfg);
    let h = r.h.clone();
    let mut w = r.w;
    let beat = w.heartbeat();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        w.run(&s2);
        w
    });
    h[0].inject(eth(
        BCAST,
        H1,
        0x0806,
        &arp(
            Operation::Request,
            H1,
            v4("10.1.0.5"),
            [0; 6],
            v4("10.1.0.1"),
        ),
    ));
    let t0 = std::time::Instant::now();
    while h[0].take_tx().is_empty() && t0.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Well past the 10 ms spin: one second of idle turns.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let before = beat.load(Ordering::Relaxed);
    std::thread::sleep(std::time::Duration::from_secs(1));
    let idle_turns = beat.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    let w = t.join().unwrap();
    assert_eq!(w.counters().snapshot().ports[0].rx_packets, 1);
    assert!(
        idle_turns < 1000,
        "an idle worker turned {idle_turns} times in 1 s: it spins instead of sleeping"
    );
}

#[test]
fn run_blocks_when_idle_and_stops() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let r = Rig::new(1500, WorkerConfig::default());
    let h = r.h.clone();
    let mut w = r.w;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        w.run(&s2);
        w
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    h[0].inject(eth(
        BCAST,
        H1,
        0x0806,
        &arp(
            Operation::Request,
            H1,
            v4("10.1.0.5"),
            [0; 6],
            v4("10.1.0.1"),
        ),
    ));
    // Until the reply is out (a busy machine may keep the worker thread off
    // a core for a while), capped.
    let is_reply = |s: &Seen| matches!(s, Seen::Arp(_, a) if a.operation == Operation::Reply);
    let mut out: Vec<Seen> = Vec::new();
    let t0 = std::time::Instant::now();
    while !out.iter().any(is_reply) && t0.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(5));
        out.extend(h[0].take_tx().iter().map(|f| dissect(f)));
    }
    stop.store(true, Ordering::Relaxed);
    let w = t.join().unwrap();
    out.extend(h[0].take_tx().iter().map(|f| dissect(f)));
    // Announcements at start, then the ARP reply.
    assert!(out.iter().any(is_reply), "{out:?}");
    assert_eq!(w.counters().snapshot().ports[0].rx_packets, 1);
}

#[test]
fn mailbox_capture_trace_and_neighbours() {
    use crate::worker::Command;
    let mut r = Rig::new(1500, WorkerConfig::default());
    let mb = r.w.mailbox();
    let (ctx, crx) = crossbeam_channel::bounded(16);
    mb.send(Command::CaptureStart {
        port: 0,
        count: 3,
        out: ctx,
    })
    .unwrap();
    mb.send(Command::TraceArm(1)).unwrap();
    r.w.handle_commands();
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    let ping = eth(
        GW0,
        H1,
        0x0800,
        &echo4("10.1.0.5", "10.1.0.1", 64, false, 56),
    );
    r.h[0].inject(ping.clone());
    r.step();
    // ARP request in, ARP reply out, echo request in (the 3-frame limit
    // leaves the echo reply out).
    let got: Vec<_> = crx.try_iter().collect();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!((got[0].tx, got[1].tx, got[2].tx), (false, true, false));
    assert_eq!(got[2].data, ping);
    let (ttx, trx) = crossbeam_channel::bounded(1);
    mb.send(Command::TraceDrain(ttx)).unwrap();
    let (ntx, nrx) = crossbeam_channel::bounded(1);
    mb.send(Command::Neighbours(ntx)).unwrap();
    r.w.handle_commands();
    let lines = trx.try_recv().unwrap();
    assert!(
        lines.iter().any(|l| l.starts_with("ethernet-input")),
        "{lines:?}"
    );
    let n = nrx.try_recv().unwrap();
    assert!(
        n.iter()
            .any(|e| e.port == 0 && e.ip == std::net::IpAddr::V4(v4("10.1.0.5")) && e.mac == H1),
        "{n:?}"
    );
}

/// UDP datagram `sport` → `dport` with a correct checksum.
fn udp4(src: &str, dst: &str, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = 8 + payload.len();
    let mut u = Vec::with_capacity(len);
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&(len as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    let ph = wire::checksum::pseudo_header_v4(&v4(src), &v4(dst), 17, len as u16);
    let c = !wire::checksum::combine(&[ph, wire::checksum::data(&u)]);
    u[6..8].copy_from_slice(&c.to_be_bytes());
    ipv4(v4(src), v4(dst), 17, 64, false, &u)
}

/// Adds an IKE-keyed ESP tunnel (no SA yet) whose underlay endpoint is
/// `local` in VRF `underlay_vrf`, on virtual port `port` in VRF `vrf`.
fn add_ike_tunnel(b: &mut TablesBuilder, port: u16, vrf: u32, underlay_vrf: u32, local: &str) {
    let reg = vecgate_ipsec::EspRegistry::new();
    let tx = reg.add_pending_tunnel(7, "ike0").unwrap();
    b.add_interface(port, "ike0", [2, 0, 0, 0, 0xe, 1], 1400, vrf, &[]);
    b.add_esp_tunnel(
        port,
        crate::esp::EspTunnelDef {
            id: 7,
            local: local.parse().unwrap(),
            remote: "192.0.2.99".parse().unwrap(),
            underlay_vrf,
            nat_t: false,
            traffic: vec![],
            tx,
        },
    );
    b.set_esp_sad(reg.sad());
}

#[test]
fn ike_is_punted_and_injected_datagrams_are_routed() {
    use crate::punt::IkePunt;
    use std::time::Duration;
    let mut b = TablesBuilder::new();
    b.add_interface(
        0,
        "lan0",
        GW0,
        1500,
        0,
        &[p("10.1.0.1/24"), p("2001:db8:1::1/64")],
    );
    // IKE is ours only at a tunnel's underlay endpoint.
    add_ike_tunnel(&mut b, 2, 0, 0, "10.1.0.1");
    let mut r = Rig::with_tables(b, &[("lan0", GW0)], WorkerConfig::default());
    r.learn4(0, H1, v4("10.1.0.5"), v4("10.1.0.1"));
    let punt = IkePunt::new(8);
    // Without a control plane, IKE is just unhandled local traffic.
    r.h[0].inject(eth(
        GW0,
        H1,
        0x0800,
        &udp4("10.1.0.5", "10.1.0.1", 500, 500, b"early"),
    ));
    r.step();
    assert_eq!(r.snap().error("ip-local", "local-unhandled"), 1);
    r.w.set_ike_punt(punt.clone());
    let marked = [&[0u8, 0, 0, 0][..], b"ike-on-4500"].concat();
    for f in [
        udp4("10.1.0.5", "10.1.0.1", 500, 500, b"ike-on-500"),
        udp4("10.1.0.5", "10.1.0.1", 4500, 4500, &marked),
        // ESP in UDP (non-zero SPI) and a NAT keepalive stay in the dataplane.
        udp4(
            "10.1.0.5",
            "10.1.0.1",
            4500,
            4500,
            &[0, 0, 1, 0, 0, 0, 0, 1],
        ),
        udp4("10.1.0.5", "10.1.0.1", 4500, 4500, &[0xff]),
    ] {
        r.h[0].inject(eth(GW0, H1, 0x0800, &f));
    }
    // A corrupted checksum is not punted.
    let mut bad = udp4("10.1.0.5", "10.1.0.1", 500, 500, b"corrupt");
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    r.h[0].inject(eth(GW0, H1, 0x0800, &bad));
    r.step();
    let s = r.snap();
    assert_eq!(s.error("ip-local", "ike-punted"), 2);
    assert_eq!(s.error("ip-local", "bad-checksum"), 1);
    assert_eq!(s.error("ip-local", "local-unhandled"), 1 + 2);
    let d = punt.recv_timeout(Duration::ZERO).expect("punted");
    assert_eq!(d.data(), b"ike-on-500");
    assert_eq!(d.local, "10.1.0.1:500".parse().unwrap());
    assert_eq!(d.remote, "10.1.0.5:500".parse().unwrap());
    assert_eq!(d.vrf, 0);
    punt.release(d);
    let d = punt.recv_timeout(Duration::ZERO).expect("punted");
    assert_eq!(
        d.data(),
        &marked[..],
        "the marker stays for the IKE library"
    );
    assert_eq!(d.local.port(), 4500);
    punt.release(d);
    assert!(punt.recv_timeout(Duration::ZERO).is_none());
    assert!(r.tx(0).is_empty());
    // The answer goes out through the FIB and the neighbour table.
    punt.inject(
        b"ike-answer",
        "10.1.0.1:4500".parse().unwrap(),
        "10.1.0.5:4500".parse().unwrap(),
        0,
    )
    .unwrap();
    r.step();
    let out = r.h[0].take_tx();
    assert_eq!(out.len(), 1);
    let f = &out[0];
    assert_eq!(&f[0..6], &H1);
    assert_eq!(&f[6..12], &GW0);
    let ip = &f[14..];
    assert_eq!((ip[9], ip[8]), (17, 64));
    assert_eq!(&ip[12..16], &[10, 1, 0, 1]);
    assert_eq!(&ip[16..20], &[10, 1, 0, 5]);
    assert_eq!(u16::from_be_bytes([ip[22], ip[23]]), 4500);
    assert_eq!(&ip[28..], b"ike-answer");
    // Nothing leaked: packet buffers and slots.
    r.advance(100);
    assert!(r.w.ctx().pool.is_full(), "every buffer back");
    for _ in 0..8 {
        assert!(punt.punt(
            b"x",
            "10.1.0.1:500".parse().unwrap(),
            "10.1.0.5:500".parse().unwrap(),
            0
        ));
    }
}

/// IKE and ESP belong to the underlay: tenant B's VRF holds the same
/// address as the tunnel's underlay endpoint (overlapping tenant address
/// plans are normal), and an IKE datagram from B to it is dropped as
/// "ike-wrong-underlay", never punted to the IKE responder; the same
/// datagram in the underlay VRF is punted. Before, ip-local punted IKE
/// from any VRF (the punt queue saw both and the tenant's carried VRF 1).
#[test]
fn ike_from_a_tenant_vrf_is_not_punted() {
    use crate::punt::IkePunt;
    use std::time::Duration;
    let mut b = TablesBuilder::new();
    b.add_vrf(1, "tenant-b")
        .add_interface(0, "wan", GW0, 1500, 0, &[p("10.1.0.1/24")])
        .add_interface(1, "b-lan", GW1, 1500, 1, &[p("10.1.0.1/24")]);
    add_ike_tunnel(&mut b, 2, 0, 0, "10.1.0.1");
    let mut r = Rig::with_tables(b, &[("wan", GW0), ("b-lan", GW1)], WorkerConfig::default());
    let punt = IkePunt::new(8);
    r.w.set_ike_punt(punt.clone());
    let ike = udp4("10.1.0.5", "10.1.0.1", 500, 500, b"ike-sa-init");
    r.h[1].inject(eth(GW1, H2, 0x0800, &ike));
    let marked = [&[0u8, 0, 0, 0][..], b"ike-on-4500"].concat();
    r.h[1].inject(eth(
        GW1,
        H2,
        0x0800,
        &udp4("10.1.0.5", "10.1.0.1", 4500, 4500, &marked),
    ));
    r.step();
    let s = r.snap();
    assert_eq!(s.error("ip-local", "ike-wrong-underlay"), 2);
    assert_eq!(s.error("ip-local", "ike-punted"), 0);
    assert!(
        punt.recv_timeout(Duration::ZERO).is_none(),
        "nothing from tenant B reached the IKE queue"
    );
    // The same datagram on the underlay is the responder's.
    r.h[0].inject(eth(GW0, H1, 0x0800, &ike));
    r.step();
    assert_eq!(r.snap().error("ip-local", "ike-punted"), 1);
    let d = punt.recv_timeout(Duration::ZERO).expect("punted");
    assert_eq!((d.data(), d.vrf), (&b"ike-sa-init"[..], 0));
    punt.release(d);
}

#[test]
fn vrrp_adverts_are_punted_and_control_frames_sent() {
    use crate::punt::vrrp::{AdvertFrom, VrrpPunt};
    use crate::worker::Command;
    use std::time::Duration;
    let mut r = Rig::new(1500, WorkerConfig::default());
    // keepalived's advert (VRID 51, priority 150, 10.251.2.100).
    let advert = [
        0x31, 0x33, 0x96, 0x01, 0x00, 0x64, 0x3d, 0x7d, 0x0a, 0xfb, 0x02, 0x64,
    ];
    let group = wire::vrrp::GROUP_V4;
    let mcast = [0x01, 0x00, 0x5e, 0x00, 0x00, 0x12];
    let frame = |ttl| {
        eth(
            mcast,
            H1,
            0x0800,
            &ipv4(v4("10.1.0.5"), group, 112, ttl, false, &advert),
        )
    };
    // Without [ha], the group is not even wanted.
    r.h[0].inject(frame(255));
    r.step();
    assert_eq!(r.snap().error("ethernet-input", "multicast-not-wanted"), 1);
    let punt = VrrpPunt::new(4);
    r.w.set_vrrp(punt.clone());
    r.h[0].inject(frame(255));
    r.h[0].inject(frame(64)); // forwarded by a router: not ours (§7.1)
    r.step();
    let s = r.snap();
    assert_eq!(s.error("ip-local", "vrrp-punted"), 1);
    assert_eq!(s.error("ip-local", "vrrp-bad-ttl"), 1);
    let d = punt.recv_timeout(Duration::ZERO).expect("punted");
    assert_eq!(d.data(), &advert[..]);
    assert_eq!(
        d.meta,
        AdvertFrom {
            port: 0,
            src: std::net::IpAddr::V4(v4("10.1.0.5")),
            dst: group.into(),
        }
    );
    punt.release(d);
    assert!(r.tx(0).is_empty());
    // The control plane's own frame leaves as it is.
    let out = eth(
        mcast,
        GW0,
        0x0800,
        &ipv4(v4("10.1.0.1"), group, 112, 255, false, &advert),
    );
    r.w.mailbox()
        .send(Command::SendFrame {
            port: 0,
            frame: out.clone(),
        })
        .unwrap();
    r.w.handle_commands();
    r.step();
    assert_eq!(r.h[0].take_tx(), vec![out]);
    r.advance(100);
    assert!(r.w.ctx().pool.is_full(), "every buffer back");
}
