//! The standby's running configuration follows the active's: static
//! routes and tunnels (those added or removed through the API included),
//! sent by the active as sets named by a generation and split into
//! chunks, applied by the standby through the API's own calls.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use tracing::{info, warn};

use crate::sync::RouteRepr;

/// The gateway's running configuration as the sync reads and changes it
/// (the management API's calls, so a change takes the same path as one
/// an operator makes).
pub trait Running {
    /// The static routes (`[[route]]`, and those added through the API).
    fn routes(&self) -> Vec<RouteRepr>;
    /// The tunnels, each as its name and its `POST /tunnels` spec text
    /// (non-secret: key and PSK files are named by path and must exist on
    /// both gateways).
    fn tunnels(&self) -> Vec<(String, String)>;
    /// The name a tunnel spec carries (`None`: not a spec).
    fn tunnel_name(&self, spec: &str) -> Option<String>;
    fn add_route(&mut self, r: &RouteRepr) -> Result<(), String>;
    fn del_route(&mut self, r: &RouteRepr) -> Result<(), String>;
    fn add_tunnel(&mut self, spec: &str) -> Result<(), String>;
    fn del_tunnel(&mut self, name: &str) -> Result<(), String>;
}

/// What applying one set took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Items in the set.
    pub items: usize,
    /// Added, changed and removed.
    pub changes: u64,
    /// Refused (retried with the active's next resend).
    pub errors: u64,
}

/// The chunks of one set (routes or tunnels) being gathered: a newer
/// generation starts over; complete once every chunk is here.
#[derive(Debug)]
pub struct Gather<T> {
    generation: u64,
    chunks: HashMap<u16, Vec<T>>,
    /// The generation last applied whole.
    applied: Option<u64>,
}

impl<T> Default for Gather<T> {
    fn default() -> Self {
        Gather {
            generation: 0,
            chunks: HashMap::new(),
            applied: None,
        }
    }
}

impl<T: Clone> Gather<T> {
    /// Keeps chunk `chunk` of `chunks` of `generation`; the whole set once
    /// it is complete.
    pub fn add(
        &mut self,
        generation: u64,
        chunk: u16,
        chunks: u16,
        items: Vec<T>,
    ) -> Option<Vec<T>> {
        if self.generation != generation {
            self.generation = generation;
            self.chunks.clear();
        }
        self.chunks.insert(chunk, items);
        (self.chunks.len() == usize::from(chunks)).then(|| {
            let mut all = Vec::new();
            for i in 0..chunks {
                all.extend(self.chunks.remove(&i).unwrap_or_default());
            }
            all
        })
    }

    /// Keeps chunk `(generation, chunk, chunks)` holding `items`; `apply`s
    /// the set once every chunk of a generation not yet applied whole is
    /// here, and says what it did. A set that did not apply whole (a
    /// route via a tunnel not here yet) is applied again from the active's
    /// next resend.
    pub fn gather(
        &mut self,
        (generation, chunk, chunks): (u64, u16, u16),
        items: &[T],
        apply: impl FnOnce(&[T]) -> Applied,
    ) -> Option<Applied> {
        if self.applied == Some(generation) {
            return None;
        }
        let all = self.add(generation, chunk, chunks, items.to_vec())?;
        let a = apply(&all);
        if a.errors == 0 {
            self.applied = Some(generation);
        }
        Some(a)
    }
}

/// A set's generation: a hash of its items (sorted by the caller).
pub fn generation_of<T: Hash>(items: &[T]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    items.hash(&mut h);
    h.finish()
}

/// The running static routes, sorted, and their generation.
pub fn our_routes(run: &dyn Running) -> (u64, Vec<RouteRepr>) {
    let mut v = run.routes();
    v.sort();
    (generation_of(&v), v)
}

/// The running tunnels' specs, sorted by name, and their generation.
pub fn our_tunnels(run: &dyn Running) -> (u64, Vec<String>) {
    let mut v = run.tunnels();
    v.sort();
    let v: Vec<String> = v.into_iter().map(|x| x.1).collect();
    (generation_of(&v), v)
}

/// Makes our static routes the active's: removes ours it lacks (or has
/// with another next hop), then adds its own.
pub fn apply_routes(run: &mut dyn Running, want: &[RouteRepr]) -> Applied {
    let (_, have) = our_routes(run);
    let key = |r: &RouteRepr| (r.vrf.clone(), r.prefix.clone());
    let want_keys: HashMap<(String, String), &RouteRepr> =
        want.iter().map(|r| (key(r), r)).collect();
    let mut a = Applied {
        items: want.len(),
        ..Applied::default()
    };
    for r in &have {
        if want_keys.get(&key(r)).is_none_or(|w| w.via != r.via) {
            match run.del_route(r) {
                Ok(()) => a.changes += 1,
                Err(e) => {
                    a.errors += 1;
                    warn!(vrf = %r.vrf, prefix = %r.prefix, "state sync: removing a route the active lacks: {e}");
                }
            }
        }
    }
    let have_now: HashSet<RouteRepr> = our_routes(run).1.into_iter().collect();
    for r in want {
        if have_now.contains(r) {
            continue;
        }
        match run.add_route(r) {
            Ok(()) => a.changes += 1,
            Err(e) => {
                a.errors += 1;
                warn!(vrf = %r.vrf, prefix = %r.prefix, via = %r.via, "state sync: adding the active's route: {e}");
            }
        }
    }
    if a.changes > 0 || a.errors > 0 {
        info!(
            routes = want.len(),
            changes = a.changes,
            errors = a.errors,
            "state sync: static routes follow the active"
        );
    }
    a
}

/// Makes our tunnels the active's: removes ours it lacks or has with
/// another spec (a tunnel still routed is refused until the routes
/// follow, then retried), then adds its own.
pub fn apply_tunnels(run: &mut dyn Running, want: &[String]) -> Applied {
    let want: HashMap<String, &String> = want
        .iter()
        .filter_map(|w| Some((run.tunnel_name(w)?, w)))
        .collect();
    let mut a = Applied {
        items: want.len(),
        ..Applied::default()
    };
    for (name, spec) in run.tunnels() {
        if want.get(&name).is_some_and(|w| **w == spec) {
            continue;
        }
        match run.del_tunnel(&name) {
            Ok(()) => a.changes += 1,
            Err(e) => {
                a.errors += 1;
                warn!(tunnel = %name, "state sync: removing a tunnel the active lacks: {e}");
            }
        }
    }
    let have_now: HashSet<String> = run.tunnels().into_iter().map(|x| x.1).collect();
    let mut names: Vec<&String> = want.keys().collect();
    names.sort();
    for name in names {
        let w = want[name];
        if have_now.contains(w) {
            continue;
        }
        match run.add_tunnel(w) {
            Ok(()) => a.changes += 1,
            Err(e) => {
                a.errors += 1;
                warn!(tunnel = %name, "state sync: adding the active's tunnel: {e}");
            }
        }
    }
    if a.changes > 0 || a.errors > 0 {
        info!(
            tunnels = want.len(),
            changes = a.changes,
            errors = a.errors,
            "state sync: tunnels follow the active"
        );
    }
    a
}
