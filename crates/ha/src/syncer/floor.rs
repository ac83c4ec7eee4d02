//! Where a new sender starts: the takeover floor, what the standby keeps
//! of the sender's word about each SA, and the SA state it moves.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tracing::{error, info};
use vecgate_ipsec::sastate::{NotDurable, SaSnapshot, TakenOver, BUCKET_CAPACITY};
use vecgate_ipsec::seqstore::{KeyId, SaIdentity};
use vecgate_ipsec::SaState;

use crate::sync::Dir;

/// One outbound reservation at its largest (`Planner::outbound`'s max
/// block), and the capacity of the sender's per-SA token bucket
/// ([`vecgate_ipsec::sastate::Bucket`]).
pub const JUMP_MARGIN: u64 = BUCKET_CAPACITY;

/// Slack added to the time since the sender sent a ceiling: clock skew
/// between the gateways and the message's latency.
pub const TAKEOVER_SLACK: Duration = Duration::from_secs(1);

/// The first outbound number the new sender may use for an SA whose last
/// synced ceiling is `ceiling`, sent `since` ago by a sender whose
/// ceilings grow by at most [`JUMP_MARGIN`] + `max_pps` × t over any t
/// seconds (its token bucket): ceiling + 2 × [`JUMP_MARGIN`] + `max_pps` ×
/// (`since` + [`TAKEOVER_SLACK`]) + 1. One margin is the bucket, the other
/// one lost message. Saturates: a result past the SA's space (2^32 - 1
/// without ESN) means no number is provably unused, and the SA is retired
/// instead (RFC 4303 §3.3.3: never cycle; RFC 4106 §8: never repeat a
/// nonce under one key).
pub fn takeover_floor(ceiling: u64, max_pps: u64, since: Duration) -> u64 {
    let ms = since.saturating_add(TAKEOVER_SLACK).as_millis();
    // Rounded up: never below what the sender could have reserved.
    let by_rate = u128::from(max_pps).saturating_mul(ms).div_ceil(1000);
    let to = u128::from(ceiling)
        .saturating_add(2 * u128::from(JUMP_MARGIN))
        .saturating_add(by_rate)
        .saturating_add(1);
    u64::try_from(to).unwrap_or(u64::MAX)
}

/// The two clocks a sync reads: monotonic for intervals and ages, the
/// wall clock (ms since the Unix epoch) for the send times that cross
/// between the gateways. Drivers read them; the sync's logic only takes
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub at: Instant,
    pub wall_ms: u64,
}

impl Now {
    /// The clocks as they read now.
    pub fn read() -> Now {
        Now {
            at: Instant::now(),
            wall_ms: std::time::SystemTime::now()
                .duration_since(std::time::SystemTime::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        }
    }

    /// `d` later on both clocks.
    pub fn after(self, d: Duration) -> Now {
        Now {
            at: self.at + d,
            wall_ms: self.wall_ms.saturating_add(d.as_millis() as u64),
        }
    }
}

/// The sender's last word about one SA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    pub dir: Dir,
    pub spi: u32,
    /// Outbound: its reserved ceiling. Inbound: its replay window's top.
    pub ceiling: u64,
    pub window: Vec<u64>,
    /// The send time of the message that carried `ceiling` (the sender's
    /// clock, ms), and when it arrived (ours).
    pub sent_ms: u64,
    pub arrived: Instant,
}

impl Word {
    /// How long ago the sender stood at `ceiling`: by its send time and
    /// our clock, or by our own monotonic clock since it arrived,
    /// whichever is longer (a sender's clock ahead of ours cannot shorten
    /// it below the latter).
    pub fn age(&self, now: Now) -> Duration {
        let by_clock = Duration::from_millis(now.wall_ms.saturating_sub(self.sent_ms));
        by_clock.max(now.at.saturating_duration_since(self.arrived))
    }
}

/// The SA state a sync reads and moves ([`SaState`]'s operations, so the
/// sync's logic runs against a stand-in in its tests).
pub trait SaBook {
    fn snapshot(&self) -> Vec<SaSnapshot>;
    fn follow_outbound(&self, key: &KeyId, to: u64) -> Option<(SaIdentity, u64)>;
    fn take_over_outbound(&self, key: &KeyId, to: u64) -> Result<Option<TakenOver>, NotDurable>;
    fn adopt_window(
        &self,
        key: &KeyId,
        top: u64,
        ring: &[u64],
    ) -> Result<Option<(SaIdentity, u64)>, NotDurable>;
    fn set_max_pps(&self, pps: u64);
}

impl SaBook for SaState {
    fn snapshot(&self) -> Vec<SaSnapshot> {
        SaState::snapshot(self)
    }
    fn follow_outbound(&self, key: &KeyId, to: u64) -> Option<(SaIdentity, u64)> {
        SaState::follow_outbound(self, key, to)
    }
    fn take_over_outbound(&self, key: &KeyId, to: u64) -> Result<Option<TakenOver>, NotDurable> {
        SaState::take_over_outbound(self, key, to)
    }
    fn adopt_window(
        &self,
        key: &KeyId,
        top: u64,
        ring: &[u64],
    ) -> Result<Option<(SaIdentity, u64)>, NotDurable> {
        SaState::adopt_window(self, key, top, ring)
    }
    fn set_max_pps(&self, pps: u64) {
        SaState::set_max_pps(self, pps);
    }
}

/// What taking over one SA did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Moved {
    /// Not ours (no such SA here), or ours was not behind.
    Nothing,
    /// Outbound: sends from `next`; inbound: the window's top is `next`.
    Moved { sa: SaIdentity, next: u64 },
    /// Outbound, retired: the SA sends nothing until re-keyed.
    Unsafe { sa: SaIdentity },
    /// The new state did not reach the disk: nothing beyond the old
    /// durable ceiling is used (the ticker retries).
    NotDurable,
}

/// The sender's last word about each SA it synced, by key, and its rate
/// bound: what a new sender needs to start each SA past what the old one
/// may have used. The sync keeps it; an IKE thread adopting synced child
/// SAs gets a copy with the takeover ([`super::Adoption`]), since those
/// SAs are attached only then.
#[derive(Clone, Debug, Default)]
pub struct Words {
    pub max_pps: u64,
    pub by_key: HashMap<KeyId, Word>,
}

impl Words {
    /// Takes SA `key` over at `now` as the new sender: outbound from
    /// [`takeover_floor`] (past its space: retired), inbound from the
    /// synced window. Logged either way.
    pub fn take_over(&self, key: &KeyId, book: &dyn SaBook, now: Now) -> Moved {
        let Some(w) = self.by_key.get(key) else {
            return Moved::Nothing;
        };
        let spi = format_args!("{:#010x}", w.spi);
        match w.dir {
            Dir::Out => {
                let age = w.age(now);
                let to = takeover_floor(w.ceiling, self.max_pps, age);
                let age_ms = age.as_millis() as u64;
                match book.take_over_outbound(key, to) {
                    Ok(Some(t)) if t.retired => {
                        error!(%spi, peer_ceiling = w.ceiling, age_ms,
                               "state sync: taking over {}: the old active may have used every sequence number left (its last ceiling is {age_ms} ms old, at up to {} packets/s); the SA sends nothing (seq-unsafe-after-takeover) until re-keyed: a static SA with a new key file on both gateways and the far end, an IKE child SA by its rekey", t.sa, self.max_pps);
                        Moved::Unsafe { sa: t.sa }
                    }
                    Ok(Some(t)) => {
                        info!(%spi, peer_ceiling = w.ceiling, age_ms, next = t.next,
                              "state sync: taking over {}: sends from {}, past the old active's ceiling", t.sa, t.next);
                        Moved::Moved {
                            sa: t.sa,
                            next: t.next,
                        }
                    }
                    Ok(None) => Moved::Nothing,
                    Err(e) => {
                        error!(%spi, "state sync: taking over {e}; it sends nothing above its old ceiling until the write succeeds");
                        Moved::NotDurable
                    }
                }
            }
            Dir::In => match book.adopt_window(key, w.ceiling, &w.window) {
                Ok(Some((sa, top))) => {
                    info!(%spi, top, "state sync: taking over {sa}: replay window from the old active");
                    Moved::Moved { sa, next: top }
                }
                Ok(None) => Moved::Nothing,
                Err(e) => {
                    error!(%spi, "state sync: adopting the old active's replay window: {e}");
                    Moved::NotDurable
                }
            },
        }
    }
}
