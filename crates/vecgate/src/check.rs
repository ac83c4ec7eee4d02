//! `vecgate check --config F`: validate a configuration like a compiler would.
//!
//! Exit status: 0 valid, 1 invalid (every problem printed as `F:LINE: message`
//! on stderr), 2 the file could not be read.

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use vecgate_config::{Config, LoadError, SaDirection, TunnelKind};
use vecgate_ipsec::seqstore::{resume, KeyId, SaIdentity, Store};

pub fn main(config: &Path) -> ExitCode {
    match vecgate_config::load(config) {
        Ok(cfg) => {
            let text = std::fs::read_to_string(config).unwrap_or_default();
            let (mut errors, mut notes) = secrets(&cfg, &text);
            let (state_notes, state_errors) = state_checks(&cfg);
            errors.extend(state_errors.into_iter().map(|e| (None, e)));
            notes.extend(state_notes);
            for (line, e) in &errors {
                match line {
                    Some(n) => eprintln!("{}:{n}: {e}", config.display()),
                    None => eprintln!("{}: {e}", config.display()),
                }
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
fn secrets(cfg: &Config, text: &str) -> (Vec<(Option<usize>, String)>, Vec<String>) {
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    // `r`'s errors are whole sentences naming the file; they point at the
    // line that names it.
    let mut judge = |key: &str, path: &Path, r: Result<(), String>| {
        let Err(e) = r else { return };
        if std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            notes.push(format!(
                "{key} {}: not found here, not checked (vecgate run reads it)",
                path.display()
            ));
        } else if !errors.iter().any(|(_, x)| *x == e) {
            errors.push((line_naming(text, key, path), e));
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
    if let Some(y) = cfg.ha.as_ref().and_then(|h| h.sync.as_ref()) {
        judge(
            "sync_key_file",
            &y.key_file,
            crate::hasync::read_key(y).map(drop),
        );
    }
    for t in &cfg.tunnels {
        let Some(x) = &t.ipsec else { continue };
        for sa in &x.sas {
            let r = vecgate_ipsec::keys::read_key(sa, &t.name).map(drop);
            judge("key_file", &sa.key_file, r);
        }
        if let Some(k) = &x.ike {
            if k.uses_psk() {
                let r = vecgate_keying::ike::read_psk(&k.psk_file, &t.name).map(drop);
                judge("psk_file", &k.psk_file, r);
            }
            // Certificates, keys, CAs and CRLs read as the gateway will,
            // each file on its own (a missing one is only noted), then
            // together (the key must be the certificate's, the local
            // identity in it).
            let files = vecgate_keying::ike::auth_files(k);
            // The file of the key an error names (a certificate judged
            // alone is read with its key, which may be the one at fault).
            let file_of = |key: &str, or: &'_ Path| -> std::path::PathBuf {
                let p = files.iter().find(|(k, p)| {
                    *k == key && (key != "ca_files" && key != "crl_files" || *p == or)
                });
                p.map_or(or, |(_, p)| *p).to_path_buf()
            };
            for (key, path) in &files {
                if let Err((k2, e)) = vecgate_keying::ike::auth_of(&only(k, key, path), &t.name) {
                    judge(k2, &file_of(k2, path), Err(e));
                }
            }
            if files.iter().all(|(_, p)| p.exists()) {
                if let Err((key, e)) = vecgate_keying::ike::auth_of(k, &t.name) {
                    let first = files.iter().find(|(k, _)| *k == key).map(|(_, p)| *p);
                    judge(key, &file_of(key, first.unwrap_or(Path::new(""))), Err(e));
                }
            }
        }
    }
    (errors, notes)
}

/// `s` with only the file `path` of `key` to read (each file judged by
/// itself, so every bad one is reported). A certificate file alone is
/// judged with its key and the reverse.
fn only(s: &vecgate_config::IkeSettings, key: &str, path: &Path) -> vecgate_config::IkeSettings {
    use vecgate_config::IkeAuth;
    let mut o = s.clone();
    let ours = matches!(key, "cert_file" | "key_file");
    if !ours {
        o.auth = IkeAuth::Psk;
        o.ca_files.retain(|p| p == path);
        o.crl_files.retain(|p| p == path);
        o.remote_cert_file = o.remote_cert_file.filter(|p| p == path);
    }
    o.remote_auth = Some(if ours { IkeAuth::Psk } else { IkeAuth::Pubkey });
    o
}

/// The line of the configuration that names `path` as the value of `key`
/// (the first line holding both), for a compiler-like `F:LINE:` message.
fn line_naming(text: &str, key: &str, path: &Path) -> Option<usize> {
    let quoted = format!("\"{}\"", path.display());
    let lines: Vec<&str> = text.lines().collect();
    let at = |want_key: bool| {
        lines
            .iter()
            .position(|l| l.contains(&quoted) && (!want_key || l.contains(key)))
    };
    at(true).or_else(|| at(false)).map(|i| i + 1)
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

/// What the configuration file alone cannot say: the state directory
/// (missing, unwritable: an error when static SAs need it) and the static
/// SAs' keys — one key, one SA, compared by key hash across the file and
/// against the records of the state directory (a start would refuse the
/// same). Key files that cannot be read here are left to `vecgate run`.
/// Returns (notes, errors).
fn state_checks(cfg: &Config) -> (Vec<String>, Vec<String>) {
    let mut notes = Vec::new();
    let mut errors = Vec::new();
    let dir = cfg.gateway.state_dir();
    let needed = vecgate_ipsec::sastate::has_static_sas(cfg);
    match Store::check(&dir) {
        Ok(None) => {}
        Ok(Some(n)) => notes.push(format!("[gateway] state_dir: {n}")),
        Err(e) if needed => errors.push(format!(
            "[gateway] state_dir: {e} (static SAs keep their sequence numbers and replay windows there)"
        )),
        Err(e) => notes.push(format!(
            "[gateway] state_dir: {e} (needed only by static SAs)"
        )),
    }
    let mut by_file: HashMap<&Path, SaIdentity> = HashMap::new();
    let mut by_key: HashMap<KeyId, SaIdentity> = HashMap::new();
    for t in cfg.tunnels.iter().filter(|t| t.kind == TunnelKind::Ipsec) {
        let Some(x) = t.ipsec.as_ref().filter(|x| x.ike.is_none()) else {
            continue;
        };
        for sa in &x.sas {
            let id = SaIdentity {
                tunnel: t.name.clone(),
                outbound: sa.direction == SaDirection::Out,
                spi: sa.spi,
            };
            if let Some(other) = by_file.insert(&sa.key_file, id.clone()) {
                errors.push(format!(
                    "{id}: key_file {} is also the key of {other} (one key, one SA: a key shared by two SAs repeats AES-GCM/ChaCha20 nonces)",
                    sa.key_file.display()
                ));
                continue;
            }
            let Ok(key) = vecgate_ipsec::keys::read_key(sa, &t.name) else {
                continue;
            };
            let Ok(alg) = sa.algorithm.as_str().parse() else {
                continue;
            };
            let k = KeyId::of(alg, &key);
            if let Some(other) = by_key.insert(k, id.clone()) {
                errors.push(format!(
                    "{id}: key_file {} holds the same key as {other} (one key, one SA: compared by key hash)",
                    sa.key_file.display()
                ));
                continue;
            }
            if let Err(e) = resume(&id, Store::peek(&dir, &k), &Store::path_in(&dir, &k)) {
                errors.push(e.to_string());
            }
        }
    }
    (notes, errors)
}
