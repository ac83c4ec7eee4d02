//! VRRPv3 between two vecgates on one LAN (RFC 5798): the higher priority
//! holds the virtual address, a host reaches it; after `kill -9` of the
//! master the backup takes over. Judged by the host (which MAC answers ARP
//! for the virtual address, which pings are answered, by sequence number)
//! and by a capture of the adverts on the LAN, never by wall-clock time
//! alone: the gap is compared with the protocol's own bound.

mod common;

use common::*;

const VIP: &str = "10.77.0.254";
/// Advertisement interval (centiseconds) of both gateways.
const INTERVAL_CS: u64 = 50;

fn config(name: &str, addr: &str, priority: u8, preempt: bool) -> String {
    format!(
        r#"[gateway]
name = "{name}"

[[interface]]
name = "lan0"
host = "lan0"
driver = "af_packet"
addresses = ["{addr}/24"]

[ha]
priority = {priority}
interval_cs = {INTERVAL_CS}
preempt = {preempt}

[[ha.group]]
vrid = 51
interface = "lan0"
addresses = ["{VIP}"]
"#
    )
}

fn mac(ns: &Netns, ifname: &str) -> String {
    ns.sh(&format!("cat /sys/class/net/{ifname}/address"))
        .trim()
        .to_owned()
}

/// The MAC the host has for the virtual address (after asking afresh).
fn vip_owner(host: &Netns) -> Option<String> {
    host.sh("ip neigh flush dev h0");
    if !ping_ok(host, &format!("-c 1 -W 1 {VIP}")) {
        return None;
    }
    let n = host.sh(&format!("ip neigh show {VIP} dev h0"));
    n.split_whitespace()
        .skip_while(|w| *w != "lladdr")
        .nth(1)
        .map(str::to_owned)
}

/// Longest time between two consecutive replies, from `ping -D`'s
/// `[epoch.micros]` stamps: the time the address was unreachable, however
/// slowly a loaded machine paced the requests.
fn longest_silence_ms(ping_output: &str) -> u64 {
    let stamps: Vec<f64> = ping_output
        .lines()
        .filter(|l| l.contains(" bytes from "))
        .filter_map(|l| l.strip_prefix('[')?.split(']').next()?.parse().ok())
        .collect();
    stamps
        .windows(2)
        .map(|w| ((w[1] - w[0]) * 1000.0) as u64)
        .max()
        .unwrap_or(0)
}

/// Longest run of unanswered sequence numbers among 1..=n.
fn longest_gap(ping_output: &str, n: u64) -> u64 {
    let mut seen = std::collections::BTreeSet::new();
    for l in ping_output.lines().filter(|l| l.contains(" bytes from ")) {
        if let Some(k) = l
            .split_whitespace()
            .find_map(|w| w.strip_prefix("icmp_seq="))
            .and_then(|v| v.parse::<u64>().ok())
        {
            seen.insert(k);
        }
    }
    let (mut best, mut run) = (0, 0);
    for k in 1..=n {
        if seen.contains(&k) {
            run = 0;
        } else {
            run += 1;
            best = best.max(run);
        }
    }
    best
}

#[test]
fn backup_takes_over_after_kill9_and_old_master_rejoins() {
    let sw = Netns::new("ha-sw");
    let a = Netns::new("ha-a");
    let b = Netns::new("ha-b");
    let host = Netns::new("ha-h");
    sw.sh("ip link add br0 type bridge && ip link set br0 up");
    for (ns, peer, local) in [(&a, "pa", "lan0"), (&b, "pb", "lan0"), (&host, "ph", "h0")] {
        veth(&sw, peer, ns, local);
        sw.sh(&format!("ip link set {peer} master br0"));
    }
    host.sh("ip addr add 10.77.0.10/24 dev h0");
    let (mac_a, mac_b) = (mac(&a, "lan0"), mac(&b, "lan0"));

    let mut cap = Capture::start_filtered(&sw, "br0", "ip proto 112 or arp");
    let name_a = unique("haa");
    let name_b = unique("hab");
    let mut gw_a = Gateway::start(&a, &config(&name_a, "10.77.0.1", 200, true));
    let gw_b = Gateway::start(&b, &config(&name_b, "10.77.0.2", 100, true));

    // The higher priority holds the address.
    assert!(
        wait_until(30, || vip_owner(&host).as_deref() == Some(mac_a.as_str())),
        "gateway A (priority 200) never answered for {VIP}"
    );

    // Pings every 10 ms, counted per sequence number, across kill -9 of A.
    let n = 1500u64;
    let pinger = host.spawn(&format!("ping -D -i 0.01 -c {n} -W 1 {VIP}"));
    std::thread::sleep(std::time::Duration::from_secs(3));
    gw_a.kill9();
    let out = pinger.wait_with_output().expect("ping");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let gap = longest_gap(&text, n);
    let answered = answered(&text, n);
    let silence = longest_silence_ms(&text);
    // Master_Down_Interval of B: 3 × interval + skew ((256 − 100) × 50 / 256).
    let mdi_ms = (3 * INTERVAL_CS + (256 - 100) * INTERVAL_CS / 256) * 10;
    eprintln!(
        "kill -9 gap: {gap} consecutive pings unanswered, {silence} ms between the replies around it; Master_Down_Interval {mdi_ms} ms; {answered}/{n} answered"
    );
    assert!(answered > n / 2, "B never answered: {answered}/{n}");
    // Each lost ping is at least 10 ms apart: bound the gap by the
    // protocol's own timer plus a generous margin for a loaded machine.
    assert!(gap > 0, "no ping was lost: was A master at all?");
    assert!(
        silence <= mdi_ms + 5000,
        "{silence} ms without a reply > Master_Down_Interval {mdi_ms} ms + 5 s"
    );
    assert_eq!(vip_owner(&host).as_deref(), Some(mac_b.as_str()));

    // A comes back without preemption: B stays master, A sends nothing.
    let gw_a2 = Gateway::start(&a, &config(&name_a, "10.77.0.1", 200, false));
    std::thread::sleep(std::time::Duration::from_millis(mdi_ms * 3));
    assert_eq!(vip_owner(&host).as_deref(), Some(mac_b.as_str()));
    drop(gw_a2);

    let file = cap.stop().to_path_buf();
    // Adverts by source: A's stop after the kill, and A never sends one
    // while it rejoins without preemption (a backup is silent).
    let adverts = tshark(&file, "vrrp", "-e ip.src -e vrrp.prio");
    assert!(
        adverts.iter().any(|l| l.starts_with("10.77.0.1")),
        "{adverts:?}"
    );
    assert!(
        adverts.iter().any(|l| l.starts_with("10.77.0.2")),
        "{adverts:?}"
    );
    let last_a = adverts.iter().rposition(|l| l.starts_with("10.77.0.1"));
    let first_b = adverts.iter().position(|l| l.starts_with("10.77.0.2\t100"));
    assert!(
        last_a < first_b.map(|b| b + 1 + 3),
        "A advertised after B took over: {adverts:?}"
    );
    // The standby never answers ARP for the virtual address.
    let replies = tshark(
        &file,
        &format!("arp.opcode == 2 && arp.src.proto_ipv4 == {VIP}"),
        "-e arp.src.hw_mac",
    );
    assert!(!replies.is_empty());
    drop(gw_b);
}

/// keepalived 2.2.7 (Debian's, VRRPv3) and a vecgate in one group: each
/// takes the address when it should. A's link is cut (the peer's veth end
/// goes down) rather than keepalived killed: a SIGKILLed keepalived leaves
/// the address on its interface.
#[test]
fn keepalived_and_vecgate_elect_by_priority() {
    let sw = Netns::new("hk-sw");
    let a = Netns::new("hk-a");
    let k = Netns::new("hk-k");
    let host = Netns::new("hk-h");
    sw.sh("ip link add br0 type bridge && ip link set br0 up");
    for (ns, peer, local) in [(&a, "pa", "lan0"), (&k, "pk", "k0"), (&host, "ph", "h0")] {
        veth(&sw, peer, ns, local);
        sw.sh(&format!("ip link set {peer} master br0"));
    }
    host.sh("ip addr add 10.77.0.10/24 dev h0");
    k.sh("ip addr add 10.77.0.3/24 dev k0");
    let (mac_a, mac_k) = (mac(&a, "lan0"), mac(&k, "k0"));
    let dir = std::env::temp_dir().join(unique("hk"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("k.conf"),
        format!(
            "global_defs {{ vrrp_version 3 }}\nvrrp_instance V {{\n state BACKUP\n interface k0\n virtual_router_id 51\n priority 100\n advert_int 0.5\n virtual_ipaddress {{ {VIP}/24 }}\n}}\n"
        ),
    )
    .unwrap();
    let d = dir.display();
    let mut keepalived = k.spawn(&format!(
        "keepalived -n -l -D -P -f {d}/k.conf -p {d}/k.pid -r {d}/kv.pid"
    ));
    let mut cap = Capture::start_filtered(&sw, "br0", "ip proto 112");
    let gw = Gateway::start(&a, &config(&unique("hka"), "10.77.0.1", 200, true));
    assert!(
        wait_until(30, || vip_owner(&host).as_deref() == Some(mac_a.as_str())),
        "vecgate (priority 200) never held {VIP} against keepalived (100)"
    );
    // keepalived stepped down: it dropped the address from its interface.
    assert!(wait_until(10, || !k
        .sh("ip -4 addr show dev k0")
        .contains(VIP)));

    // Cut vecgate's link: keepalived takes over.
    sw.sh("ip link set pa down");
    assert!(
        wait_until(30, || vip_owner(&host).as_deref() == Some(mac_k.as_str())),
        "keepalived did not take {VIP} over"
    );
    // Back: vecgate (higher, preempting) takes it again.
    sw.sh("ip link set pa up");
    assert!(
        wait_until(30, || vip_owner(&host).as_deref() == Some(mac_a.as_str())),
        "vecgate did not take {VIP} back"
    );
    assert!(wait_until(10, || !k
        .sh("ip -4 addr show dev k0")
        .contains(VIP)));
    let file = cap.stop().to_path_buf();
    let adverts = tshark(&file, "vrrp", "-e ip.src -e vrrp.prio");
    assert!(adverts.iter().any(|l| l == "10.77.0.3\t100"), "{adverts:?}");
    assert!(adverts.iter().any(|l| l == "10.77.0.1\t200"), "{adverts:?}");
    drop(gw);
    let _ = keepalived.kill();
    let _ = keepalived.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
