//! The state directory at run time: durable ceilings of static SAs.
//!
//! A static SA's key outlives the process, so its outbound sequence numbers
//! and its inbound replay window must too ([`vecgate_ipsec::seqstore`] says
//! why and how). This module ties that to the gateway: SAs are attached
//! when created from the configuration, the API or SIGHUP ([`outbound`],
//! [`inbound`]: the key's record decides where they resume, or refuses
//! them); a ticker thread ([`spawn_ticker`]) writes the next block of each
//! SA once half of the current one is used and only then publishes it to
//! the fast path; a clean stop ([`shutdown`]) writes the exact positions.
//! IKE child SAs are attached only with an HA state sync (`ike/ha.rs`):
//! then both gateways of the pair may use their keys; otherwise their keys
//! are fresh every time.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use tracing::{error, info, warn};
use vecgate_config::{Config, TunnelKind};
use vecgate_ipsec::seqstore::{
    resume, KeyId, Planner, Record, Resume, SaIdentity, SeqCounter, Store,
};
use vecgate_ipsec::{InboundSa, OutboundSa, ReplayWindow, SaConfig};

/// How often the ticker looks at the SAs. Blocks are sized for seconds of
/// traffic and renewed at half, so this only bounds how late a renewal
/// starts (and how long a new SA waits for its first block).
const TICK: Duration = Duration::from_millis(20);

static STATE: OnceLock<SaState> = OnceLock::new();

struct SaState {
    /// `Err`: why the directory is unusable (static SAs are then refused).
    store: Result<Store, String>,
    dir: PathBuf,
    entries: Mutex<HashMap<KeyId, Entry>>,
}

enum Handle {
    Out(Arc<SeqCounter>),
    In(Arc<Mutex<ReplayWindow>>, Arc<Writer>),
}

impl Handle {
    /// Whether anyone but us still holds the SA's state (the SA is alive).
    fn alive(&self) -> bool {
        match self {
            Handle::Out(c) => Arc::strong_count(c) > 1,
            Handle::In(w, _) => Arc::strong_count(w) > 1,
        }
    }
}

struct Entry {
    sa: SaIdentity,
    handle: Handle,
    planner: Planner,
    /// The ceiling on disk (0 before the first write of a fresh key).
    durable: u64,
    /// Whether this entry has written its record yet.
    written: bool,
    seen_waits: u64,
    /// A write failed (logged once until one succeeds again).
    failing: bool,
    /// Outbound, with the HA sync on: how far the ceiling may still grow.
    bucket: Bucket,
    /// An IKE child SA's ([`ephemeral`]): its record goes with it.
    ephemeral: bool,
}

/// With the HA sync on, the most an outbound SA's ceiling may grow: a
/// token bucket of [`BUCKET_CAPACITY`] numbers refilled at
/// [`set_max_pps`]'s rate, starting empty (so a restart adds no burst).
/// Over any `t` seconds the ceiling grows by at most capacity + rate × t,
/// which is what lets the standby bound what an active it no longer hears
/// may have sent (`crate::hasync::takeover_floor`). Checked once per
/// reservation block, by the ticker, never per packet.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    tokens: u64,
    at: Instant,
}

/// The bucket's capacity: one outbound reservation at its largest
/// (`Planner::outbound`'s max block, `crate::hasync::JUMP_MARGIN`).
pub const BUCKET_CAPACITY: u64 = 1 << 26;

impl Bucket {
    pub fn empty(now: Instant) -> Self {
        Bucket { tokens: 0, at: now }
    }

    /// Refills at `rate` per second up to [`BUCKET_CAPACITY`]; whole
    /// tokens only, the remainder of a millisecond is kept for the next
    /// call (`at` moves only by what was credited).
    pub fn refill(&mut self, now: Instant, rate: u64) {
        let ms = now.saturating_duration_since(self.at).as_millis();
        let add = (ms.saturating_mul(u128::from(rate)) / 1000).min(u128::from(BUCKET_CAPACITY));
        if add > 0 {
            self.tokens = (self.tokens.saturating_add(add as u64)).min(BUCKET_CAPACITY);
            self.at += Duration::from_millis(ms as u64);
        }
    }

    /// The ceiling to reserve: `want` if the bucket holds `want - ceiling`
    /// tokens, else as far as it holds (`None`: not past `ceiling`, wait).
    pub fn grant(&mut self, ceiling: u64, want: u64) -> Option<u64> {
        let to = want.min(ceiling.saturating_add(self.tokens));
        (to > ceiling).then_some(to)
    }

    /// `n` numbers were reserved.
    pub fn spend(&mut self, n: u64) {
        self.tokens = self.tokens.saturating_sub(n);
    }
}

/// Outbound numbers per second an SA's ceiling may grow by (0: unbounded,
/// no HA sync).
static MAX_PPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The HA sync is on and this gateway is master (sending): bound every
/// outbound SA's ceiling growth to `pps` (`[ha] max_sa_pps`); 0 while
/// backup (a backup's reservations follow the active's ceilings in jumps
/// and are never sent on; its buckets fill meanwhile, at most to their
/// capacity, which the standby's floor counts).
pub fn set_max_pps(pps: u64) {
    MAX_PPS.store(pps, Ordering::Relaxed);
}

/// The one writer of an inbound SA's record: the ticker and the receive
/// path (a jump, [`vecgate_ipsec::replay::PersistNow`]) both write through
/// it, so the durable ceiling never moves down behind an accepted packet.
/// Lock order: the replay window, then this.
struct Writer {
    sa: SaIdentity,
    key: KeyId,
    /// The ceiling on disk.
    written: Mutex<u64>,
}

impl Writer {
    /// Makes at least `c` durable (nothing if it already is).
    fn at_least(&self, c: u64) -> bool {
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if c <= *w {
            return true;
        }
        if self.save(c) {
            *w = c;
            return true;
        }
        false
    }

    /// Writes exactly `c` (a lowering, under the window's lock).
    fn exactly(&self, c: u64) -> bool {
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if self.save(c) {
            *w = c;
            return true;
        }
        false
    }

    fn save(&self, c: u64) -> bool {
        let Some(store) = STATE.get().and_then(|s| s.store.as_ref().ok()) else {
            return false;
        };
        store
            .save(&Record {
                sa: self.sa.clone(),
                key: self.key,
                ceiling: c,
                window: None,
            })
            .map_err(|e| warn!("{}: cannot write its state: {e}", self.sa))
            .is_ok()
    }
}

fn window(w: &Mutex<ReplayWindow>) -> MutexGuard<'_, ReplayWindow> {
    w.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `cfg` has SAs keyed from files (they need the state directory).
pub fn has_static_sas(cfg: &Config) -> bool {
    cfg.tunnels.iter().any(|t| {
        t.kind == TunnelKind::Ipsec
            && t.ipsec
                .as_ref()
                .is_some_and(|x| x.ike.is_none() && !x.sas.is_empty())
    })
}

/// Opens the gateway's state directory (created 0700, locked for the
/// process lifetime). Fails only when `cfg` has static SAs; otherwise an
/// unusable directory is a warning and static SAs added later are refused.
pub fn init(cfg: &Config) -> Result<(), String> {
    let dir = cfg.gateway.state_dir();
    // A previous instance killed a moment ago may still be exiting (its
    // lock goes with its last descriptor): wait for it a little.
    let deadline = Instant::now() + Duration::from_secs(5);
    let store = loop {
        match Store::open(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            r => break r,
        }
    };
    let store = store.map_err(|e| format!("state directory {}: {e}", dir.display()));
    match &store {
        Ok(_) => info!(state_dir = %dir.display(), "state directory open"),
        Err(e) if has_static_sas(cfg) => return Err(e.clone()),
        Err(e) => warn!("{e}: static IPsec SAs cannot be added"),
    }
    STATE
        .set(SaState {
            store,
            dir,
            entries: Mutex::new(HashMap::new()),
        })
        .map_err(|_| "state directory opened twice".to_string())
}

/// The SA of `key` is an IKE child SA attached for the HA sync
/// (`ike/ha.rs`): its key is negotiated and never installed again once
/// the SA is gone, so its record is removed then instead of kept (one
/// file per rekey would pile up).
pub fn ephemeral(key: &KeyId) {
    if let Ok(st) = state() {
        if let Some(e) = st.entries().get_mut(key) {
            e.ephemeral = true;
        }
    }
}

/// Whether SAs can be attached (the state directory is open and usable).
pub fn available() -> bool {
    state().is_ok_and(|s| s.store.is_ok())
}

fn state() -> Result<&'static SaState, String> {
    STATE
        .get()
        .ok_or_else(|| "the state directory is not open".to_string())
}

impl SaState {
    fn entries(&self) -> MutexGuard<'_, HashMap<KeyId, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where `sa` with key `key` resumes, or why it may not start.
    fn admit(&self, sa: &SaIdentity, key: &KeyId) -> Result<(Resume, &Store), String> {
        let store = self.store.as_ref().map_err(|e| format!("{sa}: {e}"))?;
        if let Some(e) = self.entries().get(key) {
            if e.sa != *sa && e.handle.alive() {
                return Err(format!(
                    "{sa}: its key is already used by {} (one key, one SA: a reused AES-GCM/ChaCha20 key repeats nonces); give it its own key",
                    e.sa
                ));
            }
        }
        let r = resume(sa, store.load(key), &store.path_of(key)).map_err(|e| e.to_string())?;
        Ok((r, store))
    }
}

/// Why a static SA was not created.
#[derive(Debug)]
pub enum StartError {
    /// The SA's own configuration (key length, SPI, endpoints).
    Sa(String),
    /// Its state: unreadable, the key used by another SA, no directory.
    State(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Sa(m) | StartError::State(m) => f.write_str(m),
        }
    }
}

impl From<StartError> for String {
    fn from(e: StartError) -> String {
        e.to_string()
    }
}

/// Creates a static outbound SA of tunnel `tunnel` from `cfg`, resuming
/// above everything its key may have sent before. It hands out nothing
/// until the ticker has made its first block durable.
pub fn outbound(tunnel: &str, cfg: SaConfig) -> Result<OutboundSa, StartError> {
    let st = state().map_err(StartError::State)?;
    let key = KeyId::of(cfg.algorithm, &cfg.key);
    let id = SaIdentity {
        tunnel: tunnel.to_string(),
        outbound: true,
        spi: cfg.spi,
    };
    let (r, _) = st.admit(&id, &key).map_err(StartError::State)?;
    let mut sa = OutboundSa::new(cfg).map_err(|e| StartError::Sa(format!("{id}: {e}")))?;
    let durable = match r {
        Resume::Fresh => 0,
        Resume::From { ceiling, .. } => ceiling,
    };
    sa.resume_seq(durable);
    if durable > 0 {
        info!(
            "{id}: resumes above sequence number {durable} (durable ceiling from {})",
            st.dir.display()
        );
    }
    st.entries().insert(
        key,
        Entry {
            sa: id,
            handle: Handle::Out(sa.seq_counter().clone()),
            planner: Planner::outbound(),
            durable,
            written: false,
            seen_waits: 0,
            failing: false,
            bucket: Bucket::empty(Instant::now()),
            ephemeral: false,
        },
    );
    Ok(sa)
}

/// Creates a static inbound SA of tunnel `tunnel` from `cfg`; its replay
/// window starts where the key's record says (after a crash: everything up
/// to the durable ceiling counts as seen).
pub fn inbound(tunnel: &str, cfg: SaConfig) -> Result<InboundSa, StartError> {
    let st = state().map_err(StartError::State)?;
    let key = KeyId::of(cfg.algorithm, &cfg.key);
    let id = SaIdentity {
        tunnel: tunnel.to_string(),
        outbound: false,
        spi: cfg.spi,
    };
    let (r, _) = st.admit(&id, &key).map_err(StartError::State)?;
    let sa = InboundSa::new(cfg).map_err(|e| StartError::Sa(format!("{id}: {e}")))?;
    let handle = sa.replay_handle();
    let writer = Arc::new(Writer {
        sa: id.clone(),
        key,
        written: Mutex::new(0),
    });
    let durable = {
        let mut w = window(&handle);
        let wr = writer.clone();
        w.set_persist(Some(vecgate_ipsec::replay::PersistNow(Arc::new(
            move |c| wr.at_least(c),
        ))));
        match r {
            Resume::Fresh => {
                w.set_ceiling(0);
                0
            }
            Resume::From {
                ceiling,
                window: ring,
            } => {
                w.restore(ceiling, ring.as_deref());
                *writer.written.lock().unwrap_or_else(|e| e.into_inner()) = ceiling;
                info!(
                    exact = ring.is_some(),
                    "{id}: replay window resumes at {ceiling}"
                );
                ceiling
            }
        }
    };
    st.entries().insert(
        key,
        Entry {
            sa: id,
            handle: Handle::In(handle, writer),
            planner: Planner::inbound(),
            durable,
            written: false,
            seen_waits: 0,
            failing: false,
            bucket: Bucket::empty(Instant::now()),
            ephemeral: false,
        },
    );
    Ok(sa)
}

/// The gateway's [`vecgate_ipsec::static_sas::SaMaker`]: [`outbound`] and
/// [`inbound`].
pub struct Persisted;

impl vecgate_ipsec::static_sas::SaMaker for Persisted {
    fn outbound(&self, tunnel: &str, cfg: SaConfig) -> Result<OutboundSa, String> {
        outbound(tunnel, cfg).map_err(String::from)
    }
    fn inbound(&self, tunnel: &str, cfg: SaConfig) -> Result<InboundSa, String> {
        inbound(tunnel, cfg).map_err(String::from)
    }
}

/// One pass: renew the ceilings that need it; forget SAs that are gone
/// (after writing where they stopped).
pub fn tick() {
    let Ok(st) = state() else { return };
    let Ok(store) = &st.store else { return };
    let now = Instant::now();
    let mut entries = st.entries();
    entries.retain(|key, e| {
        if !e.handle.alive() {
            // Gone: nobody can use its numbers any more, so the exact
            // position is a safe ceiling (a never-used SA leaves no record).
            // An IKE child's key is never installed again: no record.
            if e.ephemeral {
                let _ = store.remove(key);
            } else if e.written {
                let _ = save_exact(store, key, e);
            }
            return false;
        }
        renew(store, key, e, now);
        true
    });
}

fn renew(store: &Store, key: &KeyId, e: &mut Entry, now: Instant) {
    let save = |e: &mut Entry, ceiling: u64, window: Option<Vec<u64>>| -> bool {
        let rec = Record {
            sa: e.sa.clone(),
            key: *key,
            ceiling,
            window,
        };
        match store.save(&rec) {
            Ok(()) => {
                if e.failing {
                    info!("{}: state written again", e.sa);
                }
                e.failing = false;
                e.written = true;
                e.durable = ceiling;
                true
            }
            Err(err) => {
                if !e.failing {
                    error!(
                        "{}: cannot write its state to {}: {err}; packets beyond the durable ceiling are dropped (seq-not-durable / replay-not-durable)",
                        e.sa,
                        store.path_of(key).display()
                    );
                }
                e.failing = true;
                false
            }
        }
    };
    match &e.handle {
        Handle::Out(c) => {
            let c = c.clone();
            let waits = c.waits();
            let demand = waits - e.seen_waits;
            e.seen_waits = waits;
            let rate = MAX_PPS.load(Ordering::Relaxed);
            if rate > 0 {
                e.bucket.refill(now, rate);
            }
            if let Some(want) = e.planner.plan(now, c.next(), c.ceiling(), c.last(), demand) {
                let from = e.durable.max(c.ceiling());
                let next = if rate > 0 {
                    // Beyond the bucket: wait for the next tick.
                    e.bucket.grant(from, want)
                } else {
                    Some(want)
                };
                // Durable first (and sent to the HA standby), then usable.
                if let Some(next) = next {
                    if save(e, next, None) {
                        e.bucket.spend(next.saturating_sub(from));
                        reserved(&e.sa, key, next, c.used());
                        c.publish(next);
                    }
                }
            }
        }
        Handle::In(w, writer) => {
            let (w, writer) = (w.clone(), writer.clone());
            let (top, ceiling, waits, enabled) = {
                let g = window(&w);
                (g.wanted(), g.ceiling(), g.waits(), g.enabled())
            };
            if !enabled {
                // Replays are accepted anyway: only the key's owner is
                // recorded.
                if !e.written {
                    let _ = save(e, 0, None);
                    window(&w).set_ceiling(u64::MAX);
                }
                return;
            }
            let demand = waits - e.seen_waits;
            e.seen_waits = waits;
            if let Some(next) = e.planner.plan(now, top, ceiling, u64::MAX - 1, demand) {
                if next < ceiling {
                    // Lower in memory first (the disk still says more),
                    // then on disk, both under the window's lock.
                    let mut g = window(&w);
                    g.set_ceiling(next);
                    if writer.exactly(g.ceiling()) {
                        e.written = true;
                    }
                } else if writer.at_least(next) {
                    e.written = true;
                    window(&w).set_ceiling(next);
                }
            }
        }
    }
}

/// Writes where `e` stands exactly: outbound the last number used,
/// inbound the window's top and bitmap. Only when nothing can move it any
/// more (the SA is gone, or the workers have stopped).
fn save_exact(store: &Store, key: &KeyId, e: &Entry) -> std::io::Result<u64> {
    let (ceiling, window_bits) = match &e.handle {
        Handle::Out(c) => (c.used(), None),
        Handle::In(w, _) => {
            let g = window(w);
            if g.enabled() {
                (g.top(), Some(g.ring().to_vec()))
            } else {
                (0, None)
            }
        }
    };
    store.save(&Record {
        sa: e.sa.clone(),
        key: *key,
        ceiling,
        window: window_bits,
    })?;
    Ok(ceiling)
}

/// A clean stop, after the workers have stopped: every SA's exact position,
/// so a planned restart skips nothing and drops nothing.
pub fn shutdown() {
    let Ok(st) = state() else { return };
    let Ok(store) = &st.store else { return };
    for (key, e) in st.entries().iter() {
        if !e.written {
            continue;
        }
        match save_exact(store, key, e) {
            Ok(c) => info!("{}: stopped at {c} (written)", e.sa),
            Err(err) => warn!(
                "{}: exact state not written ({err}); the durable ceiling stands",
                e.sa
            ),
        }
    }
}

/// Runs [`tick`] every [`TICK`] until `stop`.
pub fn spawn_ticker(stop: Arc<AtomicBool>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("vg-sastate".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                tick();
                std::thread::sleep(TICK);
            }
        })
}

/// `vecgate sa reset-state --config F TUNNEL [SPI]`: forgets the records
/// of the tunnel's static SAs' keys (the operator's override). Refused while
/// a gateway holds the state directory.
pub fn reset_state(
    config: &std::path::Path,
    tunnel: &str,
    spi: Option<&str>,
) -> std::process::ExitCode {
    let run = || -> Result<Vec<String>, String> {
        let cfg = vecgate_config::load(config).map_err(|e| e.to_string())?;
        let t = cfg
            .tunnels
            .iter()
            .find(|t| t.name == tunnel)
            .ok_or_else(|| format!("no tunnel {tunnel} in {}", config.display()))?;
        let want = spi
            .map(|s| {
                let s = s.trim();
                let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                    Some(h) => u32::from_str_radix(h, 16),
                    None => s.parse(),
                };
                v.map_err(|_| format!("SPI {s}: expected a number (0x... or decimal)"))
            })
            .transpose()?;
        let sas: Vec<_> = t
            .ipsec
            .iter()
            .filter(|x| x.ike.is_none())
            .flat_map(|x| x.sas.iter())
            .filter(|s| want.is_none_or(|w| w == s.spi))
            .collect();
        if sas.is_empty() {
            return Err(format!("tunnel {tunnel}: no static SA to reset"));
        }
        let mut keys = Vec::new();
        for s in &sas {
            let key = vecgate_ipsec::keys::read_key(s, tunnel)?;
            let alg = s
                .algorithm
                .as_str()
                .parse()
                .map_err(|_| format!("algorithm {}", s.algorithm))?;
            keys.push(KeyId::of(alg, &key));
        }
        let dir = cfg.gateway.state_dir();
        let gone = Store::reset_offline(&dir, &keys)
            .map_err(|e| format!("state directory {}: {e}", dir.display()))?;
        Ok(gone
            .iter()
            .map(|p| format!("removed {}", p.display()))
            .collect())
    };
    match run() {
        Ok(lines) => {
            if lines.is_empty() {
                println!("nothing recorded for those SAs");
            }
            for l in lines {
                println!("{l}");
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("vecgate sa reset-state: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

// ------------------------------------------------------------ HA state sync

/// One static SA as the HA sync carries it (`crate::hasync`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaSnapshot {
    pub key: KeyId,
    pub spi: u32,
    pub outbound: bool,
    /// Outbound: the durable (reserved) ceiling, which is at least the
    /// published one. Inbound: the replay window's top.
    pub ceiling: u64,
    /// Outbound: the highest number handed out.
    pub used: u64,
    /// Inbound: the window's ring.
    pub window: Vec<u64>,
}

/// Called with each outbound ceiling made durable, before it is published
/// to the workers: the HA sync sends it to the standby first.
type ReserveHook = Box<dyn Fn(&SaSnapshot) + Send + Sync>;
static RESERVE_HOOK: OnceLock<ReserveHook> = OnceLock::new();

/// Sets [`ReserveHook`] (once).
pub fn set_reserve_hook(f: ReserveHook) {
    let _ = RESERVE_HOOK.set(f);
}

fn reserved(sa: &SaIdentity, key: &KeyId, ceiling: u64, used: u64) {
    if let Some(h) = RESERVE_HOOK.get() {
        h(&SaSnapshot {
            key: *key,
            spi: sa.spi,
            outbound: true,
            ceiling,
            used,
            window: Vec::new(),
        });
    }
}

/// Whether outbound SA `key` was retired by a takeover.
pub fn is_retired(key: &KeyId) -> bool {
    let Ok(st) = state() else { return false };
    let entries = st.entries();
    matches!(entries.get(key).map(|e| &e.handle), Some(Handle::Out(c)) if c.retired())
}

/// Every live static SA: outbound ceilings, inbound windows.
pub fn snapshot() -> Vec<SaSnapshot> {
    let Ok(st) = state() else { return Vec::new() };
    let entries = st.entries();
    entries
        .iter()
        .filter(|(_, e)| e.handle.alive())
        .map(|(key, e)| match &e.handle {
            Handle::Out(c) => SaSnapshot {
                key: *key,
                spi: e.sa.spi,
                outbound: true,
                ceiling: e.durable.max(c.ceiling()),
                used: c.used(),
                window: Vec::new(),
            },
            Handle::In(w, _) => {
                let g = window(w);
                SaSnapshot {
                    key: *key,
                    spi: e.sa.spi,
                    outbound: false,
                    ceiling: g.top(),
                    used: 0,
                    window: if g.enabled() {
                        g.ring().to_vec()
                    } else {
                        Vec::new()
                    },
                }
            }
        })
        .collect()
}

/// The standby follows the active: outbound SA `key` will hand out nothing
/// below `to` (the ticker reserves above it). Returns the SA and where it
/// stood, if it moved.
pub fn follow_outbound(key: &KeyId, to: u64) -> Option<(SaIdentity, u64)> {
    let st = state().ok()?;
    let entries = st.entries();
    let e = entries.get(key)?;
    let Handle::Out(c) = &e.handle else {
        return None;
    };
    let before = c.next();
    c.skip_to(to);
    (c.next() > before).then(|| (e.sa.clone(), before))
}

/// Taking over as the HA active: outbound SA `key` starts at `to` or
/// above, its ceiling made durable and published now (before the virtual
/// addresses are taken), not at the ticker's next pass; `to` past the end
/// of its space retires it ([`SeqCounter::retire`]: it sends nothing until
/// re-keyed). Returns the SA and its next number.
pub fn take_over_outbound(key: &KeyId, to: u64) -> Option<(SaIdentity, u64)> {
    let st = state().ok()?;
    let store = st.store.as_ref().ok()?;
    let mut entries = st.entries();
    let e = entries.get_mut(key)?;
    let Handle::Out(c) = &e.handle else {
        return None;
    };
    let c = c.clone();
    if to > c.last() {
        // No number of the space is provably unused by the old active:
        // none is sent, and the record says so (a restart resumes past
        // the end, `seq-exhausted`, until a new key file).
        c.retire();
        let last = c.last();
        if e.durable < last {
            match store.save(&Record {
                sa: e.sa.clone(),
                key: *key,
                ceiling: last,
                window: None,
            }) {
                Ok(()) => {
                    e.durable = last;
                    e.written = true;
                }
                Err(err) => warn!(
                    "{}: retired, but its record could not be written ({err})",
                    e.sa
                ),
            }
        }
        return Some((e.sa.clone(), to));
    }
    c.skip_to(to);
    let next = c.next();
    if c.ceiling() < next {
        let target = next.saturating_add(e.planner.min_block).min(c.last());
        match store.save(&Record {
            sa: e.sa.clone(),
            key: *key,
            ceiling: target,
            window: None,
        }) {
            Ok(()) => {
                e.durable = target;
                e.written = true;
                c.publish(target);
            }
            Err(err) => warn!(
                "{}: taking over, its ceiling could not be written ({err}); the ticker retries",
                e.sa
            ),
        }
    }
    Some((e.sa.clone(), next))
}

/// Taking over as the HA active: inbound SA `key` adopts the old active's
/// replay window when it is ahead of ours (what the old active accepted
/// after its last sync is not known here: RFC 4303 §3.4.3 replay checks
/// resume from the synced edge).
pub fn adopt_window(key: &KeyId, top: u64, ring: &[u64]) -> Option<(SaIdentity, u64)> {
    let st = state().ok()?;
    let entries = st.entries();
    let e = entries.get(key)?;
    let Handle::In(w, writer) = &e.handle else {
        return None;
    };
    let mut g = window(w);
    if !g.enabled() || top <= g.top() {
        return None;
    }
    let ring = (ring.len() == g.ring().len()).then_some(ring);
    // Durable first: after a crash of ours, nothing up to `top` is
    // accepted again.
    if !writer.at_least(top) {
        return None;
    }
    g.restore(top, ring);
    Some((e.sa.clone(), top))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vecgate_ipsec::seqstore::Take;
    use vecgate_ipsec::{Algorithm, Lifetime, TunnelEndpoints};
    use zeroize::Zeroizing;

    fn sa(spi: u32, key: &[u8]) -> SaConfig {
        SaConfig {
            spi,
            algorithm: Algorithm::AesGcm128,
            key: Zeroizing::new(key.to_vec()),
            esn: false,
            replay_window: 64,
            lifetime: Lifetime::default(),
            tunnel: TunnelEndpoints {
                local: std::net::Ipv4Addr::new(192, 0, 2, 1).into(),
                remote: std::net::Ipv4Addr::new(192, 0, 2, 2).into(),
            },
            encap: None,
            df: true,
        }
    }

    /// The HA sync's paths on the process's one state directory (one test:
    /// the state is global): the standby follows the active's ceiling,
    /// never moves down, and taking over starts past the peer's ceiling
    /// with a durable, published ceiling above it; an inbound SA adopts a
    /// window ahead of its own and rejects what it says was seen.
    #[test]
    fn ha_follow_take_over_and_adopt_window() {
        let dir = std::env::temp_dir().join(format!("vg-sastate-ha-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cfg = vecgate_config::parse(&format!(
            "[gateway]\nname = \"t\"\nstate_dir = \"{}\"\n",
            dir.display()
        ))
        .unwrap();
        init(&cfg).unwrap();
        let (k_out, k_in) = ([1u8; 20], [2u8; 20]);
        let out = outbound("t0", sa(0x1001, &k_out)).unwrap();
        let inb = inbound("t0", sa(0x2001, &k_in)).unwrap();
        let id_out = KeyId::of(Algorithm::AesGcm128, &k_out);
        let id_in = KeyId::of(Algorithm::AesGcm128, &k_in);
        tick();
        let c = out.seq_counter().clone();
        assert!(c.ceiling() >= 1, "the ticker reserved a first block");

        // Standby: follow the active's ceiling, never back.
        let (_, before) = follow_outbound(&id_out, 10_000).unwrap();
        assert_eq!((before, c.next()), (1, 10_000));
        assert_eq!(follow_outbound(&id_out, 5), None);
        assert_eq!(c.next(), 10_000);

        // Takeover: past the peer's ceiling, usable at once, durable.
        let to = 1u64 << 30;
        let (_, next) = take_over_outbound(&id_out, to).unwrap();
        assert_eq!(next, to);
        assert!(c.ceiling() > to);
        assert_eq!(c.take(1), Take::Ok(to..to + 1));
        let rec = Store::peek(&dir, &id_out).unwrap().unwrap();
        assert!(
            rec.ceiling >= c.ceiling(),
            "{} < {}",
            rec.ceiling,
            c.ceiling()
        );

        // Inbound: adopt a window ahead of ours, never one behind.
        let w = inb.replay_handle();
        let ring = vec![u64::MAX; window(&w).ring().len()];
        assert_eq!(adopt_window(&id_in, 500, &ring).map(|x| x.1), Some(500));
        assert!(
            window(&w).check(500).is_err(),
            "500 was seen by the old active"
        );
        assert!(window(&w).check(440).is_err(), "so was 440 (all bits set)");
        assert_eq!(adopt_window(&id_in, 400, &ring), None);
        assert_eq!(window(&w).top(), 500);
        let rin = Store::peek(&dir, &id_in).unwrap().unwrap();
        assert!(rin.ceiling >= 500, "the adopted top is durable first");

        let snap = snapshot();
        assert!(snap
            .iter()
            .any(|s| s.outbound && s.key == id_out && s.ceiling > to));
        assert!(snap
            .iter()
            .any(|s| !s.outbound && s.key == id_in && s.ceiling == 500));

        // A takeover past the space retires the SA: it refuses to send
        // with its own drop reason, its record says the space is used up
        // (a restart does not resume below), the bucket is untouched.
        let k_ret = [3u8; 20];
        let ret = outbound("t1", sa(0x3001, &k_ret)).unwrap();
        let id_ret = KeyId::of(Algorithm::AesGcm128, &k_ret);
        tick();
        assert!(ret.reserve(1).is_ok());
        assert!(!is_retired(&id_ret));
        let past = u64::from(u32::MAX) + 1;
        assert_eq!(take_over_outbound(&id_ret, past).map(|x| x.1), Some(past));
        assert!(is_retired(&id_ret));
        assert_eq!(
            ret.reserve(1),
            Err(vecgate_ipsec::EspError::SeqUnsafeAfterTakeover)
        );
        tick();
        assert_eq!(
            ret.reserve(1),
            Err(vecgate_ipsec::EspError::SeqUnsafeAfterTakeover)
        );
        let rr = Store::peek(&dir, &id_ret).unwrap().unwrap();
        assert_eq!(rr.ceiling, u64::from(u32::MAX));
        drop((out, inb, ret));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
