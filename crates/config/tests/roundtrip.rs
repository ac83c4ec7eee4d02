//! Property tests: `to_toml` round-trips every valid config, and `parse`
//! never panics on arbitrary or mangled input.

use proptest::prelude::*;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use vecgate_config::*;

const VRFS: [&str; 3] = ["default", "red", "blue"];

fn vrf() -> impl Strategy<Value = String> {
    prop::sample::select(&VRFS[..]).prop_map(str::to_owned)
}

fn api() -> impl Strategy<Value = ApiEndpoint> {
    prop_oneof![
        "/run/[a-z]{1,8}/[a-z0-9._-]{1,12}".prop_map(|p| ApiEndpoint::Unix(p.into())),
        (any::<[u8; 4]>(), 1u16..)
            .prop_map(|(a, p)| ApiEndpoint::Tcp((Ipv4Addr::from(a), p).into())),
        (any::<[u16; 8]>(), 1u16..)
            .prop_map(|(a, p)| ApiEndpoint::Tcp((Ipv6Addr::from(a), p).into())),
        (1u16..).prop_map(|p| ApiEndpoint::Tcp((Ipv4Addr::LOCALHOST, p).into())),
    ]
}

/// Interface `i` owns 10.i.j.0/24 and fd00:i:j::/64 subnets: never overlapping.
fn interface(i: usize) -> impl Strategy<Value = Interface> {
    (
        prop::sample::select(&Driver::ALL[..]),
        prop::collection::vec((any::<bool>(), 1u8..=254), 0..4),
        vrf(),
        prop::option::of(1280u32..=65535),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(move |(driver, addrs, vrf, mtu, rsc, offloads)| Interface {
            name: format!("if{i}"),
            host: format!("veth{i}"),
            driver,
            addresses: addrs
                .iter()
                .enumerate()
                .map(|(j, (v6, host))| {
                    let (i8, j8) = (i as u8, j as u8);
                    if *v6 {
                        IfAddr {
                            addr: IpAddr::V6(Ipv6Addr::new(
                                0xfd00,
                                i as u16,
                                j as u16,
                                0,
                                0,
                                0,
                                0,
                                u16::from(*host),
                            )),
                            prefix_len: 64,
                        }
                    } else {
                        IfAddr {
                            addr: IpAddr::V4(Ipv4Addr::new(10, i8, j8, *host)),
                            prefix_len: 24,
                        }
                    }
                })
                .collect(),
            vrf,
            mtu,
            rsc,
            offloads,
        })
}

/// Tunnel `i` has its own remote address, so identities never clash.
fn tunnel(i: usize) -> impl Strategy<Value = Tunnel> {
    (
        prop::sample::select(&TunnelKind::ALL[..]),
        any::<bool>(),
        any::<u32>(),
        any::<bool>(),
        vrf(),
        vrf(),
        prop::option::of(68u32..=65535),
        any::<(bool, bool)>(),
        1u16..,
    )
        .prop_map(
            move |(
                kind,
                v6,
                raw_key,
                has_key,
                vrf,
                underlay_vrf,
                mtu,
                (checksum, sequence),
                port,
            )| {
                let n = i as u16 + 2;
                let (local, remote) = if v6 {
                    (
                        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
                        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, n)),
                    )
                } else {
                    (
                        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
                        IpAddr::V4(Ipv4Addr::new(192, 0, 2, n as u8)),
                    )
                };
                let key = match kind {
                    TunnelKind::Gre => has_key.then_some(raw_key),
                    TunnelKind::Vxlan => Some(raw_key & 0xFF_FFFF),
                    TunnelKind::Nvgre => Some(0x1000 + raw_key % (0xFF_FFFF - 0x1000)),
                    TunnelKind::Ipsec => None,
                };
                let gre = kind == TunnelKind::Gre;
                Tunnel {
                    name: format!("tun{i}"),
                    kind,
                    local,
                    remote,
                    key,
                    vrf,
                    underlay_vrf,
                    mtu,
                    checksum: gre && checksum,
                    sequence: gre && sequence,
                    port: if kind == TunnelKind::Vxlan {
                        port
                    } else {
                        4789
                    },
                    addresses: if has_key {
                        vec![IfAddr {
                            addr: IpAddr::V4(Ipv4Addr::new(10, 99, n as u8, 1)),
                            prefix_len: 24,
                        }]
                    } else {
                        Vec::new()
                    },
                    inner: if gre && checksum {
                        TunnelInner::Ethernet
                    } else {
                        TunnelInner::Ip
                    },
                    ipsec: (kind == TunnelKind::Ipsec).then(|| ipsec_of(i, checksum, sequence)),
                }
            },
        )
}

/// A masked prefix and a via that is valid for `ifs`/`tuns`.
fn route(ifs: Vec<Interface>, tuns: Vec<Tunnel>) -> impl Strategy<Value = Route> {
    let targets: Vec<(String, String, bool)> = ifs
        .iter()
        .map(|i| (i.name.clone(), i.vrf.clone(), false))
        .chain(tuns.iter().map(|t| (t.name.clone(), t.vrf.clone(), true)))
        .collect();
    (
        any::<bool>(),
        any::<u128>(),
        0u8..=128,
        vrf(),
        any::<prop::sample::Index>(),
        any::<bool>(),
        1u32..,
    )
        .prop_map(move |(v6, bits, len, vrf, pick, by_name, nh)| {
            let prefix = if v6 {
                Prefix {
                    addr: IpAddr::V6(bits.into()),
                    len,
                }
            } else {
                Prefix {
                    addr: IpAddr::V4((bits as u32).into()),
                    len: len % 33,
                }
            }
            .masked();
            if by_name && !targets.is_empty() {
                let (name, tvrf, is_tunnel) = pick.get(&targets).clone();
                let via = if is_tunnel {
                    Via::Tunnel(name)
                } else {
                    Via::Interface(name)
                };
                Route {
                    vrf: tvrf,
                    prefix,
                    via,
                }
            } else {
                let addr = if v6 {
                    IpAddr::V6(Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, nh as u16 | 1))
                } else {
                    IpAddr::V4(Ipv4Addr::from(0x0a63_0001 | (nh & 0xff00)))
                };
                Route {
                    vrf,
                    prefix,
                    via: Via::Address(addr),
                }
            }
        })
}

/// `[routing]`: absent, or an FPM address with tables mapped one to one
/// onto distinct VRFs, and limits default or not.
fn routing() -> impl Strategy<Value = Routing> {
    prop_oneof![
        Just(Routing::default()),
        (
            any::<[u8; 4]>(),
            1u16..,
            prop::sample::subsequence(&VRFS[..], 0..=3),
            prop::collection::hash_set(1u32.., 3),
            prop::option::of(1u32..),
            prop::option::of(1u32..),
        )
            .prop_map(|(a, port, vrfs, ids, mr, mg)| Routing {
                fpm: Some((Ipv4Addr::from(a), port).into()),
                tables: vrfs
                    .iter()
                    .zip(ids)
                    .map(|(v, id)| RoutingTable {
                        id,
                        vrf: (*v).to_owned(),
                    })
                    .collect(),
                max_routes: mr.unwrap_or(DEFAULT_MAX_ROUTES),
                max_nexthop_groups: mg.unwrap_or(DEFAULT_MAX_NEXTHOP_GROUPS),
                punt: Vec::new(),
            }),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        "[a-z][a-z0-9_-]{0,10}",
        1usize..=64,
        api(),
        0usize..4,
        0usize..4,
    )
        .prop_flat_map(|(name, workers, api, nif, ntun)| {
            let ifs: Vec<_> = (0..nif).map(interface).collect();
            let tuns: Vec<_> = (0..ntun).map(tunnel).collect();
            (
                Just(Gateway {
                    api_token_file: matches!(api, ApiEndpoint::Tcp(_))
                        .then(|| "/etc/vecgate/token".into()),
                    api_readonly_token_file: None,
                    // TLS on a TCP api; plain HTTP when allowed (loopback).
                    api_tls_cert_file: matches!(api, ApiEndpoint::Tcp(a) if !a.ip().is_loopback())
                        .then(|| "/etc/vecgate/api.crt".into()),
                    api_tls_key_file: matches!(api, ApiEndpoint::Tcp(a) if !a.ip().is_loopback())
                        .then(|| "/etc/vecgate/api.key".into()),
                    api_insecure_loopback: matches!(api, ApiEndpoint::Tcp(a) if a.ip().is_loopback()),
                    state_dir: (workers % 2 == 0).then(|| "/var/lib/vecgate-test/state".into()),
                    busy_poll: workers % 3 == 0,
                    idle_spin_us: (workers % 2 == 0).then_some(workers as u32 * 7),
                    name,
                    workers,
                    api,
                }),
                ifs,
                tuns,
            )
        })
        .prop_flat_map(|(gateway, ifs, tuns)| {
            let routes = prop::collection::vec(route(ifs.clone(), tuns.clone()), 0..6);
            let ha = prop::option::of(ha(ifs.clone()));
            let pool = prop::option::of(pool());
            (Just(gateway), Just(ifs), Just(tuns), routes, routing(), ha, pool)
        })
        .prop_map(|(gateway, interfaces, tunnels, mut routes, routing, ha, pool)| {
            let mut seen = HashSet::new();
            routes.retain(|r| seen.insert((r.vrf.clone(), r.prefix, r.via.clone())));
            Config {
                gateway,
                interfaces,
                tunnels,
                routes,
                routing,
                ha,
                pool,
            }
        })
}

/// `[pool]`: every key, defaults and not.
fn pool() -> impl Strategy<Value = vecgate_config::Pool> {
    (
        "[a-z][a-z0-9-]{0,10}",
        prop::option::of("[a-z][a-z0-9]{0,8}"),
        1usize..4,
        any::<bool>(),
        1u32..=60,
        0u32..=3,
        prop::sample::select(vec![1000u64, 1 << 21, 1 << 30]),
        (0u64..100_000, 1u64..100_000, 1u32..10_000),
    )
        .prop_map(
            |(name, member, n, tls, lease_ttl, redundant, max_sa_pps, (i, g, t))| {
                let scheme = if tls { "https" } else { "http" };
                vecgate_config::Pool {
                    name,
                    member,
                    etcd: (0..n)
                        .map(|k| format!("{scheme}://10.0.0.{}:2379", k + 1))
                        .collect(),
                    etcd_ca_file: tls.then(|| "/etc/vecgate/etcd-ca.pem".into()),
                    etcd_cert_file: tls.then(|| "/etc/vecgate/etcd.pem".into()),
                    etcd_key_file: tls.then(|| "/etc/vecgate/etcd.key".into()),
                    lease_ttl,
                    pool_key_file: "/etc/vecgate/pool.key".into(),
                    redundant,
                    max_sa_pps,
                    capacity: vecgate_config::PoolCapacity {
                        ipsec_mbps: i,
                        gre_mbps: g,
                        tunnels: t,
                    },
                }
            },
        )
}

/// `[ha]` with groups on interfaces that have an address of the group's
/// family; VRIDs unique per group.
fn ha(ifs: Vec<Interface>) -> impl Strategy<Value = Ha> {
    let group = (
        any::<prop::sample::Index>(),
        1usize..4,
        prop::option::of(1u8..=255),
    );
    (
        1u8..=255,
        1u16..=4095,
        any::<bool>(),
        any::<u8>(),
        prop::collection::vec(any::<prop::sample::Index>(), 0..3),
        prop::collection::vec(group, 0..4),
    )
        .prop_map(
            move |(priority, interval_cs, preempt, track_penalty, track, groups)| {
                let with_addr: Vec<&Interface> =
                    ifs.iter().filter(|i| !i.addresses.is_empty()).collect();
                let mut track: Vec<String> = if ifs.is_empty() {
                    Vec::new()
                } else {
                    track
                        .iter()
                        .map(|t| ifs[t.index(ifs.len())].name.clone())
                        .collect()
                };
                track.dedup();
                let groups = if with_addr.is_empty() {
                    Vec::new()
                } else {
                    groups
                        .iter()
                        .enumerate()
                        .map(|(n, (idx, count, prio))| {
                            let i = with_addr[idx.index(with_addr.len())];
                            let v4 = i.addresses[0].addr.is_ipv4();
                            let addresses = (0..*count)
                                .map(|k| {
                                    let k = u8::try_from(k + 1).unwrap_or(1);
                                    if v4 {
                                        IpAddr::V4(Ipv4Addr::new(10, 200, n as u8, k))
                                    } else {
                                        IpAddr::V6(Ipv6Addr::new(
                                            0xfd00,
                                            0,
                                            0,
                                            n as u16,
                                            0,
                                            0,
                                            0,
                                            k.into(),
                                        ))
                                    }
                                })
                                .collect();
                            HaGroup {
                                vrid: (n + 1) as u8,
                                interface: i.name.clone(),
                                addresses,
                                priority: *prio,
                                // Odd groups track the [ha] list themselves.
                                track: if n % 2 == 1 {
                                    track.clone()
                                } else {
                                    Vec::new()
                                },
                                track_penalty: prio.filter(|_| n % 2 == 1),
                            }
                        })
                        .collect()
                };
                // Every other config syncs state (odd priority).
                let sync = (priority % 2 == 1).then(|| HaSync {
                    local: "192.0.2.1:4790".parse().unwrap(),
                    peer: "192.0.2.2:4791".parse().unwrap(),
                    key_file: "/etc/vecgate/ha-sync.key".into(),
                    interval_ms: u32::from(interval_cs) + 9,
                    max_sa_pps: if priority % 4 == 1 {
                        vecgate_config::ha::DEFAULT_MAX_SA_PPS
                    } else {
                        1_000 + u64::from(priority) * 7919
                    },
                });
                Ha {
                    priority,
                    interval_cs,
                    preempt,
                    track,
                    track_penalty,
                    groups,
                    sync,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn to_toml_round_trips(cfg in config()) {
        prop_assert_eq!(validate(&cfg), vec![], "generator made an invalid config");
        let text = cfg.to_toml();
        match parse(&text) {
            Ok(back) => prop_assert_eq!(back, cfg),
            Err(d) => prop_assert!(false, "{:?}\n{}", d, text),
        }
    }

    #[test]
    fn parse_never_panics_on_text(text in "\\PC{0,300}") {
        let _ = parse(&text);
    }

    /// Lines of a real config, dropped, duplicated and shuffled: the
    /// structure is nearly right, which reaches the validator's corners.
    #[test]
    fn parse_never_panics_on_mangled_configs(
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..60),
        cut in any::<prop::sample::Index>(),
    ) {
        let src = include_str!("../../../examples/multi-tenant-vxlan.toml");
        let lines: Vec<&str> = src.lines().collect();
        let mut text: String = picks.iter().map(|i| *i.get(&lines)).collect::<Vec<_>>().join("\n");
        let at = cut.index(text.len() + 1);
        if text.is_char_boundary(at) {
            text.truncate(at);
        }
        if let Err(d) = parse(&text) {
            prop_assert!(!d.is_empty());
            prop_assert!(d.iter().all(|d| d.line >= 1 && d.line <= text.lines().count().max(1) + 1));
        }
    }
}

proptest! {
    /// The sorted-sweep overlap check agrees with a brute-force pairwise one.
    #[test]
    fn overlap_check_matches_brute_force(
        addrs in prop::collection::vec((0u32..16, 0u8..=32, any::<bool>()), 1..12),
    ) {
        let addresses: Vec<IfAddr> = addrs
            .iter()
            .map(|(a, len, v6)| {
                let addr = if *v6 {
                    IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, *a as u16 + 1))
                } else {
                    IpAddr::V4(Ipv4Addr::from(0x0a00_0001 + (a << 20)))
                };
                IfAddr { addr, prefix_len: *len }
            })
            .collect();
        // Components of the overlap graph (prefixes nest or are disjoint, so
        // each component is one widest prefix and what it contains).
        let n = addresses.len();
        let mut comp: Vec<usize> = (0..n).collect();
        for i in 0..n {
            for j in 0..i {
                if addresses[i].network().overlaps(&addresses[j].network()) {
                    let (from, to) = (comp[i], comp[j]);
                    comp.iter_mut().filter(|c| **c == from).for_each(|c| *c = to);
                }
            }
        }
        let mut roots = comp.clone();
        roots.sort();
        roots.dedup();
        let cfg = Config {
            ha: None,
            pool: None,
            gateway: Gateway {
                name: "g".into(),
                workers: 1,
                api: ApiEndpoint::default_for("g"),
                api_token_file: None,
                api_readonly_token_file: None,
                api_tls_cert_file: None,
                api_tls_key_file: None,
                api_insecure_loopback: false,
                state_dir: None,
                busy_poll: false,
                idle_spin_us: None,
            },
            interfaces: vec![Interface {
                name: "a".into(),
                host: "v".into(),
                driver: Driver::Tap,
                addresses,
                vrf: "default".into(),
                mtu: None,
                rsc: true,
                offloads: true,
            }],
            tunnels: vec![],
            routes: vec![],
            routing: Routing::default(),
        };
        let found = validate(&cfg).iter().filter(|d| d.message.contains("overlaps")).count();
        // One diagnostic per address beyond the first of each component.
        prop_assert_eq!(found, n - roots.len());
    }
}

/// Static SAs for an ipsec tunnel `i` (inbound SPIs unique per tunnel).
fn ipsec_of(i: usize, nat_t: bool, limits: bool) -> Ipsec {
    let sa = |direction, spi: u32, a: usize| StaticSa {
        direction,
        spi,
        algorithm: EspAlgorithm::ALL[a % EspAlgorithm::ALL.len()],
        key_file: format!("/etc/vecgate/key{spi:x}.hex").into(),
        esn: !limits,
        replay_window: if limits { 4096 } else { 1024 },
        lifetime_bytes: limits.then_some(1 << 30),
        lifetime_packets: limits.then_some(1 << 20),
        lifetime_seconds: limits.then_some(3600),
    };
    let base = 0x1000 + 4 * i as u32;
    Ipsec {
        nat_t,
        traffic: vec![format!("10.{}.0.0/16", 100 + i % 100).parse().unwrap()],
        sas: vec![
            sa(SaDirection::Out, base, i),
            sa(SaDirection::In, base + 1, i),
            sa(SaDirection::In, base + 2, i + 1),
        ],
        ike: None,
    }
}
