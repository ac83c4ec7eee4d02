//! Interfaces attached and released while running
//! ([`vecgate_control::PortOps`]): what `run` does for every interface at
//! startup — claim the netdev ([`vecgate_io::NetdevLock`]), open one
//! queue per worker (AF_PACKET sockets in one fanout group, TAP queues,
//! AF_XDP sockets and their XDP program), install the ingress guard —
//! done for one interface at a time, and undone when it leaves. The
//! control plane hands the queues to the workers through their mailboxes
//! ([`dataplane::worker::Command::AttachPort`]).

use dataplane::worker::PortQueue;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tracing::{info, warn};
use vecgate_config::{Driver, Interface};
use vecgate_control::NetdevFacts;
use vecgate_io::{IngressGuard, NetdevLock};

/// What an attached interface holds on its netdev until it is released.
pub struct Claim {
    pub host: String,
    pub lock: NetdevLock,
    /// AF_PACKET only (AF_XDP and TAP frames never reach the host stack).
    pub guard: Option<IngressGuard>,
}

/// How a worker re-opens a failed queue: per netdev, its driver and
/// fanout group.
pub type Reopen = Arc<Mutex<HashMap<String, (&'static str, u16)>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn driver_str(d: Driver) -> &'static str {
    match d {
        Driver::AfPacket => "af_packet",
        Driver::Tap => "tap",
        Driver::AfXdp => "af_xdp",
    }
}

/// Fanout group id number `n` of this process: unique per process and
/// netdev in this network namespace (the kernel matches groups per
/// namespace). Startup interface `i` has group `i`.
pub fn fanout_id(n: usize) -> u16 {
    ((std::process::id() as u16).wrapping_mul(64)).wrapping_add(n as u16)
}

/// The live attach / release of interfaces.
pub struct LivePorts {
    gateway: String,
    nworkers: usize,
    /// Interface name → netdev facts, read by the table builder.
    pub facts: Arc<Mutex<HashMap<String, NetdevFacts>>>,
    claims: Mutex<HashMap<String, Claim>>,
    /// Netdev name → (driver, fanout group), read by the workers' re-open.
    pub reopen: Reopen,
    /// The next fanout group number for an interface added live.
    next_group: AtomicU16,
}

impl LivePorts {
    /// The startup interfaces' facts and claims (by interface name).
    pub fn new(
        gateway: &str,
        nworkers: usize,
        facts: HashMap<String, NetdevFacts>,
        claims: HashMap<String, Claim>,
        reopen: HashMap<String, (&'static str, u16)>,
    ) -> Self {
        let next = reopen.len() as u16;
        LivePorts {
            gateway: gateway.to_owned(),
            nworkers,
            facts: Arc::new(Mutex::new(facts)),
            claims: Mutex::new(claims),
            reopen: Arc::new(Mutex::new(reopen)),
            next_group: AtomicU16::new(next),
        }
    }

    /// Removes every ingress guard (at shutdown; the kernel would too).
    pub fn remove_guards(&self) {
        for (_, c) in lock(&self.claims).drain() {
            if let Some(g) = c.guard {
                if let Err(e) = g.remove() {
                    warn!("removing ingress guard: {e}");
                }
            }
        }
    }
}

impl vecgate_control::PortOps for LivePorts {
    fn open(&self, ifc: &Interface) -> Result<(NetdevFacts, Vec<PortQueue>), String> {
        let claim = NetdevLock::acquire(&ifc.host, &self.gateway).map_err(|e| e.to_string())?;
        let drv = driver_str(ifc.driver);
        let group = fanout_id(usize::from(self.next_group.fetch_add(1, Ordering::Relaxed)));
        let mut queues = Vec::with_capacity(self.nworkers);
        for w in 0..self.nworkers {
            let q = vecgate_io::open_port(drv, &ifc.host, w, self.nworkers, group)
                .map_err(|e| format!("netdev {}: {e}", ifc.host))?;
            queues.push(PortQueue(q));
        }
        let guard = match ifc.driver {
            Driver::AfPacket => Some(
                IngressGuard::install_named(
                    &ifc.host,
                    &format!("vecgate_{}_{}", self.gateway, ifc.host),
                )
                .map_err(|e| format!("installing the ingress guard: {e}"))?,
            ),
            _ => None,
        };
        let q0 = &queues[0].0;
        let nd = NetdevFacts {
            mac: q0.mac(),
            mtu: q0.mtu(),
            offloads: q0.offloads(),
        };
        info!(interface = %ifc.name, netdev = %ifc.host, driver = drv, mtu = nd.mtu,
              offloads = nd.offloads, vrf = %ifc.vrf, "attached live");
        lock(&self.facts).insert(ifc.name.clone(), nd);
        lock(&self.reopen).insert(ifc.host.clone(), (drv, group));
        lock(&self.claims).insert(
            ifc.name.clone(),
            Claim {
                host: ifc.host.clone(),
                lock: claim,
                guard,
            },
        );
        Ok((nd, queues))
    }

    fn close(&self, name: &str) {
        lock(&self.facts).remove(name);
        if let Some(c) = lock(&self.claims).remove(name) {
            if let Some(g) = c.guard {
                if let Err(e) = g.remove() {
                    warn!(interface = %name, "removing ingress guard: {e}");
                }
            }
            lock(&self.reopen).remove(&c.host);
            // The netdev lock goes last: another gateway may claim it now.
            drop(c.lock);
            info!(interface = %name, netdev = %c.host, "released");
        }
    }
}
