//! The graph's nodes, one file each, and helpers they share.
//!
//! Inside the graph, after ethernet-input, a packet's data starts at its L3
//! header (`meta.l3_offset == 0`); ip-rewrite (or whoever sends a frame
//! directly) pushes the L2 header back, after which `l3_offset == 14`. The
//! virtio-net offload offsets follow the data start (see [`pull`] and
//! [`push_eth`]).

/// A node's drop reasons, each written once with its counter's name: the
/// enum `E`, whose discriminant indexes the node's error counters, and
/// `ERRORS`, the names in the same order (metric labels: a public
/// contract, extended, never renamed).
macro_rules! node_errors {
    ($(#[$em:meta])* $vis:vis enum E { $($(#[$vm:meta])* $v:ident => $name:literal,)+ }) => {
        $(#[$em])*
        #[derive(Clone, Copy)]
        #[repr(u16)]
        $vis enum E {
            $($(#[$vm])* $v,)+
        }

        /// The counters' names of [`E`]'s reasons, in its order.
        $vis const ERRORS: &[&str] = &[$($name,)+];
    };
    // After the ESP crypto's reasons ([`vecgate_ipsec::EspError`], defined
    // there once), the node's own.
    ($(#[$em:meta])* $vis:vis enum E after EspError {
        $(#[$fm:meta])* $first:ident => $fname:literal,
        $($(#[$vm:meta])* $v:ident => $name:literal,)*
    }) => {
        $(#[$em])*
        #[derive(Clone, Copy)]
        #[repr(u16)]
        $vis enum E {
            $(#[$fm])* $first = EspError::COUNT as u16,
            $($(#[$vm])* $v,)*
        }

        /// The counters' names: the crypto's, then [`E`]'s in its order.
        $vis const ERRORS: [&str; EspError::COUNT + 1 + [$($name),*].len()] =
            EspError::names_then([$fname, $($name,)*]);
    };
}

pub mod arp_input;
pub mod esp_decrypt;
pub mod esp_encrypt;
pub mod ethernet_input;
pub mod gre_input;
pub mod icmp_error;
pub mod interface_output;
pub mod ip4_fragment;
pub mod ip4_input;
pub mod ip4_lookup;
pub mod ip6_input;
pub mod ip6_lookup;
pub mod ip_local;
pub mod ip_rewrite;
pub mod rsc_output;
pub mod tunnel_encap;
#[cfg(test)]
mod tunnel_tests;
pub mod tunnel_util;
pub mod vxlan_input;

use crate::graph::{Ctx, Next, Node};
use packet::buffer::{Gso, Packet};

/// Declares the graph's nodes from one list (id, constructor), in
/// dispatch order (roughly topological, see [`crate::graph::Graph::run`]):
/// the [`NodeId`] enum, [`NodeId::ALL`], [`NodeId::COUNT`] and
/// [`standard`] all come from it.
macro_rules! graph_nodes {
    ($($id:ident => $node:expr,)*) => {
        /// Every node of the graph, in dispatch order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum NodeId {
            $($id,)*
        }

        impl NodeId {
            pub const ALL: [NodeId; [$(NodeId::$id),*].len()] = [$(NodeId::$id),*];
            pub const COUNT: usize = NodeId::ALL.len();

            #[inline]
            pub fn index(self) -> usize {
                self as usize
            }
        }

        /// One node per [`NodeId`], in order.
        pub fn standard() -> Vec<Box<dyn Node>> {
            vec![$(Box::new($node),)*]
        }
    };
}

graph_nodes! {
    EthernetInput => ethernet_input::EthernetInput,
    ArpInput => arp_input::ArpInput::default(),
    Ip4Input => ip4_input::Ip4Input,
    Ip6Input => ip6_input::Ip6Input,
    IpLocal => ip_local::IpLocal::default(),
    IcmpError => icmp_error::IcmpError,
    Ip4Lookup => ip4_lookup::Ip4Lookup,
    Ip6Lookup => ip6_lookup::Ip6Lookup,
    IpRewrite => ip_rewrite::IpRewrite,
    Ip4Fragment => ip4_fragment::Ip4Fragment::default(),
    InterfaceOutput => interface_output::InterfaceOutput::default(),
    GreInput => gre_input::GreInput::default(),
    VxlanInput => vxlan_input::VxlanInput,
    TunnelEncap => tunnel_encap::TunnelEncap::default(),
    RscOutput => rsc_output::RscOutput::default(),
    EspEncrypt => esp_encrypt::EspEncrypt::default(),
    EspDecrypt => esp_decrypt::EspDecrypt::default(),
}

pub(crate) const ETH_LEN: usize = 14;
pub(crate) const ETHERTYPE_IPV4: u16 = 0x0800;
pub(crate) const ETHERTYPE_ARP: u16 = 0x0806;
pub(crate) const ETHERTYPE_IPV6: u16 = 0x86dd;

fn has_offload_offsets(p: &Packet) -> bool {
    let o = &p.meta.offload;
    o.needs_csum || o.gso != Gso::None
}

/// Removes `n` header bytes from the front, keeping the offload offsets
/// relative to the new data start.
#[inline]
pub(crate) fn pull(p: &mut Packet, n: usize) -> bool {
    if !p.pull_front(n) {
        return false;
    }
    if has_offload_offsets(p) {
        let o = &mut p.meta.offload;
        o.csum_start = o.csum_start.saturating_sub(n as u16);
        o.hdr_len = o.hdr_len.saturating_sub(n as u16);
    }
    p.meta.l3_offset = 0;
    true
}

/// Prepends an Ethernet header; `false` if there is no headroom.
#[inline]
pub(crate) fn push_eth(p: &mut Packet, dst: [u8; 6], src: [u8; 6], ethertype: u16) -> bool {
    let Some(h) = p.push_front(ETH_LEN) else {
        return false;
    };
    let mut f = wire::ethernet::Frame::new_unchecked(h);
    f.set_dst_addr(wire::ethernet::MacAddr(dst));
    f.set_src_addr(wire::ethernet::MacAddr(src));
    f.set_outer_ethertype(ethertype);
    if has_offload_offsets(p) {
        let o = &mut p.meta.offload;
        o.csum_start = o.csum_start.saturating_add(ETH_LEN as u16);
        o.hdr_len = o.hdr_len.saturating_add(ETH_LEN as u16);
    }
    p.meta.l3_offset = ETH_LEN as u16;
    true
}

/// Big-endian field access, the offloads' own (one copy in the crate).
// The ports of ip-local's host punt (ip_local/host_punt.rs), the last
// raw big-endian read of the nodes.
#[inline]
pub(crate) fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

/// Ethertype for the IP packet at the start of `p` (by version nibble).
#[inline]
pub(crate) fn ip_ethertype(p: &Packet) -> u16 {
    match p.data().first().map(|b| b >> 4) {
        Some(6) => ETHERTYPE_IPV6,
        _ => ETHERTYPE_IPV4,
    }
}

/// Sends packets released by a neighbour resolution: each gets its L2
/// header (to `mac`, from `port`'s MAC) and goes to interface-output.
pub(crate) fn send_released(
    cx: &mut Ctx,
    next: &mut Next<'_>,
    port: u16,
    mac: [u8; 6],
    released: &mut Vec<Packet>,
    no_headroom: u16,
) {
    let src = cx.tables.iface(port).map_or([0; 6], |i| i.mac);
    for mut p in released.drain(..) {
        let et = ip_ethertype(&p);
        if push_eth(&mut p, mac, src, et) {
            p.meta.tx_port = port;
            next.enqueue(NodeId::InterfaceOutput, p);
        } else {
            next.drop(p, no_headroom);
        }
    }
}

/// Decodes `meta.aux` for icmp-error: (kind, mtu).
#[inline]
pub(crate) fn icmp_aux(kind: u16, mtu: u32) -> u32 {
    (u32::from(kind) << 16) | mtu.min(0xffff)
}
