//! One member's loop: register under a lease, mirror the pool (list,
//! then watch from the next revision; re-list after a compaction),
//! campaign for leadership, and feed the sans-I/O [`Leader`] and
//! [`Owner`] with what happens, carrying out their writes and passing
//! their actions to the gateway.
//!
//! Nothing here waits on etcd in the loop itself: writes go through a
//! writer task, keepalives and the fence through [`keepalive`], the
//! campaign through its own task. While the fence is closed but the
//! lease not known lost, the member holds what it has and acts on
//! nothing (the [`Gate`] stops its senders). A lost lease drops every
//! connection and registers again with a new lease; the connections
//! have moved, and placement is sticky.

use super::keepalive::{self, FenceState};
use super::{watch_events, Error, Etcd, Settings};
use crate::connection::Connection;
use crate::fence::Gate;
use crate::leader::{Leader, Write};
use crate::now_ms;
use crate::owner::{Action, Owner};
use crate::placement::{self, Decision};
use crate::records::{Health, MemberRecord, RebalanceRecord};
use crate::view::View;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{info, warn};
use vecgate_config::FieldError;

/// What the gateway tells the pool about what it was asked to do.
#[derive(Debug)]
pub enum Report {
    /// An [`Action::Apply`] or [`Action::Update`] finished.
    Applied {
        conn: String,
        result: Result<Vec<String>, String>,
    },
    /// An [`Action::Release`] finished: sending stopped, here is the
    /// exact state sealed.
    Released {
        conn: String,
        placement_rev: i64,
        blob: Vec<u8>,
    },
    /// Fresh sealed state of a connection it serves (a block reserved, an
    /// IKE SA changed).
    State { conn: String, blob: Vec<u8> },
    /// The first packet after a move was forwarded.
    FirstPacket { conn: String, at_ms: u64 },
}

/// Why an operator's request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// The connection is invalid: each problem names its field (400).
    Invalid(Vec<FieldError>),
    /// It does not fit the pool (409, with the reason).
    Refused(String),
    /// No such member or connection (404).
    Unknown(String),
    /// etcd is away or has no quorum (503).
    Unavailable(String),
    Other(String),
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandError::Invalid(e) => {
                let v: Vec<String> = e
                    .iter()
                    .map(|e| format!("{}: {}", e.field, e.message))
                    .collect();
                write!(f, "invalid connection: {}", v.join("; "))
            }
            CommandError::Refused(m) | CommandError::Unknown(m) | CommandError::Other(m) => {
                f.write_str(m)
            }
            CommandError::Unavailable(m) => write!(f, "pool unavailable: {m}"),
        }
    }
}

impl From<Error> for CommandError {
    fn from(e: Error) -> Self {
        if e.unavailable() {
            CommandError::Unavailable(e.to_string())
        } else if let Error::Conflict(m) = e {
            CommandError::Refused(m)
        } else {
            CommandError::Other(e.to_string())
        }
    }
}

type Reply<T> = oneshot::Sender<Result<T, CommandError>>;

/// An operator's request.
#[derive(Debug)]
pub enum Command {
    AddConnection(Box<Connection>, Reply<()>),
    DeleteConnection(String, Reply<()>),
    /// Drain a member (`true`) or end its drain.
    Drain(String, bool, Reply<()>),
    /// The rebalance plan; applied (at `interval_ms` between moves, at
    /// most `max_moves`) unless `dry_run`.
    Rebalance {
        dry_run: bool,
        max_moves: u32,
        interval_ms: u64,
        reply: Reply<Vec<Decision>>,
    },
}

/// What `pool show` reports.
#[derive(Clone, Debug, Default)]
pub struct Status {
    pub member: String,
    pub lease: i64,
    pub registered: bool,
    pub fence: FenceState,
    pub view: View,
    /// Our epoch while we lead.
    pub leading: i64,
    /// The last etcd error, while it lasts.
    pub etcd_error: Option<String>,
    /// Connections the leader could not place, and why (leader only).
    pub refused: Vec<(String, String)>,
    /// Owner writes waiting for etcd to come back.
    pub pending_writes: usize,
}

/// The channels a gateway uses to talk to its member loop.
pub struct Handles {
    pub commands: mpsc::Sender<Command>,
    pub reports: mpsc::Sender<Report>,
    pub status: watch::Receiver<Arc<Status>>,
    pub actions: mpsc::UnboundedReceiver<Action>,
    pub stop: watch::Sender<bool>,
    pub gate: Gate,
}

/// Checks a connection as this member's configuration would.
pub type Validator = Arc<dyn Fn(&Connection) -> Result<(), Vec<FieldError>> + Send + Sync>;

/// Connects, checks the pool key, and starts the member's loop on the
/// current tokio runtime. Start-up errors (etcd unreachable, wrong key)
/// come back here, before anything is registered.
pub async fn start(
    s: Settings,
    key: crate::seal::PoolKey,
    validate: Validator,
) -> Result<(Handles, tokio::task::JoinHandle<()>), Error> {
    let etcd = Etcd::connect(&s).await?;
    etcd.ensure_keycheck(&key).await?;
    let (cmd_tx, cmd_rx) = mpsc::channel(64);
    let (rep_tx, rep_rx) = mpsc::channel(1024);
    let (act_tx, act_rx) = mpsc::unbounded_channel();
    let (status_tx, status_rx) = watch::channel(Arc::new(Status::default()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let gate = Gate::new(Instant::now());
    let m = Member {
        etcd,
        s,
        validate,
        gate: gate.clone(),
        view: View::default(),
        actions: act_tx,
        status: status_tx,
        stop: stop_rx,
    };
    let task = tokio::spawn(m.run(cmd_rx, rep_rx));
    Ok((
        Handles {
            commands: cmd_tx,
            reports: rep_tx,
            status: status_rx,
            actions: act_rx,
            stop: stop_tx,
            gate,
        },
        task,
    ))
}

struct Member {
    etcd: Etcd,
    s: Settings,
    validate: Validator,
    gate: Gate,
    view: View,
    actions: mpsc::UnboundedSender<Action>,
    status: watch::Sender<Arc<Status>>,
    stop: watch::Receiver<bool>,
}

/// What the watcher task tells the loop.
enum Mirror {
    Listed(i64, Vec<crate::view::Kv>),
    Events(i64, Vec<crate::view::Kv>),
    Error(String),
}

/// A write for the writer task, with what guards it.
struct Job {
    write: Write,
    leader: Option<(String, i64)>,
    lease: i64,
}

/// One registration: a lease and what runs under it.
struct Term {
    lease: i64,
    fence: watch::Receiver<FenceState>,
    stop_ka: watch::Sender<bool>,
    campaign: Option<tokio::task::JoinHandle<()>>,
    elected: mpsc::Receiver<String>,
    elect_tx: mpsc::Sender<String>,
}

impl Member {
    fn record(&self, lease: i64) -> MemberRecord {
        MemberRecord {
            name: self.s.member.clone(),
            lease,
            capacity: self.s.capacity,
            addresses: self.s.addresses.clone(),
            api: self.s.api.clone(),
            health: Health {
                ok: true,
                reason: None,
            },
            started_ms: now_ms(),
        }
    }

    /// Grants a lease and registers under it, waiting for a previous
    /// registration of our name to go (a restart: its lease expires).
    async fn register(&self, previous: Option<i64>) -> Result<Term, Error> {
        let sent = Instant::now();
        let (lease, granted) = self.etcd.grant(self.s.ttl).await?;
        let (fence_tx, fence_rx) = watch::channel(FenceState::default());
        let (stop_ka, stop_rx) = watch::channel(false);
        tokio::spawn(keepalive::run(
            keepalive::Lease {
                etcd: self.etcd.clone(),
                id: lease,
                sent,
                granted,
                ttl: self.s.ttl,
            },
            self.gate.clone(),
            fence_tx,
            stop_rx,
        ));
        let rec = self.record(lease);
        loop {
            match self.etcd.register(&rec).await {
                Ok(None) => break,
                Ok(Some(holder)) => {
                    if Some(holder) == previous {
                        let _ = self.etcd.revoke(holder).await;
                    } else {
                        info!(member = %self.s.member, "pool: our name is still registered (a previous run's lease); waiting for it to expire");
                    }
                }
                Err(e) => {
                    let _ = stop_ka.send(true);
                    return Err(e);
                }
            }
            if fence_rx.borrow().lost {
                let _ = stop_ka.send(true);
                return Err(Error::Other("lease lost while registering".into()));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let (elect_tx, elected) = mpsc::channel(4);
        Ok(Term {
            lease,
            fence: fence_rx,
            stop_ka,
            campaign: None,
            elected,
            elect_tx,
        })
    }

    fn campaign(&self, t: &mut Term) {
        if let Some(h) = t.campaign.take() {
            h.abort();
        }
        let mut c = self.etcd.client();
        let name = self.etcd.keys.election();
        let me = self.s.member.clone();
        let lease = t.lease;
        let tx = t.elect_tx.clone();
        t.campaign = Some(tokio::spawn(async move {
            loop {
                match c.campaign(name.clone(), me.clone(), lease).await {
                    Ok(r) => {
                        if let Some(k) = r.leader() {
                            let key = String::from_utf8_lossy(k.key()).into_owned();
                            let _ = tx.send(key).await;
                            return;
                        }
                    }
                    Err(e) => warn!(error = %e, "pool: campaign failed; retrying"),
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }));
    }

    /// Mirrors the pool into `tx`: a listing, then the watch's events
    /// from the next revision; again after a compaction or a broken
    /// stream. Runs as a task so the loop never waits on it.
    fn watcher(&self, tx: mpsc::UnboundedSender<Mirror>) -> tokio::task::JoinHandle<()> {
        let etcd = self.etcd.clone();
        tokio::spawn(async move {
            loop {
                let listed = match etcd.list().await {
                    Ok(l) => l,
                    Err(e) => {
                        if tx.send(Mirror::Error(e.to_string())).is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(250)).await;
                        continue;
                    }
                };
                let rev = listed.0;
                if tx.send(Mirror::Listed(listed.0, listed.1)).is_err() {
                    return;
                }
                let mut w = match etcd.watch(rev + 1).await {
                    Ok(w) => w,
                    Err(e) => {
                        let _ = tx.send(Mirror::Error(e.to_string()));
                        tokio::time::sleep(Duration::from_millis(250)).await;
                        continue;
                    }
                };
                loop {
                    match w.message().await {
                        Ok(Some(r)) => match watch_events(&r) {
                            Ok(evs) => {
                                let rev = r.header().map_or(0, |h| h.revision());
                                if tx.send(Mirror::Events(rev, evs)).is_err() {
                                    return;
                                }
                            }
                            Err(compacted) => {
                                warn!(compacted, "pool: watch compacted; listing again");
                                break;
                            }
                        },
                        Ok(None) => break,
                        Err(e) => {
                            let _ = tx.send(Mirror::Error(e.to_string()));
                            break;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }

    fn publish(&self, t: Option<&Term>, leader: &Leader, err: &Option<String>, pending: usize) {
        let st = Status {
            member: self.s.member.clone(),
            lease: t.map_or(0, |t| t.lease),
            registered: t.is_some(),
            fence: t.map(|t| *t.fence.borrow()).unwrap_or_default(),
            view: self.view.clone(),
            leading: leader.epoch(),
            etcd_error: err.clone(),
            refused: leader
                .refused
                .iter()
                .map(|(c, r)| (c.clone(), r.to_string()))
                .collect(),
            pending_writes: pending,
        };
        self.status.send_replace(Arc::new(st));
    }

    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        mut reports: mpsc::Receiver<Report>,
    ) {
        let (job_tx, mut job_rx) = mpsc::unbounded_channel::<Job>();
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(Write, Result<bool, Error>)>();
        let writer = {
            let etcd = self.etcd.clone();
            let me = self.s.member.clone();
            tokio::spawn(async move {
                while let Some(j) = job_rx.recv().await {
                    let l = j.leader.as_ref().map(|(k, e)| (k.as_str(), *e));
                    let r = etcd.run(&j.write, l, &me, j.lease).await;
                    if done_tx.send((j.write, r)).is_err() {
                        return;
                    }
                }
            })
        };
        let mut leader = Leader::new(&self.s.member);
        let mut owner = Owner::new(&self.s.member);
        // Owner writes that failed because etcd was away: the latest per
        // connection, written back when it returns.
        let mut pending: BTreeMap<String, Write> = BTreeMap::new();
        let mut previous = None;
        let mut err: Option<String> = None;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let (mirror_tx, mut mirror) = mpsc::unbounded_channel();
        let watcher = self.watcher(mirror_tx);
        'term: loop {
            if *self.stop.borrow() {
                break;
            }
            let mut term = match self.register(previous).await {
                Ok(t) => t,
                Err(e) => {
                    err = Some(e.to_string());
                    self.publish(None, &leader, &err, pending.len());
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            previous = Some(term.lease);
            info!(member = %self.s.member, lease = format_args!("{:x}", term.lease), "pool: registered");
            self.campaign(&mut term);
            loop {
                tokio::select! {
                    _ = self.stop.changed() => {
                        for c in owner.held().map(str::to_owned).collect::<Vec<_>>() {
                            let _ = self.actions.send(Action::Remove { conn: c });
                        }
                        self.gate.set(None);
                        let _ = term.stop_ka.send(true);
                        if let Some(h) = term.campaign.take() { h.abort(); }
                        let _ = self.etcd.revoke(term.lease).await;
                        break 'term;
                    }
                    Some(m) = mirror.recv() => match m {
                        Mirror::Listed(rev, kvs) => {
                            self.view.reset(&self.etcd.keys, rev, kvs);
                            err = None;
                        }
                        Mirror::Events(rev, evs) => {
                            let now = now_ms();
                            for e in evs { self.view.apply(&self.etcd.keys, e, now); }
                            self.view.rev = self.view.rev.max(rev);
                            err = None;
                        }
                        Mirror::Error(e) => err = Some(e),
                    },
                    Some(key) = term.elected.recv() => {
                        info!(member = %self.s.member, key = %key, "pool: elected leader");
                        leader.elected(key);
                    }
                    Some(rep) = reports.recv() => {
                        let now = now_ms();
                        let w = match rep {
                            Report::Applied { conn, result } => owner.applied(&conn, result, now),
                            Report::Released { conn, placement_rev, blob } => owner.released(&conn, placement_rev, blob, now),
                            Report::State { conn, blob } => owner.state_write(&conn, blob, now),
                            Report::FirstPacket { conn, at_ms } => owner.first_packet(&conn, at_ms),
                        };
                        if let Some(w) = w {
                            let _ = job_tx.send(Job { write: w, leader: None, lease: term.lease });
                        }
                    }
                    Some(cmd) = commands.recv() => self.command(cmd),
                    Some((w, r)) = done_rx.recv() => {
                        let owner_write = matches!(w, Write::Owner { .. });
                        match &r {
                            Err(e) if e.unavailable() && owner_write => {
                                if let Some(c) = w.conn() { pending.insert(c.to_owned(), w.clone()); }
                            }
                            Err(e) => warn!(error = %e, "pool: write failed"),
                            Ok(_) => {}
                        }
                        if let Err(e) = &r { err = Some(e.to_string()); }
                        if !owner_write { leader.written(&w, matches!(r, Ok(true))); }
                    }
                    _ = tick.tick() => {
                        if !pending.is_empty() && err.is_none() {
                            for (_, w) in std::mem::take(&mut pending) {
                                let _ = job_tx.send(Job { write: w, leader: None, lease: term.lease });
                            }
                        }
                    }
                }
                let fence = *term.fence.borrow();
                if fence.lost {
                    warn!(member = %self.s.member, "pool: lease lost: stopping every connection and registering again");
                    self.gate.set(None);
                    let (acts, _) = owner.step(&self.view, false, now_ms());
                    for a in acts {
                        let _ = self.actions.send(a);
                    }
                    leader.deposed();
                    if let Some(h) = term.campaign.take() {
                        h.abort();
                    }
                    let _ = term.stop_ka.send(true);
                    pending.clear();
                    self.publish(None, &leader, &err, 0);
                    continue 'term;
                }
                // Our election key gone (or never seen): campaign again.
                if let Some(k) = leader.key() {
                    let present = self.view.candidates.values().any(|(key, _)| key == k);
                    if !present && err.is_none() && self.view.rev > 0 {
                        leader.deposed();
                        self.campaign(&mut term);
                    }
                }
                let now = now_ms();
                let epoch_key = leader.key().map(str::to_owned);
                for w in leader.step(&self.view, now) {
                    let l = epoch_key.clone().map(|k| (k, leader.epoch()));
                    let _ = job_tx.send(Job {
                        write: w,
                        leader: l,
                        lease: term.lease,
                    });
                }
                if !fence.serving {
                    // Fenced, lease not known lost: hold, act on nothing.
                    self.publish(Some(&term), &leader, &err, pending.len());
                    continue;
                }
                let (acts, writes) = owner.step(&self.view, true, now);
                for a in acts {
                    let _ = self.actions.send(a);
                }
                for w in writes {
                    let _ = job_tx.send(Job {
                        write: w,
                        leader: None,
                        lease: term.lease,
                    });
                }
                self.publish(Some(&term), &leader, &err, pending.len());
            }
        }
        writer.abort();
        watcher.abort();
    }

    /// Runs an operator's request in a task of its own (it waits on etcd).
    fn command(&self, cmd: Command) {
        let etcd = self.etcd.clone();
        let view = self.view.clone();
        let validate = self.validate.clone();
        let redundant = self.s.redundant;
        tokio::spawn(async move {
            match cmd {
                Command::AddConnection(c, reply) => {
                    let _ = reply.send(add(&etcd, &view, &validate, redundant, &c).await);
                }
                Command::DeleteConnection(id, reply) => {
                    let r = match etcd.delete_connection(&id).await {
                        Ok(true) => Ok(()),
                        Ok(false) => Err(CommandError::Unknown(format!(
                            "no connection \"{id}\" in the pool"
                        ))),
                        Err(e) => Err(e.into()),
                    };
                    let _ = reply.send(r);
                }
                Command::Drain(m, on, reply) => {
                    let r = if on && !view.members.contains_key(&m) {
                        Err(CommandError::Unknown(format!(
                            "no member \"{m}\" in the pool (members: {})",
                            view.members.keys().cloned().collect::<Vec<_>>().join(", ")
                        )))
                    } else {
                        etcd.drain(&m, on, now_ms()).await.map_err(Into::into)
                    };
                    let _ = reply.send(r);
                }
                Command::Rebalance {
                    dry_run,
                    max_moves,
                    interval_ms,
                    reply,
                } => {
                    let plan = placement::rebalance(
                        &view.placement_members(),
                        &view.placement_conns(),
                        &view.placed(),
                        max_moves as usize,
                    );
                    let r = if dry_run {
                        Ok(plan)
                    } else {
                        let req = RebalanceRecord {
                            requested_ms: now_ms(),
                            max_moves,
                            interval_ms,
                        };
                        etcd.request_rebalance(&req)
                            .await
                            .map(|_| plan)
                            .map_err(Into::into)
                    };
                    let _ = reply.send(r);
                }
            }
        });
    }
}

/// Checks, admits and stores a connection.
async fn add(
    etcd: &Etcd,
    view: &View,
    validate: &Validator,
    redundant: usize,
    c: &Connection,
) -> Result<(), CommandError> {
    validate(c).map_err(CommandError::Invalid)?;
    let new = placement::Conn {
        id: c.id().to_owned(),
        tenant: c.tenant().to_owned(),
        demand: c.demand(),
    };
    // Judged on the stored connections as read now, and stored only if
    // none changed since: two adds at once cannot both take the last room.
    let mut tries = 0;
    loop {
        let (rev, stored) = etcd.connections().await?;
        let existing: Vec<placement::Conn> = stored
            .iter()
            .map(|c| placement::Conn {
                id: c.id().to_owned(),
                tenant: c.tenant().to_owned(),
                demand: c.demand(),
            })
            .collect();
        placement::admit(&view.placement_members(), &existing, &new, redundant).map_err(|r| {
            CommandError::Refused(format!("connection \"{}\" refused: {r}", c.id()))
        })?;
        match etcd.put_connection(c, rev).await {
            Err(Error::Conflict(_)) if tries < 5 => tries += 1,
            r => return r.map_err(Into::into),
        }
    }
}
