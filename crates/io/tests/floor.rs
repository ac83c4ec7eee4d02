//! `vecgate-floor` really forwards (so the benchmarks' floor cannot rot):
//! hosts in their own namespaces exchange pings and a byte-exact TCP
//! transfer through it, with TSO/GSO on (64 KB super-packets cross whole),
//! and the veths' own counters on the far side count what crossed. Needs
//! root; every namespace is the test's own.

mod common;

use common::*;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const FLOOR: &str = env!("CARGO_BIN_EXE_vecgate-floor");
/// Bytes of the TCP transfer.
const BYTES: u64 = 16 << 20;

/// The floor process, killed on drop (its ingress guards go with it).
struct Floor(Child);

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_floor(ns: &Netns, args: &[&str]) -> Floor {
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name, FLOOR, "forward"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vecgate-floor");
    // "ready" comes once every socket is open; the line is all it prints.
    let mut err = child.stderr.take().expect("stderr");
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while err.read(&mut b).unwrap_or(0) == 1 && b[0] != b'\n' {
        line.push(b[0]);
    }
    let line = String::from_utf8_lossy(&line).to_string();
    assert!(
        line.contains("ready"),
        "vecgate-floor did not start: {line}"
    );
    Floor(child)
}

fn veth(a: &Netns, aif: &str, b: &Netns, bif: &str) {
    a.exec(&[
        "ip", "link", "add", aif, "type", "veth", "peer", "name", bif,
    ]);
    a.exec(&["ip", "link", "set", bif, "netns", &b.name]);
    a.exec(&["ip", "link", "set", aif, "up"]);
    b.exec(&["ip", "link", "set", bif, "up"]);
}

fn mac_of(ns: &Netns, dev: &str) -> String {
    let out = ns.exec(&["cat", &format!("/sys/class/net/{dev}/address")]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn counter(ns: &Netns, dev: &str, what: &str) -> u64 {
    let out = ns.exec(&["cat", &format!("/sys/class/net/{dev}/statistics/{what}")]);
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("counter")
}

/// Hosts h1 (10.1.0.2) and h2 (10.2.0.2) on `eth0`, default routes via .1
/// whose MAC is the floor's port (the floor answers no ARP).
fn hosts(h1: &Netns, h2: &Netns, gw1_mac: &str, gw2_mac: &str) {
    for (h, net, mac) in [(h1, "10.1.0", gw1_mac), (h2, "10.2.0", gw2_mac)] {
        h.exec(&["ip", "addr", "add", &format!("{net}.2/24"), "dev", "eth0"]);
        h.exec(&["ip", "route", "add", "default", "via", &format!("{net}.1")]);
        h.exec(&[
            "ip",
            "neigh",
            "replace",
            &format!("{net}.1"),
            "lladdr",
            mac,
            "dev",
            "eth0",
            "nud",
            "permanent",
        ]);
    }
}

/// h1 pings h2 (every reply must come back), then sends BYTES of a
/// pattern over TCP; h2 checks every byte. Returns when both are done.
fn traffic(h1: &Netns, h2: &Netns) {
    let out = h1.exec(&[
        "ping", "-c", "10", "-i", "0.05", "-W", "5", "-s", "1000", "10.2.0.2",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("10 received"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The sink checks the whole stream against the pattern in bulk: the
    // pattern repeats every 251 bytes, so each chunk is compared with the
    // matching slice of a precomputed 251-periodic buffer.
    let sink = "import socket,sys\n\
        pat = bytes(i*7 % 251 for i in range(251)) * ((1<<21)//251 + 2)\n\
        s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
        s.bind(('10.2.0.2', 5999)); s.listen(1); s.settimeout(60)\n\
        print('listening', flush=True)\n\
        c,_=s.accept(); c.settimeout(60); n=0; bad=0\n\
        while True:\n\
        \x20   b=c.recv(1<<20)\n\
        \x20   if not b: break\n\
        \x20   o = n % 251\n\
        \x20   if b != pat[o:o+len(b)]: bad += 1\n\
        \x20   n += len(b)\n\
        print(n, bad, flush=True)\n";
    let source = format!(
        "import socket\n\
         pat = bytes(i*7 % 251 for i in range(251)) * ((1<<20)//251 + 2)\n\
         c=socket.create_connection(('10.2.0.2', 5999), timeout=60); n=0\n\
         while n < {BYTES}:\n\
         \x20   k = min(1<<20, {BYTES}-n); o = n % 251\n\
         \x20   c.sendall(pat[o:o+k]); n += k\n\
         c.close()\n"
    );
    let mut rx = Command::new("ip")
        .args(["netns", "exec", &h2.name, "/usr/bin/python3", "-c", sink])
        .stdout(Stdio::piped())
        .spawn()
        .expect("sink");
    let mut out = rx.stdout.take().expect("stdout");
    let mut first = [0u8; 10];
    out.read_exact(&mut first).expect("sink listening");
    h1.exec(&["/usr/bin/python3", "-c", &source]);
    let mut rest = String::new();
    out.read_to_string(&mut rest).expect("sink result");
    let _ = rx.wait();
    assert_eq!(
        rest.split_whitespace().collect::<Vec<_>>(),
        vec![BYTES.to_string(), "0".to_string()],
        "bytes received, chunks that differ from what was sent"
    );
}

/// Waits (up to 30 s) until `f` holds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn floor_routes_super_packets_between_two_hosts() {
    let (h1, r, h2) = (Netns::new("fh1"), Netns::new("fr"), Netns::new("fh2"));
    veth(&h1, "eth0", &r, "r1");
    veth(&h2, "eth0", &r, "r2");
    hosts(&h1, &h2, &mac_of(&r, "r1"), &mac_of(&r, "r2"));
    let _f = start_floor(
        &r,
        &[
            "--a",
            "r1",
            "--b",
            "r2",
            "--a-peer",
            &mac_of(&h1, "eth0"),
            "--b-peer",
            &mac_of(&h2, "eth0"),
            "--workers",
            "2",
        ],
    );
    let (tx0, rx0) = (
        counter(&r, "r2", "tx_bytes"),
        counter(&h2, "eth0", "rx_bytes"),
    );
    traffic(&h1, &h2);
    // Both ends of the veth the floor sends on count the payload (and more:
    // headers); r has no address and no forwarding, so only the floor can
    // have sent it.
    eventually("r2 and h2 count the transfer", || {
        counter(&r, "r2", "tx_bytes") - tx0 >= BYTES
            && counter(&h2, "eth0", "rx_bytes") - rx0 >= BYTES
    });
    assert_eq!(
        r.exec(&["sysctl", "-n", "net.ipv4.ip_forward"]).stdout,
        b"0\n"
    );
}

#[test]
fn floor_gre_twin_carries_super_packets_over_a_64k_underlay() {
    let (h1, ga, gb, h2) = (
        Netns::new("fh1"),
        Netns::new("fga"),
        Netns::new("fgb"),
        Netns::new("fh2"),
    );
    veth(&h1, "eth0", &ga, "a1");
    veth(&ga, "au", &gb, "bu");
    veth(&h2, "eth0", &gb, "b2");
    ga.exec(&["ip", "link", "set", "au", "mtu", "65535"]);
    gb.exec(&["ip", "link", "set", "bu", "mtu", "65535"]);
    hosts(&h1, &h2, &mac_of(&ga, "a1"), &mac_of(&gb, "b2"));
    let _fa = start_floor(
        &ga,
        &[
            "--a",
            "a1",
            "--b",
            "au",
            "--a-peer",
            &mac_of(&h1, "eth0"),
            "--b-peer",
            &mac_of(&gb, "bu"),
            "--gre",
            "192.0.2.1,192.0.2.2",
        ],
    );
    let _fb = start_floor(
        &gb,
        &[
            "--a",
            "b2",
            "--b",
            "bu",
            "--a-peer",
            &mac_of(&h2, "eth0"),
            "--b-peer",
            &mac_of(&ga, "au"),
            "--gre",
            "192.0.2.2,192.0.2.1",
        ],
    );
    let (u0, p0) = (
        counter(&gb, "bu", "rx_bytes"),
        counter(&gb, "bu", "rx_packets"),
    );
    let rx0 = counter(&h2, "eth0", "rx_bytes");
    traffic(&h1, &h2);
    eventually("the underlay and h2 count the transfer", || {
        counter(&gb, "bu", "rx_bytes") - u0 >= BYTES
            && counter(&h2, "eth0", "rx_bytes") - rx0 >= BYTES
    });
    // Super-packets crossed whole: far fewer frames on the underlay than
    // 1500-byte segments would need.
    let frames = counter(&gb, "bu", "rx_packets") - p0;
    assert!(
        frames < BYTES / 1448,
        "{frames} underlay frames for {BYTES} bytes: not super-packets"
    );
}

#[test]
fn floor_forwards_over_af_xdp() {
    let (h1, r, h2) = (Netns::new("fh1"), Netns::new("fr"), Netns::new("fh2"));
    veth(&h1, "eth0", &r, "r1");
    veth(&h2, "eth0", &r, "r2");
    hosts(&h1, &h2, &mac_of(&r, "r1"), &mac_of(&r, "r2"));
    let _f = start_floor(
        &r,
        &[
            "--a",
            "r1",
            "--b",
            "r2",
            "--a-peer",
            &mac_of(&h1, "eth0"),
            "--b-peer",
            &mac_of(&h2, "eth0"),
            "--driver",
            "af_xdp",
        ],
    );
    let (tx0, rx0) = (
        counter(&r, "r2", "tx_bytes"),
        counter(&h2, "eth0", "rx_bytes"),
    );
    // The hosts' TCP leaves checksums partial: the transfer is byte-exact
    // only if the floor completes them.
    traffic(&h1, &h2);
    eventually("r2 and h2 count the transfer", || {
        counter(&r, "r2", "tx_bytes") - tx0 >= BYTES
            && counter(&h2, "eth0", "rx_bytes") - rx0 >= BYTES
    });
}

/// With a 9000-byte MTU everywhere the AF_XDP floor forwards frames of up
/// to 9014 bytes (multi-buffer descriptor chains on both sockets): DF
/// pings of 9000 bytes come back and the TCP transfer is byte-exact in
/// segments larger than one 4 KiB UMEM frame.
#[test]
fn floor_forwards_jumbo_frames_over_af_xdp() {
    let (h1, r, h2) = (Netns::new("fh1"), Netns::new("fr"), Netns::new("fh2"));
    veth(&h1, "eth0", &r, "r1");
    veth(&h2, "eth0", &r, "r2");
    for (ns, dev) in [(&h1, "eth0"), (&r, "r1"), (&r, "r2"), (&h2, "eth0")] {
        ns.exec(&["ip", "link", "set", dev, "mtu", "9000"]);
    }
    hosts(&h1, &h2, &mac_of(&r, "r1"), &mac_of(&r, "r2"));
    let _f = start_floor(
        &r,
        &[
            "--a",
            "r1",
            "--b",
            "r2",
            "--a-peer",
            &mac_of(&h1, "eth0"),
            "--b-peer",
            &mac_of(&h2, "eth0"),
            "--driver",
            "af_xdp",
        ],
    );
    let out = h1.exec(&[
        "ping", "-M", "do", "-c", "3", "-i", "0.1", "-W", "5", "-s", "8972", "10.2.0.2",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("3 received"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let (p0, b0) = (
        counter(&h2, "eth0", "rx_packets"),
        counter(&h2, "eth0", "rx_bytes"),
    );
    traffic(&h1, &h2);
    let (p, b) = (
        counter(&h2, "eth0", "rx_packets") - p0,
        counter(&h2, "eth0", "rx_bytes") - b0,
    );
    assert!(b / p.max(1) > 4096, "{b} bytes in {p} frames: not jumbo");
}

#[test]
fn generator_frames_reach_the_peer() {
    const N: u64 = 20_000;
    let (h1, h2) = (Netns::new("fg1"), Netns::new("fg2"));
    veth(&h1, "eth0", &h2, "g2");
    let dst_mac = mac_of(&h2, "g2");
    let (p0, d0) = (
        counter(&h2, "g2", "rx_packets"),
        counter(&h1, "eth0", "tx_dropped"),
    );
    // A count, not a duration: the generator stops once the kernel took N
    // frames (the 60 s cap is only a guard).
    let out = h1.exec(&[
        FLOOR,
        "generate",
        "--if",
        "eth0",
        "--dst-mac",
        &dst_mac,
        "--src",
        "10.1.0.2",
        "--dst",
        "10.1.0.3",
        "--size",
        "60",
        "--count",
        &N.to_string(),
        "--seconds",
        "60",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains(&format!("\"sent\": {N},")), "{text}");
    // The veth pair is the referee: every frame is either received by h2
    // or counted dropped by h1's veth (a full backlog on a loaded machine);
    // the kernel itself may add a few frames of its own on a new link.
    let accounted =
        || counter(&h2, "g2", "rx_packets") - p0 + counter(&h1, "eth0", "tx_dropped") - d0;
    eventually("h2 counts the frames", || accounted() >= N);
    assert!(accounted() <= N + 20, "{} frames for {N} sent", accounted());
    assert!(counter(&h2, "g2", "rx_packets") - p0 > 0);
}
