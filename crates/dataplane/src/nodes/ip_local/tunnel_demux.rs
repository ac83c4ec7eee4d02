//! ip-local's tunnel demultiplexing: which decapsulation node (gre-input,
//! vxlan-input, esp-decrypt) a local packet goes to, by IP protocol and
//! UDP port.

use crate::graph::{Ctx, NodeId};
use packet::buffer::Packet;

/// Decapsulation node for a local packet with L4 protocol `proto` at
/// offset `l4`, if a tunnel could want it, with the flags to put in
/// `meta.aux` next to the offset (ESP in UDP 4500, RFC 3948:
/// [`AUX_UDP`](crate::nodes::esp_decrypt::AUX_UDP)).
#[inline]
pub(super) fn tunnel_dispatch(cx: &Ctx, p: &Packet, proto: u8, l4: usize) -> Option<(NodeId, u32)> {
    let t = &cx.tables.tunnels;
    let esp = &cx.tables.esp;
    match proto {
        crate::tunnel::IP_PROTO_GRE if t.any_gre => Some((NodeId::GreInput, 0)),
        wire::esp::IP_PROTOCOL if esp.any() => Some((NodeId::EspDecrypt, 0)),
        crate::tunnel::IP_PROTO_UDP => {
            let d = p.data();
            if d.len() < l4 + 4 {
                return None;
            }
            let dport = wire::udp::Packet::new_unchecked(&d[l4..]).dst_port();
            if esp.nat_t && dport == wire::esp::NAT_T_PORT {
                Some((NodeId::EspDecrypt, crate::nodes::esp_decrypt::AUX_UDP))
            } else if t.vxlan_ports.contains(&dport) {
                Some((NodeId::VxlanInput, 0))
            } else {
                None
            }
        }
        _ => None,
    }
}
