//! The operator CLI against a real gateway: every `show` in table and JSON
//! form, live changes, trace, capture read back by tshark, and the message
//! when no daemon runs.
//!
//!   h1 (10.1.0.2) ── gw-h1 [vecgate] gw-h2 ── h2 (10.2.0.2)

mod common;

use common::{unique, veth, Gateway, Netns};
use serde_json::Value;
use std::process::Command;

fn vg(ns: &Netns, sock: &std::path::Path, args: &str) -> (bool, String, String) {
    let out = ns.try_sh(&format!(
        "{} {args} --api unix:{}",
        common::vecgate_bin().display(),
        sock.display()
    ));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(ns: &Netns, sock: &std::path::Path, args: &str) -> String {
    let (s, o, e) = vg(ns, sock, args);
    assert!(s, "vecgate {args}: {e}");
    o
}

#[test]
fn show_set_trace_capture() {
    let h1 = Netns::new("h1");
    let h2 = Netns::new("h2");
    let gw = Netns::new("gw");
    veth(&h1, "eth0", &gw, "gw-h1");
    veth(&h2, "eth0", &gw, "gw-h2");
    h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    let dir = std::env::temp_dir().join(unique("cli"));
    let sock = dir.join("gw.sock");
    let cfg = format!(
        "[gateway]\nname = \"cli\"\napi = \"unix:{}\"\n\n[[interface]]\nname = \"site-a\"\nhost = \"gw-h1\"\ndriver = \"af_packet\"\naddresses = [\"10.1.0.1/24\"]\n\n[[interface]]\nname = \"site-b\"\nhost = \"gw-h2\"\ndriver = \"af_packet\"\naddresses = [\"10.2.0.1/24\"]\n\n[[route]]\nprefix = \"10.9.0.0/16\"\nvia = \"10.2.0.2\"\n",
        sock.display()
    );
    let _g = Gateway::start(&gw, &cfg);
    let mode = std::fs::metadata(&sock).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o660
    );

    // Tables.
    let t = ok(&gw, &sock, "show interfaces");
    assert!(t.starts_with("Name "), "{t}");
    assert!(
        t.lines()
            .any(|l| l.starts_with("site-a ") && l.contains("gw-h1") && l.contains("10.1.0.1/24")),
        "{t}"
    );
    let t = ok(&gw, &sock, "show routes");
    assert!(
        t.lines()
            .any(|l| l.contains("10.9.0.0/16") && l.contains("10.2.0.2") && l.contains("static")),
        "{t}"
    );
    assert!(
        ok(&gw, &sock, "show routes blue").lines().count() == 1,
        "only the header for an unknown VRF"
    );
    for what in [
        "vrfs",
        "tunnels",
        "sa",
        "stats",
        "node-counters",
        "errors",
        "runtime",
        "neighbors",
    ] {
        let t = ok(&gw, &sock, &format!("show {what}"));
        assert!(!t.is_empty(), "show {what}");
        let j = ok(&gw, &sock, &format!("show {what} --json"));
        serde_json::from_str::<Value>(&j)
            .unwrap_or_else(|e| panic!("show {what} --json: {e}: {j}"));
    }
    assert_eq!(ok(&gw, &sock, "show sa --json").trim(), "[]");

    // Counters move after pings; neighbours appear.
    let rx = |j: &str| -> u64 {
        let v: Value = serde_json::from_str(j).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == "site-a")
            .unwrap()["rx_packets"]
            .as_u64()
            .unwrap()
    };
    common::warm_up(&h1, "10.2.0.2");
    let before = rx(&ok(&gw, &sock, "show interfaces --json"));
    h1.sh("ping -c 3 -i 0.2 -W 2 10.2.0.2 >/dev/null");
    let after = rx(&ok(&gw, &sock, "show interfaces --json"));
    assert!(after >= before + 3, "{before} -> {after}");
    let t = ok(&gw, &sock, "show stats");
    assert!(t.lines().any(|l| l.starts_with("site-a")), "{t}");
    let t = ok(&gw, &sock, "show neighbors");
    assert!(t.contains("10.2.0.2") && t.contains("reachable"), "{t}");

    // Live changes.
    ok(&gw, &sock, "route add default 10.8.0.0/24 via site-b");
    assert!(ok(&gw, &sock, "show routes default").contains("10.8.0.0/24"));
    let (s, _, e) = vg(&gw, &sock, "route add default 10.8.0.1/24 via site-b");
    assert!(
        !s && e.contains("HTTP 400") && e.contains("host bits") && e.contains("prefix"),
        "{e}"
    );
    ok(&gw, &sock, "route del default 10.8.0.0/24");
    assert!(!ok(&gw, &sock, "show routes").contains("10.8.0.0/24"));
    ok(&gw, &sock, "rsc off site-a");
    assert!(ok(&gw, &sock, "show config").contains("rsc = false"));
    ok(&gw, &sock, "set interface site-a rsc on");
    assert!(!ok(&gw, &sock, "show config").contains("rsc = false"));
    let (s, _, e) = vg(&gw, &sock, "rsc on nope");
    assert!(!s && e.contains("HTTP 404") && e.contains("nope"), "{e}");

    // Trace.
    ok(&gw, &sock, "trace add 4");
    h1.sh("ping -c 1 -W 2 10.2.0.2 >/dev/null");
    let t = ok(&gw, &sock, "trace show");
    assert!(
        t.contains("ethernet-input") && t.contains("ip4-lookup") && t.contains("interface-output"),
        "{t}"
    );

    // Capture: 8 frames on site-a while h1 pings. Other frames (ND, ARP)
    // may be among them; the echo requests and replies must be, in order.
    let pcap = dir.join("c.pcap");
    let pinger = h1.spawn("sh -c 'sleep 0.5; ping -c 8 -i 0.3 -W 2 10.2.0.2'");
    ok(
        &gw,
        &sock,
        &format!("capture site-a --count 8 -w {}", pcap.display()),
    );
    drop(pinger);
    let fields = |filter: &str| {
        let out = Command::new("tshark")
            .args(["-r"])
            .arg(&pcap)
            .args([
                "-Y",
                filter,
                "-T",
                "fields",
                "-e",
                "ip.src",
                "-e",
                "ip.dst",
                "-e",
                "icmp.type",
            ])
            .output()
            .expect("tshark");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let all = fields("frame");
    assert_eq!(all.lines().count(), 8, "exactly the requested count: {all}");
    let icmp = fields("icmp");
    let lines: Vec<&str> = icmp.lines().collect();
    let req = lines.iter().position(|l| *l == "10.1.0.2\t10.2.0.2\t8");
    assert!(req.is_some(), "an echo request was captured: {all}");
    assert_eq!(
        lines.get(req.unwrap() + 1).copied(),
        Some("10.2.0.2\t10.1.0.2\t0"),
        "its reply follows: {all}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn daemon_not_running() {
    let sock = std::env::temp_dir().join(format!("{}.sock", unique("none")));
    let out = Command::new(common::vecgate_bin())
        .args(["show", "interfaces", "--api"])
        .arg(format!("unix:{}", sock.display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains(&format!(
            "cannot connect to {}: no such file",
            sock.display()
        )) && e.contains("is `vecgate run` running?"),
        "{e}"
    );
    // A stale socket file: connection refused.
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    drop(l);
    let out = Command::new(common::vecgate_bin())
        .args(["show", "routes", "--api"])
        .arg(sock.as_os_str())
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_file(&sock);
    assert!(
        !out.status.success() && e.contains("connection refused"),
        "{e}"
    );
}
