//! The leader's decisions, sans I/O: from the [`View`] and the time to
//! the [`Write`]s that place connections. The driver runs each write as
//! an etcd transaction that compares the leader's election key's create
//! revision with the epoch, so a deposed leader's writes fail, and tells
//! [`Leader::written`] how it went.
//!
//! What it does, in order, each step:
//! 1. forgets the placement, state and status of deleted connections;
//! 2. ends handovers: a target that is serving completes it (the
//!    placement names it); when one side died mid-way, the other takes
//!    the connection as a failover from it (resuming past whatever the
//!    dead one may have sent);
//! 3. places what must move ([`placement::decide`]): failovers at once,
//!    new connections, drains as make-before-break handovers (a bounded
//!    number at a time);
//! 4. applies an operator's rebalance, one handover every
//!    `interval_ms`, at most `max_moves`, then deletes the request;
//!
//! The audit log keeps [`AUDIT_KEPT`](crate::view::AUDIT_KEPT) entries: the write of entry `n`
//! deletes entry `n - AUDIT_KEPT`.

use crate::placement::{self, Refusal};
use crate::records::{AuditRecord, Handover, Phase, PlacementRecord, Reason};
use crate::view::View;
use std::collections::BTreeMap;

/// Handovers (drain, rebalance) in progress at once.
pub const MAX_HANDOVERS: usize = 4;

/// A write for the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// Leader: put `place/<conn>` if its mod revision is still
    /// `expect_rev` (0: absent), with its audit entry.
    Place {
        conn: String,
        expect_rev: i64,
        record: PlacementRecord,
        audit: Option<AuditRecord>,
    },
    /// Leader: delete `place/`, `state/` and `status/` of a connection
    /// that is gone.
    Forget { conn: String },
    /// Leader: delete the rebalance request if still at `rev`.
    EndRebalance { rev: i64 },
    /// Owner: put `status/<conn>` (and `state/<conn>` when given) if the
    /// placement is still at `guard_rev` and our member key still holds
    /// our lease.
    Owner {
        conn: String,
        guard_rev: i64,
        state: Option<Vec<u8>>,
        status: crate::records::StatusRecord,
    },
}

impl Write {
    /// The connection a write is about (writes without one: `None`).
    pub fn conn(&self) -> Option<&str> {
        match self {
            Write::Place { conn, .. } | Write::Forget { conn } | Write::Owner { conn, .. } => {
                Some(conn)
            }
            Write::EndRebalance { .. } => None,
        }
    }
}

/// The leader side of one member.
#[derive(Debug)]
pub struct Leader {
    me: String,
    /// Our election key, once our campaign won.
    key: Option<String>,
    epoch: i64,
    next_audit: u64,
    /// Writes sent and not yet seen: connection to the placement mod
    /// revision they were based on.
    inflight: BTreeMap<String, i64>,
    other_inflight: bool,
    last_rebalance_ms: u64,
    rebalance_moves: u32,
    /// What could not be placed on the last step, and why.
    pub refused: Vec<(String, Refusal)>,
}

impl Leader {
    pub fn new(me: &str) -> Leader {
        Leader {
            me: me.to_owned(),
            key: None,
            epoch: 0,
            next_audit: 1,
            inflight: BTreeMap::new(),
            other_inflight: false,
            last_rebalance_ms: 0,
            rebalance_moves: 0,
            refused: Vec::new(),
        }
    }

    /// Our campaign won with election key `key` (its create revision is
    /// the epoch, read from the view).
    pub fn elected(&mut self, key: String) {
        self.key = Some(key);
        self.inflight.clear();
        self.other_inflight = false;
        self.epoch = 0;
    }

    /// Our election key is gone or another leads: stop.
    pub fn deposed(&mut self) {
        self.key = None;
        self.epoch = 0;
        self.inflight.clear();
        self.other_inflight = false;
    }

    /// The epoch we lead in (0: not leading).
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    /// Our election key while we lead.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// One of our writes came back (`ok`: the transaction succeeded).
    pub fn written(&mut self, w: &Write, ok: bool) {
        match w {
            Write::Place { conn, .. } | Write::Forget { conn } if !ok => {
                self.inflight.remove(conn);
            }
            Write::EndRebalance { .. } => self.other_inflight = false,
            _ => {}
        }
    }

    /// Whether the view says we lead, with our key; sets the epoch.
    fn leading(&mut self, view: &View) -> bool {
        let (Some(key), Some(l)) = (&self.key, view.leader()) else {
            return false;
        };
        if &l.key != key || l.member != self.me {
            return false;
        }
        if self.epoch != l.epoch {
            self.epoch = l.epoch;
            let seen = view
                .audits
                .keys()
                .copied()
                .chain(view.placements.values().map(|p| p.value.audit))
                .max()
                .unwrap_or(0);
            self.next_audit = self.next_audit.max(seen + 1);
        }
        true
    }

    fn audit(
        &mut self,
        conn: &str,
        from: Option<&str>,
        to: &str,
        r: Reason,
        detect_ms: u64,
        now_ms: u64,
    ) -> AuditRecord {
        let seq = self.next_audit;
        self.next_audit += 1;
        AuditRecord {
            seq,
            connection: conn.to_owned(),
            from: from.map(str::to_owned),
            to: to.to_owned(),
            reason: r,
            epoch: self.epoch,
            detect_ms,
            decide_ms: now_ms,
        }
    }

    /// Drops in-flight marks the view has moved past.
    fn settle(&mut self, view: &View) {
        self.inflight.retain(|c, base| {
            let now = view.placements.get(c).map_or(0, |p| p.mod_rev);
            now == *base && (view.conns.contains_key(c) || view.placements.contains_key(c))
        });
    }

    fn place(
        &mut self,
        view: &View,
        conn: &str,
        record: PlacementRecord,
        audit: Option<AuditRecord>,
        out: &mut Vec<Write>,
    ) {
        let expect_rev = view.placements.get(conn).map_or(0, |p| p.mod_rev);
        self.inflight.insert(conn.to_owned(), expect_rev);
        out.push(Write::Place {
            conn: conn.to_owned(),
            expect_rev,
            record,
            audit,
        });
    }

    /// The writes to make now (none unless we lead).
    pub fn step(&mut self, view: &View, now_ms: u64) -> Vec<Write> {
        let mut out = Vec::new();
        if !self.leading(view) {
            return out;
        }
        self.settle(view);
        // 1. Deleted connections.
        for c in view.placements.keys() {
            if !view.conns.contains_key(c) && !self.inflight.contains_key(c) {
                self.inflight.insert(c.clone(), view.placements[c].mod_rev);
                out.push(Write::Forget { conn: c.clone() });
            }
        }
        // 2. Handovers in progress.
        let mut handovers = 0;
        for (c, p) in &view.placements {
            let Some(h) = &p.value.handover else {
                continue;
            };
            if self.inflight.contains_key(c) || !view.conns.contains_key(c) {
                continue;
            }
            handovers += 1;
            let done = view.statuses.get(c).is_some_and(|s| {
                s.value.member == h.to
                    && s.value.phase == Phase::Serving
                    && s.value.placement_rev == p.mod_rev
            });
            if done {
                let rec = PlacementRecord {
                    member: h.to.clone(),
                    epoch: self.epoch,
                    reason: h.reason,
                    previous: Some(p.value.member.clone()),
                    previous_lease: None,
                    handover: None,
                    audit: h.audit,
                };
                self.place(view, c, rec, None, &mut out);
            } else {
                let from = &p.value.member;
                let (from_alive, to_alive) = (
                    view.members.contains_key(from),
                    view.members.contains_key(&h.to),
                );
                // One side died mid-way: the other takes it as a failover
                // from the dead one (it may have sent: the floor rule).
                // Both dead: `decide` fails it over below.
                let (owner, dead) = match (from_alive, to_alive) {
                    (true, false) => (from.clone(), h.to.clone()),
                    (false, true) => (h.to.clone(), from.clone()),
                    _ => continue,
                };
                let gone = view.departed.get(&dead).copied();
                let detect = gone.map_or(now_ms, |d| d.at_ms);
                let a = self.audit(c, Some(&dead), &owner, Reason::Failover, detect, now_ms);
                let rec = PlacementRecord {
                    member: owner,
                    epoch: self.epoch,
                    reason: Reason::Failover,
                    previous: Some(dead),
                    previous_lease: gone.map(|d| d.lease),
                    handover: None,
                    audit: a.seq,
                };
                self.place(view, c, rec, Some(a), &mut out);
            }
        }
        // 3. What must move.
        let members = view.placement_members();
        let conns = view.placement_conns();
        let placed = view.placed();
        let (decisions, refused) = placement::decide(&members, &conns, &placed);
        self.refused = refused;
        for d in decisions {
            if self.inflight.contains_key(&d.conn) {
                continue;
            }
            if view
                .placements
                .get(&d.conn)
                .is_some_and(|p| p.value.handover.is_some())
            {
                continue;
            }
            match d.reason {
                Reason::Drain | Reason::Rebalance => {
                    if handovers >= MAX_HANDOVERS {
                        continue;
                    }
                    handovers += 1;
                    let from = d.from.clone().unwrap_or_default();
                    let a = self.audit(&d.conn, d.from.as_deref(), &d.to, d.reason, now_ms, now_ms);
                    let rec = PlacementRecord {
                        member: from,
                        epoch: self.epoch,
                        reason: d.reason,
                        previous: None,
                        previous_lease: None,
                        handover: Some(Handover {
                            to: d.to.clone(),
                            reason: d.reason,
                            audit: a.seq,
                        }),
                        audit: view.placements.get(&d.conn).map_or(0, |p| p.value.audit),
                    };
                    self.place(view, &d.conn, rec, Some(a), &mut out);
                }
                Reason::New | Reason::Failover => {
                    let gone = d.from.as_ref().and_then(|f| view.departed.get(f).copied());
                    let detect = gone.map_or(now_ms, |g| g.at_ms);
                    let a = self.audit(&d.conn, d.from.as_deref(), &d.to, d.reason, detect, now_ms);
                    let rec = PlacementRecord {
                        member: d.to.clone(),
                        epoch: self.epoch,
                        reason: d.reason,
                        previous: d.from.clone(),
                        previous_lease: gone.map(|g| g.lease),
                        handover: None,
                        audit: a.seq,
                    };
                    self.place(view, &d.conn, rec, Some(a), &mut out);
                }
            }
        }
        // 4. An operator's rebalance.
        if let Some(r) = &view.rebalance {
            if !self.other_inflight && handovers == 0 && self.inflight.is_empty() {
                let due = now_ms.saturating_sub(self.last_rebalance_ms) >= r.value.interval_ms;
                if due {
                    let plan = if self.rebalance_moves < r.value.max_moves {
                        placement::rebalance(&members, &conns, &placed, 1)
                    } else {
                        Vec::new()
                    };
                    match plan.into_iter().next() {
                        Some(d) => {
                            self.rebalance_moves += 1;
                            self.last_rebalance_ms = now_ms;
                            let a = self.audit(
                                &d.conn,
                                d.from.as_deref(),
                                &d.to,
                                d.reason,
                                r.value.requested_ms,
                                now_ms,
                            );
                            let rec = PlacementRecord {
                                member: d.from.clone().unwrap_or_default(),
                                epoch: self.epoch,
                                reason: Reason::Rebalance,
                                previous: None,
                                previous_lease: None,
                                handover: Some(Handover {
                                    to: d.to.clone(),
                                    reason: Reason::Rebalance,
                                    audit: a.seq,
                                }),
                                audit: view.placements.get(&d.conn).map_or(0, |p| p.value.audit),
                            };
                            self.place(view, &d.conn, rec, Some(a), &mut out);
                        }
                        None => {
                            self.rebalance_moves = 0;
                            self.other_inflight = true;
                            out.push(Write::EndRebalance { rev: r.mod_rev });
                        }
                    }
                }
            }
        } else {
            self.rebalance_moves = 0;
        }
        out
    }
}
