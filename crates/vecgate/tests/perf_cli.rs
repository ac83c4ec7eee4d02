//! End-to-end tests of `vecgate perf` between two network namespaces joined
//! by a veth pair (root required). Each test builds its own uniquely named
//! namespaces and removes them on drop, even when an assertion fails; the
//! tests run one at a time (a lock) because they measure throughput on a
//! shared 2-core machine.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecgate");
const RX_IP: &str = "10.77.0.1";
const TX_IP: &str = "10.77.0.2";

static SERIAL: Mutex<()> = Mutex::new(());
static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two namespaces (receiver side `rx`, sender side `tx`) joined by a veth.
struct NsPair {
    rx: String,
    tx: String,
    /// The veth end inside `rx`.
    rx_dev: String,
}

impl NsPair {
    fn new() -> NsPair {
        let pid = std::process::id() % 1_000_000;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed) % 100;
        let (va, vb) = (format!("vp{pid}x{n}a"), format!("vp{pid}x{n}b"));
        // Created before any command so Drop cleans up a half-built pair.
        let pair = NsPair {
            rx: format!("vgperf-{pid}-{n}-rx"),
            tx: format!("vgperf-{pid}-{n}-tx"),
            rx_dev: va.clone(),
        };
        assert!(va.len() <= 15);
        sh(&["ip", "netns", "add", &pair.rx]);
        sh(&["ip", "netns", "add", &pair.tx]);
        sh(&[
            "ip", "link", "add", &va, "type", "veth", "peer", "name", &vb,
        ]);
        sh(&["ip", "link", "set", &va, "netns", &pair.rx]);
        sh(&["ip", "link", "set", &vb, "netns", &pair.tx]);
        for (ns, dev, ip) in [(&pair.rx, &va, RX_IP), (&pair.tx, &vb, TX_IP)] {
            let cidr = format!("{ip}/24");
            sh(&["ip", "-n", ns, "addr", "add", &cidr, "dev", dev]);
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        pair
    }

    fn cmd(&self, ns: &str, prog: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, prog]).args(args);
        c
    }
}

impl Drop for NsPair {
    fn drop(&mut self) {
        for ns in [&self.rx, &self.tx] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// A background child killed (by its own pid) if the test fails early.
struct Bg(Option<Child>);

impl Bg {
    fn wait(mut self, limit: Duration) -> Output {
        let mut child = self.0.take().expect("child");
        let start = Instant::now();
        while child.try_wait().expect("try_wait").is_none() {
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("background process did not finish within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().expect("output")
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts a program in `ns` and waits until `ready` appears on the stream
/// chosen (stdout or stderr): returns the child, the lines up to `ready`,
/// and a thread that yields the rest of that stream once it closes.
fn spawn_ready(
    mut c: Command,
    ready: &str,
    on_stderr: bool,
) -> (Bg, Vec<String>, std::thread::JoinHandle<String>) {
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    let stream: Box<dyn Read + Send> = if on_stderr {
        Box::new(child.stderr.take().expect("stderr"))
    } else {
        Box::new(child.stdout.take().expect("stdout"))
    };
    let bg = Bg(Some(child));
    let mut r = BufReader::new(stream);
    let mut seen = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        let n = r.read_line(&mut line).expect("read");
        assert!(n > 0, "exited before `{ready}`: {seen:?}");
        seen.push(line.clone());
        if line.contains(ready) {
            break;
        }
    }
    // Keep draining so the child never blocks on a full pipe; the rest of
    // the stream is handed back when the thread is joined.
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = r.read_to_string(&mut rest);
        rest
    });
    (bg, seen, rest)
}

/// Runs one `vecgate perf` test; returns (sender JSON, receiver JSON).
fn perf(pair: &NsPair, send_args: &[&str]) -> (Value, Value) {
    let recv = pair.cmd(
        &pair.rx,
        BIN,
        &[
            "perf",
            "receive",
            "-b",
            RX_IP,
            "-p",
            "5001",
            "--json",
            "--timeout",
            "20",
        ],
    );
    let (rx, _, _) = spawn_ready(recv, "waiting for a sender", true);
    let mut args = vec!["perf", "send", RX_IP, "-p", "5001", "--json"];
    args.extend_from_slice(send_args);
    let tx = pair.cmd(&pair.tx, BIN, &args).output().expect("sender");
    assert!(
        tx.status.success(),
        "sender failed: {}",
        String::from_utf8_lossy(&tx.stderr)
    );
    let rx = rx.wait(Duration::from_secs(30));
    assert!(rx.status.success(), "receiver failed");
    let s: Value = serde_json::from_slice(&tx.stdout).expect("sender JSON");
    let r: Value = serde_json::from_slice(&rx.stdout).expect("receiver JSON");
    (s, r)
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} missing or not a number in {v}"))
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing or not an integer in {v}"))
}

/// Checks every report must pass; `secs` is the `-d` asked for. The
/// sender's window is its own sleep of `secs`, so never shorter; the
/// receiver's runs between the control messages that mark the edges, so a
/// busy machine can shift it either way: only sanity bounds there.
fn common_checks(r: &Value, role: &str, secs: f64) {
    assert_eq!(r["role"], role);
    assert_eq!(r["schema"], 1);
    let ncpus = u(r, "ncpus") as f64;
    let d = f(r, "duration_s");
    match role {
        "sender" => assert!(d >= secs && d < secs + 30.0, "{r}"),
        _ => assert!(d > 0.0 && d < secs + 30.0, "{r}"),
    }
    let sys = f(r, "cpu_pct_system");
    assert!(sys > 0.0 && sys <= 100.0, "{r}");
    let sum = f(r, "cpu_pct_system_sum");
    assert!((sum - sys * ncpus).abs() < 1e-6, "{r}");
    let p = f(r, "cpu_pct_process");
    assert!(p > 0.0 && p <= 100.0 * ncpus, "{r}");
    let m = r["cycles_method"].as_str().expect("cycles_method");
    assert!(m == "perf_event" || m == "cputime_x_tsc", "{m}");
    assert!(f(r, "cycles_per_byte_system") > 0.0, "{r}");
    assert!(f(r, "cycles_per_byte_process") > 0.0, "{r}");
    // The whole machine can't be cheaper than this process alone.
    assert!(u(r, "cycles_system") >= u(r, "cycles_process") / 2, "{r}");
}

#[test]
fn tcp_both_sides_agree() {
    let _g = serial();
    let pair = NsPair::new();
    let (s, r) = perf(&pair, &["-d", "2", "--warmup", "0.5", "--cooldown", "0.3"]);
    common_checks(&s, "sender", 2.0);
    common_checks(&r, "receiver", 2.0);
    assert_eq!(s["mode"], "tcp");
    let sent = u(&s, "total_bytes");
    assert!(sent > 0);
    assert_eq!(sent, u(&r, "total_bytes"), "every byte sent arrived");
    assert_eq!(u(&s, "peer_total_bytes"), u(&r, "total_bytes"));
    assert_eq!(u(&r, "peer_total_bytes"), sent);
    // Warmup and cooldown are excluded from the window figures.
    assert!(u(&s, "bytes") < sent, "{s}");
    assert!(f(&s, "throughput_gbps") > 0.0 && f(&r, "throughput_gbps") > 0.0);
    let mbs = f(&s, "throughput_mbyte_s");
    assert!((mbs * 8.0 / 1000.0 - f(&s, "throughput_gbps")).abs() < 1e-6);
    // Both sides measured the same window: the receiver snapshots each edge
    // when the sender's control message for it arrives, so never before the
    // sender's own snapshot of that edge (how much later is the scheduler's
    // business; counts_what_the_interface_saw checks each window's bytes).
    for edge in ["window_start_monotonic_ns", "window_end_monotonic_ns"] {
        assert!(
            u(&r, edge) >= u(&s, edge),
            "{edge}: sender {s} receiver {r}"
        );
    }
    assert!(s["tcp_retrans"].is_u64(), "{s}");
    assert!(r["tcp_retrans"].is_null());
    assert!(s["datagrams"].is_null() && s["rr"].is_null());
}

#[test]
fn udp_counts_packets() {
    let _g = serial();
    let pair = NsPair::new();
    let (s, r) = perf(
        &pair,
        &[
            "--udp",
            "-d",
            "2",
            "-t",
            "2",
            "-l",
            "1K",
            "--affinity",
            "0-1",
        ],
    );
    common_checks(&s, "sender", 2.0);
    common_checks(&r, "receiver", 2.0);
    assert_eq!(r["mode"], "udp");
    assert!(f(&s, "packets_per_s") > 0.0 && f(&r, "packets_per_s") > 0.0);
    let (sent, got) = (u(&s, "total_datagrams"), u(&r, "total_datagrams"));
    assert!(got > 0 && got <= sent, "sent {sent} received {got}");
    assert_eq!(u(&r, "peer_total_datagrams"), sent);
    let loss = f(&r, "loss_pct");
    let expect = (sent - got) as f64 * 100.0 / sent as f64;
    assert!((loss - expect).abs() < 1e-9 && (0.0..=100.0).contains(&loss));
    assert_eq!(f(&s, "loss_pct"), loss);
    assert_eq!(u(&r, "total_bytes"), got * 1024);
}

#[test]
fn udp_rate_is_respected() {
    let _g = serial();
    let pair = NsPair::new();
    // The pacer stays on the line bytes × 8 / rate from its worker's start,
    // so over the whole run it can never be above rate × lifetime (+ one
    // batch of about 1 ms). The test's own wall time around the run bounds
    // the sender's lifetime from above, whatever the load: a busy machine
    // can only make the sender send less, which is not what is tested.
    let t = Instant::now();
    let (s, r) = perf(&pair, &["--udp", "--udp-rate", "100M", "-d", "2"]);
    let wall = t.elapsed().as_secs_f64();
    let sent = u(&s, "total_bytes");
    let ceiling = 100e6 / 8.0 * wall + 32.0 * 1472.0;
    assert!(
        sent > 0 && (sent as f64) <= ceiling,
        "asked 100 Mbit/s: sent {sent} B within {wall:.3} s (ceiling {ceiling:.0} B)"
    );
    assert_eq!(u(&r, "peer_total_bytes"), sent);
}

#[test]
fn rr_reports_ordered_percentiles() {
    let _g = serial();
    let pair = NsPair::new();
    let (s, r) = perf(&pair, &["--rr", "-d", "2", "-c", "2"]);
    common_checks(&s, "sender", 2.0);
    common_checks(&r, "receiver", 2.0);
    let rr = &s["rr"];
    assert!(u(rr, "transactions") > 0, "{s}");
    assert!(f(rr, "transactions_per_s") > 0.0);
    let l = &rr["latency_us"];
    let order = ["min", "p50", "p90", "p99", "p99_9", "max"].map(|k| f(l, k));
    assert!(order[0] > 0.0);
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "{l}");
    assert!(f(l, "mean") >= order[0] && f(l, "mean") <= order[5]);
    assert!(r["rr"]["latency_us"].is_null());
    // 1-byte messages both ways: bytes = 2 × transactions (± the one
    // transaction per connection that a window edge can split).
    let (b, t) = (u(&s, "bytes"), u(rr, "transactions"));
    assert!(b.abs_diff(2 * t) <= 8, "bytes {b} transactions {t}");
}

/// A netdev's byte counters inside a test namespace, read from
/// `/proc/PID/net/dev` of a process that lives there (the anchor): an
/// observer independent of `vecgate perf`, on the host's own clock.
struct NetDevCounter {
    _anchor: Bg,
    path: String,
    dev: String,
}

/// One reading: the counter was read at some instant in `[t0, t1]`
/// (CLOCK_MONOTONIC ns, read before and after the file).
#[derive(Clone, Copy, Debug)]
struct Sample {
    t0: u64,
    t1: u64,
    rx_bytes: u64,
}

fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl NetDevCounter {
    fn new(ns: &str, dev: &str) -> NetDevCounter {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, "sleep", "900"]);
        c.stdout(Stdio::null()).stderr(Stdio::null());
        let child = c.spawn().expect("spawn anchor");
        let path = format!("/proc/{}/net/dev", child.id());
        let me = NetDevCounter {
            _anchor: Bg(Some(child)),
            path,
            dev: dev.to_owned(),
        };
        // `ip netns exec` enters the namespace, then execs in place: until
        // it did, the pid's view is the host's, which has no `dev`.
        let start = Instant::now();
        while me.try_read().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "anchor never entered {ns}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        me
    }

    fn try_read(&self) -> Option<u64> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        text.lines().find_map(|l| {
            let (name, rest) = l.split_once(':')?;
            (name.trim() == self.dev).then(|| rest.split_whitespace().next()?.parse().ok())?
        })
    }

    fn sample(&self) -> Sample {
        let t0 = monotonic_ns();
        let rx_bytes = self.try_read().expect("counter");
        Sample {
            t0,
            t1: monotonic_ns(),
            rx_bytes,
        }
    }
}

/// Samples `c` every 2 ms on a thread until the returned flag is set.
fn sample_in_background(
    c: std::sync::Arc<NetDevCounter>,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<Vec<Sample>>,
) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let h = std::thread::spawn(move || {
        let mut v = Vec::new();
        while !flag.load(Ordering::Relaxed) {
            v.push(c.sample());
            std::thread::sleep(Duration::from_millis(2));
        }
        v.push(c.sample());
        v
    });
    (stop, h)
}

/// Bytes the interface counted over `[start, end]`, bounded from above by
/// the samples read wholly before and wholly after the window and from
/// below by the first and last read wholly inside it. A busy machine can
/// only widen the bounds, never make them wrong.
fn window_bounds(samples: &[Sample], start: u64, end: u64) -> Option<(u64, u64)> {
    let before = samples.iter().rev().find(|s| s.t1 <= start)?;
    let after = samples.iter().find(|s| s.t0 >= end)?;
    let mut inside = samples.iter().filter(|s| s.t0 >= start && s.t1 <= end);
    let first = inside.next()?;
    let last = inside.next_back().unwrap_or(first);
    Some((
        last.rx_bytes - first.rx_bytes,
        after.rx_bytes - before.rx_bytes,
    ))
}

/// The most payload that can sit between the interface counter and one
/// side's application at one instant, from the namespace's TCP buffer
/// maxima: the sender's socket queue (written, not yet on the veth) is at
/// most tcp_wmem's maximum; the receiver's backlog plus socket queue (on the
/// veth, not yet read) at most twice tcp_rmem's (the advertised window and
/// the queue behind it). Plus one 64 KB super-packet either way.
fn queue_slack(ns: &str, role: &str) -> u64 {
    let max = |key: &str| -> u64 {
        let o = Command::new("ip")
            .args(["netns", "exec", ns, "sysctl", "-n", key])
            .output()
            .expect("sysctl");
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .last()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key}: {o:?}"))
    };
    let q = match role {
        "sender" => max("net.ipv4.tcp_wmem"),
        _ => 2 * max("net.ipv4.tcp_rmem"),
    };
    q + 65_536
}

/// Wire bytes per payload byte, at most: Ethernet + IPv4 + TCP with
/// timestamps is 66 bytes per 1448-byte segment at MTU 1500 (1.046; GSO
/// frames carry one header per 64 KB), plus room for the odd retransmission.
const WIRE_PER_PAYLOAD: f64 = 1.06;

/// `vecgate perf` counts bytes and time correctly, judged by an independent
/// observer of the same run: the receiving veth's own byte counter, sampled
/// on CLOCK_MONOTONIC while the test runs. The whole-run totals must match
/// the counter's delta within header overhead, and each side's window
/// figure must fit the bytes the counter saw between the window edges the
/// report gives (±what socket buffers can hold). Throughput is bytes over
/// the window's length, and the window is where the report says it is.
/// Nothing here depends on how fast the machine is: a slower run moves
/// both the tool's figures and the counter's. (How `vecgate perf` and
/// iperf3 compare as tools is a `make bench` row, both pinned alike.)
#[test]
fn counts_what_the_interface_saw() {
    let _g = serial();
    let pair = NsPair::new();
    let counter = std::sync::Arc::new(NetDevCounter::new(&pair.rx, &pair.rx_dev));
    let before = counter.sample();
    let (stop, sampler) = sample_in_background(counter.clone());
    let (s, r) = perf(
        &pair,
        &[
            "-d",
            "3",
            "-l",
            "128K",
            "--warmup",
            "0.5",
            "--cooldown",
            "0.5",
        ],
    );
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().expect("sampler");
    let after = counter.sample();

    // Whole run: every payload byte crossed the veth once, with headers.
    let total = u(&r, "total_bytes");
    assert_eq!(total, u(&s, "total_bytes"), "every byte sent arrived");
    let wire = after.rx_bytes - before.rx_bytes;
    assert!(
        total <= wire && wire as f64 <= total as f64 * WIRE_PER_PAYLOAD + 1e6,
        "receiver counted {total} payload bytes, the veth {wire} wire bytes"
    );
    // This run's own header overhead (whole run), used for the windows.
    let overhead = (wire as f64 / total as f64) * 1.01;

    for (role, rep) in [("sender", &s), ("receiver", &r)] {
        let slack = queue_slack(&pair.rx, role);
        let (start, end) = (
            u(rep, "window_start_monotonic_ns"),
            u(rep, "window_end_monotonic_ns"),
        );
        assert!(before.t1 < start && start < end && end < after.t0, "{rep}");
        // Time: the window's length is the reported duration, and the
        // throughput is the window's bytes over it.
        let secs = f(rep, "duration_s");
        assert!(((end - start) as f64 / 1e9 - secs).abs() < 1e-3, "{rep}");
        let bytes = u(rep, "bytes");
        let gbps = bytes as f64 * 8.0 / secs / 1e9;
        assert!(
            (f(rep, "throughput_gbps") - gbps).abs() <= gbps * 1e-9 + 1e-12,
            "{rep}"
        );
        // Bytes: what the veth counted between the same edges.
        let (lo, hi) = window_bounds(&samples, start, end)
            .unwrap_or_else(|| panic!("{role}: no samples around the window {start}..{end}"));
        eprintln!(
            "{role}: window {bytes} B in {secs:.3} s; veth counted {lo}..{hi} B between its edges \
             ({} samples, slack {slack} B)",
            samples.len()
        );
        assert!(
            bytes <= hi + slack,
            "{role} counted {bytes} B in its window, more than the veth's {hi} B (+{slack})"
        );
        assert!(
            lo as f64 <= (bytes + slack) as f64 * overhead,
            "{role} counted {bytes} B in its window, the veth at least {lo} B wire bytes"
        );
    }
    // The sender's window is its own sleep of -d seconds, never shorter.
    assert!(f(&s, "duration_s") >= 3.0, "{s}");
}

/// The bounds logic itself: samples wholly before/after/inside the window.
#[test]
fn window_bounds_use_only_samples_on_the_right_side() {
    let s = |t0, t1, b| Sample {
        t0,
        t1,
        rx_bytes: b,
    };
    let v = [
        s(0, 5, 0),
        s(8, 12, 100), // straddles the start: neither before nor inside
        s(15, 16, 200),
        s(50, 60, 600),
        s(95, 101, 900), // straddles the end
        s(105, 106, 1000),
    ];
    assert_eq!(window_bounds(&v, 10, 100), Some((400, 1000)));
    assert_eq!(window_bounds(&v, 10, 200), None);
    assert_eq!(window_bounds(&v[1..], 10, 100), None);
}

/// NTttcp's `-r` / `-s` spellings, the human table, and the per-second
/// progress lines (forced on although stderr is a pipe here).
#[test]
fn ntttcp_flags_table_and_progress() {
    let _g = serial();
    let pair = NsPair::new();
    let recv = pair.cmd(
        &pair.rx,
        BIN,
        &["perf", "-r", "-b", RX_IP, "--timeout", "20"],
    );
    let (rx, _, _) = spawn_ready(recv, "waiting for a sender", true);
    let tx = pair
        .cmd(&pair.tx, BIN, &["perf", "-s", RX_IP, "-d", "2.2"])
        .env("VECGATE_PERF_PROGRESS", "1")
        .output()
        .expect("sender");
    assert!(
        tx.status.success(),
        "{}",
        String::from_utf8_lossy(&tx.stderr)
    );
    let rx = rx.wait(Duration::from_secs(30));
    assert!(rx.status.success());
    for (out, role) in [(&tx.stdout, "sender"), (&rx.stdout, "receiver")] {
        let t = String::from_utf8_lossy(out);
        let row = |k: &str| {
            t.lines()
                .find(|l| l.trim_start().starts_with(k))
                .unwrap_or_else(|| panic!("no `{k}` row in\n{t}"))
                .to_string()
        };
        assert!(row("role:").ends_with(role), "{t}");
        let g: f64 = row("throughput (Gbit/s):")
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("number");
        assert!(g > 0.0);
        row("cycles/byte (system):");
        row("cpu % process (sum of cores):");
        // Aligned: every colon in the same column.
        let cols: Vec<usize> = t.lines().filter_map(|l| l.find(':')).collect();
        assert!(cols.windows(2).all(|w| w[0] == w[1]), "{t}");
    }
    let progress = String::from_utf8_lossy(&tx.stderr);
    let lines = progress.lines().filter(|l| l.contains("Gbit/s")).count();
    assert!(
        lines >= 2,
        "one progress line per second expected: {progress}"
    );
}

#[test]
fn sender_without_receiver_fails_clearly() {
    let _g = serial();
    let pair = NsPair::new();
    let out = pair
        .cmd(
            &pair.tx,
            BIN,
            &["perf", "send", RX_IP, "-p", "5001", "-d", "1"],
        )
        .output()
        .expect("sender");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot connect to 10.77.0.1:5001: connection refused")
            && err.contains("is `vecgate perf receive` running there?"),
        "{err}"
    );
    // An address nobody answers: no route from tx.
    let out = pair
        .cmd(
            &pair.tx,
            BIN,
            &["perf", "send", "192.0.2.1", "-p", "5001", "--timeout", "1"],
        )
        .output()
        .expect("sender");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot connect to 192.0.2.1:5001"));
}

/// A sender that dies mid-run: the receiver says so and fails, without
/// hanging and without printing a report.
#[test]
fn receiver_fails_when_sender_dies() {
    let _g = serial();
    let pair = NsPair::new();
    let recv = pair.cmd(
        &pair.rx,
        BIN,
        &["perf", "receive", "-b", RX_IP, "--json", "--timeout", "5"],
    );
    let (rx, _, rx_err) = spawn_ready(recv, "waiting for a sender", true);
    let mut tx = pair.cmd(&pair.tx, BIN, &["perf", "send", RX_IP, "-d", "30", "-q"]);
    let tx = Bg(Some(
        tx.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sender"),
    ));
    // Mid-run: connected (however late a loaded machine starts the
    // sender), then sending for a while.
    let connected = || {
        let out = pair
            .cmd(&pair.rx, "ss", &["-Htn", "state", "established"])
            .output()
            .expect("ss");
        String::from_utf8_lossy(&out.stdout).contains(&format!("{RX_IP}:5001"))
    };
    let t0 = Instant::now();
    while !connected() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the sender never connected"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    drop(tx); // kills the sender (by its own pid)
    let out = rx.wait(Duration::from_secs(20));
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no report on failure");
    let err = rx_err.join().expect("stderr");
    assert!(err.contains("lost the sender"), "{err}");
}

#[test]
fn receiver_times_out_without_sender() {
    let _g = serial();
    let pair = NsPair::new();
    let start = Instant::now();
    let out = pair
        .cmd(
            &pair.rx,
            BIN,
            &["perf", "receive", "-b", RX_IP, "--timeout", "1", "--json"],
        )
        .output()
        .expect("receiver");
    assert!(!out.status.success());
    assert!(start.elapsed() < Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no sender connected to 10.77.0.1:5001 within 1 s"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no report on failure");
}
