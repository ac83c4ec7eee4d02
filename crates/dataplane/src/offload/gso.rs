//! Software segmentation of TCP and UDP super-packets (GSO / TSO / USO).
//!
//! A super-packet arrives with Linux's virtio-net offload state
//! ([`Gso`], `gso_size`): one set of headers followed by up to 64 KB of
//! payload. [`segment`] cuts it into packets of at most `gso_size` payload
//! bytes, each with its own copy of the headers, fixed up the way the
//! kernel's `tcp_gso_segment()` / `__udp_gso_segment()` do.
//!
//! The super-packet may already be **encapsulated** (outer
//! Ethernet/IP/[UDP+VXLAN | GRE]): the tunnel node encapsulates once, and the
//! outer headers then act as a template that [`segment_with`] copies and
//! fixes up per segment (outer IP length/ID/checksum, outer UDP length and
//! checksum, GRE checksum). The outer length fields of the super-packet are
//! never read, since a 64 KB inner packet plus its tunnel headers need not
//! fit them.
//!
//! Nothing here allocates: segments come from the caller's [`Pool`], and
//! `out` should have room for `payload / mss + 1` more packets.

use super::csum::{finish, fold, sum};
use super::hdr::{self, Ip, PROTO_TCP, PROTO_UDP, TCP_CWR, TCP_FIN, TCP_PSH};
use super::OffloadError;
use packet::buffer::{Gso, Offload, Packet, Pool, MAX_FRAME};
use wire::checksum::copy_data;

/// The outer L4 header of an encapsulated super-packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OuterL4 {
    /// IP-in-IP: nothing between the outer and the inner IP header but
    /// what `inner_l3_offset` skips.
    None,
    /// UDP (VXLAN, Geneve) at this offset. Over IPv4 a zero checksum in the
    /// template stays zero (RFC 7348 §5 allows it for VXLAN); otherwise, and
    /// always over IPv6, the outer UDP checksum is computed per segment.
    Udp { offset: usize },
    /// GRE (or NVGRE) at this offset. With the C bit, the GRE checksum
    /// (RFC 2784 §2.5) is computed per segment. Sequence numbers (S bit,
    /// RFC 2890) are refused: each segment would need its own from the
    /// tunnel, which only the tunnel node can assign.
    Gre { offset: usize },
}

/// Where the outer headers of an encapsulated super-packet are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OuterSpec {
    /// Offset of the outer IPv4/IPv6 header.
    pub l3_offset: usize,
    pub l4: OuterL4,
}

/// What to segment and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentSpec {
    /// Outer headers, for a super-packet encapsulated before segmentation.
    pub outer: Option<OuterSpec>,
    /// Offset of the IP header whose TCP/UDP payload is cut.
    pub inner_l3_offset: usize,
    /// Payload bytes per segment; 0 takes `offload.gso_size`.
    pub mss: u16,
    /// The egress port computes L4 checksums (vnet header with NEEDS_CSUM):
    /// leave each segment with the pseudo-header sum in its checksum field
    /// and `needs_csum` set instead of computing the full checksum. Ignored
    /// when an outer checksum (UDP or GRE) covers the inner packet, since that
    /// one must be computed over the final inner bytes.
    pub partial_csum: bool,
}

impl SegmentSpec {
    /// A plain (not encapsulated) super-packet with its IP header at `l3`.
    pub fn plain(l3_offset: usize) -> Self {
        SegmentSpec {
            outer: None,
            inner_l3_offset: l3_offset,
            mss: 0,
            partial_csum: false,
        }
    }
}

/// Segments a plain super-packet whose IP header is at `meta.l3_offset`,
/// computing full checksums. Returns the number of segments appended to
/// `out`. See [`segment_with`].
pub fn segment(
    pkt: &Packet,
    pool: &mut Pool,
    out: &mut Vec<Packet>,
) -> Result<usize, OffloadError> {
    segment_with(
        pkt,
        &SegmentSpec::plain(usize::from(pkt.meta.l3_offset)),
        pool,
        out,
    )
}

/// Checked layout of the outer headers.
struct Outer {
    ip: Ip,
    id: u16,
    udp: Option<(usize, bool)>,
    gre_csum: Option<usize>,
}

fn parse_outer(d: &[u8], spec: &OuterSpec, inner_l3: usize) -> Result<Outer, OffloadError> {
    let l3 = spec.l3_offset;
    let first = *d.get(l3).ok_or(OffloadError::Truncated)?;
    let (v6, l4_min, proto_at) = match first >> 4 {
        4 => {
            let ihl = usize::from(first & 0x0f) * 4;
            if ihl < 20 {
                return Err(OffloadError::Malformed);
            }
            (false, l3 + ihl, l3 + 9)
        }
        6 => (true, l3 + hdr::IPV6_HDR_LEN, l3 + 6),
        _ => return Err(OffloadError::Malformed),
    };
    if l4_min > inner_l3 || inner_l3 > d.len() {
        return Err(OffloadError::Malformed);
    }
    let id = if v6 { 0 } else { hdr::ip4(d, l3).ident() };
    let mut outer = Outer {
        ip: Ip {
            v6,
            l3,
            l4: l4_min,
            proto: d[proto_at],
            end: 0,
        },
        id,
        udp: None,
        gre_csum: None,
    };
    match spec.l4 {
        OuterL4::None => {}
        OuterL4::Udp { offset } => {
            if offset < l4_min || offset + hdr::UDP_LEN > inner_l3 {
                return Err(OffloadError::Malformed);
            }
            let needs = v6 || hdr::udp(d, offset).checksum() != 0;
            outer.ip.l4 = offset;
            outer.ip.proto = PROTO_UDP;
            outer.udp = Some((offset, needs));
        }
        OuterL4::Gre { offset } => {
            if offset < l4_min || offset + 4 > inner_l3 {
                return Err(OffloadError::Malformed);
            }
            // RFC 2784 §2, RFC 2890 §2: no sequence number to set per
            // segment; reserved bits and version zero.
            let gre = wire::gre::Gre::new_unchecked(&d[offset..inner_l3]);
            if gre.seq_present() {
                return Err(OffloadError::Unsupported);
            }
            if !gre.reserved0_clear() || gre.version() != 0 {
                return Err(OffloadError::Malformed);
            }
            if gre.checksum_present() {
                if offset + 8 > inner_l3 {
                    return Err(OffloadError::Malformed);
                }
                outer.gre_csum = Some(offset);
            }
        }
    }
    Ok(outer)
}

/// Segments a (possibly encapsulated) super-packet as `spec` describes and
/// appends the segments to `out`; returns how many. The header length is
/// computed from the headers themselves (`offload.hdr_len` is not trusted).
///
/// Per segment (as the kernel's `inet_gso_segment` / `tcp_gso_segment`):
/// IPv4 total length, ID (+1 per segment) and header checksum; IPv6 payload
/// length; TCP sequence number advanced by the payload offset, FIN and PSH
/// only on the last segment, CWR only on the first, full checksum (or the
/// pseudo-header sum with `partial_csum`); UDP length and checksum. Bytes
/// beyond the inner IP packet's end (Ethernet padding) are dropped.
///
/// On error nothing is appended and every buffer goes back to the pool.
pub fn segment_with(
    pkt: &Packet,
    spec: &SegmentSpec,
    pool: &mut Pool,
    out: &mut Vec<Packet>,
) -> Result<usize, OffloadError> {
    let d = pkt.data();
    let o = pkt.meta.offload;
    let inner = hdr::parse_ip(d, spec.inner_l3_offset, true)?;
    if inner.is_fragment(d) {
        return Err(OffloadError::Malformed);
    }
    let tcp = match (o.gso, inner.v6, inner.proto) {
        (Gso::TcpV4, false, PROTO_TCP) | (Gso::TcpV6, true, PROTO_TCP) => true,
        (Gso::UdpL4, _, PROTO_UDP) => false,
        _ => return Err(OffloadError::Unsupported),
    };
    let l4_hlen = if tcp {
        hdr::tcp_hdr_len(d, &inner)?
    } else if inner.l4 + hdr::UDP_LEN <= inner.end {
        hdr::UDP_LEN
    } else {
        return Err(OffloadError::Truncated);
    };
    let outer = match &spec.outer {
        Some(os) => Some(parse_outer(d, os, spec.inner_l3_offset)?),
        None => None,
    };
    let hdr_len = inner.l4 + l4_hlen;
    let payload = &d[hdr_len..inner.end];
    let mss = usize::from(if spec.mss == 0 { o.gso_size } else { spec.mss });
    if mss == 0 {
        return Err(OffloadError::BadSegmentSize);
    }
    let nseg = payload.len().div_ceil(mss).max(1);
    let max_len = hdr_len + mss.min(payload.len());
    if max_len > MAX_FRAME {
        return Err(OffloadError::TooBig);
    }
    if let Some(ou) = &outer {
        let ip_len = max_len - ou.ip.l3 - if ou.ip.v6 { hdr::IPV6_HDR_LEN } else { 0 };
        if ip_len > usize::from(u16::MAX) {
            return Err(OffloadError::TooBig);
        }
    }
    if pool.available_for(max_len) < nseg {
        return Err(OffloadError::NoBuffers);
    }
    let outer_covers_inner = outer
        .as_ref()
        .is_some_and(|ou| ou.gre_csum.is_some() || ou.udp.is_some_and(|(_, needs)| needs));
    let partial = spec.partial_csum && !outer_covers_inner;
    let shared = InnerSeg::new(d, &inner, tcp, l4_hlen, mss, partial);
    // The outer IPv4 header's unchanging words, summed once.
    let outer_ip4_sum = outer
        .as_ref()
        .filter(|ou| !ou.ip.v6)
        .map_or(0, |ou| hdr::ipv4_sum_but_len_id(d, ou.ip.l3));
    let base = out.len();

    for (i, chunk) in payload
        .chunks(mss)
        .chain(payload.is_empty().then_some(&payload[..0]))
        .enumerate()
    {
        let len = hdr_len + chunk.len();
        let Some(mut seg) = pool.alloc_for(len) else {
            while out.len() > base {
                if let Some(p) = out.pop() {
                    pool.free(p);
                }
            }
            return Err(OffloadError::NoBuffers);
        };
        let area = seg.rx_area();
        area[..hdr_len].copy_from_slice(&d[..hdr_len]);
        // The payload's sum rides along its copy, unless an outer checksum
        // or the egress port computes over the final bytes anyway.
        let payload_sum = if partial || outer_covers_inner {
            area[hdr_len..len].copy_from_slice(chunk);
            None
        } else {
            Some((hdr_len, copy_data(&mut area[hdr_len..len], chunk)))
        };
        seg.set_len(len);
        seg.meta = pkt.meta;
        seg.meta.offload = Offload::default();
        let s = seg.data_mut();
        let last = i + 1 == nseg;

        let ip = Ip { end: len, ..inner };
        let csum_at = shared.fix(s, &ip, i, last, payload_sum);

        // Outer headers, after the inner bytes they may checksum are final.
        if let Some(ou) = &outer {
            let l3 = ou.ip.l3;
            if ou.ip.v6 {
                hdr::set_ip_len(s, l3, true, len);
            } else {
                let id = ou.id.wrapping_add(i as u16);
                hdr::set_ipv4_len_id(s, l3, outer_ip4_sum, (len - l3) as u16, id);
            }
            if let Some((u, needs)) = ou.udp {
                let ulen = len - u;
                let mut h = hdr::udp_mut(s, u);
                h.set_len(ulen as u16);
                h.set_checksum(0);
                if needs {
                    let oip = Ip { end: len, ..ou.ip };
                    let c = finish(sum(&s[u..], hdr::pseudo_sum(s, &oip, ulen)));
                    hdr::udp_mut(s, u).set_computed_checksum(c);
                }
            }
            if let Some(g) = ou.gre_csum {
                // C set (checked): over the GRE header and payload.
                wire::gre::Gre::new_unchecked(&mut s[g..]).fill_checksum();
            }
        }

        if partial {
            seg.meta.offload.needs_csum = true;
            seg.meta.offload.csum_start = ip.l4 as u16;
            seg.meta.offload.csum_offset = (csum_at - ip.l4) as u16;
        } else {
            seg.meta.offload.csum_valid = true;
        }
        out.push(seg);
    }
    Ok(nseg)
}

/// What every segment of one super-packet shares, for rewriting the inner
/// IP and TCP/UDP headers of each ([`InnerSeg::fix`]). The sums of the
/// header words no segment changes are taken once, from the super-packet:
/// a segment's checksums are then finished from the values it writes,
/// never by reading back its fresh header (see [`hdr::ipv4_sum_but_len_id`]).
#[derive(Clone, Copy)]
pub(super) struct InnerSeg {
    pub tcp: bool,
    /// The super-packet's first TCP sequence number and IPv4 ID.
    pub seq0: u32,
    pub id0: u16,
    pub mss: usize,
    /// Leave the L4 checksum partial (pseudo-header sum only).
    pub partial: bool,
    /// IPv4 header words but length, ID and checksum.
    ip4_sum: u64,
    /// Pseudo-header addresses and protocol (RFC 793 §3.1, RFC 8200 §8.1).
    pseudo_sum: u64,
    /// TCP: the header's words but sequence number, offset/flags and
    /// checksum; UDP: the ports.
    l4_sum: u64,
    /// TCP/UDP header length, and TCP's data-offset byte and flags.
    l4_hlen: usize,
    tcp_off: u8,
    tcp_flags: u8,
}

impl InnerSeg {
    /// The shared part of the segments of the super-packet `d`, whose inner
    /// headers `inner` locates (checked by the caller: the TCP header lies
    /// within `inner.end`, `l4_hlen` long, or the UDP header does).
    pub(super) fn new(
        d: &[u8],
        inner: &Ip,
        tcp: bool,
        l4_hlen: usize,
        mss: usize,
        partial: bool,
    ) -> Self {
        let (id0, ip4_sum) = if inner.v6 {
            (0, 0)
        } else {
            (
                hdr::ip4(d, inner.l3).ident(),
                hdr::ipv4_sum_but_len_id(d, inner.l3),
            )
        };
        let (l4, n) = (inner.l4, l4_hlen.min(60));
        let h = &d[l4..l4 + n];
        // TCP: sequence number, offset/flags and checksum change per
        // segment; UDP: length and checksum.
        let (seq0, tcp_off, tcp_flags, l4_sum) = if tcp {
            let but = [4..8, 12..14, 16..18];
            let seq = hdr::tcp(d, l4).seq_number();
            (seq, h[12], h[13], hdr::header_sum_but(h, &but))
        } else {
            (
                0,
                0,
                0,
                hdr::header_sum_but(h, std::slice::from_ref(&(4..8))),
            )
        };
        Self {
            tcp,
            seq0,
            id0,
            mss,
            partial,
            ip4_sum,
            pseudo_sum: hdr::pseudo_sum(d, inner, 0),
            l4_sum,
            l4_hlen: n,
            tcp_off,
            tcp_flags,
        }
    }

    /// Makes segment `i`'s inner headers true for its bytes: IP length,
    /// IPv4 ID and header checksum, TCP sequence number and flags (FIN/PSH
    /// only on the last, CWR only on the first, as Linux's tcp_gso_segment)
    /// or UDP length, and the L4 checksum. `ip` locates the headers in `s`
    /// with `end` = the segment's end. `payload`: where the segment's
    /// payload starts in `s` and its sum, taken while it was copied
    /// (`wire::checksum::copy_data`), so only the headers are summed here.
    /// Returns the checksum field's offset.
    pub(super) fn fix(
        &self,
        s: &mut [u8],
        ip: &Ip,
        i: usize,
        last: bool,
        payload: Option<(usize, u16)>,
    ) -> usize {
        let len = ip.end;
        if ip.v6 {
            hdr::set_ip_len(s, ip.l3, true, len);
        } else {
            let id = self.id0.wrapping_add(i as u16);
            hdr::set_ipv4_len_id(s, ip.l3, self.ip4_sum, (len - ip.l3) as u16, id);
        }
        let l4_len = len - ip.l4;
        // The words of the L4 header this segment writes.
        let written = if self.tcp {
            let seq = self.seq0.wrapping_add((i * self.mss) as u32);
            let mut flags = self.tcp_flags;
            if !last {
                flags &= !(TCP_FIN | TCP_PSH);
            }
            if i != 0 {
                flags &= !TCP_CWR;
            }
            let mut t = hdr::tcp_mut(s, ip.l4);
            t.set_seq_number(seq);
            t.set_flags(flags);
            u64::from(seq >> 16)
                + u64::from(seq & 0xffff)
                + u64::from(u16::from_be_bytes([self.tcp_off, flags]))
        } else {
            hdr::udp_mut(s, ip.l4).set_len(l4_len as u16);
            l4_len as u64
        };
        let pseudo = self.pseudo_sum + l4_len as u64;
        if self.partial {
            self.set_l4_checksum(s, ip.l4, fold(pseudo));
        } else {
            let c = match payload {
                Some((at, psum)) if at == ip.l4 + self.l4_hlen && at <= len => {
                    finish(pseudo + self.l4_sum + written + u64::from(psum))
                }
                _ => {
                    self.set_l4_checksum(s, ip.l4, 0);
                    finish(sum(&s[ip.l4..len], pseudo))
                }
            };
            if self.tcp {
                hdr::tcp_mut(s, ip.l4).set_checksum(c);
            } else {
                hdr::udp_mut(s, ip.l4).set_computed_checksum(c);
            }
        }
        ip.l4 + if self.tcp { 16 } else { 6 }
    }

    /// Stores `v` as it is in the TCP or UDP checksum field at `l4`.
    fn set_l4_checksum(&self, s: &mut [u8], l4: usize, v: u16) {
        if self.tcp {
            hdr::tcp_mut(s, l4).set_checksum(v);
        } else {
            hdr::udp_mut(s, l4).set_checksum(v);
        }
    }
}

#[cfg(test)]
mod tests;
