//! The ingress guard on one end of a veth pair between two namespaces
//! (needs root): the tcx program this kernel takes, the forced nftables
//! fallback, a stale table of an older vecgate replaced, a table a live
//! process owns refused, and what a holder killed with SIGKILL leaves
//! behind (nothing). Referees: the kernel's answers to B's pings (silent
//! behind the guard, answering again without it), what AF_PACKET receives,
//! the tcx programs attached on the netdev (`BPF_PROG_QUERY`) and
//! `nft list tables`. Each test builds its own namespaces.

mod common;

use common::*;
use packet::Pool;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use vecgate_io::netdev::{self, GuardMode, GUARD_MODE_ENV};
use vecgate_io::{AfPacketOpts, AfPacketPort, GuardMechanism, IngressGuard};

/// B's ARP entry for A pinned, so that only the guard decides whether A's
/// kernel answers (and the control ping answers).
fn setup() -> VethPair {
    let t = VethPair::new();
    let va = t.va.clone();
    let mac_a = t.a.run_in(move || netdev::mac(&va).unwrap());
    t.b.exec(&[
        "ip",
        "neigh",
        "replace",
        &t.ip_a,
        "lladdr",
        &mac_str(mac_a),
        "dev",
        &t.vb,
    ]);
    assert!(answers(&t), "control: A's kernel answers");
    t
}

/// Whether A's kernel answers one of B's pings within 3 s.
fn answers(t: &VethPair) -> bool {
    t.b.try_exec(&["ping", "-c", "1", "-W", "3", &t.ip_a])
}

/// Whether A's kernel stays silent to two pings.
fn silent(t: &VethPair) -> bool {
    !t.b.try_exec(&["ping", "-c", "2", "-i", "0.2", "-W", "2", &t.ip_a])
}

fn install(t: &VethPair, name: &str, mode: GuardMode) -> IngressGuard {
    let (va, name) = (t.va.clone(), name.to_string());
    t.a.run_in(move || IngressGuard::install_with(&va, &name, mode).expect("install guard"))
}

fn nft_table(t: &VethPair, name: &str) -> Option<String> {
    let out = Command::new("ip")
        .args([
            "netns", "exec", &t.a.name, "nft", "list", "table", "netdev", name,
        ])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// ICMP echo requests an AF_PACKET socket on A sees while B pings.
fn requests_seen(t: &VethPair) -> usize {
    let va = t.va.clone();
    let mut port = t
        .a
        .run_in(move || AfPacketPort::open(&va, AfPacketOpts::default()).expect("open af_packet"));
    let mut pool = Pool::new(64);
    recv_for(&mut port, &mut pool, Duration::from_millis(50), |_| {});
    assert!(silent(t), "A's kernel answered behind the guard");
    let mut n = 0;
    recv_for(&mut port, &mut pool, Duration::from_millis(100), |p| {
        n += usize::from(is_icmp(p.data(), 8, None));
    });
    n
}

/// Under tcx each guard is one `vecgate_guard` program behind its own BPF
/// link, and no nftables table exists. Two guards on one netdev both
/// attach: the kernel stays silent until the last one is removed.
#[test]
fn tcx_guard_is_a_linked_program_and_no_table() {
    let t = setup();
    let g1 = install(&t, "vecgate_one", GuardMode::Auto);
    assert_eq!(g1.mechanism(), GuardMechanism::Tcx);
    let progs = guard_programs(&t.a, &t.va);
    assert_eq!(progs.len(), 1, "{progs:?}");
    assert_eq!(Some(progs[0].link_id), g1.link_id());
    assert!(guard_tables(&t.a).is_empty(), "{:?}", guard_tables(&t.a));
    assert!(requests_seen(&t) >= 2, "AF_PACKET still sees the requests");

    let g2 = install(&t, "vecgate_two", GuardMode::Tcx);
    let progs = guard_programs(&t.a, &t.va);
    assert_eq!(progs.len(), 2, "{progs:?}");
    // Each guard goes in front of what is there.
    assert_eq!(Some(progs[0].link_id), g2.link_id());
    assert_eq!(Some(progs[1].link_id), g1.link_id());
    g1.remove().expect("remove");
    assert_eq!(guard_programs(&t.a, &t.va).len(), 1);
    assert!(silent(&t), "the second guard still drops");
    drop(g2); // on this thread, outside A's namespace
    assert!(guard_programs(&t.a, &t.va).is_empty());
    assert!(answers(&t), "A's kernel answers again");
}

/// Forced (`GuardMode::Nftables`, what a kernel without tcx gets): an
/// owner table with the drop chain, no tcx program, AF_PACKET still
/// receives; the table goes with the guard.
#[test]
fn nftables_fallback_silences_kernel_but_not_af_packet() {
    let t = setup();
    let name = format!("vecgate_{}", t.va);
    let g = install(&t, &name, GuardMode::Nftables);
    assert_eq!(g.mechanism(), GuardMechanism::Nftables);
    assert_eq!(g.link_id(), None);
    let table = nft_table(&t, &name).expect("the guard's table");
    assert!(
        table.contains("flags owner") && table.contains("policy drop"),
        "{table}"
    );
    assert!(guard_programs(&t.a, &t.va).is_empty());
    assert!(requests_seen(&t) >= 2, "AF_PACKET still sees the requests");
    drop(g);
    assert!(guard_tables(&t.a).is_empty(), "{:?}", guard_tables(&t.a));
    assert!(answers(&t), "A's kernel answers again");
}

/// A table of the guard's name without the owner flag (an older vecgate,
/// killed) drops everything for ever: installing the guard deletes it,
/// under tcx as under nftables.
#[test]
fn stale_table_of_an_older_vecgate_is_replaced() {
    let t = setup();
    let name = format!("vecgate_{}", t.va);
    for mode in [GuardMode::Auto, GuardMode::Nftables] {
        t.a.exec(&["nft", "add", "table", "netdev", &name]);
        t.a.exec(&[
            "nft",
            &format!(
                "add chain netdev {name} ingress {{ type filter hook ingress device {} priority 0; policy drop; }}",
                t.va
            ),
        ]);
        assert!(silent(&t), "the stale table drops");
        let g = install(&t, &name, mode);
        match mode {
            GuardMode::Nftables => {
                let table = nft_table(&t, &name).expect("the guard's table");
                assert!(table.contains("flags owner"), "{table}");
            }
            _ => {
                assert_eq!(g.mechanism(), GuardMechanism::Tcx);
                assert!(nft_table(&t, &name).is_none(), "stale table left");
            }
        }
        drop(g);
        assert!(guard_tables(&t.a).is_empty(), "{:?}", guard_tables(&t.a));
        assert!(answers(&t), "A's kernel answers once the guard is gone");
    }
}

/// A table of the guard's name owned by a live socket (another running
/// nftables guard) is not taken, whichever mechanism is asked for.
#[test]
fn table_owned_by_a_live_guard_is_refused() {
    let t = setup();
    let name = format!("vecgate_{}", t.va);
    let first = install(&t, &name, GuardMode::Nftables);
    for mode in [GuardMode::Auto, GuardMode::Nftables] {
        let (va, n) = (t.va.clone(), name.clone());
        let e =
            t.a.run_in(move || IngressGuard::install_with(&va, &n, mode))
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("nft failed: table netdev {name} is owned by another running process")
        );
    }
    assert!(guard_programs(&t.a, &t.va).is_empty());
    drop(first);
    assert!(answers(&t));
}

const CHILD_ENV: &str = "VECGATE_TEST_GUARD_HOLDER";

/// Not a test by itself: the body of the process the `killed_holder_*`
/// tests start (this binary again, with `CHILD_ENV` = "<netns path>
/// <netdev>"). It installs a guard the way vecgate does
/// ([`IngressGuard::install`], mode from `VECGATE_INGRESS_GUARD`), says
/// which, and waits to be killed (exiting by itself after 2 minutes).
#[test]
fn guard_holder_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (ns, dev) = spec.split_once(' ').expect("netns and netdev");
    if ns != "-" {
        netdev::enter_netns(Path::new(ns)).expect("setns");
    }
    let g = IngressGuard::install(dev).unwrap_or_else(|e| panic!("install guard: {e}"));
    println!("READY {}", g.mechanism());
    std::thread::sleep(Duration::from_secs(120));
}

/// The holder process, killed on drop (if a test fails first).
struct Holder(Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_holder(t: &VethPair, mode: Option<&str>) -> (Holder, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env(CHILD_ENV, format!("{} {}", t.a.path().display(), t.va));
    holder(cmd, mode)
}

/// The holder started by `cmd` (this binary, or a command that execs it
/// in the end), with `CHILD_ENV` set; waits for its READY line.
fn holder(mut cmd: Command, mode: Option<&str>) -> (Holder, String) {
    cmd.args([
        "--exact",
        "guard_holder_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env_remove(GUARD_MODE_ENV)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if let Some(m) = mode {
        cmd.env(GUARD_MODE_ENV, m);
    }
    let mut child = Holder(cmd.spawn().expect("spawn the holder"));
    let out = child.0.stdout.take().unwrap();
    let ready = BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        // libtest prints "test guard_holder_child ... " before the body runs.
        .find_map(|l| l.split_once("READY ").map(|(_, m)| m.trim().to_string()));
    let Some(mechanism) = ready else {
        let _ = child.0.kill();
        let _ = child.0.wait();
        let mut err = String::new();
        if let Some(mut e) = child.0.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        panic!("the holder did not install its guard: {err}");
    };
    (child, mechanism)
}

/// SIGKILL the holder; the kernel removes its guard with it.
fn kill9(mut h: Holder) {
    h.0.kill().expect("SIGKILL");
    let st = h.0.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGKILL)
    );
}

/// A process holding a tcx guard killed with SIGKILL leaves no program on
/// the netdev, and A's kernel answers again at once.
#[test]
fn killed_holder_of_a_tcx_guard_leaves_nothing() {
    let t = setup();
    let (h, mechanism) = start_holder(&t, None);
    assert_eq!(mechanism, "tcx");
    assert_eq!(guard_programs(&t.a, &t.va).len(), 1);
    assert!(guard_tables(&t.a).is_empty(), "{:?}", guard_tables(&t.a));
    assert!(silent(&t), "A's kernel answered behind the guard");
    kill9(h);
    assert!(guard_programs(&t.a, &t.va).is_empty());
    assert!(guard_tables(&t.a).is_empty(), "{:?}", guard_tables(&t.a));
    assert!(answers(&t), "A's kernel answers again");
}

/// The same with the nftables guard (`VECGATE_INGRESS_GUARD=nftables` in
/// the holder's environment): its owner table goes with the process.
#[test]
fn killed_holder_of_an_nftables_guard_leaves_nothing() {
    let t = setup();
    let (h, mechanism) = start_holder(&t, Some("nftables"));
    assert_eq!(mechanism, "nftables");
    assert_eq!(guard_tables(&t.a).len(), 1, "{:?}", guard_tables(&t.a));
    assert!(guard_programs(&t.a, &t.va).is_empty());
    assert!(silent(&t), "A's kernel answered behind the guard");
    kill9(h);
    assert!(guard_tables(&t.a).is_empty(), "{:?}", guard_tables(&t.a));
    assert!(answers(&t), "A's kernel answers again");
}

/// Where tcx cannot be attached the guard falls back to nftables by
/// itself: here a holder without CAP_BPF and CAP_SYS_ADMIN (dropped from
/// its bounding and inheritable sets by `setpriv`, already inside A's
/// namespace through `ip netns exec`), whose program load fails with
/// EPERM as it does on a host that grants vecgate CAP_NET_ADMIN only
/// (an older kernel fails the link with EINVAL instead).
#[test]
fn tcx_refused_falls_back_to_nftables() {
    let t = setup();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &t.a.name])
        .args(["setpriv", "--bounding-set", "-bpf,-sys_admin"])
        .args(["--inh-caps", "-bpf,-sys_admin", "--"])
        .arg(std::env::current_exe().unwrap())
        .env(CHILD_ENV, format!("- {}", t.va));
    let (h, mechanism) = holder(cmd, None);
    assert_eq!(mechanism, "nftables");
    assert_eq!(guard_tables(&t.a).len(), 1, "{:?}", guard_tables(&t.a));
    assert!(guard_programs(&t.a, &t.va).is_empty());
    assert!(silent(&t), "A's kernel answered behind the guard");
    kill9(h);
    assert!(guard_tables(&t.a).is_empty(), "{:?}", guard_tables(&t.a));
    assert!(answers(&t), "A's kernel answers again");
    // `VECGATE_INGRESS_GUARD=tcx` forbids the fallback: a clear error.
    let out = Command::new("ip")
        .args(["netns", "exec", &t.a.name])
        .args(["setpriv", "--bounding-set", "-bpf,-sys_admin"])
        .args(["--inh-caps", "-bpf,-sys_admin", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "guard_holder_child", "--nocapture"])
        .env(CHILD_ENV, format!("- {}", t.va))
        .env(GUARD_MODE_ENV, "tcx")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "install guard: ingress guard: attaching the tcx ingress program on {} \
             (Linux >= 6.6, CAP_BPF): Operation not permitted",
            t.va
        )),
        "{text}"
    );
    assert!(guard_tables(&t.a).is_empty(), "{:?}", guard_tables(&t.a));
    // With CAP_BPF the same holder takes tcx.
    let (h, mechanism) = start_holder(&t, None);
    assert_eq!(mechanism, "tcx");
    kill9(h);
}

/// An unknown `VECGATE_INGRESS_GUARD` is an error naming it, not a silent
/// default.
#[test]
fn unknown_guard_mode_is_refused() {
    let t = setup();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    let out = cmd
        .args([
            "--exact",
            "guard_holder_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{} {}", t.a.path().display(), t.va))
        .env(GUARD_MODE_ENV, "iptables")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("VECGATE_INGRESS_GUARD=\"iptables\": expected auto, tcx or nftables"),
        "{text}"
    );
    assert!(guard_programs(&t.a, &t.va).is_empty());
    assert!(answers(&t));
}
