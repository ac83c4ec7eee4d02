//! A child SA carries only what was negotiated for it (RFC 4301 §5.2),
//! judged with ESP that vecgate did not build: charon (logging its child
//! SA keys, test keys only) negotiates a child SA with vecgate
//! whose selectors are narrower than the tunnel's `traffic` (UDP from
//! 10.20.0.0/24 to 10.10.0.2 port 9000 only); scapy, with that SA's key,
//! encrypts inner packets as the peer would and sends them across the
//! veth: one inside the selectors, and three outside them (another
//! destination, another protocol, another port). vecgate delivers the
//! first (tcpdump on the host sees it) and drops the three after
//! decryption as `esp-decrypt policy-mismatch` (`vecgate show errors`);
//! none reaches the host.
//!
//!   h (10.10.0.2) ── lan [gw: vecgate, VRF blue] wan ── ul [pe: charon + scapy, 192.0.2.2]

#[path = "common/charon.rs"]
mod charon;
mod common;

use charon::{wait_established, Charon, CharonCfg};
use common::{unique, veth, wait_until, Capture, Gateway, Netns};
use std::path::PathBuf;

const PSK: &str = "selectors-by-scapy-0123456789abcdef";

/// `esp SPI KEYHEX GW_MAC`: ESP in UDP 4500 from 192.0.2.2 to 192.0.2.1
/// under SPI with AES-GCM-16 key KEYHEX (salt included), sequence numbers
/// far ahead of charon's; prints `SENT n`.
const SCAPY: &str = r#"
import sys
from scapy.all import conf, sendp, get_if_hwaddr
from scapy.layers.l2 import Ether
from scapy.layers.inet import IP, UDP, TCP
from scapy.layers.ipsec import SecurityAssociation, ESP
from scapy.packet import Raw
conf.verb = 0
spi, key, gw_mac = int(sys.argv[1]), bytes.fromhex(sys.argv[2]), sys.argv[3]
# charon's libipsec always sends ESP in UDP 4500 (RFC 3948).
sa = SecurityAssociation(ESP, spi=spi, crypt_algo="AES-GCM", crypt_key=key,
                         tunnel_header=IP(src="192.0.2.2", dst="192.0.2.1"),
                         nat_t_header=UDP(sport=4500, dport=4500))
me = get_if_hwaddr("ul")
inner = [
    IP(src="10.20.0.1", dst="10.10.0.2") / UDP(sport=40000, dport=9000) / Raw(b"inside"),
    IP(src="10.20.0.1", dst="10.10.0.3") / UDP(sport=40000, dport=9000) / Raw(b"wrong-destination"),
    IP(src="10.20.0.1", dst="10.10.0.2") / TCP(sport=40000, dport=9000, flags="S"),
    IP(src="10.20.0.1", dst="10.10.0.2") / UDP(sport=40000, dport=9001) / Raw(b"wrong-port"),
]
n = 0
for i, p in enumerate(inner):
    e = sa.encrypt(p, seq_num=1000000 + i)
    sendp(Ether(dst=gw_mac, src=me) / e, iface="ul")
    n += 1
print("SENT", n, flush=True)
"#;

struct Files(Vec<PathBuf>);

impl Drop for Files {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn config(sock: &str, psk: &str) -> String {
    format!(
        r#"[gateway]
name = "selsc"
api = "unix:{sock}"

[[interface]]
name = "lan"
host = "lan"
driver = "af_packet"
addresses = ["10.10.0.1/24"]
vrf = "blue"

[[interface]]
name = "wan"
host = "wan"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[[tunnel]]
name = "ike0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.2"
vrf = "blue"
traffic = ["10.20.0.0/24"]

[tunnel.ike]
psk_file = "{psk}"
initiate = false
ike_proposals = ["aes256-sha256-modp2048"]
esp_proposals = ["aes128gcm16"]
"#
    )
}

#[test]
fn scapy_esp_outside_the_negotiated_selectors_is_dropped_and_counted() {
    common::require_python3(
        "scapy.layers.ipsec, cryptography",
        "python3-scapy python3-cryptography",
    );
    let h = Netns::new("sch");
    let gw = Netns::new("scg");
    let pe = Netns::new("scp");
    veth(&h, "eth0", &gw, "lan");
    veth(&gw, "wan", &pe, "ul");
    h.sh("ip addr add 10.10.0.2/24 dev eth0 && ip route add default via 10.10.0.1");
    // charon routes the remote selectors through its TUN from an address
    // of its own selectors.
    pe.sh("ip addr add 192.0.2.2/24 dev ul && ip addr add 10.20.0.1/24 dev lo");
    let sock = std::env::temp_dir()
        .join(format!("{}.sock", unique("selsc")))
        .display()
        .to_string();
    let api = format!("unix:{sock}");
    let psk = std::env::temp_dir().join(format!("{}.psk", unique("selsc")));
    common::write_secret(&psk, format!("{PSK}\n"));
    let script = std::env::temp_dir().join(format!("{}.py", unique("selsc")));
    std::fs::write(&script, SCAPY).unwrap();
    let _files = Files(vec![psk.clone(), script.clone()]);

    let gwp = Gateway::start(&gw, &config(&sock, &psk.display().to_string()));
    // charon initiates with narrow selectors: UDP from its /24, to one
    // host's port 9000; vecgate narrows to them (RFC 7296 §2.9).
    let ch = Charon::start_keys_logged(
        &pe,
        &CharonCfg {
            local: "192.0.2.2",
            remote: "192.0.2.1",
            local_id: "192.0.2.2",
            remote_id: "192.0.2.1",
            local_ts: "10.20.0.0/24[udp]",
            remote_ts: "10.10.0.2/32[udp/9000]",
            ike: "aes256-sha256-modp2048",
            esp: "aes128gcm16",
            psk: PSK,
            initiate: true,
        },
    );
    let st = wait_established(&api, &gwp, 40);
    ch.wait_sas("INSTALLED", 20);
    // charon initiated: its traffic to vecgate uses the initiator's key,
    // under vecgate's inbound SPI.
    let key = ch
        .child_key("encryption initiator key")
        .unwrap_or_else(|| panic!("no child SA key in charon's log:\n{}", ch.log()));
    assert_eq!(key.len(), 20, "AES-128-GCM key and salt");
    let key: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let children = st["child_sas"].as_array().cloned().unwrap_or_default();
    assert_eq!(children.len(), 1, "{st:#}");
    let spi_in = &children[0]["spi_in"];
    let spi = spi_in
        .as_u64()
        .or_else(|| {
            spi_in
                .as_str()
                .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        })
        .unwrap_or_else(|| panic!("vecgate's inbound SPI: {st:#}"));
    assert!(
        wait_until(20, || pe.try_sh("ping -c1 -W1 192.0.2.1").status.success()),
        "underlay ping"
    );
    let neigh = pe.sh("ip neigh show 192.0.2.1");
    let gw_mac = neigh
        .split_whitespace()
        .skip_while(|w| *w != "lladdr")
        .nth(1)
        .unwrap_or_else(|| panic!("no MAC for vecgate's wan: {neigh}"))
        .to_string();

    // vecgate knows the host before the datagram comes (no ARP wait).
    assert!(
        wait_until(20, || h.try_sh("ping -c1 -W1 10.10.0.1").status.success()),
        "host to gateway"
    );
    let before = common::counter(&api, "esp-decrypt", "policy-mismatch");
    let mut cap = Capture::start_filtered(&h, "eth0", "ip src 10.20.0.1");
    let out = pe.sh(&format!(
        "timeout 120 /usr/bin/python3 {} {spi} {key} {gw_mac}",
        script.display()
    ));
    assert!(out.contains("SENT 4"), "{out}");
    // The three outside the selectors are counted.
    let mut dropped = 0;
    assert!(
        wait_until(30, || {
            dropped = common::counter(&api, "esp-decrypt", "policy-mismatch") - before;
            dropped >= 3
        }),
        "policy-mismatch counted {dropped} of 3:\n{:?}",
        common::show_errors(&api)
    );
    // Processed in order on one path: the inside one went out before the
    // third drop was counted; the capture keeps every frame it was given.
    let file = cap.stop().to_path_buf();
    let seen = common::tshark(
        &file,
        "ip.src == 10.20.0.1",
        "-e ip.dst -e ip.proto -e udp.dstport",
    );
    assert_eq!(seen.len(), 1, "exactly one datagram delivered: {seen:?}");
    assert!(
        seen[0].starts_with("10.10.0.2\t17\t9000"),
        "the delivered one is the inside one: {seen:?}"
    );
    assert_eq!(dropped, 3, "{:?}", common::show_errors(&api));
    println!("selectors: 1 of 4 crafted packets delivered, {dropped} dropped as policy-mismatch");
}
