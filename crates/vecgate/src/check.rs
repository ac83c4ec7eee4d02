//! `vecgate check --config F`.

use std::path::Path;
use std::process::ExitCode;

pub fn main(_config: &Path) -> ExitCode {
    eprintln!("vecgate check: not yet implemented");
    ExitCode::FAILURE
}
