//! The HA state sync with static-key ESP: a pair
//! a1/a2 sharing VRRP addresses, a static ESP tunnel from the underlay
//! virtual address to gb, and a sync link between a1 and a2
//! (`[ha] sync_*`, a kernel veth). During a paced TCP transfer and 10 ms
//! pings, a1 (master) is killed with `kill -9`; a2 takes over.
//!
//! Judges, all in this run: the transfer's bytes (SHA-256 at both ends,
//! one connection), a capture of the underlay read by tshark (every ESP
//! packet's sender MAC, SPI and sequence number: a2's first number is
//! above a1's last, and no (SPI, sequence) pair appears twice), and gb's
//! own drop counters (no replay, too-old or replay-not-durable drops).
//! Then a1 returns as backup and a planned switchover hands the SA back
//! to it during another transfer: byte-exact, a1's first number above
//! a2's last, no pair twice across both captures (gb's drops printed).

mod common;

use common::ha_pair::*;
use common::*;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

const SPI_AB: u32 = 0x1001;
const SPI_BA: u32 = 0x2001;
const SYNC_A1: &str = "10.250.0.1:4790";
const SYNC_A2: &str = "10.250.0.2:4790";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Test key of `spi` (a fixture, not a secret): key ‖ salt for aes128gcm16.
fn key(spi: u32) -> Vec<u8> {
    (0..20u32)
        .map(|i| (i * 31 + (spi >> 8) * 5 + spi + 7) as u8)
        .collect()
}

/// The static ESP tunnel of `m`; key files in `dir`.
fn esp(m: Member, dir: &Path) -> String {
    let (local, remote, far, out, inn) = match m {
        Member::B => (GB_WAN, WAN_VIP, "10.1.0.0/24", SPI_BA, SPI_AB),
        _ => (WAN_VIP, GB_WAN, "10.2.0.0/24", SPI_AB, SPI_BA),
    };
    let dir = dir.display();
    format!(
        r#"
[[tunnel]]
name = "t0"
kind = "ipsec"
local = "{local}"
remote = "{remote}"
traffic = ["{far}"]

[[tunnel.sa]]
direction = "out"
spi = {out:#x}
algorithm = "aes128gcm16"
key_file = "{dir}/{out:x}.hex"

[[tunnel.sa]]
direction = "in"
spi = {inn:#x}
algorithm = "aes128gcm16"
key_file = "{dir}/{inn:x}.hex"
"#
    )
}

/// (sender MAC, SPI, sequence number) of every ESP packet to gb.
fn esp_packets(pcap: &Path) -> Vec<(String, String, u64)> {
    tshark(
        pcap,
        &format!("esp && ip.dst == {GB_WAN}"),
        "-e eth.src -e esp.spi -e esp.sequence",
    )
    .iter()
    .filter_map(|l| {
        let mut f = l.split('\t');
        let mac = f.next()?.to_string();
        let spi = f.next()?.to_string();
        let seq = f.next()?.trim().parse().ok()?;
        Some((mac, spi, seq))
    })
    .collect()
}

/// gb's (or a member's) ESP receive drops that would mean a lost or
/// repeated sequence number.
fn replay_drops(api: &str) -> u64 {
    ["replay", "too-old", "replay-not-durable"]
        .iter()
        .map(|r| counter(api, "esp-decrypt", r))
        .sum()
}

fn sync_of(p: &HaPair, m: Member) -> serde_json::Value {
    p.show_ha(m)
        .as_array()
        .and_then(|v| v.first().cloned())
        .map_or(serde_json::Value::Null, |g| g["sync"].clone())
}

/// One pair at a time: two pairs (six debug-build gateways and two
/// transfers) on a loaded 2-CPU machine starve each other's VRRP adverts
/// into takeover blips.
static ONE_PAIR: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Removes the test's key directory.
struct Rm(std::path::PathBuf);
impl Drop for Rm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The pair with the static ESP tunnel and the sync link (a kernel veth,
/// not a dataplane port), `extra` added to both members' `[ha]`; gb and
/// a1 (master), then a2 (backup) started, and a2 synced with both SAs.
fn esp_pair(tag: &str, extra: &'static str) -> (HaPair, Rm) {
    let dir = std::env::temp_dir().join(unique(tag));
    std::fs::create_dir_all(&dir).unwrap();
    let rm = Rm(dir.clone());
    for spi in [SPI_AB, SPI_BA] {
        write_secret(&dir.join(format!("{spi:x}.hex")), hex(&key(spi)));
    }
    let sync_key = dir.join("sync.key");
    write_secret(&sync_key, hex(&[0x5a; 32]));
    let d = dir.clone();
    let mut p = HaPair::new(
        HaOpts {
            preempt: false,
            ..HaOpts::default()
        },
        move |m| esp(m, &d),
    );
    veth(&p.a1, "sync0", &p.a2, "sync0");
    p.a1.sh("ip addr add 10.250.0.1/30 dev sync0");
    p.a2.sh("ip addr add 10.250.0.2/30 dev sync0");
    let key_path = sync_key.display().to_string();
    p.set_ha_keys(move |m| {
        let (local, peer) = if m == Member::A1 {
            (SYNC_A1, SYNC_A2)
        } else {
            (SYNC_A2, SYNC_A1)
        };
        format!(
            "sync_local = \"{local}\"\nsync_peer = \"{peer}\"\nsync_key_file = \"{key_path}\"\n{extra}"
        )
    });
    p.start(Member::B);
    p.start(Member::A1);
    p.wait_roles(Member::A1, None, 30);
    p.start(Member::A2);
    p.wait_roles(Member::A1, Some(Member::A2), 30);
    warm_up(&p.h1, H2);

    // The standby hears the active: both static SAs synced.
    let mut y = serde_json::Value::Null;
    assert!(
        wait_until(30, || {
            y = sync_of(&p, Member::A2);
            y["state"] == "up"
                && y["peer_role"] == "master"
                && y["synced_outbound_sas"] == 1
                && y["synced_inbound_sas"] == 1
        }),
        "a2's state sync: {y}"
    );
    (p, rm)
}

#[test]
fn static_esp_kill9_new_active_sends_past_the_old_one() {
    let _one = ONE_PAIR.lock().unwrap_or_else(|e| e.into_inner());
    let (mut p, _rm) = esp_pair("hes", "");
    let mut y1 = serde_json::Value::Null;
    assert!(
        wait_until(30, || {
            y1 = sync_of(&p, Member::A1);
            y1["state"] == "up" && y1["peer_role"] == "backup"
        }),
        "a1's state sync: {y1}"
    );
    let m2 = p.metrics(Member::A2);
    assert!(
        m2.lines().any(
            |l| l.starts_with("vecgate_ha_sync_messages_received_total{") && !l.ends_with(" 0")
        ),
        "a2's metrics: no sync message received\n{m2}"
    );

    // A route added live on the active reaches the standby, and so does
    // its removal.
    let routes_of = |m: Member| {
        sh(&format!(
            "curl -s --unix-socket {} http://vecgate/routes",
            p.sock(m)
        ))
    };
    let added = sh(&format!(
        "curl -s -w ' %{{http_code}}' --unix-socket {} -X POST -H 'Content-Type: application/json' -d '{{\"prefix\":\"10.3.0.0/24\",\"via\":\"t0\"}}' http://vecgate/routes",
        p.sock(Member::A1)
    ));
    assert!(
        added.trim().ends_with("200") || added.trim().ends_with("201"),
        "POST /routes on a1: {added}"
    );
    assert!(
        wait_until(30, || routes_of(Member::A2).contains("10.3.0.0/24")),
        "a2 never got a1's new route: {}",
        routes_of(Member::A2)
    );
    let deleted = sh(&format!(
        "curl -s -w ' %{{http_code}}' --unix-socket {} -X DELETE 'http://vecgate/routes?prefix=10.3.0.0/24'",
        p.sock(Member::A1)
    ));
    assert!(
        deleted.trim().ends_with("204") || deleted.trim().ends_with("200"),
        "DELETE /routes on a1: {deleted}"
    );
    assert!(
        wait_until(30, || !routes_of(Member::A2).contains("10.3.0.0/24")),
        "a2 kept a route a1 removed: {}",
        routes_of(Member::A2)
    );
    let y = sync_of(&p, Member::A2);
    assert_eq!(y["route_changes"], 2, "a2's state sync: {y}");
    assert_eq!(y["route_errors"], 0, "a2's state sync: {y}");

    // So does a static ESP tunnel added and removed live through the API
    // (its key files named by path, present on both: never their keys).
    for spi in [0x3001u32, 0x4001] {
        write_secret(&_rm.0.join(format!("{spi:x}.hex")), hex(&key(spi)));
    }
    let spec = format!(
        r#"{{"name":"t9","kind":"ipsec","local":"{WAN_VIP}","remote":"192.0.2.99","traffic":["10.9.0.0/24"],"sa":[{{"direction":"out","spi":"0x3001","algorithm":"aes128gcm16","key_file":"{d}/3001.hex"}},{{"direction":"in","spi":"0x4001","algorithm":"aes128gcm16","key_file":"{d}/4001.hex"}}]}}"#,
        d = _rm.0.display()
    );
    let tunnels_of = |m: Member| {
        sh(&format!(
            "curl -s --unix-socket {} http://vecgate/tunnels",
            p.sock(m)
        ))
    };
    let added = sh(&format!(
        "curl -s -w ' %{{http_code}}' --unix-socket {} -X POST -H 'Content-Type: application/json' -d '{spec}' http://vecgate/tunnels",
        p.sock(Member::A1)
    ));
    assert!(
        added.trim().ends_with("200") || added.trim().ends_with("201"),
        "POST /tunnels on a1: {added}"
    );
    assert!(
        wait_until(30, || tunnels_of(Member::A2).contains("\"t9\"")),
        "a2 never got a1's new tunnel: {} / {}",
        tunnels_of(Member::A2),
        sync_of(&p, Member::A2)
    );
    let deleted = sh(&format!(
        "curl -s -w ' %{{http_code}}' --unix-socket {} -X DELETE http://vecgate/tunnels/t9",
        p.sock(Member::A1)
    ));
    assert!(
        deleted.trim().ends_with("204") || deleted.trim().ends_with("200"),
        "DELETE /tunnels/t9 on a1: {deleted}"
    );
    assert!(
        wait_until(30, || !tunnels_of(Member::A2).contains("\"t9\"")),
        "a2 kept a tunnel a1 removed: {}",
        tunnels_of(Member::A2)
    );
    let y = sync_of(&p, Member::A2);
    assert_eq!(y["tunnel_changes"], 2, "a2's state sync: {y}");
    assert_eq!(y["tunnel_errors"], 0, "a2's state sync: {y}");
    assert_eq!(y["synced_tunnels"], 1, "a2's state sync: {y}");

    // The sync link cut while both run: each side says so, VRRP alone
    // keeps the roles (one master); back up, the standby hears the active
    // again.
    p.a2.sh("ip link set sync0 down");
    for m in [Member::A1, Member::A2] {
        let mut y = serde_json::Value::Null;
        assert!(
            wait_until(30, || {
                y = sync_of(&p, m);
                y["state"] == "down"
            }),
            "{m:?}'s state sync with the link cut: {y}"
        );
        assert!(
            wait_until(10, || p.gw(m).log_contains("state sync down")),
            "{m:?} did not log the sync going down"
        );
    }
    assert!(p
        .metrics(Member::A2)
        .contains("vecgate_ha_sync_up{peer=\"10.250.0.1:4790\"} 0"));
    assert!(p.all_in(Member::A1, "master") && p.all_in(Member::A2, "backup"));
    p.a2.sh("ip link set sync0 up");
    assert!(
        wait_until(30, || sync_of(&p, Member::A2)["state"] == "up"
            && sync_of(&p, Member::A1)["state"] == "up"),
        "the sync did not come back: {} / {}",
        sync_of(&p, Member::A1),
        sync_of(&p, Member::A2)
    );
    assert_eq!(sync_of(&p, Member::A2)["rejected"]["auth"], 0);

    let wmac1 = p.mac(Member::A1, "wan0");
    let wmac2 = p.mac(Member::A2, "wan0");
    let mut cap = Capture::start_filtered(&p.sw, "br1", "esp");
    let api_b = p.api(Member::B);
    let api_a2 = p.api(Member::A2);
    let drops_b = replay_drops(&api_b);
    let drops_a2 = replay_drops(&api_a2);

    // kill -9 of a1 in the middle of 24 s of data and 30 s of pings.
    let n = 3000u64;
    let ping = p.h1.spawn(&format!("ping -D -n -i 0.01 -c {n} -w 90 {H2}"));
    let xfer = Transfer::start(&p, H2, 7200, 24 << 20, 24);
    std::thread::sleep(Duration::from_secs(8));
    p.kill9(Member::A1);
    p.wait_roles(Member::A2, None, 30);

    xfer.check();
    let out = String::from_utf8_lossy(&ping.wait_with_output().expect("ping").stdout).into_owned();
    let ok = answered(&out, n);
    eprintln!("kill -9 with static ESP: {ok}/{n} pings answered");
    assert!(
        (n - 20..=n).all(|k| out.contains(&format!("icmp_seq={k} "))),
        "pings did not resume after the failover:\n{out}"
    );

    // The independent observer: tshark over the underlay capture.
    let pcap = cap.stop().to_path_buf();
    let pkts = esp_packets(&pcap);
    let ab: Vec<&(String, String, u64)> = pkts
        .iter()
        .filter(|p| p.1.ends_with(&format!("{SPI_AB:x}")))
        .collect();
    let old_last = ab.iter().filter(|p| p.0 == wmac1).map(|p| p.2).max();
    let new_first = ab.iter().filter(|p| p.0 == wmac2).map(|p| p.2).min();
    let mut seen: HashMap<(&str, u64), usize> = HashMap::new();
    for p in &pkts {
        *seen.entry((p.1.as_str(), p.2)).or_default() += 1;
    }
    let repeated: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).collect();
    eprintln!(
        "ESP to gb: {} packets; a1's last sequence number {old_last:?}, a2's first {new_first:?}",
        pkts.len()
    );
    let (Some(old_last), Some(new_first)) = (old_last, new_first) else {
        panic!("the capture lacks ESP from a1 ({wmac1}) or a2 ({wmac2}): {pkts:?}");
    };
    assert!(
        new_first > old_last,
        "a2 started at {new_first}, not above a1's last {old_last}"
    );
    assert!(
        repeated.is_empty(),
        "(SPI, sequence) pairs seen twice: {repeated:?}"
    );
    // a2 said where it would start; the wire agrees.
    let log = p.gw(Member::A2).log_text();
    assert!(
        log.contains("taking over") && log.contains("past the old active's ceiling"),
        "a2 did not take over the synced SA:\n{log}"
    );
    let y = sync_of(&p, Member::A2);
    assert_eq!(y["takeovers"], 1, "a2's state sync: {y}");
    assert_eq!(y["last_takeover_sas"], 2, "a2's state sync: {y}");

    // gb's replay window dropped nothing a2 sent, and a2's nothing of gb's.
    let db = replay_drops(&api_b) - drops_b;
    let da2 = replay_drops(&api_a2) - drops_a2;
    eprintln!("replay drops during the failover: gb {db}, a2 {da2}");
    assert_eq!(
        db,
        0,
        "gb dropped ESP as replays: {:?}",
        show_errors(&api_b)
    );
    assert_eq!(
        da2,
        0,
        "a2 dropped ESP as replays: {:?}",
        show_errors(&api_a2)
    );

    // a1 comes back (backup: no preemption), follows a2, and a planned
    // switchover hands the SA back to it during another transfer: a1
    // starts past everything a2 sent, and no (SPI, sequence) pair of
    // either capture repeats.
    p.start(Member::A1);
    p.wait_roles(Member::A2, Some(Member::A1), 30);
    let mut y = serde_json::Value::Null;
    assert!(
        wait_until(30, || {
            y = sync_of(&p, Member::A1);
            y["state"] == "up" && y["peer_role"] == "master" && y["synced_outbound_sas"] == 1
        }),
        "a1's state sync after its restart: {y}"
    );
    let mut cap2 = Capture::start_filtered(&p.sw, "br1", "esp");
    let drops_b = replay_drops(&api_b);
    let n2 = 1500u64;
    let ping =
        p.h1.spawn(&format!("ping -D -n -i 0.01 -c {n2} -w 90 {H2}"));
    let xfer = Transfer::start(&p, H2, 7201, 12 << 20, 12);
    std::thread::sleep(Duration::from_secs(5));
    let sw = std::process::Command::new(vecgate_bin())
        .args(["ha", "switchover", "--json", "--api", &p.api(Member::A2)])
        .output()
        .expect("vecgate ha switchover");
    assert!(
        sw.status.success(),
        "switchover: {}",
        String::from_utf8_lossy(&sw.stderr)
    );
    p.wait_roles(Member::A1, Some(Member::A2), 30);
    xfer.check();
    let out = String::from_utf8_lossy(&ping.wait_with_output().expect("ping").stdout).into_owned();
    let pcap2 = cap2.stop().to_path_buf();
    let pkts2 = esp_packets(&pcap2);
    let ab2: Vec<&(String, String, u64)> = pkts2
        .iter()
        .filter(|p| p.1.ends_with(&format!("{SPI_AB:x}")))
        .collect();
    let a2_last = ab2.iter().filter(|p| p.0 == wmac2).map(|p| p.2).max();
    let a1_first = ab2.iter().filter(|p| p.0 == wmac1).map(|p| p.2).min();
    let db = replay_drops(&api_b) - drops_b;
    eprintln!(
        "switchover with static ESP: {}/{n2} pings answered; a2's last sequence number {a2_last:?}, a1's first {a1_first:?}; gb's replay drops {db}",
        answered(&out, n2)
    );
    let (Some(a2_last), Some(a1_first)) = (a2_last, a1_first) else {
        panic!("the capture lacks ESP from a2 or a1: {pkts2:?}");
    };
    assert!(
        a1_first > a2_last,
        "a1 started at {a1_first}, not above a2's last {a2_last}"
    );
    let mut all: HashMap<(&str, u64), usize> = HashMap::new();
    for p in pkts.iter().chain(pkts2.iter()) {
        *all.entry((p.1.as_str(), p.2)).or_default() += 1;
    }
    let repeated: Vec<_> = all.iter().filter(|(_, c)| **c > 1).collect();
    assert!(
        repeated.is_empty(),
        "(SPI, sequence) pairs seen twice: {repeated:?}"
    );
}

/// `[ha] max_sa_pps` of the sync-link-down test: above the default, so
/// that a few seconds of a dead link are worth more than the fixed 2^26
/// margin a takeover used to add (which this test would catch).
const FAST_PPS: u64 = 10_000_000;

/// The sync link dies while the active keeps sending; then the active gets
/// `kill -9`. The standby cannot know how far the active went: it must
/// jump past anything the active's token bucket (`max_sa_pps`) allowed
/// since its last word. Judges, in this run: tshark over the underlay (no
/// (SPI, sequence) pair twice; a2's first number above a1's last number
/// before the cut plus `max_sa_pps` × the time the link was down, which a
/// takeover that trusted the stale ceiling would not reach), the
/// transfer's bytes on one connection, the pings resuming, gb's replay
/// counters, and a2's `show ha` and log.
#[test]
fn static_esp_kill9_with_the_sync_link_down_never_repeats_a_sequence_number() {
    let _one = ONE_PAIR.lock().unwrap_or_else(|e| e.into_inner());
    let (mut p, _rm) = esp_pair("hesd", "max_sa_pps = 10000000\n");
    let wmac1 = p.mac(Member::A1, "wan0");
    let wmac2 = p.mac(Member::A2, "wan0");
    let mut cap = Capture::start_filtered(&p.sw, "br1", "esp");
    let api_b = p.api(Member::B);
    let drops_b = replay_drops(&api_b);

    let n = 2500u64;
    let ping = p.h1.spawn(&format!("ping -D -n -i 0.01 -c {n} -w 90 {H2}"));
    let xfer = Transfer::start(&p, H2, 7202, 20 << 20, 20);
    std::thread::sleep(Duration::from_secs(3));
    // Cut the sync link: a2 stops hearing a1 (down on its side, and
    // VRRP on the LAN and underlay still elects a1).
    p.a2.sh("ip link set sync0 down");
    let cut = std::time::Instant::now();
    assert!(
        wait_until(30, || sync_of(&p, Member::A2)["state"] == "down"),
        "a2 still sees the sync up: {}",
        sync_of(&p, Member::A2)
    );
    // a1 keeps sending through the tunnel with the link down.
    std::thread::sleep(Duration::from_secs(8).saturating_sub(cut.elapsed()));
    let down_for = cut.elapsed();
    p.kill9(Member::A1);
    p.wait_roles(Member::A2, None, 30);

    xfer.check();
    let out = String::from_utf8_lossy(&ping.wait_with_output().expect("ping").stdout).into_owned();
    eprintln!(
        "kill -9 with the sync link down {down_for:?}: {}/{n} pings answered",
        answered(&out, n)
    );
    assert!(
        (n - 20..=n).all(|k| out.contains(&format!("icmp_seq={k} "))),
        "pings did not resume after the failover:\n{out}"
    );

    let pcap = cap.stop().to_path_buf();
    let pkts = esp_packets(&pcap);
    let ab: Vec<&(String, String, u64)> = pkts
        .iter()
        .filter(|p| p.1.ends_with(&format!("{SPI_AB:x}")))
        .collect();
    // a2's numbers after the kill: those after a1's last packet in the
    // capture (a loaded machine can give a2 a moment as master before,
    // a blip whose numbers are checked by the no-repeat rule alone).
    let a1_end = ab.iter().rposition(|p| p.0 == wmac1);
    let old_last = ab.iter().filter(|p| p.0 == wmac1).map(|p| p.2).max();
    let new_first = a1_end.and_then(|i| ab[i..].iter().filter(|p| p.0 == wmac2).map(|p| p.2).min());
    let mut seen: HashMap<(&str, u64), usize> = HashMap::new();
    for p in &pkts {
        *seen.entry((p.1.as_str(), p.2)).or_default() += 1;
    }
    let repeated: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).collect();
    let (Some(old_last), Some(new_first)) = (old_last, new_first) else {
        panic!("the capture lacks ESP from a1 ({wmac1}) or a2 ({wmac2}): {pkts:?}");
    };
    // What a1 could have reserved with the link down, at most: its
    // bucket's rate for that long (plus the bucket, which the standby
    // also adds; not asserted here, it is the implementation's margin).
    let could = old_last + FAST_PPS * down_for.as_secs();
    eprintln!(
        "ESP to gb: {} packets; a1's last sequence number {old_last}, a2's first {new_first} (a1's bucket allowed up to {could} by the kill)",
        pkts.len()
    );
    assert!(
        repeated.is_empty(),
        "(SPI, sequence) pairs seen twice: {repeated:?}"
    );
    assert!(
        new_first > could,
        "a2 started at {new_first}: within what a1 may have sent with the link down ({could})"
    );
    let db = replay_drops(&api_b) - drops_b;
    assert_eq!(
        db,
        0,
        "gb dropped ESP as replays: {:?}",
        show_errors(&api_b)
    );
    let y = sync_of(&p, Member::A2);
    assert!(y["takeovers"].as_u64() >= Some(1), "a2's state sync: {y}");
    assert_eq!(
        y["unsafe_sas"],
        serde_json::json!([]),
        "a2's state sync: {y}"
    );
    let log = p.gw(Member::A2).log_text();
    assert!(
        log.contains("becoming master while the sync link is down"),
        "a2 did not say it took over with the link down:\n{log}"
    );
}
