//! The leader and owner machines together, against an in-memory store
//! that runs their writes with etcd's compare semantics and feeds every
//! member's view the resulting events in revision order. Random deaths
//! (the lease expiring with the process), restarts under a new lease,
//! drains, adds and deletes. After every step no connection is sent on
//! by two live members, also at the instant a member applies one (a
//! handover's old owner may still receive, never send). At the end, with
//! the pool quiet, every stored connection is served by exactly one
//! member and no deleted one by any.

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use vecgate_pool::keys::Keys;
use vecgate_pool::records::{encode, Capacity, DrainRecord, Health, MemberRecord};
use vecgate_pool::view::{Kv, View};
use vecgate_pool::{Action, Connection, Leader, Mode, Owner, Write};

struct Store {
    keys: Keys,
    rev: i64,
    kvs: BTreeMap<String, (Vec<u8>, i64, i64, i64)>,
    log: Vec<Kv>,
}

impl Store {
    fn put(&mut self, k: String, v: Vec<u8>, lease: i64) {
        self.rev += 1;
        let create = self.kvs.get(&k).map_or(self.rev, |e| e.1);
        self.kvs
            .insert(k.clone(), (v.clone(), create, self.rev, lease));
        self.log.push(Kv::Put {
            key: k.into_bytes(),
            value: v,
            create_rev: create,
            mod_rev: self.rev,
            lease,
        });
    }
    fn delete(&mut self, k: &str) {
        if self.kvs.remove(k).is_some() {
            self.rev += 1;
            self.log.push(Kv::Delete {
                key: k.as_bytes().to_vec(),
                mod_rev: self.rev,
            });
        }
    }
    fn mod_rev(&self, k: &str) -> i64 {
        self.kvs.get(k).map_or(0, |e| e.2)
    }
    /// etcd's transaction for one of the core's writes.
    fn run(&mut self, w: &Write, leader: Option<(&str, i64)>, member: &str, lease: i64) -> bool {
        let k = self.keys.clone();
        let epoch_ok =
            |s: &Store| leader.is_some_and(|(key, e)| s.kvs.get(key).is_some_and(|x| x.1 == e));
        match w {
            Write::Place {
                conn,
                expect_rev,
                record,
                audit,
            } => {
                if !epoch_ok(self) || self.mod_rev(&k.placement(conn)) != *expect_rev {
                    return false;
                }
                self.put(k.placement(conn), encode(record), 0);
                if let Some(a) = audit {
                    self.put(k.audit(a.seq), encode(a), 0);
                }
            }
            Write::Forget { conn } => {
                if !epoch_ok(self) {
                    return false;
                }
                self.delete(&k.placement(conn));
                self.delete(&k.state(conn));
                self.delete(&k.status(conn));
            }
            Write::EndRebalance { .. } => {
                if !epoch_ok(self) {
                    return false;
                }
                self.delete(&k.rebalance());
            }
            Write::Owner {
                conn,
                guard_rev,
                state,
                status,
            } => {
                let lease_ok = self
                    .kvs
                    .get(&k.member(member))
                    .is_some_and(|x| x.3 == lease);
                if self.mod_rev(&k.placement(conn)) != *guard_rev || !lease_ok {
                    return false;
                }
                self.put(k.status(conn), encode(status), 0);
                if let Some(b) = state {
                    self.put(k.state(conn), b.clone(), 0);
                }
            }
        }
        true
    }
}

#[derive(Default)]
struct Gw {
    /// Connection -> sending (false: released, receiving only).
    conns: BTreeMap<String, bool>,
}

struct Sim {
    name: String,
    lease: i64,
    alive: bool,
    seen: usize,
    view: View,
    leader: Leader,
    owner: Owner,
    gw: Gw,
    /// Results to report on the next step (the gateway answers later).
    todo: Vec<Action>,
}

fn member_rec(name: &str, lease: i64) -> Vec<u8> {
    encode(&MemberRecord {
        name: name.into(),
        lease,
        capacity: Capacity {
            ipsec_mbps: 10_000,
            gre_mbps: 10_000,
            tunnels: 100,
        },
        addresses: vec![],
        api: None,
        health: Health {
            ok: true,
            reason: None,
        },
        started_ms: 0,
    })
}

fn conn(i: usize) -> Connection {
    let json = format!(
        r#"{{"tunnel":{{"name":"c{i}","kind":"gre","local":"192.0.2.{n}",
        "remote":"198.51.100.{n}","key":{n},"vrf":"t{t}","underlay_vrf":"default","mtu":null,
        "checksum":false,"sequence":false,"port":4789}},"routes":[],"bandwidth_mbps":10}}"#,
        n = i + 1,
        t = i % 4
    );
    serde_json::from_str(&json).unwrap()
}

#[derive(Clone, Debug)]
enum Op {
    Kill(usize),
    Revive(usize),
    Drain(usize),
    Undrain(usize),
    Add(usize),
    Delete(usize),
    Steps(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0usize..4).prop_map(Op::Kill),
        2 => (0usize..4).prop_map(Op::Revive),
        1 => (0usize..4).prop_map(Op::Drain),
        1 => (0usize..4).prop_map(Op::Undrain),
        2 => (0usize..16).prop_map(Op::Add),
        1 => (0usize..16).prop_map(Op::Delete),
        4 => (1u8..6).prop_map(Op::Steps),
    ]
}

struct World {
    store: Store,
    sims: Vec<Sim>,
    next_lease: i64,
    now: u64,
}

impl World {
    fn new() -> World {
        let mut w = World {
            store: Store {
                keys: Keys::new("sim"),
                rev: 0,
                kvs: BTreeMap::new(),
                log: Vec::new(),
            },
            sims: Vec::new(),
            next_lease: 100,
            now: 1_000_000,
        };
        for i in 0..4 {
            let name = format!("m{i}");
            w.sims.push(Sim {
                leader: Leader::new(&name),
                owner: Owner::new(&name),
                name,
                lease: 0,
                alive: false,
                seen: 0,
                view: View::default(),
                gw: Gw::default(),
                todo: Vec::new(),
            });
            w.revive(i);
        }
        w
    }

    fn revive(&mut self, i: usize) {
        if self.sims[i].alive {
            return;
        }
        self.next_lease += 1;
        let lease = self.next_lease;
        let name = self.sims[i].name.clone();
        let k = self.store.keys.clone();
        self.store
            .put(k.member(&name), member_rec(&name, lease), lease);
        self.store.put(
            format!("{}/{lease:x}", k.election()),
            name.clone().into_bytes(),
            lease,
        );
        let s = &mut self.sims[i];
        s.lease = lease;
        s.alive = true;
        s.leader = Leader::new(&name);
        s.owner = Owner::new(&name);
        s.gw = Gw::default();
        s.todo.clear();
        // A fresh process lists from scratch.
        s.view = View::default();
        s.seen = 0;
    }

    /// `kill -9` and the lease's expiry: its keys go.
    fn kill(&mut self, i: usize) {
        if !self.sims[i].alive {
            return;
        }
        let s = &mut self.sims[i];
        s.alive = false;
        s.gw = Gw::default();
        let (name, lease) = (s.name.clone(), s.lease);
        let k = self.store.keys.clone();
        self.store.delete(&k.member(&name));
        self.store.delete(&format!("{}/{lease:x}", k.election()));
    }

    fn step(&mut self) {
        self.now += 100;
        let keys = self.store.keys.clone();
        for i in 0..self.sims.len() {
            if !self.sims[i].alive {
                continue;
            }
            // Deliver events.
            let evs: Vec<Kv> = self.store.log[self.sims[i].seen..].to_vec();
            let s = &mut self.sims[i];
            s.seen = self.store.log.len();
            for e in evs {
                s.view.apply(&keys, e, self.now);
            }
            // The campaign: our key lowest.
            let my_key = format!("{}/{:x}", keys.election(), s.lease);
            if s.view.leader().is_some_and(|l| l.key == my_key) && s.leader.key().is_none() {
                s.leader.elected(my_key.clone());
            }
            // The gateway answers what it was asked last step.
            let mut writes = Vec::new();
            for a in std::mem::take(&mut s.todo) {
                match a {
                    Action::Apply { conn, .. } | Action::Update { conn, .. } => {
                        if let Some(w) = s.owner.applied(&conn, Ok(vec![]), self.now) {
                            writes.push((w, None));
                        }
                    }
                    Action::Release {
                        conn,
                        placement_rev,
                    } => {
                        if let Some(w) =
                            s.owner
                                .released(&conn, placement_rev, vec![1, 2, 3], self.now)
                        {
                            writes.push((w, None));
                        }
                    }
                    Action::Remove { .. } => {}
                }
            }
            let key = s.leader.key().map(str::to_owned);
            for w in s.leader.step(&s.view, self.now) {
                writes.push((w, key.clone().map(|k| (k, s.leader.epoch()))));
            }
            let (acts, ow) = s.owner.step(&s.view, true, self.now);
            writes.extend(ow.into_iter().map(|w| (w, None)));
            for a in &acts {
                match a {
                    Action::Apply { conn, .. } => {
                        s.gw.conns.insert(conn.clone(), true);
                    }
                    Action::Release { conn, .. } => {
                        s.gw.conns.insert(conn.clone(), false);
                    }
                    Action::Remove { conn } => {
                        s.gw.conns.remove(conn);
                    }
                    Action::Update { .. } => {}
                }
            }
            s.todo.extend(acts.iter().cloned());
            let (name, lease) = (s.name.clone(), s.lease);
            let applies: Vec<(String, Mode)> = acts
                .iter()
                .filter_map(|a| match a {
                    Action::Apply { conn, mode, .. } => Some((conn.clone(), *mode)),
                    _ => None,
                })
                .collect();
            for (w, l) in writes {
                let ok =
                    self.store
                        .run(&w, l.as_ref().map(|(k, e)| (k.as_str(), *e)), &name, lease);
                if l.is_some() {
                    self.sims[i].leader.written(&w, ok);
                }
            }
            // At the instant of each apply, nobody else sends it (a
            // released old owner may still receive).
            for (c, mode) in applies {
                for (j, o) in self.sims.iter().enumerate() {
                    let sending = o.gw.conns.get(&c).copied().unwrap_or(false);
                    assert!(
                        j == i || !o.alive || !sending,
                        "{name} applies {c} ({mode:?}) while {} sends it",
                        o.name
                    );
                }
            }
        }
        // Invariant: at most one live member sends each connection.
        let mut senders: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for s in self.sims.iter().filter(|s| s.alive) {
            for (c, sending) in &s.gw.conns {
                if *sending {
                    senders.entry(c).or_default().push(&s.name);
                }
            }
        }
        for (c, who) in senders {
            assert!(who.len() <= 1, "{c} sent by {who:?}");
        }
    }
}

fn run_ops(ops: Vec<Op>) {
    let mut w = World::new();
    let k = w.store.keys.clone();
    for op in ops {
        match op {
            Op::Kill(i) => {
                // Keep one member alive so the pool has a leader.
                if w.sims.iter().filter(|s| s.alive).count() > 1 {
                    w.kill(i)
                }
            }
            Op::Revive(i) => w.revive(i),
            Op::Drain(i) => {
                let n = w.sims[i].name.clone();
                let d = encode(&DrainRecord {
                    requested_ms: w.now,
                });
                w.store.put(k.drain(&n), d, 0);
            }
            Op::Undrain(i) => {
                let n = w.sims[i].name.clone();
                w.store.delete(&k.drain(&n));
            }
            Op::Add(i) => {
                let c = conn(i);
                w.store.put(k.connection(c.id()), encode(&c), 0);
            }
            Op::Delete(i) => w.store.delete(&k.connection(&format!("c{i}"))),
            Op::Steps(n) => {
                for _ in 0..n {
                    w.step();
                }
            }
        }
        w.step();
    }
    // Quiet: everyone alive, no drains, a while to settle.
    for i in 0..4 {
        w.revive(i);
        let n = w.sims[i].name.clone();
        w.store.delete(&k.drain(&n));
    }
    for _ in 0..40 {
        w.step();
    }
    let conns: BTreeSet<String> = w
        .store
        .kvs
        .keys()
        .filter_map(|key| key.strip_prefix(&k.connections()).map(str::to_owned))
        .collect();
    let mut served: BTreeMap<String, usize> = BTreeMap::new();
    for s in &w.sims {
        for (c, sending) in &s.gw.conns {
            if *sending {
                *served.entry(c.clone()).or_default() += 1;
            }
        }
    }
    for c in &conns {
        assert_eq!(served.get(c), Some(&1), "{c} not served once: {served:?}");
    }
    assert!(
        served.keys().all(|c| conns.contains(c)),
        "a deleted connection still served"
    );
}

#[test]
fn twelve_connections_kill_and_drain() {
    let mut ops: Vec<Op> = (0..12).map(Op::Add).collect();
    ops.push(Op::Steps(10));
    ops.push(Op::Kill(1));
    ops.push(Op::Steps(10));
    ops.push(Op::Drain(2));
    ops.push(Op::Steps(20));
    ops.push(Op::Revive(1));
    ops.push(Op::Kill(0));
    ops.push(Op::Steps(20));
    run_ops(ops);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_histories_keep_one_sender(ops in proptest::collection::vec(op(), 1..40)) {
        run_ops(ops);
    }
}
