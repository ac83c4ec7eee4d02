//! The VRRP machine against RFC 5798 §6.4, driven by a small discrete-event
//! network: machines exchange adverts with a delay, timers fire when due.
//! The observer is the simulation itself (every machine's state at every
//! event), not wall-clock time.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use vecgate_ha::vrrp::{master_down_cs, skew_cs};
use vecgate_ha::{Action, Config, Event, Machine, Reason, State};

fn addr(i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, i))
}

fn cfg(i: u8, priority: u8, interval_cs: u16, preempt: bool) -> Config {
    Config {
        vrid: 7,
        priority,
        interval_cs,
        preempt,
        primary: addr(i),
    }
}

struct Node {
    m: Machine,
    alive: bool,
    master_since: Option<Instant>,
}

struct Net {
    t0: Instant,
    now: Instant,
    delay: Duration,
    nodes: Vec<Node>,
    flight: Vec<(Instant, usize, Event)>,
    /// (time, node, state) of every transition.
    log: Vec<(Duration, usize, State, Reason)>,
    /// Longest time two masters coexisted after the later one's takeover.
    worst_overlap: Duration,
}

impl Net {
    fn new(delay: Duration, cfgs: Vec<Config>) -> Net {
        let t0 = Instant::now();
        Net {
            t0,
            now: t0,
            delay,
            nodes: cfgs
                .into_iter()
                .map(|c| Node {
                    m: Machine::new(c),
                    alive: false,
                    master_since: None,
                })
                .collect(),
            flight: Vec::new(),
            log: Vec::new(),
            worst_overlap: Duration::ZERO,
        }
    }

    fn apply(&mut self, i: usize, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::SendAdvert { priority } => {
                    let c = self.nodes[i].m.config().clone();
                    for j in 0..self.nodes.len() {
                        if j != i {
                            self.flight.push((
                                self.now + self.delay,
                                j,
                                Event::Advert {
                                    src: c.primary,
                                    priority,
                                    max_advert_int: c.interval_cs,
                                },
                            ));
                        }
                    }
                }
                Action::Transition { to, reason, .. } => {
                    self.log.push((self.now - self.t0, i, to, reason));
                    self.nodes[i].master_since = (to == State::Master).then_some(self.now);
                }
                _ => {}
            }
        }
        self.check();
    }

    fn check(&mut self) {
        let masters: Vec<Instant> = self
            .nodes
            .iter()
            .filter(|n| n.alive && n.m.state() == State::Master)
            .filter_map(|n| n.master_since)
            .collect();
        if masters.len() > 1 {
            let latest = masters.iter().max().copied().unwrap_or(self.now);
            self.worst_overlap = self.worst_overlap.max(self.now - latest);
        }
    }

    fn event(&mut self, i: usize, ev: Event) {
        if matches!(ev, Event::Startup) {
            self.nodes[i].alive = true;
        }
        let a = self.nodes[i].m.handle(self.now, ev);
        self.apply(i, a);
    }

    /// `kill -9`: the machine just stops (no priority 0, no more timers).
    fn kill(&mut self, i: usize) {
        self.nodes[i].alive = false;
        self.nodes[i].m = Machine::new(self.nodes[i].m.config().clone());
        self.nodes[i].master_since = None;
    }

    /// Runs every timer and delivery due up to `until`.
    fn run_until(&mut self, until: Instant) {
        loop {
            let timer = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.alive)
                .filter_map(|(i, n)| n.m.next_deadline().map(|t| (t, i)))
                .min();
            let msg = self.flight.iter().enumerate().map(|(k, f)| (f.0, k)).min();
            let next = match (timer, msg) {
                (Some(t), Some(m)) => t.0.min(m.0),
                (Some(t), None) => t.0,
                (None, Some(m)) => m.0,
                (None, None) => break,
            };
            if next > until {
                break;
            }
            self.now = next;
            if let Some((t, k)) = msg.filter(|m| m.0 == next) {
                let (_, j, ev) = self.flight.swap_remove(k);
                debug_assert_eq!(t, next);
                if self.nodes[j].alive {
                    let a = self.nodes[j].m.handle(self.now, ev);
                    self.apply(j, a);
                }
            } else if let Some((_, i)) = timer {
                let a = self.nodes[i].m.poll(self.now);
                self.apply(i, a);
            }
        }
        self.now = until;
        self.check();
    }

    fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    fn masters(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].alive && self.nodes[i].m.state() == State::Master)
            .collect()
    }
}

#[test]
fn timers_follow_section_6_1() {
    // Priority 100, 1 s: skew 0.60 s (integer centiseconds), down 3.60 s.
    assert_eq!(skew_cs(100, 100), 60);
    assert_eq!(master_down_cs(100, 100), 360);
    assert_eq!(master_down_cs(254, 100), 300);
    assert_eq!(master_down_cs(1, 100), 399);
}

#[test]
fn owner_is_master_at_once_and_stops_with_priority_zero() {
    let t = Instant::now();
    let mut m = Machine::new(cfg(1, 255, 100, false));
    let a = m.handle(t, Event::Startup);
    assert_eq!(a[0], Action::SendAdvert { priority: 255 });
    assert!(a.contains(&Action::TakeAddresses) && a.contains(&Action::Announce));
    assert_eq!(m.state(), State::Master);
    assert_eq!(m.next_deadline(), Some(t + Duration::from_secs(1)));
    let a = m.handle(t, Event::Shutdown);
    assert_eq!(a[0], Action::SendAdvert { priority: 0 });
    assert!(a.contains(&Action::ReleaseAddresses));
    assert_eq!(m.state(), State::Initialize);
    assert_eq!(m.next_deadline(), None);
}

#[test]
fn backup_takes_over_after_skew_on_priority_zero() {
    let t = Instant::now();
    let mut m = Machine::new(cfg(1, 100, 100, true));
    m.handle(t, Event::Startup);
    assert_eq!(m.state(), State::Backup);
    m.handle(
        t,
        Event::Advert {
            src: addr(2),
            priority: 200,
            max_advert_int: 100,
        },
    );
    assert_eq!(m.master_addr(), Some(addr(2)));
    assert!(m.poll(t + Duration::from_millis(3590)).is_empty());
    m.handle(
        t,
        Event::Advert {
            src: addr(2),
            priority: 0,
            max_advert_int: 100,
        },
    );
    assert_eq!(m.next_deadline(), Some(t + Duration::from_millis(600)));
    let a = m.poll(t + Duration::from_millis(600));
    assert!(a.contains(&Action::Transition {
        from: State::Backup,
        to: State::Master,
        reason: Reason::MasterStopped
    }));
}

#[test]
fn switchover_hands_over_and_stays_backup_with_preemption() {
    let mut n = Net::new(
        Duration::from_millis(1),
        vec![cfg(1, 200, 100, true), cfg(2, 100, 100, true)],
    );
    n.event(0, Event::Startup);
    n.event(1, Event::Startup);
    n.run_until(n.at(10_000));
    assert_eq!(n.masters(), vec![0]);
    n.event(
        0,
        Event::Switchover {
            hold: Duration::from_secs(60),
        },
    );
    n.run_until(n.at(11_000));
    assert_eq!(n.masters(), vec![1], "{:?}", n.log);
    n.run_until(n.at(30_000));
    assert_eq!(n.masters(), vec![1], "the higher priority held preemption");
    assert_eq!(n.worst_overlap, Duration::ZERO);
    // The hold over, preemption works again: the higher priority returns.
    n.run_until(n.at(80_000));
    assert_eq!(n.masters(), vec![0], "{:?}", n.log);
}

#[test]
fn tracking_lowers_priority_and_preempting_peer_takes_over() {
    let mut n = Net::new(
        Duration::from_millis(1),
        vec![cfg(1, 150, 100, true), cfg(2, 100, 100, true)],
    );
    n.event(0, Event::Startup);
    n.event(1, Event::Startup);
    n.run_until(n.at(10_000));
    assert_eq!(n.masters(), vec![0]);
    n.event(0, Event::SetPriority(50));
    n.run_until(n.at(20_000));
    assert_eq!(n.masters(), vec![1], "{:?}", n.log);
    n.event(0, Event::SetPriority(150));
    n.run_until(n.at(30_000));
    assert_eq!(n.masters(), vec![0], "{:?}", n.log);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Two routers with random priorities, intervals, preemption, start
    /// times and link delays: exactly one master once adverts flow, and
    /// two masters only while the later one's first advert is in flight.
    /// Killing the master (no priority 0) hands over within
    /// Master_Down_Interval plus the delay; a restart converges again.
    #[test]
    fn two_routers_converge_on_one_master(
        p0 in 1u8..=254, p1 in 1u8..=254,
        pre0: bool, pre1: bool,
        interval_cs in 5u16..=200,
        delay_ms in 0u64..20,
        start1_ms in 0u64..5000,
    ) {
        let mut n = Net::new(
            Duration::from_millis(delay_ms),
            vec![cfg(1, p0, interval_cs, pre0), cfg(2, p1, interval_cs, pre1)],
        );
        n.event(0, Event::Startup);
        n.run_until(n.at(start1_ms));
        n.event(1, Event::Startup);
        let settle = 5 * u64::from(interval_cs) * 10 + 1000;
        n.run_until(n.at(start1_ms + settle));
        prop_assert_eq!(n.masters().len(), 1, "{:?}", n.log);
        prop_assert!(n.worst_overlap <= n.delay, "{:?} {:?}", n.worst_overlap, n.log);
        let higher_preempts = if p0 > p1 { pre0 } else if p1 > p0 { pre1 } else { false };
        if higher_preempts {
            let want = if p0 > p1 { 0 } else { 1 };
            prop_assert_eq!(n.masters(), vec![want], "{:?}", n.log);
        }

        // kill -9 of the master.
        let m = n.masters()[0];
        let other = 1 - m;
        let killed = n.now;
        n.kill(m);
        let bound = Duration::from_millis(
            u64::from(master_down_cs(n.nodes[other].m.priority(), interval_cs)) * 10,
        ) + n.delay;
        n.run_until(killed + bound + Duration::from_millis(1));
        prop_assert_eq!(n.masters(), vec![other], "{:?}", n.log);
        let took = n.nodes[other].master_since.unwrap() - killed;
        prop_assert!(took <= bound, "{:?} > {:?}", took, bound);

        // It comes back: one master again; the preempting higher one wins.
        let back = n.now;
        n.event(m, Event::Startup);
        n.run_until(back + Duration::from_millis(settle));
        prop_assert_eq!(n.masters().len(), 1, "{:?}", n.log);
        prop_assert!(n.worst_overlap <= n.delay);
        let p_m = n.nodes[m].m.priority();
        let p_o = n.nodes[other].m.priority();
        let m_pre = n.nodes[m].m.config().preempt;
        if p_m > p_o && m_pre {
            prop_assert_eq!(n.masters(), vec![m]);
        } else if p_m < p_o || !m_pre {
            prop_assert_eq!(n.masters(), vec![other]);
        }

        // Clean shutdown of the master: the other takes over within skew
        // (plus delay), long before Master_Down_Interval.
        let m = n.masters()[0];
        let other = 1 - m;
        let t = n.now;
        n.event(m, Event::Shutdown);
        n.nodes[m].alive = false;
        let skew = Duration::from_millis(
            u64::from(skew_cs(n.nodes[other].m.priority(), interval_cs)) * 10,
        );
        n.run_until(t + skew + n.delay + Duration::from_millis(1));
        prop_assert_eq!(n.masters(), vec![other], "{:?}", n.log);
    }
}
