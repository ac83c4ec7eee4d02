//! Semantic validation: the one validator shared by `vecgate check`,
//! `vecgate run` and the control API.
//!
//! It works on the typed [`Config`], so it can judge a config built in code
//! as well as one read from a file; positions are optional side information
//! (line 0 when absent).

use crate::model::*;
pub(crate) use crate::position::{nth, At, ObjPos, Pos, Positions};
use crate::Diagnostic;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

mod gateway;
mod ha;
mod interfaces;
mod ipsec;
mod pool;
mod routes;
mod routing;
mod tunnels;

/// Checks a configuration built in code; every diagnostic has line 0.
pub fn validate(cfg: &Config) -> Vec<Diagnostic> {
    validate_at(cfg, &Positions::default(), &HashSet::new())
}

fn at_line(p: Pos) -> String {
    if p.line == 0 {
        String::new()
    } else {
        format!(" at line {}", p.line)
    }
}

/// Object names (gateway, interfaces, tunnels, VRFs) end up in socket paths,
/// log lines and API URLs, and route `via` must tell names from addresses.
fn check_name(what: &str, name: &str) -> Option<String> {
    if name.is_empty() || name.len() > 64 {
        return Some(format!("{what} must be 1 to 64 characters long"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        return Some(format!(
            "{what} \"{name}\" may contain only letters, digits, '-', '_' and '.'"
        ));
    }
    if name.parse::<IpAddr>().is_ok() {
        return Some(format!(
            "{what} \"{name}\" looks like an address; a route's via could not tell them apart"
        ));
    }
    None
}

/// Linux netdev names: at most IFNAMSIZ - 1 = 15 bytes, no '/', ':' or
/// whitespace, not "." or ".." (the kernel's `dev_valid_name`).
fn check_host(host: &str) -> Option<String> {
    if host.is_empty() || host.len() > 15 {
        return Some(format!(
            "host \"{host}\" must be a Linux interface name of 1 to 15 bytes"
        ));
    }
    if host == "."
        || host == ".."
        || host
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace())
    {
        return Some(format!(
            "host \"{host}\" is not a valid Linux interface name"
        ));
    }
    None
}

fn family(a: IpAddr) -> &'static str {
    if a.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

fn unicast(a: IpAddr) -> bool {
    !(a.is_unspecified() || a.is_multicast() || a == IpAddr::V4(std::net::Ipv4Addr::BROADCAST))
}

/// Smallest MTU an IPv4 host must accept (RFC 791).
const MIN_MTU_V4: u32 = 68;
/// Smallest link MTU for IPv6 (RFC 8200 §5).
const MIN_MTU_V6: u32 = 1280;
const MAX_MTU: u32 = 65535;
/// VXLAN VNI and NVGRE VSID are 24 bits (RFC 7348 §5, RFC 7637 §3.2).
const MAX_24BIT: u32 = 0xFF_FFFF;
/// RFC 7637 §3.2: VSIDs 0..=0xFFF are reserved for future use.
const NVGRE_RESERVED_LOW: u32 = 0xFFF;

struct V<'a> {
    out: Vec<Diagnostic>,
    cfg: &'a Config,
    pos: &'a Positions,
}

impl V<'_> {
    fn err(&mut self, at: At, label: &str, msg: String) {
        self.out.push(Diagnostic::at(at, format!("{label}: {msg}")));
    }
}

pub(crate) fn validate_at(
    cfg: &Config,
    pos: &Positions,
    broken_names: &HashSet<String>,
) -> Vec<Diagnostic> {
    let mut v = V {
        out: Vec::new(),
        cfg,
        pos,
    };
    gateway::check(&mut v);
    names(&mut v);
    interfaces::check(&mut v);
    tunnels::check(&mut v);
    ipsec::check(&mut v);
    routes::check(&mut v, broken_names);
    routing::check(&mut v);
    ha::check(&mut v);
    pool::check(&mut v);
    let mut out = v.out;
    out.sort_by_key(|d| (d.line, d.column));
    out
}

/// Interfaces and tunnels share one namespace: both are route targets.
fn names(v: &mut V<'_>) {
    let mut seen: HashMap<&str, (&str, Pos)> = HashMap::new();
    let objs = v
        .cfg
        .interfaces
        .iter()
        .enumerate()
        .map(|(i, x)| {
            (
                "interface",
                x.name.as_str(),
                nth(&v.pos.interfaces, "interface", i),
            )
        })
        .chain(
            v.cfg
                .tunnels
                .iter()
                .enumerate()
                .map(|(i, x)| ("tunnel", x.name.as_str(), nth(&v.pos.tunnels, "tunnel", i))),
        )
        .collect::<Vec<_>>();
    for (kind, name, p) in objs {
        let label = format!("[[{kind}]] \"{name}\"");
        if let Some(m) = check_name("name", name) {
            v.err(p.key("name"), &label, m);
        }
        match seen.get(name) {
            Some((first_kind, first)) => {
                let m = format!(
                    "name \"{name}\" is already used by the [[{first_kind}]]{} (interfaces and tunnels share one namespace)",
                    at_line(*first)
                );
                v.err(p.key("name"), &label, m);
            }
            None => {
                seen.insert(name, (kind, p.table));
            }
        }
    }
}

fn check_mtu(v: &mut V<'_>, label: &str, p: &ObjPos, mtu: Option<u32>, min: u32, why: &str) {
    if let Some(m) = mtu {
        if !(min..=MAX_MTU).contains(&m) {
            let msg = format!("mtu = {m} is out of range (expected {min}..={MAX_MTU}{why})");
            v.err(p.key("mtu"), label, msg);
        }
    }
}
