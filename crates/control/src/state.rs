//! The control state: the running configuration and handles on the
//! dataplane, shared by the API handlers. Every change goes copy → edit →
//! validate → build → publish ([`Control::apply`]), so a rejected change
//! leaves both the configuration and the tables as they were.
//!
//! The operations sit beside the handle, a file per concept: interfaces
//! and VRFs, routes (static and learned), tunnels, SAs, the VRRP speaker,
//! and inspection (status, counters, neighbours, trace, capture). The
//! reload executor sits next to its plan ([`crate::reload`]).

use crate::ops::{HaOps, IkeSource, PortOps, ReloadHook, SaOps, SaSource, TableBuilder};
use crate::NetdevFacts;
use dataplane::counters::{PortSnapshot, WorkerCounters};
use dataplane::tables::SharedTables;
use dataplane::worker::Command;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use vecgate_config::Config;

mod apply;
mod ha;
mod inspect;
mod interfaces;
mod pool;
mod routes;
mod sas;
mod tunnels;

/// Also at the crate root.
pub use crate::error::ApiError;
pub use inspect::{CAPTURE_MAX_BYTES, CAPTURE_MAX_FRAMES, MAILBOX_WAIT, TRACE_KEEP};

/// What this build's dataplane can do (later features switch these on).
#[derive(Clone, Copy, Debug, Default)]
pub struct Capabilities {
    /// Tunnels can be created and deleted live.
    pub tunnels: bool,
}

/// Handles on the running dataplane.
pub struct Dataplane {
    pub tables: Arc<SharedTables>,
    pub build: TableBuilder,
    /// One per worker, summed on read.
    pub counters: Vec<Arc<WorkerCounters>>,
    /// One per worker.
    pub mailboxes: Vec<crossbeam_channel::Sender<Command>>,
    /// Index-aligned with the configuration's interfaces (fixed at startup).
    pub netdevs: Vec<NetdevFacts>,
    /// The IPsec SAs as `GET /sas` shows them (SPIs and algorithms, never
    /// keys); `None` without IPsec.
    pub sas: Option<SaSource>,
    /// SA install / switch / remove (`POST /sas`, `POST
    /// /tunnels/{name}/switch`, `DELETE /sas/{spi}`); `None` without IPsec.
    pub sa_ops: Option<Box<dyn SaOps>>,
}

/// The management plane's state, shared by the API handlers.
pub struct Control {
    config: Mutex<Config>,
    dp: Dataplane,
    caps: Capabilities,
    trace: Mutex<VecDeque<String>>,
    started: Instant,
    ike: Mutex<Option<IkeSource>>,
    ha: Mutex<Option<Arc<dyn HaOps>>>,
    /// The pool member (`[pool]`), once its thread runs.
    pool: Mutex<Option<Arc<dyn crate::ops::PoolOps>>>,
    /// Per tunnel: its port's counters when it was created live (virtual
    /// ports are reused after a full round of the allocator; reports are
    /// since creation).
    tunnel_base: Mutex<HashMap<String, PortSnapshot>>,
    /// Serializes tunnel creation and deletion (ipsec ones have steps
    /// outside [`Control::apply`]: registry, IKE).
    tunnel_ops: Mutex<()>,
    /// ipsec tunnels created live with an inline (hex) key: their SAs are
    /// not in the running configuration, so later SA changes are not
    /// recorded either (a partial set would not validate).
    inline_keyed: Mutex<HashSet<String>>,
    /// The API's access-control counters (`/metrics`).
    auth_stats: Arc<crate::auth::AuthStats>,
    /// Routes learned over FPM, as last published (taken after `config`
    /// when both are held).
    learned: Mutex<Arc<crate::learned::Learned>>,
    /// (VRF, prefix) of the static routes added by `POST /routes` (the
    /// others came from the file): `show routes` says `api`.
    api_routes: Mutex<HashSet<(String, String)>>,
    fpm: Arc<crate::fpm::FpmStats>,
    /// Told when a reload starts (`true`) and when it has ended, applied
    /// or refused (`false`): systemd's `RELOADING=1` / `READY=1`.
    reload_hook: Mutex<Option<ReloadHook>>,
    /// Attaches and releases interfaces live; `None`: interfaces are
    /// fixed at startup (a change of the set is refused).
    ports: Mutex<Option<Arc<dyn PortOps>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A handler that panicked mid-change never published anything, so
    // the data is still the last good state.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Control {
    pub fn new(config: Config, dp: Dataplane, caps: Capabilities) -> Arc<Self> {
        Arc::new(Control {
            config: Mutex::new(config),
            dp,
            caps,
            trace: Mutex::new(VecDeque::new()),
            started: Instant::now(),
            ike: Mutex::new(None),
            ha: Mutex::new(None),
            pool: Mutex::new(None),
            tunnel_base: Mutex::new(Default::default()),
            tunnel_ops: Mutex::new(()),
            inline_keyed: Mutex::new(Default::default()),
            auth_stats: Arc::default(),
            learned: Mutex::new(Arc::new(Default::default())),
            api_routes: Mutex::new(Default::default()),
            fpm: Arc::new(Default::default()),
            reload_hook: Mutex::new(None),
            ports: Mutex::new(None),
        })
    }

    /// Lets [`Control::apply`] attach and release interfaces live.
    pub fn set_port_ops(&self, ops: Arc<dyn PortOps>) {
        *lock(&self.ports) = Some(ops);
    }

    /// The running configuration.
    pub fn config(&self) -> Config {
        lock(&self.config).clone()
    }

    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// Calls `f(true)` when a live reload (not a dry run) starts and
    /// `f(false)` when it has ended, applied or refused, whichever way it
    /// came (`POST /config`, `vecgate reload`, SIGHUP).
    pub fn set_reload_hook(&self, f: ReloadHook) {
        *lock(&self.reload_hook) = Some(f);
    }

    /// Frames a reload that was refused before it reached
    /// [`Control::reload`] (SIGHUP with a file that does not parse), so
    /// systemd sees every reload start and end.
    pub fn reload_refused_early(&self) {
        if let Some(h) = lock(&self.reload_hook).clone() {
            h(true);
            h(false);
        }
    }

    /// The API's access-control counters (401s, throttled 401s, failed
    /// TLS handshakes).
    pub fn auth_stats(&self) -> &Arc<crate::auth::AuthStats> {
        &self.auth_stats
    }

    /// The FPM server's counters.
    pub fn fpm_stats(&self) -> &crate::fpm::FpmStats {
        &self.fpm
    }

    /// Serializes the changes with steps outside [`Control::apply`]
    /// (tunnels, reloads: the SA registry, IKE).
    pub(crate) fn serial(&self) -> MutexGuard<'_, ()> {
        lock(&self.tunnel_ops)
    }

    pub(crate) fn reload_hook(&self) -> Option<ReloadHook> {
        lock(&self.reload_hook).clone()
    }

    /// The API's own views after a reload from `cur` to `new`: routes the
    /// API added and tunnels keyed inline that are gone are forgotten
    /// (so are those `re_registered`, now keyed from the file), and new
    /// tunnels' counters start now.
    pub(crate) fn reloaded(
        &self,
        cur: &Config,
        new: &Config,
        re_registered: &dyn Fn(&str) -> bool,
    ) {
        lock(&self.api_routes).retain(|(v, p)| {
            new.routes
                .iter()
                .any(|r| r.vrf == *v && r.prefix.to_string() == *p)
        });
        lock(&self.inline_keyed).retain(|n| new.tunnel(n).is_some() && !re_registered(n));
        let sum = self.counters();
        let ports = self.tunnel_ports(new);
        let mut base = lock(&self.tunnel_base);
        base.retain(|n, _| new.tunnel(n).is_some());
        for t in new.tunnels.iter().filter(|t| cur.tunnel(&t.name).is_none()) {
            if let Some((_, Some(p))) = ports.iter().find(|(n, _)| *n == t.name) {
                let snap = sum.ports.get(usize::from(*p)).copied().unwrap_or_default();
                base.insert(t.name.clone(), snap);
            }
        }
    }
}
