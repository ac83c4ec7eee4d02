//! Helpers the tunnel nodes share: handing a decapsulated packet to the
//! overlay, and inner TCP MSS clamping.

use super::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_LEN};
use crate::graph::{flags, Ctx, Next, NodeId};
use crate::tunnel::Tunnel;
use packet::buffer::{Gso, Offload, Packet};
use wire::{ethernet, ipv4, ipv6};

/// What the decapsulated payload is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inner {
    Ethernet,
    Ip4,
    Ip6,
}

/// Offset of the inner IP header of a frame that starts with an Ethernet
/// header (`eth`) or with IP, and whether it is IPv6; `None` for non-IP.
#[inline]
pub(crate) fn inner_ip(d: &[u8], eth: bool) -> Option<(usize, bool)> {
    if eth {
        if d.len() < ETH_LEN {
            return None;
        }
        match ethernet::Frame::new_unchecked(d).outer_ethertype() {
            ETHERTYPE_IPV4 => Some((ETH_LEN, false)),
            ETHERTYPE_IPV6 => Some((ETH_LEN, true)),
            _ => None,
        }
    } else {
        match d.first().map(|b| b >> 4) {
            Some(4) => Some((0, false)),
            Some(6) => Some((0, true)),
            _ => None,
        }
    }
}

/// Clamps the MSS option of a TCP SYN inside the IP packet at `l3` so that
/// a segment fits `mtu` (an L3 MTU): the tunnel's, both ways, since the
/// SYN's MSS tells the *other* end what to send. IPv4 with options or
/// fragments and IPv6 with extension headers are left alone. The checksum
/// is updated incrementally (RFC 1624) unless it is a partial sum.
pub(crate) fn clamp_mss(p: &mut Packet, l3: usize, v6: bool, mtu: u32) {
    let partial = p.meta.offload.needs_csum;
    let d = p.data_mut();
    let (l4, proto, fixed) = if v6 {
        if d.len() < l3 + 40 {
            return;
        }
        (l3 + 40, d[l3 + 6], 60u32)
    } else {
        if d.len() < l3 + 20 || ipv4::Packet::new_unchecked(&d[l3..]).is_fragment() {
            return;
        }
        (l3 + usize::from(d[l3] & 0x0f) * 4, d[l3 + 9], 40u32)
    };
    // Only SYNs: flags byte at TCP offset 13.
    if proto != 6 || d.len() < l4 + 20 || d[l4 + 13] & 0x02 == 0 {
        return;
    }
    let max = mtu.saturating_sub(fixed).clamp(0, 0xffff) as u16;
    if let Ok(mut t) = wire::tcp::Packet::new_checked(&mut d[l4..]) {
        let _ = t.clamp_mss(max, !partial);
    }
}

/// The offload state a decapsulated packet keeps: a partial checksum (and
/// a super-packet) that lies inside the *inner* packet. A sender on this
/// host (a kernel VXLAN device over veth) hands over its inner TCP/UDP
/// checksum uncomputed (CHECKSUM_PARTIAL) and, with offloads on, whole
/// encapsulated 64 KB super-packets whose GSO type describes the inner
/// flow (`SKB_GSO_TCPV4 | SKB_GSO_UDP_TUNNEL`): dropping that state would
/// forward TCP with a pseudo-header-only checksum, or a 64 KB frame. A
/// partial checksum of the outer headers (the inner one is then complete)
/// and anything inconsistent is discarded, as before. `pull` already made
/// the offsets relative to the inner frame.
fn inner_offload(d: &[u8], o: Offload, inner: Option<(usize, bool)>) -> Offload {
    let Some((l3, v6)) = inner else {
        return Offload::default();
    };
    let start = usize::from(o.csum_start);
    let field = start + usize::from(o.csum_offset);
    let min_l4 = l3 + if v6 { 40 } else { 20 };
    if !o.needs_csum || start < min_l4 || field + 2 > d.len() {
        return Offload::default();
    }
    let mut k = Offload {
        needs_csum: true,
        csum_start: o.csum_start,
        csum_offset: o.csum_offset,
        ..Offload::default()
    };
    let tcp = match o.gso {
        Gso::TcpV4 => Some(false),
        Gso::TcpV6 => Some(true),
        _ => None,
    };
    if let Some(gso_v6) = tcp {
        // The inner family must agree, and the checksum be TCP's (offset
        // 16); hdr_len is only a hint from the kernel: recompute it.
        if gso_v6 != v6 || o.csum_offset != 16 || start + 20 > d.len() || o.gso_size == 0 {
            return Offload::default();
        }
        let thl = usize::from(d[start + 12] >> 4) * 4;
        if thl < 20 || start + thl > d.len() {
            return Offload::default();
        }
        k.gso = o.gso;
        k.gso_size = o.gso_size;
        k.hdr_len = (start + thl) as u16;
    } else if o.gso == Gso::UdpL4 {
        // UDP segmentation: the UDP checksum (offset 6) at the inner L4.
        if o.csum_offset != 6 || start + 8 > d.len() || o.gso_size == 0 {
            return Offload::default();
        }
        k.gso = Gso::UdpL4;
        k.gso_size = o.gso_size;
        k.hdr_len = (start + 8) as u16;
    }
    k
}

/// Hands a decapsulated packet (headers already pulled) to the overlay as
/// if it had been received on the tunnel's virtual port: ethernet-input for
/// Ethernet payloads, ip4/ip6-input for IP. The packet's metadata is reset:
/// only the trace mark survives, so nothing of the underlay (VRF, port,
/// L2 flags) leaks into the overlay; of the offload state only an inner
/// partial checksum / super-packet is kept ([`inner_offload`]).
pub(crate) fn deliver(
    cx: &mut Ctx,
    next: &mut Next<'_>,
    mut p: Packet,
    tun: &Tunnel,
    inner: Inner,
) {
    let (vrf, mtu) = cx.tables.iface(tun.port).map_or((0, 0), |i| (i.vrf, i.mtu));
    if let Some(c) = cx.port_counters(tun.port) {
        c.rx_packets.add(1);
        c.rx_bytes.add(p.len() as u64);
    }
    p.meta.rx_port = tun.port;
    p.meta.tx_port = tun.port;
    p.meta.vrf = vrf;
    p.meta.flags = flags::DECAP;
    let ip = inner_ip(p.data(), inner == Inner::Ethernet);
    p.meta.offload = inner_offload(p.data(), p.meta.offload, ip);
    p.meta.l3_offset = 0;
    p.meta.aux = 0;
    p.meta.adj = 0;
    if let Some((l3, v6)) = ip {
        clamp_mss(&mut p, l3, v6, mtu);
    }
    let to = match inner {
        Inner::Ethernet => NodeId::EthernetInput,
        Inner::Ip4 => NodeId::Ip4Input,
        Inner::Ip6 => NodeId::Ip6Input,
    };
    next.enqueue(to, p);
}

/// Outer source and destination of the IP packet at the start of `d`
/// (ip4/ip6-input checked the fixed header).
#[inline]
pub(crate) fn outer_addrs(d: &[u8]) -> Option<(std::net::IpAddr, std::net::IpAddr)> {
    match d.first()? >> 4 {
        4 if d.len() >= 20 => {
            let ip = ipv4::Packet::new_unchecked(d);
            Some((ip.src_addr().into(), ip.dst_addr().into()))
        }
        6 if d.len() >= 40 => {
            let ip = ipv6::Packet::new_unchecked(d);
            Some((ip.src_addr().into(), ip.dst_addr().into()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet + IPv4 + an L4 header of 20 bytes (TCP, data offset 5).
    fn frame() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20 + 100];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[34 + 12] = 5 << 4;
        f
    }

    fn partial(start: u16, offset: u16, gso: Gso, size: u16) -> Offload {
        Offload {
            needs_csum: true,
            csum_start: start,
            csum_offset: offset,
            gso,
            gso_size: size,
            hdr_len: 999,
            ..Offload::default()
        }
    }

    #[test]
    fn inner_partial_checksum_and_gso_kept_outer_or_odd_dropped() {
        let f = frame();
        let ip = inner_ip(&f, true);
        assert_eq!(ip, Some((14, false)));
        // Inner TCP super-packet: kept, hdr_len recomputed.
        let k = inner_offload(&f, partial(34, 16, Gso::TcpV4, 1400), ip);
        assert!(k.needs_csum && k.gso == Gso::TcpV4);
        assert_eq!((k.csum_start, k.gso_size, k.hdr_len), (34, 1400, 54));
        // Inner UDP (USO) super-packet: kept with the 8-byte header.
        let k = inner_offload(&f, partial(34, 6, Gso::UdpL4, 1000), ip);
        assert_eq!((k.gso, k.hdr_len), (Gso::UdpL4, 42));
        // Plain inner partial checksum.
        let k = inner_offload(&f, partial(34, 6, Gso::None, 0), ip);
        assert!(k.needs_csum && k.gso == Gso::None);
        // A partial checksum that was the outer one (pull saturated it to
        // the inner headers' start), a family mismatch, a field past the
        // end, no partial checksum at all, non-IP: nothing kept.
        for (o, ip) in [
            (partial(0, 6, Gso::None, 0), ip),
            (partial(20, 6, Gso::None, 0), ip),
            (partial(34, 16, Gso::TcpV6, 1400), ip),
            (partial(34, 16, Gso::TcpV4, 0), ip),
            (partial(34, 6, Gso::TcpV4, 1400), ip),
            (partial(34, 200, Gso::None, 0), ip),
            (
                Offload {
                    gso: Gso::TcpV4,
                    gso_size: 1400,
                    ..Offload::default()
                },
                ip,
            ),
            (partial(34, 16, Gso::TcpV4, 1400), None),
        ] {
            let k = inner_offload(&f, o, ip);
            assert!(!k.needs_csum && k.gso == Gso::None, "{o:?} -> {k:?}");
        }
    }
}
