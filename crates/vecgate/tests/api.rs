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

/// Token files (and the TLS certificate beside them), removed on drop.
struct Tokens {
    dir: std::path::PathBuf,
    admin: std::path::PathBuf,
    ro: std::path::PathBuf,
}

impl Tokens {
    fn new() -> Tokens {
        let dir = std::env::temp_dir().join(unique("tok"));
        std::fs::create_dir_all(&dir).unwrap();
        let t = Tokens {
            admin: dir.join("admin"),
            ro: dir.join("ro"),
            dir,
        };
        common::write_secret(&t.admin, "admin-0123456789abcdef0123456789abcdef\n");
        common::write_secret(&t.ro, "reader-0123456789abcdef0123456789abcdef\n");
        t
    }
}

impl Drop for Tokens {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
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
    let (cert, key) = common::tls_cert(&tok.dir);
    let cfg = format!(
        "[gateway]\nname = \"api\"\napi = \"tcp:127.0.0.1:9191\"\napi_token_file = \"{}\"\napi_readonly_token_file = \"{}\"\napi_tls_cert_file = \"{}\"\napi_tls_key_file = \"{}\"\n{}\n[[route]]\nprefix = \"10.9.0.0/16\"\nvia = \"10.2.0.2\"\n",
        tok.admin.display(),
        tok.ro.display(),
        cert.display(),
        key.display(),
        interfaces()
    );
    let mut gw = Gateway::start(&t.gw, &cfg);
    // TLS, the server checked against its own certificate.
    let base = &format!("--cacert {} https://127.0.0.1:9191", cert.display());
    let admin = Some("admin-0123456789abcdef0123456789abcdef");
    let ro = Some("reader-0123456789abcdef0123456789abcdef");
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
        "/ha",
        "/ha/switchover",
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
    // A new interface needs a name and a netdev that exists.
    assert_eq!(c("POST", "/interfaces", Some("{}"), admin).0, 400);
    let (st, b) = c(
        "POST",
        "/interfaces",
        Some(r#"{"name":"x9","host":"nosuch9","addresses":["10.9.0.1/24"]}"#),
        admin,
    );
    assert_eq!(st, 409, "{b}");
    assert!(b.contains("nosuch9"), "{b}");

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
    // No [ha]: no virtual router, and nothing to resign from.
    assert_eq!(c("GET", "/ha", None, ro), (200, "[]".to_owned()));
    assert_eq!(c("POST", "/ha/switchover", Some("{}"), ro).0, 403);
    assert_eq!(c("POST", "/ha/switchover", Some("{}"), admin).0, 409);
    assert_eq!(
        c(
            "POST",
            "/ha/switchover",
            Some(r#"{"hold_secs":999999}"#),
            admin
        )
        .0,
        400
    );
    let (_, v) = c("GET", "/vrfs", None, admin);
    assert!(v.contains("\"default\""), "{v}");
    let (st, b) = c("POST", "/trace", Some(r#"{"count":0}"#), admin);
    assert_eq!((st, field(&b)), (400, "count".to_owned()));
    assert_eq!(c("POST", "/trace", Some(r#"{"count":5}"#), admin).0, 202);
    common::warm_up(&t.h1, "10.2.0.2");
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

/// IPv4 packets the gateway's graph dropped on the forwarding path (the
/// drop reasons of the nodes a routed packet visits) or answered with an
/// ICMP error, from a `GET /counters` body. Nodes' informational counts
/// (ignored multicast, router discovery) are not drops of a routed flow.
fn graph_drops(counters: &str) -> u64 {
    const PATH: [&str; 5] = [
        "ip4-input",
        "ip4-lookup",
        "ip-rewrite",
        "ip4-fragment",
        "interface-output",
    ];
    let v: Value = serde_json::from_str(counters).expect("counters JSON");
    let nodes = v["nodes"].as_array().expect("nodes");
    let errors: u64 = nodes
        .iter()
        .filter(|n| n["node"] == "icmp-error")
        .filter_map(|n| n["packets"].as_u64())
        .sum();
    let dropped: u64 = nodes
        .iter()
        .filter(|n| PATH.iter().any(|p| n["node"] == *p))
        .flat_map(|n| n["drops"].as_array().into_iter().flatten())
        .filter_map(|d| d["count"].as_u64())
        .sum();
    errors + dropped
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
    common::warm_up(&t.h1, "10.2.0.2");
    t.h1.sh("ping -c 2 -i 0.2 -W 2 10.2.0.2 >/dev/null");
    let drops0 = graph_drops(&curl(&t.gw.name, &base, "GET", "/counters", None, None).1);

    // Add and delete routes in another prefix while the flow runs.
    let churn_ns = t.gw.name.clone();
    let sock2 = sock.clone();
    let churn = std::thread::spawn(move || {
        let mut n = 0;
        let b = format!("--unix-socket {} http://x", sock2.display());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
        while std::time::Instant::now() < deadline || n < 5 {
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
    assert!(live_bps > 0.0, "the flow moved nothing: {intervals:?}");
    // No per-second "no stall" window is judged: on a loaded machine the
    // scheduler alone can leave a 1-s interval empty. The graph's own drop
    // counters below are the observer that the churn never cost a packet.
    // Undisturbed means the graph dropped none of the flow's packets while
    // the tables were swapped under it (a machine busy with other tests
    // slows the flow, but never makes the graph drop it; ring overflows are
    // the kernel's, counted apart).
    let counters = curl(&t.gw.name, &base, "GET", "/counters", None, None).1;
    assert_eq!(
        graph_drops(&counters) - drops0,
        0,
        "the graph dropped packets during the route churn: {counters}"
    );
    let (st, r) = curl(&t.gw.name, &base, "GET", "/routes", None, None);
    assert_eq!(st, 200);
    assert!(!r.contains("10.77."), "{r}");
    let _ = srv.kill();
    let _ = srv.wait();
    let _ = std::fs::remove_dir_all(sock.parent().unwrap());
}

// ---- Two gateways: live tunnels, SA operations, counters ------------------
//
//   h1 (10.1.0.2, .200) ── ga ══ 192.0.2.0/24 ══ gb ── h2 (10.2.0.2, .200)
//
// The plain underlay route carries the iperf3 flow; a GRE tunnel added live
// carries 10.1.0.200 <-> 10.2.0.200.

struct Two {
    h1: Netns,
    h2: Netns,
    ga: Netns,
    gb: Netns,
    dir: std::path::PathBuf,
}

impl Drop for Two {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn two() -> Two {
    let t = Two {
        h1: Netns::new("h1"),
        h2: Netns::new("h2"),
        ga: Netns::new("ga"),
        gb: Netns::new("gb"),
        dir: std::env::temp_dir().join(unique("api2")),
    };
    std::fs::create_dir_all(&t.dir).unwrap();
    veth(&t.h1, "eth0", &t.ga, "a-lan");
    veth(&t.ga, "a-wan", &t.gb, "b-wan");
    veth(&t.h2, "eth0", &t.gb, "b-lan");
    t.h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip addr add 10.1.0.200/24 dev eth0 && ip route add default via 10.1.0.1");
    t.h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip addr add 10.2.0.200/24 dev eth0 && ip route add default via 10.2.0.1");
    t
}

/// Gateway `side`'s configuration: lan, wan, a plain route to the other
/// site, and `extra` (tunnels, SAs).
fn two_config(t: &Two, side: usize, extra: &str) -> String {
    let (lan, lan4, wan) = if side == 0 {
        ("a-lan", "10.1.0.1/24", "a-wan")
    } else {
        ("b-lan", "10.2.0.1/24", "b-wan")
    };
    let other = if side == 0 {
        "10.2.0.0/24"
    } else {
        "10.1.0.0/24"
    };
    format!(
        r#"[gateway]
name = "g{side}"
api = "unix:{}/g{side}.sock"

[[interface]]
name = "lan"
host = "{lan}"
driver = "af_packet"
addresses = ["{lan4}"]

[[interface]]
name = "wan"
host = "{wan}"
driver = "af_packet"
addresses = ["192.0.2.{}/24"]

[[route]]
prefix = "{other}"
via = "192.0.2.{}"
{extra}"#,
        t.dir.display(),
        side + 1,
        2 - side,
    )
}

fn sock_base(t: &Two, side: usize) -> String {
    format!("--unix-socket {}/g{side}.sock http://x", t.dir.display())
}

fn gw_api(t: &Two, side: usize) -> impl Fn(&str, &str, Option<&str>) -> (u16, String) + '_ {
    let ns = if side == 0 {
        t.ga.name.clone()
    } else {
        t.gb.name.clone()
    };
    let base = sock_base(t, side);
    move |m, p, b| curl(&ns, &base, m, p, b, None)
}

/// A gateway's API as a function: (method, path, body) -> (status, body).
type Api<'a> = dyn Fn(&str, &str, Option<&str>) -> (u16, String) + 'a;

/// `vecgate ARGS --api <gateway side's socket>`.
fn vg_cli(t: &Two, side: usize, args: &str) -> std::process::Output {
    std::process::Command::new(common::vecgate_bin())
        .args(args.split_whitespace())
        .arg("--api")
        .arg(format!("unix:{}/g{side}.sock", t.dir.display()))
        .output()
        .expect("vecgate CLI")
}

/// The value of the first metric line starting with `prefix`.
fn metric(text: &str, prefix: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn live_gre_tunnel_on_two_gateways_while_a_flow_runs() {
    let t = two();
    let _a = Gateway::start(&t.ga, &two_config(&t, 0, ""));
    let _b = Gateway::start(&t.gb, &two_config(&t, 1, ""));
    let (a, b) = (gw_api(&t, 0), gw_api(&t, 1));
    let mut srv = t.h2.spawn("iperf3 -s");
    assert!(wait_until(10, || t
        .h2
        .try_sh("ss -ltn | grep -q 5201")
        .status
        .success()));
    common::warm_up(&t.h1, "10.2.0.2");
    t.h1.sh("ping -c 2 -i 0.2 -W 2 10.2.0.2 >/dev/null");
    let drops0 = [&a, &b].map(|api| graph_drops(&api("GET", "/counters", None).1));

    // The flow on the plain route, while the tunnel comes and goes.
    let h1 = t.h1.name.clone();
    let flow = std::thread::spawn(move || {
        let out = std::process::Command::new("ip")
            .args([
                "netns", "exec", &h1, "iperf3", "-J", "-c", "10.2.0.2", "-t", "8", "-i", "1",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for (side, api) in [(0usize, &a), (1, &b)] {
        let (local, remote) = if side == 0 { (1, 2) } else { (2, 1) };
        let body = format!(
            r#"{{"name":"tg","kind":"gre","local":"192.0.2.{local}","remote":"192.0.2.{remote}","key":119}}"#
        );
        // gb's through the CLI verb, ga's through the API.
        let r = if side == 1 {
            let out = vg_cli(
                &t,
                1,
                &format!("tunnel add --json tg gre 192.0.2.{local} 192.0.2.{remote} --key 119"),
            );
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        } else {
            let (st, r) = api("POST", "/tunnels", Some(&body));
            assert_eq!(st, 201, "{r}");
            r
        };
        let v: Value = serde_json::from_str(&r).unwrap();
        assert_eq!(
            (v["name"].as_str(), v["key"].as_u64()),
            (Some("tg"), Some(119))
        );
        let far = if side == 0 {
            "10.2.0.200/32"
        } else {
            "10.1.0.200/32"
        };
        let (st, r) = api(
            "POST",
            "/routes",
            Some(&format!(r#"{{"prefix":"{far}","via":"tg"}}"#)),
        );
        assert_eq!(st, 201, "{r}");
        // A second tunnel of the same name is refused; so is deleting a
        // tunnel a route still uses.
        assert_eq!(api("POST", "/tunnels", Some(&body)).0, 409);
        assert_eq!(api("DELETE", "/tunnels/tg", None).0, 409);
    }
    // Traffic crosses the new tunnel: GRE with key 119 on the underlay,
    // both ways (each side's capture sees what it receives: vecgate's own
    // transmissions bypass the taps).
    let mut caps: Vec<_> = [(&t.gb, "b-wan"), (&t.ga, "a-wan")]
        .into_iter()
        .map(|(ns, ifname)| common::Capture::start_filtered(ns, ifname, "ip proto 47"))
        .collect();
    // The first packet into a just-added tunnel was seen lost once in CI;
    // wait until the path answers before the counted pings below.
    assert!(
        wait_until(20, || t
            .h1
            .try_sh("ping -c 1 -W 1 -I 10.1.0.200 10.2.0.200")
            .status
            .success()),
        "the new tunnel carries traffic"
    );
    // A router saturated by the flow may lose a ping when a receive ring
    // overflows; such a loss is counted at an interface (rx_missed, or a
    // transmit the kernel refused). Every lost ping must be matched by such
    // a count, so with no counted loss all of them arrive; and most must
    // cross, so a tunnel that carries nothing still fails.
    let port_losses = || -> (u64, String) {
        let mut sum = 0;
        let mut seen = String::new();
        for api in [&a, &b] {
            let v: Value = serde_json::from_str(&api("GET", "/counters", None).1).unwrap();
            for i in v["interfaces"].as_array().into_iter().flatten() {
                sum += i["drops"].as_u64().expect("drops");
                seen += &format!("{i}\n");
            }
            // Graph drops do not excuse a lost ping; shown for diagnosis.
            for n in v["nodes"].as_array().into_iter().flatten() {
                for d in n["drops"].as_array().into_iter().flatten() {
                    if d["count"].as_u64() > Some(0) {
                        seen += &format!("{} {} {}\n", n["node"], d["reason"], d["count"]);
                    }
                }
            }
        }
        (sum, seen)
    };
    let (losses0, _) = port_losses();
    let pings = 20u64;
    // Each of the 20 requests gets up to 10 s for its reply (a loaded
    // machine may be slow), see common::answered.
    let (received, out) = common::ping_count(&t.h1, pings, 10, "-i 0.1 -I 10.1.0.200 10.2.0.200");
    // Port losses are polled every ~100 ms by the workers, later when
    // they are starved: wait (up to 5 s) for the counts to cover the
    // losses rather than sleep a fixed time.
    let lost = pings - received.min(pings);
    let (mut losses1, mut seen) = port_losses();
    wait_until(5, || {
        (losses1, seen) = port_losses();
        losses1 - losses0 >= lost
    });
    let counted = losses1 - losses0;
    assert!(
        received >= pings / 2 && lost <= counted,
        "{received}/{pings} pings crossed the tunnel, {lost} lost, {counted} counted \
         at the gateways' interfaces:\n{seen}{out}\nga: {}\ngb: {}",
        t.ga.sh("ip -s link"),
        t.gb.sh("ip -s link")
    );
    let pcaps: Vec<_> = caps.iter_mut().map(|c| c.stop().to_owned()).collect();
    // Per-tunnel counters: API, metrics.
    let (_, tl) = a("GET", "/tunnels/tg", None);
    let tv: Value = serde_json::from_str(&tl).unwrap();
    assert!(
        tv["tx_packets"].as_u64() >= Some(3) && tv["rx_packets"].as_u64() >= Some(3),
        "{tl}"
    );
    let (_, m) = b("GET", "/metrics", None);
    assert!(
        metric(&m, "vecgate_tunnel_rx_packets_total{tunnel=\"tg\"}") >= 3,
        "{m}"
    );
    let (_, c) = b("GET", "/counters", None);
    let cv: Value = serde_json::from_str(&c).unwrap();
    assert!(
        cv["tunnels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["tunnel"] == "tg" && x["tx_packets"].as_u64() >= Some(3)),
        "{c}"
    );
    let out = vg_cli(&t, 1, "show tunnels");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("RxPkts") && table.lines().any(|l| l.starts_with("tg ")),
        "{table}"
    );
    // And it goes again: route first, then the tunnel.
    for api in [&a, &b] {
        let (_, cfg) = api("GET", "/config", None);
        assert!(cfg.contains("name = \"tg\""), "{cfg}");
        for p in ["10.2.0.200/32", "10.1.0.200/32"] {
            let _ = api("DELETE", &format!("/routes?prefix={p}"), None);
        }
        assert_eq!(api("DELETE", "/tunnels/tg", None).0, 204);
        assert_eq!(api("GET", "/tunnels", None), (200, "[]".to_owned()));
    }
    let flow: Value = serde_json::from_str(&flow.join().unwrap()).expect("iperf3 JSON");
    let live_bps = flow["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    let intervals: Vec<f64> = flow["intervals"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| i["sum"]["bytes"].as_f64().unwrap_or(0.0))
        .collect();
    assert!(intervals.len() >= 7, "{flow}");
    let drops = |api: &Api<'_>| -> String {
        let v: Value = serde_json::from_str(&api("GET", "/counters", None).1).unwrap();
        let mut out = String::new();
        for n in v["nodes"].as_array().into_iter().flatten() {
            for d in n["drops"].as_array().into_iter().flatten() {
                if d["count"].as_u64() > Some(0) {
                    out += &format!("{} {} {}\n", n["node"], d["reason"], d["count"]);
                }
            }
        }
        out + &v["interfaces"].to_string()
    };
    // No per-second "no stall" window is judged (the scheduler alone can
    // leave a 1-s interval empty on a loaded machine): the graphs' drop
    // counters are the observer.
    assert!(
        intervals.iter().any(|b| *b > 0.0),
        "the flow moved nothing: {intervals:?}\nga: {}\ngb: {}",
        drops(&a),
        drops(&b)
    );
    // Undisturbed means neither graph dropped a packet while the tunnel
    // came and went (a machine busy with other tests slows the flow, but
    // never makes the graph drop it; the pings lost to ring overflows were
    // matched with the kernel's counts above).
    assert!(live_bps > 0.0);
    for ((api, d0), name) in [&a, &b].into_iter().zip(drops0).zip(["ga", "gb"]) {
        let c = api("GET", "/counters", None).1;
        assert_eq!(
            graph_drops(&c) - d0,
            0,
            "{name} dropped packets: {}",
            drops(api)
        );
    }
    // The captures are judged after the flow (tshark is CPU-hungry).
    for (pcap, from) in pcaps.iter().zip(["192.0.2.1", "192.0.2.2"]) {
        let keys = common::sh(&format!(
            "tshark -n -r {} -T fields -E occurrence=f -e ip.src -e gre.key -Y 'gre && icmp'",
            pcap.display()
        ));
        let n = keys
            .lines()
            .filter(|l| *l == format!("{from}\t0x00000077"))
            .count();
        assert!(n >= 3, "3 pings in GRE key 119 from {from}: {keys}");
    }
    // The tunnel's address is plain routed again (a reachability check, so
    // waiting for it is fair).
    assert!(
        wait_until(20, || t
            .h1
            .try_sh("ping -c 1 -W 2 -I 10.1.0.200 10.2.0.200")
            .status
            .success()),
        "10.2.0.200 not plain routed after the tunnel went"
    );
    let _ = srv.kill();
    let _ = srv.wait();
}

fn hexs(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A 36-byte aes256gcm16 key (key ‖ salt) for `spi` (a test fixture).
fn test_key(spi: u32) -> Vec<u8> {
    (0..36u32)
        .map(|i| (i.wrapping_mul(29) ^ (spi ^ (spi >> 8)).wrapping_mul(13) ^ 0xa5) as u8)
        .collect()
}

fn esp_extra(t: &Two, side: usize, out: u32, ins: u32) -> String {
    let (local, remote) = if side == 0 { (1, 2) } else { (2, 1) };
    let traffic = if side == 0 {
        "10.2.0.200/32"
    } else {
        "10.1.0.200/32"
    };
    let mut s = format!(
        "\n[[tunnel]]\nname = \"esp0\"\nkind = \"ipsec\"\nlocal = \"192.0.2.{local}\"\nremote = \"192.0.2.{remote}\"\ntraffic = [\"{traffic}\"]\n"
    );
    for (dir, spi) in [("out", out), ("in", ins)] {
        let f = t.dir.join(format!("{spi:x}.hex"));
        common::write_secret(&f, hexs(&test_key(spi)));
        s += &format!(
            "\n[[tunnel.sa]]\ndirection = \"{dir}\"\nspi = {spi:#x}\nalgorithm = \"aes256gcm16\"\nkey_file = \"{}\"\n",
            f.display()
        );
    }
    s
}

/// A paced sender whose transfer spans the switch however slowly a loaded
/// machine runs it: it creates MARK.started once 1 MiB is out, then keeps
/// sending until it has sent N bytes and 2 MiB more after MARK.switched
/// appeared (or 120 s passed); prints "sha256 bytes".
const PACED_TX: &str = r#"
import socket, hashlib, os, sys, time
addr, port, n, src, mark = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
for i in range(150):
    try:
        s = socket.create_connection((addr, port), timeout=30, source_address=(src, 0))
        break
    except OSError:
        time.sleep(0.1)
step = 64 << 10
h = hashlib.sha256()
sent, after = 0, None
deadline = time.time() + 120
while sent < n or after is None or sent < after + (2 << 20):
    if time.time() > deadline:
        break
    d = os.urandom(step)
    s.sendall(d)
    h.update(d)
    sent += len(d)
    if sent == 1 << 20:
        open(mark + ".started", "w").close()
    if after is None and os.path.exists(mark + ".switched"):
        after = sent
    time.sleep(0.02)
s.close()
print(h.hexdigest(), sent)
"#;

const RX: &str = r#"
import socket, hashlib, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
s.settimeout(60)
c, _ = s.accept()
c.settimeout(60)
h = hashlib.sha256()
n = 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    h.update(b)
    n += len(b)
print(h.hexdigest(), n)
"#;

#[test]
fn sa_switch_through_the_api_during_a_tcp_transfer_never_echoes_keys() {
    let t = two();
    const AB: u32 = 0x1001;
    const BA: u32 = 0x2001;
    const AB2: u32 = 0x1002;
    let _a = Gateway::start(&t.ga, &two_config(&t, 0, &esp_extra(&t, 0, AB, BA)));
    let _b = Gateway::start(&t.gb, &two_config(&t, 1, &esp_extra(&t, 1, BA, AB)));
    let (a, b) = (gw_api(&t, 0), gw_api(&t, 1));
    let (n, out) = common::ping_count(&t.h1, 2, 10, "-i 0.2 -I 10.1.0.200 10.2.0.200");
    assert_eq!(n, 2, "{out}");
    let new_key = hexs(&test_key(AB2));
    let mut responses = Vec::new();

    // Bad input: each a 4xx naming the field, the key never repeated.
    for (body, code, f) in [
        (
            format!(
                r#"{{"tunnel":"esp0","spi":"0x1002","algorithm":"aes256gcm16","key":"{}"}}"#,
                &new_key[..40]
            ),
            400,
            "key",
        ),
        (
            format!(
                r#"{{"tunnel":"esp0","spi":"0x1002","algorithm":"aes256gcm16","key":"zz{new_key}"}}"#
            ),
            400,
            "key",
        ),
        (
            format!(r#"{{"tunnel":"esp0","spi":"0x1002","algorithm":"rot13","key":"{new_key}"}}"#),
            400,
            "algorithm",
        ),
        (
            format!(
                r#"{{"tunnel":"esp0","spi":"0x10","algorithm":"aes256gcm16","key":"{new_key}"}}"#
            ),
            400,
            "spi",
        ),
        (
            format!(
                r#"{{"tunnel":"nope","spi":"0x1002","algorithm":"aes256gcm16","key":"{new_key}"}}"#
            ),
            404,
            "tunnel",
        ),
        (
            format!(
                r#"{{"tunnel":"esp0","spi":"0x1001","algorithm":"aes256gcm16","key":"{new_key}"}}"#
            ),
            409,
            "spi",
        ),
        (
            r#"{"tunnel":"esp0","spi":"0x1002","algorithm":"aes256gcm16"}"#.to_owned(),
            400,
            "key",
        ),
    ] {
        let (st, r) = b("POST", "/sas", Some(&body));
        assert_eq!((st, field(&r)), (code, f.to_owned()), "{body}: {r}");
        responses.push(r);
    }

    // A transfer runs while gb learns the new inbound SA and ga switches.
    let dir = &t.dir;
    std::fs::write(dir.join("tx.py"), PACED_TX).unwrap();
    std::fs::write(dir.join("rx.py"), RX).unwrap();
    let rx =
        t.h2.spawn(&format!("python3 {}/rx.py 10.2.0.200 7100", dir.display()));
    let h1 = t.h1.name.clone();
    let txp = dir.join("tx.py");
    let mark = dir.join("tx").display().to_string();
    let tx = std::thread::spawn(move || {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &h1, "python3"])
            .arg(&txp)
            .args([
                "10.2.0.200",
                "7100",
                &(8usize << 20).to_string(),
                "10.1.0.200",
                &mark,
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    assert!(
        wait_until(60, || dir.join("tx.started").exists()),
        "the transfer did not start"
    );
    let body = format!(
        r#"{{"tunnel":"esp0","spi":"0x1002","algorithm":"aes256gcm16","key":"{new_key}"}}"#
    );
    let (st, r) = b("POST", "/sas", Some(&body));
    assert_eq!(st, 201, "{r}");
    responses.push(r);
    let (_, sas_a) = a("GET", "/sas", None);
    let before: Value = serde_json::from_str(&sas_a).unwrap();
    let old_out = before
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["direction"] == "outbound")
        .unwrap()["packets"]
        .as_u64()
        .unwrap();
    assert!(old_out > 0, "{sas_a}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    // Lossless: the switch waits for the new SA's first durable block of
    // sequence numbers, so a ping stream across it loses nothing and the
    // switching side drops nothing as seq-not-durable.
    let not_durable = || {
        common::show_errors(&format!("unix:{}/g0.sock", t.dir.display()))
            .iter()
            .filter(|(_, r, _)| r == "seq-not-durable")
            .map(|(_, _, n)| n)
            .sum::<u64>()
    };
    let nd0 = not_durable();
    let pings =
        t.h1.spawn("ping -c 200 -i 0.01 -w 60 -I 10.1.0.200 10.2.0.200");
    std::thread::sleep(std::time::Duration::from_millis(600));
    let sw = format!(r#"{{"spi":"0x1002","algorithm":"aes256gcm16","key":"{new_key}"}}"#);
    let (st, r) = a("POST", "/tunnels/esp0/switch", Some(&sw));
    assert_eq!(st, 200, "{r}");
    let pinged = pings.wait_with_output().unwrap();
    let ping_text = String::from_utf8_lossy(&pinged.stdout).into_owned();
    assert_eq!(
        not_durable() - nd0,
        0,
        "packets dropped as seq-not-durable across the switch"
    );
    // Every request of the stream answered (ping may send a few more
    // than 200 before it stops).
    let answered: std::collections::HashSet<u32> = ping_text
        .lines()
        .filter_map(|l| l.split("icmp_seq=").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    let lost: Vec<u32> = (1..=200).filter(|s| !answered.contains(s)).collect();
    assert!(
        lost.is_empty(),
        "pings lost across the switch: {lost:?}\n{ping_text}"
    );
    let v: Value = serde_json::from_str(&r).unwrap();
    assert_eq!(
        (v["old_spi"].as_str(), v["new_spi"].as_str()),
        (Some("0x00001001"), Some("0x00001002"))
    );
    responses.push(r);
    std::fs::write(dir.join("tx.switched"), "").unwrap();
    let sent = tx.join().unwrap();
    let got = rx.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got.stdout).trim(),
        sent.trim(),
        "the transfer was not byte-exact"
    );
    let total: usize = sent
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(total >= 8 << 20, "{sent}");

    // The new SA carried traffic; the old inbound one can go now.
    let (_, sas_b) = b("GET", "/sas", None);
    let v: Value = serde_json::from_str(&sas_b).unwrap();
    let new_in = v
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["spi"] == "0x00001002" && s["direction"] == "inbound")
        .unwrap_or_else(|| panic!("{sas_b}"));
    assert!(new_in["packets"].as_u64() > Some(100), "{sas_b}");
    let (_, m) = b("GET", "/metrics", None);
    assert!(
        metric(
            &m,
            "vecgate_sa_packets_total{spi=\"0x1002\",direction=\"in\""
        ) > 100,
        "{m}"
    );
    let (_, tl) = a("GET", "/tunnels/esp0", None);
    let tv: Value = serde_json::from_str(&tl).unwrap();
    assert!(tv["tx_packets"].as_u64() > Some(100), "{tl}");
    let out = vg_cli(&t, 1, "show sa");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("Drops") && table.contains("0x00001002"),
        "{table}"
    );
    let out = vg_cli(&t, 1, "sa del 0x1001");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(b("DELETE", "/sas/0x1001", None).0, 404);
    let (n, out) = common::ping_count(&t.h1, 2, 10, "-i 0.2 -I 10.1.0.200 10.2.0.200");
    assert_eq!(n, 2, "{out}");
    // A key file SA is recorded in the running configuration.
    let kf = t.dir.join("1003.hex");
    common::write_secret(&kf, hexs(&test_key(0x1003)));
    let (st, r) = b(
        "POST",
        "/sas",
        Some(&format!(
            r#"{{"tunnel":"esp0","spi":4099,"algorithm":"aes256gcm16","key_file":"{}"}}"#,
            kf.display()
        )),
    );
    assert_eq!(st, 201, "{r}");
    responses.push(r);

    // No response and no log line ever shows key material.
    for api in [&a, &b] {
        for p in [
            "/sas",
            "/config",
            "/tunnels",
            "/counters",
            "/metrics",
            "/openapi.json",
        ] {
            responses.push(api("GET", p, None).1);
        }
    }
    let (_, cfg_b) = b("GET", "/config", None);
    assert!(cfg_b.contains("spi = 0x00001003"), "{cfg_b}");
    assert!(
        !cfg_b.contains("spi = 0x00001001"),
        "deleted SA still configured: {cfg_b}"
    );
    let logs = _a.log_text() + &_b.log_text();
    for k in [AB, BA, AB2, 0x1003] {
        let key = hexs(&test_key(k));
        for r in responses.iter().chain([&logs]) {
            assert!(!r.contains(&key[..16]), "key of {k:#x} in: {r}");
        }
    }
}

#[test]
fn a_second_gateway_on_a_live_api_endpoint_fails_a_stale_socket_is_replaced() {
    let t = two();
    // Stale: a socket file nobody listens on.
    let stale = t.dir.join("g0.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let cfg = two_config(&t, 0, "");
    let _first = Gateway::start(&t.ga, &cfg);
    assert_eq!(gw_api(&t, 0)("GET", "/status", None).0, 200);
    // Live: a second gateway with the same socket fails before attaching.
    let path = t.dir.join("second.toml");
    std::fs::write(&path, &cfg).unwrap();
    let out = t.ga.try_sh(&format!(
        "{} run --config {}",
        common::vecgate_bin().display(),
        path.display()
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("address in use"), "{err}");
    // The first one still answers and still forwards (its guards intact).
    assert_eq!(gw_api(&t, 0)("GET", "/status", None).0, 200);
    // One guard per netdev: the first's, none of the second's.
    assert_eq!(common::tcx_guards(&t.ga, "a-lan"), 1);
    assert_eq!(common::tcx_guards(&t.ga, "a-wan"), 1);

    // TCP: a port someone listens on.
    let tok = t.dir.join("tok");
    common::write_secret(&tok, "admin-0123456789abcdef0123456789abcdef\n");
    let tcp = cfg
        .replace(
            &format!("api = \"unix:{}/g0.sock\"", t.dir.display()),
            &format!(
                "api = \"tcp:127.0.0.1:9393\"\napi_token_file = \"{}\"\napi_insecure_loopback = true",
                tok.display()
            ),
        )
        .replace("name = \"g0\"", "name = \"g0tcp\"");
    let mut holder = t.ga.spawn("iperf3 -s -B 127.0.0.1 -p 9393");
    assert!(wait_until(10, || t
        .ga
        .try_sh("ss -ltn | grep -q 9393")
        .status
        .success()));
    std::fs::write(&path, &tcp).unwrap();
    let out = t.ga.try_sh(&format!(
        "{} run --config {}",
        common::vecgate_bin().display(),
        path.display()
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.to_lowercase().contains("address in use"), "{err}");
    let _ = holder.kill();
    let _ = holder.wait();
}
