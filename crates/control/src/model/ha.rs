//! High availability (`/ha`): VRRP virtual routers and the state sync.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One VRRP virtual router (`GET /ha`, `vecgate show ha`; RFC 5798).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HaGroupInfo {
    pub interface: String,
    pub vrid: u8,
    /// "ipv4" or "ipv6".
    pub family: String,
    /// The virtual addresses.
    pub addresses: Vec<String>,
    /// "init", "backup" or "master" (RFC 5798 §6.4).
    pub state: String,
    /// Priority as configured.
    pub priority: u8,
    /// Priority advertised now: configured less the tracking penalty.
    pub effective_priority: u8,
    pub preempt: bool,
    /// After `POST /ha/switchover`: seconds left during which this router
    /// does not preempt (0: not held).
    pub preempt_held_secs: u64,
    /// Advertisement_Interval, centiseconds.
    pub advert_interval_cs: u16,
    /// The master's address (ours when master), if known.
    pub master: Option<String>,
    pub last_transition: Option<HaTransitionInfo>,
    pub tracked: Vec<HaTrackedInfo>,
    pub adverts_sent: u64,
    pub adverts_received: u64,
    pub priority_zero_sent: u64,
    pub priority_zero_received: u64,
    pub became_master: u64,
    pub became_backup: u64,
    /// The state sync with the peer gateway (`[ha] sync_*`), the same for
    /// every group; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<HaSyncInfo>,
}

/// The HA state sync: the link to the peer gateway and what
/// crossed it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HaSyncInfo {
    /// This gateway's `sync_local` and the peer's address.
    pub local: String,
    pub peer: String,
    /// "up" (a message from the peer within 3 intervals) or "down".
    pub state: String,
    /// The peer's role in its last message: "master" or "backup".
    pub peer_role: Option<String>,
    /// Unix time of the last message accepted from the peer, seconds.
    pub last_sync_unix: Option<f64>,
    /// Our clock minus the peer's send time of that message, ms.
    pub lag_ms: Option<i64>,
    /// Static ESP SAs whose state the peer synced to us.
    pub synced_outbound_sas: u64,
    pub synced_inbound_sas: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub send_errors: u64,
    /// Rejected datagrams by reason: malformed, version, auth, replay,
    /// stale_epoch, skew, reflected, source.
    pub rejected: std::collections::BTreeMap<String, u64>,
    /// Takeovers of synced state (becoming master).
    pub takeovers: u64,
    /// Unix time of the last one and the SAs it moved.
    pub last_takeover_unix: Option<f64>,
    pub last_takeover_sas: u64,
    /// Static routes in the last route set applied from the active, the
    /// changes (additions, removals) and the refusals it took.
    pub synced_routes: u64,
    pub route_changes: u64,
    pub route_errors: u64,
    /// IKE SAs of the active held as the standby's shadow, and how many
    /// the last takeover adopted (no renegotiation).
    #[serde(default)]
    pub synced_ike_sas: u64,
    #[serde(default)]
    pub adopted_ike_sas: u64,
    /// Static outbound SAs a takeover could not bound (the sync link was
    /// down too long: the old active may have used any number left): they
    /// send nothing (`seq-unsafe-after-takeover`) until re-keyed.
    #[serde(default)]
    pub unsafe_sas: Vec<String>,
    /// Tunnels in the last tunnel set applied from the active, the changes
    /// (additions, replacements, removals) and the refusals it took.
    #[serde(default)]
    pub synced_tunnels: u64,
    #[serde(default)]
    pub tunnel_changes: u64,
    #[serde(default)]
    pub tunnel_errors: u64,
}

/// The last state change of a virtual router.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HaTransitionInfo {
    /// Unix time, seconds.
    pub at_unix: f64,
    pub to: String,
    /// "owner", "startup", "master-down", "master-stopped", "preempted",
    /// "shutdown", "interface-down" or "switchover".
    pub reason: String,
}

/// A tracked interface and its link.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HaTrackedInfo {
    pub interface: String,
    pub up: bool,
}

/// `POST /ha/switchover`: which virtual routers resign (all this gateway
/// is master of when neither is given), and for how long they then hold
/// preemption back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HaSwitchover {
    pub interface: Option<String>,
    pub vrid: Option<u8>,
    /// Seconds without preemption after resigning (default 60, at most
    /// 86400).
    pub hold_secs: Option<u64>,
}
