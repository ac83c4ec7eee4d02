//! The per-side report: a serde struct (field names are the JSON contract,
//! documented in the crate doc) and an NTttcp-like aligned table.

use crate::control::Mode;
use crate::cycles::Method;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Sender,
    Receiver,
}

/// Request/response latency in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

impl Latency {
    /// From a histogram of nanoseconds; `None` if it is empty.
    pub fn from_ns(h: &hdrhistogram::Histogram<u64>) -> Option<Latency> {
        if h.is_empty() {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Some(Latency {
            min: us(h.min()),
            mean: h.mean() / 1000.0,
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p99_9: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrReport {
    pub transactions: u64,
    pub transactions_per_s: f64,
    /// Sender only (the receiver does not time transactions).
    pub latency_us: Option<Latency>,
    pub cycles_per_transaction_system: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: u32,
    pub role: Role,
    pub mode: Mode,
    pub local: String,
    pub peer: String,
    pub threads: u32,
    pub connections: u32,
    pub io_size: u32,
    pub duration_s: f64,
    /// The measured window's edges on the host's CLOCK_MONOTONIC (ns): an
    /// independent observer (interface counters sampled against the same
    /// clock) can check `bytes` over exactly this window.
    pub window_start_monotonic_ns: u64,
    pub window_end_monotonic_ns: u64,
    pub bytes: u64,
    pub throughput_gbps: f64,
    pub throughput_mbyte_s: f64,
    pub total_bytes: u64,
    pub peer_total_bytes: Option<u64>,
    pub datagrams: Option<u64>,
    pub packets_per_s: Option<f64>,
    pub total_datagrams: Option<u64>,
    pub peer_total_datagrams: Option<u64>,
    pub loss_pct: Option<f64>,
    pub ncpus: usize,
    pub cpu_pct_system: f64,
    pub cpu_pct_system_sum: f64,
    pub cpu_pct_process: f64,
    pub cycles_method: Method,
    pub tsc_hz: Option<f64>,
    pub cycles_fallback_reason: Option<String>,
    pub cycles_system: u64,
    pub cycles_process: u64,
    pub cycles_per_byte_system: Option<f64>,
    pub cycles_per_byte_process: Option<f64>,
    pub tcp_retrans: Option<u64>,
    pub errors: u64,
    pub first_error: Option<String>,
    pub rr: Option<RrReport>,
}

/// Datagram loss from the sender's and receiver's whole-run totals, in %.
/// Never negative (a stray duplicate cannot make loss negative); `None` when
/// nothing was sent.
pub fn loss_pct(sent: u64, received: u64) -> Option<f64> {
    if sent == 0 {
        return None;
    }
    Some(sent.saturating_sub(received) as f64 * 100.0 / sent as f64)
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "n/a".to_string(), |x| format!("{x:.prec$}"))
}

impl Report {
    /// The human summary: one aligned `label: value` row per figure.
    pub fn table(&self) -> String {
        let mut rows: Vec<(&str, String)> = vec![
            ("role", format!("{:?}", self.role).to_lowercase()),
            ("mode", format!("{:?}", self.mode).to_lowercase()),
            ("local / peer", format!("{} / {}", self.local, self.peer)),
            (
                "threads x connections",
                format!("{} x {}", self.threads, self.connections),
            ),
            (
                "io size",
                crate::units::Size(u64::from(self.io_size)).to_string(),
            ),
            ("test duration (s)", format!("{:.2}", self.duration_s)),
            ("bytes in window", self.bytes.to_string()),
            (
                "throughput (Gbit/s)",
                format!("{:.3}", self.throughput_gbps),
            ),
            (
                "throughput (MB/s)",
                format!("{:.2}", self.throughput_mbyte_s),
            ),
            ("total bytes (whole run)", self.total_bytes.to_string()),
        ];
        if let Some(p) = self.peer_total_bytes {
            rows.push(("peer total bytes", p.to_string()));
        }
        if let Some(pps) = self.packets_per_s {
            rows.push(("packets/s", format!("{pps:.0}")));
        }
        if let (Some(s), Some(p)) = (self.total_datagrams, self.peer_total_datagrams) {
            rows.push(("datagrams local / peer", format!("{s} / {p}")));
        }
        if self.loss_pct.is_some() {
            rows.push(("loss (%)", opt(self.loss_pct, 3)));
        }
        if let Some(rr) = &self.rr {
            rows.push(("transactions", rr.transactions.to_string()));
            rows.push(("transactions/s", format!("{:.0}", rr.transactions_per_s)));
            if let Some(l) = &rr.latency_us {
                rows.push((
                    "latency us min/mean",
                    format!("{:.1} / {:.1}", l.min, l.mean),
                ));
                rows.push((
                    "latency us p50/p90/p99/p99.9",
                    format!(
                        "{:.1} / {:.1} / {:.1} / {:.1}",
                        l.p50, l.p90, l.p99, l.p99_9
                    ),
                ));
                rows.push(("latency us max", format!("{:.1}", l.max)));
            }
            rows.push((
                "cycles/transaction (system)",
                opt(rr.cycles_per_transaction_system, 0),
            ));
        }
        rows.extend([
            (
                "cpu % system (0-100)",
                format!("{:.2}", self.cpu_pct_system),
            ),
            (
                "cpu % system (sum of cores)",
                format!("{:.2} / {}", self.cpu_pct_system_sum, 100 * self.ncpus),
            ),
            (
                "cpu % process (sum of cores)",
                format!("{:.2} / {}", self.cpu_pct_process, 100 * self.ncpus),
            ),
            ("cycles method", self.cycles_method.as_str().to_string()),
            ("cycles/byte (system)", opt(self.cycles_per_byte_system, 3)),
            (
                "cycles/byte (process)",
                opt(self.cycles_per_byte_process, 3),
            ),
        ]);
        if let Some(why) = &self.cycles_fallback_reason {
            rows.push(("why not perf_event", why.clone()));
        }
        if let Some(r) = self.tcp_retrans {
            rows.push(("tcp retransmissions", r.to_string()));
        }
        rows.push(("errors", self.errors.to_string()));
        if let Some(e) = &self.first_error {
            rows.push(("first error", e.clone()));
        }
        let width = rows
            .iter()
            .map(|(k, _)| k.chars().count())
            .max()
            .unwrap_or(0);
        let mut s = String::new();
        for (k, v) in rows {
            let _ = writeln!(s, "{k:>width$}: {v}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss() {
        assert_eq!(loss_pct(0, 0), None);
        assert_eq!(loss_pct(1000, 1000), Some(0.0));
        assert_eq!(loss_pct(1000, 750), Some(25.0));
        assert_eq!(loss_pct(1000, 1001), Some(0.0));
    }

    fn sample() -> Report {
        Report {
            schema: 1,
            role: Role::Receiver,
            mode: Mode::Udp,
            local: "10.0.0.1:5001".into(),
            peer: "10.0.0.2:40000".into(),
            threads: 1,
            connections: 1,
            io_size: 1472,
            duration_s: 2.0,
            window_start_monotonic_ns: 1_000_000_000,
            window_end_monotonic_ns: 3_000_000_000,
            bytes: 2_944_000,
            throughput_gbps: 0.011776,
            throughput_mbyte_s: 1.472,
            total_bytes: 2_944_000,
            peer_total_bytes: Some(2_944_000),
            datagrams: Some(2000),
            packets_per_s: Some(1000.0),
            total_datagrams: Some(2000),
            peer_total_datagrams: Some(2000),
            loss_pct: Some(0.0),
            ncpus: 2,
            cpu_pct_system: 10.0,
            cpu_pct_system_sum: 20.0,
            cpu_pct_process: 5.0,
            cycles_method: Method::CputimeXTsc,
            tsc_hz: Some(2.6e9),
            cycles_fallback_reason: Some("no PMU".into()),
            cycles_system: 1_040_000_000,
            cycles_process: 260_000_000,
            cycles_per_byte_system: Some(353.26),
            cycles_per_byte_process: Some(88.32),
            tcp_retrans: None,
            errors: 0,
            first_error: None,
            rr: None,
        }
    }

    /// The JSON field names are a contract (documented in the crate doc):
    /// renaming one must fail a test.
    #[test]
    fn json_field_names_are_stable() {
        let v = serde_json::to_value(sample()).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want = vec![
            "schema",
            "role",
            "mode",
            "local",
            "peer",
            "threads",
            "connections",
            "io_size",
            "duration_s",
            "window_start_monotonic_ns",
            "window_end_monotonic_ns",
            "bytes",
            "throughput_gbps",
            "throughput_mbyte_s",
            "total_bytes",
            "peer_total_bytes",
            "datagrams",
            "packets_per_s",
            "total_datagrams",
            "peer_total_datagrams",
            "loss_pct",
            "ncpus",
            "cpu_pct_system",
            "cpu_pct_system_sum",
            "cpu_pct_process",
            "cycles_method",
            "tsc_hz",
            "cycles_fallback_reason",
            "cycles_system",
            "cycles_process",
            "cycles_per_byte_system",
            "cycles_per_byte_process",
            "tcp_retrans",
            "errors",
            "first_error",
            "rr",
        ];
        want.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(v["role"], "receiver");
        assert_eq!(v["mode"], "udp");
        assert_eq!(v["cycles_method"], "cputime_x_tsc");
        let back: Report = serde_json::from_value(v).unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn table_rows() {
        let t = sample().table();
        assert!(t.contains("throughput (Gbit/s): 0.012\n"), "{t}");
        assert!(t.contains("loss (%): 0.000\n"), "{t}");
        assert!(t.contains("cycles method: cputime_x_tsc\n"), "{t}");
        assert!(t.contains("datagrams local / peer: 2000 / 2000\n"), "{t}");
        assert!(!t.contains("tcp retransmissions"), "{t}");
        let cols: Vec<usize> = t.lines().filter_map(|l| l.find(':')).collect();
        assert!(cols.windows(2).all(|w| w[0] == w[1]), "{t}");
    }

    #[test]
    fn latency_percentiles_are_ordered() {
        let mut h = crate::rr::new_histogram().unwrap();
        for v in 1..=10_000u64 {
            h.record(v * 1000).unwrap();
        }
        let l = Latency::from_ns(&h).unwrap();
        assert!(l.min <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99);
        assert!(l.p99 <= l.p99_9 && l.p99_9 <= l.max);
        assert!((l.p50 - 5000.0).abs() < 10.0, "{l:?}");
        assert!(Latency::from_ns(&crate::rr::new_histogram().unwrap()).is_none());
    }
}
