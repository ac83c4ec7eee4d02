//! tunnel-encap: packets that interface-output found leaving through a
//! tunnel's virtual port get the tunnel's outer headers and are routed in
//! its underlay VRF (ip4-lookup / ip6-lookup, which then resolve the outer
//! Ethernet header through the ordinary rewrite).
//!
//! The outer headers are copied from the tunnel's template; per packet only
//! the lengths, the IPv4 ID and header checksum, the VXLAN source port /
//! NVGRE FlowID (from the inner flow hash, so the peer's fanout spreads the
//! flows of one tunnel, RFC 7348 §5 / RFC 7637 §3.2), the GRE sequence
//! number and the optional GRE / IPv6-UDP checksums are written. IP tunnels
//! carry the inner IP packet: the Ethernet header ip-rewrite pushed for the
//! point-to-point virtual port is removed first.
//!
//! Offloads: a TCP super-packet is encapsulated once and then cut with
//! [`gso::segment_with`] (the outer headers act as a template, outer
//! lengths, IDs and checksums fixed per segment), so every wire packet fits
//! the underlay MTU as long as the inner segments fit the tunnel MTU, which
//! ip-rewrite enforced (ICMP too-big / frag-needed, PMTU discovery) and SYN
//! MSS clamping keeps true. With GRE sequence numbers each segment needs
//! its own number, so such super-packets are segmented first and each
//! segment encapsulated. A packet that leaves whole keeps a partial inner
//! checksum for the egress port to finish ([`keeps_partial`]) unless an
//! outer GRE / UDP checksum covers the inner bytes, which must then be
//! final before encapsulation.
//!
//! A VXLAN super-packet's wire packets are not cut apart but packed into UDP
//! GSO datagrams ([`uso::pack`]): the kernel (or interface-output, for a
//! port without offloads) only copies the outer IP/UDP headers in front of
//! each, so the same packets reach the wire for a fraction of the
//! per-packet kernel work.
//!
//! Sequence numbers are counted per worker and tunnel: with several workers
//! sending into one `sequence = true` tunnel, the peer may see them out of
//! order (RFC 2890 §2.2 then drops); use one worker for such tunnels.

use super::tunnel_util::{clamp_mss, inner_ip};
use super::{pull, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_LEN};
use crate::graph::{flags, Ctx, Next, Node, NodeId};
use crate::offload::{csum, gso, tso, uso, OffloadError, OuterL4, OuterSpec, SegmentSpec};
use crate::tunnel::{flow_hash, Tunnel, TunnelKind, VXLAN_SPORT_BASE};
use packet::buffer::{Gso, Offload, Packet};

#[derive(Default)]
pub struct TunnelEncap {
    segs: Vec<Packet>,
    ip_id: u16,
    /// Per virtual port: next GRE sequence number to send.
    seq: Vec<u32>,
}

node_errors! {
    enum E {
        NoTunnel => "no-tunnel",
        NotIp => "not-ip",
        NoHeadroom => "no-headroom",
        SegmentationFailed => "segmentation-failed",
        ChecksumFailed => "checksum-failed",
        TooBig => "too-big",
        SegmentedSuperPackets => "segmented-super-packets",
        Segments => "segments",
        WholeSuperPackets => "whole-super-packets",
        UdpGsoDatagrams => "udp-gso-datagrams",
    }
}

const NEXT: &[NodeId] = &[NodeId::Ip4Lookup, NodeId::Ip6Lookup];

impl Node for TunnelEncap {
    fn name(&self) -> &'static str {
        "tunnel-encap"
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
            let Some((_, tun)) = tables.tunnels.at_port(p.meta.tx_port) else {
                next.drop(p, E::NoTunnel as u16);
                continue;
            };
            // The tunnel's own counters: what the overlay handed it (inner
            // bytes, as a Linux tunnel netdev counts), drops below.
            if let Some(c) = cx.port_counters(tun.port) {
                c.tx_packets.add(1);
                c.tx_bytes.add(p.len() as u64);
            }
            let eth = tun.def.ethernet;
            if !eth {
                // IP tunnel: only IP, without the point-to-point L2 header.
                let et = if p.len() >= ETH_LEN {
                    wire::ethernet::Frame::new_unchecked(p.data()).outer_ethertype()
                } else {
                    0
                };
                if !(et == ETHERTYPE_IPV4 || et == ETHERTYPE_IPV6) || !pull(&mut p, ETH_LEN) {
                    vdrop(cx, tun.port, next, p, E::NotIp as u16);
                    continue;
                }
            }
            let inner = inner_ip(p.data(), eth);
            let mtu = tables.iface(tun.port).map_or(0, |i| i.mtu);
            let hash = match inner {
                Some((l3, v6)) => {
                    clamp_mss(&mut p, l3, v6, mtu);
                    flow_hash(p.data(), l3)
                }
                None => 0,
            };
            if p.meta.trace {
                cx.trace.add(
                    "tunnel-encap",
                    format_args!(
                        "port {} {:?} len {} hash {hash:08x}",
                        tun.port,
                        tun.def.kind,
                        p.len()
                    ),
                );
            }
            if p.meta.offload.gso == Gso::None {
                if !keeps_partial(tun, &p) && csum::complete(&mut p).is_err() {
                    vdrop(cx, tun.port, next, p, E::ChecksumFailed as u16);
                    continue;
                }
                match self.encap(&mut p, tun, hash, true) {
                    Ok(()) => enqueue(next, p, tun),
                    Err(e) => vdrop(cx, tun.port, next, p, e as u16),
                }
                continue;
            }
            let inner_l3 = inner.map_or(0, |(l3, _)| l3);
            // A large-MTU underlay (veth/virtio between gateways) carries the
            // super-packet whole, or in as few pieces as it allows; the peer
            // hands it on as a super-packet again (offload::tso).
            if p.len().saturating_sub(inner_l3) <= mtu as usize {
                // One packet now: the partial checksum (pseudo-header over
                // the whole super-packet, Linux's convention) is kept for
                // the egress port to complete, or completed here when an
                // outer checksum must cover the final inner bytes.
                let o = p.meta.offload;
                p.meta.offload = Offload {
                    needs_csum: o.needs_csum,
                    csum_start: o.csum_start,
                    csum_offset: o.csum_offset,
                    ..Offload::default()
                };
                if !keeps_partial(tun, &p) && csum::complete(&mut p).is_err() {
                    vdrop(cx, tun.port, next, p, E::ChecksumFailed as u16);
                    continue;
                }
                next.count(E::WholeSuperPackets as u16, 1);
                match self.encap(&mut p, tun, hash, true) {
                    Ok(()) => enqueue(next, p, tun),
                    Err(e) => vdrop(cx, tun.port, next, p, e as u16),
                }
                continue;
            }
            let mss = big_mss(&p, inner_l3, mtu as usize);
            self.segs.clear();
            if tun.gre_seq_off().is_some() {
                // Segment first: every segment gets its own sequence number.
                let mut spec = SegmentSpec::plain(inner_l3);
                spec.mss = mss;
                if gso::segment_with(&p, &spec, &mut cx.pool, &mut self.segs).is_err() {
                    vdrop(cx, tun.port, next, p, E::SegmentationFailed as u16);
                    continue;
                }
                cx.pool.free(p);
                next.count(E::SegmentedSuperPackets as u16, 1);
                next.count(E::Segments as u16, self.segs.len() as u64);
                let mut segs = std::mem::take(&mut self.segs);
                for mut s in segs.drain(..) {
                    match self.encap(&mut s, tun, hash, true) {
                        Ok(()) => enqueue(next, s, tun),
                        Err(e) => vdrop(cx, tun.port, next, s, e as u16),
                    }
                }
                self.segs = segs;
                continue;
            }
            // Encapsulate once, then segment with the outer headers as a
            // template.
            let id = self.ip_id;
            if let Err(e) = self.encap(&mut p, tun, hash, false) {
                vdrop(cx, tun.port, next, p, e as u16);
                continue;
            }
            if tun.def.kind == TunnelKind::Vxlan {
                // UDP tunnel: the wire packets leave packed in UDP GSO
                // datagrams (offload::uso), one kernel send per ~64 KB.
                let spec = uso::PackSpec {
                    udp_offset: tun.l4_off,
                    inner_l3_offset: tun.tpl_len + inner_l3,
                    mss,
                };
                match uso::pack(&p, &spec, &mut cx.pool, &mut self.segs) {
                    Ok(n) => {
                        self.ip_id = id.wrapping_add(n as u16);
                        next.count(E::SegmentedSuperPackets as u16, 1);
                        next.count(E::Segments as u16, n as u64);
                        next.count(E::UdpGsoDatagrams as u16, self.segs.len() as u64);
                        cx.pool.free(p);
                        for s in self.segs.drain(..) {
                            enqueue(next, s, tun);
                        }
                        continue;
                    }
                    // Too few segments per datagram: cut them apart below.
                    Err(OffloadError::Unsupported) => {}
                    Err(_) => {
                        vdrop(cx, tun.port, next, p, E::SegmentationFailed as u16);
                        continue;
                    }
                }
            }
            let l4 = match tun.def.kind {
                TunnelKind::Vxlan => OuterL4::Udp { offset: tun.l4_off },
                _ => OuterL4::Gre { offset: tun.l4_off },
            };
            let spec = SegmentSpec {
                outer: Some(OuterSpec { l3_offset: 0, l4 }),
                inner_l3_offset: tun.tpl_len + inner_l3,
                mss,
                partial_csum: false,
            };
            match gso::segment_with(&p, &spec, &mut cx.pool, &mut self.segs) {
                Ok(n) => {
                    self.ip_id = id.wrapping_add(n as u16);
                    next.count(E::SegmentedSuperPackets as u16, 1);
                    next.count(E::Segments as u16, n as u64);
                    cx.pool.free(p);
                    for s in self.segs.drain(..) {
                        enqueue(next, s, tun);
                    }
                }
                Err(_) => vdrop(cx, tun.port, next, p, E::SegmentationFailed as u16),
            }
        }
    }
}

/// Segment size for a super-packet that does not fit the tunnel MTU whole:
/// the largest multiple of its `gso_size` that fits (so a large-MTU underlay
/// carries few, large pieces and the far side's segments equal the
/// sender's), or 0 (= `gso_size`) when that cannot be worked out.
pub(crate) fn big_mss(p: &Packet, inner_l3: usize, mtu: usize) -> u16 {
    let g = usize::from(p.meta.offload.gso_size);
    match tso::mss_for(p, inner_l3, mtu) {
        Ok(m) if g > 0 && m >= 2 * g => (m / g * g).min(usize::from(u16::MAX)) as u16,
        _ => 0,
    }
}

/// Whether a whole (unsegmented) packet keeps its partial inner checksum
/// through encapsulation: when no outer checksum covers the inner bytes
/// (GRE without the C bit, NVGRE, VXLAN over IPv4 with a zero UDP
/// checksum, RFC 7348 §5) and the offsets lie inside the packet. The
/// egress port then finishes it: the kernel or the NIC for a port with
/// offloads (a veth hands it on partial to the peer, which finishes it or
/// passes it to its host as is), interface-output for one without. Neither
/// gateway walks the payload for it: the encapsulating one does not sum it,
/// and a decapsulating vecgate that hands a super-packet on need not verify
/// a sum it would otherwise have to trust (offload::tso::mark).
fn keeps_partial(tun: &Tunnel, p: &Packet) -> bool {
    let o = p.meta.offload;
    let covered = tun.gre_csum_off().is_some() || (tun.v6 && tun.def.kind == TunnelKind::Vxlan);
    o.needs_csum
        && !covered
        && usize::from(o.csum_start) + usize::from(o.csum_offset) + 2 <= p.len()
}

/// Drops a packet the tunnel could not send, counted on the node (by
/// reason) and on the tunnel's virtual port.
#[inline]
fn vdrop(cx: &Ctx, port: u16, next: &mut Next<'_>, p: Packet, reason: u16) {
    if let Some(c) = cx.port_counters(port) {
        c.drops.add(1);
    }
    next.drop(p, reason);
}

#[inline]
fn enqueue(next: &mut Next<'_>, p: Packet, tun: &Tunnel) {
    let to = if tun.v6 {
        NodeId::Ip6Lookup
    } else {
        NodeId::Ip4Lookup
    };
    next.enqueue(to, p);
}

impl TunnelEncap {
    /// Prepends the outer headers. `full`: a plain packet, every field and
    /// checksum final; otherwise a super-packet whose lengths and checksums
    /// [`gso::segment_with`] fixes per segment.
    fn encap(&mut self, p: &mut Packet, tun: &Tunnel, hash: u32, full: bool) -> Result<(), E> {
        let n = tun.tpl_len;
        let inner_v6 = p.data().first().is_some_and(|b| b >> 4 == 6);
        let Some(h) = p.push_front(n) else {
            return Err(E::NoHeadroom);
        };
        h.copy_from_slice(&tun.template[..n]);
        let total = p.len();
        if full && total > if tun.v6 { 0xffff + 40 } else { 0xffff } {
            return Err(E::TooBig);
        }
        let l4 = tun.l4_off;
        let d = p.data_mut();
        // The template's outer IP header (20 or 40 bytes) is in place.
        if tun.v6 {
            wire::ipv6::Packet::new_unchecked(&mut d[..])
                .set_payload_len((total - 40).min(0xffff) as u16);
        } else {
            let mut ip = wire::ipv4::Packet::new_unchecked(&mut d[..]);
            ip.set_total_len(total.min(0xffff) as u16);
            ip.set_ident(self.ip_id);
            self.ip_id = self.ip_id.wrapping_add(1);
            ip.fill_checksum();
        }
        match tun.def.kind {
            TunnelKind::Gre => {
                // The template's GRE header: its flags say which of
                // checksum, key and sequence number follow (RFC 2784, 2890).
                let mut gre = wire::gre::Gre::new_unchecked(&mut d[l4..]);
                if !tun.def.ethernet {
                    let et = if inner_v6 {
                        ETHERTYPE_IPV6
                    } else {
                        ETHERTYPE_IPV4
                    };
                    gre.set_protocol_type(et);
                }
                if tun.gre_seq_off().is_some() {
                    let port = usize::from(tun.port);
                    if self.seq.len() <= port {
                        self.seq.resize(port + 1, 0);
                    }
                    gre.set_sequence_number(self.seq[port]);
                    self.seq[port] = self.seq[port].wrapping_add(1);
                }
                if tun.gre_csum_off().is_some() && full {
                    gre.fill_checksum();
                }
            }
            TunnelKind::Nvgre => crate::nvgre::set_flow_id(d, l4, hash),
            TunnelKind::Vxlan => {
                let sport = VXLAN_SPORT_BASE | (hash as u16 & 0x3fff);
                // The checksum is mandatory over IPv6 (RFC 8200 §8.1), zero
                // over IPv4 (RFC 7348 §5); a super-packet's is per segment.
                let v6_addrs = (tun.v6 && full).then(|| {
                    let ip = wire::ipv6::Packet::new_unchecked(&d[..]);
                    (ip.src_addr(), ip.dst_addr())
                });
                let mut udp = wire::udp::Packet::new_unchecked(&mut d[l4..]);
                udp.set_src_port(sport);
                udp.set_len((total - l4).min(0xffff) as u16);
                udp.set_checksum(0);
                if let Some((src, dst)) = v6_addrs {
                    // Full: total - l4 fits the length field it sums.
                    udp.fill_checksum_v6(&src, &dst);
                }
            }
        }
        p.meta.vrf = tun.underlay_vrf;
        p.meta.flags = flags::LOCAL;
        p.meta.l3_offset = 0;
        if full {
            // A partial inner checksum left for the egress port moves
            // behind the outer headers; anything else is final.
            let o = p.meta.offload;
            p.meta.offload = Offload::default();
            if o.needs_csum {
                p.meta.offload.needs_csum = true;
                p.meta.offload.csum_start = o.csum_start.saturating_add(n as u16);
                p.meta.offload.csum_offset = o.csum_offset;
            }
        }
        Ok(())
    }
}
