//! ip4-lookup: longest-prefix match in the packet's VRF. Local addresses go
//! to ip-local; forwarded packets whose TTL would expire get ICMP time
//! exceeded (RFC 1812 §5.3.1); no route gets ICMP net unreachable
//! (RFC 1812 §5.2.7.1). The chosen adjacency travels in `meta.adj`.

use super::{icmp_aux, icmp_error::kind};
use crate::graph::{flags, Ctx, Next, Node, NodeId};
use crate::tables::Adj;
use packet::buffer::Packet;
use wire::ipv4;

pub struct Ip4Lookup;

node_errors! {
    enum E {
        Blackhole => "blackhole",
        MulticastNotRouted => "multicast-not-routed",
        Broadcast => "broadcast",
        TunnelNotReady => "tunnel-not-ready",
        LocalLoop => "local-loop",
    }
}

const NEXT: &[NodeId] = &[NodeId::IpLocal, NodeId::IpRewrite, NodeId::IcmpError];

impl Node for Ip4Lookup {
    fn name(&self) -> &'static str {
        "ip4-lookup"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        let t = &*cx.tables;
        for mut p in input.drain(..) {
            // ip4-input (or the node that built the packet) checked the
            // 20-byte header.
            let ip = ipv4::Packet::new_unchecked(p.data());
            let dst = ip.dst_addr();
            let ttl = ip.ttl();
            let local = p.meta.flags & flags::LOCAL != 0;
            if dst.is_broadcast() {
                next.drop(p, E::Broadcast as u16);
                continue;
            }
            if dst == wire::vrrp::GROUP_V4
                && ip.protocol() == wire::vrrp::PROTOCOL
                && !local
                && cx.vrrp.is_some()
            {
                next.enqueue(NodeId::IpLocal, p);
                continue;
            }
            if dst.is_multicast() {
                next.drop(p, E::MulticastNotRouted as u16);
                continue;
            }
            let idx = t.lookup4_flow(p.meta.vrf, ip.src_addr(), dst, ip.protocol());
            let adj = idx.map_or(Adj::Unreachable, |i| t.adj(i));
            let to = match adj {
                Adj::Local if local => {
                    next.drop(p, E::LocalLoop as u16);
                    continue;
                }
                Adj::Local => NodeId::IpLocal,
                Adj::Drop => {
                    next.drop(p, E::Blackhole as u16);
                    continue;
                }
                // `lookup4_flow` picked a member already.
                Adj::Tunnel(_) | Adj::Ecmp { .. } => {
                    next.drop(p, E::TunnelNotReady as u16);
                    continue;
                }
                Adj::Unreachable => {
                    p.meta.aux = icmp_aux(kind::NET_UNREACHABLE, 0);
                    NodeId::IcmpError
                }
                Adj::Glean { port } | Adj::Neighbor { port, .. } | Adj::Port { port } => {
                    if !local && ttl <= 1 {
                        p.meta.aux = icmp_aux(kind::TIME_EXCEEDED, 0);
                        NodeId::IcmpError
                    } else {
                        p.meta.tx_port = port;
                        p.meta.adj = idx.unwrap_or(0);
                        NodeId::IpRewrite
                    }
                }
            };
            if p.meta.trace {
                trace(&mut cx.trace, dst.into(), adj, to, t);
            }
            next.enqueue(to, p);
        }
    }
}

/// One trace line for a lookup decision (shared with ip6-lookup).
#[cold]
pub(crate) fn trace(
    tr: &mut crate::trace::Trace,
    dst: std::net::IpAddr,
    adj: Adj,
    to: NodeId,
    t: &crate::tables::Tables,
) {
    let name = |port: u16| t.iface(port).map_or("?", |i| i.name.as_str()).to_string();
    let what = match (adj, to) {
        (_, NodeId::IcmpError) => "icmp-error".to_string(),
        (Adj::Neighbor { port, nh }, _) => format!("via {nh} port {}", name(port)),
        (Adj::Glean { port }, _) => format!("connected port {}", name(port)),
        (Adj::Port { port }, _) => format!("port {}", name(port)),
        (a, _) => format!("{a:?}"),
    };
    let node = if dst.is_ipv6() {
        "ip6-lookup"
    } else {
        "ip4-lookup"
    };
    tr.add(node, format_args!("{dst} -> {what}"));
}
