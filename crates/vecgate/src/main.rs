//! `vecgate`: the gateway daemon and its command-line tools.

use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod check;
mod cli;
mod generate;
mod ha;
mod hasync;
mod notify;
mod pool;
mod reference;
mod run;

#[derive(Parser)]
#[command(
    name = "vecgate",
    version,
    about = "Userspace vector-packet-processing SDN gateway"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Validate a configuration file and report every error with its line.
    Check {
        #[arg(short, long)]
        config: PathBuf,
    },
    /// Run the gateway in the foreground.
    Run {
        #[arg(short, long)]
        config: PathBuf,
        /// Log level filter (error, warn, info, debug, trace), or RUST_LOG.
        #[arg(long, default_value = "info")]
        log_level: String,
        /// Log as JSON lines instead of text.
        #[arg(long)]
        log_json: bool,
    },
    /// NTttcp-style traffic measurement: throughput, CPU %, cycles/byte.
    Perf(vecgate_perf::cli::PerfArgs),
    /// Show the running gateway's state (through its API).
    Show {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        what: cli::Show,
    },
    /// Add or delete a static route live.
    Route {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        cmd: cli::RouteCmd,
    },
    /// Add or delete a tunnel live (gre, nvgre, vxlan, ipsec).
    Tunnel {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        cmd: cli::TunnelCmd,
    },
    /// Apply a changed configuration file live: `--config F` is validated
    /// whole, then its difference from the running configuration is
    /// applied (or refused whole when a change needs a restart).
    ///
    /// Live: interfaces added (netdev attached on every worker) and removed
    /// (netdev released), their addresses, VRF, MTU and offload switches,
    /// VRFs, routes, tunnels of every kind, static SAs (new SPIs) and IKE
    /// settings. A restart: `[gateway]` (name, workers, API, state
    /// directory), `[routing]`, `[ha]`, an interface's `host` or `driver`.
    /// Under systemd the gateway notifies RELOADING=1 and then READY=1.
    Reload {
        #[command(flatten)]
        target: cli::Target,
        /// Print the plan (+ added, - removed, ~ changed); apply nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Install, switch or delete static IPsec SAs live.
    Sa {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        cmd: cli::SaCmd,
    },
    /// High availability (VRRP): `vecgate ha switchover`.
    Ha {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        cmd: cli::HaCmd,
    },
    /// The pool of gateways on etcd (`[pool]`): show, connections, drain,
    /// rebalance.
    Pool {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        cmd: cli::PoolCmd,
    },
    /// Change a runtime switch.
    Set {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        cmd: cli::SetCmd,
    },
    /// Receive segment coalescing on or off: `vecgate rsc on|off IFACE`.
    Rsc {
        #[command(flatten)]
        target: cli::Target,
        #[arg(value_parser = ["on", "off"])]
        value: String,
        interface: String,
    },
    /// Packet trace through the graph nodes (like `vppctl trace`).
    Trace {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        cmd: cli::TraceCmd,
    },
    /// Capture frames of an interface (both directions) into a pcap file.
    Capture {
        #[command(flatten)]
        target: cli::Target,
        interface: String,
        /// Frames to capture.
        #[arg(long, default_value_t = 10)]
        count: u64,
        /// Output pcap file.
        #[arg(short = 'w', long = "write")]
        write: PathBuf,
        /// Give up after this many milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
    },
    /// Write man pages into DIR (packaging aid).
    #[command(hide = true)]
    GenMan { dir: PathBuf },
    /// Write bash, zsh and fish completions into DIR (packaging aid).
    #[command(hide = true)]
    GenCompletions { dir: PathBuf },
    /// Write the reference pages (keys, verbs, metrics, REST API) into DIR.
    #[command(hide = true)]
    GenReference { dir: PathBuf },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Check { config } => check::main(&config),
        Cmd::Run {
            config,
            log_level,
            log_json,
        } => run::main(&config, &log_level, log_json),
        Cmd::Perf(args) => vecgate_perf::cli::main(args),
        Cmd::Show { target, what } => cli::show(&target, &what),
        Cmd::Route { target, cmd } => cli::route(&target, &cmd),
        Cmd::Tunnel { target, cmd } => cli::tunnel(&target, &cmd),
        Cmd::Sa { target, cmd } => cli::sa(&target, &cmd),
        Cmd::Reload { target, dry_run } => cli::reload(&target, dry_run),
        Cmd::Ha { target, cmd } => cli::ha(&target, &cmd),
        Cmd::Pool { target, cmd } => cli::pool(&target, &cmd),
        Cmd::Set { target, cmd } => cli::set(&target, &cmd),
        Cmd::Rsc {
            target,
            value,
            interface,
        } => cli::set_switch(&target, &interface, "rsc", value == "on"),
        Cmd::Trace { target, cmd } => cli::trace(&target, &cmd),
        Cmd::Capture {
            target,
            interface,
            count,
            write,
            timeout_ms,
        } => cli::capture(&target, &interface, count, &write, timeout_ms),
        Cmd::GenMan { dir } => generate::man(Cli::command(), &dir),
        Cmd::GenCompletions { dir } => generate::completions(Cli::command(), &dir),
        Cmd::GenReference { dir } => reference::write(Cli::command(), &dir),
    }
}
