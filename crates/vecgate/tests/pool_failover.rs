//! A pool of three vecgates on a three-member etcd cluster: connections
//! placed with anti-affinity, a member's `kill -9` moves its connection,
//! local address included, to another member, where traffic crosses the
//! tunnel again; a drain moves another one make-before-break.
//!
//! ```text
//!   etcd e0 e1 e2 (ns et, 10.99.0.1)  ── br9 (mgmt) ── mg0 of g1, g2, g3
//!   g1 .11  g2 .12  g3 .13  wan0 ── br1 (underlay 192.0.2.0/24) ── ul  pe .2
//!   connection c1: VXLAN VNI 101, local 192.0.2.101 (moves), tenant "ta"
//!   connection c2: VXLAN VNI 102, local 192.0.2.102 (moves), tenant "ta"
//! ```
//!
//! The peer `pe` runs two kernel VXLAN devices, one per connection, with
//! an address on each overlay segment; the pool member serving a
//! connection answers pings on its overlay address (10.10x.0.1). Judged
//! by what the peer saw: its pings answered, and the capture on its
//! underlay port (tshark: VXLAN with the connection's VNI from the
//! connection's address, sent by the owner's MAC), against what the
//! members report (`vecgate pool show --json`) and count.

mod common;
#[path = "common/pool.rs"]
mod pool;

use common::{
    answered, sh, tshark, unique, vecgate_bin, veth, wait_until, Capture, Gateway, Netns,
};
use pool::{cli, member_config, placed, pool_show, start_etcd, tunnel_tx, ETCD};
use std::process::Command;

const PEER: &str = "192.0.2.2";

fn config(n: u8, api: &str, etcd: &str, key: &str) -> String {
    member_config("pf", 2, n, api, etcd, key)
}

/// Connection `c{vni - 100}`: a VXLAN tunnel of tenant "ta" to the peer.
fn connection(vni: u32) -> String {
    format!(
        r#"{{"tunnel": {{"name": "c{}", "kind": "vxlan", "local": "192.0.2.{}",
            "remote": "{PEER}", "key": {vni}, "vrf": "ta",
            "addresses": ["10.{vni}.0.1/24"]}},
           "routes": [], "bandwidth_mbps": 100}}"#,
        vni - 100,
        vni
    )
}

#[test]
fn kill9_moves_a_connection_with_its_address() {
    if sh("command -v etcd || true").trim().is_empty() {
        panic!("etcd is not installed (scripts/install-deps.sh installs etcd-server)");
    }
    let sw = Netns::new("pf-sw");
    let et = Netns::new("pf-et");
    let pe = Netns::new("pf-pe");
    let gs: Vec<Netns> = (1..=3).map(|i| Netns::new(&format!("pf-g{i}"))).collect();
    for br in ["br1", "br9"] {
        sw.sh(&format!(
            "ip link add {br} type bridge mcast_snooping 0 && ip link set {br} up"
        ));
    }
    veth(&sw, "pet", &et, "mg0");
    sw.sh("ip link set pet master br9");
    et.sh(&format!("ip addr add {ETCD}/24 dev mg0"));
    veth(&sw, "ppe", &pe, "ul");
    sw.sh("ip link set ppe master br1");
    pe.sh(&format!("ip addr add {PEER}/24 dev ul"));
    for (i, g) in gs.iter().enumerate() {
        let n = i + 1;
        veth(&sw, &format!("pg{n}w"), g, "wan0");
        veth(&sw, &format!("pg{n}m"), g, "mg0");
        sw.sh(&format!(
            "ip link set pg{n}w master br1 && ip link set pg{n}m master br9"
        ));
        g.sh(&format!("ip addr add 10.99.0.1{n}/24 dev mg0"));
    }
    for vni in [101u32, 102] {
        pe.sh(&format!(
            "ip link add vx{vni} type vxlan id {vni} remote 192.0.2.{vni} local {PEER} \
             dstport 4789 dev ul && ip link set vx{vni} up && \
             ip addr add 10.{vni}.0.2/24 dev vx{vni}"
        ));
    }
    let dir = std::env::temp_dir().join(unique("pf"));
    std::fs::create_dir_all(&dir).unwrap();
    let (_etcd, etcd) = start_etcd(&et, &dir);
    let key = dir.join("pool.key");
    common::write_secret(&key, "11".repeat(32));
    let apis: Vec<String> = (1..=3)
        .map(|n| format!("unix:{}", dir.join(format!("g{n}.sock")).display()))
        .collect();
    let mut gws: Vec<Option<Gateway>> = gs
        .iter()
        .enumerate()
        .map(|(i, g)| {
            Some(Gateway::start(
                g,
                &config(i as u8 + 1, &apis[i], &etcd, &key.display().to_string()),
            ))
        })
        .collect();
    assert!(
        wait_until(30, || pool_show(&apis[0])["members"]
            .as_array()
            .is_some_and(|m| m.len() == 3)),
        "three members: {}",
        pool_show(&apis[0])
    );

    // A bad connection is refused naming its field, and nothing stored.
    let bad = dir.join("bad.json");
    std::fs::write(&bad, connection(101).replace("192.0.2.101", "198.51.100.1")).unwrap();
    let out = cli(
        &apis[0],
        &["pool", "connection", "add", &bad.display().to_string()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("198.51.100.1"),
        "{err}"
    );

    for vni in [101u32, 102] {
        let f = dir.join(format!("c{vni}.json"));
        std::fs::write(&f, connection(vni)).unwrap();
        let out = cli(
            &apis[1],
            &["pool", "connection", "add", &f.display().to_string()],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Placed and served, one tenant's two connections on two members.
    let mut owners = Vec::new();
    assert!(
        wait_until(30, || {
            let p = pool_show(&apis[2]);
            owners = ["c1", "c2"]
                .iter()
                .filter_map(|c| placed(&p, c))
                .filter(|(m, _, phase)| !m.is_empty() && phase == "serving")
                .map(|(m, _, _)| m)
                .collect();
            owners.len() == 2
        }),
        "both connections serving: {}",
        pool_show(&apis[2])
    );
    assert_ne!(
        owners[0], owners[1],
        "anti-affinity: one tenant, two members"
    );
    // Traffic crosses each connection to its owner.
    for vni in [101u32, 102] {
        assert!(
            wait_until(20, || common::ping_ok(
                &pe,
                &format!("-c1 -W1 10.{vni}.0.1")
            )),
            "c{}: the peer reaches its owner",
            vni - 100
        );
    }

    // kill -9 c1's owner.
    let old: usize = owners[0][1..].parse::<usize>().unwrap() - 1;
    let old_mac = gs[old]
        .sh("cat /sys/class/net/wan0/address")
        .trim()
        .to_owned();
    let mut cap = Capture::start(&pe, "ul");
    gws[old].as_mut().unwrap().kill9();
    // Reaped: whatever it sent is on the peer's port before this instant
    // (veth delivers as it transmits).
    let killed_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let watcher = (old + 1) % 3;
    let mut new_owner = String::new();
    assert!(
        wait_until(30, || {
            let p = pool_show(&apis[watcher]);
            match placed(&p, "c1") {
                Some((m, reason, phase)) if m != owners[0] && !m.is_empty() => {
                    new_owner = m;
                    reason == "failover" && phase == "serving"
                }
                _ => false,
            }
        }),
        "c1 moved off {}: {}",
        owners[0],
        pool_show(&apis[watcher])
    );
    let new: usize = new_owner[1..].parse::<usize>().unwrap() - 1;
    let new_mac = gs[new]
        .sh("cat /sys/class/net/wan0/address")
        .trim()
        .to_owned();
    let tx_before = tunnel_tx(&apis[new], "c1");
    assert!(
        wait_until(30, || common::ping_ok(&pe, "-c1 -W1 10.101.0.1")),
        "c1 answers again on {new_owner}"
    );
    let out = pe.sh("ping -c 20 -i 0.1 -W 2 10.101.0.1 || true");
    let got = answered(&out, 20);
    assert!(got >= 10, "c1 on {new_owner}: {got}/20 answered\n{out}");
    let tx = tunnel_tx(&apis[new], "c1") - tx_before;
    let file = cap.stop().to_owned();
    // Every VXLAN 101 frame from the connection's address after the move
    // came from the new owner's MAC; none from the dead one's.
    let rows: Vec<(f64, String)> = tshark(
        &file,
        "vxlan.vni == 101 && ip.src == 192.0.2.101",
        "-E occurrence=f -e frame.time_epoch -e eth.src",
    )
    .iter()
    .filter_map(|r| {
        let (t, mac) = r.trim().split_once('\t')?;
        Some((t.parse().ok()?, mac.trim().to_owned()))
    })
    .collect();
    let from_new = rows.iter().filter(|(_, m)| *m == new_mac).count() as u64;
    let late: Vec<&(f64, String)> = rows
        .iter()
        .filter(|(t, m)| *m == old_mac && *t > killed_at)
        .collect();
    assert!(
        late.is_empty(),
        "the killed member sent after its death: {late:?}"
    );
    // Each answered ping is a reply the new owner sent and counted, and
    // what it counted as sent since reached the peer's port (the capture
    // may drop frames on a loaded machine, never add any; before the
    // count started it also saw the owner's announcements).
    let dropped = cap.dropped().unwrap_or(0);
    assert!(
        tx >= got && from_new + dropped >= tx,
        "peer saw {from_new} frames from {new_mac} ({dropped} dropped by the capture), vecgate counted {tx}, pings answered {got}"
    );
    // The other connection never moved.
    let p = pool_show(&apis[watcher]);
    assert_eq!(placed(&p, "c2").map(|x| x.0), Some(owners[1].clone()));
    assert!(wait_until(10, || common::ping_ok(
        &pe,
        "-c1 -W1 10.102.0.1"
    )));

    // Draining an unknown member is refused by name; draining c2's owner
    // moves c2 to the member left, where it answers.
    let out = cli(&apis[watcher], &["pool", "drain", "nosuch"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("nosuch"), "{err}");
    let out = cli(&apis[new], &["pool", "drain", &owners[1]]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        wait_until(30, || matches!(
            placed(&pool_show(&apis[new]), "c2"),
            Some((m, reason, phase)) if m == new_owner && reason == "drain" && phase == "serving"
        )),
        "c2 drained to {new_owner}: {}",
        pool_show(&apis[new])
    );
    assert!(
        wait_until(30, || common::ping_ok(&pe, "-c1 -W1 10.102.0.1")),
        "c2 answers on {new_owner} after the drain"
    );
    // `pool show` as an operator reads it.
    let out = cli(&apis[new], &["pool", "show"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("pool pf") && text.contains(&new_owner),
        "{text}"
    );

    // Its metrics say the same.
    let sock = apis[new].trim_start_matches("unix:");
    let metrics = sh(&format!("curl -s --unix-socket {sock} http://gw/metrics"));
    for line in [
        "vecgate_pool_serving{pool=\"pf\"} 1",
        "vecgate_pool_members{pool=\"pf\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }

    // A member with another pool key is refused at start-up, by name,
    // before it registers (in the dead member's namespace, its netdevs
    // free again).
    let wrong = dir.join("wrong.key");
    common::write_secret(&wrong, "22".repeat(32));
    let cfg = dir.join("wrong.toml");
    std::fs::write(
        &cfg,
        config(
            old as u8 + 1,
            &apis[old],
            &etcd,
            &wrong.display().to_string(),
        ),
    )
    .unwrap();
    let out = Command::new("timeout")
        .args(["60", "ip", "netns", "exec", &gs[old].name])
        .arg(vecgate_bin())
        .args(["run", "--config"])
        .arg(&cfg)
        .output()
        .expect("vecgate run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("pool_key_file does not match"),
        "{err}"
    );
    let p = pool_show(&apis[new]);
    assert_eq!(p["members"].as_array().map(Vec::len), Some(2), "{p}");
    drop(gws);
    let _ = std::fs::remove_dir_all(&dir);
}
