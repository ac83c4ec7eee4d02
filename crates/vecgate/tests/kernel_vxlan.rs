//! Interop: vecgate VXLAN ↔ the Linux kernel's VXLAN device.
//!
//!   h1 (10.1.0.2, fd01::2) ── gw [vecgate, VXLAN VNI 77, 10.9.0.1 / fd09::1]
//!       ══ 192.168.101.0/24 ══ peer: vxlan0 (kernel) 10.9.0.2/24, fd09::2/64
//!
//! The kernel side is a plain VXLAN device with an address on the overlay
//! segment and offloads left on, as a real peer would have them: it sends
//! its inner TCP checksums partial (CHECKSUM_PARTIAL) and whole 64 KB
//! encapsulated super-packets over the veth, which vecgate must decapsulate
//! as such (this used to stall TCP while pings passed). Both families ping
//! both ways and carry byte-exact TCP both ways; tshark dissects the
//! underlay with VNI 77 and nothing malformed; vecgate's own frames fit the
//! 1500-byte underlay; the hosts report no checksum errors; each
//! direction's transfers are judged on the wire (common/wire_judge.rs).

mod common;

use common::wire_judge::{End, Tunnel, Wire, WireJudge};
use common::{
    no_csum_errors, ping_ok, tcp_transfer, tshark, veth, wait_until, Capture, Gateway, Netns,
};

fn config(api: &str) -> String {
    format!(
        r#"[gateway]
name = "kvx"
workers = 1
api = "{api}"

[[interface]]
name = "lan"
host = "lan"
driver = "af_packet"
addresses = ["10.1.0.1/24", "fd01::1/64"]
vrf = "blue"

[[interface]]
name = "wan"
host = "wan"
driver = "af_packet"
addresses = ["192.168.101.1/24"]

[[tunnel]]
name = "vx"
kind = "vxlan"
key = 77
local = "192.168.101.1"
remote = "192.168.101.2"
vrf = "blue"
addresses = ["10.9.0.1/24", "fd09::1/64"]
"#,
    )
}

#[test]
fn vecgate_vxlan_with_kernel_vxlan() {
    let h1 = Netns::new("kh1");
    let gw = Netns::new("kgw");
    let peer = Netns::new("kpe");
    veth(&h1, "eth0", &gw, "lan");
    veth(&gw, "wan", &peer, "ul");
    h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    h1.sh("ip addr add fd01::2/64 dev eth0 nodad && ip -6 route add default via fd01::1");
    peer.sh("ip addr add 192.168.101.2/24 dev ul");
    peer.sh(
        "ip link add vxlan0 type vxlan id 77 remote 192.168.101.1 local 192.168.101.2 \
         dstport 4789 dev ul",
    );
    // The kernel VXLAN device's MTU is 1450 (1500 - 50), as is vecgate's
    // tunnel interface; h1's subnets are reached through vecgate's
    // overlay addresses.
    peer.sh(
        "ip link set vxlan0 up && ip addr add 10.9.0.2/24 dev vxlan0 && \
         ip addr add fd09::2/64 dev vxlan0 nodad && \
         ip route add 10.1.0.0/24 via 10.9.0.1 && ip -6 route add fd01::/64 via fd09::1",
    );
    let mtu = peer.sh("cat /sys/class/net/vxlan0/mtu");
    assert_eq!(mtu.trim(), "1450");
    let api = format!("unix:/tmp/{}.sock", common::unique("api"));
    let _g = Gateway::start(&gw, &config(&api));
    // Captured on the peer's side of the underlay veth: vecgate transmits
    // with PACKET_QDISC_BYPASS, which taps on its own side do not see.
    let mut cap = Capture::start(&peer, "ul");

    // Warm-up: ARP on the underlay, ARP / ND through the tunnel.
    assert!(
        wait_until(20, || ping_ok(&h1, "-c1 -W1 10.9.0.2")),
        "h1 → kernel VXLAN peer (IPv4)"
    );
    assert!(
        wait_until(20, || ping_ok(&h1, "-6 -c1 -W1 fd09::2")),
        "h1 → kernel VXLAN peer (IPv6)"
    );
    assert!(
        wait_until(10, || ping_ok(&peer, "-c3 -i0.2 -W1 10.1.0.2")),
        "kernel peer → h1 (IPv4)"
    );
    assert!(
        wait_until(10, || ping_ok(&peer, "-6 -c3 -i0.2 -W1 fd01::2")),
        "kernel peer → h1 (IPv6)"
    );
    assert!(ping_ok(&h1, "-c20 -i0.05 -s 1000 -W2 10.9.0.2"));

    // TCP both ways, both families; the kernel's side sends super-packets.
    // Each direction judged on the wire: every VXLAN packet vecgate
    // counted reached the peer's veth, one per frame, and TCP barely
    // retransmitted, against a control in the same run.
    let wire = |sender| Wire {
        tunnel: Tunnel::Vxlan,
        api: &api,
        port: "wan",
        gw: End {
            ns: &gw,
            dev: "wan",
        },
        peer: End {
            ns: &peer,
            dev: "ul",
        },
        sender,
        peer_socket: None,
        esp_keys: Vec::new(),
    };
    let judge = WireJudge::start(wire(&h1), 8 << 20);
    tcp_transfer(&h1, &peer, "10.9.0.2", 8 << 20);
    tcp_transfer(&h1, &peer, "fd09::2", 4 << 20);
    let out = judge.finish();
    assert!(out.captured > 0, "{out}");
    let judge = WireJudge::start(wire(&peer), 8 << 20);
    tcp_transfer(&peer, &h1, "10.1.0.2", 8 << 20);
    tcp_transfer(&peer, &h1, "fd01::2", 4 << 20);
    judge.finish();

    let file = cap.stop().to_owned();
    let vnis = tshark(&file, "vxlan", "-E occurrence=f -e vxlan.vni -e ip.src");
    // Enough of the transfers was seen for the checks below to mean
    // something: judged in bytes (at least half the 24 MiB of payload;
    // tcpdump may drop frames on a loaded machine), not in frames, whose
    // number depends on how much each side coalesced into super-packets,
    // which the scheduler decides (980 frames under load, for the same
    // bytes).
    let bytes: u64 = tshark(&file, "vxlan", "-e frame.len")
        .iter()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .sum();
    assert!(
        bytes >= 12 << 20,
        "{} VXLAN frames, {bytes} bytes captured",
        vnis.len()
    );
    assert!(
        vnis.iter().all(|l| l.starts_with("77\t")),
        "VNI other than 77: {:?}",
        vnis.iter().find(|l| !l.starts_with("77\t"))
    );
    for src in ["192.168.101.1", "192.168.101.2"] {
        assert!(vnis.iter().any(|l| l.ends_with(src)), "no VXLAN from {src}");
    }
    let bad = tshark(
        &file,
        "_ws.malformed || _ws.expert.severity >= error",
        "-e frame.number",
    );
    assert!(bad.is_empty(), "malformed frames: {bad:?}");
    // Both sides send super-packets across the veth whole: vecgate its
    // wire packets packed in UDP GSO datagrams (offload::uso), which the
    // kernel's VXLAN socket cut apart and accepted (the transfers above
    // are byte-exact); the kernel its SKB_GSO_UDP_TUNNEL frames, which
    // vecgate decapsulated whole.
    let ours_big = tshark(
        &file,
        "ip.src == 192.168.101.1 && vxlan && frame.len > 1514",
        "-e frame.len",
    );
    assert!(
        !ours_big.is_empty(),
        "vecgate sent no packed VXLAN datagrams: the path under test was not exercised"
    );
    assert!(common::counter(&api, "tunnel-encap", "udp-gso-datagrams") > 0);
    let theirs_big = tshark(
        &file,
        "ip.src == 192.168.101.2 && vxlan && frame.len > 1514",
        "-e frame.len",
    );
    assert!(
        !theirs_big.is_empty(),
        "the kernel sent no encapsulated super-packets: the path under test was not exercised"
    );
    no_csum_errors(&h1, "h1");
    no_csum_errors(&peer, "peer");
    // h1's TSO super-packets were encapsulated once and segmented after
    // (this also proves the counters were read).
    assert!(common::counter(&api, "tunnel-encap", "segmented-super-packets") > 0);
    // Nothing the peer sent was dropped by the decapsulation node.
    let drops: Vec<_> = common::show_errors(&api)
        .into_iter()
        .filter(|(node, _, _)| node == "vxlan-input")
        .collect();
    assert!(drops.is_empty(), "vxlan-input drops: {drops:?}");
}
