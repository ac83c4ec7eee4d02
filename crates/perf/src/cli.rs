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
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("vecgate perf: {msg}");
            ExitCode::FAILURE
        }
    }
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

// ---------------------------------------------------------------- sender

fn connect_error(addr: SocketAddr, e: &std::io::Error) -> String {
    let why = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => "timed out".to_string(),
        _ => e.to_string(),
    };
    format!("cannot connect to {addr}: {why} — is `vecgate perf receive` running there?")
}

fn send(a: SendArgs) -> Result<(), String> {
    let mode = if a.rr {
        Mode::Rr
    } else if a.udp {
        Mode::Udp
    } else {
        Mode::Tcp
    };
    let io_size = a.io_size.unwrap_or(match mode {
        Mode::Tcp => 64 * 1024,
        Mode::Udp => 1472,
        Mode::Rr => 1,
    });
    let timeout = secs(a.common.timeout, "--timeout")?;
    let cfg = TestConfig {
        mode,
        threads: a.threads,
        connections: a.connections,
        io_size: u32::try_from(io_size).map_err(|_| "--io-size is too large".to_string())?,
        duration_ms: ms(secs(a.duration, "--duration")?),
        warmup_ms: ms(secs(a.warmup, "--warmup")?),
        cooldown_ms: ms(secs(a.cooldown, "--cooldown")?),
        token: session_token(),
    };
    cfg.validate()?;
    let cpus = affinity(&a.common)?;
    let addr = (a.host.as_str(), a.common.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", a.host))?
        .next()
        .ok_or_else(|| format!("cannot resolve {}: no address", a.host))?;
    let connect_timeout = timeout
        .min(Duration::from_secs(10))
        .max(Duration::from_millis(100));
    let ctl_stream =
        TcpStream::connect_timeout(&addr, connect_timeout).map_err(|e| connect_error(addr, &e))?;
    let local = ctl_stream
        .local_addr()
        .map(|l| l.to_string())
        .unwrap_or_default();
    let mut ctl = Control::new(ctl_stream).map_err(|e| e.to_string())?;
    ctl.send(&Ctl::Hello {
        version: control::VERSION,
        config: cfg.clone(),
    })
    .map_err(|e| e.to_string())?;
    let udp_port = match ctl.recv(Some(timeout)).map_err(|e| e.to_string())? {
        Ctl::Ready { udp_port } => udp_port,
        Ctl::Refused { reason } => return Err(format!("the receiver refused the test: {reason}")),
        other => return Err(format!("unexpected control message {other:?}")),
    };

    let nworkers = cfg.threads as usize;
    let shared = Arc::new(Shared::new(nworkers));
    let per = cfg.connections as usize;
    let mut groups: Vec<Vec<TcpStream>> = Vec::with_capacity(nworkers);
    let mut ugroups: Vec<Vec<UdpSocket>> = Vec::with_capacity(nworkers);
    for t in 0..nworkers {
        if mode == Mode::Udp {
            let port = udp_port
                .checked_add(t as u16)
                .ok_or("UDP port range overflows")?;
            let target = SocketAddr::new(addr.ip(), port);
            let any = SocketAddr::new(
                if addr.is_ipv4() {
                    Ipv4Addr::UNSPECIFIED.into()
                } else {
                    Ipv6Addr::UNSPECIFIED.into()
                },
                0,
            );
            let mut g = Vec::with_capacity(per);
            for _ in 0..per {
                let s = UdpSocket::bind(any).map_err(|e| format!("UDP socket: {e}"))?;
                s.connect(target)
                    .map_err(|e| format!("UDP connect {target}: {e}"))?;
                bufs(&s, &a.common)?;
                g.push(s);
            }
            ugroups.push(g);
        } else {
            let mut g = Vec::with_capacity(per);
            for _ in 0..per {
                let s = TcpStream::connect_timeout(&addr, connect_timeout)
                    .map_err(|e| connect_error(addr, &e))?;
                bufs(&s, &a.common)?;
                let io = |e: std::io::Error| format!("data connection: {e}");
                s.set_nodelay(mode == Mode::Rr).map_err(io)?;
                std::io::Write::write_all(&mut &s, &control::data_hello(cfg.token)).map_err(io)?;
                if mode == Mode::Tcp {
                    // tcp::send multiplexes its connections with poll(2).
                    s.set_nonblocking(true).map_err(io)?;
                } else {
                    s.set_read_timeout(Some(Duration::from_secs(1)))
                        .map_err(io)?;
                }
                g.push(s);
            }
            groups.push(g);
        }
    }
    match ctl.recv(Some(timeout)).map_err(|e| e.to_string())? {
        Ctl::Go => {}
        Ctl::Refused { reason } => return Err(format!("the receiver gave up: {reason}")),
        other => return Err(format!("unexpected control message {other:?}")),
    }

    let mut run = Run::new(shared.clone(), mode, &a.common);
    let io = cfg.io_size as usize;
    let rate = a.udp_rate.map(|r| r / nworkers as f64);
    for t in 0..nworkers {
        let sh = shared.clone();
        match mode {
            Mode::Udp => {
                let g = std::mem::take(&mut ugroups[t]);
                run.spawn(t, &cpus, move || crate::udp::send(g, io, rate, sh, t))?;
            }
            Mode::Tcp => {
                let g = std::mem::take(&mut groups[t]);
                run.spawn(t, &cpus, move || crate::tcp::send(g, io, sh, t))?;
            }
            Mode::Rr => {
                let g = std::mem::take(&mut groups[t]);
                run.spawn(t, &cpus, move || crate::rr::send(g, io, sh, t))?;
            }
        }
    }
    run.start_progress(&a.common);

    let result = sender_phases(&mut ctl, &run, &cfg);
    let (begin, end) = match result {
        Ok(v) => v,
        Err(e) => {
            run.finish();
            return Err(e);
        }
    };
    let (hist, first_error) = run.finish();
    let own = run_totals(shared.totals());
    let peer_totals = ctl
        .send(&Ctl::Stop { totals: own })
        .and_then(|()| ctl.recv(Some(timeout.max(Duration::from_secs(15)))));
    let peer_totals = match peer_totals {
        Ok(Ctl::Final { totals }) => Some(totals),
        Ok(other) => return Err(format!("unexpected control message {other:?}")),
        Err(e) => return Err(format!("no final counts from the receiver: {e}")),
    };
    let w = shared::window(&begin, &end, &run.cycles, cycles::ncpus());
    let r = build_report(
        &run,
        &w,
        ReportInput {
            role: Role::Sender,
            cfg: &cfg,
            local,
            peer: addr.to_string(),
            own,
            peer_totals,
            retrans: (mode != Mode::Udp).then(|| shared.retrans()),
            hist,
            first_error,
        },
    );
    print_report(&r, a.common.json);
    Ok(())
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn session_token() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    nanos ^ std::process::id().rotate_left(16)
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

/// Drives warmup → window → cooldown, telling the receiver each edge.
fn sender_phases(
    ctl: &mut Control,
    run: &Run,
    cfg: &TestConfig,
) -> Result<(Snapshot, Snapshot), String> {
    let e = |e: CtlError| format!("lost the receiver: {e}");
    std::thread::sleep(Duration::from_millis(cfg.warmup_ms));
    let begin = Snapshot::take(&run.shared, &run.cycles);
    run.shared.set_phase(MEASURE);
    ctl.send(&Ctl::Begin).map_err(e)?;
    std::thread::sleep(Duration::from_millis(cfg.duration_ms));
    run.shared.set_phase(COOLDOWN);
    // Snapshot before telling the receiver, as at `Begin`: the receiver
    // snapshots the edge when `End` arrives, so its edge is never earlier
    // than ours (sending first let the receiver's snapshot win the race).
    let end = Snapshot::take(&run.shared, &run.cycles);
    ctl.send(&Ctl::End).map_err(e)?;
    std::thread::sleep(Duration::from_millis(cfg.cooldown_ms));
    Ok((begin, end))
}

// -------------------------------------------------------------- receiver

/// Accepts one connection before `deadline` (polling a non-blocking
/// listener; this is the control path, not the data path).
fn accept_until(
    l: &TcpListener,
    deadline: Instant,
) -> std::io::Result<Option<(TcpStream, SocketAddr)>> {
    l.set_nonblocking(true)?;
    loop {
        match l.accept() {
            Ok((s, p)) => {
                s.set_nonblocking(false)?;
                return Ok(Some((s, p)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn receive(a: ReceiveArgs) -> Result<(), String> {
    let timeout = secs(a.common.timeout, "--timeout")?;
    let cpus = affinity(&a.common)?;
    let bind = SocketAddr::new(a.bind, a.common.port);
    let listener = TcpListener::bind(bind).map_err(|e| format!("cannot listen on {bind}: {e}"))?;
    bufs(&listener, &a.common)?;
    // On stderr even with --json (stdout stays pure JSON): scripts wait for it.
    if !a.common.quiet {
        eprintln!("vecgate perf: waiting for a sender on {bind}");
    }
    let (ctl_stream, peer) = accept_until(&listener, Instant::now() + timeout)
        .map_err(|e| format!("accept on {bind}: {e}"))?
        .ok_or_else(|| {
            format!(
                "no sender connected to {bind} within {} s (--timeout)",
                timeout.as_secs_f64()
            )
        })?;
    let local = ctl_stream
        .local_addr()
        .map(|l| l.to_string())
        .unwrap_or_default();
    let mut ctl = Control::new(ctl_stream).map_err(|e| e.to_string())?;
    let cfg = match ctl.recv(Some(timeout)).map_err(|e| e.to_string())? {
        Ctl::Hello { version, config } if version == control::VERSION => config,
        Ctl::Hello { version, .. } => {
            let reason = format!(
                "protocol version {version}, this receiver speaks {}",
                control::VERSION
            );
            let _ = ctl.send(&Ctl::Refused {
                reason: reason.clone(),
            });
            return Err(reason);
        }
        other => return Err(format!("unexpected control message {other:?}")),
    };
    if let Err(reason) = cfg.validate() {
        let _ = ctl.send(&Ctl::Refused {
            reason: reason.clone(),
        });
        return Err(format!("refused the sender's test: {reason}"));
    }
    let mode = cfg.mode;
    let nconn = (cfg.threads * cfg.connections) as usize;
    let nworkers = if mode == Mode::Udp {
        cfg.threads as usize
    } else {
        nconn
    };
    let shared = Arc::new(Shared::new(nworkers));
    let io = cfg.io_size as usize;

    let mut udp_socks = Vec::new();
    let mut udp_port = 0u16;
    if mode == Mode::Udp {
        udp_port = a.common.port.checked_add(1).ok_or("UDP port overflows")?;
        for t in 0..cfg.threads as u16 {
            let p = udp_port.checked_add(t).ok_or("UDP port overflows")?;
            let s = UdpSocket::bind(SocketAddr::new(a.bind, p))
                .map_err(|e| format!("cannot bind UDP port {p}: {e}"))?;
            bufs(&s, &a.common)?;
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .map_err(|e| e.to_string())?;
            udp_socks.push(s);
        }
    }
    ctl.send(&Ctl::Ready { udp_port })
        .map_err(|e| e.to_string())?;

    let mut data = Vec::with_capacity(nconn);
    if mode != Mode::Udp {
        let deadline = Instant::now() + timeout;
        while data.len() < nconn {
            let Some((s, _)) =
                accept_until(&listener, deadline).map_err(|e| format!("accept: {e}"))?
            else {
                let reason = format!("only {} of {nconn} data connections arrived", data.len());
                let _ = ctl.send(&Ctl::Refused {
                    reason: reason.clone(),
                });
                return Err(reason);
            };
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut h = [0u8; 8];
            if (&s).read_exact(&mut h).is_err() || !control::check_data_hello(&h, cfg.token) {
                continue; // not ours: dropped, not measured
            }
            let io_err = |e: std::io::Error| e.to_string();
            s.set_read_timeout(Some(Duration::from_secs(1)))
                .map_err(io_err)?;
            s.set_nodelay(mode == Mode::Rr).map_err(io_err)?;
            data.push(s);
        }
    }

    let mut run = Run::new(shared.clone(), mode, &a.common);
    for (i, s) in data.into_iter().enumerate() {
        let sh = shared.clone();
        if mode == Mode::Rr {
            run.spawn(i, &cpus, move || crate::rr::receive(s, io, sh, i))?;
        } else {
            run.spawn(i, &cpus, move || crate::tcp::receive(s, io, sh, i))?;
        }
    }
    for (i, s) in udp_socks.into_iter().enumerate() {
        let sh = shared.clone();
        let from = peer.ip();
        run.spawn(i, &cpus, move || crate::udp::receive(s, io, from, sh, i))?;
    }
    run.start_progress(&a.common);
    let phases = receiver_phases(&mut ctl, &run, &cfg, timeout);
    let (begin, end, peer_totals) = match phases {
        Ok(v) => v,
        Err(e) => {
            run.finish();
            return Err(e);
        }
    };
    let (hist, first_error) = run.finish();
    let own = run_totals(shared.totals());
    ctl.send(&Ctl::Final { totals: own })
        .map_err(|e| e.to_string())?;
    let w = shared::window(&begin, &end, &run.cycles, cycles::ncpus());
    let r = build_report(
        &run,
        &w,
        ReportInput {
            role: Role::Receiver,
            cfg: &cfg,
            local,
            peer: peer.to_string(),
            own,
            peer_totals: Some(peer_totals),
            retrans: None,
            hist,
            first_error,
        },
    );
    print_report(&r, a.common.json);
    Ok(())
}

/// Follows the sender's edges; after `stop`, waits for the data to drain.
fn receiver_phases(
    ctl: &mut Control,
    run: &Run,
    cfg: &TestConfig,
    timeout: Duration,
) -> Result<(Snapshot, Snapshot, RunTotals), String> {
    let longest = Duration::from_millis(cfg.warmup_ms.max(cfg.duration_ms).max(cfg.cooldown_ms));
    let wait = timeout + longest;
    ctl.send(&Ctl::Go).map_err(|e| e.to_string())?;
    let mut begin = None;
    let mut end = None;
    let peer = loop {
        match ctl.recv(Some(wait)) {
            Ok(Ctl::Begin) => {
                begin = Some(Snapshot::take(&run.shared, &run.cycles));
                run.shared.set_phase(MEASURE);
            }
            Ok(Ctl::End) => {
                run.shared.set_phase(COOLDOWN);
                end = Some(Snapshot::take(&run.shared, &run.cycles));
            }
            Ok(Ctl::Stop { totals }) => break totals,
            Ok(other) => return Err(format!("unexpected control message {other:?}")),
            Err(e) => return Err(format!("lost the sender: {e}")),
        }
    };
    drain(run, cfg, &peer);
    let end = end.unwrap_or_else(|| Snapshot::take(&run.shared, &run.cycles));
    let begin = begin.unwrap_or_else(|| end.clone());
    Ok((begin, end, peer))
}

/// TCP: the sender half-closed, so workers end at EOF (bounded wait).
/// UDP: stop when everything sent arrived or nothing arrived for 300 ms.
fn drain(run: &Run, cfg: &TestConfig, peer: &RunTotals) {
    let start = Instant::now();
    let mut last = (Instant::now(), run.shared.totals().datagrams);
    while start.elapsed() < Duration::from_secs(10) {
        if cfg.mode == Mode::Udp {
            let got = run.shared.totals().datagrams;
            if got >= peer.datagrams {
                break;
            }
            if got != last.1 {
                last = (Instant::now(), got);
            } else if last.0.elapsed() > Duration::from_millis(300) {
                break;
            }
        } else if run.workers.iter().all(|h| h.is_finished()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(subcommand)]
        cmd: Top,
    }
    #[derive(clap::Subcommand)]
    enum Top {
        Perf(PerfArgs),
    }

    fn parse(v: &[&str]) -> Result<PerfCmd, clap::Error> {
        let mut a = vec!["x", "perf"];
        a.extend_from_slice(v);
        T::try_parse_from(a).map(|t| match t.cmd {
            Top::Perf(p) => p.cmd,
        })
    }

    #[test]
    fn send_args() {
        let PerfCmd::Send(s) = parse(&[
            "send",
            "10.0.0.2",
            "-p",
            "6000",
            "-t",
            "2",
            "-c",
            "3",
            "-l",
            "256K",
            "--udp",
            "--udp-rate",
            "500M",
        ])
        .unwrap() else {
            panic!("not send")
        };
        assert_eq!(s.host, "10.0.0.2");
        assert_eq!(s.common.port, 6000);
        assert_eq!((s.threads, s.connections), (2, 3));
        assert_eq!(s.io_size, Some(256 * 1024));
        assert!(s.udp);
        assert_eq!(s.udp_rate, Some(5e8));
        assert!(parse(&["send", "h", "--udp", "--rr"]).is_err());
        assert!(
            parse(&["send", "h", "--udp-rate", "1G"]).is_err(),
            "rate needs --udp"
        );
        assert!(parse(&["send", "h", "-l", "12X"]).is_err());
    }

    #[test]
    fn ntttcp_aliases() {
        assert!(
            matches!(parse(&["-r", "-b", "127.0.0.1"]).unwrap(), PerfCmd::Receive(r) if r.bind.is_loopback())
        );
        assert!(
            matches!(parse(&["-s", "host", "--rr"]).unwrap(), PerfCmd::Send(s) if s.rr && s.host == "host")
        );
    }

    #[test]
    fn rates() {
        assert_eq!(rate_arg("1G"), Ok(1e9));
        assert_eq!(rate_arg("2.5m"), Ok(2.5e6));
        assert_eq!(rate_arg("1000"), Ok(1000.0));
        assert!(rate_arg("0").is_err());
        assert!(rate_arg("1X").is_err());
        assert!(rate_arg("").is_err());
    }
}
