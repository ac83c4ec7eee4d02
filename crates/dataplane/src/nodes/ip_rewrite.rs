//! ip-rewrite: the last L3 step before a packet leaves. Checks the MTU
//! (DF or IPv6 → ICMP too big; IPv4 without DF → ip4-fragment; a GSO
//! super-packet is judged by its segments: headers + gso_size; a
//! decapsulated TCP packet above the MTU, as a large-MTU tunnel underlay
//! delivers, becomes a super-packet of egress-MSS segments), decrements
//! the TTL / hop limit exactly once with an RFC 1624 incremental checksum
//! update, then resolves the next hop's MAC and writes the L2 header. An
//! unresolved next hop queues the packet in the neighbour table and sends
//! an ARP request / Neighbor Solicitation.

use super::{icmp_aux, icmp_error::kind, ip_ethertype, push_eth};
use crate::graph::{flags, Ctx, Next, Node, NodeId};
use crate::neighbour::fmt_mac;
use crate::neighbour::packets::{arp_request, neighbor_solicit};
use crate::offload::tso;
use crate::tables::Adj;
use packet::buffer::{Gso, Packet};
use std::net::IpAddr;
use wire::{ipv4, ipv6};

pub struct IpRewrite;

node_errors! {
    pub(crate) enum E {
        NoInterface => "no-interface",
        InterfaceDown => "interface-down",
        NeighbourQueueFull => "neighbour-queue-full",
        NeighbourUnresolved => "neighbour-unresolved",
        NoHeadroom => "no-headroom",
        GsoTooBig => "gso-segment-too-big",
        BadAdjacency => "bad-adjacency",
        MarkedSuperPackets => "marked-super-packets",
    }
}

/// The drop reason the worker counts when a resolution times out.
pub const NEIGHBOUR_UNRESOLVED: u16 = E::NeighbourUnresolved as u16;

const NEXT: &[NodeId] = &[
    NodeId::InterfaceOutput,
    NodeId::IcmpError,
    NodeId::Ip4Fragment,
];

impl Node for IpRewrite {
    fn name(&self) -> &'static str {
        "ip-rewrite"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        let tables = cx.tables.clone();
        for mut p in input.drain(..) {
            let adj = tables.adj(p.meta.adj);
            let (port, nh) = match adj {
                Adj::Neighbor { port, nh } => (port, Some(nh)),
                Adj::Glean { port } => (port, None),
                Adj::Port { port } => (port, None),
                _ => {
                    next.drop(p, E::BadAdjacency as u16);
                    continue;
                }
            };
            let Some(ifc) = tables.iface(port) else {
                next.drop(p, E::NoInterface as u16);
                continue;
            };
            // Tunnel virtual ports have no socket and are always up (their
            // slots in `port_up` exist once an interface attached live got
            // a higher port, and say false).
            let up = cx.port_up.get(usize::from(port)).copied() == Some(true)
                || tables.tunnels.at_port(port).is_some()
                || tables.esp.at_port(port).is_some();
            if !up {
                next.drop(p, E::InterfaceDown as u16);
                continue;
            }
            let v6 = p.data()[0] >> 4 == 6;
            if p.meta.flags & flags::L3_DONE == 0 {
                // MTU check on the original packet, so an ICMP error
                // quotes it with its TTL untouched.
                let mtu = ifc.mtu as usize;
                let o = p.meta.offload;
                let too_big = if o.gso != Gso::None {
                    // Headers as the packet has them, not the vnet
                    // header's hdr_len (a linear-size hint, see
                    // tso::segment_hdr_len); malformed → judged as the
                    // largest IPv4 + TCP headers.
                    let hdr = tso::segment_hdr_len(&p, 0).unwrap_or(120);
                    hdr + usize::from(o.gso_size) > mtu
                } else {
                    p.len() > mtu
                };
                // A decapsulated TCP packet larger than the egress MTU came
                // whole over a large-MTU underlay: hand it on as a
                // super-packet of egress-MSS segments (offload::tso) rather
                // than asking the sender to fragment what it already cut.
                // One that is a super-packet already (coalesced, or packed
                // in UDP GSO) carries the peer's large segments: they shrink
                // to the egress MSS.
                let marked = too_big
                    && p.meta.flags & flags::DECAP != 0
                    && if o.gso == Gso::None {
                        tso::mark(&mut p, 0, mtu) == Ok(true)
                    } else {
                        tso::shrink(&mut p, 0, mtu) == Ok(true)
                    };
                if marked {
                    next.count(E::MarkedSuperPackets as u16, 1);
                }
                let too_big = too_big && !marked;
                if too_big {
                    let df = v6 || ipv4::Packet::new_unchecked(p.data()).dont_frag();
                    if df {
                        p.meta.aux = icmp_aux(kind::TOO_BIG, ifc.mtu);
                        if p.meta.trace {
                            cx.trace.add(
                                "ip-rewrite",
                                format_args!("len {} > mtu {}: too big", p.len(), ifc.mtu),
                            );
                        }
                        next.enqueue(NodeId::IcmpError, p);
                    } else if o.gso != Gso::None {
                        next.drop(p, E::GsoTooBig as u16);
                    } else {
                        decrement_ttl(&mut p, v6);
                        p.meta.flags |= flags::L3_DONE;
                        p.meta.tx_port = port;
                        next.enqueue(NodeId::Ip4Fragment, p);
                    }
                    continue;
                }
                decrement_ttl(&mut p, v6);
                p.meta.flags |= flags::L3_DONE;
            }
            p.meta.tx_port = port;
            let mac = match adj {
                Adj::Port { .. } => Some([0xff; 6]),
                _ => {
                    let d = p.data();
                    let ip = nh.unwrap_or_else(|| {
                        if v6 {
                            IpAddr::V6(ipv6::Packet::new_unchecked(d).dst_addr())
                        } else {
                            IpAddr::V4(ipv4::Packet::new_unchecked(d).dst_addr())
                        }
                    });
                    match cx.neighbour(port, ip) {
                        Some(m) => Some(m),
                        None => {
                            if p.meta.trace {
                                cx.trace.add(
                                    "ip-rewrite",
                                    format_args!("{ip} unresolved on {}: queued", ifc.name),
                                );
                            }
                            match cx.neigh.enqueue(port, ip, p, cx.now) {
                                Ok(true) => {
                                    cx.solicited.record(port, ip);
                                    let s = match ip {
                                        IpAddr::V4(a) => arp_request(&mut cx.pool, ifc, a, None),
                                        IpAddr::V6(a) => {
                                            neighbor_solicit(&mut cx.pool, ifc, a, None)
                                        }
                                    };
                                    if let Some(s) = s {
                                        next.enqueue(NodeId::InterfaceOutput, s);
                                    }
                                }
                                Ok(false) => {}
                                Err(p) => next.drop(p, E::NeighbourQueueFull as u16),
                            }
                            continue;
                        }
                    }
                }
            };
            let Some(mac) = mac else { continue };
            let et = ip_ethertype(&p);
            if !push_eth(&mut p, mac, ifc.mac, et) {
                next.drop(p, E::NoHeadroom as u16);
                continue;
            }
            if p.meta.trace {
                cx.trace.add(
                    "ip-rewrite",
                    format_args!("{} -> {} on {}", fmt_mac(ifc.mac), fmt_mac(mac), ifc.name),
                );
            }
            next.enqueue(NodeId::InterfaceOutput, p);
        }
    }
}

/// TTL / hop limit minus one (never below zero: ip4/ip6-lookup sent
/// expiring packets to icmp-error already). The IPv4 header checksum is
/// updated incrementally (RFC 1624 eqn. 3, in the view's
/// `set_ttl_update_checksum`); IPv6 has no header checksum. Our own
/// packets keep theirs. ip4/ip6-input checked the fixed header is there.
#[inline]
fn decrement_ttl(p: &mut Packet, v6: bool) {
    if p.meta.flags & flags::LOCAL != 0 {
        return;
    }
    let d = p.data_mut();
    if v6 {
        let mut ip = ipv6::Packet::new_unchecked(d);
        let hl = ip.hop_limit();
        ip.set_hop_limit(hl.saturating_sub(1));
    } else {
        let mut ip = ipv4::Packet::new_unchecked(d);
        let ttl = ip.ttl();
        ip.set_ttl_update_checksum(ttl.saturating_sub(1));
    }
}
