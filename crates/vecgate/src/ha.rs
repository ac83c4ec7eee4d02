//! The VRRPv3 speaker: one [`vecgate_ha::Machine`] per `[[ha.group]]`,
//! driven by the adverts the workers punt (`dataplane::punt::vrrp`), its
//! timers and the links' carrier, on a thread of its own.
//!
//! Its actions become dataplane changes: an advertisement is a frame sent
//! through worker 0 ([`Command::SendFrame`]); taking the addresses adds
//! them to the interface in the tables ([`Held`], read by the table
//! builder, so API live changes keep them) and announces them
//! ([`Command::Announce`]: gratuitous ARP / unsolicited NA); releasing
//! removes them, so a backup neither answers ARP/ND for nor accepts
//! traffic to them. Every transition is logged and kept for `show`.
//!
//! A planned switchover is make-before-break: the resigning master sends
//! priority 0 but keeps the addresses (and so its tunnels' local ends)
//! until it hears the new master's first advertisement, which goes out
//! with its gratuitous ARP / NA, or Master_Down_Interval passes. Released
//! at once, traffic still sent to it during the peer's Skew_Time (RFC 5798
//! §6.4.2) would be lost; a plain router forwards it anyway, a tunnel end
//! cannot.

use crossbeam_channel::{Receiver, Sender};
use dataplane::punt::vrrp::AdvertFrom;
use dataplane::punt::VrrpPunt;
use dataplane::worker::Command;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tracing::{info, warn};
use vecgate_config::Config;
use vecgate_ha::{Action, Event, Machine, Reason, State};
use wire::vrrp::{Family, VrrpRepr};

/// Queued adverts heard per turn before the timers run (a flood of
/// them never starves the timers).
const MAX_ADVERT_BATCH: usize = 64;

/// Virtual addresses held (as master) per port: added to the interface by
/// the table builder.
pub type Held = Arc<Mutex<HashMap<u16, Vec<IpAddr>>>>;

/// One group as `show ha` reports it.
#[derive(Clone, Debug)]
pub struct GroupStatus {
    pub vrid: u8,
    pub interface: String,
    pub family: Family,
    pub addresses: Vec<IpAddr>,
    pub state: State,
    /// Configured priority.
    pub base_priority: u8,
    /// Advertised priority (configured less the tracking penalty).
    pub priority: u8,
    pub preempt: bool,
    pub interval_cs: u16,
    /// Seconds left of the preemption hold after a switchover.
    pub held_secs: u64,
    pub master: Option<IpAddr>,
    /// Wall-clock time, new state and reason of the last transition.
    pub last: Option<(SystemTime, State, Reason)>,
    /// Tracked interfaces and whether their link is up.
    pub tracked: Vec<(String, bool)>,
    pub stats: vecgate_ha::Stats,
}

pub type HaStatus = Arc<Mutex<Vec<GroupStatus>>>;

struct Group {
    m: Machine,
    port: u16,
    interface: String,
    host: String,
    mac: [u8; 6],
    family: Family,
    vips: Vec<IpAddr>,
    base_priority: u8,
    link_up: bool,
    last_wall: Option<(SystemTime, State, Reason)>,
    /// Tracked interfaces: (name, kernel name, link up).
    track: Vec<(String, String, bool)>,
    /// Priority lost per tracked interface that is down.
    penalty: u8,
    /// After a switchover: the addresses are still held until this
    /// deadline or the new master's first advert (module doc).
    draining: Option<Instant>,
    /// After becoming master: the addresses are announced once more then
    /// ([`REANNOUNCE_AFTER`]).
    reannounce: Option<Instant>,
}

/// A new master announces its addresses again this long after the first
/// time (keepalived's `garp_master_delay` does so after 5 s): a lost
/// gratuitous ARP / NA, or the old owner's answer racing it, would
/// otherwise leave a neighbour's entry on the old owner until it expires
/// (tens of seconds for a Linux peer: a tunnel end unreachable that long).
const REANNOUNCE_AFTER: Duration = Duration::from_secs(1);

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

/// Builds the groups; `macs[i]` is port `i`'s MAC.
fn groups(cfg: &Config, macs: &[[u8; 6]]) -> Vec<Group> {
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
        let priority = h.group_priority(g);
        let track = h
            .group_track(g)
            .into_iter()
            .filter_map(|n| {
                let host = cfg.interfaces.iter().find(|i| i.name == n)?.host.clone();
                Some((n, host, true))
            })
            .collect();
        out.push(Group {
            m: Machine::new(vecgate_ha::Config {
                vrid: g.vrid,
                priority,
                interval_cs: h.interval_cs,
                preempt: h.preempt,
                primary,
            }),
            port: port as u16,
            interface: g.interface.clone(),
            host: ifc.host.clone(),
            mac,
            family,
            vips: g.addresses.clone(),
            base_priority: priority,
            link_up: true,
            last_wall: None,
            track,
            penalty: h.group_track_penalty(g),
            draining: None,
            reannounce: None,
        });
    }
    out
}

/// The advertisement as an Ethernet frame: to the group's multicast MAC
/// from the interface's own, TTL / hop limit 255 (RFC 5798 §5.1).
fn advert_frame(g: &Group, priority: u8) -> Option<Vec<u8>> {
    let c = g.m.config();
    let repr = VrrpRepr {
        vrid: c.vrid,
        priority,
        max_advert_int: c.interval_cs,
        addrs: g.vips.clone(),
    };
    let dst = g.family.group();
    let mut vr = vec![0u8; repr.buffer_len()];
    repr.emit(&mut vr, &c.primary, &dst).ok()?;
    let mut f = Vec::with_capacity(14 + 40 + vr.len());
    match g.family {
        Family::V4 => f.extend_from_slice(&[0x01, 0x00, 0x5e, 0x00, 0x00, 0x12]),
        Family::V6 => f.extend_from_slice(&[0x33, 0x33, 0x00, 0x00, 0x00, 0x12]),
    }
    f.extend_from_slice(&g.mac);
    match (c.primary, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&[0x08, 0x00]);
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[1] = 0xc0; // internetwork control, as routers send it
            h[2..4].copy_from_slice(&u16::try_from(20 + vr.len()).ok()?.to_be_bytes());
            h[8] = wire::vrrp::TTL;
            h[9] = wire::vrrp::PROTOCOL;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let sum = wire::checksum::checksum(&h);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
            f.extend_from_slice(&h);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x86, 0xdd]);
            let mut h = [0u8; 40];
            h[0] = 0x6c; // traffic class 0xc0
            h[4..6].copy_from_slice(&u16::try_from(vr.len()).ok()?.to_be_bytes());
            h[6] = wire::vrrp::PROTOCOL;
            h[7] = wire::vrrp::TTL;
            h[8..24].copy_from_slice(&s.octets());
            h[24..40].copy_from_slice(&d.octets());
            f.extend_from_slice(&h);
        }
        _ => return None,
    }
    f.extend_from_slice(&vr);
    Some(f)
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

struct Speaker {
    groups: Vec<Group>,
    w: HaWiring,
    /// The role the state sync was last told: (elected, draining).
    told: Option<(bool, bool)>,
}

impl Speaker {
    fn apply(&mut self, i: usize, actions: Vec<Action>) {
        // Becoming master takes the synced SAs over before the addresses
        // are taken: no packet leaves with a number the old active may
        // have used.
        if actions.iter().any(|a| {
            matches!(
                a,
                Action::Transition {
                    to: State::Master,
                    ..
                }
            )
        }) {
            self.take_over();
        }
        let mut tables_changed = false;
        let mut announce = false;
        let switchover = actions.iter().any(|a| {
            matches!(
                a,
                Action::Transition {
                    reason: Reason::Switchover,
                    ..
                }
            )
        });
        for a in actions {
            let g = &mut self.groups[i];
            match a {
                // Make-before-break (module doc): keep them for now.
                Action::ReleaseAddresses if switchover => {
                    g.draining = Some(Instant::now() + g.m.master_down_interval());
                }
                Action::SendAdvert { priority } => {
                    if let Some(frame) = advert_frame(g, priority) {
                        let _ = self.w.mailbox.try_send(Command::SendFrame {
                            port: g.port,
                            frame,
                        });
                    }
                }
                Action::TakeAddresses | Action::ReleaseAddresses => {
                    let take = matches!(a, Action::TakeAddresses);
                    g.draining = None;
                    let mut held = self.w.held.lock().unwrap_or_else(|e| e.into_inner());
                    let v = held.entry(g.port).or_default();
                    v.retain(|x| !g.vips.contains(x));
                    if take {
                        v.extend(g.vips.iter().copied());
                    }
                    tables_changed = true;
                }
                Action::Announce => {
                    announce = true;
                    self.groups[i].reannounce = Some(Instant::now() + REANNOUNCE_AFTER);
                }
                Action::Transition { from, to, reason } => {
                    if reason != Reason::Switchover && g.draining.take().is_some() {
                        // Any other transition ends the drain: from backup
                        // the machine releases nothing itself.
                        Self::release(&self.w.held, g);
                        tables_changed = true;
                    }
                    g.last_wall = Some((SystemTime::now(), to, reason));
                    info!(
                        vrid = g.m.config().vrid,
                        interface = %g.interface,
                        from = from.as_str(),
                        to = to.as_str(),
                        reason = reason.as_str(),
                        priority = g.m.priority(),
                        "VRRP transition"
                    );
                }
            }
        }
        self.sync_role();
        if tables_changed {
            (self.w.rebuild)();
        }
        if announce {
            let _ = self
                .w
                .mailbox
                .try_send(Command::Announce(self.groups[i].port));
        }
    }

    /// Removes the group's addresses from [`Held`] (the caller rebuilds).
    fn release(held: &Held, g: &Group) {
        let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = held.get_mut(&g.port) {
            v.retain(|x| !g.vips.contains(x));
        }
    }

    /// Ends group `i`'s drain after a switchover (module doc): the new
    /// master was heard, or it is time.
    fn end_drain(&mut self, i: usize, why: &str) {
        let g = &mut self.groups[i];
        if g.draining.take().is_none() {
            return;
        }
        Self::release(&self.w.held, g);
        info!(vrid = g.m.config().vrid, interface = %g.interface, why,
              "VRRP switchover: virtual addresses released");
        self.sync_role();
        (self.w.rebuild)();
    }

    /// Tells the state sync whether we still send from the addresses
    /// (master of a group, or draining after a switchover). Once we do
    /// not, it stores the peer's state and follows its sequence numbers;
    /// while draining it must not, or our last packets would jump past
    /// the new master's and push the far end's replay window beyond them.
    fn sync_role(&mut self) {
        let role = (
            self.groups.iter().any(|g| g.m.state() == State::Master),
            self.groups.iter().any(|g| g.draining.is_some()),
        );
        let Some(sync) = &self.w.sync else { return };
        if self.told != Some(role) {
            self.told = Some(role);
            let (elected, draining) = role;
            let _ = sync
                .tx
                .send(vecgate_ha::syncer::Message::Role { elected, draining });
        }
    }

    /// Asks the state sync to take the synced state over and waits for
    /// its answer (the peer's first word if none was heard yet, the IKE
    /// thread's adoption of the synced IKE SAs), at most
    /// [`SyncLink::wait`].
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

    fn status(&self, g: &Group, now: Instant) -> GroupStatus {
        GroupStatus {
            vrid: g.m.config().vrid,
            interface: g.interface.clone(),
            family: g.family,
            addresses: g.vips.clone(),
            state: g.m.state(),
            base_priority: g.base_priority,
            priority: g.m.priority(),
            preempt: g.m.config().preempt,
            interval_cs: g.m.config().interval_cs,
            held_secs: g.m.preempt_held_until(now).map_or(0, |t| {
                t.saturating_duration_since(now).as_secs_f64().ceil() as u64
            }),
            master: g.m.master_addr(),
            last: g.last_wall,
            tracked: g.track.iter().map(|(n, _, up)| (n.clone(), *up)).collect(),
            stats: g.m.stats(),
        }
    }

    fn publish(&self) {
        let now = Instant::now();
        let v = self.groups.iter().map(|g| self.status(g, now)).collect();
        *self.w.status.lock().unwrap_or_else(|e| e.into_inner()) = v;
    }

    /// Planned switchover (RFC 5798 §6.4.3 with priority 0): every group
    /// the request names that we are master of resigns.
    fn switchover(
        &mut self,
        now: Instant,
        spec: &vecgate_control::model::HaSwitchover,
    ) -> Result<Vec<GroupStatus>, vecgate_control::state::ApiError> {
        use vecgate_control::state::ApiError;
        let named: Vec<usize> = (0..self.groups.len())
            .filter(|&i| {
                let g = &self.groups[i];
                spec.interface.as_ref().is_none_or(|n| *n == g.interface)
                    && spec.vrid.is_none_or(|v| v == g.m.config().vrid)
            })
            .collect();
        if named.is_empty() && (spec.interface.is_some() || spec.vrid.is_some()) {
            return Err(ApiError::not_found(
                if spec.vrid.is_some() {
                    "vrid"
                } else {
                    "interface"
                },
                "no such VRRP group",
            ));
        }
        let masters: Vec<usize> = named
            .into_iter()
            .filter(|&i| self.groups[i].m.state() == State::Master)
            .collect();
        if masters.is_empty() {
            return Err(ApiError::new(
                409,
                "this gateway is not master of any of these VRRP groups",
                None,
            ));
        }
        let hold = Duration::from_secs(spec.hold_secs.unwrap_or(60));
        for &i in &masters {
            let a = self.groups[i].m.handle(now, Event::Switchover { hold });
            self.apply(i, a);
        }
        self.publish();
        let now = Instant::now();
        Ok(masters
            .iter()
            .map(|&i| self.status(&self.groups[i], now))
            .collect())
    }

    fn advert(&mut self, now: Instant, from: AdvertFrom, data: &[u8]) {
        let AdvertFrom { port, src, dst } = from;
        let family = Family::of(&src);
        let Ok(p) = wire::vrrp::Packet::new_checked(data, family) else {
            return;
        };
        let Ok(r) = VrrpRepr::parse(&p, &src, &dst) else {
            return;
        };
        for i in 0..self.groups.len() {
            let g = &self.groups[i];
            if g.port == port && g.family == family && g.m.config().vrid == r.vrid {
                let a = self.groups[i].m.handle(
                    now,
                    Event::Advert {
                        src,
                        priority: r.priority,
                        max_advert_int: r.max_advert_int,
                    },
                );
                self.apply(i, a);
                let g = &self.groups[i];
                let other = r.priority != wire::vrrp::PRIORITY_STOP && src != g.m.config().primary;
                if other && g.m.state() == State::Backup {
                    self.end_drain(i, "the new master advertised");
                } else if other && g.m.state() == State::Master {
                    // A peer that thinks it is master (it missed our adverts
                    // for a while) announced the addresses from its MAC;
                    // it backs off on our advert, but the hosts' entries
                    // would stay on it: announce again (keepalived's
                    // vrrp_garp_lower_prio_repeat does the same).
                    let _ = self.w.mailbox.try_send(Command::Announce(g.port));
                }
            }
        }
    }

    /// Each group's own link and its tracked ones.
    fn links(&mut self, now: Instant) {
        for i in 0..self.groups.len() {
            for t in &mut self.groups[i].track {
                t.2 = link_up(&t.1);
            }
            let down = self.groups[i].track.iter().filter(|t| !t.2).count();
            let cut = u8::try_from(down)
                .unwrap_or(u8::MAX)
                .saturating_mul(self.groups[i].penalty);
            let up = link_up(&self.groups[i].host);
            if up != self.groups[i].link_up {
                self.groups[i].link_up = up;
                let ev = if up {
                    Event::InterfaceUp
                } else {
                    Event::InterfaceDown
                };
                let a = self.groups[i].m.handle(now, ev);
                self.apply(i, a);
            }
            let g = &self.groups[i];
            let want = g.base_priority.saturating_sub(cut).max(1);
            if want != g.m.priority() && g.base_priority != wire::vrrp::PRIORITY_OWNER {
                warn!(vrid = g.m.config().vrid, interface = %g.interface, tracked_down = down,
                      from = g.m.priority(), to = want, "VRRP priority changed by tracking");
                let a = self.groups[i].m.handle(now, Event::SetPriority(want));
                self.apply(i, a);
            }
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
    let groups = groups(cfg, macs);
    let mut s = Speaker {
        groups,
        w,
        told: None,
    };
    std::thread::Builder::new()
        .name("vg-vrrp".into())
        .spawn(move || {
            let now = Instant::now();
            for i in 0..s.groups.len() {
                let a = s.groups[i].m.handle(now, Event::Startup);
                s.apply(i, a);
            }
            s.publish();
            let mut last_links = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let now = Instant::now();
                let wait = s
                    .groups
                    .iter()
                    .filter_map(|g| g.m.next_deadline())
                    .min()
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
                let mut next = s.w.punt.recv_timeout(wait);
                let mut n = 0;
                while let Some(d) = next {
                    s.advert(Instant::now(), d.meta, d.data());
                    s.w.punt.release(d);
                    n += 1;
                    next = (n < MAX_ADVERT_BATCH)
                        .then(|| s.w.punt.try_recv())
                        .flatten();
                }
                while let Ok(r) = s.w.requests.try_recv() {
                    let out = s.switchover(Instant::now(), &r.spec);
                    let _ = r.reply.send(out);
                }
                let now = Instant::now();
                for i in 0..s.groups.len() {
                    let a = s.groups[i].m.poll(now);
                    s.apply(i, a);
                    if s.groups[i].draining.is_some_and(|t| t <= now) {
                        s.end_drain(i, "no new master heard");
                    }
                    let g = &mut s.groups[i];
                    if g.reannounce.is_some_and(|t| t <= now) {
                        g.reannounce = None;
                        if g.m.state() == State::Master {
                            let _ = s.w.mailbox.try_send(Command::Announce(g.port));
                        }
                    }
                }
                if now.duration_since(last_links) >= Duration::from_millis(100) {
                    last_links = now;
                    s.links(now);
                }
                s.publish();
            }
            let now = Instant::now();
            for i in 0..s.groups.len() {
                let a = s.groups[i].m.handle(now, Event::Shutdown);
                s.apply(i, a);
            }
            s.publish();
            // Let worker 0 send the priority-0 adverts before it stops.
            std::thread::sleep(Duration::from_millis(50));
        })
}

/// One line per group for the log (at exit).
pub fn describe(status: &HaStatus) -> Vec<String> {
    let v = status.lock().unwrap_or_else(|e| e.into_inner());
    v.iter()
        .map(|g| {
            let last = g.last.map_or("-".to_owned(), |(t, st, r)| {
                let secs = t
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0);
                format!("{} ({}) at {secs:.3}", st.as_str(), r.as_str())
            });
            let addrs: Vec<String> = g.addresses.iter().map(|a| a.to_string()).collect();
            format!(
                "vrid {} on {} [{}]: {} priority {}/{} master {} last {last}; adverts sent {} received {}, became master {} backup {}, priority 0 sent {} received {}",
                g.vrid,
                g.interface,
                addrs.join(","),
                g.state.as_str(),
                g.priority,
                g.base_priority,
                g.master.map_or("-".to_owned(), |a| a.to_string()),
                g.stats.adverts_sent,
                g.stats.adverts_received,
                g.stats.became_master,
                g.stats.became_backup,
                g.stats.priority_zero_sent,
                g.stats.priority_zero_received,
            )
        })
        .collect()
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
        last_transition: g.last.map(|(t, st, r)| HaTransitionInfo {
            at_unix: t
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
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
