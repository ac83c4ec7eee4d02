//! Live reload (`vecgate reload`, SIGHUP, `POST /config`) in namespaces.
//!
//! ```text
//!  h1 10.1.0.2 ── lan0 [vecgate] wan0 192.0.2.1 ──── 192.0.2.2 peer (kernel)
//!                 t1: VXLAN VNI 7,   10.20.0.1 ═══ vx-a 10.20.0.2 → 10.2.0.2 (lo)
//!                 t2: VXLAN VNI 8/9, 10.30.0.1 ═══ vx-b 10.30.0.2 → 10.3.0.2 (lo)
//! ```
//!
//! A paced TCP transfer from h1 to 10.2.0.2 runs through t1 (never in
//! any file's difference) while t2 and its route are added (`vecgate
//! reload`), changed (SIGHUP) and removed (`POST /config`). Referees, all
//! from the same run: the receiver's SHA-256 and byte count, a capture of
//! the transfer at the receiving end (tshark's TCP analysis: no segment
//! missing, and every retransmitted one had come through before), t1's
//! and the ports' drop counters, and pings through t2 with
//! the peer's VXLAN counters.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Topo {
    h1: Netns,
    gw: Netns,
    peer: Netns,
    lan: String,
    wan: String,
    dir: PathBuf,
}

impl Drop for Topo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn topo() -> Topo {
    let h1 = Netns::new("rh");
    let gw = Netns::new("rg");
    let peer = Netns::new("rp");
    let lan = unique("rl");
    let wan = unique("rw");
    veth(&h1, "eth0", &gw, &lan);
    veth(&peer, "eth0", &gw, &wan);
    h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip link set eth0 up && ip route add default via 10.1.0.1");
    peer.sh(
        "ip addr add 192.0.2.2/24 dev eth0 && ip link set eth0 up && \
         sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 && \
         ip addr add 10.2.0.2/32 dev lo && ip addr add 10.3.0.2/32 dev lo && \
         ip link add vx-a type vxlan id 7 local 192.0.2.2 remote 192.0.2.1 dstport 4789 && \
         ip addr add 10.20.0.2/24 dev vx-a && ip link set vx-a up && \
         ip route add 10.1.0.0/24 via 10.20.0.1",
    );
    let dir = std::env::temp_dir().join(unique("reload"));
    std::fs::create_dir_all(&dir).unwrap();
    Topo {
        h1,
        gw,
        peer,
        lan,
        wan,
        dir,
    }
}

/// The peer's end of t2 with VNI `key` (replacing any earlier one; the
/// same MAC, so the gateway's neighbour entry stays right).
fn peer_t2(t: &Topo, key: u32) {
    t.peer.sh(&format!(
        "ip link del vx-b 2>/dev/null; \
         ip link add vx-b address 02:00:00:00:30:02 type vxlan id {key} local 192.0.2.2 remote 192.0.2.1 dstport 4789 && \
         ip addr add 10.30.0.2/24 dev vx-b && ip link set vx-b up && \
         sysctl -qw net.ipv4.conf.vx-b.rp_filter=0"
    ));
}

/// The gateway's configuration: t1 and its route always; t2 with GRE key
/// `t2` and its route when given; `extra` appended.
fn config(t: &Topo, sock: &str, t2: Option<u32>, extra: &str) -> String {
    let mut c = format!(
        "[gateway]\nname = \"rl\"\napi = \"unix:{sock}\"\nstate_dir = \"{}/state\"\n\n\
         [[interface]]\nname = \"lan0\"\nhost = \"{}\"\ndriver = \"af_packet\"\naddresses = [\"10.1.0.1/24\"]\n\n\
         [[interface]]\nname = \"wan0\"\nhost = \"{}\"\ndriver = \"af_packet\"\naddresses = [\"192.0.2.1/24\"]\n\n\
         [[tunnel]]\nname = \"t1\"\nkind = \"vxlan\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\nkey = 7\naddresses = [\"10.20.0.1/24\"]\n\n",
        t.dir.display(),
        t.lan,
        t.wan
    );
    if let Some(k) = t2 {
        c.push_str(&format!(
            "[[tunnel]]\nname = \"t2\"\nkind = \"vxlan\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\nkey = {k}\naddresses = [\"10.30.0.1/24\"]\n\n"
        ));
    }
    c.push_str("[[route]]\nvrf = \"default\"\nprefix = \"10.2.0.0/24\"\nvia = \"10.20.0.2\"\n\n");
    if t2.is_some() {
        c.push_str(
            "[[route]]\nvrf = \"default\"\nprefix = \"10.3.0.0/24\"\nvia = \"10.30.0.2\"\n\n",
        );
    }
    c.push_str(extra);
    c
}

fn vecgate(gw: &Netns, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", &gw.name])
        .arg(vecgate_bin())
        .args(args)
        .output()
        .expect("run vecgate")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `vecgate reload --config FILE [args]`, FILE holding `cfg`.
fn reload(t: &Topo, file: &Path, cfg: &str, args: &[&str]) -> Output {
    std::fs::write(file, cfg).unwrap();
    let mut a = vec!["reload", "--config", file.to_str().unwrap()];
    a.extend_from_slice(args);
    vecgate(&t.gw, &a)
}

/// The running configuration (`GET /config`) and the API's view of
/// routes and tunnels (without counters).
fn state(sock: &str) -> (String, String) {
    let cfg = sh(&format!(
        "curl -sf --unix-socket {sock} http://vecgate/config"
    ));
    let routes = sh(&format!(
        "curl -sf --unix-socket {sock} http://vecgate/routes"
    ));
    (cfg, routes)
}

/// A tunnel's counter from `GET /tunnels`.
fn tunnel_counter(sock: &str, name: &str, key: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(&sh(&format!(
        "curl -sf --unix-socket {sock} http://vecgate/tunnels"
    )))
    .unwrap();
    v.as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == name))
        .and_then(|x| x[key].as_u64())
        .unwrap_or(0)
}

/// The peer's received-packet count on `dev`.
fn peer_rx(t: &Topo, dev: &str) -> u64 {
    t.peer
        .sh(&format!("cat /sys/class/net/{dev}/statistics/rx_packets"))
        .trim()
        .parse()
        .unwrap_or(0)
}

/// Paced sender: 64 KiB every 20 ms until STOPFILE exists, then closes;
/// prints "sha256 bytes" of what it sent.
const PACED_TX: &str = r#"
import socket, hashlib, os, sys, time
addr, port, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for i in range(150):
    try:
        s = socket.create_connection((addr, port), timeout=30)
        break
    except OSError:
        time.sleep(0.1)
s.settimeout(60)
h = hashlib.sha256(); n = 0
deadline = time.time() + 120
while not os.path.exists(stop) and time.time() < deadline:
    d = os.urandom(65536)
    s.sendall(d); h.update(d); n += len(d)
    time.sleep(0.02)
s.close()
print(h.hexdigest(), n)
"#;

#[test]
fn reload_adds_changes_and_removes_a_tunnel_without_touching_another() {
    let t = topo();
    let sock = t.dir.join("api.sock").display().to_string();
    let file = t.dir.join("gw.toml");
    let gw = Gateway::start(&t.gw, &config(&t, &sock, None, ""));
    warm_up(&t.h1, "10.2.0.2");
    assert!(ping_ok(&t.h1, "-c 2 -i 0.2 -W 2 10.2.0.2"));
    // 10.3.0.0/24 has no route yet.
    assert!(!ping_ok(&t.h1, "-c 1 -W 1 10.3.0.2"));

    // The transfer through t1, captured where it leaves the tunnel.
    let cap = Capture::start(&t.peer, "vx-a");
    let stop = t.dir.join("stop");
    let (rxs, txs) = (t.dir.join("rx.py"), t.dir.join("tx.py"));
    std::fs::write(&rxs, TCP_RX).unwrap();
    std::fs::write(&txs, PACED_TX).unwrap();
    let rx = t
        .peer
        .spawn(&format!("python3 {} 10.2.0.2 7100", rxs.display()));
    let tx = t.h1.spawn(&format!(
        "python3 {} 10.2.0.2 7100 {}",
        txs.display(),
        stop.display()
    ));
    let t1_tx = || tunnel_counter(&sock, "t1", "tx_packets");
    let t1_drops0 = tunnel_counter(&sock, "t1", "drops");
    let tx0 = t1_tx();
    assert!(
        wait_until(30, || t1_tx() > tx0 + 100),
        "the transfer did not start"
    );

    // 1. `vecgate reload`: t2 and its route are added; 10.3.0.2 answers
    //    through t2 (the peer's vx-b counts the requests).
    peer_t2(&t, 8);
    let out = reload(&t, &file, &config(&t, &sock, Some(8), ""), &[]);
    let o = text(&out);
    assert!(out.status.success(), "{o}");
    assert!(
        o.contains("+ tunnel t2: vxlan 192.0.2.1 → 192.0.2.2 key 8"),
        "{o}"
    );
    assert!(
        o.contains("+ route default 10.3.0.0/24: via 10.30.0.2"),
        "{o}"
    );
    assert!(!o.contains("t1"), "t1 is in the plan: {o}");
    warm_up(&t.h1, "10.3.0.2");
    let b0 = peer_rx(&t, "vx-b");
    assert!(
        ping_ok(&t.h1, "-c 3 -i 0.2 -W 2 10.3.0.2"),
        "{}",
        gw.log_text()
    );
    assert!(
        peer_rx(&t, "vx-b") >= b0 + 3,
        "the pings did not go through t2"
    );
    assert!(tunnel_counter(&sock, "t2", "tx_packets") >= 3);

    // 2. SIGHUP: t2's key changes (8 → 9), as `vecgate reload` would.
    peer_t2(&t, 9);
    std::fs::write(&gw.config, config(&t, &sock, Some(9), "")).unwrap();
    sh(&format!("kill -HUP {}", gw.pid()));
    assert!(
        wait_until(30, || gw.log_contains("reload: ~ tunnel t2: key: 8 → 9")),
        "{}",
        gw.log_text()
    );
    warm_up(&t.h1, "10.3.0.2");
    let b1 = peer_rx(&t, "vx-b");
    assert!(
        ping_ok(&t.h1, "-c 3 -i 0.2 -W 2 10.3.0.2"),
        "{}",
        gw.log_text()
    );
    assert!(peer_rx(&t, "vx-b") >= b1 + 3);
    // What SIGHUP applied is the file: `vecgate reload` finds nothing to do.
    let out = reload(&t, &file, &config(&t, &sock, Some(9), ""), &["--dry-run"]);
    assert!(text(&out).contains("No changes"), "{}", text(&out));

    // 3. `POST /config`: t2 and its route are removed; 10.3.0.2 is
    //    unreachable (no packet reaches the peer's vx-b).
    let body = t.dir.join("post.toml");
    std::fs::write(&body, config(&t, &sock, None, "")).unwrap();
    let answer = sh(&format!(
        "curl -sf --unix-socket {sock} -H 'Content-Type: application/toml' \
         --data-binary @{} http://vecgate/config",
        body.display()
    ));
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(v["applied"], true, "{answer}");
    let ops: Vec<String> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} {} {}", s(&c["op"]), s(&c["object"]), s(&c["name"])))
        .collect();
    assert!(ops.contains(&"- tunnel t2".to_string()), "{answer}");
    assert!(
        ops.contains(&"- route default 10.3.0.0/24".to_string()),
        "{answer}"
    );
    let b2 = peer_rx(&t, "vx-b");
    assert!(!ping_ok(&t.h1, "-c 3 -i 0.2 -W 1 10.3.0.2"));
    assert_eq!(peer_rx(&t, "vx-b"), b2, "t2 still forwards");

    // The transfer kept running through all three reloads.
    let tx1 = t1_tx();
    assert!(
        wait_until(30, || t1_tx() > tx1 + 50),
        "the transfer stalled"
    );
    std::fs::write(&stop, "").unwrap();
    let sent = tx.wait_with_output().unwrap();
    let got = rx.wait_with_output().unwrap();
    let (sent, got) = (
        String::from_utf8_lossy(&sent.stdout).trim().to_string(),
        String::from_utf8_lossy(&got.stdout).trim().to_string(),
    );
    assert!(
        !sent.is_empty() && sent == got,
        "sent {sent:?}, received {got:?}"
    );
    let mut cap = cap;
    no_segment_lost(cap.stop(), "t1");
    assert_eq!(
        tunnel_counter(&sock, "t1", "drops"),
        t1_drops0,
        "t1 dropped packets"
    );
    let ports: serde_json::Value = serde_json::from_str(&sh(&format!(
        "curl -sf --unix-socket {sock} http://vecgate/interfaces"
    )))
    .unwrap();
    for p in ports.as_array().unwrap() {
        for k in ["drops", "rx_missed", "rx_errors", "tx_errors"] {
            assert_eq!(p[k], 0, "{} {k}: {p}", p["name"]);
        }
    }
}

/// The transfer on port 7100 as captured at its receiving end lost
/// nothing: tshark sees no missing segment, and every retransmitted
/// segment's original had come through before.
fn no_segment_lost(pcap: &Path, via: &str) {
    let flow = "tcp.port == 7100";
    let lost = tshark(
        pcap,
        &format!("{flow} && tcp.analysis.lost_segment"),
        "-e frame.number",
    );
    // Data segments at the receiving end: (frame, seq, len, retransmitted).
    let fields = "-e frame.number -e tcp.seq -e tcp.len -e tcp.analysis.retransmission -e tcp.analysis.fast_retransmission";
    let data: Vec<(u64, u64, u64, bool)> = tshark(pcap, &format!("{flow} && tcp.len > 0"), fields)
        .iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Some((
                f.first()?.parse().ok()?,
                f.get(1)?.parse().ok()?,
                f.get(2)?.parse().ok()?,
                f.iter().skip(3).any(|x| !x.is_empty()),
            ))
        })
        .collect();
    assert!(
        data.len() > 200,
        "the capture saw {} data segments",
        data.len()
    );
    assert!(lost.is_empty(), "segments lost through {via}: {lost:?}");
    // A retransmission is a loss only if its original never came through:
    // every byte the sender sent again had already reached the receiver
    // (a timer that fired on a slow ACK on a loaded machine, RFC 8985's
    // tail-loss probe, resends what was not lost).
    let lost_then_resent: Vec<&(u64, u64, u64, bool)> = data
        .iter()
        .filter(|r| r.3)
        .filter(|r| {
            !data
                .iter()
                .any(|o| !o.3 && o.0 < r.0 && o.1 <= r.1 && r.1 + r.2 <= o.1 + o.2)
        })
        .collect();
    assert!(
        lost_then_resent.is_empty(),
        "segments whose original did not come through {via} (frame, seq, len): {lost_then_resent:?}"
    );
    let resent = data.iter().filter(|r| r.3).count();
    eprintln!(
        "{} data segments through {via}, {resent} sent twice (both copies arrived)",
        data.len()
    );
}

fn s(v: &serde_json::Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

#[test]
fn a_bad_file_or_a_restart_change_changes_nothing_and_dry_run_only_plans() {
    let t = topo();
    let sock = t.dir.join("api.sock").display().to_string();
    let file = t.dir.join("gw.toml");
    let good = config(&t, &sock, None, "");
    let gw = Gateway::start(&t.gw, &good);
    let before = state(&sock);

    // A route through a tunnel that does not exist, on a known line.
    let bad = config(
        &t,
        &sock,
        Some(8),
        "[[route]]\nvrf = \"default\"\nprefix = \"10.4.0.0/24\"\nvia = \"nope\"\n",
    );
    let line = bad.lines().count(); // `via = "nope"` is the last line
    let out = reload(&t, &file, &bad, &[]);
    let o = text(&out);
    assert!(!out.status.success(), "{o}");
    assert!(
        o.contains(&format!("{}:{line}:", file.display())),
        "the error does not name line {line}: {o}"
    );
    assert_eq!(state(&sock), before, "a bad file changed the gateway");
    // The API refuses it the same way, naming the line.
    std::fs::write(&file, &bad).unwrap();
    let r = sh(&format!(
        "curl -s -o /dev/stdout -w ' %{{http_code}}' --unix-socket {sock} \
         --data-binary @{} http://vecgate/config",
        file.display()
    ));
    assert!(r.ends_with(" 400"), "{r}");
    assert!(r.contains(&format!("line {line}:")), "{r}");
    assert_eq!(state(&sock), before);
    // SIGHUP too: logged with the line, nothing applied.
    std::fs::write(&gw.config, &bad).unwrap();
    sh(&format!("kill -HUP {}", gw.pid()));
    assert!(
        wait_until(30, || gw.log_contains("reload refused")),
        "{}",
        gw.log_text()
    );
    assert!(gw.log_contains(&format!(":{line}: ")), "{}", gw.log_text());
    assert_eq!(state(&sock), before);

    // A change only a restart applies refuses the whole file (the new
    // tunnel with it).
    let restart =
        config(&t, &sock, Some(8), "").replace("name = \"rl\"\n", "name = \"rl\"\nworkers = 2\n");
    let out = reload(&t, &file, &restart, &[]);
    let o = text(&out);
    assert!(!out.status.success(), "{o}");
    assert!(
        o.contains("needs a restart") && o.contains("workers: 1 → 2"),
        "{o}"
    );
    assert_eq!(state(&sock), before);

    // --dry-run prints the plan and changes nothing.
    let next = config(&t, &sock, Some(8), "");
    let out = reload(&t, &file, &next, &["--dry-run"]);
    let o = text(&out);
    assert!(out.status.success(), "{o}");
    for want in [
        "+ tunnel t2: vxlan 192.0.2.1 → 192.0.2.2 key 8",
        "+ route default 10.3.0.0/24: via 10.30.0.2",
        "Plan: 2 to add, 0 to change, 0 to remove (dry run, nothing applied).",
    ] {
        assert!(o.contains(want), "no {want:?} in:\n{o}");
    }
    assert_eq!(state(&sock), before);
    let out = reload(&t, &file, &next, &["--dry-run", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["applied"], false);
    assert_eq!(v["changes"].as_array().map(Vec::len), Some(2));
    assert_eq!(state(&sock), before);
    // The same file applied: the API shows it.
    let out = reload(&t, &file, &next, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let (cfg, routes) = state(&sock);
    assert!(cfg.contains("name = \"t2\""), "{cfg}");
    assert!(routes.contains("10.3.0.0/24"), "{routes}");
    drop(gw);
}

/// The drop counters of `vecgate show errors` (events such as coalesced
/// or encrypted segments left out, and ARP replies: consumed once learned
/// from, counted by arp-input, never lost), by (node, reason).
fn drops(sock: &str) -> Vec<(String, String, u64)> {
    const EVENTS: &[&str] = &[
        "reply-received",
        "coalesced-segments",
        "super-packets",
        "decrypted",
        "encrypted",
        "segmented-super-packets",
        "segments",
        "udp-gso-datagrams",
        "whole-super-packets",
    ];
    let mut v: Vec<_> = show_errors(&format!("unix:{sock}"))
        .into_iter()
        .filter(|(_, r, _)| !EVENTS.contains(&r.as_str()))
        .collect();
    v.sort();
    v
}

/// The AF_PACKET sockets bound to netdev `dev` in `ns` (the kernel's own
/// list, /proc/net/packet: its fifth column is the ifindex).
fn packet_sockets(ns: &Netns, dev: &str) -> usize {
    let ifindex = ns.sh(&format!("cat /sys/class/net/{dev}/ifindex"));
    let ifindex = ifindex.trim();
    ns.sh("cat /proc/net/packet")
        .lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(4) == Some(ifindex))
        .count()
}

/// An API object by name from a JSON array at `path`.
fn api_obj(sock: &str, path: &str, name: &str) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&sh(&format!(
        "curl -sf --unix-socket {sock} http://vecgate{path}"
    )))
    .unwrap();
    v.as_array()?.iter().find(|x| x["name"] == name).cloned()
}

/// An interface is attached (a new veth into a new host, h3) and later
/// released by `vecgate reload` while a paced TCP transfer runs through
/// t1, which no reload touches.
///
/// ```text
///  h1 10.1.0.2 ── lan0 [vecgate] wan0 ── peer (t1 → 10.2.0.2)
///                       lan3 10.5.0.1 ── h3 10.5.0.2   (added, then removed)
/// ```
///
/// Referees from the same run: the dry run's plan; the kernel's list of
/// AF_PACKET sockets on the new netdev and its ingress guard (a tcx program)
/// (there after the first reload, gone after the second); pings from h3
/// to h1 answered through lan3 and captured on h3; lan3's counters in the
/// API; after the removal, h1's pings to 10.5.0.2 answered with ICMP net
/// unreachable by the gateway (no route any more), the veth deleted under
/// a running gateway; and for the transfer: the receiver's SHA-256 and
/// byte count, tshark's analysis of its capture (nothing lost), and the
/// gateway's drop counters by reason, equal before and after both
/// reloads.
#[test]
fn reload_attaches_and_releases_an_interface_while_a_transfer_runs() {
    let t = topo();
    // IPv4 only: the hosts' IPv6 chatter (router solicitations, MLD
    // reports) would be dropped by the gateway as unwanted multicast while
    // the counters are compared.
    for ns in [&t.h1, &t.peer, &t.gw] {
        ns.sh("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1");
    }
    let sock = t.dir.join("api.sock").display().to_string();
    let file = t.dir.join("gw.toml");
    let gw = Gateway::start(&t.gw, &config(&t, &sock, None, ""));
    warm_up(&t.h1, "10.2.0.2");

    // h3 behind a new veth, quiet until pinged (no IPv6: no DAD, RS, MLD).
    let h3 = Netns::new("rn");
    let dev = unique("rn");
    sh(&format!(
        "ip link add eth0 netns {} type veth peer name {dev} netns {}",
        h3.name, t.gw.name
    ));
    h3.sh(
        "sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1 && ip addr add 10.5.0.2/24 dev eth0 && \
         ip link set eth0 up && ip route add default via 10.5.0.1",
    );
    t.gw.sh(&format!(
        "sysctl -qw net.ipv6.conf.{dev}.disable_ipv6=1 && ip link set {dev} up"
    ));
    let lan3 = format!(
        "[[interface]]\nname = \"lan3\"\nhost = \"{dev}\"\ndriver = \"af_packet\"\naddresses = [\"10.5.0.1/24\"]\n\n"
    );
    // The ingress guard: tcx on this kernel (one program on the netdev, no
    // nftables table).
    let guard = format!("tcx program on {dev}");
    let has_guard = || {
        let tables = common::nft_guard_tables(&t.gw);
        assert!(tables.is_empty(), "{tables:?}");
        common::tcx_guards(&t.gw, &dev) == 1
    };

    // The transfer through t1, captured where it leaves the tunnel.
    let cap = Capture::start(&t.peer, "vx-a");
    let stop = t.dir.join("stop");
    let (rxs, txs) = (t.dir.join("rx.py"), t.dir.join("tx.py"));
    std::fs::write(&rxs, TCP_RX).unwrap();
    std::fs::write(&txs, PACED_TX).unwrap();
    let rx = t
        .peer
        .spawn(&format!("python3 {} 10.2.0.2 7100", rxs.display()));
    let tx = t.h1.spawn(&format!(
        "python3 {} 10.2.0.2 7100 {}",
        txs.display(),
        stop.display()
    ));
    let t1_tx = || tunnel_counter(&sock, "t1", "tx_packets");
    let tx0 = t1_tx();
    assert!(
        wait_until(30, || t1_tx() > tx0 + 100),
        "the transfer did not start"
    );
    let drops0 = drops(&sock);

    // --dry-run shows the new interface and attaches nothing.
    let with = config(&t, &sock, None, &lan3);
    let out = reload(&t, &file, &with, &["--dry-run"]);
    let o = text(&out);
    assert!(out.status.success(), "{o}");
    assert!(
        o.contains(&format!(
            "+ interface lan3: netdev {dev} (af_packet) 10.5.0.1/24"
        )) && o.contains("Plan: 1 to add, 0 to change, 0 to remove"),
        "{o}"
    );
    assert!(!o.contains("needs a restart"), "{o}");
    assert_eq!(packet_sockets(&t.gw, &dev), 0);
    assert!(!has_guard());

    // 1. `vecgate reload` attaches lan3: a socket on the netdev, its
    //    guard, its connected route; h3 reaches h1 through it.
    let out = reload(&t, &file, &with, &[]);
    let o = text(&out);
    assert!(out.status.success(), "{o}\n{}", gw.log_text());
    assert!(o.contains("+ interface lan3"), "{o}");
    assert!(!o.contains("t1"), "t1 is in the plan: {o}");
    assert_eq!(packet_sockets(&t.gw, &dev), 1, "one worker, one socket");
    assert!(has_guard(), "no ingress guard {guard}");
    let routes = sh(&format!(
        "curl -sf --unix-socket {sock} http://vecgate/routes"
    ));
    assert!(
        routes.contains("\"10.5.0.0/24\"") && routes.contains("\"lan3\""),
        "{routes}"
    );
    let h3cap = Capture::start_filtered(&h3, "eth0", "icmp");
    warm_up(&h3, "10.1.0.2");
    let (answered, out) = ping_count(&h3, 3, 20, "-i 0.2 10.1.0.2");
    assert_eq!(answered, 3, "{out}\n{}", gw.log_text());
    let mut h3cap = h3cap;
    let replies = tshark(
        h3cap.stop(),
        "icmp.type == 0 && ip.src == 10.1.0.2 && ip.dst == 10.5.0.2",
        "-e frame.number",
    );
    assert!(replies.len() >= 3, "h3 captured {} replies", replies.len());
    let l3 = api_obj(&sock, "/interfaces", "lan3").expect("lan3 in GET /interfaces");
    assert!(
        l3["rx_packets"].as_u64() >= Some(3) && l3["tx_packets"].as_u64() >= Some(3),
        "{l3}"
    );
    assert_eq!(l3["drops"], 0, "{l3}");

    // 2. A second reload removes it: its socket closed, guard gone, and
    //    10.5.0.2 has no route (h1 is told so by the gateway).
    let out = reload(&t, &file, &config(&t, &sock, None, ""), &[]);
    let o = text(&out);
    assert!(out.status.success(), "{o}\n{}", gw.log_text());
    assert!(
        o.contains(&format!("- interface lan3: netdev {dev} released")),
        "{o}"
    );
    assert!(
        wait_until(30, || packet_sockets(&t.gw, &dev) == 0),
        "the gateway still has a socket on {dev}"
    );
    assert!(!has_guard(), "ingress guard {guard} left behind");
    assert!(api_obj(&sock, "/interfaces", "lan3").is_none());
    assert!(gw.log_contains("released"), "{}", gw.log_text());

    // Nothing the transfer sent was dropped meanwhile.
    let drops1 = drops(&sock);
    assert_eq!(drops1, drops0, "drops while lan3 came and went");

    // The live API takes the same steps: POST /interfaces attaches it
    // again, DELETE /interfaces/lan3 releases it.
    let answer = sh(&format!(
        "curl -s -w ' %{{http_code}}' --unix-socket {sock} -H 'Content-Type: application/json' \
         -d '{{\"name\":\"lan3\",\"host\":\"{dev}\",\"addresses\":[\"10.5.0.1/24\"]}}' \
         http://vecgate/interfaces"
    ));
    assert!(answer.ends_with(" 201"), "{answer}\n{}", gw.log_text());
    assert_eq!(packet_sockets(&t.gw, &dev), 1);
    assert!(has_guard());
    warm_up(&h3, "10.1.0.2");
    let answer = sh(&format!(
        "curl -s -w ' %{{http_code}}' --unix-socket {sock} -X DELETE http://vecgate/interfaces/lan3"
    ));
    assert!(answer.ends_with(" 204"), "{answer}");
    assert!(
        wait_until(30, || packet_sockets(&t.gw, &dev) == 0),
        "the gateway still has a socket on {dev}"
    );
    assert!(!has_guard());
    let drops1 = drops(&sock);

    let out = t.h1.try_sh("ping -c 3 -i 0.2 -W 2 10.5.0.2");
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{o}");
    assert!(
        o.contains("From 10.1.0.1") && o.contains("Destination Net Unreachable"),
        "{o}"
    );
    // The veth goes under the running gateway; it goes on.
    t.gw.sh(&format!("ip link del {dev}"));
    assert!(ping_ok(&t.h1, "-c 2 -i 0.2 -W 2 10.2.0.2"));

    // The transfer kept running through both reloads, byte-exact.
    let tx1 = t1_tx();
    assert!(
        wait_until(30, || t1_tx() > tx1 + 50),
        "the transfer stalled"
    );
    std::fs::write(&stop, "").unwrap();
    let sent = tx.wait_with_output().unwrap();
    let got = rx.wait_with_output().unwrap();
    let (sent, got) = (
        String::from_utf8_lossy(&sent.stdout).trim().to_string(),
        String::from_utf8_lossy(&got.stdout).trim().to_string(),
    );
    assert!(
        !sent.is_empty() && sent == got,
        "sent {sent:?}, received {got:?}"
    );
    let mut cap = cap;
    no_segment_lost(cap.stop(), "t1");
    // No drop since: the unreachable pings were answered, not dropped.
    assert_eq!(drops(&sock), drops1, "drops after the reloads");
    assert!(
        !gw.log_contains("port failed"),
        "a port failed:\n{}",
        gw.log_text()
    );
    drop(gw);
}

/// The other backends attach and release live the same way: an `af_xdp`
/// interface (its XDP program on the netdev, one AF_XDP socket) and a
/// `tap` one (the TAP device vecgate creates).
///
/// ```text
///  h1 10.1.0.2 ── lan0 [vecgate] x3 (af_xdp) 10.5.0.1 ── h3 10.5.0.2
///                                tp0 (tap)  10.6.0.1     (a TAP device)
/// ```
///
/// Referees: `ip -d link` (the XDP program there, then gone), the TAP
/// device in the namespace (there, then gone), pings from h3 to h1
/// answered through the AF_XDP port (h1 counts the requests from h3).
#[test]
fn reload_attaches_and_releases_af_xdp_and_tap_interfaces() {
    let t = topo();
    let sock = t.dir.join("api.sock").display().to_string();
    let file = t.dir.join("gw.toml");
    let gw = Gateway::start(&t.gw, &config(&t, &sock, None, ""));
    let h3 = Netns::new("rx");
    let dev = unique("rx");
    let tap = unique("rt");
    veth(&h3, "eth0", &t.gw, &dev);
    h3.sh("ip addr add 10.5.0.2/24 dev eth0 && ip route add default via 10.5.0.1");
    let extra = format!(
        "[[interface]]\nname = \"x3\"\nhost = \"{dev}\"\ndriver = \"af_xdp\"\naddresses = [\"10.5.0.1/24\"]\n\n\
         [[interface]]\nname = \"tp0\"\nhost = \"{tap}\"\ndriver = \"tap\"\naddresses = [\"10.6.0.1/24\"]\n\n"
    );
    let xdp = || {
        t.gw.sh(&format!("ip -d link show dev {dev}"))
            .contains("xdp")
    };
    let tap_there = || {
        t.gw.try_sh(&format!("ip link show dev {tap}"))
            .status
            .success()
    };
    assert!(!xdp() && !tap_there());

    let out = reload(&t, &file, &config(&t, &sock, None, &extra), &[]);
    let o = text(&out);
    assert!(out.status.success(), "{o}\n{}", gw.log_text());
    assert!(
        o.contains(&format!(
            "+ interface x3: netdev {dev} (af_xdp) 10.5.0.1/24"
        )) && o.contains(&format!("+ interface tp0: netdev {tap} (tap) 10.6.0.1/24")),
        "{o}"
    );
    assert!(xdp(), "no XDP program on {dev}");
    // The TAP device is down (nobody set it up): frames sent to it are
    // dropped and counted, the port stays (and so does the device).
    assert!(wait_until(30, tap_there), "no TAP device {tap}");
    let before: u64 =
        t.h1.sh("cat /sys/class/net/eth0/statistics/rx_packets")
            .trim()
            .parse()
            .unwrap();
    warm_up(&h3, "10.1.0.2");
    let (answered, out) = ping_count(&h3, 3, 20, "-i 0.2 10.1.0.2");
    assert_eq!(answered, 3, "{out}\n{}", gw.log_text());
    let after: u64 =
        t.h1.sh("cat /sys/class/net/eth0/statistics/rx_packets")
            .trim()
            .parse()
            .unwrap();
    assert!(after >= before + 3, "h1 received {} frames", after - before);
    let x3 = api_obj(&sock, "/interfaces", "x3").expect("x3 in GET /interfaces");
    assert!(x3["rx_packets"].as_u64() >= Some(3), "{x3}");

    let out = reload(&t, &file, &config(&t, &sock, None, ""), &[]);
    let o = text(&out);
    assert!(out.status.success(), "{o}\n{}", gw.log_text());
    assert!(
        o.contains("- interface x3") && o.contains("- interface tp0"),
        "{o}"
    );
    assert!(wait_until(30, || !xdp()), "the XDP program stayed on {dev}");
    assert!(
        wait_until(30, || !tap_there()),
        "the TAP device {tap} stayed"
    );
    assert!(!ping_ok(&h3, "-c 1 -W 1 10.1.0.2"));
    // The gateway answers on. A released TAP queue is never re-opened
    // (the device would come back).
    assert!(ping_ok(&t.h1, "-c 2 -i 0.2 -W 2 10.1.0.1"));
    assert!(!tap_there(), "the TAP device {tap} came back");
    let log = gw.log_text();
    // The last release is tp0's (released in the file's order).
    let released = log.rfind("released").expect("no release in the log");
    assert!(
        !log[released..].contains("port re-opened"),
        "a released port was re-opened:\n{log}"
    );
    drop(gw);
}
