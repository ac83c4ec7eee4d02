//! Anti-replay window (RFC 4303 §3.4.3) with extended sequence numbers
//! (RFC 4303 Appendix A).
//!
//! The bitmap is a ring of 64-bit blocks as in RFC 6479: bit `seq mod N` says
//! whether `seq` was seen, with `N` a power of two at least one block larger
//! than the window, so advancing the right edge only zeroes whole blocks
//! (no shifting of the bitmap) and never clears a bit still inside the window.
//! It is allocated once, when the SA is created.
//!
//! The receive path is split in two: [`ReplayWindow::check`] before the
//! (expensive) ICV verification, to reject replays cheaply, and
//! [`ReplayWindow::update`] after it succeeded, because §3.4.3 says "the
//! receive window is updated only if the ICV verification succeeds".
//! `update` re-checks, so two workers that both passed `check` for the same
//! sequence number cannot both deliver it.
//!
//! Sharing across workers: the window lives in a `Mutex` in the inbound SA
//! and is locked once for the checks of a whole vector and once for its
//! updates (see `InboundSa::decrypt_batch`), not per packet. An atomic bitmap
//! would avoid the lock but needs a CAS loop on the right edge that races
//! with block clearing; with one lock per 256-packet vector the lock is
//! uncontended noise next to the crypto.

use crate::EspError;

/// Largest window accepted (bits); the bitmap is the next power of two above
/// window + 64.
pub const MAX_WINDOW: u32 = 1 << 16;

/// Window used only to infer ESN high bits when anti-replay is off: half the
/// 32-bit space, i.e. "the closest" epoch.
const ESN_INFER_WINDOW_OFF: u64 = 1 << 31;

/// Makes a new replay ceiling durable at once (returns whether it is): for
/// an authentic packet far above the ceiling (a peer that restarted and
/// jumped ahead), which would otherwise be dropped until the next block.
#[derive(Clone)]
pub struct PersistNow(pub std::sync::Arc<dyn Fn(u64) -> bool + Send + Sync>);

impl std::fmt::Debug for PersistNow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PersistNow")
    }
}

/// How far past an authentic packet above the ceiling [`PersistNow`]
/// moves it (the ticker takes over from there).
pub const JUMP_MARGIN: u64 = 256;

/// Anti-replay state of one inbound SA.
#[derive(Debug)]
pub struct ReplayWindow {
    /// Window size in packets (0 = anti-replay off).
    window: u64,
    /// Ring of blocks; length is a power of two (0 when off).
    blocks: Box<[u64]>,
    /// Highest authenticated sequence number (full 64 bits with ESN).
    top: u64,
    esn: bool,
    /// Nothing above is accepted ([`crate::seqstore`]: durable before it is
    /// raised); u64::MAX when the window's state is not persisted.
    ceiling: u64,
    /// Authentic packets refused at the ceiling (demand for the next block).
    waits: u64,
    /// The highest authentic sequence number refused at the ceiling: a
    /// sender that restarted jumps ahead, and the next ceiling must reach
    /// past the jump.
    wanted: u64,
    /// Writes a ceiling durably from the receive path (the packet waits
    /// for it rather than being dropped).
    persist: Option<PersistNow>,
}

impl ReplayWindow {
    /// A window of `window` packets (0 turns anti-replay off; sequence
    /// numbers are still tracked for ESN inference). `window` above
    /// [`MAX_WINDOW`] is [`EspError::BadConfig`].
    pub fn new(window: u32, esn: bool) -> Result<Self, EspError> {
        if window > MAX_WINDOW {
            return Err(EspError::BadConfig);
        }
        let blocks = if window == 0 {
            Vec::new()
        } else {
            let bits = (u64::from(window) + 64).next_power_of_two();
            vec![0u64; (bits / 64) as usize]
        };
        Ok(ReplayWindow {
            window: u64::from(window),
            blocks: blocks.into_boxed_slice(),
            top: 0,
            esn,
            ceiling: u64::MAX,
            waits: 0,
            wanted: 0,
            persist: None,
        })
    }

    /// Whether anti-replay is on (a window of 0 accepts replays anyway, so
    /// its state needs no persistence).
    pub fn enabled(&self) -> bool {
        self.window != 0
    }

    /// Highest sequence number that may be accepted now.
    pub fn ceiling(&self) -> u64 {
        self.ceiling
    }

    /// Moves the ceiling to `c` (never below the top: what was accepted
    /// stays accepted). Raising it is for after `c` is durable; lowering it
    /// is safe at any time (the durable one is still higher).
    pub fn set_ceiling(&mut self, c: u64) {
        self.ceiling = c.max(self.top);
    }

    /// Lets the receive path make a ceiling durable itself when an
    /// authentic packet is above it.
    pub fn set_persist(&mut self, p: Option<PersistNow>) {
        self.persist = p;
    }

    /// Authentic packets refused at the ceiling so far.
    pub fn waits(&self) -> u64 {
        self.waits
    }

    /// Where the next ceiling must start from: the top, or the highest
    /// authentic number refused above the ceiling.
    pub fn wanted(&self) -> u64 {
        self.top.max(self.wanted)
    }

    /// The bitmap ring, for an exact save at a clean stop.
    pub fn ring(&self) -> &[u64] {
        &self.blocks
    }

    /// Restores a saved state: top = `top`; with `ring` (same window size,
    /// saved at a clean stop) exactly as it was, otherwise every number up
    /// to `top` counts as seen (after a crash, `top` is the durable ceiling
    /// and what was accepted below it is unknown). The ceiling is left at
    /// `top` until the caller publishes a new durable one.
    pub fn restore(&mut self, top: u64, ring: Option<&[u64]>) {
        self.top = top;
        match ring {
            Some(r) if r.len() == self.blocks.len() => self.blocks.copy_from_slice(r),
            _ => self.blocks.fill(u64::MAX),
        }
        self.ceiling = top;
    }

    /// Configured window size.
    pub fn window(&self) -> u32 {
        self.window as u32
    }

    /// Highest sequence number accepted so far.
    pub fn top(&self) -> u64 {
        self.top
    }

    /// Starts the window at `top` as if it had been received (a test hook
    /// and for SAs that take over state from a previous instance).
    pub fn set_top(&mut self, top: u64) {
        self.blocks.fill(0);
        self.top = top;
        if !self.blocks.is_empty() && top != 0 {
            let (b, m) = self.index(top);
            self.blocks[b] |= m;
        }
    }

    /// The full sequence number of a packet carrying `seq_lo`: itself
    /// without ESN, or with the high 32 bits guessed per RFC 4303 Appendix A
    /// from the window's right edge. `None` when the guess falls outside the
    /// 64-bit space (an epoch before 0 or after 2^32 - 1): such a packet can
    /// only be too old or forged.
    #[inline]
    pub fn infer(&self, seq_lo: u32) -> Option<u64> {
        if !self.esn {
            return Some(u64::from(seq_lo));
        }
        let w = if self.window == 0 {
            ESN_INFER_WINDOW_OFF
        } else {
            self.window
        };
        let tl = self.top & 0xffff_ffff;
        let th = self.top >> 32;
        let sl = u64::from(seq_lo);
        let hi = if tl + 1 >= w {
            // Case A: window within one epoch.
            if sl >= tl + 1 - w {
                Some(th)
            } else {
                th.checked_add(1)
            }
        } else {
            // Case B: window spans the epoch boundary.
            let low_edge = (tl + (1u64 << 32) + 1 - w) & 0xffff_ffff;
            if sl >= low_edge {
                th.checked_sub(1)
            } else {
                Some(th)
            }
        }?;
        if hi > 0xffff_ffff {
            return None;
        }
        Some((hi << 32) | sl)
    }

    #[inline]
    fn index(&self, seq: u64) -> (usize, u64) {
        let bits = (self.blocks.len() as u64) * 64;
        let bit = seq & (bits - 1);
        ((bit / 64) as usize, 1u64 << (bit % 64))
    }

    /// Cheap pre-check before ICV verification: `replay` for a sequence
    /// number already seen, `too-old` left of the window. Sequence number 0
    /// is never sent (the first packet is 1, §3.3.3) and counts as too old.
    #[inline]
    pub fn check(&self, seq: u64) -> Result<(), EspError> {
        if seq == 0 {
            return Err(EspError::TooOld);
        }
        if self.window == 0 || seq > self.top {
            return Ok(());
        }
        if self.top - seq >= self.window {
            return Err(EspError::TooOld);
        }
        let (b, m) = self.index(seq);
        if self.blocks[b] & m != 0 {
            return Err(EspError::Replay);
        }
        Ok(())
    }

    /// Records an authenticated sequence number; re-checks first, so the
    /// same number is accepted once even if two workers verified it.
    #[inline]
    pub fn update(&mut self, seq: u64) -> Result<(), EspError> {
        self.check(seq)?;
        if seq > self.ceiling {
            // Wait for a durable ceiling above it (rare: the ticker keeps
            // the ceiling ahead of steady traffic) rather than drop it.
            let c = seq.saturating_add(JUMP_MARGIN);
            if let Some(p) = &self.persist {
                if (p.0)(c) {
                    self.ceiling = c;
                }
            }
        }
        if seq > self.ceiling {
            self.waits += 1;
            self.wanted = self.wanted.max(seq);
            return Err(EspError::ReplayNotDurable);
        }
        if self.window == 0 {
            self.top = self.top.max(seq);
            return Ok(());
        }
        if seq > self.top {
            let n = self.blocks.len() as u64;
            let old_block = self.top / 64;
            let new_block = seq / 64;
            let diff = new_block - old_block;
            if diff >= n {
                self.blocks.fill(0);
            } else {
                for i in 1..=diff {
                    let idx = ((old_block + i) & (n - 1)) as usize;
                    self.blocks[idx] = 0;
                }
            }
            self.top = seq;
        }
        let (b, m) = self.index(seq);
        self.blocks[b] |= m;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    /// The obviously-correct model: every accepted number, and the highest.
    struct Naive {
        seen: HashSet<u64>,
        top: u64,
        window: u64,
    }

    impl Naive {
        fn check(&self, seq: u64) -> Result<(), EspError> {
            if seq == 0 {
                return Err(EspError::TooOld);
            }
            if seq > self.top {
                return Ok(());
            }
            if self.top - seq >= self.window {
                return Err(EspError::TooOld);
            }
            if self.seen.contains(&seq) {
                return Err(EspError::Replay);
            }
            Ok(())
        }
        fn update(&mut self, seq: u64) -> Result<(), EspError> {
            self.check(seq)?;
            self.seen.insert(seq);
            self.top = self.top.max(seq);
            Ok(())
        }
    }

    #[test]
    fn basic() {
        let mut w = ReplayWindow::new(64, false).unwrap();
        assert_eq!(w.check(0), Err(EspError::TooOld));
        w.update(1).unwrap();
        assert_eq!(w.check(1), Err(EspError::Replay));
        w.update(3).unwrap();
        // Reordered within the window: accepted once.
        w.update(2).unwrap();
        assert_eq!(w.update(2), Err(EspError::Replay));
        w.update(200).unwrap();
        assert_eq!(w.check(136), Err(EspError::TooOld));
        assert!(w.check(137).is_ok());
        assert_eq!(w.check(200), Err(EspError::Replay));
    }

    #[test]
    fn large_window_and_jumps() {
        let mut w = ReplayWindow::new(4096, false).unwrap();
        for s in (1..=5000u64).rev().step_by(3) {
            let _ = w.update(s);
        }
        w.update(1_000_000).unwrap();
        assert_eq!(w.check(1_000_000 - 4096), Err(EspError::TooOld));
        assert!(w.check(1_000_000 - 4095).is_ok());
        assert!(w.check(999_999).is_ok());
    }

    #[test]
    fn ceiling_and_restore() {
        let mut w = ReplayWindow::new(64, false).unwrap();
        w.set_ceiling(10);
        w.update(10).unwrap();
        assert_eq!(w.update(11), Err(EspError::ReplayNotDurable));
        assert_eq!(w.waits(), 1);
        assert_eq!(w.update(5000), Err(EspError::ReplayNotDurable));
        assert_eq!(w.wanted(), 5000, "a restarted sender's jump is wanted");
        // With a durable writer, the packet waits for it instead.
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let a = asked.clone();
        w.set_persist(Some(PersistNow(std::sync::Arc::new(move |c| {
            a.store(c, std::sync::atomic::Ordering::Relaxed);
            true
        }))));
        w.update(9000).unwrap();
        assert_eq!(
            asked.load(std::sync::atomic::Ordering::Relaxed),
            9000 + JUMP_MARGIN
        );
        assert_eq!(w.ceiling(), 9000 + JUMP_MARGIN);
        w.set_ceiling(5);
        assert_eq!(w.ceiling(), 9000, "never below the top");
        // After a crash: everything up to the durable ceiling counts as seen.
        let mut r = ReplayWindow::new(64, false).unwrap();
        r.restore(100, None);
        for s in 1..=100 {
            assert!(r.check(s).is_err(), "{s}");
        }
        assert_eq!(r.update(101), Err(EspError::ReplayNotDurable));
        r.set_ceiling(1000);
        r.update(101).unwrap();
        // After a clean stop: exactly the saved window.
        let mut a = ReplayWindow::new(64, false).unwrap();
        for s in [1, 2, 4, 7] {
            a.update(s).unwrap();
        }
        let mut b = ReplayWindow::new(64, false).unwrap();
        b.restore(a.top(), Some(a.ring()));
        for s in 1..=8 {
            assert_eq!(a.check(s), b.check(s), "{s}");
        }
    }

    #[test]
    fn off_accepts_everything_but_zero() {
        let mut w = ReplayWindow::new(0, false).unwrap();
        w.update(5).unwrap();
        w.update(5).unwrap();
        w.update(1).unwrap();
        assert_eq!(w.check(0), Err(EspError::TooOld));
        assert_eq!(w.top(), 5);
    }

    #[test]
    fn too_big_window() {
        assert_eq!(
            ReplayWindow::new(MAX_WINDOW + 1, false).err(),
            Some(EspError::BadConfig)
        );
    }

    #[test]
    fn esn_inference_appendix_a() {
        let mut w = ReplayWindow::new(64, true).unwrap();
        // Case A, same epoch and next epoch.
        w.set_top(0x0000_0001_0000_1000);
        assert_eq!(w.infer(0x1001), Some(0x0000_0001_0000_1001));
        assert_eq!(w.infer(0x1000 - 63), Some(0x0000_0001_0000_1000 - 63));
        // Below the window: the receiver assumes the next epoch.
        assert_eq!(w.infer(0x10), Some(0x0000_0002_0000_0010));
        // Case B: right edge just after a wrap.
        w.set_top(0x0000_0002_0000_0005);
        assert_eq!(w.infer(0xffff_fff0), Some(0x0000_0001_ffff_fff0));
        assert_eq!(w.infer(6), Some(0x0000_0002_0000_0006));
        // No epoch before 0.
        w.set_top(5);
        assert_eq!(w.infer(0xffff_fff0), None);
        // Without ESN the number is taken as is.
        let w = ReplayWindow::new(64, false).unwrap();
        assert_eq!(w.infer(7), Some(7));
    }

    #[test]
    fn esn_across_the_boundary() {
        let mut w = ReplayWindow::new(128, true).unwrap();
        w.set_top(0xffff_ff00);
        for s in 0xffff_ff01u64..=0x1_0000_0040 {
            let inferred = w.infer(s as u32).unwrap();
            assert_eq!(inferred, s);
            w.update(inferred).unwrap();
        }
        assert_eq!(w.top(), 0x1_0000_0040);
        // A late packet from the previous epoch, inside the window (case B).
        assert_eq!(w.infer(0xffff_fff0), Some(0xffff_fff0));
        assert_eq!(w.check(0xffff_fff0), Err(EspError::Replay));
        // Left of the window: Appendix A takes it as far ahead in the
        // current epoch (the ICV, which covers the high bits, decides).
        assert_eq!(w.infer(0xffff_ff00), Some(0x1_ffff_ff00));
    }

    proptest! {
        #[test]
        fn matches_naive_model(
            window in prop_oneof![Just(1u32), Just(32), Just(64), Just(100), Just(1024), Just(4096)],
            ops in proptest::collection::vec((0u64..6000, any::<bool>()), 1..400),
        ) {
            let mut w = ReplayWindow::new(window, false).unwrap();
            let mut m = Naive { seen: HashSet::new(), top: 0, window: u64::from(window) };
            for (seq, do_update) in ops {
                prop_assert_eq!(w.check(seq), m.check(seq), "check {}", seq);
                if do_update {
                    prop_assert_eq!(w.update(seq), m.update(seq), "update {}", seq);
                }
                prop_assert_eq!(w.top(), m.top);
            }
        }

        #[test]
        fn matches_naive_model_big_jumps(
            ops in proptest::collection::vec((0u64..(1 << 40), 0u64..300), 1..200),
        ) {
            let mut w = ReplayWindow::new(256, false).unwrap();
            let mut m = Naive { seen: HashSet::new(), top: 0, window: 256 };
            let mut base = 0u64;
            for (jump, back) in ops {
                // Mostly small moves around the edge, sometimes a big jump.
                base = if jump % 7 == 0 { base + jump } else { base + jump % 100 };
                let seq = base.saturating_sub(back);
                prop_assert_eq!(w.update(seq), m.update(seq));
            }
        }

        #[test]
        fn esn_inference_recovers_nearby(top in 300u64..(1u64 << 40), delta in -255i64..1000) {
            let mut w = ReplayWindow::new(256, true).unwrap();
            w.set_top(top);
            let seq = (top as i64 + delta) as u64;
            prop_assert_eq!(w.infer(seq as u32), Some(seq));
        }
    }
}
