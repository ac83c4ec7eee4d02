//! The records the pool keeps in etcd, as JSON (none of them secret: the
//! SA state is the sealed blob of [`crate::seal`], never a record here).
//!
//! Anything read back from etcd is outside input: [`decode`] bounds its
//! size before serde sees it, and every record has a fuzz target
//! (`fuzz/fuzz_targets/pool_records.rs`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;

/// The largest record we read (etcd's own limit is 1.5 MiB a request).
pub const MAX_RECORD: usize = 64 * 1024;

/// Why a value from etcd was not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    TooLarge(usize),
    Json(String),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooLarge(n) => write!(f, "{n} bytes, over the {MAX_RECORD}-byte limit"),
            DecodeError::Json(e) => write!(f, "not a valid record: {e}"),
        }
    }
}

/// A record from etcd's bytes: bounded, then JSON.
pub fn decode<T: DeserializeOwned>(b: &[u8]) -> Result<T, DecodeError> {
    if b.len() > MAX_RECORD {
        return Err(DecodeError::TooLarge(b.len()));
    }
    serde_json::from_slice(b).map_err(|e| DecodeError::Json(e.to_string()))
}

/// A record's bytes for etcd.
pub fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    // Our records are plain structs of strings and numbers: serialising
    // them cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

/// The kinds of load a member's capacity is counted in, as Windows Server
/// SDN's gateway pools count IPsec and GRE throughput separately: ESP
/// costs its crypto, the plain encapsulations (GRE, NVGRE, VXLAN) do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Ipsec,
    Gre,
}

impl Class {
    pub const ALL: [Class; 2] = [Class::Ipsec, Class::Gre];
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::Ipsec => "ipsec",
            Class::Gre => "gre",
        }
    }
}

/// What a member can carry: Mbit/s per class and a tunnel count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capacity {
    pub ipsec_mbps: u64,
    pub gre_mbps: u64,
    pub tunnels: u32,
}

/// What a set of connections takes of a member: the same units.
pub type Load = Capacity;

impl Capacity {
    pub fn mbps(&self, c: Class) -> u64 {
        match c {
            Class::Ipsec => self.ipsec_mbps,
            Class::Gre => self.gre_mbps,
        }
    }

    fn mbps_mut(&mut self, c: Class) -> &mut u64 {
        match c {
            Class::Ipsec => &mut self.ipsec_mbps,
            Class::Gre => &mut self.gre_mbps,
        }
    }

    /// Adds one connection's demand.
    pub fn add(&mut self, d: Demand) {
        let m = self.mbps_mut(d.class);
        *m = m.saturating_add(d.mbps);
        self.tunnels = self.tunnels.saturating_add(1);
    }

    /// Takes one connection's demand away.
    pub fn sub(&mut self, d: Demand) {
        let m = self.mbps_mut(d.class);
        *m = m.saturating_sub(d.mbps);
        self.tunnels = self.tunnels.saturating_sub(1);
    }

    /// Whether `load` plus `d` stays within `self`.
    pub fn fits(&self, load: &Load, d: Demand) -> bool {
        load.mbps(d.class).saturating_add(d.mbps) <= self.mbps(d.class)
            && load.tunnels < self.tunnels
    }

    /// The most used share of any kind, in thousandths (0 for a member
    /// with nothing of that kind to give and nothing of it taken; over
    /// 1000 when over capacity).
    pub fn used_permille(&self, load: &Load) -> u64 {
        let share = |used: u64, cap: u64| -> u64 {
            match (used, cap) {
                (0, _) => 0,
                (_, 0) => u64::MAX,
                (u, c) => u.saturating_mul(1000) / c,
            }
        };
        Class::ALL
            .iter()
            .map(|c| share(load.mbps(*c), self.mbps(*c)))
            .chain([share(u64::from(load.tunnels), u64::from(self.tunnels))])
            .max()
            .unwrap_or(0)
    }
}

/// One connection's demand: its class and the Mbit/s it reserves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Demand {
    pub class: Class,
    pub mbps: u64,
}

/// A member's health as it reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// False: the member takes no new connections (its own keep running).
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `member/<name>`: written by the member under its lease, so it vanishes
/// when the lease does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    pub name: String,
    /// Its lease (also the key's), so a new owner can ask etcd whether it
    /// is gone.
    pub lease: i64,
    pub capacity: Capacity,
    /// Underlay addresses it can reach peers from (for `pool show`).
    #[serde(default)]
    pub addresses: Vec<IpAddr>,
    /// Where its API listens, if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    pub health: Health,
    /// Wall clock at registration, ms since the Unix epoch.
    pub started_ms: u64,
}

/// Why a connection is where it is (the audit log's and the metrics'
/// `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A new connection.
    New,
    /// Its owner's lease was gone.
    Failover,
    /// Its owner was drained.
    Drain,
    /// An operator's rebalance.
    Rebalance,
}

impl Reason {
    pub const ALL: [Reason; 4] = [
        Reason::New,
        Reason::Failover,
        Reason::Drain,
        Reason::Rebalance,
    ];
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::New => "new",
            Reason::Failover => "failover",
            Reason::Drain => "drain",
            Reason::Rebalance => "rebalance",
        }
    }
}

/// A planned move in progress: the owner hands the connection to `to`
/// make-before-break (see [`crate::owner`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handover {
    pub to: String,
    pub reason: Reason,
    /// The audit entry that records it.
    pub audit: u64,
}

/// `place/<id>`: written only by the leader, in a transaction that
/// compares its election key's create revision with `epoch`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementRecord {
    pub member: String,
    /// The leader's epoch when it was written.
    pub epoch: i64,
    pub reason: Reason,
    /// The member that had it before (a failover or a handover), whose
    /// lease must be gone before `member` acts on a failover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// The lease `previous` held when it left (a member of that name may
    /// come back under another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_lease: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover: Option<Handover>,
    /// The audit entry of the move that put it here.
    pub audit: u64,
}

/// Where a connection's owner stands (`status/<id>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Programmed and forwarding.
    Serving,
    /// The owner handed it over (outbound stopped, exact state written).
    Released,
    /// Applying it failed (`error` says why).
    Failed,
}

/// `status/<id>`: the actual state, written back by the member that
/// applied it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusRecord {
    pub member: String,
    pub phase: Phase,
    /// The placement revision this is about.
    pub placement_rev: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The SPIs it runs with (outbound, inbound; IKE SPIs as 16 hex digits).
    #[serde(default)]
    pub spis: Vec<String>,
    /// The move that brought it here and its timeline (ms since the Unix
    /// epoch): programmed, first packet forwarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_packet_ms: Option<u64>,
    pub updated_ms: u64,
}

/// `audit/<seq>`: one move, written by the leader with the placement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub seq: u64,
    pub connection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub to: String,
    pub reason: Reason,
    pub epoch: i64,
    /// When the leader learnt of the cause (the lease's deletion reached
    /// it, the drain or rebalance request), and when it wrote the move.
    pub detect_ms: u64,
    pub decide_ms: u64,
}

/// `drain/<member>`: the member's connections move away, and it gets no
/// new ones, until the key is deleted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainRecord {
    pub requested_ms: u64,
}

/// `rebalance`: apply the rebalance plan, at most `max_moves` moves, one
/// every `interval_ms`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebalanceRecord {
    pub requested_ms: u64,
    pub max_moves: u32,
    pub interval_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_arithmetic() {
        let cap = Capacity {
            ipsec_mbps: 1000,
            gre_mbps: 4000,
            tunnels: 2,
        };
        let mut load = Load::default();
        let d = Demand {
            class: Class::Ipsec,
            mbps: 600,
        };
        assert!(cap.fits(&load, d));
        load.add(d);
        assert_eq!(cap.used_permille(&load), 600);
        assert!(!cap.fits(&load, d), "1200 of 1000");
        let g = Demand {
            class: Class::Gre,
            mbps: 100,
        };
        assert!(cap.fits(&load, g));
        load.add(g);
        assert!(!cap.fits(&load, g), "tunnel count");
        assert_eq!(cap.used_permille(&load), 1000);
        load.sub(d);
        load.sub(d);
        assert_eq!(load.ipsec_mbps, 0);
        let none = Capacity::default();
        assert_eq!(none.used_permille(&Load::default()), 0);
        assert_eq!(none.used_permille(&load), u64::MAX);
    }

    #[test]
    fn decode_bounds_and_reports() {
        let big = vec![b' '; MAX_RECORD + 1];
        assert_eq!(
            decode::<DrainRecord>(&big),
            Err(DecodeError::TooLarge(MAX_RECORD + 1))
        );
        assert!(decode::<DrainRecord>(b"{").is_err());
        let r = DrainRecord { requested_ms: 5 };
        assert_eq!(decode::<DrainRecord>(&encode(&r)), Ok(r));
        let p = PlacementRecord {
            member: "a".into(),
            epoch: 7,
            reason: Reason::Failover,
            previous: Some("b".into()),
            previous_lease: Some(7),
            handover: None,
            audit: 3,
        };
        let b = encode(&p);
        assert!(std::str::from_utf8(&b).unwrap().contains("\"failover\""));
        assert_eq!(decode::<PlacementRecord>(&b), Ok(p));
    }
}
