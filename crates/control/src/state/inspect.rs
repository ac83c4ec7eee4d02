//! Looking at the running gateway: its status and counters, and what
//! only the workers know (neighbours, trace, capture), asked through their
//! bounded mailboxes.

use super::{lock, ApiError, Control};
use crate::model::{NeighborInfo, StatusInfo};
use dataplane::counters::CounterSnapshot;
use dataplane::neighbour::{fmt_mac, State};
use dataplane::worker::{Captured, Command, NeighbourEntry};
use std::time::{Duration, Instant};

/// Lines of trace kept on the control side at most.
pub const TRACE_KEEP: usize = 16_384;
/// Most frames and bytes one capture may return.
pub const CAPTURE_MAX_FRAMES: u64 = 10_000;
pub const CAPTURE_MAX_BYTES: usize = 64 << 20;
/// How long to wait for a worker to answer a mailbox request.
pub const MAILBOX_WAIT: Duration = Duration::from_secs(2);

fn state_str(s: State) -> &'static str {
    match s {
        State::Incomplete => "incomplete",
        State::Reachable => "reachable",
        State::Stale => "stale",
        State::Probe => "probe",
    }
}

impl Control {
    pub fn status(&self) -> StatusInfo {
        let cfg = lock(&self.config);
        StatusInfo {
            name: cfg.gateway.name.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            workers: self.dp.counters.len() as u64,
            uptime_seconds: self.started.elapsed().as_secs(),
            tables_generation: self.dp.tables.load().generation,
            api: cfg.gateway.api.to_string(),
        }
    }

    pub fn workers(&self) -> usize {
        self.dp.counters.len()
    }

    pub fn counters(&self) -> CounterSnapshot {
        let snaps: Vec<_> = self.dp.counters.iter().map(|c| c.snapshot()).collect();
        CounterSnapshot::sum(&snaps)
    }

    /// Asks every worker with `make` and collects the answers (blocking:
    /// call from a blocking context). A worker that does not answer within
    /// [`MAILBOX_WAIT`] is skipped.
    fn ask<T: Send + 'static>(
        &self,
        make: impl Fn(crossbeam_channel::Sender<T>) -> Command,
    ) -> Vec<(usize, T)> {
        let mut rxs = Vec::new();
        for (w, mb) in self.dp.mailboxes.iter().enumerate() {
            let (tx, rx) = crossbeam_channel::bounded(1);
            if mb.try_send(make(tx)).is_ok() {
                rxs.push((w, rx));
            }
        }
        let deadline = Instant::now() + MAILBOX_WAIT;
        rxs.into_iter()
            .filter_map(|(w, rx)| rx.recv_deadline(deadline).ok().map(|v| (w, v)))
            .collect()
    }

    /// Neighbour entries of every worker, merged per (interface, address).
    pub fn neighbors(&self) -> Vec<NeighborInfo> {
        let cfg = self.config();
        let mut out: Vec<NeighborInfo> = Vec::new();
        let answers: Vec<(usize, Vec<NeighbourEntry>)> = self.ask(Command::Neighbours);
        // Neighbours on an Ethernet tunnel (VXLAN, NVGRE, GRE TEB) sit on
        // its virtual port: named after the tunnel.
        let tunnel_ports = self.tunnel_ports(&cfg);
        let tables = self.dp.tables.load();
        for (w, entries) in answers {
            for e in entries {
                let interface = tables
                    .iface(e.port)
                    .filter(|i| cfg.interface(&i.name).is_some())
                    .map(|i| i.name.clone())
                    .or_else(|| {
                        tunnel_ports
                            .iter()
                            .find(|(_, p)| *p == Some(e.port))
                            .map(|(name, _)| name.clone())
                    })
                    .unwrap_or_else(|| format!("port{}", e.port));
                let address = e.ip.to_string();
                match out
                    .iter_mut()
                    .find(|n| n.interface == interface && n.address == address)
                {
                    Some(n) => {
                        n.workers.push(w as u64);
                        if n.state != "reachable" && e.state != State::Incomplete {
                            n.state = state_str(e.state).into();
                            n.mac = fmt_mac(e.mac);
                        }
                    }
                    None => out.push(NeighborInfo {
                        interface,
                        address,
                        mac: fmt_mac(e.mac),
                        state: state_str(e.state).into(),
                        workers: vec![w as u64],
                    }),
                }
            }
        }
        out.sort_by(|a, b| (&a.interface, &a.address).cmp(&(&b.interface, &b.address)));
        out
    }

    /// Arms every worker's trace for `n` packets; returns how many took it.
    pub fn trace_arm(&self, n: usize) -> usize {
        self.dp
            .mailboxes
            .iter()
            .filter(|mb| mb.try_send(Command::TraceArm(n)).is_ok())
            .count()
    }

    /// Collects new trace lines from the workers; returns all kept lines.
    pub fn trace_lines(&self) -> Vec<String> {
        let answers = self.ask(Command::TraceDrain);
        let mut kept = lock(&self.trace);
        for (w, lines) in answers {
            for l in lines {
                if kept.len() >= TRACE_KEEP {
                    kept.pop_front();
                }
                kept.push_back(format!("worker {w}: {l}"));
            }
        }
        kept.iter().cloned().collect()
    }

    pub fn trace_clear(&self) {
        let _ = self.trace_lines();
        lock(&self.trace).clear();
    }

    /// Captures up to `count` frames on interface `name` (both directions,
    /// every worker) for at most `timeout`; returns a pcap file.
    pub fn capture(&self, name: &str, count: u64, timeout: Duration) -> Result<Vec<u8>, ApiError> {
        let port = self
            .config()
            .interface(name)
            .and_then(|_| self.port_of(name))
            .ok_or_else(|| ApiError::not_found("interface", format!("no interface \"{name}\"")))?;
        if !(1..=CAPTURE_MAX_FRAMES).contains(&count) {
            return Err(ApiError::bad(
                "count",
                format!("count = {count} is out of range (expected 1..={CAPTURE_MAX_FRAMES})"),
            ));
        }
        let count = count as usize;
        let (tx, rx) = crossbeam_channel::bounded::<Captured>(count.min(4096));
        for mb in &self.dp.mailboxes {
            let _ = mb.try_send(Command::CaptureStart {
                port,
                count,
                out: tx.clone(),
            });
        }
        drop(tx);
        let deadline = Instant::now() + timeout;
        let mut frames = Vec::new();
        let mut bytes = 0usize;
        while frames.len() < count && bytes < CAPTURE_MAX_BYTES {
            match rx.recv_deadline(deadline) {
                Ok(c) => {
                    bytes += c.data.len();
                    frames.push(c);
                }
                Err(_) => break,
            }
        }
        for mb in &self.dp.mailboxes {
            let _ = mb.try_send(Command::CaptureStop);
        }
        frames.sort_by_key(|c| c.ts);
        let mut w = wire::pcap::Writer::new(
            Vec::with_capacity(bytes + frames.len() * 16 + 24),
            wire::pcap::LinkType::Ethernet,
            wire::pcap::DEFAULT_SNAPLEN,
        )
        .map_err(|e| ApiError::new(500, e.to_string(), None))?;
        for c in &frames {
            w.write_packet(c.ts, &c.data)
                .map_err(|e| ApiError::new(500, e.to_string(), None))?;
        }
        Ok(w.into_inner())
    }
}
