//! The speaker driven by hand: adverts, links and time from the test, its
//! outputs checked in order. No socket, no thread.

use super::*;
use std::net::Ipv4Addr;

const PORT: u16 = 2;
const GW: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn v4(s: &str) -> IpAddr {
    IpAddr::V4(s.parse::<Ipv4Addr>().unwrap())
}

fn spec(primary: &str, priority: u8) -> GroupSpec {
    GroupSpec {
        vrid: 51,
        port: PORT,
        interface: "wan0".into(),
        host: "veth-wan".into(),
        mac: GW,
        family: Family::V4,
        vips: vec![v4("192.0.2.100")],
        primary: v4(primary),
        priority,
        interval_cs: 100,
        preempt: true,
        track: vec![("lan0".into(), "veth-lan".into())],
        penalty: 30,
    }
}

/// The VRRP packet inside an IPv4 advert frame.
fn vrrp_of(frame: &[u8]) -> &[u8] {
    &frame[14 + 20..]
}

fn frames(out: &[Out]) -> Vec<&Vec<u8>> {
    out.iter()
        .filter_map(|o| match o {
            Out::SendFrame { port, frame } if *port == PORT => Some(frame),
            _ => None,
        })
        .collect()
}

fn pos(out: &[Out], want: &Out) -> usize {
    out.iter()
        .position(|o| o == want)
        .unwrap_or_else(|| panic!("{want:?} not in {out:?}"))
}

/// A speaker that became master alone, and the time it did.
fn master(t0: Now) -> (Speaker, Now) {
    let mut s = Speaker::new(vec![spec("192.0.2.1", 100)]);
    let out = s.start(t0);
    assert!(!out.contains(&Out::TakeOver), "{out:?}");
    let t1 = t0.after(Duration::from_secs(4));
    let out = s.poll(t1);
    // The synced state first, then the addresses, then the announcement.
    let take = pos(&out, &Out::TakeOver);
    let role = pos(
        &out,
        &Out::Role {
            elected: true,
            draining: false,
        },
    );
    let rebuild = pos(&out, &Out::Rebuild);
    let announce = pos(&out, &Out::Announce(PORT));
    assert!(
        take < role && role < rebuild && rebuild < announce,
        "{out:?}"
    );
    assert_eq!(s.held()[&PORT], vec![v4("192.0.2.100")]);
    (s, t1)
}

/// Alone on its link, a group becomes master after Master_Down_Interval:
/// it asks for the synced state before the addresses are taken, and its
/// advert is a well-formed VRRPv3 frame from its primary address.
#[test]
fn a_new_master_takes_over_before_taking_the_addresses() {
    let (s, t1) = master(Now::read());
    let st = s.status(t1.at);
    assert_eq!(st[0].state, State::Master);
    assert_eq!(
        st[0].last.map(|l| (l.0, l.1)),
        Some((t1.wall_ms, State::Master))
    );
}

/// Every advert frame parses back (RFC 5798 §5.1: TTL 255, protocol
/// 112, the group address) with the group's VRID, priority and addresses.
#[test]
fn advert_frames_parse_back() {
    let (mut s, t1) = master(Now::read());
    let out = s.poll(t1.after(Duration::from_secs(1)));
    let f = frames(&out);
    assert_eq!(f.len(), 1, "one advert per interval: {out:?}");
    let f = f[0];
    assert_eq!(&f[..6], &[0x01, 0x00, 0x5e, 0x00, 0x00, 0x12]);
    assert_eq!(&f[6..12], &GW);
    assert_eq!(
        (f[14 + 8], f[14 + 9]),
        (wire::vrrp::TTL, wire::vrrp::PROTOCOL)
    );
    let p = wire::vrrp::Packet::new_checked(vrrp_of(f), Family::V4).unwrap();
    let r = VrrpRepr::parse(&p, &v4("192.0.2.1"), &Family::V4.group()).unwrap();
    assert_eq!((r.vrid, r.priority, r.max_advert_int), (51, 100, 100));
    assert_eq!(r.addrs, vec![v4("192.0.2.100")]);

    let mut v6 = spec("192.0.2.1", 100);
    v6.family = Family::V6;
    v6.primary = "fe80::1".parse().unwrap();
    v6.vips = vec!["2001:db8::100".parse().unwrap()];
    let f = advert_frame(&v6, 0).unwrap();
    assert_eq!(&f[12..14], &[0x86, 0xdd]);
    assert_eq!(
        (f[14 + 6], f[14 + 7]),
        (wire::vrrp::PROTOCOL, wire::vrrp::TTL)
    );
    let p = wire::vrrp::Packet::new_checked(&f[14 + 40..], Family::V6).unwrap();
    let r = VrrpRepr::parse(&p, &v6.primary, &Family::V6.group()).unwrap();
    assert_eq!(r.priority, 0);
}

/// A planned switchover is make-before-break: the master sends priority
/// 0 but keeps its addresses (still sending, `draining`) until the new
/// master advertises; then it releases them and tells the sync it no
/// longer sends.
#[test]
fn a_switchover_keeps_the_addresses_until_the_new_master_advertises() {
    let (mut s, t1) = master(Now::read());
    let (st, out) = s
        .switchover(t1, Some("wan0"), None, Duration::from_secs(60))
        .unwrap();
    assert_eq!(st[0].state, State::Backup);
    let f = frames(&out);
    let p = wire::vrrp::Packet::new_checked(vrrp_of(f[0]), Family::V4).unwrap();
    let r = VrrpRepr::parse(&p, &v4("192.0.2.1"), &Family::V4.group()).unwrap();
    assert_eq!(r.priority, 0, "priority 0 announces the resignation");
    assert!(!out.contains(&Out::Rebuild), "the addresses stay: {out:?}");
    assert!(out.contains(&Out::Role {
        elected: false,
        draining: true
    }));
    assert_eq!(s.held()[&PORT], vec![v4("192.0.2.100")]);

    // The new master's advert (its own frame, as the peer sends it).
    let peer = advert_frame(&spec("192.0.2.2", 100), 100).unwrap();
    let t2 = t1.after(Duration::from_millis(700));
    let out = s.advert(
        t2,
        PORT,
        v4("192.0.2.2"),
        Family::V4.group(),
        vrrp_of(&peer),
    );
    assert!(out.contains(&Out::Rebuild), "{out:?}");
    assert!(out.contains(&Out::Role {
        elected: false,
        draining: false
    }));
    assert!(s.held()[&PORT].is_empty());
    // Held back for the hold: the peer's advert does not make it preempt.
    assert!(s.status(t2.at)[0].held_secs > 0);
}

/// Without a new master's advert, the drain ends at Master_Down_Interval:
/// no backup took over, so the group is master again, the synced state
/// asked for before the addresses are published again.
#[test]
fn a_drain_ends_without_a_new_master() {
    let (mut s, t1) = master(Now::read());
    s.switchover(t1, None, Some(51), Duration::from_secs(60))
        .unwrap();
    let out = s.poll(t1.after(Duration::from_secs(1)));
    assert!(!out.contains(&Out::Rebuild));
    let deadline = s.next_deadline().unwrap();
    assert!(deadline <= t1.at + Duration::from_secs(4));
    let out = s.poll(t1.after(Duration::from_secs(4)));
    assert!(
        pos(&out, &Out::TakeOver) < pos(&out, &Out::Rebuild),
        "{out:?}"
    );
    assert_eq!(s.status(t1.at)[0].state, State::Master);
    assert_eq!(s.held()[&PORT], vec![v4("192.0.2.100")]);
}

/// A switchover names groups by interface and VRID, and only a master
/// resigns.
#[test]
fn switchover_refusals() {
    let t0 = Now::read();
    let mut s = Speaker::new(vec![spec("192.0.2.1", 100)]);
    s.start(t0);
    let hold = Duration::from_secs(60);
    assert_eq!(
        s.switchover(t0, Some("lan9"), None, hold).err(),
        Some(SwitchoverError::NoSuchGroup { vrid: false })
    );
    assert_eq!(
        s.switchover(t0, None, Some(7), hold).err(),
        Some(SwitchoverError::NoSuchGroup { vrid: true })
    );
    assert_eq!(
        s.switchover(t0, None, None, hold).err(),
        Some(SwitchoverError::NotMaster)
    );
}

/// A tracked interface going down costs its penalty (advertised at once
/// by a master); back up, the priority is restored. The group's own link
/// going down makes it give the addresses up.
#[test]
fn tracking_and_links() {
    let (mut s, t1) = master(Now::read());
    let out = s.links(t1, |host| host != "veth-lan");
    assert_eq!(s.status(t1.at)[0].priority, 70);
    assert_eq!(s.status(t1.at)[0].tracked, vec![("lan0".to_owned(), false)]);
    let f = frames(&out);
    assert!(!f.is_empty(), "{out:?}");
    let p = wire::vrrp::Packet::new_checked(vrrp_of(f[0]), Family::V4).unwrap();
    let r = VrrpRepr::parse(&p, &v4("192.0.2.1"), &Family::V4.group()).unwrap();
    assert_eq!(r.priority, 70);
    s.links(t1, |_| true);
    assert_eq!(s.status(t1.at)[0].priority, 100);
    let out = s.links(t1, |host| host != "veth-wan");
    assert!(out.contains(&Out::Rebuild), "{out:?}");
    assert!(s.held()[&PORT].is_empty());
    assert_ne!(s.status(t1.at)[0].state, State::Master);
}
