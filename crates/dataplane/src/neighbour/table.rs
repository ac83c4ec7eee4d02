//! Neighbour tables: ARP (RFC 826) for IPv4 and Neighbor Discovery
//! (RFC 4861) for IPv6, one state machine for both.
//!
//! # Sharing between workers
//!
//! Each worker owns a [`NeighbourTable`]: the entries it uses, their timers
//! and the packets waiting for a resolution. Nothing in it is shared, so the
//! fast path takes no lock. What one worker learns must still help the
//! others (ARP replies arrive on whichever worker the kernel hashes them to),
//! so every learned binding is also sent, non-blocking, on a bounded channel
//! of [`NeighbourShared`]. Whoever calls [`NeighbourShared::sync`] (every
//! worker's 100 ms timer, or the control thread) drains the channel into a
//! new immutable map published with `ArcSwap`. A worker loads that map once
//! per vector and consults it only on a local miss, installing the binding
//! locally. Cost: one atomic load per vector, a channel send per *learned*
//! binding (not per packet); a full channel just loses a hint (the other
//! worker resolves by itself). Publishing copies the map, which is fine at
//! neighbour-table scale and at a 100 ms period.

use crate::fib::FxMap;
use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use packet::buffer::Packet;
use std::net::IpAddr;
use std::sync::Arc;

/// Timers and limits, in milliseconds and packets.
#[derive(Clone, Copy, Debug)]
pub struct NeighConfig {
    /// REACHABLE → STALE after this long without confirmation (RFC 4861
    /// REACHABLE_TIME, 30 s).
    pub reachable_ms: u64,
    /// Interval between solicitations (RFC 4861 RETRANS_TIMER, 1 s).
    pub retrans_ms: u64,
    /// Solicitations before giving up (MAX_MULTICAST_SOLICIT, 3).
    pub max_probes: u8,
    /// A STALE entry unused for this long is removed.
    pub gc_ms: u64,
    /// Packets held per unresolved entry (RFC 4861 §7.2.2 asks for at
    /// least one; VPP holds a few).
    pub queue_per_entry: usize,
    /// Packets held per port across all its unresolved entries.
    pub queue_per_port: usize,
    /// Entries per table.
    pub max_entries: usize,
    /// Entries per port (an interface, a tunnel's virtual port: one
    /// tenant's side). A new neighbour on a port at its quota, or in a
    /// full table, replaces the least recently used entry without queued
    /// packets of that port (of the port with most entries when the
    /// table is full): a flood on one port churns that port's entries
    /// only, and every other port can still resolve its next hops.
    pub max_per_port: usize,
}

impl Default for NeighConfig {
    fn default() -> Self {
        NeighConfig {
            reachable_ms: 30_000,
            retrans_ms: 1_000,
            max_probes: 3,
            gc_ms: 120_000,
            queue_per_entry: 4,
            queue_per_port: 64,
            max_entries: 4096,
            max_per_port: 1024,
        }
    }
}

/// RFC 4861 §7.3.2 states (DELAY folded into PROBE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Incomplete,
    Reachable,
    Stale,
    Probe,
}

struct Entry {
    mac: [u8; 6],
    state: State,
    /// When the binding was last confirmed (or the entry created).
    confirmed: u64,
    /// Last time a packet used the entry.
    used: u64,
    probes: u8,
    next_probe: u64,
    queue: Vec<Packet>,
}

/// Result of [`NeighbourTable::lookup`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    Hit([u8; 6]),
    Miss,
}

/// A solicitation the worker must send: ARP request / NS for `ip` on
/// `port`, to `unicast` when re-probing a known neighbour, else broadcast /
/// solicited-node multicast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Solicit {
    pub port: u16,
    pub ip: IpAddr,
    pub unicast: Option<[u8; 6]>,
}

/// How a binding was learned (RFC 4861 §7.2.5 / RFC 826 "merge").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learn {
    /// A reply to us (ARP reply, solicited NA): REACHABLE, create if needed.
    Confirmed,
    /// A request addressed to us (ARP request for our address, NS with a
    /// source link-layer option): create or update as STALE (§7.2.3).
    Unconfirmed,
    /// Overheard (gratuitous ARP, unsolicited NA): only update an existing
    /// entry, never create one.
    UpdateOnly,
}

/// A per-worker neighbour table.
pub struct NeighbourTable {
    map: FxMap<(u16, IpAddr), Entry>,
    queued_per_port: Vec<usize>,
    /// Entries per port (for the quota).
    per_port: Vec<usize>,
    /// Entries replaced to make room (quota or full table).
    evicted: u64,
    cfg: NeighConfig,
}

impl NeighbourTable {
    pub fn new(cfg: NeighConfig) -> Self {
        NeighbourTable {
            map: FxMap::default(),
            queued_per_port: Vec::new(),
            per_port: Vec::new(),
            evicted: 0,
            cfg,
        }
    }

    fn count(&self, port: u16) -> usize {
        self.per_port.get(usize::from(port)).copied().unwrap_or(0)
    }

    fn add_count(&mut self, port: u16, up: bool) {
        let p = usize::from(port);
        if self.per_port.len() <= p {
            self.per_port.resize(p + 1, 0);
        }
        if up {
            self.per_port[p] += 1;
        } else {
            self.per_port[p] = self.per_port[p].saturating_sub(1);
        }
    }

    /// Entries replaced so far to make room for new ones.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Makes room for a new entry on `port`: under its quota and in a
    /// table that is not full, evicting if needed (see
    /// [`NeighConfig::max_per_port`]). False if nothing can go (every
    /// candidate holds packets).
    fn room(&mut self, port: u16) -> bool {
        if self.count(port) >= self.cfg.max_per_port && !self.evict(port) {
            return false;
        }
        if self.map.len() >= self.cfg.max_entries {
            let busiest = (0..self.per_port.len())
                .max_by_key(|&p| self.per_port[p])
                .map_or(port, |p| p as u16);
            return self.evict(busiest);
        }
        true
    }

    /// Removes `port`'s least valuable entry without queued packets: the
    /// least recently used STALE one, else the least recently used of
    /// the others.
    fn evict(&mut self, port: u16) -> bool {
        let victim = self
            .map
            .iter()
            .filter(|((p, _), e)| *p == port && e.queue.is_empty())
            .min_by_key(|(_, e)| (e.state != State::Stale, e.used.max(e.confirmed)))
            .map(|(k, _)| *k);
        match victim {
            Some(k) => {
                self.map.remove(&k);
                self.add_count(port, false);
                self.evicted += 1;
                true
            }
            None => false,
        }
    }

    pub fn config(&self) -> &NeighConfig {
        &self.cfg
    }

    /// The MAC for `ip` on `port`. A STALE entry is used and starts a
    /// re-probe (RFC 4861 §7.3.3, DELAY/PROBE simplified); an INCOMPLETE one
    /// is a miss.
    #[inline]
    pub fn lookup(&mut self, port: u16, ip: IpAddr, now: u64) -> Lookup {
        match self.map.get_mut(&(port, ip)) {
            Some(e) if e.state != State::Incomplete => {
                e.used = now;
                if e.state == State::Stale {
                    e.state = State::Probe;
                    e.probes = 0;
                    e.next_probe = now;
                }
                Lookup::Hit(e.mac)
            }
            _ => Lookup::Miss,
        }
    }

    /// Holds `pkt` until `ip` on `port` is resolved. `Ok(true)`: a new
    /// INCOMPLETE entry was created and the caller sends the first
    /// solicitation now; `Ok(false)`: already being resolved; `Err(pkt)`:
    /// queue or table full, the caller drops it.
    pub fn enqueue(
        &mut self,
        port: u16,
        ip: IpAddr,
        pkt: Packet,
        now: u64,
    ) -> Result<bool, Packet> {
        let p = usize::from(port);
        if self.queued_per_port.len() <= p {
            self.queued_per_port.resize(p + 1, 0);
        }
        if self.queued_per_port[p] >= self.cfg.queue_per_port {
            return Err(pkt);
        }
        let qcap = self.cfg.queue_per_entry;
        let mut created = false;
        if !self.map.contains_key(&(port, ip)) {
            if !self.room(port) {
                return Err(pkt);
            }
            self.add_count(port, true);
        }
        let e = match self.map.get_mut(&(port, ip)) {
            Some(e) => e,
            None => {
                created = true;
                self.map.entry((port, ip)).or_insert(Entry {
                    mac: [0; 6],
                    state: State::Incomplete,
                    confirmed: now,
                    used: now,
                    probes: 1,
                    next_probe: now + self.cfg.retrans_ms,
                    queue: Vec::with_capacity(qcap),
                })
            }
        };
        if e.queue.len() >= qcap {
            return Err(pkt);
        }
        e.queue.push(pkt);
        self.queued_per_port[p] += 1;
        Ok(created)
    }

    /// Records `ip` → `mac` on `port`. Packets that were waiting for it are
    /// appended to `released` (the caller adds the L2 header and sends
    /// them). Returns whether the binding was stored.
    pub fn learn(
        &mut self,
        port: u16,
        ip: IpAddr,
        mac: [u8; 6],
        how: Learn,
        now: u64,
        released: &mut Vec<Packet>,
    ) -> bool {
        if let Some(e) = self.map.get_mut(&(port, ip)) {
            let changed = e.mac != mac;
            e.mac = mac;
            e.state = match (how, e.state) {
                (Learn::Confirmed, _) => State::Reachable,
                (_, State::Incomplete) => State::Stale,
                // Same address re-announced: keep a REACHABLE entry as is.
                (_, s) if !changed => s,
                _ => State::Stale,
            };
            if how == Learn::Confirmed || e.state == State::Stale {
                e.confirmed = now;
            }
            e.probes = 0;
            let n = e.queue.len();
            released.append(&mut e.queue);
            if let Some(q) = self.queued_per_port.get_mut(usize::from(port)) {
                *q = q.saturating_sub(n);
            }
            return true;
        }
        if how == Learn::UpdateOnly || !self.room(port) {
            return false;
        }
        self.add_count(port, true);
        self.map.insert(
            (port, ip),
            Entry {
                mac,
                state: if how == Learn::Confirmed {
                    State::Reachable
                } else {
                    State::Stale
                },
                confirmed: now,
                used: now,
                probes: 0,
                next_probe: 0,
                queue: Vec::new(),
            },
        );
        true
    }

    /// Runs the timers: retransmits solicitations (appended to `solicit`),
    /// fails entries that exhausted their probes (their queued packets go to
    /// `failed`, for a "neighbour-unresolved" drop), ages REACHABLE to STALE
    /// and removes unused STALE entries.
    pub fn tick(&mut self, now: u64, solicit: &mut Vec<Solicit>, failed: &mut Vec<Packet>) {
        let cfg = self.cfg;
        let qpp = &mut self.queued_per_port;
        let before = self.map.len();
        self.map.retain(|&(port, ip), e| match e.state {
            State::Incomplete | State::Probe => {
                if now < e.next_probe {
                    return true;
                }
                if e.probes >= cfg.max_probes {
                    if let Some(q) = qpp.get_mut(usize::from(port)) {
                        *q = q.saturating_sub(e.queue.len());
                    }
                    failed.append(&mut e.queue);
                    return false;
                }
                e.probes += 1;
                e.next_probe = now + cfg.retrans_ms;
                let unicast = (e.state == State::Probe).then_some(e.mac);
                solicit.push(Solicit { port, ip, unicast });
                true
            }
            State::Reachable => {
                if now.saturating_sub(e.confirmed) >= cfg.reachable_ms {
                    e.state = State::Stale;
                }
                true
            }
            State::Stale => now.saturating_sub(e.used.max(e.confirmed)) < cfg.gc_ms,
        });
        if self.map.len() != before {
            self.recount();
        }
    }

    fn recount(&mut self) {
        self.per_port.iter_mut().for_each(|c| *c = 0);
        let ports: Vec<u16> = self.map.keys().map(|(p, _)| *p).collect();
        for p in ports {
            self.add_count(p, true);
        }
    }

    /// Appends the keys of entries still being resolved (INCOMPLETE): the
    /// worker checks them against the other workers' hints, because the
    /// answer to our solicitation may be hashed to another worker's queue.
    pub fn incomplete(&self, out: &mut Vec<(u16, IpAddr)>) {
        out.extend(
            self.map
                .iter()
                .filter(|(_, e)| e.state == State::Incomplete)
                .map(|(k, _)| *k),
        );
    }

    /// State and MAC of an entry (tests, `show neighbours`).
    pub fn get(&self, port: u16, ip: IpAddr) -> Option<(State, [u8; 6])> {
        self.map.get(&(port, ip)).map(|e| (e.state, e.mac))
    }

    /// Number of packets held for `ip` on `port`.
    pub fn queued(&self, port: u16, ip: IpAddr) -> usize {
        self.map.get(&(port, ip)).map_or(0, |e| e.queue.len())
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Drops every entry of `port` (interface down), returning held packets.
    pub fn flush_port(&mut self, port: u16, failed: &mut Vec<Packet>) {
        self.map.retain(|&(p, _), e| {
            if p == port {
                failed.append(&mut e.queue);
                false
            } else {
                true
            }
        });
        if let Some(q) = self.queued_per_port.get_mut(usize::from(port)) {
            *q = 0;
        }
        if let Some(c) = self.per_port.get_mut(usize::from(port)) {
            *c = 0;
        }
    }

    /// Every entry as (port, address, MAC, state), for the management API.
    pub fn entries(&self) -> impl Iterator<Item = (u16, IpAddr, [u8; 6], State)> + '_ {
        self.map
            .iter()
            .map(|((p, ip), e)| (*p, *ip, e.mac, e.state))
    }

    /// `show neighbours`-like listing.
    pub fn show(&self) -> String {
        let mut rows: Vec<String> = self
            .map
            .iter()
            .map(|((p, ip), e)| format!("port {p} {ip} {} {:?}", fmt_mac(e.mac), e.state))
            .collect();
        rows.sort();
        rows.join("\n")
    }
}

/// aa:bb:cc:dd:ee:ff.
pub fn fmt_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// One learned binding, as sent between workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    pub port: u16,
    pub ip: IpAddr,
    pub mac: [u8; 6],
    pub at: u64,
}

/// The cross-worker neighbour hints (see the module documentation).
pub struct NeighbourShared {
    map: ArcSwap<FxMap<(u16, IpAddr), Binding>>,
    tx: Sender<Binding>,
    rx: Receiver<Binding>,
    /// Bindings older than this are dropped at publication.
    max_age_ms: u64,
    /// The solicitations every worker sent (see [`crate::neighbour::solicited`]).
    solicited: Arc<crate::neighbour::solicited::Solicited>,
}

impl NeighbourShared {
    pub fn new(capacity: usize, max_age_ms: u64) -> Arc<Self> {
        let (tx, rx) = crossbeam_channel::bounded(capacity);
        Arc::new(NeighbourShared {
            map: ArcSwap::from_pointee(FxMap::default()),
            tx,
            rx,
            max_age_ms,
            solicited: Arc::default(),
        })
    }

    /// The workers' shared record of their solicitations.
    pub fn solicited(&self) -> Arc<crate::neighbour::solicited::Solicited> {
        self.solicited.clone()
    }

    /// Offers a learned binding; never blocks (a full channel drops it).
    #[inline]
    pub fn publish(&self, b: Binding) -> bool {
        !matches!(
            self.tx.try_send(b),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_))
        )
    }

    /// The current published map (load once per vector).
    #[inline]
    pub fn snapshot(&self) -> Arc<FxMap<(u16, IpAddr), Binding>> {
        self.map.load_full()
    }

    /// Drains pending bindings into a new published map and expires old
    /// ones. Safe to call from several threads (read-copy-update).
    pub fn sync(&self, now: u64) {
        let mut batch: Vec<Binding> = self.rx.try_iter().take(4096).collect();
        let expire = self
            .map
            .load()
            .values()
            .any(|b| now.saturating_sub(b.at) > self.max_age_ms);
        if batch.is_empty() && !expire {
            return;
        }
        batch.sort_by_key(|b| b.at);
        self.map.rcu(|old| {
            let mut m: FxMap<(u16, IpAddr), Binding> = (**old).clone();
            m.retain(|_, b| now.saturating_sub(b.at) <= self.max_age_ms);
            for b in &batch {
                m.insert((b.port, b.ip), *b);
            }
            m
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::buffer::Pool;

    const M1: [u8; 6] = [2, 0, 0, 0, 0, 0x11];
    const M2: [u8; 6] = [2, 0, 0, 0, 0, 0x22];

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn resolve_queue_release() {
        let mut pool = Pool::new(8);
        let mut t = NeighbourTable::new(NeighConfig::default());
        let a = ip("10.0.0.2");
        assert_eq!(t.lookup(0, a, 0), Lookup::Miss);
        assert_eq!(t.enqueue(0, a, pool.alloc().unwrap(), 0).ok(), Some(true));
        assert_eq!(t.enqueue(0, a, pool.alloc().unwrap(), 0).ok(), Some(false));
        for _ in 0..2 {
            assert!(t.enqueue(0, a, pool.alloc().unwrap(), 0).is_ok());
        }
        // Fifth packet exceeds the per-entry queue.
        assert!(t.enqueue(0, a, pool.alloc().unwrap(), 0).is_err());
        assert_eq!(t.queued(0, a), 4);
        let mut rel = Vec::new();
        assert!(t.learn(0, a, M1, Learn::Confirmed, 10, &mut rel));
        assert_eq!(rel.len(), 4);
        assert_eq!(t.lookup(0, a, 11), Lookup::Hit(M1));
        assert_eq!(t.get(0, a).unwrap().0, State::Reachable);
    }

    #[test]
    fn retransmit_then_fail() {
        let mut pool = Pool::new(2);
        let mut t = NeighbourTable::new(NeighConfig::default());
        let a = ip("fe80::1");
        assert_eq!(t.enqueue(1, a, pool.alloc().unwrap(), 0).ok(), Some(true));
        let (mut s, mut f) = (Vec::new(), Vec::new());
        t.tick(500, &mut s, &mut f);
        assert!(s.is_empty());
        t.tick(1000, &mut s, &mut f);
        t.tick(2000, &mut s, &mut f);
        assert_eq!(s.len(), 2);
        assert!(s
            .iter()
            .all(|x| x.unicast.is_none() && x.port == 1 && x.ip == a));
        assert!(f.is_empty());
        t.tick(3000, &mut s, &mut f);
        assert_eq!(f.len(), 1);
        assert!(t.get(1, a).is_none());
        // The queue slot of the port is free again.
        assert_eq!(t.enqueue(1, a, f.pop().unwrap(), 3000).ok(), Some(true));
    }

    #[test]
    fn aging_stale_reprobe_and_gc() {
        let mut t = NeighbourTable::new(NeighConfig::default());
        let a = ip("10.0.0.3");
        let mut rel = Vec::new();
        t.learn(0, a, M1, Learn::Confirmed, 0, &mut rel);
        let (mut s, mut f) = (Vec::new(), Vec::new());
        t.tick(29_999, &mut s, &mut f);
        assert_eq!(t.get(0, a).unwrap().0, State::Reachable);
        t.tick(30_000, &mut s, &mut f);
        assert_eq!(t.get(0, a).unwrap().0, State::Stale);
        // Use of a STALE entry still forwards, and starts a unicast probe.
        assert_eq!(t.lookup(0, a, 31_000), Lookup::Hit(M1));
        t.tick(31_000, &mut s, &mut f);
        assert_eq!(
            s,
            vec![Solicit {
                port: 0,
                ip: a,
                unicast: Some(M1)
            }]
        );
        // A reply confirms it again.
        t.learn(0, a, M1, Learn::Confirmed, 31_500, &mut rel);
        assert_eq!(t.get(0, a).unwrap().0, State::Reachable);
        // Unused and stale long enough: collected.
        t.tick(70_000, &mut s, &mut f);
        assert_eq!(t.get(0, a).unwrap().0, State::Stale);
        t.tick(31_500 + 30_000 + 120_000, &mut s, &mut f);
        assert!(t.get(0, a).is_none());
    }

    #[test]
    fn probe_without_answer_removes_entry() {
        let mut t = NeighbourTable::new(NeighConfig::default());
        let a = ip("10.0.0.4");
        t.learn(0, a, M1, Learn::Unconfirmed, 0, &mut Vec::new());
        assert_eq!(t.lookup(0, a, 1), Lookup::Hit(M1));
        let (mut s, mut f) = (Vec::new(), Vec::new());
        for k in 0..4 {
            t.tick(1 + k * 1000, &mut s, &mut f);
        }
        assert_eq!(s.len(), 3);
        assert!(t.get(0, a).is_none());
    }

    #[test]
    fn update_only_does_not_create_and_override_changes_mac() {
        let mut t = NeighbourTable::new(NeighConfig::default());
        let a = ip("10.0.0.5");
        assert!(!t.learn(0, a, M1, Learn::UpdateOnly, 0, &mut Vec::new()));
        assert!(t.get(0, a).is_none());
        t.learn(0, a, M1, Learn::Confirmed, 0, &mut Vec::new());
        assert!(t.learn(0, a, M2, Learn::UpdateOnly, 1, &mut Vec::new()));
        assert_eq!(t.get(0, a), Some((State::Stale, M2)));
    }

    #[test]
    fn shared_hints_reach_other_workers() {
        let s = NeighbourShared::new(16, 60_000);
        let a = ip("10.0.0.6");
        assert!(s.publish(Binding {
            port: 0,
            ip: a,
            mac: M1,
            at: 5
        }));
        assert!(s.snapshot().is_empty());
        s.sync(5);
        assert_eq!(s.snapshot().get(&(0, a)).unwrap().mac, M1);
        s.sync(100_000);
        assert!(s.snapshot().is_empty());
        for i in 0..16 {
            assert!(s.publish(Binding {
                port: 0,
                ip: a,
                mac: M1,
                at: i
            }));
        }
        assert!(!s.publish(Binding {
            port: 0,
            ip: a,
            mac: M1,
            at: 0
        }));
    }
}
