//! SA lifetimes (RFC 7296 §2.8): when IKE and child SAs are rekeyed and
//! when they expire, the retry after a rekey collision (§2.8.1), and the
//! timer that turns a due deadline into a queued exchange.
//!
//! Rekey and hard-expiry times come from [`IkeConfig`] (`ike_rekey_time`,
//! `ike_life_time`, `child_rekey_time`, `child_life_time`); None means
//! never.

use super::table::{IkeSa, Task};
use super::Ike;
use crate::config::IkeConfig;
use crate::crypto;
use crate::error::Result;
use std::time::{Duration, Instant};

/// `d` shortened by a random part of `percent` % of it (0..=50).
fn jittered(d: Duration, percent: u8) -> Duration {
    let pct = u32::from(percent.min(50));
    if pct == 0 {
        return d;
    }
    let mut b = [0u8; 4];
    if crypto::random(&mut b).is_err() {
        return d;
    }
    let r = f64::from(u32::from_be_bytes(b)) / f64::from(u32::MAX);
    d.saturating_sub(d.mul_f64(f64::from(pct) / 100.0 * r))
}

/// (rekey at, expire at) of an IKE SA established or rekeyed at `now`.
pub(super) fn ike_deadlines(cfg: &IkeConfig, now: Instant) -> (Option<Instant>, Option<Instant>) {
    (
        cfg.ike_rekey_time
            .map(|d| now + jittered(d, cfg.rekey_jitter_percent)),
        cfg.ike_life_time.map(|d| now + d),
    )
}

/// (rekey at, expire at) of a child SA installed at `now`.
pub(super) fn child_deadlines(cfg: &IkeConfig, now: Instant) -> (Option<Instant>, Option<Instant>) {
    (
        cfg.child_rekey_time
            .map(|d| now + jittered(d, cfg.rekey_jitter_percent)),
        cfg.child_life_time.map(|d| now + d),
    )
}

/// Random 1–4 s delay before retrying a rekey that collided.
fn retry_jitter() -> Result<Duration> {
    let mut b = [0u8; 2];
    crypto::random(&mut b)?;
    Ok(Duration::from_millis(
        1000 + u64::from(u16::from_be_bytes(b)) % 3000,
    ))
}

/// The rekey and expiry deadlines of an established IKE SA and its
/// children, for [`Ike::next_timeout`].
pub(super) fn deadlines(sa: &IkeSa) -> impl Iterator<Item = Instant> + '_ {
    let own = sa.rekey_at.into_iter().chain(sa.expire_at);
    let children = sa
        .children
        .iter()
        .flat_map(|c| c.rekey_at.into_iter().chain(c.expire_at));
    own.chain(children)
}

/// The exchanges whose deadline passed: an expired SA is deleted, one
/// due for rekeying is rekeyed. Each deadline fires once.
pub(super) fn due(sa: &mut IkeSa, now: Instant) -> Vec<Task> {
    let mut tasks = Vec::new();
    if sa.rekey_at.is_some_and(|r| now >= r) {
        sa.rekey_at = None;
        tasks.push(Task::RekeyIke);
    }
    if sa.expire_at.is_some_and(|r| now >= r) {
        sa.expire_at = None;
        tasks.push(Task::DeleteIke);
    }
    for c in sa.children.iter_mut() {
        if c.expire_at.is_some_and(|r| now >= r) {
            c.expire_at = None;
            c.rekey_at = None;
            tasks.push(Task::DeleteChild(c.spi_in));
        } else if c.rekey_at.is_some_and(|r| now >= r) {
            c.rekey_at = None;
            tasks.push(Task::RekeyChild(c.spi_in));
        }
    }
    tasks
}

impl Ike {
    /// Both ends rekeyed child `spi_in` at once and the peer refused ours
    /// (TEMPORARY_FAILURE): try again after a random delay.
    pub(super) fn rekey_collided(&mut self, idx: usize, spi_in: u32, now: Instant) -> Result<()> {
        let at = now + retry_jitter()?;
        if let Some(c) = self.sas[idx]
            .children
            .iter_mut()
            .find(|c| c.spi_in == spi_in)
        {
            c.rekey_at = Some(at);
        }
        Ok(())
    }

    /// Same for a colliding IKE rekey.
    pub(super) fn ike_rekey_collided(&mut self, idx: usize, now: Instant) -> Result<()> {
        self.sas[idx].rekey_at = Some(now + retry_jitter()?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_only_shortens_within_its_percent() {
        let d = Duration::from_secs(3600);
        assert_eq!(jittered(d, 0), d);
        for _ in 0..100 {
            let j = jittered(d, 10);
            assert!(j <= d && j >= Duration::from_secs(3240), "{j:?}");
        }
    }
}
