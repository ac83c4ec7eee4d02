//! Interop: NVGRE (RFC 7637) judged by scapy, an implementation
//! nobody on the team wrote.
//!
//!   hb (blue, 10.1.0.2) ─┐
//!                        ├─ gw [vecgate: NVGRE VSID 5000 → blue, 6000 → red]
//!   hr (red,  10.1.0.2) ─┘      ══ 192.168.103.0/24 ══ pe [scapy on `ul`]
//!
//! Both tenants use the same prefixes. scapy plays the remote NVGRE
//! endpoint (overlay address 10.9.0.2 in both tenants): it resolves
//! vecgate's overlay address with ARP inside NVGRE, then injects UDP
//! datagrams in NVGRE frames with a FlowID (key = VSID << 8 | FlowID,
//! protocol 0x6558, inner Ethernet/IPv4) for each VSID and for an unknown
//! one. The host of the right tenant must get exactly its datagrams, the
//! other host none of them. Then the hosts send flows back; scapy parses
//! vecgate's frames: key present, no checksum/sequence (RFC 7637 §3.2),
//! TEB, the tenant's VSID, one FlowID per flow and different FlowIDs for
//! different flows (§4: entropy from the inner flow).

mod common;

use common::{veth, wait_until, Gateway, Netns};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::Duration;

const VSID_BLUE: u32 = 5000;
const VSID_RED: u32 = 6000;

fn config() -> String {
    format!(
        r#"[gateway]
name = "nvs"
workers = 1
api = "unix:/tmp/vecgate-nvs-{pid}.sock"

[[interface]]
name = "lanb"
host = "lanb"
driver = "af_packet"
addresses = ["10.1.0.1/24"]
vrf = "blue"

[[interface]]
name = "lanr"
host = "lanr"
driver = "af_packet"
addresses = ["10.1.0.1/24"]
vrf = "red"

[[interface]]
name = "wan"
host = "wan"
driver = "af_packet"
addresses = ["192.168.103.1/24"]

[[tunnel]]
name = "nvb"
kind = "nvgre"
key = {VSID_BLUE}
local = "192.168.103.1"
remote = "192.168.103.2"
vrf = "blue"
addresses = ["10.9.0.1/24"]

[[tunnel]]
name = "nvr"
kind = "nvgre"
key = {VSID_RED}
local = "192.168.103.1"
remote = "192.168.103.2"
vrf = "red"
addresses = ["10.9.0.1/24"]
"#,
        pid = std::process::id()
    )
}

/// The remote NVGRE endpoint in scapy. `run GW_MAC STOPFILE`: sniffs GRE on
/// `ul` (answering ARP for 10.9.0.2 inside NVGRE), resolves vecgate's
/// overlay MAC per VSID, injects the datagrams, prints `READY {json}`, then
/// sniffs until STOPFILE exists and prints `FRAMES [json]`: every NVGRE
/// frame vecgate sent, parsed.
const SCAPY: &str = r#"
import json, os, sys, time
from scapy.all import conf, sendp, AsyncSniffer, get_if_hwaddr
from scapy.layers.l2 import Ether, ARP, GRE
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw
conf.verb = 0
IFACE, LOCAL, GW = "ul", "192.168.103.2", "192.168.103.1"
PEER_MAC, PEER_IP, GW_IP = "02:00:00:00:99:02", "10.9.0.2", "10.9.0.1"
gw_mac, stop = sys.argv[2], sys.argv[3]
VSIDS = {"blue": 5000, "red": 6000}
my_mac = get_if_hwaddr(IFACE)

def nvgre(vsid, flow, inner):
    return (Ether(dst=gw_mac, src=my_mac) / IP(src=LOCAL, dst=GW) /
            GRE(key_present=1, key=(vsid << 8) | flow, proto=0x6558) / inner)

def parse(p):
    if GRE not in p or IP not in p or p[IP].src != GW:
        return None
    g = p[GRE]
    d = {"key_present": int(g.key_present), "csum": int(g.chksum_present),
         "seq": int(g.seqnum_present), "proto": int(g.proto),
         "vsid": (g.key or 0) >> 8, "flow": (g.key or 0) & 0xff}
    inner = g.payload
    if isinstance(inner, Ether):
        d["dst_mac"] = inner.dst
        if ARP in inner:
            a = inner[ARP]
            d.update(arp=int(a.op), hwsrc=a.hwsrc, psrc=a.psrc, pdst=a.pdst)
        elif UDP in inner:
            d.update(src=inner[IP].src, dst=inner[IP].dst, sport=inner[UDP].sport,
                     dport=inner[UDP].dport, payload=bytes(inner[UDP].payload).decode("latin-1"))
    return d

seen = []

def on_packet(p):
    # AsyncSniffer fills `results` only when stopped: keep our own list.
    seen.append(p)
    # Answer vecgate's ARP requests for our overlay address, in the VSID
    # they came in.
    d = parse(p)
    if d and d.get("arp") == 1 and d.get("pdst") == PEER_IP:
        sendp(nvgre(d["vsid"], 0, Ether(dst=d["hwsrc"], src=PEER_MAC) /
                    ARP(op=2, hwsrc=PEER_MAC, psrc=PEER_IP, hwdst=d["hwsrc"], pdst=d["psrc"])),
              iface=IFACE)

sn = AsyncSniffer(iface=IFACE, filter="ip proto 47", store=False, prn=on_packet)
sn.start()
time.sleep(1.0)

# vecgate's overlay MAC per tenant: ARP for 10.9.0.1 inside NVGRE.
macs, arp_vsids = {}, {}
for name, vsid in VSIDS.items():
    for attempt in range(20):
        sendp(nvgre(vsid, 0x11, Ether(dst="ff:ff:ff:ff:ff:ff", src=PEER_MAC) /
                    ARP(op=1, hwsrc=PEER_MAC, psrc=PEER_IP, pdst=GW_IP)), iface=IFACE)
        time.sleep(0.5)
        replies = [d for d in map(parse, list(seen)) if d and d.get("arp") == 2
                   and d.get("psrc") == GW_IP and d.get("vsid") == vsid]
        if replies:
            macs[name] = replies[0]["hwsrc"]
            arp_vsids[name] = sorted({r["vsid"] for r in replies})
            break
if len(macs) != 2:
    print("NOARP", json.dumps([parse(p) for p in list(seen)]), flush=True)
    sn.stop()
    sys.exit(1)

# The datagrams, several FlowIDs per tenant, and one for an unknown VSID
# (addressed like blue's: it must reach nobody).
for name, vsid in VSIDS.items():
    for i in range(5):
        inner = (Ether(dst=macs[name], src=PEER_MAC) / IP(src=PEER_IP, dst="10.1.0.2") /
                 UDP(sport=40000 + i, dport=9000) / Raw(f"{name}-{i}".encode()))
        sendp(nvgre(vsid, 0x40 + 37 * i, inner), iface=IFACE)
inner = (Ether(dst=macs["blue"], src=PEER_MAC) / IP(src=PEER_IP, dst="10.1.0.2") /
         UDP(sport=40100, dport=9000) / Raw(b"nobody-7000"))
sendp(nvgre(7000, 0x99, inner), iface=IFACE)
print("READY", json.dumps({"macs": macs, "arp_vsids": arp_vsids}), flush=True)

deadline = time.time() + 90
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.1)
# Stopped once nothing new came for a second (not after a fixed 0.5 s: a
# loaded machine may forward or sniff the last frames late).
last = -1
while len(seen) != last and time.time() < deadline:
    last = len(seen)
    time.sleep(1.0)
sn.stop()
print("FRAMES", json.dumps([d for d in map(parse, list(seen)) if d]), flush=True)
"#;

/// UDP listener on a host: prints each datagram on port 9000 until STOPFILE.
const LISTEN: &str = r#"
import os, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 9000))
s.settimeout(0.2)
print("LISTENING", flush=True)
while not os.path.exists(sys.argv[1]):
    try:
        d, a = s.recvfrom(2048)
        print(d.decode("latin-1"), a[0], flush=True)
    except socket.timeout:
        pass
"#;

/// A host sending one datagram per flow (source ports 41000..41015) to
/// the scapy endpoint, each flow twice, after a warm-up datagram.
const SEND: &str = r#"
import socket, sys, time
tag = sys.argv[1]
w = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
w.sendto(b"warmup", ("10.9.0.2", 9999))
time.sleep(1.5)
socks = []
for k in range(16):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 41000 + k))
    socks.append(s)
for rep in range(2):
    for k, s in enumerate(socks):
        s.sendto(f"{tag}-flow-{k}".encode(), ("10.9.0.2", 9999))
    time.sleep(0.3)
"#;

fn write_script(tag: &str, body: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("{}.py", common::unique(tag)));
    std::fs::write(&p, body).unwrap();
    p
}

/// Removes the temporary files on drop, also when the test fails.
struct Files(Vec<PathBuf>);

impl Drop for Files {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Reads lines of `child`'s stdout on a thread, so a stuck child cannot
/// hang the test; returns the receiving end.
fn lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line starting with `prefix` within `secs`, without it.
fn expect_line(rx: &std::sync::mpsc::Receiver<String>, prefix: &str, secs: u64) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if l.starts_with(prefix) => return l[prefix.len()..].trim().to_string(),
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    panic!("no {prefix} line within {secs} s; got: {seen:?}");
}

fn drain(rx: &std::sync::mpsc::Receiver<String>) -> Vec<String> {
    let mut v = Vec::new();
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(5)) {
        v.push(l);
    }
    v
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("bad JSON from scapy ({e}): {s}"))
}

#[test]
fn nvgre_frames_crafted_and_parsed_by_scapy() {
    common::require_python3("scapy.all, scapy.layers.l2", "python3-scapy");
    let hb = Netns::new("nhb");
    let hr = Netns::new("nhr");
    let gw = Netns::new("ngw");
    let pe = Netns::new("npe");
    veth(&hb, "eth0", &gw, "lanb");
    veth(&hr, "eth0", &gw, "lanr");
    veth(&gw, "wan", &pe, "ul");
    for h in [&hb, &hr] {
        h.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    }
    pe.sh("ip addr add 192.168.103.2/24 dev ul");
    // The peer kernel has no GRE: keep it from answering vecgate's GRE
    // with ICMP protocol-unreachable (noise, not part of the test).
    pe.sh("nft add table inet t && nft add chain inet t in '{ type filter hook input priority 0; policy accept; }' && nft add rule inet t in ip protocol gre drop");
    let _g = Gateway::start(&gw, &config());
    assert!(
        wait_until(20, || pe
            .try_sh("ping -c1 -W1 192.168.103.1")
            .status
            .success()),
        "underlay ping"
    );
    let neigh = pe.sh("ip neigh show 192.168.103.1");
    let gw_mac = neigh
        .split_whitespace()
        .skip_while(|w| *w != "lladdr")
        .nth(1)
        .unwrap_or_else(|| panic!("no MAC for vecgate's wan: {neigh}"))
        .to_string();

    let stop = std::env::temp_dir().join(common::unique("nvstop"));
    let scapy = write_script("nvs", SCAPY);
    let listen = write_script("nvl", LISTEN);
    let send = write_script("nvt", SEND);
    let _files = Files(vec![
        stop.clone(),
        scapy.clone(),
        listen.clone(),
        send.clone(),
    ]);

    let mut lb = hb.spawn(&format!("python3 {} {}", listen.display(), stop.display()));
    let mut lr = hr.spawn(&format!("python3 {} {}", listen.display(), stop.display()));
    let (rb, rr) = (lines(&mut lb), lines(&mut lr));
    expect_line(&rb, "LISTENING", 20);
    expect_line(&rr, "LISTENING", 20);

    let mut sc = pe.spawn(&format!(
        "/usr/bin/python3 {} run {gw_mac} {}",
        scapy.display(),
        stop.display()
    ));
    let rs = lines(&mut sc);
    let ready = json(&expect_line(&rs, "READY", 60));
    // vecgate answered ARP inside NVGRE, in the VSID it was asked in.
    for (name, vsid) in [("blue", VSID_BLUE), ("red", VSID_RED)] {
        assert_eq!(
            ready["arp_vsids"][name],
            serde_json::json!([vsid]),
            "{ready}"
        );
    }
    // vecgate resolved the scapy endpoint in both tenants (ARP inside
    // NVGRE, answered by scapy) before the flows are sent: a fixed warm-up
    // in SEND may be too short on a loaded machine.
    let sock = format!("/tmp/vecgate-nvs-{}.sock", std::process::id());
    let warmup = "python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\\\"warmup\\\", (\\\"10.9.0.2\\\", 9999))\"";
    let mut neigh = serde_json::Value::Null;
    assert!(
        wait_until(30, || {
            hb.sh(warmup);
            hr.sh(warmup);
            let out = std::process::Command::new("curl")
                .args(["-s", "--unix-socket", &sock, "http://vecgate/neighbors"])
                .output()
                .expect("curl");
            neigh = serde_json::from_slice(&out.stdout).unwrap_or_default();
            // One entry per tenant's tunnel, listed under the tunnel's name.
            let resolved: Vec<&str> = neigh
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| {
                    n["address"] == "10.9.0.2"
                        && !["incomplete", "failed"].contains(&n["state"].as_str().unwrap_or(""))
                })
                .filter_map(|n| n["interface"].as_str())
                .collect();
            resolved.contains(&"nvb") && resolved.contains(&"nvr")
        }),
        "10.9.0.2 not resolved in both tenants: {neigh:#}"
    );
    // Flows from the hosts back to the scapy endpoint.
    hb.sh(&format!("python3 {} blue", send.display()));
    hr.sh(&format!("python3 {} red", send.display()));
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&stop, b"").unwrap();
    let frames = json(&expect_line(&rs, "FRAMES", 30));
    let _ = sc.wait();
    let _ = lb.wait();
    let _ = lr.wait();
    let got_b = drain(&rb);
    let got_r = drain(&rr);

    // Decapsulated into the right tenant only.
    let payloads = |v: &[String]| -> Vec<String> {
        let mut p: Vec<String> = v
            .iter()
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect();
        p.sort();
        p
    };
    let want = |t: &str| -> Vec<String> { (0..5).map(|i| format!("{t}-{i}")).collect() };
    assert_eq!(payloads(&got_b), want("blue"), "blue host: {got_b:?}");
    assert_eq!(payloads(&got_r), want("red"), "red host: {got_r:?}");
    assert!(
        got_b.iter().chain(&got_r).all(|l| l.ends_with(" 10.9.0.2")),
        "inner source kept"
    );

    // vecgate's own frames, parsed by scapy.
    let frames = frames.as_array().expect("frame list");
    let mut flows = std::collections::HashMap::new();
    for f in frames {
        assert_eq!(f["key_present"], 1, "NVGRE carries the key: {f}");
        assert_eq!(
            (f["csum"].as_u64(), f["seq"].as_u64()),
            (Some(0), Some(0)),
            "{f}"
        );
        assert_eq!(f["proto"], 0x6558, "TEB: {f}");
        let Some(p) = f["payload"].as_str() else {
            continue;
        };
        let Some((tenant, k)) = p.split_once("-flow-") else {
            continue;
        };
        let vsid = if tenant == "blue" {
            VSID_BLUE
        } else {
            VSID_RED
        };
        assert_eq!(f["vsid"], vsid, "{tenant}'s frames carry its VSID: {f}");
        assert_eq!(f["dst_mac"], "02:00:00:00:99:02", "{f}");
        let flow = f["flow"].as_u64().unwrap();
        let prev = flows.insert((tenant.to_string(), k.to_string()), flow);
        assert!(
            prev.is_none() || prev == Some(flow),
            "one FlowID per flow: {f}"
        );
    }
    for tenant in ["blue", "red"] {
        let ids: std::collections::HashSet<u64> = flows
            .iter()
            .filter(|((t, _), _)| t == tenant)
            .map(|(_, &id)| id)
            .collect();
        let n = flows.keys().filter(|(t, _)| t == tenant).count();
        assert_eq!(n, 16, "{tenant}: frames of all 16 flows captured");
        assert!(
            ids.len() >= 4,
            "{tenant}: 16 flows spread over only {} FlowIDs: {ids:?}",
            ids.len()
        );
    }
}
