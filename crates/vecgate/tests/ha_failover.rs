//! Failover of an active/standby vecgate pair with a GRE tunnel to a third
//! vecgate, on [`common::ha_pair`]:
//! h1 — {a1, a2 sharing VRRP addresses on the LAN and the underlay} ══ gb — h2.
//!
//! What is judged, each by an observer of its own in the same run:
//! - the TCP transfer's receiver (one accepted connection, its SHA-256 and
//!   byte count equal to the sender's): the connection survived;
//! - h1's pings every 10 ms, by sequence number: how many were lost and
//!   the gap (reported, never asserted in ms: the scheduler moves it);
//! - `vecgate show ha --json` and `/metrics` of both members: who is master;
//! - captures on both bridges: the new master's gratuitous ARP / unsolicited
//!   NA, and no frame of a backup with a virtual address as its IP source
//!   or ARP sender.

mod common;

use common::ha_pair::*;
use common::*;
use std::process::Child;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `ping -D -i 0.01 -c n` from h1 in the background.
fn pinger(p: &HaPair, args: &str, n: u64) -> Child {
    // -w: keep waiting for late replies (a loaded machine), see `answered`.
    p.h1.spawn(&format!(
        "ping -D -n -i 0.01 -c {n} -w {} {args}",
        n / 100 + 60
    ))
}

/// What the pings saw: (answered of 1..=n, longest run of lost sequence
/// numbers, the time between the replies around it in ms).
fn ping_gap(out: &str, n: u64) -> (u64, u64, f64) {
    let mut at = std::collections::BTreeMap::new();
    for l in out.lines().filter(|l| l.contains(" bytes from ")) {
        let seq = l
            .split_whitespace()
            .find_map(|w| w.strip_prefix("icmp_seq="))
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|k| (1..=n).contains(k));
        let ts = l
            .strip_prefix('[')
            .and_then(|r| r.split(']').next())
            .and_then(|t| t.parse::<f64>().ok());
        if let (Some(k), Some(t)) = (seq, ts) {
            at.insert(k, t);
        }
    }
    let mut run = (0u64, 0f64);
    let mut prev: Option<(u64, f64)> = None;
    for (&k, &t) in &at {
        if let Some((pk, pt)) = prev {
            if k - pk - 1 > run.0 {
                run = (k - pk - 1, (t - pt) * 1000.0);
            }
        }
        prev = Some((k, t));
    }
    (at.len() as u64, run.0, run.1)
}

fn wait_ping(c: Child) -> String {
    let out = c.wait_with_output().expect("ping");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// One frame of a capture, the fields the checks read.
#[derive(Debug)]
struct Frame {
    t: f64,
    mac: String,
    /// IPv4 or IPv6 source.
    src: String,
    arp_sender: String,
    arp_target: String,
    icmp6: String,
    na_target: String,
}

fn frames(file: &std::path::Path) -> Vec<Frame> {
    tshark(
        file,
        "arp || vrrp || ip || ipv6",
        "-e frame.time_epoch -e eth.src -e ip.src -e ipv6.src -e arp.src.proto_ipv4 -e arp.dst.proto_ipv4 -e icmpv6.type -e icmpv6.nd.na.target_address",
    )
    .iter()
    .map(|l| {
        let f: Vec<&str> = l.split('\t').collect();
        let c = |i: usize| f.get(i).copied().unwrap_or("").to_owned();
        Frame {
            t: c(0).parse().unwrap_or(0.0),
            mac: c(1),
            src: if c(2).is_empty() { c(3) } else { c(2) },
            arp_sender: c(4),
            arp_target: c(5),
            icmp6: c(6),
            na_target: c(7),
        }
    })
    .collect()
}

/// Frames from `mac` in [from, to) that use a virtual address: as IP
/// source, as ARP sender, or as the target of an NA.
fn on_vips<'a>(fs: &'a [Frame], mac: &str, from: f64, to: f64) -> Vec<&'a Frame> {
    let vips = [LAN_VIP, WAN_VIP, LAN_VIP6];
    fs.iter()
        .filter(|f| f.mac == mac && f.t >= from && f.t < to)
        .filter(|f| {
            vips.contains(&f.src.as_str())
                || vips.contains(&f.arp_sender.as_str())
                || vips.contains(&f.na_target.as_str())
        })
        .collect()
}

/// The time of the first gratuitous ARP (sender = target = `vip`) from
/// `mac` at or after `from`.
fn garp(fs: &[Frame], mac: &str, vip: &str, from: f64) -> Option<f64> {
    fs.iter()
        .find(|f| f.mac == mac && f.t >= from && f.arp_sender == vip && f.arp_target == vip)
        .map(|f| f.t)
}

/// An unsolicited NA (ICMPv6 136) for `vip` from `mac` at or after `from`.
fn na(fs: &[Frame], mac: &str, vip: &str, from: f64) -> bool {
    fs.iter()
        .any(|f| f.mac == mac && f.t >= from && f.icmp6 == "136" && f.na_target == vip)
}

/// The value of the metric sample starting with `prefix`.
fn sample(scrape: &str, prefix: &str) -> Option<f64> {
    scrape
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn master_metric(p: &HaPair, m: Member, ifname: &str, vrid: u8) -> Option<f64> {
    sample(
        &p.metrics(m),
        &format!(
            "vecgate_vrrp_state{{interface=\"{ifname}\",vrid=\"{vrid}\",family=\"ipv4\",state=\"master\"}}"
        ),
    )
}

/// Asserts `mac` used no virtual address in [from, to) if `member` never
/// became master in that time (`took` = how often it did, from its
/// counters). A backup that missed the master's adverts for
/// Master_Down_Interval (a scheduler stall on a loaded machine does that
/// at 100 ms adverts) rightly takes over for a moment; that is reported,
/// not a failure.
fn silent_as_backup(fs: &[Frame], mac: &str, from: f64, to: f64, member: &str, took: u64) {
    let bad = on_vips(fs, mac, from, to);
    if took == 0 {
        assert!(
            bad.is_empty(),
            "{member} used a virtual address as backup: {bad:?}"
        );
    } else {
        eprintln!(
            "{member} became master {took} times on its own (missed adverts): {} frames on the virtual addresses, not judged",
            bad.len()
        );
    }
}

/// Captures on both bridges: frames of VRRP, ARP, ND and anything with a
/// virtual address as its IP source, first 128 bytes; bounded by the
/// transfer's pace (a few MB/s).
fn captures(p: &HaPair) -> (Capture, Capture) {
    let lan = Capture::start_with(
        &p.sw,
        "br0",
        "-s 128",
        &format!("arp or ip proto 112 or icmp6 or src host {LAN_VIP} or src host {LAN_VIP6}"),
    );
    let wan = Capture::start_with(
        &p.sw,
        "br1",
        "-s 128",
        &format!("arp or ip proto 112 or icmp6 or src host {WAN_VIP}"),
    );
    (lan, wan)
}

/// kill -9 of the master during a long transfer and 10 ms pings; the old
/// master comes back and, preemption being off, stays backup; then a
/// planned switchover hands the addresses back during another transfer.
#[test]
fn gre_kill9_restart_without_preemption_and_switchover() {
    let mut p = HaPair::new(
        HaOpts {
            preempt: false,
            ..HaOpts::default()
        },
        gre,
    );
    p.start(Member::B);
    p.start(Member::A1);
    // a1 is master before a2 even starts: without preemption a2 (100)
    // would not take over anyway, but a1 must not lose a race at start.
    p.wait_roles(Member::A1, None, 30);
    p.start(Member::A2);
    p.wait_roles(Member::A1, Some(Member::A2), 30);
    warm_up(&p.h1, H2);
    let (mac1, mac2) = (p.mac(Member::A1, "lan0"), p.mac(Member::A2, "lan0"));
    let (wmac1, wmac2) = (p.mac(Member::A1, "wan0"), p.mac(Member::A2, "wan0"));
    let (mut lan, mut wan) = captures(&p);

    // 1. kill -9 of a1 in the middle of 24 s of data.
    let t_start = now();
    let n = 3600;
    let ping = pinger(&p, H2, n);
    let xfer = Transfer::start(&p, H2, 7100, 48 << 20, 24);
    std::thread::sleep(Duration::from_secs(8));
    let blip_a2 = p.became_master(Member::A2);
    let t_kill = now();
    p.kill9(Member::A1);
    p.wait_roles(Member::A2, None, 30);
    assert_eq!(master_metric(&p, Member::A2, "wan0", WAN_VRID), Some(1.0));
    assert_eq!(master_metric(&p, Member::A2, "lan0", LAN_VRID), Some(1.0));
    let ha = p.show_ha(Member::A2);
    for g in ha.as_array().expect("show ha") {
        assert_eq!(g["last_transition"]["reason"], "master-down", "{ha}");
    }
    xfer.check();
    let out = wait_ping(ping);
    let (ok, lost_run, gap_ms) = ping_gap(&out, n);
    eprintln!(
        "kill -9: {ok}/{n} pings answered, longest loss {lost_run} pings, gap {gap_ms:.0} ms"
    );
    assert!(
        (n - 20..=n).all(|s| out.contains(&format!("icmp_seq={s} "))),
        "pings did not resume after the failover:\n{out}"
    );

    // 2. a1 comes back: preemption off, so it stays backup while a2 goes on
    // advertising, and the pings go on through a2 without a loss.
    let t_back = now();
    p.start(Member::A1);
    let mut last = serde_json::Value::Null;
    assert!(
        wait_until(60, || {
            last = p.show_ha(Member::A1);
            last.as_array().is_some_and(|v| {
                v.iter().all(|g| {
                    g["state"] == "backup" && g["adverts_received"].as_u64().unwrap_or(0) >= 20
                })
            })
        }),
        "the restarted a1 did not settle as backup: {last}"
    );
    assert!(p.all_in(Member::A2, "master"), "{}", p.show_ha(Member::A2));
    let (got, text) = ping_count(&p.h1, 100, 60, &format!("-i 0.01 {H2}"));
    assert_eq!(got, 100, "pings lost while a1 was backup:\n{text}");
    let t_back_end = now();
    let blip_a1 = p.became_master(Member::A1);

    // 3. Planned switchover a2 → a1 during a transfer.
    let n2 = 2000;
    let ping = pinger(&p, H2, n2);
    let xfer = Transfer::start(&p, H2, 7101, 24 << 20, 12);
    std::thread::sleep(Duration::from_secs(5));
    let t_sw = now();
    let (a1_before, a2_before) = (p.became_master(Member::A1), p.became_master(Member::A2));
    let out = std::process::Command::new(vecgate_bin())
        .args(["ha", "switchover", "--json", "--api", &p.api(Member::A2)])
        .output()
        .expect("vecgate ha switchover");
    assert!(
        out.status.success(),
        "switchover: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    p.wait_roles(Member::A1, Some(Member::A2), 30);
    let t_sw_seen = now();
    let a2_took = p.became_master(Member::A2);
    xfer.check();
    let out = wait_ping(ping);
    let (ok2, lost_run2, gap2) = ping_gap(&out, n2);
    eprintln!(
        "switchover: {ok2}/{n2} pings answered ({} lost), longest loss {lost_run2} pings, gap {gap2:.0} ms",
        n2 - ok2
    );
    assert!(
        (n2 - 20..=n2).all(|s| out.contains(&format!("icmp_seq={s} "))),
        "pings did not resume after the switchover:\n{out}"
    );
    p.assert_switchover_loss(
        (Member::A2, a2_before),
        (Member::A1, a1_before),
        n2 - ok2,
        &out,
    );
    let t_end = now();
    let a2_took = p.became_master(Member::A2) - a2_took;

    // The wire.
    let lf = frames(lan.stop());
    let wf = frames(wan.stop());
    // a2 backup until the kill: never a virtual address.
    for (fs, mac) in [(&lf, &mac2), (&wf, &wmac2)] {
        silent_as_backup(fs, mac, t_start, t_kill, "a2", blip_a2);
    }
    // a2's takeover announced on both segments.
    assert!(
        garp(&lf, &mac2, LAN_VIP, t_kill).is_some(),
        "no GARP for {LAN_VIP} from a2"
    );
    assert!(
        garp(&wf, &wmac2, WAN_VIP, t_kill).is_some(),
        "no GARP for {WAN_VIP} from a2"
    );
    // The restarted a1, backup: never a virtual address.
    for (fs, mac) in [(&lf, &mac1), (&wf, &wmac1)] {
        silent_as_backup(fs, mac, t_back, t_back_end, "the restarted a1", blip_a1);
    }
    // The switchover: a1 announces; a2's last frame on a virtual address
    // precedes a1's first announcement (never two owners on the wire), and
    // once the test saw a1 master, a2 is silent on them.
    for (fs, mac, wmac, vip) in [(&lf, &mac1, &mac2, LAN_VIP), (&wf, &wmac1, &wmac2, WAN_VIP)] {
        let first = garp(fs, mac, vip, t_sw)
            .unwrap_or_else(|| panic!("no GARP for {vip} from a1 after the switchover"));
        let late = on_vips(fs, wmac, first, t_end);
        eprintln!(
            "switchover: {} frames of a2 on {vip} after a1's announcement",
            late.len()
        );
        silent_as_backup(fs, wmac, t_sw_seen, t_end, "a2 after it resigned", a2_took);
    }
}

/// IPv6 VRRP group on the LAN too, preemption on: kill -9 of the master
/// with ping6 and an IPv6 transfer; the new master's unsolicited NA; the
/// old master comes back and takes over again, cleanly.
#[test]
fn gre_kill9_ipv6_and_preemption() {
    let mut p = HaPair::new(
        HaOpts {
            ipv6: true,
            ..HaOpts::default()
        },
        gre,
    );
    p.start(Member::B);
    p.start(Member::A1);
    p.wait_roles(Member::A1, None, 30);
    p.start(Member::A2);
    p.wait_roles(Member::A1, Some(Member::A2), 30);
    warm_up(&p.h1, H2_6);
    warm_up(&p.h1, H2);
    let (mac1, mac2) = (p.mac(Member::A1, "lan0"), p.mac(Member::A2, "lan0"));
    let (mut lan, mut wan) = captures(&p);

    // 1. kill -9 during 22 s of IPv6 data and ping6.
    let t_start = now();
    let n = 3000;
    let ping = pinger(&p, H2_6, n);
    let xfer = Transfer::start(&p, H2_6, 7102, 44 << 20, 22);
    std::thread::sleep(Duration::from_secs(8));
    let blip_a2 = p.became_master(Member::A2);
    let t_kill = now();
    p.kill9(Member::A1);
    p.wait_roles(Member::A2, None, 30);
    xfer.check();
    let out = wait_ping(ping);
    let (ok, lost_run, gap_ms) = ping_gap(&out, n);
    eprintln!(
        "kill -9 (IPv6): {ok}/{n} ping6 answered, longest loss {lost_run}, gap {gap_ms:.0} ms"
    );
    assert!(
        (n - 20..=n).all(|s| out.contains(&format!("icmp_seq={s} "))),
        "ping6 did not resume after the failover:\n{out}"
    );

    // 2. a1 comes back with preemption on: it takes the addresses back
    // while a transfer runs, and the transfer survives that too.
    let n2 = 2000;
    let ping = pinger(&p, H2_6, n2);
    let xfer = Transfer::start(&p, H2, 7103, 24 << 20, 14);
    std::thread::sleep(Duration::from_secs(3));
    let t_back = now();
    p.start(Member::A1);
    p.wait_roles(Member::A1, Some(Member::A2), 30);
    let t_seen = now();
    let a2_took = p.became_master(Member::A2);
    xfer.check();
    let out = wait_ping(ping);
    let (ok2, lost2, gap2) = ping_gap(&out, n2);
    eprintln!("preemption: {ok2}/{n2} ping6 answered, longest loss {lost2}, gap {gap2:.0} ms");
    assert!(
        (n2 - 20..=n2).all(|s| out.contains(&format!("icmp_seq={s} "))),
        "ping6 did not resume after a1 took over again:\n{out}"
    );
    let ha = p.show_ha(Member::A2);
    for g in ha.as_array().expect("show ha") {
        assert_eq!(g["last_transition"]["reason"], "preempted", "{ha}");
    }
    let t_end = now();
    let a2_took = p.became_master(Member::A2) - a2_took;

    let lf = frames(lan.stop());
    let wf = frames(wan.stop());
    let wmac2 = p.mac(Member::A2, "wan0");
    for (fs, mac) in [(&lf, &mac2), (&wf, &wmac2)] {
        silent_as_backup(fs, mac, t_start, t_kill, "a2", blip_a2);
    }
    assert!(
        na(&lf, &mac2, LAN_VIP6, t_kill),
        "no unsolicited NA for {LAN_VIP6} from a2"
    );
    assert!(
        garp(&lf, &mac2, LAN_VIP, t_kill).is_some(),
        "no GARP for {LAN_VIP} from a2"
    );
    assert!(
        na(&lf, &mac1, LAN_VIP6, t_back),
        "no unsolicited NA for {LAN_VIP6} from a1"
    );
    assert!(garp(&wf, &p.mac(Member::A1, "wan0"), WAN_VIP, t_back).is_some());
    for (fs, mac) in [(&lf, &mac2), (&wf, &wmac2)] {
        silent_as_backup(fs, mac, t_seen, t_end, "a2 after it was preempted", a2_took);
    }
}
