//! vecgate as a router between network namespaces, with real kernel TCP
//! stacks on both sides.
//!
//!   h1 (10.1.0.2, fd01::2) ── gw-h1 [vecgate] gw-h2 ── h2 (10.2.0.2, fd02::2)

mod common;

use common::{tcp_transfer, veth, wait_until, Gateway, Netns};
use std::process::Command;

struct Topo {
    h1: Netns,
    h2: Netns,
    gw: Netns,
}

fn topo() -> Topo {
    let t = Topo {
        h1: Netns::new("h1"),
        h2: Netns::new("h2"),
        gw: Netns::new("gw"),
    };
    veth(&t.h1, "eth0", &t.gw, "gw-h1");
    veth(&t.h2, "eth0", &t.gw, "gw-h2");
    t.h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    t.h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    t.h1.sh("ip addr add fd01::2/64 dev eth0 nodad && ip -6 route add default via fd01::1");
    t.h2.sh("ip addr add fd02::2/64 dev eth0 nodad && ip -6 route add default via fd02::1");
    t
}

fn config(workers: usize, extra: &str) -> String {
    format!(
        r#"[gateway]
name = "rt"
workers = {workers}
api = "unix:/tmp/{api}.sock"

[[interface]]
name = "site-a"
host = "gw-h1"
driver = "af_packet"
addresses = ["10.1.0.1/24", "fd01::1/64"]

[[interface]]
name = "site-b"
host = "gw-h2"
driver = "af_packet"
addresses = ["10.2.0.1/24", "fd02::1/64"]
{extra}"#,
        api = common::unique("api")
    )
}

fn ping(ns: &Netns, args: &str) -> (bool, String) {
    let out = ns.try_sh(&format!("ping {args}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn forwards_ipv4_and_ipv6_with_byte_exact_tcp() {
    let t = topo();
    let _gw = Gateway::start(&t.gw, &config(2, ""));
    common::warm_up(&t.h1, "10.2.0.2");
    common::warm_up(&t.h1, "-6 fd02::2");
    let (ok, out) = ping(&t.h1, "-c 3 -i 0.2 -W 2 10.2.0.2");
    assert!(ok, "{out}");
    assert!(out.contains("ttl=63"), "TTL decremented once: {out}");
    let (ok, out) = ping(&t.h1, "-6 -c 3 -i 0.2 -W 2 fd02::2");
    assert!(ok, "{out}");
    assert!(out.contains("ttl=63"), "hop limit decremented once: {out}");
    // Pings to the gateway's own addresses.
    assert!(ping(&t.h1, "-c 1 -W 2 10.1.0.1").0);
    assert!(ping(&t.h1, "-6 -c 1 -W 2 fd01::1").0);
    assert!(
        ping(&t.h1, "-c 1 -W 2 10.2.0.1").0,
        "the far-side address answers too"
    );
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 32 << 20);
    tcp_transfer(&t.h2, &t.h1, "fd01::2", 16 << 20);
}

/// Waits (up to 20 s) until an iperf3 server listens in `ns`: a fixed
/// sleep after spawning it is too short on a loaded machine.
fn iperf3_listening(ns: &Netns) -> bool {
    wait_until(20, || ns.sh("ss -ltnH").contains(":5201"))
}

#[test]
fn iperf3_runs_through_the_gateway() {
    let t = topo();
    let _gw = Gateway::start(&t.gw, &config(2, ""));
    common::warm_up(&t.h1, "10.2.0.2");
    assert!(ping(&t.h1, "-c 1 -W 2 10.2.0.2").0);
    let mut srv = t.h2.spawn("iperf3 -s -1");
    assert!(iperf3_listening(&t.h2), "iperf3 server not listening");
    let out = t.h1.sh("iperf3 -c 10.2.0.2 -t 2 -J");
    let _ = srv.wait();
    let v: serde_json::Value = serde_json::from_str(&out).expect("iperf3 json");
    // What crossed is judged by bytes, not by a rate (a busy machine slows
    // the flow, it does not break it): the receiver got every byte the
    // sender's kernel acknowledged, and they were many.
    let sent = v["end"]["sum_sent"]["bytes"].as_u64().unwrap_or(0);
    let got = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    assert!(
        got > 1 << 20 && got <= sent,
        "iperf3 through vecgate: sent {sent}, received {got} B"
    );
}

#[test]
fn ttl_expiry_and_unreachable_give_icmp_errors() {
    let t = topo();
    let _gw = Gateway::start(&t.gw, &config(1, ""));
    common::warm_up(&t.h1, "10.1.0.1");
    let (_, out) = ping(&t.h1, "-c 1 -W 2 -t 1 10.2.0.2");
    assert!(
        out.contains("From 10.1.0.1") && out.contains("Time to live exceeded"),
        "{out}"
    );
    let (_, out) = ping(&t.h1, "-6 -c 1 -W 2 -t 1 fd02::2");
    assert!(
        out.contains("From fd01::1") && out.contains("Time exceeded"),
        "{out}"
    );
    // No route for 10.9.0.0/16 at the gateway.
    t.h1.sh("ip route add 10.9.0.0/16 via 10.1.0.1");
    let (_, out) = ping(&t.h1, "-c 1 -W 2 10.9.0.1");
    assert!(
        out.contains("Destination Net Unreachable") || out.contains("Unreachable"),
        "{out}"
    );
}

#[test]
fn too_big_gives_frag_needed_and_packet_too_big() {
    let t = topo();
    t.gw.sh("ip link set gw-h2 mtu 1400");
    t.h2.sh("ip link set eth0 mtu 1400");
    let _gw = Gateway::start(&t.gw, &config(1, ""));
    common::warm_up(&t.h1, "10.2.0.2");
    assert!(ping(&t.h1, "-c 1 -W 2 10.2.0.2").0);
    let (_, out) = ping(&t.h1, "-c 1 -W 2 -M do -s 1450 10.2.0.2");
    assert!(
        out.contains("Frag needed") && out.contains("mtu = 1400"),
        "{out}"
    );
    let (_, out) = ping(&t.h1, "-6 -c 1 -W 2 -M do -s 1450 fd02::2");
    assert!(
        out.contains("Packet too big") && out.contains("mtu=1400"),
        "{out}"
    );
    // DF clear: vecgate fragments, h2 reassembles and answers.
    let (ok, out) = ping(&t.h1, "-c 1 -W 2 -M dont -s 1450 10.2.0.2");
    assert!(ok, "fragmented ping: {out}");
}

#[test]
fn overlapping_vrfs_stay_isolated() {
    // Two tenants, red and blue, with the same prefixes on one gateway.
    let gw = Netns::new("gw");
    let hosts: Vec<(Netns, &str, &str, &str)> = vec![
        (Netns::new("r1"), "r-h1", "red", "10.1.0.2"),
        (Netns::new("r2"), "r-h2", "red", "10.2.0.2"),
        (Netns::new("b1"), "b-h1", "blue", "10.1.0.2"),
        (Netns::new("b2"), "b-h2", "blue", "10.2.0.2"),
    ];
    let mut cfg = format!(
        "[gateway]\nname = \"vrf\"\nworkers = 1\napi = \"unix:/tmp/{}.sock\"\n",
        common::unique("api")
    );
    for (ns, gif, vrf, addr) in &hosts {
        veth(ns, "eth0", &gw, gif);
        let gwaddr = format!("{}.1", addr.rsplit_once('.').unwrap().0);
        ns.sh(&format!(
            "ip addr add {addr}/24 dev eth0 && ip route add default via {gwaddr}"
        ));
        cfg += &format!(
            "\n[[interface]]\nname = \"{gif}\"\nhost = \"{gif}\"\ndriver = \"af_packet\"\naddresses = [\"{gwaddr}/24\"]\nvrf = \"{vrf}\"\n"
        );
    }
    let _g = Gateway::start(&gw, &cfg);
    // Neighbours resolved (default pattern: not counted below).
    common::warm_up(&hosts[0].0, "10.2.0.2");
    common::warm_up(&hosts[2].0, "10.2.0.2");
    // Capture on blue's h2 while red's h1 pings red's h2.
    let mut dump = common::Capture::start_filtered(&hosts[3].0, "eth0", "icmp");
    // Same addresses in both tenants: the payload pattern tells them apart.
    let (ok, out) = ping(&hosts[0].0, "-c 3 -i 0.2 -W 2 -p aaaa 10.2.0.2");
    assert!(ok, "red to red: {out}");
    let (ok, out) = ping(&hosts[2].0, "-c 2 -i 0.2 -W 2 -p bbbb 10.2.0.2");
    assert!(ok, "blue to blue: {out}");
    let cap = dump.stop().display().to_string();
    let count = |pat: &str| -> usize {
        common::sh(&format!(
            "tshark -r {cap} -Y 'icmp.type == 8 && data.data contains {pat}' 2>/dev/null | wc -l"
        ))
        .trim()
        .parse()
        .unwrap()
    };
    assert_eq!(
        count("aa:aa:aa:aa"),
        0,
        "none of red's echo requests reached blue's host"
    );
    assert!(
        count("bb:bb:bb:bb") >= 1,
        "blue's own echo requests were captured"
    );
}

#[test]
fn answers_arp_only_for_its_own_addresses() {
    let t = topo();
    let gw = Gateway::start(&t.gw, &config(1, ""));
    t.h1.sh("ip neigh flush dev eth0");
    // Answered at all (a loaded machine may take longer than one try).
    let ok = wait_until(30, || {
        t.h1.try_sh("arping -c 1 -w 2 -I eth0 10.1.0.1")
            .status
            .success()
            || ping(&t.h1, "-c 1 -W 2 10.1.0.1").0
    });
    assert!(ok, "the gateway never answered ARP for its own address");
    let neigh = t.h1.sh("ip neigh show 10.1.0.1");
    assert!(neigh.contains("lladdr"), "gateway MAC learned: {neigh}");
    // An address on the subnet that is not the gateway's: no answer.
    let (ok, _) = ping(&t.h1, "-c 1 -W 1 10.1.0.77");
    assert!(!ok);
    assert!(wait_until(3, || t
        .h1
        .sh("ip neigh show 10.1.0.77")
        .contains("FAILED")
        || !t.h1.sh("ip neigh show 10.1.0.77").contains("lladdr")));
    drop(gw);
}

#[test]
fn malformed_frames_are_dropped_and_counted_while_forwarding_continues() {
    let t = topo();
    let mut gw = Gateway::start(&t.gw, &config(1, ""));
    let mac =
        t.gw.sh("cat /sys/class/net/gw-h1/address")
            .trim()
            .to_string();
    let script = format!(
        r#"
from scapy.all import Ether, IP, ICMP, IPv6, IPv6ExtHdrHopByHop, IPv6ExtHdrDestOpt, ICMPv6EchoRequest, raw, conf, get_if_hwaddr
import os
dst = "{mac}"
src = get_if_hwaddr("eth0")
good = Ether(dst=dst, src=src)/IP(src="10.1.0.2", dst="10.2.0.2")/ICMP()/(b"x"*32)
raw_good = raw(good)
frames = []
for n in range(1, len(raw_good)):              # every truncation
    frames.append(raw_good[:n])
frames.append(raw(Ether(dst=dst, src=src, type=0x800)) + bytes.fromhex("4f000054"))       # IHL 15, short
frames.append(raw(Ether(dst=dst, src=src)/IP(src="10.1.0.2", dst="10.2.0.2", len=2000)/ICMP()))  # total length > frame
b = bytearray(raw_good); b[24] ^= 0xff; frames.append(bytes(b))                           # bad IPv4 checksum
frames.append(raw(Ether(dst=dst, src=src)/IP(src="10.1.0.2", dst="10.2.0.2", ihl=4)/ICMP()))  # IHL < 5
chain = IPv6(src="fd01::2", dst="fd02::2")
for _ in range(12):
    chain = chain/IPv6ExtHdrDestOpt()
frames.append(raw(Ether(dst=dst, src=src)/chain/ICMPv6EchoRequest()))                      # long ext-header chain
frames.append(raw(Ether(dst=dst, src=src)/IPv6(src="fd01::2", dst="fd02::2", nh=0)/IPv6ExtHdrHopByHop(nh=0)/IPv6ExtHdrHopByHop(nh=59)))  # HbH not first
frames.append(raw(Ether(dst=dst, src=src)/IPv6(src="fd01::2", dst="fd02::2", plen=4000)/ICMPv6EchoRequest()))  # plen > frame
frames.append(raw(Ether(dst=dst, src=src, type=0x86dd)) + os.urandom(10))
for i in range(50):
    frames.append(raw(Ether(dst=dst, src=src, type=0x800)) + os.urandom(1400))
    frames.append(raw(Ether(dst=dst, src=src, type=0x86dd)) + os.urandom(1400))
    frames.append(os.urandom(1500))
s = conf.L2socket(iface="eth0")
for f in frames:
    s.send(f)
print(len(frames))
"#
    );
    let path = format!("/tmp/{}.py", common::unique("mal"));
    std::fs::write(&path, script).unwrap();
    // A ping keeps running through the gateway while the garbage arrives.
    // Each request gets up to 30 s for its reply (a loaded machine may be
    // slow), see common::answered.
    let pinger = t.h1.spawn("ping -c 20 -i 0.1 -w 30 10.2.0.2");
    let sent = t.h1.sh(&format!("/usr/bin/python3 {path}"));
    let _ = std::fs::remove_file(&path);
    assert!(sent.trim().parse::<usize>().unwrap() > 150);
    let out = pinger.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        common::answered(&text, 20),
        20,
        "good traffic kept flowing: {text}"
    );
    assert!(ping(&t.h1, "-c 1 -W 2 10.2.0.2").0, "gateway still alive");
    // Counters: the drops are counted by reason (dumped at shutdown).
    let st = gw.stop();
    assert!(st.success(), "clean exit: {st}\n{}", gw.log_text());
    let log = gw.log_text();
    for (node, reason) in [
        ("ip4-input", "too-short"),
        ("ip4-input", "bad-ihl"),
        ("ip4-input", "bad-length"),
        ("ip4-input", "bad-checksum"),
        ("ip6-input", "bad-length"),
    ] {
        let counted = log.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 3 && f[1] == node && f[2] == reason && f[0].parse::<u64>().unwrap_or(0) > 0
        });
        assert!(counted, "drop reason {node}/{reason} counted:\n{log}");
    }
}

#[test]
fn missing_netdev_is_a_clear_error() {
    let ns = Netns::new("gw");
    let path = std::env::temp_dir().join(format!("{}.toml", common::unique("bad")));
    std::fs::write(&path, config(1, "")).unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(common::vecgate_bin())
        .args(["run", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no such network interface 'gw-h1'"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Two vecgates in series, plain routing, offloads on everywhere: the
/// kernel's TCP super-packets cross gwA, go to gwB as super-packets over
/// AF_PACKET, and on to h2. Regression: gwB once took the virtio-net
/// header's `hdr_len` (the kernel's `skb_headlen()`, which covers payload
/// for small retransmissions) for the header length, judged 2-segment
/// super-packets "too big" for a 1500 MTU and answered them with ICMP
/// frag-needed instead of forwarding: the flow stalled after a second.
#[test]
fn two_vecgates_in_series_with_super_packets() {
    let h1 = Netns::new("h1");
    let ga = Netns::new("ga");
    let gb = Netns::new("gb");
    let h2 = Netns::new("h2");
    veth(&h1, "eth0", &ga, "a-lan");
    veth(&ga, "a-u", &gb, "b-u");
    veth(&gb, "b-lan", &h2, "eth0");
    h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    let cfg = |name: &str,
               lan: &str,
               lanaddr: &str,
               wan: &str,
               wanaddr: &str,
               other: &str,
               via: &str| {
        format!(
            "[gateway]\nname = \"{name}\"\nworkers = 1\napi = \"unix:/tmp/{api}.sock\"\n\n[[interface]]\nname = \"lan\"\nhost = \"{lan}\"\ndriver = \"af_packet\"\naddresses = [\"{lanaddr}\"]\n\n[[interface]]\nname = \"wan\"\nhost = \"{wan}\"\ndriver = \"af_packet\"\naddresses = [\"{wanaddr}\"]\n\n[[route]]\nprefix = \"{other}\"\nvia = \"{via}\"\n",
            api = common::unique("api")
        )
    };
    let _a = Gateway::start(
        &ga,
        &cfg(
            "sa",
            "a-lan",
            "10.1.0.1/24",
            "a-u",
            "192.0.2.1/24",
            "10.2.0.0/24",
            "192.0.2.2",
        ),
    );
    let _b = Gateway::start(
        &gb,
        &cfg(
            "sb",
            "b-lan",
            "10.2.0.1/24",
            "b-u",
            "192.0.2.2/24",
            "10.1.0.0/24",
            "192.0.2.1",
        ),
    );
    common::warm_up(&h1, "10.2.0.2");
    assert!(ping(&h1, "-c 2 -W 2 10.2.0.2").0);
    let unreach = |ns: &Netns| -> u64 {
        // /proc/net/snmp "Icmp:" header line, then the values line.
        let t = ns.sh("cat /proc/net/snmp");
        let rows: Vec<Vec<&str>> = t
            .lines()
            .filter(|l| l.starts_with("Icmp:"))
            .map(|l| l.split_whitespace().collect())
            .collect();
        let col = rows[0].iter().position(|c| *c == "InDestUnreachs").unwrap();
        rows[1][col].parse().unwrap()
    };
    let unreach0 = unreach(&h1);
    let mut srv = h2.spawn("iperf3 -s -1");
    assert!(iperf3_listening(&h2), "iperf3 server not listening");
    // A fixed amount, not a fixed time: the regression stalled the flow in
    // RTO back-off (next to nothing per second after the first), which
    // cannot move 256 MB within 120 s; a machine busy with other tests only
    // makes it take longer (seconds, at worst tens of them).
    let out = h1.sh("timeout 120 iperf3 -J -c 10.2.0.2 -n 256M -i 1");
    let _ = srv.wait();
    let v: serde_json::Value = serde_json::from_str(&out).expect("iperf3 json");
    // iperf3's receiver stops counting when the sender says it is done, so
    // up to a socket buffer (tcp_wmem max, 4 MB) may be missing from its sum.
    let sent = v["end"]["sum_sent"]["bytes"].as_u64().unwrap_or(0);
    let got = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    assert!(
        sent >= 256 << 20 && got + (8 << 20) >= sent,
        "the flow did not complete: {out}"
    );
    assert_eq!(
        unreach(&h1) - unreach0,
        0,
        "no gateway answered a super-packet with ICMP"
    );
}
