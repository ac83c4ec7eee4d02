//! `vecgate perf` command line and the orchestration of both sides.

use crate::control::{self, Control, Ctl, CtlError, Mode, RunTotals, TestConfig};
use crate::cycles::{self, Cycles};
use crate::os::{self, Buf};
use crate::report::{self, Latency, Report, Role, RrReport};
use crate::shared::{self, Shared, Snapshot, Totals, COOLDOWN, MEASURE, STOP};
use crate::tcp::WorkerOut;
use crate::units::{self, parse_size};
use std::io::{IsTerminal, Read};
use std::net::{
    IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket,
};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// NTttcp-style traffic measurement: throughput, CPU %, cycles/byte.
#[derive(clap::Args, Debug)]
pub struct PerfArgs {
    #[command(subcommand)]
    pub cmd: PerfCmd,
}

#[derive(clap::Subcommand, Debug)]
pub enum PerfCmd {
    /// Wait for one sender and measure what it sends (NTttcp -r).
    #[command(short_flag = 'r')]
    Receive(ReceiveArgs),
    /// Connect to a receiver and send for the given duration (NTttcp -s).
    #[command(short_flag = 's')]
    Send(SendArgs),
    /// ESP seal/open per cipher as the graph runs them, next to
    /// `openssl speed -evp` in the same run (GB/s, cycles/byte).
    Crypto(crate::crypto::CryptoArgs),
}

/// Options both sides understand.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Control/data TCP port (UDP data uses PORT+1+thread).
    #[arg(short = 'p', long, default_value_t = 5001)]
    pub port: u16,
    /// SO_SNDBUF for data sockets (e.g. 256K); kernel default if absent.
    #[arg(long, value_parser = size_arg)]
    pub sndbuf: Option<u64>,
    /// SO_RCVBUF for data sockets (e.g. 1M); kernel default if absent.
    #[arg(long, value_parser = size_arg)]
    pub rcvbuf: Option<u64>,
    /// Pin worker threads round-robin to these CPUs (e.g. `0,1` or `0-3`).
    #[arg(long)]
    pub affinity: Option<String>,
    /// Seconds to wait for the peer (connection, handshake).
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Print the report as JSON on stdout (no progress lines).
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Use CPU time × TSC even if hardware cycle counters are available.
    #[arg(long)]
    pub no_perf_event: bool,
}

#[derive(clap::Args, Debug)]
pub struct ReceiveArgs {
    /// Address to listen on.
    #[arg(short = 'b', long, default_value = "0.0.0.0")]
    pub bind: IpAddr,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(clap::Args, Debug)]
pub struct SendArgs {
    /// Receiver host name or address.
    pub host: String,
    /// Worker threads.
    #[arg(short = 't', long, default_value_t = 1)]
    pub threads: u32,
    /// Connections per thread.
    #[arg(short = 'c', long, default_value_t = 1)]
    pub connections: u32,
    /// UDP instead of TCP.
    #[arg(long, conflicts_with = "rr")]
    pub udp: bool,
    /// Request/response mode: latency percentiles (TCP_NODELAY).
    #[arg(long)]
    pub rr: bool,
    /// Bytes per I/O (1K…256K, K/M suffixes). Default: 64K TCP, 1472 UDP, 1 RR.
    #[arg(short = 'l', long, value_parser = size_arg)]
    pub io_size: Option<u64>,
    /// Measured seconds.
    #[arg(short = 'd', long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds sent before the measured window (excluded).
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Seconds sent after the measured window (excluded).
    #[arg(long, default_value_t = 0.0)]
    pub cooldown: f64,
    /// UDP send rate over all threads, bits/s with decimal K/M/G (e.g. 500M).
    #[arg(long, value_parser = rate_arg, requires = "udp")]
    pub udp_rate: Option<f64>,
    #[command(flatten)]
    pub common: CommonArgs,
}

fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

fn rate_arg(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (
            &t[..i],
            match c.to_ascii_lowercase() {
                'k' => 1e3,
                'm' => 1e6,
                'g' => 1e9,
                _ => return Err(format!("`{s}`: use a K, M or G suffix")),
            },
        ),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a rate"))?;
    let r = v * mult;
    if r.is_finite() && r > 0.0 {
        Ok(r)
    } else {
        Err(format!("`{s}` must be a positive rate"))
    }
}

fn secs(s: f64, what: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| format!("{what} must be a non-negative number of seconds"))
}

pub fn main(args: PerfArgs) -> ExitCode {
    let r = match args.cmd {
        PerfCmd::Receive(a) => receive(a),
        PerfCmd::Send(a) => send(a),
        PerfCmd::Crypto(a) => crypto(&a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("vecgate perf: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// `vecgate perf crypto`: the table (or JSON) on stdout.
fn crypto(a: &crate::crypto::CryptoArgs) -> Result<(), String> {
    let r = crate::crypto::run(a)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", crate::crypto::render(&r));
    }
    Ok(())
}

/// One side's run state after the workers were spawned.
struct Run {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<WorkerOut>>,
    cycles: Cycles,
    progress: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
    mode: Mode,
}

impl Run {
    fn new(shared: Arc<Shared>, mode: Mode, common: &CommonArgs) -> Run {
        // Opened before any worker exists so the process counter inherits.
        let cycles = Cycles::open(common.no_perf_event);
        Run {
            shared,
            workers: Vec::new(),
            cycles,
            progress: None,
            mode,
        }
    }

    fn spawn<F>(&mut self, idx: usize, cpus: &[usize], f: F) -> Result<(), String>
    where
        F: FnOnce() -> WorkerOut + Send + 'static,
    {
        let cpu = (!cpus.is_empty()).then(|| cpus[idx % cpus.len()]);
        let h = std::thread::Builder::new()
            .name(format!("perf-{idx}"))
            .spawn(move || {
                if let Some(c) = cpu {
                    if let Err(e) = os::pin_current_thread(c) {
                        eprintln!("vecgate perf: cannot pin to CPU {c}: {e}");
                    }
                }
                f()
            })
            .map_err(|e| format!("cannot start a worker thread: {e}"))?;
        self.workers.push(h);
        Ok(())
    }

    fn start_progress(&mut self, common: &CommonArgs) {
        if common.json || common.quiet || !std::io::stderr().is_terminal() && !progress_forced() {
            return;
        }
        let done = Arc::new(AtomicBool::new(false));
        let (d, shared, mode) = (done.clone(), self.shared.clone(), self.mode);
        let h = std::thread::spawn(move || {
            let start = Instant::now();
            let mut last = (start, shared.totals());
            while !d.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let now = Instant::now();
                if now.duration_since(last.0) < Duration::from_secs(1) {
                    continue;
                }
                let t = shared.totals();
                let dt = now.duration_since(last.0).as_secs_f64();
                let mut line = format!(
                    "[{:6.1} s] {:8.3} Gbit/s",
                    now.duration_since(start).as_secs_f64(),
                    units::gbps(t.bytes.wrapping_sub(last.1.bytes), dt)
                );
                match mode {
                    Mode::Udp => {
                        line += &format!(
                            "  {:10.0} pkt/s",
                            units::per_sec(t.datagrams.wrapping_sub(last.1.datagrams), dt)
                        )
                    }
                    Mode::Rr => {
                        line += &format!(
                            "  {:10.0} trans/s",
                            units::per_sec(t.transactions.wrapping_sub(last.1.transactions), dt)
                        )
                    }
                    Mode::Tcp => {}
                }
                eprintln!("{line}");
                last = (now, t);
            }
        });
        self.progress = Some((done, h));
    }

    /// Stops the workers and collects their results.
    fn finish(&mut self) -> (Option<hdrhistogram::Histogram<u64>>, Option<String>) {
        self.shared.set_phase(STOP);
        let mut hist: Option<hdrhistogram::Histogram<u64>> = None;
        let mut first_error = None;
        for h in self.workers.drain(..) {
            let out = h.join().unwrap_or_else(|_| WorkerOut {
                error: Some("worker thread panicked".into()),
                hist: None,
            });
            if first_error.is_none() {
                first_error = out.error;
            }
            if let Some(o) = out.hist {
                match hist.as_mut() {
                    Some(h) => {
                        let _ = h.add(&o);
                    }
                    None => hist = Some(o),
                }
            }
        }
        if let Some((d, h)) = self.progress.take() {
            d.store(true, Relaxed);
            let _ = h.join();
        }
        (hist, first_error)
    }
}

fn progress_forced() -> bool {
    std::env::var_os("VECGATE_PERF_PROGRESS").is_some()
}

fn affinity(common: &CommonArgs) -> Result<Vec<usize>, String> {
    match &common.affinity {
        None => Ok(Vec::new()),
        Some(s) => units::parse_cpu_list(s, 4096).map_err(|e| format!("--affinity: {e}")),
    }
}

/// Everything a report needs besides the window.
struct ReportInput<'a> {
    role: Role,
    cfg: &'a TestConfig,
    local: String,
    peer: String,
    own: RunTotals,
    peer_totals: Option<RunTotals>,
    retrans: Option<u64>,
    hist: Option<hdrhistogram::Histogram<u64>>,
    first_error: Option<String>,
}

fn build_report(run: &Run, w: &shared::Window, i: ReportInput<'_>) -> Report {
    let ncpus = cycles::ncpus();
    let bytes = w.totals.bytes;
    let udp = i.cfg.mode == Mode::Udp;
    let (sent, received) = match (i.role, i.peer_totals) {
        (Role::Sender, Some(p)) => (i.own.datagrams, p.datagrams),
        (Role::Receiver, Some(p)) => (p.datagrams, i.own.datagrams),
        (_, None) => (0, 0),
    };
    let rr = (i.cfg.mode == Mode::Rr).then(|| RrReport {
        transactions: w.totals.transactions,
        transactions_per_s: units::per_sec(w.totals.transactions, w.secs),
        latency_us: i.hist.as_ref().and_then(Latency::from_ns),
        cycles_per_transaction_system: cycles::cycles_per_byte(
            w.cycles_system,
            w.totals.transactions,
        ),
    });
    Report {
        schema: 1,
        role: i.role,
        mode: i.cfg.mode,
        local: i.local,
        peer: i.peer,
        threads: i.cfg.threads,
        connections: i.cfg.connections,
        io_size: i.cfg.io_size,
        duration_s: w.secs,
        window_start_monotonic_ns: w.start_ns,
        window_end_monotonic_ns: w.end_ns,
        bytes,
        throughput_gbps: units::gbps(bytes, w.secs),
        throughput_mbyte_s: units::mbyte_s(bytes, w.secs),
        total_bytes: i.own.bytes,
        peer_total_bytes: i.peer_totals.map(|p| p.bytes),
        datagrams: udp.then_some(w.totals.datagrams),
        packets_per_s: udp.then(|| units::per_sec(w.totals.datagrams, w.secs)),
        total_datagrams: udp.then_some(i.own.datagrams),
        peer_total_datagrams: if udp {
            i.peer_totals.map(|p| p.datagrams)
        } else {
            None
        },
        loss_pct: if udp && i.peer_totals.is_some() {
            report::loss_pct(sent, received)
        } else {
            None
        },
        ncpus,
        cpu_pct_system: w.cpu_pct_system,
        cpu_pct_system_sum: w.cpu_pct_system_sum,
        cpu_pct_process: w.cpu_pct_process,
        cycles_method: run.cycles.method,
        tsc_hz: run.cycles.tsc_hz,
        cycles_fallback_reason: run.cycles.fallback_reason.clone(),
        cycles_system: w.cycles_system,
        cycles_process: w.cycles_process,
        cycles_per_byte_system: cycles::cycles_per_byte(w.cycles_system, bytes),
        cycles_per_byte_process: cycles::cycles_per_byte(w.cycles_process, bytes),
        tcp_retrans: i.retrans,
        errors: run.shared.errors(),
        first_error: i.first_error,
        rr,
    }
}

fn print_report(r: &Report, json: bool) {
    if json {
        match serde_json::to_string_pretty(r) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("vecgate perf: cannot encode the report: {e}"),
        }
    } else {
        print!("{}", r.table());
    }
}

fn run_totals(t: Totals) -> RunTotals {
    RunTotals {
        bytes: t.bytes,
        datagrams: t.datagrams,
        transactions: t.transactions,
    }
}

fn bufs<S: std::os::fd::AsRawFd>(s: &S, c: &CommonArgs) -> Result<(), String> {
    if let Some(b) = c.sndbuf {
        os::set_buf(s, Buf::Send, b).map_err(|e| format!("--sndbuf: {e}"))?;
    }
    if let Some(b) = c.rcvbuf {
        os::set_buf(s, Buf::Recv, b).map_err(|e| format!("--rcvbuf: {e}"))?;
    }
    Ok(())
}

mod receive;
mod send;
use receive::receive;
use send::send;

#[cfg(test)]
mod tests;
