//! ip-local's host punt: BGP and BFD addressed to the gateway go whole to
//! the host's stack through its VRF's TUN ([`crate::punt::host`]).

use super::E;
use crate::graph::Ctx;
use crate::nodes::be16;
use crate::punt::host::HostPunt;
use packet::buffer::{Gso, Packet};

/// `None`: not for the host, or no host punt running (the packet goes its
/// usual way); otherwise the reason to count before freeing the packet.
#[inline]
pub(super) fn punt_host(cx: &Ctx, p: &Packet, proto: u8, l4: usize) -> Option<E> {
    let host = cx.host.as_ref()?;
    let d = p.data();
    let ports = d.get(l4..l4 + 4)?;
    if !HostPunt::wants(proto, be16(ports, 0), be16(ports, 2)) {
        return None;
    }
    let o = &p.meta.offload;
    // A partial checksum (a local sender's) or a coalesced super-packet's
    // (the first segment's) is not what the host's TUN may be given.
    let complete = o.needs_csum || o.csum_valid || o.gso != Gso::None;
    Some(if host.punt(d, l4, proto, complete, p.meta.vrf) {
        E::HostPunted
    } else {
        E::PuntFull
    })
}
