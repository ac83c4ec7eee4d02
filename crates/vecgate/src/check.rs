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
            let (errors, notes) = secrets(&cfg);
            for e in &errors {
                eprintln!("{}: {e}", config.display());
            }
            if !errors.is_empty() {
                eprintln!(
                    "{}: {}",
                    config.display(),
                    plural(errors.len(), "error", "errors")
                );
                return ExitCode::from(1);
            }
            println!("{}: {}", config.display(), summary(&cfg));
            for n in &notes {
                println!("{}: note: {n}", config.display());
            }
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

/// Checks the secret files the configuration names (API tokens, ESP key
/// files, IKE PSK files) as `vecgate run` will read them: private regular
/// files, tokens of at least 32 bytes, keys of the algorithm's length.
/// A file that does not exist here is only noted (the configuration may be
/// checked on another machine than the gateway's); anything else wrong is
/// an error. Returns (errors, notes).
fn secrets(cfg: &Config) -> (Vec<String>, Vec<String>) {
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    // `r`'s errors are whole sentences naming the file.
    let mut judge = |key: &str, path: &Path, r: Result<(), String>| {
        let Err(e) = r else { return };
        if std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            notes.push(format!(
                "{key} {}: not found here, not checked (vecgate run reads it)",
                path.display()
            ));
        } else {
            errors.push(e);
        }
    };
    let g = &cfg.gateway;
    if matches!(g.api, vecgate_config::ApiEndpoint::Tcp(_)) {
        for (key, path) in [
            ("api_token_file", &g.api_token_file),
            ("api_readonly_token_file", &g.api_readonly_token_file),
        ] {
            if let Some(p) = path {
                let r = vecgate_control::Token::from_file(p)
                    .map(drop)
                    .map_err(|e| format!("[gateway] {key}: {e}"));
                judge(key, p, r);
            }
        }
    }
    if let (Some(c), Some(k)) = (&g.api_tls_cert_file, &g.api_tls_key_file) {
        let r = vecgate_control::Tls::from_files(c, k)
            .map(drop)
            .map_err(|e| format!("[gateway] {e}"));
        let missing = [c, k]
            .into_iter()
            .find(|p| std::fs::symlink_metadata(p).is_err());
        judge(
            "api_tls_cert_file / api_tls_key_file",
            missing.unwrap_or(k),
            r,
        );
    }
    for t in &cfg.tunnels {
        let Some(x) = &t.ipsec else { continue };
        for sa in &x.sas {
            let r = vecgate_ipsec::keys::read_key(sa, &t.name).map(drop);
            judge("key_file", &sa.key_file, r);
        }
        if let Some(k) = &x.ike {
            let r = crate::ike::read_psk(&k.psk_file, &t.name).map(drop);
            judge("psk_file", &k.psk_file, r);
        }
    }
    (errors, notes)
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
