//! What a state sync between gateways (an HA pair, a pool) asks of
//! [`SaState`]: where every SA stands ([`SaState::snapshot`]), and a
//! standby's moves: following the sender's sequence numbers, taking over
//! as the sender, adopting the old receiver's replay window.

use super::{lock, publish, write, Handle, NotDurable, SaState};
use crate::seqstore::{KeyId, SaIdentity};

/// One SA as a state sync carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaSnapshot {
    pub key: KeyId,
    pub spi: u32,
    pub outbound: bool,
    /// Outbound: the durable (reserved) ceiling, which is at least the
    /// published one. Inbound: the replay window's top.
    pub ceiling: u64,
    /// Outbound: the highest number handed out.
    pub used: u64,
    /// Inbound: the window's ring.
    pub window: Vec<u64>,
}

/// What [`SaState::take_over_outbound`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakenOver {
    pub sa: SaIdentity,
    /// The next number the SA sends (past the end of its space when
    /// retired).
    pub next: u64,
    /// No number of the space is provably unused by the old sender: the
    /// SA sends nothing until re-keyed (`seq-unsafe-after-takeover`).
    pub retired: bool,
}

impl SaState {
    /// Every live SA: outbound ceilings, inbound windows.
    pub fn snapshot(&self) -> Vec<SaSnapshot> {
        self.snapshot_where(|_| true)
    }

    /// The live SAs of tunnel `tunnel` (a pool carries one connection's).
    pub fn snapshot_of(&self, tunnel: &str) -> Vec<SaSnapshot> {
        self.snapshot_where(|sa| sa.tunnel == tunnel)
    }

    fn snapshot_where(&self, pick: impl Fn(&SaIdentity) -> bool) -> Vec<SaSnapshot> {
        let entries = self.entries();
        entries
            .iter()
            .filter(|(_, e)| e.handle.alive() && pick(&e.sa))
            .map(|(key, e)| match &e.handle {
                Handle::Out(c) => SaSnapshot {
                    key: *key,
                    spi: e.sa.spi,
                    outbound: true,
                    ceiling: e.durable.max(c.ceiling()),
                    used: c.used(),
                    window: Vec::new(),
                },
                Handle::In(w, _) => {
                    let g = lock(w);
                    SaSnapshot {
                        key: *key,
                        spi: e.sa.spi,
                        outbound: false,
                        ceiling: g.top(),
                        used: 0,
                        window: if g.enabled() {
                            g.ring().to_vec()
                        } else {
                            Vec::new()
                        },
                    }
                }
            })
            .collect()
    }

    /// A standby follows the sender: outbound SA `key` will hand out
    /// nothing below `to` (the ticker reserves above it). Returns the SA
    /// and where it stood, if it moved.
    pub fn follow_outbound(&self, key: &KeyId, to: u64) -> Option<(SaIdentity, u64)> {
        let entries = self.entries();
        let e = entries.get(key)?;
        let Handle::Out(c) = &e.handle else {
            return None;
        };
        let before = c.next();
        c.skip_to(to);
        (c.next() > before).then(|| (e.sa.clone(), before))
    }

    /// Taking over as the sender: outbound SA `key` starts at `to` or
    /// above, its ceiling made durable and published now (before the
    /// caller moves the addresses), not at the ticker's next pass; `to`
    /// past the end of its space retires it ([`SeqCounter::retire`]: it
    /// sends nothing until re-keyed). `Ok(None)`: no such outbound SA.
    /// `Err`: the new ceiling (or the retirement) is not on disk; the SA
    /// sends nothing above its old durable ceiling (none at all when
    /// retired) and the ticker retries the write.
    pub fn take_over_outbound(
        &self,
        key: &KeyId,
        to: u64,
    ) -> Result<Option<TakenOver>, NotDurable> {
        let mut entries = self.entries();
        let Some(e) = entries.get_mut(key) else {
            return Ok(None);
        };
        let Handle::Out(c) = &e.handle else {
            return Ok(None);
        };
        let Ok(store) = &self.store else {
            return Ok(None);
        };
        let c = c.clone();
        if to > c.last() {
            // No number of the space is provably unused by the old
            // sender: none is sent, and the record says so (a restart
            // resumes past the end, `seq-exhausted`, until a new key).
            c.retire();
            let last = c.last();
            if e.durable < last {
                write(store, &e.sa, key, last, None)?;
                e.durable = last;
                e.written = true;
            }
            return Ok(Some(TakenOver {
                sa: e.sa.clone(),
                next: to,
                retired: true,
            }));
        }
        c.skip_to(to);
        let next = c.next();
        if c.ceiling() < next {
            let target = next.saturating_add(e.planner.min_block).min(c.last());
            let d = write(store, &e.sa, key, target, None)?;
            e.durable = target;
            e.written = true;
            publish(&c, d);
        }
        Ok(Some(TakenOver {
            sa: e.sa.clone(),
            next,
            retired: false,
        }))
    }

    /// Taking over as the receiver: inbound SA `key` adopts the old
    /// receiver's replay window when it is ahead of ours (what the old one
    /// accepted after its last word is not known here: RFC 4303 §3.4.3
    /// replay checks resume from the synced edge). `Ok(None)`: no such
    /// SA, or ours is not behind. `Err`: `top` is not on disk, so the
    /// window is left as it was.
    pub fn adopt_window(
        &self,
        key: &KeyId,
        top: u64,
        ring: &[u64],
    ) -> Result<Option<(SaIdentity, u64)>, NotDurable> {
        let entries = self.entries();
        let Some(e) = entries.get(key) else {
            return Ok(None);
        };
        let Handle::In(w, writer) = &e.handle else {
            return Ok(None);
        };
        let mut g = lock(w);
        if !g.enabled() || top <= g.top() {
            return Ok(None);
        }
        let ring = (ring.len() == g.ring().len()).then_some(ring);
        // Durable first: after a crash of ours, nothing up to `top` is
        // accepted again.
        writer.at_least(top)?;
        g.restore(top, ring);
        Ok(Some((e.sa.clone(), top)))
    }
}
