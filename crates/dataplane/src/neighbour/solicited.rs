//! The solicitations vecgate sent recently, shared by every worker: an ARP
//! reply or a solicited NA may create a neighbour entry only if it answers
//! one of them (RFC 4861 §7.2.5: an NA for which there is no entry is
//! discarded; RFC 826's merge rule: a reply nobody asked for only refreshes
//! an entry that exists). The request goes out from the worker whose
//! packet needed the neighbour, the reply may be hashed to another worker,
//! so the set is shared.
//!
//! Fixed size and lock-free: `SLOTS` atomics, each `tag << 32 | time`,
//! two candidate slots per (port, address). Recording is a store (the
//! older of the two slots is overwritten), checking two loads; nothing is
//! allocated or locked, and both happen per solicitation or reply, never
//! per data packet. A lost record (overwritten by another solicitation)
//! costs one retransmission, never a wrong entry: a check matches only
//! the 32-bit tag of the exact key. Records are made only by our own
//! solicitations, which the per-port neighbour queue bounds (a tenant
//! cannot push another's records out faster than it can make vecgate
//! solicit).

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Slots (a power of two): 64 KiB.
pub const SLOTS: usize = 8192;

/// How long after the last solicitation an answer is accepted: beyond
/// RFC 4861's RETRANS_TIMER (1 s) between probes, with slack for a loaded
/// peer.
pub const WINDOW_MS: u32 = 3_000;

/// See the module documentation.
pub struct Solicited {
    slots: Box<[AtomicU64]>,
    epoch: Instant,
}

impl Default for Solicited {
    fn default() -> Self {
        Solicited {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            epoch: Instant::now(),
        }
    }
}

impl Solicited {
    /// The set's clock, in milliseconds (one clock for every worker: the
    /// workers' own clocks start at different times).
    pub fn now(&self) -> u32 {
        self.epoch.elapsed().as_millis() as u32
    }

    /// The two slots of `key` and its tag (never 0, so an empty slot never
    /// matches).
    fn place(&self, port: u16, ip: IpAddr) -> (usize, usize, u64) {
        let (family, bits) = match ip {
            IpAddr::V4(a) => (4u64, u128::from(u32::from(a))),
            IpAddr::V6(a) => (6u64, u128::from(a)),
        };
        let h = mix(bits as u64 ^ mix((bits >> 64) as u64 ^ mix(family << 16 | u64::from(port))));
        let i = (h as usize) & (SLOTS - 1);
        let tag = ((h >> 32) as u32 | 1) as u64;
        (i, i ^ 1, tag)
    }

    /// We just sent an ARP request / NS for `ip` on `port`.
    pub fn record(&self, port: u16, ip: IpAddr) {
        self.record_at(port, ip, self.now());
    }

    /// Whether `ip` on `port` was solicited within [`WINDOW_MS`].
    pub fn contains(&self, port: u16, ip: IpAddr) -> bool {
        self.contains_at(port, ip, self.now())
    }

    /// [`Solicited::record`] at time `now` (ms on the set's clock).
    pub fn record_at(&self, port: u16, ip: IpAddr, now: u32) {
        let (a, b, tag) = self.place(port, ip);
        let new = tag << 32 | u64::from(now);
        let va = self.slots[a].load(Ordering::Relaxed);
        let vb = self.slots[b].load(Ordering::Relaxed);
        // Our own slot if it holds the key, else the emptier / older one.
        let age = |v: u64| {
            if v == 0 {
                u32::MAX
            } else {
                now.wrapping_sub(v as u32)
            }
        };
        let slot = if va >> 32 == tag {
            a
        } else if vb >> 32 == tag || age(vb) > age(va) {
            b
        } else {
            a
        };
        self.slots[slot].store(new, Ordering::Relaxed);
    }

    /// [`Solicited::contains`] at time `now`.
    pub fn contains_at(&self, port: u16, ip: IpAddr, now: u32) -> bool {
        let (a, b, tag) = self.place(port, ip);
        [a, b].iter().any(|&i| {
            let v = self.slots[i].load(Ordering::Relaxed);
            v >> 32 == tag && now.wrapping_sub(v as u32) <= WINDOW_MS
        })
    }
}

/// splitmix64's finalizer: every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_recorded_solicitation_is_found_within_its_window_only() {
        let s = Solicited::default();
        let a = ip("10.1.0.7");
        assert!(!s.contains_at(0, a, 5));
        s.record_at(0, a, 10);
        assert!(s.contains_at(0, a, 10));
        assert!(s.contains_at(0, a, 10 + WINDOW_MS));
        assert!(!s.contains_at(0, a, 11 + WINDOW_MS), "expired");
        // The key is (port, address): another port or address is not it.
        assert!(!s.contains_at(1, a, 10));
        assert!(!s.contains_at(0, ip("10.1.0.8"), 10));
        assert!(!s.contains_at(0, ip("::ffff:10.1.0.7"), 10));
        // A retransmission renews it.
        s.record_at(0, a, 2_000);
        assert!(s.contains_at(0, a, 4_500));
    }

    #[test]
    fn the_clock_wraps_without_a_false_match() {
        let s = Solicited::default();
        let a = ip("2001:db8::9");
        s.record_at(3, a, u32::MAX - 10);
        assert!(s.contains_at(3, a, 100));
        assert!(!s.contains_at(3, a, WINDOW_MS + 100));
    }

    #[test]
    fn unrecorded_addresses_never_match_however_many_are_recorded() {
        // 4 times as many solicitations as slots: old ones may be lost,
        // but an address never solicited is never found.
        let s = Solicited::default();
        for i in 0..(4 * SLOTS as u32) {
            s.record_at(
                0,
                IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i)),
                7,
            );
        }
        let stranger = (0..100_000u32)
            .filter(|i| {
                s.contains_at(
                    0,
                    IpAddr::from(std::net::Ipv4Addr::from(0x0b00_0000 + i)),
                    7,
                )
            })
            .count();
        assert_eq!(stranger, 0);
        // The most recent ones are all there.
        let recent = (4 * SLOTS as u32 - 200..4 * SLOTS as u32)
            .filter(|&i| {
                s.contains_at(
                    0,
                    IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i)),
                    7,
                )
            })
            .count();
        assert!(recent >= 190, "{recent} of the last 200 kept");
    }

    #[test]
    fn another_thread_sees_the_record() {
        let s = Arc::new(Solicited::default());
        let t = s.clone();
        std::thread::spawn(move || t.record(1, ip("10.2.0.9")))
            .join()
            .unwrap();
        assert!(s.contains(1, ip("10.2.0.9")));
        assert!(!s.contains(0, ip("10.2.0.9")));
    }
}
