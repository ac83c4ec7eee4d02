//! Routes from real FRR into vecgate's FIB over FPM, with a
//! real FRR peer announcing and withdrawing them over eBGP.
//!
//! ```text
//!   h1 10.1.0.2 ── lan [vecgate] wan 10.0.1.1 ──┐
//!                      │ FPM server 10.255.0.1   │ br0 (in b): 10.0.1.0/24
//!                      │                         │
//!   ctl: zebra (dplane_fpm_nl) + bgpd AS 65001 ──┤ 10.0.1.3
//!        fpm1 10.255.0.2 ─ veth ─ fpm0 (gw ns)    │
//!   b:   zebra + bgpd AS 65002, 10.0.1.2 ────────┘── 10.88.1.1 ── h2 10.88.1.2
//! ```
//!
//! Site A's FRR runs in its own namespace `ctl` with its own link onto the
//! underlay segment (the BGP session does not cross vecgate yet: punting
//! TCP 179 to the host stack is the next step of the issue); its zebra
//! streams the selected routes to vecgate's FPM server over a veth.
//! B's next hop (10.0.1.2) is on vecgate's `wan` subnet, so vecgate
//! resolves it through its own neighbour table, as for a static route.

mod common;
#[path = "common/frr.rs"]
mod frr;

use common::{ping_count, unique, veth, wait_until, Capture, Gateway, Netns};
use frr::{bgpd_conf, zebra_fpm, Frr};
use serde_json::Value;
use std::collections::BTreeSet;

struct Topo {
    h1: Netns,
    h2: Netns,
    gw: Netns,
    ctl: Netns,
    b: Netns,
    api: String,
}

fn topo() -> Topo {
    let t = Topo {
        h1: Netns::new("h1"),
        h2: Netns::new("h2"),
        gw: Netns::new("gw"),
        ctl: Netns::new("ctl"),
        b: Netns::new("rb"),
        api: format!("/tmp/{}.sock", unique("api")),
    };
    veth(&t.h1, "eth0", &t.gw, "gw-h1");
    veth(&t.gw, "gw-b", &t.b, "b-gw");
    veth(&t.ctl, "ctl-b", &t.b, "b-ctl");
    veth(&t.gw, "fpm0", &t.ctl, "fpm1");
    veth(&t.b, "b-h2", &t.h2, "eth0");
    t.h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    t.gw.sh("ip addr add 10.255.0.1/30 dev fpm0");
    t.ctl
        .sh("ip addr add 10.255.0.2/30 dev fpm1 && ip addr add 10.0.1.3/24 dev ctl-b");
    t.b.sh("ip link add br0 type bridge && ip link set br0 up && \
         ip link set b-gw master br0 && ip link set b-ctl master br0 && \
         ip addr add 10.0.1.2/24 dev br0 && ip addr add 10.88.1.1/24 dev b-h2 && \
         ip route add 10.1.0.0/24 via 10.0.1.1 && sysctl -qw net.ipv4.ip_forward=1");
    t.h2.sh("ip addr add 10.88.1.2/24 dev eth0 && ip route add default via 10.88.1.1");
    t
}

fn gw_config(api: &str) -> String {
    format!(
        r#"[gateway]
name = "fpm"
workers = 1
api = "unix:{api}"

[[interface]]
name = "lan"
host = "gw-h1"
driver = "af_packet"
addresses = ["10.1.0.1/24"]

[[interface]]
name = "wan"
host = "gw-b"
driver = "af_packet"
addresses = ["10.0.1.1/24"]

[routing]
fpm = "10.255.0.1:2620"

[[routing.table]]
id = 254
vrf = "default"
"#
    )
}

fn ctl_zebra() -> String {
    zebra_fpm("10.255.0.1")
}

fn ctl_bgpd() -> String {
    bgpd_conf(65001, &[("10.0.1.2", 65002)], &[])
}

/// B announces 10.88.1.0/24 (h2's subnet) and `extra` more prefixes.
fn b_bgpd(extra: &[String]) -> String {
    let mut n = vec!["10.88.1.0/24".to_owned()];
    n.extend_from_slice(extra);
    bgpd_conf(65002, &[("10.0.1.3", 65001)], &n)
}

/// vecgate's learned routes in its FIB: prefix → via, read with `vecgate
/// show routes --json`.
fn fib(t: &Topo) -> BTreeSet<String> {
    fib_of(&t.gw, &t.api)
}

fn fib_of(gw: &Netns, api: &str) -> BTreeSet<String> {
    let out = gw.try_sh(&format!(
        "{} show routes --json --api unix:{}",
        common::vecgate_bin().display(),
        api
    ));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v.as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["kind"] == "learned" && r["active"] == true)
        .inspect(|r| assert_eq!(r["source"], "fpm/bgp", "{r}"))
        .filter_map(|r| r["prefix"].as_str().map(str::to_owned))
        .collect()
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn b_network(b: &Frr, add: bool, prefix: &str) {
    b.network(65002, add, prefix);
}

#[test]
fn bgp_routes_from_frr_forward_and_withdraw() {
    let t = topo();
    let gw = Gateway::start(&t.gw, &gw_config(&t.api));
    let b = Frr::start(
        &t.b.name,
        "frrb",
        "",
        &b_bgpd(&["10.88.2.0/24".into()]),
        false,
    );
    let ctl = Frr::start(&t.ctl.name, "frra", &ctl_zebra(), &ctl_bgpd(), true);
    let want = set(&["10.88.1.0/24", "10.88.2.0/24"]);
    assert!(
        wait_until(60, || fib(&t) == want),
        "vecgate's FIB never held B's routes: {:?}; zebra: {:?}\n{}",
        fib(&t),
        ctl.bgp_routes(),
        ctl.vtysh(&["show bgp summary", "show fpm counters"])
    );
    // Traffic follows the learned route, byte-exact and counted per
    // sequence number.
    common::warm_up(&t.h1, "10.88.1.2");
    let (n, out) = ping_count(&t.h1, 10, 20, "-i 0.1 10.88.1.2");
    assert_eq!(n, 10, "{out}");
    common::tcp_transfer(&t.h1, &t.h2, "10.88.1.2", 4 << 20);

    // The withdrawal removes the route; traffic stops (no route left:
    // vecgate answers net unreachable).
    b_network(&b, false, "10.88.1.0/24");
    assert!(
        wait_until(60, || fib(&t) == set(&["10.88.2.0/24"])),
        "withdrawn route still in vecgate's FIB: {:?}",
        fib(&t)
    );
    let (n, out) = ping_count(&t.h1, 3, 6, "-i 0.2 10.88.1.2");
    assert_eq!(n, 0, "traffic after the withdrawal: {out}");
    assert!(out.contains("Unreachable"), "no unreachable answer: {out}");
    // Announced again: back.
    b_network(&b, true, "10.88.1.0/24");
    assert!(wait_until(60, || fib(&t) == want), "{:?}", fib(&t));
    let (n, out) = ping_count(&t.h1, 5, 20, "-i 0.2 10.88.1.2");
    assert_eq!(n, 5, "{out}");
    drop(gw);
}

#[test]
fn zebra_and_vecgate_restarts_converge_to_frr_without_stale_routes() {
    let t = topo();
    let mut gw = Gateway::start(&t.gw, &gw_config(&t.api));
    let b = Frr::start(
        &t.b.name,
        "frrb",
        "",
        &b_bgpd(&["10.88.2.0/24".into(), "10.88.3.0/24".into()]),
        false,
    );
    let ctl = Frr::start(&t.ctl.name, "frra", &ctl_zebra(), &ctl_bgpd(), true);
    let all = set(&["10.88.1.0/24", "10.88.2.0/24", "10.88.3.0/24"]);
    assert!(wait_until(60, || fib(&t) == all), "{:?}", fib(&t));

    // zebra dies (first: with bgpd gone first, zebra would withdraw its
    // routes over FPM before dying), bgpd with it; while they are down B
    // withdraws one prefix. vecgate keeps what it had until zebra replays.
    ctl.kill("zebra");
    ctl.kill("bgpd");
    b_network(&b, false, "10.88.3.0/24");
    assert_eq!(fib(&t), all, "routes kept while zebra is away");
    ctl.start_zebra(true);
    ctl.daemon("bgpd", "");
    let two = set(&["10.88.1.0/24", "10.88.2.0/24"]);
    assert!(
        wait_until(90, || ctl.bgp_routes() == two && fib(&t) == two),
        "after zebra's restart: vecgate {:?}, zebra {:?}",
        fib(&t),
        ctl.bgp_routes()
    );
    common::warm_up(&t.h1, "10.88.1.2");

    // vecgate restarts: zebra reconnects and replays; B announces a new
    // prefix meanwhile.
    gw.stop();
    drop(gw);
    b_network(&b, true, "10.88.4.0/24");
    let gw = Gateway::start(&t.gw, &gw_config(&t.api));
    let three = set(&["10.88.1.0/24", "10.88.2.0/24", "10.88.4.0/24"]);
    assert!(
        wait_until(90, || fib(&t) == three && ctl.bgp_routes() == three),
        "after vecgate's restart: vecgate {:?}, zebra {:?}",
        fib(&t),
        ctl.bgp_routes()
    );
    common::warm_up(&t.h1, "10.88.1.2");
    let (n, out) = ping_count(&t.h1, 5, 20, "-i 0.2 10.88.1.2");
    assert_eq!(n, 5, "{out}");
    drop(gw);
}

/// `n` distinct /24s in 10.128.0.0/9.
fn many(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.{}.{}.0/24", 128 + i / 256, i % 256))
        .collect()
}

#[test]
fn ten_thousand_routes_install_and_a_sample_forwards() {
    const N: usize = 10_000;
    let t = topo();
    let _gw = Gateway::start(&t.gw, &gw_config(&t.api));
    let prefixes = many(N);
    // B answers on an address inside a sample of the prefixes.
    let sample = [0, N / 2, N - 1];
    for i in sample {
        let p = &prefixes[i];
        let a = p.replace(".0/24", ".1");
        t.b.sh(&format!("ip addr add {a}/32 dev lo"));
    }
    let _b = Frr::start(&t.b.name, "frrb", "", &b_bgpd(&prefixes), false);
    let _ctl = Frr::start(&t.ctl.name, "frra", &ctl_zebra(), &ctl_bgpd(), true);
    let mut last = 0;
    let done = wait_until(240, || {
        last = fib(&t).len();
        last == N + 1
    });
    assert!(done, "{last} of {} learned routes in vecgate's FIB", N + 1);
    let f = fib(&t);
    assert!(prefixes.iter().all(|p| f.contains(p)));
    for i in sample {
        let a = prefixes[i].replace(".0/24", ".1");
        common::warm_up(&t.h1, &a);
        let (n, out) = ping_count(&t.h1, 5, 20, &format!("-i 0.2 {a}"));
        assert_eq!(n, 5, "{a}: {out}");
    }
    // Nothing failed to install.
    let m = t.gw.sh(&format!(
        "{} show routes --json --api unix:{} | grep -c '\"active\": false' || true",
        common::vecgate_bin().display(),
        t.api
    ));
    assert_eq!(m.trim(), "0", "inactive learned routes");
}

/// Site A's FRR on the gateway host itself: its BGP session with B goes
/// through vecgate (TCP 179 to vecgate's wan address punted to the host's
/// stack through the `[[routing.punt]]` TUN, the host's segments routed
/// out of wan), and the routes it learns come back over FPM.
///
/// ```text
///   h1 10.1.0.2 ── lan [vecgate] wan 10.0.1.1 ── b-gw 10.0.1.2 (b: bgpd AS 65002) ── h2 10.88.1.2
///                     │ TUN vg-default (10.1.0.1/24, 10.0.1.1/24 on gw's host)
///   gw's host: zebra (dplane_fpm_nl → 127.0.0.1:2620) + bgpd AS 65001
/// ```
#[test]
fn bgp_session_through_vecgate_reaches_the_peer_and_its_routes_forward() {
    let h1 = Netns::new("h1");
    let h2 = Netns::new("h2");
    let gwn = Netns::new("gw");
    let bn = Netns::new("rb");
    let api = format!("/tmp/{}.sock", unique("api"));
    veth(&h1, "eth0", &gwn, "gw-h1");
    veth(&gwn, "gw-b", &bn, "b-gw");
    veth(&bn, "b-h2", &h2, "eth0");
    h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    bn.sh(
        "ip addr add 10.0.1.2/24 dev b-gw && ip addr add 10.88.1.1/24 dev b-h2 && \
           ip route add 10.1.0.0/24 via 10.0.1.1 && sysctl -qw net.ipv4.ip_forward=1",
    );
    h2.sh("ip addr add 10.88.1.2/24 dev eth0 && ip route add default via 10.88.1.1");
    let cfg = format!(
        r#"[gateway]
name = "bgp"
workers = 1
api = "unix:{api}"

[[interface]]
name = "lan"
host = "gw-h1"
driver = "af_packet"
addresses = ["10.1.0.1/24"]

[[interface]]
name = "wan"
host = "gw-b"
driver = "af_packet"
addresses = ["10.0.1.1/24"]

[routing]
fpm = "127.0.0.1:2620"

[[routing.punt]]
vrf = "default"
tap = "vg-default"
"#
    );
    let _gw = Gateway::start(&gwn, &cfg);
    // The TUN is up on the host with the VRF's addresses.
    let addrs = gwn.sh("ip -4 -o addr show dev vg-default");
    assert!(
        addrs.contains("10.0.1.1/24") && addrs.contains("10.1.0.1/24"),
        "{addrs}"
    );
    // Every BGP segment on B's side of the wire (the referee).
    let mut cap = Capture::start_filtered(&bn, "b-gw", "tcp port 179");
    let b = Frr::start(
        &bn.name,
        "frrb",
        "",
        &bgpd_conf(65002, &[("10.0.1.1", 65001)], &["10.88.1.0/24".into()]),
        false,
    );
    let a = Frr::start(
        &gwn.name,
        "frra",
        &zebra_fpm("127.0.0.1"),
        &bgpd_conf(65001, &[("10.0.1.2", 65002)], &[]),
        true,
    );
    let want = set(&["10.88.1.0/24"]);
    assert!(
        wait_until(90, || fib_of(&gwn, &api) == want),
        "vecgate's FIB never held B's route: {:?}\nA: {}\nB: {}",
        fib_of(&gwn, &api),
        a.vtysh(&["show bgp summary"]),
        b.vtysh(&["show bgp summary"])
    );
    common::warm_up(&h1, "10.88.1.2");
    let (n, out) = ping_count(&h1, 10, 20, "-i 0.1 10.88.1.2");
    assert_eq!(n, 10, "{out}");
    // The session's segments crossed vecgate's wan both ways, from and to
    // vecgate's own address, and vecgate counted what it punted.
    let pcap = cap.stop().to_path_buf();
    let from_a = common::tshark(
        &pcap,
        "ip.src == 10.0.1.1 && tcp.port == 179 && bgp",
        "-e bgp.type",
    );
    let to_a = common::tshark(
        &pcap,
        "ip.dst == 10.0.1.1 && tcp.port == 179 && bgp",
        "-e bgp.type",
    );
    assert!(
        from_a.iter().any(|t| t.split(',').any(|x| x == "1")) && !to_a.is_empty(),
        "no BGP OPEN from 10.0.1.1 / nothing back: {from_a:?} {to_a:?}"
    );
    assert!(common::counter(&api, "ip-local", "host-punted") > 0);

    // B withdraws: the route leaves vecgate's FIB, traffic stops.
    b.network(65002, false, "10.88.1.0/24");
    assert!(
        wait_until(60, || fib_of(&gwn, &api).is_empty()),
        "withdrawn route still in vecgate's FIB: {:?}",
        fib_of(&gwn, &api)
    );
    let (n, out) = ping_count(&h1, 3, 6, "-i 0.2 10.88.1.2");
    assert_eq!(n, 0, "traffic after the withdrawal: {out}");
}
