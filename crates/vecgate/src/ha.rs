//! The VRRP speaker's driver thread: it feeds
//! [`vecgate_ha::speaker::Speaker`] (every `[[ha.group]]`, sans I/O) the
//! adverts the workers punt (`dataplane::punt::vrrp`), the links' carrier,
//! the API's switchovers and the time, and carries out what it asks: a
//! frame sent through worker 0 ([`Command::SendFrame`]), an announcement
//! ([`Command::Announce`]: gratuitous ARP / unsolicited NA), the held
//! addresses copied into [`Held`] (read by the table builder) and the
//! tables republished, a takeover asked of the state sync's driver
//! ([`crate::hasync`]) and awaited.

use crossbeam_channel::{Receiver, Sender};
use dataplane::punt::VrrpPunt;
use dataplane::worker::Command;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::warn;
use vecgate_config::Config;
use vecgate_ha::speaker::{GroupSpec, Out, Speaker, SwitchoverError, MAX_ADVERT_BATCH};
use vecgate_ha::syncer::Now;
use vecgate_ha::State;
use wire::vrrp::Family;

pub use vecgate_ha::speaker::{describe, GroupStatus};

/// Virtual addresses held (as master) per port: added to the interface by
/// the table builder.
pub type Held = Arc<Mutex<HashMap<u16, Vec<IpAddr>>>>;

/// The groups as `show ha` last saw them (published by the thread).
pub type HaStatus = Arc<Mutex<Vec<GroupStatus>>>;

/// A planned switchover asked for through the API, answered on `reply`.
pub struct SwitchoverRequest {
    pub spec: vecgate_control::model::HaSwitchover,
    pub reply: Sender<Result<Vec<GroupStatus>, vecgate_control::state::ApiError>>,
}

/// The speaker's link to the state sync's driver ([`crate::hasync`]).
pub struct SyncLink {
    pub tx: Sender<vecgate_ha::syncer::Message>,
    /// Each takeover's answer.
    pub taken_over: Receiver<()>,
    /// How long a takeover's answer is awaited before the addresses are
    /// taken anyway.
    pub wait: Duration,
}

/// What the speaker needs from the gateway.
pub struct HaWiring {
    pub punt: Arc<VrrpPunt>,
    pub mailbox: Sender<Command>,
    pub held: Held,
    /// Rebuilds and publishes the tables (with [`Held`] as it is now).
    pub rebuild: Box<dyn Fn() + Send>,
    pub status: HaStatus,
    /// Planned switchovers from the API.
    pub requests: Receiver<SwitchoverRequest>,
    /// With `[ha] sync_*`: the state sync.
    pub sync: Option<SyncLink>,
}

/// The groups as configured; `macs[i]` is port `i`'s MAC. A group whose
/// interface has no address of its family to advertise from is left out
/// (validation refuses such a configuration).
fn specs(cfg: &Config, macs: &[[u8; 6]]) -> Vec<GroupSpec> {
    let Some(h) = &cfg.ha else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for g in &h.groups {
        let Some(port) = cfg.interfaces.iter().position(|i| i.name == g.interface) else {
            continue;
        };
        let ifc = &cfg.interfaces[port];
        let mac = macs.get(port).copied().unwrap_or_default();
        let family = match g.addresses.first() {
            Some(a) => Family::of(a),
            None => continue,
        };
        // Adverts come from the primary IPv4 address (RFC 5798 §5.1.1.1) or
        // the link-local IPv6 address (§5.1.2.1).
        let primary = match family {
            Family::V4 => match ifc.addresses.iter().find(|a| a.addr.is_ipv4()) {
                Some(a) => a.addr,
                None => continue,
            },
            Family::V6 => IpAddr::V6(dataplane::tables::link_local_eui64(mac)),
        };
        let track = h
            .group_track(g)
            .into_iter()
            .filter_map(|n| {
                let host = cfg.interfaces.iter().find(|i| i.name == n)?.host.clone();
                Some((n, host))
            })
            .collect();
        out.push(GroupSpec {
            vrid: g.vrid,
            port: port as u16,
            interface: g.interface.clone(),
            host: ifc.host.clone(),
            mac,
            family,
            vips: g.addresses.clone(),
            primary,
            priority: h.group_priority(g),
            interval_cs: h.interval_cs,
            preempt: h.preempt,
            track,
            penalty: h.group_track_penalty(g),
        });
    }
    out
}

/// The link as the kernel reports it (RFC 2863 operational status): down
/// when administratively down or without carrier (`lowerlayerdown` for a
/// veth whose peer is down); unknown (no such file) counts as up.
fn link_up(host: &str) -> bool {
    match std::fs::read_to_string(format!("/sys/class/net/{host}/operstate")) {
        Ok(s) => !matches!(s.trim(), "down" | "lowerlayerdown" | "notpresent"),
        Err(_) => true,
    }
}

/// The thread's state: the speaker and what it is wired to.
struct Driver {
    s: Speaker,
    w: HaWiring,
}

impl Driver {
    /// Carries out the speaker's outputs, in order.
    fn run(&self, out: Vec<Out>) {
        for o in out {
            match o {
                Out::SendFrame { port, frame } => {
                    let _ = self.w.mailbox.try_send(Command::SendFrame { port, frame });
                }
                Out::Announce(port) => {
                    let _ = self.w.mailbox.try_send(Command::Announce(port));
                }
                Out::TakeOver => self.take_over(),
                Out::Role { elected, draining } => {
                    if let Some(sync) = &self.w.sync {
                        let _ = sync
                            .tx
                            .send(vecgate_ha::syncer::Message::Role { elected, draining });
                    }
                }
                Out::Rebuild => {
                    *self.w.held.lock().unwrap_or_else(|e| e.into_inner()) = self.s.held().clone();
                    (self.w.rebuild)();
                }
            }
        }
    }

    /// Asks the state sync to take the synced state over and waits for
    /// its answer (the peer's first word if none was heard yet, the IKE
    /// thread's adoption of the synced IKE SAs), at most
    /// [`SyncLink::wait`]: the speaker's next output takes the addresses.
    fn take_over(&self) {
        let Some(sync) = &self.w.sync else { return };
        // An answer to an earlier takeover that came too late.
        while sync.taken_over.try_recv().is_ok() {}
        let t0 = Instant::now();
        if sync.tx.send(vecgate_ha::syncer::Message::TakeOver).is_err() {
            return;
        }
        if sync.taken_over.recv_timeout(sync.wait).is_err() {
            warn!(
                waited_ms = t0.elapsed().as_millis() as u64,
                "VRRP: the state sync did not answer the takeover: taking the addresses anyway"
            );
        }
    }

    fn publish(&self) {
        let v = self.s.status(Instant::now());
        *self.w.status.lock().unwrap_or_else(|e| e.into_inner()) = v;
    }

    fn switchover(
        &mut self,
        spec: &vecgate_control::model::HaSwitchover,
    ) -> Result<Vec<GroupStatus>, vecgate_control::state::ApiError> {
        use vecgate_control::state::ApiError;
        let hold = Duration::from_secs(spec.hold_secs.unwrap_or(60));
        let r = self
            .s
            .switchover(Now::read(), spec.interface.as_deref(), spec.vrid, hold);
        match r {
            Ok((st, out)) => {
                self.run(out);
                self.publish();
                Ok(st)
            }
            Err(SwitchoverError::NoSuchGroup { vrid }) => Err(ApiError::not_found(
                if vrid { "vrid" } else { "interface" },
                "no such VRRP group",
            )),
            Err(SwitchoverError::NotMaster) => Err(ApiError::new(
                409,
                "this gateway is not master of any of these VRRP groups",
                None,
            )),
        }
    }
}

/// Starts the speaker thread; it stops (sending priority 0 for the groups
/// it is master of) when `stop` is set.
pub fn start(
    cfg: &Config,
    macs: &[[u8; 6]],
    w: HaWiring,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let mut d = Driver {
        s: Speaker::new(specs(cfg, macs)),
        w,
    };
    std::thread::Builder::new()
        .name("vg-vrrp".into())
        .spawn(move || {
            let out = d.s.start(Now::read());
            d.run(out);
            d.publish();
            let mut last_links = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let now = Instant::now();
                let wait =
                    d.s.next_deadline()
                        .map_or(Duration::from_millis(100), |t| {
                            t.saturating_duration_since(now)
                        })
                        .min(Duration::from_millis(100));
                // Every advert already queued is heard before any timer is
                // looked at (bounded): after this thread was starved (a
                // loaded machine), one group's advert waiting behind
                // another's must not let its Master_Down_Timer fire while
                // the master is alive (RFC 5798 §6.4.2: an advert resets
                // it), a false takeover with both sending for a moment.
                let mut next = d.w.punt.recv_timeout(wait);
                let mut n = 0;
                while let Some(a) = next {
                    let m = a.meta;
                    let out = d.s.advert(Now::read(), m.port, m.src, m.dst, a.data());
                    d.w.punt.release(a);
                    d.run(out);
                    n += 1;
                    next = (n < MAX_ADVERT_BATCH)
                        .then(|| d.w.punt.try_recv())
                        .flatten();
                }
                while let Ok(r) = d.w.requests.try_recv() {
                    let out = d.switchover(&r.spec);
                    let _ = r.reply.send(out);
                }
                let now = Now::read();
                let out = d.s.poll(now);
                d.run(out);
                if now.at.duration_since(last_links) >= Duration::from_millis(100) {
                    last_links = now.at;
                    let out = d.s.links(now, link_up);
                    d.run(out);
                }
                d.publish();
            }
            let out = d.s.shutdown(Now::read());
            d.run(out);
            d.publish();
            // Let worker 0 send the priority-0 adverts before it stops.
            std::thread::sleep(Duration::from_millis(50));
        })
}

/// "init", "backup" or "master", as `/ha` and the metrics name them.
fn state_name(s: State) -> &'static str {
    match s {
        State::Initialize => "init",
        State::Backup => "backup",
        State::Master => "master",
    }
}

/// One group as the API reports it, with the state sync's status.
pub fn info(
    g: &GroupStatus,
    sync: Option<&vecgate_control::model::HaSyncInfo>,
) -> vecgate_control::model::HaGroupInfo {
    use vecgate_control::model::{HaGroupInfo, HaTrackedInfo, HaTransitionInfo};
    HaGroupInfo {
        interface: g.interface.clone(),
        vrid: g.vrid,
        family: match g.family {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        }
        .to_owned(),
        addresses: g.addresses.iter().map(|a| a.to_string()).collect(),
        state: state_name(g.state).to_owned(),
        priority: g.base_priority,
        effective_priority: g.priority,
        preempt: g.preempt,
        preempt_held_secs: g.held_secs,
        advert_interval_cs: g.interval_cs,
        master: g.master.map(|a| a.to_string()),
        last_transition: g.last.map(|(ms, st, r)| HaTransitionInfo {
            at_unix: ms as f64 / 1000.0,
            to: state_name(st).to_owned(),
            reason: r.as_str().to_owned(),
        }),
        tracked: g
            .tracked
            .iter()
            .map(|(n, up)| HaTrackedInfo {
                interface: n.clone(),
                up: *up,
            })
            .collect(),
        adverts_sent: g.stats.adverts_sent,
        adverts_received: g.stats.adverts_received,
        priority_zero_sent: g.stats.priority_zero_sent,
        priority_zero_received: g.stats.priority_zero_received,
        became_master: g.stats.became_master,
        became_backup: g.stats.became_backup,
        sync: sync.cloned(),
    }
}

/// `/ha` of the API: the speaker's published status, and switchovers
/// handed to its thread (which owns the state machines).
pub struct HaApi {
    pub status: HaStatus,
    pub sync: crate::hasync::SharedStatus,
    pub requests: Sender<SwitchoverRequest>,
}

impl HaApi {
    fn sync_info(&self) -> Option<vecgate_control::model::HaSyncInfo> {
        let s = self.sync.lock().unwrap_or_else(|e| e.into_inner());
        s.as_ref().map(crate::hasync::info)
    }
}

impl vecgate_control::HaOps for HaApi {
    fn groups(&self) -> Vec<vecgate_control::model::HaGroupInfo> {
        let sync = self.sync_info();
        let v = self.status.lock().unwrap_or_else(|e| e.into_inner());
        v.iter().map(|g| info(g, sync.as_ref())).collect()
    }

    fn switchover(
        &self,
        spec: &vecgate_control::model::HaSwitchover,
    ) -> Result<Vec<vecgate_control::model::HaGroupInfo>, vecgate_control::state::ApiError> {
        use vecgate_control::state::ApiError;
        let busy = || ApiError::new(503, "the VRRP thread did not answer", None);
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.requests
            .send_timeout(
                SwitchoverRequest {
                    spec: spec.clone(),
                    reply: tx,
                },
                Duration::from_secs(2),
            )
            .map_err(|_| busy())?;
        let done = rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| busy())??;
        let sync = self.sync_info();
        Ok(done.iter().map(|g| info(g, sync.as_ref())).collect())
    }
}
