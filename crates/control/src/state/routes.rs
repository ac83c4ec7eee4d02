//! Routes (`/routes`): the connected and local routes the interfaces'
//! addresses imply, static routes from the file or the API, those of the
//! ipsec tunnels' `traffic` selectors, and the routes learned over FPM ([`crate::fpm`]), published whole or patched.

use super::{lock, ApiError, Control};
use crate::learned::Learned;
use crate::model::{RouteInfo, RouteKey, RouteSpec};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use vecgate_config::{Config, Prefix, Via, DEFAULT_VRF};

impl Control {
    /// Every route with its source and administrative distance: the
    /// connected and local routes the interfaces' addresses imply, static
    /// routes (file or API), and routes learned over FPM (`active: false`
    /// when a route of lower distance holds the prefix, or none of its next
    /// hops resolves).
    pub fn routes(&self, vrf: Option<&str>) -> Vec<RouteInfo> {
        use crate::learned::{distance, source, DISTANCE_CONNECTED, DISTANCE_STATIC};
        let cfg = self.config();
        let api = lock(&self.api_routes).clone();
        let mut out = Vec::new();
        let keep = |v: &str| vrf.is_none_or(|f| f == v);
        for ifc in cfg.interfaces.iter().filter(|i| keep(&i.vrf)) {
            for a in &ifc.addresses {
                let host = if a.addr.is_ipv4() { 32 } else { 128 };
                for (prefix, kind) in [
                    (a.network().to_string(), "connected"),
                    (format!("{}/{host}", a.addr), "local"),
                ] {
                    out.push(RouteInfo {
                        vrf: ifc.vrf.clone(),
                        prefix,
                        via: ifc.name.clone(),
                        kind: kind.into(),
                        source: "connected".into(),
                        distance: DISTANCE_CONNECTED,
                        active: true,
                    });
                }
            }
        }
        for r in cfg.routes.iter().filter(|r| keep(&r.vrf)) {
            let prefix = r.prefix.to_string();
            let from_api = api.contains(&(r.vrf.clone(), prefix.clone()));
            out.push(RouteInfo {
                vrf: r.vrf.clone(),
                prefix,
                via: r.via.to_string(),
                kind: "static".into(),
                source: if from_api { "api" } else { "static" }.into(),
                distance: DISTANCE_STATIC,
                active: true,
            });
        }
        // An ipsec tunnel's `traffic` selectors route into it.
        for t in cfg.tunnels.iter().filter(|t| keep(&t.vrf)) {
            for p in t.ipsec.iter().flat_map(|x| &x.traffic) {
                out.push(RouteInfo {
                    vrf: t.vrf.clone(),
                    prefix: p.to_string(),
                    via: t.name.clone(),
                    kind: "static".into(),
                    source: "ipsec".into(),
                    distance: DISTANCE_STATIC,
                    active: true,
                });
            }
        }
        let learned = self.learned();
        if !learned.is_empty() {
            let tables = self.dp.tables.load();
            let won: HashSet<(&str, dataplane::fib::Prefix)> = learned
                .installable(&cfg)
                .map(|(v, r)| (v, r.prefix.network()))
                .collect();
            let unresolved: HashSet<(&str, dataplane::fib::Prefix)> = tables
                .unresolved
                .iter()
                .filter_map(|(v, p)| Some((tables.vrfs.get(usize::from(*v))?.name.as_str(), *p)))
                .collect();
            for (v, routes) in learned.vrfs.iter().filter(|(v, _)| keep(v)) {
                for r in routes {
                    let p = r.prefix.network();
                    let hops: Vec<String> = r.hops.iter().map(|h| h.to_string()).collect();
                    out.push(RouteInfo {
                        vrf: v.clone(),
                        prefix: p.to_string(),
                        via: hops.join(","),
                        kind: "learned".into(),
                        source: source(r.protocol),
                        distance: distance(r.protocol),
                        active: won.contains(&(v.as_str(), p))
                            && !unresolved.contains(&(v.as_str(), p)),
                    });
                }
            }
        }
        out
    }

    /// Parses a route's `via` the way the configuration file does: a name
    /// of an interface or tunnel, else an address.
    fn via(cfg: &Config, via: &str) -> Result<Via, ApiError> {
        if cfg.interface(via).is_some() {
            Ok(Via::Interface(via.to_owned()))
        } else if cfg.tunnel(via).is_some() {
            Ok(Via::Tunnel(via.to_owned()))
        } else if let Ok(a) = via.parse::<IpAddr>() {
            Ok(Via::Address(a))
        } else {
            Err(ApiError::bad(
                "via",
                format!("via \"{via}\" is neither an interface, a tunnel nor an address"),
            ))
        }
    }

    fn prefix(s: &str) -> Result<Prefix, ApiError> {
        s.parse::<Prefix>().map_err(|e| ApiError::bad("prefix", e))
    }

    fn vrf_name(v: Option<&str>) -> Result<String, ApiError> {
        let v = v.unwrap_or(DEFAULT_VRF);
        if v.is_empty() {
            return Err(ApiError::bad("vrf", "vrf must not be empty"));
        }
        Ok(v.to_owned())
    }

    pub fn add_route(&self, spec: &RouteSpec) -> Result<RouteInfo, ApiError> {
        let prefix = Self::prefix(&spec.prefix)?;
        let vrf = Self::vrf_name(spec.vrf.as_deref())?;
        self.apply("prefix", |c| {
            let via = Self::via(c, &spec.via)?;
            if c.routes.iter().any(|r| r.vrf == vrf && r.prefix == prefix) {
                return Err(ApiError::new(
                    409,
                    format!("vrf \"{vrf}\" already has a route for {prefix}"),
                    Some("prefix"),
                ));
            }
            c.routes.push(vecgate_config::Route {
                vrf: vrf.clone(),
                prefix,
                via,
            });
            Ok(Some(format!("route[{}]", c.routes.len() - 1)))
        })?;
        lock(&self.api_routes).insert((vrf.clone(), prefix.to_string()));
        Ok(RouteInfo {
            vrf,
            prefix: prefix.to_string(),
            via: spec.via.clone(),
            kind: "static".into(),
            source: "api".into(),
            distance: crate::learned::DISTANCE_STATIC,
            active: true,
        })
    }

    pub fn del_route(&self, key: &RouteKey) -> Result<(), ApiError> {
        let prefix = Self::prefix(&key.prefix)?;
        let vrf = Self::vrf_name(key.vrf.as_deref())?;
        self.apply("prefix", |c| {
            let before = c.routes.len();
            c.routes.retain(|r| !(r.vrf == vrf && r.prefix == prefix));
            if c.routes.len() == before {
                return Err(ApiError::not_found(
                    "prefix",
                    format!("vrf \"{vrf}\" has no static route for {prefix}"),
                ));
            }
            Ok(None)
        })?;
        lock(&self.api_routes).remove(&(vrf, prefix.to_string()));
        Ok(())
    }

    /// The learned routes as last published.
    pub fn learned(&self) -> Arc<Learned> {
        lock(&self.learned).clone()
    }

    /// Per VRF with learned routes: (name, in the FIB, not in it: shadowed
    /// by a lower distance or no next hop resolves). Cheap enough for
    /// every scrape (no per-route strings).
    pub fn learned_counts(&self) -> Vec<(String, usize, usize)> {
        let cfg = self.config();
        let learned = self.learned();
        let tables = self.dp.tables.load();
        // One pass over the routes for every VRF (scraped often, 10^5
        // routes and more).
        let mut won: HashMap<&str, usize> = Default::default();
        for (v, _) in learned.installable(&cfg) {
            *won.entry(v).or_default() += 1;
        }
        let mut unresolved_in: HashMap<u16, usize> = Default::default();
        for (i, _) in &tables.unresolved {
            *unresolved_in.entry(*i).or_default() += 1;
        }
        learned
            .vrfs
            .iter()
            .map(|(v, routes)| {
                let won = won.get(v.as_str()).copied().unwrap_or(0);
                let unresolved = tables
                    .vrfs
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| &x.name == v)
                    .filter_map(|(i, _)| u16::try_from(i).ok())
                    .map(|i| unresolved_in.get(&i).copied().unwrap_or(0))
                    .sum::<usize>();
                let installed = won.saturating_sub(unresolved);
                (v.clone(), installed, routes.len() - installed)
            })
            .collect()
    }

    /// Replaces the learned routes and publishes tables built from them and
    /// the running configuration (the build-and-publish of [`Control::apply`]).
    /// Returns the learned routes left out because no next hop resolved
    /// (VRF name, prefix).
    pub fn set_learned(
        &self,
        l: Arc<Learned>,
    ) -> Result<Vec<(String, dataplane::fib::Prefix)>, ApiError> {
        let cfg = lock(&self.config);
        let tables = (self.dp.build)(&cfg, &l).map_err(|e| ApiError::new(409, e, None))?;
        let unresolved: Vec<_> = tables
            .unresolved
            .iter()
            .map(|(v, p)| {
                let name = tables
                    .vrfs
                    .get(usize::from(*v))
                    .map_or_else(|| v.to_string(), |v| v.name.clone());
                (name, *p)
            })
            .collect();
        self.dp.tables.store(tables);
        *lock(&self.learned) = l;
        Ok(unresolved)
    }

    /// The incremental form of [`Control::set_learned`]: `l` is the new
    /// set of learned routes and `changes` what differs from the last
    /// published one, (VRF, prefix, next hops or `None` when gone). Only
    /// the FIBs of the changed VRFs are copied and patched
    /// ([`dataplane::tables::Tables::patched`]). Returns `None`, having
    /// published nothing, when a patch cannot give what a full build
    /// would (a changed prefix the configuration fills too, or one a
    /// static route's gateway resolves through; a next hop `defer` names):
    /// then call `set_learned`.
    pub fn patch_learned(
        &self,
        l: Arc<Learned>,
        changes: &[crate::learned::Change],
        defer: &dyn Fn(&str, IpAddr) -> bool,
    ) -> Option<Vec<(String, dataplane::fib::Prefix)>> {
        use dataplane::tables::RoutePatch;
        let cfg = lock(&self.config);
        let fixed = crate::learned::config_prefixes(&cfg);
        let statics: Vec<(&str, IpAddr)> = cfg
            .routes
            .iter()
            .filter_map(|r| match r.via {
                vecgate_config::Via::Address(a) => Some((r.vrf.as_str(), a)),
                _ => None,
            })
            .collect();
        // Per VRF, so a change is looked up without copying its VRF's name.
        let mut fixed_in: HashMap<&str, HashSet<dataplane::fib::Prefix>> = HashMap::new();
        for (v, p) in &fixed {
            fixed_in.entry(v.as_str()).or_default().insert(*p);
        }
        let cur = self.dp.tables.load();
        let index = |name: &str| cur.vrfs.iter().position(|v| v.name == name);
        let mut patches = Vec::with_capacity(changes.len());
        for (vrf, prefix, hops) in changes {
            let p = prefix.network();
            if fixed_in.get(vrf.as_str()).is_some_and(|s| s.contains(&p))
                || statics
                    .iter()
                    .any(|(v, a)| *v == vrf.as_str() && p.contains(*a))
            {
                return None;
            }
            // A VRF the tables do not have: a full build skips it too.
            let Some(v) = index(vrf) else {
                continue;
            };
            patches.push(RoutePatch {
                vrf: v as u16,
                prefix: p,
                hops: hops.as_ref().map(|h| h.iter().map(|h| h.route()).collect()),
            });
        }
        let names: Vec<String> = cur.vrfs.iter().map(|v| v.name.clone()).collect();
        let defer_ix = |v: u16, a: IpAddr| names.get(usize::from(v)).is_none_or(|n| defer(n, a));
        let tables = cur.patched(&patches, &defer_ix)?;
        let unresolved = tables
            .unresolved
            .iter()
            .map(|(v, p)| {
                let name = names
                    .get(usize::from(*v))
                    .map_or_else(|| v.to_string(), Clone::clone);
                (name, *p)
            })
            .collect();
        self.dp.tables.store(tables);
        *lock(&self.learned) = l;
        Some(unresolved)
    }
}
