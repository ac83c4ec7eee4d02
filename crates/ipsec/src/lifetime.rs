//! SA lifetimes (RFC 4301 §4.4.2.1): byte, packet and time limits, each with
//! a soft limit (tell the key manager to rekey) and a hard limit (the SA
//! refuses further traffic).
//!
//! Counters are relaxed atomics: several workers add to them and nothing is
//! ordered by them; an SA may overshoot a limit by the packets of the batches
//! in flight when it is crossed, which is the usual tolerance of software
//! IPsec stacks.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::EspError;

/// Limits of one SA; 0 means "no limit".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lifetime {
    pub soft_bytes: u64,
    pub hard_bytes: u64,
    pub soft_packets: u64,
    pub hard_packets: u64,
    pub soft_seconds: u64,
    pub hard_seconds: u64,
}

/// Something the key manager must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifetimeEvent {
    /// A soft limit was crossed: start a rekey. Reported once per SA.
    Soft,
    /// A hard limit was crossed: the SA now refuses traffic. Reported once.
    Hard,
}

/// Live counters of one SA.
#[derive(Debug)]
pub struct LifetimeState {
    limits: Lifetime,
    created: Instant,
    bytes: AtomicU64,
    packets: AtomicU64,
    soft_fired: AtomicBool,
    hard_fired: AtomicBool,
    /// Event not yet collected by [`LifetimeState::take_event`]: 0 none,
    /// 1 soft, 2 hard.
    pending: AtomicU64,
}

#[inline]
fn over(limit: u64, value: u64) -> bool {
    limit != 0 && value >= limit
}

impl LifetimeState {
    pub fn new(limits: Lifetime) -> Self {
        Self::with_start(limits, Instant::now())
    }

    /// As [`LifetimeState::new`] with an explicit creation time (tests).
    pub fn with_start(limits: Lifetime, created: Instant) -> Self {
        LifetimeState {
            limits,
            created,
            bytes: AtomicU64::new(0),
            packets: AtomicU64::new(0),
            soft_fired: AtomicBool::new(false),
            hard_fired: AtomicBool::new(false),
            pending: AtomicU64::new(0),
        }
    }

    pub fn limits(&self) -> &Lifetime {
        &self.limits
    }

    /// Bytes counted so far (inner packet bytes).
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }

    /// Packets counted so far.
    pub fn packets(&self) -> u64 {
        self.packets.load(Relaxed)
    }

    /// True once a hard limit was reached.
    pub fn is_hard_expired(&self) -> bool {
        self.hard_fired.load(Relaxed)
    }

    /// Called before processing: refuses with `lifetime-hard` once a hard
    /// limit (including the time limit, checked against `now`) is reached.
    /// Returns the event if this call is the one that noticed it.
    #[inline]
    pub fn check(&self, now: Instant) -> Result<Option<LifetimeEvent>, EspError> {
        if self.hard_fired.load(Relaxed) {
            return Err(EspError::LifetimeHard);
        }
        if self.limits.hard_seconds == 0 && self.limits.soft_seconds == 0 {
            return Ok(None);
        }
        let age = now.saturating_duration_since(self.created);
        if self.limits.hard_seconds != 0 && age >= Duration::from_secs(self.limits.hard_seconds) {
            self.fire_hard();
            return Err(EspError::LifetimeHard);
        }
        if self.limits.soft_seconds != 0 && age >= Duration::from_secs(self.limits.soft_seconds) {
            return Ok(self.fire_soft());
        }
        Ok(None)
    }

    /// [`LifetimeState::check`] at the current time; reads the clock only
    /// when the SA has a time limit.
    #[inline]
    pub fn check_now(&self) -> Result<Option<LifetimeEvent>, EspError> {
        if self.limits.hard_seconds == 0 && self.limits.soft_seconds == 0 {
            if self.hard_fired.load(Relaxed) {
                return Err(EspError::LifetimeHard);
            }
            return Ok(None);
        }
        self.check(Instant::now())
    }

    /// Adds processed traffic. Returns the soft or hard event exactly once,
    /// to the caller whose traffic crossed the limit.
    #[inline]
    pub fn account(&self, packets: u64, bytes: u64) -> Option<LifetimeEvent> {
        let p = self
            .packets
            .fetch_add(packets, Relaxed)
            .saturating_add(packets);
        let b = self.bytes.fetch_add(bytes, Relaxed).saturating_add(bytes);
        let l = &self.limits;
        if over(l.hard_packets, p) || over(l.hard_bytes, b) {
            if let Some(e) = self.fire_hard() {
                return Some(e);
            }
        }
        // Nothing is soft after hard: batches in flight when the hard
        // limit was crossed must not ask for a rekey of a dead SA.
        if self.hard_fired.load(Relaxed) {
            return None;
        }
        if over(l.soft_packets, p) || over(l.soft_bytes, b) {
            return self.fire_soft();
        }
        None
    }

    /// Marks the SA hard-expired: it refuses all further traffic.
    pub fn expire(&self) -> Option<LifetimeEvent> {
        self.fire_hard()
    }

    /// Queues a hard event for the key manager without refusing traffic
    /// (sequence exhaustion: packets already numbered may still leave).
    pub fn raise_hard(&self) {
        self.pending.store(2, Relaxed);
    }

    /// Queues a soft event (once per SA, never after hard) for a limit
    /// the counters do not see: a sequence space nearly used up.
    pub fn raise_soft(&self) {
        if !self.hard_fired.load(Relaxed) {
            let _ = self.fire_soft();
        }
    }

    fn fire_soft(&self) -> Option<LifetimeEvent> {
        if self
            .soft_fired
            .compare_exchange(false, true, Relaxed, Relaxed)
            .is_ok()
        {
            let _ = self.pending.compare_exchange(0, 1, Relaxed, Relaxed);
            Some(LifetimeEvent::Soft)
        } else {
            None
        }
    }

    fn fire_hard(&self) -> Option<LifetimeEvent> {
        if self
            .hard_fired
            .compare_exchange(false, true, Relaxed, Relaxed)
            .is_ok()
        {
            self.pending.store(2, Relaxed);
            Some(LifetimeEvent::Hard)
        } else {
            None
        }
    }

    /// The most severe event not yet collected, for a control plane that
    /// polls instead of looking at per-call results. Each event is returned
    /// once (a hard event supersedes an uncollected soft one).
    pub fn take_event(&self) -> Option<LifetimeEvent> {
        match self.pending.swap(0, Relaxed) {
            1 => Some(LifetimeEvent::Soft),
            2 => Some(LifetimeEvent::Hard),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_then_hard_packets_once_each() {
        let l = LifetimeState::new(Lifetime {
            soft_packets: 3,
            hard_packets: 5,
            ..Default::default()
        });
        let now = Instant::now();
        assert_eq!(l.account(1, 100), None);
        assert_eq!(l.account(1, 100), None);
        assert_eq!(l.account(1, 100), Some(LifetimeEvent::Soft));
        assert_eq!(l.take_event(), Some(LifetimeEvent::Soft));
        assert_eq!(l.take_event(), None);
        assert_eq!(l.account(1, 100), None);
        assert!(l.check(now).is_ok());
        assert_eq!(l.account(1, 100), Some(LifetimeEvent::Hard));
        assert_eq!(l.check(now), Err(EspError::LifetimeHard));
        assert_eq!(l.account(1, 100), None);
        assert_eq!(l.take_event(), Some(LifetimeEvent::Hard));
        assert_eq!(l.packets(), 6);
        assert_eq!(l.bytes(), 600);
    }

    #[test]
    fn bytes_limits() {
        let l = LifetimeState::new(Lifetime {
            soft_bytes: 1000,
            hard_bytes: 2000,
            ..Default::default()
        });
        assert_eq!(l.account(1, 999), None);
        assert_eq!(l.account(1, 1), Some(LifetimeEvent::Soft));
        assert_eq!(l.account(10, 5000), Some(LifetimeEvent::Hard));
        assert!(l.is_hard_expired());
    }

    #[test]
    fn time_limits() {
        let start = Instant::now();
        let l = LifetimeState::with_start(
            Lifetime {
                soft_seconds: 10,
                hard_seconds: 20,
                ..Default::default()
            },
            start,
        );
        assert_eq!(l.check(start + Duration::from_secs(9)), Ok(None));
        assert_eq!(
            l.check(start + Duration::from_secs(10)),
            Ok(Some(LifetimeEvent::Soft))
        );
        assert_eq!(l.check(start + Duration::from_secs(11)), Ok(None));
        assert_eq!(
            l.check(start + Duration::from_secs(20)),
            Err(EspError::LifetimeHard)
        );
        assert_eq!(l.take_event(), Some(LifetimeEvent::Hard));
        assert_eq!(l.check(start), Err(EspError::LifetimeHard));
    }

    use proptest::prelude::*;

    proptest! {
        /// Whatever the batch sizes: the soft event comes once, at the
        /// first batch that reaches the soft limit (unless the same batch
        /// reaches the hard one), the hard event once, at the first batch
        /// reaching the hard limit, and nothing after it; the SA refuses
        /// traffic exactly from then on.
        #[test]
        fn soft_once_then_hard_once(
            hard in 1u64..1_000_000,
            batches in proptest::collection::vec(1u64..5_000, 1..400),
        ) {
            let soft = vecgate_config::ipsec::soft_of(Some(hard));
            prop_assert!(soft <= hard);
            prop_assert_eq!(u128::from(soft), u128::from(hard) * 85 / 100);
            let l = LifetimeState::new(Lifetime {
                soft_packets: soft,
                hard_packets: hard,
                ..Default::default()
            });
            let now = Instant::now();
            let (mut total, mut softs, mut hards) = (0u64, 0, 0);
            for b in batches {
                let before = total;
                total += b;
                let e = l.account(b, b * 100);
                let want = if before < hard && total >= hard {
                    Some(LifetimeEvent::Hard)
                } else if total < hard && soft != 0 && before < soft && total >= soft {
                    Some(LifetimeEvent::Soft)
                } else {
                    None
                };
                prop_assert_eq!(e, want, "{} + {} (soft {}, hard {})", before, b, soft, hard);
                softs += usize::from(e == Some(LifetimeEvent::Soft));
                hards += usize::from(e == Some(LifetimeEvent::Hard));
                prop_assert_eq!(l.check(now).is_err(), total >= hard);
            }
            prop_assert!(softs <= 1 && hards <= 1);
            prop_assert_eq!(hards == 1, total >= hard);
        }
    }

    #[test]
    fn unlimited_never_fires() {
        let l = LifetimeState::new(Lifetime::default());
        assert_eq!(l.account(u64::MAX / 2, u64::MAX / 2), None);
        assert_eq!(l.account(u64::MAX / 2, u64::MAX / 2), None);
        assert_eq!(l.check(Instant::now()), Ok(None));
    }
}
