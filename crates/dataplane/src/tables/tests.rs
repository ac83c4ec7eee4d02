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
