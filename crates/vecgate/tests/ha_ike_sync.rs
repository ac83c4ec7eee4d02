//! The HA state sync with an IKE-keyed tunnel: the
//! pair a1/a2 shares VRRP addresses, its tunnel's local end is the
//! underlay virtual address, and gb is strongSwan charon (IKEv2 PSK,
//! kernel-libipsec: ESP in UDP 4500). a1 negotiates the IKE SA and its
//! child SA; the sync link carries them (and the child's sequence
//! ceilings) to a2. During a paced TCP transfer and 10 ms pings, a1
//! (master) is killed with `kill -9`; a2 takes over the IKE SA.
//!
//! Judges, all in this run: the transfer's bytes (SHA-256 at both ends,
//! one connection); charon's own view (`swanctl --list-sas`: the same IKE
//! SA SPIs and child SA SPIs before and after, one IKE SA; its log: no
//! IKE_SA_INIT after the kill, no ESP sequence number or integrity
//! failure, and its liveness checks answered); a2's `show ha` (one
//! takeover, the IKE SA adopted) and the pings (resumed; the gap printed).
//! Then a1 returns as backup (a capture of the underlay: no IKE or
//! ESP-in-UDP frame from its MAC while a2's are there) and a planned
//! switchover hands the IKE SA back to it (same SPIs, no IKE_SA_INIT,
//! byte-exact; charon's drops in the two-sender overlap printed).

#[path = "common/charon.rs"]
mod charon;
mod common;

use charon::{cli_json, Auth, Charon, CharonCfg};
use common::ha_pair::*;
use common::pki::Pki;
use common::*;
use std::time::Duration;

const PSK: &str = "ha-ike-sync-psk-0123456789";
const SYNC_A1: &str = "10.250.0.1:4790";
const SYNC_A2: &str = "10.250.0.2:4790";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The pair's IKE tunnel (gb runs charon, not vecgate); `auth`: its
/// `[tunnel.ike]` lines that say how the two sides authenticate.
fn ike_tunnel(auth: &str) -> String {
    format!(
        r#"
[[tunnel]]
name = "ike0"
kind = "ipsec"
local = "{WAN_VIP}"
remote = "{GB_WAN}"
traffic = ["10.2.0.0/24"]

[tunnel.ike]
{auth}
ike_proposals = ["aes256gcm16-prfsha256-x25519"]
esp_proposals = ["aes128gcm16"]
initiate = true
"#
    )
}

/// charon's SAs as `swanctl --list-sas` prints them: the IKE SAs'
/// "SPIi_i SPIr_r" pairs and the child SAs' (in, out) SPIs.
#[derive(Debug, PartialEq, Eq)]
struct CharonSas {
    ike: Vec<(String, String)>,
    children: Vec<(String, String)>,
}

fn charon_sas(list: &str) -> CharonSas {
    let mut ike = Vec::new();
    let mut children = Vec::new();
    let mut spi_in = None;
    for l in list.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        // "vg: #1, ESTABLISHED, IKEv2, 1a2b3c4d5e6f7a8b_i* 0102030405060708_r"
        if w.contains(&"IKEv2,") {
            let spi = |suffix: &str| {
                w.iter()
                    .find(|t| t.trim_end_matches('*').ends_with(suffix))
                    .map(|t| t.trim_end_matches('*').trim_end_matches(suffix).to_owned())
            };
            if let (Some(i), Some(r)) = (spi("_i"), spi("_r")) {
                ike.push((i, r));
            }
        }
        // "    in  c1234567,  1234 bytes, ..." / "    out c7654321, ..."
        match w.as_slice() {
            ["in", s, ..] => spi_in = Some(s.trim_end_matches(',').to_owned()),
            ["out", s, ..] => {
                if let Some(i) = spi_in.take() {
                    children.push((i, s.trim_end_matches(',').to_owned()));
                }
            }
            _ => {}
        }
    }
    CharonSas { ike, children }
}

fn sync_of(p: &HaPair, m: Member) -> serde_json::Value {
    p.show_ha(m)
        .as_array()
        .and_then(|v| v.first().cloned())
        .map_or(serde_json::Value::Null, |g| g["sync"].clone())
}

/// charon log lines that would mean it dropped ESP or IKE of ours.
fn charon_failures(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| {
            l.contains("sequence number verification failed")
                || l.contains("ICV verification failed")
                || l.contains("integrity check failed")
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn ike_kill9_new_active_keeps_charons_ike_and_child_sas() {
    kill9(false);
}

/// As above with certificates both ways (ECDSA P-256 through an
/// intermediate CA): the standby adopts the cert-authenticated IKE SA with
/// the peer's chain, shows it, and re-checks it when charon rekeys the
/// child SA on the new active (no new IKE_SA_INIT).
#[test]
fn ike_kill9_with_certificates_keeps_the_ike_sa_and_rechecks_the_peer() {
    kill9(true);
}

fn kill9(certs: bool) {
    let dir = std::env::temp_dir().join(unique("his"));
    std::fs::create_dir_all(&dir).unwrap();
    struct Rm(std::path::PathBuf);
    impl Drop for Rm {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _rm = Rm(dir.clone());
    let psk = dir.join("psk");
    write_secret(&psk, format!("{PSK}\n"));
    let sync_key = dir.join("sync.key");
    write_secret(&sync_key, hex(&[0x6b; 32]));
    let pki = certs.then(|| {
        let p = Pki::new("ec -pkeyopt ec_paramgen_curve:P-256");
        p.leaf("a", "a.vecgate.test");
        p.leaf("b", "b.vecgate.test");
        p
    });
    let auth = match &pki {
        None => format!(
            "psk_file = \"{}\"\nremote_id = \"gw-b.example.net\"",
            psk.display()
        ),
        Some(k) => format!(
            "auth = \"pubkey\"\ncert_file = \"{}\"\nkey_file = \"{}\"\nca_files = [\"{}\"]\nlocal_id = \"a.vecgate.test\"\nremote_id = \"b.vecgate.test\"",
            k.path("a.pem").display(),
            k.path("a.key").display(),
            k.path("root.pem").display()
        ),
    };
    let tunnel = ike_tunnel(&auth);
    let mut p = HaPair::new(
        HaOpts {
            preempt: false,
            ..HaOpts::default()
        },
        move |_| tunnel.clone(),
    );
    // gb: a kernel router in front of charon (libipsec wants MTU-sized
    // segments: no offloads on its path).
    p.gb.sh(&format!(
        "ip addr add {GB_WAN}/24 dev wan0 && ip addr add 10.2.0.1/24 dev lan0 && sysctl -qw net.ipv4.ip_forward=1"
    ));
    for (ns, dev) in [(&p.gb, "lan0"), (&p.gb, "wan0"), (&p.h2, "eth0")] {
        let _ = ns.try_sh(&format!("ethtool -K {dev} tso off gso off gro off"));
    }
    // The sync link: a kernel veth between the pair, not a dataplane port.
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
            "sync_local = \"{local}\"\nsync_peer = \"{peer}\"\nsync_key_file = \"{key_path}\"\n"
        )
    });
    // charon answers; its liveness checks run every 2 s, so they cross
    // the failover.
    let cfg = |local_id, remote_id| CharonCfg {
        local: GB_WAN,
        remote: WAN_VIP,
        local_id,
        remote_id,
        local_ts: "10.2.0.0/24",
        remote_ts: "10.1.0.0/24",
        ike: "aes256gcm16-prfsha256-x25519",
        esp: "aes128gcm16",
        psk: PSK,
        initiate: false,
    };
    let ch = match &pki {
        None => Charon::start_ext(
            &p.gb,
            &cfg("gw-b.example.net", WAN_VIP),
            "dpd_delay = 2s",
            "",
        ),
        Some(k) => {
            let files: Vec<(&str, Vec<u8>)> = vec![
                ("x509ca/root.pem", k.read("root.pem")),
                ("x509ca/inter.pem", k.read("inter.pem")),
                ("x509/b.pem", k.read("b.crt")),
                ("pkcs8/b.key", k.read("b.key")),
            ];
            let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, d)| (*n, d.as_slice())).collect();
            Charon::start_auth(
                &p.gb,
                &cfg("b.vecgate.test", "a.vecgate.test"),
                "dpd_delay = 2s",
                &Auth {
                    local: Some("auth = pubkey\n      certs = b.pem"),
                    remote: Some("auth = pubkey"),
                    files: &refs,
                    ike_keys_logged: false,
                },
            )
        }
    };
    p.start(Member::A1);
    p.wait_roles(Member::A1, None, 30);
    let api1 = p.api(Member::A1);
    let mut st = serde_json::Value::Null;
    assert!(
        wait_until(60, || {
            st = cli_json(&api1, "ike")[0].clone();
            st["state"] == "established"
                && st["child_sas"].as_array().is_some_and(|c| !c.is_empty())
        }),
        "a1 did not establish with charon: {st:#}\n---- a1 ----\n{}",
        p.gw(Member::A1).log_text()
    );
    p.start(Member::A2);
    p.wait_roles(Member::A1, Some(Member::A2), 30);
    warm_up(&p.h1, H2);

    // The standby holds the active's IKE SA and the child's ceilings.
    let mut y = serde_json::Value::Null;
    assert!(
        wait_until(30, || {
            y = sync_of(&p, Member::A2);
            y["state"] == "up"
                && y["peer_role"] == "master"
                && y["synced_ike_sas"] == 1
                && y["synced_outbound_sas"].as_u64().unwrap_or(0) >= 1
        }),
        "a2's state sync: {y}"
    );
    // The standby said nothing to charon: one IKE SA, a1's.
    let before = charon_sas(&ch.wait_sas("INSTALLED", 20));
    assert_eq!(before.ike.len(), 1, "{before:?}");
    assert_eq!(before.children.len(), 1, "{before:?}");
    let inits_before = ch.log().matches("IKE_SA_INIT").count();
    let log_before = ch.log().len();

    // kill -9 of a1 in the middle of 24 s of data and 30 s of pings.
    let n = 3000u64;
    let ping = p.h1.spawn(&format!("ping -D -n -i 0.01 -c {n} -w 90 {H2}"));
    let xfer = Transfer::start(&p, H2, 7300, 12 << 20, 24);
    std::thread::sleep(Duration::from_secs(8));
    p.kill9(Member::A1);
    // a1 is reaped: whatever charon logs from here on is about a2's
    // packets (or the dead a1's last ones, which a2's jump cannot
    // overtake before they arrive: one path, in order).
    let log_kill = ch.log().len();
    p.wait_roles(Member::A2, None, 30);

    xfer.check();
    let out = String::from_utf8_lossy(&ping.wait_with_output().expect("ping").stdout).into_owned();
    let ok = answered(&out, n);
    eprintln!(
        "kill -9 with IKE (charon): {ok}/{n} pings answered, gap about {} ms",
        (n - ok) * 10
    );
    assert!(
        (n - 20..=n).all(|k| out.contains(&format!("icmp_seq={k} "))),
        "pings did not resume after the failover:\n{out}\n---- a2 ----\n{}",
        p.gw(Member::A2).log_text()
    );

    // charon: the same IKE SA and child SA, no new IKE_SA_INIT, nothing
    // of a2's dropped; its liveness checks answered by a2.
    let after = charon_sas(&ch.swanctl(&["--list-sas"]));
    assert_eq!(after, before, "charon's SAs changed across the failover");
    let log = ch.log();
    assert_eq!(
        log.matches("IKE_SA_INIT").count(),
        inits_before,
        "charon saw an IKE_SA_INIT after the kill:\n{}",
        &log[log_before.min(log.len())..]
    );
    // What the issue demands: charon's replay window drops nothing the
    // new active sends. Drops before the kill would be a1's (a2 master
    // for a moment under load, then back to backup): printed, not the
    // new active's. (The switchover below may overlap two senders: its
    // drops are printed too.)
    let early = charon_failures(&log[..log_kill.min(log.len())]);
    if !early.is_empty() {
        eprintln!(
            "charon dropped ESP/IKE before the kill (a2 took over for a moment? takeovers: {}): {early:#?}",
            sync_of(&p, Member::A2)["takeovers"]
        );
    }
    let failures = charon_failures(&log[log_kill.min(log.len())..]);
    assert!(
        failures.is_empty(),
        "charon dropped ESP/IKE of the new active: {failures:#?}\n---- charon since the kill ----\n{}",
        &log[log_kill.min(log.len())..]
    );
    assert!(
        !log[log_before.min(log.len())..].contains("giving up"),
        "charon gave up on a liveness check:\n{}",
        &log[log_before.min(log.len())..]
    );

    // a2 says it took over, adopted the IKE SA, keyed the child past a1's
    // ceiling.
    let y = sync_of(&p, Member::A2);
    assert_eq!(y["takeovers"], 1, "a2's state sync: {y}");
    assert_eq!(y["adopted_ike_sas"], 1, "a2's state sync: {y}");
    let a2log = p.gw(Member::A2).log_text();
    assert!(
        a2log.contains("took over the active's IKE SAs")
            && a2log.contains("past the old active's ceiling"),
        "a2 did not adopt the IKE SA and its child:\n{a2log}"
    );
    assert!(
        !a2log.contains("IKE: SA established"),
        "a2 negotiated an IKE SA of its own:\n{a2log}"
    );
    let st2 = cli_json(&p.api(Member::A2), "ike")[0].clone();
    assert_eq!(st2["state"], "established", "{st2:#}");
    if certs {
        // The adopted IKE SA keeps how both sides authenticated, and the
        // peer's chain: a rekey charon asks of the new active re-checks
        // it and succeeds, still without a new IKE_SA_INIT.
        assert_eq!(st2["auth"]["remote_method"], "ecdsa-sha256", "{st2:#}");
        assert_eq!(
            st2["auth"]["peer_cert"]["subject"], "C=CH, O=vecgate test, CN=b",
            "{st2:#}"
        );
        let rekeys = st2["child_rekeys"].as_u64().unwrap_or(0);
        let out = ch.swanctl(&["--rekey", "--child", "net"]);
        eprintln!("charon's rekey: {out}");
        let api2 = p.api(Member::A2);
        let mut st = serde_json::Value::Null;
        assert!(
            wait_until(30, || {
                st = cli_json(&api2, "ike")[0].clone();
                st["child_rekeys"].as_u64().unwrap_or(0) > rekeys && st["state"] == "established"
            }),
            "{st:#}\n{}",
            p.gw(Member::A2).log_text()
        );
        warm_up(&p.h1, H2);
        let log = ch.log();
        assert_eq!(log.matches("IKE_SA_INIT").count(), inits_before, "{log}");
        assert!(!log.contains("AUTH_FAILED"), "{log}");
        return;
    }

    // a1 comes back as backup (no preemption): it says nothing to charon
    // and holds a2's IKE SA as its shadow. A planned switchover hands the
    // IKE SA back to it during another transfer, again without
    // renegotiating.
    // The wire is the judge of "says nothing": every IKE or ESP-in-UDP
    // frame on the underlay while a1 is backup.
    let mut cap = Capture::start_filtered(&p.sw, "br1", "udp port 500 or udp port 4500");
    p.start(Member::A1);
    p.wait_roles(Member::A2, Some(Member::A1), 30);
    let mut y = serde_json::Value::Null;
    assert!(
        wait_until(30, || {
            y = sync_of(&p, Member::A1);
            y["state"] == "up" && y["peer_role"] == "master" && y["synced_ike_sas"] == 1
        }),
        "a1's state sync after its restart: {y}"
    );
    let a1log = p.gw(Member::A1).log_text();
    assert!(
        !a1log.contains("IKE: SA established") && !a1log.contains("took over"),
        "a1 spoke IKE as backup:\n{a1log}"
    );
    assert_eq!(
        charon_sas(&ch.swanctl(&["--list-sas"])),
        before,
        "charon's SAs changed when a1 came back"
    );
    // Traffic through a2 meanwhile, so the capture has a2's frames.
    warm_up(&p.h1, H2);
    let pcap = cap.stop().to_path_buf();
    let senders = tshark(&pcap, "udp", "-e eth.src");
    let (wmac1, wmac2) = (p.mac(Member::A1, "wan0"), p.mac(Member::A2, "wan0"));
    assert!(
        senders.iter().any(|m| m.trim() == wmac2),
        "no IKE/ESP-in-UDP from a2 ({wmac2}) in the capture: {senders:?}"
    );
    assert!(
        !senders.iter().any(|m| m.trim() == wmac1),
        "a1 ({wmac1}) sent IKE or ESP-in-UDP as backup: {senders:?}"
    );
    let log_mid = ch.log().len();
    let (a1_before, a2_before) = (p.became_master(Member::A1), p.became_master(Member::A2));
    let n2 = 1500u64;
    let ping =
        p.h1.spawn(&format!("ping -D -n -i 0.01 -c {n2} -w 90 {H2}"));
    let xfer = Transfer::start(&p, H2, 7301, 6 << 20, 12);
    std::thread::sleep(Duration::from_secs(5));
    // Asked of a2 while it is master: on a starved machine the pair may
    // have flapped for a moment (late adverts), and a2 would refuse (409).
    let mut refused = String::new();
    assert!(
        wait_until(30, || {
            if !p.all_in(Member::A2, "master") {
                return false;
            }
            let sw = std::process::Command::new(vecgate_bin())
                .args(["ha", "switchover", "--json", "--api", &p.api(Member::A2)])
                .output()
                .expect("vecgate ha switchover");
            refused = String::from_utf8_lossy(&sw.stderr).into_owned();
            sw.status.success()
        }),
        "switchover: {refused}"
    );
    p.wait_roles(Member::A1, Some(Member::A2), 30);
    xfer.check();
    let out = String::from_utf8_lossy(&ping.wait_with_output().expect("ping").stdout).into_owned();
    let log = ch.log();
    let since = &log[log_mid.min(log.len())..];
    eprintln!(
        "switchover with IKE (charon): {}/{n2} pings answered; charon's ESP drops in the overlap: {}",
        answered(&out, n2),
        charon_failures(since).len()
    );
    p.assert_switchover_loss(
        (Member::A2, a2_before),
        (Member::A1, a1_before),
        n2 - answered(&out, n2),
        &out,
    );
    // The lost pings, between the replies around them (ping -D times).
    let line_of = |k: u64| {
        out.lines()
            .find(|l| l.contains(&format!("icmp_seq={k} ")))
            .unwrap_or("-")
            .to_owned()
    };
    for k in (1..=n2).filter(|k| !out.contains(&format!("icmp_seq={k} "))) {
        eprintln!(
            "switchover: ping {k} lost, between\n  {}\n  {}",
            line_of(k - 1),
            line_of(k + 1)
        );
    }
    // The switchover's timeline, as each member logged it.
    for m in [Member::A2, Member::A1] {
        let tl: Vec<String> = p
            .gw(m)
            .log_text()
            .lines()
            .filter(|l| {
                [
                    "VRRP",
                    "took over",
                    "taking over",
                    "sends from",
                    "backup now",
                    "replay window",
                ]
                .iter()
                .any(|k| l.contains(k))
            })
            .map(str::to_owned)
            .collect();
        eprintln!("---- {m:?} around the switchover ----\n{}", tl.join("\n"));
    }
    assert_eq!(
        charon_sas(&ch.swanctl(&["--list-sas"])),
        before,
        "charon's SAs changed across the switchover"
    );
    assert_eq!(
        log.matches("IKE_SA_INIT").count(),
        inits_before,
        "charon saw an IKE_SA_INIT after the switchover:\n{since}"
    );
    let a1log = p.gw(Member::A1).log_text();
    assert!(
        a1log.contains("took over the active's IKE SAs") && !a1log.contains("IKE: SA established"),
        "a1 did not adopt a2's IKE SA:\n{a1log}"
    );
    // a2, backup once it stops draining, holds no IKE SA of its own.
    assert!(
        wait_until(30, || p.gw(Member::A2).log_contains("IKE: backup now")),
        "a2 kept the IKE SAs as backup:\n{}",
        p.gw(Member::A2).log_text()
    );
    let st2 = cli_json(&p.api(Member::A2), "ike")[0].clone();
    assert_ne!(st2["state"], "established", "{st2:#}");
}

#[test]
fn charon_sas_parse() {
    let list = "vg: #1, ESTABLISHED, IKEv2, 1a2b3c4d5e6f7a8b_i 0102030405060708_r*\n  local  'gw-b.example.net' @ 192.0.2.2[4500]\n  net: #1, reqid 1, INSTALLED, TUNNEL-in-UDP, ESP:AES_GCM_16-128\n    installed 5s ago, rekeying disabled, expires in 3595s\n    in  c1234567,  1234 bytes,    10 packets,     0s ago\n    out c7654321,  2345 bytes,    12 packets,     0s ago\n";
    let s = charon_sas(list);
    assert_eq!(
        s.ike,
        vec![("1a2b3c4d5e6f7a8b".to_owned(), "0102030405060708".to_owned())]
    );
    assert_eq!(
        s.children,
        vec![("c1234567".to_owned(), "c7654321".to_owned())]
    );
}
