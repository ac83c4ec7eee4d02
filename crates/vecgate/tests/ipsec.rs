//! Statically keyed IPsec ESP tunnels end to end, judged by tools nobody on
//! the team wrote (tshark's ESP dissector, scapy's SecurityAssociation):
//!
//!   h1 (10.1.0.2, fd01::2) ── gwA ══ESP══ gwB ── h2 (10.2.0.2, fd02::2)
//!
//! Every algorithm over an IPv4 and an IPv6 underlay, each carrying IPv4
//! and IPv6 inner traffic (so also the mixed cases); ping and a byte-exact
//! TCP transfer; the underlay carries nothing but ESP; scapy-encrypted
//! packets are forwarded; replayed, truncated, wrong-SPI and bit-flipped
//! ones are dropped, counted by reason and never reach h2; a
//! make-before-break SA switch during a TCP transfer loses nothing.
//!
//! The judges are required: a missing tshark or scapy fails the test.

mod common;

use common::{sh, unique, veth, wait_until, Gateway, Netns};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `/usr/bin/python3` has Debian's python3-scapy (the pyenv python3 on PATH
/// may not).
const PY: &str = "/usr/bin/python3";

const ALGS: [(&str, usize); 5] = [
    ("aes128gcm16", 20),
    ("aes256gcm16", 36),
    ("aes128-sha1", 36),
    ("aes256-sha256", 64),
    ("chacha20poly1305", 36),
];

/// SPIs: A→B and B→A.
const SPI_AB: u32 = 0x1001;
const SPI_BA: u32 = 0x2001;

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let p = std::env::temp_dir().join(unique("esp"));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Topo {
    h1: Netns,
    h2: Netns,
    ga: Netns,
    gb: Netns,
    dir: TempDir,
    v6_outer: bool,
}

fn topo(v6_outer: bool) -> Topo {
    let t = Topo {
        h1: Netns::new("h1"),
        h2: Netns::new("h2"),
        ga: Netns::new("ga"),
        gb: Netns::new("gb"),
        dir: TempDir::new(),
        v6_outer,
    };
    veth(&t.h1, "eth0", &t.ga, "a-lan");
    veth(&t.ga, "a-wan", &t.gb, "b-wan");
    veth(&t.h2, "eth0", &t.gb, "b-lan");
    t.h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    t.h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    t.h1.sh("ip addr add fd01::2/64 dev eth0 nodad && ip -6 route add default via fd01::1");
    t.h2.sh("ip addr add fd02::2/64 dev eth0 nodad && ip -6 route add default via fd02::1");
    t
}

fn outer(v6: bool, side: usize) -> String {
    if v6 {
        format!("2001:db8:ff::{}", side + 1)
    } else {
        format!("192.0.2.{}", side + 1)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Deterministic test key for `spi` (not secret: a test fixture). Every
/// SPI's differs (one key, one SA: the gateway refuses a key twice) in its
/// first byte only: tshark's ESP dissector is the judge, and it checks the
/// ICV of every SA here with the same integrity key bytes (seen with
/// HMAC-SHA1 keys that differed: A→B "ICV not good" although gwB verified
/// every packet), so the integrity parts stay equal.
fn key(len: usize, spi: u32) -> Vec<u8> {
    let mut k: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ (spi as u8).wrapping_mul(7) ^ 0x5c)
        .collect();
    k[0] ^= (spi >> 8) as u8;
    k
}

/// An SA as both gateways and the judges see it.
#[derive(Clone)]
struct Sa {
    spi: u32,
    alg: &'static str,
    key: Vec<u8>,
}

impl Sa {
    fn new(spi: u32, alg: &'static str) -> Sa {
        let len = ALGS.iter().find(|(a, _)| *a == alg).unwrap().1;
        Sa {
            spi,
            alg,
            key: key(len, spi),
        }
    }

    fn key_file(&self, dir: &Path) -> PathBuf {
        let p = dir.join(format!("{:x}-{}.hex", self.spi, self.alg));
        common::write_secret(&p, format!("{}\n", hex(&self.key)));
        p
    }

    fn toml(&self, dir: &Path, dir_: &str) -> String {
        format!(
            "\n[[tunnel.sa]]\ndirection = \"{dir_}\"\nspi = {:#x}\nalgorithm = \"{}\"\nkey_file = \"{}\"\nesn = false\n",
            self.spi,
            self.alg,
            self.key_file(dir).display()
        )
    }
}

/// Gateway `side`'s configuration: `out` and `ins` SAs, remote outer
/// address `remote` (the NAT's for NAT-T tests).
fn config(t: &Topo, side: usize, out: &Sa, ins: &[&Sa], extra_tunnel: &str, sock: &str) -> String {
    let (lan, lan4, lan6) = if side == 0 {
        ("a-lan", "10.1.0.1/24", "fd01::1/64")
    } else {
        ("b-lan", "10.2.0.1/24", "fd02::1/64")
    };
    let wan = if side == 0 { "a-wan" } else { "b-wan" };
    let plen = if t.v6_outer { 64 } else { 24 };
    let (t4, t6) = if side == 0 {
        ("10.2.0.0/24", "fd02::/64")
    } else {
        ("10.1.0.0/24", "fd01::/64")
    };
    let mut s = format!(
        r#"[gateway]
name = "g{side}"
workers = 2
api = "unix:{sock}"

[[interface]]
name = "lan"
host = "{lan}"
driver = "af_packet"
addresses = ["{lan4}", "{lan6}"]
vrf = "blue"

[[interface]]
name = "wan"
host = "{wan}"
driver = "af_packet"
addresses = ["{}/{plen}"]

[[tunnel]]
name = "esp0"
kind = "ipsec"
local = "{}"
remote = "{}"
vrf = "blue"
traffic = ["{t4}", "{t6}"]
{extra_tunnel}"#,
        outer(t.v6_outer, side),
        outer(t.v6_outer, side),
        outer(t.v6_outer, 1 - side),
    );
    s += &out.toml(&t.dir.0, "out");
    for i in ins {
        s += &i.toml(&t.dir.0, "in");
    }
    s
}

fn sock(tag: &str) -> String {
    std::env::temp_dir()
        .join(format!("{}.sock", unique(tag)))
        .display()
        .to_string()
}

/// Both gateways (stopped on drop) and gwB's API socket.
struct Pair {
    _a: Gateway,
    _b: Gateway,
    sock_b: String,
}

fn start(t: &Topo, ab: &Sa, ba: &Sa) -> Pair {
    let (sa, sb) = (sock("a"), sock("b"));
    let b = Gateway::start(&t.gb, &config(t, 1, ba, &[ab], "", &sb));
    let a = Gateway::start(&t.ga, &config(t, 0, ab, &[ba], "", &sa));
    Pair {
        _a: a,
        _b: b,
        sock_b: sb,
    }
}

fn ping(ns: &Netns, args: &str) -> (bool, String) {
    let out = ns.try_sh(&format!("ping {args}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
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
c.settimeout(60)
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
pace = float(sys.argv[3]) if len(sys.argv) > 3 else 0
d = os.urandom(n)
for i in range(100):
    try:
        s = socket.create_connection((addr, 7000), timeout=30)
        break
    except ConnectionRefusedError:
        time.sleep(0.1)
if pace:
    # Spread the transfer over time (for a switch in the middle of it).
    step = 64 << 10
    for i in range(0, n, step):
        s.sendall(d[i:i + step])
        time.sleep(pace)
else:
    # A deadline per MiB (the socket timeout bounds each sendall as a
    # whole), not for the whole transfer: a loaded machine may be slow, but
    # a transfer that stops moving still fails.
    s.settimeout(60)
    for off in range(0, n, 1 << 20):
        s.sendall(d[off:off + (1 << 20)])
s.close()
print(hashlib.sha256(d).hexdigest(), len(d))
"#;

fn write_script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Byte-exact TCP transfer from `from` to `to_addr` (in `to`); `during`
/// runs while the transfer is in progress.
fn tcp_transfer(
    t: &Topo,
    from: &Netns,
    to: &Netns,
    to_addr: &str,
    bytes: usize,
    pace: f64,
    during: impl FnOnce(),
) {
    let rxs = write_script(&t.dir.0, "rx.py", TCP_RX);
    let txs = write_script(&t.dir.0, "tx.py", TCP_TX);
    let rx = to.spawn(&format!("python3 {} {to_addr}", rxs.display()));
    let tx = from.spawn(&format!(
        "python3 {} {to_addr} {bytes} {pace}",
        txs.display()
    ));
    during();
    let sent = tx.wait_with_output().unwrap();
    let out = rx.wait_with_output().unwrap();
    let sent = String::from_utf8_lossy(&sent.stdout).into_owned();
    let got = String::from_utf8_lossy(&out.stdout);
    assert!(!sent.trim().is_empty(), "sender failed");
    assert_eq!(
        got.trim(),
        sent.trim(),
        "receiver saw different bytes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// tcpdump into a pcap file kept at `path`; stop with [`Capture::stop`]
/// (started and stopped without fixed sleeps: see [`common::Capture`]).
struct Capture {
    cap: common::Capture,
    path: PathBuf,
}

impl Capture {
    fn start(ns: &Netns, iface: &str, path: PathBuf, filter: &str) -> Capture {
        Capture {
            cap: common::Capture::start_filtered(ns, iface, filter),
            path,
        }
    }

    fn stop(mut self) -> PathBuf {
        std::fs::copy(self.cap.stop(), &self.path).expect("copy the capture");
        self.path.clone()
    }
}

/// scapy judge: every IP packet of the capture is ESP (raw or UDP 4500,
/// apart from neighbour discovery), each decrypts with the SA of its SPI
/// (ICV / tag verified by scapy) into an inner packet between the hosts.
/// Prints "esp=N decrypted=M inner=P" or fails.
const SCAPY_JUDGE: &str = r#"
import sys, json
from scapy.all import rdpcap, Ether, IP, IPv6, UDP, ARP
from scapy.layers.ipsec import ESP, SecurityAssociation
ALGS = {
    "aes128gcm16": ("AES-GCM", 20, None),
    "aes256gcm16": ("AES-GCM", 36, None),
    "chacha20poly1305": ("CHACHA20-POLY1305", 36, None),
    "aes128-sha1": ("AES-CBC", 16, "HMAC-SHA1-96"),
    "aes256-sha256": ("AES-CBC", 32, "SHA2-256-128"),
}
job = json.load(open(sys.argv[1]))
sas = {}
for s in job["sas"]:
    crypt, klen, auth = ALGS[s["alg"]]
    key = bytes.fromhex(s["key"])
    kw = dict(spi=s["spi"], crypt_algo=crypt, crypt_key=key[:klen])
    if crypt != "AES-CBC":
        kw["crypt_icv_size"] = 16
    if auth:
        kw["auth_algo"] = auth
        kw["auth_key"] = key[klen:]
    sas[s["spi"]] = SecurityAssociation(ESP, **kw)
hosts = set(job["hosts"])
n_esp = n_dec = n_inner = 0
for f in rdpcap(sys.argv[2]):
    if ARP in f:
        continue
    ip = f[IPv6] if IPv6 in f else f[IP]
    nh = ip.nh if IPv6 in f else ip.proto
    if nh == 58 and ip.payload.type in (133, 134, 135, 136):
        continue
    # The namespace kernel's own link chatter (MLD, ...): never tenant traffic.
    if IPv6 in f and (ip.dst.startswith("ff") or ip.src == "::" or ip.src.startswith("fe80")):
        continue
    if UDP in f and f[UDP].dport == 4500:
        raw = bytes(f[UDP].payload)
        assert raw[:4] != b"\0\0\0\0" and len(raw) > 1, "non-ESP on 4500: " + f.summary()
        esp = ESP(raw)
        pkt = ip.__class__(src=ip.src, dst=ip.dst) / esp
    else:
        assert nh == 50, "cleartext on the underlay: " + f.summary()
        pkt = ip.__class__(bytes(ip))
    n_esp += 1
    if n_dec >= job["max"]:
        continue
    spi = pkt[ESP].spi
    d = sas[spi].decrypt(pkt)
    # Without a tunnel_header scapy keeps the outer header: skip it.
    nxt = d.nh if IPv6 in d and d.version == 6 else d.proto
    inner = d.payload if nxt in (4, 41) else d
    n_dec += 1
    if inner.src in hosts and inner.dst in hosts:
        n_inner += 1
    else:
        raise SystemExit("inner %s -> %s not between the hosts" % (inner.src, inner.dst))
print("esp=%d decrypted=%d inner=%d" % (n_esp, n_dec, n_inner))
"#;

fn scapy_judge(t: &Topo, pcap: &Path, sas: &[&Sa], max: usize) -> (usize, usize) {
    let job = serde_json::json!({
        "sas": sas.iter().map(|s| serde_json::json!({"spi": s.spi, "alg": s.alg, "key": hex(&s.key)})).collect::<Vec<_>>(),
        "hosts": ["10.1.0.2", "10.2.0.2", "fd01::2", "fd02::2"],
        "max": max,
    });
    let jp = t.dir.0.join("job.json");
    std::fs::write(&jp, job.to_string()).unwrap();
    let sp = write_script(&t.dir.0, "judge.py", SCAPY_JUDGE);
    let out = Command::new(PY)
        .arg(&sp)
        .arg(&jp)
        .arg(pcap)
        .output()
        .expect("/usr/bin/python3 with python3-scapy is required");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "scapy judge failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nums: Vec<usize> = text
        .split_whitespace()
        .filter_map(|w| w.split('=').nth(1)?.parse().ok())
        .collect();
    assert_eq!(nums.len(), 3, "{text}");
    assert_eq!(nums[1], nums[2], "{text}");
    (nums[0], nums[1])
}

/// tshark decrypts the capture with the configured keys; returns the
/// inner (src, dst, icv_good) of each ESP packet. ChaCha20-Poly1305 is not
/// in tshark 4.0's ESP table.
fn tshark_judge(pcap: &Path, sas: &[&Sa], v6_outer: bool) -> Vec<(String, String, String)> {
    let mut args: Vec<String> = vec![
        "-n".into(),
        "-o".into(),
        "esp.enable_encryption_decode:TRUE".into(),
        "-o".into(),
        "esp.enable_authentication_check:TRUE".into(),
        "-o".into(),
        "udp.try_heuristic_first:FALSE".into(),
    ];
    for s in sas {
        let (enc, auth, ek) = match s.alg {
            "aes128gcm16" => ("AES-GCM with 16 octet ICV [RFC4106]", "NULL", 20),
            "aes256gcm16" => ("AES-GCM with 16 octet ICV [RFC4106]", "NULL", 36),
            "aes128-sha1" => ("AES-CBC [RFC3602]", "HMAC-SHA-1-96 [RFC2404]", 16),
            "aes256-sha256" => ("AES-CBC [RFC3602]", "HMAC-SHA-256-128 [RFC4868]", 32),
            other => panic!("tshark has no {other}"),
        };
        let ak = if ek < s.key.len() {
            format!("0x{}", hex(&s.key[ek..]))
        } else {
            String::new()
        };
        args.push("-o".into());
        args.push(format!(
            "uat:esp_sa:\"{}\",\"*\",\"*\",\"0x{:08x}\",\"{enc}\",\"0x{}\",\"{auth}\",\"{ak}\"",
            if v6_outer { "IPv6" } else { "IPv4" },
            s.spi,
            hex(&s.key[..ek])
        ));
    }
    let out = Command::new("tshark")
        .args(&args)
        .arg("-r")
        .arg(pcap)
        .args([
            "-Y",
            "esp",
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-E",
            "occurrence=l",
        ])
        .args([
            "-e", "ip.src", "-e", "ip.dst", "-e", "ipv6.src", "-e", "ipv6.dst",
        ])
        .args([
            "-e",
            "esp.icv_good",
            "-e",
            "ip.version",
            "-e",
            "ipv6.version",
        ])
        .output()
        .expect("tshark must be installed");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            // The last occurrence of ip.src / ipv6.src is the inner header
            // once tshark decrypted; with mixed families the inner header
            // is the only one of its family.
            let has = |k: usize| f.get(k).is_some_and(|v| !v.is_empty());
            let inner_v6 = if v6_outer { !has(0) } else { has(2) };
            let (s, d) = if inner_v6 { (f[2], f[3]) } else { (f[0], f[1]) };
            (
                s.to_string(),
                d.to_string(),
                f.get(4).unwrap_or(&"").to_string(),
            )
        })
        .collect()
}

/// Counters of a gateway by (node, reason), through the CLI / API.
fn errors(sock: &str) -> Vec<(String, String, u64)> {
    let out = Command::new(common::vecgate_bin())
        .args(["show", "errors", "--json", "--api", &format!("unix:{sock}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "vecgate show errors: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["node"].as_str().unwrap_or("").to_string(),
                e["reason"].as_str().unwrap_or("").to_string(),
                e["count"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// Packets an SA of the gateway behind `sock` has carried (`show sa`).
fn sa_packets(sock: &str, spi: u32, direction: &str) -> u64 {
    let out = Command::new(common::vecgate_bin())
        .args(["show", "sa", "--json", "--api", &format!("unix:{sock}")])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v.as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["spi"] == format!("{spi:#010x}") && s["direction"] == direction)
        .filter_map(|s| s["packets"].as_u64())
        .sum()
}

fn count(errs: &[(String, String, u64)], node: &str, reason: &str) -> u64 {
    errs.iter()
        .filter(|(n, r, _)| n == node && r == reason)
        .map(|(_, _, c)| *c)
        .sum()
}

fn pings_and_tcp(t: &Topo, alg: &'static str, judge: bool) {
    let ab = Sa::new(SPI_AB, alg);
    let ba = Sa::new(SPI_BA, alg);
    let p = start(t, &ab, &ba);
    let cap = Capture::start(
        &t.gb,
        "b-wan",
        t.dir.0.join(format!("{alg}.pcap")),
        "not arp",
    );
    let what = format!("{alg} v6_outer={}", t.v6_outer);
    // Warm-up resolves the underlay neighbours.
    common::warm_up(&t.h1, "10.2.0.2");
    let (ok, out) = ping(&t.h1, "-c 3 -i 0.2 -W 2 10.2.0.2");
    assert!(ok, "{what}: ping v4: {out}");
    assert!(out.contains("ttl=62"), "{what}: one hop per gateway: {out}");
    let (ok, out) = ping(&t.h1, "-6 -c 3 -i 0.2 -W 2 fd02::2");
    assert!(ok, "{what}: ping v6: {out}");
    let (ok, out) = ping(&t.h2, "-c 2 -i 0.2 -s 1400 -W 2 10.1.0.2");
    assert!(ok, "{what}: ping back, 1400 bytes: {out}");
    tcp_transfer(t, &t.h1, &t.h2, "10.2.0.2", 2 << 20, 0.0, || {});
    tcp_transfer(t, &t.h2, &t.h1, "fd01::2", 1 << 20, 0.0, || {});
    let pcap = cap.stop();
    let errs = errors(&p.sock_b);
    assert!(
        count(&errs, "esp-decrypt", "decrypted") > 100,
        "{what}: {errs:?}"
    );
    for bad in ["icv-fail", "replay", "bad-spi", "policy-mismatch"] {
        assert_eq!(
            count(&errs, "esp-decrypt", bad),
            0,
            "{what}: {bad}: {errs:?}"
        );
    }
    if !judge {
        return;
    }
    let (n_esp, n_dec) = scapy_judge(t, &pcap, &[&ab, &ba], 400);
    assert!(
        n_esp > 100 && n_dec > 10,
        "{what}: esp {n_esp} decrypted {n_dec}"
    );
    if alg != "chacha20poly1305" {
        let lines = tshark_judge(&pcap, &[&ab, &ba], t.v6_outer);
        assert!(lines.len() > 100, "{what}: {} ESP packets", lines.len());
        let hosts = ["10.1.0.2", "10.2.0.2", "fd01::2", "fd02::2"];
        for (s, d, icv) in &lines {
            assert!(
                hosts.contains(&s.as_str()) && hosts.contains(&d.as_str()),
                "{what}: tshark did not decrypt: {s} -> {d}"
            );
            if alg.contains("sha") {
                assert_eq!(icv, "1", "{what}: tshark: ICV not good");
            }
        }
    }
    drop(p);
}

#[test]
fn every_algorithm_over_ipv4_underlay() {
    let t = topo(false);
    for (alg, _) in ALGS {
        pings_and_tcp(&t, alg, true);
    }
}

#[test]
fn every_algorithm_over_ipv6_underlay() {
    let t = topo(true);
    for (alg, _) in ALGS {
        pings_and_tcp(&t, alg, alg == "aes128gcm16" || alg == "aes128-sha1");
    }
}

/// scapy encrypts with the A→B SA; the packets enter gwB's underlay from
/// gwA's namespace. Echo requests to h2 come out; then the same packet
/// again (replay), a truncated one, a wrong SPI and a bit flip: all
/// dropped, counted by reason, and h2 sees none of them.
const SCAPY_INJECT: &str = r#"
import sys, json, time
from scapy.all import Ether, IP, ICMP, Raw, sendp, get_if_hwaddr
from scapy.layers.ipsec import ESP, SecurityAssociation
j = json.load(open(sys.argv[1]))
key = bytes.fromhex(j["key"])
sa = SecurityAssociation(ESP, spi=j["spi"], crypt_algo="AES-GCM", crypt_key=key, crypt_icv_size=16,
                         tunnel_header=IP(src=j["local"], dst=j["remote"]))
eth = Ether(src=get_if_hwaddr(j["iface"]), dst=j["dst_mac"])
def enc(seq, ident):
    inner = IP(src="10.1.0.2", dst="10.2.0.2", ttl=64) / ICMP(id=ident, seq=seq & 0xffff) / Raw(b"scapy-esp" * 8)
    return sa.encrypt(inner, seq_num=seq)
good = [enc(100000 + i, 0x5ca0 + i) for i in range(3)]
for p in good:
    sendp(eth / p, iface=j["iface"], verbose=False)
time.sleep(0.5)
if j["bad"]:
    raw = bytes(good[0])
    sendp(eth / IP(raw), iface=j["iface"], verbose=False)                 # replay
    t = bytearray(raw[:20 + 8 + 8 + 4]); t[2:4] = len(t).to_bytes(2, "big")
    tp = IP(bytes(t)); del tp.chksum
    sendp(eth / tp, iface=j["iface"], verbose=False)                      # truncated
    w = enc(100010, 0x5cb1); w[ESP].spi = 0xdead0001
    sendp(eth / w, iface=j["iface"], verbose=False)                       # wrong SPI
    f = bytearray(bytes(enc(100011, 0x5cb2))); f[-20] ^= 1
    sendp(eth / IP(bytes(f)), iface=j["iface"], verbose=False)            # bit flip
print("sent")
"#;

#[test]
fn scapy_packets_forwarded_and_bad_ones_dropped_by_reason() {
    let t = topo(false);
    let ab = Sa::new(SPI_AB, "aes128gcm16");
    let ba = Sa::new(SPI_BA, "aes128gcm16");
    let p = start(&t, &ab, &ba);
    common::warm_up(&t.h1, "10.2.0.2");
    assert!(ping(&t.h1, "-c 2 -i 0.2 -W 2 10.2.0.2").0, "tunnel up");
    let b_mac =
        t.gb.sh("cat /sys/class/net/b-wan/address")
            .trim()
            .to_string();
    let cap = Capture::start(&t.h2, "eth0", t.dir.0.join("h2.pcap"), "icmp");
    let job = serde_json::json!({
        "key": hex(&ab.key), "spi": ab.spi, "local": "192.0.2.1", "remote": "192.0.2.2",
        "iface": "a-wan", "dst_mac": b_mac, "bad": true,
    });
    let jp = t.dir.0.join("inject.json");
    std::fs::write(&jp, job.to_string()).unwrap();
    let sp = write_script(&t.dir.0, "inject.py", SCAPY_INJECT);
    let out =
        t.ga.try_sh(&format!("{PY} {} {}", sp.display(), jp.display()));
    assert!(
        out.status.success(),
        "scapy inject: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // gwB has handled everything once the bad packets, sent last, are
    // counted (however long a loaded machine takes); the capture then
    // waits for tcpdump to have written what reached h2.
    let bad = ["replay", "truncated", "bad-spi", "icv-fail"];
    assert!(
        wait_until(20, || {
            let errs = errors(&p.sock_b);
            bad.iter().all(|r| count(&errs, "esp-decrypt", r) >= 1)
        }),
        "the bad packets were not counted: {:?}",
        errors(&p.sock_b)
    );
    let pcap = cap.stop();
    // What reached h2: the three good echo requests (ids 0x5ca0..2), nothing else.
    let seen = sh(&format!(
        "tshark -n -r {} -Y 'icmp.type == 8' -T fields -e icmp.ident",
        pcap.display()
    ));
    let mut ids: Vec<u64> = seen.lines().filter_map(|l| l.trim().parse().ok()).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![0x5ca0, 0x5ca1, 0x5ca2], "h2 saw: {seen}");
    let errs = errors(&p.sock_b);
    for r in ["replay", "truncated", "bad-spi", "icv-fail"] {
        assert_eq!(count(&errs, "esp-decrypt", r), 1, "{r}: {errs:?}");
    }
    // `show sa`: SPIs and algorithms, never key material.
    let out = Command::new(common::vecgate_bin())
        .args([
            "show",
            "sa",
            "--json",
            "--api",
            &format!("unix:{}", p.sock_b),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("0x00001001") && text.contains("0x00002001"),
        "{text}"
    );
    assert!(text.contains("aes-gcm-128"), "{text}");
    for k in [&ab.key, &ba.key] {
        assert!(
            !text.contains(&hex(&k[..8])),
            "key material in show sa: {text}"
        );
    }
}

/// Rewrites a gateway's configuration and asks it to apply its SAs
/// (SIGHUP: new inbound SAs are installed, a changed outbound SA is
/// switched to, inbound SAs gone from the file are removed).
fn reconfigure(gw: &Gateway, text: &str, want_log: &str) {
    gw.rewrite_config(text);
    sh(&format!("kill -HUP {}", gw.pid()));
    assert!(
        wait_until(10, || gw.log_contains(want_log)),
        "no \"{want_log}\" in the log:\n{}",
        gw.log_text()
    );
}

#[test]
fn make_before_break_switch_during_tcp_transfer() {
    let t = topo(false);
    let ab = Sa::new(SPI_AB, "aes256gcm16");
    let ba = Sa::new(SPI_BA, "aes256gcm16");
    let ab2 = Sa::new(SPI_AB + 0x100, "aes256gcm16");
    let ba2 = Sa::new(SPI_BA + 0x100, "aes256gcm16");
    let (sa, sb) = (sock("a"), sock("b"));
    let b = Gateway::start(&t.gb, &config(&t, 1, &ba, &[&ab], "", &sb));
    let a = Gateway::start(&t.ga, &config(&t, 0, &ab, &[&ba], "", &sa));
    common::warm_up(&t.h1, "10.2.0.2");
    assert!(ping(&t.h1, "-c 2 -i 0.2 -W 2 10.2.0.2").0);
    let cap = Capture::start(&t.gb, "b-wan", t.dir.0.join("switch.pcap"), "esp");
    let decrypted = || count(&errors(&sb), "esp-decrypt", "decrypted");
    let d0 = decrypted();
    tcp_transfer(&t, &t.h1, &t.h2, "10.2.0.2", 6 << 20, 0.05, || {
        // The transfer runs on the old SAs (however late a loaded machine
        // starts it).
        assert!(
            wait_until(30, || decrypted() > d0 + 50),
            "the transfer did not start"
        );
        // 1. Both install the new inbound SAs (old ones keep working).
        reconfigure(
            &b,
            &config(&t, 1, &ba, &[&ab, &ab2], "", &sb),
            "installed inbound SA 0x00001101",
        );
        reconfigure(
            &a,
            &config(&t, 0, &ab, &[&ba, &ba2], "", &sa),
            "installed inbound SA 0x00002101",
        );
        // 2. Both switch outbound.
        reconfigure(
            &a,
            &config(&t, 0, &ab2, &[&ba, &ba2], "", &sa),
            "switched outbound SA",
        );
        reconfigure(
            &b,
            &config(&t, 1, &ba2, &[&ab, &ab2], "", &sb),
            "switched outbound SA",
        );
        // The new SAs carry the transfer both ways before the old ones go;
        // then 1 s for what the old ones had in flight.
        assert!(
            wait_until(30, || sa_packets(&sb, SPI_AB + 0x100, "inbound") > 50
                && sa_packets(&sa, SPI_BA + 0x100, "inbound") > 10),
            "the new SAs carry nothing: {}",
            sh(&format!(
                "{} show sa --api unix:{sb}",
                common::vecgate_bin().display()
            ))
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
        // 3. The old inbound SAs go.
        reconfigure(
            &b,
            &config(&t, 1, &ba2, &[&ab2], "", &sb),
            "removed inbound SA 0x00001001",
        );
        reconfigure(
            &a,
            &config(&t, 0, &ab2, &[&ba2], "", &sa),
            "removed inbound SA 0x00002001",
        );
    });
    let pcap = cap.stop();
    let spis = sh(&format!(
        "tshark -n -r {} -T fields -e esp.spi | sort | uniq -c",
        pcap.display()
    ));
    assert!(
        spis.contains("0x00001001") && spis.contains("0x00001101"),
        "{spis}"
    );
    let errs = errors(&sb);
    assert_eq!(count(&errs, "esp-decrypt", "bad-spi"), 0, "{errs:?}");
    assert_eq!(count(&errs, "esp-decrypt", "icv-fail"), 0, "{errs:?}");
    // Both old and new SA carried traffic, as the capture shows.
    let (n_esp, n_dec) = scapy_judge(&t, &pcap, &[&ab, &ba, &ab2, &ba2], 2000);
    assert!(n_esp >= n_dec && n_dec > 100);
}

/// `vecgate reload` brings a static ESP tunnel in (its SAs keyed from
/// their files), registers it anew when its NAT-T setting changes, and
/// takes it out with its SAs; pings and the SA counters are the referees.
#[test]
fn reload_adds_rekeys_and_removes_an_esp_tunnel() {
    let t = topo(false);
    let ab = Sa::new(SPI_AB + 0x200, "aes128gcm16");
    let ba = Sa::new(SPI_BA + 0x200, "aes128gcm16");
    let (sa, sb) = (sock("a"), sock("b"));
    let full = |side: usize, extra: &str| {
        if side == 0 {
            config(&t, 0, &ab, &[&ba], extra, &sa)
        } else {
            config(&t, 1, &ba, &[&ab], extra, &sb)
        }
    };
    let bare = |c: String| c[..c.find("[[tunnel]]").unwrap()].to_string();
    let b = Gateway::start(&t.gb, &bare(full(1, "")));
    let a = Gateway::start(&t.ga, &bare(full(0, "")));
    assert!(
        !ping(&t.h1, "-c 1 -W 1 10.2.0.2").0,
        "reachable without a tunnel"
    );

    // Added: both ends, then traffic flows through the new SAs.
    for (gw, side) in [(&b, 1), (&a, 0)] {
        let (ok, o) = gw.reload(&full(side, ""));
        assert!(ok && o.contains("+ tunnel esp0: ipsec"), "{o}");
        assert!(o.contains("tunnel esp0: registered"), "{o}");
    }
    common::warm_up(&t.h1, "10.2.0.2");
    let n0 = sa_packets(&sb, ab.spi, "inbound");
    assert!(ping(&t.h1, "-c 3 -i 0.2 -W 2 10.2.0.2").0);
    assert!(sa_packets(&sb, ab.spi, "inbound") >= n0 + 3);

    // Changed: NAT-T on registers the tunnel's SAs anew (same keys, their
    // sequence numbers resumed from the state directory).
    for (gw, side) in [(&b, 1), (&a, 0)] {
        let (ok, o) = gw.reload(&full(side, "nat_t = true\n"));
        assert!(ok && o.contains("nat_t: false → true"), "{o}");
        assert!(o.contains("registered anew"), "{o}");
    }
    common::warm_up(&t.h1, "10.2.0.2");
    let n1 = sa_packets(&sb, ab.spi, "inbound");
    assert!(ping(&t.h1, "-c 3 -i 0.2 -W 2 10.2.0.2").0);
    assert!(sa_packets(&sb, ab.spi, "inbound") >= n1 + 3);

    // Removed: no route, no SA left.
    for (gw, side) in [(&a, 0), (&b, 1)] {
        let (ok, o) = gw.reload(&bare(full(side, "")));
        assert!(ok && o.contains("- tunnel esp0: ipsec"), "{o}");
    }
    assert!(!ping(&t.h1, "-c 2 -i 0.2 -W 1 10.2.0.2").0);
    for s in [&sa, &sb] {
        let out = Command::new(common::vecgate_bin())
            .args(["show", "sa", "--json", "--api", &format!("unix:{s}")])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v.as_array().map(Vec::len), Some(0), "{v}");
    }
}
