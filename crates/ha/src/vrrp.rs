//! The VRRPv3 state machine of one virtual router (RFC 5798 §6.4), sans
//! I/O: the caller feeds [`Event`]s with the current time and carries out
//! the [`Action`]s it gets back (send an advertisement, take or release
//! the virtual addresses, announce them). Time is whatever monotonic
//! [`Instant`] the caller passes, so tests drive it by hand.
//!
//! Deviations, both as keepalived does by default: the virtual addresses
//! are answered with the interface's own MAC address (not the virtual MAC
//! of §7.3, which would need the port in promiscuous mode), and the
//! master always accepts traffic to them (Accept_Mode on, §6.1), since
//! tunnels terminate on them.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use wire::vrrp::{PRIORITY_OWNER, PRIORITY_STOP};

/// Protocol state (RFC 5798 §6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Initialize,
    Backup,
    Master,
}

impl State {
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Initialize => "initialize",
            State::Backup => "backup",
            State::Master => "master",
        }
    }
}

/// Why a transition happened: logged, counted and reported to the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Startup as the address owner (priority 255, §6.4.1).
    Owner,
    /// Startup or interface up: wait for a master (§6.4.1).
    Startup,
    /// No advertisement for Master_Down_Interval (§6.4.2).
    MasterDown,
    /// The master sent priority 0 and Skew_Time passed (§6.4.2).
    MasterStopped,
    /// An advertisement of higher priority, or equal priority from a higher
    /// address (§6.4.3).
    Preempted,
    /// Our own shutdown (§6.4.2, §6.4.3).
    Shutdown,
    /// The interface went down.
    InterfaceDown,
    /// Planned switchover: priority 0 sent, backup without preemption.
    Switchover,
}

impl Reason {
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Owner => "owner",
            Reason::Startup => "startup",
            Reason::MasterDown => "master-down",
            Reason::MasterStopped => "master-stopped",
            Reason::Preempted => "preempted",
            Reason::Shutdown => "shutdown",
            Reason::InterfaceDown => "interface-down",
            Reason::Switchover => "switchover",
        }
    }
}

/// What happens to the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The router starts (§6.4.1 Startup).
    Startup,
    /// The router stops cleanly (§6.4.2/§6.4.3 Shutdown).
    Shutdown,
    /// An advertisement for this VRID that passed §7.1's checks.
    Advert {
        src: IpAddr,
        priority: u8,
        /// Centiseconds.
        max_advert_int: u16,
    },
    /// The interface the group lives on came up / went down.
    InterfaceUp,
    InterfaceDown,
    /// The configured priority changed (tracking, API).
    SetPriority(u8),
    /// Planned handover (RFC 5798 §6.4.3 "Shutdown" semantics without
    /// leaving the protocol): a master sends priority 0 so a backup takes
    /// over after its Skew_Time (§6.4.2), and does not preempt for `hold`,
    /// so it does not take the addresses straight back. Should no backup
    /// take over, Master_Down_Interval makes it master again.
    Switchover {
        hold: Duration,
    },
}

/// What the caller must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Multicast an advertisement with this priority.
    SendAdvert { priority: u8 },
    /// Start answering ARP/ND for and accepting traffic to the addresses.
    TakeAddresses,
    /// Stop answering for them (a backup never transmits on them).
    ReleaseAddresses,
    /// Gratuitous ARP / unsolicited NA for every address (§6.4.1, §6.4.2).
    Announce,
    /// The state changed: for the log, the counters and the sync hook.
    Transition {
        from: State,
        to: State,
        reason: Reason,
    },
}

/// Configuration of one virtual router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub vrid: u8,
    /// 1..=255; 255 only for the address owner.
    pub priority: u8,
    /// Advertisement_Interval in centiseconds, 1..=4095.
    pub interval_cs: u16,
    pub preempt: bool,
    /// Our primary address on the interface: the tie-breaker (§6.4.3).
    pub primary: IpAddr,
}

/// Event counters (`show ha`, metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub adverts_sent: u64,
    pub adverts_received: u64,
    pub priority_zero_sent: u64,
    pub priority_zero_received: u64,
    pub became_master: u64,
    pub became_backup: u64,
}

/// One virtual router.
#[derive(Debug, Clone)]
pub struct Machine {
    cfg: Config,
    state: State,
    /// Master_Adver_Interval (centiseconds), learnt from the master.
    master_adver_cs: u16,
    adver_timer: Option<Instant>,
    master_down_timer: Option<Instant>,
    /// After a switchover, preemption is held until then (or until we
    /// are master again), so the peer keeps what we handed it.
    hold_until: Option<Instant>,
    /// The master said it stops (priority 0): the next takeover's reason.
    stop_heard: bool,
    master_addr: Option<IpAddr>,
    last: Option<(Instant, State, Reason)>,
    stats: Stats,
}

fn cs(v: u32) -> Duration {
    Duration::from_millis(u64::from(v) * 10)
}

/// Skew_Time in centiseconds (§6.1): ((256 − priority) × interval) / 256.
pub fn skew_cs(priority: u8, interval_cs: u16) -> u32 {
    ((256 - u32::from(priority)) * u32::from(interval_cs)) / 256
}

/// Master_Down_Interval in centiseconds (§6.1): 3 × interval + skew.
pub fn master_down_cs(priority: u8, interval_cs: u16) -> u32 {
    3 * u32::from(interval_cs) + skew_cs(priority, interval_cs)
}

impl Machine {
    pub fn new(cfg: Config) -> Machine {
        Machine {
            master_adver_cs: cfg.interval_cs.max(1),
            cfg,
            state: State::Initialize,
            adver_timer: None,
            master_down_timer: None,
            hold_until: None,
            stop_heard: false,
            master_addr: None,
            last: None,
            stats: Stats::default(),
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn priority(&self) -> u8 {
        self.cfg.priority
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The current master's address as last seen (ours when master).
    pub fn master_addr(&self) -> Option<IpAddr> {
        match self.state {
            State::Master => Some(self.cfg.primary),
            State::Backup => self.master_addr,
            State::Initialize => None,
        }
    }

    /// When, to what, and why the last transition happened.
    pub fn last_transition(&self) -> Option<(Instant, State, Reason)> {
        self.last
    }

    /// Preemption is held (after a switchover) until this instant.
    pub fn preempt_held_until(&self, now: Instant) -> Option<Instant> {
        self.hold_until.filter(|t| *t > now)
    }

    fn preempt_held(&self, now: Instant) -> bool {
        self.preempt_held_until(now).is_some()
    }

    /// Master_Down_Interval with the interval learnt from the master.
    pub fn master_down_interval(&self) -> Duration {
        cs(master_down_cs(self.cfg.priority, self.master_adver_cs))
    }

    fn skew(&self) -> Duration {
        cs(skew_cs(self.cfg.priority, self.master_adver_cs))
    }

    fn adver_interval(&self) -> Duration {
        cs(u32::from(self.cfg.interval_cs.max(1)))
    }

    /// When the caller must call [`poll`](Self::poll) next.
    pub fn next_deadline(&self) -> Option<Instant> {
        match (self.adver_timer, self.master_down_timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn transition(&mut self, now: Instant, to: State, reason: Reason, out: &mut Vec<Action>) {
        let from = self.state;
        if from == to {
            return;
        }
        if from == State::Master {
            out.push(Action::ReleaseAddresses);
        }
        self.state = to;
        match to {
            State::Master => {
                self.stats.became_master += 1;
                self.hold_until = None;
            }
            State::Backup => self.stats.became_backup += 1,
            State::Initialize => {}
        }
        self.last = Some((now, to, reason));
        out.push(Action::Transition { from, to, reason });
    }

    fn send(&mut self, priority: u8, out: &mut Vec<Action>) {
        self.stats.adverts_sent += 1;
        if priority == PRIORITY_STOP {
            self.stats.priority_zero_sent += 1;
        }
        out.push(Action::SendAdvert { priority });
    }

    fn become_master(&mut self, now: Instant, reason: Reason, out: &mut Vec<Action>) {
        let p = self.cfg.priority;
        self.send(p, out);
        self.transition(now, State::Master, reason, out);
        out.push(Action::TakeAddresses);
        out.push(Action::Announce);
        self.master_down_timer = None;
        self.adver_timer = Some(now + self.adver_interval());
    }

    fn become_backup(&mut self, now: Instant, reason: Reason, out: &mut Vec<Action>) {
        self.adver_timer = None;
        self.transition(now, State::Backup, reason, out);
        self.master_down_timer = Some(now + self.master_down_interval());
    }

    fn startup(&mut self, now: Instant, out: &mut Vec<Action>) {
        if self.state != State::Initialize {
            return;
        }
        if self.cfg.priority == PRIORITY_OWNER {
            self.become_master(now, Reason::Owner, out);
        } else {
            self.master_adver_cs = self.cfg.interval_cs.max(1);
            self.master_addr = None;
            self.become_backup(now, Reason::Startup, out);
        }
    }

    fn stop(&mut self, now: Instant, reason: Reason, can_send: bool, out: &mut Vec<Action>) {
        if self.state == State::Master && can_send {
            self.send(PRIORITY_STOP, out);
        }
        self.adver_timer = None;
        self.master_down_timer = None;
        self.transition(now, State::Initialize, reason, out);
    }

    /// §6.4.3: does an advertisement of `priority` from `src` beat ours?
    fn beats_us(&self, src: &IpAddr, priority: u8) -> bool {
        priority > self.cfg.priority
            || (priority == self.cfg.priority && addr_key(src) > addr_key(&self.cfg.primary))
    }

    /// Feeds one event; returns what to do.
    pub fn handle(&mut self, now: Instant, ev: Event) -> Vec<Action> {
        let mut out = Vec::new();
        match ev {
            Event::Startup | Event::InterfaceUp => self.startup(now, &mut out),
            Event::Shutdown => self.stop(now, Reason::Shutdown, true, &mut out),
            Event::InterfaceDown => self.stop(now, Reason::InterfaceDown, false, &mut out),
            Event::SetPriority(p) => {
                // 0 is reserved for "stopping"; 255 only for the owner.
                self.cfg.priority = p.max(1);
                if self.state == State::Master {
                    // Tell the backups at once so a better one preempts.
                    let p = self.cfg.priority;
                    self.send(p, &mut out);
                    self.adver_timer = Some(now + self.adver_interval());
                }
            }
            Event::Switchover { hold } => {
                if self.state == State::Master {
                    self.send(PRIORITY_STOP, &mut out);
                    self.master_addr = None;
                    self.become_backup(now, Reason::Switchover, &mut out);
                    self.hold_until = Some(now + hold);
                }
            }
            Event::Advert {
                src,
                priority,
                max_advert_int,
            } => self.advert(now, src, priority, max_advert_int, &mut out),
        }
        out
    }

    fn advert(
        &mut self,
        now: Instant,
        src: IpAddr,
        priority: u8,
        max_advert_int: u16,
        out: &mut Vec<Action>,
    ) {
        if src == self.cfg.primary {
            return; // our own, looped back
        }
        self.stats.adverts_received += 1;
        if priority == PRIORITY_STOP {
            self.stats.priority_zero_received += 1;
        }
        match self.state {
            State::Initialize => {}
            State::Backup => {
                if priority == PRIORITY_STOP {
                    self.stop_heard = true;
                    self.master_down_timer = Some(now + self.skew());
                } else if !self.cfg.preempt
                    || self.preempt_held(now)
                    || priority >= self.cfg.priority
                {
                    self.stop_heard = false;
                    self.master_adver_cs = max_advert_int.max(1);
                    self.master_addr = Some(src);
                    self.master_down_timer = Some(now + self.master_down_interval());
                }
                // else: a lower-priority master and we preempt: let the
                // timer run out and take over.
            }
            State::Master => {
                if priority == PRIORITY_STOP {
                    let p = self.cfg.priority;
                    self.send(p, out);
                    self.adver_timer = Some(now + self.adver_interval());
                } else if self.beats_us(&src, priority) {
                    self.master_adver_cs = max_advert_int.max(1);
                    self.master_addr = Some(src);
                    self.become_backup(now, Reason::Preempted, out);
                }
            }
        }
    }

    /// Fires the timers that are due at `now`.
    pub fn poll(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        if self.state == State::Backup && self.master_down_timer.is_some_and(|t| t <= now) {
            let reason = if self.stop_heard {
                Reason::MasterStopped
            } else {
                Reason::MasterDown
            };
            self.stop_heard = false;
            self.become_master(now, reason, &mut out);
        } else if self.state == State::Master && self.adver_timer.is_some_and(|t| t <= now) {
            let p = self.cfg.priority;
            self.send(p, &mut out);
            self.adver_timer = Some(now + self.adver_interval());
        }
        out
    }
}

/// Addresses compared as unsigned integers (§6.4.3).
fn addr_key(a: &IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => u128::from(u32::from(*v)),
        IpAddr::V6(v) => u128::from(*v),
    }
}
