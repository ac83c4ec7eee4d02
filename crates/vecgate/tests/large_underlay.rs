//! Tunnels over a large-MTU underlay (a 64 KB-MTU veth between the two
//! gateways, as a virtio or veth fabric allows): super-packets cross the
//! tunnel whole — encapsulated (or encrypted) once, never segmented — and
//! the far gateway hands them to its host as super-packets of egress-MSS
//! segments. The transfer must stay byte-exact, the underlay must carry
//! frames far above 1514 bytes that tshark dissects cleanly, and the
//! counters must show the whole-packet path was taken.
//!
//!   h1 ── gwA ══ a-u (MTU 65535) ══ b-u ── gwB ── h2

mod common;

use common::{counter, sh, tcp_transfer, unique, veth, Gateway, Netns};

struct Topo {
    h1: Netns,
    h2: Netns,
    ga: Netns,
    gb: Netns,
    dir: std::path::PathBuf,
}

impl Drop for Topo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn topo() -> Topo {
    let t = Topo {
        h1: Netns::new("h1"),
        h2: Netns::new("h2"),
        ga: Netns::new("ga"),
        gb: Netns::new("gb"),
        dir: std::env::temp_dir().join(unique("lu")),
    };
    std::fs::create_dir_all(&t.dir).unwrap();
    veth(&t.h1, "eth0", &t.ga, "a-lan");
    veth(&t.ga, "a-u", &t.gb, "b-u");
    veth(&t.gb, "b-lan", &t.h2, "eth0");
    t.ga.sh("ip link set a-u mtu 65535");
    t.gb.sh("ip link set b-u mtu 65535");
    t.h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    t.h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    t
}

fn base(t: &Topo, side: char) -> String {
    let (lan, lanaddr, wan, wanaddr) = if side == 'a' {
        ("a-lan", "10.1.0.1/24", "a-u", "192.0.2.1/24")
    } else {
        ("b-lan", "10.2.0.1/24", "b-u", "192.0.2.2/24")
    };
    format!(
        r#"[gateway]
name = "lu-{side}"
workers = 1
api = "unix:{dir}/{side}.sock"

[[interface]]
name = "lan"
host = "{lan}"
driver = "af_packet"
addresses = ["{lanaddr}"]
vrf = "blue"

[[interface]]
name = "wan"
host = "{wan}"
driver = "af_packet"
addresses = ["{wanaddr}"]
"#,
        dir = t.dir.display()
    )
}

fn api(t: &Topo, side: char) -> String {
    format!("unix:{}/{side}.sock", t.dir.display())
}

/// Runs a 32 MiB transfer h1 → h2 with a capture on gwB's underlay and
/// checks the capture: frames above 1514 bytes, matching `filter`, nothing
/// malformed.
fn transfer_and_capture(t: &Topo, filter: &str) {
    let mut dump = common::Capture::start_with(&t.gb, "b-u", "-s 200", filter);
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 32 << 20);
    let cap = dump.stop().to_owned();
    let big: usize = sh(&format!(
        "tshark -r {} -Y 'frame.len > 1514' 2>/dev/null | wc -l",
        cap.display()
    ))
    .trim()
    .parse()
    .unwrap();
    assert!(
        big > 50,
        "the underlay carried super-packets whole ({big} frames > 1514 B)"
    );
    let bad = sh(&format!(
        "tshark -r {} -Y '_ws.malformed' 2>/dev/null | wc -l",
        cap.display()
    ));
    assert_eq!(bad.trim(), "0", "nothing malformed on the underlay");
}

/// `side`'s configuration with a GRE tunnel (key 7) to the other and the
/// route to the far LAN through it.
fn gre(t: &Topo, side: char) -> String {
    let (me, peer, remote) = if side == 'a' {
        ("192.0.2.1", "192.0.2.2", "10.2.0.0/24")
    } else {
        ("192.0.2.2", "192.0.2.1", "10.1.0.0/24")
    };
    format!(
        "{}\n[[tunnel]]\nname = \"t\"\nkind = \"gre\"\nlocal = \"{me}\"\nremote = \"{peer}\"\nkey = 7\nvrf = \"blue\"\n\n[[route]]\nvrf = \"blue\"\nprefix = \"{remote}\"\nvia = \"t\"\n",
        base(t, side)
    )
}

#[test]
fn gre_super_packets_cross_a_large_mtu_underlay_whole() {
    let t = topo();
    let _a = Gateway::start(&t.ga, &gre(&t, 'a'));
    let _b = Gateway::start(&t.gb, &gre(&t, 'b'));
    common::warm_up(&t.h1, "10.2.0.2");
    assert!(t.h1.try_sh("ping -c 2 -W 2 10.2.0.2").status.success());
    transfer_and_capture(&t, "ip proto 47");
    assert!(counter(&api(&t, 'a'), "tunnel-encap", "whole-super-packets") > 100);
    assert_eq!(
        counter(&api(&t, 'a'), "tunnel-encap", "segmented-super-packets"),
        0
    );
    assert!(counter(&api(&t, 'b'), "ip-rewrite", "marked-super-packets") > 100);
    let csum_err =
        t.h2.sh("nstat -az TcpInCsumErrors | awk '/TcpInCsumErrors/ {print $2}'");
    assert_eq!(
        csum_err.trim(),
        "0",
        "the receiving kernel accepted every segment"
    );
}

#[test]
fn esp_encrypts_whole_super_packets_over_a_large_mtu_underlay() {
    let t = topo();
    common::write_secret(
        &t.dir.join("ab.hex"),
        "00112233445566778899aabbccddeeff01020304\n",
    );
    common::write_secret(
        &t.dir.join("ba.hex"),
        "ffeeddccbbaa9988776655443322110005060708\n",
    );
    let tun = |side: char| {
        let (me, peer, remote, out_spi, out_key, in_spi, in_key) = if side == 'a' {
            (
                "192.0.2.1",
                "192.0.2.2",
                "10.2.0.0/24",
                "0x1001",
                "ab",
                "0x2001",
                "ba",
            )
        } else {
            (
                "192.0.2.2",
                "192.0.2.1",
                "10.1.0.0/24",
                "0x2001",
                "ba",
                "0x1001",
                "ab",
            )
        };
        format!(
            r#"{}
[[tunnel]]
name = "t"
kind = "ipsec"
local = "{me}"
remote = "{peer}"
vrf = "blue"
traffic = ["{remote}"]

[[tunnel.sa]]
direction = "out"
spi = {out_spi}
algorithm = "aes128gcm16"
key_file = "{dir}/{out_key}.hex"

[[tunnel.sa]]
direction = "in"
spi = {in_spi}
algorithm = "aes128gcm16"
key_file = "{dir}/{in_key}.hex"
"#,
            base(&t, side),
            dir = t.dir.display()
        )
    };
    let _a = Gateway::start(&t.ga, &tun('a'));
    let _b = Gateway::start(&t.gb, &tun('b'));
    common::warm_up(&t.h1, "10.2.0.2");
    assert!(t.h1.try_sh("ping -c 2 -W 2 10.2.0.2").status.success());
    transfer_and_capture(&t, "ip proto 50");
    assert!(counter(&api(&t, 'b'), "ip-rewrite", "marked-super-packets") > 100);
    let csum_err =
        t.h2.sh("nstat -az TcpInCsumErrors | awk '/TcpInCsumErrors/ {print $2}'");
    assert_eq!(
        csum_err.trim(),
        "0",
        "the receiving kernel accepted every segment"
    );
}

/// VXLAN over a 9000-byte underlay: the peer packs wire packets of several
/// of the sender's segments each, and gwB must hand them to h2 (MTU 1500)
/// as super-packets of h2's MSS. Before, gwB answered "fragmentation
/// needed (MTU 1500)" to every one and no TCP crossed (the jumbo
/// benchmark rows found it).
#[test]
fn vxlan_over_a_jumbo_underlay_carries_tcp_byte_exact() {
    let t = topo();
    t.ga.sh("ip link set a-u mtu 9000");
    t.gb.sh("ip link set b-u mtu 9000");
    let tun = |side: char| {
        let (me, peer, remote, addr, via) = if side == 'a' {
            (
                "192.0.2.1",
                "192.0.2.2",
                "10.2.0.0/24",
                "10.9.0.1",
                "10.9.0.2",
            )
        } else {
            (
                "192.0.2.2",
                "192.0.2.1",
                "10.1.0.0/24",
                "10.9.0.2",
                "10.9.0.1",
            )
        };
        format!(
            "{}\n[[tunnel]]\nname = \"t\"\nkind = \"vxlan\"\nlocal = \"{me}\"\nremote = \"{peer}\"\nkey = 5000\nvrf = \"blue\"\naddresses = [\"{addr}/24\"]\n\n[[route]]\nvrf = \"blue\"\nprefix = \"{remote}\"\nvia = \"{via}\"\n",
            base(&t, side)
        )
    };
    let _a = Gateway::start(&t.ga, &tun('a'));
    let _b = Gateway::start(&t.gb, &tun('b'));
    common::warm_up(&t.h1, "10.2.0.2");
    let icmp0 =
        t.h1.sh("nstat -az IcmpInDestUnreachs | awk '/IcmpInDestUnreachs/ {print $2}'");
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 32 << 20);
    let icmp1 =
        t.h1.sh("nstat -az IcmpInDestUnreachs | awk '/IcmpInDestUnreachs/ {print $2}'");
    assert_eq!(
        icmp0.trim(),
        icmp1.trim(),
        "no 'fragmentation needed' came back to the sender"
    );
    assert!(counter(&api(&t, 'b'), "ip-rewrite", "marked-super-packets") > 0);
}

/// GRE over a 4088-byte (datacenter) underlay: gwA cuts each super-packet
/// into packets of two of the sender's segments (the largest multiple that
/// fits), gwB marks each, too wide for h2's 1500-byte link, as a
/// super-packet — and those coalesce for h2 like segments do, instead of
/// reaching it one by one (which held such a flow to half the rate of the
/// same flow over a 1500-byte underlay). Byte-exact, nothing refragmented.
#[test]
fn gre_over_a_4088_underlay_coalesces_for_the_host() {
    let t = topo();
    t.ga.sh("ip link set a-u mtu 4088");
    t.gb.sh("ip link set b-u mtu 4088");
    let _a = Gateway::start(&t.ga, &gre(&t, 'a'));
    let _b = Gateway::start(&t.gb, &gre(&t, 'b'));
    common::warm_up(&t.h1, "10.2.0.2");
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 32 << 20);
    let b = api(&t, 'b');
    let marked = counter(&b, "ip-rewrite", "marked-super-packets");
    let coalesced = counter(&b, "rsc-output", "coalesced-segments");
    assert!(marked > 100, "{marked} marked");
    assert!(
        coalesced * 2 >= marked,
        "{coalesced} coalesced of {marked} marked super-packets"
    );
    let csum_err =
        t.h2.sh("nstat -az TcpInCsumErrors | awk '/TcpInCsumErrors/ {print $2}'");
    assert_eq!(csum_err.trim(), "0");
}
