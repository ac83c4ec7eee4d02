//! `vecgate perf` command line (being written).
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct PerfArgs {}

pub fn main(_args: PerfArgs) -> ExitCode {
    eprintln!("vecgate perf: not yet implemented");
    ExitCode::FAILURE
}
