//! Sequence numbers and replay windows that survive restarts.
//!
//! With AES-GCM and ChaCha20-Poly1305 the ESP sequence number is the nonce
//! (RFC 4106 §3 and §8, RFC 7634 §2): a gateway that starts a static SA at 1
//! again after a restart sends two packets under one (key, nonce) pair. So
//! an outbound SA whose key outlives the process never uses a number that is
//! not first recorded as *possibly used* on disk:
//!
//! - [`SeqCounter`] is the fast path: workers take numbers below a
//!   `ceiling` with one atomic `fetch_update`, nothing else. Numbers above
//!   the ceiling are refused ([`Take::Wait`]: the packet is dropped and
//!   counted) rather than handed out.
//! - The control thread raises the ceiling in blocks ahead of use
//!   ([`Planner`]): it writes the new ceiling durably ([`Store::save`]:
//!   temporary file, fsync, rename, fsync of the directory) and only then
//!   publishes it to the counter ([`SeqCounter::publish`]).
//! - A restarted gateway resumes at the durable ceiling + 1
//!   ([`SeqCounter::resume`]). Whatever was sent before is at most the
//!   published ceiling, which is at most the durable one: a crash at any
//!   point between reserve, fsync and send never repeats a number (the
//!   property tests below replay every interleaving with crashes).
//!
//! Inbound SAs keep the same kind of ceiling on the replay window's right
//! edge (RFC 4303 §3.4.3): nothing above it is accepted until it is durable,
//! so after a crash everything up to the durable ceiling is treated as seen
//! and a packet captured before the crash is a replay. A clean stop writes
//! the exact top and bitmap instead, so a planned restart loses nothing.
//!
//! Records are keyed by a hash of the key ([`KeyId`], SHA-256 of a
//! domain-separated key, never the key) and carry the SA's identity
//! (tunnel, direction, SPI): one key belongs to one SA, and a record whose
//! identity differs says the key is being reused. IKE child SAs get fresh
//! keys on every negotiation and need none of this.

use std::collections::VecDeque;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::Range;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_lc_rs::digest;

use crate::sa::Algorithm;

/// Domain separation of [`KeyId`]: the hash of a key is used for nothing
/// else, and differs from any other hash of the same bytes.
const KEY_ID_DOMAIN: &[u8] = b"vecgate esp sa key id v1\0";

/// The identity of a key: SHA-256(domain ‖ algorithm ‖ 0 ‖ key). Says
/// whether two SAs share a key without keeping or showing the key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId(pub [u8; 32]);

impl KeyId {
    pub fn of(alg: Algorithm, key: &[u8]) -> KeyId {
        let mut c = digest::Context::new(&digest::SHA256);
        c.update(KEY_ID_DOMAIN);
        c.update(alg.name().as_bytes());
        c.update(&[0]);
        c.update(key);
        let mut out = [0u8; 32];
        out.copy_from_slice(c.finish().as_ref());
        KeyId(out)
    }

    pub fn hex(&self) -> String {
        hex(&self.0)
    }

    fn parse(s: &str) -> Option<KeyId> {
        let v = unhex(s)?;
        Some(KeyId(v.try_into().ok()?))
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({}…)", &self.hex()[..16])
    }
}

/// Which SA a record belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SaIdentity {
    pub tunnel: String,
    pub outbound: bool,
    pub spi: u32,
}

impl fmt::Display for SaIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SA {:#010x} ({} of tunnel {})",
            self.spi,
            if self.outbound { "outbound" } else { "inbound" },
            self.tunnel
        )
    }
}

// ---------------------------------------------------------------- fast path

/// What [`SeqCounter::take`] hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// Numbers to use (possibly fewer than asked for, never empty).
    Ok(Range<u64>),
    /// The durable ceiling is reached: wait for the next block.
    Wait,
    /// The sequence space is used up (RFC 4303 §3.3.3: never cycle).
    Exhausted,
    /// Retired ([`SeqCounter::retire`]): an HA takeover could not prove
    /// any number of the space unused by the old active; the key must go.
    Retired,
}

/// Outbound sequence numbers under a durable ceiling, shared by workers.
#[derive(Debug)]
pub struct SeqCounter {
    /// Next number to hand out.
    next: AtomicU64,
    /// Highest number that may be handed out: durable on disk before it is
    /// stored here (or the end of the space for SAs that need no state).
    ceiling: AtomicU64,
    /// Highest number of the space: 2^32 - 1, or 2^64 - 2 with ESN.
    last: u64,
    /// Refusals at the ceiling ([`Take::Wait`]): demand for the next block.
    waits: AtomicU64,
    /// Set by [`SeqCounter::retire`]; read only once a take has failed.
    retired: AtomicBool,
}

impl SeqCounter {
    /// The highest sequence number with and without ESN (RFC 4303 §2.2;
    /// with ESN one short of 2^64 so `next` never overflows).
    pub const fn last_of(esn: bool) -> u64 {
        if esn {
            u64::MAX - 1
        } else {
            u32::MAX as u64
        }
    }

    /// A counter with no durable ceiling (keys that never outlive the
    /// process: IKE child SAs), starting at 1.
    pub fn unbounded(esn: bool) -> Self {
        let last = Self::last_of(esn);
        SeqCounter {
            next: AtomicU64::new(1),
            ceiling: AtomicU64::new(last),
            last,
            waits: AtomicU64::new(0),
            retired: AtomicBool::new(false),
        }
    }

    /// A counter for a key whose durable ceiling is `durable` (0 for a key
    /// never used): it starts above it, and hands out nothing until a new
    /// block is published.
    pub fn resume(durable: u64, esn: bool) -> Self {
        let last = Self::last_of(esn);
        SeqCounter {
            next: AtomicU64::new(durable.saturating_add(1)),
            ceiling: AtomicU64::new(durable.min(last)),
            last,
            waits: AtomicU64::new(0),
            retired: AtomicBool::new(false),
        }
    }

    /// Takes up to `n` numbers: one atomic update, the whole fast path.
    #[inline]
    pub fn take(&self, n: u64) -> Take {
        let ceiling = self.ceiling.load(Ordering::Acquire);
        match self
            .next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                (n > 0 && cur <= ceiling).then(|| cur + n.min(ceiling - cur + 1))
            }) {
            Ok(start) => Take::Ok(start..start + n.min(ceiling - start + 1)),
            Err(cur) if n == 0 && cur <= ceiling => Take::Ok(cur..cur),
            Err(_) if self.retired.load(Ordering::Relaxed) => Take::Retired,
            Err(_) if ceiling >= self.last => Take::Exhausted,
            Err(_) => {
                self.waits.fetch_add(1, Ordering::Relaxed);
                Take::Wait
            }
        }
    }

    /// Raises the ceiling to `durable`, which the caller has just made
    /// durable. Never lowers it.
    pub fn publish(&self, durable: u64) {
        self.ceiling
            .fetch_max(durable.min(self.last), Ordering::Release);
    }

    /// Moves the next number up to `n` (never down): the HA standby
    /// follows the active's reserved ceiling, so that once it takes over
    /// it sends nothing the active may have sent. Numbers at or above `n`
    /// are handed out only below a ceiling published afterwards.
    pub fn skip_to(&self, n: u64) {
        self.next
            .fetch_max(n.min(self.last.saturating_add(1)), Ordering::Relaxed);
    }

    /// Hands out nothing more, for good: past the end of the space. The HA
    /// standby taking over calls it when the numbers the old active may
    /// have used cannot be bounded below the end (`crate::hasync`).
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
        self.skip_to(self.last.saturating_add(1));
    }

    /// Whether [`SeqCounter::retire`] was called.
    pub fn retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// The next number to hand out.
    pub fn next(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// Highest number that may be handed out now.
    pub fn ceiling(&self) -> u64 {
        self.ceiling.load(Ordering::Acquire)
    }

    /// Highest number of the space.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// Refusals at the ceiling so far.
    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    /// Highest number handed out so far (0 if none).
    pub fn used(&self) -> u64 {
        self.next().saturating_sub(1)
    }
}

// ------------------------------------------------------------- planning

/// When and how far the control thread raises a ceiling: keep at least
/// `horizon` of traffic (at the rate seen lately) between the current
/// position and the ceiling, within `[min_block, max_block]`, and renew
/// once half of it is used. Bounded work: one write per half block.
#[derive(Debug, Clone)]
pub struct Planner {
    pub min_block: u64,
    pub max_block: u64,
    pub horizon: Duration,
    /// Also bring a ceiling far ahead of the rate back down (inbound only:
    /// lowering is safe there, under the window's lock, and it bounds what
    /// a crash costs after a burst).
    pub lower: bool,
    /// (time, position) samples for the rate.
    samples: VecDeque<(Instant, u64)>,
}

impl Planner {
    /// Outbound: numbers are plentiful (a restart skips at most one block),
    /// so blocks are large and a burst after idle does not hit the ceiling.
    pub fn outbound() -> Self {
        Planner::new(1 << 20, 1 << 26, Duration::from_secs(4))
    }

    /// Inbound: after a crash the sender's next packets up to the ceiling
    /// are dropped as replays, so blocks follow the rate (about one second
    /// of traffic), never fewer than 8 packets.
    pub fn inbound() -> Self {
        let mut p = Planner::new(8, 1 << 24, Duration::from_secs(1));
        p.lower = true;
        p
    }

    pub fn new(min_block: u64, max_block: u64, horizon: Duration) -> Self {
        Planner {
            min_block,
            max_block: max_block.max(min_block),
            horizon,
            lower: false,
            samples: VecDeque::new(),
        }
    }

    /// The block for the rate seen over the last few seconds.
    pub fn block(&self) -> u64 {
        let (Some(a), Some(b)) = (self.samples.front(), self.samples.back()) else {
            return self.min_block;
        };
        let dt = b.0.saturating_duration_since(a.0).as_secs_f64();
        let dn = b.1.saturating_sub(a.1) as f64;
        if dt <= 0.0 {
            return self.min_block;
        }
        let want = dn / dt * self.horizon.as_secs_f64();
        (want as u64).clamp(self.min_block, self.max_block)
    }

    /// Records that the position (next number to use, or replay top) is
    /// `pos` at `now`, and says which ceiling to make durable next, if the
    /// current one (`ceiling`) is less than half a block ahead. `demand`
    /// counts packets refused at the ceiling since the last call (they are
    /// traffic too: the rate must see them to grow the block).
    pub fn plan(
        &mut self,
        now: Instant,
        pos: u64,
        ceiling: u64,
        last: u64,
        demand: u64,
    ) -> Option<u64> {
        let seen = pos.saturating_add(demand);
        // A jump (a peer that restarted and skipped ahead) is not a rate:
        // faster than any block could follow, so start measuring again.
        if let Some((t, p)) = self.samples.back() {
            let dt = now.saturating_duration_since(*t).as_secs_f64();
            let implied =
                seen.saturating_sub(*p) as f64 / dt.max(1e-3) * self.horizon.as_secs_f64();
            if implied > self.max_block as f64 {
                self.samples.clear();
            }
        }
        self.samples.push_back((now, seen));
        while self.samples.len() > 2
            && now.saturating_duration_since(self.samples[0].0) > Duration::from_secs(5)
        {
            self.samples.pop_front();
        }
        if ceiling >= last {
            return None;
        }
        let block = self.block();
        let ahead = ceiling.saturating_sub(pos);
        let lower = self.lower && ahead > block.saturating_mul(4);
        let target = pos.saturating_add(block).min(last);
        let want = ahead < block / 2 || demand > 0 || lower;
        (want && (target > ceiling || (self.lower && target < ceiling))).then_some(target)
    }
}

// ----------------------------------------------------------------- records

/// The durable state of one SA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub sa: SaIdentity,
    pub key: KeyId,
    /// Outbound: every number sent is at most this. Inbound: every number
    /// accepted is at most this.
    pub ceiling: u64,
    /// Inbound after a clean stop: the replay window exactly (its top is
    /// `ceiling`; bit i of the list = `ceiling - i` was received).
    pub window: Option<Vec<u64>>,
}

const MAGIC: &str = "vecgate-sa-state 1";

impl Record {
    /// Text form: one `key value` per line, then a SHA-256 line over them
    /// (a torn or edited file is detected, never half-believed).
    pub fn encode(&self) -> String {
        let mut s = format!(
            "{MAGIC}\ntunnel {}\ndirection {}\nspi {:#010x}\nkey-id {}\nceiling {}\n",
            self.sa.tunnel,
            if self.sa.outbound { "out" } else { "in" },
            self.sa.spi,
            self.key.hex(),
            self.ceiling
        );
        if let Some(w) = &self.window {
            s.push_str("window ");
            for b in w {
                s.push_str(&format!("{b:016x}"));
            }
            s.push('\n');
        }
        let sum = digest::digest(&digest::SHA256, s.as_bytes());
        s.push_str(&format!("sha256 {}\n", hex(sum.as_ref())));
        s
    }

    /// Parses [`Record::encode`]'s output; `Err` says what is wrong.
    pub fn decode(text: &str) -> Result<Record, String> {
        let body_end = text
            .rfind("sha256 ")
            .ok_or_else(|| "no checksum line (torn or not a state file)".to_string())?;
        let (body, sum_line) = text.split_at(body_end);
        let sum = sum_line
            .strip_suffix('\n')
            .and_then(|l| l.strip_prefix("sha256 "))
            .and_then(unhex)
            .ok_or("malformed checksum line")?;
        if digest::digest(&digest::SHA256, body.as_bytes()).as_ref() != sum.as_slice() {
            return Err("checksum mismatch (torn or edited file)".into());
        }
        let mut lines = body.lines();
        if lines.next() != Some(MAGIC) {
            return Err("unknown format".into());
        }
        let (mut tunnel, mut dir, mut spi, mut key, mut ceiling, mut window) =
            (None, None, None, None, None, None);
        for l in lines {
            let (k, v) = l.split_once(' ').ok_or("malformed line")?;
            match k {
                "tunnel" => tunnel = Some(v.to_string()),
                "direction" => dir = Some(v == "out"),
                "spi" => {
                    spi = u32::from_str_radix(v.trim_start_matches("0x"), 16).ok();
                }
                "key-id" => key = KeyId::parse(v),
                "ceiling" => ceiling = v.parse::<u64>().ok(),
                "window" => {
                    if v.len() % 16 != 0 || v.len() > 16 * 2048 {
                        return Err("malformed window".into());
                    }
                    let w: Option<Vec<u64>> = (0..v.len() / 16)
                        .map(|i| u64::from_str_radix(v.get(i * 16..i * 16 + 16)?, 16).ok())
                        .collect();
                    window = Some(w.ok_or("malformed window")?);
                }
                _ => return Err(format!("unknown field {k}")),
            }
        }
        Ok(Record {
            sa: SaIdentity {
                tunnel: tunnel.ok_or("no tunnel")?,
                outbound: dir.ok_or("no direction")?,
                spi: spi.ok_or("no or bad spi")?,
            },
            key: key.ok_or("no or bad key-id")?,
            ceiling: ceiling.ok_or("no or bad ceiling")?,
            window,
        })
    }
}

/// How an SA with a persistent key may start, decided from its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// The key was never used here: start at 1.
    Fresh,
    /// Start above `ceiling` (outbound) / treat up to it as seen (inbound,
    /// `window` exact after a clean stop).
    From {
        ceiling: u64,
        window: Option<Vec<u64>>,
    },
}

/// Why an SA may not start. Every message names the SA and the way out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("{sa}: its state file {path} is unreadable ({why}); it is never guessed around: give the SA a fresh key, or run `vecgate sa reset-state` (the operator's override)")]
    Corrupt {
        sa: SaIdentity,
        path: PathBuf,
        why: String,
    },
    #[error("{sa}: its key was used by {other} (one key, one SA: a reused AES-GCM/ChaCha20 key repeats nonces); give it a fresh key, or run `vecgate sa reset-state` if the other SA is gone for good")]
    KeyReused { sa: SaIdentity, other: SaIdentity },
    #[error("{sa}: state directory {path}: {why}")]
    Io {
        sa: SaIdentity,
        path: PathBuf,
        why: String,
    },
}

/// The decision for `sa` with key `key`, given what its key's file held.
pub fn resume(
    sa: &SaIdentity,
    loaded: Option<Result<Record, String>>,
    path: &Path,
) -> Result<Resume, StateError> {
    match loaded {
        None => Ok(Resume::Fresh),
        Some(Err(why)) => Err(StateError::Corrupt {
            sa: sa.clone(),
            path: path.to_path_buf(),
            why,
        }),
        Some(Ok(r)) if r.sa != *sa => Err(StateError::KeyReused {
            sa: sa.clone(),
            other: r.sa,
        }),
        Some(Ok(r)) => Ok(Resume::From {
            ceiling: r.ceiling,
            window: r.window,
        }),
    }
}

// ------------------------------------------------------------------- store

/// A gateway's state directory: `sa/<key-id>.state`, one file per key.
/// Held with an exclusive `flock` on `lock` for the process lifetime, so
/// two gateways never share one and `reset-state` never edits a live one.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    sa_dir: PathBuf,
    _lock: File,
}

impl Store {
    /// Opens (creating, mode 0700) the directory and locks it.
    pub fn open(dir: &Path) -> io::Result<Store> {
        let lock = Self::prepare(dir)?;
        match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "state directory {} is in use by another running vecgate",
                        dir.display()
                    ),
                ))
            }
            Err(e) => return Err(e.into()),
        }
        Ok(Store {
            dir: dir.to_path_buf(),
            sa_dir: dir.join("sa"),
            _lock: lock,
        })
    }

    /// Creates the directory (0700) and `sa/`, and opens the lock file,
    /// checking that the directory is writable.
    fn prepare(dir: &Path) -> io::Result<File> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir.join("sa"))?;
        if !dir.is_dir() {
            return Err(io::Error::other("not a directory"));
        }
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(dir.join("lock"))
    }

    /// What `vecgate check` reports: whether `dir` exists as a writable
    /// directory private to its owner (`Ok(None)`), or does not exist yet
    /// but can be created (`Ok(Some(note))`).
    pub fn check(dir: &Path) -> Result<Option<String>, String> {
        match fs::metadata(dir) {
            Ok(m) if !m.is_dir() => Err(format!("{} is not a directory", dir.display())),
            Ok(m) => {
                let probe = dir.join(format!(".check-{}", std::process::id()));
                File::create(&probe)
                    .and_then(|_| fs::remove_file(&probe))
                    .map_err(|e| format!("{} is not writable: {e}", dir.display()))?;
                if m.permissions().mode() & 0o077 != 0 {
                    return Err(format!(
                        "{} is accessible to others (mode {:o}); it should be 0700",
                        dir.display(),
                        m.permissions().mode() & 0o777
                    ));
                }
                Ok(None)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Created at start: its nearest existing ancestor must be
                // writable.
                let mut p = dir.parent();
                while let Some(a) = p {
                    if a.exists() {
                        let probe = a.join(format!(".vecgate-check-{}", std::process::id()));
                        return File::create(&probe)
                            .and_then(|_| fs::remove_file(&probe))
                            .map(|_| {
                                Some(format!(
                                    "{} does not exist yet: created (mode 0700) at start",
                                    dir.display()
                                ))
                            })
                            .map_err(|e| {
                                format!(
                                    "{} does not exist and cannot be created in {}: {e}",
                                    dir.display(),
                                    a.display()
                                )
                            });
                    }
                    p = a.parent();
                }
                Err(format!("{} cannot be created", dir.display()))
            }
            Err(e) => Err(format!("{}: {e}", dir.display())),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of key `key`.
    pub fn path_of(&self, key: &KeyId) -> PathBuf {
        path_in(&self.sa_dir, key)
    }

    /// Reads the record of `key`: `None` if there is none, `Some(Err)` if
    /// the file is there but unreadable.
    pub fn load(&self, key: &KeyId) -> Option<Result<Record, String>> {
        load_in(&self.sa_dir, key)
    }

    /// Makes `r` durable: a temporary file, fsync, rename over the old one,
    /// fsync of the directory. When this returns `Ok` a power loss keeps
    /// `r`; before, the previous record.
    pub fn save(&self, r: &Record) -> io::Result<()> {
        save_in(&self.sa_dir, r)
    }

    /// Forgets `key`'s record (the operator's override).
    pub fn remove(&self, key: &KeyId) -> io::Result<bool> {
        remove_in(&self.sa_dir, key)
    }

    /// Reads the record of `key` in state directory `dir` without opening
    /// it (no lock: for `vecgate check`, which only reports).
    pub fn peek(dir: &Path, key: &KeyId) -> Option<Result<Record, String>> {
        load_in(&dir.join("sa"), key)
    }

    /// The file of `key` in state directory `dir`.
    pub fn path_in(dir: &Path, key: &KeyId) -> PathBuf {
        path_in(&dir.join("sa"), key)
    }

    /// Removes the records of `key` in `dir` without a running gateway:
    /// fails if one holds the directory.
    pub fn reset_offline(dir: &Path, keys: &[KeyId]) -> io::Result<Vec<PathBuf>> {
        let s = Store::open(dir)?;
        let mut gone = Vec::new();
        for k in keys {
            if s.remove(k)? {
                gone.push(s.path_of(k));
            }
        }
        Ok(gone)
    }
}

fn path_in(sa_dir: &Path, key: &KeyId) -> PathBuf {
    sa_dir.join(format!("{}.state", key.hex()))
}

fn load_in(sa_dir: &Path, key: &KeyId) -> Option<Result<Record, String>> {
    let path = path_in(sa_dir, key);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => return Some(Err(e.to_string())),
    };
    let r = std::str::from_utf8(&bytes)
        .map_err(|_| "not text".to_string())
        .and_then(Record::decode)
        .and_then(|r| {
            if r.key == *key {
                Ok(r)
            } else {
                Err("file name and key-id disagree".into())
            }
        });
    Some(r)
}

fn save_in(sa_dir: &Path, r: &Record) -> io::Result<()> {
    let path = path_in(sa_dir, &r.key);
    let tmp = path.with_extension("tmp");
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(r.encode().as_bytes())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    File::open(sa_dir)?.sync_all()
}

fn remove_in(sa_dir: &Path, key: &KeyId) -> io::Result<bool> {
    match fs::remove_file(path_in(sa_dir, key)) {
        Ok(()) => {
            File::open(sa_dir)?.sync_all()?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || s.len() > 4096 {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(s.get(i * 2..i * 2 + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests;
