//! What `show ha`, `/ha` and the metrics report of the sync.

use std::net::SocketAddr;

/// The sync's status (times on the wall clock, ms since the Unix epoch).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncStatus {
    pub local: Option<SocketAddr>,
    pub peer: Option<SocketAddr>,
    /// A message from the peer arrived within the dead interval.
    pub up: bool,
    /// The peer's role in its last message.
    pub peer_master: Option<bool>,
    pub last_received_ms: Option<u64>,
    /// Our clock minus the peer's send time of its last message (ms).
    pub lag_ms: Option<i64>,
    /// Static SAs whose state the peer sent us (outbound, inbound).
    pub synced_out: usize,
    pub synced_in: usize,
    pub sent: u64,
    pub received: u64,
    pub send_errors: u64,
    /// Rejected datagrams by reason, every reason listed.
    pub rejected: Vec<(&'static str, u64)>,
    pub takeovers: u64,
    /// When the last takeover ran and how many SAs it moved.
    pub last_takeover: Option<(u64, usize)>,
    /// Routes in the last route set applied from the peer, and the
    /// changes (added, changed, removed) it took.
    pub synced_routes: usize,
    pub route_changes: u64,
    pub route_errors: u64,
    /// IKE SAs in the shadow (the active's, per tunnel), and how many the
    /// last takeover adopted.
    pub synced_ike_sas: usize,
    pub adopted_ike_sas: usize,
    /// Outbound SAs a takeover retired (they must be re-keyed).
    pub unsafe_sas: Vec<String>,
    /// Tunnels in the last tunnel set applied from the peer, and the
    /// changes (added, replaced, removed) and refusals it took.
    pub synced_tunnels: usize,
    pub tunnel_changes: u64,
    pub tunnel_errors: u64,
}
