//! A pool connection keyed by IKEv2 towards strongSwan charon moves with
//! its SAs: `kill -9` of its owner, and the member that takes it over
//! adopts the sealed IKE SA and child SA from etcd; charon sees the same
//! IKE and child SPIs and no new IKE_SA_INIT.
//!
//! ```text
//!   etcd e0 e1 e2 (ns et, 10.99.0.1) ── br9 (mgmt) ── mg0 of g1, g2
//!   g1 .11  g2 .12  wan0 ── br1 (underlay 192.0.2.0/24) ── b-wan .2 [gb: charon] b-lan ── h2 10.2.0.2
//!   connection c1: ipsec (IKEv2 PSK), local 192.0.2.101 (moves),
//!   tenant "ta", tunnel address 10.1.0.1/24, traffic 10.2.0.0/24
//! ```
//!
//! charon (kernel-libipsec: ESP in UDP 4500) responds, with liveness
//! checks every 2 s. h2 pings the connection's tunnel address every
//! 10 ms across the kill: the member serving the connection answers.
//! Judged, all in this run, by what the others saw: charon's SAs
//! (`swanctl --list-sas`) and log (no IKE_SA_INIT after the kill, no
//! sequence or integrity failure); a capture of the underlay at charon's
//! port over the whole test (tshark: no IKE_SA_INIT from the connection's
//! address after the kill, no (SPI, sequence) pair of ours twice, the new
//! owner's ESP frames against what it counted as sent); the pings
//! resumed.

#[path = "common/charon.rs"]
mod charon;
mod common;
#[path = "common/pool.rs"]
mod pool;

use charon::{Charon, CharonCfg};
use common::{answered, sh, tshark, unique, veth, wait_until, Capture, Gateway, Netns};
use pool::{cli, member_config, placed, pool_show, start_etcd, tunnel_tx, ETCD};
use std::collections::HashSet;
use std::time::Duration;

const PSK: &str = "pool-ike-psk-0123456789abcdef";
const LOCAL: &str = "192.0.2.101";
const PEER: &str = "192.0.2.2";

fn config(n: u8, api: &str, etcd: &str, key: &str) -> String {
    member_config("pi", 4, n, api, etcd, key)
}

/// Connection `c1`: IKEv2 with a PSK towards charon, initiated by the
/// pool member that runs it.
fn connection(psk: &str) -> String {
    format!(
        r#"{{"tunnel": {{"name": "c1", "kind": "ipsec", "local": "{LOCAL}",
            "remote": "{PEER}", "vrf": "ta", "addresses": ["10.1.0.1/24"],
            "traffic": ["10.2.0.0/24"],
            "ike": {{"psk_file": "{psk}", "remote_id": "gw-b.example.net",
                     "local_traffic": ["10.1.0.0/24"],
                     "ike_proposals": ["aes256gcm16-prfsha256-x25519"],
                     "esp_proposals": ["aes128gcm16"], "initiate": true}}}},
           "routes": [], "bandwidth_mbps": 100}}"#
    )
}

/// charon's SAs as `swanctl --list-sas` prints them: the IKE SAs' SPI
/// pairs and the child SAs' (in, out) SPIs.
fn charon_sas(list: &str) -> (Vec<String>, Vec<String>) {
    let mut ike = Vec::new();
    let mut children = Vec::new();
    for l in list.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.contains(&"IKEv2,") {
            ike.push(
                w.iter()
                    .filter(|t| t.contains("_i") || t.contains("_r"))
                    .map(|t| t.trim_end_matches('*'))
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        if let ["in" | "out", s, ..] = w.as_slice() {
            children.push(s.trim_end_matches(',').to_owned());
        }
    }
    (ike, children)
}

fn charon_failures(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            l.contains("sequence number verification failed")
                || l.contains("ICV verification failed")
                || l.contains("integrity check failed")
        })
        .collect()
}

fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn kill9_moves_an_ike_connection_without_renegotiation() {
    if sh("command -v etcd || true").trim().is_empty() {
        panic!("etcd is not installed (scripts/install-deps.sh installs etcd-server)");
    }
    let sw = Netns::new("pk-sw");
    let et = Netns::new("pk-et");
    let gb = Netns::new("pk-gb");
    let h2 = Netns::new("pk-h2");
    let gs: Vec<Netns> = (1..=2).map(|i| Netns::new(&format!("pk-g{i}"))).collect();
    for br in ["br1", "br9"] {
        sw.sh(&format!(
            "ip link add {br} type bridge mcast_snooping 0 && ip link set {br} up"
        ));
    }
    veth(&sw, "pet", &et, "mg0");
    sw.sh("ip link set pet master br9");
    et.sh(&format!("ip addr add {ETCD}/24 dev mg0"));
    veth(&sw, "pgb", &gb, "b-wan");
    sw.sh("ip link set pgb master br1");
    veth(&gb, "b-lan", &h2, "eth0");
    h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    charon::router(&gb, &h2, "", &[]);
    for (i, g) in gs.iter().enumerate() {
        let n = i + 1;
        veth(&sw, &format!("pg{n}w"), g, "wan0");
        veth(&sw, &format!("pg{n}m"), g, "mg0");
        sw.sh(&format!(
            "ip link set pg{n}w master br1 && ip link set pg{n}m master br9"
        ));
        g.sh(&format!("ip addr add 10.99.0.1{n}/24 dev mg0"));
    }
    let dir = std::env::temp_dir().join(unique("pk"));
    std::fs::create_dir_all(&dir).unwrap();
    let (_etcd, etcd) = start_etcd(&et, &dir);
    let key = dir.join("pool.key");
    common::write_secret(&key, "33".repeat(32));
    let psk = dir.join("psk");
    common::write_secret(&psk, format!("{PSK}\n"));
    let ch = Charon::start_ext(
        &gb,
        &CharonCfg {
            local: PEER,
            remote: LOCAL,
            local_id: "gw-b.example.net",
            remote_id: LOCAL,
            local_ts: "10.2.0.0/24",
            remote_ts: "10.1.0.0/24",
            ike: "aes256gcm16-prfsha256-x25519",
            esp: "aes128gcm16",
            psk: PSK,
            initiate: false,
        },
        "dpd_delay = 2s",
        "",
    );
    // The whole test's IKE and ESP at charon's port.
    let mut cap = Capture::start_filtered(&gb, "b-wan", "udp port 500 or udp port 4500");
    let apis: Vec<String> = (1..=2)
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
            .is_some_and(|m| m.len() == 2)),
        "two members: {}",
        pool_show(&apis[0])
    );
    let f = dir.join("c1.json");
    std::fs::write(&f, connection(&psk.display().to_string())).unwrap();
    let out = cli(
        &apis[0],
        &["pool", "connection", "add", &f.display().to_string()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut owner = String::new();
    assert!(
        wait_until(30, || {
            match placed(&pool_show(&apis[1]), "c1") {
                Some((m, _, phase)) if !m.is_empty() && phase == "serving" => {
                    owner = m;
                    true
                }
                _ => false,
            }
        }),
        "c1 serving: {}",
        pool_show(&apis[1])
    );
    let old: usize = owner[1..].parse::<usize>().unwrap() - 1;
    let new = 1 - old;
    charon::wait_established(&apis[old], gws[old].as_ref().unwrap(), 60);
    ch.wait_sas("INSTALLED", 20);
    assert!(
        wait_until(20, || common::ping_ok(&h2, "-c1 -W1 10.1.0.1")),
        "h2 reaches c1 on its owner {owner}"
    );
    // The owner sealed the IKE SA into etcd (its log says it adopted
    // nothing, negotiated once).
    std::thread::sleep(Duration::from_secs(2));
    let before = charon_sas(&ch.wait_sas("INSTALLED", 20));
    assert_eq!(before.0.len(), 1, "{before:?}");
    let inits_before = ch.log().matches("IKE_SA_INIT").count();
    let log_before = ch.log().len();

    // kill -9 of the owner in the middle of 30 s of 10 ms pings.
    let n = 3000u64;
    let ping = h2.spawn(&format!("ping -D -n -i 0.01 -c {n} -w 90 10.1.0.1"));
    std::thread::sleep(Duration::from_secs(5));
    let old_mac = gs[old]
        .sh("cat /sys/class/net/wan0/address")
        .trim()
        .to_owned();
    let new_mac = gs[new]
        .sh("cat /sys/class/net/wan0/address")
        .trim()
        .to_owned();
    gws[old].as_mut().unwrap().kill9();
    let killed_at = now_s();
    let log_kill = ch.log().len();
    let new_owner = format!("g{}", new + 1);
    assert!(
        wait_until(30, || matches!(
            placed(&pool_show(&apis[new]), "c1"),
            Some((m, reason, phase)) if m == new_owner && reason == "failover" && phase == "serving"
        )),
        "c1 moved to {new_owner}: {}",
        pool_show(&apis[new])
    );
    let out = String::from_utf8_lossy(&ping.wait_with_output().expect("ping").stdout).into_owned();
    let ok = answered(&out, n);
    eprintln!(
        "pool kill -9 with IKE (charon): {ok}/{n} pings answered, gap about {} ms",
        (n - ok) * 10
    );
    let gw_new = gws[new].as_ref().unwrap();
    assert!(
        (n - 20..=n).all(|k| out.contains(&format!("icmp_seq={k} "))),
        "pings did not resume after the failover:\n{out}\n---- {new_owner} ----\n{}",
        gw_new.log_text()
    );
    let tx_new = tunnel_tx(&apis[new], "c1");
    // The move's timeline as the pool recorded it: detected (the lease
    // gone), decided, programmed, first packet, in that order.
    let mut mv = serde_json::Value::Null;
    assert!(
        wait_until(20, || {
            mv = pool_show(&apis[new])["connections"][0]["last_move"].clone();
            mv["first_packet_ms"].is_u64()
        }),
        "c1's move: {mv}"
    );
    let at = |k: &str| mv[k].as_u64().unwrap_or(0);
    assert!(
        mv["reason"] == "failover"
            && at("detect_ms") <= at("decide_ms")
            && at("decide_ms") <= at("program_ms")
            && at("program_ms") <= at("first_packet_ms"),
        "{mv}"
    );
    eprintln!(
        "pool kill -9 with IKE: detect→decide {} ms, →programmed {} ms, →first packet {} ms",
        at("decide_ms") - at("detect_ms"),
        at("program_ms") - at("detect_ms"),
        at("first_packet_ms") - at("detect_ms")
    );

    // charon: the same IKE SA and child SA, no new IKE_SA_INIT, nothing of
    // the new owner's dropped, its liveness checks answered.
    let after = charon_sas(&ch.swanctl(&["--list-sas"]));
    assert_eq!(after, before, "charon's SAs changed across the failover");
    let log = ch.log();
    assert_eq!(
        log.matches("IKE_SA_INIT").count(),
        inits_before,
        "charon saw an IKE_SA_INIT after the kill:\n{}",
        &log[log_before.min(log.len())..]
    );
    let failures = charon_failures(&log[log_kill.min(log.len())..]);
    assert!(
        failures.is_empty(),
        "charon dropped ESP/IKE of the new owner: {failures:#?}"
    );
    assert!(
        !log[log_before.min(log.len())..].contains("giving up"),
        "charon gave up on a liveness check:\n{}",
        &log[log_before.min(log.len())..]
    );
    let text = gw_new.log_text();
    assert!(
        text.contains("took over the old owner's IKE SAs") && !text.contains("IKE: SA established"),
        "{new_owner} did not adopt the IKE SA:\n{text}"
    );

    // The wire over the whole test.
    let dropped = cap.dropped().unwrap_or(0);
    let file = cap.stop().to_owned();
    // One IKE_SA_INIT from the connection's address, the first owner's;
    // none after the kill.
    let inits: Vec<f64> = tshark(
        &file,
        &format!("isakmp.exchangetype == 34 && ip.src == {LOCAL}"),
        "-e frame.time_epoch",
    )
    .iter()
    .filter_map(|t| t.trim().parse().ok())
    .collect();
    assert!(
        !inits.is_empty() && inits.iter().all(|t| *t < killed_at),
        "IKE_SA_INIT from {LOCAL} at {inits:?}, the kill at {killed_at}"
    );
    // No (SPI, sequence) pair of ours twice, whoever sent it.
    let mut seen = HashSet::new();
    let mut repeated = Vec::new();
    let mut from_new = 0u64;
    let mut from_old_late = 0u64;
    for r in tshark(
        &file,
        &format!("esp && ip.src == {LOCAL}"),
        "-e frame.time_epoch -e eth.src -e esp.spi -e esp.sequence",
    ) {
        let f: Vec<&str> = r.split('\t').map(str::trim).collect();
        let [t, mac, spi, seq] = f[..] else { continue };
        if !seen.insert((spi.to_owned(), seq.to_owned())) {
            repeated.push(r.clone());
        }
        if mac == new_mac {
            from_new += 1;
        }
        if mac == old_mac && t.parse::<f64>().is_ok_and(|t| t > killed_at) {
            from_old_late += 1;
        }
    }
    assert!(repeated.is_empty(), "(SPI, seq) sent twice: {repeated:?}");
    assert_eq!(from_old_late, 0, "the killed member sent after its death");
    // What the new owner counted as sent into the tunnel reached charon's
    // port (the capture may drop frames, never add any).
    assert!(
        tx_new > 0 && from_new + dropped >= tx_new,
        "charon's port saw {from_new} ESP frames from {new_mac} ({dropped} dropped by the capture), {new_owner} counted {tx_new}"
    );
    drop(gws);
    drop(ch);
    let _ = std::fs::remove_dir_all(&dir);
}
