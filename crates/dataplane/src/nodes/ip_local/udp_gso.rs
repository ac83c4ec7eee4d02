//! ip-local's UDP GSO super-packets: a peer's VXLAN packets packed into
//! one UDP GSO datagram ([`uso`]) are turned back into the TCP
//! super-packet they were made of, a peer's ESP-in-UDP packets (RFC 3948)
//! go to esp-decrypt whole, to be opened in place; anything else is cut
//! into its datagrams, each then going through ip-local like any packet.

use super::{IpLocal, E};
use crate::graph::{Ctx, Next};
use crate::offload::{gso, uso, SegmentSpec};
use packet::buffer::Packet;

impl IpLocal {
    /// A UDP super-packet addressed to the gateway — a peer's VXLAN
    /// packets packed into one UDP GSO datagram (offload::uso), which
    /// reaches us whole over veth — is unpacked into the TCP super-packet
    /// it was made of ([`uso::unpack`]) or else cut into its datagrams,
    /// each then handled on its own. Its checksum is partial (a local
    /// sender) or was verified; the datagrams keep it partial.
    pub(super) fn split(&mut self, cx: &mut Ctx, mut p: Packet, next: &mut Next<'_>) {
        let o = p.meta.offload;
        if !(o.needs_csum || o.csum_valid) {
            next.drop(p, E::BadChecksum as u16);
            return;
        }
        // A peer's ESP-in-UDP packets are opened where they lie.
        if let Some(u) = esp_udp_offset(cx, &p) {
            p.meta.aux = u as u32 | crate::nodes::esp_decrypt::AUX_UDP;
            next.count(E::UdpGsoEsp as u16, 1);
            next.enqueue(crate::graph::NodeId::EspDecrypt, p);
            return;
        }
        // A peer's packed VXLAN super-packet becomes that super-packet
        // again, decapsulated and forwarded as one packet.
        if let Some(u) = self.vxlan_udp_offset(cx, &p) {
            if uso::unpack(&mut p, u).is_ok() {
                next.count(E::UdpGsoUnpacked as u16, 1);
                self.one(cx, p, next);
                return;
            }
        }
        self.cut(cx, p, next);
    }

    /// Offset of the UDP header if `p` is UDP to one of our VXLAN ports.
    fn vxlan_udp_offset(&self, cx: &Ctx, p: &Packet) -> Option<usize> {
        let d = p.data();
        let (l4, proto) = match d.first()? >> 4 {
            4 => (usize::from(d[0] & 0x0f) * 4, *d.get(9)?),
            6 => (40, *d.get(6)?),
            _ => return None,
        };
        let dport = wire::udp::Packet::new_unchecked(d.get(l4..l4 + 4)?).dst_port();
        (proto == crate::tunnel::IP_PROTO_UDP && cx.tables.tunnels.vxlan_ports.contains(&dport))
            .then_some(l4)
    }

    /// Cuts a UDP super-packet into its datagrams, each handled on its own.
    fn cut(&mut self, cx: &mut Ctx, p: Packet, next: &mut Next<'_>) {
        let spec = SegmentSpec {
            outer: None,
            inner_l3_offset: 0,
            mss: 0,
            partial_csum: true,
        };
        self.datagrams.clear();
        if gso::segment_with(&p, &spec, &mut cx.pool, &mut self.datagrams).is_err() {
            cx.pool.free_all(&mut self.datagrams);
            next.drop(p, E::UdpGsoSplitFailed as u16);
            return;
        }
        cx.pool.free(p);
        next.count(E::UdpGsoSplit as u16, 1);
        let mut dgs = std::mem::take(&mut self.datagrams);
        for d in dgs.drain(..) {
            self.one(cx, d, next);
        }
        self.datagrams = dgs;
    }
}

/// Offset of the UDP header if `p` is a UDP GSO datagram to the NAT-T port
/// (RFC 3948) while an ESP tunnel uses NAT-T, and every slice is an ESP
/// packet (non-zero SPI, so no IKE and no keepalive) of the first slice's
/// SPI: esp-decrypt then opens them in the datagram under one SA. At most
/// [`UDP_MAX_SEGMENTS`](packet::gso_limit::UDP_MAX_SEGMENTS) slices (what Linux sends as one), so the work per
/// datagram is bounded.
fn esp_udp_offset(cx: &Ctx, p: &Packet) -> Option<usize> {
    if !cx.tables.esp.nat_t {
        return None;
    }
    let d = p.data();
    let (l4, proto) = match d.first()? >> 4 {
        4 => {
            let ip = wire::ipv4::Packet::new_unchecked(d.get(..20)?);
            if ip.is_fragment() {
                return None;
            }
            (usize::from(d[0] & 0x0f) * 4, ip.protocol())
        }
        6 => (40, *d.get(6)?),
        _ => return None,
    };
    let udp = wire::udp::Packet::new_unchecked(d.get(l4..l4 + 8)?);
    if proto != crate::tunnel::IP_PROTO_UDP || udp.dst_port() != wire::esp::NAT_T_PORT {
        return None;
    }
    let body = l4 + 8;
    let slice = usize::from(p.meta.offload.gso_size);
    if slice < wire::esp::HEADER_LEN || d.len() <= body {
        return None;
    }
    if (d.len() - body).div_ceil(slice) > packet::gso_limit::UDP_MAX_SEGMENTS {
        return None;
    }
    let spi0 = d.get(body..body + 4)?;
    if spi0 == [0; 4] {
        return None;
    }
    d[body..]
        .chunks(slice)
        .all(|s| s.len() >= wire::esp::HEADER_LEN && s[..4] == *spi0)
        .then_some(l4)
}
