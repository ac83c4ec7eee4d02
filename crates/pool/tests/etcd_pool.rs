//! The pool against a real 3-member etcd cluster started by each test:
//! placement, failover after a member's death (its lease expiring), the
//! make-before-break drain, sticky placement and the rebalance, the
//! leader's epoch fencing a deposed leader, quorum loss, and the start-up
//! errors. The gateways are fakes that apply at once and seal a snapshot
//! of one outbound SA, so what is judged is the pool's own behaviour:
//! who serves what, in which mode, resumed from which sealed state.

mod common;

use common::*;
use std::collections::BTreeSet;
use std::time::Duration;
use vecgate_pool::etcd::member::CommandError;
use vecgate_pool::etcd::{Error, Etcd};
use vecgate_pool::records::{Phase, PlacementRecord, Reason};
use vecgate_pool::{Mode, Write};

const TTL: u64 = 2;
const LONG: Duration = Duration::from_secs(30);

fn serving_everywhere(nodes: &[&Node], n: usize) -> bool {
    let all: usize = nodes.iter().map(|x| x.serves().len()).sum();
    let st = nodes[0].st();
    all == n
        && st.view.statuses.len() == n
        && st
            .view
            .statuses
            .values()
            .all(|s| s.value.phase == Phase::Serving)
}

/// Three members, six connections of two tenants: every one placed once,
/// no member holding two of one tenant; then one member dies and its
/// connections come up elsewhere, resumed past its sealed ceilings, only
/// after its lease is gone.
#[test]
fn placement_and_failover() {
    let c = Cluster::start();
    let k = key(1);
    let a = start_node(settings(&c, "p1", "a", TTL), k.clone()).unwrap();
    let mut b = start_node(settings(&c, "p1", "b", TTL), k.clone()).unwrap();
    let cc = start_node(settings(&c, "p1", "c", TTL), k.clone()).unwrap();
    wait_for(LONG, "three members and a leader", || {
        let s = a.st();
        s.view.members.len() == 3 && s.view.leader().is_some()
    });
    for i in 0..6u8 {
        let t = if i % 2 == 0 { "blue" } else { "red" };
        a.add(gre(&format!("c{i}"), t, 100, i + 1)).expect("added");
    }
    wait_for(LONG, "six connections serving", || {
        serving_everywhere(&[&a, &b, &cc], 6)
    });
    // Anti-affinity: three per tenant over three members, one each.
    for n in [&a, &b, &cc] {
        let st = n.st();
        let tenants: Vec<String> = n
            .serves()
            .iter()
            .map(|id| st.view.conns[id].value.tenant().to_owned())
            .collect();
        let uniq: BTreeSet<&String> = tenants.iter().collect();
        assert_eq!(uniq.len(), tenants.len(), "{}: {tenants:?}", n.name);
        assert!(n
            .served
            .lock()
            .unwrap()
            .values()
            .all(|s| s.mode == Mode::Fresh));
    }
    let on_b = b.serves();
    assert_eq!(on_b.len(), 2);
    // Let b write its sealed state, then kill it.
    wait_for(LONG, "b's state written", || {
        let st = a.st();
        on_b.iter().all(|id| st.view.states.contains_key(id))
    });
    b.kill();
    let t = wait_for(LONG, "b's connections served by a and c", || {
        let mut got = a.serves();
        got.extend(cc.serves());
        on_b.iter().all(|id| got.contains(id))
    });
    // Not before the lease could expire.
    assert!(
        t >= Duration::from_millis(TTL * 1000 - 300),
        "moved after {t:?}"
    );
    // a's mirror of the pool may trail what c acted on: wait for it.
    wait_for(
        LONG,
        "a's view has b's connections placed elsewhere",
        || {
            let st = a.st();
            on_b.iter().all(|id| {
                st.view
                    .placements
                    .get(id)
                    .is_some_and(|p| p.value.member != "b")
            })
        },
    );
    let st = a.st();
    assert!(!st.view.members.contains_key("b"));
    for id in &on_b {
        let served = a
            .served
            .lock()
            .unwrap()
            .get(id)
            .cloned()
            .or_else(|| cc.served.lock().unwrap().get(id).cloned())
            .unwrap();
        assert_eq!(served.mode, Mode::Floor, "{id}");
        assert_eq!(served.resumed_from, Some(1000), "{id}: b's sealed ceiling");
        let p = &st.view.placements[id].value;
        assert_eq!(
            (p.reason, p.previous.as_deref()),
            (Reason::Failover, Some("b"))
        );
        let audit = &st.view.audits[&p.audit];
        assert_eq!(
            (audit.from.as_deref(), audit.reason),
            (Some("b"), Reason::Failover)
        );
        assert!(audit.detect_ms <= audit.decide_ms);
    }
    wait_for(LONG, "all six serving again", || {
        serving_everywhere(&[&a, &cc], 6)
    });
    // b comes back: it gets nothing back by itself.
    let b2 = start_node(settings(&c, "p1", "b", TTL), k.clone()).unwrap();
    wait_for(LONG, "b registered again", || {
        a.st().view.members.contains_key("b")
    });
    std::thread::sleep(Duration::from_secs(1));
    assert!(b2.serves().is_empty(), "sticky placement");
    // The plan gives it some back; applied, they move make-before-break.
    let plan = a.rebalance(true).unwrap();
    assert!(
        !plan.is_empty() && plan.iter().all(|d| d.to == "b"),
        "{plan:?}"
    );
    a.rebalance(false).unwrap();
    wait_for(LONG, "b serving after the rebalance", || {
        !b2.serves().is_empty()
    });
    wait_for(LONG, "rebalance done", || {
        let st = a.st();
        st.view.rebalance.is_none()
            && st
                .view
                .placements
                .values()
                .all(|p| p.value.handover.is_none())
    });
    for s in b2.served.lock().unwrap().values() {
        assert_eq!(
            s.mode,
            Mode::Exact,
            "a handover resumes from the exact state"
        );
    }
    wait_for(LONG, "all six serving after the rebalance", || {
        serving_everywhere(&[&a, &b2, &cc], 6)
    });
}

/// A drain moves every connection make-before-break (released first,
/// exact state), the drained member gets nothing new, an unknown member
/// is refused; a deleted connection is forgotten.
#[test]
fn drain_and_delete() {
    let c = Cluster::start();
    let k = key(2);
    let a = start_node(settings(&c, "p2", "a", TTL), k.clone()).unwrap();
    let b = start_node(settings(&c, "p2", "b", TTL), k.clone()).unwrap();
    wait_for(LONG, "two members and a leader", || {
        let s = a.st();
        s.view.members.len() == 2 && s.view.leader().is_some()
    });
    for i in 0..4u8 {
        a.add(gre(&format!("d{i}"), "t", 100, i + 1)).unwrap();
    }
    wait_for(LONG, "four serving", || serving_everywhere(&[&a, &b], 4));
    // 400 of 2000 Mbit/s used, one member kept spare: 900 more do not fit.
    match b.add(gre("huge", "t", 900, 10)) {
        Err(CommandError::Refused(m)) => assert!(m.contains("does not fit"), "{m}"),
        other => panic!("{other:?}"),
    }
    let moving = a.serves();
    assert_eq!(moving.len(), 2);
    assert_eq!(
        b.drain("nosuch", true),
        Err(CommandError::Unknown(
            "no member \"nosuch\" in the pool (members: a, b)".into()
        ))
    );
    b.drain("a", true).unwrap();
    wait_for(LONG, "a drained", || {
        a.serves().is_empty() && b.serves().len() == 4
    });
    let log = a.log.lock().unwrap().clone();
    for id in &moving {
        let rel = log
            .iter()
            .position(|l| l == &format!("release {id}"))
            .unwrap();
        let rem = log
            .iter()
            .position(|l| l == &format!("remove {id}"))
            .unwrap();
        assert!(rel < rem, "{log:?}");
        let s = b.served.lock().unwrap()[id].clone();
        assert_eq!(s.mode, Mode::Exact);
        assert_eq!(s.resumed_from, Some(1000), "a's released ceiling");
    }
    // Drained, a takes nothing new, and with one member left accepting
    // no room can be kept for a failure: refused with that reason.
    match b.add(gre("d9", "t", 100, 9)) {
        Err(CommandError::Refused(m)) => assert!(m.contains("keeps room for 1 to fail"), "{m}"),
        other => panic!("{other:?}"),
    }
    b.drain("a", false).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        a.serves().is_empty(),
        "undrained: still nothing back by itself"
    );
    // An invalid connection never reaches etcd.
    match b.add(gre("zero", "t", 0, 11)) {
        Err(CommandError::Invalid(e)) => assert_eq!(e[0].field, "bandwidth_mbps"),
        other => panic!("{other:?}"),
    }
    assert!(!b.st().view.conns.contains_key("zero"));
    b.delete("d3").unwrap();
    wait_for(LONG, "d3 forgotten", || {
        let st = b.st();
        !b.serves().contains(&"d3".to_owned())
            && !st.view.placements.contains_key("d3")
            && !st.view.statuses.contains_key("d3")
            && !st.view.states.contains_key("d3")
    });
    assert!(matches!(b.delete("d3"), Err(CommandError::Unknown(_))));
}

/// The leader dies: another member leads with a higher epoch, and a
/// write guarded by the old epoch fails.
#[test]
fn deposed_leader_cannot_write() {
    let c = Cluster::start();
    let k = key(3);
    let mut a = start_node(settings(&c, "p3", "a", TTL), k.clone()).unwrap();
    wait_for(LONG, "a leads", || a.st().leading > 0);
    let b = start_node(settings(&c, "p3", "b", TTL), k.clone()).unwrap();
    wait_for(LONG, "b sees a", || {
        b.st().view.leader().is_some_and(|l| l.member == "a")
    });
    let old = b.st().view.leader().unwrap();
    a.kill();
    wait_for(LONG, "b leads", || b.st().leading > 0);
    let new = b.st().view.leader().unwrap();
    assert!(new.epoch > old.epoch, "{old:?} {new:?}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let etcd = rt
        .block_on(Etcd::connect(&settings(&c, "p3", "x", TTL)))
        .unwrap();
    let w = Write::Place {
        conn: "x".into(),
        expect_rev: 0,
        record: PlacementRecord {
            member: "a".into(),
            epoch: old.epoch,
            reason: Reason::New,
            previous: None,
            previous_lease: None,
            handover: None,
            audit: 1,
        },
        audit: None,
    };
    assert_eq!(
        rt.block_on(etcd.run(&w, Some((&old.key, old.epoch)), "a", 0)),
        Ok(false)
    );
    assert_eq!(
        rt.block_on(etcd.run(&w, Some((&new.key, new.epoch)), "b", 0)),
        Ok(true)
    );
}

/// Two of three etcd members down: nothing is fenced past the TTL, pool
/// changes are refused as unavailable; with quorum back, changes work
/// again and the pool converges.
#[test]
fn quorum_loss_is_not_an_outage() {
    let mut c = Cluster::start();
    let k = key(4);
    let a = start_node(settings(&c, "p4", "a", TTL), k.clone()).unwrap();
    let b = start_node(settings(&c, "p4", "b", TTL), k.clone()).unwrap();
    wait_for(LONG, "two members", || a.st().view.members.len() == 2);
    a.add(gre("q1", "t", 100, 1)).unwrap();
    a.add(gre("q2", "t", 100, 2)).unwrap();
    wait_for(LONG, "two serving", || serving_everywhere(&[&a, &b], 2));
    let leases = [a.st().lease, b.st().lease];
    c.kill(1);
    c.kill(2);
    // Past several TTLs: still serving, the fence holding.
    std::thread::sleep(Duration::from_secs(TTL * 3));
    for n in [&a, &b] {
        let st = n.st();
        assert!(st.fence.serving, "{}: {:?}", n.name, st.fence);
        assert!(st.fence.holding, "{}: {:?}", n.name, st.fence);
        assert_eq!(n.serves().len(), 1, "{}", n.name);
    }
    match a.add(gre("q3", "t", 100, 3)) {
        Err(CommandError::Unavailable(m)) => {
            assert!(m.contains("no leader") || m.contains("unreachable"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    c.restart(1);
    c.restart(2);
    wait_for(LONG, "fences renewed", || {
        !a.st().fence.holding && !b.st().fence.holding && a.st().fence.serving
    });
    wait_for(LONG, "q3 accepted after quorum returns", || {
        a.add(gre("q3", "t", 100, 3)).is_ok()
    });
    wait_for(LONG, "three serving", || serving_everywhere(&[&a, &b], 3));
    // Nobody lost its lease on the way: nothing moved.
    assert_eq!([a.st().lease, b.st().lease], leases);
}

/// A wrong pool key and an unreachable etcd are refused at start-up,
/// before anything is registered.
#[test]
fn startup_errors() {
    let c = Cluster::start();
    let a = start_node(settings(&c, "p5", "a", TTL), key(5)).unwrap();
    wait_for(LONG, "a registered", || a.st().registered);
    match start_node(settings(&c, "p5", "b", TTL), key(6)) {
        Err(Error::WrongKey(p)) => assert_eq!(p, "p5"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a wrong key joined"),
    }
    assert!(!a.st().view.members.contains_key("b"));
    let mut s = settings(&c, "p5", "c", TTL);
    s.endpoints = vec!["http://127.0.0.1:1".into()];
    match start_node(s, key(5)) {
        Err(Error::Unreachable(m)) => assert!(m.contains("127.0.0.1:1"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("joined an unreachable etcd"),
    }
}
