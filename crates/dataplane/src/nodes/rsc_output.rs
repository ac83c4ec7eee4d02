//! rsc-output: receive segment coalescing for decapsulated TCP.
//!
//! interface-output sends here the packets that came out of a tunnel
//! (`flags::DECAP`) and leave through a port whose backend takes
//! super-packets (vnet header) and whose interface has `rsc` on. Per egress
//! port, in-order segments of one flow found in this vector are merged by
//! [`Coalescer`] (the kernel's GRO rules) into one super-packet with a GSO
//! vnet header, so the receiving host's stack handles one 64 KB packet
//! instead of ~45 small ones.
//!
//! Nothing is held across vectors: a flow's super-packet ends with the
//! vector it was built in, so no flush deadline or timer is needed and a
//! lone segment is never delayed. The `rsc` flag is read from the tables of
//! the current vector, so switching it (a table swap) takes effect on the
//! next vector; segments are only merged, never reordered or altered in
//! payload, so switching mid-connection is invisible to TCP.

use crate::graph::{Ctx, Next, Node, NodeId};
use crate::offload::{Coalescer, GroConfig};
use packet::buffer::Packet;

pub struct RscOutput {
    gro: Coalescer,
    by_port: Vec<Vec<Packet>>,
}

impl Default for RscOutput {
    fn default() -> Self {
        RscOutput {
            gro: Coalescer::new(GroConfig::ethernet()),
            by_port: Vec::new(),
        }
    }
}

node_errors! {
    enum E {
        InterfaceDown => "interface-down",
        CoalescedSegments => "coalesced-segments",
        SuperPackets => "super-packets-out",
    }
}

const NEXT: &[NodeId] = &[];

impl Node for RscOutput {
    fn name(&self) -> &'static str {
        "rsc-output"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        if self.by_port.len() < cx.tx.len() {
            // Once per worker (the port count is fixed).
            self.by_port
                .resize_with(cx.tx.len(), || Vec::with_capacity(packet::VECTOR_SIZE));
        }
        for p in input.drain(..) {
            let port = usize::from(p.meta.tx_port);
            if port >= cx.tx.len() || !cx.port_up[port] {
                next.drop(p, E::InterfaceDown as u16);
                continue;
            }
            self.by_port[port].push(p);
        }
        for (port, v) in self.by_port.iter_mut().enumerate() {
            if v.is_empty() {
                continue;
            }
            let (m0, s0) = (self.gro.stats().merged, self.gro.stats().super_out);
            self.gro.coalesce(v, &mut cx.pool);
            let st = self.gro.stats();
            next.count(E::CoalescedSegments as u16, st.merged - m0);
            next.count(E::SuperPackets as u16, st.super_out - s0);
            cx.tx[port].append(v);
        }
    }
}
