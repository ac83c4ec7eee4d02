//! ip-local's echo responder: ICMP echo (RFC 792) and ICMPv6 echo
//! (RFC 4443 §4.1) requests to the gateway are answered in place.

use super::{reply_meta, E, R};
use crate::graph::{Ctx, Next, NodeId};
use packet::buffer::Packet;
use std::net::Ipv6Addr;
use wire::{checksum, icmpv4, icmpv6, ipv4, ipv6};

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
    // Type 8 code 0 (checked): type 0, checksum updated (RFC 1624).
    icmpv4::Packet::new_unchecked(&mut p.data_mut()[ihl..]).echo_request_to_reply();
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
    let mut ip = ipv6::Packet::new_unchecked(&mut d[..]);
    ip.set_hop_limit(64);
    ip.set_src_addr(our_src);
    ip.set_dst_addr(src);
    let mut icmp = icmpv6::Packet::new_unchecked(&mut d[off..]);
    icmp.set_msg_type(icmpv6::msg_type::ECHO_REPLY);
    icmp.fill_checksum(&our_src, &src);
    reply_meta(&mut p);
    if p.meta.trace {
        cx.trace
            .add("ip-local", format_args!("echo reply {our_src} -> {src}"));
    }
    next.enqueue(NodeId::Ip6Lookup, p);
    Ok(())
}
