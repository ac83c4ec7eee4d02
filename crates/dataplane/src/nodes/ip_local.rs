//! ip-local: traffic addressed to the gateway itself. Answers ICMP echo
//! (RFC 792) and ICMPv6 echo (RFC 4443 §4.1), handles Neighbor Discovery
//! (RFC 4861: NS → NA, NA → neighbour table); everything else is dropped
//! as "local-unhandled". Tunnel traffic is dispatched to decapsulation:
//! IP protocol 47 to gre-input, UDP to a VXLAN tunnel's port to
//! vxlan-input, IP protocol 50 and UDP 4500 (NAT-T) to esp-decrypt, with
//! `meta.aux` = the offset of the GRE / UDP / ESP header. IKE (UDP 500,
//! and UDP 4500 behind a non-ESP marker) is punted to the control plane
//! when one runs ([`crate::punt`]). A UDP GSO super-packet (a peer's packed
//! VXLAN packets, [`crate::offload::uso`]) is first cut into its datagrams.

use super::nd::{na_reply, ICMP6_NA, ICMP6_NS, NA_OVERRIDE, NA_SOLICITED};
use super::{be16, ip4_at, ip6_at, push_eth, put16, send_released, ETHERTYPE_IPV6};
use crate::graph::{flags, Ctx, Next, Node, NodeId};
use crate::neighbour::Learn;
use crate::offload::{gso, uso, SegmentSpec};
use crate::tables::multicast_mac_v6;
use packet::buffer::{Gso, Packet};
use std::net::{IpAddr, Ipv6Addr};
use wire::checksum;

#[derive(Default)]
pub struct IpLocal {
    released: Vec<Packet>,
    datagrams: Vec<Packet>,
}

#[derive(Clone, Copy)]
#[repr(u16)]
enum E {
    LocalUnhandled,
    BadChecksum,
    Fragment,
    TooShort,
    BadExtHeader,
    NdInvalid,
    NsNotForUs,
    NdConsumed,
    NoLinkLayerAddress,
    NoHeadroom,
    RouterDiscoveryIgnored,
    EchoToMulticast,
    IkePunted,
    PuntFull,
    UdpGsoSplit,
    UdpGsoSplitFailed,
    UdpGsoUnpacked,
}

const ERRORS: &[&str] = &[
    "local-unhandled",
    "bad-checksum",
    "fragment",
    "too-short",
    "bad-ext-header",
    "nd-invalid",
    "ns-not-for-us",
    "nd-consumed",
    "no-link-layer-address",
    "no-headroom",
    "router-discovery-ignored",
    "echo-to-multicast",
    "ike-punted",
    "punt-queue-full",
    "udp-gso-split",
    "udp-gso-split-failed",
    "udp-gso-unpacked",
];

const NEXT: &[NodeId] = &[
    NodeId::Ip4Lookup,
    NodeId::Ip6Lookup,
    NodeId::InterfaceOutput,
    NodeId::GreInput,
    NodeId::VxlanInput,
    NodeId::EspDecrypt,
];

/// Extension headers walked at most (RFC 8200 §4.1 recommends an order
/// with each at most once or twice; more is an attack or a loop).
const MAX_EXT_HEADERS: usize = 8;

const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

impl Node for IpLocal {
    fn name(&self) -> &'static str {
        "ip-local"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        for p in input.drain(..) {
            if p.meta.offload.gso == Gso::UdpL4 {
                self.split(cx, p, next);
            } else {
                self.one(cx, p, next);
            }
        }
    }
}

impl IpLocal {
    fn one(&mut self, cx: &mut Ctx, p: Packet, next: &mut Next<'_>) {
        let r = match p.data().first().map(|b| b >> 4) {
            Some(4) => self.local4(cx, p, next),
            _ => self.local6(cx, p, next),
        };
        if let Err((p, e)) = r {
            if p.meta.trace {
                cx.trace
                    .add("ip-local", format_args!("drop {}", ERRORS[e as usize]));
            }
            next.drop(p, e as u16);
        }
    }

    /// A UDP super-packet addressed to the gateway — a peer's VXLAN
    /// packets packed into one UDP GSO datagram (offload::uso), which
    /// reaches us whole over veth — is unpacked into the TCP super-packet
    /// it was made of ([`uso::unpack`]) or else cut into its datagrams,
    /// each then handled on its own. Its checksum is partial (a local
    /// sender) or was verified; the datagrams keep it partial.
    fn split(&mut self, cx: &mut Ctx, mut p: Packet, next: &mut Next<'_>) {
        let o = p.meta.offload;
        if !(o.needs_csum || o.csum_valid) {
            next.drop(p, E::BadChecksum as u16);
            return;
        }
        // A peer's packed VXLAN super-packet becomes that super-packet
        // again, decapsulated and forwarded as one packet.
        if let Some(u) = self.vxlan_udp_offset(cx, &p) {
            if uso::unpack(&mut p, u).is_ok() {
                next.count(E::UdpGsoUnpacked as u16, 1);
                self.one(cx, p, next);
                return;
            }
        }
        self.cut(cx, p, next);
    }

    /// Offset of the UDP header if `p` is UDP to one of our VXLAN ports.
    fn vxlan_udp_offset(&self, cx: &Ctx, p: &Packet) -> Option<usize> {
        let d = p.data();
        let (l4, proto) = match d.first()? >> 4 {
            4 => (usize::from(d[0] & 0x0f) * 4, *d.get(9)?),
            6 => (40, *d.get(6)?),
            _ => return None,
        };
        let dport = be16(d.get(l4..l4 + 4)?, 2);
        (proto == crate::tunnel::IP_PROTO_UDP && cx.tables.tunnels.vxlan_ports.contains(&dport))
            .then_some(l4)
    }

    /// Cuts a UDP super-packet into its datagrams, each handled on its own.
    fn cut(&mut self, cx: &mut Ctx, p: Packet, next: &mut Next<'_>) {
        let spec = SegmentSpec {
            outer: None,
            inner_l3_offset: 0,
            mss: 0,
            partial_csum: true,
        };
        self.datagrams.clear();
        if gso::segment_with(&p, &spec, &mut cx.pool, &mut self.datagrams).is_err() {
            cx.pool.free_all(&mut self.datagrams);
            next.drop(p, E::UdpGsoSplitFailed as u16);
            return;
        }
        cx.pool.free(p);
        next.count(E::UdpGsoSplit as u16, 1);
        let mut dgs = std::mem::take(&mut self.datagrams);
        for d in dgs.drain(..) {
            self.one(cx, d, next);
        }
        self.datagrams = dgs;
    }
}

type R = Result<(), (Packet, E)>;

/// IKE for the control plane: UDP to port 500, or to 4500 with the non-ESP
/// marker (RFC 3948 §2.2), punted as a copy ([`crate::punt::Punt::punt`]).
/// `None`: not IKE, or no control plane (the packet goes its usual way);
/// otherwise the reason to count before freeing the packet.
#[inline]
fn punt_ike(cx: &Ctx, p: &Packet, proto: u8, l4: usize, src: IpAddr, dst: IpAddr) -> Option<E> {
    let punt = cx.punt.as_ref()?;
    if proto != crate::tunnel::IP_PROTO_UDP {
        return None;
    }
    let d = p.data();
    let udp = d.get(l4..)?;
    if udp.len() < 8 {
        return None;
    }
    let (sport, dport, ulen) = (be16(udp, 0), be16(udp, 2), usize::from(be16(udp, 4)));
    if ulen < 8 || ulen > udp.len() {
        return Some(E::TooShort);
    }
    let udp = &udp[..ulen];
    let payload = &udp[8..];
    if !crate::punt::Punt::wants(dport, payload) {
        return None;
    }
    // The checksum (optional over IPv4, RFC 768) unless the sender is a
    // local stack that left it partial or the backend verified it.
    let o = &p.meta.offload;
    let sum = be16(udp, 6);
    if !o.needs_csum && !o.csum_valid && (sum != 0 || dst.is_ipv6()) {
        let ph = checksum::pseudo_header(&src, &dst, 17, ulen as u32).ok()?;
        if checksum::combine(&[ph, checksum::data(udp)]) != 0xffff {
            return Some(E::BadChecksum);
        }
    }
    let ok = punt.punt(
        payload,
        std::net::SocketAddr::new(dst, dport),
        std::net::SocketAddr::new(src, sport),
        p.meta.vrf,
    );
    Some(if ok { E::IkePunted } else { E::PuntFull })
}

/// Decapsulation node for a local packet with L4 protocol `proto` at
/// offset `l4`, if a tunnel could want it, with the flags to put in
/// `meta.aux` next to the offset (ESP in UDP 4500, RFC 3948:
/// [`AUX_UDP`](super::esp_decrypt::AUX_UDP)).
#[inline]
fn tunnel_dispatch(cx: &Ctx, p: &Packet, proto: u8, l4: usize) -> Option<(NodeId, u32)> {
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
            let dport = be16(d, l4 + 2);
            if esp.nat_t && dport == wire::esp::NAT_T_PORT {
                Some((NodeId::EspDecrypt, super::esp_decrypt::AUX_UDP))
            } else if t.vxlan_ports.contains(&dport) {
                Some((NodeId::VxlanInput, 0))
            } else {
                None
            }
        }
        _ => None,
    }
}

impl IpLocal {
    fn local4(&mut self, cx: &mut Ctx, mut p: Packet, next: &mut Next<'_>) -> R {
        let d = p.data();
        let ihl = usize::from(d[0] & 0x0f) * 4;
        if be16(d, 6) & 0x3fff != 0 {
            // No reassembly for local traffic.
            return Err((p, E::Fragment));
        }
        if d[9] != 1 {
            let (src, dst) = (ip4_at(d, 12).into(), ip4_at(d, 16).into());
            match punt_ike(cx, &p, d[9], ihl, src, dst) {
                Some(E::IkePunted) => {
                    next.count(E::IkePunted as u16, 1);
                    cx.pool.free(p);
                    return Ok(());
                }
                Some(e) => return Err((p, e)),
                None => {}
            }
            return match tunnel_dispatch(cx, &p, d[9], ihl) {
                Some((to, aux)) => {
                    let mut p = p;
                    p.meta.aux = ihl as u32 | aux;
                    next.enqueue(to, p);
                    Ok(())
                }
                None => Err((p, E::LocalUnhandled)),
            };
        }
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
        let (src, dst) = (ip4_at(d, 12), ip4_at(d, 16));
        // Echo reply in place (RFC 792): swap addresses, type 0, fresh TTL.
        let d = p.data_mut();
        d[12..16].copy_from_slice(&dst.octets());
        d[16..20].copy_from_slice(&src.octets());
        d[8] = 64;
        put16(d, 10, 0);
        let c = checksum::checksum(&d[..ihl]);
        put16(d, 10, c);
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

    fn local6(&mut self, cx: &mut Ctx, mut p: Packet, next: &mut Next<'_>) -> R {
        let d = p.data();
        let (mut nh, mut off) = (d[6], 40usize);
        let mut found = false;
        for i in 0..MAX_EXT_HEADERS {
            match nh {
                // Hop-by-hop only directly after the header (RFC 8200 §4.3).
                0 if i > 0 => return Err((p, E::BadExtHeader)),
                0 | 43 | 60 => {
                    if off + 2 > d.len() {
                        return Err((p, E::BadExtHeader));
                    }
                    nh = d[off];
                    off += (usize::from(d[off + 1]) + 1) * 8;
                    if off > d.len() {
                        return Err((p, E::BadExtHeader));
                    }
                }
                44 => return Err((p, E::Fragment)),
                _ => {
                    found = true;
                    break;
                }
            }
        }
        if !found {
            return Err((p, E::BadExtHeader));
        }
        if nh != 58 {
            let (src, dst) = (ip6_at(d, 8).into(), ip6_at(d, 24).into());
            match punt_ike(cx, &p, nh, off, src, dst) {
                Some(E::IkePunted) => {
                    next.count(E::IkePunted as u16, 1);
                    cx.pool.free(p);
                    return Ok(());
                }
                Some(e) => return Err((p, e)),
                None => {}
            }
            return match tunnel_dispatch(cx, &p, nh, off) {
                Some((to, aux)) => {
                    let mut p = p;
                    p.meta.aux = off as u32 | aux;
                    next.enqueue(to, p);
                    Ok(())
                }
                None => Err((p, E::LocalUnhandled)),
            };
        }
        let (src, dst, hlim) = (ip6_at(d, 8), ip6_at(d, 24), d[7]);
        let icmp = &d[off..];
        if icmp.len() < 8 {
            return Err((p, E::TooShort));
        }
        let ph = checksum::pseudo_header_v6(&src, &dst, 58, icmp.len() as u32);
        if checksum::combine(&[ph, checksum::data(icmp)]) != 0xffff {
            return Err((p, E::BadChecksum));
        }
        match icmp[0] {
            128 => {
                let port = p.meta.rx_port;
                let our_src = if dst.is_multicast() {
                    // RFC 4443 §4.2: the reply comes from a unicast address
                    // of the interface the request arrived on.
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
            ICMP6_NS => self.ns(cx, p, next, off, src, hlim),
            ICMP6_NA => self.na(cx, p, next, off, hlim),
            133 | 134 => Err((p, E::RouterDiscoveryIgnored)),
            _ => Err((p, E::LocalUnhandled)),
        }
    }

    /// Neighbor Solicitation (RFC 4861 §7.1.1 validation, §7.2.3-4 answer).
    fn ns(
        &mut self,
        cx: &mut Ctx,
        mut p: Packet,
        next: &mut Next<'_>,
        off: usize,
        src: Ipv6Addr,
        hlim: u8,
    ) -> R {
        let d = p.data();
        let icmp = &d[off..];
        if hlim != 255 || icmp[1] != 0 || icmp.len() < 24 {
            return Err((p, E::NdInvalid));
        }
        let target = ip6_at(icmp, 8);
        if target.is_multicast() {
            return Err((p, E::NdInvalid));
        }
        let port = p.meta.rx_port;
        let tables = cx.tables.clone();
        let Some(ifc) = tables.iface(port) else {
            return Err((p, E::LocalUnhandled));
        };
        if !ifc.has_v6(target) {
            return Err((p, E::NsNotForUs));
        }
        let Ok(slla) = ll_option(&icmp[24..], 1) else {
            return Err((p, E::NdInvalid));
        };
        let dad = src.is_unspecified();
        if dad && slla.is_some() {
            return Err((p, E::NdInvalid));
        }
        if let Some(mac) = slla {
            cx.learn(
                port,
                IpAddr::V6(src),
                mac,
                Learn::Unconfirmed,
                &mut self.released,
            );
            if !self.released.is_empty() {
                send_released(
                    cx,
                    next,
                    port,
                    mac,
                    &mut self.released,
                    E::NoHeadroom as u16,
                );
            }
        }
        let (dst, dst_mac) = if dad {
            (ALL_NODES, Some(multicast_mac_v6(ALL_NODES)))
        } else {
            (src, slla.or_else(|| cx.neighbour(port, IpAddr::V6(src))))
        };
        let Some(dst_mac) = dst_mac else {
            return Err((p, E::NoLinkLayerAddress));
        };
        if p.meta.trace {
            cx.trace
                .add("ip-local", format_args!("NS for {target} from {src}: NA"));
        }
        if !na_reply(&mut p, ifc, target, dst, !dad)
            || !push_eth(&mut p, dst_mac, ifc.mac, ETHERTYPE_IPV6)
        {
            return Err((p, E::NoHeadroom));
        }
        reply_meta(&mut p);
        p.meta.flags |= flags::L3_DONE;
        next.enqueue(NodeId::InterfaceOutput, p);
        Ok(())
    }

    /// Neighbor Advertisement (RFC 4861 §7.1.2 validation, §7.2.5 update).
    fn na(&mut self, cx: &mut Ctx, p: Packet, next: &mut Next<'_>, off: usize, hlim: u8) -> R {
        let d = p.data();
        let icmp = &d[off..];
        if hlim != 255 || icmp[1] != 0 || icmp.len() < 24 {
            return Err((p, E::NdInvalid));
        }
        let target = ip6_at(icmp, 8);
        let fl = icmp[4];
        if target.is_multicast() {
            return Err((p, E::NdInvalid));
        }
        let Ok(tlla) = ll_option(&icmp[24..], 2) else {
            return Err((p, E::NdInvalid));
        };
        let port = p.meta.rx_port;
        if let Some(mac) = tlla {
            let how = if fl & NA_SOLICITED != 0 {
                Learn::Confirmed
            } else if fl & NA_OVERRIDE != 0 {
                Learn::UpdateOnly
            } else {
                // Unsolicited without override: nothing to learn.
                return Err((p, E::NdConsumed));
            };
            cx.learn(port, IpAddr::V6(target), mac, how, &mut self.released);
            if !self.released.is_empty() {
                send_released(
                    cx,
                    next,
                    port,
                    mac,
                    &mut self.released,
                    E::NoHeadroom as u16,
                );
            }
            if p.meta.trace {
                cx.trace.add(
                    "ip-local",
                    format_args!("NA {target} is at {}", crate::neighbour::fmt_mac(mac)),
                );
            }
        }
        Err((p, E::NdConsumed))
    }
}

/// Marks a packet as ours, going back where it came from.
fn reply_meta(p: &mut Packet) {
    p.meta.flags = flags::LOCAL;
    p.meta.tx_port = p.meta.rx_port;
    p.meta.offload = Default::default();
}

/// Finds the link-layer address option `want` (1 source, 2 target) among
/// ND options (RFC 4861 §4.6). `Err` for a malformed option list.
fn ll_option(mut opts: &[u8], want: u8) -> Result<Option<[u8; 6]>, ()> {
    let mut found = None;
    while !opts.is_empty() {
        if opts.len() < 2 {
            return Err(());
        }
        let len = usize::from(opts[1]) * 8;
        // A zero length would loop forever (§4.6: "MUST silently discard").
        if len == 0 || len > opts.len() {
            return Err(());
        }
        if opts[0] == want && len >= 8 {
            let mut m = [0u8; 6];
            m.copy_from_slice(&opts[2..8]);
            found = Some(m);
        }
        opts = &opts[len..];
    }
    Ok(found)
}
