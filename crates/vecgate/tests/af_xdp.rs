//! vecgate with the `af_xdp` driver between network namespaces, real kernel
//! TCP stacks on both sides:
//!
//!   h1 (10.1.0.2, fd01::2) ── gw-h1 [vecgate] gw-h2 ── h2 (10.2.0.2, fd02::2)
//!
//! h1's and h2's veths keep their default offloads (tx checksum on): the
//! segments reaching vecgate are CHECKSUM_PARTIAL, which the AF_XDP receive
//! path must complete, or the far receiver counts checksum errors.

mod common;

use common::{no_csum_errors, sh, tcp_transfer, Gateway, Netns};

struct Topo {
    h1: Netns,
    h2: Netns,
    gw: Netns,
}

/// Veths with `queues` rx/tx queues on both ends (AF_XDP needs one receive
/// queue per worker; native XDP on a veth needs as many rx queues as the
/// peer has tx queues).
fn veth_q(a: &Netns, a_if: &str, b: &Netns, b_if: &str, queues: u32) {
    sh(&format!(
        "ip link add {a_if} netns {} numrxqueues {queues} numtxqueues {queues} type veth \
         peer name {b_if} netns {} numrxqueues {queues} numtxqueues {queues}",
        a.name, b.name
    ));
    a.sh(&format!("ip link set {a_if} up"));
    b.sh(&format!("ip link set {b_if} up"));
}

fn topo(queues: u32) -> Topo {
    let t = Topo {
        h1: Netns::new("h1"),
        h2: Netns::new("h2"),
        gw: Netns::new("gw"),
    };
    veth_q(&t.h1, "eth0", &t.gw, "gw-h1", queues);
    veth_q(&t.h2, "eth0", &t.gw, "gw-h2", queues);
    t.h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    t.h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    t.h1.sh("ip addr add fd01::2/64 dev eth0 nodad && ip -6 route add default via fd01::1");
    t.h2.sh("ip addr add fd02::2/64 dev eth0 nodad && ip -6 route add default via fd02::1");
    t
}

fn config(workers: usize, lan: &str, wan: &str) -> String {
    format!(
        r#"[gateway]
name = "xdp"
workers = {workers}
api = "unix:/tmp/{api}.sock"

[[interface]]
name = "lan"
host = "gw-h1"
driver = "{lan}"
addresses = ["10.1.0.1/24", "fd01::1/64"]

[[interface]]
name = "wan"
host = "gw-h2"
driver = "{wan}"
addresses = ["10.2.0.1/24", "fd02::1/64"]
"#,
        api = common::unique("api")
    )
}

fn ping(ns: &Netns, args: &str) {
    let out = ns.try_sh(&format!("ping {args}"));
    assert!(
        out.status.success(),
        "ping {args}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// iperf3 from h1 to h2 for `secs` seconds; returns the receiver's bit/s.
fn iperf(t: &Topo, secs: u32) -> f64 {
    let mut server = t.h2.spawn("iperf3 -s -1 -p 5201");
    assert!(
        common::wait_until(10, || t.h2.sh("ss -ltnH").contains(":5201")),
        "iperf3 server not listening"
    );
    let out =
        t.h1.try_sh(&format!("iperf3 -c 10.2.0.2 -p 5201 -t {secs} -J"));
    let _ = server.wait();
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "iperf3: {s}");
    let v: serde_json::Value = serde_json::from_str(&s).expect("iperf3 JSON");
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("no bits_per_second in {s}"))
}

fn xdp_attached(ns: &Netns, ifname: &str) -> bool {
    ns.sh(&format!("ip link show dev {ifname}")).contains("xdp")
}

#[test]
fn af_xdp_both_sides_ping_tcp_iperf() {
    let t = topo(1);
    let mut gw = Gateway::start(&t.gw, &config(1, "af_xdp", "af_xdp"));
    common::warm_up(&t.h1, "10.2.0.2");
    common::warm_up(&t.h1, "-6 fd02::2");
    assert!(xdp_attached(&t.gw, "gw-h1") && xdp_attached(&t.gw, "gw-h2"));
    ping(&t.h1, "-c 3 -i 0.2 -W 2 10.2.0.2");
    ping(&t.h1, "-6 -c 3 -i 0.2 -W 2 fd02::2");
    ping(&t.h1, "-c 1 -W 2 10.1.0.1");
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 8 << 20);
    tcp_transfer(&t.h2, &t.h1, "fd01::2", 4 << 20);
    let bps = iperf(&t, 3);
    assert!(bps > 0.0, "iperf3 moved nothing");
    eprintln!("af_xdp iperf3 h1 -> h2: {:.2} Gbit/s", bps / 1e9);
    no_csum_errors(&t.h2, "h2");
    no_csum_errors(&t.h1, "h1");
    assert!(gw.stop().success(), "{}", gw.log_text());
    // The XDP programs went away with the process.
    assert!(!xdp_attached(&t.gw, "gw-h1") && !xdp_attached(&t.gw, "gw-h2"));
}

#[test]
fn mixed_af_xdp_lan_af_packet_wan() {
    let t = topo(1);
    let _gw = Gateway::start(&t.gw, &config(1, "af_xdp", "af_packet"));
    common::warm_up(&t.h1, "10.2.0.2");
    common::warm_up(&t.h2, "-6 fd01::2");
    assert!(xdp_attached(&t.gw, "gw-h1"));
    assert!(!xdp_attached(&t.gw, "gw-h2"));
    ping(&t.h1, "-c 3 -i 0.2 -W 2 10.2.0.2");
    ping(&t.h2, "-6 -c 3 -i 0.2 -W 2 fd01::2");
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 8 << 20);
    tcp_transfer(&t.h2, &t.h1, "10.1.0.2", 8 << 20);
    no_csum_errors(&t.h2, "h2");
    no_csum_errors(&t.h1, "h1");
}

#[test]
fn two_workers_on_two_queue_veths() {
    let t = topo(2);
    let _gw = Gateway::start(&t.gw, &config(2, "af_xdp", "af_xdp"));
    common::warm_up(&t.h1, "10.2.0.2");
    common::warm_up(&t.h1, "-6 fd02::2");
    ping(&t.h1, "-c 3 -i 0.2 -W 2 10.2.0.2");
    ping(&t.h1, "-6 -c 3 -i 0.2 -W 2 fd02::2");
    // Several connections: flows land on both queues (both workers).
    for port in [7001, 7002, 7003] {
        common::tcp_transfer_port(&t.h1, &t.h2, "10.2.0.2", port, 2 << 20);
    }
    no_csum_errors(&t.h2, "h2");
}

#[test]
fn two_workers_on_one_queue_veth_fail_clearly() {
    let t = topo(1);
    let cfg = config(2, "af_xdp", "af_xdp");
    let path = std::env::temp_dir().join(format!("{}.toml", common::unique("cfg")));
    std::fs::write(&path, cfg).unwrap();
    let out = t.gw.try_sh(&format!(
        "{} run --config {}",
        common::vecgate_bin().display(),
        path.display()
    ));
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success());
    assert!(
        err.contains("'gw-h1' has 1 receive queue(s)") && err.contains("numrxqueues 2"),
        "{err}"
    );
    assert!(!xdp_attached(&t.gw, "gw-h1"), "nothing left behind");
}

/// `[gateway] busy_poll = true` reaches the workers: with no traffic the
/// gateway keeps burning CPU (/proc/PID/stat; without the key an idle
/// vecgate sleeps in poll(2): 0.43 CPU s in the 120 s this allows, measured
/// on a loaded machine), and it still forwards byte-exact and stops cleanly.
#[test]
fn busy_poll_spins_when_idle_and_forwards() {
    let t = topo(1);
    let cfg = config(1, "af_xdp", "af_xdp").replacen(
        "workers = 1\n",
        "workers = 1\nbusy_poll = true\n",
        1,
    );
    assert!(cfg.contains("busy_poll = true"));
    let mut gw = Gateway::start(&t.gw, &cfg);
    common::warm_up(&t.h1, "10.2.0.2");
    ping(&t.h1, "-c 3 -i 0.2 -W 2 10.2.0.2");
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 4 << 20);
    no_csum_errors(&t.h2, "h2");
    let tck: f64 = sh("getconf CLK_TCK").trim().parse().unwrap();
    let pid = gw.pid();
    let cpu = || -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let f: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / tck
    };
    let c0 = cpu();
    // Three CPU-seconds with nothing to forward; capped (a loaded machine
    // gives the spinning worker only a share of a core).
    assert!(
        common::wait_until(120, || cpu() - c0 >= 3.0),
        "idle busy_poll gateway used only {:.2} CPU s: its workers sleep",
        cpu() - c0
    );
    assert!(gw.stop().success(), "{}", gw.log_text());
}

/// rx packets and bytes of `ifname` in `ns` (`ip -s -j link`).
fn rx_counts(ns: &Netns, ifname: &str) -> (u64, u64) {
    let v: serde_json::Value =
        serde_json::from_str(&ns.sh(&format!("ip -s -j link show dev {ifname}"))).unwrap();
    let rx = &v[0]["stats64"]["rx"];
    (
        rx["packets"].as_u64().unwrap(),
        rx["bytes"].as_u64().unwrap(),
    )
}

/// A 9000-byte MTU on every link (AF_XDP frames over one page).
/// Frames of up to 9014 bytes cross both AF_XDP interfaces as multi-buffer
/// descriptor chains: unfragmented 9000-byte pings (DF) are answered over
/// IPv4 and IPv6, TCP moves byte-exact both ways in segments far larger
/// than one 4 KiB UMEM frame, and the checksums the hosts left partial are
/// completed over the whole chain (no checksum errors at the receivers).
/// Before multi-buffer the veths fell back to generic XDP and the kernel
/// dropped every frame over 3840 bytes: no big ping came back and TCP
/// (MSS 8960) stalled.
#[test]
fn af_xdp_jumbo_mtu_9000() {
    let t = topo(1);
    t.h1.sh("ip link set eth0 mtu 9000");
    t.h2.sh("ip link set eth0 mtu 9000");
    t.gw.sh("ip link set gw-h1 mtu 9000 && ip link set gw-h2 mtu 9000");
    let cfg = config(1, "af_xdp", "af_xdp");
    let mut gw = Gateway::start(&t.gw, &cfg);
    common::warm_up(&t.h1, "10.2.0.2");
    common::warm_up(&t.h1, "-6 fd02::2");
    assert!(xdp_attached(&t.gw, "gw-h1") && xdp_attached(&t.gw, "gw-h2"));
    // 9000-byte IP packets, DF: neither fragmented nor refused on the way.
    ping(&t.h1, "-M do -s 8972 -c 3 -i 0.2 -W 2 10.2.0.2");
    ping(&t.h1, "-6 -M do -s 8952 -c 3 -i 0.2 -W 2 fd02::2");
    ping(&t.h2, "-M do -s 8972 -c 2 -i 0.2 -W 2 10.1.0.2");
    let before = rx_counts(&t.h2, "eth0");
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 8 << 20);
    let after = rx_counts(&t.h2, "eth0");
    let (pkts, bytes) = (after.0 - before.0, after.1 - before.1);
    assert!(
        bytes / pkts.max(1) > 4096,
        "h2 received {bytes} bytes in {pkts} frames: not jumbo segments"
    );
    tcp_transfer(&t.h2, &t.h1, "fd01::2", 4 << 20);
    no_csum_errors(&t.h2, "h2");
    no_csum_errors(&t.h1, "h1");
    // No frame refused or dropped as malformed at either port.
    let api = cfg.lines().find_map(|l| l.strip_prefix("api = ")).unwrap();
    let out = t.gw.sh(&format!(
        "{} show stats --json --api {}",
        common::vecgate_bin().display(),
        api.trim_matches('"')
    ));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ports = v.as_array().unwrap();
    assert_eq!(ports.len(), 2, "{v}");
    for i in ports {
        assert!(i["rx_packets"].as_u64().unwrap() > 100, "{i}");
        for k in ["rx_errors", "tx_errors", "rx_missed"] {
            assert_eq!(i[k].as_u64(), Some(0), "{k}: {i}");
        }
    }
    assert!(gw.stop().success(), "{}", gw.log_text());
}

/// GRE between two gateways over a 9000-byte AF_XDP underlay, the hosts'
/// LANs (AF_PACKET) at 8900 bytes (the AF_XDP underlay takes
/// frames over one page):
///
///   h1 ── a-lan [ga] a-u ══ GRE, MTU 9000, af_xdp ══ b-u [gb] b-lan ── h2
///
/// The hosts' super-packets are cut into 8900-byte segments, each crossing
/// the underlay as one 8942-byte GRE frame — a descriptor chain on both
/// AF_XDP sockets. TCP moves byte-exact both ways, unfragmented 8900-byte
/// pings are answered, the hosts count no checksum errors and the
/// receiving gateway's underlay port took jumbo frames with no errors.
#[test]
fn gre_over_a_9000_byte_af_xdp_underlay() {
    let dir = std::env::temp_dir().join(common::unique("xgre"));
    std::fs::create_dir_all(&dir).unwrap();
    let (h1, h2) = (Netns::new("h1"), Netns::new("h2"));
    let (ga, gb) = (Netns::new("ga"), Netns::new("gb"));
    common::veth(&h1, "eth0", &ga, "a-lan");
    common::veth(&ga, "a-u", &gb, "b-u");
    common::veth(&gb, "b-lan", &h2, "eth0");
    for (ns, dev, mtu) in [
        (&h1, "eth0", 8900),
        (&ga, "a-lan", 8900),
        (&ga, "a-u", 9000),
        (&gb, "b-u", 9000),
        (&gb, "b-lan", 8900),
        (&h2, "eth0", 8900),
    ] {
        ns.sh(&format!("ip link set {dev} mtu {mtu}"));
    }
    h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    let cfg = |side: char| {
        let (lan, lanaddr, wan, me, peer, remote) = if side == 'a' {
            (
                "a-lan",
                "10.1.0.1/24",
                "a-u",
                "192.0.2.1",
                "192.0.2.2",
                "10.2.0.0/24",
            )
        } else {
            (
                "b-lan",
                "10.2.0.1/24",
                "b-u",
                "192.0.2.2",
                "192.0.2.1",
                "10.1.0.0/24",
            )
        };
        format!(
            r#"[gateway]
name = "xgre-{side}"
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
driver = "af_xdp"
addresses = ["{me}/24"]

[[tunnel]]
name = "t"
kind = "gre"
local = "{me}"
remote = "{peer}"
key = 7
vrf = "blue"

[[route]]
vrf = "blue"
prefix = "{remote}"
via = "t"
"#,
            dir = dir.display()
        )
    };
    let mut a = Gateway::start(&ga, &cfg('a'));
    let mut b = Gateway::start(&gb, &cfg('b'));
    common::warm_up(&h1, "10.2.0.2");
    assert!(xdp_attached(&ga, "a-u") && xdp_attached(&gb, "b-u"));
    ping(&h1, "-M do -s 8872 -c 3 -i 0.2 -W 2 10.2.0.2");
    ping(&h2, "-M do -s 8872 -c 2 -i 0.2 -W 2 10.1.0.2");
    tcp_transfer(&h1, &h2, "10.2.0.2", 8 << 20);
    tcp_transfer(&h2, &h1, "10.1.0.2", 4 << 20);
    no_csum_errors(&h2, "h2");
    no_csum_errors(&h1, "h1");
    let out = gb.sh(&format!(
        "{} show stats --json --api unix:{}/b.sock",
        common::vecgate_bin().display(),
        dir.display()
    ));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let wan = v
        .as_array()
        .and_then(|a| a.iter().find(|i| i["interface"] == "wan"))
        .unwrap_or_else(|| panic!("no wan in {v}"));
    let (pkts, bytes) = (
        wan["rx_packets"].as_u64().unwrap(),
        wan["rx_bytes"].as_u64().unwrap(),
    );
    assert!(
        pkts > 100 && bytes / pkts > 4096,
        "gb's underlay port: {bytes} bytes in {pkts} frames, not jumbo: {wan}"
    );
    for k in ["rx_errors", "tx_errors", "rx_missed"] {
        assert_eq!(wan[k].as_u64(), Some(0), "{k}: {wan}");
    }
    assert!(a.stop().success(), "{}", a.log_text());
    assert!(b.stop().success(), "{}", b.log_text());
    let _ = std::fs::remove_dir_all(&dir);
}
