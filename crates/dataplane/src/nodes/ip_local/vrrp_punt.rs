//! ip-local's VRRP punt: advertisements (IP protocol 112 to 224.0.0.18 /
//! ff02::12, RFC 5798 §5.1) are copied to the control plane's VRRP queue
//! (a [`crate::ike_punt::Punt`] of its own), which runs the state machine.
//!
//! The punted datagram's `local` is the group address with the receiving
//! port id in place of a port number (a group lives on one interface);
//! `remote` is the sender, port 0.

use super::E;
use crate::graph::Ctx;
use packet::buffer::Packet;
use std::net::{IpAddr, SocketAddr};

/// `None`: not VRRP, or no VRRP running (the packet goes its usual way).
#[inline]
pub(super) fn punt_vrrp(
    cx: &Ctx,
    p: &Packet,
    proto: u8,
    l4: usize,
    src: IpAddr,
    dst: IpAddr,
) -> Option<E> {
    if proto != wire::vrrp::PROTOCOL {
        return None;
    }
    let punt = cx.vrrp.as_ref()?;
    let d = p.data();
    // A router forwarded it: not from our link (RFC 5798 §7.1).
    let ttl = if dst.is_ipv4() { d[8] } else { d[7] };
    if ttl != wire::vrrp::TTL {
        return Some(E::VrrpBadTtl);
    }
    let payload = d.get(l4..)?;
    let ok = punt.punt(
        payload,
        SocketAddr::new(dst, p.meta.rx_port),
        SocketAddr::new(src, 0),
        p.meta.vrf,
    );
    Some(if ok { E::VrrpPunted } else { E::PuntFull })
}
