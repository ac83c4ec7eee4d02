//! The rate bound of an outbound SA's reservations under a state sync.

use std::time::{Duration, Instant};

/// The most an outbound SA's ceiling may grow while a state sync's sender
/// bounds it ([`super::SaState::set_max_pps`]): a token bucket of
/// [`BUCKET_CAPACITY`] numbers refilled at that rate, starting empty (so a
/// restart adds no burst). Over any `t` seconds the ceiling grows by at
/// most capacity + rate × t, which is what lets a standby bound what a
/// sender it no longer hears may have sent (`vecgate_ha`'s takeover
/// floor). Checked once per reservation block, by the ticker, never per
/// packet.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    tokens: u64,
    at: Instant,
}

/// The bucket's capacity: one outbound reservation at its largest
/// (`Planner::outbound`'s max block).
pub const BUCKET_CAPACITY: u64 = 1 << 26;

impl Bucket {
    pub fn empty(now: Instant) -> Self {
        Bucket { tokens: 0, at: now }
    }

    /// Refills at `rate` per second up to [`BUCKET_CAPACITY`]; whole
    /// tokens only, the remainder of a millisecond is kept for the next
    /// call (`at` moves only by what was credited).
    pub fn refill(&mut self, now: Instant, rate: u64) {
        let ms = now.saturating_duration_since(self.at).as_millis();
        let add = (ms.saturating_mul(u128::from(rate)) / 1000).min(u128::from(BUCKET_CAPACITY));
        if add > 0 {
            self.tokens = (self.tokens.saturating_add(add as u64)).min(BUCKET_CAPACITY);
            self.at += Duration::from_millis(ms as u64);
        }
    }

    /// The ceiling to reserve: `want` if the bucket holds `want - ceiling`
    /// tokens, else as far as it holds (`None`: not past `ceiling`, wait).
    pub fn grant(&mut self, ceiling: u64, want: u64) -> Option<u64> {
        let to = want.min(ceiling.saturating_add(self.tokens));
        (to > ceiling).then_some(to)
    }

    /// `n` numbers were reserved.
    pub fn spend(&mut self, n: u64) {
        self.tokens = self.tokens.saturating_sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Refill is capped and whole; grant never exceeds the tokens; an
    /// empty bucket grants nothing.
    #[test]
    fn bucket_refill_grant_spend() {
        let t0 = Instant::now();
        let mut b = Bucket::empty(t0);
        assert_eq!(b.grant(10, 1_000), None, "starts empty");
        b.refill(t0 + Duration::from_millis(20), 1_000);
        assert_eq!(b.grant(10, 1_000), Some(30), "20 ms at 1000/s");
        b.spend(20);
        assert_eq!(b.grant(30, 1_000), None);
        b.refill(t0 + Duration::from_secs(1_000_000), u64::MAX);
        assert_eq!(b.grant(0, u64::MAX), Some(BUCKET_CAPACITY), "capped");
        assert_eq!(b.grant(u64::MAX - 5, u64::MAX), Some(u64::MAX));
    }
}
