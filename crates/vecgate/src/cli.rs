//! The operator's verbs (`vecgate show …`, `route`, `tunnel`, `sa`, `ha`, `pool`,
//! `set`, `rsc`, `trace`, `capture`, `reload`): each is one or two
//! requests to the management API, printed as aligned tables like `ip` /
//! `vppctl`, or as the API's JSON with `--json`. A file per concept; the
//! answers are read as the API's own model types
//! ([`vecgate_control::model`]).

pub mod client;
mod ha;
mod inspect;
mod interface;
mod pool;
mod reload;
mod route;
mod sa;
mod show;
mod table;
mod tunnel;

pub use ha::{ha, HaCmd};
pub use inspect::{capture, trace, TraceCmd};
pub use interface::{set, set_switch, SetCmd};
pub use pool::{pool, PoolCmd};
pub use reload::reload;
pub use route::{route, RouteCmd};
pub use sa::{sa, SaCmd};
pub use show::{show, Show};
pub use tunnel::{tunnel, TunnelCmd};

use client::Client;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use vecgate_config::ApiEndpoint;

/// How to reach the daemon (global options).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Target {
    /// API endpoint: unix:/path, tcp:ADDR:PORT, or a socket path.
    #[arg(long, global = true)]
    pub api: Option<String>,
    /// Find the endpoint (and token file) in this configuration.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// File holding the bearer token (TCP endpoints).
    #[arg(long, global = true)]
    pub token_file: Option<PathBuf>,
    /// PEM CA (or the gateway's self-signed certificate) to check a TCP
    /// endpoint's TLS certificate against; also VECGATE_API_CA_FILE. With
    /// --config, the configuration's api_tls_cert_file is trusted.
    /// Without any, a TCP endpoint is spoken to in plain HTTP (a gateway
    /// with api_insecure_loopback).
    #[arg(long, global = true)]
    pub ca_file: Option<PathBuf>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

pub(crate) fn resolve(t: &Target) -> Result<Client, String> {
    let mut token = t.token_file.clone();
    let mut ca = t
        .ca_file
        .clone()
        .or_else(|| std::env::var_os("VECGATE_API_CA_FILE").map(PathBuf::from));
    let endpoint = if let Some(a) = &t.api {
        if a.starts_with("unix:") || a.starts_with("tcp:") {
            a.parse::<ApiEndpoint>()?
        } else {
            ApiEndpoint::Unix(PathBuf::from(a))
        }
    } else if let Some(c) = &t.config {
        let cfg = vecgate_config::load(c).map_err(|e| e.to_string())?;
        if token.is_none() {
            token = cfg.gateway.api_token_file.clone();
        }
        if ca.is_none() {
            ca = cfg.gateway.api_tls_cert_file.clone();
        }
        cfg.gateway.api
    } else {
        ApiEndpoint::Unix(client::default_socket(Path::new("/run/vecgate"))?)
    };
    Client::new(endpoint, token.as_deref(), ca.as_deref())
}

pub(crate) fn json(r: &client::Response) -> Result<Value, String> {
    serde_json::from_slice(&r.body).map_err(|e| format!("bad JSON from the API: {e}"))
}

/// An answer of the API as its model type `T`.
fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, String> {
    T::deserialize(v).map_err(|e| format!("unexpected answer from the API: {e}"))
}

fn print_or_json(t: &Target, v: &Value, text: impl FnOnce(&Value) -> String) {
    if t.json {
        println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
    } else {
        print!("{}", text(v));
    }
}

fn finish(r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vecgate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn enc(x: &str) -> String {
    let mut o = String::new();
    for b in x.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~:".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::enc;

    #[test]
    fn paths_are_percent_encoded() {
        assert_eq!(enc("10.0.0.0/8"), "10.0.0.0%2F8");
    }
}
