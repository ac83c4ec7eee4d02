//! ethernet-input: checks the L2 header, filters by destination MAC, strips
//! the header and dispatches by EtherType. Arms the packet trace.

use super::{pull, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_LEN};
use crate::graph::{flags, Ctx, Next, Node, NodeId};
use crate::neighbour::fmt_mac;
use packet::buffer::Packet;

pub struct EthernetInput;

node_errors! {
    enum E {
        TooShort => "too-short",
        VlanTagged => "vlan-tagged",
        NotForUs => "not-for-us",
        MulticastNotWanted => "multicast-not-wanted",
        UnknownEthertype => "unknown-ethertype",
        UnknownInterface => "unknown-interface",
    }
}

const NEXT: &[NodeId] = &[NodeId::ArpInput, NodeId::Ip4Input, NodeId::Ip6Input];

impl Node for EthernetInput {
    fn name(&self) -> &'static str {
        "ethernet-input"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        let tables = &*cx.tables;
        for mut p in input.drain(..) {
            if cx.trace.armed() && cx.trace.take() {
                p.meta.trace = true;
            }
            let Some(ifc) = tables.iface(p.meta.rx_port) else {
                next.drop(p, E::UnknownInterface as u16);
                continue;
            };
            let d = p.data();
            if d.len() < ETH_LEN {
                next.drop(p, E::TooShort as u16);
                continue;
            }
            let mut dst = [0u8; 6];
            dst.copy_from_slice(&d[0..6]);
            let et = wire::ethernet::Frame::new_unchecked(d).outer_ethertype();
            if p.meta.trace {
                let mut src = [0u8; 6];
                src.copy_from_slice(&d[6..12]);
                cx.trace.add(
                    "ethernet-input",
                    format_args!(
                        "{} {} -> {} type 0x{et:04x} len {}",
                        ifc.name,
                        fmt_mac(src),
                        fmt_mac(dst),
                        d.len()
                    ),
                );
            }
            if dst != ifc.mac {
                if dst[0] & 1 == 0 {
                    next.drop(p, E::NotForUs as u16);
                    continue;
                }
                // Broadcast, IPv6 all-nodes / all-routers, or the
                // solicited-node group of one of our addresses (RFC 2464 §7),
                // or the VRRP groups when HA runs (RFC 5798 §5.1).
                let wanted = dst == [0xff; 6]
                    || (cx.vrrp.is_some()
                        && (dst == [0x01, 0x00, 0x5e, 0x00, 0x00, 0x12]
                            || dst == [0x33, 0x33, 0, 0, 0, 0x12]))
                    || dst == [0x33, 0x33, 0, 0, 0, 1]
                    || dst == [0x33, 0x33, 0, 0, 0, 2]
                    || (dst[0..3] == [0x33, 0x33, 0xff]
                        && ifc
                            .ll6
                            .iter()
                            .chain(ifc.v6.iter().map(|(a, _)| a))
                            .any(|a| a.octets()[13..16] == dst[3..6]));
                if !wanted {
                    next.drop(p, E::MulticastNotWanted as u16);
                    continue;
                }
                p.meta.flags |= flags::L2_MULTICAST;
            }
            let to = match et {
                ETHERTYPE_IPV4 => NodeId::Ip4Input,
                ETHERTYPE_IPV6 => NodeId::Ip6Input,
                ETHERTYPE_ARP => NodeId::ArpInput,
                // Subinterfaces are not implemented: tagged frames are
                // counted and dropped rather than misrouted.
                0x8100 | 0x88a8 | 0x9100 => {
                    next.drop(p, E::VlanTagged as u16);
                    continue;
                }
                _ => {
                    next.drop(p, E::UnknownEthertype as u16);
                    continue;
                }
            };
            p.meta.vrf = ifc.vrf;
            pull(&mut p, ETH_LEN);
            next.enqueue(to, p);
        }
    }
}
