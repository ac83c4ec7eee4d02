use super::*;
use crate::ipv6;

fn a(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

// NS fe80::1 -> ff02::1:ff00:2 for fe80::2, SLLA 52:54:00:12:34:56.
const NS: [u8; 32] = [
    0x87, 0x00, 0xf5, 0xdb, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56,
];
// NA fe80::2 -> fe80::1, S|O, TLLA 52:54:00:ab:cd:ef.
const NA: [u8; 32] = [
    0x88, 0x00, 0xf9, 0x2c, 0x60, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x01, 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef,
];
// Echo request 2001:db8::1 -> 2001:db8::2, id 0x1234 seq 1 "abcd".
const ECHO: [u8; 12] = [
    0x80, 0x00, 0x4d, 0x48, 0x12, 0x34, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64,
];

#[test]
fn echo() {
    let (s, d) = (a("2001:db8::1"), a("2001:db8::2"));
    let p = Packet::new_checked(&ECHO[..]).unwrap();
    assert!(p.verify_checksum(&s, &d));
    assert!(!p.verify_checksum(&d, &a("2001:db8::3")));
    let r = Icmpv6Repr::parse(&s, &d, &p).unwrap();
    assert_eq!(
        r,
        Icmpv6Repr::EchoRequest {
            ident: 0x1234,
            seq_no: 1,
            data: b"abcd"
        }
    );
    let mut out = [0u8; 12];
    r.emit(&s, &d, &mut Packet::new_unchecked(&mut out[..]))
        .unwrap();
    assert_eq!(out, ECHO);
}

#[test]
fn neighbor_solicit() {
    let (s, d) = (a("fe80::1"), a("ff02::1:ff00:2"));
    let p = Packet::new_checked(&NS[..]).unwrap();
    assert_eq!(p.target_addr(), a("fe80::2"));
    let r = Icmpv6Repr::parse(&s, &d, &p).unwrap();
    let want = Icmpv6Repr::NeighborSolicit {
        target: a("fe80::2"),
        lladdr: Some(MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56])),
    };
    assert_eq!(r, want);
    assert_eq!(want.buffer_len(), 32);
    let mut out = [0xaau8; 32];
    want.emit(&s, &d, &mut Packet::new_unchecked(&mut out[..]))
        .unwrap();
    assert_eq!(out, NS);
    assert_eq!(solicited_node(&a("fe80::2")), d);
}

#[test]
fn neighbor_advert() {
    let (s, d) = (a("fe80::2"), a("fe80::1"));
    let p = Packet::new_checked(&NA[..]).unwrap();
    assert_eq!(p.na_flags(), na_flags::SOLICITED | na_flags::OVERRIDE);
    let want = Icmpv6Repr::NeighborAdvert {
        flags: na_flags::SOLICITED | na_flags::OVERRIDE,
        target: a("fe80::2"),
        lladdr: Some(MacAddr([0x52, 0x54, 0, 0xab, 0xcd, 0xef])),
    };
    assert_eq!(Icmpv6Repr::parse(&s, &d, &p).unwrap(), want);
    let mut out = [0u8; 32];
    want.emit(&s, &d, &mut Packet::new_unchecked(&mut out[..]))
        .unwrap();
    assert_eq!(out, NA);
}

#[test]
fn router_messages_roundtrip() {
    let (s, d) = (a("fe80::1"), a("ff02::1"));
    let ra = Icmpv6Repr::RouterAdvert {
        hop_limit: 64,
        flags: 0x40,
        router_lifetime: 1800,
        reachable_time: 30_000,
        retrans_time: 1000,
        lladdr: Some(MacAddr([2, 0, 0, 0, 0, 1])),
        mtu: Some(1450),
    };
    let mut out = vec![0u8; ra.buffer_len()];
    ra.emit(&s, &d, &mut Packet::new_unchecked(&mut out[..]))
        .unwrap();
    assert_eq!(out.len(), 32);
    assert_eq!(&out[4..8], &[64, 0x40, 0x07, 0x08]);
    assert_eq!(&out[24..32], &[5, 1, 0, 0, 0, 0, 0x05, 0xaa]);
    let p = Packet::new_checked(&out[..]).unwrap();
    assert_eq!(Icmpv6Repr::parse(&s, &d, &p).unwrap(), ra);
    let rs = Icmpv6Repr::RouterSolicit { lladdr: None };
    let mut out = vec![0u8; rs.buffer_len()];
    rs.emit(&s, &d, &mut Packet::new_unchecked(&mut out[..]))
        .unwrap();
    let p = Packet::new_checked(&out[..]).unwrap();
    assert_eq!(Icmpv6Repr::parse(&s, &d, &p).unwrap(), rs);
}

#[test]
fn ndp_malformed() {
    let (s, d) = (a("fe80::1"), a("ff02::1:ff00:2"));
    // Every truncation: header/fixed part -> Truncated; the rest fails
    // the checksum; never a panic.
    for n in 0..NS.len() {
        match Packet::new_checked(&NS[..n]) {
            Err(e) => assert_eq!(e, Error::Truncated),
            Ok(p) => assert!(Icmpv6Repr::parse(&s, &d, &p).is_err()),
        }
    }
    // Option length 0 is invalid (RFC 4861 §4.6).
    let mut b = NS;
    b[25] = 0;
    let mut p = Packet::new_unchecked(&mut b[..]);
    p.fill_checksum(&s, &d);
    let p = Packet::new_checked(&b[..]).unwrap();
    assert_eq!(Icmpv6Repr::parse(&s, &d, &p), Err(Error::Malformed));
    // Option longer than the message.
    let mut b = NS;
    b[25] = 2;
    let mut p = Packet::new_unchecked(&mut b[..]);
    p.fill_checksum(&s, &d);
    let p = Packet::new_checked(&b[..]).unwrap();
    assert_eq!(Icmpv6Repr::parse(&s, &d, &p), Err(Error::Truncated));
    // Multicast target.
    let mut b = NS;
    b[8] = 0xff;
    let mut p = Packet::new_unchecked(&mut b[..]);
    p.fill_checksum(&s, &d);
    let p = Packet::new_checked(&b[..]).unwrap();
    assert_eq!(Icmpv6Repr::parse(&s, &d, &p), Err(Error::Malformed));
    // Non-zero code.
    let mut b = NS;
    b[1] = 1;
    let mut p = Packet::new_unchecked(&mut b[..]);
    p.fill_checksum(&s, &d);
    let p = Packet::new_checked(&b[..]).unwrap();
    assert_eq!(Icmpv6Repr::parse(&s, &d, &p), Err(Error::Malformed));
}

#[test]
fn prefix_info_option() {
    let o = NdpOption::PrefixInfo {
        prefix_len: 64,
        flags: 0xc0,
        valid_lifetime: 86400,
        preferred_lifetime: 14400,
        prefix: a("2001:db8:1::"),
    };
    let mut b = [0u8; 32];
    assert_eq!(o.emit(&mut b), Ok(32));
    assert_eq!(&b[..4], &[3, 4, 64, 0xc0]);
    let mut it = NdpOptions::new(&b);
    assert_eq!(it.next(), Some(Ok(o)));
    assert_eq!(it.next(), None);
    // A prefix option with the wrong length.
    b[1] = 1;
    assert_eq!(NdpOptions::new(&b[..8]).next(), Some(Err(Error::Malformed)));
}

#[test]
fn multicast_mapping() {
    assert_eq!(
        multicast_mac(&a("ff02::1:ff00:2")).0,
        [0x33, 0x33, 0xff, 0x00, 0x00, 0x02]
    );
    assert_eq!(
        solicited_node(&a("2001:db8::abcd:ef12:3456")),
        a("ff02::1:ff12:3456")
    );
}

fn original(len: usize, dst: &str) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let r = ipv6::Ipv6Repr {
        src_addr: a("2001:db8::1"),
        dst_addr: a(dst),
        next_header: protocol::UDP,
        payload_len: len - 40,
        hop_limit: 1,
        traffic_class: 0,
        flow_label: 0,
    };
    r.emit(&mut ipv6::Packet::new_unchecked(&mut v[..]))
        .unwrap();
    v
}

#[test]
fn errors() {
    let orig = original(1500, "2001:db8::2");
    assert!(may_send_error(&orig, ErrorKind::TimeExceeded { code: 0 }));
    let mut out = [0u8; 2000];
    let me = a("2001:db8::ff");
    let n = build_error(&mut out, &me, 64, ErrorKind::PktTooBig { mtu: 1280 }, &orig).unwrap();
    assert_eq!(n, MAX_ERROR_LEN);
    let ip = ipv6::Packet::new_checked(&out[..n]).unwrap();
    assert_eq!(ip.dst_addr(), a("2001:db8::1"));
    assert_eq!(ip.next_header(), protocol::ICMPV6);
    let icmp = Packet::new_checked(ip.payload()).unwrap();
    let r = Icmpv6Repr::parse(&me, &a("2001:db8::1"), &icmp).unwrap();
    assert_eq!(
        r,
        Icmpv6Repr::PktTooBig {
            mtu: 1280,
            data: &orig[..1232]
        }
    );
    // A short original is quoted whole.
    let small = original(60, "2001:db8::2");
    let n = build_error(
        &mut out,
        &me,
        64,
        ErrorKind::TimeExceeded { code: 0 },
        &small,
    )
    .unwrap();
    assert_eq!(n, 40 + 8 + 60);
    // Output too small for the original header.
    let mut tiny = [0u8; 87];
    assert_eq!(
        build_error(
            &mut tiny,
            &me,
            64,
            ErrorKind::TimeExceeded { code: 0 },
            &small
        ),
        Err(Error::Truncated)
    );
    // Rules: multicast destination only for PTB; not about errors.
    let mc = original(60, "ff02::1");
    assert!(!may_send_error(&mc, ErrorKind::TimeExceeded { code: 0 }));
    assert!(may_send_error(&mc, ErrorKind::PktTooBig { mtu: 1280 }));
    let mut err = small.clone();
    err[6] = protocol::ICMPV6;
    err[40] = msg_type::DST_UNREACHABLE;
    assert!(!may_send_error(&err, ErrorKind::PktTooBig { mtu: 1280 }));
    err[40] = msg_type::ECHO_REQUEST;
    assert!(may_send_error(&err, ErrorKind::PktTooBig { mtu: 1280 }));
}
