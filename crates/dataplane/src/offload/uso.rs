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
use packet::buffer::{Gso, Offload, Packet, Pool, MAX_FRAME};

/// Linux refuses UDP GSO datagrams of more segments than this
/// (`UDP_MAX_SEGMENTS`, include/linux/udp.h).
pub const MAX_SEGMENTS: usize = 128;

/// Longest outer header [`join`] takes: IPv6 (40) + UDP (8).
const MAX_OUTER: usize = 48;

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

/// Bytes of tunnel header in front of the inner Ethernet frame of a slice
/// that [`unpack`] takes apart: VXLAN's 8 (RFC 7348 §5).
const VXLAN_LEN: usize = 8;
const ETH_LEN: usize = 14;

/// The reverse of [`pack`], in place: a received UDP GSO datagram whose
/// slices are VXLAN packets carrying consecutive TCP segments of one flow
/// (what [`pack`] makes of one super-packet) becomes one VXLAN packet whose
/// inner frame is that TCP super-packet again — slice 0's headers, then
/// every slice's data, lengths fixed, the inner TCP checksum left partial
/// and the packet marked `TcpV4`/`TcpV6` with the slices' MSS — so the
/// receiving gateway decapsulates and forwards one packet instead of 45.
///
/// Only for datagrams whose checksum is partial (a sender on this host: the
/// bytes never left memory, as for any partial checksum); anything that is
/// not exactly such a run of segments is `Err` and left untouched, for the
/// caller to cut apart the usual way. Every slice is compared with slice 0
/// as Linux GRO would before merging: same VXLAN header and inner Ethernet
/// header, same inner IP header but for length / ID (IPv4 IDs consecutive),
/// same TCP header and options but for sequence number, flags and checksum;
/// contiguous sequence numbers; full-MSS slices but the last; no SYN, RST,
/// URG, and PSH / FIN only on the last.
pub fn unpack(p: &mut Packet, udp_offset: usize) -> Result<(), OffloadError> {
    let o = p.meta.offload;
    if o.gso != Gso::UdpL4 || !o.needs_csum || o.gso_size == 0 {
        return Err(OffloadError::Unsupported);
    }
    let d = p.data();
    let outer = outer_ip(d)?;
    let u = udp_offset;
    let body = u + hdr::UDP_LEN;
    if outer.proto != PROTO_UDP || outer.l4 != u || d.len() <= body {
        return Err(OffloadError::Malformed);
    }
    let slice = usize::from(o.gso_size);
    let s0 = &d[body..(body + slice).min(d.len())];
    // Slice 0's headers tell the layout every slice must repeat.
    if s0.len() < VXLAN_LEN + ETH_LEN {
        return Err(OffloadError::Truncated);
    }
    let l3 = VXLAN_LEN + ETH_LEN;
    let v6 = match be16(s0, l3 - 2) {
        0x0800 => false,
        0x86dd => true,
        _ => return Err(OffloadError::Unsupported),
    };
    let ip = hdr::parse_ip(s0, l3, false)?;
    if ip.v6 != v6 || ip.proto != PROTO_TCP || ip.is_fragment(s0) || ip.end != s0.len() {
        return Err(OffloadError::Unsupported);
    }
    let thl = hdr::tcp_hdr_len(s0, &ip)?;
    let hlen = ip.l4 + thl;
    let mss = s0
        .len()
        .checked_sub(hlen)
        .filter(|&m| m > 0)
        .ok_or(OffloadError::BadSegmentSize)?;
    let nslices = (d.len() - body).div_ceil(slice);
    if nslices < 2 {
        return Err(OffloadError::Unsupported);
    }
    let seq0 = be32(s0, ip.l4 + 4);
    let id0 = if v6 { 0 } else { be16(s0, l3 + 4) };
    let flags0 = s0[ip.l4 + 13];
    const NEVER: u8 = hdr::TCP_SYN | hdr::TCP_RST | hdr::TCP_URG;
    const VARY: u8 = hdr::TCP_PSH | hdr::TCP_FIN | hdr::TCP_CWR;
    let mut last_flags = flags0;
    for k in 0..nslices {
        let start = body + k * slice;
        let sk = &d[start..(start + slice).min(d.len())];
        let last = k + 1 == nslices;
        if sk.len() <= hlen || (!last && sk.len() != slice) {
            return Err(OffloadError::Malformed);
        }
        let same = |a: usize, b: usize| sk[a..b] == s0[a..b];
        // VXLAN + inner Ethernet; IP header but for length, ID, checksum.
        let ip_same = if v6 {
            same(0, l3 + 4) && same(l3 + 6, ip.l4)
        } else {
            same(0, l3 + 2) && same(l3 + 6, l3 + 10) && same(l3 + 12, ip.l4)
        };
        let flags = sk[ip.l4 + 13];
        // TCP: ports, ack, offset, window, urgent pointer and options.
        let tcp_same = same(ip.l4, ip.l4 + 4)
            && same(ip.l4 + 8, ip.l4 + 13)
            && same(ip.l4 + 14, ip.l4 + 16)
            && same(ip.l4 + 18, hlen);
        let ip_len_ok = if v6 {
            usize::from(be16(sk, l3 + 4)) == sk.len() - ip.l4
        } else {
            usize::from(be16(sk, l3 + 2)) == sk.len() - l3
                && be16(sk, l3 + 4) == id0.wrapping_add(k as u16)
        };
        if !(ip_same && tcp_same && ip_len_ok)
            || flags & NEVER != 0
            || (flags & !VARY) != (flags0 & !VARY)
            || (!last && flags & (hdr::TCP_PSH | hdr::TCP_FIN) != 0)
            || (k > 0 && flags & hdr::TCP_CWR != 0)
            || be32(sk, ip.l4 + 4) != seq0.wrapping_add((k * mss) as u32)
        {
            return Err(OffloadError::Unsupported);
        }
        last_flags = flags;
    }
    // Valid: move every slice's data behind slice 0's.
    let total = d.len();
    let dm = p.data_mut();
    let mut end = body + slice;
    for k in 1..nslices {
        let from = body + k * slice + hlen;
        let to = (body + (k + 1) * slice).min(total);
        dm.copy_within(from..to, end);
        end += to - from;
    }
    p.truncate(end);
    let d = p.data_mut();
    let inner_l3 = body + l3;
    let inner_l4 = body + ip.l4;
    let inner = Ip {
        v6,
        l3: inner_l3,
        l4: inner_l4,
        proto: PROTO_TCP,
        end,
    };
    // Shorter than the datagram, whose own length field held it.
    hdr::set_ip_len(d, inner_l3, v6, end);
    if !v6 {
        hdr::set_ipv4_csum(d, inner_l3);
    }
    d[inner_l4 + 13] =
        (flags0 & !VARY) | (flags0 & hdr::TCP_CWR) | (last_flags & (hdr::TCP_PSH | hdr::TCP_FIN));
    put16(
        d,
        inner_l4 + 16,
        super::csum::fold(hdr::pseudo_sum(d, &inner, end - inner_l4)),
    );
    // Outer lengths; the UDP checksum is not carried on (the datagram was
    // local and partial): zero over IPv4, and over IPv6 nobody reads it
    // again before the outer headers are pulled.
    hdr::set_ip_len(d, 0, outer.v6, end);
    if !outer.v6 {
        hdr::set_ipv4_csum(d, 0);
    }
    put16(d, u + 4, (end - u) as u16);
    put16(d, u + 6, 0);
    p.meta.offload = Offload {
        needs_csum: true,
        csum_valid: false,
        csum_start: inner_l4 as u16,
        csum_offset: 16,
        gso: if v6 { Gso::TcpV6 } else { Gso::TcpV4 },
        gso_size: mss as u16,
        hdr_len: (inner_l4 + thl) as u16,
    };
    Ok(())
}

/// Joins a run of UDP datagrams that share their outer headers (IP header
/// but for length, ID and checksum; UDP ports) and whose payloads all have
/// the first one's size but the last (which may be shorter) into UDP GSO
/// datagrams: what UDP segmentation of the result gives back is the run
/// (outer IPv4 IDs renumbered from the first's, UDP checksums computed).
/// ESP in UDP (RFC 3948) of one super-packet's segments is such a run: its
/// packets are sealed one by one, then sent as one. The datagrams of `run`
/// (left empty) are moved to `out` — joined ones appended into the first buffer of
/// their group, the others unchanged — and the emptied buffers go back to
/// `pool`. Returns the number of GSO datagrams made.
pub fn join(run: &mut Vec<Packet>, out: &mut Vec<Packet>, pool: &mut Pool) -> usize {
    let Some(first) = run.first() else {
        return 0;
    };
    let d = first.data();
    let shape = outer_ip(d).ok().and_then(|ip| {
        let body = ip.l4 + hdr::UDP_LEN;
        (ip.proto == PROTO_UDP && d.len() > body && body <= MAX_OUTER).then_some((
            ip,
            body,
            d.len() - body,
        ))
    });
    let Some((ip, body, seg)) = shape else {
        out.append(run);
        return 0;
    };
    // The first datagram's headers, which every joined one must repeat.
    let mut h0 = [0u8; MAX_OUTER];
    h0[..body].copy_from_slice(&d[..body]);
    let fits = |q: &Packet, last: bool| {
        let e = q.data();
        let (a, b) = (&h0[..body], e.get(..body).unwrap_or(&[]));
        let hdr_same = b.len() == body
            && if ip.v6 {
                a[..4] == b[..4] && a[6..ip.l4 + 4] == b[6..ip.l4 + 4]
            } else {
                a[..2] == b[..2] && a[6..10] == b[6..10] && a[12..ip.l4 + 4] == b[12..ip.l4 + 4]
            };
        let n = e.len().saturating_sub(body);
        hdr_same && (n == seg || (last && n > 0 && n < seg))
    };
    let ip_fixed = if ip.v6 { hdr::IPV6_HDR_LEN } else { 0 };
    let room = (usize::from(u16::MAX) + ip_fixed).min(MAX_FRAME - 64);
    let per = ((room - body) / seg).min(MAX_SEGMENTS);
    let mut made = 0;
    let mut it = run.drain(..).peekable();
    while let Some(mut head) = it.next() {
        let mut n = 1;
        let mut spill = None;
        if per >= 2 && head.len() == body + seg && fits(&head, false) {
            while n < per {
                let last = it.len() == 1;
                let Some(next) = it.peek() else { break };
                if !fits(next, last) {
                    break;
                }
                let Some(q) = it.next() else { break };
                let add = q.len() - body;
                let Some(tail) = head.extend(add) else {
                    // No room after all (a buffer pulled far): q goes on
                    // its own, right after.
                    spill = Some(q);
                    break;
                };
                tail.copy_from_slice(&q.data()[body..]);
                n += 1;
                pool.free(q);
                if add < seg {
                    break;
                }
            }
        }
        if n >= 2 {
            let len = head.len();
            let s = head.data_mut();
            let oip = Ip { end: len, ..ip };
            hdr::set_ip_len(s, 0, ip.v6, len);
            if !ip.v6 {
                hdr::set_ipv4_csum(s, 0);
            }
            let u = ip.l4;
            put16(s, u + 4, (len - u) as u16);
            put16(s, u + 6, 0);
            put16(
                s,
                u + 6,
                super::csum::fold(hdr::pseudo_sum(s, &oip, len - u)),
            );
            head.meta.offload = Offload {
                needs_csum: true,
                csum_valid: false,
                csum_start: u as u16,
                csum_offset: 6,
                gso: Gso::UdpL4,
                gso_size: seg as u16,
                hdr_len: body as u16,
            };
            made += 1;
        }
        out.push(head);
        out.extend(spill);
    }
    made
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

    #[test]
    fn unpack_never_panics_on_mangled_datagrams() {
        let mut pool = Pool::new(64);
        let (_, base, _) = one_pack(false, false, &mut pool);
        let mut rng = 0x9e37_79b9u32;
        for _ in 0..2000 {
            let mut p = pool.alloc().unwrap();
            assert!(p.set_data(base.data()));
            p.meta = base.meta;
            for _ in 0..3 {
                rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let at = (rng >> 8) as usize % p.len();
                p.data_mut()[at] ^= (rng >> 3) as u8 | 1;
            }
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
}
