//! Restart- and crash-safety: what a killed gateway leaves
//! behind, and what a second gateway on the same netdev is told.
//!
//!   h1 (10.1.0.2) ── eth0 ═ gw-h1 [vecgate 10.1.0.1; host 10.1.0.100] gw-h2 ── h2

mod common;

use common::{nft_guard_tables, veth, Gateway, Netns};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

struct Topo {
    h1: Netns,
    _h2: Netns,
    gw: Netns,
}

fn topo() -> Topo {
    let t = Topo {
        h1: Netns::new("h1"),
        _h2: Netns::new("h2"),
        gw: Netns::new("gw"),
    };
    veth(&t.h1, "eth0", &t.gw, "gw-h1");
    veth(&t._h2, "eth0", &t.gw, "gw-h2");
    t.h1.sh("ip addr add 10.1.0.2/24 dev eth0");
    // The host's own address on the netdev vecgate owns: silenced by the
    // ingress guard while vecgate runs, answering again once it is gone.
    t.gw.sh("ip addr add 10.1.0.100/24 dev gw-h1");
    t
}

fn config(name: &str) -> String {
    format!(
        r#"[gateway]
name = "{name}"
workers = 1
api = "unix:/tmp/{api}.sock"

[[interface]]
name = "site-a"
host = "gw-h1"
driver = "af_packet"
addresses = ["10.1.0.1/24"]

[[interface]]
name = "site-b"
host = "gw-h2"
driver = "af_packet"
addresses = ["10.2.0.1/24"]
"#,
        api = common::unique("api")
    )
}

/// The tcx guard programs on gw-h1 and gw-h2.
fn guards(t: &Topo) -> (usize, usize) {
    (
        common::tcx_guards(&t.gw, "gw-h1"),
        common::tcx_guards(&t.gw, "gw-h2"),
    )
}

/// h1 knows the host address's MAC (while a guard is up its ARP requests
/// go unanswered, and a failed entry is retried only every second: that
/// is h1's timer, not what is measured here).
fn pin_host_mac(t: &Topo) {
    let mac = t.gw.sh("cat /sys/class/net/gw-h1/address");
    t.h1.sh(&format!(
        "ip neigh replace 10.1.0.100 lladdr {} dev eth0 nud permanent",
        mac.trim()
    ));
}

/// `kill -9` of a gateway leaves no guard (the tcx programs on this
/// kernel), and the host's own address on the netdev answers within 1 s of
/// the process being reaped (measured by a pinger that runs across the
/// kill and timestamps its replies).
#[test]
fn kill9_leaves_no_guard_and_the_host_answers_within_1s() {
    let t = topo();
    let mut gw = Gateway::start(&t.gw, &config("own9"));
    common::warm_up(&t.h1, "10.1.0.1");
    // tcx: one guard program per netdev, and no nftables table.
    assert_eq!(guards(&t), (1, 1));
    assert!(
        nft_guard_tables(&t.gw).is_empty(),
        "{:?}",
        nft_guard_tables(&t.gw)
    );
    assert!(
        gw.log_contains("ingress guard installed: tcx"),
        "{}",
        gw.log_text()
    );
    assert!(
        !common::ping_ok(&t.h1, "-c 2 -i 0.2 -W 1 10.1.0.100"),
        "behind the guard the host address is silent"
    );
    pin_host_mac(&t);
    // One echo request every 20 ms across the kill; -D timestamps replies.
    let pinger = t.h1.spawn("ping -n -D -i 0.02 -W 1 -w 60 -c 1 10.1.0.100");
    std::thread::sleep(Duration::from_millis(300));
    let st = gw.kill9();
    let reaped = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    assert!(!st.success());
    // The kernel closed the BPF links with the process.
    assert_eq!(guards(&t), (0, 0));
    assert!(
        nft_guard_tables(&t.gw).is_empty(),
        "{:?}",
        nft_guard_tables(&t.gw)
    );
    let out = pinger.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text
        .lines()
        .find(|l| l.contains("bytes from"))
        .and_then(|l| l.strip_prefix('['))
        .and_then(|l| l.split(']').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no reply from the host address: {text}"));
    let after = first - reaped.as_secs_f64();
    eprintln!("host address answered {after:.3} s after the gateway was reaped");
    assert!(
        after <= 1.0,
        "first reply {after:.3} s after the gateway was reaped:\n{text}"
    );
}

/// A second gateway (another name, another API socket) on a netdev the
/// first one holds fails at once, non-zero, naming the interface and the
/// first gateway; the first keeps running with its guard.
#[test]
fn second_instance_on_the_same_netdev_is_refused() {
    let t = topo();
    let first = Gateway::start(&t.gw, &config("ownfirst"));
    let path = std::env::temp_dir().join(format!("{}.toml", common::unique("cfg")));
    std::fs::write(&path, config("ownsecond")).unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &t.gw.name])
        .arg(common::vecgate_bin())
        .args(["run", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("second instance: {err}");
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("gw-h1"), "{err}");
    assert!(
        err.contains(&format!("gateway ownfirst (pid {})", first.pid())),
        "{err}"
    );
    // It never attached: the first one's guards only.
    assert_eq!(guards(&t), (1, 1));
    assert!(
        nft_guard_tables(&t.gw).is_empty(),
        "{:?}",
        nft_guard_tables(&t.gw)
    );
    common::warm_up(&t.h1, "10.1.0.1");
}

/// With the nftables guard forced (`VECGATE_INGRESS_GUARD=nftables`, what
/// a kernel without tcx gets) the guards are owner tables, and `kill -9`
/// of the gateway leaves none: the host address answers again.
#[test]
fn kill9_with_the_nftables_guard_leaves_no_table() {
    let t = topo();
    let mut gw = Gateway::start_env(
        &t.gw,
        &config("own9n"),
        &[("VECGATE_INGRESS_GUARD", "nftables")],
    );
    common::warm_up(&t.h1, "10.1.0.1");
    assert_eq!(
        nft_guard_tables(&t.gw).len(),
        2,
        "{:?}",
        nft_guard_tables(&t.gw)
    );
    assert!(
        t.gw.sh("nft list table netdev vecgate_own9n_gw_h1")
            .contains("flags owner"),
        "the guard is an owner table"
    );
    assert_eq!(guards(&t), (0, 0));
    assert!(
        gw.log_contains("ingress guard installed: nftables (table netdev vecgate_own9n_gw_h1)"),
        "{}",
        gw.log_text()
    );
    pin_host_mac(&t);
    assert!(
        !common::ping_ok(&t.h1, "-c 2 -i 0.2 -W 1 10.1.0.100"),
        "behind the guard the host address is silent"
    );
    assert!(!gw.kill9().success());
    // The kernel closed the owning netlink socket with the process.
    assert!(
        nft_guard_tables(&t.gw).is_empty(),
        "{:?}",
        nft_guard_tables(&t.gw)
    );
    assert!(
        common::ping_ok(&t.h1, "-c 1 -W 3 10.1.0.100"),
        "the host address answers again"
    );
}
