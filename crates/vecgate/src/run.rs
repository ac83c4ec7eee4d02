//! `vecgate run --config F`.

use std::path::Path;
use std::process::ExitCode;

pub fn main(_config: &Path, _log_level: &str, _log_json: bool) -> ExitCode {
    eprintln!("vecgate run: not yet implemented");
    ExitCode::FAILURE
}
