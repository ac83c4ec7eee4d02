//! The netdevs: claimed, attached (one queue per worker), described; the
//! live attach and release's state; the worker threads over them.

use crate::live_ports::{driver_str, fanout_id, Claim, LivePorts};
use anyhow::{Context, Result};
use dataplane::neighbour::NeighbourShared;
use dataplane::tables::SharedTables;
use dataplane::worker::{Worker, WorkerConfig};
use packet::Port;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tracing::warn;
use vecgate_config::{Config, Driver};
use vecgate_control::NetdevFacts;
use vecgate_io::IngressGuard;

use super::punt::Punts;

/// One gateway per netdev: claimed before anything is attached, held (by
/// the kernel, through flock) until this process exits; kept per
/// interface, so one removed live releases its netdev.
pub fn lock_netdevs(cfg: &Config) -> Result<HashMap<String, vecgate_io::NetdevLock>> {
    cfg.interfaces
        .iter()
        .map(|ifc| {
            vecgate_io::NetdevLock::acquire(&ifc.host, &cfg.gateway.name)
                .with_context(|| format!("interface \"{}\"", ifc.name))
                .map(|l| (ifc.name.clone(), l))
        })
        .collect()
}

/// What each interface holds on its netdev, and how its queues are
/// re-opened, for the live attach and release (live_ports.rs).
pub fn live_ports(
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

/// Opens every interface once per worker (one queue each) and installs
/// the AF_PACKET ingress guards (by interface name).
#[allow(clippy::type_complexity)]
pub fn attach(
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
pub fn netdev_facts(cfg: &Config, ports: &[Box<dyn Port>]) -> Vec<NetdevFacts> {
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
pub struct Workers {
    pub threads: Vec<std::thread::JoinHandle<()>>,
    pub counters: Vec<Arc<dataplane::counters::WorkerCounters>>,
    pub mailboxes: Vec<crossbeam_channel::Sender<dataplane::worker::Command>>,
    pub beats: Vec<Arc<std::sync::atomic::AtomicU64>>,
}

/// One pinned thread per worker, each polling its own queue of every port.
pub fn spawn_workers(
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
