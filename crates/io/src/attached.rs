//! The netdevs a gateway has attached, by interface name: what `vecgate
//! run` does for every interface at startup, and what an interface added
//! or removed while running does for itself — claim the netdev (one
//! gateway per netdev, [`NetdevLock`]), open one queue per worker
//! ([`open_port`]: AF_PACKET sockets in one fanout group, TAP queues,
//! AF_XDP sockets and their XDP program), install the AF_PACKET ingress
//! guard ([`IngressGuard`]); and the reverse. A worker whose queue failed
//! re-opens it through [`Attached::reopen`].

use crate::{open_port, IngressGuard, IoError, NetdevLock};
use packet::Port;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Mutex, MutexGuard};
use tracing::warn;

/// What an attached interface holds on its netdev until it is released.
struct Claim {
    host: String,
    lock: NetdevLock,
    /// AF_PACKET only (AF_XDP and TAP frames never reach the host stack).
    guard: Option<IngressGuard>,
}

/// The netdevs one gateway holds, and how their queues are opened again.
pub struct Attached {
    gateway: String,
    nworkers: usize,
    /// Interface name → its claim.
    claims: Mutex<HashMap<String, Claim>>,
    /// Netdev name → (driver, fanout group) of its open queues.
    open: Mutex<HashMap<String, (&'static str, u16)>>,
    /// The fanout group number of the next interface opened.
    next_group: AtomicU16,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fanout group id number `n` of this process: unique per process and
/// netdev in this network namespace (the kernel matches groups per
/// namespace).
pub fn fanout_id(n: u16) -> u16 {
    (std::process::id() as u16).wrapping_mul(64).wrapping_add(n)
}

impl Attached {
    /// Gateway `gateway` (the name its netdev locks carry), `nworkers`
    /// queues per netdev.
    pub fn new(gateway: &str, nworkers: usize) -> Self {
        Attached {
            gateway: gateway.to_owned(),
            nworkers: nworkers.max(1),
            claims: Mutex::new(HashMap::new()),
            open: Mutex::new(HashMap::new()),
            next_group: AtomicU16::new(0),
        }
    }

    /// Claims netdev `host` for interface `name`, or says which gateway
    /// holds it; nothing is opened yet (at startup every netdev is claimed
    /// before any is touched).
    pub fn claim(&self, name: &str, host: &str) -> Result<(), IoError> {
        let l = NetdevLock::acquire(host, &self.gateway)?;
        lock(&self.claims).insert(
            name.to_owned(),
            Claim {
                host: host.to_owned(),
                lock: l,
                guard: None,
            },
        );
        Ok(())
    }

    /// Opens claimed interface `name`'s netdev once per worker with
    /// `driver` (queues in worker order) and, for AF_PACKET, installs its
    /// ingress guard. Interfaces get fanout groups in the order they are
    /// opened (startup interface `i` gets group `i`).
    pub fn open(&self, name: &str, driver: &'static str) -> Result<Vec<Box<dyn Port>>, String> {
        let host = lock(&self.claims)
            .get(name)
            .map(|c| c.host.clone())
            .ok_or_else(|| format!("interface {name}: its netdev is not claimed"))?;
        let group = fanout_id(self.next_group.fetch_add(1, Ordering::Relaxed));
        let queues = (0..self.nworkers)
            .map(|w| open_port(driver, &host, w, self.nworkers, group))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("netdev {host}: {e}"))?;
        let guard = match driver {
            "af_packet" => Some(
                IngressGuard::install_named(&host, &format!("vecgate_{}_{host}", self.gateway))
                    .map_err(|e| format!("installing the ingress guard: {e}"))?,
            ),
            _ => None,
        };
        if let Some(c) = lock(&self.claims).get_mut(name) {
            c.guard = guard;
        }
        lock(&self.open).insert(host, (driver, group));
        Ok(queues)
    }

    /// [`Attached::claim`] and [`Attached::open`] for an interface added
    /// while running; on failure its netdev is left as it was.
    pub fn attach(
        &self,
        name: &str,
        host: &str,
        driver: &'static str,
    ) -> Result<Vec<Box<dyn Port>>, String> {
        self.claim(name, host).map_err(|e| e.to_string())?;
        self.open(name, driver).inspect_err(|_| {
            self.release(name);
        })
    }

    /// Releases interface `name` (guard removed, its queues no longer
    /// re-opened, the netdev lock dropped last: another gateway may claim
    /// it now); its netdev, if it was attached.
    pub fn release(&self, name: &str) -> Option<String> {
        let c = lock(&self.claims).remove(name)?;
        if let Some(g) = c.guard {
            if let Err(e) = g.remove() {
                warn!(interface = %name, "removing ingress guard: {e}");
            }
        }
        lock(&self.open).remove(&c.host);
        drop(c.lock);
        Some(c.host)
    }

    /// Worker `worker`'s queue on netdev `host` opened again, as it was
    /// first opened (after the netdev went away and came back).
    pub fn reopen(&self, host: &str, worker: usize) -> std::io::Result<Box<dyn Port>> {
        let found = lock(&self.open).get(host).copied();
        let (driver, group) =
            found.ok_or_else(|| std::io::Error::other(format!("{host} is not attached")))?;
        open_port(driver, host, worker, self.nworkers, group)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// Releases every netdev (at shutdown): the ingress guards removed
    /// (the kernel would too), the locks dropped.
    pub fn release_all(&self) {
        for (_, c) in lock(&self.claims).drain() {
            if let Some(g) = c.guard {
                if let Err(e) = g.remove() {
                    warn!(netdev = %c.host, "removing ingress guard: {e}");
                }
            }
        }
        lock(&self.open).clear();
    }
}
