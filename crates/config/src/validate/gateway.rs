//! `[gateway]`: its name, the API endpoint and what guards it.

use super::{check_name, V};
use crate::model::*;

pub(super) fn check(v: &mut V<'_>) {
    let g = &v.cfg.gateway;
    let p = &v.pos.gateway;
    if let Some(m) = check_name("name", &g.name) {
        v.err(p.key("name"), "[gateway]", m);
    }
    if !(1..=64).contains(&g.workers) {
        let m = format!("workers = {} is out of range (expected 1..=64)", g.workers);
        v.err(p.key("workers"), "[gateway]", m);
    }
    if let ApiEndpoint::Unix(path) = &g.api {
        if !path.is_absolute() {
            let m = format!(
                "api unix socket path \"{}\" must be absolute",
                path.display()
            );
            v.err(p.key("api"), "[gateway]", m);
        }
    }
    // A TCP endpoint is reachable by anyone who can route to it: the API
    // refuses to run it without a bearer token.
    if matches!(g.api, ApiEndpoint::Tcp(_)) && g.api_token_file.is_none() {
        let m = format!(
            "api \"{}\" is a TCP endpoint: api_token_file (a file holding the admin bearer token) is required",
            g.api
        );
        v.err(p.key("api"), "[gateway]", m);
    }
    // Tokens cross the network only inside TLS (RFC 6750 §5.3); plain
    // HTTP only when asked for, and only on loopback.
    let tls = g.api_tls_cert_file.is_some() || g.api_tls_key_file.is_some();
    match &g.api {
        ApiEndpoint::Tcp(addr) => {
            if g.api_tls_cert_file.is_some() != g.api_tls_key_file.is_some() {
                let (have, need) = if g.api_tls_cert_file.is_some() {
                    ("api_tls_cert_file", "api_tls_key_file")
                } else {
                    ("api_tls_key_file", "api_tls_cert_file")
                };
                v.err(p.key(have), "[gateway]", format!("{have} needs {need} too"));
            }
            if tls && g.api_insecure_loopback {
                let m = "api_insecure_loopback = true with api_tls_cert_file: choose one (TLS, or plain HTTP on loopback)".to_owned();
                v.err(p.key("api_insecure_loopback"), "[gateway]", m);
            } else if !tls && !g.api_insecure_loopback {
                let m = format!(
                    "api \"{}\" is a TCP endpoint: api_tls_cert_file and api_tls_key_file are required (TLS), or api_insecure_loopback = true on a loopback address",
                    g.api
                );
                v.err(p.key("api"), "[gateway]", m);
            } else if !tls && !addr.ip().is_loopback() {
                let m = format!(
                    "api_insecure_loopback: api \"{}\" is not a loopback address (plain HTTP would carry the token over the network): configure api_tls_cert_file and api_tls_key_file",
                    g.api
                );
                v.err(p.key("api_insecure_loopback"), "[gateway]", m);
            }
        }
        ApiEndpoint::Unix(_) => {
            for (key, set) in [
                ("api_tls_cert_file", g.api_tls_cert_file.is_some()),
                ("api_tls_key_file", g.api_tls_key_file.is_some()),
                ("api_insecure_loopback", g.api_insecure_loopback),
            ] {
                if set {
                    let m = format!(
                        "{key} applies to a TCP api only (a unix socket is guarded by its permissions)"
                    );
                    v.err(p.key(key), "[gateway]", m);
                }
            }
        }
    }
    for (key, f) in g.path_keys() {
        if let Some(path) = f {
            if !path.is_absolute() {
                let m = format!("{key} \"{}\" must be an absolute path", path.display());
                v.err(p.key(key), "[gateway]", m);
            }
        }
    }
    if g.api_readonly_token_file.is_some() && g.api_token_file.is_none() {
        let m = "api_readonly_token_file needs api_token_file too".to_owned();
        v.err(p.key("api_readonly_token_file"), "[gateway]", m);
    }
}
