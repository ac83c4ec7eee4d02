//! What the FPM server counts (read by `/metrics`) and how it logs the
//! routes it cannot install without flooding the log.

use super::LOG_PER_SECOND;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Why a learned route was not installed (metric label `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Its table id is mapped to no VRF.
    UnmappedTable,
    /// Its next hop names an interface of zebra's host only, no gateway.
    NoGateway,
    /// `RTA_NH_ID` names no next-hop object zebra sent.
    UnknownNexthop,
    /// None of its gateways resolves through the VRF's routes.
    Unresolved,
    /// The VRF holds `max_routes` learned routes already.
    VrfFull,
    /// A route type other than unicast, blackhole, unreachable, prohibit.
    UnsupportedType,
    /// A next-hop object refused: `max_nexthop_groups` reached, or a group
    /// too large.
    NexthopLimit,
    /// A message that does not parse.
    Malformed,
}

impl Failure {
    pub const ALL: [Failure; 8] = [
        Failure::UnmappedTable,
        Failure::NoGateway,
        Failure::UnknownNexthop,
        Failure::Unresolved,
        Failure::VrfFull,
        Failure::UnsupportedType,
        Failure::NexthopLimit,
        Failure::Malformed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Failure::UnmappedTable => "unmapped-table",
            Failure::NoGateway => "no-gateway",
            Failure::UnknownNexthop => "unknown-nexthop",
            Failure::Unresolved => "unresolved",
            Failure::VrfFull => "vrf-full",
            Failure::UnsupportedType => "unsupported-type",
            Failure::NexthopLimit => "nexthop-limit",
            Failure::Malformed => "malformed",
        }
    }
}

/// Counters of the FPM server (read by `/metrics`).
#[derive(Default, Debug)]
pub struct FpmStats {
    pub connections: AtomicU64,
    pub connected: AtomicU64,
    pub frames: AtomicU64,
    pub route_adds: AtomicU64,
    pub route_dels: AtomicU64,
    pub nexthop_adds: AtomicU64,
    pub nexthop_dels: AtomicU64,
    /// Messages of other types, and zebra's own host routes (protocol
    /// kernel: its interfaces' subnets), which are not ours to install.
    pub ignored: AtomicU64,
    pub publishes: AtomicU64,
    /// Publishes that patched the changed VRFs' FIBs (the others rebuilt
    /// every table).
    pub patches: AtomicU64,
    /// Microseconds from the arrival of the oldest change a publish
    /// carried to that publish: the last one, and the largest.
    pub last_delay_us: AtomicU64,
    pub max_delay_us: AtomicU64,
    /// Stale routes removed after a replay.
    pub swept: AtomicU64,
    failures: [AtomicU64; 8],
}

impl FpmStats {
    pub fn fail(&self, f: Failure) {
        if let Some(c) = Failure::ALL
            .iter()
            .position(|x| *x == f)
            .and_then(|i| self.failures.get(i))
        {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn record_delay(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.last_delay_us.store(us, Ordering::Relaxed);
        self.max_delay_us.fetch_max(us, Ordering::Relaxed);
    }

    pub fn failures(&self) -> Vec<(Failure, u64)> {
        Failure::ALL
            .iter()
            .zip(&self.failures)
            .map(|(f, c)| (*f, c.load(Ordering::Relaxed)))
            .collect()
    }
}

/// Log lines limited to [`LOG_PER_SECOND`]; the rest counted and summed up.
pub(super) struct Limited {
    window: Instant,
    lines: u32,
    suppressed: u64,
}

impl Limited {
    pub(super) fn new() -> Self {
        Limited {
            window: Instant::now(),
            lines: 0,
            suppressed: 0,
        }
    }

    pub(super) fn warn(&mut self, msg: impl FnOnce() -> String) {
        if self.window.elapsed() >= Duration::from_secs(1) {
            if self.suppressed > 0 {
                tracing::warn!(
                    suppressed = self.suppressed,
                    "fpm: more routes not installed (see vecgate_fpm_install_failures)"
                );
            }
            self.window = Instant::now();
            self.lines = 0;
            self.suppressed = 0;
        }
        if self.lines < LOG_PER_SECOND {
            self.lines += 1;
            tracing::warn!("fpm: {}", msg());
        } else {
            self.suppressed += 1;
        }
    }
}
