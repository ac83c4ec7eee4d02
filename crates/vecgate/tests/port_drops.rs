//! Losses at an interface are visible: frames the kernel drops because
//! vecgate's AF_PACKET receive ring is full show up as `rx_missed` (and in
//! `drops`) through `vecgate show stats`.
//!
//!   h1 (10.1.0.2) ── gw-h1 [vecgate, SIGSTOPped] gw-h2 ── h2 (10.2.0.2)

mod common;

use common::{unique, veth, wait_until, Gateway, Netns};
use serde_json::Value;

/// Sends `n` UDP datagrams of 200 bytes to `addr`:9 as fast as it can.
const FLOOD: &str = "import socket,sys\n\
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
for i in range(int(sys.argv[2])):\n    s.sendto(b'x'*200,(sys.argv[1],9))\n";

fn stats(gw: &Netns, sock: &std::path::Path, json: bool) -> String {
    let out = gw.try_sh(&format!(
        "{} show stats{} --api unix:{}",
        common::vecgate_bin().display(),
        if json { " --json" } else { "" },
        sock.display()
    ));
    assert!(out.status.success(), "vecgate show stats: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `interface`'s entry of `vecgate show stats --json`.
fn lan(gw: &Netns, sock: &std::path::Path) -> Value {
    let v: Value = serde_json::from_str(&stats(gw, sock, true)).unwrap();
    v.as_array()
        .and_then(|a| a.iter().find(|i| i["interface"] == "site-a"))
        .cloned()
        .unwrap_or_else(|| panic!("no site-a in {v}"))
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn full_rx_ring_while_stopped_is_counted_as_rx_missed() {
    let h1 = Netns::new("h1");
    let h2 = Netns::new("h2");
    let gw = Netns::new("gw");
    veth(&h1, "eth0", &gw, "gw-h1");
    veth(&h2, "eth0", &gw, "gw-h2");
    h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    let dir = std::env::temp_dir().join(unique("drops"));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("gw.sock");
    let flood = dir.join("flood.py");
    std::fs::write(&flood, FLOOD).unwrap();
    // One worker: one ring on the LAN port, of as many slots as the
    // backend gives a 1500-byte MTU.
    let ring =
        (vecgate_io::af_packet::RING_BYTES / vecgate_io::af_packet::slot_size_for_mtu(1500)) as u64;
    let cfg = format!(
        "[gateway]\nname = \"drops\"\nworkers = 1\napi = \"unix:{}\"\n\n[[interface]]\nname = \"site-a\"\nhost = \"gw-h1\"\ndriver = \"af_packet\"\naddresses = [\"10.1.0.1/24\"]\n\n[[interface]]\nname = \"site-b\"\nhost = \"gw-h2\"\ndriver = \"af_packet\"\naddresses = [\"10.2.0.1/24\"]\n",
        sock.display()
    );
    let mut g = Gateway::start(&gw, &cfg);
    // Neighbours resolved both ways before the gateway stops.
    common::warm_up(&h1, "10.2.0.2");
    h1.sh("ping -c 2 -i 0.2 -W 2 10.2.0.2 >/dev/null");
    let before = lan(&gw, &sock);
    assert_eq!(n(&before, "rx_missed"), 0, "{before}");

    let pid = g.pid();
    common::sh(&format!("kill -STOP {pid}"));
    // Resumed even if the flood panics: a stopped process ignores SIGTERM.
    struct Cont(u32);
    impl Drop for Cont {
        fn drop(&mut self) {
            let _ = std::process::Command::new("kill")
                .args(["-CONT", &self.0.to_string()])
                .status();
        }
    }
    let cont = Cont(pid);
    let sent = 3 * ring;
    h1.sh(&format!("python3 {} 10.2.0.2 {sent}", flood.display()));
    drop(cont);

    // rx_missed is polled every ~100 ms once the worker runs again.
    let mut after = lan(&gw, &sock);
    assert!(
        wait_until(5, || {
            after = lan(&gw, &sock);
            n(&after, "rx_missed") > 0
        }),
        "no ring-full drops counted after {sent} frames into a stopped gateway: {after}"
    );
    // Let the poll that follows the ring's drain settle, then judge.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let after = lan(&gw, &sock);
    let missed = n(&after, "rx_missed");
    let received = n(&after, "rx_packets") - n(&before, "rx_packets");
    // The ring's slots kept the first frames; the kernel dropped the rest.
    assert!(
        (sent / 2..=sent + 20).contains(&missed),
        "{sent} sent, {received} received, {missed} missed: {after}"
    );
    assert!(received <= ring + 20, "{received} received: {after}");
    assert!(
        n(&after, "drops") >= missed,
        "drops include rx_missed: {after}"
    );
    assert_eq!(n(&after, "rx_errors"), 0, "{after}");

    // The table shows the same, in its own column.
    let t = stats(&gw, &sock, false);
    let head: Vec<&str> = t.lines().next().unwrap_or("").split_whitespace().collect();
    let row: Vec<&str> = t
        .lines()
        .find(|l| l.starts_with("site-a "))
        .unwrap_or_else(|| panic!("{t}"))
        .split_whitespace()
        .collect();
    let col = head
        .iter()
        .position(|h| *h == "RX-missed")
        .expect("RX-missed column");
    assert!(
        head.contains(&"RX-errors") && head.contains(&"TX-errors"),
        "{t}"
    );
    assert!(
        row.get(col).and_then(|v| v.parse::<u64>().ok()) >= Some(missed),
        "{t}"
    );
    // The gateway still forwards.
    assert!(h1.try_sh("ping -c 1 -W 2 10.2.0.2").status.success());
    assert!(g.stop().success(), "{}", g.log_text());
    let _ = std::fs::remove_dir_all(&dir);
}
