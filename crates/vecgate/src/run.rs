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
//!
//! This file only wires: [`prepare`] (what may refuse before a netdev is
//! touched), [`start_forwarding`] (ports, tables, workers),
//! [`start_control`] (the API and the control threads), then
//! [`Running::serve`] and [`Running::shut_down`]. Each thread is started
//! by one function of a submodule that gets its handles as arguments:
//! `sa::start` (SA state ticker), `ports::spawn_workers`, `api::start_api`,
//! `ha::start_sync` (state sync driver), `ha::start_vrrp` (VRRP speaker),
//! `punt::start_host` (host punt), `punt::start_ike` (IKEv2).

mod api;
mod ha;
mod host_tun;
mod ports;
mod punt;
mod ready;
mod sa;
mod tables;

use anyhow::{anyhow, Context, Result};
use dataplane::neighbour::NeighbourShared;
use dataplane::tables::SharedTables;
use dataplane::worker::WorkerConfig;
use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing::{error, info};
use vecgate_config::{Config, LoadError};
use vecgate_control::build::Ports;
use vecgate_control::NetdevFacts;

use ha::SyncEnds;
use ports::{LivePorts, Workers};
use punt::Punts;
use sa::SaStateThread;

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
    /// Every interface's netdev claimed (one removed live releases its
    /// own).
    attached: Arc<vecgate_io::Attached>,
    esp: Option<Arc<vecgate_ipsec::EspRegistry>>,
    sas: SaStateThread,
    ike: Option<vecgate_keying::ike::Prepared>,
    punts: Punts,
    /// With `[ha] sync_*`: the state sync's ends not yet handed out.
    sync: Option<SyncEnds>,
    /// With `[pool]`: the applier's ends of the IKE thread's link.
    pool_ike: Option<crate::pool::IkeEnds>,
    host_taps: host_tun::Taps,
    tenant_fpm: Vec<vecgate_control::fpm::Source>,
}

/// Everything that may refuse to start before any netdev is attached.
fn prepare(cfg: &Config) -> Result<Prepared> {
    // The API endpoint first: a second gateway with the same API must fail
    // before it touches the first one's interfaces and guards.
    vecgate_control::check_endpoint(&cfg.gateway.api)
        .map_err(|e| anyhow!("management API on {}: {e}", cfg.gateway.api))?;
    // Its secrets too (token files, TLS key): refused with the reason
    // before anything is attached.
    let auth = api::api_auth(cfg)?;
    let tls = api::api_tls(cfg)?;
    // One gateway per netdev: claimed before anything is attached, held
    // (by the kernel, through flock) until this process exits.
    let attached = ports::claim_netdevs(cfg)?;
    // IPsec SAs: keys read from their files once; the registry outlives
    // every table rebuild (sequence numbers, replay windows).
    // Always present (an empty registry costs nothing: the tables get an
    // ESP part only with ipsec tunnels), so ipsec tunnels can be added live.
    // Static SAs resume from the state directory (sequence ceilings,
    // replay windows); their first blocks are durable before any worker
    // runs, and a ticker keeps the next ones ahead of use.
    // With `[ha] sync_*`, the state sync's channels come first: the
    // reserve hook tells it each ceiling from the first SA on.
    let (mut sync, ike_from_sync) = ha::sync_ends(cfg).unzip();
    let (esp, sas) = sa::start(cfg, sync.as_ref().map(|s| s.tx.clone()))?;
    // `[pool]` (without a state sync, which holds the IKE thread's link
    // then): the IKE thread hands its IKE SAs to the pool's applier and
    // adopts those of connections moved here.
    let (pool_link, pool_ike) = match (&sync, &cfg.pool) {
        (None, Some(_)) => {
            let (l, e) = crate::pool::ike_link(sas.state.clone());
            (Some(l), Some(e))
        }
        _ => (None, None),
    };
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
                    pool: false,
                }),
                _ => pool_link,
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
    let (host_taps, tenant_fpm) = host_tun::open(cfg).map_err(|e| anyhow!(e))?;
    let host_punt = (!host_taps.is_empty())
        .then(|| dataplane::punt::HostPunt::new(dataplane::punt::host::DEFAULT_SLOTS));
    Ok(Prepared {
        auth,
        tls,
        attached,
        esp,
        sas,
        ike,
        sync,
        pool_ike,
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
    // Attach: every worker gets its own queue on every interface.
    let per_worker = ports::attach(cfg, &pre.attached)?;
    let netdevs = ports::netdev_facts(cfg, &per_worker[0]);
    let facts: HashMap<String, NetdevFacts> = cfg
        .interfaces
        .iter()
        .map(|i| i.name.clone())
        .zip(netdevs.iter().copied())
        .collect();
    let (tports, shared) = tables::first_tables(cfg, &facts, pre.esp.as_deref())?;
    let live = Arc::new(LivePorts {
        attached: pre.attached.clone(),
        facts: Arc::new(std::sync::Mutex::new(facts)),
    });
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
    let workers = ports::spawn_workers(
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
    /// The pool member and its applier (`[pool]`).
    pool_threads: Vec<std::thread::JoinHandle<()>>,
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
    let pool_mailbox = mailbox0.clone();
    let (api, ctl) = api::start_api(
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
    // The state sync first: the speaker's first transition to master
    // takes over what it has received.
    let sync_status = crate::hasync::SharedStatus::default();
    let (sync_thread, sync_link) = match pre.sync {
        Some(ends) => {
            let (t, link) =
                ha::start_sync(cfg, ends, &ctl, &pre.sas.state, &sync_status, &fwd.stop)?;
            (Some(t), Some(link))
        }
        None => (None, None),
    };
    let ha_status = crate::ha::HaStatus::default();
    // `[pool]`: joins (etcd reachable, the pool key right) or refuses.
    let pool_threads = crate::pool::start(
        cfg,
        crate::pool::Wiring {
            ctl: ctl.clone(),
            held: held.clone(),
            mailbox: pool_mailbox,
            sas: pre.sas.state.clone(),
            ike: pre.pool_ike.zip(pre.ike.as_ref().map(|i| i.control())),
        },
        fwd.stop.clone(),
    )?;
    let ha_thread = match (&pre.punts.vrrp, mailbox0) {
        (Some(punt), Some(mailbox0)) => Some(ha::start_vrrp(
            cfg,
            ha::VrrpParts {
                ctl: &ctl,
                punt: punt.clone(),
                mailbox0,
                netdevs: &fwd.netdevs,
                held,
                status: ha_status.clone(),
                sync_status,
                sync: sync_link,
            },
            &fwd.stop,
        )?),
        _ => None,
    };
    let host_thread = match &pre.punts.host {
        Some(p) => Some(punt::start_host(pre.host_taps, p, &fwd.shared, &fwd.stop)?),
        None => None,
    };
    let ike_rekeys = pre.ike.as_ref().map(|i| i.control());
    let ike = match (pre.ike, &pre.punts.ike) {
        (Some(prep), Some(p)) => Some(punt::start_ike(prep, p, &fwd.shared, &fwd.stop)?),
        _ => None,
    };
    let (notifier, watchdog, hup) = ready::announce_ready(cfg, &ctl, &api, &fwd.netdevs, beats)?;
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
        pool_threads,
        threads,
        notifier,
        watchdog,
        stop: fwd.stop,
        workers_stop: fwd.workers_stop,
        hup,
    })
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
                    .spawn(move || api::reload_file(&ctl, &path))
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
        // The pool gives its lease back (the others take over at once).
        for t in self.pool_threads {
            if t.join().is_err() {
                error!("a pool thread panicked");
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
        self.sas.shut_down();
        ready::show_counters(&self.ctl);
        self.live.attached.release_all();
        info!("stopped");
    }
}
