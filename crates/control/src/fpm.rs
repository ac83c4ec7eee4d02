//! FPM server: FRR's zebra (`-M dplane_fpm_nl`) connects and streams the
//! routes it selected, as netlink messages in FPM frames (FRR
//! `doc/developer/fpm.rst`: u8 version 1, u8 type 1 = netlink, u16
//! big-endian length including this 4-byte header).
//!
//! What arrives: `RTM_NEWNEXTHOP` / `RTM_DELNEXTHOP` (next-hop objects and
//! groups, sent before the routes that use them), then `RTM_NEWROUTE` /
//! `RTM_DELROUTE` that name their next hops inline (`RTA_GATEWAY`,
//! `RTA_MULTIPATH`) or by id (`RTA_NH_ID`). Routes go into the VRF their
//! table id is mapped to (`[[routing.table]]`), through
//! [`Control::set_learned`]: the same build-and-publish the REST API's
//! route changes use. Many messages make one publish: the tables are
//! rebuilt at most every [`MIN_PUBLISH_GAP`] (or twice the last build's
//! time), and at once when zebra pauses.
//!
//! On every connect zebra replays its whole RIB: the routes vecgate had
//! are marked stale, the replay refreshes what still exists, and the rest
//! is swept once the stream has been quiet for [`REPLAY_QUIET`]. When zebra
//! goes away its routes stay until it comes back and replays (as the
//! kernel keeps zebra's routes when zebra dies).
//!
//! Everything read is bounded: a frame is at most 65535 bytes by its
//! format, a VRF holds at most `max_routes` learned routes, zebra at most
//! `max_nexthop_groups` next-hop objects, a group at most
//! [`MAX_GROUP_MEMBERS`] members. What cannot be installed is counted by
//! reason ([`FpmStats`]) and logged, at most [`LOG_PER_SECOND`] lines a
//! second.

use crate::learned::{Hop, Learned, LearnedRoute};
use crate::state::Control;
use dataplane::fib::Prefix;
use netlink_packet_core::{NetlinkBuffer, NetlinkMessage, NetlinkPayload, NlaBuffer, NlasIterator};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteProtocol, RouteType, RouteVia,
};
use netlink_packet_route::RouteNetlinkMessage;
use std::collections::{HashMap, HashSet};
use std::io::{ErrorKind, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// At least this long between two table publishes while messages stream.
pub const MIN_PUBLISH_GAP: Duration = Duration::from_millis(20);
/// After a connect, the replay is over once the stream is quiet this long.
pub const REPLAY_QUIET: Duration = Duration::from_millis(1500);
/// Most distinct gateways for which a publish still patches the FIB
/// instead of rebuilding it (see `Rib::take_changes`).
pub const MAX_PATCH_GATEWAYS: usize = 1024;
/// Most members of one next-hop group.
pub const MAX_GROUP_MEMBERS: usize = 256;
/// Most install-failure log lines a second (the rest are counted).
pub const LOG_PER_SECOND: u32 = 10;
/// How long one read waits (also the pace of publish/sweep checks).
const TICK: Duration = Duration::from_millis(10);
/// Receive buffer: a few frames of the largest size.
const BUF: usize = 256 << 10;
const FPM_VERSION: u8 = 1;
const FPM_NETLINK: u8 = 1;
const RTM_NEWROUTE: u16 = 24;
const RTM_DELROUTE: u16 = 25;
const RTM_NEWNEXTHOP: u16 = 104;
const RTM_DELNEXTHOP: u16 = 105;
const NHA_ID: u16 = 1;
const NHA_GROUP: u16 = 2;
const NHA_BLACKHOLE: u16 = 4;
const NHA_GATEWAY: u16 = 6;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// Why a learned route was not installed (metric label `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Its table id is mapped to no VRF.
    UnmappedTable,
    /// Its next hop names an interface of zebra's host only, no gateway.
    NoGateway,
    /// `RTA_NH_ID` names no next-hop object zebra sent.
    UnknownNexthop,
    /// None of its gateways resolves through the VRF's routes.
    Unresolved,
    /// The VRF holds `max_routes` learned routes already.
    VrfFull,
    /// A route type other than unicast, blackhole, unreachable, prohibit.
    UnsupportedType,
    /// A next-hop object refused: `max_nexthop_groups` reached, or a group
    /// too large.
    NexthopLimit,
    /// A message that does not parse.
    Malformed,
}

impl Failure {
    pub const ALL: [Failure; 8] = [
        Failure::UnmappedTable,
        Failure::NoGateway,
        Failure::UnknownNexthop,
        Failure::Unresolved,
        Failure::VrfFull,
        Failure::UnsupportedType,
        Failure::NexthopLimit,
        Failure::Malformed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Failure::UnmappedTable => "unmapped-table",
            Failure::NoGateway => "no-gateway",
            Failure::UnknownNexthop => "unknown-nexthop",
            Failure::Unresolved => "unresolved",
            Failure::VrfFull => "vrf-full",
            Failure::UnsupportedType => "unsupported-type",
            Failure::NexthopLimit => "nexthop-limit",
            Failure::Malformed => "malformed",
        }
    }
}

/// Counters of the FPM server (read by `/metrics`).
#[derive(Default, Debug)]
pub struct FpmStats {
    pub connections: AtomicU64,
    pub connected: AtomicU64,
    pub frames: AtomicU64,
    pub route_adds: AtomicU64,
    pub route_dels: AtomicU64,
    pub nexthop_adds: AtomicU64,
    pub nexthop_dels: AtomicU64,
    /// Messages of other types, and zebra's own host routes (protocol
    /// kernel: its interfaces' subnets), which are not ours to install.
    pub ignored: AtomicU64,
    pub publishes: AtomicU64,
    /// Publishes that patched the changed VRFs' FIBs (the others rebuilt
    /// every table).
    pub patches: AtomicU64,
    /// Microseconds from the arrival of the oldest change a publish
    /// carried to that publish: the last one, and the largest.
    pub last_delay_us: AtomicU64,
    pub max_delay_us: AtomicU64,
    /// Stale routes removed after a replay.
    pub swept: AtomicU64,
    failures: [AtomicU64; 8],
}

impl FpmStats {
    pub fn fail(&self, f: Failure) {
        if let Some(c) = Failure::ALL
            .iter()
            .position(|x| *x == f)
            .and_then(|i| self.failures.get(i))
        {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn record_delay(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.last_delay_us.store(us, Ordering::Relaxed);
        self.max_delay_us.fetch_max(us, Ordering::Relaxed);
    }

    pub fn failures(&self) -> Vec<(Failure, u64)> {
        Failure::ALL
            .iter()
            .zip(&self.failures)
            .map(|(f, c)| (*f, c.load(Ordering::Relaxed)))
            .collect()
    }
}

/// What the FPM server is told by the configuration.
#[derive(Clone, Debug)]
pub struct FpmSettings {
    /// Kernel table id → VRF name.
    pub tables: Vec<(u32, String)>,
    pub max_routes: u32,
    pub max_nexthop_groups: u32,
}

impl FpmSettings {
    pub fn from_config(r: &vecgate_config::Routing) -> Self {
        FpmSettings {
            tables: r.table_map().into_iter().map(|t| (t.id, t.vrf)).collect(),
            max_routes: r.max_routes,
            max_nexthop_groups: r.max_nexthop_groups,
        }
    }
}

/// Log lines limited to [`LOG_PER_SECOND`]; the rest counted and summed up.
struct Limited {
    window: Instant,
    lines: u32,
    suppressed: u64,
}

impl Limited {
    fn new() -> Self {
        Limited {
            window: Instant::now(),
            lines: 0,
            suppressed: 0,
        }
    }

    fn warn(&mut self, msg: impl FnOnce() -> String) {
        if self.window.elapsed() >= Duration::from_secs(1) {
            if self.suppressed > 0 {
                tracing::warn!(
                    suppressed = self.suppressed,
                    "fpm: more routes not installed (see vecgate_fpm_install_failures)"
                );
            }
            self.window = Instant::now();
            self.lines = 0;
            self.suppressed = 0;
        }
        if self.lines < LOG_PER_SECOND {
            self.lines += 1;
            tracing::warn!("fpm: {}", msg());
        } else {
            self.suppressed += 1;
        }
    }
}

/// A next-hop object (`RTM_NEWNEXTHOP`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum NhObj {
    Gateway(IpAddr),
    /// An interface of zebra's host only (a connected next hop).
    OifOnly,
    Blackhole,
    Group(Vec<u32>),
}

/// A learned route's next hops as received.
#[derive(Clone, Debug)]
enum Hops {
    Inline(Arc<[Hop]>),
    Object(u32),
}

#[derive(Clone, Debug)]
struct Entry {
    hops: Hops,
    protocol: u8,
    /// The session that last sent it (mark and sweep).
    epoch: u64,
}

/// What zebra told us: routes per VRF, next-hop objects.
struct Rib {
    settings: FpmSettings,
    /// VRF slot of each mapped table.
    table_vrf: HashMap<u32, usize>,
    vrfs: Vec<(String, HashMap<Prefix, Entry>)>,
    nexthops: HashMap<u32, NhObj>,
    /// Shared next-hop lists (most routes of one peer use the same).
    interned: HashMap<Vec<Hop>, Arc<[Hop]>>,
    epoch: u64,
    /// Changed since the last publish.
    dirty: bool,
    /// Per VRF slot, the prefixes changed since the last publish (the
    /// patch a publish applies to the FIB).
    changed: Vec<HashSet<Prefix>>,
    /// A change a patch cannot express (a next-hop object changed): the
    /// next publish rebuilds.
    full: bool,
}

impl Rib {
    fn new(settings: FpmSettings) -> Self {
        let mut vrfs: Vec<(String, HashMap<Prefix, Entry>)> = Vec::new();
        let mut table_vrf = HashMap::new();
        for (id, vrf) in &settings.tables {
            let slot = match vrfs.iter().position(|(v, _)| v == vrf) {
                Some(i) => i,
                None => {
                    vrfs.push((vrf.clone(), HashMap::new()));
                    vrfs.len() - 1
                }
            };
            table_vrf.insert(*id, slot);
        }
        Rib {
            settings,
            table_vrf,
            changed: vec![HashSet::new(); vrfs.len()],
            vrfs,
            nexthops: HashMap::new(),
            interned: HashMap::new(),
            epoch: 0,
            dirty: false,
            full: true,
        }
    }

    fn touch(&mut self, slot: usize, prefix: Prefix) {
        self.dirty = true;
        if let Some(c) = self.changed.get_mut(slot) {
            c.insert(prefix);
        }
    }

    /// The changes since the last publish, `None` when only a full build
    /// is exact: a next-hop object changed, a changed prefix holds a
    /// gateway some learned route uses (routes resolve through it), or
    /// more than [`MAX_PATCH_GATEWAYS`] gateways are in use (then that
    /// check costs more than it saves). Clears the record either way.
    fn take_changes(&mut self) -> Option<Vec<crate::learned::Change>> {
        let changed = std::mem::replace(&mut self.changed, vec![HashSet::new(); self.vrfs.len()]);
        if std::mem::take(&mut self.full) {
            return None;
        }
        let gateways = self.gateways()?;
        for set in changed.iter().filter(|c| !c.is_empty()) {
            for g in &gateways {
                let bits = if g.is_ipv4() { 32 } else { 128 };
                for len in 0..=bits {
                    if Prefix::new(*g, len).is_ok_and(|p| set.contains(&p.network())) {
                        return None;
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (slot, set) in changed.into_iter().enumerate() {
            let Some((vrf, routes)) = self.vrfs.get(slot) else {
                continue;
            };
            for p in set {
                let hops = routes.get(&p).and_then(|e| match &e.hops {
                    Hops::Inline(a) => Some(a.clone()),
                    Hops::Object(_) => self.resolve(&e.hops).ok().map(Arc::<[Hop]>::from),
                });
                out.push((vrf.clone(), p, hops));
            }
        }
        Some(out)
    }

    /// Every gateway address a learned route may use (a superset: what
    /// the interned lists and next-hop objects hold), `None` past
    /// [`MAX_PATCH_GATEWAYS`].
    fn gateways(&self) -> Option<Vec<IpAddr>> {
        let mut out: HashSet<IpAddr> = HashSet::new();
        let inline = self.interned.keys().flatten().filter_map(|h| match h {
            Hop::Via(a) => Some(*a),
            _ => None,
        });
        let objects = self.nexthops.values().filter_map(|o| match o {
            NhObj::Gateway(a) => Some(*a),
            _ => None,
        });
        for a in inline.chain(objects) {
            out.insert(a);
            if out.len() > MAX_PATCH_GATEWAYS {
                return None;
            }
        }
        Some(out.into_iter().collect())
    }

    /// Whether gateway `a` in `vrf` falls under a learned prefix that may
    /// be in the FIB (not one the configuration owns, `own`): a full build
    /// does not resolve through learned (multipath) routes, so the patch
    /// must not decide.
    fn under_learned(&self, vrf: &str, a: IpAddr, own: &HashSet<(String, Prefix)>) -> bool {
        let Some((_, routes)) = self.vrfs.iter().find(|(v, _)| v == vrf) else {
            return false;
        };
        let bits = if a.is_ipv4() { 32 } else { 128 };
        (0..=bits).any(|len| {
            Prefix::new(a, len).is_ok_and(|p| {
                let p = p.network();
                routes.contains_key(&p) && !own.contains(&(vrf.to_owned(), p))
            })
        })
    }

    fn intern(&mut self, hops: Vec<Hop>) -> Arc<[Hop]> {
        if let Some(a) = self.interned.get(&hops) {
            return a.clone();
        }
        let a: Arc<[Hop]> = Arc::from(hops.clone());
        // Bounded by the routes that hold them; dropped when unused at
        // the next sweep.
        self.interned.insert(hops, a.clone());
        a
    }

    /// A new session: everything held becomes stale until replayed.
    fn begin_session(&mut self) {
        self.epoch += 1;
    }

    /// Removes what the current session did not replay; returns how many.
    fn sweep(&mut self) -> u64 {
        let epoch = self.epoch;
        let mut n = 0u64;
        for ((_, routes), changed) in self.vrfs.iter_mut().zip(&mut self.changed) {
            let before = routes.len();
            routes.retain(|p, e| {
                let keep = e.epoch == epoch;
                if !keep {
                    changed.insert(*p);
                }
                keep
            });
            n += (before - routes.len()) as u64;
        }
        self.interned.retain(|_, a| Arc::strong_count(a) > 1);
        if n > 0 {
            self.dirty = true;
        }
        n
    }

    /// The next hops of `h`, or why there are none usable.
    fn resolve(&self, h: &Hops) -> Result<Vec<Hop>, Failure> {
        match h {
            Hops::Inline(a) => Ok(a.to_vec()),
            Hops::Object(id) => match self.nexthops.get(id) {
                None => Err(Failure::UnknownNexthop),
                Some(NhObj::Gateway(a)) => Ok(vec![Hop::Via(*a)]),
                Some(NhObj::Blackhole) => Ok(vec![Hop::Blackhole]),
                Some(NhObj::OifOnly) => Err(Failure::NoGateway),
                Some(NhObj::Group(members)) => {
                    let mut out = Vec::new();
                    for m in members {
                        if let Some(NhObj::Gateway(a)) = self.nexthops.get(m) {
                            let h = Hop::Via(*a);
                            if !out.contains(&h) {
                                out.push(h);
                            }
                        }
                    }
                    if out.is_empty() {
                        Err(Failure::NoGateway)
                    } else {
                        Ok(out)
                    }
                }
            },
        }
    }

    /// The routes to publish; counts and logs the ones that cannot be.
    fn learned(&self, stats: &FpmStats, log: &mut Limited) -> Learned {
        let mut out = Learned::default();
        let mut cache: HashMap<u32, Option<Arc<[Hop]>>> = HashMap::new();
        for (vrf, routes) in &self.vrfs {
            let mut v = Vec::with_capacity(routes.len());
            for (prefix, e) in routes {
                let hops = match &e.hops {
                    Hops::Inline(a) => Some(a.clone()),
                    Hops::Object(id) => cache
                        .entry(*id)
                        .or_insert_with(|| self.resolve(&e.hops).ok().map(Arc::<[Hop]>::from))
                        .clone(),
                };
                match hops {
                    Some(hops) => v.push(LearnedRoute {
                        prefix: *prefix,
                        hops,
                        protocol: e.protocol,
                    }),
                    None => {
                        stats.fail(Failure::UnknownNexthop);
                        log.warn(|| format!("{prefix} in vrf {vrf}: its next-hop object is gone"));
                    }
                }
            }
            out.vrfs.push((vrf.clone(), v));
        }
        out
    }

    fn apply(&mut self, msg: &[u8], stats: &FpmStats, log: &mut Limited) {
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

    fn nexthop(
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

    fn route(&mut self, r: &RouteMessage, new: bool, stats: &FpmStats, log: &mut Limited) {
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
        let Some(&slot) = self.table_vrf.get(&table) else {
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

    fn remove(&mut self, slot: usize, prefix: Prefix) {
        if let Some((_, routes)) = self.vrfs.get_mut(slot) {
            if routes.remove(&prefix).is_some() {
                self.touch(slot, prefix);
            }
        }
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

/// Binds the FPM listener (at startup, so a taken port stops `vecgate
/// run` with a clear error).
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let l = TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Serves zebra on `listener` for the life of the process (one session at
/// a time; a new connection replaces the old one, as zebra reconnects).
pub fn spawn(
    ctl: Arc<Control>,
    listener: TcpListener,
    settings: FpmSettings,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("fpm".into())
        .spawn(move || serve(&ctl, &listener, settings))
}

struct Session {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    have: usize,
    started: Instant,
    last_msg: Instant,
    replaying: bool,
}

fn serve(ctl: &Control, listener: &TcpListener, settings: FpmSettings) {
    let stats = ctl.fpm_stats();
    let mut rib = Rib::new(settings);
    let mut log = Limited::new();
    let mut session: Option<Session> = None;
    let mut last_publish = Instant::now();
    let mut gap = MIN_PUBLISH_GAP;
    let mut unresolved_before: HashSet<(String, Prefix)> = HashSet::new();
    let mut pending_since = Instant::now();
    loop {
        match listener.accept() {
            Ok((stream, peer)) => {
                if let Some(old) = session.take() {
                    tracing::info!(old = %old.peer, new = %peer, "fpm: zebra reconnected");
                }
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(TICK));
                let _ = stream.set_nodelay(true);
                stats.connections.fetch_add(1, Ordering::Relaxed);
                stats.connected.store(1, Ordering::Relaxed);
                tracing::info!(%peer, "fpm: zebra connected; its replay replaces the learned routes");
                rib.begin_session();
                let now = Instant::now();
                session = Some(Session {
                    stream,
                    peer,
                    buf: vec![0; BUF],
                    have: 0,
                    started: now,
                    last_msg: now,
                    replaying: true,
                });
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => {
                tracing::warn!("fpm: accept: {e}");
            }
        }
        let mut got = false;
        let before = rib.dirty;
        match session.as_mut() {
            None => std::thread::sleep(TICK),
            Some(s) => match read_frames(s, &mut rib, stats, &mut log) {
                Ok(n) => got = n > 0,
                Err(why) => {
                    tracing::warn!(peer = %s.peer, "fpm: session ends: {why}; learned routes stay until zebra replays");
                    stats.connected.store(0, Ordering::Relaxed);
                    session = None;
                }
            },
        }
        if !before && rib.dirty {
            // The oldest change not yet in the FIB arrived in this tick.
            pending_since = Instant::now();
        }
        if let Some(s) = session.as_mut() {
            if got {
                s.last_msg = Instant::now();
            } else if s.replaying && s.last_msg.elapsed() >= REPLAY_QUIET {
                s.replaying = false;
                let n = rib.sweep();
                stats.swept.fetch_add(n, Ordering::Relaxed);
                tracing::info!(
                    stale = n,
                    after_ms = s.started.elapsed().as_millis() as u64,
                    "fpm: replay complete, stale routes removed"
                );
            }
        }
        // Publish when zebra pauses, or at the pace the builds allow.
        if rib.dirty && (!got || last_publish.elapsed() >= gap) {
            let t0 = Instant::now();
            let learned = Arc::new(rib.learned(stats, &mut log));
            rib.dirty = false;
            let patched = rib.take_changes().and_then(|changes| {
                let own = crate::learned::config_prefixes(&ctl.config());
                let defer = |vrf: &str, a: IpAddr| rib.under_learned(vrf, a, &own);
                ctl.patch_learned(learned.clone(), &changes, &defer)
            });
            let result = match patched {
                Some(u) => {
                    stats.patches.fetch_add(1, Ordering::Relaxed);
                    Ok(u)
                }
                None => ctl.set_learned(learned),
            };
            stats.record_delay(pending_since.elapsed());
            match result {
                Ok(unresolved) => {
                    // Counted once when a route becomes unresolvable, not
                    // at every publish it stays so.
                    let now: HashSet<(String, Prefix)> = unresolved.into_iter().collect();
                    for (vrf, p) in now.difference(&unresolved_before) {
                        stats.fail(Failure::Unresolved);
                        log.warn(|| format!("{p} in vrf {vrf}: no next hop resolves"));
                    }
                    unresolved_before = now;
                }
                Err(e) => tracing::warn!("fpm: tables not rebuilt: {}", e.message),
            }
            stats.publishes.fetch_add(1, Ordering::Relaxed);
            last_publish = Instant::now();
            gap = MIN_PUBLISH_GAP.max(t0.elapsed() * 2);
        }
    }
}

/// Reads what is there and applies every complete frame; returns how many
/// frames were applied, or why the session is over.
fn read_frames(
    s: &mut Session,
    rib: &mut Rib,
    stats: &FpmStats,
    log: &mut Limited,
) -> Result<usize, String> {
    let mut frames = 0;
    // Several reads per tick while data flows, bounded so publishes and
    // accepts still happen.
    for _ in 0..64 {
        let Some(room) = s.buf.get_mut(s.have..) else {
            return Err("receive buffer overrun".into());
        };
        match s.stream.read(room) {
            Ok(0) => return Err("zebra closed the connection".into()),
            Ok(n) => s.have += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Ok(frames)
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        }
        let mut off = 0;
        while let Some(h) = s.buf.get(off..off + 4).filter(|_| off + 4 <= s.have) {
            let (version, kind) = (h[0], h[1]);
            let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            if version != FPM_VERSION || len < 4 {
                stats.fail(Failure::Malformed);
                return Err(format!("bad FPM header (version {version}, length {len})"));
            }
            if off + len > s.have {
                break;
            }
            stats.frames.fetch_add(1, Ordering::Relaxed);
            if kind == FPM_NETLINK {
                apply_netlink(
                    s.buf.get(off + 4..off + len).unwrap_or(&[]),
                    rib,
                    stats,
                    log,
                );
            } else {
                stats.ignored.fetch_add(1, Ordering::Relaxed);
            }
            frames += 1;
            off += len;
        }
        s.buf.copy_within(off..s.have, 0);
        s.have -= off;
    }
    Ok(frames)
}

/// One frame's netlink messages (usually one; aligned to 4 bytes).
fn apply_netlink(mut data: &[u8], rib: &mut Rib, stats: &FpmStats, log: &mut Limited) {
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

/// Feeds FPM frames to a fresh RIB and returns the learned routes (for
/// the fuzzer and tests: never panics, whatever the bytes).
pub fn decode_for_test(settings: FpmSettings, frames: &[u8]) -> (Learned, Vec<(Failure, u64)>) {
    let stats = FpmStats::default();
    let mut rib = Rib::new(settings);
    let mut log = Limited::new();
    let mut off = 0;
    while let Some(h) = frames.get(off..off + 4) {
        let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        if h[0] != FPM_VERSION || len < 4 {
            break;
        }
        let Some(f) = frames.get(off + 4..off + len) else {
            break;
        };
        if h[1] == FPM_NETLINK {
            apply_netlink(f, &mut rib, &stats, &mut log);
        }
        off += len;
    }
    (rib.learned(&stats, &mut log), stats.failures())
}

#[cfg(test)]
mod tests;
