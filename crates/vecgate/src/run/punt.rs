//! The queues on which the workers hand packets to the control threads,
//! and the threads that take them: the host punt thread and the IKE
//! thread.

use anyhow::{Context, Result};
use dataplane::punt::host::relay::Relay;
use dataplane::tables::SharedTables;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The queues on which the workers hand packets to the control threads.
pub struct Punts {
    /// IKE (UDP 500 / 4500) to the IKE thread.
    pub ike: Option<Arc<dataplane::punt::IkePunt>>,
    /// VRRP adverts to the speaker thread.
    pub vrrp: Option<Arc<dataplane::punt::VrrpPunt>>,
    /// BGP and BFD to the host's stack (`[[routing.punt]]`).
    pub host: Option<Arc<dataplane::punt::HostPunt>>,
}

/// The host punt thread (`[[routing.punt]]`): the punted packets to the
/// host's TUNs and back.
pub fn start_host(
    taps: super::host_tun::Taps,
    punt: &Arc<dataplane::punt::HostPunt>,
    shared: &Arc<SharedTables>,
    stop: &Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>> {
    let relay = Relay::new(taps);
    let (punt, shared, stop) = (punt.clone(), shared.clone(), stop.clone());
    std::thread::Builder::new()
        .name("host-punt".into())
        .spawn(move || relay.run(&punt, &shared, &stop))
        .context("spawning the host punt thread")
}

/// The IKE thread: the IKEv2 control plane over the IKE punt queue.
pub fn start_ike(
    ike: vecgate_keying::ike::Prepared,
    punt: &Arc<dataplane::punt::IkePunt>,
    shared: &Arc<SharedTables>,
    stop: &Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>> {
    let plane = ike.into_plane(shared.clone(), punt.clone());
    let stop = stop.clone();
    std::thread::Builder::new()
        .name("vg-ike".into())
        .spawn(move || plane.run(&stop))
        .context("spawning the IKE thread")
}
