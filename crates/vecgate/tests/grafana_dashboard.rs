//! The Grafana dashboard (examples/grafana/vecgate.json) against what a live
//! gateway really exports, and the export against Prometheus' own checker:
//! - `promtool check metrics` passes on a live `/metrics` scrape;
//! - every panel has queries, every query names at least one vecgate
//!   metric, and every metric a query names has a sample in that scrape;
//! - every query parses as PromQL (`promtool check rules` over them, with
//!   Grafana's variables filled in);
//! - the dashboard covers throughput per interface and tunnel, drops by
//!   reason, SA and IKE state, rekeys, VRRP state and CPU per worker.
//!
//! The gateway carries one of each thing the dashboard shows: two
//! interfaces, a GRE tunnel, an IPsec tunnel with static SAs and one keyed
//! by IKEv2 (its peer absent: it stays "connecting", its metrics exist),
//! and a VRRP group (alone on its LAN: it becomes master).
//! promtool comes from Debian's `prometheus` (scripts/install-deps.sh): a
//! missing one fails the test.

mod common;

use common::{unique, veth, Gateway, Netns};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// GET `path` over the API's unix socket (HTTP/1.0: the body ends at close).
fn get(sock: &Path, path: &str) -> String {
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: vecgate\r\n\r\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let (head, body) = r.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    body.to_string()
}

fn promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus, scripts/install-deps.sh)");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Every panel with its queries, rows' nested panels included.
fn panels(v: &Value, out: &mut Vec<(String, Vec<String>)>) {
    for p in v.as_array().into_iter().flatten() {
        if p["type"] == "row" {
            panels(&p["panels"], out);
            continue;
        }
        let exprs = p["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["expr"].as_str().map(str::to_string))
            .collect();
        out.push((p["title"].as_str().unwrap_or("?").to_string(), exprs));
    }
}

/// The `vecgate_…` identifiers in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
        if word(b[i]) && (i == 0 || !word(b[i - 1])) {
            let start = i;
            while i < b.len() && word(b[i]) {
                i += 1;
            }
            let w = &expr[start..i];
            if w.starts_with("vecgate_") {
                names.push(w.to_string());
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn dashboard_queries_name_live_metrics_and_promtool_accepts_the_scrape() {
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/grafana/vecgate.json"),
        )
        .unwrap(),
    )
    .expect("the dashboard is JSON");

    let h1 = Netns::new("h1");
    let gw = Netns::new("gw");
    let peer = Netns::new("pe");
    veth(&h1, "eth0", &gw, "g-lan");
    veth(&gw, "g-wan", &peer, "eth0");
    h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    peer.sh("ip addr add 192.0.2.2/24 dev eth0");
    let dir = std::env::temp_dir().join(unique("dash"));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("api.sock");
    // One key per SA (vecgate refuses a key two SAs share).
    let key = dir.join("k.hex");
    std::fs::write(&key, "00112233445566778899aabbccddeeff01020304\n").unwrap();
    let key_in = dir.join("k-in.hex");
    std::fs::write(&key_in, "f0e1d2c3b4a5968778695a4b3c2d1e0f0a0b0c0d\n").unwrap();
    let psk = dir.join("psk");
    std::fs::write(&psk, "dashboard-test-psk-0123456789\n").unwrap();
    // Secrets only the gateway may read (it refuses others).
    for f in [&key, &key_in, &psk] {
        std::fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    let cfg = format!(
        r#"[gateway]
name = "dash"
workers = 2
api = "unix:{sock}"

[[interface]]
name = "lan"
host = "g-lan"
driver = "af_packet"
addresses = ["10.1.0.1/24"]

[[interface]]
name = "wan"
host = "g-wan"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[[tunnel]]
name = "gre0"
kind = "gre"
local = "192.0.2.1"
remote = "192.0.2.2"
key = 7
addresses = ["10.8.0.1/30"]

[[tunnel]]
name = "esp0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.2"
traffic = ["10.2.0.0/24"]

[[tunnel.sa]]
direction = "out"
spi = 0x1001
algorithm = "aes128gcm16"
key_file = "{key}"

[[tunnel.sa]]
direction = "in"
spi = 0x2001
algorithm = "aes128gcm16"
key_file = "{key_in}"

[[tunnel]]
name = "ike0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.3"
traffic = ["10.3.0.0/24"]

[tunnel.ike]
psk_file = "{psk}"

[ha]
track = ["wan"]

[[ha.group]]
vrid = 51
interface = "lan"
addresses = ["10.1.0.254"]
"#,
        sock = sock.display(),
        key = key.display(),
        key_in = key_in.display(),
        psk = psk.display(),
    );
    let _g = Gateway::start(&gw, &cfg);
    // Some traffic, so rates have something to show, and ESP that fails
    // authentication on the inbound SA, so its drop counter exists.
    common::warm_up(&h1, "10.1.0.1");
    let _ = h1.try_sh("ping -c 3 -i 0.2 -W 1 10.2.0.9");
    peer.sh(
        "/usr/bin/python3 -c 'import socket,struct; s=socket.socket(socket.AF_INET,socket.SOCK_RAW,50); [s.sendto(struct.pack(\">II\",0x2001,n)+bytes(64),(\"192.0.2.1\",0)) for n in range(1,4)]'",
    );
    assert!(
        common::wait_until(20, || get(&sock, "/metrics")
            .lines()
            .any(|l| l.starts_with("vecgate_sa_drops_total{"))),
        "no SA drop counted"
    );

    let scrape = get(&sock, "/metrics");
    let (ok, out) = promtool(&["check", "metrics"], Some(&scrape));
    assert!(
        ok && out.trim().is_empty(),
        "promtool check metrics:\n{out}\n---- scrape ----\n{scrape}"
    );

    let exported: BTreeSet<String> = scrape
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next().map(str::to_string))
        .collect();

    let mut all = Vec::new();
    panels(&dash["panels"], &mut all);
    assert!(all.len() >= 10, "{} panels", all.len());
    let mut named = BTreeSet::new();
    let mut rules = String::from("groups:\n  - name: vecgate-dashboard\n    rules:\n");
    for (i, (title, exprs)) in all.iter().enumerate() {
        assert!(!exprs.is_empty(), "panel {title:?} has no query");
        for e in exprs {
            let names = metric_names(e);
            assert!(
                !names.is_empty(),
                "panel {title:?}: {e} names no vecgate metric"
            );
            for n in names {
                assert!(
                    exported.contains(&n),
                    "panel {title:?}: {n} is not exported by a live gateway\n{exported:#?}"
                );
                named.insert(n);
            }
            let promql = e
                .replace("$__rate_interval", "5m")
                .replace("$__interval", "1m")
                .replace("$instance", ".*");
            rules.push_str(&format!(
                "      - record: vecgate:dashboard_{i}\n        expr: '{}'\n",
                promql.replace('\'', "''")
            ));
        }
    }
    let rules_file = dir.join("rules.yml");
    std::fs::write(&rules_file, &rules).unwrap();
    let (ok, out) = promtool(&["check", "rules", rules_file.to_str().unwrap()], None);
    assert!(ok, "a dashboard query is not valid PromQL:\n{out}\n{rules}");

    for needed in [
        "vecgate_interface_rx_bytes_total",
        "vecgate_interface_tx_bytes_total",
        "vecgate_tunnel_rx_bytes_total",
        "vecgate_tunnel_tx_bytes_total",
        "vecgate_node_drops_total",
        "vecgate_sa_bytes_total",
        "vecgate_sa_drops_total",
        "vecgate_ike_state",
        "vecgate_ike_rekeys_total",
        "vecgate_worker_cpu_seconds_total",
        "vecgate_vrrp_state",
        "vecgate_vrrp_transitions_total",
    ] {
        assert!(named.contains(needed), "no panel shows {needed}");
    }
    // The IKE tunnel is there, and says where it stands.
    assert!(
        scrape
            .lines()
            .any(|l| l.starts_with("vecgate_ike_state{tunnel=\"ike0\"") && l.ends_with(" 1")),
        "{scrape}"
    );
    assert_eq!(
        scrape
            .lines()
            .filter(|l| l.starts_with("vecgate_worker_cpu_seconds_total{"))
            .count(),
        2,
        "one CPU counter per worker:\n{scrape}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
