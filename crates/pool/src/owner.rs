//! The owner side of one member, sans I/O: from the [`View`], the fence
//! and the results of what it asked for, to [`Action`]s for the gateway
//! (program a connection, stop sending on it, remove it) and the
//! [`Write`]s that report its actual state back.
//!
//! Per connection, the placement says what this member is to it:
//! - **owner** (`member` is us, no handover): programs it and serves it.
//!   After a failover (`previous` set, reason failover) it first waits
//!   until the previous owner's member key is gone from the view (its
//!   lease expired: the old owner fenced itself before that), then
//!   resumes the SAs past the sealed state's ceilings ([`Mode::Floor`]);
//! - **handing over** (`member` is us, `handover.to` another): stops
//!   sending, writes the exact state and a `released` status in one
//!   transaction ([`Owner::released`]), keeps receiving until the
//!   placement names the target;
//! - **receiving** (`handover.to` is us): once the old owner's released
//!   status is for this very placement revision, programs the connection
//!   from the exact state ([`Mode::Exact`]) and serves: make-before-break;
//! - **nothing**: removes whatever it still has of it.
//!
//! A member that is not serving (fenced, or not yet registered) removes
//! everything and acts on nothing.

use crate::connection::Connection;
use crate::leader::Write;
use crate::records::{Phase, Reason, StatusRecord};
use crate::view::View;
use std::collections::BTreeMap;

/// How to program a connection's SAs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No sealed state: a fresh start (IKE negotiates, static SAs resume
    /// from the member's own store).
    Fresh,
    /// The sealed state is exact (a handover): resume where it stands.
    Exact,
    /// The sealed state may be behind (a failover): outbound SAs jump
    /// past it ([`crate::snapshot::resume_out`]).
    Floor,
}

/// What the gateway must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Program the connection through the live-change path and serve it
    /// (take its local address, send); report with [`Owner::applied`].
    Apply {
        conn: String,
        connection: Box<Connection>,
        placement_rev: i64,
        mode: Mode,
        /// The sealed state to open (none for [`Mode::Fresh`]).
        blob: Option<Vec<u8>>,
        audit: u64,
    },
    /// The connection's desired state changed while we run it: replace
    /// it through the same path (SAs kept); report with
    /// [`Owner::applied`].
    Update {
        conn: String,
        connection: Box<Connection>,
        placement_rev: i64,
    },
    /// Stop sending on it (ESP and IKE), keep receiving, and seal its
    /// exact state; report with [`Owner::released`].
    Release { conn: String, placement_rev: i64 },
    /// Remove it: tunnel, routes, address.
    Remove { conn: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Local {
    Applying,
    Serving,
    Releasing,
    Released,
    Failed,
}

#[derive(Clone, Debug)]
struct Held {
    state: Local,
    placement_rev: i64,
    conn_rev: i64,
    audit: u64,
    program_ms: Option<u64>,
    first_packet_ms: Option<u64>,
    spis: Vec<String>,
    error: Option<String>,
}

/// The owner side.
#[derive(Debug)]
pub struct Owner {
    me: String,
    held: BTreeMap<String, Held>,
}

impl Owner {
    pub fn new(me: &str) -> Owner {
        Owner {
            me: me.to_owned(),
            held: BTreeMap::new(),
        }
    }

    /// The connections this member holds in any state.
    pub fn held(&self) -> impl Iterator<Item = &str> {
        self.held.keys().map(String::as_str)
    }

    /// Whether it is serving `conn`.
    pub fn serving(&self, conn: &str) -> bool {
        self.held
            .get(conn)
            .is_some_and(|h| h.state == Local::Serving)
    }

    fn status(&self, h: &Held, now_ms: u64) -> StatusRecord {
        StatusRecord {
            member: self.me.clone(),
            phase: match h.state {
                Local::Released | Local::Releasing => Phase::Released,
                Local::Failed => Phase::Failed,
                _ => Phase::Serving,
            },
            placement_rev: h.placement_rev,
            error: h.error.clone(),
            spis: h.spis.clone(),
            audit: Some(h.audit).filter(|a| *a != 0),
            program_ms: h.program_ms,
            first_packet_ms: h.first_packet_ms,
            updated_ms: now_ms,
        }
    }

    fn write(&self, conn: &str, h: &Held, state: Option<Vec<u8>>, now_ms: u64) -> Write {
        Write::Owner {
            conn: conn.to_owned(),
            guard_rev: h.placement_rev,
            state,
            status: self.status(h, now_ms),
        }
    }

    /// An [`Action::Apply`] or [`Action::Update`] finished: `Ok` with the
    /// SPIs it runs with, or why it failed. (The gateway carries actions
    /// out in order, so a result is for the last one of its connection.)
    pub fn applied(
        &mut self,
        conn: &str,
        result: Result<Vec<String>, String>,
        now_ms: u64,
    ) -> Option<Write> {
        let h = self.held.get_mut(conn)?;
        if h.state != Local::Applying {
            return None;
        }
        match result {
            Ok(spis) => {
                h.state = Local::Serving;
                h.spis = spis;
                h.error = None;
                h.program_ms.get_or_insert(now_ms);
            }
            Err(e) => {
                h.state = Local::Failed;
                h.error = Some(e);
            }
        }
        let h = self.held.get(conn)?;
        Some(self.write(conn, h, None, now_ms))
    }

    /// The first packet after a move was forwarded.
    pub fn first_packet(&mut self, conn: &str, at_ms: u64) -> Option<Write> {
        let h = self.held.get_mut(conn)?;
        if h.first_packet_ms.is_some() || h.state != Local::Serving {
            return None;
        }
        h.first_packet_ms = Some(at_ms);
        let h = self.held.get(conn)?;
        Some(self.write(conn, h, None, at_ms))
    }

    /// An [`Action::Release`] finished: sending stopped, `blob` is the
    /// sealed exact state. The write carries both.
    pub fn released(
        &mut self,
        conn: &str,
        placement_rev: i64,
        blob: Vec<u8>,
        now_ms: u64,
    ) -> Option<Write> {
        let h = self.held.get_mut(conn)?;
        if h.placement_rev != placement_rev || h.state != Local::Releasing {
            return None;
        }
        h.state = Local::Released;
        let h = self.held.get(conn)?;
        Some(self.write(conn, h, Some(blob), now_ms))
    }

    /// The state write for a connection we serve (the gateway seals it
    /// when a block is reserved or an IKE SA changes): `None` when we do
    /// not serve it under a placement we know.
    pub fn state_write(&self, conn: &str, blob: Vec<u8>, now_ms: u64) -> Option<Write> {
        let h = self.held.get(conn)?;
        if h.state != Local::Serving {
            return None;
        }
        Some(self.write(conn, h, Some(blob), now_ms))
    }

    /// The placement revision we serve `conn` under (what a state write
    /// is guarded by and sealed with).
    pub fn placement_rev(&self, conn: &str) -> Option<i64> {
        self.held.get(conn).map(|h| h.placement_rev)
    }

    /// What to do now. `serving`: the fence lets us serve.
    pub fn step(&mut self, view: &View, serving: bool, now_ms: u64) -> (Vec<Action>, Vec<Write>) {
        let mut acts = Vec::new();
        let mut writes = Vec::new();
        if !serving {
            for c in std::mem::take(&mut self.held).into_keys() {
                acts.push(Action::Remove { conn: c });
            }
            return (acts, writes);
        }
        // What we hold that is no longer ours.
        let gone: Vec<String> = self
            .held
            .keys()
            .filter(|c| {
                let mine = view.placements.get(*c).is_some_and(|p| {
                    p.value.member == self.me
                        || p.value.handover.as_ref().is_some_and(|h| h.to == self.me)
                });
                !mine || !view.conns.contains_key(*c)
            })
            .cloned()
            .collect();
        for c in gone {
            self.held.remove(&c);
            acts.push(Action::Remove { conn: c });
        }
        for (c, p) in &view.placements {
            let Some(conn) = view.conns.get(c) else {
                continue;
            };
            let rec = &p.value;
            let receiving = rec.handover.as_ref().is_some_and(|h| h.to == self.me);
            if rec.member == self.me && rec.handover.is_some() {
                // Handing over.
                if let Some(h) = self.held.get_mut(c) {
                    if h.state == Local::Serving || h.state == Local::Failed {
                        h.state = Local::Releasing;
                        h.placement_rev = p.mod_rev;
                        acts.push(Action::Release {
                            conn: c.clone(),
                            placement_rev: p.mod_rev,
                        });
                    }
                }
                continue;
            }
            if receiving {
                if self.held.contains_key(c) {
                    continue;
                }
                let released = view.statuses.get(c).is_some_and(|s| {
                    s.value.member == rec.member
                        && s.value.phase == Phase::Released
                        && s.value.placement_rev == p.mod_rev
                });
                let blob = view.states.get(c).map(|s| s.value.clone());
                if !released || blob.is_none() {
                    continue;
                }
                let audit = rec.handover.as_ref().map_or(0, |h| h.audit);
                self.hold(c, p.mod_rev, conn.mod_rev, audit);
                acts.push(Action::Apply {
                    conn: c.clone(),
                    connection: Box::new(conn.value.clone()),
                    placement_rev: p.mod_rev,
                    mode: Mode::Exact,
                    blob,
                    audit,
                });
                continue;
            }
            if rec.member != self.me {
                continue;
            }
            // Owner.
            match self.held.get_mut(c) {
                Some(h) if matches!(h.state, Local::Serving | Local::Applying | Local::Failed) => {
                    if h.placement_rev != p.mod_rev {
                        // Our own handover completed, or the leader
                        // rewrote the placement: same connection, new guard.
                        h.placement_rev = p.mod_rev;
                        h.audit = rec.audit;
                        if h.state != Local::Applying {
                            let h = h.clone();
                            writes.push(self.write(c, &h, None, now_ms));
                        }
                    } else if h.conn_rev != conn.mod_rev && h.state != Local::Applying {
                        h.conn_rev = conn.mod_rev;
                        h.state = Local::Applying;
                        acts.push(Action::Update {
                            conn: c.clone(),
                            connection: Box::new(conn.value.clone()),
                            placement_rev: p.mod_rev,
                        });
                    }
                }
                Some(h) if h.state == Local::Releasing => {}
                _ => {
                    // Not held, or released by a handover that fell back
                    // to us: program it afresh from the latest state.
                    if rec.reason == Reason::Failover && previous_lives(view, rec, p.mod_rev) {
                        continue;
                    }
                    let blob = view.states.get(c).map(|s| s.value.clone());
                    let mode = if blob.is_some() {
                        Mode::Floor
                    } else {
                        Mode::Fresh
                    };
                    if self.held.remove(c).is_some() {
                        acts.push(Action::Remove { conn: c.clone() });
                    }
                    self.hold(c, p.mod_rev, conn.mod_rev, rec.audit);
                    acts.push(Action::Apply {
                        conn: c.clone(),
                        connection: Box::new(conn.value.clone()),
                        placement_rev: p.mod_rev,
                        mode,
                        blob,
                        audit: rec.audit,
                    });
                }
            }
        }
        (acts, writes)
    }

    fn hold(&mut self, c: &str, placement_rev: i64, conn_rev: i64, audit: u64) {
        self.held.insert(
            c.to_owned(),
            Held {
                state: Local::Applying,
                placement_rev,
                conn_rev,
                audit,
                program_ms: None,
                first_packet_ms: None,
                spis: Vec::new(),
                error: None,
            },
        );
    }
}

/// Whether the previous owner of a failover still holds the lease it had
/// (its key, under that lease; with the lease unknown, a key older than
/// the placement). A member of that name back under a new lease is
/// another process: the old one's lease is gone.
fn previous_lives(view: &View, rec: &crate::records::PlacementRecord, placed_rev: i64) -> bool {
    let Some(prev) = &rec.previous else {
        return false;
    };
    view.members
        .get(prev)
        .is_some_and(|m| match rec.previous_lease {
            Some(l) => m.lease == l,
            None => m.create_rev < placed_rev,
        })
}
