//! vxlan-input: decapsulates VXLAN (RFC 7348).
//!
//! ip-local sends UDP to a VXLAN tunnel's port here with `meta.aux` = the
//! offset of the UDP header. A nonzero UDP checksum is verified unless the
//! vnet header says it is valid or not yet computed (always
//! present over IPv6: a zero one is dropped, as Linux does without
//! `udp6zerocsumrx`); the I flag must be set (RFC 7348 §5); the tunnel is
//! found by (underlay VRF, our address, the peer's, UDP port, VNI) and the
//! inner Ethernet frame enters its overlay VRF on its virtual port.

use super::pull;
use super::tunnel_util::{deliver, outer_addrs, Inner};
use crate::graph::{Ctx, Next, Node, NodeId};
use crate::tunnel::{DecapKey, KeyClass};
use packet::buffer::Packet;
use wire::{udp, vxlan};

pub struct VxlanInput;

node_errors! {
    enum E {
        TooShort => "too-short",
        BadChecksum => "bad-udp-checksum",
        IFlagClear => "i-flag-clear",
        UnknownPeer => "unknown-peer",
        UnknownVni => "unknown-vni",
    }
}

const NEXT: &[NodeId] = &[NodeId::EthernetInput];

/// UDP (8) + VXLAN (8).
const HDRS: usize = 16;

impl Node for VxlanInput {
    fn name(&self) -> &'static str {
        "vxlan-input"
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
            match check(&tables, &p) {
                Ok((idx, hlen)) => {
                    let Some(tun) = tables.tunnels.tunnels.get(idx as usize) else {
                        next.drop(p, E::UnknownVni as u16);
                        continue;
                    };
                    if p.meta.trace {
                        cx.trace.add(
                            "vxlan-input",
                            format_args!("tunnel port {} vni {:?}", tun.port, tun.def.key),
                        );
                    }
                    if !pull(&mut p, hlen) {
                        next.drop(p, E::TooShort as u16);
                        continue;
                    }
                    deliver(cx, next, p, tun, Inner::Ethernet);
                }
                Err(e) => {
                    if p.meta.trace {
                        cx.trace
                            .add("vxlan-input", format_args!("drop {}", ERRORS[e as usize]));
                    }
                    next.drop(p, e as u16);
                }
            }
        }
    }
}

fn check(t: &crate::tables::Tables, p: &Packet) -> Result<(u32, usize), E> {
    let d = p.data();
    let off = p.meta.aux as usize;
    let (src, dst) = outer_addrs(d).ok_or(E::TooShort)?;
    if d.len() < off + HDRS {
        return Err(E::TooShort);
    }
    let u = udp::Packet::new_unchecked(&d[off..]);
    let ulen = usize::from(u.len());
    if ulen < HDRS || off + ulen > d.len() {
        return Err(E::TooShort);
    }
    let csum = u.checksum();
    let v6 = d[0] >> 4 == 6;
    // A partial checksum (NEEDS_CSUM: the sender is a local stack on this
    // host, e.g. a kernel VXLAN device over veth) was never computed: there
    // is nothing to verify, the data never left memory.
    let o = p.meta.offload;
    if (csum != 0 || v6) && !o.csum_valid && !o.needs_csum && !crate::offload::verify_l4_at(d, 0) {
        return Err(E::BadChecksum);
    }
    let vx = vxlan::Vxlan::new_unchecked(&d[off + 8..]);
    if !vx.vni_valid() {
        return Err(E::IFlagClear);
    }
    let vni = vx.vni();
    let port = u.dst_port();
    let k = DecapKey {
        vrf: p.meta.vrf,
        local: dst,
        remote: src,
        class: KeyClass::Vxlan(port, vni),
    };
    match t.tunnels.lookup(&k) {
        Some((idx, _)) => Ok((idx, off + HDRS)),
        None if t.tunnels.is_peer(p.meta.vrf, dst, src) => Err(E::UnknownVni),
        None => Err(E::UnknownPeer),
    }
}
