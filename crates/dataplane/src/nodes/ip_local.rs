//! ip-local: traffic addressed to the gateway itself. One node (one
//! counter table), its parts in files named for what they do:
//!
//! - [`echo`]: ICMP echo (RFC 792) and ICMPv6 echo (RFC 4443 §4.1) replies;
//! - [`nd_receive`]: Neighbor Discovery (RFC 4861: NS → NA, NA →
//!   neighbour table);
//! - [`ike_punt`]: IKE (UDP 500, and UDP 4500 behind a non-ESP marker) to
//!   the control plane when one runs ([`crate::punt::ike`]), and only at an
//!   ESP tunnel's underlay endpoint (VRF and address);
//! - [`vrrp_punt`]: VRRP advertisements to the control plane when HA
//!   runs;
//! - [`host_punt`]: BGP (TCP 179) and BFD to the host's stack through
//!   the VRF's TUN when `[[routing.punt]]` names it ([`crate::punt::host`]);
//! - [`tunnel_demux`]: tunnel traffic to decapsulation — IP protocol 47 to
//!   gre-input, UDP to a VXLAN tunnel's port to vxlan-input, IP protocol 50
//!   and UDP 4500 (NAT-T) to esp-decrypt, with `meta.aux` = the offset of
//!   the GRE / UDP / ESP header;
//! - [`udp_gso`]: a UDP GSO super-packet (a peer's packed VXLAN packets,
//!   [`crate::offload::uso`]) is first unpacked or cut into its datagrams;
//!   a peer's ESP-in-UDP packets go to esp-decrypt whole.
//!
//! Everything else is dropped as "local-unhandled".

mod echo;
mod host_punt;
mod ike_punt;
mod nd_receive;
mod tunnel_demux;
mod udp_gso;
mod vrrp_punt;

use crate::graph::{flags, Ctx, Next, Node, NodeId};
use crate::neighbour::packets::{ICMP6_NA, ICMP6_NS};
use packet::buffer::{Gso, Packet};
use std::net::IpAddr;
use wire::{ipv4, ipv6};

#[derive(Default)]
pub struct IpLocal {
    released: Vec<Packet>,
    datagrams: Vec<Packet>,
}

node_errors! {
    /// ip-local's counters and drop reasons (one table for all its parts).
    enum E {
        LocalUnhandled => "local-unhandled",
        BadChecksum => "bad-checksum",
        Fragment => "fragment",
        TooShort => "too-short",
        BadExtHeader => "bad-ext-header",
        NdInvalid => "nd-invalid",
        NsNotForUs => "ns-not-for-us",
        NdConsumed => "nd-consumed",
        NoLinkLayerAddress => "no-link-layer-address",
        NoHeadroom => "no-headroom",
        RouterDiscoveryIgnored => "router-discovery-ignored",
        EchoToMulticast => "echo-to-multicast",
        IkePunted => "ike-punted",
        PuntFull => "punt-queue-full",
        UdpGsoSplit => "udp-gso-split",
        UdpGsoSplitFailed => "udp-gso-split-failed",
        UdpGsoUnpacked => "udp-gso-unpacked",
        VrrpPunted => "vrrp-punted",
        VrrpBadTtl => "vrrp-bad-ttl",
        IkeWrongUnderlay => "ike-wrong-underlay",
        HostPunted => "host-punted",
        /// Of ike-punted: for a live IKE SA of ours (`ike_punt::Class::Known`).
        IkePuntedKnown => "ike-punted-known",
        /// Dropped: the known-SA queue was full (a flood never fills it).
        IkePuntFullKnown => "ike-punt-full-known",
        /// A peer's ESP-in-UDP packets in one UDP GSO datagram, handed to
        /// esp-decrypt whole to be opened where they lie.
        UdpGsoEsp => "udp-gso-esp",
    }
}

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
}

type R = Result<(), (Packet, E)>;

impl IpLocal {
    fn local4(&mut self, cx: &mut Ctx, p: Packet, next: &mut Next<'_>) -> R {
        let ip = ipv4::Packet::new_unchecked(p.data());
        let ihl = ip.header_len();
        if ip.is_fragment() {
            // No reassembly for local traffic.
            return Err((p, E::Fragment));
        }
        if ip.protocol() != 1 {
            let (src, dst) = (ip.src_addr().into(), ip.dst_addr().into());
            let proto = ip.protocol();
            return self.not_icmp(cx, p, next, proto, ihl, src, dst);
        }
        echo::reply4(cx, p, next, ihl)
    }

    fn local6(&mut self, cx: &mut Ctx, p: Packet, next: &mut Next<'_>) -> R {
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
            let ip = ipv6::Packet::new_unchecked(d);
            let (src, dst) = (ip.src_addr().into(), ip.dst_addr().into());
            return self.not_icmp(cx, p, next, nh, off, src, dst);
        }
        let ip = ipv6::Packet::new_unchecked(d);
        let (src, dst, hlim) = (ip.src_addr(), ip.dst_addr(), ip.hop_limit());
        let icmp = &d[off..];
        if icmp.len() < 8 {
            return Err((p, E::TooShort));
        }
        if !echo::icmp6_checksum_ok(src, dst, icmp) {
            return Err((p, E::BadChecksum));
        }
        match icmp[0] {
            128 => echo::reply6(cx, p, next, off, src, dst),
            ICMP6_NS => self.ns(cx, p, next, off, src, hlim),
            ICMP6_NA => self.na(cx, p, next, off, hlim),
            133 | 134 => Err((p, E::RouterDiscoveryIgnored)),
            _ => Err((p, E::LocalUnhandled)),
        }
    }

    /// A local packet that is not ICMP: IKE is punted to the control
    /// plane, tunnel traffic goes to its decapsulation node with
    /// `meta.aux` = the L4 offset, the rest is not ours to handle.
    #[allow(clippy::too_many_arguments)]
    fn not_icmp(
        &mut self,
        cx: &mut Ctx,
        mut p: Packet,
        next: &mut Next<'_>,
        proto: u8,
        l4: usize,
        src: IpAddr,
        dst: IpAddr,
    ) -> R {
        match vrrp_punt::punt_vrrp(cx, &p, proto, l4, src, dst) {
            Some(E::VrrpPunted) => {
                next.count(E::VrrpPunted as u16, 1);
                cx.pool.free(p);
                return Ok(());
            }
            Some(e) => return Err((p, e)),
            None => {}
        }
        match ike_punt::punt_ike(cx, &p, proto, l4, src, dst) {
            Some(e @ (E::IkePunted | E::IkePuntedKnown)) => {
                next.count(E::IkePunted as u16, 1);
                if matches!(e, E::IkePuntedKnown) {
                    next.count(E::IkePuntedKnown as u16, 1);
                }
                cx.pool.free(p);
                return Ok(());
            }
            Some(e) => return Err((p, e)),
            None => {}
        }
        match host_punt::punt_host(cx, &p, proto, l4) {
            Some(E::HostPunted) => {
                next.count(E::HostPunted as u16, 1);
                cx.pool.free(p);
                return Ok(());
            }
            Some(e) => return Err((p, e)),
            None => {}
        }
        match tunnel_demux::tunnel_dispatch(cx, &p, proto, l4) {
            Some((to, aux)) => {
                p.meta.aux = l4 as u32 | aux;
                next.enqueue(to, p);
                Ok(())
            }
            None => Err((p, E::LocalUnhandled)),
        }
    }
}

/// Marks a packet as ours, going back where it came from.
fn reply_meta(p: &mut Packet) {
    p.meta.flags = flags::LOCAL;
    p.meta.tx_port = p.meta.rx_port;
    p.meta.offload = Default::default();
}
