//! Minimal, bounds-checked IP/TCP/UDP header access shared by the offloads.
//!
//! [`parse_ip`] and [`tcp_hdr_len`] check once where the headers lie in a
//! frame; the offloads then read and write their fields through `wire`'s
//! views over those checked offsets ([`ip4`], [`tcp`], [`udp`], ... below).

use super::OffloadError;
use wire::{ipv4, ipv6, tcp, udp};

pub(crate) const PROTO_TCP: u8 = 6;
pub(crate) const PROTO_UDP: u8 = 17;
pub(crate) const IPV6_HDR_LEN: usize = 40;
pub(crate) const TCP_MIN_LEN: usize = 20;
pub(crate) const UDP_LEN: usize = 8;

pub(crate) const TCP_FIN: u8 = 0x01;
pub(crate) const TCP_SYN: u8 = 0x02;
pub(crate) const TCP_RST: u8 = 0x04;
pub(crate) const TCP_PSH: u8 = 0x08;
pub(crate) const TCP_ACK: u8 = 0x10;
pub(crate) const TCP_URG: u8 = 0x20;
pub(crate) const TCP_CWR: u8 = 0x80;

/// The IPv4 header at `l3`, an offset [`parse_ip`] (or the caller) checked.
#[inline]
pub(crate) fn ip4(d: &[u8], l3: usize) -> ipv4::Packet<&[u8]> {
    ipv4::Packet::new_unchecked(&d[l3..])
}

#[inline]
pub(crate) fn ip4_mut(d: &mut [u8], l3: usize) -> ipv4::Packet<&mut [u8]> {
    ipv4::Packet::new_unchecked(&mut d[l3..])
}

#[inline]
pub(crate) fn ip6_mut(d: &mut [u8], l3: usize) -> ipv6::Packet<&mut [u8]> {
    ipv6::Packet::new_unchecked(&mut d[l3..])
}

/// The TCP header at `l4`, checked by [`tcp_hdr_len`].
#[inline]
pub(crate) fn tcp(d: &[u8], l4: usize) -> tcp::Packet<&[u8]> {
    tcp::Packet::new_unchecked(&d[l4..])
}

#[inline]
pub(crate) fn tcp_mut(d: &mut [u8], l4: usize) -> tcp::Packet<&mut [u8]> {
    tcp::Packet::new_unchecked(&mut d[l4..])
}

/// The UDP header at `l4`, checked by the caller (`l4 + 8` within the IP
/// packet).
#[inline]
pub(crate) fn udp(d: &[u8], l4: usize) -> udp::Packet<&[u8]> {
    udp::Packet::new_unchecked(&d[l4..])
}

#[inline]
pub(crate) fn udp_mut(d: &mut [u8], l4: usize) -> udp::Packet<&mut [u8]> {
    udp::Packet::new_unchecked(&mut d[l4..])
}

/// Where the IP header and its L4 payload lie in a frame. All offsets are
/// absolute (from the start of the frame) and validated against it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ip {
    pub v6: bool,
    pub l3: usize,
    /// Offset of the L4 header (after IPv4 options / IPv6 extension headers).
    pub l4: usize,
    /// L4 protocol number.
    pub proto: u8,
    /// End of the IP packet as its length field says (frame may be longer:
    /// Ethernet padding).
    pub end: usize,
}

impl Ip {
    /// IPv4: is this packet a fragment (MF set or non-zero offset)?
    pub fn is_fragment(&self, d: &[u8]) -> bool {
        !self.v6 && ip4(d, self.l3).is_fragment()
    }
}

/// Parses the IPv4 or IPv6 header at `l3`. IPv6 extension headers
/// (hop-by-hop, routing, destination options) are skipped when `allow_ext`;
/// a fragment header is [`OffloadError::Unsupported`].
pub(crate) fn parse_ip(d: &[u8], l3: usize, allow_ext: bool) -> Result<Ip, OffloadError> {
    let first = *d.get(l3).ok_or(OffloadError::Truncated)?;
    match first >> 4 {
        4 => {
            if d.len() < l3 + 20 {
                return Err(OffloadError::Truncated);
            }
            let ihl = usize::from(first & 0x0f) * 4;
            let total = usize::from(ip4(d, l3).total_len());
            if ihl < 20 || total < ihl {
                return Err(OffloadError::Malformed);
            }
            if d.len() < l3 + total {
                return Err(OffloadError::Truncated);
            }
            Ok(Ip {
                v6: false,
                l3,
                l4: l3 + ihl,
                proto: d[l3 + 9],
                end: l3 + total,
            })
        }
        6 => {
            if d.len() < l3 + IPV6_HDR_LEN {
                return Err(OffloadError::Truncated);
            }
            let plen = usize::from(ipv6::Packet::new_unchecked(&d[l3..]).payload_len());
            let end = l3 + IPV6_HDR_LEN + plen;
            if plen == 0 {
                // A jumbogram (RFC 2675) or garbage: neither is ours to cut.
                return Err(OffloadError::Unsupported);
            }
            if d.len() < end {
                return Err(OffloadError::Truncated);
            }
            let mut next = d[l3 + 6];
            let mut off = l3 + IPV6_HDR_LEN;
            // Bounded walk: at most 8 extension headers.
            for _ in 0..8 {
                match next {
                    0 | 43 | 60 if allow_ext => {
                        if off + 8 > end {
                            return Err(OffloadError::Truncated);
                        }
                        next = d[off];
                        off += (usize::from(d[off + 1]) + 1) * 8;
                        if off > end {
                            return Err(OffloadError::Truncated);
                        }
                    }
                    0 | 43 | 60 | 44 | 50 | 51 => return Err(OffloadError::Unsupported),
                    _ => {
                        return Ok(Ip {
                            v6: true,
                            l3,
                            l4: off,
                            proto: next,
                            end,
                        })
                    }
                }
            }
            Err(OffloadError::Unsupported)
        }
        _ => Err(OffloadError::Malformed),
    }
}

/// Length of the TCP header at `ip.l4` (data offset), checked against the
/// IP packet's end.
pub(crate) fn tcp_hdr_len(d: &[u8], ip: &Ip) -> Result<usize, OffloadError> {
    if ip.l4 + TCP_MIN_LEN > ip.end {
        return Err(OffloadError::Truncated);
    }
    let thl = usize::from(d[ip.l4 + 12] >> 4) * 4;
    if thl < TCP_MIN_LEN {
        return Err(OffloadError::Malformed);
    }
    if ip.l4 + thl > ip.end {
        return Err(OffloadError::Truncated);
    }
    Ok(thl)
}

/// Writes the IPv4 header checksum (RFC 791 §3.1) of the header at `l3`.
pub(crate) fn set_ipv4_csum(d: &mut [u8], l3: usize) {
    ip4_mut(d, l3).fill_checksum();
}

/// Sum of the IPv4 header at `l3` without its total length,
/// identification and checksum words: what every segment of one packet
/// shares. A segment's header is then finished by [`set_ipv4_len_id`]
/// without reading back the fields just written (a wide load over a fresh
/// narrow store waits until the store buffer drains, behind the whole
/// payload copy: 3 % of a NAT-T gateway's time).
pub(crate) fn ipv4_sum_but_len_id(d: &[u8], l3: usize) -> u64 {
    let hl = (usize::from(d[l3] & 0x0f) * 4).clamp(20, 60);
    header_sum_but(&d[l3..l3 + hl], &[2..6, 10..12])
}

/// Sum of a header of at most 60 bytes (IPv4, TCP) with the byte ranges
/// `but` taken as zero: the part of it every segment shares.
pub(crate) fn header_sum_but(h: &[u8], but: &[std::ops::Range<usize>]) -> u64 {
    let n = h.len().min(60);
    let mut b = [0u8; 60];
    b[..n].copy_from_slice(&h[..n]);
    for r in but {
        if let Some(z) = b.get_mut(r.clone()) {
            z.fill(0);
        }
    }
    super::csum::sum(&b[..n], 0)
}

/// Writes total length, identification and header checksum of the IPv4
/// header at `l3`, whose other words sum to `shared`
/// ([`ipv4_sum_but_len_id`]).
pub(crate) fn set_ipv4_len_id(d: &mut [u8], l3: usize, shared: u64, total_len: u16, id: u16) {
    let c = super::csum::finish(shared + u64::from(total_len) + u64::from(id));
    let mut ip = ip4_mut(d, l3);
    ip.set_total_len(total_len);
    ip.set_ident(id);
    ip.set_checksum(c);
}

/// Sets the IP length field so that the packet at `l3` ends at `end`.
pub(crate) fn set_ip_len(d: &mut [u8], l3: usize, v6: bool, end: usize) {
    if v6 {
        ip6_mut(d, l3).set_payload_len((end - l3 - IPV6_HDR_LEN) as u16);
    } else {
        ip4_mut(d, l3).set_total_len((end - l3) as u16);
    }
}

/// Unfolded pseudo-header sum (RFC 793 §3.1, RFC 8200 §8.1) for an L4
/// segment of `l4_len` bytes.
pub(crate) fn pseudo_sum(d: &[u8], ip: &Ip, l4_len: usize) -> u64 {
    let (src, n) = if ip.v6 {
        (ip.l3 + 8, 32)
    } else {
        (ip.l3 + 12, 8)
    };
    let mut s = super::csum::sum(&d[src..src + n], 0);
    s += u64::from(ip.proto);
    s += l4_len as u64;
    s
}
