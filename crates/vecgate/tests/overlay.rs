//! Overlay tunnels between two vecgate gateways, with real kernel TCP
//! stacks on the hosts (issue 4):
//!
//!   h1 (10.1.0.2, fd01::2) ── gwA ══ tunnel over 192.168.100.0/24 ══ gwB ── h2 (10.2.0.2, fd02::2)
//!
//! Each test: ping both families, a byte-exact TCP transfer (super-packets
//! from the hosts' TSO go through encapsulation and segmentation), a
//! capture of the underlay dissected by tshark (right key / VSID / VNI,
//! nothing malformed, every frame within the underlay MTU), and the
//! receiving gateway's RSC counters.

mod common;

use common::{veth, wait_until, Gateway, Netns};

struct Topo {
    h1: Netns,
    h2: Netns,
    a: Netns,
    b: Netns,
}

fn topo() -> Topo {
    let t = Topo {
        h1: Netns::new("oh1"),
        h2: Netns::new("oh2"),
        a: Netns::new("oga"),
        b: Netns::new("ogb"),
    };
    veth(&t.h1, "eth0", &t.a, "lan");
    veth(&t.h2, "eth0", &t.b, "lan");
    veth(&t.a, "wan", &t.b, "wan");
    t.h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    t.h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    t.h1.sh("ip addr add fd01::2/64 dev eth0 nodad && ip -6 route add default via fd01::1");
    t.h2.sh("ip addr add fd02::2/64 dev eth0 nodad && ip -6 route add default via fd02::1");
    t
}

/// Tunnel settings of one test.
#[derive(Clone, Copy)]
struct Kind {
    /// `kind = ...` plus extra keys (key, checksum, inner...).
    keys: &'static str,
    ethernet: bool,
    v6_outer: bool,
    rsc: bool,
}

fn config(side: usize, k: Kind) -> String {
    let me = side + 1;
    let peer = 2 - side;
    let (ul_me, ul_peer, ul_len) = if k.v6_outer {
        (format!("fd00:100::{me}"), format!("fd00:100::{peer}"), 64)
    } else {
        (format!("192.168.100.{me}"), format!("192.168.100.{peer}"), 24)
    };
    let (addrs, via4, via6) = if k.ethernet {
        (
            format!("addresses = [\"10.9.0.{me}/24\", \"fd09::{me}/64\"]"),
            format!("10.9.0.{peer}"),
            format!("fd09::{peer}"),
        )
    } else {
        (String::new(), "tun".to_string(), "tun".to_string())
    };
    let rsc = if k.rsc { "" } else { "rsc = false" };
    format!(
        r#"[gateway]
name = "ov{me}"
workers = 1
api = "unix:/tmp/vecgate-ov-{pid}-{me}.sock"

[[interface]]
name = "lan"
host = "lan"
driver = "af_packet"
addresses = ["10.{me}.0.1/24", "fd0{me}::1/64"]
vrf = "blue"
{rsc}

[[interface]]
name = "wan"
host = "wan"
driver = "af_packet"
addresses = ["{ul_me}/{ul_len}"]

[[tunnel]]
name = "tun"
{keys}
local = "{ul_me}"
remote = "{ul_peer}"
vrf = "blue"
{addrs}

[[route]]
vrf = "blue"
prefix = "10.{peer}.0.0/24"
via = "{via4}"

[[route]]
vrf = "blue"
prefix = "fd0{peer}::/64"
via = "{via6}"
"#,
        pid = std::process::id(),
        keys = k.keys,
    )
}

const TCP_RX: &str = r#"
import socket, hashlib, sys
addr = sys.argv[1]
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = socket.socket(fam)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", 7000))
s.listen(1)
s.settimeout(60)
c, _ = s.accept()
h = hashlib.sha256()
n = 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    h.update(b)
    n += len(b)
print(h.hexdigest(), n)
"#;

const TCP_TX: &str = r#"
import socket, hashlib, os, sys, time
addr, n = sys.argv[1], int(sys.argv[2])
d = os.urandom(n)
for i in range(100):
    try:
        s = socket.create_connection((addr, 7000), timeout=60)
        break
    except ConnectionRefusedError:
        time.sleep(0.1)
s.sendall(d)
s.close()
print(hashlib.sha256(d).hexdigest(), len(d))
"#;

/// `bytes` of random data from `from` to `to_addr`:7000; the SHA-256 seen
/// by the receiver must equal the sender's.
fn tcp_transfer(from: &Netns, to: &Netns, to_addr: &str, bytes: usize) {
    let dir = std::env::temp_dir();
    let rxs = dir.join(format!("{}.py", common::unique("orx")));
    let txs = dir.join(format!("{}.py", common::unique("otx")));
    std::fs::write(&rxs, TCP_RX).unwrap();
    std::fs::write(&txs, TCP_TX).unwrap();
    let rx = to.spawn(&format!("python3 {} {to_addr}", rxs.display()));
    let sent = from.sh(&format!("python3 {} {to_addr} {bytes}", txs.display()));
    let out = rx.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&rxs);
    let _ = std::fs::remove_file(&txs);
    let got = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        got.trim(),
        sent.trim(),
        "receiver saw different bytes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Counter `node`/`reason` from the counter dump a stopped gateway logs
/// (0 when the dump does not list it: only nonzero counters are shown).
fn counter(gw: &Gateway, node: &str, reason: &str) -> u64 {
    let log = gw.log.lock().unwrap();
    log.iter()
        .flat_map(|l| l.split('\n'))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 3 && w[w.len() - 2] == node && w[w.len() - 1] == reason)
                .then(|| w[w.len() - 3].parse::<u64>().ok())
                .flatten()
        })
        .next_back()
        .unwrap_or(0)
}

fn ping_ok(ns: &Netns, args: &str) -> bool {
    ns.try_sh(&format!("ping {args}")).status.success()
}

/// Starts a capture on gwA's underlay veth; returns (child, file).
fn capture(ns: &Netns) -> (std::process::Child, std::path::PathBuf) {
    let f = std::env::temp_dir().join(format!("{}.pcap", common::unique("ovl")));
    let c = ns.spawn(&format!(
        "tcpdump -i wan --immediate-mode -s 256 -w {} 2>/dev/null",
        f.display()
    ));
    std::thread::sleep(std::time::Duration::from_millis(700));
    (c, f)
}

fn stop_capture(ns: &Netns, mut c: std::process::Child) {
    std::thread::sleep(std::time::Duration::from_millis(300));
    ns.sh("pkill -INT -x tcpdump || true");
    let _ = c.wait();
}

fn tshark(file: &std::path::Path, filter: &str, fields: &str) -> Vec<String> {
    let out = common::sh(&format!(
        "tshark -r {} -Y '{filter}' -T fields {fields} 2>/dev/null",
        file.display()
    ));
    out.lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()
}

/// Runs the whole scenario for one tunnel kind; tshark's `field` must
/// pass `ok` on every tunnel packet (e.g. gre.key == 0x64).
fn scenario(k: Kind, tshark_proto: &str, field: &str, ok: fn(&str) -> bool) {
    let t = topo();
    let mut ga = Gateway::start(&t.a, &config(0, k));
    let mut gb = Gateway::start(&t.b, &config(1, k));
    // Warm-up: ARP / ND on the underlay and, for L2 tunnels, through it.
    assert!(
        wait_until(15, || ping_ok(&t.h1, "-c1 -W1 10.2.0.2")),
        "IPv4 ping through the tunnel"
    );
    assert!(
        wait_until(15, || ping_ok(&t.h1, "-6 -c1 -W1 fd02::2")),
        "IPv6 ping through the tunnel"
    );
    assert!(ping_ok(&t.h2, "-c2 -i0.2 -W1 10.1.0.2"), "reverse IPv4");
    // PMTU: a DF packet bigger than the tunnel MTU gets frag-needed.
    let out = t.h1.try_sh("ping -c1 -W1 -M do -s 1472 10.2.0.2");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "1500-byte DF ping cannot fit: {text}");

    let (cap, file) = capture(&t.a);
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 8 << 20);
    tcp_transfer(&t.h2, &t.h1, "fd01::2", 2 << 20);
    stop_capture(&t.a, cap);

    // tshark: every tunnel packet carries the right identifier; nothing
    // malformed; every underlay frame fits the 1500-byte MTU.
    let ids = tshark(&file, tshark_proto, &format!("-e {field}"));
    assert!(ids.len() > 1000, "only {} {tshark_proto} packets captured", ids.len());
    assert!(ids.iter().all(|v| ok(v)), "{field}: {:?}", &ids[..5]);
    let bad = tshark(&file, "_ws.malformed || _ws.expert.severity >= error", "-e frame.number");
    assert!(bad.is_empty(), "malformed frames: {bad:?}");
    let big = tshark(&file, "frame.len > 1514", "-e frame.len");
    assert!(big.is_empty(), "underlay frames above the MTU: {big:?}");
    let _ = std::fs::remove_file(&file);

    // The receiving kernel accepted every segment: no checksum errors.
    let csum = t.h2.sh("nstat -az | grep -i csum || true");
    for l in csum.lines() {
        let n: u64 = l.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        assert_eq!(n, 0, "h2: {l}");
    }
    assert!(ga.stop().success() && gb.stop().success());
    assert!(counter(&ga, "tunnel-encap", "segmented-super-packets") > 0, "TSO super-packets were segmented after encapsulation");
    let coalesced = counter(&gb, "rsc-output", "coalesced-segments");
    if k.rsc {
        assert!(coalesced > 0, "RSC on: coalesced segments");
    } else {
        assert_eq!(coalesced, 0, "RSC off");
    }
}

#[test]
fn gre_ip_key_checksum_over_ipv4() {
    scenario(
        Kind {
            keys: "kind = \"gre\"\nkey = 100\nchecksum = true",
            ethernet: false,
            v6_outer: false,
            rsc: true,
        },
        "gre",
        "gre.key",
        |v| v == "0x00000064",
    );
}

#[test]
fn gre_ip_sequence_over_ipv6_rsc_off() {
    scenario(
        Kind {
            keys: "kind = \"gre\"\nkey = 7\nsequence = true",
            ethernet: false,
            v6_outer: true,
            rsc: false,
        },
        "gre",
        "gre.key",
        |v| v == "0x00000007",
    );
}

#[test]
fn gre_teb() {
    scenario(
        Kind {
            keys: "kind = \"gre\"\nkey = 300\ninner = \"ethernet\"",
            ethernet: true,
            v6_outer: false,
            rsc: true,
        },
        "gre && eth.type",
        "gre.proto",
        |v| v == "0x6558",
    );
}

#[test]
fn nvgre() {
    scenario(
        Kind {
            keys: "kind = \"nvgre\"\nkey = 5000",
            ethernet: true,
            v6_outer: false,
            rsc: true,
        },
        "gre",
        "gre.key",
        // VSID in the high 24 bits, FlowID (any) in the low 8 (RFC 7637).
        |v| u32::from_str_radix(v.trim_start_matches("0x"), 16).map(|k| k >> 8) == Ok(5000),
    );
}

#[test]
fn vxlan() {
    scenario(
        Kind {
            keys: "kind = \"vxlan\"\nkey = 42",
            ethernet: true,
            v6_outer: false,
            rsc: true,
        },
        "vxlan",
        "vxlan.vni",
        |v| v == "42",
    );
}
