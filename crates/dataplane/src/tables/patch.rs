//! [`Tables::patched`]: route changes applied to a copy of the published
//! tables that shares every FIB they do not touch (the incremental path
//! for routes learned from a routing daemon).

use super::*;

/// One route change for [`Tables::patched`]: in VRF index `vrf`, `prefix`
/// gets a group over `hops` ([`TablesBuilder::add_route_group`]'s rules),
/// or is removed (`None`).
#[derive(Clone, Debug)]
pub struct RoutePatch {
    pub vrf: u16,
    pub prefix: Prefix,
    pub hops: Option<Vec<Route>>,
}

impl Tables {
    /// A copy with `changes` applied, sharing every FIB they do not touch:
    /// the incremental path for routes learned from a routing daemon (one
    /// change costs the size of its VRF's FIB copy, not a rebuild of every
    /// table).
    ///
    /// Exact only for what the caller guarantees: no changed prefix is one
    /// a full build would fill from elsewhere (the configuration's own
    /// prefixes) or one another route's next hop resolves through. Next
    /// hops resolve through the FIB as published, as a full build resolves
    /// them through its definitions; a next hop for which `defer` says so
    /// (one under a group route: a full build never recurses through
    /// multipath) makes it return `None`, and the caller rebuilds. `None`
    /// also when the adjacencies have grown past four times those of the
    /// last full build (a rebuild drops the unused ones).
    pub fn patched(
        &self,
        changes: &[RoutePatch],
        defer: &dyn Fn(u16, IpAddr) -> bool,
    ) -> Option<Tables> {
        let mut t = self.clone();
        let mut adj_idx: FxMap<Adj, u32> = FxMap::default();
        for (i, a) in t.adjs.iter().enumerate() {
            adj_idx.entry(*a).or_insert(i as u32);
        }
        for c in changes {
            let v = usize::from(c.vrf);
            let vrf = t.vrfs.get(v)?;
            let p = c.prefix.network();
            let old = match p.addr {
                IpAddr::V4(a) => vrf.fib4.get_exact(u32::from(a), p.len),
                IpAddr::V6(a) => vrf.fib6.get_exact(u128::from(a), p.len),
            };
            let was_unresolved = t.unresolved.iter().position(|x| *x == (c.vrf, p));
            if let Some(i) = was_unresolved {
                t.unresolved.swap_remove(i);
            }
            let new = match &c.hops {
                None => None,
                Some(hops) => {
                    let mut members: Vec<u32> = Vec::new();
                    for r in hops {
                        let a = match *r {
                            Route::Via {
                                next_hop,
                                port: None,
                            } => match t.resolve_via(c.vrf, next_hop, defer) {
                                Ok(a) => a,
                                Err(()) => return None,
                            },
                            Route::Via {
                                next_hop,
                                port: Some(port),
                            } => Adj::Neighbor { port, nh: next_hop },
                            Route::Connected { port } => Adj::Glean { port },
                            Route::Port { port } => Adj::Port { port },
                            Route::Drop => Adj::Drop,
                            Route::Unreachable => Adj::Unreachable,
                            Route::Local | Route::Tunnel(_) | Route::Group(_) => return None,
                        };
                        if matches!(
                            a,
                            Adj::Glean { .. } | Adj::Neighbor { .. } | Adj::Port { .. }
                        ) || (matches!(a, Adj::Drop | Adj::Unreachable)
                            && !matches!(r, Route::Via { .. }))
                        {
                            let i = t.intern_adj(&mut adj_idx, a);
                            if !members.contains(&i) {
                                members.push(i);
                            }
                        }
                    }
                    match members.len() {
                        0 => {
                            t.unresolved.push((c.vrf, p));
                            None
                        }
                        1 => Some(members[0]),
                        n => {
                            members.truncate(n.min(usize::from(u16::MAX)));
                            let count = members.len() as u16;
                            let first = t.find_ecmp(&members).unwrap_or_else(|| {
                                let first = t.ecmp.len() as u32;
                                t.ecmp.extend_from_slice(&members);
                                first
                            });
                            Some(t.intern_adj(&mut adj_idx, Adj::Ecmp { first, count }))
                        }
                    }
                }
            };
            if old == new {
                continue;
            }
            let vrf = t.vrfs.get_mut(v)?;
            match (p.addr, new) {
                (IpAddr::V4(a), Some(i)) => {
                    Arc::make_mut(&mut vrf.fib4).insert(u32::from(a), p.len, i);
                }
                (IpAddr::V4(a), None) => {
                    Arc::make_mut(&mut vrf.fib4).remove(u32::from(a), p.len);
                }
                (IpAddr::V6(a), Some(i)) => {
                    Arc::make_mut(&mut vrf.fib6).insert(u128::from(a), p.len, i);
                }
                (IpAddr::V6(a), None) => {
                    Arc::make_mut(&mut vrf.fib6).remove(u128::from(a), p.len);
                }
            }
        }
        if t.adjs.len() + t.ecmp.len() > 4 * t.built_adjs + 1024 {
            return None;
        }
        Some(t)
    }

    /// A gateway's adjacency as a full build resolves it (`resolve`):
    /// `Err` when the full build must decide (`defer`, or a multipath
    /// route covers it).
    fn resolve_via(
        &self,
        vrf: u16,
        nh: IpAddr,
        defer: &dyn Fn(u16, IpAddr) -> bool,
    ) -> Result<Adj, ()> {
        if defer(vrf, nh) {
            return Err(());
        }
        let Some(v) = self.vrfs.get(usize::from(vrf)) else {
            return Ok(Adj::Unreachable);
        };
        let hit = match nh {
            IpAddr::V4(a) => v.fib4.lookup(u32::from(a)),
            IpAddr::V6(a) => v.fib6.lookup(u128::from(a)),
        };
        let Some((idx, _)) = hit else {
            return Ok(Adj::Unreachable);
        };
        Ok(match self.adj(idx) {
            Adj::Glean { port } => Adj::Neighbor { port, nh },
            Adj::Local => Adj::Unreachable,
            // A static group (ECMP) is not recursed into either.
            Adj::Ecmp { .. } => return Err(()),
            other => other,
        })
    }

    fn intern_adj(&mut self, idx: &mut FxMap<Adj, u32>, a: Adj) -> u32 {
        *idx.entry(a).or_insert_with(|| {
            self.adjs.push(a);
            (self.adjs.len() - 1) as u32
        })
    }

    /// Where `members` already sit in [`Tables::ecmp`] as one group.
    fn find_ecmp(&self, members: &[u32]) -> Option<u32> {
        self.adjs.iter().find_map(|a| match *a {
            Adj::Ecmp { first, count } if usize::from(count) == members.len() => {
                let f = first as usize;
                (self.ecmp.get(f..f + members.len()) == Some(members)).then_some(first)
            }
            _ => None,
        })
    }
}
