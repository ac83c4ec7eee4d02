//! Where connections run: pure functions of the pool's view, used by the
//! leader ([`crate::leader`]) and by `pool rebalance --dry-run`.
//!
//! - **Capacity per class.** A member takes a connection only if its load
//!   in the connection's class (IPsec or the plain encapsulations) plus
//!   the connection's bandwidth stays within its capacity, and its tunnel
//!   count stays below its limit. Nothing is over-committed: what does not
//!   fit is refused with the reason ([`Refusal`]).
//! - **Headroom for N failures** ([`admit`]): a new connection is accepted
//!   only if, per class, everything reserved fits in the pool with its `N`
//!   largest members gone (the fluid bound: a pool that passes it can lose
//!   any N members and still hold the total; one connection too large for
//!   every survivor's free room is still refused at failover, and says so).
//! - **Anti-affinity.** Among the members a connection fits on, the one
//!   running fewest of its tenant's connections wins, then the least used
//!   (highest share of any kind, after the move), then the name: one
//!   tenant's connections spread over the members.
//! - **Sticky.** [`decide`] moves only what must move: connections whose
//!   owner is gone or drained, and new ones. A member that comes back gets
//!   nothing by itself; [`rebalance`] is a separate plan, applied by the
//!   leader at a bounded rate when an operator asks.

use crate::records::{Capacity, Class, Demand, Load, Reason};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// A live member as placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub capacity: Capacity,
    /// Healthy and not drained: may receive connections.
    pub accepting: bool,
    /// Drained: its connections move away.
    pub draining: bool,
}

/// A connection as placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conn {
    pub id: String,
    pub tenant: String,
    pub demand: Demand,
}

/// Why a connection cannot be placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No member accepts connections.
    NoMembers,
    /// The pool has too few members to keep `redundant` spare.
    TooFewMembers { members: usize, redundant: usize },
    /// With its N largest members gone, the pool cannot hold it.
    Headroom {
        class: Class,
        need: u64,
        free: u64,
        redundant: usize,
    },
    /// The same, counted in tunnels.
    HeadroomTunnels { free: u64, redundant: usize },
    /// No accepting member has room for it now.
    NoRoom {
        class: Class,
        need: u64,
        most_free: u64,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoMembers => f.write_str("no member of the pool accepts connections"),
            Refusal::TooFewMembers { members, redundant } => write!(
                f,
                "the pool has {members} accepting member(s) and keeps room for {redundant} to fail: add members"
            ),
            Refusal::Headroom {
                class,
                need,
                free,
                redundant,
            } => write!(
                f,
                "does not fit: {need} Mbit/s of {} needed, {free} Mbit/s free with the {redundant} largest member(s) kept spare",
                class.as_str()
            ),
            Refusal::HeadroomTunnels { free, redundant } => write!(
                f,
                "does not fit: {free} more tunnel(s) free with the {redundant} largest member(s) kept spare"
            ),
            Refusal::NoRoom {
                class,
                need,
                most_free,
            } => write!(
                f,
                "no member has room: {need} Mbit/s of {} needed, the freest member has {most_free} Mbit/s (or no tunnel slot)",
                class.as_str()
            ),
        }
    }
}

/// A move the leader writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub conn: String,
    pub from: Option<String>,
    pub to: String,
    pub reason: Reason,
}

/// Each member's load from `placed` (connection id to member; members
/// not in `members` are ignored).
pub fn loads<'a>(
    members: &'a [Member],
    conns: &[Conn],
    placed: &BTreeMap<String, String>,
) -> BTreeMap<&'a str, Load> {
    let mut out: BTreeMap<&str, Load> = members
        .iter()
        .map(|m| (m.name.as_str(), Load::default()))
        .collect();
    for c in conns {
        if let Some(l) = placed.get(&c.id).and_then(|m| out.get_mut(m.as_str())) {
            l.add(c.demand);
        }
    }
    out
}

/// Whether `new` can join `existing` with room left for the `redundant`
/// largest accepting members to fail (per class, then in tunnels).
pub fn admit(
    members: &[Member],
    existing: &[Conn],
    new: &Conn,
    redundant: usize,
) -> Result<(), Refusal> {
    let live: Vec<&Member> = members.iter().filter(|m| m.accepting).collect();
    if live.is_empty() {
        return Err(Refusal::NoMembers);
    }
    if live.len() <= redundant {
        return Err(Refusal::TooFewMembers {
            members: live.len(),
            redundant,
        });
    }
    let mut total = Load::default();
    for c in existing.iter().filter(|c| c.id != new.id) {
        total.add(c.demand);
    }
    let class = new.demand.class;
    let mut caps: Vec<u64> = live.iter().map(|m| m.capacity.mbps(class)).collect();
    caps.sort_unstable_by(|a, b| b.cmp(a));
    let usable: u64 = caps.iter().skip(redundant).sum();
    let free = usable.saturating_sub(total.mbps(class));
    if new.demand.mbps > free {
        return Err(Refusal::Headroom {
            class,
            need: new.demand.mbps,
            free,
            redundant,
        });
    }
    let mut slots: Vec<u64> = live.iter().map(|m| u64::from(m.capacity.tunnels)).collect();
    slots.sort_unstable_by(|a, b| b.cmp(a));
    let usable: u64 = slots.iter().skip(redundant).sum();
    let free = usable.saturating_sub(u64::from(total.tunnels));
    if free == 0 {
        return Err(Refusal::HeadroomTunnels { free, redundant });
    }
    Ok(())
}

/// Counts of each tenant's connections per member.
type TenantCounts<'a> = HashMap<(&'a str, &'a str), usize>;

fn tenant_counts<'a>(conns: &'a [Conn], placed: &'a BTreeMap<String, String>) -> TenantCounts<'a> {
    let mut n = HashMap::new();
    for c in conns {
        if let Some(m) = placed.get(&c.id) {
            *n.entry((c.tenant.as_str(), m.as_str())).or_insert(0) += 1;
        }
    }
    n
}

/// The member `c` should go to, of the accepting ones not in `exclude`
/// that have room (module docs: anti-affinity, then the least used).
pub fn choose<'a>(
    members: &'a [Member],
    loads: &BTreeMap<&str, Load>,
    same_tenant: impl Fn(&str) -> usize,
    c: &Conn,
    exclude: &[&str],
) -> Result<&'a str, Refusal> {
    let mut best: Option<((usize, u64, &str), &str)> = None;
    let mut most_free = 0;
    let mut any = false;
    for m in members
        .iter()
        .filter(|m| m.accepting && !exclude.contains(&m.name.as_str()))
    {
        any = true;
        let load = loads.get(m.name.as_str()).copied().unwrap_or_default();
        most_free = most_free.max(
            m.capacity
                .mbps(c.demand.class)
                .saturating_sub(load.mbps(c.demand.class)),
        );
        if !m.capacity.fits(&load, c.demand) {
            continue;
        }
        let mut after = load;
        after.add(c.demand);
        let key = (
            same_tenant(&m.name),
            m.capacity.used_permille(&after),
            m.name.as_str(),
        );
        if best.as_ref().is_none_or(|(k, _)| key < *k) {
            best = Some((key, m.name.as_str()));
        }
    }
    match best {
        Some((_, name)) => Ok(name),
        None if !any => Err(Refusal::NoMembers),
        None => Err(Refusal::NoRoom {
            class: c.demand.class,
            need: c.demand.mbps,
            most_free,
        }),
    }
}

/// What the leader must place now: connections whose owner is gone (a
/// failover, largest first so they pack), then connections never placed
/// (new, in id order), then those on drained members (drain). Returns the
/// moves and what could not be placed. `placed` maps a connection to its
/// owner (a member absent from `members` is gone).
pub fn decide(
    members: &[Member],
    conns: &[Conn],
    placed: &BTreeMap<String, String>,
) -> (Vec<Decision>, Vec<(String, Refusal)>) {
    let alive = |m: &str| members.iter().any(|x| x.name == m);
    let mut placed = placed.clone();
    let mut todo: Vec<(&Conn, Option<String>, Reason)> = Vec::new();
    for c in conns {
        match placed.get(&c.id) {
            Some(m) if !alive(m) => todo.push((c, Some(m.clone()), Reason::Failover)),
            Some(m) if members.iter().any(|x| &x.name == m && x.draining) => {
                todo.push((c, Some(m.clone()), Reason::Drain))
            }
            Some(_) => {}
            None => todo.push((c, None, Reason::New)),
        }
    }
    for (c, from, _) in &todo {
        if from.is_some() {
            placed.remove(&c.id);
        }
    }
    let rank = |r: Reason| match r {
        Reason::Failover => 0,
        Reason::New => 1,
        _ => 2,
    };
    todo.sort_by(|a, b| {
        rank(a.2)
            .cmp(&rank(b.2))
            .then(b.0.demand.mbps.cmp(&a.0.demand.mbps))
            .then(a.0.id.cmp(&b.0.id))
    });
    let mut load = loads(members, conns, &placed);
    let mut counts: HashMap<(String, String), usize> = tenant_counts(conns, &placed)
        .into_iter()
        .map(|((t, m), n)| ((t.to_owned(), m.to_owned()), n))
        .collect();
    let mut out = Vec::new();
    let mut refused = Vec::new();
    for (c, from, reason) in todo {
        let exclude: Vec<&str> = from.iter().map(String::as_str).collect();
        let pick = choose(
            members,
            &load,
            |m| {
                counts
                    .get(&(c.tenant.clone(), m.to_owned()))
                    .copied()
                    .unwrap_or(0)
            },
            c,
            &exclude,
        );
        match pick {
            Ok(to) => {
                if let Some(l) = load.get_mut(to) {
                    l.add(c.demand);
                }
                *counts.entry((c.tenant.clone(), to.to_owned())).or_insert(0) += 1;
                out.push(Decision {
                    conn: c.id.clone(),
                    from,
                    to: to.to_owned(),
                    reason,
                });
            }
            Err(r) => refused.push((c.id.clone(), r)),
        }
    }
    (out, refused)
}

/// How far a placement is from balanced: tenants' connections sharing a
/// member beyond an even spread (weighted first), then the spread of the
/// accepting members' use (highest share minus lowest, thousandths).
fn score(members: &[Member], conns: &[Conn], placed: &BTreeMap<String, String>) -> (usize, u64) {
    let accepting: Vec<&Member> = members.iter().filter(|m| m.accepting).collect();
    if accepting.is_empty() {
        return (0, 0);
    }
    let mut per_tenant: HashMap<&str, usize> = HashMap::new();
    for c in conns {
        *per_tenant.entry(c.tenant.as_str()).or_insert(0) += 1;
    }
    let counts = tenant_counts(conns, placed);
    let mut excess = 0;
    for ((t, _m), n) in &counts {
        let even = per_tenant
            .get(t)
            .copied()
            .unwrap_or(0)
            .div_ceil(accepting.len());
        excess += n.saturating_sub(even);
    }
    let l = loads(members, conns, placed);
    let shares: Vec<u64> = accepting
        .iter()
        .map(|m| {
            m.capacity
                .used_permille(&l.get(m.name.as_str()).copied().unwrap_or_default())
        })
        .collect();
    let spread =
        shares.iter().max().copied().unwrap_or(0) - shares.iter().min().copied().unwrap_or(0);
    (excess, spread)
}

/// The rebalance plan: up to `max_moves` moves, each the one that lowers
/// [`score`] most (tenant spread first, then use), each to a member with
/// room; stops when no move helps. Pure: `pool rebalance --dry-run` shows
/// it, the leader applies it one move at a time.
pub fn rebalance(
    members: &[Member],
    conns: &[Conn],
    placed: &BTreeMap<String, String>,
    max_moves: usize,
) -> Vec<Decision> {
    let mut placed = placed.clone();
    let mut out = Vec::new();
    let mut current = score(members, conns, &placed);
    while out.len() < max_moves {
        let load = loads(members, conns, &placed);
        let mut best: Option<((usize, u64), Decision)> = None;
        for c in conns {
            let Some(from) = placed.get(&c.id).cloned() else {
                continue;
            };
            for m in members.iter().filter(|m| m.accepting && m.name != from) {
                let l = load.get(m.name.as_str()).copied().unwrap_or_default();
                if !m.capacity.fits(&l, c.demand) {
                    continue;
                }
                placed.insert(c.id.clone(), m.name.clone());
                let s = score(members, conns, &placed);
                placed.insert(c.id.clone(), from.clone());
                if s < current && best.as_ref().is_none_or(|(b, _)| s < *b) {
                    best = Some((
                        s,
                        Decision {
                            conn: c.id.clone(),
                            from: Some(from.clone()),
                            to: m.name.clone(),
                            reason: Reason::Rebalance,
                        },
                    ));
                }
            }
        }
        let Some((s, d)) = best else {
            break;
        };
        placed.insert(d.conn.clone(), d.to.clone());
        current = s;
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests;
