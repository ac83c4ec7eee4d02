//! icmp-error: turns an offending packet into an ICMP (RFC 792, RFC 1812
//! §4.3.2) or ICMPv6 (RFC 4443 §3) error back to its source, in place: the
//! original is quoted (IPv4: up to 576 bytes in all, RFC 1812 §4.3.2.3;
//! IPv6: up to the 1280-byte minimum MTU, RFC 4443 §2.4(c)) and the new
//! headers are pushed in front of it.
//!
//! Never an error about an error, a multicast or broadcast, a non-first
//! fragment, or an unspecified/multicast source (RFC 1812 §4.3.2.7,
//! RFC 4443 §2.4(e)); errors are rate-limited by a token bucket per VRF
//! in each worker (RFC 1812 §4.3.2.8, RFC 4443 §2.4(f)): one tenant's
//! TTL-1 flood spends its own budget, never another tenant's "fragmentation
//! needed" / "packet too big" that its PMTU discovery depends on.

use crate::graph::{flags, Ctx, Next, Node, NodeId};
use packet::buffer::Packet;
use std::net::{Ipv4Addr, Ipv6Addr};
use wire::{icmpv4, icmpv6, ipv4, ipv6};

/// What icmp-error sends, in the upper 16 bits of `meta.aux` (the lower
/// 16 carry an MTU).
pub mod kind {
    pub const TIME_EXCEEDED: u16 = 1;
    pub const NET_UNREACHABLE: u16 = 2;
    /// IPv4 fragmentation needed and DF set / IPv6 packet too big.
    pub const TOO_BIG: u16 = 3;
    pub const HOST_UNREACHABLE: u16 = 4;
}

/// A token bucket: `rate` tokens per second, at most `burst`.
#[derive(Clone, Debug)]
pub struct RateLimit {
    rate: u64,
    burst: u64,
    /// In thousandths of a token.
    milli: u64,
    last: u64,
}

impl RateLimit {
    pub fn new(rate_per_s: u32, burst: u32) -> Self {
        RateLimit {
            rate: u64::from(rate_per_s),
            burst: u64::from(burst),
            milli: u64::from(burst) * 1000,
            last: 0,
        }
    }

    /// Takes a token at time `now` (ms) if one is available.
    #[inline]
    pub fn allow(&mut self, now: u64) -> bool {
        let dt = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        self.milli = (self.milli + dt.saturating_mul(self.rate)).min(self.burst * 1000);
        if self.milli >= 1000 {
            self.milli -= 1000;
            true
        } else {
            false
        }
    }
}

/// ICMP error budgets of one worker: a [`RateLimit`] per VRF (by the
/// VRF's index in the tables, so at most one per configured VRF), all
/// with the same rate and burst.
#[derive(Clone, Debug)]
pub struct IcmpBudgets {
    rate: u32,
    burst: u32,
    by_vrf: Vec<RateLimit>,
}

impl IcmpBudgets {
    pub fn new(rate_per_s: u32, burst: u32) -> Self {
        IcmpBudgets {
            rate: rate_per_s,
            burst,
            by_vrf: Vec::new(),
        }
    }

    /// Takes a token from `vrf`'s bucket at time `now` (ms).
    #[inline]
    pub fn allow(&mut self, vrf: u16, now: u64) -> bool {
        let i = usize::from(vrf);
        if i >= self.by_vrf.len() {
            // Bounded by u16: at most 65536 buckets of 32 bytes.
            let fresh = RateLimit::new(self.rate, self.burst);
            self.by_vrf.resize(i + 1, fresh);
        }
        self.by_vrf[i].allow(now)
    }
}

pub struct IcmpError;

node_errors! {
    enum E {
        RateLimited => "rate-limited",
        AboutAnError => "about-an-error",
        AboutMulticast => "about-multicast",
        NonFirstFragment => "non-first-fragment",
        BadSource => "bad-source",
        NoSourceAddress => "no-source-address",
        NoHeadroom => "no-headroom",
        AboutLocal => "about-local",
        Truncated => "truncated",
    }
}

const NEXT: &[NodeId] = &[NodeId::Ip4Lookup, NodeId::Ip6Lookup];

/// Largest IPv4 ICMP error (RFC 1812 §4.3.2.3).
const MAX4: usize = 576;
/// Largest ICMPv6 error: the IPv6 minimum MTU (RFC 4443 §2.4(c)).
const MAX6: usize = 1280;

impl Node for IcmpError {
    fn name(&self) -> &'static str {
        "icmp-error"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        for p in input.drain(..) {
            let v6 = p.data().first().is_some_and(|b| b >> 4 == 6);
            let r = if v6 { error6(cx, p) } else { error4(cx, p) };
            match r {
                Ok(p) => {
                    if p.meta.trace {
                        cx.trace.add(
                            "icmp-error",
                            format_args!("sent kind {} len {}", p.meta.aux >> 16, p.len()),
                        );
                    }
                    next.enqueue(
                        if v6 {
                            NodeId::Ip6Lookup
                        } else {
                            NodeId::Ip4Lookup
                        },
                        p,
                    );
                }
                Err((p, e)) => {
                    if p.meta.trace {
                        cx.trace.add(
                            "icmp-error",
                            format_args!("not sent: {}", ERRORS[e as usize]),
                        );
                    }
                    next.drop(p, e as u16);
                }
            }
        }
    }
}

type R = Result<Packet, (Packet, E)>;

fn common_checks(cx: &mut Ctx, p: Packet) -> Result<Packet, (Packet, E)> {
    if p.meta.flags & flags::LOCAL != 0 {
        return Err((p, E::AboutLocal));
    }
    if p.meta.flags & flags::L2_MULTICAST != 0 {
        return Err((p, E::AboutMulticast));
    }
    if !cx.icmp_limit.allow(p.meta.vrf, cx.now) {
        return Err((p, E::RateLimited));
    }
    Ok(p)
}

fn error4(cx: &mut Ctx, p: Packet) -> R {
    let d = p.data();
    if d.len() < 20 {
        return Err((p, E::Truncated));
    }
    let ip = ipv4::Packet::new_unchecked(d);
    let ihl = ip.header_len();
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    if dst.is_multicast() || dst.is_broadcast() {
        return Err((p, E::AboutMulticast));
    }
    if src.is_unspecified() || src.is_multicast() || src.is_broadcast() || src.is_loopback() {
        return Err((p, E::BadSource));
    }
    if ip.frag_offset() != 0 {
        return Err((p, E::NonFirstFragment));
    }
    // ICMP errors (anything but the query types) are never answered.
    if d[9] == 1 && d.len() > ihl && matches!(d[ihl], 3 | 4 | 5 | 11 | 12) {
        return Err((p, E::AboutAnError));
    }
    let kind = (p.meta.aux >> 16) as u16;
    let mtu = (p.meta.aux & 0xffff) as u16;
    let Some(our) = cx.tables.iface(p.meta.rx_port).and_then(|i| i.primary_v4()) else {
        return Err((p, E::NoSourceAddress));
    };
    let mut p = common_checks(cx, p)?;
    let (ty, code) = match kind {
        kind::TIME_EXCEEDED => (11, 0),
        kind::TOO_BIG => (3, 4),
        kind::HOST_UNREACHABLE => (3, 1),
        _ => (3, 0),
    };
    p.truncate(MAX4 - 28);
    let quoted = p.len();
    if p.push_front(28).is_none() {
        return Err((p, E::NoHeadroom));
    }
    let d = p.data_mut();
    write_ip4(d, our, src, 28 + quoted);
    let mut icmp = icmpv4::Packet::new_unchecked(&mut d[20..]);
    icmp.set_msg_type(ty);
    icmp.set_code(code);
    // RFC 1191 §4: next-hop MTU in the low 16 bits, the rest unused.
    icmp.set_rest_of_header(if kind == kind::TOO_BIG {
        u32::from(mtu)
    } else {
        0
    });
    icmp.fill_checksum();
    finish(&mut p);
    Ok(p)
}

fn write_ip4(d: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr, total: usize) {
    let mut ip = ipv4::Packet::new_unchecked(&mut d[..20]);
    ip.set_version_and_header_len(20);
    ip.set_tos(0);
    ip.set_total_len(total as u16);
    ip.set_ident(0);
    ip.set_frag(false, false, 0);
    ip.set_ttl(64);
    ip.set_protocol(ipv4::protocol::ICMP);
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    ip.fill_checksum();
}

fn error6(cx: &mut Ctx, p: Packet) -> R {
    let d = p.data();
    if d.len() < 40 {
        return Err((p, E::Truncated));
    }
    let ip = ipv6::Packet::new_unchecked(d);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let kind = (p.meta.aux >> 16) as u16;
    let mtu = p.meta.aux & 0xffff;
    // Packet too big may answer a multicast (RFC 4443 §2.4(e.3)).
    if dst.is_multicast() && kind != kind::TOO_BIG {
        return Err((p, E::AboutMulticast));
    }
    if src.is_unspecified() || src.is_multicast() || src.is_loopback() {
        return Err((p, E::BadSource));
    }
    if d[6] == 58 && d.len() > 40 && d[40] < 128 {
        return Err((p, E::AboutAnError));
    }
    let ifc = cx.tables.iface(p.meta.rx_port);
    let link_local_src = src.segments()[0] & 0xffc0 == 0xfe80;
    let our: Option<Ipv6Addr> = ifc.and_then(|i| {
        if link_local_src {
            i.ll6.or(i.primary_v6())
        } else {
            i.primary_v6()
        }
    });
    let Some(our) = our else {
        return Err((p, E::NoSourceAddress));
    };
    let mut p = common_checks(cx, p)?;
    let (ty, code, word) = match kind {
        kind::TIME_EXCEEDED => (3, 0, 0),
        kind::TOO_BIG => (2, 0, mtu),
        kind::HOST_UNREACHABLE => (1, 3, 0),
        _ => (1, 0, 0),
    };
    p.truncate(MAX6 - 48);
    let quoted = p.len();
    if p.push_front(48).is_none() {
        return Err((p, E::NoHeadroom));
    }
    let plen = 8 + quoted;
    let d = p.data_mut();
    let mut ip = ipv6::Packet::new_unchecked(&mut d[..]);
    ip.set_version_tc_flow(0, 0);
    ip.set_payload_len(plen as u16);
    ip.set_next_header(ipv4::protocol::ICMPV6);
    ip.set_hop_limit(64);
    ip.set_src_addr(our);
    ip.set_dst_addr(src);
    // plen = 8 + quoted: the ICMPv6 message is the rest of the packet.
    let mut icmp = icmpv6::Packet::new_unchecked(&mut d[40..]);
    icmp.set_msg_type(ty);
    icmp.set_code(code);
    icmp.set_rest_of_header(word);
    icmp.fill_checksum(&our, &src);
    finish(&mut p);
    Ok(p)
}

/// The error is a new packet of ours, routed back in the same VRF.
fn finish(p: &mut Packet) {
    p.meta.flags = flags::LOCAL;
    p.meta.offload = Default::default();
    p.meta.tx_port = p.meta.rx_port;
    p.meta.l3_offset = 0;
}

#[cfg(test)]
mod tests {
    use super::RateLimit;

    #[test]
    fn token_bucket() {
        let mut r = RateLimit::new(10, 5);
        let n = (0..100).filter(|_| r.allow(0)).count();
        assert_eq!(n, 5);
        // 10 per second: one token per 100 ms.
        assert!(!r.allow(50));
        assert!(r.allow(150));
        assert!(!r.allow(150));
        let n = (0..100).filter(|_| r.allow(100_000)).count();
        assert_eq!(n, 5);
    }

    #[test]
    fn budgets_are_per_vrf() {
        let mut b = super::IcmpBudgets::new(10, 5);
        assert_eq!((0..100).filter(|_| b.allow(3, 0)).count(), 5);
        // VRF 3 spent its budget; VRFs 0 and 7 have theirs.
        assert_eq!((0..100).filter(|_| b.allow(0, 0)).count(), 5);
        assert_eq!((0..100).filter(|_| b.allow(7, 0)).count(), 5);
        assert!(!b.allow(3, 50));
        assert!(b.allow(3, 150));
    }
}
