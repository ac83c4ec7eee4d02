//! Semantic validation: the one validator shared by `vecgate check`,
//! `vecgate run` and the control API.
//!
//! It works on the typed [`Config`], so it can judge a config built in code
//! as well as one read from a file; positions are optional side information
//! (line 0 when absent).

use crate::model::*;
use crate::Diagnostic;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

/// A 1-based line and column; `line == 0` means "not from a file".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Pos {
    /// 1-based line, 0 when unknown.
    pub line: usize,
    /// 1-based column (bytes), 0 when unknown.
    pub column: usize,
}

#[path = "validate_ha.rs"]
mod ha;
#[path = "validate_ipsec.rs"]
mod ipsec;

/// Where one object and its keys are in the file.
#[derive(Clone, Debug, Default)]
pub(crate) struct ObjPos {
    /// The table header (`[[interface]]`).
    pub table: Pos,
    /// Each key that was present.
    pub keys: Vec<(&'static str, Pos)>,
    /// Elements of the object's array (`addresses`), in order.
    pub items: Vec<Pos>,
    /// Sub-tables (`[[tunnel.sa]]`), in order.
    pub subs: Vec<ObjPos>,
}

impl ObjPos {
    pub(crate) fn new(table: Pos) -> Self {
        ObjPos {
            table,
            keys: Vec::new(),
            items: Vec::new(),
            subs: Vec::new(),
        }
    }

    /// The key's position, or the table's when the key was defaulted.
    pub(crate) fn key(&self, key: &str) -> Pos {
        self.keys
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, p)| *p)
            .unwrap_or(self.table)
    }

    fn item(&self, i: usize, key: &str) -> Pos {
        self.items.get(i).copied().unwrap_or_else(|| self.key(key))
    }
}

/// Positions of every object, index-aligned with the [`Config`]'s vectors.
#[derive(Clone, Debug, Default)]
pub(crate) struct Positions {
    pub gateway: ObjPos,
    pub interfaces: Vec<ObjPos>,
    pub tunnels: Vec<ObjPos>,
    pub routes: Vec<ObjPos>,
    pub routing: ObjPos,
    pub routing_tables: Vec<ObjPos>,
    pub routing_punts: Vec<ObjPos>,
    /// `[ha]`; its `subs` are the `[[ha.group]]` tables.
    pub ha: ObjPos,
}

fn nth(v: &[ObjPos], i: usize) -> ObjPos {
    v.get(i).cloned().unwrap_or_default()
}

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
    fn err(&mut self, at: Pos, label: &str, msg: String) {
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
    gateway(&mut v);
    names(&mut v);
    interfaces(&mut v);
    tunnels(&mut v);
    ipsec::check(&mut v);
    routes(&mut v, broken_names);
    routing(&mut v);
    ha::check(&mut v);
    let mut out = v.out;
    out.sort_by_key(|d| (d.line, d.column));
    out
}

fn gateway(v: &mut V<'_>) {
    let g = &v.cfg.gateway;
    let p = &v.pos.gateway;
    if let Some(m) = check_name("name", &g.name) {
        v.err(p.key("name"), "[gateway]", m);
    }
    if !(1..=64).contains(&g.workers) {
        let m = format!("workers = {} is out of range (expected 1..=64)", g.workers);
        v.err(p.key("workers"), "[gateway]", m);
    }
    if let ApiEndpoint::Unix(path) = &g.api {
        if !path.is_absolute() {
            let m = format!(
                "api unix socket path \"{}\" must be absolute",
                path.display()
            );
            v.err(p.key("api"), "[gateway]", m);
        }
    }
    // A TCP endpoint is reachable by anyone who can route to it: the API
    // refuses to run it without a bearer token.
    if matches!(g.api, ApiEndpoint::Tcp(_)) && g.api_token_file.is_none() {
        let m = format!(
            "api \"{}\" is a TCP endpoint: api_token_file (a file holding the admin bearer token) is required",
            g.api
        );
        v.err(p.key("api"), "[gateway]", m);
    }
    // Tokens cross the network only inside TLS (RFC 6750 §5.3); plain
    // HTTP only when asked for, and only on loopback.
    let tls = g.api_tls_cert_file.is_some() || g.api_tls_key_file.is_some();
    match &g.api {
        ApiEndpoint::Tcp(addr) => {
            if g.api_tls_cert_file.is_some() != g.api_tls_key_file.is_some() {
                let (have, need) = if g.api_tls_cert_file.is_some() {
                    ("api_tls_cert_file", "api_tls_key_file")
                } else {
                    ("api_tls_key_file", "api_tls_cert_file")
                };
                v.err(p.key(have), "[gateway]", format!("{have} needs {need} too"));
            }
            if tls && g.api_insecure_loopback {
                let m = "api_insecure_loopback = true with api_tls_cert_file: choose one (TLS, or plain HTTP on loopback)".to_owned();
                v.err(p.key("api_insecure_loopback"), "[gateway]", m);
            } else if !tls && !g.api_insecure_loopback {
                let m = format!(
                    "api \"{}\" is a TCP endpoint: api_tls_cert_file and api_tls_key_file are required (TLS), or api_insecure_loopback = true on a loopback address",
                    g.api
                );
                v.err(p.key("api"), "[gateway]", m);
            } else if !tls && !addr.ip().is_loopback() {
                let m = format!(
                    "api_insecure_loopback: api \"{}\" is not a loopback address (plain HTTP would carry the token over the network): configure api_tls_cert_file and api_tls_key_file",
                    g.api
                );
                v.err(p.key("api_insecure_loopback"), "[gateway]", m);
            }
        }
        ApiEndpoint::Unix(_) => {
            for (key, set) in [
                ("api_tls_cert_file", g.api_tls_cert_file.is_some()),
                ("api_tls_key_file", g.api_tls_key_file.is_some()),
                ("api_insecure_loopback", g.api_insecure_loopback),
            ] {
                if set {
                    let m = format!(
                        "{key} applies to a TCP api only (a unix socket is guarded by its permissions)"
                    );
                    v.err(p.key(key), "[gateway]", m);
                }
            }
        }
    }
    for (key, f) in g.path_keys() {
        if let Some(path) = f {
            if !path.is_absolute() {
                let m = format!("{key} \"{}\" must be an absolute path", path.display());
                v.err(p.key(key), "[gateway]", m);
            }
        }
    }
    if g.api_readonly_token_file.is_some() && g.api_token_file.is_none() {
        let m = "api_readonly_token_file needs api_token_file too".to_owned();
        v.err(p.key("api_readonly_token_file"), "[gateway]", m);
    }
}

/// Interfaces and tunnels share one namespace: both are route targets.
fn names(v: &mut V<'_>) {
    let mut seen: HashMap<&str, (&str, Pos)> = HashMap::new();
    let objs = v
        .cfg
        .interfaces
        .iter()
        .enumerate()
        .map(|(i, x)| ("interface", x.name.as_str(), nth(&v.pos.interfaces, i)))
        .chain(
            v.cfg
                .tunnels
                .iter()
                .enumerate()
                .map(|(i, x)| ("tunnel", x.name.as_str(), nth(&v.pos.tunnels, i))),
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

fn interfaces(v: &mut V<'_>) {
    let mut hosts: HashMap<&str, (&str, Pos)> = HashMap::new();
    let mut nets: Vec<Net<'_>> = Vec::new();
    for (i, ifc) in v.cfg.interfaces.iter().enumerate() {
        let p = nth(&v.pos.interfaces, i);
        let label = format!("[[interface]] \"{}\"", ifc.name);
        if let Some(m) = check_host(&ifc.host) {
            v.err(p.key("host"), &label, m);
        } else if let Some((other, first)) = hosts.get(ifc.host.as_str()) {
            let m = format!(
                "host \"{}\" is already attached by interface \"{other}\"{}",
                ifc.host,
                at_line(*first)
            );
            v.err(p.key("host"), &label, m);
        } else {
            hosts.insert(&ifc.host, (&ifc.name, p.table));
        }
        if let Some(m) = check_name("vrf", &ifc.vrf) {
            v.err(p.key("vrf"), &label, m);
        }
        let has_v6 = ifc.addresses.iter().any(|a| a.addr.is_ipv6());
        let (min, why) = if has_v6 {
            (
                MIN_MTU_V6,
                ": the interface has IPv6 addresses, RFC 8200 §5",
            )
        } else {
            (MIN_MTU_V4, "")
        };
        check_mtu(v, &label, &p, ifc.mtu, min, why);
        for (j, a) in ifc.addresses.iter().enumerate() {
            let at = p.item(j, "addresses");
            if a.prefix_len > if a.addr.is_ipv4() { 32 } else { 128 } {
                v.err(at, &label, format!("address {a}: prefix length too long"));
                continue;
            }
            if !unicast(a.addr) {
                v.err(at, &label, format!("address {a} is not a unicast address"));
                continue;
            }
            nets.push(Net {
                vrf: &ifc.vrf,
                addr: *a,
                range: range(a.network()),
                owner: &ifc.name,
                at,
                order: nets.len(),
            });
        }
    }
    overlaps(v, nets);
}

/// An interface subnet for the overlap check.
struct Net<'a> {
    vrf: &'a str,
    addr: IfAddr,
    /// Family, first and last address of the subnet.
    range: (bool, u128, u128),
    owner: &'a str,
    at: Pos,
    /// Position in file order, to report a clash on the later address.
    order: usize,
}

fn range(p: Prefix) -> (bool, u128, u128) {
    match p.addr {
        IpAddr::V4(a) => {
            let host = u32::MAX.checked_shr(u32::from(p.len)).unwrap_or(0);
            let start = u32::from(a) & !host;
            (false, u128::from(start), u128::from(start | host))
        }
        IpAddr::V6(a) => {
            let host = u128::MAX.checked_shr(u32::from(p.len)).unwrap_or(0);
            let start = u128::from(a) & !host;
            (true, start, start | host)
        }
    }
}

/// Connected subnets may not overlap within a VRF: the FIB could not tell
/// which interface a neighbour is on. Sorted sweep, O(n log n): prefixes
/// either nest or are disjoint, so a subnet overlaps an earlier-starting one
/// exactly when it starts before the widest one seen so far ends.
fn overlaps(v: &mut V<'_>, mut nets: Vec<Net<'_>>) {
    nets.sort_by_key(|n| (n.vrf, n.range.0, n.range.1, std::cmp::Reverse(n.range.2)));
    let mut cover: Option<usize> = None;
    for i in 0..nets.len() {
        let Some(c) = cover.filter(|c| {
            let (a, b) = (&nets[*c], &nets[i]);
            a.vrf == b.vrf && a.range.0 == b.range.0 && b.range.1 <= a.range.2
        }) else {
            cover = Some(i);
            continue;
        };
        let (first, later) = if nets[c].order < nets[i].order {
            (&nets[c], &nets[i])
        } else {
            (&nets[i], &nets[c])
        };
        let m = format!(
            "address {} overlaps {} of interface \"{}\"{} in VRF \"{}\"",
            later.addr,
            first.addr.network(),
            first.owner,
            at_line(first.at),
            later.vrf
        );
        let label = format!("[[interface]] \"{}\"", later.owner);
        let at = later.at;
        v.err(at, &label, m);
    }
}

fn tunnels(v: &mut V<'_>) {
    type Identity = (TunnelKind, IpAddr, IpAddr, Option<u32>, u16);
    let mut ids: HashMap<Identity, (&str, Pos)> = HashMap::new();
    for (i, t) in v.cfg.tunnels.iter().enumerate() {
        let p = nth(&v.pos.tunnels, i);
        let label = format!("[[tunnel]] \"{}\"", t.name);
        for (key, vrf) in [("vrf", &t.vrf), ("underlay_vrf", &t.underlay_vrf)] {
            if let Some(m) = check_name(key, vrf) {
                v.err(p.key(key), &label, m);
            }
        }
        if t.local.is_ipv4() != t.remote.is_ipv4() {
            let m = format!(
                "local {} is {} but remote {} is {}: both ends of a tunnel must be the same address family",
                t.local,
                family(t.local),
                t.remote,
                family(t.remote)
            );
            v.err(p.key("remote"), &label, m);
        } else if t.local == t.remote {
            let m = format!("local and remote are both {}", t.local);
            v.err(p.key("remote"), &label, m);
        }
        for (key, a) in [("local", t.local), ("remote", t.remote)] {
            if !unicast(a) {
                v.err(
                    p.key(key),
                    &label,
                    format!("{key} {a} is not a unicast address"),
                );
            }
        }
        let kp = p.key("key");
        match (t.kind, t.key) {
            (TunnelKind::Gre, _) => {}
            (TunnelKind::Nvgre, None) => v.err(
                p.table,
                &label,
                "missing required key \"key\" (the NVGRE VSID, RFC 7637 §3.2)".to_owned(),
            ),
            (TunnelKind::Nvgre, Some(k)) if k <= NVGRE_RESERVED_LOW || k == MAX_24BIT => v.err(
                kp,
                &label,
                format!(
                    "key = {k} is a reserved NVGRE VSID (expected 4096..=16777214; 0-0xFFF and 0xFFFFFF are reserved, RFC 7637 §3.2)"
                ),
            ),
            (TunnelKind::Nvgre, Some(k)) if k > MAX_24BIT => v.err(
                kp,
                &label,
                format!("key = {k} is out of range for an NVGRE VSID (24 bits: 4096..=16777214)"),
            ),
            (TunnelKind::Vxlan, None) => v.err(
                p.table,
                &label,
                "missing required key \"key\" (the VXLAN VNI, RFC 7348 §5)".to_owned(),
            ),
            (TunnelKind::Vxlan, Some(k)) if k > MAX_24BIT => v.err(
                kp,
                &label,
                format!("key = {k} is out of range for a VXLAN VNI (24 bits: 0..=16777215)"),
            ),
            (TunnelKind::Ipsec, Some(_)) => v.err(
                kp,
                &label,
                "key has no meaning for kind = \"ipsec\" (SPIs are negotiated by IKEv2)".to_owned(),
            ),
            _ => {}
        }
        if t.kind != TunnelKind::Gre {
            let why = if t.kind == TunnelKind::Nvgre {
                "NVGRE requires the C and S bits to be zero, RFC 7637 §3.2"
            } else {
                "it applies to kind = \"gre\" only"
            };
            for (key, on) in [("checksum", t.checksum), ("sequence", t.sequence)] {
                if on {
                    v.err(
                        p.key(key),
                        &label,
                        format!(
                            "{key} = true is not allowed for kind = \"{}\" ({why})",
                            t.kind
                        ),
                    );
                }
            }
        }
        if t.kind == TunnelKind::Vxlan {
            if t.port == 0 {
                v.err(
                    p.key("port"),
                    &label,
                    "port = 0 is not a valid UDP port".to_owned(),
                );
            }
        } else if t.port != VXLAN_PORT {
            let m = format!("port = {} applies to kind = \"vxlan\" only", t.port);
            v.err(p.key("port"), &label, m);
        }
        check_mtu(v, &label, &p, t.mtu, MIN_MTU_V4, "");
        if t.inner == TunnelInner::Ethernet && t.kind == TunnelKind::Ipsec {
            v.err(
                p.key("inner"),
                &label,
                "inner = \"ethernet\" is not allowed for kind = \"ipsec\" (ESP tunnel mode carries IP)".to_owned(),
            );
        }
        for (j, a) in t.addresses.iter().enumerate() {
            let at = p.item(j, "addresses");
            if a.prefix_len > if a.addr.is_ipv4() { 32 } else { 128 } {
                v.err(at, &label, format!("address {a}: prefix length too long"));
            } else if !unicast(a.addr) {
                v.err(at, &label, format!("address {a} is not a unicast address"));
            }
        }
        // ESP tunnels are told apart by their inbound SPIs (checked unique
        // across tunnels by the IPsec validator), not by a key.
        let id = (t.kind, t.local, t.remote, t.key, t.port);
        if t.kind == TunnelKind::Ipsec {
            continue;
        }
        if let Some((other, first)) = ids.get(&id) {
            let m = format!(
                "same kind, local, remote and key as tunnel \"{other}\"{}: the receiver could not tell them apart",
                at_line(*first)
            );
            v.err(p.table, &label, m);
        } else {
            ids.insert(id, (&t.name, p.table));
        }
    }
}

fn routes(v: &mut V<'_>, broken_names: &HashSet<String>) {
    let mut seen: HashMap<(&str, Prefix, &Via), Pos> = HashMap::new();
    // Name -> VRF, so each route is checked in constant time.
    let ifs: HashMap<&str, &str> = v
        .cfg
        .interfaces
        .iter()
        .map(|i| (i.name.as_str(), i.vrf.as_str()))
        .collect();
    let tuns: HashMap<&str, &str> = v
        .cfg
        .tunnels
        .iter()
        .map(|t| (t.name.as_str(), t.vrf.as_str()))
        .collect();
    for (i, r) in v.cfg.routes.iter().enumerate() {
        let p = nth(&v.pos.routes, i);
        let label = format!("[[route]] \"{}\"", r.prefix);
        if let Some(m) = check_name("vrf", &r.vrf) {
            v.err(p.key("vrf"), &label, m);
        }
        let max = if r.prefix.addr.is_ipv4() { 32 } else { 128 };
        if r.prefix.len > max {
            v.err(
                p.key("prefix"),
                &label,
                format!("prefix length {} is longer than {max}", r.prefix.len),
            );
            continue;
        }
        if r.prefix.masked() != r.prefix {
            let m = format!(
                "prefix {} has host bits set; did you mean {}?",
                r.prefix,
                r.prefix.masked()
            );
            v.err(p.key("prefix"), &label, m);
        }
        let vp = p.key("via");
        let target = match &r.via {
            Via::Address(a) => {
                if a.is_ipv4() != r.prefix.addr.is_ipv4() {
                    let m = format!(
                        "via {a} is {} but the prefix is {}",
                        family(*a),
                        family(r.prefix.addr)
                    );
                    v.err(vp, &label, m);
                } else if !unicast(*a) {
                    v.err(vp, &label, format!("via {a} is not a unicast address"));
                }
                None
            }
            Via::Interface(n) | Via::Tunnel(n) => {
                // The kind the route names, and the other kind of name.
                let ((kind, names), (other, other_names)) = match &r.via {
                    Via::Interface(_) => (("interface", &ifs), ("a tunnel", &tuns)),
                    _ => (("tunnel", &tuns), ("an interface", &ifs)),
                };
                match (names.get(n.as_str()), other_names.get(n.as_str())) {
                    (Some(vrf), _) => Some((kind, n, *vrf)),
                    (None, Some(_)) => {
                        let m = format!("via {kind} \"{n}\": \"{n}\" is {other}");
                        v.err(vp, &label, m);
                        None
                    }
                    (None, None) => {
                        if !broken_names.contains(n) {
                            let m = format!("via \"{n}\": no interface or tunnel has that name");
                            v.err(vp, &label, m);
                        }
                        None
                    }
                }
            }
        };
        if let Some((kind, n, vrf)) = target {
            if vrf != r.vrf {
                let m = format!(
                    "route in VRF \"{}\" cannot point at {kind} \"{n}\" in VRF \"{vrf}\" (a route only reaches its own VRF)",
                    r.vrf
                );
                v.err(vp, &label, m);
            }
        }
        let key = (r.vrf.as_str(), r.prefix.masked(), &r.via);
        if let Some(first) = seen.get(&key) {
            let m = format!(
                "duplicate of the route{} (same vrf, prefix and via)",
                at_line(*first)
            );
            v.err(p.table, &label, m);
        } else {
            seen.insert(key, p.table);
        }
    }
}

/// `[routing]`: table ids and VRFs one to one; tables only with `fpm`.
fn routing(v: &mut V<'_>) {
    let rt = &v.cfg.routing;
    let p = v.pos.routing.clone();
    if !rt.tables.is_empty() && rt.fpm.is_none() {
        v.err(
            p.key("table"),
            "[routing]",
            "[[routing.table]] maps the tables of routes learned over FPM: set fpm = \"ADDRESS:PORT\" too".to_owned(),
        );
    }
    if rt.max_routes == 0 {
        v.err(
            p.key("max_routes"),
            "[routing]",
            "max_routes must be at least 1".to_owned(),
        );
    }
    if rt.max_nexthop_groups == 0 {
        let m = "max_nexthop_groups must be at least 1".to_owned();
        v.err(p.key("max_nexthop_groups"), "[routing]", m);
    }
    let mut ids = HashSet::new();
    let mut vrfs = HashSet::new();
    for (i, t) in rt.tables.iter().enumerate() {
        let tp = nth(&v.pos.routing_tables, i);
        let label = format!("[[routing.table]] {}", t.id);
        if t.id == 0 {
            v.err(
                tp.key("id"),
                &label,
                "id 0 is RT_TABLE_UNSPEC: use 1..=4294967295".to_owned(),
            );
        }
        if !ids.insert(t.id) {
            v.err(
                tp.key("id"),
                &label,
                format!("table {} is mapped twice", t.id),
            );
        }
        if let Some(m) = check_name("vrf", &t.vrf) {
            v.err(tp.key("vrf"), &label, m);
        } else if !vrfs.insert(t.vrf.as_str()) {
            let m = format!("vrf \"{}\" already has a table: one table per VRF", t.vrf);
            v.err(tp.key("vrf"), &label, m);
        }
    }
    routing_punts(v);
}

/// `[[routing.punt]]`: one TUN per VRF, a VRF that has addresses, names
/// the kernel takes and no netdev of the configuration.
fn routing_punts(v: &mut V<'_>) {
    let mut vrfs = HashSet::new();
    let mut taps = HashSet::new();
    for (i, p) in v.cfg.routing.punt.iter().enumerate() {
        let pp = nth(&v.pos.routing_punts, i);
        let label = format!("[[routing.punt]] {}", p.tap);
        let has_vrf = v.cfg.interfaces.iter().any(|x| x.vrf == p.vrf)
            || v.cfg.tunnels.iter().any(|x| x.vrf == p.vrf);
        if !has_vrf {
            let m = format!("vrf \"{}\" has no interface or tunnel", p.vrf);
            v.err(pp.key("vrf"), &label, m);
        } else if !vrfs.insert(p.vrf.as_str()) {
            let m = format!("vrf \"{}\" already has a punt TUN: one per VRF", p.vrf);
            v.err(pp.key("vrf"), &label, m);
        }
        let bad_name = p.tap.is_empty()
            || p.tap.len() > 15
            || p.tap
                .chars()
                .any(|c| c == '/' || c == ':' || c.is_whitespace());
        if bad_name {
            let m = format!(
                "tap = \"{}\" is not an interface name (1..=15 bytes, no '/', ':' or space)",
                p.tap
            );
            v.err(pp.key("tap"), &label, m);
        } else if !taps.insert(p.tap.as_str()) || v.cfg.interfaces.iter().any(|x| x.host == p.tap) {
            let m = format!("tap \"{}\" is used twice", p.tap);
            v.err(pp.key("tap"), &label, m);
        }
        if let Some(n) = &p.netns {
            let bad = n.is_empty()
                || n.len() > 64
                || n == "."
                || n == ".."
                || n.chars().any(|c| c == '/' || c.is_whitespace());
            if bad {
                let m = format!(
                    "netns = \"{n}\" is not a namespace name (1..=64 bytes, no '/' or space)"
                );
                v.err(pp.key("netns"), &label, m);
            }
        }
        if p.fpm.is_some() {
            if p.netns.is_none() {
                let m =
                    "fpm here is the VRF's own zebra's, in its namespace: set netns too".to_owned();
                v.err(pp.key("fpm"), &label, m);
            }
            if v.cfg.routing.fpm.is_some()
                && v.cfg.routing.table_map().iter().any(|t| t.vrf == p.vrf)
            {
                let m = format!(
                    "vrf \"{}\" already takes routes from [routing] fpm's tables: one source per VRF",
                    p.vrf
                );
                v.err(pp.key("fpm"), &label, m);
            }
        }
    }
}
