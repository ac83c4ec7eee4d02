//! What zebra told us: its routes per VRF with their next hops as
//! received, its next-hop objects, and what changed since the last
//! publish (the patch, or the reason only a full build is exact).

use super::stats::{Failure, FpmStats, Limited};
use super::{FpmSettings, MAX_PATCH_GATEWAYS};
use crate::learned::{Hop, Learned, LearnedRoute};
use dataplane::fib::Prefix;
use dataplane::fib::{FxHasher, FxMap};
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

/// Per-route maps hash with Fx, as the FIB's own do (SipHash was a tenth
/// of a bulk load's time); their keys are the prefixes the FIB holds.
pub(super) type FxSet<T> = HashSet<T, BuildHasherDefault<FxHasher>>;
use std::net::IpAddr;
use std::sync::Arc;

/// A next-hop object (`RTM_NEWNEXTHOP`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum NhObj {
    Gateway(IpAddr),
    /// An interface of zebra's host only (a connected next hop).
    OifOnly,
    Blackhole,
    Group(Vec<u32>),
}

/// A learned route's next hops as received.
#[derive(Clone, Debug)]
pub(super) enum Hops {
    Inline(Arc<[Hop]>),
    Object(u32),
}

#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub(super) hops: Hops,
    pub(super) protocol: u8,
    /// The session that last sent it (mark and sweep).
    pub(super) epoch: u64,
}

/// What zebra told us: routes per VRF, next-hop objects.
pub(super) struct Rib {
    pub(super) settings: FpmSettings,
    /// VRF slot of each mapped table.
    pub(super) table_vrf: HashMap<u32, usize>,
    /// The slot of every table not mapped (a tenant's own zebra).
    pub(super) any_table: Option<usize>,
    pub(super) vrfs: Vec<(String, FxMap<Prefix, Entry>)>,
    pub(super) nexthops: HashMap<u32, NhObj>,
    /// Shared next-hop lists (most routes of one peer use the same).
    pub(super) interned: HashMap<Vec<Hop>, Arc<[Hop]>>,
    pub(super) epoch: u64,
    /// Changed since the last publish.
    pub(super) dirty: bool,
    /// Per VRF slot, the prefixes changed since the last publish (the
    /// patch a publish applies to the FIB).
    pub(super) changed: Vec<FxSet<Prefix>>,
    /// A change a patch cannot express (a next-hop object changed): the
    /// next publish rebuilds.
    pub(super) full: bool,
}

impl Rib {
    pub(super) fn new(settings: FpmSettings) -> Self {
        let mut vrfs: Vec<(String, FxMap<Prefix, Entry>)> = Vec::new();
        let mut table_vrf = HashMap::new();
        for (id, vrf) in &settings.tables {
            let slot = match vrfs.iter().position(|(v, _)| v == vrf) {
                Some(i) => i,
                None => {
                    vrfs.push((vrf.clone(), FxMap::default()));
                    vrfs.len() - 1
                }
            };
            table_vrf.insert(*id, slot);
        }
        Rib {
            settings,
            table_vrf,
            any_table: None,
            changed: vec![FxSet::default(); vrfs.len()],
            vrfs,
            nexthops: HashMap::new(),
            interned: HashMap::new(),
            epoch: 0,
            dirty: false,
            full: true,
        }
    }

    /// The RIB of a tenant VRF's own zebra: all its routes are `vrf`'s.
    pub(super) fn for_vrf(mut settings: FpmSettings, vrf: String) -> Self {
        settings.tables = Vec::new();
        let mut r = Rib::new(settings);
        r.vrfs = vec![(vrf, FxMap::default())];
        r.changed = vec![FxSet::default()];
        r.any_table = Some(0);
        r
    }

    pub(super) fn touch(&mut self, slot: usize, prefix: Prefix) {
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
    pub(super) fn take_changes(&mut self) -> Option<Vec<crate::learned::Change>> {
        let changed = std::mem::replace(&mut self.changed, vec![FxSet::default(); self.vrfs.len()]);
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
    pub(super) fn gateways(&self) -> Option<Vec<IpAddr>> {
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
    pub(super) fn under_learned(
        &self,
        vrf: &str,
        a: IpAddr,
        own: &HashSet<(String, Prefix)>,
    ) -> bool {
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

    pub(super) fn intern(&mut self, hops: Vec<Hop>) -> Arc<[Hop]> {
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
    pub(super) fn begin_session(&mut self) {
        self.epoch += 1;
    }

    /// Removes what the current session did not replay; returns how many.
    pub(super) fn sweep(&mut self) -> u64 {
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
    pub(super) fn resolve(&self, h: &Hops) -> Result<Vec<Hop>, Failure> {
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
    pub(super) fn learned(&self, stats: &FpmStats, log: &mut Limited) -> Learned {
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
    pub(super) fn remove(&mut self, slot: usize, prefix: Prefix) {
        if let Some((_, routes)) = self.vrfs.get_mut(slot) {
            if routes.remove(&prefix).is_some() {
                self.touch(slot, prefix);
            }
        }
    }
}
