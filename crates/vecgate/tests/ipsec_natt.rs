//! IPsec NAT traversal (RFC 3948) through a real source NAT:
//!
//!   h1 ── gwA 10.99.0.2 ── [nat: nftables masquerade] 192.0.2.254 ══ 192.0.2.2 gwB ── h2
//!
//! gwA sits behind a namespace that masquerades with nftables; ESP travels
//! in UDP 4500, crosses it, and traffic works both ways (ping and a
//! byte-exact TCP transfer). gwB knows gwA only by the NAT's address.

mod common;

use common::sites::Sites;
use common::{sh, tcp_transfer, unique, Gateway};
use std::path::PathBuf;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn key_file(dir: &Dir, spi: u32) -> String {
    // Every SPI's key differs (one key, one SA).
    let key: Vec<u8> = (0..36u32)
        .map(|i| (i * 13 + spi + (spi >> 8)) as u8)
        .collect();
    let p = dir.0.join(format!("{spi:x}.hex"));
    common::write_secret(&p, hex(&key));
    p.display().to_string()
}

#[allow(clippy::too_many_arguments)]
fn config(
    dir: &Dir,
    name: &str,
    lan: (&str, &str),
    wan: (&str, &str),
    local: &str,
    remote: &str,
    traffic: &str,
    spis: (u32, u32),
    extra: &str,
) -> String {
    let sock = std::env::temp_dir().join(format!("{}.sock", unique(name)));
    format!(
        r#"[gateway]
name = "{name}"
api = "unix:{sock}"

[[interface]]
name = "lan"
host = "{lan_if}"
driver = "af_packet"
addresses = ["{lan_addr}"]
vrf = "blue"

[[interface]]
name = "wan"
host = "{wan_if}"
driver = "af_packet"
addresses = ["{wan_addr}"]

[[tunnel]]
name = "esp0"
kind = "ipsec"
local = "{local}"
remote = "{remote}"
vrf = "blue"
nat_t = true
traffic = ["{traffic}"]
{extra}
[[tunnel.sa]]
direction = "out"
spi = {out:#x}
algorithm = "aes256gcm16"
key_file = "{out_key}"

[[tunnel.sa]]
direction = "in"
spi = {inb:#x}
algorithm = "aes256gcm16"
key_file = "{in_key}"
"#,
        sock = sock.display(),
        lan_if = lan.0,
        lan_addr = lan.1,
        wan_if = wan.0,
        wan_addr = wan.1,
        out = spis.0,
        inb = spis.1,
        out_key = key_file(dir, spis.0),
        in_key = key_file(dir, spis.1),
    )
}

/// The `api` address a [`config`] names.
fn api_of(cfg: &str) -> String {
    cfg.lines()
        .find_map(|l| l.strip_prefix("api = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("api line")
        .to_string()
}

#[test]
fn esp_in_udp_crosses_source_nat_both_ways() {
    let dir = Dir(std::env::temp_dir().join(unique("natt")));
    std::fs::create_dir_all(&dir.0).unwrap();
    let Sites {
        h1,
        h2,
        ga,
        gb,
        nat,
        ..
    } = Sites::behind_nat();
    let nat = nat.expect("a NAT between the sites");
    // gwA: behind the NAT, its underlay default route via the NAT.
    let a_cfg = config(
        &dir,
        "na",
        ("a-lan", "10.1.0.1/24"),
        ("a-wan", "10.99.0.2/24"),
        "10.99.0.2",
        "192.0.2.2",
        "10.2.0.0/24",
        (0x3001, 0x4001),
        "",
    ) + "\n[[route]]\nprefix = \"192.0.2.0/24\"\nvia = \"10.99.0.1\"\n";
    // gwB: knows gwA only as the NAT's public address.
    let b_cfg = config(
        &dir,
        "nb",
        ("b-lan", "10.2.0.1/24"),
        ("b-wan", "192.0.2.2/24"),
        "192.0.2.2",
        "192.0.2.254",
        "10.1.0.0/24",
        (0x4001, 0x3001),
        "",
    );
    let _b = Gateway::start(&gb, &b_cfg);
    let _a = Gateway::start(&ga, &a_cfg);
    let mut tcpdump = common::Capture::start_filtered(&gb, "b-wan", "ip");
    // gwB's own sends bypass the qdisc, which its side's taps do not see:
    // the NAT's side of that veth does.
    let mut nat_cap = common::Capture::start_filtered(&nat, "n-out", "ip");
    // The first packet from behind the NAT opens the mapping.
    let _ = h1.try_sh("ping -c 1 -W 2 10.2.0.2");
    let out = h1.try_sh("ping -c 3 -i 0.2 -W 2 10.2.0.2");
    assert!(
        out.status.success(),
        "h1 -> h2: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = h2.try_sh("ping -c 3 -i 0.2 -W 2 10.1.0.2");
    assert!(
        out.status.success(),
        "h2 -> h1 (through the NAT mapping): {}",
        String::from_utf8_lossy(&out.stdout)
    );
    tcp_transfer(&h1, &h2, "10.2.0.2", 2 << 20);
    tcp_transfer(&h2, &h1, "10.1.0.2", 2 << 20);
    // Each gateway sealed TCP super-packets straight into UDP GSO
    // datagrams, and opened the other's where they lay, merging them back
    // into super-packets (esp-encrypt / esp-decrypt counters).
    for (cfg, name) in [(&a_cfg, "gwA"), (&b_cfg, "gwB")] {
        let api = api_of(cfg);
        let packed = common::counter(&api, "esp-encrypt", "packed-super-packets");
        let opened = common::counter(&api, "esp-decrypt", "datagrams-opened");
        let merged = common::counter(&api, "esp-decrypt", "datagrams-merged");
        assert!(packed > 0, "{name}: no super-packet sealed into a datagram");
        assert!(
            opened > 0 && merged > 0,
            "{name}: opened {opened}, merged {merged}"
        );
    }
    let cap = tcpdump.stop().to_owned();
    // On gwB's wire: only ESP in UDP 4500, to and from the NAT's address.
    let rows = sh(&format!(
        "tshark -n -r {} -T fields -E separator=, -e ip.src -e ip.dst -e ip.proto -e udp.srcport -e udp.dstport -e esp.spi -e frame.len",
        cap.display()
    ));
    let lines: Vec<&str> = rows.lines().collect();
    assert!(lines.len() > 20, "{} packets", lines.len());
    // Both gateways seal the segments of a super-packet into UDP GSO
    // datagrams (offload::uso::pack_slices), which cross veth and the
    // NAT's forwarding whole: frames above the MTU, from each side.
    let nat_rows = sh(&format!(
        "tshark -n -r {} -T fields -E separator=, -e ip.src -e frame.len udp",
        nat_cap.stop().display()
    ));
    for (from, rows) in [("192.0.2.254", &rows), ("192.0.2.2", &nat_rows)] {
        assert!(
            rows.lines().any(|l| l.starts_with(&format!("{from},"))
                && l.rsplit(',').next().and_then(|n| n.parse::<usize>().ok()) > Some(1514)),
            "no joined ESP-in-UDP datagram from {from}"
        );
    }
    for l in &lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f[2], "17", "not UDP: {l}");
        assert!(
            (f[0] == "192.0.2.254" && f[1] == "192.0.2.2")
                || (f[0] == "192.0.2.2" && f[1] == "192.0.2.254"),
            "{l}"
        );
        // Towards gwB the destination port is 4500; gwB answers from 4500.
        let ours = if f[0] == "192.0.2.2" { f[3] } else { f[4] };
        assert_eq!(ours, "4500", "{l}");
        assert!(f[5] == "0x00003001" || f[5] == "0x00004001", "not ESP: {l}");
    }
}
