//! Tenant A floods vecgate with neighbour bindings nobody asked for, from
//! addresses of its own subnets (scapy, spoofed): unsolicited ARP replies
//! to the gateway, gratuitous ARP (request and reply forms) and NAs with
//! the Solicited and Override flags. vecgate learns a neighbour only from
//! the answer to its own ARP request / NS (RFC 826's merge rule, RFC 4861
//! §7.2.5) or a request for its address: after the flood `vecgate show
//! neighbors` lists none of the spoofed addresses, A's real host is still
//! resolved, and tenant B reaches a new next hop through the gateway's
//! two workers (the request from one worker, the reply possibly on the
//! other).
//!
//!   ha (A, 10.1.0.2/16, 2001:db8:a::2/64) ── lana [gw, VRF a]
//!   hb (B, 10.2.0.2/24) ── lanb [gw, VRF b] ── lanc ── hc (B, 10.3.0.2; 10.9.1.1 on lo)
//!   VRF b: 10.9.0.0/16 via 10.3.0.2

mod common;

use common::{veth, wait_until, Gateway, Netns};
use std::path::PathBuf;

const SPOOFED: u32 = 5000;

fn config(sock: &str) -> String {
    format!(
        r#"[gateway]
name = "nflood"
workers = 2
api = "unix:{sock}"

[[interface]]
name = "lana"
host = "lana"
driver = "af_packet"
addresses = ["10.1.0.1/16", "2001:db8:a::1/64"]
vrf = "a"

[[interface]]
name = "lanb"
host = "lanb"
driver = "af_packet"
addresses = ["10.2.0.1/24"]
vrf = "b"

[[interface]]
name = "lanc"
host = "lanc"
driver = "af_packet"
addresses = ["10.3.0.1/24"]
vrf = "b"

[[route]]
prefix = "10.9.0.0/16"
via = "10.3.0.2"
vrf = "b"
"#
    )
}

/// `flood GW_MAC N`: N unsolicited ARP replies to the gateway, N
/// gratuitous ARPs (broadcast; request form for even i, reply form for
/// odd) and N unsolicited NAs (S|O) to the gateway, each from its own
/// spoofed on-link address (10.1.128.0 + i, 2001:db8:a::1:0 + i) and MAC;
/// prints `SENT n` with the number of frames written.
const FLOOD: &str = r#"
import sys
from scapy.all import conf
from scapy.layers.l2 import Ether, ARP
from scapy.layers.inet6 import IPv6, ICMPv6ND_NA, ICMPv6NDOptDstLLAddr
import ipaddress
conf.verb = 0
gw_mac, n = sys.argv[1], int(sys.argv[2])
s = conf.L2socket(iface="eth0")
sent = 0
for i in range(n):
    mac = "02:bb:%02x:%02x:%02x:01" % ((i >> 16) & 255, (i >> 8) & 255, i & 255)
    ip4 = str(ipaddress.IPv4Address(0x0a018000 + i))
    ip6 = str(ipaddress.IPv6Address(0x20010db8000a00000000000000010000 + i))
    frames = [
        Ether(dst=gw_mac, src=mac) / ARP(op=2, hwsrc=mac, psrc=ip4, hwdst=gw_mac, pdst="10.1.0.1"),
        Ether(dst="ff:ff:ff:ff:ff:ff", src=mac) /
            ARP(op=1 if i % 2 == 0 else 2, hwsrc=mac, psrc=ip4, hwdst="00:00:00:00:00:00", pdst=ip4),
        Ether(dst=gw_mac, src=mac) / IPv6(src=ip6, dst="2001:db8:a::1", hlim=255) /
            ICMPv6ND_NA(tgt=ip6, R=0, S=1, O=1) / ICMPv6NDOptDstLLAddr(lladdr=mac),
    ]
    for f in frames:
        s.send(f)
        sent += 1
s.close()
print("SENT", sent, flush=True)
"#;

struct Files(Vec<PathBuf>);

impl Drop for Files {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn vg(ns: &Netns, sock: &str, args: &str) -> String {
    let out = ns.try_sh(&format!(
        "{} {args} --api unix:{sock}",
        common::vecgate_bin().display()
    ));
    assert!(
        out.status.success(),
        "vecgate {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `lana`'s received frames, lost ones included (vecgate's own count).
fn lana_seen(ns: &Netns, sock: &str) -> u64 {
    let v: serde_json::Value =
        serde_json::from_str(&vg(ns, sock, "show interfaces --json")).expect("interfaces JSON");
    let i = v
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["name"] == "lana")
        .cloned()
        .unwrap_or_default();
    i["rx_packets"].as_u64().unwrap_or(0) + i["rx_missed"].as_u64().unwrap_or(0)
}

fn tx_packets(ns: &Netns, ifname: &str) -> u64 {
    ns.sh(&format!(
        "cat /sys/class/net/{ifname}/statistics/tx_packets"
    ))
    .trim()
    .parse()
    .unwrap()
}

#[test]
fn spoofed_neighbour_bindings_are_not_learned() {
    common::require_python3("scapy.all, scapy.layers.inet6", "python3-scapy");
    let ha = Netns::new("nfa");
    let hb = Netns::new("nfb");
    let hc = Netns::new("nfc");
    let gw = Netns::new("nfg");
    veth(&ha, "eth0", &gw, "lana");
    veth(&hb, "eth0", &gw, "lanb");
    veth(&hc, "eth0", &gw, "lanc");
    ha.sh("ip addr add 10.1.0.2/16 dev eth0 && ip -6 addr add 2001:db8:a::2/64 dev eth0 nodad");
    hb.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    hc.sh("ip addr add 10.3.0.2/24 dev eth0 && ip addr add 10.9.1.1/32 dev lo && ip route add default via 10.3.0.1");
    let sock = std::env::temp_dir()
        .join(format!("{}.sock", common::unique("nflood")))
        .display()
        .to_string();
    let _g = Gateway::start(&gw, &config(&sock));
    assert!(
        wait_until(20, || ha.try_sh("ping -c1 -W1 10.1.0.1").status.success()),
        "A's host reaches its gateway"
    );
    let neigh = ha.sh("ip neigh show 10.1.0.1");
    let gw_mac = neigh
        .split_whitespace()
        .skip_while(|w| *w != "lladdr")
        .nth(1)
        .unwrap_or_else(|| panic!("no MAC for vecgate's lana: {neigh}"))
        .to_string();

    let flood = std::env::temp_dir().join(format!("{}.py", common::unique("nflood")));
    std::fs::write(&flood, FLOOD).unwrap();
    let _files = Files(vec![flood.clone()]);
    let (seen0, tx0) = (lana_seen(&gw, &sock), tx_packets(&ha, "eth0"));
    let out = ha.sh(&format!(
        "timeout 300 /usr/bin/python3 {} {gw_mac} {SPOOFED}",
        flood.display()
    ));
    let sent: u64 = out
        .split_whitespace()
        .skip_while(|w| *w != "SENT")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("flood output: {out}"));
    assert_eq!(sent, 3 * u64::from(SPOOFED));
    // The veth carried them; vecgate saw (or counted as lost) all of them
    // before anything is judged.
    let on_wire = tx_packets(&ha, "eth0") - tx0;
    assert!(on_wire >= sent, "veth sent {on_wire} of {sent}");
    let mut seen = 0;
    assert!(
        wait_until(60, || {
            seen = lana_seen(&gw, &sock) - seen0;
            seen >= sent
        }),
        "vecgate's lana saw {seen} of {sent} frames"
    );

    // Tenant B: a new next hop (10.3.0.2) is resolved and used, through
    // either worker.
    assert!(
        wait_until(30, || hb.try_sh("ping -c1 -W1 10.9.1.1").status.success()),
        "tenant B cannot reach 10.9.1.1 through its new next hop"
    );
    // A's own host: still (or again) resolved by asking it.
    assert!(ha.try_sh("ping -c2 -W2 10.1.0.1").status.success());

    let shown = vg(&gw, &sock, "show neighbors");
    let words: std::collections::HashSet<&str> = shown.split_whitespace().collect();
    let spoofed: Vec<String> = (0..SPOOFED)
        .flat_map(|i| {
            [
                std::net::Ipv4Addr::from(0x0a01_8000 + i).to_string(),
                std::net::Ipv6Addr::from(
                    0x2001_0db8_000a_0000_0000_0000_0001_0000u128 + u128::from(i),
                )
                .to_string(),
            ]
        })
        .collect();
    let learned: Vec<&String> = spoofed
        .iter()
        .filter(|a| words.contains(a.as_str()))
        .collect();
    assert!(
        learned.is_empty(),
        "{} spoofed addresses learned, e.g. {:?}:\n{shown}",
        learned.len(),
        &learned[..learned.len().min(5)]
    );
    assert!(
        words.contains("10.3.0.2"),
        "B's next hop not listed:\n{shown}"
    );
    assert!(words.contains("10.1.0.2"), "A's host not listed:\n{shown}");
    println!(
        "flood: {sent} frames sent, {seen} seen by lana; neighbours listed: {}",
        shown
            .lines()
            .filter(|l| l.contains('.') || l.contains(':'))
            .count()
    );
}
