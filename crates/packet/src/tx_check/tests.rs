//! Tests of [`super`] (tx_check), with frames built byte by byte.

use super::*;

const MTU: u32 = 1500;

fn lim() -> TxLimits {
    TxLimits::ethernet(MTU, true, true)
}

/// Ethernet + IPv4 or IPv6 + `proto` header + `payload` bytes, every
/// length field right.
fn frame(v6: bool, proto: u8, payload: usize) -> Vec<u8> {
    let l4_hdr = if proto == PROTO_TCP { 20 } else { 8 };
    let l4_len = l4_hdr + payload;
    let mut f = vec![0u8; 12];
    if v6 {
        f.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        let mut ip = vec![0u8; 40];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        ip[6] = proto;
        ip[7] = 64;
        f.extend_from_slice(&ip);
    } else {
        f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
        ip[6] = 0x40;
        ip[8] = 64;
        ip[9] = proto;
        f.extend_from_slice(&ip);
    }
    let mut l4 = vec![0u8; l4_hdr];
    if proto == PROTO_TCP {
        l4[12] = 5 << 4;
    } else {
        l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
    }
    f.extend_from_slice(&l4);
    f.resize(f.len() + payload, 0xab);
    f
}

fn gso(v6: bool, proto: u8, seg: u16) -> Offload {
    let l4 = 14 + if v6 { 40 } else { 20 };
    Offload {
        needs_csum: true,
        csum_valid: false,
        csum_start: l4 as u16,
        csum_offset: if proto == PROTO_TCP { 16 } else { 6 },
        gso: match (proto, v6) {
            (PROTO_TCP, false) => Gso::TcpV4,
            (PROTO_TCP, true) => Gso::TcpV6,
            _ => Gso::UdpL4,
        },
        gso_size: seg,
        hdr_len: (l4 + if proto == PROTO_TCP { 20 } else { 8 }) as u16,
    }
}

#[test]
fn plain_frames_fit_the_mtu() {
    let f = frame(false, PROTO_UDP, 1472);
    assert_eq!(check(&f, &Offload::default(), &lim()), Ok(1));
    let f = frame(false, PROTO_UDP, 1473);
    assert_eq!(
        check(&f, &Offload::default(), &lim()),
        Err(TxFault::OverMtu)
    );
    assert_eq!(
        check(&[0; 13], &Offload::default(), &lim()),
        Err(TxFault::Runt)
    );
    // ARP and anything else short is a plain frame too.
    assert_eq!(check(&[0; 42], &Offload::default(), &lim()), Ok(1));
}

#[test]
fn the_datagram_from_the_report_is_refused_and_one_slice_less_passes() {
    // 46 ESP-in-UDP packets of 1424 bytes behind IPv4 + UDP: 65 546 bytes.
    let f = frame(false, PROTO_UDP, 46 * 1424);
    assert_eq!(f.len(), 65_546);
    let o = gso(false, PROTO_UDP, 1424);
    assert_eq!(check(&f, &o, &lim()), Err(TxFault::TooLongWhole));
    let f = frame(false, PROTO_UDP, 45 * 1424);
    assert_eq!(check(&f, &o, &lim()), Ok(45));
    // The last frame the kernel takes, and the first it refuses.
    let f = frame(true, PROTO_UDP, 65_535 - 14 - 48);
    assert_eq!(f.len(), 65_535);
    assert!(check(&f, &gso(true, PROTO_UDP, 1400), &lim()).is_ok());
    let f = frame(true, PROTO_UDP, 65_536 - 14 - 48);
    let r = check(&f, &gso(true, PROTO_UDP, 1400), &lim());
    assert_eq!(r, Err(TxFault::TooLongWhole));
}

#[test]
fn tcp_super_packets_count_their_segments() {
    for v6 in [false, true] {
        let mss = if v6 { 1440 } else { 1460 };
        let f = frame(v6, PROTO_TCP, 10 * mss + 1);
        assert_eq!(check(&f, &gso(v6, PROTO_TCP, mss as u16), &lim()), Ok(11));
        // Segments larger than the MTU would not fit the wire.
        let r = check(&f, &gso(v6, PROTO_TCP, mss as u16 + 1), &lim());
        assert_eq!(r, Err(TxFault::SegmentOverMtu));
        // A forwarded super-packet with a verified checksum needs none.
        let mut o = gso(v6, PROTO_TCP, mss as u16);
        o.needs_csum = false;
        o.csum_valid = true;
        assert_eq!(check(&f, &o, &lim()), Ok(11));
    }
}

#[test]
fn headers_must_match_the_gso_type() {
    let f = frame(false, PROTO_UDP, 4 * 1400);
    // TCP type over a UDP packet; IPv6 type over IPv4.
    let r = check(&f, &gso(false, PROTO_TCP, 1400), &lim());
    assert!(r.is_err());
    let r = check(&f, &gso(true, PROTO_TCP, 1400), &lim());
    assert_eq!(r, Err(TxFault::BadHeaders));
    // A length field that disagrees with the frame.
    let o = gso(false, PROTO_UDP, 1400);
    let mut g = f.clone();
    g[16] ^= 1;
    assert_eq!(check(&g, &o, &lim()), Err(TxFault::BadHeaders));
    let mut g = f.clone();
    g[14 + 20 + 5] ^= 1;
    assert_eq!(check(&g, &o, &lim()), Err(TxFault::BadHeaders));
    // The checksum place must be UDP's.
    let mut p = o;
    p.csum_offset = 16;
    assert_eq!(check(&f, &p, &lim()), Err(TxFault::BadChecksumPlace));
    p.needs_csum = false;
    assert_eq!(check(&f, &p, &lim()), Err(TxFault::BadChecksumPlace));
    // Zero segment size; more segments than UDP GSO takes.
    let mut p = o;
    p.gso_size = 0;
    assert_eq!(check(&f, &p, &lim()), Err(TxFault::BadSegmentCount));
    let g = frame(false, PROTO_UDP, 129 * 100);
    let r = check(&g, &gso(false, PROTO_UDP, 100), &lim());
    assert_eq!(r, Err(TxFault::BadSegmentCount));
    assert_eq!(check(&f, &o, &lim()), Ok(4));
}

#[test]
fn offloads_only_where_the_port_takes_them() {
    let f = frame(false, PROTO_UDP, 4 * 1400);
    let o = gso(false, PROTO_UDP, 1400);
    let no_udp_gso = TxLimits::ethernet(MTU, true, false);
    assert_eq!(check(&f, &o, &no_udp_gso), Err(TxFault::OffloadRefused));
    let none = TxLimits::ethernet(MTU, false, false);
    let p = frame(false, PROTO_UDP, 100);
    let partial = Offload {
        needs_csum: true,
        csum_start: 34,
        csum_offset: 6,
        ..Offload::default()
    };
    assert_eq!(check(&p, &partial, &none), Err(TxFault::OffloadRefused));
    assert_eq!(check(&p, &partial, &lim()), Ok(1));
    let outside = Offload {
        csum_start: 140,
        ..partial
    };
    assert_eq!(check(&p, &outside, &lim()), Err(TxFault::ChecksumOutside));
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut rng = 0x2545_f491_u32;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        rng
    };
    for _ in 0..20_000 {
        let len = next() as usize % 200;
        let f: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let r = next();
        let o = Offload {
            needs_csum: r & 1 != 0,
            csum_valid: r & 2 != 0,
            csum_start: (next() % 256) as u16,
            csum_offset: (next() % 32) as u16,
            gso: [Gso::None, Gso::TcpV4, Gso::TcpV6, Gso::UdpL4][(r >> 2) as usize % 4],
            gso_size: (next() % 64) as u16,
            hdr_len: (next() % 256) as u16,
        };
        let _ = check(&f, &o, &TxLimits::ethernet(next() % 3000, true, true));
    }
}

#[test]
fn refused_packets_leave_the_vector_and_the_rest_keep_their_order() {
    let mut pool = Pool::new(8);
    let mut pkts = Vec::new();
    for (i, len) in [100usize, 1473, 200, 1600, 300].into_iter().enumerate() {
        let mut p = pool.alloc().unwrap();
        let mut f = frame(false, PROTO_UDP, len);
        f[0] = i as u8;
        p.set_data(&f);
        pkts.push(p);
    }
    let mut seen = Vec::new();
    let n = refuse_invalid(&mut pkts, &mut pool, &lim(), |f, p| {
        seen.push((f, p.data()[0]))
    });
    assert_eq!(n, 2);
    assert_eq!(seen, vec![(TxFault::OverMtu, 1), (TxFault::OverMtu, 3)]);
    let order: Vec<u8> = pkts.iter().map(|p| p.data()[0]).collect();
    assert_eq!(order, vec![0, 2, 4]);
    assert_eq!(pool.available(), 8 - 3);
}
