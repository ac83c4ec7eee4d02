//! Frames the gateway originates for neighbour resolution: ARP requests and
//! gratuitous ARP (RFC 826, RFC 5227 §3), Neighbor Solicitations and
//! unsolicited Neighbor Advertisements (RFC 4861 §7.2.2, §7.2.6). Each is a
//! complete Ethernet frame ready for interface-output.

use crate::graph::flags;
use crate::nodes::{push_eth, ETHERTYPE_ARP, ETHERTYPE_IPV6};
use crate::tables::{multicast_mac_v6, solicited_node, Interface};
use packet::buffer::{Packet, Pool};
use std::net::{Ipv4Addr, Ipv6Addr};
use wire::arp::{ArpRepr, Operation};
use wire::ethernet::MacAddr;

pub(crate) const ICMP6_NS: u8 = 135;
pub(crate) const ICMP6_NA: u8 = 136;
/// NA flags (RFC 4861 §4.4).
pub(crate) const NA_ROUTER: u8 = 0x80;
pub(crate) const NA_SOLICITED: u8 = 0x40;
pub(crate) const NA_OVERRIDE: u8 = 0x20;

fn finish(mut p: Packet, ifc: &Interface, dst: [u8; 6], et: u16) -> Option<Packet> {
    if !push_eth(&mut p, dst, ifc.mac, et) {
        return None;
    }
    p.meta.tx_port = ifc.port;
    p.meta.rx_port = ifc.port;
    p.meta.vrf = ifc.vrf;
    p.meta.flags = flags::LOCAL | flags::L3_DONE;
    Some(p)
}

fn arp(
    pool: &mut Pool,
    ifc: &Interface,
    op: Operation,
    spa: Ipv4Addr,
    tpa: Ipv4Addr,
    dst: [u8; 6],
) -> Option<Packet> {
    let mut p = pool.alloc()?;
    let r = ArpRepr {
        operation: op,
        source_hardware_addr: MacAddr(ifc.mac),
        source_protocol_addr: spa,
        target_hardware_addr: MacAddr::ZERO,
        target_protocol_addr: tpa,
    };
    let mut body = [0u8; wire::arp::ETH_IPV4_LEN];
    r.emit(&mut wire::arp::Packet::new_unchecked(&mut body[..]));
    p.set_data(&body);
    finish(p, ifc, dst, ETHERTYPE_ARP)
}

/// ARP request for `target`, from the interface address on its subnet (or
/// the primary one); broadcast, or unicast to re-probe a known neighbour.
pub fn arp_request(
    pool: &mut Pool,
    ifc: &Interface,
    target: Ipv4Addr,
    unicast: Option<[u8; 6]>,
) -> Option<Packet> {
    let spa = ifc
        .v4
        .iter()
        .find(|(a, l)| crate::fib::Prefix::v4(*a, *l).is_ok_and(|p| p.contains(target.into())))
        .or(ifc.v4.first())
        .map(|(a, _)| *a)?;
    arp(
        pool,
        ifc,
        Operation::Request,
        spa,
        target,
        unicast.unwrap_or([0xff; 6]),
    )
}

/// Gratuitous ARP announcing `addr` (RFC 5227 §3: a request with sender and
/// target protocol address both `addr`).
pub fn gratuitous_arp(pool: &mut Pool, ifc: &Interface, addr: Ipv4Addr) -> Option<Packet> {
    arp(pool, ifc, Operation::Request, addr, addr, [0xff; 6])
}

/// Writes an IPv6 header + ICMPv6 ND message (type, flags byte, target,
/// link-layer address option of `opt_type`) and its checksum; 72 bytes.
// Private builder mirroring the wire layout field by field.
#[allow(clippy::too_many_arguments)]
fn nd_message(
    p: &mut Packet,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    icmp_type: u8,
    flags_byte: u8,
    target: Ipv6Addr,
    opt_type: u8,
    mac: [u8; 6],
) -> bool {
    let mut b = [0u8; 72];
    // One link-layer address option: type, length 1 (8 bytes), the MAC.
    b[64] = opt_type;
    b[65] = 1;
    b[66..72].copy_from_slice(&mac);
    let mut ip = wire::ipv6::Packet::new_unchecked(&mut b[..]);
    ip.set_version_tc_flow(0, 0);
    ip.set_payload_len(32);
    ip.set_next_header(wire::ipv4::protocol::ICMPV6);
    ip.set_hop_limit(255); // RFC 4861 §7.1: hop limit 255 proves on-link origin.
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    let mut icmp = wire::icmpv6::Packet::new_unchecked(&mut b[40..72]);
    icmp.set_msg_type(icmp_type);
    icmp.set_rest_of_header(u32::from(flags_byte) << 24);
    icmp.set_target_addr(&target);
    icmp.fill_checksum(&src, &dst);
    p.set_data(&b)
}

/// Neighbor Solicitation for `target` (RFC 4861 §7.2.2): to its
/// solicited-node group, or unicast when re-probing; from our link-local
/// address, with a source link-layer address option.
pub fn neighbor_solicit(
    pool: &mut Pool,
    ifc: &Interface,
    target: Ipv6Addr,
    unicast: Option<[u8; 6]>,
) -> Option<Packet> {
    let src = ifc.ll6.or(ifc.primary_v6())?;
    let (dst_ip, dst_mac) = match unicast {
        Some(m) => (target, m),
        None => {
            let g = solicited_node(target);
            (g, multicast_mac_v6(g))
        }
    };
    let mut p = pool.alloc()?;
    if !nd_message(&mut p, src, dst_ip, ICMP6_NS, 0, target, 1, ifc.mac) {
        pool.free(p);
        return None;
    }
    finish(p, ifc, dst_mac, ETHERTYPE_IPV6)
}

/// Unsolicited Neighbor Advertisement for `addr` to all-nodes with the
/// override flag (RFC 4861 §7.2.6), sent when the interface comes up.
pub fn unsolicited_na(pool: &mut Pool, ifc: &Interface, addr: Ipv6Addr) -> Option<Packet> {
    let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    let mut p = pool.alloc()?;
    if !nd_message(
        &mut p,
        addr,
        all,
        ICMP6_NA,
        NA_ROUTER | NA_OVERRIDE,
        addr,
        2,
        ifc.mac,
    ) {
        pool.free(p);
        return None;
    }
    finish(p, ifc, multicast_mac_v6(all), ETHERTYPE_IPV6)
}

/// Builds a Neighbor Advertisement answering a solicitation into `p`
/// (replacing its content, L3 only).
pub(crate) fn na_reply(
    p: &mut Packet,
    ifc: &Interface,
    target: Ipv6Addr,
    dst: Ipv6Addr,
    solicited: bool,
) -> bool {
    let f = NA_ROUTER | NA_OVERRIDE | if solicited { NA_SOLICITED } else { 0 };
    nd_message(p, target, dst, ICMP6_NA, f, target, 2, ifc.mac)
}

/// Announcements for every address of `ifc` (gratuitous ARP, unsolicited
/// NA), appended to `out`.
pub fn announce(pool: &mut Pool, ifc: &Interface, out: &mut Vec<Packet>) {
    for (a, _) in &ifc.v4 {
        if let Some(p) = gratuitous_arp(pool, ifc, *a) {
            out.push(p);
        }
    }
    for a in ifc.ll6.iter().chain(ifc.v6.iter().map(|(a, _)| a)) {
        if let Some(p) = unsolicited_na(pool, ifc, *a) {
            out.push(p);
        }
    }
}
