//! Per-worker counters: per node (vectors, packets, drops per reason) and
//! per port (rx/tx packets and bytes, drops by where they happened).
//!
//! Each counter is an `AtomicU64` written only by its worker, with a plain
//! Relaxed load + store (no read-modify-write, so no locked instruction on
//! the fast path); any thread may read it with a Relaxed load for a
//! [`CounterSnapshot`]. Snapshots of all workers are summed with
//! [`CounterSnapshot::sum`].

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A single-writer counter.
#[derive(Default, Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning worker may call this.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Counters of one node.
#[derive(Debug)]
pub struct NodeCounters {
    pub name: &'static str,
    pub error_names: &'static [&'static str],
    /// Times the node ran (one vector each).
    pub vectors: Counter,
    pub packets: Counter,
    /// Indexed like `error_names`.
    pub errors: Box<[Counter]>,
}

impl NodeCounters {
    pub fn new(name: &'static str, error_names: &'static [&'static str]) -> Self {
        NodeCounters {
            name,
            error_names,
            vectors: Counter::default(),
            packets: Counter::default(),
            errors: error_names.iter().map(|_| Counter::default()).collect(),
        }
    }
}

/// Counters of one port.
///
/// `drops` is every packet lost at the port itself, in either direction:
/// transmit shortfall (the kernel took fewer than it was handed, or the port
/// was down) plus `rx_missed` plus `rx_errors`. The other three break part
/// of it down, like `ip -s link`'s columns; `tx_errors` is a subset of the
/// transmit shortfall already in `drops`, never added to it a second time.
/// Receive-side losses come from [`packet::Port::take_drops`], polled every
/// timer tick (~100 ms), so they lag the packet counters by up to that much.
#[derive(Debug, Default)]
pub struct PortCounters {
    pub rx_packets: Counter,
    pub rx_bytes: Counter,
    pub tx_packets: Counter,
    pub tx_bytes: Counter,
    /// All losses at the port (see the type's documentation).
    pub drops: Counter,
    /// Frames the kernel dropped because the receive ring was full.
    pub rx_missed: Counter,
    /// Frames received but unusable (bad descriptor or virtio-net header).
    pub rx_errors: Counter,
    /// Packets the kernel refused to transmit as malformed.
    pub tx_errors: Counter,
}

/// All counters of one worker (shared read-only with the management side).
#[derive(Debug)]
pub struct WorkerCounters {
    pub nodes: Vec<NodeCounters>,
    pub ports: Vec<PortCounters>,
}

impl WorkerCounters {
    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeSnapshot {
                    name: n.name.to_string(),
                    vectors: n.vectors.get(),
                    packets: n.packets.get(),
                    errors: n
                        .error_names
                        .iter()
                        .zip(n.errors.iter())
                        .map(|(e, c)| (e.to_string(), c.get()))
                        .collect(),
                })
                .collect(),
            ports: self
                .ports
                .iter()
                .map(|p| PortSnapshot {
                    rx_packets: p.rx_packets.get(),
                    rx_bytes: p.rx_bytes.get(),
                    tx_packets: p.tx_packets.get(),
                    tx_bytes: p.tx_bytes.get(),
                    drops: p.drops.get(),
                    rx_missed: p.rx_missed.get(),
                    rx_errors: p.rx_errors.get(),
                    tx_errors: p.tx_errors.get(),
                })
                .collect(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSnapshot {
    pub name: String,
    pub vectors: u64,
    pub packets: u64,
    pub errors: Vec<(String, u64)>,
}

/// [`PortCounters`] at one instant (same meanings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortSnapshot {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// All losses at the port: transmit shortfall + `rx_missed` + `rx_errors`.
    pub drops: u64,
    pub rx_missed: u64,
    pub rx_errors: u64,
    /// Part of the transmit shortfall in `drops`.
    pub tx_errors: u64,
}

/// Counters at one instant, of one worker or summed over several.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    pub nodes: Vec<NodeSnapshot>,
    pub ports: Vec<PortSnapshot>,
}

impl CounterSnapshot {
    /// Sums snapshots of several workers (nodes matched by name, ports by
    /// index).
    pub fn sum(snaps: &[CounterSnapshot]) -> CounterSnapshot {
        let mut out = CounterSnapshot::default();
        for s in snaps {
            for n in &s.nodes {
                let i = match out.nodes.iter().position(|o| o.name == n.name) {
                    Some(i) => i,
                    None => {
                        out.nodes.push(NodeSnapshot {
                            name: n.name.clone(),
                            ..Default::default()
                        });
                        out.nodes.len() - 1
                    }
                };
                let o = &mut out.nodes[i];
                o.vectors += n.vectors;
                o.packets += n.packets;
                for (e, c) in &n.errors {
                    match o.errors.iter_mut().find(|(x, _)| x == e) {
                        Some((_, v)) => *v += c,
                        None => o.errors.push((e.clone(), *c)),
                    }
                }
            }
            if out.ports.len() < s.ports.len() {
                out.ports.resize(s.ports.len(), PortSnapshot::default());
            }
            for (o, p) in out.ports.iter_mut().zip(&s.ports) {
                o.rx_packets += p.rx_packets;
                o.rx_bytes += p.rx_bytes;
                o.tx_packets += p.tx_packets;
                o.tx_bytes += p.tx_bytes;
                o.drops += p.drops;
                o.rx_missed += p.rx_missed;
                o.rx_errors += p.rx_errors;
                o.tx_errors += p.tx_errors;
            }
        }
        out
    }

    /// Drops of `node` for `reason` (0 if unknown).
    pub fn error(&self, node: &str, reason: &str) -> u64 {
        self.nodes
            .iter()
            .find(|n| n.name == node)
            .and_then(|n| n.errors.iter().find(|(e, _)| e == reason))
            .map_or(0, |(_, c)| *c)
    }

    /// Packets processed by `node`.
    pub fn packets(&self, node: &str) -> u64 {
        self.nodes
            .iter()
            .find(|n| n.name == node)
            .map_or(0, |n| n.packets)
    }

    /// `vppctl show errors`: every non-zero drop counter.
    pub fn show_errors(&self) -> String {
        let mut s = format!("{:>12}  {:<20}  {}\n", "Count", "Node", "Reason");
        for n in &self.nodes {
            for (e, c) in &n.errors {
                if *c > 0 {
                    let _ = writeln!(s, "{c:>12}  {:<20}  {e}", n.name);
                }
            }
        }
        s
    }

    /// `vppctl show runtime`: vectors, packets and mean vector size per node.
    pub fn show_runtime(&self) -> String {
        let mut s = format!(
            "{:<20} {:>12} {:>14} {:>10}\n",
            "Name", "Vectors", "Packets", "Vec/Call"
        );
        for n in &self.nodes {
            if n.vectors == 0 {
                continue;
            }
            let avg = n.packets as f64 / n.vectors as f64;
            let _ = writeln!(
                s,
                "{:<20} {:>12} {:>14} {:>10.2}",
                n.name, n.vectors, n.packets, avg
            );
        }
        // Only the ports that carried something: the counters cover every
        // port a worker may have (virtual ports of live tunnels included),
        // most of them unused.
        let idle = PortSnapshot::default();
        for (i, p) in self.ports.iter().enumerate().filter(|(_, p)| **p != idle) {
            let _ = writeln!(
                s,
                "port {i}: rx {} pkts {} bytes, tx {} pkts {} bytes, drops {} \
                 (rx missed {} errors {}, tx errors {})",
                p.rx_packets,
                p.rx_bytes,
                p.tx_packets,
                p.tx_bytes,
                p.drops,
                p.rx_missed,
                p.rx_errors,
                p.tx_errors
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_and_sum() {
        let w = WorkerCounters {
            nodes: vec![NodeCounters::new("ip4-input", &["bad-checksum", "ttl"])],
            // Port 1 carries nothing.
            ports: vec![PortCounters::default(), PortCounters::default()],
        };
        w.nodes[0].packets.add(10);
        w.nodes[0].vectors.add(2);
        w.nodes[0].errors[0].add(3);
        w.ports[0].rx_packets.add(10);
        w.ports[0].rx_missed.add(4);
        w.ports[0].drops.add(4);
        let a = w.snapshot();
        let s = CounterSnapshot::sum(&[a.clone(), a]);
        assert_eq!(s.packets("ip4-input"), 20);
        assert_eq!(s.error("ip4-input", "bad-checksum"), 6);
        assert_eq!(s.error("ip4-input", "ttl"), 0);
        assert_eq!(s.ports[0].rx_packets, 20);
        assert_eq!(s.ports[0].rx_missed, 8);
        assert_eq!(s.ports[0].drops, 8);
        assert!(
            s.show_runtime().contains("rx missed 8"),
            "{}",
            s.show_runtime()
        );
        assert!(s.show_errors().contains("bad-checksum"));
        assert!(!s.show_errors().contains("ttl"));
        assert!(s.show_runtime().contains("5.00"));
        assert!(
            !s.show_runtime().contains("port 1:"),
            "an idle port is left out: {}",
            s.show_runtime()
        );
    }
}
