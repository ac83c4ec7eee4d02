//! `[pool]`: this gateway is a member of an M+N pool of gateways
//! coordinated through etcd (`vecgate_pool`): connections placed on it by
//! the pool's leader, moved away with their SAs when it fails.
//!
//! ```toml
//! [pool]
//! name = "edge-1"                    # the pool (same on every member)
//! member = "gw-a"                    # default: [gateway] name
//! etcd = ["http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"]
//! etcd_ca_file = "/etc/vecgate/etcd-ca.pem"      # https endpoints: the CA
//! etcd_cert_file = "/etc/vecgate/etcd-client.pem" # optional client certificate...
//! etcd_key_file = "/etc/vecgate/etcd-client.key"  # ...and its key (private file)
//! lease_ttl = 3                      # seconds, 1..=60, default 3 (keepalive every TTL/6)
//! pool_key_file = "/etc/vecgate/pool.key"  # 64 hex digits, 0600, root's; same on every member
//! redundant = 1                      # N: members that may fail at once, default 1
//! max_sa_pps = 2097152               # outbound packets/s per SA (the takeover margin)
//!
//! [pool.capacity]                    # what this member carries
//! ipsec_mbps = 5000                  # ESP, Mbit/s
//! gre_mbps = 15000                   # GRE, NVGRE and VXLAN, Mbit/s
//! tunnels = 500                      # connections
//! ```
//!
//! List every member of the etcd cluster in `etcd`: when keepalives fail
//! the member probes each of them to tell a lost quorum (serve on) from
//! being cut off (stop serving), see `vecgate_pool::fence`.

use crate::model::Config;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::PathBuf;

/// Default lease TTL, seconds.
pub const DEFAULT_LEASE_TTL: u32 = 3;
/// Bounds of `lease_ttl`.
pub const MAX_LEASE_TTL: u32 = 60;
/// Default N of M+N.
pub const DEFAULT_REDUNDANT: u32 = 1;
/// Most etcd endpoints listed.
pub const MAX_ENDPOINTS: usize = 15;

/// `[pool]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    pub name: String,
    /// This member's name in the pool (`None`: the gateway's name).
    #[serde(default)]
    pub member: Option<String>,
    /// etcd client URLs (`http://HOST:PORT` or `https://HOST:PORT`).
    pub etcd: Vec<String>,
    #[serde(default)]
    pub etcd_ca_file: Option<PathBuf>,
    #[serde(default)]
    pub etcd_cert_file: Option<PathBuf>,
    #[serde(default)]
    pub etcd_key_file: Option<PathBuf>,
    /// Seconds.
    pub lease_ttl: u32,
    pub pool_key_file: PathBuf,
    pub redundant: u32,
    pub max_sa_pps: u64,
    pub capacity: PoolCapacity,
}

/// `[pool.capacity]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolCapacity {
    pub ipsec_mbps: u64,
    pub gre_mbps: u64,
    pub tunnels: u32,
}

impl Pool {
    /// The member's name: `member`, else the gateway's.
    pub fn member_name<'a>(&'a self, cfg: &'a Config) -> &'a str {
        self.member.as_deref().unwrap_or(&cfg.gateway.name)
    }
}

pub(crate) fn emit(cfg: &Config, s: &mut String, quote: fn(&str) -> String) {
    let Some(p) = &cfg.pool else {
        return;
    };
    let _ = writeln!(s, "\n[pool]");
    let _ = writeln!(s, "name = {}", quote(&p.name));
    if let Some(m) = &p.member {
        let _ = writeln!(s, "member = {}", quote(m));
    }
    let e: Vec<String> = p.etcd.iter().map(|u| quote(u)).collect();
    let _ = writeln!(s, "etcd = [{}]", e.join(", "));
    for (k, f) in [
        ("etcd_ca_file", &p.etcd_ca_file),
        ("etcd_cert_file", &p.etcd_cert_file),
        ("etcd_key_file", &p.etcd_key_file),
    ] {
        if let Some(f) = f {
            let _ = writeln!(s, "{k} = {}", quote(&f.display().to_string()));
        }
    }
    if p.lease_ttl != DEFAULT_LEASE_TTL {
        let _ = writeln!(s, "lease_ttl = {}", p.lease_ttl);
    }
    let _ = writeln!(
        s,
        "pool_key_file = {}",
        quote(&p.pool_key_file.display().to_string())
    );
    if p.redundant != DEFAULT_REDUNDANT {
        let _ = writeln!(s, "redundant = {}", p.redundant);
    }
    if p.max_sa_pps != crate::ha::DEFAULT_MAX_SA_PPS {
        let _ = writeln!(s, "max_sa_pps = {}", p.max_sa_pps);
    }
    let c = &p.capacity;
    let _ = writeln!(s, "\n[pool.capacity]");
    let _ = writeln!(s, "ipsec_mbps = {}", c.ipsec_mbps);
    let _ = writeln!(s, "gre_mbps = {}", c.gre_mbps);
    let _ = writeln!(s, "tunnels = {}", c.tunnels);
}
