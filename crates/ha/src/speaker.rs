//! The VRRPv3 speaker of a gateway, sans I/O: one [`Machine`] per group,
//! and what their actions mean for the gateway. The driver feeds it the
//! adverts the workers punt, the links' state and the time, and carries
//! out its [`Out`]s: an advertisement is a frame to send on a port;
//! taking the addresses adds them to the interface in the tables (the
//! driver copies [`Speaker::held`] into what the table builder reads, so
//! API live changes keep them) and announces them (gratuitous ARP /
//! unsolicited NA); releasing removes them, so a backup neither answers
//! ARP/ND for nor accepts traffic to them. Every transition is logged and
//! kept for `show`.
//!
//! A planned switchover is make-before-break: the resigning master sends
//! priority 0 but keeps the addresses (and so its tunnels' local ends)
//! until it hears the new master's first advertisement, which goes out
//! with its gratuitous ARP / NA, or Master_Down_Interval passes. Released
//! at once, traffic still sent to it during the peer's Skew_Time (RFC 5798
//! §6.4.2) would be lost; a plain router forwards it anyway, a tunnel end
//! cannot.
//!
//! With a state sync, becoming master asks for the synced state to be
//! taken over ([`Out::TakeOver`]) before the addresses are taken, and the
//! sync hears whether this gateway still sends from them ([`Out::Role`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use tracing::{info, warn};
use wire::vrrp::{Family, VrrpRepr};

use crate::syncer::Now;
use crate::vrrp::{Action, Config, Event, Machine, Reason, State, Stats};

mod frame;
pub use frame::advert_frame;

/// Queued adverts heard per turn before the timers run (a flood of them
/// never starves the timers).
pub const MAX_ADVERT_BATCH: usize = 64;

/// A new master announces its addresses again this long after the first
/// time (keepalived's `garp_master_delay` does so after 5 s): a lost
/// gratuitous ARP / NA, or the old owner's answer racing it, would
/// otherwise leave a neighbour's entry on the old owner until it expires
/// (tens of seconds for a Linux peer: a tunnel end unreachable that long).
pub const REANNOUNCE_AFTER: Duration = Duration::from_secs(1);

/// One group as the gateway configures it (`[[ha.group]]`, with the
/// `[ha]` defaults applied and its interface resolved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    pub vrid: u8,
    /// The port of its interface.
    pub port: u16,
    pub interface: String,
    /// The interface's netdev (whose link the driver reads).
    pub host: String,
    pub mac: [u8; 6],
    pub family: Family,
    /// The virtual addresses.
    pub vips: Vec<IpAddr>,
    /// Where adverts come from: the interface's primary IPv4 address
    /// (RFC 5798 §5.1.1.1) or its link-local IPv6 address (§5.1.2.1).
    pub primary: IpAddr,
    pub priority: u8,
    pub interval_cs: u16,
    pub preempt: bool,
    /// Tracked interfaces: (name, netdev).
    pub track: Vec<(String, String)>,
    /// Priority lost per tracked interface that is down.
    pub penalty: u8,
}

/// What the driver must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out {
    /// Send this Ethernet frame on `port`.
    SendFrame { port: u16, frame: Vec<u8> },
    /// Gratuitous ARP / unsolicited NA for `port`'s addresses.
    Announce(u16),
    /// A group becomes master: take the synced state over (and wait for
    /// it) before the addresses are taken.
    TakeOver,
    /// Whether we are master of any group (`elected`) and whether we
    /// still hold addresses after a switchover (`draining`), when it
    /// changed.
    Role { elected: bool, draining: bool },
    /// [`Speaker::held`] changed: publish the tables with it.
    Rebuild,
}

/// One group as `show ha` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// Wall-clock time (ms since the Unix epoch), new state and reason of
    /// the last transition.
    pub last: Option<(u64, State, Reason)>,
    /// Tracked interfaces and whether their link is up.
    pub tracked: Vec<(String, bool)>,
    pub stats: Stats,
}

/// Why a switchover was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwitchoverError {
    /// No group on that interface (`vrid: false`) or with that VRID.
    NoSuchGroup { vrid: bool },
    /// We are master of none of the groups named.
    NotMaster,
}

struct Group {
    m: Machine,
    spec: GroupSpec,
    link_up: bool,
    last_wall: Option<(u64, State, Reason)>,
    /// Whether each tracked interface's link is up.
    track_up: Vec<bool>,
    /// After a switchover: the addresses are still held until this
    /// deadline or the new master's first advert (module doc).
    draining: Option<Instant>,
    /// After becoming master: the addresses are announced once more then
    /// ([`REANNOUNCE_AFTER`]).
    reannounce: Option<Instant>,
}

/// Every group of the gateway (module doc).
pub struct Speaker {
    groups: Vec<Group>,
    /// Virtual addresses held (as master) per port.
    held: HashMap<u16, Vec<IpAddr>>,
    /// The role last told ([`Out::Role`]).
    told: Option<(bool, bool)>,
}

impl Speaker {
    pub fn new(specs: Vec<GroupSpec>) -> Speaker {
        let groups = specs
            .into_iter()
            .map(|spec| Group {
                m: Machine::new(Config {
                    vrid: spec.vrid,
                    priority: spec.priority,
                    interval_cs: spec.interval_cs,
                    preempt: spec.preempt,
                    primary: spec.primary,
                }),
                link_up: true,
                last_wall: None,
                track_up: vec![true; spec.track.len()],
                draining: None,
                reannounce: None,
                spec,
            })
            .collect();
        Speaker {
            groups,
            held: HashMap::new(),
            told: None,
        }
    }

    /// The virtual addresses held per port (as master, or draining).
    pub fn held(&self) -> &HashMap<u16, Vec<IpAddr>> {
        &self.held
    }

    /// Every group starts (RFC 5798 §6.4.1).
    pub fn start(&mut self, now: Now) -> Vec<Out> {
        self.each(now, Event::Startup)
    }

    /// Every group stops: priority 0 for those we are master of (§6.4.3).
    pub fn shutdown(&mut self, now: Now) -> Vec<Out> {
        self.each(now, Event::Shutdown)
    }

    fn each(&mut self, now: Now, ev: Event) -> Vec<Out> {
        let mut out = Vec::new();
        for i in 0..self.groups.len() {
            let a = self.groups[i].m.handle(now.at, ev.clone());
            self.apply(now, i, a, &mut out);
        }
        out
    }

    /// When [`Speaker::poll`] has work next.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.groups
            .iter()
            .flat_map(|g| [g.m.next_deadline(), g.draining, g.reannounce])
            .flatten()
            .min()
    }

    /// The timers: the machines', a drain's end, a re-announcement.
    pub fn poll(&mut self, now: Now) -> Vec<Out> {
        let mut out = Vec::new();
        for i in 0..self.groups.len() {
            let a = self.groups[i].m.poll(now.at);
            self.apply(now, i, a, &mut out);
            if self.groups[i].draining.is_some_and(|t| t <= now.at) {
                self.end_drain(i, "no new master heard", &mut out);
            }
            let g = &mut self.groups[i];
            if g.reannounce.is_some_and(|t| t <= now.at) {
                g.reannounce = None;
                if g.m.state() == State::Master {
                    out.push(Out::Announce(g.spec.port));
                }
            }
        }
        out
    }

    /// An advertisement heard on `port` from `src` to `dst` (`data`: the
    /// VRRP packet); anything that does not parse is ignored.
    pub fn advert(
        &mut self,
        now: Now,
        port: u16,
        src: IpAddr,
        dst: IpAddr,
        data: &[u8],
    ) -> Vec<Out> {
        let mut out = Vec::new();
        let family = Family::of(&src);
        let Ok(p) = wire::vrrp::Packet::new_checked(data, family) else {
            return out;
        };
        let Ok(r) = VrrpRepr::parse(&p, &src, &dst) else {
            return out;
        };
        for i in 0..self.groups.len() {
            let g = &self.groups[i];
            if g.spec.port != port || g.spec.family != family || g.spec.vrid != r.vrid {
                continue;
            }
            let a = self.groups[i].m.handle(
                now.at,
                Event::Advert {
                    src,
                    priority: r.priority,
                    max_advert_int: r.max_advert_int,
                },
            );
            self.apply(now, i, a, &mut out);
            let g = &self.groups[i];
            let other = r.priority != wire::vrrp::PRIORITY_STOP && src != g.spec.primary;
            if other && g.m.state() == State::Backup {
                self.end_drain(i, "the new master advertised", &mut out);
            } else if other && g.m.state() == State::Master {
                // A peer that thinks it is master (it missed our adverts
                // for a while) announced the addresses from its MAC; it
                // backs off on our advert, but the hosts' entries would
                // stay on it: announce again (keepalived's
                // vrrp_garp_lower_prio_repeat does the same).
                out.push(Out::Announce(g.spec.port));
            }
        }
        out
    }

    /// Each group's own link and its tracked ones, as `up` says of a
    /// netdev: a group's link going down or up is an event, a tracked
    /// one lowers or restores its priority.
    pub fn links(&mut self, now: Now, up: impl Fn(&str) -> bool) -> Vec<Out> {
        let mut out = Vec::new();
        for i in 0..self.groups.len() {
            let g = &mut self.groups[i];
            for (k, (_, host)) in g.spec.track.iter().enumerate() {
                g.track_up[k] = up(host);
            }
            let down = g.track_up.iter().filter(|u| !**u).count();
            let cut = u8::try_from(down)
                .unwrap_or(u8::MAX)
                .saturating_mul(g.spec.penalty);
            let link = up(&g.spec.host);
            if link != g.link_up {
                g.link_up = link;
                let ev = if link {
                    Event::InterfaceUp
                } else {
                    Event::InterfaceDown
                };
                let a = g.m.handle(now.at, ev);
                self.apply(now, i, a, &mut out);
            }
            let g = &self.groups[i];
            let want = g.spec.priority.saturating_sub(cut).max(1);
            if want != g.m.priority() && g.spec.priority != wire::vrrp::PRIORITY_OWNER {
                warn!(vrid = g.spec.vrid, interface = %g.spec.interface, tracked_down = down,
                      from = g.m.priority(), to = want, "VRRP priority changed by tracking");
                let a = self.groups[i].m.handle(now.at, Event::SetPriority(want));
                self.apply(now, i, a, &mut out);
            }
        }
        out
    }

    /// Planned switchover (RFC 5798 §6.4.3 with priority 0): every group
    /// named (by interface and VRID; all when neither is given) that we
    /// are master of resigns, and does not preempt for `hold`.
    pub fn switchover(
        &mut self,
        now: Now,
        interface: Option<&str>,
        vrid: Option<u8>,
        hold: Duration,
    ) -> Result<(Vec<GroupStatus>, Vec<Out>), SwitchoverError> {
        let named: Vec<usize> = (0..self.groups.len())
            .filter(|&i| {
                let g = &self.groups[i];
                interface.is_none_or(|n| n == g.spec.interface)
                    && vrid.is_none_or(|v| v == g.spec.vrid)
            })
            .collect();
        if named.is_empty() && (interface.is_some() || vrid.is_some()) {
            return Err(SwitchoverError::NoSuchGroup {
                vrid: vrid.is_some(),
            });
        }
        let masters: Vec<usize> = named
            .into_iter()
            .filter(|&i| self.groups[i].m.state() == State::Master)
            .collect();
        if masters.is_empty() {
            return Err(SwitchoverError::NotMaster);
        }
        let mut out = Vec::new();
        for &i in &masters {
            let a = self.groups[i].m.handle(now.at, Event::Switchover { hold });
            self.apply(now, i, a, &mut out);
        }
        let st = masters
            .iter()
            .map(|&i| Self::status_of(&self.groups[i], now.at))
            .collect();
        Ok((st, out))
    }

    /// Every group as `show ha` reports it, at `now`.
    pub fn status(&self, now: Instant) -> Vec<GroupStatus> {
        self.groups
            .iter()
            .map(|g| Self::status_of(g, now))
            .collect()
    }

    fn status_of(g: &Group, now: Instant) -> GroupStatus {
        GroupStatus {
            vrid: g.spec.vrid,
            interface: g.spec.interface.clone(),
            family: g.spec.family,
            addresses: g.spec.vips.clone(),
            state: g.m.state(),
            base_priority: g.spec.priority,
            priority: g.m.priority(),
            preempt: g.spec.preempt,
            interval_cs: g.spec.interval_cs,
            held_secs: g.m.preempt_held_until(now).map_or(0, |t| {
                t.saturating_duration_since(now).as_secs_f64().ceil() as u64
            }),
            master: g.m.master_addr(),
            last: g.last_wall,
            tracked: g
                .spec
                .track
                .iter()
                .zip(&g.track_up)
                .map(|((n, _), up)| (n.clone(), *up))
                .collect(),
            stats: g.m.stats(),
        }
    }

    /// Group `i`'s machine asked for `actions`.
    fn apply(&mut self, now: Now, i: usize, actions: Vec<Action>, out: &mut Vec<Out>) {
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
            out.push(Out::TakeOver);
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
                    g.draining = Some(now.at + g.m.master_down_interval());
                }
                Action::SendAdvert { priority } => {
                    if let Some(frame) = advert_frame(&g.spec, priority) {
                        out.push(Out::SendFrame {
                            port: g.spec.port,
                            frame,
                        });
                    }
                }
                Action::TakeAddresses | Action::ReleaseAddresses => {
                    let take = matches!(a, Action::TakeAddresses);
                    g.draining = None;
                    let v = self.held.entry(g.spec.port).or_default();
                    v.retain(|x| !g.spec.vips.contains(x));
                    if take {
                        v.extend(g.spec.vips.iter().copied());
                    }
                    tables_changed = true;
                }
                Action::Announce => {
                    announce = true;
                    g.reannounce = Some(now.at + REANNOUNCE_AFTER);
                }
                Action::Transition { from, to, reason } => {
                    if reason != Reason::Switchover && g.draining.take().is_some() {
                        // Any other transition ends the drain: from backup
                        // the machine releases nothing itself.
                        release(&mut self.held, &g.spec);
                        tables_changed = true;
                    }
                    g.last_wall = Some((now.wall_ms, to, reason));
                    info!(
                        vrid = g.spec.vrid,
                        interface = %g.spec.interface,
                        from = from.as_str(),
                        to = to.as_str(),
                        reason = reason.as_str(),
                        priority = g.m.priority(),
                        "VRRP transition"
                    );
                }
            }
        }
        self.tell_role(out);
        if tables_changed {
            out.push(Out::Rebuild);
        }
        if announce {
            out.push(Out::Announce(self.groups[i].spec.port));
        }
    }

    /// Ends group `i`'s drain after a switchover (module doc): the new
    /// master was heard, or it is time.
    fn end_drain(&mut self, i: usize, why: &str, out: &mut Vec<Out>) {
        let g = &mut self.groups[i];
        if g.draining.take().is_none() {
            return;
        }
        release(&mut self.held, &g.spec);
        info!(vrid = g.spec.vrid, interface = %g.spec.interface, why,
              "VRRP switchover: virtual addresses released");
        self.tell_role(out);
        out.push(Out::Rebuild);
    }

    /// Tells the state sync whether we still send from the addresses
    /// (master of a group, or draining after a switchover), when it
    /// changed. Once we do not, it stores the peer's state and follows
    /// its sequence numbers; while draining it must not, or our last
    /// packets would jump past the new master's and push the far end's
    /// replay window beyond them.
    fn tell_role(&mut self, out: &mut Vec<Out>) {
        let role = (
            self.groups.iter().any(|g| g.m.state() == State::Master),
            self.groups.iter().any(|g| g.draining.is_some()),
        );
        if self.told != Some(role) {
            self.told = Some(role);
            out.push(Out::Role {
                elected: role.0,
                draining: role.1,
            });
        }
    }
}

/// Removes the group's addresses from `held` (the caller rebuilds).
fn release(held: &mut HashMap<u16, Vec<IpAddr>>, g: &GroupSpec) {
    if let Some(v) = held.get_mut(&g.port) {
        v.retain(|x| !g.vips.contains(x));
    }
}

/// One line per group for the log (at exit).
pub fn describe(v: &[GroupStatus]) -> Vec<String> {
    v.iter()
        .map(|g| {
            let last = g.last.map_or("-".to_owned(), |(ms, st, r)| {
                format!(
                    "{} ({}) at {:.3}",
                    st.as_str(),
                    r.as_str(),
                    ms as f64 / 1000.0
                )
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

#[cfg(test)]
mod tests;
