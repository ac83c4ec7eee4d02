//! `[ha]`: virtual addresses held by one gateway of a pair with VRRPv3
//! (RFC 5798).
//!
//! ```toml
//! [ha]
//! priority = 150          # 1..=255 (255: the addresses' owner), default 100
//! interval_cs = 20        # advertisement interval, centiseconds, default 20
//! preempt = true          # a higher priority takes over from a lower master
//! track = ["wan0"]        # interfaces whose link going down...
//! track_penalty = 60      # ...lowers the priority by this much, default 50
//!
//! [[ha.group]]            # one virtual router
//! vrid = 51               # 1..=255, per interface and address family
//! interface = "lan0"      # a [[interface]] with an address of that family
//! addresses = ["10.1.0.254"]   # one family per group
//! priority = 200          # optional, overrides [ha] priority
//! track = ["wan1"]        # optional, tracked by this group too
//! track_penalty = 60      # optional, overrides [ha] track_penalty
//! ```
//!
//! A group's effective priority is its priority less its penalty for each
//! interface in `[ha] track` or its own `track` whose link is down
//! (keepalived's `track_interface` with a `weight`), never below 1; an
//! address owner (255) is never lowered.
//!
//! The state sync (optional; all three keys or none):
//!
//! ```toml
//! [ha]
//! sync_local = "192.0.2.1:4790"     # UDP address the sync link listens on
//! sync_peer = "192.0.2.2:4790"      # the other gateway's sync_local
//! sync_key_file = "/etc/vecgate/ha-sync.key"  # 64 hex digits, 0600, root's
//! sync_interval_ms = 100            # periodic resend, 10..=10000, default 100
//! max_sa_pps = 2097152              # outbound packets/s per static SA, default 2^21
//! ```
//!
//! The sync link is a kernel UDP socket (a dedicated link, not a dataplane
//! port); every message is sealed with AES-256-GCM under a key derived
//! from the key file per boot (`vecgate_ha::sync`). The active sends each
//! static ESP SA's reserved outbound ceiling and inbound replay window;
//! the standby jumps past them when it becomes master.

use crate::model::Config;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// Default priority of a backup (RFC 5798 §5.2.4).
pub const DEFAULT_PRIORITY: u8 = 100;
/// Default Advertisement_Interval: 200 ms, not RFC 5798 §5.2.7's 1 s, so
/// that a `kill -9` costs under a second: Master_Down_Interval is 3 × 200
/// ms + Skew_Time (§6.1, at most 200 ms). A backup adopts the master's
/// advertised interval (§6.4.2); keepalived in one group should say
/// `advert_int 0.2` likewise.
pub const DEFAULT_INTERVAL_CS: u16 = 20;
/// Default priority lost per tracked interface that is down.
pub const DEFAULT_TRACK_PENALTY: u8 = 50;
/// Default period of the state sync's resend.
pub const DEFAULT_SYNC_INTERVAL_MS: u32 = 100;
/// Default bound on one static SA's outbound rate with the sync on: 2^21
/// packets/s (about 25 Gbit/s of 1500-byte packets). A standby that lost
/// the sync link for `t` seconds jumps `t` × this on takeover, so 2^32
/// numbers (no ESN) cover about half an hour of a dead link.
pub const DEFAULT_MAX_SA_PPS: u64 = 1 << 21;
/// Bounds of `max_sa_pps`.
pub const MIN_MAX_SA_PPS: u64 = 1_000;
pub const MAX_MAX_SA_PPS: u64 = 1 << 30;

/// `[ha]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ha {
    pub priority: u8,
    pub interval_cs: u16,
    pub preempt: bool,
    /// Interface names (`[[interface]]`) whose link state lowers priority.
    #[serde(default)]
    pub track: Vec<String>,
    pub track_penalty: u8,
    /// `[[ha.group]]`, in file order.
    #[serde(default)]
    pub groups: Vec<HaGroup>,
    /// The state sync (`sync_local`, `sync_peer`, `sync_key_file`).
    #[serde(default)]
    pub sync: Option<HaSync>,
}

/// The state sync's link: `sync_*` keys of `[ha]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaSync {
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub key_file: PathBuf,
    pub interval_ms: u32,
    /// The most outbound sequence numbers one static SA may reserve per
    /// second (a token bucket of 2^26), so the standby can bound what the
    /// active sent while the sync link was down.
    #[serde(default = "default_max_sa_pps")]
    pub max_sa_pps: u64,
}

fn default_max_sa_pps() -> u64 {
    DEFAULT_MAX_SA_PPS
}

impl Default for Ha {
    fn default() -> Self {
        Ha {
            priority: DEFAULT_PRIORITY,
            interval_cs: DEFAULT_INTERVAL_CS,
            preempt: true,
            track: Vec::new(),
            track_penalty: DEFAULT_TRACK_PENALTY,
            groups: Vec::new(),
            sync: None,
        }
    }
}

/// `[[ha.group]]`: one virtual router on one interface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaGroup {
    pub vrid: u8,
    pub interface: String,
    pub addresses: Vec<IpAddr>,
    #[serde(default)]
    pub priority: Option<u8>,
    /// Interfaces tracked by this group in addition to `[ha] track`.
    #[serde(default)]
    pub track: Vec<String>,
    #[serde(default)]
    pub track_penalty: Option<u8>,
}

impl Ha {
    /// The priority a group starts with.
    pub fn group_priority(&self, g: &HaGroup) -> u8 {
        g.priority.unwrap_or(self.priority)
    }

    /// The interfaces a group tracks (`[ha] track`, then its own), once
    /// each.
    pub fn group_track(&self, g: &HaGroup) -> Vec<String> {
        let mut v = self.track.clone();
        for t in &g.track {
            if !v.contains(t) {
                v.push(t.clone());
            }
        }
        v
    }

    /// The priority a group loses per tracked interface that is down.
    pub fn group_track_penalty(&self, g: &HaGroup) -> u8 {
        g.track_penalty.unwrap_or(self.track_penalty)
    }
}

pub(crate) fn emit(cfg: &Config, s: &mut String, quote: fn(&str) -> String) {
    let Some(h) = &cfg.ha else {
        return;
    };
    let _ = writeln!(s, "\n[ha]");
    let _ = writeln!(s, "priority = {}", h.priority);
    let _ = writeln!(s, "interval_cs = {}", h.interval_cs);
    if !h.preempt {
        let _ = writeln!(s, "preempt = false");
    }
    if !h.track.is_empty() {
        let t: Vec<String> = h.track.iter().map(|n| quote(n)).collect();
        let _ = writeln!(s, "track = [{}]", t.join(", "));
    }
    if h.track_penalty != DEFAULT_TRACK_PENALTY {
        let _ = writeln!(s, "track_penalty = {}", h.track_penalty);
    }
    if let Some(y) = &h.sync {
        let _ = writeln!(s, "sync_local = {}", quote(&y.local.to_string()));
        let _ = writeln!(s, "sync_peer = {}", quote(&y.peer.to_string()));
        let _ = writeln!(
            s,
            "sync_key_file = {}",
            quote(&y.key_file.display().to_string())
        );
        if y.interval_ms != DEFAULT_SYNC_INTERVAL_MS {
            let _ = writeln!(s, "sync_interval_ms = {}", y.interval_ms);
        }
        if y.max_sa_pps != DEFAULT_MAX_SA_PPS {
            let _ = writeln!(s, "max_sa_pps = {}", y.max_sa_pps);
        }
    }
    for g in &h.groups {
        let _ = writeln!(s, "\n[[ha.group]]");
        let _ = writeln!(s, "vrid = {}", g.vrid);
        let _ = writeln!(s, "interface = {}", quote(&g.interface));
        let a: Vec<String> = g.addresses.iter().map(|a| quote(&a.to_string())).collect();
        let _ = writeln!(s, "addresses = [{}]", a.join(", "));
        if let Some(p) = g.priority {
            let _ = writeln!(s, "priority = {p}");
        }
        if !g.track.is_empty() {
            let t: Vec<String> = g.track.iter().map(|n| quote(n)).collect();
            let _ = writeln!(s, "track = [{}]", t.join(", "));
        }
        if let Some(p) = g.track_penalty {
            let _ = writeln!(s, "track_penalty = {p}");
        }
    }
}
