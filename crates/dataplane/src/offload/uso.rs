//! UDP segmentation offload for UDP tunnels: a TCP super-packet already
//! encapsulated in VXLAN is cut into its wire packets *inside one UDP
//! datagram* marked `Gso::UdpL4` (`VIRTIO_NET_HDR_GSO_UDP_L4`), instead of
//! into separate packets.
//!
//! Each `gso_size` slice of the datagram's payload is one complete tunnel
//! packet body — VXLAN header, inner Ethernet, inner IP and TCP headers
//! (lengths, IDs, sequence numbers and checksums already final) and one
//! MSS of data. UDP segmentation, wherever it runs, only copies the outer
//! IP and UDP headers in front of each slice and fixes their lengths, IDs
//! and checksums (Linux `__udp_gso_segment`, a NIC's USO, or
//! [`gso::segment`](super::gso::segment) at interface-output when the
//! egress port takes no offloads), so the packets on the wire are the same
//! as segmenting here would have made. What changes is the kernel I/O: one
//! skb for up to ~64 KB instead of one per 1500 bytes, and over veth the
//! datagram reaches the peer whole, as Linux's own VXLAN device sends its
//! super-packets (`SKB_GSO_UDP_TUNNEL`). QUIC stacks batch their packets
//! into UDP GSO sends the same way.

use super::gso::InnerSeg;
use super::hdr::{self, be16, be32, put16, Ip, PROTO_TCP, PROTO_UDP};
use super::OffloadError;
use crate::buffer::{Gso, Offload, Packet, Pool, MAX_FRAME};

/// Linux refuses UDP GSO datagrams of more segments than this
/// (`UDP_MAX_SEGMENTS`, include/linux/udp.h).
pub const MAX_SEGMENTS: usize = 128;

/// Where the outer UDP header and the inner IP header lie in an
/// encapsulated super-packet whose outer IP header is at offset 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackSpec {
    pub udp_offset: usize,
    pub inner_l3_offset: usize,
    /// Payload bytes per inner segment; 0 = the packet's `gso_size`.
    pub mss: u16,
}

/// Packs the encapsulated TCP super-packet `pkt` into UDP GSO datagrams
/// (appended to `out`; several when ~64 KB of IP length cannot hold all
/// segments). A datagram left with a single segment is an ordinary packet
/// with its UDP checksum computed when the template carries one (IPv6
/// always, RFC 6935 aside). Returns the number of inner segments.
///
/// `Err(Unsupported)` when fewer than two segments would fit a datagram
/// (the caller segments the usual way). Nothing is appended on error.
pub fn pack(
    pkt: &Packet,
    spec: &PackSpec,
    pool: &mut Pool,
    out: &mut Vec<Packet>,
) -> Result<usize, OffloadError> {
    let d = pkt.data();
    let o = pkt.meta.offload;
    let outer = outer_ip(d)?;
    let u = spec.udp_offset;
    let body = u + hdr::UDP_LEN;
    if outer.proto != PROTO_UDP || outer.l4 != u || body > spec.inner_l3_offset {
        return Err(OffloadError::Malformed);
    }
    let inner = hdr::parse_ip(d, spec.inner_l3_offset, true)?;
    match (o.gso, inner.v6, inner.proto) {
        (Gso::TcpV4, false, PROTO_TCP) | (Gso::TcpV6, true, PROTO_TCP) => {}
        _ => return Err(OffloadError::Unsupported),
    }
    if inner.is_fragment(d) {
        return Err(OffloadError::Malformed);
    }
    let hdr_len = inner.l4 + hdr::tcp_hdr_len(d, &inner)?;
    let payload = &d[hdr_len..inner.end];
    let mss = usize::from(if spec.mss == 0 { o.gso_size } else { spec.mss });
    if mss == 0 {
        return Err(OffloadError::BadSegmentSize);
    }
    let nseg = payload.len().div_ceil(mss);
    // One slice: the tunnel header and the inner headers, then the data.
    let slice_hdr = hdr_len - body;
    let slice = slice_hdr + mss;
    // The outer IP length field bounds a datagram (IPv4 total length,
    // IPv6 payload length); the buffer bounds the frame.
    let ip_fixed = if outer.v6 { hdr::IPV6_HDR_LEN } else { 0 };
    let room = (usize::from(u16::MAX) + ip_fixed).min(MAX_FRAME - 64);
    let per = (room.saturating_sub(body) / slice).min(MAX_SEGMENTS);
    if per < 2 || nseg < 2 {
        return Err(OffloadError::Unsupported);
    }
    let ndgram = nseg.div_ceil(per);
    if pool.available() < ndgram {
        return Err(OffloadError::NoBuffers);
    }
    let udp_needs_csum = outer.v6 || be16(d, u + 6) != 0;
    let shared = InnerSeg {
        tcp: true,
        seq0: be32(d, inner.l4 + 4),
        id0: if inner.v6 { 0 } else { be16(d, inner.l3 + 4) },
        mss,
        partial: false,
    };
    // Inner headers relative to the start of a slice.
    let rel = |x: usize| x - body;
    let outer_id = if outer.v6 { 0 } else { be16(d, 4) };
    let base = out.len();
    let mut chunks = payload.chunks(mss).enumerate().peekable();
    while chunks.peek().is_some() {
        let Some(mut dg) = pool.alloc() else {
            while out.len() > base {
                if let Some(p) = out.pop() {
                    pool.free(p);
                }
            }
            return Err(OffloadError::NoBuffers);
        };
        let area = dg.rx_area();
        area[..body].copy_from_slice(&d[..body]);
        let mut len = body;
        let mut first_i = None;
        let mut n = 0;
        while n < per {
            let Some((i, chunk)) = chunks.next() else {
                break;
            };
            first_i.get_or_insert(i);
            let end = len + slice_hdr + chunk.len();
            area[len..len + slice_hdr].copy_from_slice(&d[body..hdr_len]);
            area[len + slice_hdr..end].copy_from_slice(chunk);
            let ip = Ip {
                v6: inner.v6,
                l3: rel(inner.l3),
                l4: rel(inner.l4),
                proto: PROTO_TCP,
                end: end - len,
            };
            shared.fix(&mut area[len..end], &ip, i, i + 1 == nseg);
            len = end;
            n += 1;
        }
        dg.set_len(len);
        dg.meta = pkt.meta;
        dg.meta.offload = Offload::default();
        let s = dg.data_mut();
        let oip = Ip { end: len, ..outer };
        hdr::set_ip_len(s, 0, outer.v6, len);
        if !outer.v6 {
            // Linux numbers the segments from here on (inet_gso_segment).
            put16(s, 4, outer_id.wrapping_add(first_i.unwrap_or(0) as u16));
            hdr::set_ipv4_csum(s, 0);
        }
        let ulen = len - u;
        put16(s, u + 4, ulen as u16);
        put16(s, u + 6, 0);
        if n > 1 {
            // Partial: pseudo-header over the whole datagram, which UDP
            // segmentation adjusts to each segment's length.
            put16(s, u + 6, super::csum::fold(hdr::pseudo_sum(s, &oip, ulen)));
            dg.meta.offload = Offload {
                needs_csum: true,
                csum_valid: false,
                csum_start: u as u16,
                csum_offset: 6,
                gso: Gso::UdpL4,
                gso_size: slice as u16,
                hdr_len: body as u16,
            };
        } else {
            if udp_needs_csum {
                let c = super::csum::finish(super::csum::sum(
                    &s[u..len],
                    hdr::pseudo_sum(s, &oip, ulen),
                ));
                put16(s, u + 6, if c == 0 { 0xffff } else { c });
            }
            dg.meta.offload.csum_valid = true;
        }
        out.push(dg);
    }
    Ok(nseg)
}

/// The outer IP header at 0 as tunnel-encap's template writes it (no IPv4
/// options or IPv6 extension headers are needed to judge it; its length
/// field is not read: it is clamped for a super-packet over 64 KB).
fn outer_ip(d: &[u8]) -> Result<Ip, OffloadError> {
    let first = *d.first().ok_or(OffloadError::Truncated)?;
    let (v6, l4, proto_at) = match first >> 4 {
        4 => (false, usize::from(first & 0x0f) * 4, 9),
        6 => (true, hdr::IPV6_HDR_LEN, 6),
        _ => return Err(OffloadError::Malformed),
    };
    if l4 < 20 {
        return Err(OffloadError::Malformed);
    }
    if d.len() < l4 {
        return Err(OffloadError::Truncated);
    }
    Ok(Ip {
        v6,
        l3: 0,
        l4,
        proto: d[proto_at],
        end: d.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload::gso::{segment, segment_with, OuterL4, OuterSpec, SegmentSpec};
    use crate::offload::testutil::*;

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
        let spec = PackSpec {
            udp_offset: udp,
            inner_l3_offset: inner_l3,
            mss: 0,
        };
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
        let spec = PackSpec {
            udp_offset: udp,
            inner_l3_offset: inner_l3,
            mss: 0,
        };
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
        let spec = PackSpec {
            udp_offset: udp,
            inner_l3_offset: inner_l3,
            mss: 0,
        };
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
}
