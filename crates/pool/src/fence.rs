//! Fencing: a member stops serving its connections before etcd can
//! expire its lease, so no two members ever serve one connection.
//!
//! **The deadline.** A keepalive sent at `t` and answered renews the
//! lease at some instant after `t` (etcd's leader received it then), so
//! the lease lives at least until `t + TTL` on any clock running at our
//! rate. The member serves until the latest such `t + TTL` on its own
//! monotonic clock ([`Fence::serving`]) and stops at once after it:
//! addresses released, no ESP or IKE sent. A new owner acts only after it
//! has seen the lease gone, which is later. A member paused (`SIGSTOP`)
//! past its deadline finds, on waking, a monotonic clock past it: the
//! caller checks [`Gate::open`] before every send, so the first thing it
//! does is stop.
//!
//! **Quorum loss is not a reason to stop.** When etcd answers but has no
//! leader, nobody can expire a lease: etcd's lessor runs on the leader,
//! and a newly elected leader extends every lease by its full TTL, so a
//! lease expires only under a leader that has reigned for a whole TTL.
//! While keepalives fail, the driver probes every etcd member
//! ([`Probe`]). A probe *proves* no leader exists when some member
//! answered, none named a leader, and too few members timed out to form a
//! majority (the rest refused the connection: not running). If proofs
//! start before the deadline and follow each other within TTL/2, no
//! leader can have reigned a whole TTL since the last renewal, and the
//! member keeps serving past the deadline ([`Fence::probe`]), until the
//! last proof + TTL/2. A probe that proves nothing (an etcd member slow
//! to answer, or a leader back) extends nothing and breaks nothing: the
//! hold lapses by itself TTL/2 after the last proof unless a keepalive
//! is answered first. That is still safe when a leader is back: it was
//! elected after the last proof, and a leader expires a lease only after
//! reigning a whole TTL (promotion extends every lease by its TTL).
//!
//! **Fenced is not lost.** Past the deadline without proof the member
//! stops serving, but keeps what it holds: a keepalive answered later
//! with a TTL above 0 shows the lease alive, and then nobody can have
//! taken its connections (a new owner waits for the lease to be gone),
//! so it serves again from the answered send + TTL. This is what a
//! member sees when etcd's members come back after a quorum loss: they
//! answer nothing until they have elected a leader, so the probes prove
//! nothing for a while and the hold lapses. A lease that etcd says is
//! gone (a keepalive answered with TTL 0, or [`Fence::give_up`]) is
//! final ([`Fence::lost`]): the member re-joins with a new lease and its
//! connections have moved or will.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one round of probes of every etcd member found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probe {
    /// Members in the etcd cluster.
    pub cluster: usize,
    /// Members that answered.
    pub answered: usize,
    /// Of those, how many named a leader.
    pub with_leader: usize,
    /// Members that did not answer in time (may be alive elsewhere).
    pub timed_out: usize,
}

impl Probe {
    /// Whether this round proves that no etcd leader exists now (module
    /// docs): some member answered, none named a leader, and the members
    /// that did not answer cannot form a majority.
    pub fn proves_no_leader(&self) -> bool {
        let majority = self.cluster / 2 + 1;
        self.answered >= 1 && self.with_leader == 0 && self.timed_out < majority
    }
}

/// The member's fence: fed keepalive answers and probes, asked whether
/// it may serve.
#[derive(Clone, Debug)]
pub struct Fence {
    ttl: Duration,
    /// Serve until then (last answered keepalive's send time + TTL).
    deadline: Option<Instant>,
    /// The last probe that proved no leader, when the chain of proofs
    /// started before the deadline and has had no gap over TTL/2.
    proven: Option<Instant>,
    lost: bool,
}

impl Fence {
    /// A fence for a lease of `ttl` (not yet granted: not serving).
    pub fn new(ttl: Duration) -> Fence {
        Fence {
            ttl,
            deadline: None,
            proven: None,
            lost: false,
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A lease grant or keepalive sent at `sent` was answered with
    /// `ttl_secs` left (etcd's answer; 0 or less: the lease is gone).
    pub fn answered(&mut self, sent: Instant, ttl_secs: i64) {
        if self.lost {
            return;
        }
        if ttl_secs <= 0 {
            self.lost = true;
            self.deadline = None;
            return;
        }
        let granted = Duration::from_secs(ttl_secs.unsigned_abs()).min(self.ttl);
        let d = sent + granted;
        self.deadline = Some(self.deadline.map_or(d, |x| x.max(d)));
        self.proven = None;
    }

    /// A round of probes finished at `now`. Only a proof counts; any
    /// other round changes nothing (module docs).
    pub fn probe(&mut self, p: Probe, now: Instant) {
        if self.lost || !p.proves_no_leader() {
            return;
        }
        let chained = match (self.proven, self.deadline) {
            // Continues a chain that has had no gap over TTL/2.
            (Some(last), _) => now.saturating_duration_since(last) <= self.ttl / 2,
            // Starts one: only while still within the deadline.
            (None, Some(d)) => now < d,
            (None, None) => false,
        };
        self.proven = if chained { Some(now) } else { None };
    }

    /// Whether the member may serve at `now`: before the deadline, or
    /// within TTL/2 of the last proof of a chain. Past both it is fenced
    /// until a keepalive is answered (module docs).
    pub fn serving(&mut self, now: Instant) -> bool {
        if self.lost {
            return false;
        }
        let Some(d) = self.deadline else {
            return false;
        };
        if now < d {
            return true;
        }
        if self
            .proven
            .is_some_and(|p| now.saturating_duration_since(p) < self.ttl / 2)
        {
            return true;
        }
        // The chain has lapsed: a later proof cannot restart it.
        self.proven = None;
        false
    }

    /// Whether serving continues only because quorum is lost.
    pub fn holding(&self, now: Instant) -> bool {
        !self.lost && self.deadline.is_some_and(|d| now >= d) && self.proven.is_some()
    }

    /// The lease is gone for good: re-join with a new one.
    pub fn lost(&self) -> bool {
        self.lost
    }

    /// When serving ends unless renewed (or proven).
    pub fn deadline(&self) -> Option<Instant> {
        if self.lost {
            return None;
        }
        let proof = self.proven.map(|p| p + self.ttl / 2);
        match (self.deadline, proof) {
            (Some(d), Some(p)) => Some(d.max(p)),
            (d, _) => d,
        }
    }

    /// Marks the loss final (the member gave the lease up).
    pub fn give_up(&mut self) {
        self.lost = true;
        self.deadline = None;
        self.proven = None;
    }
}

/// The fence's deadline where senders read it: one atomic, nanoseconds
/// after an origin instant (0: closed). Threads that send (dataplane
/// workers once per vector, the IKE thread before each message) hold a
/// clone and check [`Gate::open`]; the pool driver moves it.
#[derive(Clone, Debug)]
pub struct Gate {
    origin: Instant,
    until_ns: Arc<AtomicU64>,
}

impl Gate {
    /// A closed gate.
    pub fn new(origin: Instant) -> Gate {
        Gate {
            origin,
            until_ns: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Opens the gate until `deadline` (`None`: closed).
    pub fn set(&self, deadline: Option<Instant>) {
        let ns = deadline.map_or(0, |d| {
            let n = d.saturating_duration_since(self.origin).as_nanos();
            u64::try_from(n).unwrap_or(u64::MAX).max(1)
        });
        self.until_ns.store(ns, Ordering::Release);
    }

    /// Whether sending is allowed at `now`.
    pub fn open(&self, now: Instant) -> bool {
        let until = self.until_ns.load(Ordering::Acquire);
        let at = now.saturating_duration_since(self.origin).as_nanos();
        until != 0 && at < u128::from(until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(3);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn deadline_is_last_answered_send_plus_ttl() {
        let t0 = Instant::now();
        let mut f = Fence::new(TTL);
        assert!(!f.serving(t0), "not before the grant");
        f.answered(t0, 3);
        assert!(f.serving(t0 + ms(2999)));
        // An answer to an earlier send never moves the deadline back.
        f.answered(t0 + ms(500), 3);
        f.answered(t0 + ms(100), 3);
        assert_eq!(f.deadline(), Some(t0 + ms(3500)));
        // etcd granting less than asked: its TTL wins.
        f.answered(t0 + ms(600), 1);
        assert_eq!(f.deadline(), Some(t0 + ms(3500)));
        assert!(!f.serving(t0 + ms(3500)));
        assert!(!f.lost(), "fenced, not lost");
        assert_eq!(f.deadline(), Some(t0 + ms(3500)));
        // An answer to a send from before it stopped does not reopen it.
        f.answered(t0 + ms(400), 3);
        assert!(!f.serving(t0 + ms(3600)));
        // A keepalive answered with a TTL: the lease lives, serve again.
        f.answered(t0 + ms(4000), 3);
        assert!(f.serving(t0 + ms(4001)));
        assert!(!f.serving(t0 + ms(7000)));
        // etcd says the lease is gone: final.
        f.answered(t0 + ms(7100), 0);
        f.answered(t0 + ms(7200), 3);
        assert!(!f.serving(t0 + ms(7201)) && f.lost());
    }

    #[test]
    fn ttl_zero_is_gone() {
        let t0 = Instant::now();
        let mut f = Fence::new(TTL);
        f.answered(t0, 3);
        f.answered(t0 + ms(500), 0);
        assert!(!f.serving(t0 + ms(600)));
        assert!(f.lost());
    }

    /// A paused member: the clock moved past the deadline while it slept,
    /// and the first question it asks says stop.
    #[test]
    fn paused_past_ttl_is_fenced_on_waking() {
        let t0 = Instant::now();
        let mut f = Fence::new(TTL);
        f.answered(t0, 3);
        let g = Gate::new(t0);
        g.set(f.deadline());
        assert!(g.open(t0 + ms(2000)));
        let woke = t0 + ms(10_000);
        assert!(!g.open(woke));
        assert!(!f.serving(woke));
    }

    const NO_LEADER: Probe = Probe {
        cluster: 3,
        answered: 1,
        with_leader: 0,
        timed_out: 0,
    };

    #[test]
    fn probes_prove_only_what_they_can() {
        assert!(NO_LEADER.proves_no_leader());
        // Two members silent: they could be a majority with a leader.
        assert!(!Probe {
            timed_out: 2,
            ..NO_LEADER
        }
        .proves_no_leader());
        // One silent, one refused: no majority possible.
        assert!(Probe {
            timed_out: 1,
            ..NO_LEADER
        }
        .proves_no_leader());
        assert!(!Probe {
            with_leader: 1,
            ..NO_LEADER
        }
        .proves_no_leader());
        assert!(!Probe {
            answered: 0,
            ..NO_LEADER
        }
        .proves_no_leader());
    }

    #[test]
    fn quorum_loss_holds_while_proofs_chain() {
        let t0 = Instant::now();
        let mut f = Fence::new(TTL);
        f.answered(t0, 3);
        // Proofs every 500 ms from before the deadline: serving goes on.
        let mut t = t0 + ms(1000);
        while t < t0 + ms(20_000) {
            f.probe(NO_LEADER, t);
            assert!(f.serving(t + ms(10)), "{:?}", t - t0);
            t += ms(500);
        }
        assert!(f.holding(t0 + ms(19_000)));
        // Quorum returns: a renewal takes over.
        f.answered(t, 3);
        assert!(!f.holding(t + ms(10)));
        assert!(f.serving(t + ms(2900)));
        // A probe that proves nothing (a slow member, a leader back)
        // neither extends the hold nor cuts it short: it ends TTL/2 after
        // the last proof, and is final then.
        f.probe(NO_LEADER, t + ms(2000));
        let leader_back = Probe {
            with_leader: 1,
            ..NO_LEADER
        };
        let silent = Probe {
            answered: 0,
            timed_out: 1,
            ..NO_LEADER
        };
        f.probe(leader_back, t + ms(2500));
        f.probe(silent, t + ms(3000));
        assert!(f.serving(t + ms(3400)), "held until the last proof + TTL/2");
        assert_eq!(f.deadline(), Some(t + ms(3500)));
        f.probe(leader_back, t + ms(3450));
        assert!(!f.serving(t + ms(3500)));
        // A proof now does not restart a lapsed chain.
        f.probe(NO_LEADER, t + ms(3600));
        assert!(!f.serving(t + ms(3700)));
    }

    /// A chain with rounds in it that proved nothing goes on as long as
    /// the proofs themselves follow each other within TTL/2.
    #[test]
    fn inconclusive_rounds_do_not_break_a_chain() {
        let t0 = Instant::now();
        let mut f = Fence::new(TTL);
        f.answered(t0, 3);
        let silent = Probe {
            answered: 0,
            timed_out: 1,
            ..NO_LEADER
        };
        f.probe(NO_LEADER, t0 + ms(2500));
        f.probe(silent, t0 + ms(3000));
        f.probe(NO_LEADER, t0 + ms(3900));
        assert!(f.serving(t0 + ms(5300)));
        f.probe(silent, t0 + ms(5000));
        assert!(!f.serving(t0 + ms(5401)), "1.5 s after the last proof");
    }

    #[test]
    fn proofs_after_the_deadline_or_with_gaps_do_not_count() {
        let t0 = Instant::now();
        let mut f = Fence::new(TTL);
        f.answered(t0, 3);
        f.probe(NO_LEADER, t0 + ms(3100));
        assert!(!f.serving(t0 + ms(3200)), "chain started too late");
        assert!(!f.lost());

        let mut f = Fence::new(TTL);
        f.answered(t0, 3);
        f.probe(NO_LEADER, t0 + ms(2000));
        f.probe(NO_LEADER, t0 + ms(3600)); // gap of 1.6 s > TTL/2
        assert!(!f.serving(t0 + ms(3700)));
    }

    #[test]
    fn gate_closed_until_set() {
        let t0 = Instant::now();
        let g = Gate::new(t0);
        assert!(!g.open(t0));
        g.set(Some(t0 + ms(5)));
        assert!(g.open(t0 + ms(4)) && !g.open(t0 + ms(5)));
        g.set(None);
        assert!(!g.open(t0));
        // A deadline at the origin itself still opens nothing after it.
        g.set(Some(t0));
        assert!(!g.open(t0 + ms(1)));
    }
}
