//! ip6-lookup: longest-prefix match in the packet's VRF, plus the IPv6
//! special cases: multicast groups we listen to (all-nodes, all-routers,
//! our solicited-node groups) are delivered locally; link-local
//! destinations are never forwarded (RFC 4291 §2.5.6) but our own replies
//! to a link-local source go back out of the port they came from. Hop
//! limit ≤ 1 gets ICMPv6 time exceeded (RFC 8200 §3), no route ICMPv6
//! destination unreachable "no route" (RFC 4443 §3.1).

use super::{icmp_aux, icmp_error::kind, ip4_lookup::trace};
use crate::graph::{flags, Ctx, Next, Node, NodeId};
use crate::tables::Adj;
use packet::buffer::Packet;
use std::net::Ipv6Addr;
use wire::ipv6;

pub struct Ip6Lookup;

node_errors! {
    enum E {
        Blackhole => "blackhole",
        MulticastNotRouted => "multicast-not-routed",
        LinkLocalNotForwarded => "link-local-not-forwarded",
        TunnelNotReady => "tunnel-not-ready",
        LocalLoop => "local-loop",
    }
}

const NEXT: &[NodeId] = &[NodeId::IpLocal, NodeId::IpRewrite, NodeId::IcmpError];

const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

#[inline]
fn is_link_local(a: &Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

impl Node for Ip6Lookup {
    fn name(&self) -> &'static str {
        "ip6-lookup"
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
            let ip = ipv6::Packet::new_unchecked(p.data());
            let dst = ip.dst_addr();
            let hlim = ip.hop_limit();
            let local = p.meta.flags & flags::LOCAL != 0;
            if dst.is_multicast() {
                let ours = !local
                    && (dst == ALL_NODES
                        || dst == ALL_ROUTERS
                        || (dst == wire::vrrp::GROUP_V6 && cx.vrrp.is_some())
                        || t.iface(p.meta.rx_port)
                            .is_some_and(|i| i.is_our_solicited_node(dst)));
                if ours {
                    if p.meta.trace {
                        cx.trace
                            .add("ip6-lookup", format_args!("{dst} -> local (multicast)"));
                    }
                    next.enqueue(NodeId::IpLocal, p);
                } else {
                    next.drop(p, E::MulticastNotRouted as u16);
                }
                continue;
            }
            let mut idx = t.lookup6_flow(p.meta.vrf, ip.src_addr(), dst, ip.next_header());
            let mut adj = idx.map_or(Adj::Unreachable, |i| t.adj(i));
            if is_link_local(&dst) && adj != Adj::Local {
                // Only our own packets reach a link-local destination, out
                // of the port the conversation came in on.
                match t.iface(p.meta.tx_port).filter(|_| local) {
                    Some(i) => {
                        idx = Some(i.glean6);
                        adj = t.adj(i.glean6);
                    }
                    None => {
                        next.drop(p, E::LinkLocalNotForwarded as u16);
                        continue;
                    }
                }
            }
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
                // `lookup6_flow` picked a member already.
                Adj::Tunnel(_) | Adj::Ecmp { .. } => {
                    next.drop(p, E::TunnelNotReady as u16);
                    continue;
                }
                Adj::Unreachable => {
                    p.meta.aux = icmp_aux(kind::NET_UNREACHABLE, 0);
                    NodeId::IcmpError
                }
                Adj::Glean { port } | Adj::Neighbor { port, .. } | Adj::Port { port } => {
                    if !local && hlim <= 1 {
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
