//! ip-local's VRRP punt: advertisements (IP protocol 112 to 224.0.0.18 /
//! ff02::12, RFC 5798 §5.1) are copied to the control plane's VRRP queue
//! ([`crate::punt::vrrp`]) with the port they arrived on, for the speaker
//! thread, which runs the state machines.

use super::E;
use crate::graph::Ctx;
use crate::punt::vrrp::AdvertFrom;
use packet::buffer::Packet;
use std::net::IpAddr;

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
        AdvertFrom {
            port: p.meta.rx_port,
            src,
            dst,
        },
    );
    Some(if ok { E::VrrpPunted } else { E::PuntFull })
}
