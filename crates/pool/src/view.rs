//! A member's mirror of the pool's keys, fed by one listing and then the
//! watch's events in revision order. The leader and owner logic read it
//! and decide from what it holds now (level-triggered): a lost event is
//! repaired by the next listing, not by a replay.
//!
//! Values are outside input: a record that does not decode is dropped
//! and counted ([`View::bad`]), never half-believed.

use crate::connection::Connection;
use crate::keys::{Keys, PoolKey};
use crate::placement;
use crate::records::{
    decode, AuditRecord, DrainRecord, MemberRecord, PlacementRecord, RebalanceRecord, StatusRecord,
    MAX_RECORD,
};
use crate::seal::MAX_BLOB;
use std::collections::BTreeMap;

/// Audit entries kept in the view (the newest).
pub const AUDIT_KEPT: usize = 1000;

/// One key-value change from etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kv {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        create_rev: i64,
        mod_rev: i64,
        lease: i64,
    },
    Delete {
        key: Vec<u8>,
        mod_rev: i64,
    },
}

/// A value with its etcd metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry<T> {
    pub value: T,
    pub create_rev: i64,
    pub mod_rev: i64,
    pub lease: i64,
}

/// The pool as one member sees it.
#[derive(Clone, Debug, Default)]
pub struct View {
    /// The revision the view is at.
    pub rev: i64,
    pub members: BTreeMap<String, Entry<MemberRecord>>,
    /// Election keys by create revision: the lowest is the leader, its
    /// create revision the epoch; the value names the member.
    pub candidates: BTreeMap<i64, (String, String)>,
    pub conns: BTreeMap<String, Entry<Connection>>,
    pub placements: BTreeMap<String, Entry<PlacementRecord>>,
    /// Sealed blobs.
    pub states: BTreeMap<String, Entry<Vec<u8>>>,
    pub statuses: BTreeMap<String, Entry<StatusRecord>>,
    pub drains: BTreeMap<String, Entry<DrainRecord>>,
    pub audits: BTreeMap<u64, AuditRecord>,
    pub rebalance: Option<Entry<RebalanceRecord>>,
    pub keycheck: Option<Vec<u8>>,
    /// Members whose key was deleted while we watched: our wall clock
    /// then (ms, the failover timeline's "detect") and the lease it held.
    pub departed: BTreeMap<String, Departed>,
    /// Values that did not decode.
    pub bad: u64,
}

/// A member whose key went away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Departed {
    pub at_ms: u64,
    pub lease: i64,
}

/// The leader as the election keys say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    pub member: String,
    pub key: String,
    pub epoch: i64,
}

impl View {
    /// Replaces everything with a listing at `rev`.
    pub fn reset(&mut self, keys: &Keys, rev: i64, kvs: Vec<Kv>) {
        let departed = std::mem::take(&mut self.departed);
        let bad = self.bad;
        *self = View {
            departed,
            bad,
            ..View::default()
        };
        for kv in kvs {
            self.apply(keys, kv, 0);
        }
        self.rev = rev;
    }

    /// Applies one event; `now_ms` stamps a member's departure.
    pub fn apply(&mut self, keys: &Keys, kv: Kv, now_ms: u64) {
        match kv {
            Kv::Put {
                key,
                value,
                create_rev,
                mod_rev,
                lease,
            } => {
                self.rev = self.rev.max(mod_rev);
                let Some(k) = keys.parse(&key) else {
                    return;
                };
                fn entry<T>(value: T, create_rev: i64, mod_rev: i64, lease: i64) -> Entry<T> {
                    Entry {
                        value,
                        create_rev,
                        mod_rev,
                        lease,
                    }
                }
                macro_rules! record {
                    ($map:expr, $name:expr) => {
                        match decode(&value) {
                            Ok(v) => {
                                $map.insert($name.to_owned(), entry(v, create_rev, mod_rev, lease));
                            }
                            Err(_) => {
                                self.bad += 1;
                                $map.remove($name);
                            }
                        }
                    };
                }
                match k {
                    PoolKey::Member(n) => match decode::<MemberRecord>(&value) {
                        Ok(v) if v.name == n => {
                            self.departed.remove(n);
                            self.members
                                .insert(n.to_owned(), entry(v, create_rev, mod_rev, lease));
                        }
                        _ => {
                            self.bad += 1;
                            self.members.remove(n);
                        }
                    },
                    PoolKey::Leader(_) => {
                        let key = String::from_utf8_lossy(&key).into_owned();
                        let member = String::from_utf8_lossy(&value[..value.len().min(MAX_RECORD)])
                            .into_owned();
                        self.candidates.retain(|_, (k, _)| *k != key);
                        self.candidates.insert(create_rev, (key, member));
                    }
                    PoolKey::Connection(n) => match decode::<Connection>(&value) {
                        Ok(c) if c.id() == n => {
                            self.conns
                                .insert(n.to_owned(), entry(c, create_rev, mod_rev, lease));
                        }
                        _ => {
                            self.bad += 1;
                            self.conns.remove(n);
                        }
                    },
                    PoolKey::Placement(n) => record!(self.placements, n),
                    PoolKey::State(n) => {
                        if value.len() <= MAX_BLOB {
                            self.states
                                .insert(n.to_owned(), entry(value, create_rev, mod_rev, lease));
                        } else {
                            self.bad += 1;
                            self.states.remove(n);
                        }
                    }
                    PoolKey::Status(n) => record!(self.statuses, n),
                    PoolKey::Drain(n) => record!(self.drains, n),
                    PoolKey::Audit(seq) => match decode::<AuditRecord>(&value) {
                        Ok(a) if a.seq == seq => {
                            self.audits.insert(seq, a);
                            while self.audits.len() > AUDIT_KEPT {
                                self.audits.pop_first();
                            }
                        }
                        _ => self.bad += 1,
                    },
                    PoolKey::Rebalance => match decode(&value) {
                        Ok(v) => self.rebalance = Some(entry(v, create_rev, mod_rev, lease)),
                        Err(_) => {
                            self.bad += 1;
                            self.rebalance = None;
                        }
                    },
                    PoolKey::KeyCheck => self.keycheck = Some(value),
                }
            }
            Kv::Delete { key, mod_rev } => {
                self.rev = self.rev.max(mod_rev);
                let Some(k) = keys.parse(&key) else {
                    return;
                };
                match k {
                    PoolKey::Member(n) => {
                        if let Some(e) = self.members.remove(n) {
                            let d = Departed {
                                at_ms: now_ms,
                                lease: e.lease,
                            };
                            self.departed.insert(n.to_owned(), d);
                        }
                    }
                    PoolKey::Leader(_) => {
                        let key = String::from_utf8_lossy(&key).into_owned();
                        self.candidates.retain(|_, (k, _)| *k != key);
                    }
                    PoolKey::Connection(n) => {
                        self.conns.remove(n);
                    }
                    PoolKey::Placement(n) => {
                        self.placements.remove(n);
                    }
                    PoolKey::State(n) => {
                        self.states.remove(n);
                    }
                    PoolKey::Status(n) => {
                        self.statuses.remove(n);
                    }
                    PoolKey::Drain(n) => {
                        self.drains.remove(n);
                    }
                    PoolKey::Audit(seq) => {
                        self.audits.remove(&seq);
                    }
                    PoolKey::Rebalance => self.rebalance = None,
                    PoolKey::KeyCheck => self.keycheck = None,
                }
            }
        }
    }

    /// The leader: the candidate with the lowest create revision.
    pub fn leader(&self) -> Option<Leader> {
        self.candidates.iter().next().map(|(rev, (k, m))| Leader {
            member: m.clone(),
            key: k.clone(),
            epoch: *rev,
        })
    }

    /// The members as placement sees them.
    pub fn placement_members(&self) -> Vec<placement::Member> {
        self.members
            .values()
            .map(|e| {
                let draining = self.drains.contains_key(&e.value.name);
                placement::Member {
                    name: e.value.name.clone(),
                    capacity: e.value.capacity,
                    accepting: e.value.health.ok && !draining,
                    draining,
                }
            })
            .collect()
    }

    /// The connections as placement sees them.
    pub fn placement_conns(&self) -> Vec<placement::Conn> {
        self.conns
            .values()
            .map(|e| placement::Conn {
                id: e.value.id().to_owned(),
                tenant: e.value.tenant().to_owned(),
                demand: e.value.demand(),
            })
            .collect()
    }

    /// Connection id to owner, for placement. A connection in a handover
    /// counts on its target (where it is going) while both sides live.
    pub fn placed(&self) -> BTreeMap<String, String> {
        self.placements
            .iter()
            .filter(|(id, _)| self.conns.contains_key(*id))
            .map(|(id, e)| {
                let m = match &e.value.handover {
                    Some(h)
                        if self.members.contains_key(&h.to)
                            && self.members.contains_key(&e.value.member) =>
                    {
                        h.to.clone()
                    }
                    _ => e.value.member.clone(),
                };
                (id.clone(), m)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{encode, Capacity, Health, Reason};

    fn put(key: String, value: Vec<u8>, rev: i64) -> Kv {
        Kv::Put {
            key: key.into_bytes(),
            value,
            create_rev: rev,
            mod_rev: rev,
            lease: 0,
        }
    }

    fn member(n: &str) -> Vec<u8> {
        encode(&MemberRecord {
            name: n.into(),
            lease: 1,
            capacity: Capacity::default(),
            addresses: vec![],
            api: None,
            health: Health {
                ok: true,
                reason: None,
            },
            started_ms: 0,
        })
    }

    #[test]
    fn members_leaders_and_departures() {
        let k = Keys::new("p");
        let mut v = View::default();
        v.apply(&k, put(k.member("a"), member("a"), 5), 0);
        v.apply(&k, put(k.member("b"), member("b"), 6), 0);
        // A record naming another member than its key: refused.
        v.apply(&k, put(k.member("c"), member("a"), 7), 0);
        assert_eq!(v.members.len(), 2);
        assert_eq!(v.bad, 1);
        v.apply(&k, put(format!("{}/2", k.election()), b"b".to_vec(), 9), 0);
        v.apply(&k, put(format!("{}/1", k.election()), b"a".to_vec(), 8), 0);
        let l = v.leader().unwrap();
        assert_eq!((l.member.as_str(), l.epoch), ("a", 8));
        v.apply(
            &k,
            Kv::Delete {
                key: format!("{}/1", k.election()).into_bytes(),
                mod_rev: 10,
            },
            0,
        );
        assert_eq!(v.leader().unwrap().member, "b");
        v.apply(
            &k,
            Kv::Delete {
                key: k.member("a").into_bytes(),
                mod_rev: 11,
            },
            12345,
        );
        assert_eq!(v.departed.get("a").map(|d| d.at_ms), Some(12345));
        assert_eq!(v.rev, 11);
        // A listing keeps what departed while we watched.
        v.reset(&k, 20, vec![put(k.member("b"), member("b"), 6)]);
        assert_eq!(v.rev, 20);
        assert_eq!(v.departed.get("a").map(|d| d.at_ms), Some(12345));
        assert!(v.leader().is_none());
    }

    #[test]
    fn garbage_is_counted_not_believed() {
        let k = Keys::new("p");
        let mut v = View::default();
        let p = PlacementRecord {
            member: "a".into(),
            epoch: 1,
            reason: Reason::New,
            previous: None,
            previous_lease: None,
            handover: None,
            audit: 1,
        };
        v.apply(&k, put(k.placement("c"), encode(&p), 3), 0);
        assert!(v.placements.contains_key("c"));
        v.apply(&k, put(k.placement("c"), b"{nope".to_vec(), 4), 0);
        assert!(
            !v.placements.contains_key("c"),
            "a bad value removes the old"
        );
        v.apply(&k, put(k.audit(3), b"{}".to_vec(), 5), 0);
        v.apply(&k, put("/elsewhere".into(), b"x".to_vec(), 6), 0);
        assert_eq!(v.bad, 2);
        assert_eq!(v.rev, 6);
    }
}
