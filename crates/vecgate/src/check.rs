//! `vecgate check --config F`: validate a configuration like a compiler would.
//!
//! Exit status: 0 valid, 1 invalid (every problem printed as `F:LINE: message`
//! on stderr), 2 the file could not be read.

use std::path::Path;
use std::process::ExitCode;
use vecgate_config::{Config, LoadError, TunnelKind};

pub fn main(config: &Path) -> ExitCode {
    match vecgate_config::load(config) {
        Ok(cfg) => {
            println!("{}: {}", config.display(), summary(&cfg));
            ExitCode::SUCCESS
        }
        Err(LoadError::Invalid { path, diagnostics }) => {
            for d in &diagnostics {
                eprintln!("{}:{}: {}", path.display(), d.line, d.message);
            }
            eprintln!(
                "{}: {} error{}",
                path.display(),
                diagnostics.len(),
                if diagnostics.len() == 1 { "" } else { "s" }
            );
            ExitCode::from(1)
        }
        Err(e @ LoadError::Io { .. }) => {
            eprintln!("vecgate check: {e}");
            ExitCode::from(2)
        }
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One paragraph: what the gateway would run.
fn summary(cfg: &Config) -> String {
    let by_kind: Vec<String> = TunnelKind::ALL
        .iter()
        .filter_map(|k| {
            let n = cfg.tunnels.iter().filter(|t| t.kind == *k).count();
            (n > 0).then(|| format!("{n} {k}"))
        })
        .collect();
    let tunnels = if by_kind.is_empty() {
        plural(0, "tunnel", "tunnels")
    } else {
        format!(
            "{} ({})",
            plural(cfg.tunnels.len(), "tunnel", "tunnels"),
            by_kind.join(", ")
        )
    };
    let vrfs = cfg.vrfs();
    format!(
        "configuration OK: gateway \"{}\" with {}, {}, {}, {} ({}), {}, api {}.",
        cfg.gateway.name,
        plural(cfg.interfaces.len(), "interface", "interfaces"),
        tunnels,
        plural(cfg.routes.len(), "route", "routes"),
        plural(vrfs.len(), "VRF", "VRFs"),
        vrfs.join(", "),
        plural(cfg.gateway.workers, "worker", "workers"),
        cfg.gateway.api,
    )
}
