//! FPM server: FRR's zebra (`-M dplane_fpm_nl`) connects and streams the
//! routes it selected, as netlink messages in FPM frames (FRR
//! `doc/developer/fpm.rst`: u8 version 1, u8 type 1 = netlink, u16
//! big-endian length including this 4-byte header).
//!
//! What arrives: `RTM_NEWNEXTHOP` / `RTM_DELNEXTHOP` (next-hop objects and
//! groups, sent before the routes that use them), then `RTM_NEWROUTE` /
//! `RTM_DELROUTE` that name their next hops inline (`RTA_GATEWAY`,
//! `RTA_MULTIPATH`) or by id (`RTA_NH_ID`). Routes go into the VRF their
//! table id is mapped to (`[[routing.table]]`), through
//! [`Control::set_learned`]: the same build-and-publish the REST API's
//! route changes use. Many messages make one publish: the tables are
//! rebuilt at most every [`MIN_PUBLISH_GAP`] (or twice the last build's
//! time), and at once when zebra pauses.
//!
//! On every connect zebra replays its whole RIB: the routes vecgate had
//! are marked stale, the replay refreshes what still exists, and the rest
//! is swept once the stream has been quiet for [`REPLAY_QUIET`]. When zebra
//! goes away its routes stay until it comes back and replays (as the
//! kernel keeps zebra's routes when zebra dies).
//!
//! Several zebras may feed one gateway: the one of `[routing] fpm` (tables
//! mapped to VRFs) and one per tenant VRF whose control plane runs in a
//! namespace of its own (`[[routing.punt]] fpm`, every route its VRF's).
//! Each listener keeps its own RIB and session; a publish joins them.
//!
//! Everything read is bounded: a frame is at most 65535 bytes by its
//! format, a VRF holds at most `max_routes` learned routes, zebra at most
//! `max_nexthop_groups` next-hop objects, a group at most
//! [`MAX_GROUP_MEMBERS`] members. What cannot be installed is counted by
//! reason ([`FpmStats`]) and logged, at most [`LOG_PER_SECOND`] lines a
//! second.

mod netlink;
mod rib;
mod session;
mod stats;

use crate::learned::Learned;
use crate::state::Control;
use dataplane::fib::Prefix;
use rib::Rib;
use session::{apply_frames, read_frames, Session, BUF};
use stats::Limited;
pub use stats::{Failure, FpmStats};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// At least this long between two table publishes while messages stream.
pub const MIN_PUBLISH_GAP: Duration = Duration::from_millis(20);
/// After a connect, the replay is over once the stream is quiet this long.
pub const REPLAY_QUIET: Duration = Duration::from_millis(1500);
/// Most distinct gateways for which a publish still patches the FIB
/// instead of rebuilding it (see `Rib::take_changes`).
pub const MAX_PATCH_GATEWAYS: usize = 1024;
/// Most members of one next-hop group.
pub const MAX_GROUP_MEMBERS: usize = 256;
/// Most install-failure log lines a second (the rest are counted).
pub const LOG_PER_SECOND: u32 = 10;
/// How long one read waits (also the pace of publish/sweep checks).
const TICK: Duration = Duration::from_millis(10);

/// What the FPM server is told by the configuration.
#[derive(Clone, Debug)]
pub struct FpmSettings {
    /// Kernel table id → VRF name.
    pub tables: Vec<(u32, String)>,
    pub max_routes: u32,
    pub max_nexthop_groups: u32,
}

impl FpmSettings {
    pub fn from_config(r: &vecgate_config::Routing) -> Self {
        FpmSettings {
            tables: r.table_map().into_iter().map(|t| (t.id, t.vrf)).collect(),
            max_routes: r.max_routes,
            max_nexthop_groups: r.max_nexthop_groups,
        }
    }
}

/// One FPM listener and whose routes its zebra sends.
pub struct Source {
    pub listener: TcpListener,
    /// For the logs: the address, and the namespace when not vecgate's.
    pub label: String,
    pub settings: FpmSettings,
    /// A tenant VRF's own zebra (`[[routing.punt]] fpm`): every route it
    /// sends is this VRF's, whatever its table (its zebra's main table).
    pub vrf: Option<String>,
}

/// Binds the FPM listener (at startup, so a taken port stops `vecgate
/// run` with a clear error).
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let l = TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Serves zebra on every source for the life of the process (one session
/// per source at a time; a new connection replaces the old one, as zebra
/// reconnects).
pub fn spawn(
    ctl: Arc<Control>,
    sources: Vec<Source>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("fpm".into())
        .spawn(move || serve(&ctl, sources))
}

/// One source's listener, session and RIB.
struct Feed {
    label: String,
    listener: TcpListener,
    session: Option<Session>,
    rib: Rib,
}

impl Feed {
    fn accept(&mut self, stats: &FpmStats) {
        match self.listener.accept() {
            Ok((stream, peer)) => {
                match self.session.take() {
                    Some(old) => {
                        tracing::info!(at = %self.label, old = %old.peer, new = %peer, "fpm: zebra reconnected");
                    }
                    None => {
                        stats.connected.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(TICK));
                let _ = stream.set_nodelay(true);
                stats.connections.fetch_add(1, Ordering::Relaxed);
                tracing::info!(at = %self.label, %peer, "fpm: zebra connected; its replay replaces the learned routes");
                self.rib.begin_session();
                let now = Instant::now();
                self.session = Some(Session {
                    stream,
                    peer,
                    buf: vec![0; BUF],
                    have: 0,
                    started: now,
                    last_msg: now,
                    replaying: true,
                });
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => {
                tracing::warn!(at = %self.label, "fpm: accept: {e}");
            }
        }
    }

    /// Reads what its zebra sent; true when frames came. Ends the replay
    /// once the stream has been quiet for [`REPLAY_QUIET`].
    fn read(&mut self, stats: &FpmStats, log: &mut Limited) -> bool {
        let Some(s) = self.session.as_mut() else {
            return false;
        };
        let got = match read_frames(s, &mut self.rib, stats, log) {
            Ok(n) => n > 0,
            Err(why) => {
                tracing::warn!(at = %self.label, peer = %s.peer, "fpm: session ends: {why}; learned routes stay until zebra replays");
                stats.connected.fetch_sub(1, Ordering::Relaxed);
                self.session = None;
                return false;
            }
        };
        if got {
            s.last_msg = Instant::now();
        } else if s.replaying && s.last_msg.elapsed() >= REPLAY_QUIET {
            s.replaying = false;
            let n = self.rib.sweep();
            stats.swept.fetch_add(n, Ordering::Relaxed);
            tracing::info!(
                at = %self.label,
                stale = n,
                after_ms = s.started.elapsed().as_millis() as u64,
                "fpm: replay complete, stale routes removed"
            );
        }
        got
    }
}

fn serve(ctl: &Control, sources: Vec<Source>) {
    let stats = ctl.fpm_stats();
    let mut feeds: Vec<Feed> = sources
        .into_iter()
        .map(|s| Feed {
            label: s.label,
            listener: s.listener,
            session: None,
            rib: match s.vrf {
                Some(vrf) => Rib::for_vrf(s.settings, vrf),
                None => Rib::new(s.settings),
            },
        })
        .collect();
    let mut log = Limited::new();
    let mut last_publish = Instant::now();
    let mut gap = MIN_PUBLISH_GAP;
    let mut unresolved_before: HashSet<(String, Prefix)> = HashSet::new();
    let mut pending_since = Instant::now();
    loop {
        let before = feeds.iter().any(|f| f.rib.dirty);
        let mut got = false;
        let mut any_session = false;
        for f in &mut feeds {
            f.accept(stats);
            got |= f.read(stats, &mut log);
            any_session |= f.session.is_some();
        }
        if !any_session {
            std::thread::sleep(TICK);
        }
        let dirty = feeds.iter().any(|f| f.rib.dirty);
        if !before && dirty {
            // The oldest change not yet in the FIB arrived in this tick.
            pending_since = Instant::now();
        }
        // Publish when zebra pauses, or at the pace the builds allow.
        if dirty && (!got || last_publish.elapsed() >= gap) {
            let t0 = Instant::now();
            let mut learned = Learned::default();
            let mut changes = Some(Vec::new());
            for f in &mut feeds {
                learned.vrfs.extend(f.rib.learned(stats, &mut log).vrfs);
                f.rib.dirty = false;
                // Every RIB's record is cleared, even once one needs a
                // full build.
                match (f.rib.take_changes(), changes.as_mut()) {
                    (Some(c), Some(all)) => all.extend(c),
                    (None, _) => changes = None,
                    _ => {}
                }
            }
            let learned = Arc::new(learned);
            let patched = changes.and_then(|changes| {
                let own = crate::learned::config_prefixes(&ctl.config());
                // Asked once per route with a gateway: most share a few
                // gateways, so the answer is kept for the publish.
                let known: RefCell<HashMap<String, HashMap<IpAddr, bool>>> = Default::default();
                let defer = |vrf: &str, a: IpAddr| {
                    if let Some(&d) = known.borrow().get(vrf).and_then(|m| m.get(&a)) {
                        return d;
                    }
                    let d = feeds.iter().any(|f| f.rib.under_learned(vrf, a, &own));
                    known
                        .borrow_mut()
                        .entry(vrf.to_owned())
                        .or_default()
                        .insert(a, d);
                    d
                };
                ctl.patch_learned(learned.clone(), &changes, &defer)
            });
            let result = match patched {
                Some(u) => {
                    stats.patches.fetch_add(1, Ordering::Relaxed);
                    Ok(u)
                }
                None => ctl.set_learned(learned),
            };
            stats.record_delay(pending_since.elapsed());
            match result {
                Ok(unresolved) => {
                    // Counted once when a route becomes unresolvable, not
                    // at every publish it stays so.
                    let now: HashSet<(String, Prefix)> = unresolved.into_iter().collect();
                    for (vrf, p) in now.difference(&unresolved_before) {
                        stats.fail(Failure::Unresolved);
                        log.warn(|| format!("{p} in vrf {vrf}: no next hop resolves"));
                    }
                    unresolved_before = now;
                }
                Err(e) => tracing::warn!("fpm: tables not rebuilt: {}", e.message),
            }
            stats.publishes.fetch_add(1, Ordering::Relaxed);
            last_publish = Instant::now();
            gap = MIN_PUBLISH_GAP.max(t0.elapsed() * 2);
        }
    }
}

/// Feeds FPM frames to a fresh RIB and returns the learned routes (for
/// the fuzzer and tests: never panics, whatever the bytes).
pub fn decode_for_test(settings: FpmSettings, frames: &[u8]) -> (Learned, Vec<(Failure, u64)>) {
    let stats = FpmStats::default();
    let mut rib = Rib::new(settings);
    let mut log = Limited::new();
    apply_frames(frames, &mut rib, &stats, &mut log);
    (rib.learned(&stats, &mut log), stats.failures())
}

#[cfg(test)]
mod tests;
