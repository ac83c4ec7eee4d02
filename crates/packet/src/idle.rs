//! How a polling loop waits once its ports run dry.
//!
//! Sleeping in `poll(2)` the moment a burst came back empty makes every
//! frame that arrives next a wakeup: the sender's kernel path finds a
//! sleeper on the socket and wakes it (`sock_def_readable` →
//! `try_to_wake_up`, an inter-processor interrupt and two context
//! switches), and the woken worker takes a few frames and sleeps again.
//! Measured on a GRE flow over a 1500-byte underlay (one side-by-side run,
//! 2 vCPUs), those wakeups cost more than the gateway's own work: polling on
//! for 50 µs after the last packet — yielding the CPU between polls, so a
//! sender on the same CPU runs — took the flow from 1.8–2.0 to 3.0–3.1
//! Gbit/s and the path from 11–12 to 7 cycles/byte (docs/benchmarks.md).
//! An idle gateway still sleeps: the spin ends 50 µs after the last packet.

use std::time::{Duration, Instant};

/// Default of `[gateway] idle_spin_us`.
pub const DEFAULT_IDLE_SPIN_US: u32 = 50;
/// Largest `idle_spin_us` accepted (beyond it a worker is busy polling).
pub const MAX_IDLE_SPIN_US: u32 = 10_000;

/// Spin-then-sleep: after packets were seen, keep polling (yielding the
/// CPU between polls) for a while before sleeping.
#[derive(Clone, Copy, Debug)]
pub struct IdleSpin {
    spin: Duration,
    last: Instant,
}

impl IdleSpin {
    /// Polls on for `us` microseconds after the last packet; 0 sleeps at once.
    pub fn new(us: u32) -> Self {
        IdleSpin {
            spin: Duration::from_micros(u64::from(us.min(MAX_IDLE_SPIN_US))),
            last: Instant::now(),
        }
    }

    /// Packets were received now.
    #[inline]
    pub fn busy(&mut self) {
        if !self.spin.is_zero() {
            self.last = Instant::now();
        }
    }

    /// Nothing was received: whether to poll again at once (after giving
    /// the CPU to whatever else is runnable on it) rather than sleep.
    #[inline]
    pub fn keep_polling(&self) -> bool {
        if self.spin.is_zero() || self.last.elapsed() >= self.spin {
            return false;
        }
        std::thread::yield_now();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_only_within_the_window_after_packets() {
        let mut s = IdleSpin::new(20_000);
        s.busy();
        assert!(s.keep_polling(), "just after a packet");
        std::thread::sleep(Duration::from_millis(15));
        // Capped at MAX_IDLE_SPIN_US (10 ms): the window is over.
        assert!(!s.keep_polling());
        let off = IdleSpin::new(0);
        assert!(!off.keep_polling(), "0 never spins");
    }
}
