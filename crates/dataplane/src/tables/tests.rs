//! Tests of [`super`] (tables).

use super::*;

fn p(s: &str) -> Prefix {
    s.parse().unwrap()
}

#[test]
fn route_groups_spread_flows_over_resolvable_members() {
    let via = |a: &str| Route::Via {
        next_hop: a.parse().unwrap(),
        port: None,
    };
    let mut b = TablesBuilder::new();
    b.add_interface(0, "a", [2, 0, 0, 0, 0, 1], 1500, 0, &[p("10.1.0.1/24")])
        .add_interface(1, "b", [2, 0, 0, 0, 0, 2], 1500, 0, &[p("10.2.0.1/24")])
        .add_route(0, p("10.0.0.0/8"), Route::Drop)
        .add_route_group(
            0,
            p("10.50.0.0/16"),
            vec![via("10.1.0.9"), via("10.2.0.9"), via("192.0.2.1")],
        )
        .add_route_group(0, p("10.60.0.0/16"), vec![via("10.2.0.9")])
        .add_route_group(0, p("10.70.0.0/16"), vec![via("192.0.2.1")])
        .add_route_group(0, p("10.80.0.0/16"), vec![Route::Drop]);
    let t = b.build().unwrap();
    let a = |s: &str| t.adj(t.lookup4(0, s.parse().unwrap()).unwrap());
    // Two members resolve; the third (no route to it) is left out.
    assert_eq!(a("10.50.1.1"), Adj::Ecmp { first: 0, count: 2 });
    let mut seen = std::collections::HashSet::new();
    for i in 0..64u32 {
        let src = Ipv4Addr::from(0x0a01_0000 + i);
        let idx = t
            .lookup4_flow(0, src, "10.50.1.1".parse().unwrap(), 6)
            .unwrap();
        let again = t
            .lookup4_flow(0, src, "10.50.1.1".parse().unwrap(), 6)
            .unwrap();
        assert_eq!(idx, again, "a flow keeps its path");
        seen.insert(t.adj(idx));
    }
    assert_eq!(seen.len(), 2, "flows spread over both members: {seen:?}");
    assert_eq!(
        a("10.60.0.1"),
        Adj::Neighbor {
            port: 1,
            nh: "10.2.0.9".parse().unwrap()
        }
    );
    // Nothing resolves: not installed, the covering route answers.
    assert_eq!(a("10.70.0.1"), Adj::Drop);
    assert_eq!(t.unresolved, vec![(0, p("10.70.0.0/16"))]);
    assert_eq!(a("10.80.0.1"), Adj::Drop);
}

#[test]
fn build_resolves_connected_local_and_via() {
    let mut b = TablesBuilder::new();
    b.add_interface(
        0,
        "lan0",
        [2, 0, 0, 0, 0, 1],
        1500,
        0,
        &[p("10.1.0.1/24"), p("2001:db8:1::1/64")],
    )
    .add_interface(1, "wan0", [2, 0, 0, 0, 0, 2], 1500, 0, &[p("10.2.0.1/24")])
    .add_route(
        0,
        p("0.0.0.0/0"),
        Route::Via {
            next_hop: "10.2.0.254".parse().unwrap(),
            port: None,
        },
    )
    .add_route(
        0,
        p("192.168.0.0/16"),
        Route::Via {
            next_hop: "172.16.0.1".parse().unwrap(),
            port: None,
        },
    )
    .add_route(
        0,
        p("172.16.0.0/12"),
        Route::Via {
            next_hop: "10.1.0.9".parse().unwrap(),
            port: None,
        },
    )
    .add_route(0, p("10.9.0.0/16"), Route::Drop);
    let t = b.build().unwrap();
    let a = |s: &str| t.adj(t.lookup4(0, s.parse().unwrap()).unwrap());
    assert_eq!(a("10.1.0.1"), Adj::Local);
    assert_eq!(a("10.1.0.7"), Adj::Glean { port: 0 });
    assert_eq!(
        a("8.8.8.8"),
        Adj::Neighbor {
            port: 1,
            nh: "10.2.0.254".parse().unwrap()
        }
    );
    // Two levels of recursion: 192.168/16 via 172.16.0.1 via 10.1.0.9.
    assert_eq!(
        a("192.168.3.3"),
        Adj::Neighbor {
            port: 0,
            nh: "10.1.0.9".parse().unwrap()
        }
    );
    assert_eq!(a("10.9.1.1"), Adj::Drop);
    let ll = link_local_eui64([2, 0, 0, 0, 0, 1]);
    assert_eq!(ll, "fe80::ff:fe00:1".parse::<Ipv6Addr>().unwrap());
    assert_eq!(t.adj(t.lookup6(0, ll).unwrap()), Adj::Local);
    assert_eq!(
        t.adj(t.lookup6(0, "2001:db8:1::5".parse().unwrap()).unwrap()),
        Adj::Glean { port: 0 }
    );
    assert!(t
        .iface(0)
        .unwrap()
        .is_our_solicited_node("ff02::1:ff00:1".parse().unwrap()));
    assert!(t.show_fib().contains("10.1.0.0/24"));
}

#[test]
fn via_loop_and_unknown_vrf() {
    let mut b = TablesBuilder::new();
    b.add_route(
        0,
        p("1.0.0.0/8"),
        Route::Via {
            next_hop: "2.0.0.1".parse().unwrap(),
            port: None,
        },
    )
    .add_route(
        0,
        p("2.0.0.0/8"),
        Route::Via {
            next_hop: "1.0.0.1".parse().unwrap(),
            port: None,
        },
    );
    let t = b.build().unwrap();
    assert_eq!(
        t.adj(t.lookup4(0, "1.2.3.4".parse().unwrap()).unwrap()),
        Adj::Unreachable
    );
    let mut b = TablesBuilder::new();
    b.add_route(7, p("1.0.0.0/8"), Route::Drop);
    assert_eq!(b.build().unwrap_err(), BuildError::UnknownVrf(7));
}

#[test]
fn shared_tables_swap() {
    let s = SharedTables::new(Tables::default());
    let old = s.load();
    let mut b = TablesBuilder::new();
    b.add_vrf(5, "blue");
    s.store(b.build().unwrap());
    assert_eq!(old.vrfs.len(), 0);
    assert_eq!(s.load().vrf_index(5), Some(1));
    assert_eq!(s.load().generation, 1);
}

/// What a VRF's FIB forwards to, independent of adjacency numbering:
/// prefix → the adjacency, or an ECMP group's member adjacencies.
fn fib_view(t: &Tables, v: usize) -> Vec<(String, Vec<Adj>)> {
    let expand = |i: u32| match t.adj(i) {
        Adj::Ecmp { first, count } => (0..u32::from(count))
            .map(|k| t.adj(t.ecmp[(first + k) as usize]))
            .collect(),
        a => vec![a],
    };
    let mut out: Vec<(String, Vec<Adj>)> = t.vrfs[v]
        .fib4
        .entries()
        .into_iter()
        .map(|(p, l, i)| (format!("{}/{l}", Ipv4Addr::from(p)), expand(i)))
        .chain(
            t.vrfs[v]
                .fib6
                .entries()
                .into_iter()
                .map(|(p, l, i)| (format!("{}/{l}", Ipv6Addr::from(p)), expand(i))),
        )
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// After every batch of learned-route changes, the patched tables forward
/// exactly as a full build of the same routes does; the untouched VRF's
/// FIB is shared, not copied.
#[test]
fn patches_equal_a_full_build_after_every_batch() {
    use std::collections::BTreeMap;
    let via = |a: &str| Route::Via {
        next_hop: a.parse().unwrap(),
        port: None,
    };
    let base = || {
        let mut b = TablesBuilder::new();
        b.add_vrf(7, "blue")
            .add_interface(0, "a", [2, 0, 0, 0, 0, 1], 1500, 0, &[p("10.1.0.1/24")])
            .add_interface(1, "b", [2, 0, 0, 0, 0, 2], 1500, 0, &[p("10.2.0.1/24")])
            .add_interface(2, "c", [2, 0, 0, 0, 0, 3], 1500, 7, &[p("10.1.0.1/24")])
            .add_interface(3, "d", [2, 0, 0, 0, 0, 4], 1500, 0, &[p("fd00::1/64")])
            .add_route(0, p("10.0.0.0/8"), Route::Drop)
            .add_route(0, p("10.60.0.0/16"), via("10.2.0.7"));
        b
    };
    let hopsets: Vec<Vec<Route>> = vec![
        vec![via("10.1.0.9")],
        vec![via("10.1.0.9"), via("10.2.0.9")],
        vec![via("10.2.0.9"), via("10.1.0.9"), via("192.0.2.1")],
        vec![via("192.0.2.1")],
        vec![Route::Drop],
        vec![Route::Unreachable],
        vec![via("fd00::9")],
        // Through the static route: its adjacency.
        vec![via("10.60.1.1")],
    ];
    // (vrf index, prefix) → hop set; the FIB a full build makes of it.
    let mut want: BTreeMap<(u16, String), usize> = BTreeMap::new();
    let full = |want: &BTreeMap<(u16, String), usize>| {
        let mut b = base();
        for ((v, pre), h) in want {
            let id = if *v == 0 { 0 } else { 7 };
            b.add_route_group(id, p(pre), hopsets[*h].clone());
        }
        b.build().unwrap()
    };
    let mut t = full(&want);
    let no_defer = |_: u16, _: IpAddr| false;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _batch in 0..200 {
        let mut changes = Vec::new();
        for _ in 0..(next() % 6 + 1) {
            let r = next();
            let v = (r % 2) as u16;
            let h = (r >> 8) as usize % hopsets.len();
            let pre = if hopsets[h] == vec![via("fd00::9")] {
                format!("fd00:{:x}::/32", (r >> 16) % 5 + 1)
            } else {
                format!("10.{}.{}.0/24", 100 + (r >> 16) % 3, (r >> 24) % 4)
            };
            let add = (r >> 40) % 3 != 0;
            if add {
                want.insert((v, pre.clone()), h);
            } else {
                want.remove(&(v, pre.clone()));
            }
            changes.push(RoutePatch {
                vrf: v,
                prefix: p(&pre),
                hops: add.then(|| hopsets[h].clone()),
            });
        }
        let before = t.clone();
        t = t.patched(&changes, &no_defer).expect("patchable");
        let f = full(&want);
        for v in 0..2 {
            assert_eq!(fib_view(&t, v), fib_view(&f, v), "vrf {v}");
            if changes.iter().all(|c| usize::from(c.vrf) != v) {
                assert!(Arc::ptr_eq(&t.vrfs[v].fib4, &before.vrfs[v].fib4));
            }
        }
        let mut u1: Vec<_> = t.unresolved.clone();
        let mut u2: Vec<_> = f.unresolved.clone();
        u1.sort_by_key(|(v, p)| (*v, p.to_string()));
        u2.sort_by_key(|(v, p)| (*v, p.to_string()));
        assert_eq!(u1, u2);
    }
    // A next hop the caller defers (under a group route): no patch.
    let c = [RoutePatch {
        vrf: 0,
        prefix: p("10.200.0.0/16"),
        hops: Some(vec![via("10.1.0.9")]),
    }];
    assert!(t.patched(&c, &|_, _| true).is_none());
}
