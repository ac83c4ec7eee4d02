//! `[pool]`: this gateway as a member of an M+N pool on etcd.
//!
//! Two threads. One runs the pool member ([`vecgate_pool::etcd::member`])
//! on a small tokio runtime of its own: lease, keepalives and fence,
//! the mirror of the pool, the leader's placement. The other, the
//! applier ([`apply`]), carries out what the member asks for through the
//! same live-change path as `POST /tunnels` and `POST /routes`
//! ([`vecgate_control::Control`]), takes and releases the connections'
//! local addresses (added to the underlay interface as held addresses,
//! then announced: gratuitous ARP / unsolicited NA), and reports the
//! actual state back. Table builds block: keeping them off the member's
//! runtime keeps them from delaying a keepalive.
//!
//! The fence: when the member stops serving (its lease's deadline passed
//! without renewal or proof of a lost quorum), the applier takes every
//! connection down at once (routes, tunnel, address) and keeps them; a
//! renewed lease puts them back; a lost lease removes them for good.
//!
//! What is carried between members is the connection, on a planned
//! move the order of the steps (make-before-break), and an IPsec
//! connection's SA state ([`sas`]): its IKE SAs and its SAs' sequence
//! ceilings and replay windows, sealed into etcd whenever they change and
//! adopted by the new owner, so the peer sees the same IKE and child SPIs
//! and no new IKE_SA_INIT. IPsec connections are keyed by IKEv2: static
//! SAs are refused (their keys live in files on each member).

use anyhow::{anyhow, Result};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use vecgate_config::Config;
use vecgate_pool::etcd::{member, Settings};
use vecgate_pool::{Capacity, Connection};

mod api;
mod apply;
mod sas;

pub use sas::{ike_link, IkeEnds};

/// What the pool member is wired to.
pub struct Wiring {
    pub ctl: Arc<vecgate_control::Control>,
    /// Addresses this gateway holds beyond its interfaces' (VRRP's and
    /// the pool's), per port.
    pub held: crate::ha::Held,
    /// Worker 0's mailbox: announcements go out through it.
    pub mailbox: Option<crossbeam_channel::Sender<dataplane::worker::Command>>,
    /// The SA state (sequence ceilings, replay windows).
    pub sas: Arc<vecgate_ipsec::SaState>,
    /// The IKE thread's pool link ([`ike_link`]) and its control: IKE
    /// SAs are carried between members (absent: IKE negotiates afresh
    /// after a move, as with an HA state sync holding the link).
    pub ike: Option<(IkeEnds, vecgate_keying::ike::IkeControl)>,
}

/// Joins the pool: connects to etcd and checks the pool key (an error
/// here stops the start-up: etcd unreachable, a wrong key), then starts
/// the member's and the applier's threads. They stop with `stop`.
pub fn start(
    cfg: &Config,
    mut w: Wiring,
    stop: Arc<AtomicBool>,
) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let Some(p) = cfg.pool.as_ref() else {
        return Ok(Vec::new());
    };
    let key = vecgate_pool::PoolKey::read(&p.pool_key_file, rustix::process::geteuid().as_raw())
        .map_err(|e| anyhow!(e))?;
    let settings = settings(cfg)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("pool-etcd")
        .enable_all()
        .build()
        .map_err(|e| anyhow!("[pool]: starting its runtime: {e}"))?;
    let base = cfg.clone();
    let validator: member::Validator = Arc::new(move |c: &Connection| api::check(&base, c));
    let (handles, _task) = rt
        .block_on(member::start(settings, key.clone(), validator))
        .map_err(|e| anyhow!("[pool] {}: {e}", p.name))?;
    let member::Handles {
        commands,
        reports,
        status,
        actions,
        stop: stop_member,
        gate: _,
    } = handles;
    // The member's actions, bridged to the applier's thread.
    let (act_tx, act_rx) = crossbeam_channel::unbounded();
    rt.spawn(async move {
        let mut actions = actions;
        while let Some(a) = actions.recv().await {
            if act_tx.send(a).is_err() {
                return;
            }
        }
    });
    w.ctl.set_pool(Arc::new(api::PoolApi {
        pool: p.name.clone(),
        rt: rt.handle().clone(),
        commands,
        status: status.clone(),
    }));
    let carrier = w
        .ike
        .take()
        .map(|(ends, ike)| sas::Carrier::new(ends, ike, w.sas.clone(), p.max_sa_pps));
    let applier = apply::Applier::new(cfg, &w, key, reports, status, carrier);
    let a = std::thread::Builder::new()
        .name("pool-apply".into())
        .spawn({
            let stop = stop.clone();
            move || applier.run(act_rx, &stop)
        })
        .map_err(|e| anyhow!("spawning the pool's applier: {e}"))?;
    let m = std::thread::Builder::new()
        .name("pool-member".into())
        .spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
            }
            // A clean stop gives the lease back: the others take the
            // connections over at once instead of after the TTL.
            let _ = stop_member.send(true);
            std::thread::sleep(Duration::from_millis(500));
            rt.shutdown_timeout(Duration::from_secs(1));
        })
        .map_err(|e| anyhow!("spawning the pool member: {e}"))?;
    Ok(vec![a, m])
}

/// The member's settings from `[pool]`: TLS files read now.
fn settings(cfg: &Config) -> Result<Settings> {
    let p = cfg.pool.as_ref().ok_or_else(|| anyhow!("no [pool]"))?;
    let tls = match &p.etcd_ca_file {
        None => None,
        Some(ca) => {
            let ca_pem = std::fs::read(ca)
                .map_err(|e| anyhow!("[pool] etcd_ca_file {}: {e}", ca.display()))?;
            let identity = match (&p.etcd_cert_file, &p.etcd_key_file) {
                (Some(c), Some(k)) => {
                    let cert = std::fs::read(c)
                        .map_err(|e| anyhow!("[pool] etcd_cert_file {}: {e}", c.display()))?;
                    let key = vecgate_config::secret::read_owned_secret_file(
                        k,
                        1 << 16,
                        rustix::process::geteuid().as_raw(),
                    )
                    .map_err(|e| anyhow!("[pool] etcd_key_file {}: {e}", k.display()))?;
                    Some((cert, key))
                }
                _ => None,
            };
            Some(vecgate_pool::etcd::TlsFiles { ca_pem, identity })
        }
    };
    let addresses = cfg
        .interfaces
        .iter()
        .flat_map(|i| i.addresses.iter().map(|a| a.addr))
        .collect();
    Ok(Settings {
        pool: p.name.clone(),
        member: p.member_name(cfg).to_owned(),
        endpoints: p.etcd.clone(),
        tls,
        ttl: Duration::from_secs(u64::from(p.lease_ttl)),
        capacity: Capacity {
            ipsec_mbps: p.capacity.ipsec_mbps,
            gre_mbps: p.capacity.gre_mbps,
            tunnels: p.capacity.tunnels,
        },
        addresses,
        api: Some(cfg.gateway.api.to_string()),
        redundant: p.redundant as usize,
    })
}
