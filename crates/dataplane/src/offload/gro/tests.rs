//! Tests of [`super`] (gro).

use super::*;
use crate::offload::gso;
use crate::offload::testutil::*;
use proptest::prelude::*;

fn rd16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

fn gro() -> Coalescer {
    Coalescer::new(GroConfig::ethernet())
}

/// Segments of one flow: `sizes` payload bytes each, contiguous.
fn segs(t: &Tcp, sizes: &[usize]) -> Vec<Vec<u8>> {
    let mut t = t.clone();
    let mut v = Vec::new();
    for (i, n) in sizes.iter().enumerate() {
        v.push(tcp_frame(&t, &payload(*n, i as u8)));
        t.seq = t.seq.wrapping_add(*n as u32);
        t.id = t.id.wrapping_add(1);
    }
    v
}

fn run(c: &mut Coalescer, frames: &[Vec<u8>], pool: &mut Pool) -> Vec<Packet> {
    let mut v: Vec<Packet> = frames.iter().map(|f| packet(pool, f, 14)).collect();
    c.coalesce(&mut v, pool);
    v
}

/// Completes the NEEDS_CSUM checksum the way a NIC would, computed with
/// the test's own RFC 1071 code, and checks it verifies.
fn complete_and_verify(p: &Packet) -> Vec<u8> {
    let o = p.meta.offload;
    assert!(o.needs_csum);
    let mut d = p.data().to_vec();
    let at = usize::from(o.csum_start + o.csum_offset);
    let c = rfc1071(&d[usize::from(o.csum_start)..]);
    d[at..at + 2].copy_from_slice(&c.to_be_bytes());
    assert!(
        l4_ok(&d, 14),
        "super-packet checksum completes to a valid one"
    );
    d
}

#[test]
fn merges_in_order_segments() {
    for v6 in [false, true] {
        let mut pool = Pool::new(64);
        let mut c = gro();
        let t = Tcp::new(v6);
        let frames = segs(&t, &[1000, 1000, 1000, 400]);
        let out = run(&mut c, &frames, &mut pool);
        assert_eq!(out.len(), 1);
        let p = &out[0];
        let o = p.meta.offload;
        assert_eq!(o.gso, if v6 { Gso::TcpV6 } else { Gso::TcpV4 });
        assert_eq!(o.gso_size, 1000);
        let l4 = if v6 { 54 } else { 34 };
        assert_eq!(usize::from(o.hdr_len), l4 + 32);
        assert_eq!(usize::from(o.csum_start), l4);
        assert_eq!(o.csum_offset, 16);
        let d = complete_and_verify(p);
        if v6 {
            assert_eq!(usize::from(rd16(&d, 18)), d.len() - 54);
        } else {
            assert_eq!(usize::from(rd16(&d, 16)), d.len() - 14);
            assert!(ipv4_hdr_ok(&d, 14));
        }
        let mut want = Vec::new();
        for f in &frames {
            want.extend_from_slice(&f[l4 + 32..]);
        }
        assert_eq!(d[l4 + 32..], want[..]);
        assert_eq!(c.stats().merged, 3);
        assert_eq!(c.stats().super_out, 1);
        assert_eq!(c.stats().packets_in, 4);
        // The head moved into a large buffer to grow; the merged segments'
        // small buffers and the head's own came back.
        assert_eq!(pool.available(), 63);
        assert_eq!(pool.available_small(), 64, "merged buffers returned");
        assert!(!p.is_small());
    }
}

/// Runs `frames` and expects `n` packets out and one refusal `r`.
fn expect(frames: &[Vec<u8>], n: usize, r: Refusal) -> Vec<Packet> {
    expect_cfg(GroConfig::ethernet(), frames, n, r)
}

fn expect_cfg(cfg: GroConfig, frames: &[Vec<u8>], n: usize, r: Refusal) -> Vec<Packet> {
    let mut pool = Pool::new(64);
    let mut c = Coalescer::new(cfg);
    let out = run(&mut c, frames, &mut pool);
    assert_eq!(out.len(), n, "packets out");
    assert_eq!(
        c.stats().refused(r),
        1,
        "refusal {} counted: {:?}",
        r.name(),
        c.stats()
    );
    assert_eq!(c.stats().refused.iter().sum::<u64>(), 1, "{:?}", c.stats());
    out
}

fn second_with(f: impl Fn(&mut Tcp)) -> Vec<Vec<u8>> {
    let t = Tcp::new(false);
    let mut v = segs(&t, &[1000]);
    let mut t2 = t.clone();
    t2.seq += 1000;
    t2.id += 1;
    f(&mut t2);
    v.push(tcp_frame(&t2, &payload(1000, 1)));
    v
}

#[test]
fn seq_gap_starts_a_new_super_packet() {
    let t = Tcp::new(false);
    let mut frames = segs(&t, &[1000]);
    let mut t2 = t.clone();
    t2.seq += 5000;
    t2.id += 1;
    frames.extend(segs(&t2, &[1000, 1000]));
    let out = expect(&frames, 2, Refusal::SeqGap);
    assert_eq!(out[0].meta.offload.gso, Gso::None);
    assert_eq!(out[0].data(), &frames[0][..]);
    assert_eq!(out[1].meta.offload.gso, Gso::TcpV4);
    assert_eq!(out[1].len(), frames[1].len() + 1000);
}

#[test]
fn refuses_different_ack() {
    expect(&second_with(|t| t.ack += 1), 2, Refusal::AckDiffers);
}

#[test]
fn refuses_different_window() {
    expect(&second_with(|t| t.window += 1), 2, Refusal::WindowDiffers);
}

#[test]
fn refuses_different_ttl() {
    expect(&second_with(|t| t.ttl -= 1), 2, Refusal::IpFieldsDiffer);
}

#[test]
fn refuses_different_df() {
    expect(&second_with(|t| t.df = false), 2, Refusal::IpFieldsDiffer);
}

#[test]
fn refuses_different_tos() {
    let mut f = second_with(|_| {});
    f[1][15] = 0x20;
    f[1][24..26].fill(0);
    let c = rfc1071(&f[1][14..34]);
    f[1][24..26].copy_from_slice(&c.to_be_bytes());
    expect(&f, 2, Refusal::IpFieldsDiffer);
}

#[test]
fn refuses_different_ipv6_flow_label_and_hop_limit() {
    let t = Tcp::new(true);
    let mut f = segs(&t, &[1000, 1000]);
    f[1][17] ^= 1; // flow label (not in the pseudo header: checksum stays valid)
    expect(&f, 2, Refusal::IpFieldsDiffer);
    let mut f = segs(&t, &[1000, 1000]);
    f[1][21] -= 1; // hop limit
    expect(&f, 2, Refusal::IpFieldsDiffer);
}

#[test]
fn ipv4_id_rules() {
    // DF clear: the ID must increment.
    expect(
        &second_with(|t| {
            t.df = false;
            t.id -= 1;
        }),
        2,
        Refusal::IpFieldsDiffer,
    );
    let t = Tcp {
        df: false,
        ..Tcp::new(false)
    };
    let mut f = segs(&t, &[1000]);
    let mut t2 = t.clone();
    t2.seq += 1000; // same ID, DF clear
    f.push(tcp_frame(&t2, &payload(1000, 1)));
    expect(&f, 2, Refusal::IpId);
    // DF set: a fixed ID merges...
    let t = Tcp::new(false);
    let mut f = segs(&t, &[1000]);
    let mut t2 = t.clone();
    for _ in 0..2 {
        t2.seq += 1000;
        f.push(tcp_frame(&t2, &payload(1000, 1)));
    }
    let mut pool = Pool::new(8);
    assert_eq!(run(&mut gro(), &f, &mut pool).len(), 1);
    // ...but not a jump.
    expect(&second_with(|t| t.id += 7), 2, Refusal::IpId);
}

#[test]
fn refuses_different_options() {
    expect(
        &second_with(|t| t.opts = ts_opt(100, 51)),
        2,
        Refusal::OptionsDiffer,
    );
    // The kernel's rule: even an advancing TSval is a difference.
    expect(
        &second_with(|t| t.opts = ts_opt(101, 50)),
        2,
        Refusal::OptionsDiffer,
    );
}

#[test]
fn timestamps_may_advance_when_allowed() {
    let cfg = GroConfig {
        allow_ts_advance: true,
        ..GroConfig::ethernet()
    };
    let mut f = second_with(|t| t.opts = ts_opt(101, 50));
    let mut t3 = Tcp::new(false);
    t3.seq += 2000;
    t3.id += 2;
    t3.opts = ts_opt(101, 50);
    f.push(tcp_frame(&t3, &payload(1000, 2)));
    let mut pool = Pool::new(8);
    let mut c = Coalescer::new(cfg);
    let out = run(&mut c, &f, &mut pool);
    assert_eq!(out.len(), 1);
    let d = complete_and_verify(&out[0]);
    assert_eq!(d[58..62], 101u32.to_be_bytes(), "latest TSval carried");
    expect_cfg(
        cfg,
        &second_with(|t| t.opts = ts_opt(99, 50)),
        2,
        Refusal::TimestampBackwards,
    );
    expect_cfg(
        cfg,
        &second_with(|t| t.opts = ts_opt(101, 49)),
        2,
        Refusal::OptionsDiffer,
    );
}

#[test]
fn refuses_syn_fin_rst_urg() {
    for fl in [SYN, FIN, RST, URG] {
        let out = expect(&second_with(|t| t.flags |= fl), 2, Refusal::Flags);
        assert!(out.iter().all(|p| p.meta.offload.gso == Gso::None));
    }
}

#[test]
fn psh_only_on_the_last_merged() {
    let t = Tcp::new(false);
    let mut f = segs(&t, &[1000]);
    let mut t2 = t.clone();
    t2.seq += 1000;
    t2.id += 1;
    t2.flags |= PSH;
    f.push(tcp_frame(&t2, &payload(1000, 1)));
    let mut t3 = t.clone();
    t3.seq += 2000;
    t3.id += 2;
    f.extend(segs(&t3, &[1000, 1000]));
    let out = expect(&f, 2, Refusal::Pushed);
    assert_eq!(
        out[0].data()[47] & PSH,
        PSH,
        "PSH carried on the super-packet"
    );
    assert_eq!(out[0].len(), f[0].len() + 1000);
    assert_eq!(out[1].data()[47] & PSH, 0);
    assert_eq!(out[1].meta.offload.gso, Gso::TcpV4);
}

#[test]
fn cwr_only_on_the_first() {
    expect(&second_with(|t| t.flags |= CWR), 2, Refusal::Cwr);
}

#[test]
fn never_larger_after_smaller() {
    let t = Tcp::new(false);
    expect(&segs(&t, &[500, 1000]), 2, Refusal::Larger);
    // A smaller one may come last, and nothing after it.
    let out = expect(&segs(&t, &[1000, 500, 500]), 2, Refusal::AfterShort);
    assert_eq!(out[0].meta.offload.gso_size, 1000);
    assert_eq!(out[0].len(), 14 + 20 + 32 + 1500);
}

#[test]
fn bad_checksum_is_never_merged_nor_overtaken() {
    let t = Tcp::new(false);
    let mut f = segs(&t, &[1000, 1000, 1000]);
    f[1][100] ^= 0xff;
    let out = expect(&f, 3, Refusal::BadChecksum);
    assert_eq!(out[1].data(), &f[1][..], "bad segment untouched");
    assert!(out.iter().all(|p| p.meta.offload.gso == Gso::None));
}

#[test]
fn data_valid_skips_verification() {
    let t = Tcp::new(false);
    let mut f = segs(&t, &[1000, 1000]);
    f[1][100] ^= 0xff;
    let mut pool = Pool::new(8);
    let mut v: Vec<Packet> = f.iter().map(|x| packet(&mut pool, x, 14)).collect();
    v[1].meta.offload.csum_valid = true;
    gro().coalesce(&mut v, &mut pool);
    assert_eq!(v.len(), 1, "DATA_VALID trusted");
}

#[test]
fn pure_ack_is_not_merged_and_ends_the_run() {
    let t = Tcp::new(false);
    let mut f = segs(&t, &[1000]);
    let mut t2 = t.clone();
    t2.seq += 1000;
    t2.id += 1;
    f.push(tcp_frame(&t2, &[]));
    t2.id += 1;
    f.push(tcp_frame(&t2, &payload(1000, 1)));
    let out = expect(&f, 3, Refusal::NoPayload);
    assert_eq!(out[1].data(), &f[1][..]);
}

#[test]
fn too_big_splits() {
    let t = Tcp::new(false);
    let f = segs(&t, &[1448; 50]);
    let mut pool = Pool::new(64);
    let mut c = gro();
    let out = run(&mut c, &f, &mut pool);
    assert_eq!(out.len(), 2);
    assert_eq!(c.stats().refused(Refusal::TooBig), 1);
    for p in &out {
        assert!(rd16(p.data(), 16) as usize == p.len() - 14);
        complete_and_verify(p);
    }
    let total: usize = out.iter().map(|p| p.len() - 66).sum();
    assert_eq!(total, 50 * 1448);
}

#[test]
fn non_tcp_and_ip_options_pass() {
    let mut pool = Pool::new(8);
    let mut c = gro();
    let udp = udp_frame(false, &[1; 100]);
    let out = run(&mut c, &[udp.clone(), udp], &mut pool);
    assert_eq!(out.len(), 2);
    assert_eq!(c.stats().refused(Refusal::NotTcp), 2);
    // VLAN-tagged EtherType at the expected place: left alone.
    let t = Tcp::new(false);
    let mut f = segs(&t, &[1000, 1000]);
    for x in &mut f {
        x[12..14].copy_from_slice(&[0x81, 0x00]);
    }
    let mut c = gro();
    assert_eq!(run(&mut c, &f, &mut pool).len(), 2);
    assert_eq!(c.stats().refused(Refusal::NotTcp), 2);
}

#[test]
fn ip_options_extension_headers_and_fragments_pass() {
    // IPv4 with a (copied, NOP-padded) option: IHL 6.
    let mut f = Vec::new();
    for i in 0..2u32 {
        let t = Tcp::new(false);
        let base = tcp_frame(
            &Tcp {
                seq: t.seq + i * 100,
                id: t.id + i as u16,
                ..t
            },
            &payload(100, 0),
        );
        let mut x = base[..14].to_vec();
        let seg = &base[34..];
        x.extend_from_slice(&ipv4(
            24 + seg.len(),
            0x4242 + i as u16,
            0x4000,
            64,
            6,
            &[0x94, 4, 0, 0],
        ));
        x.extend_from_slice(seg);
        f.push(x);
    }
    expect_two(&f, Refusal::IpLayout);
    // IPv6 with a hop-by-hop header in front of TCP.
    let t = Tcp::new(true);
    let f: Vec<Vec<u8>> = segs(&t, &[100, 100])
        .into_iter()
        .map(|b| {
            let mut x = b[..14].to_vec();
            let mut ip = b[14..54].to_vec();
            let plen = u16::from_be_bytes([ip[4], ip[5]]) + 8;
            ip[4..6].copy_from_slice(&plen.to_be_bytes());
            ip[6] = 0;
            x.extend_from_slice(&ip);
            x.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
            x.extend_from_slice(&b[54..]);
            x
        })
        .collect();
    expect_two(&f, Refusal::IpLayout);
    // IPv4 fragments (MF set).
    let mut f = segs(&Tcp::new(false), &[100, 100]);
    for x in &mut f {
        x[20] |= 0x20;
        x[24..26].fill(0);
        let c = rfc1071(&x[14..34]);
        x[24..26].copy_from_slice(&c.to_be_bytes());
    }
    expect_two(&f, Refusal::IpLayout);
}

fn expect_two(frames: &[Vec<u8>], r: Refusal) {
    let mut pool = Pool::new(8);
    let mut c = gro();
    let out = run(&mut c, frames, &mut pool);
    assert_eq!(out.len(), 2);
    assert_eq!(c.stats().refused(r), 2, "{:?}", c.stats());
    for (o, f) in out.iter().zip(frames) {
        assert_eq!(o.data(), &f[..]);
    }
}

#[test]
fn super_packets_pass_untouched() {
    let f = segs(&Tcp::new(false), &[1000, 1000]);
    let mut pool = Pool::new(8);
    let mut v: Vec<Packet> = f.iter().map(|x| packet(&mut pool, x, 14)).collect();
    for p in &mut v {
        p.meta.offload.gso = Gso::TcpV4;
        p.meta.offload.gso_size = 500;
    }
    let mut c = gro();
    c.coalesce(&mut v, &mut pool);
    assert_eq!(v.len(), 2);
    assert_eq!(c.stats().refused(Refusal::AlreadyGso), 2);
}

/// Packets decapsulated whole from a jumbo underlay and marked for the
/// host's MSS (TCP GSO, checksum partial at the TCP header, as
/// offload::tso::mark leaves them) coalesce like segments; the result keeps
/// the smaller segment size, and its checksum completes to a valid one.
#[test]
fn marked_super_packets_coalesce_and_keep_their_segment_size() {
    let t = Tcp::new(false);
    let f = segs(&t, &[2896, 2896, 1000]);
    let mut pool = Pool::new(8);
    let mut v: Vec<Packet> = f.iter().map(|x| packet(&mut pool, x, 14)).collect();
    for p in &mut v {
        let big = p.len() > 1514;
        assert_eq!(crate::offload::tso::mark(p, 14, 1500), Ok(big));
        if big {
            // The MSS of a 1500-byte link behind 20 + 32 bytes of headers.
            assert_eq!(p.meta.offload.gso_size, 1448);
        }
    }
    let mut c = gro();
    c.coalesce(&mut v, &mut pool);
    assert_eq!(v.len(), 1, "{:?}", c.stats());
    let o = v[0].meta.offload;
    assert_eq!((o.gso, o.gso_size), (Gso::TcpV4, 1448));
    let d = complete_and_verify(&v[0]);
    let mut want = Vec::new();
    for x in &f {
        want.extend_from_slice(&x[66..]);
    }
    assert_eq!(d[66..], want[..], "payload in order");
    assert_eq!(c.stats().merged, 2);
}

#[test]
fn table_full_passes_extra_flows() {
    let cfg = GroConfig {
        max_flows: 1,
        ..GroConfig::ethernet()
    };
    // Table of 2 slots; 3 flows (different source ports), 2 segments each.
    let mut frames = Vec::new();
    for port in 0..3u8 {
        for x in segs(&Tcp::new(false), &[100, 100]) {
            let mut x = x;
            x[35] = port; // source port low byte, checksum adjusted below
            x[50..52].fill(0);
            let mut all = pseudo(&x, 14, 6, x.len() - 34);
            all.extend_from_slice(&x[34..]);
            let c = rfc1071(&all);
            x[50..52].copy_from_slice(&c.to_be_bytes());
            frames.push(x);
        }
    }
    let mut pool = Pool::new(16);
    let mut c = Coalescer::new(cfg);
    let out = run(&mut c, &frames, &mut pool);
    assert_eq!(c.stats().super_out, 2);
    assert_eq!(c.stats().refused(Refusal::TableFull), 2);
    assert_eq!(out.len(), 4);
}

#[test]
fn refusal_table_is_consistent() {
    for (i, r) in Refusal::ALL.iter().enumerate() {
        assert_eq!(*r as usize, i);
        assert!(!r.name().is_empty());
    }
}

#[test]
fn interleaved_flows_keep_positions() {
    let a = Tcp::new(false);
    let b = Tcp::new(true);
    let fa = segs(&a, &[800, 800, 800]);
    let fb = segs(&b, &[700, 700]);
    let udp = udp_frame(false, &[3; 50]);
    let frames = vec![
        fa[0].clone(),
        fb[0].clone(),
        udp.clone(),
        fa[1].clone(),
        fb[1].clone(),
        fa[2].clone(),
    ];
    let mut pool = Pool::new(16);
    let mut c = gro();
    let out = run(&mut c, &frames, &mut pool);
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].meta.offload.gso, Gso::TcpV4);
    assert_eq!(out[0].meta.offload.gso_size, 800);
    assert_eq!(out[1].meta.offload.gso, Gso::TcpV6);
    assert_eq!(out[2].data(), &udp[..]);
    assert_eq!(c.stats().super_out, 2);
}

#[test]
fn ethernet_padding_is_dropped_before_merging() {
    let t = Tcp {
        opts: Vec::new(),
        ..Tcp::new(false)
    };
    let mut f = segs(&t, &[2, 2, 2]);
    for x in &mut f {
        assert!(x.len() < 60);
        x.resize(60, 0xee);
    }
    let mut pool = Pool::new(8);
    let out = run(&mut gro(), &f, &mut pool);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].len(), 54 + 6);
    complete_and_verify(&out[0]);
}

#[test]
fn roundtrip_segment_coalesce_segment() {
    for (v6, flags) in [(false, ACK | PSH | CWR), (true, ACK | PSH), (false, ACK)] {
        let mut t = Tcp::new(v6);
        t.flags = flags;
        let big = tcp_frame(&t, &payload(30_000, 7));
        let mut pool = Pool::new(128);
        let mut sp = packet(&mut pool, &big, 14);
        sp.meta.offload.gso = if v6 { Gso::TcpV6 } else { Gso::TcpV4 };
        sp.meta.offload.gso_size = 1448;
        let mut s1 = Vec::new();
        gso::segment(&sp, &mut pool, &mut s1).unwrap();
        let copies: Vec<Vec<u8>> = s1.iter().map(|p| p.data().to_vec()).collect();
        let mut c = gro();
        c.coalesce(&mut s1, &mut pool);
        assert_eq!(s1.len(), 1, "{:?}", c.stats());
        let g = &s1[0];
        let d = complete_and_verify(g);
        assert_eq!(d.len(), big.len());
        // Headers equal apart from the checksums.
        let mut a = d.clone();
        let mut b = big.clone();
        let l4 = if v6 { 54 } else { 34 };
        for x in [&mut a, &mut b] {
            x[l4 + 16..l4 + 18].fill(0);
            if !v6 {
                x[24..26].fill(0);
            }
        }
        assert_eq!(a, b);
        // And segmenting the result again gives the same segments.
        let mut s2 = Vec::new();
        gso::segment(g, &mut pool, &mut s2).unwrap();
        let again: Vec<Vec<u8>> = s2.iter().map(|p| p.data().to_vec()).collect();
        assert_eq!(again, copies);
    }
}

proptest! {
    #[test]
    fn roundtrip_any_sizes(n in 1usize..40_000, mss in 200u16..9000, v6 in any::<bool>(), seq in any::<u32>(), id in any::<u16>()) {
        let mut t = Tcp::new(v6);
        t.seq = seq;
        t.id = id;
        let big = tcp_frame(&t, &payload(n, 1));
        let mut pool = Pool::new(256);
        let mut sp = packet(&mut pool, &big, 14);
        sp.meta.offload.gso = if v6 { Gso::TcpV6 } else { Gso::TcpV4 };
        sp.meta.offload.gso_size = mss;
        let mut s = Vec::new();
        gso::segment(&sp, &mut pool, &mut s).unwrap();
        let nseg = s.len();
        let mut c = gro();
        c.coalesce(&mut s, &mut pool);
        prop_assert_eq!(s.len(), 1);
        prop_assert_eq!(c.stats().merged as usize, nseg - 1);
        let d = if nseg > 1 { complete_and_verify(&s[0]) } else { s[0].data().to_vec() };
        let l4 = if v6 { 54 } else { 34 };
        prop_assert_eq!(&d[l4 + 32..], &big[l4 + 32..]);
    }

    #[test]
    fn never_panics_on_mutations(
        sizes in proptest::collection::vec(1usize..1500, 1..12),
        muts in proptest::collection::vec((0usize..12, 0usize..80, any::<u8>()), 0..12),
        valid in proptest::collection::vec(any::<bool>(), 12),
        ts in any::<bool>(),
    ) {
        let t = Tcp::new(muts.len() % 2 == 0);
        let mut f = segs(&t, &sizes);
        for (k, at, v) in &muts {
            let k = k % f.len();
            if *at < f[k].len() { f[k][*at] = *v; }
        }
        let mut pool = Pool::new(32);
        let mut v: Vec<Packet> = f.iter().map(|x| packet(&mut pool, x, 14)).collect();
        for (p, ok) in v.iter_mut().zip(&valid) {
            p.meta.offload.csum_valid = *ok;
        }
        // Every buffer comes back: merged ones freed, a small head moved
        // into a large one gives its small buffer back.
        let free = |p: &Pool| p.available() + p.available_small();
        let before = free(&pool);
        let mut c = Coalescer::new(GroConfig { allow_ts_advance: ts, ..GroConfig::ethernet() });
        c.coalesce(&mut v, &mut pool);
        let st = c.stats();
        prop_assert_eq!(v.len() + st.merged as usize, f.len());
        prop_assert_eq!(free(&pool), before + st.merged as usize);
    }

    #[test]
    fn never_panics_on_garbage(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..20), l3 in 0usize..30) {
        let mut pool = Pool::new(32);
        let mut v: Vec<Packet> = frames.iter().map(|x| packet(&mut pool, x, 14)).collect();
        for (i, p) in v.iter_mut().enumerate() {
            p.meta.offload.csum_valid = i % 2 == 0;
            p.meta.offload.needs_csum = i % 3 == 0;
        }
        let mut c = Coalescer::new(GroConfig { l3_offset: l3, check_ethertype: false, allow_ts_advance: true, max_flows: 4 });
        c.coalesce(&mut v, &mut pool);
        prop_assert_eq!(v.len() + c.stats().merged as usize, frames.len());
    }
}
