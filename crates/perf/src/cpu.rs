//! CPU time accounting: system-wide from `/proc/stat`, the process from
//! `getrusage(2)`.
//!
//! The arithmetic is separate from the reading so it can be tested with known
//! numbers. Two scales are reported, named so they cannot be confused:
//! - *normalised* (`cpu_pct_system`): 0–100, the share of all CPUs' time busy;
//! - *per-core sum* (`cpu_pct_system_sum`, `cpu_pct_process`): 0–100 × ncpus,
//!   as `top` shows a process (200 % = two cores fully busy).

use std::time::Duration;

/// The aggregate `cpu` line of `/proc/stat`, in USER_HZ ticks
/// (proc(5): user nice system idle iowait irq softirq steal; guest time is
/// already included in user/nice and is not added again).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Every tick accounted, busy or not.
    pub fn total(&self) -> u64 {
        self.busy()
            .saturating_add(self.idle)
            .saturating_add(self.iowait)
    }

    /// Ticks some CPU spent doing work (anything but idle and iowait). Steal
    /// counts as busy: the hypervisor took the CPU while we wanted it.
    pub fn busy(&self) -> u64 {
        [
            self.user,
            self.nice,
            self.system,
            self.irq,
            self.softirq,
            self.steal,
        ]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b))
    }
}

/// Why `/proc/stat` could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    #[error("reading /proc/stat: {0}")]
    Io(#[from] std::io::Error),
    #[error("/proc/stat has no parsable aggregate `cpu` line")]
    Format,
}

/// Parses the aggregate `cpu ` line; older kernels with fewer columns get
/// zeros for the missing ones.
pub fn parse_proc_stat(text: &str) -> Result<CpuTimes, CpuError> {
    let line = text
        .lines()
        .find(|l| l.starts_with("cpu ") || l.starts_with("cpu\t"))
        .ok_or(CpuError::Format)?;
    let mut v = [0u64; 8];
    let mut n = 0;
    for (slot, field) in v.iter_mut().zip(line.split_ascii_whitespace().skip(1)) {
        *slot = field.parse().map_err(|_| CpuError::Format)?;
        n += 1;
    }
    if n < 4 {
        return Err(CpuError::Format);
    }
    Ok(CpuTimes {
        user: v[0],
        nice: v[1],
        system: v[2],
        idle: v[3],
        iowait: v[4],
        irq: v[5],
        softirq: v[6],
        steal: v[7],
    })
}

/// Reads `/proc/stat` now.
pub fn read_proc_stat() -> Result<CpuTimes, CpuError> {
    let text = std::fs::read_to_string("/proc/stat")?;
    parse_proc_stat(&text)
}

/// Busy and total ticks between two samples. A counter that went backwards
/// (CPU hot-unplug drops its ticks from the aggregate) gives 0, not a wrap.
pub fn delta(before: &CpuTimes, after: &CpuTimes) -> (u64, u64) {
    (
        after.busy().saturating_sub(before.busy()),
        after.total().saturating_sub(before.total()),
    )
}

/// System CPU % normalised to 0–100 (busy share of all CPUs' time).
pub fn system_pct(before: &CpuTimes, after: &CpuTimes) -> f64 {
    let (busy, total) = delta(before, after);
    if total == 0 {
        return 0.0;
    }
    (busy as f64 * 100.0 / total as f64).min(100.0)
}

/// Normalised % scaled to the per-core sum (0–100 × ncpus).
pub fn per_core_sum(normalised_pct: f64, ncpus: usize) -> f64 {
    normalised_pct * ncpus as f64
}

/// Process CPU % as a per-core sum: CPU time used over wall time, × 100.
/// 0 for an empty window; capped at 100 × ncpus against clock granularity.
pub fn process_pct(cpu_time: Duration, wall: Duration, ncpus: usize) -> f64 {
    if wall.is_zero() {
        return 0.0;
    }
    let pct = cpu_time.as_secs_f64() * 100.0 / wall.as_secs_f64();
    pct.min(100.0 * ncpus.max(1) as f64)
}

/// Seconds of CPU busy time in a tick delta (USER_HZ ticks per second).
pub fn ticks_to_secs(ticks: u64, user_hz: u64) -> f64 {
    if user_hz == 0 {
        0.0
    } else {
        ticks as f64 / user_hz as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "cpu  100 5 50 800 20 3 2 0 7 0\n\
                          cpu0 50 2 25 400 10 1 1 0 0 0\n\
                          intr 1 2 3\n";

    #[test]
    fn parses_aggregate_line() {
        let t = parse_proc_stat(SAMPLE).unwrap();
        assert_eq!(
            t,
            CpuTimes {
                user: 100,
                nice: 5,
                system: 50,
                idle: 800,
                iowait: 20,
                irq: 3,
                softirq: 2,
                steal: 0
            }
        );
        // Guest (7) is inside user already and must not be counted twice.
        assert_eq!(t.busy(), 160);
        assert_eq!(t.total(), 980);
    }

    #[test]
    fn short_and_bad_lines() {
        let t = parse_proc_stat("cpu 1 2 3 4\n").unwrap();
        assert_eq!(t.busy(), 6);
        assert_eq!(t.total(), 10);
        assert!(parse_proc_stat("cpu 1 2\n").is_err());
        assert!(parse_proc_stat("cpu0 1 2 3 4\n").is_err());
        assert!(parse_proc_stat("cpu 1 x 3 4\n").is_err());
        assert!(parse_proc_stat("").is_err());
    }

    #[test]
    fn system_percentages() {
        let a = CpuTimes {
            user: 100,
            idle: 100,
            ..Default::default()
        };
        // +30 busy (user 20, softirq 10), +70 idle: 30 % of all CPU time.
        let b = CpuTimes {
            user: 120,
            softirq: 10,
            idle: 170,
            ..Default::default()
        };
        assert_eq!(system_pct(&a, &b), 30.0);
        assert_eq!(per_core_sum(30.0, 2), 60.0);
        // No ticks elapsed: 0, not NaN.
        assert_eq!(system_pct(&a, &a), 0.0);
        // Counters going backwards (hot-unplug): 0, not a huge wrap.
        assert_eq!(system_pct(&b, &a), 0.0);
        assert_eq!(delta(&b, &a), (0, 0));
    }

    #[test]
    fn process_percentages() {
        let s = Duration::from_secs;
        assert_eq!(process_pct(s(3), s(2), 2), 150.0);
        assert_eq!(process_pct(s(1), s(4), 2), 25.0);
        assert_eq!(process_pct(s(1), Duration::ZERO, 2), 0.0);
        // Rounding can make CPU time exceed wall × ncpus: capped.
        assert_eq!(process_pct(s(5), s(2), 2), 200.0);
        assert_eq!(ticks_to_secs(250, 100), 2.5);
        assert_eq!(ticks_to_secs(250, 0), 0.0);
    }
}
