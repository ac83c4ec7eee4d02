//! The HA threads: the state sync's driver (`[ha] sync_*`,
//! [`crate::hasync`]) and the VRRP speaker (`[[ha.group]]`,
//! [`crate::ha`]), and the channels between them and the SA state and
//! IKE threads.

use anyhow::{anyhow, Context, Result};
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tracing::error;
use vecgate_config::Config;
use vecgate_control::NetdevFacts;
use vecgate_ha::syncer::{Message, ToIke};

/// The channels between the state sync's driver and the threads that
/// talk to it, made before any of them starts (the SA state's reserve
/// hook holds a sender from the first SA on).
pub struct SyncEnds {
    /// To the driver (the reserve hook, IKE and VRRP hold clones).
    pub tx: Sender<Message>,
    rx: Receiver<Message>,
    /// From the driver to the IKE thread (when one runs).
    pub to_ike: Option<Sender<ToIke>>,
    /// Takeover answers, from the driver to VRRP.
    taken_tx: Sender<()>,
    taken_rx: Receiver<()>,
}

/// With `[ha] sync_*`: the state sync's channels, and the IKE thread's
/// end of them.
pub fn sync_ends(cfg: &Config) -> Option<(SyncEnds, Receiver<ToIke>)> {
    cfg.ha.as_ref().and_then(|h| h.sync.as_ref())?;
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
    Some((ends, ike_rx))
}

/// The state sync's driver thread (with `[ha] sync_*`; it stops with
/// `stop`), and the speaker's link to it. Started before the speaker:
/// the speaker's first transition to master takes over what it has
/// received.
pub fn start_sync(
    cfg: &Config,
    ends: SyncEnds,
    ctl: &Arc<vecgate_control::Control>,
    sas: &Arc<vecgate_ipsec::SaState>,
    status: &crate::hasync::SharedStatus,
    stop: &Arc<AtomicBool>,
) -> Result<(std::thread::JoinHandle<()>, crate::ha::SyncLink)> {
    let y = cfg
        .ha
        .as_ref()
        .and_then(|h| h.sync.as_ref())
        .ok_or_else(|| anyhow!("[ha] sync: not configured"))?;
    let w = crate::hasync::Wiring {
        ctl: ctl.clone(),
        sas: sas.clone(),
        messages: ends.rx,
        ike: ends.to_ike,
        taken_over: ends.taken_tx,
        status: status.clone(),
    };
    let t = crate::hasync::start(y, w, stop.clone()).map_err(|e| anyhow!(e))?;
    let link = crate::ha::SyncLink {
        tx: ends.tx,
        taken_over: ends.taken_rx,
        wait: crate::hasync::takeover_wait(y),
    };
    Ok((t, link))
}

/// What the VRRP speaker is wired to.
pub struct VrrpParts<'a> {
    pub ctl: &'a Arc<vecgate_control::Control>,
    pub punt: Arc<dataplane::punt::VrrpPunt>,
    /// Worker 0's mailbox: adverts and announcements go out through it.
    pub mailbox0: crossbeam_channel::Sender<dataplane::worker::Command>,
    pub netdevs: &'a [NetdevFacts],
    pub held: crate::ha::Held,
    pub status: crate::ha::HaStatus,
    /// The state sync's status, for `/ha`.
    pub sync_status: crate::hasync::SharedStatus,
    /// With a state sync: the speaker's link to it.
    pub sync: Option<crate::ha::SyncLink>,
}

/// The VRRP speaker thread (with `[ha]` groups; it stops with `stop`),
/// answering `/ha` of the API; taking or releasing the virtual addresses
/// republishes the tables through the API's build-and-publish.
pub fn start_vrrp(
    cfg: &Config,
    p: VrrpParts<'_>,
    stop: &Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>> {
    let (req_tx, req_rx) = crossbeam_channel::bounded(4);
    p.ctl.set_ha(Arc::new(crate::ha::HaApi {
        status: p.status.clone(),
        sync: p.sync_status,
        requests: req_tx,
    }));
    let c = p.ctl.clone();
    let macs: Vec<[u8; 6]> = p.netdevs.iter().map(|n| n.mac).collect();
    let w = crate::ha::HaWiring {
        punt: p.punt,
        mailbox: p.mailbox0,
        held: p.held,
        rebuild: Box::new(move || {
            if let Err(e) = c.rebuild() {
                error!("VRRP: publishing the virtual addresses: {}", e.message);
            }
        }),
        status: p.status,
        requests: req_rx,
        sync: p.sync,
    };
    crate::ha::start(cfg, &macs, w, stop.clone()).context("spawning the VRRP thread")
}
