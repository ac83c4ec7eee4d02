//! A pool of gateways on etcd (`/pool`): members, leader, placement,
//! the fence, and the requests that change the pool.

use super::{RouteSpec, TunnelSpec};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /pool`, `vecgate pool show`: the pool as this member sees it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolInfo {
    pub pool: String,
    /// This member.
    pub member: String,
    /// Registered under a lease now.
    pub registered: bool,
    /// The lease, hex.
    pub lease: String,
    pub leader: Option<String>,
    /// The leader key's create revision: every placement write compares it.
    pub epoch: i64,
    /// etcd's revision as mirrored.
    pub revision: i64,
    pub fence: PoolFenceInfo,
    /// The last etcd error, while it lasts (none: etcd answers).
    pub etcd_error: Option<String>,
    pub members: Vec<PoolMemberInfo>,
    pub connections: Vec<PoolConnectionInfo>,
    /// Connections the leader could not place, and why (on the leader).
    pub refused: Vec<PoolRefusedInfo>,
    /// Writes of this member's actual state waiting for etcd to return.
    pub pending_writes: usize,
}

/// The member's fence: whether it may send for its connections.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolFenceInfo {
    pub serving: bool,
    /// Serving past the lease's deadline because etcd has no quorum.
    pub holding: bool,
    /// Milliseconds until serving stops unless renewed (0: not serving).
    pub deadline_ms: u64,
    /// Keepalives that failed in a row.
    pub failing_keepalives: u32,
}

/// One member with its capacity and load per class of tunnel.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolMemberInfo {
    pub name: String,
    pub lease: String,
    pub addresses: Vec<String>,
    pub draining: bool,
    pub healthy: bool,
    pub capacity_ipsec_mbps: u64,
    pub capacity_gre_mbps: u64,
    pub capacity_tunnels: u32,
    pub load_ipsec_mbps: u64,
    pub load_gre_mbps: u64,
    pub tunnels: u32,
}

/// One connection, where it is placed and what its owner reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolConnectionInfo {
    pub id: String,
    /// The tenant: the tunnel's VRF.
    pub tenant: String,
    /// "ipsec" or "gre" (GRE, NVGRE and VXLAN share a class).
    pub class: String,
    pub kind: String,
    pub local: String,
    pub remote: String,
    pub bandwidth_mbps: u64,
    /// The member placed on it (none: not placed yet).
    pub member: Option<String>,
    /// Why it is there: new, failover, drain, rebalance.
    pub reason: Option<String>,
    /// A make-before-break move under way, to this member.
    pub moving_to: Option<String>,
    /// What its owner reports: serving, released, failed.
    pub phase: Option<String>,
    pub error: Option<String>,
    /// The move that put it where it is, and its timeline.
    #[serde(default)]
    pub last_move: Option<PoolMoveInfo>,
}

/// One move of a connection (the audit record) and its timeline, in ms
/// since the Unix epoch, each written by the member that did the step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolMoveInfo {
    /// The audit record's sequence number.
    pub audit: u64,
    pub from: Option<String>,
    pub to: String,
    /// new, failover, drain, rebalance.
    pub reason: String,
    /// The leader learnt of the cause (a lease gone, a drain asked for).
    pub detect_ms: u64,
    /// The leader wrote the move.
    pub decide_ms: u64,
    /// The new owner had programmed it (tunnel, address, routes).
    pub program_ms: Option<u64>,
    /// The new owner forwarded its first packet into it.
    pub first_packet_ms: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolRefusedInfo {
    pub connection: String,
    pub reason: String,
}

/// `POST /pool/connections`: a tenant's connection, one `[[tunnel]]` and
/// the `[[route]]`s through it in its VRF, as `POST /tunnels` and
/// `POST /routes` take them, and the bandwidth it reserves.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolConnectionSpec {
    pub tunnel: TunnelSpec,
    #[serde(default)]
    pub routes: Vec<RouteSpec>,
    /// Mbit/s reserved on the member that runs it.
    pub bandwidth_mbps: u64,
}

/// `POST /pool/drain`: move every connection off `member`
/// make-before-break (or, with `end`, let it take connections again).
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolDrain {
    pub member: String,
    #[serde(default)]
    pub end: bool,
}

/// `POST /pool/rebalance`: the plan, applied unless `dry_run`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolRebalance {
    #[serde(default)]
    pub dry_run: bool,
    /// At most this many moves (default 16).
    #[serde(default)]
    pub max_moves: Option<u32>,
    /// Milliseconds between two moves (default 1000).
    #[serde(default)]
    pub interval_ms: Option<u64>,
}

/// One move of a rebalance plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolMove {
    pub connection: String,
    pub from: Option<String>,
    pub to: String,
}
