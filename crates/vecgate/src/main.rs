//! `vecgate`: the gateway daemon and its command-line tools.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod check;
mod run;
mod setup;

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
    }
}
