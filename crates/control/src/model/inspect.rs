//! Inspection: neighbours, packet trace and capture (`/neighbors`,
//! `/trace`, `/capture`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One neighbour (ARP / ND) entry, merged over the workers.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct NeighborInfo {
    pub interface: String,
    pub address: String,
    pub mac: String,
    /// incomplete, reachable, stale or probe.
    pub state: String,
    /// Workers holding the entry.
    pub workers: Vec<u64>,
}

/// POST /trace.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceArm {
    /// Packets to trace per worker (1..=10000).
    #[schema(minimum = 1, maximum = 10000)]
    pub count: u64,
}

/// Answer to POST /trace.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct TraceArmed {
    pub count: u64,
    /// Workers that were armed.
    pub workers: u64,
}

/// GET /trace: every line recorded so far (kept until DELETE /trace).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct TraceInfo {
    pub lines: Vec<String>,
}

/// POST /capture.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CaptureSpec {
    pub interface: String,
    /// Frames to capture, both directions (1..=10000).
    #[schema(minimum = 1, maximum = 10000)]
    pub count: u64,
    /// Give up after this long and return what was captured (default
    /// 10000, at most 60000).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 60000)]
    pub timeout_ms: Option<u64>,
}
