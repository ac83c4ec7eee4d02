//! ip-local's Neighbor Discovery receive side (RFC 4861): a Neighbor
//! Solicitation for one of our addresses is answered with an
//! advertisement, an advertisement updates the neighbour table.

use super::{reply_meta, IpLocal, E, R};
use crate::graph::{flags, Ctx, Next, NodeId};
use crate::neighbour::packets::{na_reply, NA_OVERRIDE, NA_SOLICITED};
use crate::neighbour::Learn;
use crate::nodes::{push_eth, send_released, ETHERTYPE_IPV6};
use crate::tables::multicast_mac_v6;
use packet::buffer::Packet;
use std::net::{IpAddr, Ipv6Addr};
use wire::icmpv6;

const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

impl IpLocal {
    /// Neighbor Solicitation (RFC 4861 §7.1.1 validation, §7.2.3-4 answer).
    pub(super) fn ns(
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
        let target = icmpv6::Packet::new_unchecked(icmp).target_addr();
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
            // Only an on-link source creates an entry.
            let how = if ifc.on_link(IpAddr::V6(src)) {
                Learn::Unconfirmed
            } else {
                Learn::UpdateOnly
            };
            cx.learn(port, IpAddr::V6(src), mac, how, &mut self.released);
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
    pub(super) fn na(
        &mut self,
        cx: &mut Ctx,
        p: Packet,
        next: &mut Next<'_>,
        off: usize,
        hlim: u8,
    ) -> R {
        let d = p.data();
        let icmp = &d[off..];
        if hlim != 255 || icmp[1] != 0 || icmp.len() < 24 {
            return Err((p, E::NdInvalid));
        }
        let target = icmpv6::Packet::new_unchecked(icmp).target_addr();
        let fl = icmp[4];
        if target.is_multicast() {
            return Err((p, E::NdInvalid));
        }
        let Ok(tlla) = ll_option(&icmp[24..], 2) else {
            return Err((p, E::NdInvalid));
        };
        let port = p.meta.rx_port;
        let on_link = cx
            .tables
            .iface(port)
            .is_some_and(|i| i.on_link(IpAddr::V6(target)));
        if let Some(mac) = tlla {
            // §7.2.5: an NA creates nothing; only the answer to an NS we
            // sent completes (or creates, on the worker it was hashed to)
            // an entry.
            let how = if fl & NA_SOLICITED != 0
                && on_link
                && cx.solicited.contains(port, IpAddr::V6(target))
            {
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
