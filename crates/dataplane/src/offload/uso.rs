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
use super::hdr::{self, Ip, PROTO_TCP, PROTO_UDP};
use super::OffloadError;
use packet::buffer::{Gso, Offload, Packet, Pool};
use packet::gso_limit;

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
/// (appended to `out`; several when one datagram the kernel sends whole,
/// [`gso_limit::udp_segments`], cannot hold all segments). A datagram left with a single segment is an ordinary packet
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
    let outer = outer_ip(d)?;
    let u = spec.udp_offset;
    let body = u + hdr::UDP_LEN;
    if outer.proto != PROTO_UDP || outer.l4 != u || body > spec.inner_l3_offset {
        return Err(OffloadError::Malformed);
    }
    let outer_hdr = d.get(..body).ok_or(OffloadError::Truncated)?;
    let id0 = if outer.v6 { 0 } else { hdr::ip4(d, 0).ident() };
    let mut wrap = Copied { id0 };
    pack_slices(
        pkt,
        outer_hdr,
        spec.inner_l3_offset,
        body,
        spec.mss,
        &mut wrap,
        pool,
        out,
    )
}

/// How [`pack_slices`] wraps each inner segment into its slice of a UDP
/// GSO datagram: nothing for VXLAN (its header is copied with the inner
/// ones), an ESP header, IV, trailer and ICV for ESP in UDP (RFC 3948),
/// sealed where the segment lies.
pub trait Slices {
    /// Called once the super-packet was found packable, with its number of
    /// segments, before any buffer is taken.
    fn begin(&mut self, nseg: usize) -> Result<(), OffloadError>;
    /// Bytes of each slice in front of its segment.
    fn front(&self) -> usize;
    /// Length of a slice around a segment of `seg` bytes: at least
    /// `front() + seg`, and never shorter for a longer segment.
    fn slice_len(&self, seg: usize) -> usize;
    /// Outer IPv4 ID of the packet that carries segment `i` (UDP
    /// segmentation numbers a datagram's packets on from its first's).
    fn ipv4_id(&self, i: usize) -> u16;
    /// Finishes slice `i` (`slice_len(seg)` bytes, its segment final at
    /// `front()`).
    fn finish(&mut self, slice: &mut [u8], seg: usize, i: usize) -> Result<(), OffloadError>;
}

/// VXLAN's slices: the segment is the slice.
struct Copied {
    id0: u16,
}

impl Slices for Copied {
    fn begin(&mut self, _: usize) -> Result<(), OffloadError> {
        Ok(())
    }
    fn front(&self) -> usize {
        0
    }
    fn slice_len(&self, seg: usize) -> usize {
        seg
    }
    fn ipv4_id(&self, i: usize) -> u16 {
        // Linux numbers the segments from here on (inet_gso_segment).
        self.id0.wrapping_add(i as u16)
    }
    fn finish(&mut self, _: &mut [u8], _: usize, _: usize) -> Result<(), OffloadError> {
        Ok(())
    }
}

/// The core of [`pack`]: cuts the TCP super-packet `pkt`, whose inner IP
/// header is at `inner_l3`, into segments of `mss` bytes of data (0 = its
/// `gso_size`) and lays them out as the slices of UDP GSO datagrams behind
/// the outer IP + UDP header `outer`. A segment is `pkt`'s bytes from
/// `hdr_from` to the end of its TCP header, then its data; `wrap` places
/// it in its slice and finishes the slice. Each segment's inner headers
/// and checksum are final before `wrap` sees it: the data's sum rides
/// along its one copy.
#[allow(clippy::too_many_arguments)]
pub fn pack_slices(
    pkt: &Packet,
    outer_hdr: &[u8],
    inner_l3: usize,
    hdr_from: usize,
    mss: u16,
    wrap: &mut impl Slices,
    pool: &mut Pool,
    out: &mut Vec<Packet>,
) -> Result<usize, OffloadError> {
    let d = pkt.data();
    let o = pkt.meta.offload;
    let outer = outer_ip(outer_hdr)?;
    let u = outer.l4;
    let body = outer_hdr.len();
    if outer.proto != PROTO_UDP || u + hdr::UDP_LEN != body || body > MAX_OUTER {
        return Err(OffloadError::Malformed);
    }
    if hdr_from > inner_l3 {
        return Err(OffloadError::Malformed);
    }
    let inner = hdr::parse_ip(d, inner_l3, true)?;
    match (o.gso, inner.v6, inner.proto) {
        (Gso::TcpV4, false, PROTO_TCP) | (Gso::TcpV6, true, PROTO_TCP) => {}
        _ => return Err(OffloadError::Unsupported),
    }
    if inner.is_fragment(d) {
        return Err(OffloadError::Malformed);
    }
    let hdr_len = inner.l4 + hdr::tcp_hdr_len(d, &inner)?;
    let payload = &d[hdr_len..inner.end];
    let mss = usize::from(if mss == 0 { o.gso_size } else { mss });
    if mss == 0 {
        return Err(OffloadError::BadSegmentSize);
    }
    let nseg = payload.len().div_ceil(mss);
    // A segment: the headers from `hdr_from`, then the data.
    let seg_hdr = hdr_len - hdr_from;
    let front = wrap.front();
    let slice = wrap.slice_len(seg_hdr + mss);
    if slice < front + seg_hdr + mss {
        return Err(OffloadError::Malformed);
    }
    // What the kernel sends whole bounds a datagram (within the IP length
    // fields and the buffer too).
    let per = gso_limit::udp_segments(body, slice);
    if per < 2 || nseg < 2 {
        return Err(OffloadError::Unsupported);
    }
    let ndgram = nseg.div_ceil(per);
    if pool.available() < ndgram {
        return Err(OffloadError::NoBuffers);
    }
    wrap.begin(nseg)?;
    let udp_needs_csum = outer.v6 || hdr::udp(outer_hdr, u).checksum() != 0;
    let shared = InnerSeg::new(d, &inner, true, hdr_len - inner.l4, mss, false);
    // Inner headers relative to the start of a segment.
    let rel = |x: usize| x - hdr_from;
    let base = out.len();
    let give_back = |out: &mut Vec<Packet>, pool: &mut Pool| {
        while out.len() > base {
            if let Some(p) = out.pop() {
                pool.free(p);
            }
        }
    };
    let mut chunks = payload.chunks(mss).enumerate().peekable();
    while chunks.peek().is_some() {
        let Some(mut dg) = pool.alloc() else {
            give_back(out, pool);
            return Err(OffloadError::NoBuffers);
        };
        let area = dg.rx_area();
        area[..body].copy_from_slice(outer_hdr);
        let mut len = body;
        let mut first_i = None;
        let mut n = 0;
        while n < per {
            let Some((i, chunk)) = chunks.next() else {
                break;
            };
            first_i.get_or_insert(i);
            let seg_len = seg_hdr + chunk.len();
            let end = len + wrap.slice_len(seg_len);
            let Some(s) = area
                .get_mut(len..end)
                .filter(|s| s.len() >= front + seg_len)
            else {
                pool.free(dg);
                give_back(out, pool);
                return Err(OffloadError::TooBig);
            };
            let seg = &mut s[front..front + seg_len];
            seg[..seg_hdr].copy_from_slice(&d[hdr_from..hdr_len]);
            // The inner checksum's payload sum rides along the copy.
            let psum = wire::checksum::copy_data(&mut seg[seg_hdr..], chunk);
            let ip = Ip {
                v6: inner.v6,
                l3: rel(inner.l3),
                l4: rel(inner.l4),
                proto: PROTO_TCP,
                end: seg_len,
            };
            shared.fix(seg, &ip, i, i + 1 == nseg, Some((seg_hdr, psum)));
            if let Err(e) = wrap.finish(s, seg_len, i) {
                pool.free(dg);
                give_back(out, pool);
                return Err(e);
            }
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
            hdr::ip4_mut(s, 0).set_ident(wrap.ipv4_id(first_i.unwrap_or(0)));
            hdr::set_ipv4_csum(s, 0);
        }
        let ulen = len - u;
        let mut h = hdr::udp_mut(s, u);
        h.set_len(ulen as u16);
        h.set_checksum(0);
        if n > 1 {
            // Partial: pseudo-header over the whole datagram, which UDP
            // segmentation adjusts to each segment's length.
            let pseudo = super::csum::fold(hdr::pseudo_sum(s, &oip, ulen));
            hdr::udp_mut(s, u).set_checksum(pseudo);
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
                hdr::udp_mut(s, u).set_computed_checksum(c);
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
    let total = d.len();
    let nslices = (total - body).div_ceil(slice);
    let range = |k: usize| body + k * slice..(body + (k + 1) * slice).min(total);
    // VXLAN header and inner Ethernet in front of each inner IP header.
    let run = tcp_run(d, nslices, range, VXLAN_LEN + ETH_LEN)?;
    let end = merge_run(p, nslices, range, &run);
    let (inner_l4, v6) = (body + run.ip.l4, run.ip.v6);
    let d = p.data_mut();
    // Outer lengths; the UDP checksum is not carried on (the datagram was
    // local and partial): zero over IPv4, and over IPv6 nobody reads it
    // again before the outer headers are pulled.
    hdr::set_ip_len(d, 0, outer.v6, end);
    if !outer.v6 {
        hdr::set_ipv4_csum(d, 0);
    }
    let mut h = hdr::udp_mut(d, u);
    h.set_len((end - u) as u16);
    h.set_checksum(0);
    p.meta.offload = Offload {
        needs_csum: true,
        csum_valid: false,
        csum_start: inner_l4 as u16,
        csum_offset: 16,
        gso: if v6 { Gso::TcpV6 } else { Gso::TcpV4 },
        gso_size: run.mss as u16,
        hdr_len: (body + run.hlen) as u16,
    };
    Ok(())
}

/// The reverse of [`pack_slices`] for ESP in UDP, in place: the inner
/// packets of a UDP GSO datagram's slices, opened where they lie at
/// `inner[k]` in `p`, become one TCP super-packet if they are consecutive
/// segments of one flow (the checks of [`unpack`]) and every TCP checksum
/// is right (the sender's, which nobody has verified yet; Linux GRO checks
/// it before merging too): `p` is then that super-packet, IP header at 0,
/// its checksum partial and marked `TcpV4`/`TcpV6` with the segments' MSS.
/// `Err` leaves the inner packets where they were, for the caller to hand
/// on one by one.
pub fn merge_inner(p: &mut Packet, inner: &[std::ops::Range<usize>]) -> Result<(), OffloadError> {
    let d = p.data();
    let n = inner.len();
    // In order and apart, as slices are: the merge only moves bytes down.
    if n < 2
        || inner.iter().any(|r| r.start > r.end || r.end > d.len())
        || inner.windows(2).any(|w| w[0].end > w[1].start)
    {
        return Err(OffloadError::Unsupported);
    }
    let range = |k: usize| inner[k].clone();
    let run = tcp_run(d, n, range, 0)?;
    if !inner
        .iter()
        .all(|r| super::csum::verify_l4_at(&d[r.clone()], 0))
    {
        return Err(OffloadError::Unsupported);
    }
    let end = merge_run(p, n, range, &run);
    let start = inner[0].start;
    if !p.pull_front(start) {
        return Err(OffloadError::Malformed);
    }
    p.truncate(end - start);
    p.meta.offload = Offload {
        needs_csum: true,
        csum_valid: false,
        csum_start: run.ip.l4 as u16,
        csum_offset: 16,
        gso: if run.ip.v6 { Gso::TcpV6 } else { Gso::TcpV4 },
        gso_size: run.mss as u16,
        hdr_len: run.hlen as u16,
    };
    Ok(())
}

/// What [`tcp_run`] found: the first packet's headers (offsets relative to
/// a packet's start) and the flags the merged packet gets.
struct TcpRun {
    ip: Ip,
    /// End of the TCP header.
    hlen: usize,
    mss: usize,
    flags0: u8,
    last_flags: u8,
}

/// Whether the `n` packets at `range(k)` of `d` — each `prefix` bytes
/// (compared with the first's) and then an IP packet — are consecutive TCP
/// segments of one flow, compared with the first as Linux GRO would before
/// merging: same IP header but for length / ID (IPv4 IDs consecutive),
/// same TCP header and options but for sequence number, flags and
/// checksum; contiguous sequence numbers; full-MSS segments but the last;
/// no SYN, RST, URG, and PSH / FIN only on the last.
fn tcp_run(
    d: &[u8],
    n: usize,
    range: impl Fn(usize) -> std::ops::Range<usize>,
    prefix: usize,
) -> Result<TcpRun, OffloadError> {
    let s0 = d.get(range(0)).ok_or(OffloadError::Truncated)?;
    // The first packet's headers tell the layout every packet must repeat.
    if s0.len() < prefix {
        return Err(OffloadError::Truncated);
    }
    let l3 = prefix;
    let v6 = match s0.get(l3).map(|b| b >> 4) {
        Some(4) => false,
        Some(6) => true,
        _ => return Err(OffloadError::Unsupported),
    };
    if prefix >= ETH_LEN {
        let et = wire::ethernet::ethertype_before(s0, l3);
        if et != Some(if v6 { 0x86dd } else { 0x0800 }) {
            return Err(OffloadError::Unsupported);
        }
    }
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
    if n < 2 {
        return Err(OffloadError::Unsupported);
    }
    let seq0 = hdr::tcp(s0, ip.l4).seq_number();
    let id0 = if v6 { 0 } else { hdr::ip4(s0, l3).ident() };
    let flags0 = hdr::tcp(s0, ip.l4).flags();
    const NEVER: u8 = hdr::TCP_SYN | hdr::TCP_RST | hdr::TCP_URG;
    const VARY: u8 = hdr::TCP_PSH | hdr::TCP_FIN | hdr::TCP_CWR;
    let mut last_flags = flags0;
    for k in 0..n {
        let sk = d.get(range(k)).ok_or(OffloadError::Truncated)?;
        let last = k + 1 == n;
        if sk.len() <= hlen || (!last && sk.len() != s0.len()) || sk.len() > s0.len() {
            return Err(OffloadError::Malformed);
        }
        let same = |a: usize, b: usize| sk[a..b] == s0[a..b];
        // Prefix; IP header but for length, ID, checksum.
        let ip_same = if v6 {
            same(0, l3 + 4) && same(l3 + 6, ip.l4)
        } else {
            same(0, l3 + 2) && same(l3 + 6, l3 + 10) && same(l3 + 12, ip.l4)
        };
        let flags = hdr::tcp(sk, ip.l4).flags();
        // TCP: ports, ack, offset, window, urgent pointer and options.
        let tcp_same = same(ip.l4, ip.l4 + 4)
            && same(ip.l4 + 8, ip.l4 + 13)
            && same(ip.l4 + 14, ip.l4 + 16)
            && same(ip.l4 + 18, hlen);
        // sk is longer than hlen: its IP and TCP headers are whole.
        let ip_len_ok = if v6 {
            let h = wire::ipv6::Packet::new_unchecked(&sk[l3..]);
            usize::from(h.payload_len()) == sk.len() - ip.l4
        } else {
            let h = hdr::ip4(sk, l3);
            usize::from(h.total_len()) == sk.len() - l3 && h.ident() == id0.wrapping_add(k as u16)
        };
        if !(ip_same && tcp_same && ip_len_ok)
            || flags & NEVER != 0
            || (flags & !VARY) != (flags0 & !VARY)
            || (!last && flags & (hdr::TCP_PSH | hdr::TCP_FIN) != 0)
            || (k > 0 && flags & hdr::TCP_CWR != 0)
            || hdr::tcp(sk, ip.l4).seq_number() != seq0.wrapping_add((k * mss) as u32)
        {
            return Err(OffloadError::Unsupported);
        }
        last_flags = flags;
    }
    Ok(TcpRun {
        ip,
        hlen,
        mss,
        flags0,
        last_flags,
    })
}

/// Merges the run [`tcp_run`] accepted, in place: every packet's data
/// moves behind the first's, whose IP length (and IPv4 header checksum),
/// TCP flags and partial checksum (pseudo-header sum) are set for the
/// whole. Returns the end of the merged packet in `p`.
fn merge_run(
    p: &mut Packet,
    n: usize,
    range: impl Fn(usize) -> std::ops::Range<usize>,
    run: &TcpRun,
) -> usize {
    const VARY: u8 = hdr::TCP_PSH | hdr::TCP_FIN | hdr::TCP_CWR;
    let dm = p.data_mut();
    let base = range(0).start;
    let mut end = range(0).end;
    for k in 1..n {
        let r = range(k);
        dm.copy_within(r.start + run.hlen..r.end, end);
        end += r.end - r.start - run.hlen;
    }
    let inner_l3 = base + run.ip.l3;
    let inner_l4 = base + run.ip.l4;
    let v6 = run.ip.v6;
    let inner = Ip {
        v6,
        l3: inner_l3,
        l4: inner_l4,
        proto: PROTO_TCP,
        end,
    };
    // Longer than any one packet's, whose own length field held it.
    hdr::set_ip_len(dm, inner_l3, v6, end);
    if !v6 {
        hdr::set_ipv4_csum(dm, inner_l3);
    }
    let (f0, fl) = (run.flags0, run.last_flags);
    hdr::tcp_mut(dm, inner_l4)
        .set_flags((f0 & !VARY) | (f0 & hdr::TCP_CWR) | (fl & (hdr::TCP_PSH | hdr::TCP_FIN)));
    let pseudo = super::csum::fold(hdr::pseudo_sum(dm, &inner, end - inner_l4));
    hdr::tcp_mut(dm, inner_l4).set_checksum(pseudo);
    p.truncate(end);
    end
}

/// Joins a run of UDP datagrams that share their outer headers (IP header
/// but for length, ID and checksum; UDP ports) and whose payloads all have
/// the first one's size but the last (which may be shorter) into UDP GSO
/// datagrams the kernel sends whole ([`gso_limit::udp_segments`]): what UDP
/// segmentation of the result gives back is the run (outer IPv4 IDs
/// renumbered from the first's, UDP checksums computed).
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
    let per = gso_limit::udp_segments(body, seg);
    let mut made = 0;
    let mut it = run.drain(..).peekable();
    while let Some(mut head) = it.next() {
        let mut n = 1;
        let mut spill = None;
        // A head in a small buffer moves into a large one to grow (left
        // alone, with its followers sent apart, when none is free).
        let joinable = per >= 2
            && head.len() == body + seg
            && fits(&head, false)
            && {
                let last = it.len() == 1;
                it.peek().is_some_and(|q| fits(q, last))
            }
            && pool.grow(&mut head);
        if joinable {
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
            hdr::udp_mut(s, u).set_len((len - u) as u16);
            hdr::udp_mut(s, u).set_checksum(0);
            let pseudo = super::csum::fold(hdr::pseudo_sum(s, &oip, len - u));
            hdr::udp_mut(s, u).set_checksum(pseudo);
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
mod tests;
