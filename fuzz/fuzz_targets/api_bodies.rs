//! The REST API's JSON bodies through the handlers themselves: up to four
//! requests per input (separated by 0xff; each one's first byte picks the
//! endpoint, the rest is its body or query) go through
//! `vecgate_control::api::router` (axum's JSON extraction, the handlers'
//! object check and typed decoding, `Control`'s validation against a
//! running configuration, and the table swap) on a fresh gateway state.
//! Nothing may panic or answer 5xx; every refusal is a JSON error naming a
//! field; the running configuration always passes the one validator; an
//! accepted inline key never comes back in an answer.
#![no_main]

use axum::body::Body;
use axum::http::Request;
use dataplane::fib::Prefix;
use dataplane::tables::{SharedTables, TablesBuilder};
use http_body_util::BodyExt;
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};
use tower::ServiceExt;
use vecgate_control::state::ApiError;
use vecgate_control::{Auth, Capabilities, Control, Dataplane, KeySource, NetdevFacts, SaOps};

const CFG: &str = r#"
[gateway]
name = "fuzz"
api = "unix:/tmp/unused.sock"

[[interface]]
name = "wan"
host = "veth0"
driver = "af_packet"
addresses = ["192.0.2.1/24", "2001:db8::1/64"]

[[interface]]
name = "lan"
host = "veth1"
driver = "af_packet"
vrf = "red"
addresses = ["10.1.0.1/24"]

[[tunnel]]
name = "g1"
kind = "gre"
local = "192.0.2.1"
remote = "192.0.2.2"
vrf = "red"
addresses = ["172.16.0.1/30"]

[[route]]
prefix = "10.9.0.0/16"
via = "10.1.0.254"
vrf = "red"
"#;

/// Registers tunnels (the fuzzer reaches what comes after the registry:
/// table swap, running configuration, as a live gateway would) and
/// refuses single SA changes as a gateway without that SA would (409):
/// the SA requests are parsed, validated and their key files read first.
struct Ops;

impl SaOps for Ops {
    fn install_inbound(
        &self,
        _: &vecgate_config::Tunnel,
        _: &vecgate_config::StaticSa,
        _: KeySource<'_>,
    ) -> Result<(), ApiError> {
        Err(ApiError::new(
            409,
            "no SA registry in the fuzz target",
            None,
        ))
    }
    fn switch_outbound(
        &self,
        _: &vecgate_config::Tunnel,
        _: &vecgate_config::StaticSa,
        _: KeySource<'_>,
    ) -> Result<u32, ApiError> {
        Err(ApiError::new(
            409,
            "no SA registry in the fuzz target",
            None,
        ))
    }
    fn remove_inbound(&self, spi: u32) -> Result<String, ApiError> {
        Err(ApiError::not_found("spi", format!("no SA {spi:#x}")))
    }
    fn add_tunnel(
        &self,
        _: &vecgate_config::Config,
        _: &vecgate_config::Tunnel,
        _: &[KeySource<'_>],
        _: Option<&[u8]>,
    ) -> Result<(), ApiError> {
        Ok(())
    }
    fn start_tunnel(&self, _: &str) {}
    fn stop_tunnel(&self, _: &str) {}
    fn remove_tunnel(&self, _: &str) -> Result<(), ApiError> {
        Ok(())
    }
}

fn build(cfg: &vecgate_config::Config) -> Result<dataplane::tables::Tables, String> {
    let mut b = TablesBuilder::new();
    for (i, ifc) in cfg.interfaces.iter().enumerate() {
        let a: Vec<Prefix> = ifc
            .addresses
            .iter()
            .filter_map(|a| Prefix::new(a.addr, a.prefix_len).ok())
            .collect();
        b.add_interface(i as u16, &ifc.name, [2, 0, 0, 0, 0, i as u8], 1500, 0, &a);
    }
    b.build().map_err(|e| e.to_string())
}

fn base() -> &'static vecgate_config::Config {
    static CFG_ONCE: OnceLock<vecgate_config::Config> = OnceLock::new();
    CFG_ONCE.get_or_init(|| vecgate_config::parse(CFG).expect("the fuzz base config parses"))
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

fn control() -> Arc<Control> {
    let cfg = base().clone();
    let tables = SharedTables::new(build(&cfg).expect("the base tables build"));
    let nd = NetdevFacts {
        mac: [2, 0, 0, 0, 0, 1],
        mtu: 1500,
        offloads: false,
    };
    let dp = Dataplane {
        tables,
        build: Box::new(
            |c: &vecgate_config::Config, _: &vecgate_control::learned::Learned| build(c),
        ),
        counters: Vec::new(),
        mailboxes: Vec::new(),
        netdevs: vec![nd, nd],
        sas: None,
        sa_ops: Some(Box::new(Ops)),
    };
    Control::new(cfg, dp, Capabilities { tunnels: true })
}

/// Percent-encodes a query or path segment (the fuzzer's bytes must make
/// a valid URI; axum's own decoding is what is under test).
fn encode(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 3);
    for &c in b {
        if c.is_ascii_alphanumeric() || b"-._~=&".contains(&c) {
            s.push(c as char);
        } else {
            s.push_str(&format!("%{c:02X}"));
        }
    }
    s
}

/// The inline keys (`"key": "<hex>"`) a body holds, at any depth.
fn keys(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match x {
                    serde_json::Value::String(s) if k == "key" && s.len() >= 16 => {
                        out.push(s.clone())
                    }
                    _ => keys(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
        _ => {}
    }
}

async fn call(app: &axum::Router, sel: u8, rest: &[u8]) {
    let (method, uri, body): (&str, String, Option<&[u8]>) = match sel % 10 {
        0 => ("POST", "/routes".into(), Some(rest)),
        1 => ("DELETE", format!("/routes?{}", encode(rest)), None),
        2 => ("POST", "/tunnels".into(), Some(rest)),
        3 => ("DELETE", format!("/tunnels/{}", encode(rest)), None),
        4 => ("PATCH", "/interfaces/lan".into(), Some(rest)),
        5 => ("POST", "/sas".into(), Some(rest)),
        6 => ("POST", "/tunnels/t1/switch".into(), Some(rest)),
        7 => ("POST", "/trace".into(), Some(rest)),
        8 => ("POST", "/capture".into(), Some(rest)),
        _ => ("GET", format!("/routes?{}", encode(rest)), None),
    };
    let mut r = Request::builder().method(method).uri(&uri);
    if body.is_some() {
        r = r.header("content-type", "application/json");
    }
    let Ok(req) = r.body(body.map_or_else(Body::empty, |b| Body::from(b.to_vec()))) else {
        return;
    };
    let resp = app.clone().oneshot(req).await.expect("infallible router");
    let st = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .expect("a body in memory")
        .to_bytes();
    assert!(
        st < 500,
        "{method} {uri}: {st} {:?}",
        String::from_utf8_lossy(&bytes)
    );
    if st >= 400 {
        // The one error shape: {"error": "...", "field": "..."}.
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("errors are JSON");
        assert!(v["error"].is_string(), "{v}");
        if st == 400 {
            assert!(
                v["field"].as_str().is_some_and(|f| !f.is_empty()),
                "a 400 names its field: {v}"
            );
        }
    } else if let Some(b) = body {
        // Accepted: the answer never holds the request's key material.
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(b) {
            let mut ks = Vec::new();
            keys(&v, &mut ks);
            let text = String::from_utf8_lossy(&bytes);
            for k in ks {
                assert!(!text.contains(&k), "{method} {uri} echoed its key");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let ctl = control();
    let app = vecgate_control::api::router(ctl.clone(), Auth::None);
    runtime().block_on(async {
        for req in data.split(|&b| b == 0xff).take(4) {
            let Some((&sel, rest)) = req.split_first() else {
                continue;
            };
            call(&app, sel, rest).await;
            let problems = vecgate_config::validate(&ctl.config());
            assert!(
                problems.is_empty(),
                "the running configuration stopped validating: {problems:?}"
            );
        }
    });
});
