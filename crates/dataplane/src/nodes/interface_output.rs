//! interface-output: sorts packets into per-port transmit vectors. A port
//! that cannot take offloads gets no super-packets or partial checksums:
//! those are segmented / completed in software here first. Nor does any
//! port get a super-packet longer than the kernel sends whole
//! ([`gso_limit`]; the nodes that build them stay within it, but one
//! received from a peer or built by a bug may not): it is segmented here and
//! counted, never handed over to be dropped. Packets for a
//! tunnel's virtual port go to tunnel-encap instead; decapsulated packets
//! for a port with offloads and `rsc` on go to rsc-output.

use crate::graph::{flags, Ctx, Next, Node, NodeId};
use crate::offload::{csum, gso};
use packet::buffer::{Gso, Packet};
use packet::gso_limit;

#[derive(Default)]
pub struct InterfaceOutput {
    segs: Vec<Packet>,
}

node_errors! {
    enum E {
        InterfaceDown => "interface-down",
        SegmentationFailed => "segmentation-failed",
        ChecksumFailed => "checksum-failed",
        /// Super-packets too long to be sent whole, segmented here.
        OversizedSuperPackets => "oversized-super-packets",
    }
}

const NEXT: &[NodeId] = &[NodeId::TunnelEncap, NodeId::RscOutput, NodeId::EspEncrypt];

impl Node for InterfaceOutput {
    fn name(&self) -> &'static str {
        "interface-output"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        for mut p in input.drain(..) {
            if cx.tables.tunnels.at_port(p.meta.tx_port).is_some() {
                next.enqueue(NodeId::TunnelEncap, p);
                continue;
            }
            if cx.tables.esp.at_port(p.meta.tx_port).is_some() {
                next.enqueue(NodeId::EspEncrypt, p);
                continue;
            }
            let port = usize::from(p.meta.tx_port);
            if port >= cx.tx.len() || !cx.port_up[port] {
                next.drop(p, E::InterfaceDown as u16);
                continue;
            }
            if p.meta.trace {
                let name = cx
                    .tables
                    .iface(p.meta.tx_port)
                    .map_or("?", |i| i.name.as_str());
                cx.trace
                    .add("interface-output", format_args!("{name} len {}", p.len()));
            }
            // Offloads only when the backend can (vnet headers) and the
            // interface allows it.
            let offloads = cx.port_offloads[port]
                && cx
                    .tables
                    .iface(p.meta.tx_port)
                    .is_some_and(|i| i.flags.offloads);
            if offloads && p.meta.flags & flags::DECAP != 0 {
                // The flag is read per vector: `vecgate rsc on|off` is a
                // table swap that applies at once.
                if cx.tables.iface(p.meta.tx_port).is_some_and(|i| i.flags.rsc) {
                    next.enqueue(NodeId::RscOutput, p);
                    continue;
                }
            }
            // A UDP GSO datagram (packed VXLAN, offload::uso) is cut here
            // when the port may not send it whole.
            let cut_udp = p.meta.offload.gso == Gso::UdpL4 && !cx.port_udp_gso[port];
            let oversized = p.meta.offload.gso != Gso::None && !gso_limit::frame_fits(p.len());
            if oversized {
                next.count(E::OversizedSuperPackets as u16, 1);
            }
            if !offloads || cut_udp || oversized {
                if p.meta.offload.gso != Gso::None {
                    self.segs.clear();
                    match gso::segment(&p, &mut cx.pool, &mut self.segs) {
                        Ok(_) => {
                            cx.tx[port].append(&mut self.segs);
                            cx.pool.free(p);
                        }
                        Err(_) => {
                            cx.pool.free_all(&mut self.segs);
                            next.drop(p, E::SegmentationFailed as u16);
                        }
                    }
                    continue;
                }
                if p.meta.offload.needs_csum && csum::complete(&mut p).is_err() {
                    next.drop(p, E::ChecksumFailed as u16);
                    continue;
                }
            }
            cx.tx[port].push(p);
        }
    }
}
