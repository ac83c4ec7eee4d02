//! The netdevs: claimed, attached (one queue per worker), described; the
//! live attach and release ([`LivePorts`]); the worker threads over them.

use anyhow::{Context, Result};
use dataplane::neighbour::NeighbourShared;
use dataplane::tables::SharedTables;
use dataplane::worker::{PortQueue, Worker, WorkerConfig};
use packet::Port;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use tracing::{info, warn};
use vecgate_config::{Config, Interface};
use vecgate_control::NetdevFacts;
use vecgate_io::Attached;

use super::punt::Punts;

/// One gateway per netdev: every interface's netdev claimed before any is
/// attached, held (by the kernel, through flock) until this process exits
/// or the interface is removed live.
pub fn claim_netdevs(cfg: &Config) -> Result<Arc<Attached>> {
    let attached = Attached::new(&cfg.gateway.name, cfg.gateway.workers.max(1));
    for ifc in &cfg.interfaces {
        attached
            .claim(&ifc.name, &ifc.host)
            .with_context(|| format!("interface \"{}\"", ifc.name))?;
    }
    Ok(Arc::new(attached))
}

/// Opens every interface once per worker (one queue each) and installs
/// the AF_PACKET ingress guards: per worker, its queue of every interface.
pub fn attach(cfg: &Config, attached: &Attached) -> Result<Vec<Vec<Box<dyn Port>>>> {
    let nworkers = cfg.gateway.workers.max(1);
    let mut per_worker: Vec<Vec<Box<dyn Port>>> = (0..nworkers).map(|_| Vec::new()).collect();
    for ifc in &cfg.interfaces {
        let queues = attached
            .open(&ifc.name, ifc.driver.as_str())
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("interface \"{}\" (netdev {})", ifc.name, ifc.host))?;
        for (ports, q) in per_worker.iter_mut().zip(queues) {
            ports.push(q);
        }
    }
    Ok(per_worker)
}

/// What a netdev is, as its port tells.
fn facts_of(p: &dyn Port) -> NetdevFacts {
    NetdevFacts {
        mac: p.mac(),
        mtu: p.mtu(),
        offloads: p.offloads(),
    }
}

/// Interfaces attached and released while running
/// ([`vecgate_control::PortOps`]) over the gateway's [`Attached`]; the
/// control plane hands the queues to the workers through their mailboxes
/// ([`dataplane::worker::Command::AttachPort`]).
pub struct LivePorts {
    pub attached: Arc<Attached>,
    /// Interface name → netdev facts, read by the table builder.
    pub facts: Arc<Mutex<HashMap<String, NetdevFacts>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl vecgate_control::PortOps for LivePorts {
    fn open(&self, ifc: &Interface) -> Result<(NetdevFacts, Vec<PortQueue>), String> {
        let drv = ifc.driver.as_str();
        let queues = self.attached.attach(&ifc.name, &ifc.host, drv)?;
        let nd = facts_of(&*queues[0]);
        info!(interface = %ifc.name, netdev = %ifc.host, driver = drv, mtu = nd.mtu,
              offloads = nd.offloads, vrf = %ifc.vrf, "attached live");
        lock(&self.facts).insert(ifc.name.clone(), nd);
        Ok((nd, queues.into_iter().map(PortQueue).collect()))
    }

    fn close(&self, name: &str) {
        lock(&self.facts).remove(name);
        if let Some(host) = self.attached.release(name) {
            info!(interface = %name, netdev = %host, "released");
        }
    }
}

/// What each netdev is (from worker 0's ports), warning where it cannot
/// do what the configuration asks.
pub fn netdev_facts(cfg: &Config, ports: &[Box<dyn Port>]) -> Vec<NetdevFacts> {
    let netdevs: Vec<NetdevFacts> = ports.iter().map(|p| facts_of(&**p)).collect();
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
        // live alike; only while a port is down).
        let attached = live.attached.clone();
        worker.set_port_factory(Box::new(move |_port, host| attached.reopen(host, w)));
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
