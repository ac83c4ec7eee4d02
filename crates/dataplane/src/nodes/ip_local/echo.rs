//! ip-local's echo responder: ICMP echo (RFC 792) and ICMPv6 echo
//! (RFC 4443 §4.1) requests to the gateway are answered in place.

use super::{reply_meta, E, R};
use crate::graph::{Ctx, Next, NodeId};
use crate::nodes::{be16, put16};
use packet::buffer::Packet;
use std::net::Ipv6Addr;
use wire::{checksum, ipv4};

/// Answers the ICMP message at `ihl` of an IPv4 packet if it is an echo
/// request: swap addresses, type 0, fresh TTL.
pub(super) fn reply4(cx: &mut Ctx, mut p: Packet, next: &mut Next<'_>, ihl: usize) -> R {
    let d = p.data();
    let icmp = &d[ihl..];
    if icmp.len() < 8 {
        return Err((p, E::TooShort));
    }
    if !checksum::verify(icmp) {
        return Err((p, E::BadChecksum));
    }
    if icmp[0] != 8 || icmp[1] != 0 {
        return Err((p, E::LocalUnhandled));
    }
    let mut ip = ipv4::Packet::new_unchecked(p.data_mut());
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    ip.set_src_addr(dst);
    ip.set_dst_addr(src);
    ip.set_ttl(64);
    ip.fill_checksum();
    let d = p.data_mut();
    d[ihl] = 0;
    let ic = be16(d, ihl + 2);
    put16(d, ihl + 2, checksum::update_u16(ic, 0x0800, 0x0000));
    reply_meta(&mut p);
    if p.meta.trace {
        cx.trace
            .add("ip-local", format_args!("echo reply {dst} -> {src}"));
    }
    next.enqueue(NodeId::Ip4Lookup, p);
    Ok(())
}

/// Whether the ICMPv6 message `icmp` from `src` to `dst` has a valid
/// checksum (RFC 4443 §2.3: over the pseudo-header).
pub(super) fn icmp6_checksum_ok(src: Ipv6Addr, dst: Ipv6Addr, icmp: &[u8]) -> bool {
    let ph = checksum::pseudo_header_v6(&src, &dst, 58, icmp.len() as u32);
    checksum::combine(&[ph, checksum::data(icmp)]) == 0xffff
}

/// Answers the ICMPv6 echo request at `off` (checksum already verified).
pub(super) fn reply6(
    cx: &mut Ctx,
    mut p: Packet,
    next: &mut Next<'_>,
    off: usize,
    src: Ipv6Addr,
    dst: Ipv6Addr,
) -> R {
    let port = p.meta.rx_port;
    let our_src = if dst.is_multicast() {
        // RFC 4443 §4.2: the reply comes from a unicast address of the
        // interface the request arrived on.
        match cx.tables.iface(port).and_then(|i| i.primary_v6()) {
            Some(a) => a,
            None => return Err((p, E::EchoToMulticast)),
        }
    } else {
        dst
    };
    let d = p.data_mut();
    d[7] = 64;
    d[8..24].copy_from_slice(&our_src.octets());
    d[24..40].copy_from_slice(&src.octets());
    let icmp = &mut d[off..];
    icmp[0] = 129;
    put16(icmp, 2, 0);
    let ph = checksum::pseudo_header_v6(&our_src, &src, 58, icmp.len() as u32);
    let c = !checksum::combine(&[ph, checksum::data(icmp)]);
    put16(icmp, 2, c);
    reply_meta(&mut p);
    if p.meta.trace {
        cx.trace
            .add("ip-local", format_args!("echo reply {our_src} -> {src}"));
    }
    next.enqueue(NodeId::Ip6Lookup, p);
    Ok(())
}
