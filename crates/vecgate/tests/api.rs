//! The management API against a real gateway in namespaces:
//!
//!   h1 (10.1.0.2) ── gw-h1 [vecgate] gw-h2 ── h2 (10.2.0.2)
//!
//! Requests are made with curl inside the gateway's namespace (a TCP API
//! on the namespace's loopback, or the unix socket).

mod common;

use common::{unique, veth, wait_until, Gateway, Netns};
use serde_json::Value;

struct Topo {
    h1: Netns,
    h2: Netns,
    gw: Netns,
}

fn topo() -> Topo {
    let t = Topo {
        h1: Netns::new("h1"),
        h2: Netns::new("h2"),
        gw: Netns::new("gw"),
    };
    veth(&t.h1, "eth0", &t.gw, "gw-h1");
    veth(&t.h2, "eth0", &t.gw, "gw-h2");
    t.h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    t.h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    t
}

fn interfaces() -> &'static str {
    r#"
[[interface]]
name = "site-a"
host = "gw-h1"
driver = "af_packet"
addresses = ["10.1.0.1/24"]

[[interface]]
name = "site-b"
host = "gw-h2"
driver = "af_packet"
addresses = ["10.2.0.1/24"]
"#
}

/// Token files, removed on drop.
struct Tokens {
    admin: std::path::PathBuf,
    ro: std::path::PathBuf,
}

impl Tokens {
    fn new() -> Tokens {
        let dir = std::env::temp_dir();
        let t = Tokens {
            admin: dir.join(format!("{}.admin", unique("tok"))),
            ro: dir.join(format!("{}.ro", unique("tok"))),
        };
        std::fs::write(&t.admin, "admin-0123456789\n").unwrap();
        std::fs::write(&t.ro, "reader-0123456789\n").unwrap();
        t
    }
}

impl Drop for Tokens {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.admin);
        let _ = std::fs::remove_file(&self.ro);
    }
}

/// curl in namespace `ns`: returns (status, body). `base` is a URL prefix,
/// optionally preceded by curl options ("--unix-socket P http://x").
fn curl(
    ns: &str,
    base: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, String) {
    let (pre, url) = base.rsplit_once(' ').unwrap_or(("", base));
    let mut cmd = format!("curl -s -m 20 -w '\\n%{{http_code}}' -X {method} {pre} '{url}{path}'");
    if let Some(t) = token {
        cmd.push_str(&format!(" -H 'Authorization: Bearer {t}'"));
    }
    if let Some(b) = body {
        cmd.push_str(&format!(
            " -H 'Content-Type: application/json' --data '{b}'"
        ));
    }
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c", &cmd])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (b, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), b.to_owned())
}

fn field(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["field"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[test]
fn tcp_api_tokens_crud_and_config_round_trip() {
    let t = topo();
    let tok = Tokens::new();
    let cfg = format!(
        "[gateway]\nname = \"api\"\napi = \"tcp:127.0.0.1:9191\"\napi_token_file = \"{}\"\napi_readonly_token_file = \"{}\"\n{}\n[[route]]\nprefix = \"10.9.0.0/16\"\nvia = \"10.2.0.2\"\n",
        tok.admin.display(),
        tok.ro.display(),
        interfaces()
    );
    let mut gw = Gateway::start(&t.gw, &cfg);
    let base = "http://127.0.0.1:9191";
    let admin = Some("admin-0123456789");
    let ro = Some("reader-0123456789");
    let c =
        |m: &str, p: &str, b: Option<&str>, tk: Option<&str>| curl(&t.gw.name, base, m, p, b, tk);

    // The document is public; everything else needs a token.
    let (st, doc) = c("GET", "/openapi.json", None, None);
    assert_eq!(st, 200);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    for p in [
        "/interfaces",
        "/vrfs",
        "/routes",
        "/neighbors",
        "/tunnels",
        "/sas",
        "/counters",
        "/config",
        "/trace",
        "/capture",
        "/metrics",
    ] {
        assert!(
            doc["paths"][p].is_object(),
            "{p} missing from the OpenAPI document"
        );
    }
    let before = c("GET", "/config", None, admin).1;
    let add = r#"{"vrf":"default","prefix":"10.8.0.0/24","via":"site-b"}"#;
    assert_eq!(c("GET", "/routes", None, None).0, 401);
    assert_eq!(c("GET", "/routes", None, Some("wrong")).0, 401);
    assert_eq!(c("POST", "/routes", Some(add), None).0, 401);
    assert_eq!(c("POST", "/routes", Some(add), Some("wrong")).0, 401);
    assert_eq!(c("POST", "/routes", Some(add), ro).0, 403);
    assert_eq!(
        c("PATCH", "/interfaces/site-a", Some(r#"{"rsc":false}"#), ro).0,
        403
    );
    assert_eq!(c("DELETE", "/routes?prefix=10.9.0.0/16", None, ro).0, 403);
    assert_eq!(
        c("GET", "/config", None, admin).1,
        before,
        "refused requests changed nothing"
    );
    assert_eq!(c("GET", "/routes", None, ro).0, 200);

    // Routes: create, read, delete, bad input.
    assert_eq!(c("POST", "/routes", Some(add), admin).0, 201);
    let (_, routes) = c("GET", "/routes?vrf=default", None, admin);
    assert!(
        routes.contains("10.8.0.0/24") && routes.contains("10.9.0.0/16"),
        "{routes}"
    );
    for (body, code, f) in [
        (add, 409, "prefix"),
        (r#"{"prefix":"10.7.0.1/24","via":"site-b"}"#, 400, "prefix"),
        (r#"{"prefix":"10.7.0.0/24","via":"nowhere"}"#, 400, "via"),
        (r#"{"prefix":"banana","via":"site-b"}"#, 400, "prefix"),
        (r#"{"prefix":"10.7.0.0/24"}"#, 400, "via"),
        (
            r#"{"vrf":"","prefix":"10.7.0.0/24","via":"site-b"}"#,
            400,
            "vrf",
        ),
    ] {
        let (st, b) = c("POST", "/routes", Some(body), admin);
        assert_eq!((st, field(&b)), (code, f.to_owned()), "{body}: {b}");
    }
    assert_eq!(
        c(
            "DELETE",
            "/routes?vrf=default&prefix=10.8.0.0/24",
            None,
            admin
        )
        .0,
        204
    );
    let (st, b) = c(
        "DELETE",
        "/routes?vrf=default&prefix=10.8.0.0/24",
        None,
        admin,
    );
    assert_eq!((st, field(&b)), (404, "prefix".to_owned()));

    // Interfaces: list, get, patch, bad input, unsupported create.
    let (st, b) = c("GET", "/interfaces", None, admin);
    assert_eq!(st, 200);
    let ifs: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(ifs.as_array().unwrap().len(), 2);
    assert_eq!(c("GET", "/interfaces/nope", None, admin).0, 404);
    let (st, b) = c(
        "PATCH",
        "/interfaces/site-a",
        Some(r#"{"rsc":false}"#),
        admin,
    );
    assert_eq!(st, 200, "{b}");
    assert_eq!(serde_json::from_str::<Value>(&b).unwrap()["rsc"], false);
    let (st, b) = c("PATCH", "/interfaces/site-a", Some(r#"{"mtu":10}"#), admin);
    assert_eq!((st, field(&b)), (400, "mtu".to_owned()));
    let (st, b) = c(
        "PATCH",
        "/interfaces/site-a",
        Some(r#"{"rsc":"yes"}"#),
        admin,
    );
    assert_eq!((st, field(&b)), (400, "rsc".to_owned()), "{b}");
    assert_eq!(c("POST", "/interfaces", Some("{}"), admin).0, 409);

    // Tunnels (listed from the config; creation needs the overlay dataplane),
    // SAs, VRFs, counters, trace, metrics.
    assert_eq!(c("GET", "/tunnels", None, admin), (200, "[]".to_owned()));
    let (st, b) = c(
        "POST",
        "/tunnels",
        Some(r#"{"name":"t1","kind":"gre","local":"10.2.0.1","remote":"nope"}"#),
        admin,
    );
    assert_eq!((st, field(&b)), (400, "remote".to_owned()));
    let (st, b) = c(
        "POST",
        "/tunnels",
        Some(r#"{"name":"t1","kind":"bogus","local":"10.2.0.1","remote":"10.2.0.2"}"#),
        admin,
    );
    assert_eq!((st, field(&b)), (400, "kind".to_owned()));
    assert_eq!(c("DELETE", "/tunnels/none", None, admin).0, 404);
    assert_eq!(c("GET", "/sas", None, admin), (200, "[]".to_owned()));
    let (_, v) = c("GET", "/vrfs", None, admin);
    assert!(v.contains("\"default\""), "{v}");
    let (st, b) = c("POST", "/trace", Some(r#"{"count":0}"#), admin);
    assert_eq!((st, field(&b)), (400, "count".to_owned()));
    assert_eq!(c("POST", "/trace", Some(r#"{"count":5}"#), admin).0, 202);
    t.h1.sh("ping -c 2 -i 0.2 -W 2 10.2.0.2 >/dev/null");
    let (_, tr) = c("GET", "/trace", None, admin);
    assert!(tr.contains("ip4-lookup") && tr.contains("10.2.0.2"), "{tr}");
    let (_, nb) = c("GET", "/neighbors", None, admin);
    assert!(nb.contains("10.2.0.2") && nb.contains("10.1.0.2"), "{nb}");
    let (_, m) = c("GET", "/metrics", None, ro);
    let rx: u64 = m
        .lines()
        .find(|l| l.starts_with("vecgate_interface_rx_packets_total{interface=\"site-a\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0);
    assert!(rx >= 2, "{m}");
    assert!(
        m.contains("vecgate_node_packets_total{node=\"ip4-lookup\"}"),
        "{m}"
    );

    // GET /config → check → run reproduces the same routes and interfaces.
    let (_, toml) = c("GET", "/config", None, admin);
    assert!(
        toml.contains("rsc = false") && !toml.contains("0123456789"),
        "{toml}"
    );
    let path = std::env::temp_dir().join(format!("{}.toml", unique("rt")));
    std::fs::write(&path, &toml).unwrap();
    let chk = std::process::Command::new(common::vecgate_bin())
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(
        chk.status.success(),
        "{}",
        String::from_utf8_lossy(&chk.stderr)
    );
    let strip = |s: &str| -> Value {
        let mut v: Value = serde_json::from_str(s).unwrap();
        for i in v.as_array_mut().into_iter().flatten() {
            if let Some(o) = i.as_object_mut() {
                o.retain(|k, _| !k.starts_with("rx_") && !k.starts_with("tx_") && k != "drops");
            }
        }
        v
    };
    let r1 = strip(&c("GET", "/routes", None, admin).1);
    let i1 = strip(&c("GET", "/interfaces", None, admin).1);
    assert!(gw.stop().success());
    let _gw2 = Gateway::start(&t.gw, &toml);
    assert!(wait_until(10, || c("GET", "/status", None, admin).0 == 200));
    assert_eq!(strip(&c("GET", "/routes", None, admin).1), r1);
    assert_eq!(strip(&c("GET", "/interfaces", None, admin).1), i1);
}

/// Bits per second of each 1-s interval and the whole run, from iperf3 -J.
fn iperf(t: &Topo, secs: u32) -> (f64, Vec<f64>) {
    let out = t.h1.sh(&format!("iperf3 -J -c 10.2.0.2 -t {secs} -i 1"));
    let v: Value = serde_json::from_str(&out).expect("iperf3 JSON");
    let total = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    let iv = v["intervals"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| i["sum"]["bytes"].as_f64().unwrap_or(0.0))
        .collect();
    (total, iv)
}

#[test]
fn live_route_changes_do_not_disturb_a_flow() {
    let t = topo();
    let sock = std::env::temp_dir().join(format!("{}/gw.sock", unique("api")));
    let cfg = format!(
        "[gateway]\nname = \"live\"\napi = \"unix:{}\"\n{}",
        sock.display(),
        interfaces()
    );
    let _gw = Gateway::start(&t.gw, &cfg);
    let base = format!("--unix-socket {} http://x", sock.display());
    // Killed with the namespace when the topology drops.
    let mut srv = t.h2.spawn("iperf3 -s");
    assert!(wait_until(10, || t
        .h2
        .try_sh("ss -ltn | grep -q 5201")
        .status
        .success()));
    t.h1.sh("ping -c 2 -i 0.2 -W 2 10.2.0.2 >/dev/null");
    let (base_bps, _) = iperf(&t, 3);
    assert!(base_bps > 0.0);

    // Add and delete routes in another prefix while the flow runs.
    let churn_ns = t.gw.name.clone();
    let sock2 = sock.clone();
    let churn = std::thread::spawn(move || {
        let mut n = 0;
        let b = format!("--unix-socket {} http://x", sock2.display());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
        while std::time::Instant::now() < deadline {
            let body = format!(r#"{{"prefix":"10.77.{}.0/24","via":"10.2.0.2"}}"#, n % 200);
            assert_eq!(
                curl(&churn_ns, &b, "POST", "/routes", Some(&body), None).0,
                201
            );
            assert_eq!(
                curl(
                    &churn_ns,
                    &b,
                    "DELETE",
                    &format!("/routes?prefix=10.77.{}.0/24", n % 200),
                    None,
                    None
                )
                .0,
                204
            );
            n += 1;
        }
        n
    });
    let (live_bps, intervals) = iperf(&t, 5);
    let changes = churn.join().unwrap();
    assert!(changes >= 5, "only {changes} route changes");
    assert!(
        intervals.iter().all(|b| *b > 0.0),
        "a 1-s interval moved 0 bytes: {intervals:?}"
    );
    assert!(
        live_bps > base_bps * 0.4,
        "flow slowed down: {live_bps} vs {base_bps} bit/s"
    );
    let (st, r) = curl(&t.gw.name, &base, "GET", "/routes", None, None);
    assert_eq!(st, 200);
    assert!(!r.contains("10.77."), "{r}");
    let _ = srv.kill();
    let _ = srv.wait();
    let _ = std::fs::remove_dir_all(sock.parent().unwrap());
}
