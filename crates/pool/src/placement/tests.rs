use super::*;
use proptest::prelude::*;

fn member(name: &str, ipsec: u64, gre: u64, tunnels: u32) -> Member {
    Member {
        name: name.into(),
        capacity: Capacity {
            ipsec_mbps: ipsec,
            gre_mbps: gre,
            tunnels,
        },
        accepting: true,
        draining: false,
    }
}

fn conn(id: &str, tenant: &str, class: Class, mbps: u64) -> Conn {
    Conn {
        id: id.into(),
        tenant: tenant.into(),
        demand: Demand { class, mbps },
    }
}

fn apply(placed: &mut BTreeMap<String, String>, ds: &[Decision]) {
    for d in ds {
        placed.insert(d.conn.clone(), d.to.clone());
    }
}

/// Three active members and a spare: twelve connections of four tenants
/// spread so no member holds two of one tenant, and the pool keeps room
/// for one member to fail.
#[test]
fn twelve_connections_four_tenants_spread() {
    let members: Vec<Member> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| member(n, 1000, 4000, 100))
        .collect();
    let mut conns = Vec::new();
    for t in 0..4 {
        for k in 0..3 {
            let class = if k == 0 { Class::Ipsec } else { Class::Gre };
            let c = conn(&format!("t{t}-{k}"), &format!("t{t}"), class, 100);
            admit(&members, &conns, &c, 1).expect("admitted");
            conns.push(c);
        }
    }
    let (ds, refused) = decide(&members, &conns, &BTreeMap::new());
    assert!(refused.is_empty(), "{refused:?}");
    assert_eq!(ds.len(), 12);
    assert!(ds
        .iter()
        .all(|d| d.reason == Reason::New && d.from.is_none()));
    let mut placed = BTreeMap::new();
    apply(&mut placed, &ds);
    let counts = tenant_counts(&conns, &placed);
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
    // Even use: three connections on each member.
    let l = loads(&members, &conns, &placed);
    assert!(l.values().all(|l| l.tunnels == 3), "{l:?}");
}

#[test]
fn headroom_refuses_what_would_not_survive_n_failures() {
    let members = vec![member("a", 1000, 0, 10), member("b", 1000, 0, 10)];
    let mut conns = vec![conn("c1", "t", Class::Ipsec, 600)];
    admit(&members, &[], &conns[0], 1).unwrap();
    let c2 = conn("c2", "t", Class::Ipsec, 500);
    assert_eq!(
        admit(&members, &conns, &c2, 1),
        Err(Refusal::Headroom {
            class: Class::Ipsec,
            need: 500,
            free: 400,
            redundant: 1
        })
    );
    // Without spare it fits.
    admit(&members, &conns, &c2, 0).unwrap();
    conns.push(c2);
    // GRE capacity 0: refused whatever the headroom.
    let g = conn("g", "t", Class::Gre, 1);
    assert!(matches!(
        admit(&members, &conns, &g, 0),
        Err(Refusal::Headroom {
            class: Class::Gre,
            ..
        })
    ));
    // As many members as spares: refused with the reason.
    assert_eq!(
        admit(&members[..1], &[], &g, 1),
        Err(Refusal::TooFewMembers {
            members: 1,
            redundant: 1
        })
    );
    assert_eq!(admit(&[], &[], &g, 0), Err(Refusal::NoMembers));
    let msg = Refusal::Headroom {
        class: Class::Ipsec,
        need: 500,
        free: 400,
        redundant: 1,
    }
    .to_string();
    assert!(
        msg.contains("500 Mbit/s of ipsec") && msg.contains("400 Mbit/s free"),
        "{msg}"
    );
}

#[test]
fn sticky_failover_and_drain() {
    let mut members: Vec<Member> = ["a", "b", "c"]
        .iter()
        .map(|n| member(n, 1000, 1000, 10))
        .collect();
    let conns: Vec<Conn> = (0..6)
        .map(|i| conn(&format!("c{i}"), &format!("t{}", i % 2), Class::Gre, 100))
        .collect();
    let (ds, _) = decide(&members, &conns, &BTreeMap::new());
    let mut placed = BTreeMap::new();
    apply(&mut placed, &ds);
    // Nothing to do: sticky.
    assert_eq!(decide(&members, &conns, &placed), (vec![], vec![]));
    // "b" dies: its connections (and only those) fail over, not to "b".
    let on_b: Vec<String> = placed
        .iter()
        .filter(|(_, m)| *m == "b")
        .map(|(c, _)| c.clone())
        .collect();
    let alive: Vec<Member> = members.iter().filter(|m| m.name != "b").cloned().collect();
    let (ds, refused) = decide(&alive, &conns, &placed);
    assert!(refused.is_empty());
    let moved: Vec<String> = ds.iter().map(|d| d.conn.clone()).collect();
    assert_eq!(moved, on_b);
    assert!(ds
        .iter()
        .all(|d| d.reason == Reason::Failover && d.from.as_deref() == Some("b") && d.to != "b"));
    apply(&mut placed, &ds);
    // "b" comes back: it gets nothing by itself.
    assert_eq!(decide(&members, &conns, &placed), (vec![], vec![]));
    // A rebalance gives it some back.
    let plan = rebalance(&members, &conns, &placed, 10);
    assert!(
        !plan.is_empty() && plan.iter().all(|d| d.to == "b"),
        "{plan:?}"
    );
    // "c" drained: everything on it leaves, nothing goes to it.
    members[2].draining = true;
    members[2].accepting = false;
    let (ds, _) = decide(&members, &conns, &placed);
    assert!(!ds.is_empty());
    assert!(ds
        .iter()
        .all(|d| d.reason == Reason::Drain && d.from.as_deref() == Some("c") && d.to != "c"));
}

#[test]
fn failover_that_does_not_fit_is_refused_not_overcommitted() {
    let members = [member("a", 1000, 0, 10), member("b", 1000, 0, 10)];
    let conns = vec![
        conn("x", "t", Class::Ipsec, 800),
        conn("y", "t", Class::Ipsec, 800),
    ];
    let mut placed = BTreeMap::new();
    placed.insert("x".to_owned(), "a".to_owned());
    placed.insert("y".to_owned(), "b".to_owned());
    let (ds, refused) = decide(&members[..1], &conns, &placed);
    assert!(ds.is_empty());
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].0, "y");
    assert!(matches!(
        refused[0].1,
        Refusal::NoRoom { most_free: 200, .. }
    ));
}

fn arb_pool() -> impl Strategy<Value = (Vec<Member>, Vec<Conn>)> {
    (
        proptest::collection::vec((1u64..5000, 1u64..5000, 1u32..40), 1..7),
        proptest::collection::vec((0usize..5, any::<bool>(), 1u64..800), 0..60),
    )
        .prop_map(|(ms, cs)| {
            let members = ms
                .into_iter()
                .enumerate()
                .map(|(i, (a, b, t))| member(&format!("m{i}"), a, b, t))
                .collect();
            let conns = cs
                .into_iter()
                .enumerate()
                .map(|(i, (t, ipsec, mbps))| {
                    let class = if ipsec { Class::Ipsec } else { Class::Gre };
                    conn(&format!("c{i}"), &format!("t{t}"), class, mbps)
                })
                .collect();
            (members, conns)
        })
}

fn within_capacity(members: &[Member], conns: &[Conn], placed: &BTreeMap<String, String>) -> bool {
    let l = loads(members, conns, placed);
    members.iter().all(|m| {
        let x = l[m.name.as_str()];
        x.ipsec_mbps <= m.capacity.ipsec_mbps
            && x.gre_mbps <= m.capacity.gre_mbps
            && x.tunnels <= m.capacity.tunnels
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Never over capacity, every connection placed or refused once, and
    /// a second round changes nothing (sticky).
    #[test]
    fn decide_is_bounded_complete_and_sticky((members, conns) in arb_pool()) {
        let (ds, refused) = decide(&members, &conns, &BTreeMap::new());
        prop_assert_eq!(ds.len() + refused.len(), conns.len());
        let mut placed = BTreeMap::new();
        apply(&mut placed, &ds);
        prop_assert!(within_capacity(&members, &conns, &placed));
        let placed_conns: Vec<Conn> =
            conns.iter().filter(|c| placed.contains_key(&c.id)).cloned().collect();
        let (again, _) = decide(&members, &placed_conns, &placed);
        prop_assert!(again.is_empty());
    }

    /// Connections of one size, admitted with N = 1 spare, all survive
    /// the loss of any one member (the fluid bound is exact when sizes
    /// divide the capacities; otherwise packing can strand a remainder,
    /// which `decide` refuses rather than over-commits).
    #[test]
    fn admitted_survive_any_single_failure(
        n in 2usize..6, unit in 10u64..300, count in 0usize..80, lost in 0usize..6,
    ) {
        let cap = unit * 10;
        let demands = vec![unit; count];
        let members: Vec<Member> =
            (0..n).map(|i| member(&format!("m{i}"), cap, cap, 1000)).collect();
        let mut conns = Vec::new();
        for (i, d) in demands.iter().enumerate() {
            let c = conn(&format!("c{i}"), &format!("t{}", i % 3), Class::Ipsec, *d);
            if admit(&members, &conns, &c, 1).is_ok() {
                conns.push(c);
            }
        }
        let (ds, refused) = decide(&members, &conns, &BTreeMap::new());
        prop_assert!(refused.is_empty());
        let mut placed = BTreeMap::new();
        apply(&mut placed, &ds);
        let lost = format!("m{}", lost % n);
        let alive: Vec<Member> = members.iter().filter(|m| m.name != lost).cloned().collect();
        let (ds, refused) = decide(&alive, &conns, &placed);
        prop_assert!(refused.is_empty(), "{:?}", refused);
        apply(&mut placed, &ds);
        prop_assert!(placed.values().all(|m| *m != lost));
        prop_assert!(within_capacity(&alive, &conns, &placed));
    }

    /// A rebalance never over-commits and never makes the score worse.
    #[test]
    fn rebalance_improves_within_capacity((members, conns) in arb_pool()) {
        let (ds, _) = decide(&members[..1], &conns, &BTreeMap::new());
        let mut placed = BTreeMap::new();
        apply(&mut placed, &ds);
        let before = score(&members, &conns, &placed);
        let plan = rebalance(&members, &conns, &placed, 8);
        apply(&mut placed, &plan);
        prop_assert!(within_capacity(&members, &conns, &placed));
        prop_assert!(score(&members, &conns, &placed) <= before);
        prop_assert!(plan.len() <= 8);
    }
}
