//! Tests of [`super`] (uso).

use super::*;
use crate::offload::gso::{segment, segment_with, OuterL4, OuterSpec, SegmentSpec};
use crate::offload::testutil::*;

/// The test's own reading of a length field, independent of `wire`.
fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

/// Outer IP (at 0) + UDP + VXLAN + an inner Ethernet/IP/TCP frame
/// carrying `payload` bytes, marked as a TCP super-packet of `mss`.
/// Returns it with the UDP and inner IP offsets.
fn vxlan_super(
    v6_outer: bool,
    v6_inner: bool,
    payload_len: usize,
    mss: u16,
    udp_csum: bool,
    pool: &mut Pool,
) -> (Packet, usize, usize) {
    let mut t = Tcp::new(v6_inner);
    t.flags = ACK | PSH;
    let inner = tcp_frame(&t, &payload(payload_len, 9));
    let mut f = if v6_outer {
        ipv6(0, 17)
    } else {
        ipv4(20, 0x2000, 0x4000, 64, 17, &[])
    };
    let udp = f.len();
    f.extend_from_slice(&[0xc0, 0x01, 0x12, 0xb5, 0, 0]);
    f.extend_from_slice(&(udp_csum as u16).to_be_bytes());
    f.extend_from_slice(&[0x08, 0, 0, 0, 0, 0, 42, 0]);
    f.extend_from_slice(&inner);
    let mut p = packet(pool, &f, 0);
    p.meta.offload.gso = if v6_inner { Gso::TcpV6 } else { Gso::TcpV4 };
    p.meta.offload.gso_size = mss;
    (p, udp, udp + 16 + 14)
}

fn spec_for(udp: usize, inner_l3: usize) -> PackSpec {
    PackSpec {
        udp_offset: udp,
        inner_l3_offset: inner_l3,
        mss: 0,
    }
}

/// The reference: what tunnel-encap sent before packing — the
/// encapsulated super-packet segmented with its outer headers as a
/// template.
fn reference(p: &Packet, udp: usize, inner_l3: usize, pool: &mut Pool) -> Vec<Packet> {
    let spec = SegmentSpec {
        outer: Some(OuterSpec {
            l3_offset: 0,
            l4: OuterL4::Udp { offset: udp },
        }),
        inner_l3_offset: inner_l3,
        mss: 0,
        partial_csum: false,
    };
    let mut v = Vec::new();
    segment_with(p, &spec, pool, &mut v).unwrap();
    v
}

/// Packs, then cuts each datagram the way UDP segmentation does (our
/// own, as interface-output would for a port without offloads), and
/// compares with the reference packet by packet: identical but for the
/// outer UDP checksum, which UDP segmentation always computes.
fn check(v6_outer: bool, v6_inner: bool, payload: usize, mss: u16, udp_csum: bool) {
    let mut pool = Pool::new(1024);
    let (p, udp, inner_l3) = vxlan_super(v6_outer, v6_inner, payload, mss, udp_csum, &mut pool);
    let want = reference(&p, udp, inner_l3, &mut pool);
    let mut packs = Vec::new();
    let spec = spec_for(udp, inner_l3);
    let n = pack(&p, &spec, &mut pool, &mut packs).unwrap();
    assert_eq!(n, want.len());
    let mut got = Vec::new();
    for dg in &packs {
        assert!(dg.len() - if v6_outer { 40 } else { 0 } <= 65535);
        if dg.meta.offload.gso == Gso::UdpL4 {
            let o = dg.meta.offload;
            assert_eq!((o.csum_start as usize, o.csum_offset), (udp, 6));
            assert_eq!(o.hdr_len as usize, udp + 8);
            let mut segs = Vec::new();
            let mut dgc = pool.alloc().unwrap();
            dgc.rx_area()[..dg.len()].copy_from_slice(dg.data());
            dgc.set_len(dg.len());
            dgc.meta = dg.meta;
            dgc.meta.l3_offset = 0;
            segment(&dgc, &mut pool, &mut segs).unwrap();
            got.extend(segs);
            pool.free(dgc);
        } else {
            let mut c = pool.alloc().unwrap();
            c.rx_area()[..dg.len()].copy_from_slice(dg.data());
            c.set_len(dg.len());
            got.push(c);
        }
    }
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let (g, w) = (g.data(), w.data());
        assert_eq!(g.len(), w.len(), "segment {i}");
        assert!(
            crate::offload::verify_l4_at(g, 0),
            "segment {i}: outer UDP checksum"
        );
        assert!(
            crate::offload::verify_l4_at(g, inner_l3),
            "segment {i}: inner TCP checksum"
        );
        let mut g = g.to_vec();
        let mut w = w.to_vec();
        g[udp + 6..udp + 8].fill(0);
        w[udp + 6..udp + 8].fill(0);
        assert_eq!(g, w, "segment {i} differs");
    }
}

#[test]
fn packed_vxlan_segments_equal_template_segmentation() {
    for (v6o, v6i) in [(false, false), (false, true), (true, false), (true, true)] {
        for udp_csum in [false, true] {
            check(v6o, v6i, 64_000, 1398, udp_csum);
            check(v6o, v6i, 1398 * 7 + 5, 1398, udp_csum);
            check(v6o, v6i, 1398 * 2, 1398, udp_csum);
        }
    }
}

#[test]
fn splits_into_several_datagrams_within_ip_length() {
    // Small MSS: more segments than one datagram holds (128 cap).
    let mut pool = Pool::new(512);
    let (p, udp, inner_l3) = vxlan_super(false, false, 60_000, 300, false, &mut pool);
    let mut packs = Vec::new();
    let spec = spec_for(udp, inner_l3);
    let n = pack(&p, &spec, &mut pool, &mut packs).unwrap();
    assert_eq!(n, 200);
    assert_eq!(packs.len(), 2);
    assert!(packs.iter().all(|d| d.len() <= 65535));
    check(false, false, 60_000, 300, false);
    check(true, true, 60_000, 300, true);
}

#[test]
fn refuses_what_it_cannot_pack() {
    let mut pool = Pool::new(64);
    let (mut p, udp, inner_l3) = vxlan_super(false, false, 3000, 1398, false, &mut pool);
    let spec = spec_for(udp, inner_l3);
    let mut out = Vec::new();
    // A segment size that leaves room for one slice per datagram.
    let big = PackSpec {
        mss: 40_000,
        ..spec
    };
    assert_eq!(
        pack(&p, &big, &mut pool, &mut out),
        Err(OffloadError::Unsupported)
    );
    // Not a TCP super-packet.
    p.meta.offload.gso = Gso::None;
    assert_eq!(
        pack(&p, &spec, &mut pool, &mut out),
        Err(OffloadError::Unsupported)
    );
    p.meta.offload.gso = Gso::TcpV4;
    // The UDP header is not where the spec says.
    let wrong = PackSpec {
        udp_offset: udp + 4,
        ..spec
    };
    assert_eq!(
        pack(&p, &wrong, &mut pool, &mut out),
        Err(OffloadError::Malformed)
    );
    // Truncated inner header.
    p.set_len(inner_l3 + 10);
    assert!(pack(&p, &spec, &mut pool, &mut out).is_err());
    assert!(out.is_empty());
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut pool = Pool::new(64);
    let mut rng = 0x1234_5678u32;
    for len in 0..400usize {
        let mut p = pool.alloc().unwrap();
        for b in &mut p.rx_area()[..len] {
            rng = rng.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            *b = (rng >> 16) as u8;
        }
        p.set_len(len);
        p.meta.offload.gso = Gso::TcpV4;
        p.meta.offload.gso_size = (rng % 200) as u16;
        let mut out = Vec::new();
        let spec = PackSpec {
            udp_offset: (rng % 48) as usize,
            inner_l3_offset: (rng % 120) as usize,
            mss: 0,
        };
        let _ = pack(&p, &spec, &mut pool, &mut out);
        pool.free_all(&mut out);
        pool.free(p);
    }
}

/// A frame that ends inside the UDP header it claims (found by the fuzz
/// target): refused, not a panic.
#[test]
fn a_frame_ending_in_its_udp_header_is_refused() {
    let mut pool = Pool::new(4);
    let f = ipv6(0, 17);
    let mut p = packet(&mut pool, &f, 0);
    p.meta.offload.gso = Gso::TcpV6;
    p.meta.offload.gso_size = 100;
    let mut out = Vec::new();
    let spec = PackSpec {
        udp_offset: 40,
        inner_l3_offset: 48,
        mss: 0,
    };
    assert_eq!(
        pack(&p, &spec, &mut pool, &mut out),
        Err(OffloadError::Truncated)
    );
    assert!(out.is_empty());
}

/// One packed datagram (8 slices) of a super-packet, with the metadata
/// the receiving gateway's AF_PACKET port reports for it.
fn one_pack(v6o: bool, v6i: bool, pool: &mut Pool) -> (Packet, Packet, usize) {
    let (orig, udp, inner_l3) = vxlan_super(v6o, v6i, 1398 * 7 + 5, 1398, v6o, pool);
    let spec = spec_for(udp, inner_l3);
    let mut packs = Vec::new();
    assert_eq!(pack(&orig, &spec, pool, &mut packs).unwrap(), 8);
    assert_eq!(packs.len(), 1);
    let dg = packs.pop().unwrap();
    assert_eq!(dg.meta.offload.gso, Gso::UdpL4);
    (orig, dg, udp)
}

#[test]
fn unpack_restores_the_super_packet() {
    for (v6o, v6i) in [(false, false), (false, true), (true, false), (true, true)] {
        let mut pool = Pool::new(64);
        let (orig, mut p, udp) = one_pack(v6o, v6i, &mut pool);
        unpack(&mut p, udp).unwrap();
        let o = p.meta.offload;
        assert_eq!(o.gso, if v6i { Gso::TcpV6 } else { Gso::TcpV4 });
        assert_eq!(o.gso_size, 1398);
        assert!(o.needs_csum);
        assert_eq!(p.len(), orig.len());
        // Completed as one packet (complete() leaves super-packets).
        p.meta.offload.gso = Gso::None;
        crate::offload::csum::complete(&mut p).unwrap();
        // VXLAN header and the whole inner frame as the sender had it
        // (flags of the last segment, first IPv4 ID, full checksum).
        assert_eq!(
            &p.data()[udp + 8..],
            &orig.data()[udp + 8..],
            "v6 {v6o}/{v6i}"
        );
        let d = p.data();
        assert_eq!(usize::from(be16(d, udp + 4)), d.len() - udp);
        if !v6o {
            assert_eq!(usize::from(be16(d, 2)), d.len());
            assert!(ipv4_hdr_ok(d, 0));
        } else {
            assert_eq!(usize::from(be16(d, 4)), d.len() - 40);
        }
    }
}

#[test]
fn unpack_refuses_anything_but_one_flow_in_order() {
    let mut pool = Pool::new(64);
    let (_, base, udp) = one_pack(false, false, &mut pool);
    let slice = usize::from(base.meta.offload.gso_size);
    let body = udp + 8;
    let tcp = 8 + 14 + 20;
    // (what, slice index, offset in the slice, xor mask)
    let cases: &[(&str, usize, usize, u8)] = &[
        ("VNI", 2, 6, 1),
        ("inner MAC", 3, 8 + 2, 1),
        ("inner source address", 4, 8 + 14 + 12, 1),
        ("IPv4 ID", 1, 8 + 14 + 5, 1),
        ("TTL", 5, 8 + 14 + 8, 1),
        ("sequence number", 3, tcp + 7, 1),
        ("port", 6, tcp + 1, 1),
        ("ack", 2, tcp + 11, 1),
        ("timestamp option", 5, tcp + 20 + 6, 1),
        ("SYN", 4, tcp + 13, 0x02),
        ("PSH in the middle", 3, tcp + 13, 0x08),
        ("FIN in the middle", 1, tcp + 13, 0x01),
        ("URG", 7, tcp + 13, 0x20),
    ];
    for &(what, k, off, mask) in cases {
        let mut p = pool.alloc().unwrap();
        assert!(p.set_data(base.data()));
        p.meta = base.meta;
        p.data_mut()[body + k * slice + off] ^= mask;
        let before = p.data().to_vec();
        assert!(unpack(&mut p, udp).is_err(), "{what}");
        assert_eq!(p.data(), &before[..], "{what}: left untouched");
        pool.free(p);
    }
    // Not a partial (local) checksum, not UDP GSO, a wrong UDP offset,
    // a last slice without data.
    let mut p = pool.alloc().unwrap();
    assert!(p.set_data(base.data()));
    p.meta = base.meta;
    p.meta.offload.needs_csum = false;
    p.meta.offload.csum_valid = true;
    assert!(unpack(&mut p, udp).is_err());
    p.meta = base.meta;
    p.meta.offload.gso = Gso::None;
    assert!(unpack(&mut p, udp).is_err());
    p.meta = base.meta;
    assert!(unpack(&mut p, udp + 2).is_err());
    let cut = body + 7 * slice + 8 + 14 + 20 + 32;
    p.truncate(cut);
    assert!(unpack(&mut p, udp).is_err());
    // Slices of another size than gso_size say.
    assert!(p.set_data(base.data()));
    p.meta = base.meta;
    p.meta.offload.gso_size += 1;
    assert!(unpack(&mut p, udp).is_err());
}

/// Flips bits in three bytes of `p` picked by the LCG `rng`.
fn mangle(p: &mut Packet, rng: &mut u32) {
    for _ in 0..3 {
        *rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let at = (*rng >> 8) as usize % p.len();
        p.data_mut()[at] ^= (*rng >> 3) as u8 | 1;
    }
}

#[test]
fn unpack_never_panics_on_mangled_datagrams() {
    let mut pool = Pool::new(64);
    let (_, base, _) = one_pack(false, false, &mut pool);
    let mut rng = 0x9e37_79b9u32;
    for _ in 0..2000 {
        let mut p = pool.alloc().unwrap();
        assert!(p.set_data(base.data()));
        p.meta = base.meta;
        mangle(&mut p, &mut rng);
        rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        if rng & 1 == 0 {
            let len = (rng >> 12) as usize % (p.len() + 1);
            p.truncate(len);
        }
        if rng & 2 == 0 {
            p.meta.offload.gso_size = (rng >> 16) as u16;
        }
        let _ = unpack(&mut p, (rng >> 20) as usize % 64);
        pool.free(p);
    }
}

/// ESP-in-UDP-like datagrams: outer IP (ID `id0 + i`) + UDP 4500 +
/// `sizes[i]` payload bytes.
fn datagrams(v6: bool, sizes: &[usize], pool: &mut Pool) -> Vec<Packet> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let mut f = if v6 {
                ipv6(8 + n, 17)
            } else {
                ipv4(28 + n, 0x300 + i as u16, 0x4000, 64, 17, &[])
            };
            f.extend_from_slice(&[0x11, 0x94, 0x11, 0x94]);
            f.extend_from_slice(&((8 + n) as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0]);
            f.extend_from_slice(&payload(n, i as u8));
            packet(pool, &f, 0)
        })
        .collect()
}

#[test]
fn joined_datagrams_segment_back_into_the_run() {
    for v6 in [false, true] {
        let mut pool = Pool::new(128);
        let sizes = [1400, 1400, 1400, 1400, 900];
        let want = datagrams(v6, &sizes, &mut pool);
        let mut run = datagrams(v6, &sizes, &mut pool);
        let mut out = Vec::new();
        assert_eq!(join(&mut run, &mut out, &mut pool), 1);
        assert!(run.is_empty());
        assert_eq!(out.len(), 1);
        let o = out[0].meta.offload;
        assert_eq!((o.gso, o.gso_size), (Gso::UdpL4, 1400));
        let mut segs = Vec::new();
        segment(&out[0], &mut pool, &mut segs).unwrap();
        assert_eq!(segs.len(), sizes.len());
        let u = if v6 { 40 } else { 20 };
        for (i, (g, w)) in segs.iter().zip(&want).enumerate() {
            assert!(
                crate::offload::verify_l4_at(g.data(), 0),
                "{i}: UDP checksum"
            );
            let mut g = g.data().to_vec();
            g[u + 6..u + 8].fill(0);
            if !v6 {
                // The IPv4 header checksum over the same bytes.
                assert!(ipv4_hdr_ok(&g, 0));
            }
            assert_eq!(&g[..], w.data(), "datagram {i}");
        }
    }
}

#[test]
fn join_keeps_apart_what_differs() {
    let mut pool = Pool::new(128);
    // Only the run's last may be short: one in the middle stays alone.
    let mut run = datagrams(false, &[1000, 1000, 600, 1000, 1000], &mut pool);
    let mut out = Vec::new();
    assert_eq!(join(&mut run, &mut out, &mut pool), 2);
    let lens: Vec<usize> = out.iter().map(|p| p.len()).collect();
    assert_eq!(lens, vec![28 + 2000, 628, 28 + 2000]);
    // Another destination port in the middle: nothing joins across it
    // (headers are compared with the run's first), order kept.
    let mut run = datagrams(false, &[1000, 1000, 1000], &mut pool);
    run[1].data_mut()[23] ^= 1;
    let mut out2 = Vec::new();
    assert_eq!(join(&mut run, &mut out2, &mut pool), 0);
    let ports: Vec<u8> = out2.iter().map(|p| p.data()[23]).collect();
    assert_eq!(ports, vec![0x94, 0x95, 0x94]);
    assert!(out2.iter().all(|p| p.meta.offload.gso == Gso::None));
    // Not UDP (plain ESP): passed through untouched.
    let mut run = datagrams(false, &[1000, 1000], &mut pool);
    for p in &mut run {
        p.data_mut()[9] = 50;
    }
    let mut out3 = Vec::new();
    assert_eq!(join(&mut run, &mut out3, &mut pool), 0);
    assert_eq!(out3.len(), 2);
}

/// The inner IP packets of a packed VXLAN datagram's slices, as esp-decrypt
/// finds the inner packets of opened ESP slices.
fn inner_ranges(p: &Packet, udp: usize) -> Vec<std::ops::Range<usize>> {
    let slice = usize::from(p.meta.offload.gso_size);
    let body = udp + 8;
    (body..p.len())
        .step_by(slice)
        .map(|a| a + 22..(a + slice).min(p.len()))
        .collect()
}

#[test]
fn merge_inner_makes_the_super_packet_unpack_makes() {
    for (v6o, v6i) in [(false, false), (false, true), (true, false), (true, true)] {
        let mut pool = Pool::new(64);
        let (_, mut a, udp) = one_pack(v6o, v6i, &mut pool);
        let mut b = pool.alloc().unwrap();
        assert!(b.set_data(a.data()));
        b.meta = a.meta;
        let ranges = inner_ranges(&b, udp);
        merge_inner(&mut b, &ranges).unwrap();
        unpack(&mut a, udp).unwrap();
        let inner_l3 = udp + 8 + 22;
        assert_eq!(b.data(), &a.data()[inner_l3..], "v6 {v6o}/{v6i}");
        let (oa, ob) = (a.meta.offload, b.meta.offload);
        assert_eq!((ob.gso, ob.gso_size), (oa.gso, oa.gso_size));
        assert_eq!(
            usize::from(ob.csum_start),
            usize::from(oa.csum_start) - inner_l3
        );
        assert_eq!(usize::from(ob.hdr_len), usize::from(oa.hdr_len) - inner_l3);
        assert!(ob.needs_csum);
    }
}

#[test]
fn merge_inner_refuses_a_wrong_checksum_and_leaves_the_packets() {
    let mut pool = Pool::new(64);
    let (_, mut p, udp) = one_pack(false, false, &mut pool);
    let ranges = inner_ranges(&p, udp);
    // One data byte of slice 5 changed: its TCP checksum no longer holds.
    let at = ranges[5].start + 60;
    p.data_mut()[at] ^= 0x10;
    let before = p.data().to_vec();
    assert_eq!(merge_inner(&mut p, &ranges), Err(OffloadError::Unsupported));
    assert_eq!(p.data(), &before[..], "nothing moved");
    // Out-of-bounds or reversed ranges are refused, not a panic.
    let len = p.len();
    assert!(merge_inner(&mut p, &[0..10, len..len + 1]).is_err());
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = [10..0, 20..30];
    assert!(merge_inner(&mut p, &reversed).is_err());
}

#[test]
fn merge_inner_never_panics_on_mangled_slices() {
    let mut pool = Pool::new(64);
    let (_, base, udp) = one_pack(false, true, &mut pool);
    let mut rng = 0x1234_5678u32;
    for _ in 0..2000 {
        let mut p = pool.alloc().unwrap();
        assert!(p.set_data(base.data()));
        p.meta = base.meta;
        mangle(&mut p, &mut rng);
        let mut ranges = inner_ranges(&p, udp);
        rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        if rng & 1 == 0 {
            let k = (rng >> 4) as usize % ranges.len();
            ranges[k].end = ranges[k].end.saturating_sub((rng >> 12) as usize % 64);
        }
        if merge_inner(&mut p, &ranges).is_ok() {
            assert!(p.len() <= base.len());
        }
        pool.free(p);
    }
}

/// Neither packing nor joining makes a datagram the kernel would not send
/// whole (`packet::gso_limit`), whatever the slice size: a slice of 1424
/// bytes (VXLAN with MSS 1362, AES-GCM ESP in UDP) once gave 46 slices per
/// datagram, 65 546 bytes with the Ethernet header, which Linux drops.
#[test]
fn no_datagram_is_longer_than_the_kernel_sends_whole() {
    let fits = |d: &Packet| gso_limit::frame_fits(gso_limit::LINK_HDR_LEN + d.len());
    let mut pool = Pool::new(1024);
    for v6 in [false, true] {
        for mss in (1300..=1400u16).chain([1362, 700, 301]) {
            let (p, udp, inner_l3) = vxlan_super(v6, false, 64_000, mss, false, &mut pool);
            let mut packs = Vec::new();
            pack(&p, &spec_for(udp, inner_l3), &mut pool, &mut packs).unwrap();
            assert!(packs.iter().all(fits), "v6 {v6} mss {mss}");
            pool.free(p);
            pool.free_all(&mut packs);
        }
        for seg in [1424usize, 1400, 1380, 1111, 600] {
            let n = 65_536 / seg + 3;
            let mut run = datagrams(v6, &vec![seg; n], &mut pool);
            let mut out = Vec::new();
            assert!(join(&mut run, &mut out, &mut pool) >= 1);
            assert!(out.iter().all(fits), "v6 {v6} seg {seg}");
            let segs: usize = out
                .iter()
                .map(|d| {
                    let body = if v6 { 48 } else { 28 };
                    (d.len() - body).div_ceil(seg)
                })
                .sum();
            assert_eq!(segs, n, "every datagram of the run, once");
            pool.free_all(&mut out);
        }
    }
}
