//! The pool's gateway-level tests: a three-member etcd cluster in a test
//! namespace (one address, ports 2379/2380 + 10 000 × i), and what the
//! members say through the CLI.
#![allow(dead_code)]

use super::common::{vecgate_bin, wait_until, Netns};
use serde_json::Value;
use std::process::Command;

/// The address the cluster listens on (the namespace's `mg0`).
pub const ETCD: &str = "10.99.0.1";

/// The etcd processes, killed and reaped when the test ends.
pub struct Etcd(Vec<std::process::Child>);

impl Drop for Etcd {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The three etcd members in namespace `ns`, on one address, ports
/// 2379/2380 + 10 000 × i; and the `etcd = [...]` list for `[pool]`.
pub fn start_etcd(ns: &Netns, dir: &std::path::Path) -> (Etcd, String) {
    let mut procs = Etcd(Vec::new());
    let peers: Vec<String> = (0..3)
        .map(|i| format!("e{i}=http://{ETCD}:{}", 2380 + 10_000 * i))
        .collect();
    for i in 0..3 {
        let client = format!("http://{ETCD}:{}", 2379 + 10_000 * i);
        let peer = format!("http://{ETCD}:{}", 2380 + 10_000 * i);
        procs.0.push(ns.spawn(&format!(
            "etcd --name e{i} --data-dir {}/e{i} --listen-client-urls {client} \
             --advertise-client-urls {client} --listen-peer-urls {peer} \
             --initial-advertise-peer-urls {peer} --initial-cluster-state new \
             --initial-cluster {} --heartbeat-interval 100 --election-timeout 1000 \
             --logger zap --log-level error",
            dir.display(),
            peers.join(",")
        )));
    }
    let endpoints: Vec<String> = (0..3)
        .map(|i| format!("http://{ETCD}:{}", 2379 + 10_000 * i))
        .collect();
    let list = endpoints.join(",");
    assert!(
        wait_until(30, || ns
            .try_sh(&format!(
                "etcdctl --endpoints {list} --command-timeout=1s put /vecgate-test/health 1"
            ))
            .status
            .success()),
        "etcd cluster not healthy"
    );
    let list = endpoints
        .iter()
        .map(|e| format!("\"{e}\""))
        .collect::<Vec<_>>()
        .join(", ");
    (procs, list)
}

pub fn cli(api: &str, args: &[&str]) -> std::process::Output {
    Command::new(vecgate_bin())
        .args(args)
        .args(["--api", api])
        .output()
        .expect("vecgate")
}

pub fn pool_show(api: &str) -> Value {
    let out = cli(api, &["pool", "show", "--json"]);
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// Where `conn` is placed, as `api`'s member sees it.
pub fn placed(p: &Value, conn: &str) -> Option<(String, String, String)> {
    p["connections"].as_array()?.iter().find_map(|c| {
        (c["id"] == conn).then(|| {
            (
                c["member"].as_str().unwrap_or("").to_owned(),
                c["reason"].as_str().unwrap_or("").to_owned(),
                c["phase"].as_str().unwrap_or("").to_owned(),
            )
        })
    })
}

/// Tunnel `name`'s transmitted packets on the gateway behind `api`.
pub fn tunnel_tx(api: &str, name: &str) -> u64 {
    let out = cli(api, &["show", "tunnels", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v.as_array()
        .and_then(|a| a.iter().find(|t| t["name"] == name))
        .and_then(|t| t["tx_packets"].as_u64())
        .unwrap_or(0)
}

/// A pool member's configuration: one WAN port at 192.0.2.1N, pool `pool`
/// on `etcd` with a 3 s lease, room for `tunnels` connections.
pub fn member_config(pool: &str, tunnels: u32, n: u8, api: &str, etcd: &str, key: &str) -> String {
    format!(
        r#"[gateway]
name = "g{n}"
workers = 1
api = "{api}"

[[interface]]
name = "wan0"
host = "wan0"
driver = "af_packet"
addresses = ["192.0.2.1{n}/24"]

[pool]
name = "{pool}"
etcd = [{etcd}]
lease_ttl = 3
pool_key_file = "{key}"
redundant = 1

[pool.capacity]
ipsec_mbps = 1000
gre_mbps = 1000
tunnels = {tunnels}
"#
    )
}
