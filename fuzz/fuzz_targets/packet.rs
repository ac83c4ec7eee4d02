//! A whole frame through the stack the way a receive path walks it:
//! Ethernet → IPv4/IPv6 (extension headers) → ICMP/UDP/TCP/GRE/ESP →
//! VXLAN / NVGRE / GRE / UDP-encapsulated ESP → the inner packet, again,
//! up to a fixed nesting depth.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::IpAddr;
use wire::esp::{Esp, EspRepr, UdpEncap, NAT_T_PORT};
use wire::ethernet::{ethertype, EthernetRepr, Frame};
use wire::gre::{Gre, GreRepr, Protocol};
use wire::ipv4::{self, protocol, Ipv4Repr};
use wire::ipv6::{self, Ipv6Repr};
use wire::nvgre::{Nvgre, NvgreRepr};
use wire::vxlan::{self, Vxlan, VxlanRepr};
use wire::{arp, icmpv4, icmpv6, tcp, udp};

/// Tunnels inside tunnels beyond this are not followed (the gateway
/// decapsulates once; this bounds the walk, not the gateway).
const MAX_DEPTH: u32 = 4;

fn ethernet(b: &[u8], depth: u32) {
    let Ok(f) = Frame::new_checked(b) else { return };
    let _ = EthernetRepr::parse(&f);
    let payload = f.payload();
    match f.ethertype() {
        ethertype::ARP => {
            if let Ok(p) = arp::Packet::new_checked(payload) {
                let _ = arp::ArpRepr::parse(&p);
            }
        }
        ethertype::IPV4 => ip4(payload, depth),
        ethertype::IPV6 => ip6(payload, depth),
        _ => {}
    }
}

fn ip4(b: &[u8], depth: u32) {
    let Ok(p) = ipv4::Packet::new_checked(b) else {
        return;
    };
    if Ipv4Repr::parse(&p).is_err() || p.frag_offset() != 0 {
        return;
    }
    let (src, dst) = (IpAddr::from(p.src_addr()), IpAddr::from(p.dst_addr()));
    let payload = p.payload();
    if p.protocol() == protocol::ICMP {
        let Ok(i) = icmpv4::Packet::new_checked(payload) else {
            return;
        };
        // Errors quote the offending datagram: parse its header too.
        match icmpv4::Icmpv4Repr::parse(&i) {
            Ok(icmpv4::Icmpv4Repr::DstUnreachable { data, .. })
            | Ok(icmpv4::Icmpv4Repr::TimeExceeded { data, .. })
                if depth < MAX_DEPTH =>
            {
                let _ = ipv4::Packet::new_checked(data).map(|q| q.protocol());
            }
            _ => {}
        }
        return;
    }
    l4(p.protocol(), &src, &dst, payload, depth);
}

fn ip6(b: &[u8], depth: u32) {
    let Ok(p) = ipv6::Packet::new_checked(b) else {
        return;
    };
    if Ipv6Repr::parse(&p).is_err() {
        return;
    }
    let (src6, dst6) = (p.src_addr(), p.dst_addr());
    let pkt = p.packet();
    let Ok(chain) = ipv6::header_chain(pkt) else {
        return;
    };
    let Some(payload) = pkt.get(chain.offset..) else {
        return;
    };
    if let Some(fo) = chain.fragment {
        let Ok(fh) = ipv6::FragmentHeader::new_checked(&pkt[fo..]) else {
            return;
        };
        if fh.frag_offset() != 0 {
            return;
        }
    }
    if chain.protocol == protocol::ICMPV6 {
        if let Ok(i) = icmpv6::Packet::new_checked(payload) {
            for o in i.ndp_options().take(16) {
                if o.is_err() {
                    break;
                }
            }
            let _ = icmpv6::Icmpv6Repr::parse(&src6, &dst6, &i);
        }
        return;
    }
    l4(
        chain.protocol,
        &IpAddr::from(src6),
        &IpAddr::from(dst6),
        payload,
        depth,
    );
}

fn l4(proto: u8, src: &IpAddr, dst: &IpAddr, b: &[u8], depth: u32) {
    match proto {
        protocol::TCP => {
            if let Ok(t) = tcp::Packet::new_checked(b) {
                let _ = tcp::TcpRepr::parse(&t, src, dst);
            }
        }
        protocol::UDP => {
            let Ok(u) = udp::Packet::new_checked(b) else {
                return;
            };
            if udp::UdpRepr::parse(&u, src, dst).is_err() {
                return;
            }
            let payload = u.payload();
            match u.dst_port() {
                vxlan::PORT if depth < MAX_DEPTH => {
                    if let Ok(v) = Vxlan::new_checked(payload) {
                        if VxlanRepr::parse(&v).is_ok() {
                            ethernet(v.payload(), depth + 1);
                        }
                    }
                }
                NAT_T_PORT => match UdpEncap::classify(payload) {
                    UdpEncap::Esp => esp(payload),
                    UdpEncap::Ike | UdpEncap::Keepalive | UdpEncap::Invalid => {}
                },
                _ => {}
            }
        }
        protocol::ESP => esp(b),
        protocol::GRE if depth < MAX_DEPTH => {
            let Ok(g) = Gre::new_checked(b) else { return };
            let Ok(r) = GreRepr::parse(&g) else { return };
            if let Ok(n) = Nvgre::new_checked(b) {
                let nr = NvgreRepr::parse(&n).expect("checked NVGRE parses");
                assert_eq!(nr.to_gre(), r);
            }
            match r.protocol {
                Protocol::Ipv4 => ip4(g.payload(), depth + 1),
                Protocol::Ipv6 => ip6(g.payload(), depth + 1),
                Protocol::TransparentEthernet => ethernet(g.payload(), depth + 1),
                Protocol::Unknown(_) => {}
            }
        }
        _ => {}
    }
}

fn esp(b: &[u8]) {
    if let Ok(e) = Esp::new_checked(b) {
        let _ = EspRepr::parse(&e);
        let _ = e.split(16, 16);
    }
}

fuzz_target!(|data: &[u8]| {
    ethernet(data, 0);
});
