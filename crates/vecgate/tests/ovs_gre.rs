//! Interop: vecgate GRE with transparent Ethernet bridging
//! (`inner = "ethernet"`, protocol 0x6558, key 100, RFC 2784 / RFC 2890)
//! ↔ Open vSwitch's userspace datapath GRE port.
//!
//!   h1 (10.1.0.2, fd01::2) ── gw [vecgate; tunnel 10.9.0.1/24, fd09::1/64]
//!       ══ 192.168.102.0/24 ══ ovs [br-phy 192.168.102.2 | br-int: gre0, o-h2]
//!       ── h2 (10.9.0.3/24, fd09::3/64, MTU 1450, gateway vecgate's tunnel address)
//!
//! OVS bridges L2: h2 sits on the overlay segment that vecgate's tunnel
//! interface is attached to, so h1 reaches h2 routed by vecgate and h2
//! reaches h1 through vecgate's tunnel address as its gateway. The OVS
//! setup mirrors bench/peers.py (`OvsGre`): a private ovsdb-server and
//! ovs-vswitchd in the peer namespace (OVS_RUNDIR), `datapath_type=netdev`,
//! the underlay address on br-phy, checksum offload and TSO off on every
//! veth whose packets reach vswitchd. Missing OVS fails the test.

mod common;

use common::wire_judge::{enlarge_receive_buffers, End, Tunnel, Wire, WireJudge};
use common::{
    no_csum_errors, ping_ok, sh, tcp_transfer, tshark, veth, wait_until, Capture, Gateway, Netns,
};
use std::path::{Path, PathBuf};

fn config(api: &str) -> String {
    format!(
        r#"[gateway]
name = "ovsgre"
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
addresses = ["192.168.102.1/24"]

[[tunnel]]
name = "gre"
kind = "gre"
inner = "ethernet"
key = 100
local = "192.168.102.1"
remote = "192.168.102.2"
vrf = "blue"
addresses = ["10.9.0.1/24", "fd09::1/64"]
"#,
    )
}

/// A private Open vSwitch (ovsdb-server + ovs-vswitchd) in one namespace;
/// its processes die with the namespace, its directory is removed on drop.
struct Ovs {
    dir: PathBuf,
    vsctl: String,
}

impl Ovs {
    fn start(ns: &Netns) -> Ovs {
        for bin in ["ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl"] {
            assert!(
                std::process::Command::new("sh")
                    .arg("-c")
                    .arg(format!("command -v {bin}"))
                    .output()
                    .map(|o| o.status.success())
                    .unwrap_or(false),
                "Open vSwitch is required ({bin} not found): \
                 apt-get install --no-install-recommends openvswitch-switch"
            );
        }
        let dir = std::env::temp_dir().join(common::unique("ovs"));
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.display();
        let env = format!(
            "env OVS_RUNDIR={d} OVS_DBDIR={d} OVS_LOGDIR={d} OVS_PKGDATADIR=/usr/share/openvswitch"
        );
        sh(&format!(
            "ovsdb-tool create {d}/conf.db /usr/share/openvswitch/vswitch.ovsschema"
        ));
        let sock = dir.join("db.sock");
        // Output goes to files: a piped stdout nobody reads could block them.
        drop(ns.spawn(&format!(
            "{env} ovsdb-server {d}/conf.db --remote=punix:{d}/db.sock \
             --pidfile={d}/ovsdb-server.pid --unixctl={d}/ovsdb-server.ctl \
             --log-file={d}/ovsdb-server.log >{d}/ovsdb-server.out 2>&1"
        )));
        assert!(
            wait_until(20, || sock.exists()),
            "ovsdb-server did not start: {}",
            tail(&dir.join("ovsdb-server.out"))
        );
        let vsctl = format!("OVS_RUNDIR={d} ovs-vsctl --db=unix:{d}/db.sock --timeout=30");
        ns.sh(&format!("{vsctl} --no-wait init"));
        drop(ns.spawn(&format!(
            "{env} ovs-vswitchd unix:{d}/db.sock --pidfile={d}/ovs-vswitchd.pid \
             --log-file={d}/ovs-vswitchd.log >{d}/ovs-vswitchd.out 2>&1"
        )));
        let pid = dir.join("ovs-vswitchd.pid");
        assert!(
            wait_until(20, || pid.exists()),
            "ovs-vswitchd did not start: {}",
            tail(&dir.join("ovs-vswitchd.log"))
        );
        Ovs { dir, vsctl }
    }

    fn vswitchd_pid(&self) -> u32 {
        let pid = std::fs::read_to_string(self.dir.join("ovs-vswitchd.pid")).unwrap_or_default();
        pid.trim()
            .parse()
            .unwrap_or_else(|_| panic!("ovs-vswitchd's pid file holds {pid:?}"))
    }

    fn log(&self) -> String {
        tail(&self.dir.join("ovs-vswitchd.log"))
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- ovs-vswitchd.log ----\n{}", self.log());
        }
        // The namespace's Drop kills the daemons (they run inside it).
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tail(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

#[test]
fn vecgate_gre_teb_with_ovs_userspace_gre() {
    let h1 = Netns::new("oh1");
    let gw = Netns::new("ogw");
    let ovsns = Netns::new("oov");
    let h2 = Netns::new("oh2");
    veth(&h1, "eth0", &gw, "lan");
    veth(&gw, "wan", &ovsns, "ul");
    veth(&ovsns, "o-h2", &h2, "eth0");
    h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    h1.sh("ip addr add fd01::2/64 dev eth0 nodad && ip -6 route add default via fd01::1");
    // h2 on the L2 segment bridged by OVS; MTU 1450 so that its frames
    // plus GRE (4 + 4 key) + Ethernet (14) + IPv4 (20) fit the underlay.
    h2.sh("ip link set eth0 mtu 1450");
    h2.sh("ip addr add 10.9.0.3/24 dev eth0 && ip route add default via 10.9.0.1");
    h2.sh("ip addr add fd09::3/64 dev eth0 nodad && ip -6 route add default via fd09::1");
    // OVS 3.1's userspace tunnels drop packets with offload flags.
    h2.sh("ethtool -K eth0 tx off tso off >/dev/null");
    ovsns
        .sh("ethtool -K ul tx off tso off >/dev/null && ethtool -K o-h2 tx off tso off >/dev/null");
    gw.sh("ethtool -K wan tx off tso off >/dev/null");

    let ovs = Ovs::start(&ovsns);
    let v = &ovs.vsctl;
    ovsns.sh(&format!(
        "{v} add-br br-phy -- set bridge br-phy datapath_type=netdev \
         -- add-port br-phy ul \
         -- add-br br-int -- set bridge br-int datapath_type=netdev \
         -- add-port br-int o-h2 \
         -- add-port br-int gre0 -- set interface gre0 type=gre \
            options:remote_ip=192.168.102.1 options:key=100"
    ));
    ovsns.sh(
        "ip addr add 192.168.102.2/24 dev br-phy && ip link set br-phy up && ip link set br-int up",
    );
    for port in ["ul", "o-h2", "gre0"] {
        let of = ovsns.sh(&format!("{v} get interface {port} ofport"));
        assert!(
            !matches!(of.trim(), "" | "-1" | "[]"),
            "OVS port {port} not attached (ofport {of}): {}",
            ovs.log()
        );
    }

    // OVS's AF_PACKET ports keep the default 208 KiB buffer, which a
    // transfer's bursts overflow (peers.md): a larger one keeps its own
    // drops (still counted by the wire judge) out of TCP's retransmits.
    let bufs = enlarge_receive_buffers(ovs.vswitchd_pid(), &[], 8 << 20);
    assert!(!bufs.is_empty(), "ovs-vswitchd has no packet sockets");
    let api = format!("unix:/tmp/{}.sock", common::unique("api"));
    let _g = Gateway::start(&gw, &config(&api));
    // vecgate transmits with PACKET_QDISC_BYPASS (invisible to taps on its
    // own side): capture the underlay on the OVS side.
    let mut cap = Capture::start(&ovsns, "ul");

    // Warm-up: OVS learns routes/neighbours on the first packets (lost).
    assert!(
        wait_until(30, || ping_ok(&h1, "-c1 -W2 10.9.0.3")),
        "h1 → h2 through vecgate GRE and OVS (IPv4): {}",
        ovs.log()
    );
    assert!(
        wait_until(30, || ping_ok(&h1, "-6 -c1 -W2 fd09::3")),
        "h1 → h2 (IPv6)"
    );
    assert!(
        wait_until(15, || ping_ok(&h2, "-c3 -i0.2 -W2 10.1.0.2")),
        "h2 → h1 (IPv4)"
    );
    assert!(
        wait_until(15, || ping_ok(&h2, "-6 -c3 -i0.2 -W2 fd01::2")),
        "h2 → h1 (IPv6)"
    );
    // Hosts ping vecgate's tunnel address across OVS too.
    assert!(ping_ok(&h2, "-c2 -i0.2 -W2 10.9.0.1"), "h2 → vecgate");

    // OVS's AF_PACKET sockets drop under load (peers.md): modest sizes,
    // TCP retransmits what it loses, the bytes must still be exact.
    // Each direction judged on the wire: every GRE packet vecgate counted
    // reached OVS's veth, one per frame; TCP's retransmits against a
    // control in the same run, OVS's own socket drops told apart.
    let wire = |sender| Wire {
        tunnel: Tunnel::Gre,
        api: &api,
        port: "wan",
        gw: End {
            ns: &gw,
            dev: "wan",
        },
        peer: End {
            ns: &ovsns,
            dev: "ul",
        },
        sender,
        peer_socket: Some(&ovsns),
        esp_keys: Vec::new(),
    };
    let judge = WireJudge::start(wire(&h1), 2 << 20);
    tcp_transfer(&h1, &h2, "10.9.0.3", 2 << 20);
    tcp_transfer(&h1, &h2, "fd09::3", 1 << 20);
    let out = judge.finish();
    assert!(out.captured > 0, "{out}");
    let judge = WireJudge::start(wire(&h2), 2 << 20);
    tcp_transfer(&h2, &h1, "10.1.0.2", 2 << 20);
    tcp_transfer(&h2, &h1, "fd01::2", 1 << 20);
    judge.finish();

    let file = cap.stop().to_owned();
    // Every GRE packet both ways: key 100, TEB; nothing malformed; no
    // frame above the underlay MTU.
    let gre = tshark(
        &file,
        "gre",
        "-E occurrence=f -e ip.src -e gre.key -e gre.proto",
    );
    assert!(gre.len() > 500, "{} GRE packets captured", gre.len());
    for src in ["192.168.102.1", "192.168.102.2"] {
        let n = gre
            .iter()
            .filter(|l| l.starts_with(&format!("{src}\t")))
            .count();
        assert!(n > 100, "{n} GRE packets from {src}");
    }
    assert!(
        gre.iter().all(|l| l.ends_with("\t0x00000064\t0x6558")),
        "GRE without key 100 / TEB: {:?}",
        gre.iter().find(|l| !l.ends_with("\t0x00000064\t0x6558"))
    );
    let bad = tshark(
        &file,
        "_ws.malformed || _ws.expert.severity >= error",
        "-e frame.number",
    );
    assert!(bad.is_empty(), "malformed frames: {bad:?}");
    let big = tshark(&file, "frame.len > 1514", "-e frame.len");
    assert!(big.is_empty(), "underlay frames above the MTU: {big:?}");
    // Both inner families crossed the tunnel.
    let inner6 = tshark(
        &file,
        "gre && ipv6.dst == fd09::3 && tcp",
        "-e frame.number",
    );
    assert!(!inner6.is_empty(), "no IPv6 TCP inside GRE");
    no_csum_errors(&h1, "h1");
    no_csum_errors(&h2, "h2");
    // h1's TSO super-packets were encapsulated once and segmented after
    // (this also proves the counters were read).
    assert!(common::counter(&api, "tunnel-encap", "segmented-super-packets") > 0);
    // Nothing the peer sent was dropped by the decapsulation node.
    let drops: Vec<_> = common::show_errors(&api)
        .into_iter()
        .filter(|(node, _, _)| node == "gre-input")
        .collect();
    assert!(drops.is_empty(), "gre-input drops: {drops:?}");
}
