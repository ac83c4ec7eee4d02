//! The control state: the running configuration and handles on the
//! dataplane. Every change goes copy → edit → validate → build → publish,
//! so a rejected change leaves both the configuration and the tables as
//! they were.

use crate::model::*;
use dataplane::counters::{CounterSnapshot, PortSnapshot, WorkerCounters};
use dataplane::neighbour::{fmt_mac, State};
use dataplane::tables::{SharedTables, Tables};
use dataplane::worker::{Captured, Command, NeighbourEntry, PortQueue};
use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use vecgate_config::{Config, Prefix, Via, DEFAULT_VRF};

/// Builds dataplane tables from a configuration and the learned routes
/// ([`crate::learned`]): the same function `vecgate run` uses at startup,
/// so live changes and restarts agree.
pub type TableBuilder =
    Box<dyn Fn(&Config, &crate::learned::Learned) -> Result<Tables, String> + Send + Sync>;

/// What the host reported about interface `i`'s netdev.
#[derive(Clone, Copy, Debug)]
pub struct NetdevFacts {
    pub mac: [u8; 6],
    pub mtu: u32,
    pub offloads: bool,
}

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

/// Interfaces attached and released while running (the binary's I/O
/// backends, behind a trait so this crate opens no socket).
pub trait PortOps: Send + Sync {
    /// Claims `ifc`'s netdev (one gateway per netdev), opens one queue on
    /// it per worker, in worker order, as at startup, and installs its
    /// ingress guard; from now on the table builder knows its facts.
    /// Nothing reaches a worker yet.
    fn open(
        &self,
        ifc: &vecgate_config::Interface,
    ) -> Result<(NetdevFacts, Vec<PortQueue>), String>;
    /// Releases what [`PortOps::open`] claimed for interface `name`
    /// (guard, netdev lock, facts), once no worker polls it any more.
    fn close(&self, name: &str);
}

/// Lists the IPsec SAs (vecgate's SA registry, behind a closure so this
/// crate needs no IPsec dependency).
pub type SaSource = Box<dyn Fn() -> Vec<SaInfo> + Send + Sync>;

/// Where an SA's key comes from: the request's hex text, or the text of
/// its key file, read by [`read_key_file`] before any lock is taken.
#[derive(Clone, Copy)]
pub enum KeySource<'a> {
    Hex(&'a str),
    File(&'a [u8]),
}

impl<'a> KeySource<'a> {
    /// The inline hex when the request has one, else the key file's text
    /// (empty when it was not read).
    pub fn of(hex: Option<&'a str>, file: Option<&'a [u8]>) -> Self {
        match (hex, file) {
            (Some(h), _) => KeySource::Hex(h),
            (None, f) => KeySource::File(f.unwrap_or(&[])),
        }
    }
}

/// Reads a key or PSK file named in a request (a private regular file of
/// at most 4 KiB, [`vecgate_config::secret`]): never blocks on a FIFO,
/// never reads a device. Called on the blocking pool, before any lock,
/// so a bad path costs one refused request and nothing else. `field`
/// names the request field in the error.
pub fn read_key_file(
    path: &std::path::Path,
    field: &str,
) -> Result<zeroize::Zeroizing<Vec<u8>>, ApiError> {
    vecgate_config::secret::read_secret_file(path, vecgate_config::secret::MAX_SECRET_LEN)
        .map_err(|e| ApiError::bad(field, format!("{field} {}: {e}", path.display())))
}

/// Runtime SA changes on vecgate's SA registry (behind a trait so this
/// crate needs no IPsec dependency). `sa` is the SA as the TOML would
/// hold it (its `key_file` is meaningless with [`KeySource::Hex`]).
/// Errors are [`ApiError`]s naming the field.
pub trait SaOps: Send + Sync {
    /// Installs an inbound SA for ipsec tunnel `t`.
    fn install_inbound(
        &self,
        t: &vecgate_config::Tunnel,
        sa: &vecgate_config::StaticSa,
        key: KeySource<'_>,
    ) -> Result<(), ApiError>;
    /// Switches `t`'s outbound SA; returns the previous SPI.
    fn switch_outbound(
        &self,
        t: &vecgate_config::Tunnel,
        sa: &vecgate_config::StaticSa,
        key: KeySource<'_>,
    ) -> Result<u32, ApiError>;
    /// Removes the inbound SA `spi`; returns its tunnel's name.
    fn remove_inbound(&self, spi: u32) -> Result<String, ApiError>;
    /// Registers the new ipsec tunnel `t` of `cfg` before it enters the
    /// tables: its static SAs keyed from `keys` (one per `t.ipsec.sas`, in
    /// order), or its IKEv2 state machine keyed with `psk` (the PSK file's
    /// contents; proposals parsed; not started yet). Errors name the
    /// request field (`sa[1].key`, `ike.psk_file`) and never hold key
    /// material.
    fn add_tunnel(
        &self,
        cfg: &vecgate_config::Config,
        t: &vecgate_config::Tunnel,
        keys: &[KeySource<'_>],
        psk: Option<&[u8]>,
    ) -> Result<(), ApiError>;
    /// The tunnel is in the published tables: an IKEv2 tunnel starts
    /// negotiating (or waits for the peer).
    fn start_tunnel(&self, name: &str);
    /// The tunnel is about to leave the tables: an IKEv2 tunnel tells the
    /// peer (INFORMATIONAL DELETE, RFC 7296 §1.4.1) and waits a moment for
    /// the answer. Blocks (call from a blocking context).
    fn stop_tunnel(&self, name: &str);
    /// The tunnel left the tables: its SAs leave the registry.
    fn remove_tunnel(&self, name: &str) -> Result<(), ApiError>;
}

/// Lists the IKEv2 tunnels with their IKE and child SAs (`GET /ike`).
pub type IkeSource = Box<dyn Fn() -> Vec<crate::model::IkeTunnelInfo> + Send + Sync>;

/// The VRRP speaker as the API sees it (`GET /ha`, `POST /ha/switchover`).
/// State sync will hang off the same speaker, not off this interface.
pub trait HaOps: Send + Sync {
    fn groups(&self) -> Vec<crate::model::HaGroupInfo>;
    /// Resigns mastership (priority 0, RFC 5798 §6.4.3); returns the groups
    /// that resigned. Blocks (call from a blocking context).
    fn switchover(
        &self,
        spec: &crate::model::HaSwitchover,
    ) -> Result<Vec<crate::model::HaGroupInfo>, ApiError>;
}

/// A refused request: HTTP status, message and the offending field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>, field: Option<&str>) -> Self {
        ApiError {
            status,
            message: message.into(),
            field: field.map(str::to_owned),
        }
    }
    pub fn bad(field: &str, message: impl Into<String>) -> Self {
        Self::new(400, message, Some(field))
    }
    pub fn not_found(field: &str, message: impl Into<String>) -> Self {
        Self::new(404, message, Some(field))
    }
}

/// Lines of trace kept on the control side at most.
pub const TRACE_KEEP: usize = 16_384;
/// Most frames and bytes one capture may return.
pub const CAPTURE_MAX_FRAMES: u64 = 10_000;
pub const CAPTURE_MAX_BYTES: usize = 64 << 20;
/// How long to wait for a worker to answer a mailbox request.
pub const MAILBOX_WAIT: Duration = Duration::from_secs(2);

/// The management plane's state, shared by the API handlers.
pub struct Control {
    config: Mutex<Config>,
    dp: Dataplane,
    caps: Capabilities,
    trace: Mutex<VecDeque<String>>,
    started: Instant,
    ike: Mutex<Option<IkeSource>>,
    ha: Mutex<Option<Arc<dyn HaOps>>>,
    /// Per tunnel: its port's counters when it was created live (virtual
    /// ports are reused after a full round of the allocator; reports are
    /// since creation).
    tunnel_base: Mutex<std::collections::HashMap<String, PortSnapshot>>,
    /// Serializes tunnel creation and deletion (ipsec ones have steps
    /// outside [`Control::apply`]: registry, IKE).
    tunnel_ops: Mutex<()>,
    /// ipsec tunnels created live with an inline (hex) key: their SAs are
    /// not in the running configuration, so later SA changes are not
    /// recorded either (a partial set would not validate).
    inline_keyed: Mutex<std::collections::HashSet<String>>,
    /// The API's access-control counters (`/metrics`).
    auth_stats: Arc<crate::auth::AuthStats>,
    /// Routes learned over FPM, as last published (taken after `config`
    /// when both are held).
    learned: Mutex<Arc<crate::learned::Learned>>,
    /// (VRF, prefix) of the static routes added by `POST /routes` (the
    /// others came from the file): `show routes` says `api`.
    api_routes: Mutex<std::collections::HashSet<(String, String)>>,
    fpm: Arc<crate::fpm::FpmStats>,
    /// Told when a reload starts (`true`) and when it has ended, applied
    /// or refused (`false`): systemd's `RELOADING=1` / `READY=1`.
    reload_hook: Mutex<Option<ReloadHook>>,
    /// Attaches and releases interfaces live; `None`: interfaces are
    /// fixed at startup (a change of the set is refused).
    ports: Mutex<Option<Arc<dyn PortOps>>>,
}

/// See [`Control::set_reload_hook`].
pub type ReloadHook = Arc<dyn Fn(bool) + Send + Sync>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A handler that panicked mid-change never published anything, so
    // the data is still the last good state.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn state_str(s: State) -> &'static str {
    match s {
        State::Incomplete => "incomplete",
        State::Reachable => "reachable",
        State::Stale => "stale",
        State::Probe => "probe",
    }
}

/// The first of `fields` that a validator message talks about.
fn field_in(message: &str, fields: &[&str]) -> Option<String> {
    fields
        .iter()
        .filter_map(|f| {
            let hit = [format!("{f} "), format!("{f}:"), format!("\"{f}\"")]
                .iter()
                .filter_map(|pat| message.find(pat.as_str()))
                .min()?;
            Some((hit, *f))
        })
        .min()
        .map(|(_, f)| f.to_owned())
        .or_else(|| fields.first().map(|f| (*f).to_owned()))
}

/// The request field a validator message about a new tunnel talks about:
/// IKE and SA keys by their path in the request (`ike.psk_file`,
/// `sa[1].spi`), the tunnel's own keys by name.
fn tunnel_field(message: &str) -> String {
    use vecgate_config::{IKE_KEYS, SA_KEYS, TUNNEL_KEYS};
    if message.contains("mutually exclusive") {
        return "ike".into();
    }
    if let Some(i) = message.find("[tunnel.ike]") {
        return field_in(&message[i..], IKE_KEYS)
            .map_or_else(|| "ike".into(), |f| format!("ike.{f}"));
    }
    if let Some(i) = message.find("[[tunnel.sa]] #") {
        let rest = &message[i + 15..];
        let n: usize = rest
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|d| d.parse().ok())
            .unwrap_or(1);
        let f = field_in(rest, SA_KEYS).unwrap_or_else(|| "spi".into());
        return format!("sa[{}].{f}", n.saturating_sub(1));
    }
    if message.contains("[[tunnel.sa]]") {
        return "sa".into();
    }
    field_in(message, TUNNEL_KEYS).unwrap_or_else(|| "name".into())
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

    /// The port of interface or tunnel `name` in the published tables.
    pub fn port_of(&self, name: &str) -> Option<u16> {
        Self::port_in(&self.dp.tables.load(), name)
    }

    fn port_in(tables: &Tables, name: &str) -> Option<u16> {
        tables
            .interfaces
            .iter()
            .flatten()
            .find(|i| i.name == name)
            .map(|i| i.port)
    }

    /// Every configured interface with its port's counters (ports are
    /// stable per interface, not its place in the file: one added live
    /// sits above the tunnels' first ports).
    pub fn interface_counters(&self) -> Vec<(String, PortSnapshot)> {
        let cfg = self.config();
        let sum = self.counters();
        let tables = self.dp.tables.load();
        cfg.interfaces
            .iter()
            .map(|i| {
                let c = Self::port_in(&tables, &i.name)
                    .and_then(|p| sum.ports.get(usize::from(p)).copied())
                    .unwrap_or_default();
                (i.name.clone(), c)
            })
            .collect()
    }

    /// Sends `make(worker)` to every worker and waits (up to
    /// [`MAILBOX_WAIT`] each) until each has handled it.
    fn tell_workers(&self, mut make: impl FnMut(usize, crossbeam_channel::Sender<()>) -> Command) {
        let mut waits = Vec::new();
        for (w, mb) in self.dp.mailboxes.iter().enumerate() {
            let (tx, rx) = crossbeam_channel::bounded(1);
            if mb.send_timeout(make(w, tx), MAILBOX_WAIT).is_ok() {
                waits.push(rx);
            }
        }
        let deadline = Instant::now() + MAILBOX_WAIT;
        for rx in waits {
            let _ = rx.recv_deadline(deadline);
        }
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

    /// Per VRF with learned routes: (name, in the FIB, not in it: shadowed
    /// by a lower distance or no next hop resolves). Cheap enough for
    /// every scrape (no per-route strings).
    pub fn learned_counts(&self) -> Vec<(String, usize, usize)> {
        let cfg = self.config();
        let learned = self.learned();
        let tables = self.dp.tables.load();
        // One pass over the routes for every VRF (scraped often, 10^5
        // routes and more).
        let mut won: std::collections::HashMap<&str, usize> = Default::default();
        for (v, _) in learned.installable(&cfg) {
            *won.entry(v).or_default() += 1;
        }
        let mut unresolved_in: std::collections::HashMap<u16, usize> = Default::default();
        for (i, _) in &tables.unresolved {
            *unresolved_in.entry(*i).or_default() += 1;
        }
        learned
            .vrfs
            .iter()
            .map(|(v, routes)| {
                let won = won.get(v.as_str()).copied().unwrap_or(0);
                let unresolved = tables
                    .vrfs
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| &x.name == v)
                    .filter_map(|(i, _)| u16::try_from(i).ok())
                    .map(|i| unresolved_in.get(&i).copied().unwrap_or(0))
                    .sum::<usize>();
                let installed = won.saturating_sub(unresolved);
                (v.clone(), installed, routes.len() - installed)
            })
            .collect()
    }

    /// The learned routes as last published.
    pub fn learned(&self) -> Arc<crate::learned::Learned> {
        lock(&self.learned).clone()
    }

    /// Replaces the learned routes and publishes tables built from them and
    /// the running configuration (the build-and-publish of [`Control::apply`]).
    /// Returns the learned routes left out because no next hop resolved
    /// (VRF name, prefix).
    pub fn set_learned(
        &self,
        l: Arc<crate::learned::Learned>,
    ) -> Result<Vec<(String, dataplane::fib::Prefix)>, ApiError> {
        let cfg = lock(&self.config);
        let tables = (self.dp.build)(&cfg, &l).map_err(|e| ApiError::new(409, e, None))?;
        let unresolved: Vec<_> = tables
            .unresolved
            .iter()
            .map(|(v, p)| {
                let name = tables
                    .vrfs
                    .get(usize::from(*v))
                    .map_or_else(|| v.to_string(), |v| v.name.clone());
                (name, *p)
            })
            .collect();
        self.dp.tables.store(tables);
        *lock(&self.learned) = l;
        Ok(unresolved)
    }

    /// The incremental form of [`Control::set_learned`]: `l` is the new
    /// set of learned routes and `changes` what differs from the last
    /// published one, (VRF, prefix, next hops or `None` when gone). Only
    /// the FIBs of the changed VRFs are copied and patched
    /// ([`dataplane::tables::Tables::patched`]). Returns `None`, having
    /// published nothing, when a patch cannot give what a full build
    /// would (a changed prefix the configuration fills too, or one a
    /// static route's gateway resolves through; a next hop `defer` names):
    /// then call `set_learned`.
    pub fn patch_learned(
        &self,
        l: Arc<crate::learned::Learned>,
        changes: &[crate::learned::Change],
        defer: &dyn Fn(&str, std::net::IpAddr) -> bool,
    ) -> Option<Vec<(String, dataplane::fib::Prefix)>> {
        use crate::learned::Hop;
        use dataplane::tables::{Route, RoutePatch};
        let cfg = lock(&self.config);
        let fixed = crate::learned::config_prefixes(&cfg);
        let statics: Vec<(&str, std::net::IpAddr)> = cfg
            .routes
            .iter()
            .filter_map(|r| match r.via {
                vecgate_config::Via::Address(a) => Some((r.vrf.as_str(), a)),
                _ => None,
            })
            .collect();
        // Per VRF, so a change is looked up without copying its VRF's name.
        let mut fixed_in: std::collections::HashMap<
            &str,
            std::collections::HashSet<dataplane::fib::Prefix>,
        > = std::collections::HashMap::new();
        for (v, p) in &fixed {
            fixed_in.entry(v.as_str()).or_default().insert(*p);
        }
        let cur = self.dp.tables.load();
        let index = |name: &str| cur.vrfs.iter().position(|v| v.name == name);
        let mut patches = Vec::with_capacity(changes.len());
        for (vrf, prefix, hops) in changes {
            let p = prefix.network();
            if fixed_in.get(vrf.as_str()).is_some_and(|s| s.contains(&p))
                || statics
                    .iter()
                    .any(|(v, a)| *v == vrf.as_str() && p.contains(*a))
            {
                return None;
            }
            // A VRF the tables do not have: a full build skips it too.
            let Some(v) = index(vrf) else {
                continue;
            };
            patches.push(RoutePatch {
                vrf: v as u16,
                prefix: p,
                hops: hops.as_ref().map(|h| {
                    h.iter()
                        .map(|h| match h {
                            Hop::Via(a) => Route::Via {
                                next_hop: *a,
                                port: None,
                            },
                            Hop::Blackhole => Route::Drop,
                            Hop::Unreachable => Route::Unreachable,
                        })
                        .collect()
                }),
            });
        }
        let names: Vec<String> = cur.vrfs.iter().map(|v| v.name.clone()).collect();
        let defer_ix =
            |v: u16, a: std::net::IpAddr| names.get(usize::from(v)).is_none_or(|n| defer(n, a));
        let tables = cur.patched(&patches, &defer_ix)?;
        let unresolved = tables
            .unresolved
            .iter()
            .map(|(v, p)| {
                let name = names
                    .get(usize::from(*v))
                    .map_or_else(|| v.to_string(), Clone::clone);
                (name, *p)
            })
            .collect();
        self.dp.tables.store(tables);
        *lock(&self.learned) = l;
        Some(unresolved)
    }

    /// Connects `GET /ike` to the IKE control thread (which starts after
    /// the API).
    pub fn set_ike_source(&self, f: IkeSource) {
        *lock(&self.ike) = Some(f);
    }

    /// The IKEv2 tunnels (empty without IKE).
    pub fn ike(&self) -> Vec<crate::model::IkeTunnelInfo> {
        lock(&self.ike).as_ref().map(|f| f()).unwrap_or_default()
    }

    /// Connects `/ha` to the VRRP speaker (which starts after the API).
    pub fn set_ha(&self, ops: Arc<dyn HaOps>) {
        *lock(&self.ha) = Some(ops);
    }

    /// The VRRP virtual routers (empty without `[ha]`).
    pub fn ha(&self) -> Vec<crate::model::HaGroupInfo> {
        let ops = lock(&self.ha).clone();
        ops.map(|o| o.groups()).unwrap_or_default()
    }

    /// Planned switchover; 409 when this gateway masters none of them.
    pub fn ha_switchover(
        &self,
        spec: &crate::model::HaSwitchover,
    ) -> Result<Vec<crate::model::HaGroupInfo>, ApiError> {
        let ops = lock(&self.ha).clone();
        match ops {
            Some(o) => o.switchover(spec),
            None => Err(ApiError::new(
                409,
                "no VRRP group ([ha]) runs on this gateway: it is master of nothing",
                None,
            )),
        }
    }

    /// The running configuration.
    pub fn config(&self) -> Config {
        lock(&self.config).clone()
    }

    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// Copy → `edit` → validate → build → publish. `fields` are the request
    /// fields a validation message may name (the first is the fallback).
    ///
    /// Interfaces that enter are attached first (netdev claimed, one queue
    /// per worker opened, ingress guard), handed to the workers once the
    /// tables are built, and the tables naming them published only when
    /// every worker polls them. Interfaces that leave are gone from the
    /// published tables before the workers close their queues (packets
    /// still on their way to one are dropped and counted), then their
    /// netdev is released. Everything else keeps its port and state.
    pub fn apply(
        &self,
        fields: &[&str],
        edit: impl FnOnce(&mut Config) -> Result<(), ApiError>,
    ) -> Result<(), ApiError> {
        let mut cur = lock(&self.config);
        let mut next = cur.clone();
        edit(&mut next)?;
        if let Some(d) = vecgate_config::validate(&next).first() {
            return Err(ApiError {
                status: 400,
                field: field_in(&d.message, fields),
                message: d.message.clone(),
            });
        }
        let entering: Vec<&vecgate_config::Interface> = next
            .interfaces
            .iter()
            .filter(|i| cur.interface(&i.name).is_none())
            .collect();
        let leaving: Vec<String> = cur
            .interfaces
            .iter()
            .filter(|i| next.interface(&i.name).is_none())
            .map(|i| i.name.clone())
            .collect();
        let ops = lock(&self.ports).clone();
        let ops =
            match (&ops, entering.is_empty() && leaving.is_empty()) {
                (_, true) => None,
                (Some(o), false) => Some(o.clone()),
                (None, false) => return Err(ApiError::new(
                    409,
                    "interfaces are attached at startup by this dataplane: restart to change them",
                    Some("name"),
                )),
            };
        // 1. Attach (undone if anything later fails).
        let mut opened: Vec<(String, Vec<PortQueue>)> = Vec::new();
        let undo = |opened: &[(String, Vec<PortQueue>)]| {
            if let Some(o) = &ops {
                for (n, _) in opened {
                    o.close(n);
                }
            }
        };
        if let Some(o) = &ops {
            for ifc in &entering {
                match o.open(ifc) {
                    Ok((_, queues)) => opened.push((ifc.name.clone(), queues)),
                    Err(e) => {
                        undo(&opened);
                        return Err(ApiError::new(
                            409,
                            format!("interface {}: {e}", ifc.name),
                            Some("name"),
                        ));
                    }
                }
            }
        }
        let learned = self.learned();
        let tables = match (self.dp.build)(&next, &learned) {
            Ok(t) => t,
            Err(e) => {
                // The sockets close as `opened` goes.
                undo(&opened);
                return Err(ApiError::new(409, e, None));
            }
        };
        let old = self.dp.tables.load();
        // 2. The workers poll the new queues, then the tables name them.
        let mut attached = Vec::new();
        for (name, queues) in opened {
            let Some(port) = Self::port_in(&tables, &name) else {
                continue;
            };
            let mut queues: Vec<Option<PortQueue>> = queues.into_iter().map(Some).collect();
            self.tell_workers(|w, done| match queues.get_mut(w).and_then(Option::take) {
                Some(io) => Command::AttachPort { port, io, done },
                None => Command::DetachPort { port, done },
            });
            attached.push(port);
        }
        self.dp.tables.store(tables);
        // Gratuitous ARP / unsolicited NA for the new addresses (one
        // worker sends for all).
        if let Some(mb) = self.dp.mailboxes.first() {
            for p in &attached {
                let _ = mb.try_send(Command::Announce(*p));
            }
        }
        // 3. Interfaces gone from the tables: their queues closed, their
        //    netdevs released.
        if let Some(o) = &ops {
            for name in &leaving {
                if let Some(port) = Self::port_in(&old, name) {
                    self.tell_workers(|_, done| Command::DetachPort { port, done });
                }
                o.close(name);
            }
        }
        *cur = next;
        Ok(())
    }

    /// The IPsec SAs (empty without IPsec).
    pub fn sas(&self) -> Vec<SaInfo> {
        self.dp.sas.as_ref().map(|f| f()).unwrap_or_default()
    }

    pub fn counters(&self) -> CounterSnapshot {
        let snaps: Vec<_> = self.dp.counters.iter().map(|c| c.snapshot()).collect();
        CounterSnapshot::sum(&snaps)
    }

    pub fn status(&self) -> StatusInfo {
        let cfg = lock(&self.config);
        StatusInfo {
            name: cfg.gateway.name.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            workers: self.dp.counters.len() as u64,
            uptime_seconds: self.started.elapsed().as_secs(),
            tables_generation: self.dp.tables.load().generation,
            api: cfg.gateway.api.to_string(),
        }
    }

    pub fn interfaces(&self) -> Vec<InterfaceInfo> {
        let cfg = self.config();
        let sum = self.counters();
        let tables = self.dp.tables.load();
        cfg.interfaces
            .iter()
            .enumerate()
            .map(|(i, ifc)| {
                let port = Self::port_in(&tables, &ifc.name);
                let t = port.and_then(|p| tables.iface(p));
                // Facts from the tables (every attached interface is in
                // them), else from startup.
                let nd = t
                    .map(|t| NetdevFacts {
                        mac: t.mac,
                        mtu: t.mtu,
                        offloads: false,
                    })
                    .or_else(|| self.dp.netdevs.get(i).copied())
                    .unwrap_or(NetdevFacts {
                        mac: [0; 6],
                        mtu: 0,
                        offloads: false,
                    });
                let c = port
                    .and_then(|p| sum.ports.get(usize::from(p)).copied())
                    .unwrap_or_default();
                InterfaceInfo {
                    name: ifc.name.clone(),
                    host: ifc.host.clone(),
                    driver: ifc.driver.as_str().to_owned(),
                    mac: fmt_mac(nd.mac),
                    mtu: t.map_or(nd.mtu, |t| t.mtu),
                    vrf: ifc.vrf.clone(),
                    addresses: ifc.addresses.iter().map(|a| a.to_string()).collect(),
                    rsc: ifc.rsc,
                    offloads: ifc.offloads,
                    offloads_active: t.is_some_and(|t| t.flags.offloads),
                    counters: InterfaceTraffic::from(&c),
                }
            })
            .collect()
    }

    /// Adds an interface: the spec becomes an `[[interface]]` table
    /// (defaults as in the file), is validated with the rest, and its
    /// netdev is attached ([`Control::apply`]). 409 when the name is in use
    /// or the netdev cannot be attached (missing, held by another gateway).
    pub fn add_interface(&self, spec: &InterfaceSpec) -> Result<(), ApiError> {
        let ifc = spec
            .to_interface()
            .map_err(|e| ApiError::bad(&e.field, e.message))?;
        let _serial = lock(&self.tunnel_ops);
        self.apply(&["name", "host", "addresses", "vrf", "mtu"], |c| {
            if c.interface(&ifc.name).is_some() || c.tunnel(&ifc.name).is_some() {
                return Err(ApiError::new(
                    409,
                    format!("name \"{}\" is already in use", ifc.name),
                    Some("name"),
                ));
            }
            c.interfaces.push(ifc);
            Ok(())
        })
    }

    /// Deletes an interface: gone from the tables, its queues closed on
    /// every worker, its netdev released. Refused (409) while a route or
    /// a tunnel's underlay depends on it (validation names which).
    pub fn del_interface(&self, name: &str) -> Result<(), ApiError> {
        let _serial = lock(&self.tunnel_ops);
        self.apply(&["name"], |c| {
            let before = c.interfaces.len();
            c.interfaces.retain(|i| i.name != name);
            if c.interfaces.len() == before {
                return Err(ApiError::not_found(
                    "name",
                    format!("no interface \"{name}\""),
                ));
            }
            if let Some(r) = c
                .routes
                .iter()
                .find(|r| matches!(&r.via, Via::Interface(i) if i == name))
            {
                return Err(ApiError::new(
                    409,
                    format!(
                        "route {} in vrf \"{}\" goes through interface \"{name}\": delete it first",
                        r.prefix, r.vrf
                    ),
                    Some("name"),
                ));
            }
            Ok(())
        })
    }

    pub fn patch_interface(&self, name: &str, p: &InterfacePatch) -> Result<(), ApiError> {
        if let Some(m) = p.mtu {
            if !(68..=65535).contains(&m) {
                return Err(ApiError::bad(
                    "mtu",
                    format!("mtu = {m} is out of range (expected 68..=65535)"),
                ));
            }
        }
        self.apply(&["rsc", "offloads", "mtu"], |c| {
            let ifc = c
                .interfaces
                .iter_mut()
                .find(|i| i.name == name)
                .ok_or_else(|| ApiError::not_found("name", format!("no interface \"{name}\"")))?;
            if let Some(v) = p.rsc {
                ifc.rsc = v;
            }
            if let Some(v) = p.offloads {
                ifc.offloads = v;
            }
            if let Some(m) = p.mtu {
                ifc.mtu = Some(m);
            }
            Ok(())
        })
    }

    pub fn vrfs(&self) -> Vec<VrfInfo> {
        let cfg = self.config();
        let tables = self.dp.tables.load();
        cfg.vrfs()
            .into_iter()
            .map(|name| VrfInfo {
                id: tables
                    .vrfs
                    .iter()
                    .find(|v| v.name == name)
                    .map_or(0, |v| v.id),
                interfaces: cfg
                    .interfaces
                    .iter()
                    .filter(|i| i.vrf == name)
                    .map(|i| i.name.clone())
                    .collect(),
                tunnels: cfg
                    .tunnels
                    .iter()
                    .filter(|t| t.vrf == name)
                    .map(|t| t.name.clone())
                    .collect(),
                routes: cfg.routes.iter().filter(|r| r.vrf == name).count() as u64,
                name,
            })
            .collect()
    }

    /// Every route with its source and administrative distance: the
    /// connected and local routes the interfaces' addresses imply, static
    /// routes (file or API), and routes learned over FPM (`active: false`
    /// when a route of lower distance holds the prefix, or none of its next
    /// hops resolves).
    pub fn routes(&self, vrf: Option<&str>) -> Vec<RouteInfo> {
        use crate::learned::{distance, source, DISTANCE_CONNECTED, DISTANCE_STATIC};
        let cfg = self.config();
        let api = lock(&self.api_routes).clone();
        let mut out = Vec::new();
        let keep = |v: &str| vrf.is_none_or(|f| f == v);
        for ifc in cfg.interfaces.iter().filter(|i| keep(&i.vrf)) {
            for a in &ifc.addresses {
                let host = if a.addr.is_ipv4() { 32 } else { 128 };
                for (prefix, kind) in [
                    (a.network().to_string(), "connected"),
                    (format!("{}/{host}", a.addr), "local"),
                ] {
                    out.push(RouteInfo {
                        vrf: ifc.vrf.clone(),
                        prefix,
                        via: ifc.name.clone(),
                        kind: kind.into(),
                        source: "connected".into(),
                        distance: DISTANCE_CONNECTED,
                        active: true,
                    });
                }
            }
        }
        for r in cfg.routes.iter().filter(|r| keep(&r.vrf)) {
            let prefix = r.prefix.to_string();
            let from_api = api.contains(&(r.vrf.clone(), prefix.clone()));
            out.push(RouteInfo {
                vrf: r.vrf.clone(),
                prefix,
                via: r.via.to_string(),
                kind: "static".into(),
                source: if from_api { "api" } else { "static" }.into(),
                distance: DISTANCE_STATIC,
                active: true,
            });
        }
        let learned = self.learned();
        if !learned.is_empty() {
            let tables = self.dp.tables.load();
            let won: std::collections::HashSet<(&str, dataplane::fib::Prefix)> = learned
                .installable(&cfg)
                .map(|(v, r)| (v, r.prefix.network()))
                .collect();
            let unresolved: std::collections::HashSet<(&str, dataplane::fib::Prefix)> = tables
                .unresolved
                .iter()
                .filter_map(|(v, p)| Some((tables.vrfs.get(usize::from(*v))?.name.as_str(), *p)))
                .collect();
            for (v, routes) in learned.vrfs.iter().filter(|(v, _)| keep(v)) {
                for r in routes {
                    let p = r.prefix.network();
                    let hops: Vec<String> = r.hops.iter().map(|h| h.to_string()).collect();
                    out.push(RouteInfo {
                        vrf: v.clone(),
                        prefix: p.to_string(),
                        via: hops.join(","),
                        kind: "learned".into(),
                        source: source(r.protocol),
                        distance: distance(r.protocol),
                        active: won.contains(&(v.as_str(), p))
                            && !unresolved.contains(&(v.as_str(), p)),
                    });
                }
            }
        }
        out
    }

    /// Parses a route's `via` the way the configuration file does: a name
    /// of an interface or tunnel, else an address.
    fn via(cfg: &Config, via: &str) -> Result<Via, ApiError> {
        if cfg.interface(via).is_some() {
            Ok(Via::Interface(via.to_owned()))
        } else if cfg.tunnel(via).is_some() {
            Ok(Via::Tunnel(via.to_owned()))
        } else if let Ok(a) = via.parse::<IpAddr>() {
            Ok(Via::Address(a))
        } else {
            Err(ApiError::bad(
                "via",
                format!("via \"{via}\" is neither an interface, a tunnel nor an address"),
            ))
        }
    }

    fn prefix(s: &str) -> Result<Prefix, ApiError> {
        s.parse::<Prefix>().map_err(|e| ApiError::bad("prefix", e))
    }

    fn vrf_name(v: Option<&str>) -> Result<String, ApiError> {
        let v = v.unwrap_or(DEFAULT_VRF);
        if v.is_empty() {
            return Err(ApiError::bad("vrf", "vrf must not be empty"));
        }
        Ok(v.to_owned())
    }

    pub fn add_route(&self, spec: &RouteSpec) -> Result<RouteInfo, ApiError> {
        let prefix = Self::prefix(&spec.prefix)?;
        let vrf = Self::vrf_name(spec.vrf.as_deref())?;
        self.apply(&["prefix", "via", "vrf"], |c| {
            let via = Self::via(c, &spec.via)?;
            if c.routes.iter().any(|r| r.vrf == vrf && r.prefix == prefix) {
                return Err(ApiError::new(
                    409,
                    format!("vrf \"{vrf}\" already has a route for {prefix}"),
                    Some("prefix"),
                ));
            }
            c.routes.push(vecgate_config::Route {
                vrf: vrf.clone(),
                prefix,
                via,
            });
            Ok(())
        })?;
        lock(&self.api_routes).insert((vrf.clone(), prefix.to_string()));
        Ok(RouteInfo {
            vrf,
            prefix: prefix.to_string(),
            via: spec.via.clone(),
            kind: "static".into(),
            source: "api".into(),
            distance: crate::learned::DISTANCE_STATIC,
            active: true,
        })
    }

    pub fn del_route(&self, key: &RouteKey) -> Result<(), ApiError> {
        let prefix = Self::prefix(&key.prefix)?;
        let vrf = Self::vrf_name(key.vrf.as_deref())?;
        self.apply(&["prefix", "vrf"], |c| {
            let before = c.routes.len();
            c.routes.retain(|r| !(r.vrf == vrf && r.prefix == prefix));
            if c.routes.len() == before {
                return Err(ApiError::not_found(
                    "prefix",
                    format!("vrf \"{vrf}\" has no static route for {prefix}"),
                ));
            }
            Ok(())
        })?;
        lock(&self.api_routes).remove(&(vrf, prefix.to_string()));
        Ok(())
    }

    /// The virtual port of every tunnel in the published tables.
    fn tunnel_ports(&self, cfg: &Config) -> Vec<(String, Option<u16>)> {
        let tables = self.dp.tables.load();
        cfg.tunnels
            .iter()
            .map(|t| {
                let port = tables
                    .interfaces
                    .iter()
                    .flatten()
                    .find(|i| i.name == t.name)
                    .map(|i| i.port);
                (t.name.clone(), port)
            })
            .collect()
    }

    /// Counters of every tunnel's virtual port since its creation.
    pub fn tunnel_counters(&self) -> Vec<TunnelCounters> {
        let cfg = self.config();
        let sum = self.counters();
        let base = lock(&self.tunnel_base);
        self.tunnel_ports(&cfg)
            .into_iter()
            .map(|(name, port)| {
                let now = port
                    .and_then(|p| sum.ports.get(usize::from(p)).copied())
                    .unwrap_or_default();
                let b = base.get(&name).copied().unwrap_or_default();
                TunnelCounters {
                    traffic: PortTraffic::since(&now, &b),
                    tunnel: name,
                }
            })
            .collect()
    }

    pub fn tunnels(&self) -> Vec<TunnelInfo> {
        let counters = self.tunnel_counters();
        self.config()
            .tunnels
            .iter()
            .map(|t| {
                let c = counters.iter().find(|c| c.tunnel == t.name);
                TunnelInfo {
                    name: t.name.clone(),
                    kind: t.kind.as_str().to_owned(),
                    local: t.local.to_string(),
                    remote: t.remote.to_string(),
                    key: t.key,
                    vrf: t.vrf.clone(),
                    underlay_vrf: t.underlay_vrf.clone(),
                    mtu: t.mtu,
                    addresses: t.addresses.iter().map(|a| a.to_string()).collect(),
                    traffic: c.map(|c| c.traffic).unwrap_or_default(),
                }
            })
            .collect()
    }

    /// Adds a tunnel: the spec becomes a `[[tunnel]]` table (defaults as in
    /// the file), is validated with the rest, and built into the tables.
    /// An ipsec tunnel is registered with the SA registry first (static
    /// keys read, or its IKEv2 state machine built), then published, then
    /// (IKEv2) started; a refusal on the way undoes the registration.
    pub fn add_tunnel(&self, spec: &TunnelSpec) -> Result<(), ApiError> {
        let mut tunnel = spec
            .to_tunnel()
            .map_err(|e| ApiError::bad(&e.field, e.message))?;
        let kind = tunnel.kind;
        let hex = Self::static_sas_of(spec, &mut tunnel)?;
        let invalid = |cfg: &Config| {
            vecgate_config::validate(cfg).first().map(|d| ApiError {
                status: 400,
                field: Some(tunnel_field(&d.message)),
                message: d.message.clone(),
            })
        };
        if !self.caps.tunnels {
            // Validate first so bad input is still a 400 naming the field.
            let mut probe = self.config();
            probe.tunnels.push(tunnel);
            if let Some(e) = invalid(&probe) {
                return Err(e);
            }
            return Err(ApiError::new(
                409,
                "tunnels are not in this build of the dataplane yet",
                Some("kind"),
            ));
        }
        let in_use = || {
            ApiError::new(
                409,
                format!("name \"{}\" is already in use", spec.name),
                Some("name"),
            )
        };
        // Invalid input is refused before any file is opened (checked
        // again under the lock below)...
        {
            let mut probe = self.config();
            if probe.tunnel(&spec.name).is_some() || probe.interface(&spec.name).is_some() {
                return Err(in_use());
            }
            probe.tunnels.push(tunnel.clone());
            if let Some(e) = invalid(&probe) {
                return Err(e);
            }
        }
        // ...then key and PSK files are read, before any lock (this runs
        // on the blocking pool): a FIFO or a device is refused at once.
        let sas = tunnel.ipsec.as_ref().map_or(&[][..], |x| &x.sas[..]);
        let mut file_keys = Vec::with_capacity(sas.len());
        for (i, (sa, h)) in sas.iter().zip(&hex).enumerate() {
            file_keys.push(match h {
                Some(_) => None,
                None => Some(read_key_file(&sa.key_file, &format!("sa[{i}].key_file"))?),
            });
        }
        let psk = match tunnel.ipsec.as_ref().and_then(|x| x.ike.as_ref()) {
            Some(k) => Some(read_key_file(&k.psk_file, "ike.psk_file")?),
            None => None,
        };
        let _serial = lock(&self.tunnel_ops);
        let mut probe = self.config();
        if probe.tunnel(&spec.name).is_some() || probe.interface(&spec.name).is_some() {
            return Err(in_use());
        }
        probe.tunnels.push(tunnel.clone());
        if let Some(e) = invalid(&probe) {
            return Err(e);
        }
        let is_ipsec = kind == vecgate_config::TunnelKind::Ipsec;
        let mut recorded = tunnel.clone();
        let ops = if is_ipsec {
            let ops = self.sa_ops()?;
            let keys: Vec<KeySource<'_>> = hex
                .iter()
                .zip(&file_keys)
                .map(|(h, f)| KeySource::of(*h, f.as_deref().map(|t| &t[..])))
                .collect();
            ops.add_tunnel(&probe, &tunnel, &keys, psk.as_deref().map(|p| &p[..]))?;
            // Inline keys are not written into the configuration (as with
            // POST /sas): the tunnel is recorded without its SAs.
            if hex.iter().any(Option::is_some) {
                if let Some(x) = recorded.ipsec.as_mut() {
                    x.sas.clear();
                }
            }
            Some(ops)
        } else {
            None
        };
        let fields = [
            "name",
            "local",
            "remote",
            "key",
            "vrf",
            "underlay_vrf",
            "mtu",
        ];
        let applied = self.apply(&fields, |c| {
            if c.tunnel(&spec.name).is_some() || c.interface(&spec.name).is_some() {
                return Err(in_use());
            }
            c.tunnels.push(recorded);
            Ok(())
        });
        if let Err(e) = applied {
            if let Some(ops) = ops {
                let _ = ops.remove_tunnel(&spec.name);
            }
            return Err(e);
        }
        if let Some(ops) = ops {
            if hex.iter().any(Option::is_some) {
                lock(&self.inline_keyed).insert(spec.name.clone());
            }
            ops.start_tunnel(&spec.name);
        }
        // Report counters from now on (the port may have served a tunnel
        // deleted long ago).
        let cfg = self.config();
        let sum = self.counters();
        if let Some((_, Some(p))) = self
            .tunnel_ports(&cfg)
            .into_iter()
            .find(|(n, _)| *n == spec.name)
        {
            let snap = sum.ports.get(usize::from(p)).copied().unwrap_or_default();
            lock(&self.tunnel_base).insert(spec.name.clone(), snap);
        }
        Ok(())
    }

    /// The static SAs of a tunnel request, put into `tunnel` as the file
    /// would hold them, and per SA its inline hex key (if it has one
    /// instead of a key file). Errors name the field by its path
    /// (`sa[1].spi`).
    fn static_sas_of<'a>(
        spec: &'a TunnelSpec,
        tunnel: &mut vecgate_config::Tunnel,
    ) -> Result<Vec<Option<&'a str>>, ApiError> {
        let mut hex = Vec::new();
        for (i, s) in spec.sa.iter().flatten().enumerate() {
            let at = |f: &str| format!("sa[{i}].{f}");
            let direction: vecgate_config::SaDirection = s.direction.parse().map_err(|e| {
                ApiError::bad(&at("direction"), format!("{}: {e}", at("direction")))
            })?;
            for (f, v) in [
                ("lifetime_bytes", s.lifetime_bytes),
                ("lifetime_packets", s.lifetime_packets),
                ("lifetime_seconds", s.lifetime_seconds),
            ] {
                if v == Some(0) {
                    return Err(ApiError::bad(
                        &at(f),
                        format!("{}: 0 is no limit: leave it out", at(f)),
                    ));
                }
            }
            let (sa, h) = Self::static_sa(direction, s.keying(), s.replay_window).map_err(|e| {
                let f = at(e.field.as_deref().unwrap_or("key"));
                ApiError::bad(&f, format!("{f}: {}", e.message))
            })?;
            if let Some(x) = tunnel.ipsec.as_mut() {
                x.sas.push(sa);
            }
            hex.push(h);
        }
        Ok(hex)
    }

    /// Deletes a tunnel. Refused (409) while a route points at it, so
    /// traffic is never silently re-routed around a vanished tunnel (into
    /// a less specific route, e.g. the underlay): delete or re-point the
    /// routes first. Packets already on their way to its virtual port are
    /// dropped and counted (`interface-down` / `no-interface`): its port
    /// is not reused at once. An IKEv2 tunnel first deletes its IKE SA
    /// with the peer (RFC 7296 §1.4.1); an ipsec tunnel's SAs leave the
    /// registry once the tables no longer hold it.
    pub fn del_tunnel(&self, name: &str) -> Result<(), ApiError> {
        let _serial = lock(&self.tunnel_ops);
        let cfg = self.config();
        let t = cfg
            .tunnel(name)
            .ok_or_else(|| ApiError::not_found("name", format!("no tunnel \"{name}\"")))?;
        let routed = |c: &Config| {
            c.routes
                .iter()
                .find(|r| matches!(&r.via, Via::Tunnel(t) if t == name))
                .map(|r| {
                    ApiError::new(
                        409,
                        format!(
                            "route {} in vrf \"{}\" goes through tunnel \"{name}\": delete it first",
                            r.prefix, r.vrf
                        ),
                        Some("name"),
                    )
                })
        };
        // Checked before the peer is told anything.
        if let Some(e) = routed(&cfg) {
            return Err(e);
        }
        let ops = if t.kind == vecgate_config::TunnelKind::Ipsec {
            Some(self.sa_ops()?)
        } else {
            None
        };
        if let Some(ops) = ops {
            ops.stop_tunnel(name);
        }
        self.apply(&["name"], |c| {
            let before = c.tunnels.len();
            c.tunnels.retain(|t| t.name != name);
            if before == c.tunnels.len() {
                return Err(ApiError::not_found("name", format!("no tunnel \"{name}\"")));
            }
            match routed(c) {
                Some(e) => Err(e),
                None => Ok(()),
            }
        })?;
        if let Some(ops) = ops {
            ops.remove_tunnel(name)?;
        }
        lock(&self.tunnel_base).remove(name);
        lock(&self.inline_keyed).remove(name);
        Ok(())
    }

    fn sa_ops(&self) -> Result<&dyn SaOps, ApiError> {
        self.dp.sa_ops.as_deref().ok_or_else(|| {
            ApiError::new(
                409,
                "this gateway runs no IPsec (no ipsec tunnel in its configuration)",
                None,
            )
        })
    }

    /// The static ipsec tunnel `name` of `cfg` (404 / 400 / 409 otherwise).
    fn ipsec_tunnel<'a>(
        cfg: &'a Config,
        name: &str,
        field: &str,
    ) -> Result<&'a vecgate_config::Tunnel, ApiError> {
        let t = cfg
            .tunnel(name)
            .ok_or_else(|| ApiError::not_found(field, format!("no tunnel \"{name}\"")))?;
        if t.kind != vecgate_config::TunnelKind::Ipsec {
            return Err(ApiError::bad(
                field,
                format!(
                    "tunnel \"{name}\" is a {} tunnel, not ipsec",
                    t.kind.as_str()
                ),
            ));
        }
        if t.ipsec.as_ref().is_some_and(|x| x.ike.is_some()) {
            return Err(ApiError::new(
                409,
                format!("tunnel \"{name}\" is keyed by IKEv2; its SAs are negotiated"),
                Some(field),
            ));
        }
        Ok(t)
    }

    /// The key file's text of a request without an inline key (read
    /// before the configuration lock: a bad key file never holds up other
    /// requests).
    fn key_file_text(
        hex: Option<&str>,
        sa: &vecgate_config::StaticSa,
    ) -> Result<Option<zeroize::Zeroizing<Vec<u8>>>, ApiError> {
        match hex {
            Some(_) => Ok(None),
            None => read_key_file(&sa.key_file, "key_file").map(Some),
        }
    }

    /// The SA as the TOML holds it, and where its key comes from.
    fn static_sa<'a>(
        direction: vecgate_config::SaDirection,
        k: SaKeying<'a>,
        replay_window: Option<u32>,
    ) -> Result<(vecgate_config::StaticSa, Option<&'a str>), ApiError> {
        let SaKeying {
            spi,
            algorithm,
            key,
            key_file,
            esn,
            lifetimes,
        } = k;
        // SPIs 0..=255 are reserved (RFC 4303 §2.1).
        if spi < 256 {
            return Err(ApiError::bad(
                "spi",
                format!("spi {spi:#x} is reserved (RFC 4303 §2.1: use 0x100 or above)"),
            ));
        }
        let alg: vecgate_config::EspAlgorithm = algorithm.parse().map_err(|_| {
            ApiError::bad(
                "algorithm",
                format!("algorithm \"{algorithm}\" is not one of aes128gcm16, aes256gcm16, aes128-sha1, aes256-sha256, chacha20poly1305"),
            )
        })?;
        let window = replay_window.unwrap_or(vecgate_config::ipsec::DEFAULT_REPLAY_WINDOW);
        if window > vecgate_config::ipsec::MAX_REPLAY_WINDOW {
            return Err(ApiError::bad(
                "replay_window",
                format!(
                    "replay_window = {window} is out of range (at most {})",
                    vecgate_config::ipsec::MAX_REPLAY_WINDOW
                ),
            ));
        }
        let (hex, file) = match (key, key_file) {
            (Some(k), None) => (Some(k.0.as_str()), "<inline key>".into()),
            (None, Some(f)) if !f.is_empty() => (None, std::path::PathBuf::from(f)),
            (Some(_), Some(_)) => {
                return Err(ApiError::bad("key", "give key or key_file, not both"))
            }
            _ => return Err(ApiError::bad("key", "key (hex) or key_file is required")),
        };
        Ok((
            vecgate_config::StaticSa {
                direction,
                spi,
                algorithm: alg,
                key_file: file,
                esn: esn.unwrap_or(true),
                replay_window: window,
                lifetime_bytes: lifetimes[0],
                lifetime_packets: lifetimes[1],
                lifetime_seconds: lifetimes[2],
            },
            hex,
        ))
    }

    /// `POST /sas`: installs an inbound SA on an existing static ipsec
    /// tunnel. A `key_file` SA is also recorded in the running
    /// configuration (so `GET /config` reproduces it); an inline key is
    /// not (it would have to be written out).
    pub fn add_sa(&self, spec: &SaSpec) -> Result<SaInfo, ApiError> {
        let ops = self.sa_ops()?;
        let (sa, hex) = Self::static_sa(
            vecgate_config::SaDirection::In,
            spec.keying(),
            spec.replay_window,
        )?;
        // Read before the configuration lock (the caller runs this on the
        // blocking pool): a bad key file never holds up other requests.
        let text = Self::key_file_text(hex, &sa)?;
        let mut cfg = lock(&self.config);
        let t = Self::ipsec_tunnel(&cfg, &spec.tunnel, "tunnel")?;
        let key = KeySource::of(hex, text.as_deref().map(|t| &t[..]));
        ops.install_inbound(t, &sa, key)?;
        if hex.is_none() && !lock(&self.inline_keyed).contains(&spec.tunnel) {
            if let Some(x) = cfg
                .tunnels
                .iter_mut()
                .find(|t| t.name == spec.tunnel)
                .and_then(|t| t.ipsec.as_mut())
            {
                x.sas.push(sa);
            }
        }
        drop(cfg);
        let spi = format!("{:#010x}", spec.spi.0);
        self.sas()
            .into_iter()
            .find(|s| s.spi == spi && s.direction == "inbound")
            .ok_or_else(|| ApiError::new(500, "SA vanished after installation", None))
    }

    /// `POST /tunnels/{name}/switch`: the tunnel sends with the new SA
    /// from the next vector on; the inbound SAs stay (make-before-break,
    /// RFC 7296 §2.8: the peer switches on its own schedule).
    pub fn switch_sa(&self, tunnel: &str, spec: &SaSwitch) -> Result<SaSwitched, ApiError> {
        let ops = self.sa_ops()?;
        let (sa, hex) = Self::static_sa(vecgate_config::SaDirection::Out, spec.keying(), None)?;
        let text = Self::key_file_text(hex, &sa)?;
        let mut cfg = lock(&self.config);
        let t = Self::ipsec_tunnel(&cfg, tunnel, "name")?;
        let key = KeySource::of(hex, text.as_deref().map(|t| &t[..]));
        let old = ops.switch_outbound(t, &sa, key)?;
        if hex.is_none() && !lock(&self.inline_keyed).contains(tunnel) {
            if let Some(x) = cfg
                .tunnels
                .iter_mut()
                .find(|t| t.name == tunnel)
                .and_then(|t| t.ipsec.as_mut())
            {
                x.sas
                    .retain(|s| s.direction != vecgate_config::SaDirection::Out);
                x.sas.push(sa);
            }
        }
        Ok(SaSwitched {
            tunnel: tunnel.to_owned(),
            old_spi: format!("{old:#010x}"),
            new_spi: format!("{:#010x}", spec.spi.0),
        })
    }

    /// `DELETE /sas/{spi}`: removes an inbound SA (packets still using it
    /// are then dropped as `bad-spi`). The outbound SA is replaced with a
    /// switch, never deleted.
    pub fn del_sa(&self, spi: u32) -> Result<(), ApiError> {
        let ops = self.sa_ops()?;
        let hex = format!("{spi:#010x}");
        let owner = self
            .sas()
            .into_iter()
            .find(|s| s.spi == hex && s.direction == "inbound")
            .ok_or_else(|| ApiError::not_found("spi", format!("no inbound SA with spi {hex}")))?;
        let mut cfg = lock(&self.config);
        Self::ipsec_tunnel(&cfg, &owner.tunnel, "spi")?;
        let tunnel = ops.remove_inbound(spi)?;
        if let Some(x) = cfg
            .tunnels
            .iter_mut()
            .find(|t| t.name == tunnel)
            .and_then(|t| t.ipsec.as_mut())
        {
            x.sas
                .retain(|s| !(s.direction == vecgate_config::SaDirection::In && s.spi == spi));
        }
        Ok(())
    }

    /// Live reload (`POST /config`, `vecgate reload`, SIGHUP): takes the
    /// running configuration to `new`, already parsed and validated whole
    /// ([`vecgate_config::parse`], checked again here). The plan
    /// ([`crate::reload::plan`]) is returned as is for a dry run; otherwise
    /// a change only a restart can apply refuses the whole reload (409
    /// "needs a restart: …"), and the rest goes through the live API's
    /// steps: key and PSK files are read first (nothing done if one is
    /// bad), new ipsec tunnels are registered and new inbound SAs installed
    /// (undone if a later step fails), a changed outbound SA switched to
    /// (make-before-break, RFC 7296 §2.8), then the whole new
    /// configuration is built and published in one table swap
    /// ([`Control::apply`]: interfaces, VRFs, routes and tunnels that did
    /// not change keep their ports and state), and last the inbound SAs
    /// and tunnels gone from the file leave the registry and new IKEv2
    /// tunnels start. Blocking (IKE deletes wait for the peer).
    pub fn reload(&self, new: Config, dry_run: bool) -> Result<ReloadPlan, ApiError> {
        if dry_run {
            return self.reload_inner(new, true);
        }
        let hook = lock(&self.reload_hook).clone();
        if let Some(h) = &hook {
            h(true);
        }
        let r = self.reload_inner(new, false);
        if let Some(h) = &hook {
            h(false);
        }
        r
    }

    fn reload_inner(&self, new: Config, dry_run: bool) -> Result<ReloadPlan, ApiError> {
        use crate::reload::{rekeys, Item, Op};
        use vecgate_config::{SaDirection, TunnelKind};
        if let Some(d) = vecgate_config::validate(&new).first() {
            return Err(ApiError::bad("config", d.message.clone()));
        }
        let _serial = lock(&self.tunnel_ops);
        let cur = self.config();
        let plan = crate::reload::plan(&cur, &new);
        let mut report = ReloadPlan {
            applied: false,
            changes: plan
                .iter()
                .map(|c| PlanChange {
                    op: c.op.sign().into(),
                    object: c.object().into(),
                    name: c.name.clone(),
                    detail: c.detail.clone(),
                    restart: c.restart.clone(),
                })
                .collect(),
            done: Vec::new(),
        };
        if dry_run {
            return Ok(report);
        }
        let blocked: Vec<String> = plan
            .iter()
            .filter(|c| c.restart.is_some())
            .map(|c| c.line())
            .collect();
        if !blocked.is_empty() {
            return Err(ApiError::new(
                409,
                format!("needs a restart: {}; nothing applied", blocked.join("; ")),
                Some("config"),
            ));
        }
        if plan.is_empty() {
            report.applied = true;
            return Ok(report);
        }
        let ipsec = |t: &vecgate_config::Tunnel| t.kind == TunnelKind::Ipsec;
        // Tunnels leaving the registry (removed, or re-registered) and
        // entering it (added, or re-registered).
        let mut leaving: Vec<&vecgate_config::Tunnel> = Vec::new();
        let mut entering: Vec<&vecgate_config::Tunnel> = Vec::new();
        for t in cur.tunnels.iter().filter(|t| ipsec(t)) {
            match new.tunnel(&t.name) {
                None => leaving.push(t),
                Some(u) if rekeys(t, u) => leaving.push(t),
                Some(_) => {}
            }
        }
        for u in new.tunnels.iter().filter(|u| ipsec(u)) {
            match cur.tunnel(&u.name) {
                None => entering.push(u),
                Some(t) if rekeys(t, u) => entering.push(u),
                Some(_) => {}
            }
        }
        let re_registered = |name: &str| {
            leaving.iter().any(|t| t.name == name) && entering.iter().any(|t| t.name == name)
        };
        // Static SAs of tunnels kept in the registry.
        let sa_changes: Vec<(Op, &str, &vecgate_config::StaticSa)> = plan
            .iter()
            .filter_map(|c| match &c.item {
                Item::Sa { tunnel, sa }
                    if !re_registered(tunnel)
                        && new.tunnel(tunnel).is_some()
                        && cur.tunnel(tunnel).is_some() =>
                {
                    Some((c.op, tunnel.as_str(), &**sa))
                }
                _ => None,
            })
            .collect();
        let ops = if leaving.is_empty() && entering.is_empty() && sa_changes.is_empty() {
            None
        } else {
            Some(self.sa_ops()?)
        };
        let refused = |what: &str, e: ApiError| ApiError {
            status: e.status,
            message: format!("{what}: {}; nothing applied", e.message),
            field: Some("config".into()),
        };
        // 1. Every secret read before anything changes.
        type Secret = zeroize::Zeroizing<Vec<u8>>;
        let mut tunnel_keys: Vec<(Vec<Secret>, Option<Secret>)> = Vec::new();
        for u in &entering {
            let x = u.ipsec.clone().unwrap_or_default();
            let mut keys = Vec::new();
            for sa in &x.sas {
                keys.push(
                    read_key_file(&sa.key_file, "key_file").map_err(|e| {
                        refused(&format!("tunnel {} sa {:#010x}", u.name, sa.spi), e)
                    })?,
                );
            }
            let psk = match &x.ike {
                Some(k) => Some(
                    read_key_file(&k.psk_file, "psk_file")
                        .map_err(|e| refused(&format!("tunnel {}", u.name), e))?,
                ),
                None => None,
            };
            tunnel_keys.push((keys, psk));
        }
        let mut sa_keys: Vec<Option<Secret>> = Vec::new();
        for (op, tunnel, sa) in &sa_changes {
            sa_keys.push(match op {
                Op::Add => Some(
                    read_key_file(&sa.key_file, "key_file")
                        .map_err(|e| refused(&format!("tunnel {tunnel} sa {:#010x}", sa.spi), e))?,
                ),
                _ => None,
            });
        }
        // 2. Undoable steps: new tunnels registered, new inbound SAs.
        let mut registered: Vec<String> = Vec::new();
        let mut installed: Vec<u32> = Vec::new();
        let undo = |registered: &[String], installed: &[u32]| {
            if let Some(ops) = ops {
                for spi in installed {
                    let _ = ops.remove_inbound(*spi);
                }
                for n in registered {
                    let _ = ops.remove_tunnel(n);
                }
            }
        };
        let mut done = Vec::new();
        if let Some(ops) = ops {
            for (u, (keys, psk)) in entering.iter().zip(&tunnel_keys) {
                if re_registered(&u.name) {
                    continue;
                }
                let ks: Vec<KeySource<'_>> = keys.iter().map(|k| KeySource::File(k)).collect();
                if let Err(e) = ops.add_tunnel(&new, u, &ks, psk.as_deref().map(|p| &p[..])) {
                    undo(&registered, &installed);
                    return Err(refused(&format!("tunnel {}", u.name), e));
                }
                registered.push(u.name.clone());
                done.push(format!("tunnel {}: registered", u.name));
            }
            for ((op, tunnel, sa), key) in sa_changes.iter().zip(&sa_keys) {
                let (Op::Add, SaDirection::In, Some(k), Some(u)) =
                    (op, sa.direction, key, new.tunnel(tunnel))
                else {
                    continue;
                };
                if let Err(e) = ops.install_inbound(u, sa, KeySource::File(k)) {
                    undo(&registered, &installed);
                    return Err(refused(&format!("tunnel {tunnel} sa {:#010x}", sa.spi), e));
                }
                installed.push(sa.spi);
                done.push(format!(
                    "tunnel {tunnel}: installed inbound SA {:#010x}",
                    sa.spi
                ));
            }
            // 3. Re-registered tunnels: the old SAs go, the new ones come.
            for (u, (keys, psk)) in entering.iter().zip(&tunnel_keys) {
                if !re_registered(&u.name) {
                    continue;
                }
                ops.stop_tunnel(&u.name);
                let _ = ops.remove_tunnel(&u.name);
                let ks: Vec<KeySource<'_>> = keys.iter().map(|k| KeySource::File(k)).collect();
                if let Err(e) = ops.add_tunnel(&new, u, &ks, psk.as_deref().map(|p| &p[..])) {
                    undo(&registered, &installed);
                    return Err(ApiError {
                        status: e.status,
                        message: format!(
                            "tunnel {}: {}; its old SAs were removed already, the rest is not applied",
                            u.name, e.message
                        ),
                        field: Some("config".into()),
                    });
                }
                registered.push(u.name.clone());
                done.push(format!("tunnel {}: registered anew", u.name));
            }
            // 4. Outbound switches (the peer has the matching inbound SA).
            for ((op, tunnel, sa), key) in sa_changes.iter().zip(&sa_keys) {
                let (Op::Add, SaDirection::Out, Some(k), Some(u)) =
                    (op, sa.direction, key, new.tunnel(tunnel))
                else {
                    continue;
                };
                match ops.switch_outbound(u, sa, KeySource::File(k)) {
                    Ok(old) => done.push(format!(
                        "tunnel {tunnel}: switched outbound SA {old:#010x} -> {:#010x}",
                        sa.spi
                    )),
                    Err(e) => {
                        undo(&registered, &installed);
                        return Err(refused(&format!("tunnel {tunnel} sa {:#010x}", sa.spi), e));
                    }
                }
            }
            // Tunnels about to leave tell their peers (IKEv2 DELETE).
            for t in &leaving {
                if !re_registered(&t.name) {
                    ops.stop_tunnel(&t.name);
                }
            }
        }
        // 5. One build and one publish for everything else.
        if let Err(e) = self.apply(&["config"], |c| {
            *c = new.clone();
            Ok(())
        }) {
            undo(&registered, &installed);
            return Err(ApiError {
                field: Some("config".into()),
                ..e
            });
        }
        // 6. What the new tables no longer use.
        if let Some(ops) = ops {
            for (op, tunnel, sa) in &sa_changes {
                if *op == Op::Remove && sa.direction == SaDirection::In {
                    match ops.remove_inbound(sa.spi) {
                        Ok(_) => done.push(format!(
                            "tunnel {tunnel}: removed inbound SA {:#010x}",
                            sa.spi
                        )),
                        Err(e) => done.push(format!("tunnel {tunnel}: {}", e.message)),
                    }
                }
            }
            for t in &leaving {
                if !re_registered(&t.name) {
                    let _ = ops.remove_tunnel(&t.name);
                    done.push(format!("tunnel {}: removed with its SAs", t.name));
                }
            }
            for n in &registered {
                ops.start_tunnel(n);
            }
        }
        // Bookkeeping of the API's own views.
        lock(&self.api_routes).retain(|(v, p)| {
            new.routes
                .iter()
                .any(|r| r.vrf == *v && r.prefix.to_string() == *p)
        });
        {
            let mut inline = lock(&self.inline_keyed);
            inline.retain(|n| new.tunnel(n).is_some() && !re_registered(n));
        }
        let sum = self.counters();
        let ports = self.tunnel_ports(&new);
        let mut base = lock(&self.tunnel_base);
        base.retain(|n, _| new.tunnel(n).is_some());
        for t in new.tunnels.iter().filter(|t| cur.tunnel(&t.name).is_none()) {
            if let Some((_, Some(p))) = ports.iter().find(|(n, _)| *n == t.name) {
                let snap = sum.ports.get(usize::from(*p)).copied().unwrap_or_default();
                base.insert(t.name.clone(), snap);
            }
        }
        report.applied = true;
        report.done = done;
        Ok(report)
    }

    /// Asks every worker with `make` and collects the answers (blocking:
    /// call from a blocking context). A worker that does not answer within
    /// [`MAILBOX_WAIT`] is skipped.
    fn ask<T: Send + 'static>(
        &self,
        make: impl Fn(crossbeam_channel::Sender<T>) -> Command,
    ) -> Vec<(usize, T)> {
        let mut rxs = Vec::new();
        for (w, mb) in self.dp.mailboxes.iter().enumerate() {
            let (tx, rx) = crossbeam_channel::bounded(1);
            if mb.try_send(make(tx)).is_ok() {
                rxs.push((w, rx));
            }
        }
        let deadline = Instant::now() + MAILBOX_WAIT;
        rxs.into_iter()
            .filter_map(|(w, rx)| rx.recv_deadline(deadline).ok().map(|v| (w, v)))
            .collect()
    }

    /// Neighbour entries of every worker, merged per (interface, address).
    pub fn neighbors(&self) -> Vec<NeighborInfo> {
        let cfg = self.config();
        let mut out: Vec<NeighborInfo> = Vec::new();
        let answers: Vec<(usize, Vec<NeighbourEntry>)> = self.ask(Command::Neighbours);
        // Neighbours on an Ethernet tunnel (VXLAN, NVGRE, GRE TEB) sit on
        // its virtual port: named after the tunnel.
        let tunnel_ports = self.tunnel_ports(&cfg);
        let tables = self.dp.tables.load();
        for (w, entries) in answers {
            for e in entries {
                let interface = tables
                    .iface(e.port)
                    .filter(|i| cfg.interface(&i.name).is_some())
                    .map(|i| i.name.clone())
                    .or_else(|| {
                        tunnel_ports
                            .iter()
                            .find(|(_, p)| *p == Some(e.port))
                            .map(|(name, _)| name.clone())
                    })
                    .unwrap_or_else(|| format!("port{}", e.port));
                let address = e.ip.to_string();
                match out
                    .iter_mut()
                    .find(|n| n.interface == interface && n.address == address)
                {
                    Some(n) => {
                        n.workers.push(w as u64);
                        if n.state != "reachable" && e.state != State::Incomplete {
                            n.state = state_str(e.state).into();
                            n.mac = fmt_mac(e.mac);
                        }
                    }
                    None => out.push(NeighborInfo {
                        interface,
                        address,
                        mac: fmt_mac(e.mac),
                        state: state_str(e.state).into(),
                        workers: vec![w as u64],
                    }),
                }
            }
        }
        out.sort_by(|a, b| (&a.interface, &a.address).cmp(&(&b.interface, &b.address)));
        out
    }

    /// Arms every worker's trace for `n` packets; returns how many took it.
    pub fn trace_arm(&self, n: usize) -> usize {
        self.dp
            .mailboxes
            .iter()
            .filter(|mb| mb.try_send(Command::TraceArm(n)).is_ok())
            .count()
    }

    /// Collects new trace lines from the workers; returns all kept lines.
    pub fn trace_lines(&self) -> Vec<String> {
        let answers = self.ask(Command::TraceDrain);
        let mut kept = lock(&self.trace);
        for (w, lines) in answers {
            for l in lines {
                if kept.len() >= TRACE_KEEP {
                    kept.pop_front();
                }
                kept.push_back(format!("worker {w}: {l}"));
            }
        }
        kept.iter().cloned().collect()
    }

    pub fn trace_clear(&self) {
        let _ = self.trace_lines();
        lock(&self.trace).clear();
    }

    /// Captures up to `count` frames on interface `name` (both directions,
    /// every worker) for at most `timeout`; returns a pcap file.
    pub fn capture(&self, name: &str, count: u64, timeout: Duration) -> Result<Vec<u8>, ApiError> {
        let port = self
            .config()
            .interface(name)
            .and_then(|_| self.port_of(name))
            .ok_or_else(|| ApiError::not_found("interface", format!("no interface \"{name}\"")))?;
        if !(1..=CAPTURE_MAX_FRAMES).contains(&count) {
            return Err(ApiError::bad(
                "count",
                format!("count = {count} is out of range (expected 1..={CAPTURE_MAX_FRAMES})"),
            ));
        }
        let count = count as usize;
        let (tx, rx) = crossbeam_channel::bounded::<Captured>(count.min(4096));
        for mb in &self.dp.mailboxes {
            let _ = mb.try_send(Command::CaptureStart {
                port,
                count,
                out: tx.clone(),
            });
        }
        drop(tx);
        let deadline = Instant::now() + timeout;
        let mut frames = Vec::new();
        let mut bytes = 0usize;
        while frames.len() < count && bytes < CAPTURE_MAX_BYTES {
            match rx.recv_deadline(deadline) {
                Ok(c) => {
                    bytes += c.data.len();
                    frames.push(c);
                }
                Err(_) => break,
            }
        }
        for mb in &self.dp.mailboxes {
            let _ = mb.try_send(Command::CaptureStop);
        }
        frames.sort_by_key(|c| c.ts);
        let mut w = wire::pcap::Writer::new(
            Vec::with_capacity(bytes + frames.len() * 16 + 24),
            wire::pcap::LinkType::Ethernet,
            wire::pcap::DEFAULT_SNAPLEN,
        )
        .map_err(|e| ApiError::new(500, e.to_string(), None))?;
        for c in &frames {
            w.write_packet(c.ts, &c.data)
                .map_err(|e| ApiError::new(500, e.to_string(), None))?;
        }
        Ok(w.into_inner())
    }

    pub fn workers(&self) -> usize {
        self.dp.counters.len()
    }
}

#[cfg(test)]
mod tests {
    use super::field_in;

    #[test]
    fn field_from_message() {
        let m = "[[route]] 10.0.0.0/8: via \"x\" is not an interface";
        assert_eq!(
            field_in(m, &["prefix", "via", "vrf"]).as_deref(),
            Some("via")
        );
        assert_eq!(field_in("nothing", &["prefix"]).as_deref(), Some("prefix"));
    }
}
