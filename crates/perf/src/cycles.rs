//! CPU cycles spent, and cycles per byte moved.
//!
//! Preferred source: hardware cycle counters through `perf_event_open(2)`,
//! one system-wide counter per online CPU (all work on the machine: the
//! kernel's network stack, softirqs, a gateway in another namespace — what
//! NTttcp reports) and one inherited counter for this process and its threads.
//! Many VMs expose no PMU (`/sys/bus/event_source/devices/cpu` is absent),
//! and then the figures are CPU time × TSC frequency: system busy ticks from
//! `/proc/stat` and process CPU time from `getrusage(2)`. The report names the
//! method (`cycles_method`) because the two are not the same quantity: the
//! hardware counts real (possibly boosted) cycles, the estimate nominal ones.

use std::fs::File;
use std::io::Read;
use std::time::{Duration, Instant};

/// How cycles were obtained; serialised into the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    PerfEvent,
    CputimeXTsc,
}

impl Method {
    /// The name used in the JSON report.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::PerfEvent => "perf_event",
            Method::CputimeXTsc => "cputime_x_tsc",
        }
    }
}

/// One `read(2)` of a counter opened with TOTAL_TIME_ENABLED|RUNNING.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    pub value: u64,
    pub enabled: u64,
    pub running: u64,
}

/// Difference of a 64-bit counter that may have wrapped between two reads.
pub fn counter_delta(before: u64, after: u64) -> u64 {
    after.wrapping_sub(before)
}

/// Counted events between two samples, scaled up when the kernel multiplexed
/// the counter (it ran only `running` of the `enabled` time). 0 if it never ran.
pub fn scaled_delta(a: &Sample, b: &Sample) -> u64 {
    let value = counter_delta(a.value, b.value);
    let enabled = counter_delta(a.enabled, b.enabled);
    let running = counter_delta(a.running, b.running);
    if running == 0 {
        return 0;
    }
    if running >= enabled {
        return value;
    }
    let scaled = value as u128 * enabled as u128 / running as u128;
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// Cycles in `secs` of CPU time at `hz`, rounded to nearest.
pub fn cycles_from_secs(secs: f64, hz: f64) -> u64 {
    let c = secs * hz;
    if c.is_finite() && c > 0.0 {
        c.round() as u64
    } else {
        0
    }
}

/// Cycles per byte; `None` when nothing moved (no meaningful ratio).
pub fn cycles_per_byte(cycles: u64, bytes: u64) -> Option<f64> {
    if bytes == 0 {
        None
    } else {
        Some(cycles as f64 / bytes as f64)
    }
}

/// The first `cpu MHz` of `/proc/cpuinfo`, in Hz.
pub fn parse_cpuinfo_hz(text: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == "cpu MHz")
        .and_then(|(_, v)| v.trim().parse::<f64>().ok())
        .filter(|mhz| mhz.is_finite() && *mhz > 0.0)
        .map(|mhz| mhz * 1e6)
}

/// TSC frequency in Hz: measured against CLOCK_MONOTONIC where the TSC is
/// invariant (`constant_tsc`), else `cpu MHz` from `/proc/cpuinfo`.
pub fn tsc_hz() -> Option<f64> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let invariant = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_ascii_whitespace().any(|f| f == "constant_tsc"));
    if invariant {
        if let Some(hz) = sys::measure_tsc_hz(Duration::from_millis(20)) {
            return Some(hz);
        }
    }
    parse_cpuinfo_hz(&cpuinfo)
}

/// A hardware cycle counter; closed on drop.
#[derive(Debug)]
pub struct Counter(File);

impl Counter {
    fn read(&self) -> Option<Sample> {
        let mut buf = [0u8; 24];
        (&self.0).read_exact(&mut buf).ok()?;
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&buf[i * 8..i * 8 + 8]);
            u64::from_ne_bytes(w)
        };
        Some(Sample {
            value: word(0),
            enabled: word(1),
            running: word(2),
        })
    }
}

/// The cycle sources for one run; open it before spawning worker threads so
/// the process counter inherits into them.
#[derive(Debug)]
pub struct Cycles {
    pub method: Method,
    system: Vec<Counter>,
    process: Option<Counter>,
    /// TSC frequency for the fallback (and reported for reference).
    pub tsc_hz: Option<f64>,
    /// Why hardware counters were not used (e.g. no PMU in this VM).
    pub fallback_reason: Option<String>,
}

/// Counter values at one instant (empty when the fallback is used).
#[derive(Debug, Clone, Default)]
pub struct CycleSnapshot {
    system: Vec<Sample>,
    process: Option<Sample>,
}

impl Cycles {
    /// Hardware counters if the kernel gives them for every online CPU and
    /// for this process; otherwise the CPU-time × TSC estimate.
    pub fn open(force_fallback: bool) -> Cycles {
        let tsc_hz = tsc_hz();
        let why = if force_fallback {
            "not requested (--no-perf-event)".to_string()
        } else {
            match Self::open_perf(tsc_hz) {
                Ok(c) => return c,
                Err(e) => e,
            }
        };
        Cycles {
            method: Method::CputimeXTsc,
            system: Vec::new(),
            process: None,
            tsc_hz,
            fallback_reason: Some(why),
        }
    }

    fn open_perf(tsc_hz: Option<f64>) -> Result<Cycles, String> {
        let cpus = online_cpus();
        let mut system = Vec::with_capacity(cpus.len());
        for cpu in cpus {
            let c = sys::open_cycles(-1, cpu as i32, false)
                .map_err(|e| format!("perf_event_open(cycles, cpu {cpu}): {e}"))?;
            system.push(Counter(c));
        }
        let process = sys::open_cycles(0, -1, true)
            .map(Counter)
            .map_err(|e| format!("perf_event_open(cycles, this process): {e}"))?;
        // A counter that opens but cannot be read is no counter.
        process
            .read()
            .ok_or_else(|| "perf_event counter cannot be read".to_string())?;
        Ok(Cycles {
            method: Method::PerfEvent,
            system,
            process: Some(process),
            tsc_hz,
            fallback_reason: None,
        })
    }

    pub fn snapshot(&self) -> CycleSnapshot {
        CycleSnapshot {
            system: self
                .system
                .iter()
                .map(|c| c.read().unwrap_or_default())
                .collect(),
            process: self.process.as_ref().and_then(Counter::read),
        }
    }

    /// (system cycles, process cycles) over a window, given that window's
    /// system busy CPU seconds and process CPU time for the fallback.
    pub fn window(
        &self,
        a: &CycleSnapshot,
        b: &CycleSnapshot,
        system_busy_secs: f64,
        process_cpu: Duration,
    ) -> (u64, u64) {
        match self.method {
            Method::PerfEvent => {
                let system = a
                    .system
                    .iter()
                    .zip(&b.system)
                    .fold(0u64, |acc, (x, y)| acc.saturating_add(scaled_delta(x, y)));
                let process = match (&a.process, &b.process) {
                    (Some(x), Some(y)) => scaled_delta(x, y),
                    _ => 0,
                };
                (system, process)
            }
            Method::CputimeXTsc => {
                let hz = self.tsc_hz.unwrap_or(0.0);
                (
                    cycles_from_secs(system_busy_secs, hz),
                    cycles_from_secs(process_cpu.as_secs_f64(), hz),
                )
            }
        }
    }
}

/// Online CPU numbers from sysfs, else 0..available_parallelism.
pub fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| crate::units::parse_cpu_list(s.trim(), 4096).ok())
        .unwrap_or_else(|| (0..ncpus()).collect())
}

/// Number of CPUs, for the per-core-sum scales.
pub fn ncpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The raw system calls: `perf_event_open(2)` and the TSC.
mod sys {
    use super::*;
    use std::os::fd::{FromRawFd, OwnedFd};

    /// `struct perf_event_attr` up to PERF_ATTR_SIZE_VER0 (64 bytes); the
    /// kernel accepts this size and zero-fills the newer fields.
    #[repr(C)]
    #[derive(Default)]
    struct PerfEventAttr {
        type_: u32,
        size: u32,
        config: u64,
        sample_period: u64,
        sample_type: u64,
        read_format: u64,
        flags: u64,
        wakeup_events: u32,
        bp_type: u32,
        config1: u64,
    }

    const PERF_TYPE_HARDWARE: u32 = 0;
    const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
    const PERF_FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
    const PERF_FORMAT_TOTAL_TIME_RUNNING: u64 = 2;
    const FLAG_INHERIT: u64 = 1 << 1;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

    /// Opens an enabled cycle counter for (`pid`, `cpu`) as perf_event_open(2)
    /// defines them: (-1, n) = everything on CPU n; (0, -1) = this process.
    pub(super) fn open_cycles(pid: i32, cpu: i32, inherit: bool) -> std::io::Result<File> {
        open_counter(
            PERF_TYPE_HARDWARE,
            PERF_COUNT_HW_CPU_CYCLES,
            pid,
            cpu,
            inherit,
        )
    }

    /// Any counting event; `inherit` extends it to threads created later,
    /// and reading the parent's fd then sums the live children too.
    pub(super) fn open_counter(
        type_: u32,
        config: u64,
        pid: i32,
        cpu: i32,
        inherit: bool,
    ) -> std::io::Result<File> {
        let attr = PerfEventAttr {
            type_,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config,
            read_format: PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
            flags: if inherit { FLAG_INHERIT } else { 0 },
            ..Default::default()
        };
        // SAFETY: `attr` is a valid, initialised perf_event_attr of the size
        // given in its `size` field and outlives the call; the other arguments
        // are plain integers. The kernel only reads `attr`.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                pid as libc::c_int,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = libc::c_int::try_from(fd).map_err(|_| std::io::Error::other("bad fd"))?;
        // SAFETY: the syscall succeeded, so `fd` is a new descriptor that
        // nothing else owns; OwnedFd takes sole ownership and closes it.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(File::from(owned))
    }

    #[cfg(target_arch = "x86_64")]
    fn rdtsc() -> u64 {
        // SAFETY: RDTSC exists on every x86_64 CPU and has no memory effects.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }

    /// TSC ticks per second of CLOCK_MONOTONIC over `span`.
    #[cfg(target_arch = "x86_64")]
    pub(super) fn measure_tsc_hz(span: Duration) -> Option<f64> {
        let t0 = Instant::now();
        let c0 = rdtsc();
        std::thread::sleep(span);
        let c1 = rdtsc();
        let dt = t0.elapsed().as_secs_f64();
        let hz = counter_delta(c0, c1) as f64 / dt;
        (hz.is_finite() && hz > 1e6).then_some(hz)
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub(super) fn measure_tsc_hz(_span: Duration) -> Option<f64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_and_scale() {
        assert_eq!(counter_delta(10, 25), 15);
        // The 64-bit counter wrapped between the reads.
        assert_eq!(counter_delta(u64::MAX - 4, 5), 10);
        let a = Sample {
            value: 1000,
            enabled: 100,
            running: 100,
        };
        let b = Sample {
            value: 3000,
            enabled: 300,
            running: 200,
        };
        // Ran half the enabled time: 2000 counted → 4000 estimated.
        assert_eq!(scaled_delta(&a, &b), 4000);
        let c = Sample {
            value: 5000,
            enabled: 300,
            running: 100,
        };
        // Never scheduled during the window: nothing known, 0.
        assert_eq!(scaled_delta(&a, &c), 0);
        let d = Sample {
            value: 1500,
            enabled: 150,
            running: 150,
        };
        assert_eq!(scaled_delta(&a, &d), 500);
    }

    #[test]
    fn per_byte() {
        assert_eq!(cycles_per_byte(0, 0), None);
        assert_eq!(cycles_per_byte(100, 0), None);
        assert_eq!(cycles_per_byte(0, 10), Some(0.0));
        assert_eq!(cycles_per_byte(3_000_000_000, 1_250_000_000), Some(2.4));
        // 2 s of CPU at 2.5 GHz = 5e9 cycles.
        assert_eq!(cycles_from_secs(2.0, 2.5e9), 5_000_000_000);
        assert_eq!(cycles_from_secs(0.0, 2.5e9), 0);
        assert_eq!(cycles_from_secs(1.0, f64::NAN), 0);
    }

    #[test]
    fn method_names_match_json() {
        for m in [Method::PerfEvent, Method::CputimeXTsc] {
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
    }

    #[test]
    fn cpuinfo() {
        let t = "processor\t: 0\nmodel name\t: X\ncpu MHz\t\t: 2596.120\ncpu MHz : 1\n";
        let hz = parse_cpuinfo_hz(t).unwrap();
        assert!((hz - 2_596_120_000.0).abs() < 1.0);
        assert_eq!(parse_cpuinfo_hz("cpu MHz : zero\n"), None);
        assert_eq!(parse_cpuinfo_hz("cpu MHz : 0\n"), None);
        assert_eq!(parse_cpuinfo_hz(""), None);
    }

    #[test]
    fn fallback_window_arithmetic() {
        let c = Cycles {
            method: Method::CputimeXTsc,
            system: Vec::new(),
            process: None,
            tsc_hz: Some(2e9),
            fallback_reason: None,
        };
        let s = CycleSnapshot::default();
        assert_eq!(
            c.window(&s, &s, 1.5, Duration::from_millis(500)),
            (3_000_000_000, 1_000_000_000)
        );
    }

    /// CLOCK_THREAD_CPUTIME_ID of the calling thread, in ns.
    fn thread_cpu_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a live, writable timespec; the clock always exists.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0);
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// The perf_event plumbing (attr layout, read format, inheritance into
    /// threads, per-CPU system-wide counting) checked with software clocks,
    /// which exist even where the VM has no PMU.
    #[test]
    fn perf_event_plumbing_with_software_clocks() {
        const PERF_TYPE_SOFTWARE: u32 = 1;
        const SW_CPU_CLOCK: u64 = 0;
        const SW_TASK_CLOCK: u64 = 1;
        let proc_clock =
            Counter(sys::open_counter(PERF_TYPE_SOFTWARE, SW_TASK_CLOCK, 0, -1, true).unwrap());
        let cpu0 =
            Counter(sys::open_counter(PERF_TYPE_SOFTWARE, SW_CPU_CLOCK, -1, 0, false).unwrap());
        let (p0, c0) = (proc_clock.read().unwrap(), cpu0.read().unwrap());
        let inner = Instant::now();
        // A thread created after the open burns 30 ms of its own CPU time
        // (its thread clock is the judge: a busy machine stretches the wall
        // time this takes, never the CPU time) and is still alive when the
        // counter is read.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let burned = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (s2, b2) = (stop.clone(), burned.clone());
        let h = std::thread::spawn(move || {
            let mut x = 0u64;
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_add(1));
                if x.is_multiple_of(4096) && b2.load(std::sync::atomic::Ordering::Relaxed) == 0 {
                    let cpu = thread_cpu_ns();
                    if cpu >= 30_000_000 {
                        b2.store(cpu, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        });
        while burned.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let inner = inner.elapsed();
        let (p1, c1) = (proc_clock.read().unwrap(), cpu0.read().unwrap());
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        h.join().unwrap();
        let task_ns = scaled_delta(&p0, &p1);
        let thread_ns = burned.load(std::sync::atomic::Ordering::Relaxed);
        // CPU 0's clock ran at least the wall time between the two reads;
        // the inherited task clock counted at least the thread's own CPU
        // time although the thread never exited (10 % for scaling).
        let wall = u64::try_from(inner.as_nanos()).unwrap_or(u64::MAX);
        assert!(
            scaled_delta(&c0, &c1) >= wall / 10 * 9,
            "{c0:?} {c1:?} wall {wall} ns"
        );
        assert!(
            task_ns >= thread_ns / 10 * 9,
            "inherited task clock {task_ns} ns, the thread's own clock {thread_ns} ns"
        );
        assert!(p1.enabled > p0.enabled && p1.running > p0.running);
    }

    #[test]
    fn opens_some_source() {
        let c = Cycles::open(false);
        let a = c.snapshot();
        let b = c.snapshot();
        if c.method == Method::CputimeXTsc {
            assert!(c.tsc_hz.is_some_and(|hz| hz > 1e8), "{:?}", c.tsc_hz);
            assert!(c.fallback_reason.is_some());
        } else {
            assert!(c.fallback_reason.is_none());
        }
        let forced = Cycles::open(true);
        assert_eq!(forced.method, Method::CputimeXTsc);
        assert!(forced.fallback_reason.unwrap().contains("--no-perf-event"));
        let _ = c.window(&a, &b, 0.0, Duration::ZERO);
    }
}
