//! IKEv2 in `vecgate run` when things go wrong, against strongSwan charon
//! (kernel-libipsec) in namespaces:
//!
//!   h1 10.1.0.2 ── a-lan [gwA: vecgate] a-wan 192.0.2.1 ══ 192.0.2.2 b-wan [gwB: charon] b-lan ── h2 10.2.0.2
//!
//! A restarted peer (DPD notices, the SA comes back, traffic resumes), a
//! stopped vecgate (charon is told by an INFORMATIONAL delete), no common
//! proposal and mismatched traffic selectors (clear failures on both sides,
//! nothing installed), idle rekeys driven by the timer, and a NAT'd
//! underlay (nftables masquerade between the gateways: NAT-T, ESP in UDP
//! 4500). Needs root and strongSwan; fails (never skips) when it is missing.

#[path = "common/charon.rs"]
mod charon;
mod common;

use charon::{cli_json, ike_state, wait_established, Charon, CharonCfg};
use common::sites::Sites;
use common::{tcp_transfer, unique, wait_until, Gateway, Netns, TempFiles};
use serde_json::Value;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Two cores for everyone: one topology at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const PSK: &str = "ike-failures-psk-0123456789";

struct Topo {
    h1: Netns,
    h2: Netns,
    ga: Netns,
    gb: Netns,
    /// The masquerading namespace between the gateways, if any.
    nat: Option<Netns>,
    files: TempFiles,
}

impl Topo {
    /// gwA ── gwB directly, or (`nat`) gwA 10.99.0.2 ── [nat 10.99.0.1 |
    /// 192.0.2.254, masquerade] ── gwB.
    fn new(nat: bool) -> Topo {
        let Sites {
            h1,
            h2,
            ga,
            gb,
            nat,
            ..
        } = if nat {
            Sites::behind_nat()
        } else {
            Sites::new()
        };
        charon::router(&gb, &h2, "", &[]);
        let mut t = Topo {
            h1,
            h2,
            ga,
            gb,
            nat,
            files: TempFiles::default(),
        };
        t.files.secret("psk", format!("{PSK}\n"));
        t
    }

    fn psk_path(&self) -> String {
        self.files.0[0].display().to_string()
    }

    /// vecgate's gwA config: one IKE tunnel to 192.0.2.2 (behind the NAT
    /// its WAN address is 10.99.0.2, routed via the NAT).
    fn vecgate_cfg(&self, ike: &str) -> (String, String) {
        let sock = std::env::temp_dir().join(format!("{}.sock", unique("ifa")));
        let (wan, local, route) = if self.nat.is_some() {
            (
                "10.99.0.2/24",
                "10.99.0.2",
                "\n[[route]]\nprefix = \"192.0.2.0/24\"\nvia = \"10.99.0.1\"\n",
            )
        } else {
            ("192.0.2.1/24", "192.0.2.1", "")
        };
        let text = format!(
            r#"[gateway]
name = "ifa"
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
addresses = ["{wan}"]

[[tunnel]]
name = "ike0"
kind = "ipsec"
local = "{local}"
remote = "192.0.2.2"
vrf = "blue"
traffic = ["10.2.0.0/24"]

[tunnel.ike]
psk_file = "{psk}"
local_id = "gw-a.example.net"
remote_id = "gw-b.example.net"
{ike}
{route}"#,
            sock = sock.display(),
            psk = self.psk_path(),
        );
        (text, format!("unix:{}", sock.display()))
    }
}

/// charon on gwB (`initiate`: charon starts the connection when loaded).
fn charon_cfg<'a>(
    ike: &'a str,
    esp: &'a str,
    ts: (&'a str, &'a str),
    initiate: bool,
) -> CharonCfg<'a> {
    CharonCfg {
        local: "192.0.2.2",
        remote: "192.0.2.1",
        local_id: "gw-b.example.net",
        remote_id: "gw-a.example.net",
        local_ts: ts.0,
        remote_ts: ts.1,
        ike,
        esp,
        psk: PSK,
        initiate,
    }
}

/// Waits until `show ike` says failed; returns it.
fn wait_failed(api: &str, gw: &Gateway, secs: u64) -> Value {
    let mut st = Value::Null;
    assert!(
        wait_until(secs, || {
            st = ike_state(api);
            st["state"] == "failed"
        }),
        "not failed: {st:#}\n{}",
        gw.log_text()
    );
    st
}

fn ping(from: &Netns, to: &str) {
    // The first packets may meet an unresolved neighbour.
    let _ = from.try_sh(&format!("ping -c 1 -W 2 {to}"));
    let out = from.try_sh(&format!("ping -c 3 -i 0.2 -W 2 {to}"));
    assert!(
        out.status.success(),
        "ping {to}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn traffic_both_ways(t: &Topo) {
    ping(&t.h1, "10.2.0.2");
    ping(&t.h2, "10.1.0.2");
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 1 << 20);
    tcp_transfer(&t.h2, &t.h1, "10.1.0.2", 1 << 20);
}

/// Nothing keyed: no IKE or child SA in `show ike`, no SA in `show sa`.
fn nothing_installed(api: &str, st: &Value) {
    assert!(st["child_sas"].as_array().unwrap().is_empty(), "{st:#}");
    assert_eq!(cli_json(api, "sa"), Value::Array(vec![]), "{st:#}");
}

/// charon is killed (no goodbye) while vecgate initiates with a 2 s DPD
/// interval: the liveness check fails within seconds, vecgate tears the
/// SAs down (tunnel traffic stops as no-sa), keeps reconnecting, and once
/// a new charon runs the SA is back with new SPIs and traffic flows.
#[test]
fn restarted_charon_is_noticed_by_dpd_and_the_sa_comes_back() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Topo::new(false);
    let cc = charon_cfg(
        "aes256-sha256-modp2048",
        "aes128gcm16",
        ("10.2.0.0/24", "10.1.0.0/24"),
        false,
    );
    let ch = Charon::start(&t.gb, &cc);
    let (cfg, api) = t.vecgate_cfg(
        "ike_proposals = [\"aes256-sha256-modp2048\"]\nesp_proposals = [\"aes128gcm16\"]\ndpd_interval = 2\n",
    );
    let gw = Gateway::start(&t.ga, &cfg);
    let first = wait_established(&api, &gw, 30);
    ch.wait_sas("INSTALLED", 20);
    traffic_both_ways(&t);
    drop(ch);
    let killed = Instant::now();
    // DPD: a check after 2 s of silence, declared dead after 6 s more.
    let mut st = Value::Null;
    assert!(
        wait_until(20, || {
            st = ike_state(&api);
            st["child_sas"].as_array().is_some_and(|c| c.is_empty())
        }),
        "DPD did not notice: {st:#}\n{}",
        gw.log_text()
    );
    let noticed = killed.elapsed();
    assert!(gw.log_contains("peer not responding"), "{}", gw.log_text());
    assert_ne!(st["state"], "established", "{st:#}");
    // The inbound SA leaves after its grace period (stragglers).
    assert!(
        wait_until(5, || cli_json(&api, "sa") == Value::Array(vec![])),
        "{:#}",
        cli_json(&api, "sa")
    );
    eprintln!("DPD noticed the dead peer after {noticed:?}");
    let ch = Charon::start(&t.gb, &cc);
    let again = wait_established(&api, &gw, 40);
    ch.wait_sas("INSTALLED", 20);
    assert_ne!(
        again["child_sas"][0]["spi_in"],
        first["child_sas"][0]["spi_in"]
    );
    assert_ne!(again["ike_sas"][0]["spi_i"], first["ike_sas"][0]["spi_i"]);
    traffic_both_ways(&t);
}

/// vecgate stops: charon logs the IKE delete (sent while the workers
/// still run) and drops its SAs at once; vecgate started again brings the
/// tunnel back and traffic resumes.
#[test]
fn stopped_vecgate_deletes_its_sas_and_comes_back() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Topo::new(false);
    let ch = Charon::start(
        &t.gb,
        &charon_cfg(
            "aes128gcm16-prfsha256-x25519",
            "aes256gcm16",
            ("10.2.0.0/24", "10.1.0.0/24"),
            false,
        ),
    );
    let (cfg, api) = t.vecgate_cfg(
        "ike_proposals = [\"aes128gcm16-prfsha256-x25519\"]\nesp_proposals = [\"aes256gcm16\"]\n",
    );
    let mut gw = Gateway::start(&t.ga, &cfg);
    let st = wait_established(&api, &gw, 30);
    assert_eq!(
        st["ike_sas"][0]["algorithms"], "aes128gcm16-prfsha256-x25519",
        "strongSwan-style names: {st:#}"
    );
    ch.wait_sas("INSTALLED", 20);
    ping(&t.h1, "10.2.0.2");
    let t0 = Instant::now();
    let status = gw.stop();
    let took = t0.elapsed();
    assert!(status.success(), "{status:?}\n{}", gw.log_text());
    // A bound on hanging (vecgate does not wait for the peer to answer its
    // DELETE), generous for a loaded machine.
    assert!(took < Duration::from_secs(20), "stopping took {took:?}");
    assert!(
        wait_until(5, || ch.log().contains("received DELETE for IKE_SA")),
        "charon was not told:\n{}\n---- vecgate ----\n{}",
        ch.log(),
        gw.log_text()
    );
    let sas = ch.swanctl(&["--list-sas"]);
    assert!(!sas.contains("ESTABLISHED"), "{sas}");
    assert!(
        gw.log_contains("deleting the IKE SAs before stopping")
            && !gw.log_contains("without the peer's delete acknowledgement"),
        "{}",
        gw.log_text()
    );
    drop(gw);
    let gw = Gateway::start(&t.ga, &cfg);
    wait_established(&api, &gw, 30);
    ch.wait_sas("INSTALLED", 20);
    traffic_both_ways(&t);
}

/// No common IKE proposal, then no common ESP proposal: `show ike` says
/// failed with NO_PROPOSAL_CHOSEN, charon answered N(NO_PROP), nothing
/// is installed on either side.
#[test]
fn no_common_proposal_fails_clearly_on_both_sides() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Topo::new(false);
    for (vg_ike, vg_esp, ch_ike, ch_esp, child) in [
        (
            "aes256-sha256-modp2048",
            "aes128gcm16",
            "aes128gcm16-prfsha256-x25519",
            "aes128gcm16",
            false,
        ),
        (
            "aes256-sha256-modp2048",
            "aes256-sha256",
            "aes256-sha256-modp2048",
            "aes128gcm16",
            true,
        ),
    ] {
        let ch = Charon::start(
            &t.gb,
            &charon_cfg(ch_ike, ch_esp, ("10.2.0.0/24", "10.1.0.0/24"), false),
        );
        let (cfg, api) = t.vecgate_cfg(&format!(
            "ike_proposals = [\"{vg_ike}\"]\nesp_proposals = [\"{vg_esp}\"]\n"
        ));
        let gw = Gateway::start(&t.ga, &cfg);
        let st = wait_failed(&api, &gw, 20);
        let err = st["last_error"].as_str().unwrap_or_default().to_string();
        assert!(err.contains("NO_PROPOSAL_CHOSEN"), "{st:#}");
        assert_eq!(err.starts_with("child SA"), child, "{st:#}");
        assert!(
            gw.log_contains("negotiation failed") && gw.log_contains("NO_PROPOSAL_CHOSEN"),
            "{}",
            gw.log_text()
        );
        nothing_installed(&api, &st);
        assert!(
            wait_until(5, || ch.log().contains("N(NO_PROP)")),
            "charon log:\n{}",
            ch.log()
        );
        let sas = ch.swanctl(&["--list-sas"]);
        assert!(!sas.contains("INSTALLED"), "{sas}");
        eprintln!("{vg_ike}/{vg_esp} vs {ch_ike}/{ch_esp}: {err}");
    }
}

/// Traffic selectors that do not overlap, with either side initiating:
/// TS_UNACCEPTABLE on both sides, nothing installed.
#[test]
fn mismatched_traffic_selectors_fail_clearly_on_both_sides() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Topo::new(false);
    for vecgate_initiates in [true, false] {
        // charon protects 10.3.0.0/24 <-> 10.4.0.0/24; vecgate 10.1/10.2.
        let ch = Charon::start(
            &t.gb,
            &charon_cfg(
                "aes256-sha256-modp2048",
                "aes128gcm16",
                ("10.3.0.0/24", "10.4.0.0/24"),
                false,
            ),
        );
        let (cfg, api) = t.vecgate_cfg(&format!(
            "ike_proposals = [\"aes256-sha256-modp2048\"]\nesp_proposals = [\"aes128gcm16\"]\ninitiate = {vecgate_initiates}\nlocal_traffic = [\"10.1.0.0/24\"]\n"
        ));
        let gw = Gateway::start(&t.ga, &cfg);
        if !vecgate_initiates {
            let out = ch.swanctl(&["--initiate", "--child", "net", "--timeout", "15"]);
            assert!(
                out.contains("TS_UNACCEPTABLE") || ch.log().contains("TS_UNACCEPTABLE"),
                "{out}\n{}",
                ch.log()
            );
        }
        let st = wait_failed(&api, &gw, 20);
        assert!(
            st["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("TS_UNACCEPTABLE")),
            "{st:#}"
        );
        assert!(gw.log_contains("TS_UNACCEPTABLE"), "{}", gw.log_text());
        nothing_installed(&api, &st);
        assert!(
            wait_until(5, || {
                let l = ch.log();
                l.contains("N(TS_UNACCEPT)") || l.contains("TS_UNACCEPTABLE")
            }),
            "charon log:\n{}",
            ch.log()
        );
        let sas = ch.swanctl(&["--list-sas"]);
        assert!(!sas.contains("INSTALLED"), "{sas}");
    }
}

/// Short lifetimes and no traffic at all: the timer alone rekeys the
/// child SA and the IKE SA (make-before-break), charon follows, and the
/// newest SAs carry traffic afterwards.
#[test]
fn idle_tunnels_are_rekeyed_by_the_timer() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Topo::new(false);
    let ch = Charon::start(
        &t.gb,
        &charon_cfg(
            "aes256-sha256-x25519",
            "aes256-sha256",
            ("10.2.0.0/24", "10.1.0.0/24"),
            true,
        ),
    );
    // vecgate responds, and still rekeys on its own timer.
    let (cfg, api) = t.vecgate_cfg(
        "ike_proposals = [\"aes256-sha256-x25519\"]\nesp_proposals = [\"aes256-sha256\"]\ninitiate = false\nchild_lifetime = 4\nike_lifetime = 7\n",
    );
    let gw = Gateway::start(&t.ga, &cfg);
    let _ = ch.swanctl(&["--initiate", "--child", "net", "--timeout", "20"]);
    let first = wait_established(&api, &gw, 30);
    std::thread::sleep(Duration::from_secs(12));
    let st = ike_state(&api);
    assert!(
        st["child_rekeys"].as_u64().unwrap() >= 2,
        "{st:#}\n{}",
        gw.log_text()
    );
    assert!(
        st["ike_rekeys"].as_u64().unwrap() >= 1,
        "{st:#}\n{}",
        gw.log_text()
    );
    assert_eq!(st["state"], "established", "{st:#}");
    assert_ne!(
        st["child_sas"][0]["spi_in"],
        first["child_sas"][0]["spi_in"]
    );
    // Child SAs of past rekeys are gone from the dataplane.
    let sa = cli_json(&api, "sa");
    assert!(sa.as_array().unwrap().len() <= 4, "{sa:#}");
    // charon runs one of vecgate's current child SAs (a rekey may be
    // under way while we look).
    let bare = |v: &Value| v.as_str().unwrap().trim_start_matches("0x").to_string();
    let mut seen = String::new();
    assert!(
        wait_until(10, || {
            seen = ch.swanctl(&["--list-sas"]);
            let now = ike_state(&api);
            now["child_sas"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| seen.contains(&bare(&c["spi_out"])) && seen.contains(&bare(&c["spi_in"])))
        }),
        "{seen}\n{:#}",
        ike_state(&api)
    );
    traffic_both_ways(&t);
}

/// gwA behind a masquerading NAT: NAT-T detected (`show ike` nat and
/// udp_encap), ESP in UDP 4500 on the NAT's outside (tcpdump), charon
/// sees gwA at the NAT's address, traffic works both ways.
#[test]
fn nat_t_through_nftables_masquerade() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Topo::new(true);
    // charon knows gwA only as whatever the NAT shows.
    let mut cc = charon_cfg(
        "aes256-sha256-modp2048",
        "aes128gcm16",
        ("10.2.0.0/24", "10.1.0.0/24"),
        false,
    );
    cc.remote = "%any";
    let ch = Charon::start(&t.gb, &cc);
    let (cfg, api) = t.vecgate_cfg(
        "ike_proposals = [\"aes256-sha256-modp2048\"]\nesp_proposals = [\"aes128gcm16\"]\ndpd_interval = 10\n",
    );
    let nat = t.nat.as_ref().unwrap();
    let mut tcpdump = common::Capture::start_filtered(nat, "n-out", "udp");
    let gw = Gateway::start(&t.ga, &cfg);
    let st = wait_established(&api, &gw, 30);
    assert_eq!(st["ike_sas"][0]["nat"], true, "{st:#}");
    assert_eq!(st["child_sas"][0]["udp_encap"], true, "{st:#}");
    let sas = ch.wait_sas("INSTALLED", 20);
    assert!(
        sas.contains("192.0.2.254"),
        "charon sees the NAT's address: {sas}"
    );
    traffic_both_ways(&t);
    // TCP from h1: vecgate joins the sealed packets of each super-packet
    // into UDP GSO datagrams, which the NAT forwards whole and charon's
    // UDP socket cuts apart: the bytes must arrive exactly.
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 2 << 20);
    let cap = tcpdump.stop().to_owned();
    let joined = common::sh(&format!(
        "tshark -n -r {} -T fields -e frame.len 'ip.src == 192.0.2.254 && udp.dstport == 4500'",
        cap.display()
    ));
    assert!(
        joined
            .lines()
            .any(|l| l.trim().parse::<usize>().is_ok_and(|n| n > 1514)),
        "no joined ESP-in-UDP datagram towards charon"
    );
    let rows = common::sh(&format!(
        "tcpdump -nr {} 2>/dev/null | head -400",
        cap.display()
    ));
    // ESP travels in UDP 4500 both ways between the NAT and charon.
    let to_b = rows
        .lines()
        .filter(|l| {
            l.contains("192.0.2.254.") && l.contains("> 192.0.2.2.4500") && l.contains("UDP-encap")
        })
        .count();
    let from_b = rows
        .lines()
        .filter(|l| l.contains("192.0.2.2.4500 > 192.0.2.254.") && l.contains("UDP-encap"))
        .count();
    assert!(to_b >= 5 && from_b >= 5, "{to_b} / {from_b}:\n{rows}");
    // IKE itself floated to 4500 after IKE_SA_INIT (RFC 7296 §2.23).
    assert!(
        rows.lines()
            .any(|l| l.contains("> 192.0.2.2.4500") && l.contains("isakmp")),
        "{rows}"
    );
}
