//! BGP inside tenant VRFs: each tenant's control plane runs
//! in a namespace of its own (`[[routing.punt]] netns`, its TUN and its
//! zebra + bgpd there, zebra streaming to vecgate's FPM listener inside
//! that namespace), its BGP session crosses the tenant's tunnel (GRE for
//! red, IPsec ESP for blue), and the same prefix learned in both VRFs
//! stays isolated.
//!
//! ```text
//!  hr1 10.1.0.2 ─ red  ┐                          ┌ red  ─ hr2 10.77.0.2
//!  hb1 10.1.0.2 ─ blue ┤ A ── wan 192.168.100/24 ─┤ blue ─ hb2 10.77.0.2
//!                      │  red: GRE key 202 169.254.1.1/30 ↔ .2 │
//!                      │  blue: ESP        169.254.2.1/30 ↔ .2 │
//!   A's red / blue namespaces:              B's red / blue namespaces:
//!   TUN + zebra + bgpd AS 65001             TUN + zebra + bgpd AS 65002
//!   announce 10.1.0.0/24                    announce 10.77.0.0/24
//! ```

mod common;
#[path = "common/frr.rs"]
mod frr;

use common::{ping_count, unique, veth, wait_until, Capture, Gateway, Netns};
use frr::{bgpd_conf, zebra_fpm, Frr};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// ESP SAs: A→B and B→A, AES-128-GCM (key + 4-byte salt).
const SPI_AB: u32 = 0x2001;
const SPI_BA: u32 = 0x2002;

fn key_file(dir: &Path, spi: u32) -> PathBuf {
    let key: String = (0..20u32)
        .map(|i| format!("{:02x}", (i * 37 + spi) as u8))
        .collect();
    let p = dir.join(format!("{spi:x}.hex"));
    common::write_secret(&p, format!("{key}\n"));
    p
}

/// Gateway `side` (0 = A, 1 = B): red over GRE, blue over ESP, each
/// tenant's BGP and BFD punted into its namespace `ns[tenant]`.
fn config(side: usize, api: &str, dir: &Path, ns: [&str; 2]) -> String {
    let me = side + 1;
    let peer = 2 - side;
    let lan = if side == 0 {
        "10.1.0.1/24"
    } else {
        "10.77.0.1/24"
    };
    let (out, inb) = if side == 0 {
        (SPI_AB, SPI_BA)
    } else {
        (SPI_BA, SPI_AB)
    };
    format!(
        r#"[gateway]
name = "bt{me}"
workers = 1
api = "unix:{api}"

[[interface]]
name = "wan"
host = "wan"
driver = "af_packet"
addresses = ["192.168.100.{me}/24"]

[[interface]]
name = "red"
host = "red"
driver = "af_packet"
addresses = ["{lan}"]
vrf = "red"

[[interface]]
name = "blue"
host = "blue"
driver = "af_packet"
addresses = ["{lan}"]
vrf = "blue"

[[routing.punt]]
vrf = "red"
tap = "vg-red"
netns = "{red_ns}"
fpm = "127.0.0.1:2620"

[[routing.punt]]
vrf = "blue"
tap = "vg-blue"
netns = "{blue_ns}"
fpm = "127.0.0.1:2620"

[[tunnel]]
name = "tred"
kind = "gre"
key = 202
local = "192.168.100.{me}"
remote = "192.168.100.{peer}"
vrf = "red"
addresses = ["169.254.1.{me}/30"]

[[tunnel]]
name = "tblue"
kind = "ipsec"
local = "192.168.100.{me}"
remote = "192.168.100.{peer}"
vrf = "blue"
addresses = ["169.254.2.{me}/30"]

[[tunnel.sa]]
direction = "out"
spi = {out:#x}
algorithm = "aes128gcm16"
key_file = "{okey}"
esn = false

[[tunnel.sa]]
direction = "in"
spi = {inb:#x}
algorithm = "aes128gcm16"
key_file = "{ikey}"
esn = false
"#,
        red_ns = ns[0],
        blue_ns = ns[1],
        okey = key_file(dir, out).display(),
        ikey = key_file(dir, inb).display(),
    )
}

/// The learned routes in vecgate's FIB: (vrf, prefix, via).
fn learned(gw: &Netns, api: &str) -> BTreeSet<(String, String, String)> {
    let out = gw.try_sh(&format!(
        "{} show routes --json --api unix:{api}",
        common::vecgate_bin().display()
    ));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v.as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["kind"] == "learned" && r["active"] == true)
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_owned();
            (s("vrf"), s("prefix"), s("via"))
        })
        .collect()
}

fn routes(v: &[(&str, &str, &str)]) -> BTreeSet<(String, String, String)> {
    v.iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect()
}

/// Packets an SA has carried (`show sa`).
fn sa_packets(gw: &Netns, api: &str, spi: u32, direction: &str) -> u64 {
    let out = gw.try_sh(&format!(
        "{} show sa --json --api unix:{api}",
        common::vecgate_bin().display()
    ));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v.as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["spi"] == format!("{spi:#010x}") && s["direction"] == direction)
        .filter_map(|s| s["packets"].as_u64())
        .sum()
}

/// ICMP echo requests to 10.77.0.2 in a capture whose payload carries
/// the `ping -p` pattern byte `pat` (hex).
fn echoes(file: &Path, filter: &str, pat: &str) -> usize {
    common::tshark(file, filter, "-e data.data")
        .iter()
        .filter(|d| {
            let d = d.replace(':', "");
            !d.is_empty() && d.len() >= 32 && d[d.len() - 32..] == pat.repeat(16)
        })
        .count()
}

#[test]
fn tenant_bgp_over_gre_and_ipsec_and_one_prefix_isolated_in_two_vrfs() {
    let ga = Netns::new("bta");
    let gb = Netns::new("btb");
    // Each tenant's host routing domain, per gateway: red, blue.
    let ctl = [
        [Netns::new("btar"), Netns::new("btab")],
        [Netns::new("btbr"), Netns::new("btbb")],
    ];
    let hosts = [
        [Netns::new("hr1"), Netns::new("hb1")],
        [Netns::new("hr2"), Netns::new("hb2")],
    ];
    let dir = std::env::temp_dir().join(unique("btkeys"));
    std::fs::create_dir_all(&dir).unwrap();
    veth(&ga, "wan", &gb, "wan");
    for (side, gw) in [&ga, &gb].into_iter().enumerate() {
        let (me, gwaddr) = if side == 0 {
            ("10.1.0.2/24", "10.1.0.1")
        } else {
            ("10.77.0.2/24", "10.77.0.1")
        };
        for (h, vrf) in hosts[side].iter().zip(["red", "blue"]) {
            veth(h, "eth0", gw, vrf);
            h.sh(&format!(
                "ip addr add {me} dev eth0 && ip route add default via {gwaddr}"
            ));
        }
    }
    let api = [unique("bta-api"), unique("btb-api")].map(|a| format!("/tmp/{a}.sock"));
    let ns_names = |side: usize| [ctl[side][0].name.as_str(), ctl[side][1].name.as_str()];
    let _a = Gateway::start(&ga, &config(0, &api[0], &dir, ns_names(0)));
    let _b = Gateway::start(&gb, &config(1, &api[1], &dir, ns_names(1)));
    // The TUNs are in the tenants' namespaces with the VRFs' addresses.
    let addrs = ctl[0][0].sh("ip -4 -o addr show dev vg-red");
    assert!(
        addrs.contains("169.254.1.1/30") && addrs.contains("10.1.0.1/24"),
        "{addrs}"
    );
    assert!(
        !ga.try_sh("ip link show dev vg-red").status.success(),
        "vg-red is in vecgate's own namespace"
    );

    // Every BGP segment and tenant packet on the underlay (the referee
    // for where each tenant's traffic went).
    let mut ul = Capture::start_filtered(&gb, "wan", "ip proto 47 or esp");
    // One FRR per tenant and site: A (AS 65001) announces 10.1.0.0/24,
    // B (AS 65002) 10.77.0.0/24, in both VRFs, each over its tunnel.
    let mut frrs = Vec::new();
    for (side, tenants) in ctl.iter().enumerate() {
        let (asn, peer_as, net) = if side == 0 {
            (65001, 65002, "10.1.0.0/24")
        } else {
            (65002, 65001, "10.77.0.0/24")
        };
        for (t, (ns, sub)) in tenants.iter().zip([1, 2]).enumerate() {
            let peer = format!("169.254.{sub}.{}", 2 - side);
            frrs.push(Frr::start(
                &ns.name,
                &format!("bt{side}{t}"),
                &zebra_fpm("127.0.0.1"),
                &bgpd_conf(asn, &[(&peer, peer_as)], &[net.to_owned()]),
                true,
            ));
        }
    }
    let want_a = routes(&[
        ("red", "10.77.0.0/24", "169.254.1.2"),
        ("blue", "10.77.0.0/24", "169.254.2.2"),
    ]);
    let want_b = routes(&[
        ("red", "10.1.0.0/24", "169.254.1.1"),
        ("blue", "10.1.0.0/24", "169.254.2.1"),
    ]);
    assert!(
        wait_until(120, || learned(&ga, &api[0]) == want_a
            && learned(&gb, &api[1]) == want_b),
        "learned: A {:?}, B {:?}\nA red: {}\nA blue: {}",
        learned(&ga, &api[0]),
        learned(&gb, &api[1]),
        frrs[0].vtysh(&["show bgp summary"]),
        frrs[1].vtysh(&["show bgp summary"])
    );
    // /metrics counts them per VRF, installed.
    for a in &api {
        let m = common::sh(&format!(
            "curl -sS --max-time 10 --unix-socket {a} http://x/metrics"
        ));
        for vrf in ["red", "blue"] {
            let line = format!("vecgate_learned_routes{{vrf=\"{vrf}\",state=\"installed\"}} 1");
            assert!(m.lines().any(|l| l == line), "{line} not in:\n{m}");
        }
    }
    // The sessions' own segments crossed the tunnels: BGP inside GRE, and
    // the ESP SAs carried packets before any tenant traffic.
    let mut esp_before = 0;
    assert!(
        wait_until(20, || {
            esp_before = sa_packets(&ga, &api[0], SPI_AB, "outbound");
            esp_before > 0
        }),
        "blue's BGP did not cross the ESP tunnel: {}",
        ga.sh(&format!(
            "{} show sa --api unix:{}",
            common::vecgate_bin().display(),
            api[0]
        ))
    );

    for h in &hosts[0] {
        common::warm_up(h, "10.77.0.2");
    }
    let mut caps: Vec<Capture> = hosts[1]
        .iter()
        .map(|h| Capture::start_filtered(h, "eth0", "icmp"))
        .collect();
    // Same source, same destination in both tenants, told apart by the
    // payload pattern: red d2, blue b1.
    let (n, out) = ping_count(&hosts[0][0], 10, 20, "-i 0.1 -p d2 10.77.0.2");
    assert_eq!(n, 10, "red: {out}");
    let (n, out) = ping_count(&hosts[0][1], 10, 20, "-i 0.1 -p b1 10.77.0.2");
    assert_eq!(n, 10, "blue: {out}");
    common::tcp_transfer(&hosts[0][1], &hosts[1][1], "10.77.0.2", 1 << 20);

    let req = "icmp.type == 8 && ip.dst == 10.77.0.2";
    let files: Vec<PathBuf> = caps.iter_mut().map(|c| c.stop().to_path_buf()).collect();
    let (red_file, blue_file) = (&files[0], &files[1]);
    assert_eq!(echoes(red_file, req, "d2"), 10, "red's host, red's pings");
    assert_eq!(
        echoes(red_file, req, "b1"),
        0,
        "red's host saw blue's pings"
    );
    assert_eq!(
        echoes(blue_file, req, "b1"),
        10,
        "blue's host, blue's pings"
    );
    assert_eq!(
        echoes(blue_file, req, "d2"),
        0,
        "blue's host saw red's pings"
    );

    // On the underlay: red's pings inside GRE key 202, none of blue's in
    // clear anywhere; blue's went in ESP (its SA counted them).
    let ul_file = ul.stop().to_path_buf();
    let gre_req = format!("gre.key == 202 && {req}");
    assert!(
        echoes(&ul_file, &gre_req, "d2") >= 10,
        "red's pings not in GRE"
    );
    assert_eq!(echoes(&ul_file, req, "b1"), 0, "blue's pings in clear");
    let bgp_in_gre = common::tshark(&ul_file, "gre && bgp", "-e bgp.type");
    assert!(
        bgp_in_gre.iter().any(|t| t.split(',').any(|x| x == "2")),
        "no BGP UPDATE inside GRE: {bgp_in_gre:?}"
    );
    let esp = common::tshark(&ul_file, "esp.spi == 0x2001", "-e esp.sequence");
    assert!(esp.len() >= 10, "ESP A→B: {} packets", esp.len());
    assert!(sa_packets(&ga, &api[0], SPI_AB, "outbound") >= esp_before + 10);
    drop(frrs);
    let _ = std::fs::remove_dir_all(&dir);
}
