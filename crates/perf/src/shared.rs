//! State shared between the control thread and the I/O workers of one side,
//! and the measurement snapshots taken at the window edges.
//!
//! Workers own their counters (single writer, one cache line each, relaxed
//! stores): no lock and no shared write per I/O. The control thread moves
//! the phase; workers notice it with one relaxed load per I/O.

use crate::cpu::{self, CpuTimes};
use crate::cycles::{CycleSnapshot, Cycles};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Before the measured window (excluded from the figures).
pub const WARMUP: u8 = 0;
/// Inside the measured window.
pub const MEASURE: u8 = 1;
/// After the window, still sending (excluded).
pub const COOLDOWN: u8 = 2;
/// Workers finish: senders shut their connections down.
pub const STOP: u8 = 3;

/// One worker's counters, alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct WorkerStats {
    pub bytes: AtomicU64,
    pub datagrams: AtomicU64,
    pub transactions: AtomicU64,
    pub retrans_begin: AtomicU64,
    pub retrans_end: AtomicU64,
    pub errors: AtomicU64,
}

/// Sums over all workers at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub bytes: u64,
    pub datagrams: u64,
    pub transactions: u64,
}

#[derive(Debug)]
pub struct Shared {
    phase: AtomicU8,
    /// Workers that returned (the receiver waits on it with a deadline).
    pub finished: AtomicUsize,
    pub workers: Box<[WorkerStats]>,
}

impl Shared {
    pub fn new(workers: usize) -> Shared {
        Shared {
            phase: AtomicU8::new(WARMUP),
            finished: AtomicUsize::new(0),
            workers: (0..workers).map(|_| WorkerStats::default()).collect(),
        }
    }

    pub fn phase(&self) -> u8 {
        self.phase.load(Relaxed)
    }

    /// Phases only move forward.
    pub fn set_phase(&self, p: u8) {
        self.phase.fetch_max(p, Relaxed);
    }

    pub fn totals(&self) -> Totals {
        self.workers.iter().fold(Totals::default(), |t, w| Totals {
            bytes: t.bytes.wrapping_add(w.bytes.load(Relaxed)),
            datagrams: t.datagrams.wrapping_add(w.datagrams.load(Relaxed)),
            transactions: t.transactions.wrapping_add(w.transactions.load(Relaxed)),
        })
    }

    pub fn errors(&self) -> u64 {
        self.workers.iter().map(|w| w.errors.load(Relaxed)).sum()
    }

    /// Retransmissions inside the window, summed over workers.
    pub fn retrans(&self) -> u64 {
        self.workers
            .iter()
            .map(|w| {
                w.retrans_end
                    .load(Relaxed)
                    .saturating_sub(w.retrans_begin.load(Relaxed))
            })
            .sum()
    }
}

/// A worker's view of phase changes, so it can act once on each edge.
#[derive(Debug)]
pub struct PhaseWatch {
    last: u8,
}

/// What crossing into the current phase asks the worker to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Edges {
    pub began: bool,
    pub ended: bool,
}

impl PhaseWatch {
    pub fn new() -> PhaseWatch {
        PhaseWatch { last: WARMUP }
    }

    /// The current phase, and which window edges were crossed since the last
    /// call (both at once when the window was shorter than one I/O).
    pub fn poll(&mut self, shared: &Shared) -> (u8, Edges) {
        let p = shared.phase();
        let mut e = Edges::default();
        if p != self.last {
            e.began = self.last < MEASURE && p >= MEASURE;
            e.ended = self.last < COOLDOWN && p >= COOLDOWN;
            self.last = p;
        }
        (p, e)
    }
}

impl Default for PhaseWatch {
    fn default() -> Self {
        Self::new()
    }
}

/// Everything sampled at a window edge.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: Instant,
    /// `at` as CLOCK_MONOTONIC nanoseconds (reported, so that an observer
    /// outside the process can place the window on its own clock).
    pub at_ns: u64,
    pub totals: Totals,
    pub cpu: Option<CpuTimes>,
    pub process_cpu: Duration,
    pub cycles: CycleSnapshot,
}

impl Snapshot {
    pub fn take(shared: &Shared, cycles: &Cycles) -> Snapshot {
        let at_ns = crate::os::monotonic_ns();
        Snapshot {
            at: Instant::now(),
            at_ns,
            totals: shared.totals(),
            cpu: cpu::read_proc_stat().ok(),
            process_cpu: crate::os::process_cpu_time(),
            cycles: cycles.snapshot(),
        }
    }
}

/// The CPU and cycle figures of one window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Window {
    pub secs: f64,
    /// The window's edges on CLOCK_MONOTONIC, in nanoseconds.
    pub start_ns: u64,
    pub end_ns: u64,
    pub totals: Totals,
    pub cpu_pct_system: f64,
    pub cpu_pct_system_sum: f64,
    pub cpu_pct_process: f64,
    pub cycles_system: u64,
    pub cycles_process: u64,
}

/// Figures between two snapshots.
pub fn window(a: &Snapshot, b: &Snapshot, cycles: &Cycles, ncpus: usize) -> Window {
    let wall = b.at.saturating_duration_since(a.at);
    let (sys_pct, busy_ticks) = match (&a.cpu, &b.cpu) {
        (Some(x), Some(y)) => (cpu::system_pct(x, y), cpu::delta(x, y).0),
        _ => (0.0, 0),
    };
    let proc_cpu = b.process_cpu.saturating_sub(a.process_cpu);
    let busy_secs = cpu::ticks_to_secs(busy_ticks, crate::os::user_hz());
    let (cs, cp) = cycles.window(&a.cycles, &b.cycles, busy_secs, proc_cpu);
    Window {
        secs: wall.as_secs_f64(),
        start_ns: a.at_ns,
        end_ns: b.at_ns,
        totals: Totals {
            bytes: b.totals.bytes.wrapping_sub(a.totals.bytes),
            datagrams: b.totals.datagrams.wrapping_sub(a.totals.datagrams),
            transactions: b.totals.transactions.wrapping_sub(a.totals.transactions),
        },
        cpu_pct_system: sys_pct,
        cpu_pct_system_sum: cpu::per_core_sum(sys_pct, ncpus),
        cpu_pct_process: cpu::process_pct(proc_cpu, wall, ncpus),
        cycles_system: cs,
        cycles_process: cp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_edges() {
        let s = Shared::new(1);
        let mut w = PhaseWatch::new();
        assert_eq!(w.poll(&s), (WARMUP, Edges::default()));
        s.set_phase(MEASURE);
        assert_eq!(
            w.poll(&s),
            (
                MEASURE,
                Edges {
                    began: true,
                    ended: false
                }
            )
        );
        assert_eq!(w.poll(&s), (MEASURE, Edges::default()));
        // Phases never go back.
        s.set_phase(WARMUP);
        assert_eq!(s.phase(), MEASURE);
        s.set_phase(STOP);
        assert_eq!(
            w.poll(&s),
            (
                STOP,
                Edges {
                    began: false,
                    ended: true
                }
            )
        );
        // A window shorter than one I/O: both edges at once.
        let s2 = Shared::new(1);
        let mut w2 = PhaseWatch::new();
        s2.set_phase(COOLDOWN);
        assert_eq!(
            w2.poll(&s2).1,
            Edges {
                began: true,
                ended: true
            }
        );
    }

    #[test]
    fn totals_and_retrans() {
        let s = Shared::new(2);
        s.workers[0].bytes.store(10, Relaxed);
        s.workers[1].bytes.store(5, Relaxed);
        s.workers[1].datagrams.store(3, Relaxed);
        s.workers[0].retrans_begin.store(4, Relaxed);
        s.workers[0].retrans_end.store(9, Relaxed);
        s.workers[1].retrans_begin.store(2, Relaxed);
        s.workers[1].retrans_end.store(1, Relaxed);
        assert_eq!(
            s.totals(),
            Totals {
                bytes: 15,
                datagrams: 3,
                transactions: 0
            }
        );
        assert_eq!(s.retrans(), 5);
    }
}
