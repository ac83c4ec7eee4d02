use super::netlink::*;
use super::session::{FPM_NETLINK, FPM_VERSION};
use super::*;
use netlink_packet_core::NetlinkMessage;
use netlink_packet_route::route::{RouteAttribute, RouteMessage, RouteProtocol, RouteType};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::Ipv4Addr;

fn settings() -> FpmSettings {
    FpmSettings {
        tables: vec![(254, "default".into()), (100, "blue".into())],
        max_routes: 1000,
        max_nexthop_groups: 8,
    }
}

fn frame(nl: &[u8]) -> Vec<u8> {
    let mut f = vec![FPM_VERSION, FPM_NETLINK];
    f.extend_from_slice(&((nl.len() + 4) as u16).to_be_bytes());
    f.extend_from_slice(nl);
    f
}

fn route(
    new: bool,
    table: u8,
    proto: RouteProtocol,
    dst: &str,
    attrs: Vec<RouteAttribute>,
) -> Vec<u8> {
    let p: Prefix = dst.parse().unwrap();
    let mut m = RouteMessage::default();
    m.header.address_family = if p.addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    m.header.destination_prefix_length = p.len;
    m.header.table = table;
    m.header.protocol = proto;
    m.header.kind = RouteType::Unicast;
    m.attributes
        .push(RouteAttribute::Destination(p.addr.into()));
    m.attributes.extend(attrs);
    let payload = if new {
        RouteNetlinkMessage::NewRoute(m)
    } else {
        RouteNetlinkMessage::DelRoute(m)
    };
    let mut nl = NetlinkMessage::from(payload);
    nl.finalize();
    let mut buf = vec![0; nl.buffer_len()];
    nl.serialize(&mut buf);
    frame(&buf)
}

fn gw(a: &str) -> RouteAttribute {
    RouteAttribute::Gateway(a.parse::<IpAddr>().unwrap().into())
}

/// RTM_NEWNEXTHOP as zebra sends it: nhmsg, NHA_ID, then a gateway
/// or a group.
fn nexthop(id: u32, gateway: Option<&str>, group: &[u32]) -> Vec<u8> {
    let mut attrs = Vec::new();
    let mut nla = |kind: u16, v: &[u8]| {
        attrs.extend_from_slice(&((v.len() + 4) as u16).to_ne_bytes());
        attrs.extend_from_slice(&kind.to_ne_bytes());
        attrs.extend_from_slice(v);
        while attrs.len() % 4 != 0 {
            attrs.push(0);
        }
    };
    nla(NHA_ID, &id.to_ne_bytes());
    if let Some(g) = gateway {
        let a: Ipv4Addr = g.parse().unwrap();
        nla(NHA_GATEWAY, &a.octets());
        nla(5, &2u32.to_ne_bytes());
    } else if !group.is_empty() {
        let mut v = Vec::new();
        for m in group {
            v.extend_from_slice(&m.to_ne_bytes());
            v.extend_from_slice(&[1, 0, 0, 0]);
        }
        nla(NHA_GROUP, &v);
    } else {
        nla(5, &2u32.to_ne_bytes());
    }
    let mut m = Vec::new();
    m.extend_from_slice(&((16 + 8 + attrs.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&RTM_NEWNEXTHOP.to_ne_bytes());
    m.extend_from_slice(&0x501u16.to_ne_bytes());
    m.extend_from_slice(&[0; 8]);
    m.extend_from_slice(&[AF_INET, 0, 11, 0, 0, 0, 0, 0]);
    m.extend_from_slice(&attrs);
    frame(&m)
}

fn feed(rib: &mut Rib, stats: &FpmStats, frames: &[Vec<u8>]) {
    let mut log = Limited::new();
    for f in frames {
        apply_netlink(&f[4..], rib, stats, &mut log);
    }
}

fn dump(rib: &Rib, stats: &FpmStats) -> Vec<String> {
    let l = rib.learned(stats, &mut Limited::new());
    let mut out: Vec<String> = l
        .vrfs
        .iter()
        .flat_map(|(v, rs)| {
            rs.iter().map(move |r| {
                let h: Vec<String> = r.hops.iter().map(|h| h.to_string()).collect();
                format!("{v} {} {} p{}", r.prefix, h.join(","), r.protocol)
            })
        })
        .collect();
    out.sort();
    out
}

fn failures(stats: &FpmStats, f: Failure) -> u64 {
    stats
        .failures()
        .into_iter()
        .find(|(x, _)| *x == f)
        .map_or(0, |x| x.1)
}

#[test]
fn routes_inline_by_object_and_multipath_land_in_their_vrf() {
    let stats = FpmStats::default();
    let mut rib = Rib::new(settings());
    feed(
        &mut rib,
        &stats,
        &[
            nexthop(6, Some("10.77.0.2"), &[]),
            nexthop(7, Some("10.77.0.3"), &[]),
            nexthop(8, None, &[6, 7]),
            nexthop(2, None, &[]),
            route(
                true,
                254,
                RouteProtocol::Bgp,
                "10.88.1.0/24",
                vec![RouteAttribute::NhId(6)],
            ),
            route(
                true,
                254,
                RouteProtocol::Bgp,
                "10.88.2.0/24",
                vec![RouteAttribute::NhId(8)],
            ),
            route(
                true,
                100,
                RouteProtocol::Bgp,
                "10.88.1.0/24",
                vec![gw("10.5.0.1")],
            ),
            // zebra's own connected subnet: not ours.
            route(
                true,
                254,
                RouteProtocol::Kernel,
                "10.77.0.0/24",
                vec![RouteAttribute::NhId(2)],
            ),
            // A static route to an interface of zebra's host.
            route(
                true,
                254,
                RouteProtocol::Other(196),
                "10.99.0.0/24",
                vec![RouteAttribute::NhId(2)],
            ),
            route(
                true,
                7,
                RouteProtocol::Bgp,
                "10.66.0.0/16",
                vec![gw("10.5.0.1")],
            ),
            route(
                true,
                254,
                RouteProtocol::Bgp,
                "fd00:88::/48",
                vec![gw("fd00::1")],
            ),
        ],
    );
    assert_eq!(
        dump(&rib, &stats),
        vec![
            "blue 10.88.1.0/24 10.5.0.1 p186",
            "default 10.88.1.0/24 10.77.0.2 p186",
            "default 10.88.2.0/24 10.77.0.2,10.77.0.3 p186",
            "default fd00:88::/48 fd00::1 p186",
        ]
    );
    assert_eq!(failures(&stats, Failure::NoGateway), 1);
    assert_eq!(failures(&stats, Failure::UnmappedTable), 1);
    assert_eq!(stats.ignored.load(Ordering::Relaxed), 1);
    // A group changed by zebra changes its routes; withdrawals remove.
    feed(
        &mut rib,
        &stats,
        &[
            nexthop(8, None, &[7]),
            route(false, 254, RouteProtocol::Bgp, "10.88.1.0/24", vec![]),
            route(false, 254, RouteProtocol::Bgp, "10.88.1.0/24", vec![]),
        ],
    );
    assert_eq!(
        dump(&rib, &stats),
        vec![
            "blue 10.88.1.0/24 10.5.0.1 p186",
            "default 10.88.2.0/24 10.77.0.3 p186",
            "default fd00:88::/48 fd00::1 p186",
        ]
    );
    assert_eq!(stats.route_dels.load(Ordering::Relaxed), 2);
}

#[test]
fn limits_refuse_and_count() {
    let stats = FpmStats::default();
    let mut rib = Rib::new(FpmSettings {
        max_routes: 3,
        max_nexthop_groups: 2,
        ..settings()
    });
    let mut frames: Vec<Vec<u8>> = (0..5)
        .map(|i| {
            route(
                true,
                254,
                RouteProtocol::Bgp,
                &format!("10.0.{i}.0/24"),
                vec![gw("10.77.0.2")],
            )
        })
        .collect();
    frames.extend((1..=3).map(|i| nexthop(i, Some("10.77.0.2"), &[])));
    feed(&mut rib, &stats, &frames);
    assert_eq!(dump(&rib, &stats).len(), 3);
    assert_eq!(failures(&stats, Failure::VrfFull), 2);
    assert_eq!(failures(&stats, Failure::NexthopLimit), 1);
    // Replacing a held route is not a new one.
    feed(
        &mut rib,
        &stats,
        &[route(
            true,
            254,
            RouteProtocol::Bgp,
            "10.0.0.0/24",
            vec![gw("10.77.0.9")],
        )],
    );
    assert_eq!(failures(&stats, Failure::VrfFull), 2);
    assert!(dump(&rib, &stats).contains(&"default 10.0.0.0/24 10.77.0.9 p186".to_owned()));
}

#[test]
fn a_replay_replaces_what_was_learned() {
    let stats = FpmStats::default();
    let mut rib = Rib::new(settings());
    rib.begin_session();
    let r = |p: &str| route(true, 254, RouteProtocol::Bgp, p, vec![gw("10.77.0.2")]);
    feed(&mut rib, &stats, &[r("10.1.0.0/16"), r("10.2.0.0/16")]);
    assert_eq!(rib.sweep(), 0);
    // zebra reconnects; 10.2/16 is gone from its RIB.
    rib.begin_session();
    feed(&mut rib, &stats, &[r("10.1.0.0/16"), r("10.3.0.0/16")]);
    assert_eq!(rib.sweep(), 1);
    assert_eq!(
        dump(&rib, &stats),
        vec![
            "default 10.1.0.0/16 10.77.0.2 p186",
            "default 10.3.0.0/16 10.77.0.2 p186"
        ]
    );
}

#[test]
fn garbage_never_panics() {
    // Deterministic pseudo-random bytes and truncations of real frames.
    let real = [
        nexthop(8, None, &[6, 7]),
        route(
            true,
            254,
            RouteProtocol::Bgp,
            "10.88.2.0/24",
            vec![RouteAttribute::NhId(8)],
        ),
        route(
            true,
            254,
            RouteProtocol::Bgp,
            "fd00::/8",
            vec![gw("fd00::1")],
        ),
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..2000 {
        let mut f = real[round % real.len()].clone();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let cut = (x as usize) % (f.len() + 1);
        f.truncate(cut.max(4));
        for _ in 0..(x % 4) {
            let i = (x as usize >> 8) % f.len();
            f[i] ^= (x >> 16) as u8;
            x = x.rotate_left(9);
        }
        let _ = decode_for_test(settings(), &f);
        let stats = FpmStats::default();
        let mut rib = Rib::new(settings());
        apply_netlink(&f[4.min(f.len())..], &mut rib, &stats, &mut Limited::new());
    }
}

#[test]
fn changes_are_patches_unless_a_full_build_is_needed() {
    let stats = FpmStats::default();
    let mut rib = Rib::new(settings());
    let r = |p: &str, g: &str| route(true, 254, RouteProtocol::Bgp, p, vec![gw(g)]);
    feed(&mut rib, &stats, &[r("10.1.0.0/16", "10.77.0.2")]);
    // The first publish rebuilds.
    assert!(rib.take_changes().is_none());
    feed(
        &mut rib,
        &stats,
        &[
            r("10.2.0.0/16", "10.77.0.2"),
            route(false, 254, RouteProtocol::Bgp, "10.1.0.0/16", vec![]),
            route(
                true,
                100,
                RouteProtocol::Bgp,
                "10.9.0.0/16",
                vec![gw("10.5.0.1")],
            ),
        ],
    );
    let mut c: Vec<String> = rib
        .take_changes()
        .unwrap()
        .into_iter()
        .map(|(v, p, h)| format!("{v} {p} {}", h.map_or(0, |h| h.len())))
        .collect();
    c.sort();
    assert_eq!(
        c,
        vec![
            "blue 10.9.0.0/16 1",
            "default 10.1.0.0/16 0",
            "default 10.2.0.0/16 1"
        ]
    );
    assert!(rib.take_changes().unwrap().is_empty());
    // A learned prefix holding a gateway in use: the gateways resolve
    // through it, only a full build is exact.
    feed(&mut rib, &stats, &[r("10.77.0.0/24", "10.5.0.1")]);
    assert!(rib.take_changes().is_none());
    let own = HashSet::new();
    assert!(rib.under_learned("default", "10.77.0.2".parse().unwrap(), &own));
    assert!(!rib.under_learned("blue", "10.77.0.2".parse().unwrap(), &own));
    // A next-hop object changed: its routes change with it.
    feed(&mut rib, &stats, &[nexthop(6, Some("10.77.0.2"), &[])]);
    assert!(rib.take_changes().is_none());
}

/// A tenant's own zebra (`[[routing.punt]] fpm`): whatever table a route
/// names, it is that VRF's; its replay sweeps only its own routes.
#[test]
fn a_tenant_zebra_feeds_only_its_vrf() {
    let stats = FpmStats::default();
    let mut rib = Rib::for_vrf(settings(), "red".into());
    feed(
        &mut rib,
        &stats,
        &[
            route(
                true,
                254,
                RouteProtocol::Bgp,
                "10.77.0.0/24",
                vec![gw("169.254.1.2")],
            ),
            route(
                true,
                100,
                RouteProtocol::Bgp,
                "10.78.0.0/24",
                vec![gw("169.254.1.2")],
            ),
        ],
    );
    assert_eq!(
        dump(&rib, &stats),
        vec![
            "red 10.77.0.0/24 169.254.1.2 p186",
            "red 10.78.0.0/24 169.254.1.2 p186"
        ]
    );
    assert_eq!(failures(&stats, Failure::UnmappedTable), 0);
    // The first publish is a full build; a withdrawal then patches red.
    assert!(rib.take_changes().is_none());
    feed(
        &mut rib,
        &stats,
        &[route(
            false,
            254,
            RouteProtocol::Bgp,
            "10.78.0.0/24",
            vec![],
        )],
    );
    let changes = rib.take_changes().expect("a patch");
    assert_eq!(changes.len(), 1);
    assert!(changes.iter().all(|(v, _, h)| v == "red" && h.is_none()));
}
