//! Routes learned from a routing daemon (FRR's zebra over FPM, see
//! [`crate::fpm`]), and the rule that decides between them and the
//! gateway's own routes.
//!
//! Administrative distance, lowest wins, per VRF and exact prefix:
//! connected and local 0, static (the TOML's `[[route]]` and `POST /routes`)
//! 1, learned routes by the protocol zebra reports: [`distance`] (eBGP and
//! iBGP both arrive as protocol `bgp`, so both are 20). A tie goes to the
//! gateway's own route. The loser stays listed (`active: false`) and comes
//! back into the FIB when the winner goes.

use dataplane::fib::Prefix;
use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;
use vecgate_config::Config;

/// One next hop of a learned route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hop {
    /// A gateway address, resolved through the VRF's neighbours as a static
    /// route's `via` address is.
    Via(IpAddr),
    /// `RTN_BLACKHOLE`: silently dropped.
    Blackhole,
    /// `RTN_UNREACHABLE` / `RTN_PROHIBIT`: dropped with ICMP unreachable.
    Unreachable,
}

impl Hop {
    /// The dataplane's route for this next hop (a gateway is resolved on
    /// whichever port reaches it).
    pub fn route(self) -> dataplane::tables::Route {
        use dataplane::tables::Route;
        match self {
            Hop::Via(next_hop) => Route::Via {
                next_hop,
                port: None,
            },
            Hop::Blackhole => Route::Drop,
            Hop::Unreachable => Route::Unreachable,
        }
    }
}

impl std::fmt::Display for Hop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hop::Via(a) => write!(f, "{a}"),
            Hop::Blackhole => f.write_str("blackhole"),
            Hop::Unreachable => f.write_str("unreachable"),
        }
    }
}

/// A learned route (next-hop sets are shared between the routes that use
/// them: most BGP routes of one peer share one).
#[derive(Clone, Debug)]
pub struct LearnedRoute {
    pub prefix: Prefix,
    pub hops: Arc<[Hop]>,
    /// The netlink `rtm_protocol` zebra reported (186 is BGP).
    pub protocol: u8,
}

/// One learned-route change: (VRF name, prefix, its next hops now or
/// `None` when it is gone), for [`crate::state::Control::patch_learned`].
pub type Change = (String, Prefix, Option<Arc<[Hop]>>);

/// Every learned route, per VRF (by name), as last published.
#[derive(Clone, Debug, Default)]
pub struct Learned {
    pub vrfs: Vec<(String, Vec<LearnedRoute>)>,
}

impl Learned {
    pub fn len(&self) -> usize {
        self.vrfs.iter().map(|(_, r)| r.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The routes that win over the configuration's by [distance] (the
    /// others are shadowed), with their VRF's name.
    pub fn installable<'a>(
        &'a self,
        cfg: &Config,
    ) -> impl Iterator<Item = (&'a str, &'a LearnedRoute)> + 'a {
        let own = own_prefixes(cfg);
        self.vrfs.iter().flat_map(move |(vrf, routes)| {
            let mine: HashSet<Prefix> = own
                .iter()
                .filter(|(v, _)| v == vrf)
                .map(|(_, p)| *p)
                .collect();
            routes
                .iter()
                .filter(move |r| !mine.contains(&r.prefix.network()))
                .map(move |r| (vrf.as_str(), r))
        })
    }
}

/// Distance of connected and local routes.
pub const DISTANCE_CONNECTED: u8 = 0;
/// Distance of static routes (file and API).
pub const DISTANCE_STATIC: u8 = 1;

/// Administrative distance of a learned route by its netlink protocol,
/// FRR's defaults (`zebra/zebra_rib.c` route_info[]).
pub fn distance(protocol: u8) -> u8 {
    match protocol {
        186 => 20,  // bgp (eBGP 20; iBGP 200 is not told apart over FPM)
        188 => 110, // ospf
        187 => 115, // isis
        189 => 120, // rip
        196 => 1,   // zebra static
        42 => 100,  // babel
        192 => 90,  // eigrp
        _ => 150,
    }
}

/// How `show routes` names a learned route's source: `fpm/` and the
/// protocol.
pub fn source(protocol: u8) -> String {
    let p = match protocol {
        186 => "bgp",
        188 => "ospf",
        187 => "isis",
        189 => "rip",
        196 => "static",
        42 => "babel",
        192 => "eigrp",
        11 => "zebra",
        n => return format!("fpm/proto{n}"),
    };
    format!("fpm/{p}")
}

/// (VRF, network prefix) of everything a full build fills from `cfg`
/// besides learned routes: its own routes ([`own_prefixes`]), IPsec traffic
/// selectors and VRRP virtual addresses. A learned-route change at one of
/// these goes through a full build, not a FIB patch.
pub fn config_prefixes(cfg: &Config) -> HashSet<(String, Prefix)> {
    let mut out = own_prefixes(cfg);
    for t in &cfg.tunnels {
        for p in t.ipsec.iter().flat_map(|x| &x.traffic) {
            if let Ok(p) = Prefix::new(p.addr, p.len) {
                out.insert((t.vrf.clone(), p.network()));
            }
        }
    }
    for g in cfg.ha.iter().flat_map(|h| &h.groups) {
        let Some(ifc) = cfg.interfaces.iter().find(|i| i.name == g.interface) else {
            continue;
        };
        for a in &g.addresses {
            let host = if a.is_ipv4() { 32 } else { 128 };
            if let Ok(p) = Prefix::new(*a, host) {
                out.insert((ifc.vrf.clone(), p));
            }
        }
    }
    out
}

/// (VRF, network prefix) of every connected, local and static route of
/// `cfg`: they all beat a learned route (distance 0 and 1).
fn own_prefixes(cfg: &Config) -> HashSet<(String, Prefix)> {
    let mut own = HashSet::new();
    for ifc in &cfg.interfaces {
        for a in &ifc.addresses {
            if let Ok(p) = Prefix::new(a.addr, a.prefix_len) {
                own.insert((ifc.vrf.clone(), p.network()));
            }
            let host = if a.addr.is_ipv4() { 32 } else { 128 };
            if let Ok(p) = Prefix::new(a.addr, host) {
                own.insert((ifc.vrf.clone(), p));
            }
        }
    }
    for t in &cfg.tunnels {
        for a in &t.addresses {
            if let Ok(p) = Prefix::new(a.addr, a.prefix_len) {
                own.insert((t.vrf.clone(), p.network()));
            }
            let host = if a.addr.is_ipv4() { 32 } else { 128 };
            if let Ok(p) = Prefix::new(a.addr, host) {
                own.insert((t.vrf.clone(), p));
            }
        }
    }
    for r in &cfg.routes {
        if let Ok(p) = Prefix::new(r.prefix.addr, r.prefix.len) {
            own.insert((r.vrf.clone(), p.network()));
        }
    }
    own
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_routes_win_by_distance() {
        let cfg = vecgate_config::parse(
            "[gateway]\nname = \"g\"\n[[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"tap\"\naddresses = [\"10.0.0.1/24\"]\n[[route]]\nprefix = \"10.9.0.0/16\"\nvia = \"10.0.0.2\"\n",
        )
        .unwrap();
        let hops: Arc<[Hop]> = Arc::from(vec![Hop::Via("10.0.0.3".parse().unwrap())]);
        let r = |p: &str| LearnedRoute {
            prefix: p.parse().unwrap(),
            hops: hops.clone(),
            protocol: 186,
        };
        let l = Learned {
            vrfs: vec![(
                "default".into(),
                vec![
                    r("10.9.0.0/16"),
                    r("10.0.0.0/24"),
                    r("10.0.0.1/32"),
                    r("10.8.0.0/16"),
                ],
            )],
        };
        let won: Vec<String> = l
            .installable(&cfg)
            .map(|(_, r)| r.prefix.to_string())
            .collect();
        assert_eq!(won, vec!["10.8.0.0/16"]);
        assert!(distance(186) > DISTANCE_STATIC && DISTANCE_STATIC > DISTANCE_CONNECTED);
        assert_eq!(source(186), "fpm/bgp");
    }
}
