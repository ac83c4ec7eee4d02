//! arp-input: answers ARP requests for our own addresses and learns
//! bindings (RFC 826 "packet reception" with its merge rule: update an
//! existing entry from any ARP packet, create one only when we are the
//! target), hardened: a reply creates an entry only if it answers a
//! request vecgate sent ([`crate::neighbour::solicited`]), and only an
//! on-link sender creates one at all. Unsolicited replies and gratuitous
//! ARP refresh existing entries and nothing else.

use super::{push_eth, send_released, ETHERTYPE_ARP};
use crate::graph::{flags, Ctx, Next, Node, NodeId};
use crate::neighbour::Learn;
use packet::buffer::Packet;
use std::net::IpAddr;
use wire::arp::{ArpRepr, Operation};
use wire::ethernet::MacAddr;

#[derive(Default)]
pub struct ArpInput {
    released: Vec<Packet>,
}

node_errors! {
    enum E {
        Malformed => "malformed",
        NotForUs => "not-for-us",
        ReplyReceived => "reply-received",
        AddressConflict => "address-conflict",
        NoHeadroom => "no-headroom",
        UnknownInterface => "unknown-interface",
    }
}

const NEXT: &[NodeId] = &[NodeId::InterfaceOutput];

impl Node for ArpInput {
    fn name(&self) -> &'static str {
        "arp-input"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        // Clone once per vector: `cx` is borrowed mutably below.
        let tables = cx.tables.clone();
        for mut p in input.drain(..) {
            let port = p.meta.rx_port;
            let Some(ifc) = tables.iface(port) else {
                next.drop(p, E::UnknownInterface as u16);
                continue;
            };
            let repr = wire::arp::Packet::new_checked(p.data()).and_then(|v| ArpRepr::parse(&v));
            let Ok(a) = repr else {
                next.drop(p, E::Malformed as u16);
                continue;
            };
            let sha = a.source_hardware_addr.0;
            if sha[0] & 1 != 0 || ifc.has_v4(a.source_protocol_addr) {
                // Someone claims our address, or a multicast sender MAC.
                next.drop(p, E::AddressConflict as u16);
                continue;
            }
            let for_us = ifc.has_v4(a.target_protocol_addr);
            if p.meta.trace {
                cx.trace.add(
                    "arp-input",
                    format_args!(
                        "{:?} {} ({}) asks/tells {} for_us={for_us}",
                        a.operation,
                        a.source_protocol_addr,
                        a.source_hardware_addr,
                        a.target_protocol_addr
                    ),
                );
            }
            let sip = IpAddr::V4(a.source_protocol_addr);
            // Only an on-link sender may create an entry (RFC 1812
            // §3.3.2: an off-link "neighbour" is a spoof or a mistake), and
            // a reply only if we asked.
            let how = match (a.operation, for_us, ifc.on_link(sip)) {
                (Operation::Reply, true, true) if cx.solicited.contains(port, sip) => {
                    Learn::Confirmed
                }
                (Operation::Request, true, true) => Learn::Unconfirmed,
                _ => Learn::UpdateOnly,
            };
            if !a.source_protocol_addr.is_unspecified() {
                cx.learn(port, sip, sha, how, &mut self.released);
                if !self.released.is_empty() {
                    send_released(
                        cx,
                        next,
                        port,
                        sha,
                        &mut self.released,
                        E::NoHeadroom as u16,
                    );
                }
            }
            match (a.operation, for_us) {
                (Operation::Request, true) => {
                    let r = a.reply(MacAddr(ifc.mac));
                    p.truncate(wire::arp::ETH_IPV4_LEN);
                    r.emit(&mut wire::arp::Packet::new_unchecked(p.data_mut()));
                    if !push_eth(&mut p, sha, ifc.mac, ETHERTYPE_ARP) {
                        next.drop(p, E::NoHeadroom as u16);
                        continue;
                    }
                    p.meta.tx_port = port;
                    p.meta.flags |= flags::LOCAL;
                    p.meta.offload = Default::default();
                    next.enqueue(NodeId::InterfaceOutput, p);
                }
                (Operation::Reply, _) => next.drop(p, E::ReplyReceived as u16),
                (Operation::Request, false) => next.drop(p, E::NotForUs as u16),
                _ => next.drop(p, E::Malformed as u16),
            }
        }
    }
}
