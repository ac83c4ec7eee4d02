//! The HA state sync (issue 16): the active tells the standby, over a
//! kernel UDP socket on a dedicated link (`[ha] sync_local` /
//! `sync_peer`), where each static ESP SA stands; the standby keeps it and
//! starts from there when VRRP makes it master.
//!
//! - The active sends every static SA's reserved outbound ceiling and
//!   inbound replay window every `sync_interval_ms`, and each new
//!   outbound ceiling as soon as it is durable, *before* the workers may
//!   use it ([`crate::sastate::set_reserve_hook`]). The standby sends a
//!   heartbeat at the same interval so that each side sees the link.
//! - The standby moves each outbound SA's next number past the active's
//!   ceiling plus [`JUMP_MARGIN`] as the ceilings arrive
//!   ([`crate::sastate::follow_outbound`]; the sastate ticker reserves
//!   above it), and again, durably and at once, when it becomes master
//!   ([`take_over`], called by the VRRP thread before it takes the virtual
//!   addresses); it adopts the inbound replay windows then.
//! - Messages are sealed ([`vecgate_ha::sync`]); a datagram that does not
//!   authenticate, is replayed or is not from `sync_peer` is counted by
//!   reason and changes nothing.
//!
//! - Static routes (the running configuration's `[[route]]`s, those added
//!   through the API included) follow the same way: the active sends its
//!   route set when it changes and every [`ROUTES_EVERY`] intervals, in
//!   chunks named by a generation; the standby, once it has every chunk of
//!   a generation, adds, changes and removes its own routes through the
//!   API's own calls until they are the active's.
//!
//! - IKE tunnels (issue 16 item 2): the IKE thread of the active sends
//!   each tunnel's established IKE SAs ([`vecgate_ha::sync::IkeSasBody`],
//!   the `vecgate_ike::SaSnapshot` of each) whenever one changes (new,
//!   rekeyed, deleted, message IDs moved, a request started) and as a whole
//!   every [`ROUTES_EVERY`] intervals ([`send_ike`]); the standby keeps the
//!   latest set per tunnel as its shadow. Its IKE thread sends nothing
//!   while it is backup ([`ike_may_send`]); on takeover it imports the
//!   shadow ([`take_ike_shadow`]) and keys the child SAs, whose sequence
//!   numbers and replay windows move like the static SAs' ([`on_attach`]:
//!   child SAs are attached to [`crate::sastate`] under their key's
//!   [`KeyId`] when a sync is configured). A tunnel without a shadow
//!   negotiates afresh.
//!
//! The sync never decides who is active: VRRP alone does.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime};
use tracing::{error, info, warn};
use vecgate_config::HaSync;
use vecgate_ha::sync::{
    pack, pack_ike, pack_routes, pack_tunnels, BodyRepr, Dir, Epoch, IkeSaRepr, IkeSasRepr, Kind,
    Opener, RecordRepr, Reject, RouteRepr, RoutesRepr, Sealer, SyncKey, TunnelsRepr, KEY_LEN,
};
use vecgate_ipsec::seqstore::KeyId;

use crate::sastate::{self, SaSnapshot};

mod tunnels;

/// One outbound reservation at its largest (`Planner::outbound`'s max
/// block), and the capacity of the active's per-SA token bucket
/// ([`crate::sastate::Bucket`]).
pub const JUMP_MARGIN: u64 = crate::sastate::BUCKET_CAPACITY;

/// Slack added to the time since the active sent a ceiling: clock skew
/// between the pair and the message's latency.
pub const TAKEOVER_SLACK: Duration = Duration::from_secs(1);

/// The first outbound number the new active may use for an SA whose last
/// synced ceiling is `ceiling`, sent `since` ago by an active whose
/// ceilings grow by at most [`JUMP_MARGIN`] + `max_pps` × t over any t
/// seconds (its token bucket): ceiling + 2 × [`JUMP_MARGIN`] + `max_pps` ×
/// (`since` + [`TAKEOVER_SLACK`]) + 1. One margin is the bucket, the other
/// one lost message. Saturates: a result past the SA's space (2^32 - 1
/// without ESN) means no number is provably unused, and the SA is retired
/// instead (RFC 4303 §3.3.3: never cycle; RFC 4106 §8: never repeat a
/// nonce under one key).
pub fn takeover_floor(ceiling: u64, max_pps: u64, since: Duration) -> u64 {
    let ms = since.saturating_add(TAKEOVER_SLACK).as_millis();
    // Rounded up: never below what the active could have reserved.
    let by_rate = u128::from(max_pps).saturating_mul(ms).div_ceil(1000);
    let to = u128::from(ceiling)
        .saturating_add(2 * u128::from(JUMP_MARGIN))
        .saturating_add(by_rate)
        .saturating_add(1);
    u64::try_from(to).unwrap_or(u64::MAX)
}

/// The active resends its route set every this many intervals.
pub const ROUTES_EVERY: u32 = 10;

/// Rejections counted besides [`Reject`]'s: not from `sync_peer`.
pub const REJECT_SOURCE: &str = "source";

/// What `show ha`, `/ha` and the metrics report.
#[derive(Clone, Debug, Default)]
pub struct SyncStatus {
    pub local: Option<SocketAddr>,
    pub peer: Option<SocketAddr>,
    /// A message from the peer arrived within the dead interval.
    pub up: bool,
    /// The peer's role in its last message.
    pub peer_master: Option<bool>,
    pub last_received: Option<SystemTime>,
    /// Our clock minus the peer's send time of its last message (ms).
    pub lag_ms: Option<i64>,
    /// Static SAs whose state the peer sent us (outbound, inbound).
    pub synced_out: usize,
    pub synced_in: usize,
    pub sent: u64,
    pub received: u64,
    pub send_errors: u64,
    /// Rejected datagrams by reason.
    pub rejected: Vec<(&'static str, u64)>,
    pub takeovers: u64,
    /// When the last takeover ran and how many SAs it moved.
    pub last_takeover: Option<(SystemTime, usize)>,
    /// Routes in the last route set applied from the peer, and the
    /// changes (added, changed, removed) it took.
    pub synced_routes: usize,
    pub route_changes: u64,
    pub route_errors: u64,
    /// IKE SAs in the shadow (the active's, per tunnel), and how many the
    /// last takeover adopted.
    pub synced_ike_sas: usize,
    pub adopted_ike_sas: usize,
    /// Outbound SAs a takeover retired (they must be re-keyed).
    pub unsafe_sas: Vec<String>,
    /// Tunnels in the last tunnel set applied from the peer, and the
    /// changes (added, replaced, removed) and refusals it took.
    pub synced_tunnels: usize,
    pub tunnel_changes: u64,
    pub tunnel_errors: u64,
}

/// The active's IKE SAs of one tunnel: (SPIi, SPIr) to the state bytes.
pub type IkeShadow = HashMap<(u64, u64), zeroize::Zeroizing<Vec<u8>>>;

/// The peer's last word about one SA.
#[derive(Clone, Debug)]
struct Stored {
    dir: Dir,
    spi: u32,
    ceiling: u64,
    window: Vec<u64>,
    /// The send time of the message that carried `ceiling` (the peer's
    /// clock, ms), and when it arrived (ours).
    sent_ms: u64,
    arrived: Instant,
}

impl Stored {
    /// How long ago the peer stood at `ceiling`: by its send time and our
    /// clock, or by our own monotonic clock since it arrived, whichever is
    /// longer (a peer clock ahead of ours cannot shorten it below the
    /// latter).
    fn age(&self) -> Duration {
        let by_clock = Duration::from_millis(now_ms().saturating_sub(self.sent_ms));
        by_clock.max(self.arrived.elapsed())
    }
}

struct Sync {
    cfg: HaSync,
    sock: UdpSocket,
    master: AtomicBool,
    /// Master of a VRRP group now (not merely draining after a
    /// switchover).
    elected: AtomicBool,
    tx: Mutex<Sealer>,
    rx: Mutex<Opener>,
    peer: Mutex<HashMap<KeyId, Stored>>,
    status: Mutex<SyncStatus>,
    rejected: Mutex<HashMap<&'static str, u64>>,
    sent: AtomicU64,
    send_errors: AtomicU64,
    /// When the last message from the peer arrived.
    last_rx: Mutex<Option<Instant>>,
    ctl: Arc<vecgate_control::Control>,
    /// Chunks of the peer's route set being gathered: generation, chunks.
    route_chunks: Mutex<tunnels::Gather<RouteRepr>>,
    /// The generation last applied.
    routes_applied: Mutex<Option<u64>>,
    /// The same for the peer's tunnel set.
    tunnel_chunks: Mutex<tunnels::Gather<String>>,
    tunnels_applied: Mutex<Option<u64>>,
    /// The active's IKE SAs by tunnel name (kept while backup).
    ike_shadow: Mutex<HashMap<String, IkeShadow>>,
    /// A takeover happened: the IKE thread takes the shadow.
    ike_takeover: AtomicBool,
    /// The IKE thread has keyed the adopted shadow's child SAs
    /// ([`ike_adopted`]).
    ike_adopted: AtomicBool,
}

/// Longest a takeover waits for the IKE thread to key the adopted child
/// SAs before the virtual addresses are taken (it looks every
/// `ike::BACKUP_WAIT`; a loaded machine may schedule it late).
pub const IKE_ADOPT_WAIT: Duration = Duration::from_millis(500);

static SYNC: OnceLock<Sync> = OnceLock::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Reads the key file: a private regular file owned by the user vecgate
/// runs as, holding 64 hex digits.
pub fn read_key(cfg: &HaSync) -> Result<SyncKey, String> {
    use vecgate_config::secret::{read_owned_secret_file, MAX_SECRET_LEN};
    let what = || format!("[ha] sync_key_file {}", cfg.key_file.display());
    let text = read_owned_secret_file(
        &cfg.key_file,
        MAX_SECRET_LEN,
        rustix::process::geteuid().as_raw(),
    )
    .map_err(|e| format!("{}: {e}", what()))?;
    let text =
        std::str::from_utf8(&text).map_err(|_| format!("{}: must hold hex digits only", what()))?;
    let bytes = zeroize::Zeroizing::new(
        vecgate_config::ipsec::parse_key_hex(text).map_err(|e| format!("{}: {e}", what()))?,
    );
    SyncKey::new(&bytes).ok_or_else(|| {
        format!(
            "{}: {} bytes, the sync key is {KEY_LEN} bytes (64 hex digits; e.g. `openssl rand -hex 32`)",
            what(),
            bytes.len()
        )
    })
}

/// Opens the socket and starts the sync thread.
pub fn start(
    cfg: &HaSync,
    ctl: Arc<vecgate_control::Control>,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, String> {
    let key = read_key(cfg)?;
    let sock =
        UdpSocket::bind(cfg.local).map_err(|e| format!("[ha] sync_local {}: {e}", cfg.local))?;
    let wait = Duration::from_millis(u64::from(cfg.interval_ms).clamp(10, 50));
    sock.set_read_timeout(Some(wait))
        .map_err(|e| format!("[ha] sync_local {}: {e}", cfg.local))?;
    let epoch = Epoch::fresh(now_ms()).map_err(|e| format!("state sync: {e}"))?;
    let sealer = Sealer::new(&key, epoch).map_err(|e| format!("state sync: {e}"))?;
    let s = Sync {
        cfg: cfg.clone(),
        sock,
        master: AtomicBool::new(false),
        elected: AtomicBool::new(false),
        tx: Mutex::new(sealer),
        rx: Mutex::new(Opener::new(key, epoch)),
        peer: Mutex::new(HashMap::new()),
        status: Mutex::new(SyncStatus {
            local: Some(cfg.local),
            peer: Some(cfg.peer),
            ..SyncStatus::default()
        }),
        rejected: Mutex::new(HashMap::new()),
        sent: AtomicU64::new(0),
        send_errors: AtomicU64::new(0),
        last_rx: Mutex::new(None),
        ctl,
        route_chunks: Mutex::new(tunnels::Gather::new()),
        routes_applied: Mutex::new(None),
        tunnel_chunks: Mutex::new(tunnels::Gather::new()),
        tunnels_applied: Mutex::new(None),
        ike_shadow: Mutex::new(HashMap::new()),
        ike_takeover: AtomicBool::new(false),
        ike_adopted: AtomicBool::new(false),
    };
    SYNC.set(s)
        .map_err(|_| "state sync started twice".to_string())?;
    sastate::set_reserve_hook(Box::new(|snap| {
        if let Some(s) = SYNC.get() {
            if s.master.load(Ordering::Acquire) {
                s.send(Kind::SaState, std::slice::from_ref(snap));
            }
        }
    }));
    info!(local = %cfg.local, peer = %cfg.peer, interval_ms = cfg.interval_ms, "state sync listening");
    std::thread::Builder::new()
        .name("vg-hasync".into())
        .spawn(move || run(stop))
        .map_err(|e| format!("spawning the state sync thread: {e}"))
}

fn record(s: &SaSnapshot) -> RecordRepr {
    RecordRepr {
        dir: if s.outbound { Dir::Out } else { Dir::In },
        spi: s.spi,
        key_id: s.key.0,
        ceiling: s.ceiling,
        used: s.used,
        window: s.window.clone(),
    }
}

impl Sync {
    /// Seals and sends `snaps` (as many datagrams as they need).
    fn send(&self, kind: Kind, snaps: &[SaSnapshot]) {
        let records: Vec<RecordRepr> = snaps.iter().map(record).collect();
        let master = self.master.load(Ordering::Acquire);
        for body in pack(now_ms(), master, &records) {
            let d = lock(&self.tx).seal(kind, &body.emit());
            match d.map(|d| self.sock.send_to(&d, self.cfg.peer)) {
                Ok(Ok(_)) => {
                    self.sent.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    self.send_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn reject(&self, why: &'static str) {
        *lock(&self.rejected).entry(why).or_default() += 1;
    }

    /// One datagram from `from`.
    fn receive(&self, data: &[u8], from: SocketAddr) {
        if from != self.cfg.peer {
            self.reject(REJECT_SOURCE);
            return;
        }
        let opened = match lock(&self.rx).open(data, now_ms()) {
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
        {
            let mut st = lock(&self.status);
            st.received += 1;
            st.peer_master = Some(b.master);
            st.last_received = Some(SystemTime::now());
            st.lag_ms = Some(now_ms() as i64 - b.sent_ms as i64);
        }
        if opened.kind == Kind::SaState && b.master {
            self.store(b);
        }
        if let Some(t) = &opened.tunnels {
            if t.master && !self.master.load(Ordering::Acquire) {
                self.gather_tunnels(t);
            }
        }
        if let Some(r) = &opened.routes {
            if r.master && !self.master.load(Ordering::Acquire) {
                self.gather_routes(r);
            }
        }
        if let Some(r) = opened.ike {
            if r.master && !self.master.load(Ordering::Acquire) {
                self.store_ike(r);
            }
        }
        // After the store: a takeover waiting for the peer's first word
        // finds its state.
        *lock(&self.last_rx) = Some(Instant::now());
    }

    /// Keeps the active's SA state; outbound SAs follow its ceilings now.
    fn store(&self, b: &BodyRepr) {
        if self.master.load(Ordering::Acquire) {
            // Both claim master (a backup that took over for a moment
            // under load, or a split): VRRP decides who stays; meanwhile
            // an elected master never falls behind the numbers the other
            // reserved, or once the other steps down the far end would
            // drop ours as too old until they passed its.
            if self.elected.load(Ordering::Acquire) {
                for r in b.records.iter().filter(|r| r.dir == Dir::Out) {
                    let to = r.ceiling.saturating_add(1);
                    if let Some((sa, next)) = sastate::take_over_outbound(&KeyId(r.key_id), to) {
                        if next == to {
                            warn!(peer_ceiling = r.ceiling, "state sync: the peer claims master too: {sa} moves past its ceiling");
                        }
                    }
                }
            }
            return;
        }
        let mut peer = lock(&self.peer);
        for r in &b.records {
            let key = KeyId(r.key_id);
            let e = peer.entry(key).or_insert_with(|| Stored {
                dir: r.dir,
                spi: r.spi,
                ceiling: 0,
                window: Vec::new(),
                sent_ms: b.sent_ms,
                arrived: Instant::now(),
            });
            // The newest word counts for the time too: the active's
            // bucket bounds its growth from any ceiling it reported.
            if r.ceiling >= e.ceiling || r.dir != e.dir {
                *e = Stored {
                    dir: r.dir,
                    spi: r.spi,
                    ceiling: r.ceiling,
                    window: r.window.clone(),
                    sent_ms: b.sent_ms,
                    arrived: Instant::now(),
                };
            }
            if r.dir == Dir::Out {
                sastate::follow_outbound(&key, e.ceiling.saturating_add(JUMP_MARGIN + 1));
            }
        }
        let mut st = lock(&self.status);
        st.synced_out = peer.values().filter(|s| s.dir == Dir::Out).count();
        st.synced_in = peer.len() - st.synced_out;
    }

    /// Keeps a tunnel's IKE SAs: a whole set replaces the tunnel's shadow,
    /// a partial one (a set too large for a datagram) replaces its SAs.
    fn store_ike(&self, r: IkeSasRepr) {
        let mut sh = lock(&self.ike_shadow);
        let t = sh.entry(r.tunnel).or_default();
        if r.full_set {
            t.clear();
        }
        for sa in r.sas {
            t.insert((sa.spi_i, sa.spi_r), sa.state);
        }
        let n = sh.values().map(HashMap::len).sum();
        lock(&self.status).synced_ike_sas = n;
    }

    /// The running configuration's static routes, sorted, and their
    /// generation (a hash of the set).
    fn our_routes(&self) -> (u64, Vec<RouteRepr>) {
        use std::hash::{Hash, Hasher};
        let mut v: Vec<RouteRepr> = self
            .ctl
            .config()
            .routes
            .iter()
            .map(|r| RouteRepr {
                vrf: r.vrf.clone(),
                prefix: r.prefix.to_string(),
                via: r.via.to_string(),
            })
            .collect();
        v.sort();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        v.hash(&mut h);
        (h.finish(), v)
    }

    fn send_routes(&self, generation: u64, routes: &[RouteRepr]) {
        for c in pack_routes(now_ms(), true, generation, routes) {
            let d = lock(&self.tx).seal(Kind::Routes, &c.emit());
            match d.map(|d| self.sock.send_to(&d, self.cfg.peer)) {
                Ok(Ok(_)) => {
                    self.sent.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    self.send_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Keeps a chunk; applies the set once every chunk of its generation
    /// is here (a newer generation starts over).
    fn gather_routes(&self, r: &RoutesRepr) {
        if *lock(&self.routes_applied) == Some(r.generation) {
            return;
        }
        let complete =
            lock(&self.route_chunks).add(r.generation, r.chunk, r.chunks, r.routes.clone());
        // A set that did not apply whole (a route via a tunnel not here
        // yet) is applied again from the active's next resend.
        if let Some(all) = complete {
            if self.apply_routes(&all) {
                *lock(&self.routes_applied) = Some(r.generation);
            }
        }
    }

    /// The running configuration's tunnels as specs, sorted by name, and
    /// their generation (a hash of the set).
    fn our_tunnels(&self) -> (u64, Vec<String>) {
        use std::hash::{Hash, Hasher};
        let mut v: Vec<(String, String)> = self
            .ctl
            .config()
            .tunnels
            .iter()
            .map(|t| (t.name.clone(), tunnels::spec_of(t).to_string()))
            .collect();
        v.sort();
        let v: Vec<String> = v.into_iter().map(|x| x.1).collect();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        v.hash(&mut h);
        (h.finish(), v)
    }

    fn send_tunnels(&self, generation: u64, specs: &[String]) {
        for c in pack_tunnels(now_ms(), true, generation, specs) {
            let d = lock(&self.tx).seal(Kind::Tunnels, &c.emit());
            match d.map(|d| self.sock.send_to(&d, self.cfg.peer)) {
                Ok(Ok(_)) => {
                    self.sent.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    self.send_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn gather_tunnels(&self, r: &TunnelsRepr) {
        if *lock(&self.tunnels_applied) == Some(r.generation) {
            return;
        }
        let complete =
            lock(&self.tunnel_chunks).add(r.generation, r.chunk, r.chunks, r.specs.clone());
        if let Some(all) = complete {
            if self.apply_tunnels(&all) {
                *lock(&self.tunnels_applied) = Some(r.generation);
            }
        }
    }

    /// Makes our tunnels the peer's: removes ours it lacks or has with
    /// another spec (a tunnel still routed is refused until the routes
    /// follow, then retried), then adds its own. True if all applied.
    fn apply_tunnels(&self, want: &[String]) -> bool {
        use vecgate_control::model::TunnelSpec;
        let want: HashMap<String, &String> = want
            .iter()
            .filter_map(|w| Some((tunnels::name_of(w)?, w)))
            .collect();
        let (_, have) = self.our_tunnels();
        let (mut changes, mut errors) = (0u64, 0u64);
        for h in &have {
            let Some(name) = tunnels::name_of(h) else {
                continue;
            };
            if want.get(&name).is_some_and(|w| *w == h) {
                continue;
            }
            match self.ctl.del_tunnel(&name) {
                Ok(()) => changes += 1,
                Err(e) => {
                    errors += 1;
                    warn!(tunnel = %name, "state sync: removing a tunnel the active lacks: {}", e.message);
                }
            }
        }
        let have_now: std::collections::HashSet<String> =
            self.our_tunnels().1.into_iter().collect();
        let mut names: Vec<&String> = want.keys().collect();
        names.sort();
        for name in names {
            let w = want[name];
            if have_now.contains(w) {
                continue;
            }
            let r = serde_json::from_str::<TunnelSpec>(w)
                .map_err(|e| e.to_string())
                .and_then(|spec| self.ctl.add_tunnel(&spec).map_err(|e| e.message));
            match r {
                Ok(()) => changes += 1,
                Err(e) => {
                    errors += 1;
                    warn!(tunnel = %name, "state sync: adding the active's tunnel: {e}");
                }
            }
        }
        if changes > 0 || errors > 0 {
            info!(
                tunnels = want.len(),
                changes, errors, "state sync: tunnels follow the active"
            );
        }
        let mut st = lock(&self.status);
        st.synced_tunnels = want.len();
        st.tunnel_changes += changes;
        st.tunnel_errors += errors;
        errors == 0
    }

    /// Makes our static routes the peer's: removes ours it lacks (or has
    /// with another next hop), then adds its own. True if all applied.
    fn apply_routes(&self, want: &[RouteRepr]) -> bool {
        use vecgate_control::model::{RouteKey, RouteSpec};
        let (_, have) = self.our_routes();
        let key = |r: &RouteRepr| (r.vrf.clone(), r.prefix.clone());
        let want_keys: HashMap<(String, String), &RouteRepr> =
            want.iter().map(|r| (key(r), r)).collect();
        let (mut changes, mut errors) = (0u64, 0u64);
        for r in &have {
            if want_keys.get(&key(r)).is_none_or(|w| w.via != r.via) {
                match self.ctl.del_route(&RouteKey {
                    vrf: Some(r.vrf.clone()),
                    prefix: r.prefix.clone(),
                }) {
                    Ok(()) => changes += 1,
                    Err(e) => {
                        errors += 1;
                        warn!(vrf = %r.vrf, prefix = %r.prefix, "state sync: removing a route the active lacks: {}", e.message);
                    }
                }
            }
        }
        let have_now: std::collections::HashSet<RouteRepr> =
            self.our_routes().1.into_iter().collect();
        for r in want {
            if have_now.contains(r) {
                continue;
            }
            match self.ctl.add_route(&RouteSpec {
                vrf: Some(r.vrf.clone()),
                prefix: r.prefix.clone(),
                via: r.via.clone(),
            }) {
                Ok(_) => changes += 1,
                Err(e) => {
                    errors += 1;
                    warn!(vrf = %r.vrf, prefix = %r.prefix, via = %r.via, "state sync: adding the active's route: {}", e.message);
                }
            }
        }
        if changes > 0 || errors > 0 {
            info!(
                routes = want.len(),
                changes, errors, "state sync: static routes follow the active"
            );
        }
        let mut st = lock(&self.status);
        st.synced_routes = want.len();
        st.route_changes += changes;
        st.route_errors += errors;
        errors == 0
    }

    /// No message for this long: the sync is down.
    fn dead_interval(&self) -> Duration {
        Duration::from_millis(u64::from(self.cfg.interval_ms) * 3).max(Duration::from_millis(500))
    }

    fn link_up(&self) -> bool {
        let dead = self.dead_interval();
        lock(&self.last_rx).is_some_and(|t| t.elapsed() < dead)
    }

    fn publish(&self) {
        let mut st = lock(&self.status);
        st.sent = self.sent.load(Ordering::Relaxed);
        st.send_errors = self.send_errors.load(Ordering::Relaxed);
        let rej = lock(&self.rejected);
        st.rejected = Reject::ALL
            .iter()
            .map(|r| r.as_str())
            .chain([REJECT_SOURCE])
            .map(|r| (r, rej.get(r).copied().unwrap_or(0)))
            .collect();
    }
}

fn run(stop: Arc<AtomicBool>) {
    let Some(s) = SYNC.get() else { return };
    let interval = Duration::from_millis(u64::from(s.cfg.interval_ms));
    let mut last_send = Instant::now() - interval;
    let mut routes_sent: Option<u64> = None;
    let mut tunnels_sent: Option<u64> = None;
    let mut ticks = 0u32;
    let mut was_up = false;
    let mut buf = vec![0u8; vecgate_ha::sync::MAX_DATAGRAM + 1];
    while !stop.load(Ordering::Relaxed) {
        match s.sock.recv_from(&mut buf) {
            Ok((n, from)) if n <= vecgate_ha::sync::MAX_DATAGRAM => s.receive(&buf[..n], from),
            Ok(_) => s.reject(Reject::Malformed.as_str()),
            Err(_) => {}
        }
        if last_send.elapsed() >= interval {
            last_send = Instant::now();
            ticks = ticks.wrapping_add(1);
            if s.master.load(Ordering::Acquire) {
                s.send(Kind::SaState, &sastate::snapshot());
                // Tunnels first: the routes through them follow.
                let (tgen, specs) = s.our_tunnels();
                if tunnels_sent != Some(tgen) || ticks.is_multiple_of(ROUTES_EVERY) {
                    s.send_tunnels(tgen, &specs);
                    tunnels_sent = Some(tgen);
                }
                let (generation, routes) = s.our_routes();
                if routes_sent != Some(generation) || ticks.is_multiple_of(ROUTES_EVERY) {
                    s.send_routes(generation, &routes);
                    routes_sent = Some(generation);
                }
            } else {
                s.send(Kind::Heartbeat, &[]);
                routes_sent = None;
                tunnels_sent = None;
            }
            let up = s.link_up();
            if up != was_up {
                was_up = up;
                if up {
                    info!(peer = %s.cfg.peer, "state sync up");
                } else {
                    warn!(peer = %s.cfg.peer, "state sync down: no message from the peer for 3 intervals");
                }
            }
            lock(&s.status).up = up;
            s.publish();
        }
    }
}

/// VRRP made us master: before the virtual addresses are taken, every
/// outbound SA the peer synced jumps to [`takeover_floor`] (durably; past
/// its space: retired), and every inbound SA adopts its window.
pub fn take_over() {
    let Some(s) = SYNC.get() else { return };
    s.elected.store(true, Ordering::Release);
    if s.master.load(Ordering::Acquire) {
        return;
    }
    // Nothing heard from the peer since we started (both started at
    // once, or we came back and preempt it): give its first message a
    // few intervals to arrive, or we would start from our own, older
    // state while it may still be sending.
    let first = Instant::now();
    while lock(&s.last_rx).is_none() && first.elapsed() < s.dead_interval() {
        std::thread::sleep(Duration::from_millis(10));
    }
    // The IKE thread adopts the shadow at its next turn (its child SAs
    // then move past the synced ceilings as they attach: [`on_attach`]).
    // Set before `master`: the thread that sees itself master finds it, and
    // never initiates an IKE SA it should have adopted.
    // With IKE SAs to adopt, the IKE thread keys their child SAs before
    // the addresses are taken (below): make-before-break, the traffic
    // that follows the addresses finds them.
    let ike_wait = !lock(&s.ike_shadow).is_empty();
    s.ike_adopted.store(false, Ordering::Release);
    s.ike_takeover.store(true, Ordering::Release);
    s.master.store(true, Ordering::Release);
    // From now on our ceilings are what the peer must bound.
    sastate::set_max_pps(s.cfg.max_sa_pps);
    let up = s.link_up();
    let peer = lock(&s.peer).clone();
    let mut moved = 0;
    let mut unsafe_sas = Vec::new();
    for (key, p) in &peer {
        match p.dir {
            Dir::Out => {
                let age = p.age();
                let to = takeover_floor(p.ceiling, s.cfg.max_sa_pps, age);
                match sastate::take_over_outbound(key, to) {
                    Some((sa, _)) if sastate::is_retired(key) => {
                        error!(spi = format_args!("{:#010x}", p.spi), peer_ceiling = p.ceiling, age_ms = age.as_millis() as u64,
                               "state sync: taking over {sa}: the old active may have used every sequence number left (its last ceiling is {} ms old, at up to {} packets/s); the SA sends nothing (seq-unsafe-after-takeover): re-key it with a new key file on both gateways and the far end", age.as_millis(), s.cfg.max_sa_pps);
                        unsafe_sas.push(sa.to_string());
                    }
                    Some((sa, next)) => {
                        moved += 1;
                        info!(spi = format_args!("{:#010x}", p.spi), peer_ceiling = p.ceiling, age_ms = age.as_millis() as u64, next,
                              "state sync: taking over {sa}: sends from {next}, past the old active's ceiling");
                    }
                    None => {}
                }
            }
            Dir::In => {
                if let Some((sa, top)) = sastate::adopt_window(key, p.ceiling, &p.window) {
                    moved += 1;
                    info!(
                        spi = format_args!("{:#010x}", p.spi),
                        top, "state sync: taking over {sa}: replay window from the old active"
                    );
                }
            }
        }
    }
    if !up {
        warn!(
            synced_sas = peer.len(),
            max_sa_pps = s.cfg.max_sa_pps,
            "state sync: becoming master while the sync link is down: each synced outbound SA jumps by max_sa_pps for every second since the old active's last word"
        );
    }
    {
        let mut st = lock(&s.status);
        st.takeovers += 1;
        st.last_takeover = Some((SystemTime::now(), moved));
        st.unsafe_sas.extend(unsafe_sas);
    }
    if ike_wait {
        let t0 = Instant::now();
        while !s.ike_adopted.load(Ordering::Acquire) && t0.elapsed() < IKE_ADOPT_WAIT {
            std::thread::sleep(Duration::from_millis(1));
        }
        if !s.ike_adopted.load(Ordering::Acquire) {
            warn!(
                waited_ms = t0.elapsed().as_millis() as u64,
                "state sync: taking the addresses before the IKE thread keyed the adopted child SAs"
            );
        }
    }
}

/// The IKE thread has imported the shadow [`take_ike_shadow`] gave it and
/// keyed its child SAs: a waiting [`take_over`] takes the addresses.
pub fn ike_adopted() {
    if let Some(s) = SYNC.get() {
        s.ike_adopted.store(true, Ordering::Release);
    }
}

/// Whether the IKE thread may transmit: always without a state sync; with
/// one, only while we are the elected master (the standby never sends on
/// the virtual addresses, and must not answer or start exchanges of SAs
/// it shadows). Not while draining after a switchover: the new master
/// has adopted the IKE SAs, and two gateways answering the peer would
/// move the message IDs apart. `sync_configured` is the configuration's
/// word, as the IKE thread may start before the sync does.
pub fn ike_may_send(sync_configured: bool) -> bool {
    if !sync_configured {
        return true;
    }
    SYNC.get()
        .is_some_and(|s| s.elected.load(Ordering::Acquire) && s.master.load(Ordering::Acquire))
}

/// Whether we are fully backup (not master, not draining after a
/// switchover): the IKE SAs are the active's, not ours to hold.
pub fn ike_backup() -> bool {
    SYNC.get()
        .is_some_and(|s| !s.master.load(Ordering::Acquire))
}

/// The active's IKE SAs of `tunnel` (each `vecgate_ike::SaSnapshot`
/// bytes with its SPIs), sent now if we are master.
pub fn send_ike(tunnel: &str, sas: Vec<IkeSaRepr>) {
    let Some(s) = SYNC.get() else { return };
    if !s.master.load(Ordering::Acquire) {
        return;
    }
    for body in pack_ike(now_ms(), true, tunnel, sas) {
        let Some(bytes) = body.emit() else { continue };
        let d = lock(&s.tx).seal(Kind::IkeSas, &bytes);
        match d.map(|d| s.sock.send_to(&d, s.cfg.peer)) {
            Ok(Ok(_)) => {
                s.sent.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                s.send_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// After a takeover, once: the shadow of the active's IKE SAs by tunnel
/// name (then forgotten: from now on we are the one that negotiates).
pub fn take_ike_shadow() -> Option<HashMap<String, IkeShadow>> {
    let s = SYNC.get()?;
    if !s.ike_takeover.swap(false, Ordering::AcqRel) {
        return None;
    }
    let sh = std::mem::take(&mut *lock(&s.ike_shadow));
    let mut st = lock(&s.status);
    st.adopted_ike_sas = sh.values().map(HashMap::len).sum();
    st.synced_ike_sas = 0;
    Some(sh)
}

/// An SA whose key the old active may have used was attached to
/// [`crate::sastate`] (an adopted IKE child SA): as master, its outbound
/// numbers start at [`takeover_floor`] (past its space: retired, and
/// rekeyed by IKE on its soft lifetime) and its
/// replay window is the synced one, as [`take_over`] does for the SAs
/// that existed then; as backup, it follows the active's ceiling.
pub fn on_attach(key: &KeyId) {
    let Some(s) = SYNC.get() else { return };
    let Some(p) = lock(&s.peer).get(key).cloned() else {
        return;
    };
    let master = s.master.load(Ordering::Acquire);
    match p.dir {
        Dir::Out if master => {
            let age = p.age();
            let to = takeover_floor(p.ceiling, s.cfg.max_sa_pps, age);
            match sastate::take_over_outbound(key, to) {
                Some((sa, _)) if sastate::is_retired(key) => {
                    // Its numbers are unsafe: the SA sends nothing, and its
                    // soft lifetime is raised so IKE rekeys it (new keys).
                    error!(
                        spi = format_args!("{:#010x}", p.spi),
                        peer_ceiling = p.ceiling,
                        age_ms = age.as_millis() as u64,
                        "state sync: {sa}: the old active may have used every sequence number left; it sends nothing (seq-unsafe-after-takeover) until rekeyed"
                    );
                    lock(&s.status).unsafe_sas.push(sa.to_string());
                }
                Some((sa, next)) => info!(
                    spi = format_args!("{:#010x}", p.spi),
                    peer_ceiling = p.ceiling,
                    age_ms = age.as_millis() as u64,
                    next,
                    "state sync: {sa} sends from {next}, past the old active's ceiling"
                ),
                None => {}
            }
        }
        Dir::Out => {
            sastate::follow_outbound(key, p.ceiling.saturating_add(JUMP_MARGIN + 1));
        }
        Dir::In => {
            if let Some((sa, top)) = sastate::adopt_window(key, p.ceiling, &p.window) {
                info!(
                    spi = format_args!("{:#010x}", p.spi),
                    top, "state sync: {sa}: replay window from the old active"
                );
            }
        }
    }
}

/// VRRP says whether we are master of any group now (`elected`), and
/// whether we still hold addresses after a switchover (`draining`); both
/// count as sending.
pub fn set_role(elected: bool, draining: bool) {
    if let Some(s) = SYNC.get() {
        if !elected {
            s.elected.store(false, Ordering::Release);
        }
        if !(elected || draining) && s.master.swap(false, Ordering::AcqRel) {
            // A backup sends nothing: its reservations (which follow the
            // active's ceilings) need no bound.
            sastate::set_max_pps(0);
            info!("state sync: no longer master: the peer's state is kept from now on");
        }
    }
}

/// The sync's status, if `[ha]` configures one.
pub fn status() -> Option<SyncStatus> {
    let s = SYNC.get()?;
    s.publish();
    let up = s.link_up();
    let mut st = lock(&s.status).clone();
    st.up = up;
    Some(st)
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The status as `/ha` reports it.
pub fn info(s: &SyncStatus) -> vecgate_control::model::HaSyncInfo {
    vecgate_control::model::HaSyncInfo {
        local: s.local.map(|a| a.to_string()).unwrap_or_default(),
        peer: s.peer.map(|a| a.to_string()).unwrap_or_default(),
        state: if s.up { "up" } else { "down" }.to_owned(),
        peer_role: s
            .peer_master
            .map(|m| if m { "master" } else { "backup" }.to_owned()),
        last_sync_unix: s.last_received.map(unix),
        lag_ms: s.lag_ms,
        synced_outbound_sas: s.synced_out as u64,
        synced_inbound_sas: s.synced_in as u64,
        messages_sent: s.sent,
        messages_received: s.received,
        send_errors: s.send_errors,
        rejected: s
            .rejected
            .iter()
            .map(|(r, n)| ((*r).to_owned(), *n))
            .collect(),
        takeovers: s.takeovers,
        last_takeover_unix: s.last_takeover.map(|t| unix(t.0)),
        last_takeover_sas: s.last_takeover.map_or(0, |t| t.1 as u64),
        synced_routes: s.synced_routes as u64,
        route_changes: s.route_changes,
        route_errors: s.route_errors,
        synced_ike_sas: s.synced_ike_sas as u64,
        adopted_ike_sas: s.adopted_ike_sas as u64,
        unsafe_sas: s.unsafe_sas.clone(),
        synced_tunnels: s.synced_tunnels as u64,
        tunnel_changes: s.tunnel_changes,
        tunnel_errors: s.tunnel_errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sastate::Bucket;

    /// A small deterministic generator (no dev-dependency for one test).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, below: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % below.max(1)
        }
    }

    /// No overflow at the extremes, never below the bound's terms,
    /// monotonic in each argument.
    #[test]
    fn takeover_floor_bounds_and_monotonic() {
        assert_eq!(
            takeover_floor(u64::MAX, u64::MAX, Duration::MAX / 2),
            u64::MAX
        );
        assert_eq!(
            takeover_floor(0, 0, Duration::ZERO),
            2 * JUMP_MARGIN + 1,
            "no rate: the margins alone"
        );
        // 2^21/s for 1 s of slack + 2 s since.
        assert_eq!(
            takeover_floor(1000, 1 << 21, Duration::from_secs(2)),
            1000 + 2 * JUMP_MARGIN + 3 * (1 << 21) + 1
        );
        let mut g = Lcg(7);
        for _ in 0..20_000 {
            let c = g.next(1 << 40);
            let r = g.next(1 << 31);
            let ms = g.next(1 << 32);
            let f = takeover_floor(c, r, Duration::from_millis(ms));
            let exact = u128::from(c)
                + 2 * u128::from(JUMP_MARGIN)
                + u128::from(r) * u128::from(ms + 1000) / 1000;
            assert!(u128::from(f) > exact.min(u128::from(u64::MAX) - 1));
            assert!(takeover_floor(c + 1, r, Duration::from_millis(ms)) >= f);
            assert!(takeover_floor(c, r + 1, Duration::from_millis(ms)) >= f);
            assert!(takeover_floor(c, r, Duration::from_millis(ms + 1)) >= f);
        }
        // Past 2^32 - 1 (no ESN): a 2^21/s SA silent for 35 minutes.
        assert!(
            takeover_floor(1 << 20, 1 << 21, Duration::from_secs(35 * 60)) > u64::from(u32::MAX)
        );
    }

    /// The bucket and the floor together: an active that reserves as fast
    /// as its bucket lets it (greedy, random demand and tick lengths) never
    /// reaches, by any moment, the floor the standby computes from any
    /// ceiling it reported earlier, with the time since then as the
    /// standby measures it (here exactly; the slack covers skew).
    #[test]
    fn bucketed_active_never_reaches_the_standby_floor() {
        let rate = 1u64 << 21;
        let mut g = Lcg(42);
        for run in 0..200 {
            let t0 = Instant::now();
            let mut now = t0;
            // Start full: the worst case of a long-idle SA.
            let mut b = Bucket::empty(t0 - Duration::from_secs(100));
            b.refill(t0, rate);
            let mut ceiling = g.next(1 << 30);
            // (time, ceiling) of every report the standby could hold.
            let mut reports = vec![(t0, ceiling)];
            for _ in 0..(200 + run) {
                now += Duration::from_millis(1 + g.next(300));
                b.refill(now, rate);
                let want = ceiling + g.next(1 << 27);
                if let Some(to) = b.grant(ceiling, want) {
                    b.spend(to - ceiling);
                    ceiling = to;
                }
                if g.next(4) == 0 {
                    reports.push((now, ceiling));
                }
                for &(t, c) in &reports {
                    let floor = takeover_floor(c, rate, now - t);
                    assert!(
                        floor > ceiling,
                        "run {run}: report {c} at +{:?}, active at {ceiling} at +{:?}, floor {floor}",
                        t - t0,
                        now - t0
                    );
                }
            }
        }
    }

    /// Refill is capped and whole; grant never exceeds the tokens; an
    /// empty bucket grants nothing.
    #[test]
    fn bucket_refill_grant_spend() {
        let t0 = Instant::now();
        let mut b = Bucket::empty(t0);
        assert_eq!(b.grant(10, 1_000), None, "starts empty");
        b.refill(t0 + Duration::from_millis(20), 1_000);
        assert_eq!(b.grant(10, 1_000), Some(30), "20 ms at 1000/s");
        b.spend(20);
        assert_eq!(b.grant(30, 1_000), None);
        b.refill(t0 + Duration::from_secs(1_000_000), u64::MAX);
        assert_eq!(b.grant(0, u64::MAX), Some(JUMP_MARGIN), "capped");
        assert_eq!(b.grant(u64::MAX - 5, u64::MAX), Some(u64::MAX));
    }
}
