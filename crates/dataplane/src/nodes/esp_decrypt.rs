//! esp-decrypt: ESP packets addressed to the gateway (IP protocol 50, or
//! UDP port 4500 for NAT traversal, RFC 3948) are authenticated, replay
//! checked and decrypted (RFC 4303 §3.4) and the inner packet is delivered
//! to ip4/ip6-input in the tunnel's overlay VRF, as if it had arrived on the
//! tunnel's virtual port.
//!
//! ip-local hands packets here with the outer IP header still in front and
//! `meta.aux` = offset of the ESP header, or of the UDP header with
//! [`AUX_UDP`] set. UDP 4500 payloads are classified (RFC 3948 §2.2, with
//! `wire::esp::UdpEncap`): ESP goes on, an IKE message (non-ESP marker) is
//! counted as "ike-to-control-plane" and dropped until the IKE daemon takes
//! them, a NAT-keepalive is counted and dropped.
//!
//! An SA is used only where its tunnel lives: a packet whose SPI is known
//! but that arrived in another VRF, at another of our addresses or (without
//! NAT-T) from another source is dropped as "wrong-underlay" before any
//! crypto: an SPI is visible on the wire and RFC 4301 §4.1 lets the SAD
//! find unicast SAs by SPI alone, so which underlay may use an SA is ours
//! to check (a tenant must not reach the underlay's SAs).
//!
//! The whole vector goes to the SAD in one call (`InboundSad::decrypt`):
//! it looks SAs up in one snapshot, decrypts runs of one SA as a batch and
//! locks each replay window once per run. Failures are counted by the
//! crypto's reason names ([`EspError::NAMES`]). An authentic packet whose
//! inner source is outside the tunnel's selectors is dropped as
//! "policy-mismatch" (RFC 4301 §5.2: the inbound SPD check after
//! decryption). Delivered packets carry `flags::DECAP`, so TCP segments are
//! coalesced (RSC) on the way to the host as for the overlays.
//!
//! A peer's ESP-in-UDP packets that arrive as one UDP GSO datagram (a
//! vecgate peer sends a super-packet's segments that way, and over veth
//! the datagram arrives whole) are opened where they lie, slice by slice
//! ("datagrams-opened"), with the same checks and counters as single
//! packets; when all are authentic and carry consecutive TCP segments of
//! one flow, they are merged in the same buffer into the super-packet they
//! were cut from ("datagrams-merged"), else each inner packet is copied
//! out and delivered alone.

use super::pull;
use super::tunnel_util::clamp_mss;
use crate::esp::EspTunnel;
use crate::graph::{flags, Ctx, Next, Node, NodeId};
use crate::offload::uso;
use packet::buffer::{Gso, Offload, Packet};
use std::net::IpAddr;
use std::ops::Range;
use vecgate_ipsec::{EspError, InboundSad, RxOk, RxSlice};
use wire::esp::UdpEncap;
use wire::{ipv4, ipv6};

/// Bit of `meta.aux` (set by ip-local): the offset is that of a UDP header
/// (NAT-T), not of the ESP header.
pub const AUX_UDP: u32 = 1 << 31;

node_errors! {
    /// Reasons after the crypto's.
    enum E after EspError {
        NoSad => "no-sad",
        BadOffset => "bad-offset",
        IkeToControlPlane => "ike-to-control-plane",
        NatKeepalive => "nat-keepalive",
        BadUdpEncap => "bad-udp-encap",
        NoTunnel => "no-tunnel",
        Decrypted => "decrypted",
        /// UDP GSO datagrams of ESP packets opened where they lie.
        DatagramsOpened => "datagrams-opened",
        /// Of those: delivered as one TCP super-packet.
        DatagramsMerged => "datagrams-merged",
        /// An inner packet of a datagram that could not be merged found
        /// no buffer of its own.
        NoBuffers => "no-buffers",
    }
}

const NEXT: &[NodeId] = &[NodeId::Ip4Input, NodeId::Ip6Input];

#[derive(Default)]
pub struct EspDecrypt {
    batch: Vec<Packet>,
    /// Per packet of `batch`: where it arrived (VRF index, outer source,
    /// outer destination), for the underlay check.
    outer: Vec<(u16, IpAddr, IpAddr)>,
    out: Vec<Result<RxOk, EspError>>,
    /// A datagram's ESP slices, their results, their inner packets.
    slices: Vec<Range<usize>>,
    opened: Vec<Result<RxSlice, EspError>>,
    inner: Vec<Range<usize>>,
}

impl Node for EspDecrypt {
    fn name(&self) -> &'static str {
        "esp-decrypt"
    }
    fn error_names(&self) -> &'static [&'static str] {
        &ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        let tables = cx.tables.clone();
        let Some(sad) = tables.esp.sad.as_ref() else {
            for p in input.drain(..) {
                next.drop(p, E::NoSad as u16);
            }
            return;
        };
        for mut p in input.drain(..) {
            let off = (p.meta.aux & 0xffff) as usize;
            let udp = p.meta.aux & AUX_UDP != 0;
            let start = if udp { off + 8 } else { off };
            if start > p.len() {
                next.drop(p, E::BadOffset as u16);
                continue;
            }
            let gso = p.meta.offload.gso == Gso::UdpL4;
            if udp && !gso {
                match UdpEncap::classify(&p.data()[start..]) {
                    UdpEncap::Esp => {}
                    UdpEncap::Ike => {
                        next.drop(p, E::IkeToControlPlane as u16);
                        continue;
                    }
                    UdpEncap::Keepalive => {
                        next.drop(p, E::NatKeepalive as u16);
                        continue;
                    }
                    UdpEncap::Invalid => {
                        next.drop(p, E::BadUdpEncap as u16);
                        continue;
                    }
                }
            }
            let d = p.data();
            let outer = match (d.first().map(|b| b >> 4), d.len()) {
                (Some(4), n) if n >= 20 => {
                    let h = ipv4::Packet::new_unchecked(d);
                    (h.src_addr().into(), h.dst_addr().into())
                }
                (Some(6), n) if n >= 40 => {
                    let h = ipv6::Packet::new_unchecked(d);
                    (h.src_addr().into(), h.dst_addr().into())
                }
                _ => {
                    next.drop(p, E::BadOffset as u16);
                    continue;
                }
            };
            if gso && udp {
                // What arrived before it is delivered before it.
                self.run_batch(cx, sad, next);
                let vrf = p.meta.vrf;
                self.datagram(cx, sad, p, start, (vrf, outer.0, outer.1), next);
                continue;
            }
            if !pull(&mut p, start) {
                next.drop(p, E::BadOffset as u16);
                continue;
            }
            self.outer.push((p.meta.vrf, outer.0, outer.1));
            self.batch.push(p);
        }
        self.run_batch(cx, sad, next);
    }
}

impl EspDecrypt {
    /// Decrypts the collected single packets as one vector and delivers
    /// the authentic ones.
    fn run_batch(&mut self, cx: &mut Ctx, sad: &InboundSad, next: &mut Next<'_>) {
        if self.batch.is_empty() {
            return;
        }
        let tables = cx.tables.clone();
        self.out.clear();
        self.out.resize(self.batch.len(), Err(EspError::Crypto));
        let outer = &self.outer;
        sad.decrypt_admitted(&mut self.batch, &mut self.out, |i, id| {
            let Some(&(vrf, src, dst)) = outer.get(i) else {
                return false;
            };
            tables
                .esp
                .by_id(id)
                .is_some_and(|t| t.accepts_outer(vrf, src, dst))
        });
        self.outer.clear();
        let mut ok = 0u64;
        for (p, r) in self.batch.drain(..).zip(self.out.iter()) {
            let rx = match r {
                Ok(rx) => *rx,
                Err(e) => {
                    next.drop(p, e.index());
                    continue;
                }
            };
            let Some(tun) = tables.esp.by_id(rx.tunnel) else {
                next.drop(p, E::NoTunnel as u16);
                continue;
            };
            if !inner_allowed(tun, p.data(), rx.inner_v6) {
                next.drop(p, EspError::PolicyMismatch.index());
                continue;
            }
            ok += 1;
            deliver(cx, next, p, tun, rx.inner_v6, Offload::default());
        }
        next.count(E::Decrypted as u16, ok);
    }

    /// A UDP GSO datagram whose slices are ESP packets of one SPI (ip-local
    /// checked: [`super::ip_local`]'s udp_gso) is opened slice by slice
    /// where it lies ([`InboundSad::open_slices`]), with no copy into
    /// packets of their own; when the inner packets are consecutive TCP
    /// segments of one flow they become one super-packet in the same
    /// buffer ([`uso::merge_inner`]), else each is copied out and
    /// delivered alone. `start`: offset of the first slice.
    fn datagram(
        &mut self,
        cx: &mut Ctx,
        sad: &InboundSad,
        mut p: Packet,
        start: usize,
        (vrf, src, dst): (u16, IpAddr, IpAddr),
        next: &mut Next<'_>,
    ) {
        let tables = cx.tables.clone();
        let slice = usize::from(p.meta.offload.gso_size).max(1);
        let total = p.len();
        self.slices.clear();
        self.slices.extend(
            (start..total)
                .step_by(slice)
                .map(|a| a..(a + slice).min(total)),
        );
        self.opened.clear();
        self.opened.resize(self.slices.len(), Err(EspError::Crypto));
        sad.open_slices(p.data_mut(), &self.slices, &mut self.opened, |id| {
            tables
                .esp
                .by_id(id)
                .is_some_and(|t| t.accepts_outer(vrf, src, dst))
        });
        next.count(E::DatagramsOpened as u16, 1);
        if p.meta.trace {
            cx.trace.add(
                "esp-decrypt",
                format_args!("udp gso datagram, {} slices", self.slices.len()),
            );
        }
        // Refusals are counted per slice, by reason.
        let mut ok = 0u64;
        let mut tunnel = None;
        self.inner.clear();
        for r in &self.opened {
            match r {
                Ok(rx) => {
                    ok += 1;
                    tunnel = Some((rx.tunnel, rx.inner_v6));
                    self.inner.push(rx.inner.clone());
                }
                Err(e) => next.count(e.index(), 1),
            }
        }
        let Some((id, _)) = tunnel else {
            cx.pool.free(p);
            return;
        };
        let Some(tun) = tables.esp.by_id(id) else {
            next.count(E::NoTunnel as u16, ok);
            cx.pool.free(p);
            return;
        };
        // All authentic and one flow: one super-packet, in place.
        if ok as usize == self.slices.len() && uso::merge_inner(&mut p, &self.inner).is_ok() {
            let v6 = p.data().first().map(|b| b >> 4) == Some(6);
            if !inner_allowed(tun, p.data(), v6) {
                next.count(EspError::PolicyMismatch.index(), ok);
                cx.pool.free(p);
                return;
            }
            next.count(E::Decrypted as u16, ok);
            next.count(E::DatagramsMerged as u16, 1);
            let o = p.meta.offload;
            deliver(cx, next, p, tun, v6, o);
            return;
        }
        // Each authentic inner packet on its own.
        let mut delivered = 0u64;
        for r in self.opened.iter().flatten() {
            let Some(bytes) = p.data().get(r.inner.clone()) else {
                continue;
            };
            if !inner_allowed(tun, bytes, r.inner_v6) {
                next.count(EspError::PolicyMismatch.index(), 1);
                continue;
            }
            let Some(mut q) = cx.pool.alloc_for(bytes.len()) else {
                next.count(E::NoBuffers as u16, 1);
                continue;
            };
            if !q.set_data(bytes) {
                cx.pool.free(q);
                next.count(E::NoBuffers as u16, 1);
                continue;
            }
            q.meta = p.meta;
            delivered += 1;
            deliver(cx, next, q, tun, r.inner_v6, Offload::default());
        }
        next.count(E::Decrypted as u16, delivered);
        cx.pool.free(p);
    }
}

/// RFC 4301 §5.2 by the tunnel's configured traffic: the inner source
/// must be one the peer may send from (the crypto checked the inner
/// header's version and minimum length against the next header).
fn inner_allowed(tun: &EspTunnel, d: &[u8], v6: bool) -> bool {
    let src: Option<IpAddr> = match (v6, d.len()) {
        (false, n) if n >= 20 => Some(ipv4::Packet::new_unchecked(d).src_addr().into()),
        (true, n) if n >= 40 => Some(ipv6::Packet::new_unchecked(d).src_addr().into()),
        _ => None,
    };
    src.is_some_and(|s| tun.allows(s))
}

/// Hands the inner packet to the overlay as received on the tunnel's
/// virtual port; nothing of the underlay (VRF, port, offload state, flags)
/// survives but the trace mark.
fn deliver(
    cx: &mut Ctx,
    next: &mut Next<'_>,
    mut p: Packet,
    tun: &EspTunnel,
    v6: bool,
    offload: Offload,
) {
    let (vrf, mtu) = cx.tables.iface(tun.port).map_or((0, 0), |i| (i.vrf, i.mtu));
    if let Some(c) = cx.port_counters(tun.port) {
        c.rx_packets.add(1);
        c.rx_bytes.add(p.len() as u64);
    }
    if p.meta.trace {
        cx.trace.add(
            "esp-decrypt",
            format_args!("port {} len {} v6 {v6}", tun.port, p.len()),
        );
    }
    p.meta.rx_port = tun.port;
    p.meta.tx_port = tun.port;
    p.meta.vrf = vrf;
    p.meta.flags = flags::DECAP;
    // Default, or the merged super-packet's (partial checksum, MSS).
    p.meta.offload = offload;
    p.meta.l3_offset = 0;
    p.meta.aux = 0;
    p.meta.adj = 0;
    clamp_mss(&mut p, 0, v6, mtu);
    next.enqueue(
        if v6 {
            NodeId::Ip6Input
        } else {
            NodeId::Ip4Input
        },
        p,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_reasons_follow_the_crypto_reasons() {
        assert_eq!(
            ERRORS[EspError::PolicyMismatch.index() as usize],
            "policy-mismatch"
        );
        assert_eq!(ERRORS[E::NoTunnel as usize], "no-tunnel");
        assert_eq!(ERRORS.len(), E::NoBuffers as usize + 1);
    }
}
