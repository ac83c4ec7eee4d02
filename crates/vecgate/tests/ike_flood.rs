//! IKE under attack (RFC 7296 §2.6, RFC 8019): a charon tunnel with DPD
//! every 2 s carries a TCP transfer while scapy floods vecgate's IKE port
//! for 30 s from spoofed sources (IKE_SA_INITs with an invalid MODP-2048
//! KE, well-formed x25519 INITs, junk), some spoofed as the peer itself:
//!
//!   h1 10.1.0.2 ── a-lan [gwA: vecgate] a-wan 192.0.2.1 ══ 192.0.2.2 b-wan [gwB: charon + scapy] b-lan ── h2 10.2.0.2
//!
//! Referees in the same run: the transfer's SHA-256 at both ends, charon's
//! log and SAs, vecgate's counters (`show ike`, `/metrics` names, ip-local's
//! punt counters: the flood overflows the punt queue while the datagrams
//! of the live IKE SAs take their own and are never dropped), a capture of
//! what vecgate sends (COOKIE notifies to the peer's address, nothing at
//! all to the spoofed strangers), vecgate's VmRSS and its log.
//! Needs root, strongSwan and scapy; fails (never skips) without them.

#[path = "common/charon.rs"]
mod charon;
mod common;

use charon::{ike_state, wait_established, Charon, CharonCfg};
use common::sites::Sites;
use common::{unique, wait_until, Gateway, Netns, TempFiles};
use serde_json::Value;
use std::time::{Duration, Instant};

const PSK: &str = "ike-flood-psk-0123456789abcdef";
/// Flood length and packet cap (bounded in count and time).
const FLOOD_SECS: u32 = 30;
const FLOOD_MAX_PACKETS: u32 = 750_000;
/// Five times the rate first measured: above what the IKE thread serves
/// here, so the punt queue of unknown datagrams overflows.
const FLOOD_PPS: u32 = 25_000;

/// The flood: prebuilt frames (varied SPIs and sources), sent in a loop
/// through a raw socket on `iface` at about `pps` for `secs` or `max`
/// frames; prints "sent SECONDS".
const FLOOD: &str = r#"
import os, random, socket, struct, sys, time
from scapy.all import Ether, IP, UDP, Raw, raw
iface, dmac, dst, peer, secs, pps, cap = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
def transform(ty, tid, last, keylen=None):
    attr = struct.pack("!HH", 0x800e, keylen) if keylen else b""
    return struct.pack("!BBHBBH", 0 if last else 3, 0, 8 + len(attr), ty, 0, tid) + attr
def init(group, ke):
    ts = transform(1, 12, False, 256) + transform(2, 5, False) + transform(3, 12, False) + transform(4, group, True)
    prop = struct.pack("!BBHBBBB", 0, 0, 8 + len(ts), 1, 1, 0, 4) + ts
    sa = struct.pack("!BBH", 34, 0, 4 + len(prop)) + prop
    kep = struct.pack("!BBHHH", 40, 0, 8 + len(ke), group, 0) + ke
    nonce = struct.pack("!BBH", 0, 0, 36) + os.urandom(32)
    body = sa + kep + nonce
    hdr = os.urandom(8) + bytes(8) + struct.pack("!BBBBII", 33, 0x20, 34, 0x08, 0, 28 + len(body))
    return hdr + body
def stranger():
    return "%d.%d.%d.%d" % (random.choice([198, 203]), random.choice([51, 0]), random.randint(0, 255), random.randint(1, 254))
frames = []
for i in range(4000):
    k = i % 10
    if k < 3:
        src, payload = peer, init(31, os.urandom(32))
    elif k < 5:
        src, payload = peer, init(14, b"\xff" * 256)
    elif k < 7:
        src, payload = stranger(), init(31, os.urandom(32))
    elif k < 8:
        src, payload = stranger(), init(14, b"\xff" * 256)
    else:
        src, payload = stranger(), os.urandom(random.randint(1, 300))
    sport = random.randint(1025, 65000)
    frames.append(raw(Ether(dst=dmac) / IP(src=src, dst=dst) / UDP(sport=sport, dport=500) / Raw(payload)))
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
sent, t0 = 0, time.time()
while sent < cap and time.time() - t0 < secs:
    for _ in range(50):
        try:
            s.send(frames[sent % len(frames)])
        except OSError:
            pass
        sent += 1
    ahead = sent / pps - (time.time() - t0)
    if ahead > 0:
        time.sleep(ahead)
print(sent, round(time.time() - t0, 2))
"#;

/// `GET /metrics` over the API's unix socket.
fn metrics(sock: &std::path::Path) -> String {
    common::sh(&format!(
        "curl -sS --max-time 10 --unix-socket {} http://x/metrics",
        sock.display()
    ))
}

fn dropped(st: &Value, reason: &str) -> u64 {
    st["inits_dropped"]
        .as_array()
        .and_then(|v| v.iter().find(|d| d["reason"] == reason))
        .and_then(|d| d["count"].as_u64())
        .unwrap_or(0)
}

#[test]
fn a_spoofed_ike_flood_costs_counters_not_the_tunnel() {
    let Sites { h1, h2, ga, gb, .. } = Sites::new();
    charon::router(&gb, &h2, "", &[]);
    let mut files = TempFiles::default();
    let psk = files.secret("psk", format!("{PSK}\n"));
    // charon: DPD every 2 s; it rekeys on our command during the flood.
    let ch = Charon::start_ext(
        &gb,
        &CharonCfg {
            local: "192.0.2.2",
            remote: "192.0.2.1",
            local_id: "192.0.2.2",
            remote_id: "192.0.2.1",
            local_ts: "10.2.0.0/24",
            remote_ts: "10.1.0.0/24",
            ike: "aes256-sha256-x25519",
            esp: "aes128gcm16",
            psk: PSK,
            initiate: false,
        },
        "dpd_delay = 2s",
        "",
    );
    let sock = std::env::temp_dir().join(format!("{}.sock", unique("fl")));
    let api = format!("unix:{}", sock.display());
    // The underlay's default route leads to gwB: anything vecgate answers
    // a stranger would show on b-wan.
    let cfg = format!(
        r#"[gateway]
name = "fl"
api = "unix:{sock}"

[[interface]]
name = "lan"
host = "a-lan"
driver = "af_packet"
addresses = ["10.1.0.1/24"]
vrf = "blue"

[[interface]]
name = "wan"
host = "a-wan"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[[route]]
prefix = "0.0.0.0/0"
via = "192.0.2.2"

[[tunnel]]
name = "ike0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.2"
vrf = "blue"
traffic = ["10.2.0.0/24"]

[tunnel.ike]
psk_file = "{psk}"
ike_proposals = ["aes256-sha256-x25519", "aes256-sha256-modp2048"]
esp_proposals = ["aes128gcm16"]
dpd_interval = 2
"#,
        sock = sock.display(),
    );
    let gw = Gateway::start(&ga, &cfg);
    let first = wait_established(&api, &gw, 40);
    ch.wait_sas("INSTALLED", 20);
    let _ = h1.try_sh("ping -c 1 -W 2 10.2.0.2");
    let ok = h1.try_sh("ping -c 3 -i 0.2 -W 2 10.2.0.2");
    assert!(ok.status.success(), "no traffic before the flood");
    // `ip netns exec` execs vecgate: the child's pid is vecgate's.
    let pid = gw.pid();
    let rss_before = common::vm_rss_kib(pid);
    let ike_ticks_before = common::thread_ticks(pid, "vg-ike");
    let inits_before = first["inits_received"].as_u64().unwrap_or(0);
    let log_before = gw.log.lock().unwrap().len();
    let ike_rekeys_before = first["ike_rekeys"].as_u64().unwrap_or(0);
    let child_rekeys_before = first["child_rekeys"].as_u64().unwrap_or(0);
    // vecgate's liveness checks (empty INFORMATIONALs, RFC 7296 §2.4)
    // as charon parses them; charon checks only when it hears nothing,
    // which the transfer prevents.
    let dpd = |log: &str| log.matches("parsed INFORMATIONAL request").count();
    let dpd_before = dpd(&ch.log());
    // charon resending a request, or seeing ours resent: a datagram of the
    // live SAs lost on the way (vecgate's punt queue, under the flood).
    let retransmits = |log: &str| log.matches("retransmit").count();
    let retransmits_before = retransmits(&ch.log());
    let punt = |reason: &str| common::counter(&api, "ip-local", reason);
    let (full_before, known_before) = (punt("punt-queue-full"), punt("ike-punted-known"));
    // What vecgate sends on IKE's port, and anything to a stranger.
    let mut cap = common::Capture::start_filtered(
        &gb,
        "b-wan",
        "'ip and src host 192.0.2.1 and (udp port 500 or not dst host 192.0.2.2)'",
    );
    // The transfer, then the flood beside it.
    let rx = h2.spawn(&format!(
        "python3 {} 0.0.0.0 7300",
        files.write("frx", common::TCP_RX)
    ));
    std::thread::sleep(Duration::from_millis(300));
    let tx = h1.spawn(&format!(
        "python3 {} 10.2.0.2 7300 {}",
        files.write("ftx", common::SLOW_TX),
        FLOOD_SECS + 6
    ));
    let mac = ga.sh("cat /sys/class/net/a-wan/address").trim().to_string();
    let flood_t0 = Instant::now();
    let flood = gb.spawn(&format!(
        "/usr/bin/python3 {} b-wan {mac} 192.0.2.1 192.0.2.2 {FLOOD_SECS} {FLOOD_PPS} {FLOOD_MAX_PACKETS}",
        files.write("flood", FLOOD)
    ));
    // During the flood: the tunnel never leaves "established", and charon
    // rekeys the child SA and the IKE SA.
    let mut states = Vec::new();
    let mut rekeyed_child = String::new();
    let mut rekeyed_ike = String::new();
    while flood_t0.elapsed() < Duration::from_secs(u64::from(FLOOD_SECS)) {
        let st = ike_state(&api);
        states.push(st["state"].as_str().unwrap_or("?").to_string());
        let e = flood_t0.elapsed();
        if e > Duration::from_secs(6) && rekeyed_child.is_empty() {
            rekeyed_child = ch.swanctl(&["--rekey", "--child", "net"]);
        } else if e > Duration::from_secs(14) && rekeyed_ike.is_empty() {
            rekeyed_ike = ch.swanctl(&["--rekey", "--ike", "vg"]);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let out = flood.wait_with_output().unwrap();
    let flood_out = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success(),
        "flood failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut f = flood_out.split_whitespace();
    let sent: u64 = f.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    let secs: f64 = f.next().and_then(|v| v.parse().ok()).unwrap_or(1.0);
    // The transfer completes byte-exact.
    let sent_tx = tx.wait_with_output().unwrap();
    let got = rx.wait_with_output().unwrap();
    let s = String::from_utf8_lossy(&sent_tx.stdout).trim().to_string();
    let g = String::from_utf8_lossy(&got.stdout).trim().to_string();
    assert!(
        !s.is_empty(),
        "sender failed: {}",
        String::from_utf8_lossy(&sent_tx.stderr)
    );
    assert_eq!(g, s, "receiver saw different bytes");
    let rss_after = common::vm_rss_kib(pid);
    let ike_ms = (common::thread_ticks(pid, "vg-ike") - ike_ticks_before) * 10;
    let log_after = gw.log.lock().unwrap().len();
    let pcap = cap.stop().to_owned();
    let st = ike_state(&api);
    let chlog = ch.log();
    let dpd_during = dpd(&chlog) - dpd_before;
    let retransmits_during = retransmits(&chlog) - retransmits_before;
    let punt_full = punt("punt-queue-full") - full_before;
    let punted_known = punt("ike-punted-known") - known_before;
    let known_full = punt("ike-punt-full-known");
    let cookies_seen = common::tshark(
        &pcap,
        "ip.src == 192.0.2.1 && isakmp.notify.msgtype == 16390",
        "-e ip.dst",
    );
    let to_strangers = common::tshark(
        &pcap,
        "ip.src == 192.0.2.1 && ip.dst != 192.0.2.2",
        "-e ip.dst",
    );
    let m = metrics(&sock);
    eprintln!(
        "flood: {sent} frames in {secs} s ({:.0}/s); RSS {rss_before} -> {rss_after} KiB; \
         IKE thread CPU {ike_ms} ms for {} INITs received ({:.1} µs each, every other datagram included); \
         log +{} lines; COOKIEs on the wire {}, counted {}; DPD requests from vecgate answered by charon {dpd_during}; \
         punt: {punt_full} dropped queue full, {punted_known} of the live SAs punted, {known_full} of theirs dropped; \
         charon retransmissions {retransmits_during}; show ike: {st:#}",
        sent as f64 / secs,
        st["inits_received"].as_u64().unwrap_or(0) - inits_before,
        ike_ms as f64 * 1000.0
            / (st["inits_received"].as_u64().unwrap_or(0) - inits_before).max(1) as f64,
        log_after - log_before,
        cookies_seen.len(),
        st["cookies_sent"],
    );
    assert!(sent >= 10_000, "the flood hardly ran: {flood_out}");
    // The live SAs' datagrams (DPD, rekeys, their answers) took their own
    // queue, and none was dropped, however full the other one was.
    assert!(punted_known > 0, "nothing punted for the live IKE SAs");
    assert_eq!(known_full, 0, "datagrams of the live IKE SAs dropped");
    // Rekeys during the flood.
    assert!(
        rekeyed_child.contains("rekey completed successfully"),
        "child rekey: {rekeyed_child}"
    );
    assert!(
        rekeyed_ike.contains("rekey completed successfully"),
        "IKE rekey: {rekeyed_ike}"
    );
    assert!(
        st["child_rekeys"].as_u64().unwrap_or(0) > child_rekeys_before,
        "{st:#}"
    );
    assert!(
        st["ike_rekeys"].as_u64().unwrap_or(0) > ike_rekeys_before,
        "{st:#}"
    );
    // DPD held: the tunnel never went down, charon kept checking and
    // never gave up on us.
    assert!(
        states.iter().all(|s| s == "established"),
        "tunnel state during the flood: {states:?}\n{}",
        gw.log_text()
    );
    assert_eq!(st["state"], "established", "{st:#}");
    assert!(
        dpd_during >= 5,
        "charon saw {dpd_during} liveness checks during the flood"
    );
    assert!(
        !chlog.contains("giving up after"),
        "charon gave up on a request during the flood"
    );
    let sas = ch.swanctl(&["--list-sas"]);
    assert!(
        sas.contains("ESTABLISHED") && sas.contains("INSTALLED"),
        "{sas}"
    );
    // COOKIE notifies on the wire, to the peer's address only (the INITs
    // spoofed as the peer), and vecgate counted at least those.
    assert!(!cookies_seen.is_empty(), "no COOKIE notify on the wire");
    assert!(
        cookies_seen.iter().all(|d| d == "192.0.2.2"),
        "{cookies_seen:?}"
    );
    assert!(
        st["cookies_sent"].as_u64().unwrap_or(0) >= cookies_seen.len() as u64,
        "{st:#}"
    );
    // Strangers (spoofed sources) get nothing at all: no reflection.
    assert!(
        to_strangers.is_empty(),
        "vecgate answered spoofed sources: {} datagrams, e.g. {:?}",
        to_strangers.len(),
        &to_strangers[..to_strangers.len().min(5)]
    );
    assert!(dropped(&st, "unknown-peer") > 0, "{st:#}");
    assert!(dropped(&st, "invalid-ke") > 0 || st["cookies_sent"].as_u64() > Some(0));
    // Half-open state stayed small: the peer's address gets cookies after
    // 3 half-open SAs and is capped at 5.
    assert!(st["half_open"].as_u64().unwrap_or(99) <= 5, "{st:#}");
    for name in [
        "vecgate_ike_half_open",
        "vecgate_ike_cookies_sent_total",
        "vecgate_ike_inits_refused_total",
        "vecgate_ike_inits_dropped_total",
        "vecgate_ike_inits_received_total",
    ] {
        assert!(m.contains(name), "/metrics lacks {name}");
    }
    assert!(
        m.contains("reason=\"unknown-peer\""),
        "/metrics lacks the unknown-peer drops"
    );
    // Bounded memory and a bounded log.
    assert!(
        rss_after < rss_before + 64 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    assert!(
        log_after - log_before < 200,
        "the log grew by {} lines during the flood:\n{}",
        log_after - log_before,
        gw.log.lock().unwrap()[log_before..].join("\n")
    );
    drop(files);
}
