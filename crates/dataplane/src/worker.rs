//! The worker loop: one thread, its own ports, pool, graph and counters.
//!
//! Each iteration receives a burst from every port into ethernet-input,
//! runs the graph, and transmits the per-port vectors. When a burst came
//! back empty the worker blocks in `poll(2)` on the ports' descriptors (up
//! to the next timer), so an idle gateway costs no CPU on a machine whose
//! cores it shares with the traffic; while packets keep coming it loops
//! without sleeping. With [`WorkerConfig::busy_poll`] it never blocks (one
//! CPU per worker kept busy, no wakeup per batch: DPDK's lcore model, for a
//! core dedicated to the worker; where the worker shares its CPU with a
//! sender it loses, see docs/benchmarks.md). Neighbour timers run every
//! [`TIMER_MS`]. A port that
//! fails (netdev gone) is closed, marked down and re-opened through the
//! [`PortFactory`] every [`RETRY_MS`]. Interfaces added or removed while
//! running reach the worker as [`Command::AttachPort`] and
//! [`Command::DetachPort`] in its mailbox (`worker/commands.rs`), handled
//! between two vectors: the fast path reads its port list without a lock,
//! and the only allocations (growing the per-port vectors) happen in that
//! command.

mod commands;

use commands::Capture;
pub use commands::{Captured, Command, NeighbourEntry, PortQueue, MAILBOX_DEPTH};

use crate::counters::WorkerCounters;
use crate::graph::{Ctx, Graph, NodeId};
use crate::neighbour::packets;
use crate::neighbour::{Learn, NeighConfig, NeighbourShared, Solicit};
use crate::nodes;
use crate::nodes::icmp_error::IcmpBudgets;
use crate::nodes::ip_rewrite::NEIGHBOUR_UNRESOLVED;
use crate::tables::SharedTables;
use crossbeam_channel::{Receiver, Sender};
use packet::buffer::{Packet, Pool};
use packet::port::Port;
use packet::VECTOR_SIZE;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Period of the neighbour / ICMP timers.
pub const TIMER_MS: u64 = 100;

/// Timer ticks between [`Port::recheck`] calls (≈ 1 s).
const RECHECK_TICKS: u64 = 10;
/// Period of re-open attempts for a failed port.
pub const RETRY_MS: u64 = 1000;

/// Re-opens port `index` named `name` (supplied by the binary).
pub type PortFactory = Box<dyn FnMut(u16, &str) -> io::Result<Box<dyn Port>> + Send>;

/// Worker parameters.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Buffers in the worker's pool.
    pub pool_size: usize,
    pub neigh: NeighConfig,
    /// ICMP errors per second and burst, per VRF (RFC 1812 §4.3.2.8).
    pub icmp_rate: u32,
    pub icmp_burst: u32,
    /// Never sleep in poll(2) when idle (`[gateway] busy_poll`).
    pub busy_poll: bool,
    /// Poll on this long after the last packet before sleeping
    /// (`[gateway] idle_spin_us`, [`packet::idle`]).
    pub idle_spin_us: u32,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            pool_size: 2048,
            neigh: NeighConfig::default(),
            icmp_rate: 100,
            icmp_burst: 100,
            busy_poll: false,
            idle_spin_us: packet::idle::DEFAULT_IDLE_SPIN_US,
        }
    }
}

struct PortSlot {
    name: String,
    port: Option<Box<dyn Port>>,
    /// An interface owns this slot: a closed `port` is re-opened. False
    /// for the slots of tunnels' virtual ports and of detached interfaces.
    attached: bool,
}

/// One dataplane thread.
pub struct Worker {
    pub id: usize,
    ports: Vec<PortSlot>,
    graph: Graph,
    cx: Ctx,
    shared: Arc<SharedTables>,
    factory: Option<PortFactory>,
    rx: Vec<Packet>,
    solicit: Vec<Solicit>,
    failed: Vec<Packet>,
    announce: Vec<Packet>,
    last_timer: u64,
    /// Timer ticks so far (for [`RECHECK_TICKS`]).
    ticks: u64,
    last_retry: u64,
    pending: Vec<(u16, IpAddr)>,
    released: Vec<Packet>,
    mailbox: (Sender<Command>, Receiver<Command>),
    capture: Option<Capture>,
    /// Loop iterations so far: a supervisor that sees it stand still knows
    /// the worker is wedged (the loop wakes at least every [`TIMER_MS`]).
    heartbeat: Arc<AtomicU64>,
    /// [`WorkerConfig::busy_poll`].
    busy_poll: bool,
    /// [`WorkerConfig::idle_spin_us`].
    idle: packet::IdleSpin,
}

impl Worker {
    /// A worker over `ports` (index = port id, as in the tables).
    pub fn new(
        id: usize,
        ports: Vec<Box<dyn Port>>,
        shared: Arc<SharedTables>,
        cfg: WorkerConfig,
    ) -> Self {
        let n = ports.len();
        let mut cx = Ctx::new(shared.load(), Pool::new(cfg.pool_size), n, cfg.neigh);
        cx.icmp_limit = IcmpBudgets::new(cfg.icmp_rate, cfg.icmp_burst);
        for (i, p) in ports.iter().enumerate() {
            cx.port_offloads[i] = p.offloads();
            cx.port_udp_gso[i] = p.udp_gso();
        }
        // Counters for every port a tunnel may get while running.
        let graph = Graph::standard(n + crate::graph::MAX_VIRTUAL_PORTS);
        cx.counters = Some(graph.counters());
        Worker {
            id,
            ports: ports
                .into_iter()
                .map(|p| PortSlot {
                    name: p.name().to_string(),
                    port: Some(p),
                    attached: true,
                })
                .collect(),
            graph,
            cx,
            shared,
            factory: None,
            rx: Vec::with_capacity(VECTOR_SIZE * 2),
            solicit: Vec::with_capacity(64),
            failed: Vec::with_capacity(64),
            announce: Vec::with_capacity(16),
            last_timer: 0,
            ticks: 0,
            last_retry: 0,
            pending: Vec::with_capacity(64),
            released: Vec::with_capacity(64),
            mailbox: crossbeam_channel::bounded(MAILBOX_DEPTH),
            capture: None,
            heartbeat: Arc::new(AtomicU64::new(0)),
            busy_poll: cfg.busy_poll,
            idle: packet::IdleSpin::new(cfg.idle_spin_us),
        }
    }

    /// Connects the VRRP punt ([`Ctx::vrrp`]): ip-local punts
    /// advertisements to it.
    pub fn set_vrrp(&mut self, punt: Arc<crate::punt::VrrpPunt>) {
        self.cx.vrrp = Some(punt);
    }

    /// Connects the IKE punt / inject path ([`crate::punt::ike`]): ip-local
    /// punts to it, and each loop iteration routes what it injects.
    pub fn set_ike_punt(&mut self, punt: Arc<crate::punt::IkePunt>) {
        self.cx.punt = Some(punt);
    }

    /// Connects the host punt ([`crate::punt::host`]): ip-local hands BGP
    /// and BFD to it, and each loop iteration routes what the host sent.
    pub fn set_host_punt(&mut self, host: Arc<crate::punt::host::HostPunt>) {
        self.cx.host = Some(host);
    }

    /// Routes the datagrams the control plane injected (at most a vector
    /// per iteration; the buffers come from this worker's pool).
    fn inject(&mut self) {
        if let Some(host) = self.cx.host.clone() {
            host.drain_inject(&mut self.cx.pool, &mut self.rx, &mut self.announce, 32);
        }
        if let Some(punt) = self.cx.punt.clone() {
            punt.drain_inject(&mut self.cx.pool, &mut self.rx, &mut self.announce, 32);
        }
        if !self.rx.is_empty() {
            self.graph.input(NodeId::Ip4Lookup, &mut self.rx);
        }
        if !self.announce.is_empty() {
            self.graph.input(NodeId::Ip6Lookup, &mut self.announce);
        }
    }

    /// How failed ports are re-opened.
    pub fn set_port_factory(&mut self, f: PortFactory) {
        self.factory = Some(f);
    }

    /// Joins the cross-worker neighbour hint exchange.
    pub fn set_neighbour_shared(&mut self, s: Arc<NeighbourShared>) {
        self.cx.solicited = s.solicited();
        self.cx.neigh_shared = Some(s);
    }

    pub fn counters(&self) -> Arc<WorkerCounters> {
        self.graph.counters()
    }

    /// The worker's loop count, advanced by [`Worker::run`] at least every
    /// [`TIMER_MS`] while it is healthy (the systemd watchdog reads it).
    pub fn heartbeat(&self) -> Arc<AtomicU64> {
        self.heartbeat.clone()
    }

    /// Graph and worker state (tests, `show` commands).
    pub fn ctx(&self) -> &Ctx {
        &self.cx
    }

    pub fn ctx_mut(&mut self) -> &mut Ctx {
        &mut self.cx
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Traces the next `n` received packets.
    pub fn trace_arm(&mut self, n: usize) {
        self.cx.trace.arm(n);
    }

    pub fn trace_drain(&mut self) -> Vec<String> {
        self.cx.trace.drain()
    }

    pub fn port_is_up(&self, port: u16) -> bool {
        self.cx
            .port_up
            .get(usize::from(port))
            .copied()
            .unwrap_or(false)
    }

    /// Sends gratuitous ARP and unsolicited NAs for every address of port
    /// `port` (interface up, RFC 5227 §3 / RFC 4861 §7.2.6).
    pub fn announce_port(&mut self, port: u16) {
        let t = self.shared.load();
        if let Some(ifc) = t.iface(port) {
            packets::announce(&mut self.cx.pool, ifc, &mut self.announce);
            self.graph
                .input(NodeId::InterfaceOutput, &mut self.announce);
        }
    }

    /// Announces every port that is up.
    pub fn announce_all(&mut self, now: u64) {
        self.cx.now = now;
        self.cx.tables = self.shared.load();
        for i in 0..self.ports.len() {
            if self.cx.port_up[i] {
                self.announce_port(i as u16);
            }
        }
        self.graph.run(&mut self.cx);
        self.flush();
    }

    /// One iteration at time `now` (ms, monotonic): receive from every
    /// port, run the graph, transmit, run due timers. Returns the number of
    /// packets received. Tests call this directly with a hand-driven clock.
    pub fn step(&mut self, now: u64) -> usize {
        self.cx.now = now;
        self.cx.tables = self.shared.load();
        if let Some(s) = &self.cx.neigh_shared {
            self.cx.neigh_hints = s.snapshot();
        }
        let mut received = 0;
        self.inject();
        let counters = self.graph.counters();
        for i in 0..self.ports.len() {
            let Some(port) = self.ports[i].port.as_mut() else {
                continue;
            };
            let before = self.rx.len();
            match port.rx_burst(&mut self.cx.pool, &mut self.rx, VECTOR_SIZE) {
                Ok(_) => {
                    let pc = &counters.ports[i];
                    let mut bytes = 0u64;
                    for p in &mut self.rx[before..] {
                        p.meta.rx_port = i as u16;
                        p.meta.tx_port = i as u16;
                        bytes += p.len() as u64;
                    }
                    let n = self.rx.len() - before;
                    if let Some(c) = self.capture.as_mut().filter(|c| c.port == i) {
                        c.take(&self.rx[before..], false);
                    }
                    pc.rx_packets.add(n as u64);
                    pc.rx_bytes.add(bytes);
                    received += n;
                }
                Err(_) => self.port_failed(i),
            }
        }
        if !self.rx.is_empty() {
            self.graph.input(NodeId::EthernetInput, &mut self.rx);
        }
        self.graph.run(&mut self.cx);
        if now.saturating_sub(self.last_timer) >= TIMER_MS {
            self.last_timer = now;
            self.timers(now);
        }
        self.flush();
        if now.saturating_sub(self.last_retry) >= RETRY_MS {
            self.last_retry = now;
            self.retry_ports();
        }
        received
    }

    /// Neighbour retransmits, failures and aging; cross-worker sync.
    fn timers(&mut self, now: u64) {
        self.complete_from_hints();
        self.cx.neigh.tick(now, &mut self.solicit, &mut self.failed);
        if !self.failed.is_empty() {
            self.graph.count_drops(
                NodeId::IpRewrite,
                NEIGHBOUR_UNRESOLVED,
                self.failed.len() as u64,
            );
            self.cx.pool.free_all(&mut self.failed);
        }
        let t = self.cx.tables.clone();
        for s in self.solicit.drain(..) {
            let Some(ifc) = t.iface(s.port) else { continue };
            self.cx.solicited.record(s.port, s.ip);
            let p = match s.ip {
                IpAddr::V4(a) => packets::arp_request(&mut self.cx.pool, ifc, a, s.unicast),
                IpAddr::V6(a) => packets::neighbor_solicit(&mut self.cx.pool, ifc, a, s.unicast),
            };
            if let Some(p) = p {
                self.graph.input_one(NodeId::InterfaceOutput, p);
            }
        }
        self.graph.run(&mut self.cx);
        if let Some(s) = &self.cx.neigh_shared {
            s.sync(now);
        }
        for i in 0..self.ports.len() {
            if self.ports[i].port.as_ref().is_some_and(|p| !p.is_alive()) {
                self.port_failed(i);
            }
        }
        for i in 0..self.ports.len() {
            self.collect_drops(i);
        }
        self.ticks = self.ticks.wrapping_add(1);
        if self.ticks.is_multiple_of(RECHECK_TICKS) {
            for (i, slot) in self.ports.iter_mut().enumerate() {
                if let Some(p) = slot.port.as_mut() {
                    p.recheck();
                    self.cx.port_udp_gso[i] = p.udp_gso();
                }
            }
        }
    }

    /// Adds what port `i` lost since the last poll to its counters. Its
    /// transmit losses are already in `drops` (counted by `flush` from the
    /// shortfall of `tx_burst`): only their breakdown is added here.
    fn collect_drops(&mut self, i: usize) {
        let Some(port) = self.ports[i].port.as_mut() else {
            return;
        };
        let d = port.take_drops();
        let counters = self.graph.counters();
        let Some(pc) = counters.ports.get(i) else {
            return;
        };
        pc.rx_missed.add(d.rx_ring_full);
        pc.rx_errors.add(d.rx_bad);
        pc.tx_errors.add(d.tx_rejected);
        pc.drops.add(d.rx_ring_full.saturating_add(d.rx_bad));
    }

    /// Completes local INCOMPLETE entries that another worker resolved: the
    /// reply to a solicitation sent here may have been fanned out to another
    /// worker, which published the binding. Released packets already carry
    /// their rewritten L3 header; they get their L2 header and go out.
    fn complete_from_hints(&mut self) {
        let Some(shared) = self.cx.neigh_shared.clone() else {
            return;
        };
        shared.sync(self.cx.now);
        self.cx.neigh_hints = shared.snapshot();
        self.pending.clear();
        self.cx.neigh.incomplete(&mut self.pending);
        for i in 0..self.pending.len() {
            let (port, ip) = self.pending[i];
            let Some(b) = self.cx.neigh_hints.get(&(port, ip)).copied() else {
                continue;
            };
            let mut released = std::mem::take(&mut self.released);
            self.cx.neigh.learn(
                port,
                ip,
                b.mac,
                Learn::Unconfirmed,
                self.cx.now,
                &mut released,
            );
            let src = self.cx.tables.iface(port).map_or([0; 6], |i| i.mac);
            for mut p in released.drain(..) {
                let et = nodes::ip_ethertype(&p);
                if nodes::push_eth(&mut p, b.mac, src, et) {
                    p.meta.tx_port = port;
                    self.graph.input_one(NodeId::InterfaceOutput, p);
                } else {
                    self.cx.pool.free(p);
                }
            }
            self.released = released;
        }
    }

    /// Hands every per-port transmit vector to its port.
    fn flush(&mut self) {
        let counters = self.graph.counters();
        for i in 0..self.cx.tx.len() {
            if self.cx.tx[i].is_empty() {
                continue;
            }
            let n = self.cx.tx[i].len() as u64;
            let pc = &counters.ports[i];
            if let Some(c) = self.capture.as_mut().filter(|c| c.port == i) {
                c.take(&self.cx.tx[i], true);
            }
            match self.ports[i].port.as_mut() {
                Some(port) => match port.tx_burst(&mut self.cx.tx[i], &mut self.cx.pool) {
                    Ok(sent) => {
                        // What the kernel took, as its own counters count.
                        pc.tx_packets.add(sent.packets as u64);
                        pc.tx_bytes.add(sent.bytes);
                        pc.drops.add(n.saturating_sub(sent.packets as u64));
                    }
                    Err(_) => {
                        pc.drops.add(n);
                        self.port_failed(i);
                    }
                },
                None => pc.drops.add(n),
            }
            // Whatever the backend left behind goes back to the pool.
            self.cx.pool.free_all(&mut self.cx.tx[i]);
        }
    }

    /// Closes a failed port; it is re-opened by [`Worker::retry_ports`].
    fn port_failed(&mut self, i: usize) {
        // What the closing socket lost is counted before it goes.
        self.collect_drops(i);
        if self.ports[i].port.take().is_some() && self.ports[i].attached {
            tracing::warn!(worker = self.id, port = %self.ports[i].name, "port failed, marked down");
        }
        self.cx.port_up[i] = false;
        // Packets that waited for a neighbour on it are lost: counted.
        self.cx.neigh.flush_port(i as u16, &mut self.failed);
        if !self.failed.is_empty() {
            self.graph.count_drops(
                NodeId::IpRewrite,
                NEIGHBOUR_UNRESOLVED,
                self.failed.len() as u64,
            );
        }
        self.cx.pool.free_all(&mut self.failed);
        self.cx.pool.free_all(&mut self.cx.tx[i]);
    }

    fn retry_ports(&mut self) {
        let Some(f) = self.factory.as_mut() else {
            return;
        };
        let mut reopened = Vec::new();
        for (i, slot) in self.ports.iter_mut().enumerate() {
            if slot.port.is_some() || !slot.attached {
                continue;
            }
            if let Ok(p) = f(i as u16, &slot.name) {
                tracing::info!(port = %slot.name, "port re-opened");
                self.cx.port_offloads[i] = p.offloads();
                self.cx.port_udp_gso[i] = p.udp_gso();
                slot.port = Some(p);
                self.cx.port_up[i] = true;
                reopened.push(i as u16);
            }
        }
        for i in reopened {
            self.announce_port(i);
        }
        self.graph.run(&mut self.cx);
        self.flush();
    }

    /// Runs until `stop` is set: announce, then step; block in `poll(2)`
    /// while idle, unless [`WorkerConfig::busy_poll`].
    pub fn run(&mut self, stop: &AtomicBool) {
        let start = Instant::now();
        let now = || start.elapsed().as_millis() as u64;
        self.announce_all(now());
        while !stop.load(Ordering::Relaxed) {
            self.heartbeat.fetch_add(1, Ordering::Relaxed);
            // Control commands: once per iteration, never blocking.
            self.handle_commands();
            let received = self.step(now());
            if received > 0 {
                self.idle.busy();
                continue;
            }
            if self.busy_poll {
                std::hint::spin_loop();
                continue;
            }
            if self.idle.keep_polling() {
                continue;
            }
            let wait = TIMER_MS
                .saturating_sub(now().saturating_sub(self.last_timer))
                .max(1);
            self.wait_readable(wait);
        }
    }

    /// Blocks until a port has packets or `ms` pass (only when idle, so the
    /// small allocation of the descriptor list is off the fast path).
    fn wait_readable(&self, ms: u64) {
        let mut fds: Vec<PollFd<'_>> = self
            .ports
            .iter()
            .filter_map(|s| s.port.as_ref().and_then(|p| p.poll_fd()))
            .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
            .collect();
        if fds.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(ms));
            return;
        }
        let timeout = Timespec {
            tv_sec: (ms / 1000) as i64,
            tv_nsec: ((ms % 1000) * 1_000_000) as i64,
        };
        // EINTR and friends just end the wait early.
        let _ = poll(&mut fds, Some(&timeout));
    }
}

#[cfg(test)]
mod drop_tests {
    use super::*;
    use crate::tables::TablesBuilder;
    use crate::testing::{arp, eth, MockPort};
    use packet::port::PortDrops;
    use std::net::Ipv4Addr;
    use wire::arp::Operation;

    const GW: [u8; 6] = [2, 0, 0, 0, 0, 1];

    /// The port's own drops reach the counters at the timer tick, once each;
    /// transmit losses the flush already counted are only broken down; a
    /// refused frame's bytes are not counted as sent.
    #[test]
    fn port_drops_are_polled_into_counters_without_double_counting() {
        let mut b = TablesBuilder::new();
        b.add_interface(0, "lan0", GW, 1500, 0, &["10.1.0.1/24".parse().unwrap()]);
        let shared = SharedTables::new(b.build().unwrap());
        let (port, h) = MockPort::new("lan0", GW, 1500);
        let mut w = Worker::new(0, vec![Box::new(port)], shared, WorkerConfig::default());
        let port0 = |w: &Worker| w.counters().snapshot().ports[0];

        // Three ARP requests for the gateway: three replies in one burst,
        // of which the "ring" takes one.
        h.set_tx_room(Some(1));
        for i in 0..3u8 {
            let mac = [2, 0, 0, 0, 1, i];
            h.inject(eth(
                [0xff; 6],
                mac,
                0x0806,
                &arp(
                    Operation::Request,
                    mac,
                    Ipv4Addr::new(10, 1, 0, 10 + i),
                    [0; 6],
                    Ipv4Addr::new(10, 1, 0, 1),
                ),
            ));
        }
        h.add_drops(PortDrops {
            rx_ring_full: 5,
            rx_bad: 2,
            tx_rejected: 1,
            tx_full: 0,
        });
        w.step(1);
        let sent = h.take_tx();
        assert_eq!(sent.len(), 1);
        let c = port0(&w);
        assert_eq!((c.tx_packets, c.drops), (1, 2), "{c:?}");
        // The bytes of what left, not of what was handed over: the
        // kernel's counter for the netdev counts the same.
        assert_eq!(c.tx_bytes, sent[0].len() as u64, "{c:?}");
        // Not polled before the timer.
        assert_eq!((c.rx_missed, c.rx_errors, c.tx_errors), (0, 0, 0), "{c:?}");

        w.step(TIMER_MS);
        let c = port0(&w);
        assert_eq!(c.rx_missed, 5, "{c:?}");
        assert_eq!(c.rx_errors, 2, "{c:?}");
        assert_eq!(c.tx_errors, 1, "{c:?}");
        // 2 refused on transmit (counted by flush, the mock's tx_full not
        // added again) + 5 missed + 2 bad.
        assert_eq!(c.drops, 9, "{c:?}");

        // take_drops resets: the next tick adds only what is new.
        h.add_drops(PortDrops {
            rx_ring_full: 3,
            ..PortDrops::default()
        });
        w.step(2 * TIMER_MS);
        let c = port0(&w);
        assert_eq!((c.rx_missed, c.drops), (8, 12), "{c:?}");
        w.step(3 * TIMER_MS);
        assert_eq!(port0(&w), c);
    }

    /// A port attached live (a slot beyond the startup ports) is polled
    /// and answers at once; detached, it is closed for good: down, never
    /// re-opened by the factory, what it receives never read.
    #[test]
    fn ports_attach_and_detach_live() {
        let mut b = TablesBuilder::new();
        b.add_interface(0, "lan0", GW, 1500, 0, &["10.1.0.1/24".parse().unwrap()]);
        let mac5 = [2, 0, 0, 0, 0, 5];
        b.add_interface(5, "lan5", mac5, 1500, 0, &["10.5.0.1/24".parse().unwrap()]);
        let shared = SharedTables::new(b.build().unwrap());
        let (port, h0) = MockPort::new("lan0", GW, 1500);
        let mut w = Worker::new(0, vec![Box::new(port)], shared, WorkerConfig::default());
        let reopened = Arc::new(AtomicU64::new(0));
        let r = reopened.clone();
        w.set_port_factory(Box::new(move |_, name| {
            r.fetch_add(1, Ordering::Relaxed);
            let (p, _) = MockPort::new(name, [2, 0, 0, 0, 0, 9], 1500);
            Ok(Box::new(p))
        }));
        let (p5, h5) = MockPort::new("lan5", mac5, 1500);
        let (done, acked) = crossbeam_channel::bounded(1);
        w.mailbox()
            .try_send(Command::AttachPort {
                port: 5,
                io: PortQueue(Box::new(p5)),
                done,
            })
            .unwrap();
        w.handle_commands();
        assert!(acked.try_recv().is_ok());
        assert!(w.port_is_up(5) && !w.port_is_up(3));
        let who = |i: u8| {
            let mac = [2, 0, 0, 0, 1, i];
            eth(
                [0xff; 6],
                mac,
                0x0806,
                &arp(
                    Operation::Request,
                    mac,
                    Ipv4Addr::new(10, 5, 0, 10 + i),
                    [0; 6],
                    Ipv4Addr::new(10, 5, 0, 1),
                ),
            )
        };
        h5.inject(who(1));
        w.step(1);
        assert_eq!(h5.take_tx().len(), 1, "no ARP reply on the new port");
        assert_eq!(w.counters().snapshot().ports[5].rx_packets, 1);
        // A packet routed to an unresolved neighbour on it waits (an ARP
        // request goes out) until the port is detached: then it is
        // counted as lost, not leaked.
        let ping = crate::testing::icmp4_echo(1, 1, b"x");
        let ip = crate::testing::ipv4(
            Ipv4Addr::new(10, 1, 0, 9),
            Ipv4Addr::new(10, 5, 0, 77),
            1,
            64,
            false,
            &ping,
        );
        h0.inject(eth(GW, [2, 0, 0, 0, 1, 9], 0x0800, &ip));
        w.step(2);
        assert_eq!(h5.take_tx().len(), 1, "no ARP request for 10.5.0.77");
        let unresolved = |w: &Worker| {
            w.counters()
                .snapshot()
                .nodes
                .iter()
                .find(|n| n.name == "ip-rewrite")
                .and_then(|n| n.errors.iter().find(|(r, _)| r == "neighbour-unresolved"))
                .map_or(0, |(_, c)| *c)
        };
        assert_eq!(unresolved(&w), 0);
        let free = |w: &Worker| w.ctx().pool.available() + w.ctx().pool.available_small();
        let free0 = free(&w);

        let (done, acked) = crossbeam_channel::bounded(1);
        w.mailbox()
            .try_send(Command::DetachPort { port: 5, done })
            .unwrap();
        w.handle_commands();
        assert!(acked.try_recv().is_ok());
        assert!(!w.port_is_up(5));
        assert_eq!(unresolved(&w), 1, "the waiting packet was not counted");
        assert_eq!(free(&w), free0 + 1, "its buffer leaked");
        h5.inject(who(2));
        w.step(RETRY_MS + 1);
        w.step(2 * RETRY_MS + 2);
        assert_eq!(
            reopened.load(Ordering::Relaxed),
            0,
            "a detached port was re-opened"
        );
        assert!(h5.take_tx().is_empty());
        assert_eq!(w.counters().snapshot().ports[5].rx_packets, 1);
    }

    /// A port that fails hands in its last drops before it is closed.
    #[test]
    fn failed_port_reports_its_last_drops() {
        let mut b = TablesBuilder::new();
        b.add_interface(0, "lan0", GW, 1500, 0, &["10.1.0.1/24".parse().unwrap()]);
        let shared = SharedTables::new(b.build().unwrap());
        let (port, h) = MockPort::new("lan0", GW, 1500);
        let mut w = Worker::new(0, vec![Box::new(port)], shared, WorkerConfig::default());
        h.add_drops(PortDrops {
            rx_ring_full: 4,
            ..PortDrops::default()
        });
        h.set_fail(true);
        w.step(1);
        assert!(!w.port_is_up(0));
        let c = w.counters().snapshot().ports[0];
        assert_eq!((c.rx_missed, c.drops), (4, 4), "{c:?}");
    }
}
