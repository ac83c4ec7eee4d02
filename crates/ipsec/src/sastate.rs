//! The state directory at run time: durable sequence-number ceilings and
//! replay windows of the SAs whose keys outlive the process.
//!
//! A static SA's key outlives the process, so its outbound sequence
//! numbers and its inbound replay window must too ([`crate::seqstore`]
//! says why and how). [`SaState`] owns that for a running gateway:
//!
//! - SAs are attached when created from the configuration, the API or a
//!   reload ([`SaState::outbound`], [`SaState::inbound`]): the key's
//!   record decides where they resume, or refuses them.
//! - [`SaState::tick`] (a thread of the gateway calls it every [`TICK`])
//!   writes the next block of each SA once half of the current one is
//!   used, and only then publishes it to the fast path. A write that
//!   fails publishes nothing: a ceiling reaches the workers only as a
//!   [`Durable`] token, which only a successful write makes.
//! - [`SaState::shutdown`] (a clean stop, the workers stopped) writes
//!   the exact positions.
//!
//! A state sync between gateways (an HA pair, a pool) uses the same
//! object: [`SaState::snapshot`] says where every SA stands, the hook
//! given to [`SaState::open`] hears each outbound ceiling as it is made
//! durable (before the workers may use it), [`SaState::set_max_pps`]
//! bounds how fast ceilings may grow (the [`Bucket`]), and a standby
//! moves its SAs with [`SaState::follow_outbound`],
//! [`SaState::take_over_outbound`] and [`SaState::adopt_window`]. IKE
//! child SAs are attached only with such a sync ([`SaState::ephemeral`]):
//! then both gateways may use their keys; otherwise their keys are fresh
//! every time.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tracing::{error, info, warn};
use vecgate_config::{Config, TunnelKind};

use crate::replay::{PersistNow, ReplayWindow};
use crate::sa::{InboundSa, OutboundSa, SaConfig};
use crate::seqstore::{resume, KeyId, Planner, Record, Resume, SaIdentity, SeqCounter, Store};

mod bucket;
mod sync;
pub use bucket::{Bucket, BUCKET_CAPACITY};
pub use sync::{SaSnapshot, TakenOver};

/// How often the gateway calls [`SaState::tick`]. Blocks are sized for
/// seconds of traffic and renewed at half, so this only bounds how late a
/// renewal starts (and how long a new SA waits for its first block).
pub const TICK: Duration = Duration::from_millis(20);

/// How long [`SaState::open`] waits for a previous instance (killed a
/// moment ago, its lock goes with its last descriptor) to let go.
const OPEN_WAIT: Duration = Duration::from_secs(5);

/// Called with each outbound ceiling made durable, before it is published
/// to the workers: a state sync sends it to its peers first.
pub type ReserveHook = Box<dyn Fn(&SaSnapshot) + Send + Sync>;

/// A write to the state directory failed. Nothing beyond the ceiling that
/// was durable before was published: the SA hands out no number (and its
/// window accepts none) above it until a later write succeeds.
#[derive(Debug)]
#[must_use]
pub struct NotDurable {
    pub sa: SaIdentity,
    /// The ceiling that did not reach the disk.
    pub ceiling: u64,
    pub error: io::Error,
}

impl fmt::Display for NotDurable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: ceiling {} not written: {}",
            self.sa, self.ceiling, self.error
        )
    }
}

impl std::error::Error for NotDurable {}

/// A ceiling that reached the disk: what may be published to the workers.
/// Only [`SaState`]'s writes make one.
#[derive(Debug, Clone, Copy)]
struct Durable(u64);

/// Why a static SA was not created.
#[derive(Debug)]
pub enum StartError {
    /// The SA's own configuration (key length, SPI, endpoints).
    Sa(String),
    /// Its state: unreadable, the key used by another SA, no directory.
    State(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

/// Whether `cfg` has SAs keyed from files (they need the state directory).
pub fn has_static_sas(cfg: &Config) -> bool {
    cfg.tunnels.iter().any(|t| {
        t.kind == TunnelKind::Ipsec
            && t.ipsec
                .as_ref()
                .is_some_and(|x| x.ike.is_none() && !x.sas.is_empty())
    })
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
    /// Outbound, with a rate bound set: how far the ceiling may still grow.
    bucket: Bucket,
    /// An IKE child SA's ([`SaState::ephemeral`]): its record goes with it.
    ephemeral: bool,
}

/// Writes `ceiling` (and `window`) as `sa`'s record: a [`Durable`] token
/// when it reached the disk.
fn write(
    store: &Store,
    sa: &SaIdentity,
    key: &KeyId,
    ceiling: u64,
    window: Option<Vec<u64>>,
) -> Result<Durable, NotDurable> {
    store
        .save(&Record {
            sa: sa.clone(),
            key: *key,
            ceiling,
            window,
        })
        .map(|()| Durable(ceiling))
        .map_err(|error| NotDurable {
            sa: sa.clone(),
            ceiling,
            error,
        })
}

/// Makes an outbound ceiling usable: only one that reached the disk.
fn publish(c: &SeqCounter, d: Durable) {
    c.publish(d.0);
}

/// The one writer of an inbound SA's record: the ticker and the receive
/// path (a jump, [`PersistNow`]) both write through it, so the durable
/// ceiling never moves down behind an accepted packet. Lock order: the
/// replay window, then this.
struct Writer {
    store: Arc<Store>,
    sa: SaIdentity,
    key: KeyId,
    /// The ceiling on disk.
    written: Mutex<u64>,
}

impl Writer {
    /// Makes at least `c` durable (nothing if it already is).
    fn at_least(&self, c: u64) -> Result<Durable, NotDurable> {
        let mut w = lock(&self.written);
        if c <= *w {
            return Ok(Durable(*w));
        }
        let d = write(&self.store, &self.sa, &self.key, c, None)?;
        *w = c;
        Ok(d)
    }

    /// Writes exactly `c` (a lowering, under the window's lock).
    fn exactly(&self, c: u64) -> Result<Durable, NotDurable> {
        let mut w = lock(&self.written);
        let d = write(&self.store, &self.sa, &self.key, c, None)?;
        *w = c;
        Ok(d)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The durable state of a gateway's SAs: one per process, shared by the
/// threads that create SAs (the API, IKE, reloads), the ticker and a
/// state sync.
pub struct SaState {
    /// `Err`: why the directory is unusable (static SAs are then refused).
    store: Result<Arc<Store>, String>,
    dir: PathBuf,
    entries: Mutex<HashMap<KeyId, Entry>>,
    /// Outbound numbers per second a ceiling may grow by (0: unbounded).
    max_pps: AtomicU64,
    on_reserve: Option<ReserveHook>,
}

impl fmt::Debug for SaState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaState")
            .field("dir", &self.dir)
            .field("usable", &self.store.is_ok())
            .finish_non_exhaustive()
    }
}

impl SaState {
    /// Opens the state directory `dir` (created 0700, locked for the
    /// object's lifetime). An unusable directory fails only when
    /// `required` (the configuration has static SAs); otherwise it is a
    /// warning and static SAs added later are refused. `on_reserve` hears
    /// each outbound ceiling made durable, before it is published.
    pub fn open(
        dir: &Path,
        required: bool,
        on_reserve: Option<ReserveHook>,
    ) -> Result<SaState, String> {
        let deadline = Instant::now() + OPEN_WAIT;
        let store = loop {
            match Store::open(dir) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                r => break r,
            }
        };
        let store = store
            .map(Arc::new)
            .map_err(|e| format!("state directory {}: {e}", dir.display()));
        match &store {
            Ok(_) => info!(state_dir = %dir.display(), "state directory open"),
            Err(e) if required => return Err(e.clone()),
            Err(e) => warn!("{e}: static IPsec SAs cannot be added"),
        }
        Ok(SaState {
            store,
            dir: dir.to_path_buf(),
            entries: Mutex::new(HashMap::new()),
            max_pps: AtomicU64::new(0),
            on_reserve,
        })
    }

    /// Opens `cfg`'s state directory ([`SaState::open`]), required when
    /// it has static SAs.
    pub fn for_config(cfg: &Config, on_reserve: Option<ReserveHook>) -> Result<SaState, String> {
        SaState::open(&cfg.gateway.state_dir(), has_static_sas(cfg), on_reserve)
    }

    /// Whether SAs can be attached (the state directory is open and usable).
    pub fn available(&self) -> bool {
        self.store.is_ok()
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<KeyId, Entry>> {
        lock(&self.entries)
    }

    /// Outbound numbers per second an SA's ceiling may grow by (0:
    /// unbounded). A state sync's sender sets it (`[ha] max_sa_pps`) so
    /// that a standby can bound what it may have sent since its last word
    /// ([`Bucket`]); a receiver sets 0 (its reservations follow the
    /// sender's ceilings in jumps and are never sent on; its buckets fill
    /// meanwhile, at most to their capacity, which the standby's floor
    /// counts).
    pub fn set_max_pps(&self, pps: u64) {
        self.max_pps.store(pps, Ordering::Relaxed);
    }

    /// The SA of `key` is an IKE child SA attached for a state sync: its
    /// key is negotiated and never installed again once the SA is gone,
    /// so its record is removed then instead of kept (one file per rekey
    /// would pile up).
    pub fn ephemeral(&self, key: &KeyId) {
        if let Some(e) = self.entries().get_mut(key) {
            e.ephemeral = true;
        }
    }

    /// Where `sa` with key `key` resumes, or why it may not start.
    fn admit(&self, sa: &SaIdentity, key: &KeyId) -> Result<(Resume, Arc<Store>), String> {
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
        Ok((r, store.clone()))
    }

    fn attach(&self, key: KeyId, sa: SaIdentity, handle: Handle, planner: Planner, durable: u64) {
        self.entries().insert(
            key,
            Entry {
                sa,
                handle,
                planner,
                durable,
                written: false,
                seen_waits: 0,
                failing: false,
                bucket: Bucket::empty(Instant::now()),
                ephemeral: false,
            },
        );
    }

    /// Creates an outbound SA of tunnel `tunnel` from `cfg`, resuming
    /// above everything its key may have sent before. It hands out
    /// nothing until the ticker has made its first block durable.
    pub fn outbound(&self, tunnel: &str, cfg: SaConfig) -> Result<OutboundSa, StartError> {
        let key = KeyId::of(cfg.algorithm, &cfg.key);
        let id = SaIdentity {
            tunnel: tunnel.to_string(),
            outbound: true,
            spi: cfg.spi,
        };
        let (r, _) = self.admit(&id, &key).map_err(StartError::State)?;
        let mut sa = OutboundSa::new(cfg).map_err(|e| StartError::Sa(format!("{id}: {e}")))?;
        let durable = match r {
            Resume::Fresh => 0,
            Resume::From { ceiling, .. } => ceiling,
        };
        sa.resume_seq(durable);
        if durable > 0 {
            info!(
                "{id}: resumes above sequence number {durable} (durable ceiling from {})",
                self.dir.display()
            );
        }
        let handle = Handle::Out(sa.seq_counter().clone());
        self.attach(key, id, handle, Planner::outbound(), durable);
        Ok(sa)
    }

    /// Creates an inbound SA of tunnel `tunnel` from `cfg`; its replay
    /// window starts where the key's record says (after a crash:
    /// everything up to the durable ceiling counts as seen).
    pub fn inbound(&self, tunnel: &str, cfg: SaConfig) -> Result<InboundSa, StartError> {
        let key = KeyId::of(cfg.algorithm, &cfg.key);
        let id = SaIdentity {
            tunnel: tunnel.to_string(),
            outbound: false,
            spi: cfg.spi,
        };
        let (r, store) = self.admit(&id, &key).map_err(StartError::State)?;
        let sa = InboundSa::new(cfg).map_err(|e| StartError::Sa(format!("{id}: {e}")))?;
        let handle = sa.replay_handle();
        let writer = Arc::new(Writer {
            store,
            sa: id.clone(),
            key,
            written: Mutex::new(0),
        });
        let durable = {
            let mut w = lock(&handle);
            let wr = writer.clone();
            // A jump above the ceiling (an authentic packet far ahead) is
            // accepted only once its new ceiling is on disk.
            w.set_persist(Some(PersistNow(Arc::new(move |c| {
                wr.at_least(c)
                    .map_err(|e| warn!("{}: cannot write its state: {}", e.sa, e.error))
                    .is_ok()
            }))));
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
                    *lock(&writer.written) = ceiling;
                    info!(
                        exact = ring.is_some(),
                        "{id}: replay window resumes at {ceiling}"
                    );
                    ceiling
                }
            }
        };
        self.attach(
            key,
            id,
            Handle::In(handle, writer),
            Planner::inbound(),
            durable,
        );
        Ok(sa)
    }

    /// One pass at `now`: renews the ceilings that need it; forgets SAs
    /// that are gone (after writing where they stopped). Returns the
    /// writes that failed (each is logged once until one succeeds again;
    /// their SAs publish nothing new meanwhile).
    pub fn tick(&self, now: Instant) -> Vec<NotDurable> {
        let Ok(store) = &self.store else {
            return Vec::new();
        };
        let rate = self.max_pps.load(Ordering::Relaxed);
        let mut failed = Vec::new();
        let mut entries = self.entries();
        entries.retain(|key, e| {
            if !e.handle.alive() {
                // Gone: nobody can use its numbers any more, so the exact
                // position is a safe ceiling (a never-used SA leaves no
                // record). An IKE child's key is never installed again: no
                // record.
                if e.ephemeral {
                    let _ = store.remove(key);
                } else if e.written {
                    if let Err(err) = save_exact(store, key, e) {
                        warn!("{err}: the durable ceiling stands");
                    }
                }
                return false;
            }
            if let Err(err) = self.renew(store, key, e, now, rate) {
                failed.push(err);
            }
            true
        });
        failed
    }

    /// Renews `e`'s ceiling if its planner says so.
    fn renew(
        &self,
        store: &Store,
        key: &KeyId,
        e: &mut Entry,
        now: Instant,
        rate: u64,
    ) -> Result<(), NotDurable> {
        match &e.handle {
            Handle::Out(c) => {
                let c = c.clone();
                let waits = c.waits();
                let demand = waits - e.seen_waits;
                e.seen_waits = waits;
                if rate > 0 {
                    e.bucket.refill(now, rate);
                }
                let Some(want) = e.planner.plan(now, c.next(), c.ceiling(), c.last(), demand)
                else {
                    return Ok(());
                };
                let from = e.durable.max(c.ceiling());
                // Beyond the bucket: wait for the next tick.
                let next = if rate > 0 {
                    e.bucket.grant(from, want)
                } else {
                    Some(want)
                };
                let Some(next) = next else { return Ok(()) };
                // Durable first (and heard by a state sync), then usable.
                let d = noted(e, store, key, write(store, &e.sa, key, next, None))?;
                e.durable = next;
                e.bucket.spend(next.saturating_sub(from));
                if let Some(h) = &self.on_reserve {
                    h(&SaSnapshot {
                        key: *key,
                        spi: e.sa.spi,
                        outbound: true,
                        ceiling: next,
                        used: c.used(),
                        window: Vec::new(),
                    });
                }
                publish(&c, d);
                Ok(())
            }
            Handle::In(w, writer) => {
                let (w, writer) = (w.clone(), writer.clone());
                let (top, ceiling, waits, enabled) = {
                    let g = lock(&w);
                    (g.wanted(), g.ceiling(), g.waits(), g.enabled())
                };
                if !enabled {
                    // Replays are accepted anyway: only the key's owner is
                    // recorded.
                    if !e.written {
                        noted(e, store, key, write(store, &e.sa, key, 0, None))?;
                        e.durable = 0;
                        lock(&w).set_ceiling(u64::MAX);
                    }
                    return Ok(());
                }
                let demand = waits - e.seen_waits;
                e.seen_waits = waits;
                let Some(next) = e.planner.plan(now, top, ceiling, u64::MAX - 1, demand) else {
                    return Ok(());
                };
                if next < ceiling {
                    // Lower in memory first (the disk still says more),
                    // then on disk, both under the window's lock.
                    let mut g = lock(&w);
                    g.set_ceiling(next);
                    let r = writer.exactly(g.ceiling());
                    noted(e, store, key, r)?;
                } else {
                    let r = writer.at_least(next);
                    noted(e, store, key, r)?;
                    lock(&w).set_ceiling(next);
                }
                Ok(())
            }
        }
    }

    /// A clean stop, after the workers have stopped: every SA's exact
    /// position, so a planned restart skips nothing and drops nothing.
    pub fn shutdown(&self) {
        let Ok(store) = &self.store else { return };
        for (key, e) in self.entries().iter() {
            if !e.written {
                continue;
            }
            match save_exact(store, key, e) {
                Ok(c) => info!("{}: stopped at {c} (written)", e.sa),
                Err(err) => warn!("{err}; the durable ceiling stands"),
            }
        }
    }

    /// Whether outbound SA `key` was retired by a takeover.
    pub fn is_retired(&self, key: &KeyId) -> bool {
        let entries = self.entries();
        matches!(entries.get(key).map(|e| &e.handle), Some(Handle::Out(c)) if c.retired())
    }
}

/// Keeps `e`'s bookkeeping of a write's outcome: logs the first failure
/// (and the recovery), marks it written on success.
fn noted(
    e: &mut Entry,
    store: &Store,
    key: &KeyId,
    r: Result<Durable, NotDurable>,
) -> Result<Durable, NotDurable> {
    match &r {
        Ok(_) => {
            if e.failing {
                info!("{}: state written again", e.sa);
            }
            e.failing = false;
            e.written = true;
        }
        Err(err) => {
            if !e.failing {
                error!(
                    "{}: cannot write its state to {}: {}; packets beyond the durable ceiling are dropped (seq-not-durable / replay-not-durable)",
                    e.sa,
                    store.path_of(key).display(),
                    err.error
                );
            }
            e.failing = true;
        }
    }
    r
}

/// Writes where `e` stands exactly: outbound the last number used,
/// inbound the window's top and bitmap. Only when nothing can move it any
/// more (the SA is gone, or the workers have stopped).
fn save_exact(store: &Store, key: &KeyId, e: &Entry) -> Result<u64, NotDurable> {
    let (ceiling, window_bits) = match &e.handle {
        Handle::Out(c) => (c.used(), None),
        Handle::In(w, _) => {
            let g = lock(w);
            if g.enabled() {
                (g.top(), Some(g.ring().to_vec()))
            } else {
                (0, None)
            }
        }
    };
    write(store, &e.sa, key, ceiling, window_bits).map(|d| d.0)
}

impl crate::static_sas::SaMaker for SaState {
    fn outbound(&self, tunnel: &str, cfg: SaConfig) -> Result<OutboundSa, String> {
        SaState::outbound(self, tunnel, cfg).map_err(String::from)
    }
    fn inbound(&self, tunnel: &str, cfg: SaConfig) -> Result<InboundSa, String> {
        SaState::inbound(self, tunnel, cfg).map_err(String::from)
    }
}

/// `vecgate sa reset-state --config F TUNNEL [SPI]`: forgets the records
/// of the tunnel's static SAs' keys in `cfg`'s state directory (the
/// operator's override); returns the files removed. Refused while a
/// gateway holds the directory.
pub fn reset_records(
    cfg: &Config,
    tunnel: &str,
    spi: Option<&str>,
) -> Result<Vec<PathBuf>, String> {
    let t = cfg
        .tunnels
        .iter()
        .find(|t| t.name == tunnel)
        .ok_or_else(|| format!("no tunnel {tunnel}"))?;
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
        let key = crate::keys::read_key(s, tunnel)?;
        let alg: crate::sa::Algorithm = s
            .algorithm
            .as_str()
            .parse()
            .map_err(|_| format!("algorithm {}", s.algorithm))?;
        keys.push(KeyId::of(alg, &key));
    }
    let dir = cfg.gateway.state_dir();
    Store::reset_offline(&dir, &keys).map_err(|e| format!("state directory {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests;
