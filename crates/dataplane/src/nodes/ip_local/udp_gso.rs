//! ip-local's UDP GSO super-packets: a peer's VXLAN packets packed into
//! one UDP GSO datagram ([`uso`]) are turned back into the TCP
//! super-packet they were made of, anything else is cut into its
//! datagrams; each result then goes through ip-local like any packet.

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
