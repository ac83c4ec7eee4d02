//! A worker's mailbox: the commands the control thread sends it, handled
//! between two vectors, among them the live attach and detach of ports
//! (the only place the per-port vectors grow, so the fast path never
//! allocates nor locks its port list).

use super::{PortSlot, Worker};
use crate::graph::NodeId;
use crate::neighbour::State;
use crossbeam_channel::{Sender, TryRecvError};
use packet::buffer::Packet;
use packet::port::Port;
use packet::VECTOR_SIZE;
use std::net::IpAddr;

/// Commands in a worker's mailbox (see [`Worker::mailbox`]).
#[derive(Debug)]
pub enum Command {
    /// Trace the next N received packets.
    TraceArm(usize),
    /// Send back (and forget) every trace line recorded so far.
    TraceDrain(Sender<Vec<String>>),
    /// Send back the neighbour table.
    Neighbours(Sender<Vec<NeighbourEntry>>),
    /// Copy up to `count` frames seen on `port` to `out` (never blocking:
    /// a full queue drops the copy). Replaces a running capture.
    CaptureStart {
        port: u16,
        count: usize,
        out: Sender<Captured>,
    },
    CaptureStop,
    /// Transmit this Ethernet frame on `port` as it is (the control plane's
    /// own frames: VRRP advertisements). Dropped when no buffer is free.
    SendFrame {
        port: u16,
        frame: Vec<u8>,
    },
    /// Gratuitous ARP and unsolicited NAs for every address of `port`
    /// (VRRP takeover, RFC 5798 §6.4.2).
    Announce(u16),
    /// Start polling this worker's queue `io` of an interface attached
    /// live, as port `port` (a port number no table uses yet: the
    /// tables naming it are published once every worker answered on
    /// `done`).
    AttachPort {
        port: u16,
        io: PortQueue,
        done: Sender<()>,
    },
    /// Stop polling `port` and close its queue (an interface removed
    /// live, already gone from the published tables): packets still
    /// queued for it are dropped and counted on the port, its neighbour
    /// entries and their waiting packets with them. Answers on `done`
    /// once the queue is closed.
    DetachPort {
        port: u16,
        done: Sender<()>,
    },
}

/// A worker's queue on a netdev, in transit to the worker.
pub struct PortQueue(pub Box<dyn Port>);

impl std::fmt::Debug for PortQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PortQueue({})", self.0.name())
    }
}

/// One neighbour table entry of one worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourEntry {
    pub port: u16,
    pub ip: IpAddr,
    pub mac: [u8; 6],
    pub state: State,
}

/// A captured frame: when (since the Unix epoch), which way, the bytes.
#[derive(Clone, Debug)]
pub struct Captured {
    pub ts: std::time::Duration,
    pub tx: bool,
    pub data: Vec<u8>,
}

/// Commands queued at most per worker; senders see `Full` beyond it.
pub const MAILBOX_DEPTH: usize = 64;

pub(super) struct Capture {
    pub(super) port: usize,
    remaining: usize,
    out: Sender<Captured>,
}

impl Capture {
    /// Copies `pkts` (allocates: only while a capture runs).
    #[cold]
    pub(super) fn take(&mut self, pkts: &[Packet], tx: bool) {
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        for p in pkts {
            if self.remaining == 0 {
                return;
            }
            let c = Captured {
                ts,
                tx,
                data: p.data().to_vec(),
            };
            if self.out.try_send(c).is_ok() {
                self.remaining -= 1;
            }
        }
    }
}

impl Worker {
    /// Where the control thread sends [`Command`]s; the worker checks it
    /// once per loop iteration and never blocks on it.
    pub fn mailbox(&self) -> Sender<Command> {
        self.mailbox.0.clone()
    }

    /// Handles every queued command (replies with `try_send`, so a control
    /// thread that gave up never stalls the worker).
    pub fn handle_commands(&mut self) {
        loop {
            let cmd = match self.mailbox.1.try_recv() {
                Ok(c) => c,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return,
            };
            match cmd {
                Command::TraceArm(n) => self.cx.trace.arm(n),
                Command::TraceDrain(reply) => {
                    let _ = reply.try_send(self.cx.trace.drain());
                }
                Command::Neighbours(reply) => {
                    let v = self
                        .cx
                        .neigh
                        .entries()
                        .map(|(port, ip, mac, state)| NeighbourEntry {
                            port,
                            ip,
                            mac,
                            state,
                        })
                        .collect();
                    let _ = reply.try_send(v);
                }
                Command::CaptureStart { port, count, out } => {
                    self.capture = (usize::from(port) < self.ports.len()).then_some(Capture {
                        port: usize::from(port),
                        remaining: count,
                        out,
                    });
                }
                Command::CaptureStop => self.capture = None,
                Command::SendFrame { port, frame } => self.send_frame(port, &frame),
                Command::Announce(port) => self.announce_port(port),
                Command::AttachPort { port, io, done } => {
                    self.attach_port(port, io.0);
                    let _ = done.try_send(());
                }
                Command::DetachPort { port, done } => {
                    self.detach_port(port);
                    let _ = done.try_send(());
                }
            }
        }
    }

    /// Polls `p` as port `port` from the next iteration on. The per-port
    /// vectors grow to hold it (a control-plane step: the fast path never
    /// allocates); a port beyond the counters' range is refused (closed).
    fn attach_port(&mut self, port: u16, p: Box<dyn Port>) {
        let i = usize::from(port);
        if i >= self.graph.counters().ports.len() {
            tracing::error!(
                worker = self.id,
                port,
                "attach: port beyond the counted range"
            );
            return;
        }
        if i >= self.ports.len() {
            let n = i + 1;
            self.ports.resize_with(n, || PortSlot {
                name: String::new(),
                port: None,
                attached: false,
            });
            self.cx.tx.resize_with(n, Vec::new);
            self.cx.port_up.resize(n, false);
            self.cx.port_offloads.resize(n, false);
            self.cx.port_udp_gso.resize(n, false);
        }
        // Whatever was left of an earlier user of the slot is dropped.
        self.detach_port(port);
        self.cx.tx[i].reserve(2 * VECTOR_SIZE);
        self.cx.port_offloads[i] = p.offloads();
        self.cx.port_udp_gso[i] = p.udp_gso();
        self.ports[i] = PortSlot {
            name: p.name().to_string(),
            port: Some(p),
            attached: true,
        };
        self.cx.port_up[i] = true;
    }

    /// Closes port `port` for good (see [`Command::DetachPort`]).
    fn detach_port(&mut self, port: u16) {
        let i = usize::from(port);
        if i >= self.ports.len() {
            return;
        }
        let counters = self.graph.counters();
        if let Some(pc) = counters.ports.get(i) {
            pc.drops.add(self.cx.tx[i].len() as u64);
        }
        // Its last drops, its neighbours (and the packets they held).
        self.ports[i].attached = false;
        self.port_failed(i);
    }

    fn send_frame(&mut self, port: u16, frame: &[u8]) {
        if usize::from(port) >= self.ports.len() {
            return;
        }
        let Some(mut p) = self.cx.pool.alloc() else {
            return;
        };
        match p.extend(frame.len()) {
            Some(b) => b.copy_from_slice(frame),
            None => {
                self.cx.pool.free(p);
                return;
            }
        }
        p.meta.tx_port = port;
        p.meta.rx_port = port;
        p.meta.flags |= crate::graph::flags::LOCAL;
        self.announce.push(p);
        self.graph
            .input(NodeId::InterfaceOutput, &mut self.announce);
    }
}
