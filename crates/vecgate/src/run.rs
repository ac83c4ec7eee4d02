//! `vecgate run --config F`: the gateway in the foreground.
//!
//! Startup: load and validate the configuration, attach to every netdev (one
//! queue per worker: AF_PACKET sockets in one fanout group per netdev, or
//! TAP queues), install the ingress guards, build the tables, start one
//! pinned worker thread per `workers`, log `ready`. SIGINT/SIGTERM stop the
//! workers, remove the guards and exit 0. Whatever kills the process, the
//! kernel removes the guards (owner tables) and releases the per-netdev
//! locks with it. Every startup failure is one clear
//! message and exit 1, never a panic.

use crate::live_ports::{driver_str, fanout_id, Claim, LivePorts};
use anyhow::{anyhow, Context, Result};
use dataplane::neighbour::NeighbourShared;
use dataplane::tables::SharedTables;
use dataplane::worker::{Worker, WorkerConfig};
use packet::Port;
use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing::{error, info, warn};
use vecgate_config::{Config, Driver, LoadError};
use vecgate_control::build::{Inputs, IpsecTables, Placement, Ports};
use vecgate_control::NetdevFacts;
use vecgate_io::IngressGuard;

pub fn main(config: &Path, log_level: &str, log_json: bool) -> ExitCode {
    init_logging(log_level, log_json);
    let cfg = match vecgate_config::load(config) {
        Ok(c) => c,
        Err(LoadError::Invalid { path, diagnostics }) => {
            for d in &diagnostics {
                eprintln!("{}:{}: {}", path.display(), d.line, d.message);
            }
            error!(
                errors = diagnostics.len(),
                "invalid configuration, not starting"
            );
            return ExitCode::FAILURE;
        }
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if cfg.pool.is_some() {
        error!("[pool]: this build checks pool membership but does not run it yet (docs/guide/pool.md says what works); not starting");
        return ExitCode::FAILURE;
    }
    match run(cfg, config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(level: &str, json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        b.json().init();
    } else {
        b.init();
    }
}

fn run(cfg: Config, path: &Path) -> Result<()> {
    let mut pre = prepare(&cfg)?;
    let fwd = start_forwarding(&cfg, &mut pre)?;
    let mut gw = start_control(&cfg, pre, fwd)?;
    gw.serve(path);
    gw.shut_down();
    Ok(())
}

/// What is made ready before any netdev is touched (a failure here leaves
/// every interface alone).
struct Prepared {
    auth: vecgate_control::Auth,
    tls: Option<vecgate_control::Tls>,
    /// Per interface: one removed live releases its netdev.
    locks: HashMap<String, vecgate_io::NetdevLock>,
    esp: Option<Arc<vecgate_ipsec::EspRegistry>>,
    sas: SaStateThread,
    ike: Option<vecgate_keying::ike::Prepared>,
    punts: Punts,
    /// With `[ha] sync_*`: the state sync's ends not yet handed out.
    sync: Option<SyncEnds>,
    host_taps: crate::host_tap::Taps,
    tenant_fpm: Vec<vecgate_control::fpm::Source>,
}

/// The SA state and the thread that keeps its durable ceilings ahead of
/// use.
struct SaStateThread {
    state: Arc<vecgate_ipsec::SaState>,
    stop: Arc<AtomicBool>,
    ticker: std::thread::JoinHandle<()>,
}

/// The channels between the state sync's driver and the threads that
/// talk to it, made before any of them starts (the SA state's reserve
/// hook holds a sender from the first SA on).
struct SyncEnds {
    /// To the driver (the reserve hook, IKE and VRRP hold clones).
    tx: crossbeam_channel::Sender<vecgate_ha::syncer::Message>,
    rx: crossbeam_channel::Receiver<vecgate_ha::syncer::Message>,
    /// From the driver to the IKE thread (when one runs).
    to_ike: Option<crossbeam_channel::Sender<vecgate_ha::syncer::ToIke>>,
    /// Takeover answers, from the driver to VRRP.
    taken_tx: crossbeam_channel::Sender<()>,
    taken_rx: crossbeam_channel::Receiver<()>,
}

/// The queues on which the workers hand packets to the control threads.
struct Punts {
    /// IKE (UDP 500 / 4500) to the IKE thread.
    ike: Option<Arc<dataplane::punt::IkePunt>>,
    /// VRRP adverts to the speaker thread.
    vrrp: Option<Arc<dataplane::punt::VrrpPunt>>,
    /// BGP and BFD to the host's stack (`[[routing.punt]]`).
    host: Option<Arc<dataplane::punt::HostPunt>>,
}

/// Everything that may refuse to start before any netdev is attached.
fn prepare(cfg: &Config) -> Result<Prepared> {
    // The API endpoint first: a second gateway with the same API must fail
    // before it touches the first one's interfaces and guards.
    vecgate_control::check_endpoint(&cfg.gateway.api)
        .map_err(|e| anyhow!("management API on {}: {e}", cfg.gateway.api))?;
    // Its secrets too (token files, TLS key): refused with the reason
    // before anything is attached.
    let auth = api_auth(cfg)?;
    let tls = api_tls(cfg)?;
    // One gateway per netdev: claimed before anything is attached, held
    // (by the kernel, through flock) until this process exits.
    let locks = lock_netdevs(cfg)?;
    // IPsec SAs: keys read from their files once; the registry outlives
    // every table rebuild (sequence numbers, replay windows).
    // Always present (an empty registry costs nothing: the tables get an
    // ESP part only with ipsec tunnels), so ipsec tunnels can be added live.
    // Static SAs resume from the state directory (sequence ceilings,
    // replay windows); their first blocks are durable before any worker
    // runs, and a ticker keeps the next ones ahead of use.
    // With `[ha] sync_*`, the state sync's channels come first: the
    // reserve hook tells it each ceiling from the first SA on.
    let (mut sync, ike_from_sync) = match cfg.ha.as_ref().and_then(|h| h.sync.as_ref()) {
        Some(_) => {
            let (tx, rx) = crossbeam_channel::bounded(crate::hasync::QUEUE);
            let (to_ike, ike_rx) = crossbeam_channel::unbounded();
            let (taken_tx, taken_rx) = crossbeam_channel::bounded(1);
            let ends = SyncEnds {
                tx,
                rx,
                to_ike: Some(to_ike),
                taken_tx,
                taken_rx,
            };
            (Some(ends), Some(ike_rx))
        }
        None => (None, None),
    };
    let (esp, sas) = start_sa_state(cfg, sync.as_ref().map(|s| s.tx.clone()))?;
    // IKEv2: state machines built now (PSK files read); the punt path
    // carries IKE between the workers and the control thread. Both always
    // run (idle, the thread sleeps on the punt queue) so IKE tunnels can
    // be added live.
    let ike = match &esp {
        Some(reg) => {
            let link = match (&sync, ike_from_sync) {
                (Some(ends), Some(from_sync)) => Some(vecgate_keying::ike::HaLink {
                    sas: sas.state.clone(),
                    to_sync: ends.tx.clone(),
                    from_sync,
                }),
                _ => None,
            };
            Some(
                vecgate_keying::ike::prepare(cfg, reg.clone(), link)
                    .map_err(|e| anyhow!("IKEv2: {e}"))?,
            )
        }
        None => None,
    };
    if let Some(ends) = sync.as_mut().filter(|_| ike.is_none()) {
        ends.to_ike = None;
    }
    let ike_punt = ike
        .as_ref()
        .map(|_| dataplane::punt::IkePunt::new(dataplane::punt::ike::DEFAULT_SLOTS));
    // VRRP (`[ha]`): adverts punted by the workers to the speaker thread.
    let vrrp_punt = cfg
        .ha
        .as_ref()
        .filter(|h| !h.groups.is_empty())
        .map(|_| dataplane::punt::VrrpPunt::new(64));
    // `[[routing.punt]]`: BGP and BFD to the host's stack through a TUN
    // per VRF (created and addressed now, before any worker punts).
    let (host_taps, tenant_fpm) = crate::host_tap::open(cfg).map_err(|e| anyhow!(e))?;
    let host_punt = (!host_taps.is_empty())
        .then(|| dataplane::punt::HostPunt::new(dataplane::punt::host::DEFAULT_SLOTS));
    Ok(Prepared {
        auth,
        tls,
        locks,
        esp,
        sas,
        ike,
        sync,
        punts: Punts {
            ike: ike_punt,
            vrrp: vrrp_punt,
            host: host_punt,
        },
        host_taps,
        tenant_fpm,
    })
}

/// The forwarding half of a started gateway.
struct Forwarding {
    live: Arc<LivePorts>,
    shared: Arc<SharedTables>,
    tports: Arc<std::sync::Mutex<Ports>>,
    netdevs: Vec<NetdevFacts>,
    workers: Workers,
    /// Set by SIGINT / SIGTERM.
    stop: Arc<AtomicBool>,
    workers_stop: Arc<AtomicBool>,
}

/// Every interface attached (one queue per worker), the first tables
/// built, the workers forwarding.
fn start_forwarding(cfg: &Config, pre: &mut Prepared) -> Result<Forwarding> {
    let nworkers = cfg.gateway.workers.max(1);
    // Attach: every worker gets its own queue on every interface.
    let (per_worker, guards) = attach(cfg, nworkers)?;
    let netdevs = netdev_facts(cfg, &per_worker[0]);
    let facts: HashMap<String, NetdevFacts> = cfg
        .interfaces
        .iter()
        .map(|i| i.name.clone())
        .zip(netdevs.iter().copied())
        .collect();
    let (tports, shared) = first_tables(cfg, &facts, pre.esp.as_deref())?;
    let locks = std::mem::take(&mut pre.locks);
    let live = live_ports(cfg, nworkers, facts, locks, guards);
    let neigh = NeighbourShared::new(4096, 60_000);

    let stop = Arc::new(AtomicBool::new(false));
    let workers_stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let wcfg = WorkerConfig {
        busy_poll: cfg.gateway.busy_poll,
        idle_spin_us: cfg
            .gateway
            .idle_spin_us
            .unwrap_or(packet::idle::DEFAULT_IDLE_SPIN_US),
        ..WorkerConfig::default()
    };
    let workers = spawn_workers(
        &live,
        per_worker,
        &shared,
        &wcfg,
        &neigh,
        &pre.punts,
        &workers_stop,
    )?;
    Ok(Forwarding {
        live,
        shared,
        tports,
        netdevs,
        workers,
        stop,
        workers_stop,
    })
}

/// A started gateway: what [`Running::serve`] watches and
/// [`Running::shut_down`] stops in order.
struct Running {
    ctl: Arc<vecgate_control::Control>,
    api: vecgate_control::ServerHandle,
    live: Arc<LivePorts>,
    esp: Option<Arc<vecgate_ipsec::EspRegistry>>,
    sas: SaStateThread,
    /// The IKE control plane's thread.
    ike: Option<std::thread::JoinHandle<()>>,
    /// Soft lifetimes of IKE child SAs are turned into rekeys.
    ike_rekeys: Option<vecgate_keying::ike::IkeControl>,
    ha_thread: Option<std::thread::JoinHandle<()>>,
    /// The state sync's driver.
    sync_thread: Option<std::thread::JoinHandle<()>>,
    ha_status: crate::ha::HaStatus,
    host_thread: Option<std::thread::JoinHandle<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    notifier: Option<Arc<crate::notify::Notifier>>,
    watchdog: Option<crate::notify::Watchdog>,
    stop: Arc<AtomicBool>,
    workers_stop: Arc<AtomicBool>,
    /// Set by SIGHUP: reload the file live (`vecgate reload`'s steps).
    hup: Arc<AtomicBool>,
}

/// The control half on top of forwarding workers: the management API,
/// the VRRP, host punt and IKE threads; then `ready` (log and systemd).
fn start_control(cfg: &Config, pre: Prepared, fwd: Forwarding) -> Result<Running> {
    let held = crate::ha::Held::default();
    let Workers {
        threads,
        counters,
        mailboxes,
        beats,
    } = fwd.workers;
    // The management API: live changes rebuild the tables with the same
    // builder as above and publish them; workers never wait for it.
    let mailbox0 = mailboxes.first().cloned();
    let (api, ctl) = start_api(
        cfg,
        pre.auth,
        pre.tls,
        &fwd.shared,
        &counters,
        mailboxes,
        &fwd.netdevs,
        pre.esp.clone(),
        &pre.sas.state,
        pre.ike.as_ref().map(|i| (i.status(), i.control())),
        fwd.tports,
        held.clone(),
        pre.tenant_fpm,
        &fwd.live,
    )?;
    info!(api = %api.endpoint, "management API listening");
    let ha_status = crate::ha::HaStatus::default();
    let (ha_thread, sync_thread) = start_ha(
        cfg,
        HaParts {
            ctl: &ctl,
            sas: &pre.sas.state,
            sync: pre.sync,
            vrrp_punt: pre.punts.vrrp.as_ref(),
            mailbox0,
            netdevs: &fwd.netdevs,
            held: &held,
            status: &ha_status,
        },
        &fwd.stop,
    )?;
    let ike_rekeys = pre.ike.as_ref().map(|i| i.control());
    let (host_thread, ike) =
        start_punt_threads(pre.host_taps, pre.ike, &pre.punts, &fwd.shared, &fwd.stop)?;
    let (notifier, watchdog, hup) = announce_ready(cfg, &ctl, &api, &fwd.netdevs, beats)?;
    if let Some(reg) = pre.esp.as_ref().filter(|r| !r.list().is_empty()) {
        info!("IPsec SAs:\n{}", reg.show());
    }
    Ok(Running {
        ctl,
        api,
        live: fwd.live,
        esp: pre.esp,
        sas: pre.sas,
        ike,
        ike_rekeys,
        ha_thread,
        sync_thread,
        ha_status,
        host_thread,
        threads,
        notifier,
        watchdog,
        stop: fwd.stop,
        workers_stop: fwd.workers_stop,
        hup,
    })
}

/// The host punt thread (`[[routing.punt]]`) and the IKE thread, each
/// when its punt queue exists.
#[allow(clippy::type_complexity)]
fn start_punt_threads(
    host_taps: crate::host_tap::Taps,
    ike: Option<vecgate_keying::ike::Prepared>,
    punts: &Punts,
    shared: &Arc<SharedTables>,
    stop: &Arc<AtomicBool>,
) -> Result<(
    Option<std::thread::JoinHandle<()>>,
    Option<std::thread::JoinHandle<()>>,
)> {
    let host_thread = match &punts.host {
        Some(h) => Some(
            crate::host_tap::spawn(host_taps, h.clone(), shared.clone(), stop.clone())
                .context("spawning the host punt thread")?,
        ),
        None => None,
    };
    let ike = match (ike, &punts.ike) {
        (Some(prep), Some(p)) => {
            let plane = prep.into_plane(shared.clone(), p.clone());
            let stop = stop.clone();
            Some(
                std::thread::Builder::new()
                    .name("vg-ike".into())
                    .spawn(move || plane.run(&stop))
                    .context("spawning the IKE thread")?,
            )
        }
        _ => None,
    };
    Ok((host_thread, ike))
}

/// `ready` in the log and to systemd, once every port is attached and the
/// API's socket is bound (it answers from here on); then SIGHUP reloads.
#[allow(clippy::type_complexity)]
fn announce_ready(
    cfg: &Config,
    ctl: &vecgate_control::Control,
    api: &vecgate_control::ServerHandle,
    netdevs: &[NetdevFacts],
    beats: Vec<Arc<std::sync::atomic::AtomicU64>>,
) -> Result<(
    Option<Arc<crate::notify::Notifier>>,
    Option<crate::notify::Watchdog>,
    Arc<AtomicBool>,
)> {
    let nworkers = cfg.gateway.workers.max(1);
    let nports = cfg.interfaces.len();
    info!(
        gateway = %cfg.gateway.name,
        workers = nworkers,
        interfaces = nports,
        routes = cfg.routes.len(),
        "ready"
    );
    log_attached(cfg, netdevs);
    // systemd (Type=notify): ready now.
    let (notifier, watchdog) = notify_ready(ctl, api, beats, nports, nworkers);
    // SIGHUP reloads the file live (`vecgate reload`'s steps).
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .context("installing signal handlers")?;
    Ok((notifier, watchdog, hup))
}

/// The first tables, and the port assignment that interfaces and tunnels
/// keep across live changes.
fn first_tables(
    cfg: &Config,
    facts: &HashMap<String, NetdevFacts>,
    esp: Option<&vecgate_ipsec::EspRegistry>,
) -> Result<(Arc<std::sync::Mutex<Ports>>, Arc<SharedTables>)> {
    let mut tports = Ports::new(cfg);
    let esp = esp.map(esp_tables);
    let inputs = Inputs {
        netdevs: facts,
        learned: &Default::default(),
        held: &Default::default(),
        ipsec: esp.as_ref().map(|e| e as &dyn IpsecTables),
    };
    let tables = tports
        .tables(cfg, &inputs)
        .map_err(|e| anyhow!("building tables: {e}"))?;
    Ok((
        Arc::new(std::sync::Mutex::new(tports)),
        SharedTables::new(tables),
    ))
}

/// The ipsec tunnels' part of a table build: their SAs from `esp`.
fn esp_tables(
    esp: &vecgate_ipsec::EspRegistry,
) -> impl Fn(
    &mut dataplane::tables::TablesBuilder,
    &vecgate_config::Tunnel,
    Placement<'_>,
) -> Result<(), String>
       + '_ {
    move |b, t, at| crate::ipsec_wiring::add_tunnel(b, esp, t, at)
}

/// One gateway per netdev: claimed before anything is attached, held (by
/// the kernel, through flock) until this process exits; kept per
/// interface, so one removed live releases its netdev.
fn lock_netdevs(cfg: &Config) -> Result<HashMap<String, vecgate_io::NetdevLock>> {
    cfg.interfaces
        .iter()
        .map(|ifc| {
            vecgate_io::NetdevLock::acquire(&ifc.host, &cfg.gateway.name)
                .with_context(|| format!("interface \"{}\"", ifc.name))
                .map(|l| (ifc.name.clone(), l))
        })
        .collect()
}

/// The SA registry (static SAs loaded, resumed from the state directory)
/// and the thread that keeps the durable ceilings ahead of use; with a
/// state sync, each ceiling is told to it (`sync`) before it is used.
fn start_sa_state(
    cfg: &Config,
    sync: Option<crossbeam_channel::Sender<vecgate_ha::syncer::Message>>,
) -> Result<(Option<Arc<vecgate_ipsec::EspRegistry>>, SaStateThread)> {
    use vecgate_ha::syncer::Message;
    let hook = sync.map(|tx| -> vecgate_ipsec::sastate::ReserveHook {
        // A full queue loses this word: the next interval's snapshot and
        // the standby's margin cover it.
        Box::new(move |snap| {
            let _ = tx.try_send(Message::Reserved(snap.clone()));
        })
    });
    let state =
        Arc::new(vecgate_ipsec::SaState::for_config(cfg, hook).map_err(|e| anyhow!("IPsec: {e}"))?);
    let esp = Some(
        vecgate_ipsec::static_sas::load(cfg, &*state)
            .map_err(|e| anyhow!("IPsec: {e}"))?
            .unwrap_or_default(),
    );
    // The first blocks are durable before any worker runs.
    let _ = state.tick(std::time::Instant::now());
    let stop = Arc::new(AtomicBool::new(false));
    let (st, halt) = (state.clone(), stop.clone());
    let ticker = std::thread::Builder::new()
        .name("vg-sastate".into())
        .spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                // A failed write is logged by the state and publishes
                // nothing: the SA waits at its durable ceiling.
                let _ = st.tick(std::time::Instant::now());
                std::thread::sleep(vecgate_ipsec::sastate::TICK);
            }
        })
        .context("spawning the state ticker")?;
    Ok((
        esp,
        SaStateThread {
            state,
            stop,
            ticker,
        },
    ))
}

/// What each interface holds on its netdev, and how its queues are
/// re-opened, for the live attach and release (live_ports.rs).
fn live_ports(
    cfg: &Config,
    nworkers: usize,
    facts: HashMap<String, NetdevFacts>,
    mut locks: HashMap<String, vecgate_io::NetdevLock>,
    mut guards: HashMap<String, IngressGuard>,
) -> Arc<LivePorts> {
    let claims: HashMap<String, Claim> = cfg
        .interfaces
        .iter()
        .filter_map(|i| {
            Some((
                i.name.clone(),
                Claim {
                    host: i.host.clone(),
                    lock: locks.remove(&i.name)?,
                    guard: guards.remove(&i.name),
                },
            ))
        })
        .collect();
    let reopen = cfg
        .interfaces
        .iter()
        .enumerate()
        .map(|(n, i)| (i.host.clone(), (driver_str(i.driver), fanout_id(n))))
        .collect();
    Arc::new(LivePorts::new(
        &cfg.gateway.name,
        nworkers,
        facts,
        claims,
        reopen,
    ))
}

/// What the VRRP speaker and the state sync are wired to.
struct HaParts<'a> {
    ctl: &'a Arc<vecgate_control::Control>,
    sas: &'a Arc<vecgate_ipsec::SaState>,
    sync: Option<SyncEnds>,
    vrrp_punt: Option<&'a Arc<dataplane::punt::VrrpPunt>>,
    mailbox0: Option<crossbeam_channel::Sender<dataplane::worker::Command>>,
    netdevs: &'a [NetdevFacts],
    held: &'a crate::ha::Held,
    status: &'a crate::ha::HaStatus,
}

/// The state sync's driver (with `[ha] sync_*`) and the VRRP speaker
/// thread (with `[ha]` groups); taking or releasing the virtual addresses
/// republishes the tables through the API's build-and-publish. Both stop
/// with `stop`.
#[allow(clippy::type_complexity)]
fn start_ha(
    cfg: &Config,
    p: HaParts<'_>,
    stop: &Arc<AtomicBool>,
) -> Result<(
    Option<std::thread::JoinHandle<()>>,
    Option<std::thread::JoinHandle<()>>,
)> {
    let sync_status = crate::hasync::SharedStatus::default();
    let ctl = p.ctl;
    // The state sync first: the speaker's first transition to master
    // takes over what it has received.
    let (sync_thread, link) = match (cfg.ha.as_ref().and_then(|h| h.sync.as_ref()), p.sync) {
        (Some(y), Some(ends)) => {
            let w = crate::hasync::Wiring {
                ctl: ctl.clone(),
                sas: p.sas.clone(),
                messages: ends.rx,
                ike: ends.to_ike,
                taken_over: ends.taken_tx,
                status: sync_status.clone(),
            };
            let t = crate::hasync::start(y, w, stop.clone()).map_err(|e| anyhow!(e))?;
            let link = crate::ha::SyncLink {
                tx: ends.tx,
                taken_over: ends.taken_rx,
                wait: crate::hasync::takeover_wait(y),
            };
            (Some(t), Some(link))
        }
        _ => (None, None),
    };
    let ha_thread = match (p.vrrp_punt, p.mailbox0) {
        (Some(punt), Some(mb)) => {
            let (req_tx, req_rx) = crossbeam_channel::bounded(4);
            ctl.set_ha(Arc::new(crate::ha::HaApi {
                status: p.status.clone(),
                sync: sync_status,
                requests: req_tx,
            }));
            let c = ctl.clone();
            let macs: Vec<[u8; 6]> = p.netdevs.iter().map(|n| n.mac).collect();
            let w = crate::ha::HaWiring {
                punt: punt.clone(),
                mailbox: mb,
                held: p.held.clone(),
                rebuild: Box::new(move || {
                    if let Err(e) = c.rebuild() {
                        error!("VRRP: publishing the virtual addresses: {}", e.message);
                    }
                }),
                status: p.status.clone(),
                requests: req_rx,
                sync: link,
            };
            Some(
                crate::ha::start(cfg, &macs, w, stop.clone())
                    .context("spawning the VRRP thread")?,
            )
        }
        _ => None,
    };
    Ok((ha_thread, sync_thread))
}

/// systemd (Type=notify): READY once every port is attached and the API
/// answers, reloads framed, and the watchdog fed from the workers' beats.
fn notify_ready(
    ctl: &vecgate_control::Control,
    api: &vecgate_control::ServerHandle,
    beats: Vec<Arc<std::sync::atomic::AtomicU64>>,
    nports: usize,
    nworkers: usize,
) -> (
    Option<Arc<crate::notify::Notifier>>,
    Option<crate::notify::Watchdog>,
) {
    let notifier = crate::notify::Notifier::from_env().map(Arc::new);
    let watchdog = notifier
        .as_ref()
        .and_then(|_| crate::notify::Watchdog::from_env(beats));
    if let Some(n) = &notifier {
        n.send(&format!(
            "READY=1\nSTATUS=forwarding: {nports} interfaces, {nworkers} workers, API on {}",
            api.endpoint
        ));
        // Every live reload, however it came (SIGHUP, `vecgate reload`
        // from ExecReload=, POST /config), is framed for systemd.
        let n = n.clone();
        ctl.set_reload_hook(Arc::new(move |start| {
            if start {
                n.send(&crate::notify::reloading_message());
            } else {
                n.send("READY=1\nSTATUS=forwarding (reloaded)");
            }
        }));
    }
    (notifier, watchdog)
}

impl Running {
    /// The main thread until SIGINT/SIGTERM: the watchdog, SIGHUP reloads
    /// and the SA lifetime events.
    fn serve(&mut self, path: &Path) {
        let esp = self.esp.as_deref();
        while !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            if let (Some(n), Some(w)) = (&self.notifier, self.watchdog.as_mut()) {
                w.tick(n);
            }
            if self.hup.swap(false, Ordering::Relaxed) {
                // On its own thread: the watchdog keeps ticking while IKE
                // deletes wait for their peers; reloads never overlap
                // (Control::reload serializes them).
                let (ctl, path) = (self.ctl.clone(), path.to_owned());
                if let Err(e) = std::thread::Builder::new()
                    .name("vg-reload".into())
                    .spawn(move || reload_file(&ctl, &path))
                {
                    error!("reload: spawning its thread: {e}");
                }
            }
            // SA lifetimes: soft → IKEv2 rekeys its child SAs by
            // CREATE_CHILD_SA (a static SA can only warn), hard → the SA
            // refuses traffic (counted as lifetime-hard; inbound ones leave
            // the SAD).
            for e in esp.iter().flat_map(|r| r.poll_events()) {
                vecgate_keying::lifetime::log_event(esp, &e);
                if e.event == vecgate_ipsec::LifetimeEvent::Soft {
                    if let Some(c) = &self.ike_rekeys {
                        c.rekey(e.tunnel, e.spi, e.outbound);
                    }
                }
            }
        }
    }

    /// Stops everything in order: VRRP first (its priority-0 adverts go out
    /// through the workers), the workers last but the SA state, then the
    /// guards.
    fn shut_down(self) {
        info!("stopping");
        if let Some(n) = &self.notifier {
            n.send("STOPPING=1\nSTATUS=stopping");
        }
        // VRRP first: its priority-0 adverts go out through the workers.
        if let Some(t) = self.ha_thread {
            if t.join().is_err() {
                error!("the VRRP thread panicked");
            }
            let groups = self
                .ha_status
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            for line in crate::ha::describe(&groups) {
                info!("VRRP {line}");
            }
        }
        if let Some(t) = self.host_thread {
            if t.join().is_err() {
                error!("the host punt thread panicked");
            }
        }
        self.api.shutdown();
        if let Some(t) = self.ike {
            if t.join().is_err() {
                error!("the IKE thread panicked");
            }
        }
        self.workers_stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            if t.join().is_err() {
                error!("a worker thread panicked");
            }
        }
        if let Some(t) = self.sync_thread {
            if t.join().is_err() {
                error!("the state sync thread panicked");
            }
        }
        // Nothing sends or accepts any more: the exact positions replace the
        // durable ceilings, so a clean restart skips and drops nothing.
        self.sas.stop.store(true, Ordering::Relaxed);
        let _ = self.sas.ticker.join();
        self.sas.state.shutdown();
        show_counters(&self.ctl);
        self.live.remove_guards();
        info!("stopped");
    }
}

/// Opens every interface once per worker (one queue each) and installs
/// the AF_PACKET ingress guards (by interface name).
#[allow(clippy::type_complexity)]
fn attach(
    cfg: &Config,
    nworkers: usize,
) -> Result<(Vec<Vec<Box<dyn Port>>>, HashMap<String, IngressGuard>)> {
    let mut per_worker: Vec<Vec<Box<dyn Port>>> = (0..nworkers).map(|_| Vec::new()).collect();
    let mut guards = HashMap::new();
    for (i, ifc) in cfg.interfaces.iter().enumerate() {
        let drv = driver_str(ifc.driver);
        for (w, ports) in per_worker.iter_mut().enumerate() {
            let port = vecgate_io::open_port(drv, &ifc.host, w, nworkers, fanout_id(i))
                .with_context(|| format!("interface \"{}\" (netdev {})", ifc.name, ifc.host))?;
            ports.push(port);
        }
        if ifc.driver == Driver::AfPacket {
            let table = format!("vecgate_{}_{}", cfg.gateway.name, ifc.host);
            guards.insert(
                ifc.name.clone(),
                IngressGuard::install_named(&ifc.host, &table).with_context(|| {
                    format!("interface \"{}\": installing the ingress guard", ifc.name)
                })?,
            );
        }
    }
    Ok((per_worker, guards))
}

/// What each netdev is (from worker 0's ports), warning where it cannot
/// do what the configuration asks.
fn netdev_facts(cfg: &Config, ports: &[Box<dyn Port>]) -> Vec<NetdevFacts> {
    let netdevs: Vec<NetdevFacts> = ports
        .iter()
        .map(|p| NetdevFacts {
            mac: p.mac(),
            mtu: p.mtu(),
            offloads: p.offloads(),
        })
        .collect();
    for (ifc, nd) in cfg.interfaces.iter().zip(&netdevs) {
        if ifc.offloads && !nd.offloads {
            warn!(interface = %ifc.name, "the backend exchanges no super-packets: offloads are done in software");
        }
        if let Some(mtu) = ifc.mtu {
            if mtu > nd.mtu {
                warn!(interface = %ifc.name, configured = mtu, netdev = nd.mtu, "configured MTU above the netdev's: using the netdev's");
            }
        }
    }
    netdevs
}

/// The worker threads and what the control side keeps of each.
struct Workers {
    threads: Vec<std::thread::JoinHandle<()>>,
    counters: Vec<Arc<dataplane::counters::WorkerCounters>>,
    mailboxes: Vec<crossbeam_channel::Sender<dataplane::worker::Command>>,
    beats: Vec<Arc<std::sync::atomic::AtomicU64>>,
}

/// One pinned thread per worker, each polling its own queue of every port.
fn spawn_workers(
    live: &LivePorts,
    per_worker: Vec<Vec<Box<dyn Port>>>,
    shared: &Arc<SharedTables>,
    wcfg: &WorkerConfig,
    neigh: &Arc<NeighbourShared>,
    punts: &Punts,
    workers_stop: &Arc<AtomicBool>,
) -> Result<Workers> {
    let nworkers = per_worker.len();
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let mut threads = Vec::new();
    let mut counters = Vec::new();
    let mut mailboxes = Vec::new();
    let mut beats = Vec::new();
    for (w, ports) in per_worker.into_iter().enumerate() {
        let mut worker = Worker::new(w, ports, shared.clone(), wcfg.clone());
        worker.set_neighbour_shared(neigh.clone());
        if let Some(p) = &punts.ike {
            worker.set_ike_punt(p.clone());
        }
        if let Some(p) = &punts.vrrp {
            worker.set_vrrp(p.clone());
        }
        if let Some(h) = &punts.host {
            worker.set_host_punt(h.clone());
        }
        counters.push(worker.counters());
        mailboxes.push(worker.mailbox());
        beats.push(worker.heartbeat());
        // Re-opens by netdev name (startup interfaces and those attached
        // live alike; locked once a second, only while a port is down).
        let reopen = live.reopen.clone();
        worker.set_port_factory(Box::new(move |_port, host| {
            let found = reopen
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(host)
                .copied();
            let (drv, group) =
                found.ok_or_else(|| std::io::Error::other(format!("{host} is not attached")))?;
            vecgate_io::open_port(drv, host, w, nworkers, group)
                .map_err(|e| std::io::Error::other(e.to_string()))
        }));
        let core = cores.get(w % cores.len().max(1)).copied();
        // Workers stop after the IKE thread (its deletes go out through them).
        let stop = workers_stop.clone();
        let t = std::thread::Builder::new()
            .name(format!("vg-worker-{w}"))
            .spawn(move || {
                if let Some(c) = core {
                    core_affinity::set_for_current(c);
                }
                worker.run(&stop);
            })
            .context("spawning a worker thread")?;
        threads.push(t);
    }

    Ok(Workers {
        threads,
        counters,
        mailboxes,
        beats,
    })
}

/// One `attached` line per interface.
fn log_attached(cfg: &Config, netdevs: &[NetdevFacts]) {
    for (ifc, nd) in cfg.interfaces.iter().zip(netdevs) {
        let mac = nd
            .mac
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        let addrs: Vec<String> = ifc
            .addresses
            .iter()
            .map(|a| format!("{}/{}", a.addr, a.prefix_len))
            .collect();
        info!(interface = %ifc.name, netdev = %ifc.host, driver = driver_str(ifc.driver), %mac, mtu = nd.mtu,
              offloads = nd.offloads, vrf = %ifc.vrf, addresses = %addrs.join(","), "attached");
    }
}

/// The final counters, logged at exit.
fn show_counters(ctl: &vecgate_control::Control) {
    let sum = ctl.counters();
    let mut ports = String::from(
        "Port                 rx-packets     rx-bytes  rx-missed  rx-errors   tx-packets     tx-bytes  tx-errors     drops\n",
    );
    for (name, p) in ctl.interface_counters() {
        ports.push_str(&format!(
            "{:<16} {:>14} {:>12} {:>10} {:>10} {:>12} {:>12} {:>10} {:>9}\n",
            name,
            p.rx_packets,
            p.rx_bytes,
            p.rx_missed,
            p.rx_errors,
            p.tx_packets,
            p.tx_bytes,
            p.tx_errors,
            p.drops
        ));
    }
    info!(
        "counters\n{}\n{}\n{}",
        ports,
        sum.show_runtime(),
        sum.show_errors()
    );
}

/// SIGHUP: the configuration file re-read, validated whole and its
/// difference applied ([`vecgate_control::Control::reload`]); every
/// error is logged with its line and nothing is applied.
fn reload_file(ctl: &vecgate_control::Control, path: &Path) {
    let cfg = match vecgate_config::load(path) {
        Ok(c) => c,
        Err(LoadError::Invalid { path, diagnostics }) => {
            for d in &diagnostics {
                error!("reload: {}:{}: {}", path.display(), d.line, d.message);
            }
            error!(
                errors = diagnostics.len(),
                "reload refused: invalid configuration, nothing applied"
            );
            ctl.reload_refused_early();
            return;
        }
        Err(e) => {
            error!("reload refused: {e}");
            ctl.reload_refused_early();
            return;
        }
    };
    match ctl.reload(cfg, false) {
        Ok(plan) => {
            for c in &plan.changes {
                info!("reload: {} {} {}: {}", c.op, c.object, c.name, c.detail);
            }
            for d in &plan.done {
                info!("IPsec: {d}");
            }
            info!(changes = plan.changes.len(), "reloaded {}", path.display());
        }
        Err(e) => error!("reload refused: {}", e.message),
    }
}

/// The API's access control: the bearer tokens from the configured files
/// (read once, never logged; private regular files of at least 32 bytes).
pub fn api_auth(cfg: &Config) -> Result<vecgate_control::Auth> {
    use vecgate_control::{Auth, Token};
    let what = |e: String| anyhow!("management API on {}: {e}", cfg.gateway.api);
    Ok(match (&cfg.gateway.api, &cfg.gateway.api_token_file) {
        (vecgate_config::ApiEndpoint::Tcp(_), Some(admin)) => Auth::Bearer {
            admin: Token::from_file(admin).map_err(what)?,
            readonly: cfg
                .gateway
                .api_readonly_token_file
                .as_deref()
                .map(Token::from_file)
                .transpose()
                .map_err(what)?,
        },
        _ => Auth::None,
    })
}

/// The TCP API's TLS certificate and key, if configured.
pub fn api_tls(cfg: &Config) -> Result<Option<vecgate_control::Tls>> {
    let g = &cfg.gateway;
    match (&g.api, &g.api_tls_cert_file, &g.api_tls_key_file) {
        (vecgate_config::ApiEndpoint::Tcp(_), Some(cert), Some(key)) => {
            vecgate_control::Tls::from_files(cert, key)
                .map(Some)
                .map_err(|e| anyhow!("management API on {}: {e}", g.api))
        }
        _ => Ok(None),
    }
}

/// Routes from FRR's zebra (dplane_fpm_nl), into the same
/// build-and-publish as the API's route changes: the `[routing] fpm`
/// listener, and a tenant VRF's own zebra through its namespace's
/// listener (host_tap::open).
fn start_fpm(
    cfg: &Config,
    ctl: &Arc<vecgate_control::Control>,
    tenant_fpm: Vec<vecgate_control::fpm::Source>,
) -> Result<()> {
    let mut sources = tenant_fpm;
    if let Some(addr) = cfg.routing.fpm {
        use vecgate_control::fpm;
        let l = fpm::listen(addr).map_err(|e| anyhow!("FPM server on {addr}: {e}"))?;
        info!(%addr, "FPM server listening for zebra (dplane_fpm_nl)");
        sources.push(fpm::Source {
            listener: l,
            label: addr.to_string(),
            settings: fpm::FpmSettings::from_config(&cfg.routing),
            vrf: None,
        });
    }
    if !sources.is_empty() {
        vecgate_control::fpm::spawn(ctl.clone(), sources)
            .map_err(|e| anyhow!("FPM server thread: {e}"))?;
    }
    Ok(())
}

/// Starts the management API on `gateway.api` with access control `auth`.
#[allow(clippy::too_many_arguments)]
fn start_api(
    cfg: &Config,
    auth: vecgate_control::Auth,
    tls: Option<vecgate_control::Tls>,
    shared: &Arc<SharedTables>,
    counters: &[Arc<dataplane::counters::WorkerCounters>],
    mailboxes: Vec<crossbeam_channel::Sender<dataplane::worker::Command>>,
    netdevs: &[NetdevFacts],
    esp: Option<Arc<vecgate_ipsec::EspRegistry>>,
    sa_state: &Arc<vecgate_ipsec::SaState>,
    ike: Option<(
        vecgate_keying::ike::IkeStatus,
        vecgate_keying::ike::IkeControl,
    )>,
    tports: Arc<std::sync::Mutex<Ports>>,
    held: crate::ha::Held,
    tenant_fpm: Vec<vecgate_control::fpm::Source>,
    live: &Arc<LivePorts>,
) -> Result<(vecgate_control::ServerHandle, Arc<vecgate_control::Control>)> {
    use vecgate_control::{Capabilities, Control, Dataplane};
    let nd = live.facts.clone();
    let sas = esp.clone().map(|reg| -> vecgate_control::SaSource {
        Box::new(move || vecgate_keying::sa_ops::sa_infos(&reg))
    });
    let ike_control = ike.as_ref().map(|(_, c)| c.clone());
    let sa_ops = esp.clone().map(|reg| -> Box<dyn vecgate_control::SaOps> {
        Box::new(vecgate_keying::sa_ops::ApiSaOps::new(
            reg,
            sa_state.clone(),
            ike_control,
        ))
    });
    let dp = Dataplane {
        tables: shared.clone(),
        build: Box::new(
            move |c: &Config, learned: &vecgate_control::learned::Learned| {
                // Only a table that is built gets published (Control::apply),
                // so the port assignment is committed with it.
                let mut tp = tports.lock().unwrap_or_else(|e| e.into_inner());
                let held = held.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let nd = nd.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let esp = esp.as_deref().map(esp_tables);
                let inputs = Inputs {
                    netdevs: &nd,
                    learned,
                    held: &held,
                    ipsec: esp.as_ref().map(|e| e as &dyn IpsecTables),
                };
                tp.tables(c, &inputs)
            },
        ),
        counters: counters.to_vec(),
        mailboxes,
        netdevs: netdevs.to_vec(),
        sas,
        sa_ops,
    };
    // Tunnels are added and deleted live (stable virtual ports, workers
    // count up to MAX_VIRTUAL_PORTS of them).
    let ctl = Control::new(cfg.clone(), dp, Capabilities { tunnels: true });
    // Interfaces are attached and released live too.
    ctl.set_port_ops(live.clone());
    if let Some((st, _)) = ike {
        ctl.set_ike_source(Box::new(move || {
            st.lock().unwrap_or_else(|e| e.into_inner()).clone()
        }));
    }
    start_fpm(cfg, &ctl, tenant_fpm)?;
    let handle = vecgate_control::serve(&cfg.gateway.api, ctl.clone(), auth, tls)
        .map_err(|e| anyhow!("management API on {}: {e}", cfg.gateway.api))?;
    Ok((handle, ctl))
}
