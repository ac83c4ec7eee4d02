//! The named objects of a configuration: `[[interface]]`, `[[tunnel]]`
//! and `[[route]]` tables.

use super::{find, ipsec, name_label, peek_name, tables, Reader, Source};
use crate::model::*;
use crate::position::Positions;
use crate::position::{ObjPos, Pos};
use crate::Diagnostic;
use std::collections::HashSet;
use std::net::IpAddr;
use toml::de::{DeTable, DeValue};

pub(crate) const INTERFACE_KEYS: &[&str] = &[
    "name",
    "host",
    "driver",
    "addresses",
    "vrf",
    "mtu",
    "rsc",
    "offloads",
];
/// The keys of a `[[tunnel]]` table (the API's tunnel fields too).
pub const TUNNEL_KEYS: &[&str] = &[
    "name",
    "kind",
    "local",
    "remote",
    "key",
    "vrf",
    "underlay_vrf",
    "mtu",
    "checksum",
    "sequence",
    "port",
    "addresses",
    "inner",
    "nat_t",
    "traffic",
    "sa",
    "ike",
];
const ROUTE_KEYS: &[&str] = &["vrf", "prefix", "via"];

/// The `[[interface]]`, `[[tunnel]]` and `[[route]]` tables that could be
/// built, positions recorded; the names of broken interfaces and tunnels
/// go to `broken_names`.
pub(super) fn read(
    src: &Source,
    doc: &DeTable<'_>,
    positions: &mut Positions,
    broken_names: &mut HashSet<String>,
    diags: &mut Vec<Diagnostic>,
) -> (Vec<Interface>, Vec<Tunnel>, Vec<Route>) {
    let list = |key: &str, diags: &mut Vec<Diagnostic>| match find(doc, key) {
        Some((k, v)) => tables(src, key, key, v, k.span(), diags),
        None => Vec::new(),
    };
    let iface_tables = list("interface", diags);
    let tunnel_tables = list("tunnel", diags);
    let route_tables = list("route", diags);

    // Route targets are resolved by name, so collect every name first.
    let iface_names: HashSet<String> = iface_tables
        .iter()
        .filter_map(|(_, t, _)| peek_name(t))
        .collect();
    let tunnel_names: HashSet<String> = tunnel_tables
        .iter()
        .filter_map(|(_, t, _)| peek_name(t))
        .collect();

    let mut interfaces = Vec::new();
    for (i, t, at) in &iface_tables {
        match read_interface(src, t, *at, *i, diags) {
            Ok((iface, pos)) => {
                positions.interfaces.push(pos);
                interfaces.push(iface);
            }
            Err(name) => broken_names.extend(name),
        }
    }
    let mut tunnels = Vec::new();
    for (i, t, at) in &tunnel_tables {
        match read_tunnel(src, t, *at, *i, diags) {
            Ok((tunnel, pos)) => {
                positions.tunnels.push(pos);
                tunnels.push(tunnel);
            }
            Err(name) => broken_names.extend(name),
        }
    }
    let mut routes = Vec::new();
    for (i, t, at) in &route_tables {
        let read = read_route(src, t, *at, *i, &iface_names, &tunnel_names, diags);
        if let Some((route, pos)) = read {
            positions.routes.push(pos);
            routes.push(route);
        }
    }

    (interfaces, tunnels, routes)
}

/// One `[[interface]]` (the `i`-th) with its position, or the name of a
/// broken one (reported) so validation does not call it dangling.
fn read_interface(
    src: &Source,
    t: &DeTable<'_>,
    at: Pos,
    i: usize,
    diags: &mut Vec<Diagnostic>,
) -> Result<(Interface, ObjPos), Option<String>> {
    let name = peek_name(t);
    let label = name_label("interface", name.as_deref(), i);
    let mut r = Reader::new(src, t, label, format!("interface[{i}]"), at, diags);
    r.unknown_keys(INTERFACE_KEYS);
    let name = r.string("name", true);
    let host = r.string("host", true);
    let driver = r.parsed::<Driver>("driver", true);
    let addresses = read_addresses(&mut r);
    let vrf = r.vrf("vrf");
    let mtu = r
        .int("mtu", 0..(1 << 32), "68..=65535")
        .and_then(|n| u32::try_from(n).ok());
    let rsc = r.boolean("rsc", true);
    let offloads = r.boolean("offloads", true);
    let (pos, broken) = (r.pos, r.broken);
    match (name, host, driver, broken) {
        (Some(name), Some(host), Some(driver), false) => Ok((
            Interface {
                name,
                host,
                driver,
                addresses,
                vrf,
                mtu,
                rsc,
                offloads,
            },
            pos,
        )),
        (name, ..) => Err(name),
    }
}

/// One `[[tunnel]]` (the `i`-th) with its position, or the name of a broken
/// one (reported).
fn read_tunnel(
    src: &Source,
    t: &DeTable<'_>,
    at: Pos,
    i: usize,
    diags: &mut Vec<Diagnostic>,
) -> Result<(Tunnel, ObjPos), Option<String>> {
    let name = peek_name(t);
    let label = name_label("tunnel", name.as_deref(), i);
    let mut r = Reader::new(src, t, label, format!("tunnel[{i}]"), at, diags);
    r.unknown_keys(TUNNEL_KEYS);
    let name = r.string("name", true);
    let kind = r.parsed::<TunnelKind>("kind", true);
    let local = r.addr("local");
    let remote = r.addr("remote");
    let key = r
        .int("key", 0..(1 << 32), "0..=4294967295")
        .and_then(|n| u32::try_from(n).ok());
    let vrf = r.vrf("vrf");
    let underlay_vrf = r.vrf("underlay_vrf");
    let mtu = r
        .int("mtu", 0..(1 << 32), "68..=65535")
        .and_then(|n| u32::try_from(n).ok());
    let checksum = r.boolean("checksum", false);
    let sequence = r.boolean("sequence", false);
    let port = r
        .int("port", 0..(1 << 16), "1..=65535")
        .and_then(|n| u16::try_from(n).ok())
        .unwrap_or(VXLAN_PORT);
    let addresses = read_addresses(&mut r);
    let inner = r.parsed::<TunnelInner>("inner", false).unwrap_or_default();
    let ipsec = ipsec::read(&mut r);
    let (pos, broken) = (r.pos, r.broken);
    match (name, kind, local, remote, broken) {
        (Some(name), Some(kind), Some(local), Some(remote), false) => Ok((
            Tunnel {
                name,
                kind,
                local,
                remote,
                key,
                vrf,
                underlay_vrf,
                mtu,
                checksum,
                sequence,
                port,
                addresses,
                inner,
                ipsec,
            },
            pos,
        )),
        (name, ..) => Err(name),
    }
}

/// One `[[route]]` (the `i`-th) with its position; `via` names a tunnel
/// when a tunnel (and no interface) has that name.
fn read_route(
    src: &Source,
    t: &DeTable<'_>,
    at: Pos,
    i: usize,
    iface_names: &HashSet<String>,
    tunnel_names: &HashSet<String>,
    diags: &mut Vec<Diagnostic>,
) -> Option<(Route, ObjPos)> {
    let label = match find(t, "prefix").map(|(_, v)| v.get_ref()) {
        Some(DeValue::String(p)) => format!("[[route]] \"{p}\""),
        _ => format!("[[route]] #{}", i + 1),
    };
    let mut r = Reader::new(src, t, label, format!("route[{i}]"), at, diags);
    r.unknown_keys(ROUTE_KEYS);
    let vrf = r.vrf("vrf");
    let prefix = r.parsed::<Prefix>("prefix", true);
    let via = r.string("via", true).map(|v| match v.parse::<IpAddr>() {
        Ok(a) => Via::Address(a),
        // An unknown name stays an interface reference: validation then
        // reports it as dangling, with the same message as for code-built configs.
        Err(_) if tunnel_names.contains(&v) && !iface_names.contains(&v) => Via::Tunnel(v),
        Err(_) => Via::Interface(v),
    });
    let (pos, broken) = (r.pos, r.broken);
    match (prefix, via, broken) {
        (Some(prefix), Some(via), false) => Some((Route { vrf, prefix, via }, pos)),
        _ => None,
    }
}

/// `addresses = ["10.1.0.1/24", ...]`, each element's position recorded.
fn read_addresses(r: &mut Reader<'_, '_, '_>) -> Vec<IfAddr> {
    r.list("addresses", true, str::parse)
}
