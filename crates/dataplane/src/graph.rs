//! The vector graph: nodes take whole vectors and hand packets on to their
//! next nodes in bulk (FD.io VPP's model).
//!
//! The node set is fixed when the worker starts: every node has a
//! [`NodeId`], and its pending vector is the slot of that id. Adding a node
//! (gre-encap, esp-encrypt, ...) is adding a file under `nodes/`, one line
//! to the list in `nodes.rs`, and arcs from the nodes that feed it. [`Graph::run`] processes
//! pending vectors node by node, in id order (roughly topological), until
//! all are empty or [`MAX_PASSES`] passes ran.
//!
//! Pending vectors are allocated once with room for two full vectors; a
//! burst that fans in beyond that grows a vector once, and it keeps the
//! capacity. Growth is bounded: every packet in flight is a buffer of the
//! worker's fixed-size pool.

use crate::counters::{Counter, NodeCounters, PortCounters, WorkerCounters};
use crate::fib::FxMap;
use crate::neighbour::solicited::Solicited;
use crate::neighbour::{Binding, NeighConfig, NeighbourShared, NeighbourTable};
use crate::nodes::icmp_error::IcmpBudgets;
use crate::tables::Tables;
use crate::trace::Trace;
use packet::buffer::{Packet, Pool};
use std::net::IpAddr;
use std::sync::Arc;

/// Bits of `Meta::flags`.
pub mod flags {
    /// Built by the gateway itself (echo reply, ICMP error, ND): the
    /// rewrite must not decrement its TTL, and icmp-error must not answer
    /// it.
    pub const LOCAL: u16 = 1 << 0;
    /// The L2 destination was broadcast or multicast (no ICMP errors about
    /// it, RFC 1812 §4.3.2.7).
    pub const L2_MULTICAST: u16 = 1 << 1;
    /// The L3 header was already rewritten (TTL decremented, MTU checked):
    /// a fragment or a packet released by neighbour resolution.
    pub const L3_DONE: u16 = 1 << 2;
    /// Decapsulated from an overlay tunnel: a candidate for receive segment
    /// coalescing at output.
    pub const DECAP: u16 = 1 << 3;
}

/// Passes over the node list per [`Graph::run`]; packets still pending
/// after that (a routing loop through icmp-error, say) are dropped.
pub const MAX_PASSES: usize = 8;

pub use crate::nodes::NodeId;

/// A graph node.
pub trait Node: Send {
    fn name(&self) -> &'static str;
    /// Drop reasons, indexed by the `reason` given to [`Next::drop`].
    fn error_names(&self) -> &'static [&'static str];
    /// Nodes this one may enqueue to.
    fn next_nodes(&self) -> &'static [NodeId];
    /// Consumes every packet of `input`, each to a next node or dropped.
    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>);
}

/// Where a node sends its packets.
pub struct Next<'a> {
    node: &'static str,
    allowed: &'static [NodeId],
    pending: &'a mut [Vec<Packet>],
    drops: &'a mut Vec<Packet>,
    errors: &'a [Counter],
}

impl Next<'_> {
    /// Hands `p` to node `to` (appended to its pending vector).
    #[inline]
    pub fn enqueue(&mut self, to: NodeId, p: Packet) {
        debug_assert!(
            self.allowed.contains(&to),
            "{} has no arc to {to:?}",
            self.node
        );
        self.pending[to.index()].push(p);
    }

    /// Adds `n` to the node's counter `reason` without dropping anything
    /// (event counters such as "coalesced-segments" share the error table,
    /// as VPP's node counters do).
    #[inline]
    pub fn count(&mut self, reason: u16, n: u64) {
        if let Some(c) = self.errors.get(usize::from(reason)) {
            c.add(n);
        }
    }

    /// Drops `p` for `reason` (an index into the node's error names): the
    /// buffer goes back to the pool, the node's counter for it goes up.
    #[inline]
    pub fn drop(&mut self, p: Packet, reason: u16) {
        if let Some(c) = self.errors.get(usize::from(reason)) {
            c.add(1);
        }
        self.drops.push(p);
    }
}

/// Worker state the nodes work with.
pub struct Ctx {
    /// Routing tables, loaded once per vector by the worker.
    pub tables: Arc<Tables>,
    pub neigh: NeighbourTable,
    /// Cross-worker neighbour hints and this vector's snapshot of them.
    pub neigh_shared: Option<Arc<NeighbourShared>>,
    pub neigh_hints: Arc<FxMap<(u16, IpAddr), Binding>>,
    /// The ARP requests / NSs sent recently, by every worker sharing
    /// [`NeighbourShared`] (this worker's own until it joins): only an
    /// answer to one of them creates an entry.
    pub solicited: Arc<Solicited>,
    /// Monotonic time in milliseconds.
    pub now: u64,
    pub trace: Trace,
    pub icmp_limit: IcmpBudgets,
    pub pool: Pool,
    /// Per-port transmit vectors filled by interface-output.
    pub tx: Vec<Vec<Packet>>,
    /// Per-port state: false while a port is down (output dropped).
    pub port_up: Vec<bool>,
    /// Per port: the backend takes super-packets and partial checksums
    /// (`Port::offloads`), so interface-output leaves them alone.
    pub port_offloads: Vec<bool>,
    /// Per physical port: [`Port::udp_gso`](packet::port::Port::udp_gso).
    pub port_udp_gso: Vec<bool>,
    /// Where ip-local punts IKE datagrams ([`crate::punt::ike`]); `None`: IKE
    /// is not running and such datagrams are dropped.
    pub punt: Option<Arc<crate::punt::IkePunt>>,
    /// Where ip-local punts VRRP advertisements (`nodes/ip_local/vrrp_punt.rs`);
    /// `None`: no `[ha]`, and they are not even delivered locally.
    pub vrrp: Option<Arc<crate::punt::VrrpPunt>>,
    /// Where ip-local hands BGP and BFD to the host's stack
    /// ([`crate::punt::host`]); `None`: no `[[routing.punt]]`.
    pub host: Option<Arc<crate::punt::host::HostPunt>>,
    /// This worker's counters, for the tunnel nodes to count traffic of
    /// virtual ports (set by the worker; `None` in bare node tests).
    pub counters: Option<Arc<WorkerCounters>>,
}

/// Virtual ports (tunnels) a worker can count beyond its physical ports.
/// Tunnels get ports `n_physical..n_physical + MAX_VIRTUAL_PORTS` (stable
/// for a tunnel's life, so a live add or delete never renumbers another
/// tunnel); the worker's per-port counters are sized for all of them at
/// startup, so a tunnel added while running is counted without the
/// worker reallocating anything. The per-port socket vectors (`tx`,
/// `port_up`, `port_offloads`) stay physical-only: a virtual port never
/// reaches a socket (interface-output hands it to tunnel-encap or
/// esp-encrypt, and a port that is no longer in the tables is dropped as
/// `interface-down`).
pub const MAX_VIRTUAL_PORTS: usize = 1024;

impl Ctx {
    /// Counters of (virtual) port `port`, if this worker counts it.
    #[inline]
    pub fn port_counters(&self, port: u16) -> Option<&PortCounters> {
        self.counters.as_ref()?.ports.get(usize::from(port))
    }

    pub fn new(tables: Arc<Tables>, pool: Pool, n_ports: usize, neigh: NeighConfig) -> Self {
        Ctx {
            tables,
            neigh: NeighbourTable::new(neigh),
            neigh_shared: None,
            neigh_hints: Arc::new(FxMap::default()),
            solicited: Arc::default(),
            now: 0,
            trace: Trace::default(),
            icmp_limit: IcmpBudgets::new(100, 100),
            pool,
            tx: (0..n_ports)
                .map(|_| Vec::with_capacity(2 * packet::VECTOR_SIZE))
                .collect(),
            port_up: vec![true; n_ports],
            port_offloads: vec![false; n_ports],
            port_udp_gso: vec![false; n_ports],
            punt: None,
            vrrp: None,
            host: None,
            counters: None,
        }
    }

    /// Records a learned binding locally and offers it to the other workers.
    pub fn learn(
        &mut self,
        port: u16,
        ip: IpAddr,
        mac: [u8; 6],
        how: crate::neighbour::Learn,
        released: &mut Vec<Packet>,
    ) -> bool {
        let ok = self.neigh.learn(port, ip, mac, how, self.now, released);
        if ok {
            if let Some(s) = &self.neigh_shared {
                s.publish(Binding {
                    port,
                    ip,
                    mac,
                    at: self.now,
                });
            }
        }
        ok
    }

    /// Neighbour lookup: local table first, then the cross-worker hints.
    #[inline]
    pub fn neighbour(&mut self, port: u16, ip: IpAddr) -> Option<[u8; 6]> {
        match self.neigh.lookup(port, ip, self.now) {
            crate::neighbour::Lookup::Hit(m) => Some(m),
            crate::neighbour::Lookup::Miss => {
                // Only when no local entry exists: an INCOMPLETE entry holds
                // packets and completes through its own solicitation.
                if self.neigh.get(port, ip).is_some() {
                    return None;
                }
                let b = *self.neigh_hints.get(&(port, ip))?;
                let mut none = Vec::new();
                self.neigh.learn(
                    port,
                    ip,
                    b.mac,
                    crate::neighbour::Learn::Unconfirmed,
                    self.now,
                    &mut none,
                );
                Some(b.mac)
            }
        }
    }
}

/// The node set with its pending vectors and counters.
pub struct Graph {
    nodes: Vec<Box<dyn Node>>,
    pending: Vec<Vec<Packet>>,
    scratch: Vec<Packet>,
    drops: Vec<Packet>,
    counters: Arc<WorkerCounters>,
    loop_drops: Counter,
}

impl Graph {
    /// A graph of `nodes`, which must be given in [`NodeId`] order.
    pub fn new(nodes: Vec<Box<dyn Node>>, n_ports: usize) -> Self {
        assert_eq!(nodes.len(), NodeId::COUNT, "one node per NodeId");
        let counters = Arc::new(WorkerCounters {
            nodes: nodes
                .iter()
                .map(|n| NodeCounters::new(n.name(), n.error_names()))
                .collect(),
            ports: (0..n_ports).map(|_| PortCounters::default()).collect(),
        });
        Graph {
            pending: (0..nodes.len())
                .map(|_| Vec::with_capacity(2 * packet::VECTOR_SIZE))
                .collect(),
            nodes,
            scratch: Vec::with_capacity(2 * packet::VECTOR_SIZE),
            drops: Vec::with_capacity(2 * packet::VECTOR_SIZE),
            counters,
            loop_drops: Counter::default(),
        }
    }

    /// The standard IPv4/IPv6 router graph.
    pub fn standard(n_ports: usize) -> Self {
        Self::new(crate::nodes::standard(), n_ports)
    }

    pub fn counters(&self) -> Arc<WorkerCounters> {
        self.counters.clone()
    }

    /// Packets dropped because they were still pending after [`MAX_PASSES`].
    pub fn loop_drops(&self) -> u64 {
        self.loop_drops.get()
    }

    /// Appends `pkts` (emptied) to the pending vector of `to`.
    pub fn input(&mut self, to: NodeId, pkts: &mut Vec<Packet>) {
        self.pending[to.index()].append(pkts);
    }

    /// Queues one packet for `to`.
    pub fn input_one(&mut self, to: NodeId, p: Packet) {
        self.pending[to.index()].push(p);
    }

    /// Counts `n` drops of `node` for `reason` that happened outside a
    /// node (neighbour resolution failed in a timer, say).
    pub fn count_drops(&self, node: NodeId, reason: u16, n: u64) {
        if let Some(c) = self.counters.nodes[node.index()]
            .errors
            .get(usize::from(reason))
        {
            c.add(n);
        }
    }

    /// Runs nodes until nothing is pending (at most [`MAX_PASSES`] passes).
    pub fn run(&mut self, cx: &mut Ctx) {
        for _ in 0..MAX_PASSES {
            let mut any = false;
            for i in 0..self.nodes.len() {
                if self.pending[i].is_empty() {
                    continue;
                }
                any = true;
                std::mem::swap(&mut self.pending[i], &mut self.scratch);
                let node = &mut self.nodes[i];
                let c = &self.counters.nodes[i];
                c.vectors.add(1);
                c.packets.add(self.scratch.len() as u64);
                let mut next = Next {
                    node: node.name(),
                    allowed: node.next_nodes(),
                    pending: &mut self.pending,
                    drops: &mut self.drops,
                    errors: &c.errors,
                };
                node.process(cx, &mut self.scratch, &mut next);
                // A node must consume its input; anything left is a bug
                // but must not leak buffers.
                debug_assert!(
                    self.scratch.is_empty(),
                    "{} left packets",
                    self.nodes[i].name()
                );
                cx.pool.free_all(&mut self.scratch);
                cx.pool.free_all(&mut self.drops);
            }
            if !any {
                return;
            }
        }
        for v in &mut self.pending {
            self.loop_drops.add(v.len() as u64);
            cx.pool.free_all(v);
        }
    }
}
