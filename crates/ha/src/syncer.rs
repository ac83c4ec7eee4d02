//! The state sync between the two gateways of an HA pair, sans I/O: the
//! active tells the standby where each SA stands, and the standby starts
//! from there when VRRP makes it master. In the style of
//! [`crate::vrrp::Machine`]: the driver feeds [`Event`]s with the time
//! ([`Now`]) and carries out the [`Action`]s it gets back (send a
//! datagram, tell the IKE thread, answer the takeover); it owns the
//! socket, the [`Syncer`] owns everything else. The SA state it moves
//! ([`SaBook`]) and the running configuration it makes follow the
//! active's ([`Running`]) are handed to each call.
//!
//! - The active sends every SA's reserved outbound ceiling and inbound
//!   replay window every interval, and each new outbound ceiling as soon
//!   as it is durable, before the workers may use it
//!   ([`Event::Reserved`], from the SA state's reserve hook). The standby
//!   sends a heartbeat at the same interval so that each side sees the
//!   link.
//! - The standby moves each outbound SA's next number past the active's
//!   ceiling plus [`JUMP_MARGIN`] as the ceilings arrive, and again,
//!   durably and at once, when it becomes master ([`Event::TakeOver`],
//!   from VRRP before it takes the virtual addresses): to
//!   [`takeover_floor`], past whatever the active may have reserved
//!   since its last word. It adopts the inbound replay windows then.
//! - Static routes and tunnels follow the same way ([`follow`]): the
//!   active sends each set when it changes and every [`ROUTES_EVERY`]
//!   intervals, in chunks named by a generation; the standby, once it has
//!   every chunk of a generation, changes its own through the API's calls
//!   until they are the active's.
//! - IKE: the active's IKE thread hands each tunnel's established IKE SAs
//!   ([`Event::IkeSas`]) whenever one changes; the standby keeps the
//!   latest set per tunnel as its shadow. Its IKE thread sends nothing
//!   while it is backup ([`ToIke::Role`]); on takeover it gets the shadow
//!   and the active's word about the child SAs' ceilings
//!   ([`ToIke::Adopt`]) and keys them, and the takeover waits (at most
//!   [`IKE_ADOPT_WAIT`]) for it ([`Event::IkeAdopted`]) before the
//!   addresses are taken: make-before-break.
//! - Messages are sealed ([`crate::sync`]); a datagram that does not
//!   authenticate, is replayed, reflected, of a stale epoch or not from
//!   the peer is counted by reason and changes nothing.
//!
//! The sync never decides who is active: VRRP alone does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tracing::{info, warn};
use vecgate_ipsec::sastate::SaSnapshot;
use vecgate_ipsec::seqstore::KeyId;
use zeroize::Zeroizing;

use crate::sync::{
    pack, pack_ike, pack_routes, pack_tunnels, BodyRepr, Dir, Epoch, IkeSaRepr, IkeSasRepr, Kind,
    Opener, RecordRepr, Reject, RouteRepr, RoutesRepr, SealError, Sealer, SyncKey, TunnelsRepr,
};

mod floor;
pub mod follow;
mod status;

pub use floor::{takeover_floor, Moved, Now, SaBook, Word, Words, JUMP_MARGIN, TAKEOVER_SLACK};
pub use follow::{Applied, Running};
pub use status::SyncStatus;

/// The active resends its route and tunnel sets every this many
/// intervals.
pub const ROUTES_EVERY: u32 = 10;

/// Rejections counted besides [`Reject`]'s: not from the peer's address.
pub const REJECT_SOURCE: &str = "source";

/// Longest a takeover waits for the IKE thread to key the adopted child
/// SAs before the virtual addresses are taken (a loaded machine may
/// schedule it late).
pub const IKE_ADOPT_WAIT: Duration = Duration::from_millis(500);

/// The active's IKE SAs of one tunnel: (SPIi, SPIr) to the state bytes.
pub type IkeShadow = HashMap<(u64, u64), Zeroizing<Vec<u8>>>;

/// The sync's settings (`[ha] sync_*`, `max_sa_pps`).
#[derive(Clone, Debug)]
pub struct SyncConfig {
    pub local: SocketAddr,
    pub peer: SocketAddr,
    /// How often the active sends its state and the standby its heartbeat.
    pub interval: Duration,
    /// The most an outbound SA's ceiling grows per second while we send.
    pub max_sa_pps: u64,
}

impl SyncConfig {
    /// No message for this long: the sync is down.
    pub fn dead_interval(&self) -> Duration {
        (self.interval * 3).max(Duration::from_millis(500))
    }
}

/// What happens to the sync.
#[derive(Debug)]
pub enum Event<'a> {
    /// A datagram arrived on the sync socket from `from`.
    Datagram { data: &'a [u8], from: SocketAddr },
    /// Sending a datagram failed (counted).
    SendFailed,
    /// The SA state made an outbound ceiling durable (its reserve hook).
    Reserved(SaSnapshot),
    /// The IKE thread's established IKE SAs of `tunnel` (each
    /// `vecgate_ike::SaSnapshot` bytes with its SPIs).
    IkeSas { tunnel: String, sas: Vec<IkeSaRepr> },
    /// The IKE thread keyed the child SAs of the shadow it adopted.
    IkeAdopted,
    /// The IKE thread retired an adopted child SA at attach (its numbers
    /// are unsafe).
    IkeUnsafe(String),
    /// VRRP: master of a group now (`elected`), or still holding
    /// addresses after a switchover (`draining`); both count as sending.
    Role { elected: bool, draining: bool },
    /// VRRP made us master: take the synced state over, then answer with
    /// [`Action::TakenOver`] (the addresses are taken after it).
    TakeOver,
}

/// What the gateway's other threads tell the sync's driver, which hands
/// each on as its [`Event`].
#[derive(Debug)]
pub enum Message {
    /// [`Event::Reserved`] (the SA state's reserve hook).
    Reserved(SaSnapshot),
    /// [`Event::IkeSas`] (the IKE thread).
    IkeSas { tunnel: String, sas: Vec<IkeSaRepr> },
    /// [`Event::IkeAdopted`] (the IKE thread).
    IkeAdopted,
    /// [`Event::IkeUnsafe`] (the IKE thread).
    IkeUnsafe(String),
    /// [`Event::Role`] (VRRP).
    Role { elected: bool, draining: bool },
    /// [`Event::TakeOver`] (VRRP, which then waits for the answer).
    TakeOver,
}

impl From<Message> for Event<'static> {
    fn from(m: Message) -> Self {
        match m {
            Message::Reserved(s) => Event::Reserved(s),
            Message::IkeSas { tunnel, sas } => Event::IkeSas { tunnel, sas },
            Message::IkeAdopted => Event::IkeAdopted,
            Message::IkeUnsafe(s) => Event::IkeUnsafe(s),
            Message::Role { elected, draining } => Event::Role { elected, draining },
            Message::TakeOver => Event::TakeOver,
        }
    }
}

/// What the driver must do, in order.
#[derive(Debug)]
pub enum Action {
    /// Send this datagram to the peer.
    Send(Vec<u8>),
    /// Tell the IKE thread.
    Ike(ToIke),
    /// The takeover asked for is done: the virtual addresses may be taken.
    TakenOver,
}

/// What the sync tells the IKE thread.
#[derive(Debug)]
pub enum ToIke {
    /// Whether it may transmit (elected master, not draining) and whether
    /// the IKE SAs are the active's (fully backup: forget ours).
    Role { may_send: bool, backup: bool },
    /// A takeover: the shadow to import and key; the takeover waits for
    /// [`Event::IkeAdopted`] when it is not empty.
    Adopt(Adoption),
}

/// The active's IKE SAs and what is needed to key their child SAs past
/// what the old active may have used.
#[derive(Debug, Default)]
pub struct Adoption {
    /// By tunnel name.
    pub shadow: HashMap<String, IkeShadow>,
    /// The old active's word about every SA, child SAs included (they are
    /// attached only once keyed): [`Words::take_over`] each as it attaches.
    pub words: Words,
}

/// A takeover in progress.
#[derive(Debug, Clone, Copy)]
enum Takeover {
    /// Nothing heard from the peer yet (both started at once, or we came
    /// back and preempt it): its first message is awaited until `until`,
    /// or we would start from our own, older state while it may still be
    /// sending.
    FirstWord { until: Instant },
    /// The IKE thread keys the adopted child SAs until `until`.
    Ike { until: Instant, since: Instant },
}

/// The state sync of one gateway (module doc).
pub struct Syncer {
    cfg: SyncConfig,
    tx: Sealer,
    rx: Opener,
    /// Sending: master of a group, or draining after a switchover.
    master: bool,
    /// Master of a group now (not merely draining).
    elected: bool,
    /// The peer's last word per SA, kept while we do not send.
    words: Words,
    status: SyncStatus,
    rejected: HashMap<&'static str, u64>,
    /// When the last message from the peer arrived.
    last_rx: Option<Instant>,
    route_chunks: follow::Gather<RouteRepr>,
    tunnel_chunks: follow::Gather<String>,
    /// The active's IKE SAs by tunnel name (kept while backup).
    ike_shadow: HashMap<String, IkeShadow>,
    takeover: Option<Takeover>,
    /// The periodic send: when it last ran, how many times, and which
    /// route and tunnel generations went out.
    last_send: Option<Instant>,
    ticks: u32,
    routes_sent: Option<u64>,
    tunnels_sent: Option<u64>,
    was_up: bool,
    /// What the IKE thread was last told ([`ToIke::Role`]).
    ike_role: Option<(bool, bool)>,
}

impl Syncer {
    /// A sync sealing under `key` with our `epoch` (fresh per boot).
    pub fn new(cfg: SyncConfig, key: SyncKey, epoch: Epoch) -> Result<Syncer, SealError> {
        let tx = Sealer::new(&key, epoch)?;
        let status = SyncStatus {
            local: Some(cfg.local),
            peer: Some(cfg.peer),
            ..SyncStatus::default()
        };
        Ok(Syncer {
            words: Words {
                max_pps: cfg.max_sa_pps,
                by_key: HashMap::new(),
            },
            cfg,
            tx,
            rx: Opener::new(key, epoch),
            master: false,
            elected: false,
            status,
            rejected: HashMap::new(),
            last_rx: None,
            route_chunks: Default::default(),
            tunnel_chunks: Default::default(),
            ike_shadow: HashMap::new(),
            takeover: None,
            last_send: None,
            ticks: 0,
            routes_sent: None,
            tunnels_sent: None,
            was_up: false,
            ike_role: None,
        })
    }

    pub fn config(&self) -> &SyncConfig {
        &self.cfg
    }

    /// Whether we send (master, or draining after a switchover).
    pub fn master(&self) -> bool {
        self.master
    }

    /// The peer's last word about each SA.
    pub fn words(&self) -> &Words {
        &self.words
    }

    /// When [`Syncer::poll`] has work: the next periodic send, or a
    /// takeover's deadline (`None`: now, nothing was sent yet).
    pub fn next_deadline(&self) -> Option<Instant> {
        let send = self.last_send? + self.cfg.interval;
        Some(match self.takeover {
            Some(Takeover::FirstWord { until }) | Some(Takeover::Ike { until, .. }) => {
                send.min(until)
            }
            None => send,
        })
    }

    /// Whether a message from the peer arrived within the dead interval.
    pub fn link_up(&self, now: Instant) -> bool {
        self.last_rx
            .is_some_and(|t| now.saturating_duration_since(t) < self.cfg.dead_interval())
    }

    /// The status as reported, at `now`.
    pub fn status(&self, now: Instant) -> SyncStatus {
        let mut st = self.status.clone();
        st.up = self.link_up(now);
        st.rejected = Reject::ALL
            .iter()
            .map(|r| r.as_str())
            .chain([REJECT_SOURCE])
            .map(|r| (r, self.rejected.get(r).copied().unwrap_or(0)))
            .collect();
        st
    }

    /// Handles `ev` at `now`.
    pub fn handle(
        &mut self,
        now: Now,
        ev: Event<'_>,
        book: &dyn SaBook,
        run: &mut dyn Running,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        match ev {
            Event::Datagram { data, from } => {
                self.receive(now, data, from, book, run);
                // A takeover waiting for the peer's first word finds its
                // state now.
                if matches!(self.takeover, Some(Takeover::FirstWord { .. }))
                    && self.last_rx.is_some()
                {
                    self.run_takeover(now, book, &mut out);
                }
            }
            Event::SendFailed => self.status.send_errors += 1,
            Event::Reserved(snap) => {
                if self.master {
                    self.send_sas(now, Kind::SaState, std::slice::from_ref(&snap), &mut out);
                }
            }
            Event::IkeSas { tunnel, sas } => {
                if self.master {
                    for body in pack_ike(now.wall_ms, true, &tunnel, sas) {
                        let Some(bytes) = body.emit() else { continue };
                        self.seal(Kind::IkeSas, &bytes, &mut out);
                    }
                }
            }
            Event::IkeAdopted => {
                if let Some(Takeover::Ike { .. }) = self.takeover {
                    self.takeover = None;
                    out.push(Action::TakenOver);
                }
            }
            Event::IkeUnsafe(sa) => self.status.unsafe_sas.push(sa),
            Event::Role { elected, draining } => self.set_role(elected, draining, book, &mut out),
            Event::TakeOver => {
                self.elected = true;
                if self.master {
                    self.tell_ike_role(&mut out);
                    out.push(Action::TakenOver);
                } else if self.last_rx.is_none() {
                    self.takeover = Some(Takeover::FirstWord {
                        until: now.at + self.cfg.dead_interval(),
                    });
                } else {
                    self.run_takeover(now, book, &mut out);
                }
            }
        }
        out
    }

    /// The periodic work at `now`: the interval's messages, the link's
    /// state, and a takeover's deadlines.
    pub fn poll(&mut self, now: Now, book: &dyn SaBook, run: &mut dyn Running) -> Vec<Action> {
        let mut out = Vec::new();
        match self.takeover {
            Some(Takeover::FirstWord { until }) if now.at >= until => {
                self.run_takeover(now, book, &mut out);
            }
            Some(Takeover::Ike { until, since }) if now.at >= until => {
                warn!(
                    waited_ms = now.at.saturating_duration_since(since).as_millis() as u64,
                    "state sync: taking the addresses before the IKE thread keyed the adopted child SAs"
                );
                self.takeover = None;
                out.push(Action::TakenOver);
            }
            _ => {}
        }
        if self
            .last_send
            .is_some_and(|t| now.at.saturating_duration_since(t) < self.cfg.interval)
        {
            return out;
        }
        self.last_send = Some(now.at);
        self.ticks = self.ticks.wrapping_add(1);
        let resend = self.ticks.is_multiple_of(ROUTES_EVERY);
        if self.master {
            self.send_sas(now, Kind::SaState, &book.snapshot(), &mut out);
            // Tunnels first: the routes through them follow.
            let (tgen, specs) = follow::our_tunnels(run);
            if self.tunnels_sent != Some(tgen) || resend {
                for c in pack_tunnels(now.wall_ms, true, tgen, &specs) {
                    self.seal(Kind::Tunnels, &c.emit(), &mut out);
                }
                self.tunnels_sent = Some(tgen);
            }
            let (rgen, routes) = follow::our_routes(run);
            if self.routes_sent != Some(rgen) || resend {
                for c in pack_routes(now.wall_ms, true, rgen, &routes) {
                    self.seal(Kind::Routes, &c.emit(), &mut out);
                }
                self.routes_sent = Some(rgen);
            }
        } else {
            self.send_sas(now, Kind::Heartbeat, &[], &mut out);
            self.routes_sent = None;
            self.tunnels_sent = None;
        }
        let up = self.link_up(now.at);
        if up != self.was_up {
            self.was_up = up;
            if up {
                info!(peer = %self.cfg.peer, "state sync up");
            } else {
                warn!(peer = %self.cfg.peer, "state sync down: no message from the peer for 3 intervals");
            }
        }
        out
    }

    /// Seals `body` as a `kind` message into `out` (a failure is counted).
    fn seal(&mut self, kind: Kind, body: &[u8], out: &mut Vec<Action>) {
        match self.tx.seal(kind, body) {
            Ok(d) => {
                self.status.sent += 1;
                out.push(Action::Send(d));
            }
            Err(_) => self.status.send_errors += 1,
        }
    }

    /// Seals `snaps` (as many datagrams as they need).
    fn send_sas(&mut self, now: Now, kind: Kind, snaps: &[SaSnapshot], out: &mut Vec<Action>) {
        let records: Vec<RecordRepr> = snaps.iter().map(record).collect();
        for body in pack(now.wall_ms, self.master, &records) {
            self.seal(kind, &body.emit(), out);
        }
    }

    fn reject(&mut self, why: &'static str) {
        *self.rejected.entry(why).or_default() += 1;
    }

    /// One datagram from `from`.
    fn receive(
        &mut self,
        now: Now,
        data: &[u8],
        from: SocketAddr,
        book: &dyn SaBook,
        run: &mut dyn Running,
    ) {
        if from != self.cfg.peer {
            self.reject(REJECT_SOURCE);
            return;
        }
        let opened = match self.rx.open(data, now.wall_ms) {
            Ok(o) => o,
            Err(r) => {
                self.reject(r.as_str());
                return;
            }
        };
        if opened.new_epoch {
            info!(peer = %from, "state sync: the peer started a new session (it restarted, or we did)");
        }
        let b = &opened.body;
        self.status.received += 1;
        self.status.peer_master = Some(b.master);
        self.status.last_received_ms = Some(now.wall_ms);
        self.status.lag_ms = Some(now.wall_ms as i64 - b.sent_ms as i64);
        if opened.kind == Kind::SaState && b.master {
            self.store(now, b, book);
        }
        if let Some(t) = &opened.tunnels {
            if t.master && !self.master {
                self.gather_tunnels(t, run);
            }
        }
        if let Some(r) = &opened.routes {
            if r.master && !self.master {
                self.gather_routes(r, run);
            }
        }
        if let Some(r) = opened.ike {
            if r.master && !self.master {
                self.store_ike(r);
            }
        }
        self.last_rx = Some(now.at);
    }

    /// Keeps the active's SA state; outbound SAs follow its ceilings now.
    fn store(&mut self, now: Now, b: &BodyRepr, book: &dyn SaBook) {
        if self.master {
            // Both claim master (a backup that took over for a moment
            // under load, or a split): VRRP decides who stays; meanwhile
            // an elected master never falls behind the numbers the other
            // reserved, or once the other steps down the far end would
            // drop ours as too old until they passed its.
            if self.elected {
                for r in b.records.iter().filter(|r| r.dir == Dir::Out) {
                    let to = r.ceiling.saturating_add(1);
                    match book.take_over_outbound(&KeyId(r.key_id), to) {
                        Ok(Some(t)) if t.next == to => {
                            warn!(
                                peer_ceiling = r.ceiling,
                                "state sync: the peer claims master too: {} moves past its ceiling",
                                t.sa
                            );
                        }
                        Ok(_) => {}
                        Err(e) => warn!("state sync: the peer claims master too: {e}"),
                    }
                }
            }
            return;
        }
        for r in &b.records {
            let key = KeyId(r.key_id);
            let e = self.words.by_key.entry(key).or_insert_with(|| Word {
                dir: r.dir,
                spi: r.spi,
                ceiling: 0,
                window: Vec::new(),
                sent_ms: b.sent_ms,
                arrived: now.at,
            });
            // The newest word counts for the time too: the active's
            // bucket bounds its growth from any ceiling it reported.
            if r.ceiling >= e.ceiling || r.dir != e.dir {
                *e = Word {
                    dir: r.dir,
                    spi: r.spi,
                    ceiling: r.ceiling,
                    window: r.window.clone(),
                    sent_ms: b.sent_ms,
                    arrived: now.at,
                };
            }
            if r.dir == Dir::Out {
                book.follow_outbound(&key, e.ceiling.saturating_add(JUMP_MARGIN + 1));
            }
        }
        let out = self
            .words
            .by_key
            .values()
            .filter(|w| w.dir == Dir::Out)
            .count();
        self.status.synced_out = out;
        self.status.synced_in = self.words.by_key.len() - out;
    }

    /// Keeps a tunnel's IKE SAs: a whole set replaces the tunnel's shadow,
    /// a partial one (a set too large for a datagram) replaces its SAs.
    fn store_ike(&mut self, r: IkeSasRepr) {
        let t = self.ike_shadow.entry(r.tunnel).or_default();
        if r.full_set {
            t.clear();
        }
        for sa in r.sas {
            t.insert((sa.spi_i, sa.spi_r), sa.state);
        }
        self.status.synced_ike_sas = self.ike_shadow.values().map(HashMap::len).sum();
    }

    /// Follows the active's tunnel set ([`follow::Gather::gather`]).
    fn gather_tunnels(&mut self, r: &TunnelsRepr, run: &mut dyn Running) {
        let chunk = (r.generation, r.chunk, r.chunks);
        let a = self
            .tunnel_chunks
            .gather(chunk, &r.specs, |all| follow::apply_tunnels(run, all));
        if let Some(a) = a {
            self.status.synced_tunnels = a.items;
            self.status.tunnel_changes += a.changes;
            self.status.tunnel_errors += a.errors;
        }
    }

    /// Follows the active's static routes ([`follow::Gather::gather`]).
    fn gather_routes(&mut self, r: &RoutesRepr, run: &mut dyn Running) {
        let chunk = (r.generation, r.chunk, r.chunks);
        let a = self
            .route_chunks
            .gather(chunk, &r.routes, |all| follow::apply_routes(run, all));
        if let Some(a) = a {
            self.status.synced_routes = a.items;
            self.status.route_changes += a.changes;
            self.status.route_errors += a.errors;
        }
    }

    /// Tells the IKE thread its role if it changed.
    fn tell_ike_role(&mut self, out: &mut Vec<Action>) {
        let role = (self.elected && self.master, !self.master);
        if self.ike_role != Some(role) {
            self.ike_role = Some(role);
            out.push(Action::Ike(ToIke::Role {
                may_send: role.0,
                backup: role.1,
            }));
        }
    }

    /// The IKE thread's role as the sync starts: backup until VRRP says
    /// otherwise.
    pub fn start(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        self.tell_ike_role(&mut out);
        out
    }

    /// VRRP's word about our role. Once we no longer send, the peer's
    /// state is kept and its sequence numbers followed; while draining
    /// after a switchover we still send, or our last packets would jump
    /// past the new master's and push the far end's replay window beyond
    /// them.
    fn set_role(
        &mut self,
        elected: bool,
        draining: bool,
        book: &dyn SaBook,
        out: &mut Vec<Action>,
    ) {
        if !elected {
            self.elected = false;
        }
        if !(elected || draining) && self.master {
            self.master = false;
            // A backup sends nothing: its reservations (which follow the
            // active's ceilings) need no bound.
            book.set_max_pps(0);
            info!("state sync: no longer master: the peer's state is kept from now on");
        }
        self.tell_ike_role(out);
    }

    /// Becoming master: every outbound SA the peer synced jumps to
    /// [`takeover_floor`] (durably; past its space: retired), every
    /// inbound SA adopts its window; the IKE thread gets the shadow.
    fn run_takeover(&mut self, now: Now, book: &dyn SaBook, out: &mut Vec<Action>) {
        self.takeover = None;
        // The IKE thread adopts the shadow at its next turn (its child
        // SAs move past the synced ceilings as they attach). Told before
        // it may send: the thread that sees itself master finds it, and
        // never initiates an IKE SA it should have adopted.
        let shadow = std::mem::take(&mut self.ike_shadow);
        let ike_wait = !shadow.is_empty();
        self.status.adopted_ike_sas = shadow.values().map(HashMap::len).sum();
        self.status.synced_ike_sas = 0;
        out.push(Action::Ike(ToIke::Adopt(Adoption {
            shadow,
            words: self.words.clone(),
        })));
        self.master = true;
        // From now on our ceilings are what the peer must bound.
        book.set_max_pps(self.cfg.max_sa_pps);
        let up = self.link_up(now.at);
        let mut moved = 0;
        for key in self.words.by_key.keys() {
            match self.words.take_over(key, book, now) {
                Moved::Moved { .. } => moved += 1,
                Moved::Unsafe { sa } => self.status.unsafe_sas.push(sa.to_string()),
                Moved::Nothing | Moved::NotDurable => {}
            }
        }
        if !up {
            warn!(
                synced_sas = self.words.by_key.len(),
                max_sa_pps = self.cfg.max_sa_pps,
                "state sync: becoming master while the sync link is down: each synced outbound SA jumps by max_sa_pps for every second since the old active's last word"
            );
        }
        self.status.takeovers += 1;
        self.status.last_takeover = Some((now.wall_ms, moved));
        self.tell_ike_role(out);
        // With IKE SAs to adopt, the IKE thread keys their child SAs
        // before the addresses are taken: make-before-break, the traffic
        // that follows the addresses finds them.
        if ike_wait {
            self.takeover = Some(Takeover::Ike {
                until: now.at + IKE_ADOPT_WAIT,
                since: now.at,
            });
        } else {
            out.push(Action::TakenOver);
        }
    }
}

/// One SA of the SA state as the sync's record (the pool seals the same).
pub fn record(s: &SaSnapshot) -> RecordRepr {
    RecordRepr {
        dir: if s.outbound { Dir::Out } else { Dir::In },
        spi: s.spi,
        key_id: s.key.0,
        ceiling: s.ceiling,
        used: s.used,
        window: s.window.clone(),
    }
}

#[cfg(test)]
mod tests;
