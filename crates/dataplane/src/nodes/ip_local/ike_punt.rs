//! ip-local's IKE punt: IKEv2 datagrams addressed to the gateway are
//! copied to the control plane's punt queue ([`crate::punt::ike`]).

use super::E;
use crate::graph::Ctx;
use packet::buffer::Packet;
use std::net::IpAddr;
use wire::{checksum, udp as udp_hdr};

/// IKE for the control plane: UDP to port 500, or to 4500 with the non-ESP
/// marker (RFC 3948 §2.2), punted as a copy ([`crate::punt::IkePunt::punt`]).
/// `None`: not IKE, or no control plane (the packet goes its usual way);
/// otherwise the reason to count before freeing the packet.
#[inline]
pub(super) fn punt_ike(
    cx: &Ctx,
    p: &Packet,
    proto: u8,
    l4: usize,
    src: IpAddr,
    dst: IpAddr,
) -> Option<E> {
    let punt = cx.punt.as_ref()?;
    if proto != crate::tunnel::IP_PROTO_UDP {
        return None;
    }
    let d = p.data();
    let udp = d.get(l4..)?;
    if udp.len() < 8 {
        return None;
    }
    let h = udp_hdr::Packet::new_unchecked(udp);
    let (sport, dport, ulen) = (h.src_port(), h.dst_port(), usize::from(h.len()));
    let sum = h.checksum();
    if ulen < 8 || ulen > udp.len() {
        return Some(E::TooShort);
    }
    let udp = &udp[..ulen];
    let payload = &udp[8..];
    if !crate::punt::IkePunt::wants(dport, payload) {
        return None;
    }
    // Only at a tunnel's underlay endpoint (VRF and address): a tenant's
    // VRF never reaches the IKE responder, whatever it addresses.
    if !cx.tables.esp.is_endpoint(p.meta.vrf, dst) {
        return Some(E::IkeWrongUnderlay);
    }
    // The checksum (optional over IPv4, RFC 768) unless the sender is a
    // local stack that left it partial or the backend verified it.
    let o = &p.meta.offload;
    if !o.needs_csum && !o.csum_valid && (sum != 0 || dst.is_ipv6()) {
        let ph = checksum::pseudo_header(&src, &dst, 17, ulen as u32).ok()?;
        if checksum::combine(&[ph, checksum::data(udp)]) != 0xffff {
            return Some(E::BadChecksum);
        }
    }
    let r = punt.punt_class(
        payload,
        std::net::SocketAddr::new(dst, dport),
        std::net::SocketAddr::new(src, sport),
        p.meta.vrf,
    );
    use crate::punt::ike::Class;
    Some(match r {
        Ok(Class::Known) => E::IkePuntedKnown,
        Ok(Class::Other) => E::IkePunted,
        Err(Class::Known) => E::IkePuntFullKnown,
        Err(Class::Other) => E::PuntFull,
    })
}
