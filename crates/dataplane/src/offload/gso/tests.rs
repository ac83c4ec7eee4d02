//! Tests of [`super`] (gso).

use super::*;
use crate::offload::csum;
use crate::offload::testutil::*;
use proptest::prelude::*;

fn rd16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}
fn rd32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

/// Checks the segments of a plain TCP super-packet built from `t` with
/// IP header at `l3` (in both the original and the segments).
fn check_tcp_segments(orig: &[u8], l3: usize, segs: &[Packet], mss: usize, t: &Tcp) {
    let (ihl, _, end) = ip_info(orig, l3);
    let l4 = l3 + ihl;
    let thl = usize::from(orig[l4 + 12] >> 4) * 4;
    let hdr_len = l4 + thl;
    let data = &orig[hdr_len..end];
    assert_eq!(segs.len(), data.len().div_ceil(mss));
    let mut got = Vec::new();
    for (i, p) in segs.iter().enumerate() {
        let s = p.data();
        let last = i + 1 == segs.len();
        let n = s.len() - hdr_len;
        assert!(n <= mss && n > 0);
        if !last {
            assert_eq!(n, mss, "all but the last carry exactly mss");
        }
        assert!(l4_ok(s, l3), "segment {i} TCP checksum");
        if t.v6 {
            assert_eq!(usize::from(rd16(s, l3 + 4)), s.len() - l3 - 40);
            assert_eq!(s[l3..l3 + 4], orig[l3..l3 + 4]);
        } else {
            assert!(ipv4_hdr_ok(s, l3), "segment {i} IP checksum");
            assert_eq!(usize::from(rd16(s, l3 + 2)), s.len() - l3);
            assert_eq!(rd16(s, l3 + 4), t.id.wrapping_add(i as u16));
            assert_eq!(s[l3 + 6..l3 + 10], orig[l3 + 6..l3 + 10]);
        }
        assert_eq!(rd32(s, l4 + 4), t.seq.wrapping_add((i * mss) as u32));
        let flags = s[l4 + 13];
        assert_eq!(flags & PSH != 0, last && t.flags & PSH != 0);
        assert_eq!(flags & FIN != 0, last && t.flags & FIN != 0);
        assert_eq!(flags & CWR != 0, i == 0 && t.flags & CWR != 0);
        assert_eq!(flags & ACK, t.flags & ACK);
        // Ports, ack, window, options unchanged.
        assert_eq!(s[l4..l4 + 4], orig[l4..l4 + 4]);
        assert_eq!(s[l4 + 8..l4 + 12], orig[l4 + 8..l4 + 12]);
        assert_eq!(s[l4 + 14..l4 + 16], orig[l4 + 14..l4 + 16]);
        assert_eq!(s[l4 + 20..hdr_len], orig[l4 + 20..hdr_len]);
        assert_eq!(s[..l3], orig[..l3]);
        assert!(!p.meta.offload.needs_csum);
        assert_eq!(p.meta.offload.gso, Gso::None);
        got.extend_from_slice(&s[hdr_len..]);
    }
    assert_eq!(got, data);
}

fn super_tcp(t: &Tcp, n: usize, pool: &mut Pool, gso_size: u16) -> (Vec<u8>, Packet) {
    let f = tcp_frame(t, &payload(n, 3));
    let mut p = packet(pool, &f, 14);
    p.meta.offload.gso = if t.v6 { Gso::TcpV6 } else { Gso::TcpV4 };
    p.meta.offload.gso_size = gso_size;
    // A wrong hdr_len must not matter.
    p.meta.offload.hdr_len = 3;
    (f, p)
}

#[test]
fn tcp4_plain() {
    let mut pool = Pool::new(64);
    let mut t = Tcp::new(false);
    t.flags = ACK | PSH | FIN | CWR;
    t.id = 0xfffe; // wraps
    t.seq = 0xffff_f000; // wraps
    let (f, p) = super_tcp(&t, 10_000, &mut pool, 1448);
    let mut out = Vec::new();
    assert_eq!(segment(&p, &mut pool, &mut out), Ok(7));
    check_tcp_segments(&f, 14, &out, 1448, &t);
    for s in &out {
        assert!(s.len() <= 1514);
    }
}

#[test]
fn tcp4_with_ip_options_copies_them_to_every_segment() {
    let mut pool = Pool::new(16);
    let t = Tcp::new(false);
    let base = tcp_frame(&t, &payload(5000, 6));
    let mut f = base[..14].to_vec();
    let seg = &base[34..];
    let opts = [0x94, 4, 0, 0, 1, 1, 1, 0];
    f.extend_from_slice(&ipv4(28 + seg.len(), t.id, 0x4000, 64, 6, &opts));
    f.extend_from_slice(seg);
    // The TCP checksum does not cover IP options: still valid.
    let mut p = packet(&mut pool, &f, 14);
    p.meta.offload.gso = Gso::TcpV4;
    p.meta.offload.gso_size = 1400;
    let mut out = Vec::new();
    assert_eq!(segment(&p, &mut pool, &mut out), Ok(4));
    check_tcp_segments(&f, 14, &out, 1400, &t);
    for s in &out {
        assert_eq!(s.data()[34..42], opts);
    }
}

#[test]
fn tcp6_plain() {
    let mut pool = Pool::new(64);
    let mut t = Tcp::new(true);
    t.flags = ACK | PSH;
    let (f, p) = super_tcp(&t, 65_000, &mut pool, 1428);
    let mut out = Vec::new();
    assert_eq!(segment(&p, &mut pool, &mut out), Ok(46));
    check_tcp_segments(&f, 14, &out, 1428, &t);
}

#[test]
fn exact_multiple_and_single_segment() {
    let mut pool = Pool::new(16);
    let t = Tcp::new(false);
    let (f, p) = super_tcp(&t, 3000, &mut pool, 1000);
    let mut out = Vec::new();
    assert_eq!(segment(&p, &mut pool, &mut out), Ok(3));
    check_tcp_segments(&f, 14, &out, 1000, &t);
    let (f, p) = super_tcp(&t, 500, &mut pool, 1000);
    let mut out = Vec::new();
    assert_eq!(segment(&p, &mut pool, &mut out), Ok(1));
    check_tcp_segments(&f, 14, &out, 1000, &t);
}

#[test]
fn partial_checksum_completes_to_valid() {
    let mut pool = Pool::new(16);
    let t = Tcp::new(false);
    let (_, p) = super_tcp(&t, 4000, &mut pool, 1448);
    let mut out = Vec::new();
    let spec = SegmentSpec {
        partial_csum: true,
        ..SegmentSpec::plain(14)
    };
    assert_eq!(segment_with(&p, &spec, &mut pool, &mut out), Ok(3));
    for s in &mut out {
        assert!(s.meta.offload.needs_csum);
        assert_eq!(s.meta.offload.csum_start, 34);
        assert_eq!(s.meta.offload.csum_offset, 16);
        assert!(!l4_ok(s.data(), 14));
        csum::complete(s).unwrap();
        assert!(l4_ok(s.data(), 14));
    }
}

#[test]
fn udp_l4_segments() {
    for v6 in [false, true] {
        let mut pool = Pool::new(16);
        let data = payload(5000, 9);
        let f = udp_frame(v6, &data);
        let mut p = packet(&mut pool, &f, 14);
        p.meta.offload.gso = Gso::UdpL4;
        p.meta.offload.gso_size = 1400;
        let mut out = Vec::new();
        assert_eq!(segment(&p, &mut pool, &mut out), Ok(4));
        let l4 = if v6 { 54 } else { 34 };
        let mut got = Vec::new();
        for (i, s) in out.iter().enumerate() {
            let d = s.data();
            assert!(l4_ok(d, 14), "v6={v6} seg {i}");
            assert_eq!(usize::from(rd16(d, l4 + 4)), d.len() - l4);
            if !v6 {
                assert!(ipv4_hdr_ok(d, 14));
                assert_eq!(rd16(d, 18), 7 + i as u16);
            }
            got.extend_from_slice(&d[l4 + 8..]);
        }
        assert_eq!(got, data);
    }
}

/// Outer Ethernet + IPv4/IPv6 + UDP(4789, checksum `ucsum`) + VXLAN
/// around an inner frame. Outer lengths are left wrong on purpose.
fn vxlan(inner: &[u8], v6: bool, ucsum: u16) -> (Vec<u8>, usize) {
    let mut f = if v6 {
        let mut f = eth(0x86dd);
        f.extend_from_slice(&ipv6(0, 17));
        f
    } else {
        let mut f = eth(0x0800);
        f.extend_from_slice(&ipv4(0, 0x1000, 0, 64, 17, &[]));
        f
    };
    let udp = f.len();
    f.extend_from_slice(&[0xc0, 0x01, 0x12, 0xb5, 0, 0]);
    f.extend_from_slice(&ucsum.to_be_bytes());
    f.extend_from_slice(&[0x08, 0, 0, 0, 0, 0, 42, 0]);
    f.extend_from_slice(inner);
    (f, udp)
}

fn check_encapsulated(segs: &[Packet], inner_orig: &[u8], inner_at: usize, mss: usize, t: &Tcp) {
    let inner: Vec<Packet> = {
        let mut pool = Pool::new(segs.len());
        segs.iter()
            .map(|s| packet(&mut pool, &s.data()[inner_at..], 14))
            .collect()
    };
    check_tcp_segments(inner_orig, 14, &inner, mss, t);
}

#[test]
fn vxlan_over_ipv4_zero_udp_checksum() {
    let mut pool = Pool::new(32);
    let mut t = Tcp::new(false);
    t.flags = ACK | PSH;
    let inner = tcp_frame(&t, &payload(20_000, 5));
    let (f, udp) = vxlan(&inner, false, 0);
    let mut p = packet(&mut pool, &f, 14);
    p.meta.offload.gso = Gso::TcpV4;
    p.meta.offload.gso_size = 1398;
    let spec = SegmentSpec {
        outer: Some(OuterSpec {
            l3_offset: 14,
            l4: OuterL4::Udp { offset: udp },
        }),
        inner_l3_offset: udp + 16 + 14,
        mss: 0,
        partial_csum: false,
    };
    let mut out = Vec::new();
    let n = segment_with(&p, &spec, &mut pool, &mut out).unwrap();
    assert_eq!(n, 20_000usize.div_ceil(1398));
    for (i, s) in out.iter().enumerate() {
        let d = s.data();
        assert!(ipv4_hdr_ok(d, 14));
        assert_eq!(usize::from(rd16(d, 16)), d.len() - 14);
        assert_eq!(rd16(d, 18), 0x1000 + i as u16);
        assert_eq!(usize::from(rd16(d, udp + 4)), d.len() - udp);
        assert_eq!(rd16(d, udp + 6), 0, "RFC 7348: zero UDP checksum kept");
        assert!(d.len() - 50 <= 1500, "inner frame fits a 1500 MTU");
    }
    check_encapsulated(&out, &inner, udp + 16, 1398, &t);
}

#[test]
fn vxlan_over_ipv6_computes_udp_checksum() {
    let mut pool = Pool::new(32);
    let t = Tcp::new(true);
    let inner = tcp_frame(&t, &payload(9_000, 1));
    let (f, udp) = vxlan(&inner, true, 0);
    let mut p = packet(&mut pool, &f, 14);
    p.meta.offload.gso = Gso::TcpV6;
    p.meta.offload.gso_size = 1000;
    let spec = SegmentSpec {
        outer: Some(OuterSpec {
            l3_offset: 14,
            l4: OuterL4::Udp { offset: udp },
        }),
        inner_l3_offset: udp + 16 + 14,
        mss: 0,
        // Must be ignored: the outer UDP checksum covers the inner one.
        partial_csum: true,
    };
    let mut out = Vec::new();
    assert_eq!(segment_with(&p, &spec, &mut pool, &mut out), Ok(9));
    for s in &out {
        let d = s.data();
        assert_eq!(usize::from(rd16(d, 18)), d.len() - 54);
        assert_ne!(rd16(d, udp + 6), 0);
        assert!(l4_ok(d, 14), "outer UDP checksum");
        assert!(!s.meta.offload.needs_csum);
    }
    check_encapsulated(&out, &inner, udp + 16, 1000, &t);
}

#[test]
fn gre_with_checksum_over_ipv4() {
    let mut pool = Pool::new(32);
    let t = Tcp::new(false);
    let inner = tcp_frame(&t, &payload(7_777, 2));
    // L3 GRE: outer IPv4 (proto 47), GRE with C and K bits, inner IP.
    let mut f = eth(0x0800);
    f.extend_from_slice(&ipv4(0, 0x2000, 0x4000, 64, 47, &[]));
    let gre = f.len();
    f.extend_from_slice(&[0xa0, 0x00, 0x08, 0x00, 0, 0, 0, 0, 0, 0, 0, 9]);
    let inner_l3 = f.len();
    f.extend_from_slice(&inner[14..]);
    let mut p = packet(&mut pool, &f, 14);
    p.meta.offload.gso = Gso::TcpV4;
    p.meta.offload.gso_size = 1416;
    let spec = SegmentSpec {
        outer: Some(OuterSpec {
            l3_offset: 14,
            l4: OuterL4::Gre { offset: gre },
        }),
        inner_l3_offset: inner_l3,
        mss: 0,
        partial_csum: false,
    };
    let mut out = Vec::new();
    assert_eq!(segment_with(&p, &spec, &mut pool, &mut out), Ok(6));
    for s in &out {
        let d = s.data();
        assert!(ipv4_hdr_ok(d, 14));
        assert_eq!(usize::from(rd16(d, 16)), d.len() - 14);
        assert!(d.len() - 14 <= 1500);
        assert_eq!(rfc1071(&d[gre..]), 0, "GRE checksum (RFC 2784 §2.5)");
        assert_eq!(d[gre + 8..gre + 12], [0, 0, 0, 9], "key kept");
    }
    // Re-frame the inner packets with an Ethernet header to reuse the checker.
    let mut pool2 = Pool::new(out.len());
    let inner_segs: Vec<Packet> = out
        .iter()
        .map(|s| {
            let mut b = eth(0x0800);
            b.extend_from_slice(&s.data()[inner_l3..]);
            packet(&mut pool2, &b, 14)
        })
        .collect();
    check_tcp_segments(&inner, 14, &inner_segs, 1416, &t);
}

#[test]
fn gre_sequence_numbers_refused() {
    let mut pool = Pool::new(8);
    let inner = tcp_frame(&Tcp::new(false), &payload(3000, 2));
    let mut f = eth(0x0800);
    f.extend_from_slice(&ipv4(0, 0, 0, 64, 47, &[]));
    f.extend_from_slice(&[0x10, 0x00, 0x08, 0x00, 0, 0, 0, 1]);
    f.extend_from_slice(&inner[14..]);
    let mut p = packet(&mut pool, &f, 14);
    p.meta.offload.gso = Gso::TcpV4;
    p.meta.offload.gso_size = 1000;
    let spec = SegmentSpec {
        outer: Some(OuterSpec {
            l3_offset: 14,
            l4: OuterL4::Gre { offset: 34 },
        }),
        inner_l3_offset: 42,
        mss: 0,
        partial_csum: false,
    };
    let mut out = Vec::new();
    assert_eq!(
        segment_with(&p, &spec, &mut pool, &mut out),
        Err(OffloadError::Unsupported)
    );
    assert!(out.is_empty());
}

#[test]
fn refusals() {
    let mut pool = Pool::new(8);
    let t = Tcp::new(false);
    let (_, mut p) = super_tcp(&t, 3000, &mut pool, 0);
    let mut out = Vec::new();
    assert_eq!(
        segment(&p, &mut pool, &mut out),
        Err(OffloadError::BadSegmentSize)
    );
    p.meta.offload.gso_size = 1000;
    p.meta.offload.gso = Gso::TcpV6;
    assert_eq!(
        segment(&p, &mut pool, &mut out),
        Err(OffloadError::Unsupported)
    );
    p.meta.offload.gso = Gso::UdpL4;
    assert_eq!(
        segment(&p, &mut pool, &mut out),
        Err(OffloadError::Unsupported)
    );
    p.meta.offload.gso = Gso::None;
    assert_eq!(
        segment(&p, &mut pool, &mut out),
        Err(OffloadError::Unsupported)
    );
    assert!(out.is_empty());
}

#[test]
fn pool_exhaustion_leaves_nothing_behind() {
    // 2 large buffers (one holds the super-packet) and 2 small ones: 3 for
    // 5 segments.
    let mut pool = Pool::new(2);
    let t = Tcp::new(false);
    let (_, p) = super_tcp(&t, 5000, &mut pool, 1000);
    let mut out = Vec::new();
    assert_eq!((pool.available(), pool.available_small()), (1, 2));
    assert_eq!(
        segment(&p, &mut pool, &mut out),
        Err(OffloadError::NoBuffers)
    );
    assert!(out.is_empty());
    assert_eq!((pool.available(), pool.available_small()), (1, 2));
}

/// Segments of a wire-sized MSS go into small buffers: a 1500-byte frame
/// does not take a 66 KB one.
#[test]
fn segments_take_small_buffers() {
    let mut pool = Pool::new(8);
    let t = Tcp::new(false);
    let (_, p) = super_tcp(&t, 5000, &mut pool, 1000);
    let mut out = Vec::new();
    assert_eq!(segment(&p, &mut pool, &mut out), Ok(5));
    assert!(out.iter().all(|s| s.is_small()));
    assert_eq!(pool.available(), 7, "no large buffer taken");
}

proptest! {
    #[test]
    fn never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
        kind in 0u8..4,
        gso_size in any::<u16>(),
        l3 in 0usize..80,
        outer in proptest::option::of((0usize..60, 0u8..3, 0usize..80)),
        partial in any::<bool>(),
    ) {
        let mut pool = Pool::new(600);
        let mut p = packet(&mut pool, &bytes, l3 as u16);
        p.meta.offload.gso = [Gso::None, Gso::TcpV4, Gso::TcpV6, Gso::UdpL4][usize::from(kind)];
        p.meta.offload.gso_size = gso_size;
        let spec = SegmentSpec {
            outer: outer.map(|(ol3, k, off)| OuterSpec {
                l3_offset: ol3,
                l4: match k { 0 => OuterL4::None, 1 => OuterL4::Udp { offset: off }, _ => OuterL4::Gre { offset: off } },
            }),
            inner_l3_offset: l3,
            mss: 0,
            partial_csum: partial,
        };
        let mut out = Vec::new();
        let before = pool.available();
        match segment_with(&p, &spec, &mut pool, &mut out) {
            Ok(n) => prop_assert_eq!(n, out.len()),
            Err(_) => { prop_assert!(out.is_empty()); prop_assert_eq!(pool.available(), before); }
        }
    }

    #[test]
    fn segments_reassemble_and_verify(n in 0usize..20_000, mss in 1u16..3000, v6 in any::<bool>(), seq in any::<u32>()) {
        let mut pool = Pool::new(64);
        let mut t = Tcp::new(v6);
        t.seq = seq;
        t.flags = ACK | PSH;
        let mss = mss.max((n / 40) as u16 + 1);
        let (f, p) = super_tcp(&t, n, &mut pool, mss);
        let mut out = Vec::new();
        let k = segment(&p, &mut pool, &mut out).unwrap();
        prop_assert_eq!(k, out.len());
        if n > 0 {
            check_tcp_segments(&f, 14, &out, usize::from(mss), &t);
        } else {
            prop_assert!(l4_ok(out[0].data(), 14));
        }
    }
}
