use super::*;

// SYN 10.0.0.1:40000 -> 10.0.0.2:80, seq 0x01020304, win 64240,
// MSS 1460, SACK-permitted, TS 1/0, NOP, WS 7 (Linux's layout).
const SYN: [u8; 40] = [
    0x9c, 0x40, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0,
    0x98, 0x75, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
];
// [2001:db8::2]:80 -> [2001:db8::1]:40000, PSH|ACK, NOP NOP TS 2/1,
// payload "HTTP".
const DATA6: [u8; 36] = [
    0x00, 0x50, 0x9c, 0x40, 0x11, 0x11, 0x11, 0x11, 0x01, 0x02, 0x03, 0x05, 0x80, 0x18, 0x01, 0xf6,
    0xb9, 0xe5, 0x00, 0x00, 0x01, 0x01, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01,
    0x48, 0x54, 0x54, 0x50,
];

fn v4() -> (IpAddr, IpAddr) {
    (
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    )
}

fn v6() -> (IpAddr, IpAddr) {
    (
        IpAddr::V6("2001:db8::2".parse().unwrap()),
        IpAddr::V6("2001:db8::1".parse().unwrap()),
    )
}

fn syn_repr() -> TcpRepr {
    TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq_number: 0x01020304,
        ack_number: None,
        flags: flags::SYN,
        window_len: 64240,
        urgent_at: 0,
        max_seg_size: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        sack_ranges: [None; 3],
        timestamp: Some((1, 0)),
        payload_len: 0,
    }
}

#[test]
fn deconstruct_syn() {
    let p = Packet::new_checked(&SYN[..]).unwrap();
    assert_eq!(p.src_port(), 40000);
    assert_eq!(p.dst_port(), 80);
    assert_eq!(p.seq_number(), 0x01020304);
    assert_eq!(p.header_len(), 40);
    assert!(p.syn() && !p.ack() && !p.fin() && !p.rst());
    assert_eq!(p.window_len(), 64240);
    assert_eq!(p.segment_len(), 1);
    let (s, d) = v4();
    assert!(p.verify_checksum(&s, &d));
    let opts: Vec<_> = p.options_iter().map(|o| o.unwrap().0).collect();
    assert_eq!(
        opts,
        vec![
            TcpOption::MaxSegmentSize(1460),
            TcpOption::SackPermitted,
            TcpOption::Timestamps { tsval: 1, tsecr: 0 },
            TcpOption::NoOperation,
            TcpOption::WindowScale(7),
        ]
    );
    assert_eq!(p.mss_offset(), Ok(Some(22)));
}

#[test]
fn parse_emit() {
    let (s, d) = v4();
    let p = Packet::new_checked(&SYN[..]).unwrap();
    let r = TcpRepr::parse(&p, &s, &d).unwrap();
    assert_eq!(r, syn_repr());
    let mut out = [0u8; 40];
    r.emit(&mut Packet::new_unchecked(&mut out[..]), &s, &d, &[])
        .unwrap();
    assert_eq!(out, SYN);

    let (s, d) = v6();
    let p = Packet::new_checked(&DATA6[..]).unwrap();
    let r = TcpRepr::parse(&p, &s, &d).unwrap();
    assert_eq!(r.ack_number, Some(0x01020305));
    assert_eq!(r.flags, flags::PSH | flags::ACK);
    assert_eq!(r.timestamp, Some((2, 1)));
    assert_eq!(r.payload_len, 4);
    assert_eq!(p.payload(), b"HTTP");
    let mut out = [0u8; 36];
    r.emit(&mut Packet::new_unchecked(&mut out[..]), &s, &d, b"HTTP")
        .unwrap();
    assert_eq!(out, DATA6);
}

#[test]
fn sack_roundtrip() {
    let (s, d) = v4();
    let r = TcpRepr {
        flags: flags::ACK,
        ack_number: Some(5),
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        timestamp: Some((9, 8)),
        sack_ranges: [Some((100, 200)), Some((300, 400)), None],
        ..syn_repr()
    };
    assert_eq!(r.header_len(), 20 + 12 + 4 + 16);
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut Packet::new_unchecked(&mut out[..]), &s, &d, &[])
        .unwrap();
    let p = Packet::new_checked(&out[..]).unwrap();
    assert_eq!(TcpRepr::parse(&p, &s, &d).unwrap(), r);
    // Too many options for 40 bytes.
    let big = TcpRepr {
        sack_ranges: [Some((1, 2)); 3],
        max_seg_size: Some(1),
        window_scale: Some(1),
        ..r
    };
    let mut out = vec![0u8; big.buffer_len()];
    assert_eq!(
        big.emit_header(&mut Packet::new_unchecked(&mut out[..])),
        Err(Error::BadLength)
    );
}

#[test]
fn malformed_options() {
    let cases: [&[u8]; 6] = [
        &[2, 4, 5],                   // MSS cut short
        &[2, 3, 5, 0],                // MSS with length 3
        &[8, 1, 0, 0],                // length below 2
        &[3],                         // no length byte
        &[5, 9, 0, 0, 0, 0, 0, 0, 0], // SACK with 7 data bytes
        &[1, 1, 30, 8, 0, 0],         // unknown, runs past
    ];
    for c in cases {
        let last = TcpOptions::new(c).last().unwrap();
        assert_eq!(last, Err(Error::Malformed), "{c:?}");
    }
    // EOL stops parsing: trailing garbage ignored.
    let v: Vec<_> = TcpOptions::new(&[1, 0, 0xff, 0xff]).collect();
    assert_eq!(v.len(), 2);
    // A malformed option makes Repr parsing fail (after a valid checksum).
    let mut b = SYN;
    b[21] = 3;
    let (s, d) = v4();
    let mut p = Packet::new_unchecked(&mut b[..]);
    p.fill_checksum(&s, &d).unwrap();
    let p = Packet::new_checked(&b[..]).unwrap();
    assert_eq!(TcpRepr::parse(&p, &s, &d), Err(Error::Malformed));
}

#[test]
fn truncations() {
    for n in 0..SYN.len() {
        assert_eq!(
            Packet::new_checked(&SYN[..n]).err(),
            Some(Error::Truncated),
            "{n}"
        );
    }
    let mut b = SYN;
    b[12] = 0x40;
    assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadLength));
}

#[test]
fn mss_clamp_even_and_odd() {
    let (s, d) = v4();
    let mut b = SYN;
    let mut p = Packet::new_checked(&mut b[..]).unwrap();
    assert_eq!(p.clamp_mss(1400, true), Ok(Some(1460)));
    assert!(p.verify_checksum(&s, &d));
    assert_eq!(&b[20..24], &[2, 4, 0x05, 0x78]);
    // Already small enough: untouched.
    let mut p = Packet::new_checked(&mut b[..]).unwrap();
    assert_eq!(p.clamp_mss(1400, true), Ok(None));
    assert_eq!(p.clamp_mss(1500, true), Ok(None));

    // MSS at an odd offset: NOP, MSS, then three NOPs... 24-byte header.
    let r = TcpRepr {
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        timestamp: None,
        ..syn_repr()
    };
    let mut b = [0u8; 28];
    r.emit_header(&mut Packet::new_unchecked(&mut b[..]))
        .unwrap();
    let mut p = Packet::new_unchecked(&mut b[..]);
    p.set_header_len(28);
    p.options_mut()
        .copy_from_slice(&[1, 2, 4, 0x23, 0x28, 1, 1, 0]);
    p.fill_checksum(&s, &d).unwrap();
    assert_eq!(p.mss_offset(), Ok(Some(23)));
    assert_eq!(p.clamp_mss(1200, true), Ok(Some(9000)));
    assert!(p.verify_checksum(&s, &d));
    assert_eq!(&b[20..26], &[1, 2, 4, 0x04, 0xb0, 1]);

    // Not a SYN: never touched.
    let mut b = DATA6;
    let mut p = Packet::new_checked(&mut b[..]).unwrap();
    assert_eq!(p.clamp_mss(100, true), Ok(None));
    assert_eq!(b, DATA6);

    // Partial checksum (offload): the field is left alone.
    let mut b = SYN;
    let mut p = Packet::new_checked(&mut b[..]).unwrap();
    p.set_partial_checksum(&s, &d).unwrap();
    let partial = p.checksum();
    assert_eq!(p.clamp_mss(1400, false), Ok(Some(1460)));
    assert_eq!(p.checksum(), partial);
    let full = checksum::checksum(&b);
    b[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].copy_from_slice(&full.to_be_bytes());
    assert!(Packet::new_checked(&b[..]).unwrap().verify_checksum(&s, &d));
}

#[test]
fn tsval_at_reads_and_writes_the_option_value_in_bounds_only() {
    // DATA6's Timestamps option: NOP NOP, kind 8 len 10 at 22, TSval at 24.
    let mut d = DATA6;
    let mut p = Packet::new_unchecked(&mut d[..]);
    assert_eq!(p.tsval_at(24), Some(2));
    assert!(p.set_tsval_at(24, 0x0a0b_0c0d));
    assert_eq!(p.tsval_at(24), Some(0x0a0b_0c0d));
    assert_eq!(p.tsval_at(28), Some(1), "TSecr untouched");
    assert_eq!(p.tsval_at(33), None);
    assert!(!p.set_tsval_at(33, 1));
    assert!(!p.set_tsval_at(usize::MAX, 1));
    assert_eq!(&d[24..28], &[0x0a, 0x0b, 0x0c, 0x0d]);
}
