//! Two IKE-keyed ipsec tunnels towards ONE peer gateway (strongSwan charon,
//! kernel-libipsec), one per tenant VRF:
//!
//!   h1  10.1.0.2  ── lan1 (blue) ┐                          ┌ b-lan  ── h2  10.2.0.2
//!                                [gwA: vecgate] 192.0.2.1 ══ 192.0.2.2 [gwB: charon]
//!   h11 10.11.0.2 ── lan2 (red)  ┘                          └ b-lan2 ── h22 10.22.0.2
//!
//! Tunnel `t1` (blue) carries 10.1.0.0/24 ↔ 10.2.0.0/24, `t2` (red)
//! 10.11.0.0/24 ↔ 10.22.0.0/24; charon has one connection with a child
//! per tenant. Each child SA must land in the ESP SAs of the tunnel its
//! traffic selectors fit (RFC 7296 §2.9), whichever IKE SA carries it, and
//! deleting one tunnel must leave the other carrying traffic. Needs root
//! and strongSwan; fails (never skips) when charon is missing.

#[path = "common/charon.rs"]
mod charon;
mod common;

use charon::{cli_json, Charon, CharonCfg};
use common::{unique, veth, wait_until, Gateway, Netns};
use serde_json::Value;
use std::process::Command;
use std::sync::Mutex;

/// Two cores for everyone: one topology at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const PSK: &str = "ike-multi-psk-0123456789";
const IKE: &str = "aes256-sha256-modp2048";
const ESP: &str = "aes128gcm16";

struct Topo {
    h1: Netns,
    h11: Netns,
    h2: Netns,
    h22: Netns,
    ga: Netns,
    gb: Netns,
    psk: std::path::PathBuf,
}

impl Drop for Topo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.psk);
    }
}

impl Topo {
    fn new() -> Topo {
        let t = Topo {
            h1: Netns::new("h1"),
            h11: Netns::new("h11"),
            h2: Netns::new("h2"),
            h22: Netns::new("h22"),
            ga: Netns::new("ga"),
            gb: Netns::new("gb"),
            psk: std::env::temp_dir().join(format!("{}.psk", unique("psk"))),
        };
        common::write_secret(&t.psk, format!("{PSK}\n"));
        veth(&t.h1, "eth0", &t.ga, "a-lan1");
        veth(&t.h11, "eth0", &t.ga, "a-lan2");
        veth(&t.ga, "a-wan", &t.gb, "b-wan");
        veth(&t.h2, "eth0", &t.gb, "b-lan");
        veth(&t.h22, "eth0", &t.gb, "b-lan2");
        for (ns, addr, gw) in [
            (&t.h1, "10.1.0.2/24", "10.1.0.1"),
            (&t.h11, "10.11.0.2/24", "10.11.0.1"),
            (&t.h2, "10.2.0.2/24", "10.2.0.1"),
            (&t.h22, "10.22.0.2/24", "10.22.0.1"),
        ] {
            ns.sh(&format!(
                "ip addr add {addr} dev eth0 && ip route add default via {gw}"
            ));
        }
        charon::router(
            &t.gb,
            &t.h2,
            "ip addr add 10.22.0.1/24 dev b-lan2",
            &[(&t.gb, "b-lan2"), (&t.h22, "eth0")],
        );
        t
    }

    /// charon with one connection `vg` and a child per tenant (`net`:
    /// 10.2/24 ↔ 10.1/24, `net2`: 10.22/24 ↔ 10.11/24), initiating nothing.
    fn charon(&self) -> Charon {
        let ch = Charon::start(
            &self.gb,
            &CharonCfg {
                local: "192.0.2.2",
                remote: "192.0.2.1",
                local_id: "192.0.2.2",
                remote_id: "192.0.2.1",
                local_ts: "10.2.0.0/24",
                remote_ts: "10.1.0.0/24",
                ike: IKE,
                esp: ESP,
                psk: PSK,
                initiate: false,
            },
        );
        // The helper's connection has one child: load the two-child one
        // over it (same name: replaces it).
        let conf = ch.dir.join("multi.conf");
        std::fs::write(
            &conf,
            format!(
                "connections {{
  vg {{
    version = 2
    local_addrs = 192.0.2.2
    remote_addrs = 192.0.2.1
    proposals = {IKE}
    rekey_time = 0
    dpd_delay = 0
    local {{
      auth = psk
      id = 192.0.2.2
    }}
    remote {{
      auth = psk
      id = 192.0.2.1
    }}
    children {{
      net {{
        local_ts = 10.2.0.0/24
        remote_ts = 10.1.0.0/24
        esp_proposals = {ESP}
        rekey_time = 0
        start_action = none
      }}
      net2 {{
        local_ts = 10.22.0.0/24
        remote_ts = 10.11.0.0/24
        esp_proposals = {ESP}
        rekey_time = 0
        start_action = none
      }}
    }}
  }}
}}
secrets {{
  ike-1 {{
    id-1 = 192.0.2.2
    id-2 = 192.0.2.1
    secret = \"{PSK}\"
  }}
}}
"
            ),
        )
        .unwrap();
        let out = ch.swanctl(&["--load-all", "--file", &conf.display().to_string()]);
        assert!(out.contains("successfully loaded 1 connections"), "{out}");
        ch
    }

    /// vecgate on gwA: tenant VRFs blue (lan1, tunnel t1) and red (lan2,
    /// tunnel t2), both tunnels to 192.0.2.2. Returns (config, api).
    fn vecgate_cfg(&self, initiate: bool) -> (String, String) {
        let sock = std::env::temp_dir().join(format!("{}.sock", unique("im")));
        let tunnel = |name: &str, vrf: &str, traffic: &str| {
            format!(
                r#"
[[tunnel]]
name = "{name}"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.2"
vrf = "{vrf}"
traffic = ["{traffic}"]

[tunnel.ike]
psk_file = "{psk}"
ike_proposals = ["{IKE}"]
esp_proposals = ["{ESP}"]
initiate = {initiate}
"#,
                psk = self.psk.display()
            )
        };
        let text = format!(
            r#"[gateway]
name = "im"
api = "unix:{sock}"

[[interface]]
name = "lan1"
host = "a-lan1"
driver = "af_packet"
addresses = ["10.1.0.1/24"]
vrf = "blue"

[[interface]]
name = "lan2"
host = "a-lan2"
driver = "af_packet"
addresses = ["10.11.0.1/24"]
vrf = "red"

[[interface]]
name = "wan"
host = "a-wan"
driver = "af_packet"
addresses = ["192.0.2.1/24"]
{t1}{t2}"#,
            sock = sock.display(),
            t1 = tunnel("t1", "blue", "10.2.0.0/24"),
            t2 = tunnel("t2", "red", "10.22.0.0/24"),
        );
        (text, format!("unix:{}", sock.display()))
    }
}

/// `show ike` entry of tunnel `name`.
fn ike_of(api: &str, name: &str) -> Value {
    cli_json(api, "ike")
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tunnel"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

/// The (SPIi, SPIr) of a tunnel's IKE SAs in `show ike`: the same SA
/// seen from two tunnels (ages are taken at each read, so they may differ).
fn ike_spis(t: &Value) -> Vec<(Value, Value)> {
    t["ike_sas"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|s| (s["spi_i"].clone(), s["spi_r"].clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn up(api: &str, name: &str) -> bool {
    let t = ike_of(api, name);
    t["state"] == "established" && t["child_sas"].as_array().is_some_and(|c| !c.is_empty())
}

/// Packets counted on tunnel `name`'s SAs (inbound, outbound), from
/// `vecgate show sa --json`.
fn sa_packets(api: &str, name: &str) -> (u64, u64) {
    let sa = cli_json(api, "sa");
    let sum = |dir: &str| {
        sa.as_array()
            .unwrap()
            .iter()
            .filter(|s| s["tunnel"] == name && s["direction"] == dir)
            .map(|s| s["packets"].as_u64().unwrap_or(0))
            .sum()
    };
    (sum("inbound"), sum("outbound"))
}

fn ping(from: &Netns, to: &str, n: u32) -> bool {
    let _ = from.try_sh(&format!("ping -c 1 -W 2 {to}"));
    from.try_sh(&format!("ping -c {n} -i 0.2 -W 2 {to}"))
        .status
        .success()
}

/// Ten pings from `from` to `to` cross tunnel `via` (its SA counters
/// move by at least 10 each way) and not tunnel `other` (unchanged).
fn crosses(t_api: &str, from: &Netns, to: &str, via: &str, other: &str, gw: &Gateway) {
    // A first ping resolves neighbours; then count.
    assert!(
        wait_until(15, || ping(from, to, 1)),
        "no ping {to} via {via}: {}",
        gw.log_text()
    );
    let before = (sa_packets(t_api, via), sa_packets(t_api, other));
    assert!(ping(from, to, 10), "pings to {to} via {via} lost");
    let after = (sa_packets(t_api, via), sa_packets(t_api, other));
    assert!(
        after.0 .0 >= before.0 .0 + 10 && after.0 .1 >= before.0 .1 + 10,
        "{via}'s SAs did not count the pings to {to}: {before:?} -> {after:?}\n{:#}",
        cli_json(t_api, "sa")
    );
    assert_eq!(
        after.1,
        before.1,
        "{other}'s SAs counted traffic to {to}: {:#}",
        cli_json(t_api, "sa")
    );
}

/// `vecgate ARGS --api API`; panics with its stderr on failure.
fn cli(api: &str, args: &[&str]) -> String {
    let out = Command::new(common::vecgate_bin())
        .args(args)
        .args(["--api", api])
        .output()
        .expect("vecgate cli");
    assert!(
        out.status.success(),
        "vecgate {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Both tenants' traffic crosses its own tunnel only, and no tenant
/// reaches the other's far side.
fn both_tenants_separate(t: &Topo, api: &str, gw: &Gateway) {
    crosses(api, &t.h1, "10.2.0.2", "t1", "t2", gw);
    crosses(api, &t.h11, "10.22.0.2", "t2", "t1", gw);
    crosses(api, &t.h22, "10.11.0.2", "t2", "t1", gw);
    common::tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 1 << 20);
    common::tcp_transfer(&t.h11, &t.h22, "10.22.0.2", 1 << 20);
    // Blue has no route to red's far side (nor the other way).
    assert!(!ping(&t.h1, "10.22.0.2", 1), "blue reached red's peer");
    assert!(!ping(&t.h11, "10.2.0.2", 1), "red reached blue's peer");
}

/// (a) charon initiates both children and reuses one IKE SA for the
/// second (CREATE_CHILD_SA). The first child is red's (`net2`), so its
/// IKE_SA_INIT lands on `t1` (IKE_SA_INIT cannot tell tunnels apart) and
/// the child binds to `t2` by its selectors; blue's comes second inside
/// the same IKE SA. Deleting `t1` (whose IKE SA carries both) keeps the
/// IKE SA for red and red's traffic flowing.
#[test]
fn charon_initiates_two_children_in_one_ike_sa() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Topo::new();
    let ch = t.charon();
    let (cfg, api) = t.vecgate_cfg(false);
    let gw = Gateway::start(&t.ga, &cfg);
    for child in ["net2", "net"] {
        let out = ch.swanctl(&["--initiate", "--child", child, "--timeout", "20"]);
        assert!(
            out.contains("initiate completed successfully"),
            "{child}: {out}\n---- vecgate ----\n{}",
            gw.log_text()
        );
    }
    let sas = ch.wait_sas("net2:", 10);
    assert_eq!(sas.matches("ESTABLISHED").count(), 1, "one IKE SA: {sas}");
    assert_eq!(sas.matches("INSTALLED").count(), 2, "{sas}");
    assert!(
        wait_until(10, || up(&api, "t1") && up(&api, "t2")),
        "{:#}\n{}",
        cli_json(&api, "ike"),
        gw.log_text()
    );
    let (i1, i2) = (ike_of(&api, "t1"), ike_of(&api, "t2"));
    assert_eq!(i1["child_sas"].as_array().unwrap().len(), 1, "{i1:#}");
    assert_eq!(i2["child_sas"].as_array().unwrap().len(), 1, "{i2:#}");
    // Both are carried by the one IKE SA, shown on both tunnels.
    assert_eq!(i1["ike_sas"].as_array().unwrap().len(), 1, "{i1:#}");
    assert_eq!(ike_spis(&i1), ike_spis(&i2), "{i1:#}\n{i2:#}");
    assert_eq!(i2["child_sas"][0]["local_ts"][0], "10.11.0.0/24", "{i2:#}");
    assert_eq!(i1["child_sas"][0]["local_ts"][0], "10.1.0.0/24", "{i1:#}");
    assert!(
        gw.log_contains("bound by its traffic selectors"),
        "{}",
        gw.log_text()
    );
    both_tenants_separate(&t, &api, &gw);
    // Rekeys by charon: the IKE SA (both children move to the new one)
    // and red's child; each tenant still crosses its own tunnel only.
    for args in [["--rekey", "--ike", "vg"], ["--rekey", "--child", "net2"]] {
        let out = ch.swanctl(&args);
        assert!(out.contains("rekey completed successfully"), "{out}");
    }
    assert!(
        wait_until(5, || {
            let (a, b) = (ike_of(&api, "t1"), ike_of(&api, "t2"));
            a["ike_rekeys"].as_u64() == Some(1) && b["child_rekeys"].as_u64() == Some(1)
        }),
        "{:#}\n{}",
        cli_json(&api, "ike"),
        gw.log_text()
    );
    // The replaced inbound SAs leave after their grace time (2 s): only
    // then do the counters sum over a stable set.
    std::thread::sleep(std::time::Duration::from_secs(3));
    crosses(&api, &t.h1, "10.2.0.2", "t1", "t2", &gw);
    crosses(&api, &t.h11, "10.22.0.2", "t2", "t1", &gw);

    // Delete blue: its child goes (charon is told), red's stays.
    cli(&api, &["tunnel", "del", "t1"]);
    assert!(
        wait_until(10, || {
            let s = ch.swanctl(&["--list-sas"]);
            !s.contains("net:") && s.contains("net2:")
        }),
        "charon: {}\n---- vecgate ----\n{}",
        ch.swanctl(&["--list-sas"]),
        gw.log_text()
    );
    let sas = ch.swanctl(&["--list-sas"]);
    assert!(
        sas.contains("ESTABLISHED") && sas.contains("INSTALLED"),
        "{sas}"
    );
    assert_eq!(ike_of(&api, "t1"), Value::Null);
    assert!(up(&api, "t2"), "{:#}", cli_json(&api, "ike"));
    crosses(&api, &t.h11, "10.22.0.2", "t2", "t1", &gw);
    assert!(!ping(&t.h1, "10.2.0.2", 1), "blue still crosses");
    // Red's child can still be rekeyed inside the retired tunnel's IKE SA.
    let out = ch.swanctl(&["--rekey", "--child", "net2"]);
    assert!(out.contains("rekey completed successfully"), "{out}");
    std::thread::sleep(std::time::Duration::from_secs(3));
    crosses(&api, &t.h11, "10.22.0.2", "t2", "t1", &gw);
    // Counted for red, the tunnel the child belongs to (both rekeys).
    let st = ike_of(&api, "t2");
    assert_eq!(st["child_rekeys"], 2, "{st:#}\n{}", gw.log_text());
    // A child for selectors no tunnel has is refused with a clear line.
    let conf = ch.dir.join("bad.conf");
    std::fs::write(
        &conf,
        std::fs::read_to_string(ch.dir.join("multi.conf"))
            .unwrap()
            .replace(
                "      net2 {",
                "      bad {\n        local_ts = 10.99.0.0/24\n        remote_ts = 10.98.0.0/24\n        esp_proposals = aes128gcm16\n        start_action = none\n      }\n      net2 {",
            ),
    )
    .unwrap();
    let out = ch.swanctl(&["--load-all", "--file", &conf.display().to_string()]);
    assert!(out.contains("successfully loaded 1 connections"), "{out}");
    let out = ch.swanctl(&["--initiate", "--child", "bad", "--timeout", "10"]);
    assert!(!out.contains("initiate completed successfully"), "{out}");
    assert!(
        wait_until(5, || gw.log_contains("fit no tunnel towards this peer")),
        "{}",
        gw.log_text()
    );
    assert!(up(&api, "t2"));
    crosses(&api, &t.h11, "10.22.0.2", "t2", "t1", &gw);
}

/// (b) vecgate initiates both tunnels: one IKE SA per tunnel, charon
/// responds with the child whose selectors fit. Deleting `t2` deletes its
/// IKE SA only; blue keeps working.
#[test]
fn vecgate_initiates_both_tunnels() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Topo::new();
    let ch = t.charon();
    let (cfg, api) = t.vecgate_cfg(true);
    let gw = Gateway::start(&t.ga, &cfg);
    assert!(
        wait_until(30, || up(&api, "t1") && up(&api, "t2")),
        "{:#}\n{}",
        cli_json(&api, "ike"),
        gw.log_text()
    );
    let sas = ch.wait_sas("net2:", 10);
    assert_eq!(sas.matches("ESTABLISHED").count(), 2, "{sas}");
    let (i1, i2) = (ike_of(&api, "t1"), ike_of(&api, "t2"));
    assert_ne!(ike_spis(&i1), ike_spis(&i2), "{i1:#}\n{i2:#}");
    both_tenants_separate(&t, &api, &gw);

    cli(&api, &["tunnel", "del", "t2"]);
    assert!(
        wait_until(10, || {
            let s = ch.swanctl(&["--list-sas"]);
            !s.contains("net2:") && s.contains("net:") && s.matches("ESTABLISHED").count() == 1
        }),
        "charon: {}\n---- vecgate ----\n{}",
        ch.swanctl(&["--list-sas"]),
        gw.log_text()
    );
    assert!(up(&api, "t1"), "{:#}", cli_json(&api, "ike"));
    crosses(&api, &t.h1, "10.2.0.2", "t1", "t2", &gw);
    assert!(!ping(&t.h11, "10.22.0.2", 1), "red still crosses");
}

/// (a') charon makes a separate IKE SA per child (two connections):
/// each IKE_SA_INIT lands on "a tunnel without an IKE SA", so red's first
/// IKE SA goes to `t1` and blue's second to `t2`; each child still binds to
/// the tunnel its selectors fit at IKE_AUTH. Deleting `t1` keeps red.
#[test]
fn charon_makes_an_ike_sa_per_child() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Topo::new();
    let ch = t.charon();
    // Two connections (one child each) that differ (charon reuses an IKE
    // SA across connections with equal settings): no shared IKE SA.
    let conn = |name: &str, child: &str, local_ts: &str, remote_ts: &str| {
        let tries = if name == "vg" { 1 } else { 2 };
        format!(
            "  {name} {{
    version = 2
    local_addrs = 192.0.2.2
    remote_addrs = 192.0.2.1
    proposals = {IKE}
    rekey_time = 0
    keyingtries = {tries}
    local {{
      auth = psk
      id = 192.0.2.2
    }}
    remote {{
      auth = psk
      id = 192.0.2.1
    }}
    children {{
      {child} {{
        local_ts = {local_ts}
        remote_ts = {remote_ts}
        esp_proposals = {ESP}
        rekey_time = 0
        start_action = none
      }}
    }}
  }}
"
        )
    };
    let conf = ch.dir.join("two.conf");
    std::fs::write(
        &conf,
        format!(
            "connections {{\n{}{}}}\nsecrets {{\n  ike-1 {{\n    id-1 = 192.0.2.2\n    id-2 = 192.0.2.1\n    secret = \"{PSK}\"\n  }}\n}}\n",
            conn("vg", "net", "10.2.0.0/24", "10.1.0.0/24"),
            conn("vg2", "net2", "10.22.0.0/24", "10.11.0.0/24"),
        ),
    )
    .unwrap();
    let out = ch.swanctl(&["--load-all", "--file", &conf.display().to_string()]);
    assert!(out.contains("successfully loaded 2 connections"), "{out}");
    let (cfg, api) = t.vecgate_cfg(false);
    let gw = Gateway::start(&t.ga, &cfg);
    for child in ["net2", "net"] {
        let out = ch.swanctl(&["--initiate", "--child", child, "--timeout", "20"]);
        assert!(
            out.contains("initiate completed successfully"),
            "{child}: {out}\n---- vecgate ----\n{}",
            gw.log_text()
        );
    }
    let sas = ch.wait_sas("net2:", 10);
    assert_eq!(sas.matches("ESTABLISHED").count(), 2, "two IKE SAs: {sas}");
    assert!(
        wait_until(10, || up(&api, "t1") && up(&api, "t2")),
        "{:#}\n{}",
        cli_json(&api, "ike"),
        gw.log_text()
    );
    assert_eq!(
        ike_of(&api, "t2")["child_sas"][0]["local_ts"][0],
        "10.11.0.0/24"
    );
    both_tenants_separate(&t, &api, &gw);
    cli(&api, &["tunnel", "del", "t1"]);
    assert!(
        wait_until(10, || {
            let s = ch.swanctl(&["--list-sas"]);
            !s.contains("net:") && s.contains("net2:")
        }),
        "charon: {}\n---- vecgate ----\n{}",
        ch.swanctl(&["--list-sas"]),
        gw.log_text()
    );
    assert!(up(&api, "t2"), "{:#}", cli_json(&api, "ike"));
    crosses(&api, &t.h11, "10.22.0.2", "t2", "t1", &gw);
    assert!(!ping(&t.h1, "10.2.0.2", 1), "blue still crosses");
}

/// Live reload against charon: t2 added by `vecgate reload` negotiates
/// and carries red's traffic; a change of its IKE settings (DPD) deletes
/// its IKE SA with charon and negotiates a new one (new SPIs); removed, it
/// is deleted at charon too. t1, in none of the differences, keeps its
/// IKE SA (same SPIs) and carries blue's traffic throughout.
#[test]
fn reload_adds_changes_and_removes_an_ike_tunnel() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Topo::new();
    let ch = t.charon();
    let (cfg, api) = t.vecgate_cfg(true);
    let only_t1 = cfg[..cfg.rfind("\n[[tunnel]]").unwrap()].to_string() + "\n";
    let gw = Gateway::start(&t.ga, &only_t1);
    assert!(
        wait_until(30, || up(&api, "t1")),
        "{:#}\n{}",
        cli_json(&api, "ike"),
        gw.log_text()
    );
    let t1_spis = ike_spis(&ike_of(&api, "t1"));

    let (ok, o) = gw.reload(&cfg);
    assert!(ok && o.contains("+ tunnel t2: ipsec"), "{o}");
    assert!(
        wait_until(30, || up(&api, "t2")),
        "{:#}\n{}",
        cli_json(&api, "ike"),
        gw.log_text()
    );
    crosses(&api, &t.h11, "10.22.0.2", "t2", "t1", &gw);
    let t2_spis = ike_spis(&ike_of(&api, "t2"));

    // t2's [tunnel.ike] is the file's last section.
    let (ok, o) = gw.reload(&(cfg.clone() + "dpd_interval = 30\n"));
    assert!(
        ok && o.contains("~ tunnel t2: ike.dpd_interval: - → 30"),
        "{o}"
    );
    assert!(o.contains("registered anew"), "{o}");
    assert!(
        wait_until(30, || up(&api, "t2")
            && !ike_spis(&ike_of(&api, "t2")).is_empty()
            && ike_spis(&ike_of(&api, "t2")) != t2_spis),
        "{:#}\n{}",
        cli_json(&api, "ike"),
        gw.log_text()
    );
    crosses(&api, &t.h11, "10.22.0.2", "t2", "t1", &gw);

    let (ok, o) = gw.reload(&only_t1);
    assert!(ok && o.contains("- tunnel t2: ipsec"), "{o}");
    assert!(
        wait_until(10, || !ch.swanctl(&["--list-sas"]).contains("net2:")),
        "charon: {}\n---- vecgate ----\n{}",
        ch.swanctl(&["--list-sas"]),
        gw.log_text()
    );
    assert_eq!(ike_of(&api, "t2"), Value::Null);
    assert!(!ping(&t.h11, "10.22.0.2", 1), "red still crosses");
    assert_eq!(
        ike_spis(&ike_of(&api, "t1")),
        t1_spis,
        "t1's IKE SA changed"
    );
    crosses(&api, &t.h1, "10.2.0.2", "t1", "t2", &gw);
}
