//! Netlink to learned routes: `RTM_NEWROUTE` / `RTM_DELROUTE` parsed
//! with netlink-packet-route, `RTM_NEWNEXTHOP` / `RTM_DELNEXTHOP` (which
//! it does not model yet) walked with netlink-packet-core's bounds-checked
//! attribute iterator, both applied to the [`Rib`].

use super::rib::{Entry, Hops, NhObj, Rib};
use super::stats::{Failure, FpmStats, Limited};
use super::MAX_GROUP_MEMBERS;
use crate::learned::Hop;
use dataplane::fib::Prefix;
use netlink_packet_core::{NetlinkBuffer, NetlinkMessage, NetlinkPayload, NlaBuffer, NlasIterator};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteProtocol, RouteType, RouteVia,
};
use netlink_packet_route::RouteNetlinkMessage;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;

pub(super) const RTM_NEWROUTE: u16 = 24;
pub(super) const RTM_DELROUTE: u16 = 25;
pub(super) const RTM_NEWNEXTHOP: u16 = 104;
pub(super) const RTM_DELNEXTHOP: u16 = 105;
pub(super) const NHA_ID: u16 = 1;
pub(super) const NHA_GROUP: u16 = 2;
pub(super) const NHA_BLACKHOLE: u16 = 4;
pub(super) const NHA_GATEWAY: u16 = 6;
pub(super) const AF_INET: u8 = 2;
pub(super) const AF_INET6: u8 = 10;

impl Rib {
    pub(super) fn apply(&mut self, msg: &[u8], stats: &FpmStats, log: &mut Limited) {
        let kind = match NetlinkBuffer::new_checked(msg) {
            Ok(b) => b.message_type(),
            Err(_) => {
                stats.fail(Failure::Malformed);
                return;
            }
        };
        match kind {
            RTM_NEWROUTE | RTM_DELROUTE => {
                match NetlinkMessage::<RouteNetlinkMessage>::deserialize(msg) {
                    Ok(NetlinkMessage {
                        payload: NetlinkPayload::InnerMessage(m),
                        ..
                    }) => match m {
                        RouteNetlinkMessage::NewRoute(r) => {
                            stats.route_adds.fetch_add(1, Ordering::Relaxed);
                            self.route(&r, true, stats, log);
                        }
                        RouteNetlinkMessage::DelRoute(r) => {
                            stats.route_dels.fetch_add(1, Ordering::Relaxed);
                            self.route(&r, false, stats, log);
                        }
                        _ => {
                            stats.ignored.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                    Ok(_) => {
                        stats.ignored.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        stats.fail(Failure::Malformed);
                        log.warn(|| format!("a route message does not parse: {e}"));
                    }
                }
            }
            RTM_NEWNEXTHOP | RTM_DELNEXTHOP => {
                let new = kind == RTM_NEWNEXTHOP;
                if new {
                    stats.nexthop_adds.fetch_add(1, Ordering::Relaxed);
                } else {
                    stats.nexthop_dels.fetch_add(1, Ordering::Relaxed);
                }
                match parse_nexthop(msg) {
                    Some((id, obj)) => self.nexthop(id, obj, new, stats, log),
                    None => {
                        stats.fail(Failure::Malformed);
                        log.warn(|| "a next-hop message does not parse".to_owned());
                    }
                }
            }
            _ => {
                stats.ignored.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(super) fn nexthop(
        &mut self,
        id: u32,
        obj: Option<NhObj>,
        new: bool,
        stats: &FpmStats,
        log: &mut Limited,
    ) {
        if !new {
            self.nexthops.remove(&id);
            return;
        }
        let Some(obj) = obj else {
            stats.fail(Failure::NexthopLimit);
            log.warn(|| format!("next-hop object {id}: group above {MAX_GROUP_MEMBERS} members"));
            return;
        };
        let limit = self.settings.max_nexthop_groups as usize;
        if !self.nexthops.contains_key(&id) && self.nexthops.len() >= limit {
            stats.fail(Failure::NexthopLimit);
            log.warn(|| format!("next-hop object {id}: max_nexthop_groups ({limit}) reached"));
            return;
        }
        if self.nexthops.insert(id, obj.clone()) != Some(obj) {
            // Routes using it change with it: a full build.
            self.dirty = true;
            self.full = true;
        }
    }

    pub(super) fn route(
        &mut self,
        r: &RouteMessage,
        new: bool,
        stats: &FpmStats,
        log: &mut Limited,
    ) {
        let h = &r.header;
        let mut table = u32::from(h.table);
        let mut dst: Option<IpAddr> = None;
        let mut gateway: Option<IpAddr> = None;
        let mut oif = false;
        let mut nh_id: Option<u32> = None;
        let mut multipath: Vec<Option<IpAddr>> = Vec::new();
        for a in &r.attributes {
            match a {
                RouteAttribute::Table(t) => table = *t,
                RouteAttribute::Destination(d) => dst = addr(d),
                RouteAttribute::Gateway(g) => gateway = addr(g),
                RouteAttribute::Via(RouteVia::Inet(a)) => gateway = Some(IpAddr::V4(*a)),
                RouteAttribute::Via(RouteVia::Inet6(a)) => gateway = Some(IpAddr::V6(*a)),
                RouteAttribute::Oif(_) => oif = true,
                RouteAttribute::NhId(id) => nh_id = Some(*id),
                RouteAttribute::MultiPath(hops) => {
                    for nh in hops.iter().take(MAX_GROUP_MEMBERS) {
                        multipath.push(nh.attributes.iter().find_map(|a| match a {
                            RouteAttribute::Gateway(g) => addr(g),
                            RouteAttribute::Via(RouteVia::Inet(a)) => Some(IpAddr::V4(*a)),
                            RouteAttribute::Via(RouteVia::Inet6(a)) => Some(IpAddr::V6(*a)),
                            _ => None,
                        }));
                    }
                }
                _ => {}
            }
        }
        let family_addr = match u8::from(h.address_family) {
            AF_INET => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            AF_INET6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            _ => {
                stats.ignored.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let dst = dst.unwrap_or(family_addr);
        let Ok(prefix) = Prefix::new(dst, h.destination_prefix_length) else {
            stats.fail(Failure::Malformed);
            return;
        };
        let prefix = prefix.network();
        let protocol = u8::from(h.protocol);
        // zebra's own host: its interfaces' subnets and kernel routes.
        if matches!(h.protocol, RouteProtocol::Kernel | RouteProtocol::Boot) {
            stats.ignored.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(slot) = self.table_vrf.get(&table).copied().or(self.any_table) else {
            if new {
                stats.fail(Failure::UnmappedTable);
                log.warn(|| {
                    format!("{prefix}: table {table} is mapped to no VRF ([[routing.table]])")
                });
            }
            return;
        };
        if !new {
            self.remove(slot, prefix);
            return;
        }
        let special = match h.kind {
            RouteType::Unicast => None,
            RouteType::BlackHole => Some(Hop::Blackhole),
            RouteType::Unreachable | RouteType::Prohibit => Some(Hop::Unreachable),
            _ => {
                stats.fail(Failure::UnsupportedType);
                log.warn(|| format!("{prefix}: route type {:?} is not forwarded", h.kind));
                return;
            }
        };
        let hops = if let Some(s) = special {
            Hops::Inline(self.intern(vec![s]))
        } else if let Some(id) = nh_id {
            match self.resolve(&Hops::Object(id)) {
                Ok(_) => Hops::Object(id),
                Err(f) => {
                    stats.fail(f);
                    log.warn(|| format!("{prefix}: next-hop object {id}: {}", f.as_str()));
                    self.remove(slot, prefix);
                    return;
                }
            }
        } else if !multipath.is_empty() {
            let mut v: Vec<Hop> = Vec::new();
            for g in multipath.into_iter().flatten() {
                if !v.contains(&Hop::Via(g)) {
                    v.push(Hop::Via(g));
                }
            }
            if v.is_empty() {
                stats.fail(Failure::NoGateway);
                log.warn(|| format!("{prefix}: no next hop has a gateway"));
                self.remove(slot, prefix);
                return;
            }
            Hops::Inline(self.intern(v))
        } else if let Some(g) = gateway {
            Hops::Inline(self.intern(vec![Hop::Via(g)]))
        } else {
            stats.fail(Failure::NoGateway);
            log.warn(|| {
                format!(
                    "{prefix}: {} (an interface of zebra's host)",
                    if oif {
                        "only an outgoing interface"
                    } else {
                        "no next hop"
                    }
                )
            });
            self.remove(slot, prefix);
            return;
        };
        let max = self.settings.max_routes as usize;
        let epoch = self.epoch;
        let Some((vrf, routes)) = self.vrfs.get_mut(slot) else {
            return;
        };
        if !routes.contains_key(&prefix) && routes.len() >= max {
            stats.fail(Failure::VrfFull);
            let vrf = vrf.clone();
            log.warn(|| format!("{prefix}: vrf {vrf} holds max_routes ({max}) learned routes"));
            return;
        }
        routes.insert(
            prefix,
            Entry {
                hops,
                protocol,
                epoch,
            },
        );
        self.touch(slot, prefix);
    }
}

fn addr(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(a) => Some(IpAddr::V4(*a)),
        RouteAddress::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

/// An `RTM_NEWNEXTHOP` / `RTM_DELNEXTHOP` message (netlink-packet-route has
/// no next-hop objects yet: the header is `struct nhmsg`, 8 bytes, then
/// attributes walked with netlink-packet-core's bounds-checked iterator).
/// Returns the id and the object (`None`: a group above
/// [`MAX_GROUP_MEMBERS`]).
fn parse_nexthop(msg: &[u8]) -> Option<(u32, Option<NhObj>)> {
    let nl = NetlinkBuffer::new_checked(msg).ok()?;
    let body = nl.payload();
    let family = *body.first()?;
    let attrs = body.get(8..)?;
    let mut id = None;
    let mut obj = NhObj::OifOnly;
    for nla in NlasIterator::new(attrs) {
        let nla: NlaBuffer<&[u8]> = nla.ok()?;
        let v = nla.value();
        match nla.kind() {
            NHA_ID => id = Some(u32::from_ne_bytes(v.get(..4)?.try_into().ok()?)),
            NHA_BLACKHOLE => obj = NhObj::Blackhole,
            NHA_GATEWAY => {
                obj = NhObj::Gateway(match (family, v.len()) {
                    (AF_INET, 4) | (_, 4) => {
                        IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(v).ok()?))
                    }
                    (_, 16) => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(v).ok()?)),
                    _ => return None,
                })
            }
            NHA_GROUP => {
                // struct nexthop_grp { u32 id; u8 weight; u8, u16 reserved }
                if v.len() / 8 > MAX_GROUP_MEMBERS {
                    return Some((id?, None));
                }
                obj = NhObj::Group(
                    v.chunks_exact(8)
                        .filter_map(|c| c.get(..4)?.try_into().ok().map(u32::from_ne_bytes))
                        .collect(),
                );
            }
            _ => {}
        }
    }
    Some((id?, Some(obj)))
}

/// One frame's netlink messages (usually one; aligned to 4 bytes).
pub(super) fn apply_netlink(mut data: &[u8], rib: &mut Rib, stats: &FpmStats, log: &mut Limited) {
    while data.len() >= 16 {
        let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        if len < 16 || len > data.len() {
            stats.fail(Failure::Malformed);
            return;
        }
        rib.apply(&data[..len], stats, log);
        let next = (len + 3) & !3;
        data = data.get(next..).unwrap_or(&[]);
    }
}
