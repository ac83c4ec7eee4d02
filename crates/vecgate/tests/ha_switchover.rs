//! VRRP operations between a vecgate and keepalived 2.2.7 (VRRPv3) on one
//! LAN: interface tracking and the planned switchover, each step judged by
//! what the other side and the wire show — keepalived's `ip addr`, the
//! host's pings (answered, and by which MAC), a capture of the adverts and
//! ARP on the bridge — and read back through `vecgate show ha` and
//! `/metrics`. No timing is compared: every wait polls for a condition.

mod common;

use common::*;
use serde_json::Value;
use std::process::Command;

const VIP: &str = "10.78.0.254";
const A_ADDR: &str = "10.78.0.1";
const K_ADDR: &str = "10.78.0.3";

fn config(name: &str, sock: &str) -> String {
    format!(
        r#"[gateway]
name = "{name}"
api = "unix:{sock}"

[[interface]]
name = "lan0"
host = "lan0"
driver = "af_packet"
addresses = ["{A_ADDR}/24"]

[[interface]]
name = "wan0"
host = "wan0"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[ha]
priority = 150
interval_cs = 50

[[ha.group]]
vrid = 52
interface = "lan0"
addresses = ["{VIP}"]
track = ["wan0"]
track_penalty = 60
"#
    )
}

fn vecgate(api: &str, args: &[&str]) -> std::process::Output {
    Command::new(vecgate_bin())
        .args(args)
        .args(["--json", "--api", api])
        .output()
        .expect("vecgate CLI")
}

/// The one group of `vecgate show ha --json`.
fn show_ha(api: &str) -> Value {
    let out = vecgate(api, &["show", "ha"]);
    assert!(
        out.status.success(),
        "show ha: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("show ha --json");
    v[0].clone()
}

fn metrics(sock: &str) -> String {
    sh(&format!(
        "curl -s --unix-socket {sock} http://vecgate/metrics"
    ))
}

/// The value of the sample that starts with `prefix` (name and labels).
fn sample(scrape: &str, prefix: &str) -> Option<f64> {
    scrape
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn labels(extra: &str) -> String {
    format!("interface=\"lan0\",vrid=\"52\",family=\"ipv4\"{extra}")
}

fn mac(ns: &Netns, ifname: &str) -> String {
    ns.sh(&format!("cat /sys/class/net/{ifname}/address"))
        .trim()
        .to_owned()
}

fn keepalived_holds_vip(k: &Netns) -> bool {
    k.sh("ip -4 addr show dev k0").contains(VIP)
}

#[test]
fn tracking_and_planned_switchover_with_keepalived() {
    let sw = Netns::new("hs-sw");
    let a = Netns::new("hs-a");
    let k = Netns::new("hs-k");
    let host = Netns::new("hs-h");
    let up = Netns::new("hs-u");
    sw.sh("ip link add br0 type bridge && ip link set br0 up");
    for (ns, peer, local) in [(&a, "pa", "lan0"), (&k, "pk", "k0"), (&host, "ph", "h0")] {
        veth(&sw, peer, ns, local);
        sw.sh(&format!("ip link set {peer} master br0"));
    }
    // The tracked uplink.
    veth(&a, "wan0", &up, "u0");
    host.sh("ip addr add 10.78.0.10/24 dev h0");
    k.sh(&format!("ip addr add {K_ADDR}/24 dev k0"));
    let (mac_a, mac_k) = (mac(&a, "lan0"), mac(&k, "k0"));

    let dir = std::env::temp_dir().join(unique("hs"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("k.conf"),
        format!(
            "global_defs {{ vrrp_version 3 }}\nvrrp_instance V {{\n state BACKUP\n interface k0\n virtual_router_id 52\n priority 100\n advert_int 0.5\n virtual_ipaddress {{ {VIP}/24 }}\n}}\n"
        ),
    )
    .unwrap();
    let d = dir.display();
    let mut keepalived = k.spawn(&format!(
        "keepalived -n -l -D -P -f {d}/k.conf -p {d}/k.pid -r {d}/kv.pid"
    ));
    let sock = dir.join("api.sock").display().to_string();
    let api = format!("unix:{sock}");
    let gw = Gateway::start(&a, &config(&unique("hsa"), &sock));

    // 1. vecgate (150) is master; keepalived (100) backs off.
    let mut last = Value::Null;
    assert!(
        wait_until(30, || {
            last = show_ha(&api);
            last["state"] == "master"
        }),
        "vecgate never became master: {last}"
    );
    assert!(wait_until(10, || !keepalived_holds_vip(&k)));
    assert_eq!(last["interface"], "lan0");
    assert_eq!(last["vrid"], 52);
    assert_eq!(last["family"], "ipv4");
    assert_eq!(last["priority"], 150);
    assert_eq!(last["effective_priority"], 150);
    assert_eq!(last["preempt"], true);
    assert_eq!(last["advert_interval_cs"], 50);
    assert_eq!(last["master"], A_ADDR);
    assert_eq!(last["tracked"][0]["interface"], "wan0");
    assert_eq!(last["tracked"][0]["up"], true);
    let m = metrics(&sock);
    assert_eq!(
        sample(
            &m,
            &format!("vecgate_vrrp_state{{{}}}", labels(",state=\"master\""))
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(
            &m,
            &format!("vecgate_vrrp_effective_priority{{{}}}", labels(""))
        ),
        Some(150.0),
        "{m}"
    );
    assert!(ping_ok(&host, &format!("-c 1 -W 2 {VIP}")));

    let mut cap = Capture::start_filtered(&sw, "br0", "ip proto 112 or arp or icmp");

    // 2. The tracked link goes down: priority 150 − 60 = 90 < 100, and
    // keepalived (preempting) takes the address.
    a.sh("ip link set wan0 down");
    assert!(
        wait_until(30, || {
            last = show_ha(&api);
            last["state"] == "backup" && last["master"] == K_ADDR
        }),
        "keepalived did not take over from a tracked-down vecgate: {last}"
    );
    assert_eq!(last["effective_priority"], 90, "{last}");
    assert_eq!(last["tracked"][0]["up"], false, "{last}");
    assert_eq!(last["last_transition"]["reason"], "preempted", "{last}");
    assert!(wait_until(20, || keepalived_holds_vip(&k)));
    let m = metrics(&sock);
    assert_eq!(
        sample(
            &m,
            &format!("vecgate_vrrp_effective_priority{{{}}}", labels(""))
        ),
        Some(90.0),
        "{m}"
    );
    assert_eq!(
        sample(
            &m,
            &format!("vecgate_vrrp_state{{{}}}", labels(",state=\"backup\""))
        ),
        Some(1.0),
        "{m}"
    );

    // 3. The link returns: 150 again, and vecgate preempts.
    a.sh("ip link set wan0 up");
    assert!(
        wait_until(30, || {
            last = show_ha(&api);
            last["state"] == "master"
        }),
        "vecgate did not take the address back: {last}"
    );
    assert_eq!(last["effective_priority"], 150, "{last}");
    assert_eq!(last["tracked"][0]["up"], true, "{last}");
    assert!(wait_until(20, || !keepalived_holds_vip(&k)));
    assert!(wait_until(20, || ping_ok(
        &host,
        &format!("-c 1 -W 1 {VIP}")
    )));

    // 4. Planned switchover with pings to the address running throughout.
    let n = 300u64;
    let pinger = host.spawn(&format!("ping -D -i 0.05 -c {n} -W 1 {VIP}"));
    // Some pings answered by vecgate before it resigns.
    let before = std::time::Instant::now();
    while before.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = vecgate(&api, &["ha", "switchover", "--hold-secs", "600"]);
    assert!(
        out.status.success(),
        "ha switchover: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let resigned: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(resigned[0]["vrid"], 52, "{resigned}");
    assert_eq!(resigned[0]["state"], "backup", "{resigned}");
    assert!(wait_until(20, || keepalived_holds_vip(&k)));
    assert!(
        wait_until(20, || {
            last = show_ha(&api);
            last["master"] == K_ADDR
        }),
        "{last}"
    );
    assert_eq!(last["state"], "backup");
    assert_eq!(last["last_transition"]["reason"], "switchover", "{last}");
    assert_eq!(last["priority_zero_sent"], 1, "{last}");
    assert!(last["preempt_held_secs"].as_u64().unwrap() > 0, "{last}");
    // Not master any more: a second switchover is refused.
    let again = vecgate(&api, &["ha", "switchover"]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("409"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    // Preemption held: vecgate (150) hears keepalived (100) advertise for
    // a while and stays backup.
    let heard = last["adverts_received"].as_u64().unwrap();
    assert!(
        wait_until(60, || {
            last = show_ha(&api);
            last["adverts_received"].as_u64().unwrap() >= heard + 10
        }),
        "{last}"
    );
    assert_eq!(last["state"], "backup", "vecgate flapped back: {last}");
    assert!(keepalived_holds_vip(&k));

    let ping = pinger.wait_with_output().expect("ping");
    let text = String::from_utf8_lossy(&ping.stdout).into_owned();
    let answered = answered(&text, n);
    let lost_tail = (n - 20..=n)
        .filter(|s| !text.contains(&format!("icmp_seq={s} ")))
        .count();
    eprintln!("switchover: {answered}/{n} pings answered");
    assert_eq!(lost_tail, 0, "the last pings went unanswered:\n{text}");

    let m = metrics(&sock);
    for (metric, want) in [
        (
            format!(
                "vecgate_vrrp_priority_zero_adverts_total{{{}}}",
                labels(",direction=\"sent\"")
            ),
            1.0,
        ),
        (
            format!("vecgate_vrrp_state{{{}}}", labels(",state=\"backup\"")),
            1.0,
        ),
        (
            format!("vecgate_vrrp_configured_priority{{{}}}", labels("")),
            150.0,
        ),
    ] {
        assert_eq!(sample(&m, &metric), Some(want), "{metric}\n{m}");
    }
    let to_master = sample(
        &m,
        &format!(
            "vecgate_vrrp_transitions_total{{{}}}",
            labels(",to=\"master\"")
        ),
    );
    let to_backup = sample(
        &m,
        &format!(
            "vecgate_vrrp_transitions_total{{{}}}",
            labels(",to=\"backup\"")
        ),
    );
    // startup→backup, →master, preempted, →master, switchover.
    assert_eq!(to_master, Some(2.0), "{m}");
    assert_eq!(to_backup, Some(3.0), "{m}");
    assert!(
        sample(
            &m,
            &format!("vecgate_vrrp_adverts_sent_total{{{}}}", labels(""))
        )
        .unwrap()
            > 0.0
    );

    // The wire: vecgate's priority-0 advert, then keepalived's adverts, its
    // gratuitous ARP for the address and its echo replies; vecgate silent.
    let file = cap.stop().to_path_buf();
    let frames = tshark(
        &file,
        "vrrp || arp || icmp.type == 0",
        "-e frame.number -e eth.src -e ip.src -e vrrp.prio -e arp.src.proto_ipv4 -e icmp.type",
    );
    let f: Vec<Vec<&str>> = frames.iter().map(|l| l.split('\t').collect()).collect();
    fn col<'a>(r: &[&'a str], i: usize) -> &'a str {
        r.get(i).copied().unwrap_or("")
    }
    // The 90 advert of the tracked-down vecgate is on the wire.
    assert!(
        f.iter().any(|r| col(r, 2) == A_ADDR && col(r, 3) == "90"),
        "{frames:#?}"
    );
    let zero = f
        .iter()
        .position(|r| col(r, 2) == A_ADDR && col(r, 3) == "0")
        .unwrap_or_else(|| panic!("no priority-0 advert from vecgate: {frames:#?}"));
    let after = &f[zero + 1..];
    assert!(
        after
            .iter()
            .any(|r| col(r, 2) == K_ADDR && col(r, 3) == "100"),
        "no keepalived advert after the priority-0 one: {frames:#?}"
    );
    assert!(
        after.iter().any(|r| col(r, 1) == mac_k && col(r, 4) == VIP),
        "no gratuitous ARP from keepalived after the switchover: {frames:#?}"
    );
    assert!(
        after
            .iter()
            .any(|r| col(r, 1) == mac_k && col(r, 2) == VIP && col(r, 5) == "0"),
        "no echo reply from keepalived's side after the switchover: {frames:#?}"
    );
    assert!(
        !after
            .iter()
            .any(|r| col(r, 2) == A_ADDR && !col(r, 3).is_empty()),
        "vecgate advertised after resigning: {frames:#?}"
    );
    assert!(
        !after.iter().any(|r| col(r, 1) == mac_a && col(r, 4) == VIP),
        "vecgate answered ARP for the address after resigning: {frames:#?}"
    );
    // Before the switchover, vecgate answered the pings.
    assert!(
        f[..zero]
            .iter()
            .any(|r| col(r, 1) == mac_a && col(r, 2) == VIP && col(r, 5) == "0"),
        "{frames:#?}"
    );

    drop(gw);
    let _ = keepalived.kill();
    let _ = keepalived.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
