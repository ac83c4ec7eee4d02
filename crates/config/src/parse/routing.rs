//! `[routing]`, its `[[routing.table]]`s and `[[routing.punt]]`s.

use super::{find, tables, top_table, Reader, Source};
use crate::model::*;
use crate::position::Positions;
use crate::Diagnostic;
use std::ops::Range;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

const ROUTING_KEYS: &[&str] = &["fpm", "max_routes", "max_nexthop_groups", "table", "punt"];
const ROUTING_PUNT_KEYS: &[&str] = &["vrf", "tap", "netns", "fpm"];
const ROUTING_TABLE_KEYS: &[&str] = &["id", "vrf"];

/// `[routing]` and its `[[routing.table]]`s (defaults when absent).
pub(super) fn read(
    src: &Source,
    doc: &DeTable<'_>,
    positions: &mut Positions,
    diags: &mut Vec<Diagnostic>,
) -> Routing {
    let mut out = Routing::default();
    let Some(mut r) = top_table(src, doc, "routing", ROUTING_KEYS, diags) else {
        return out;
    };
    let t = r.table;
    out.fpm = r.socket_addr("fpm");
    if let Some(n) = r.int("max_routes", 1..(1 << 32), "1..=4294967295") {
        out.max_routes = u32::try_from(n).unwrap_or(DEFAULT_MAX_ROUTES);
    }
    if let Some(n) = r.int("max_nexthop_groups", 1..(1 << 32), "1..=4294967295") {
        out.max_nexthop_groups = u32::try_from(n).unwrap_or(DEFAULT_MAX_NEXTHOP_GROUPS);
    }
    let table = r.get("table");
    let punt = r.get("punt");
    positions.routing = r.pos;
    if let Some(pv) = punt {
        let key_span = find(t, "punt").map_or(0..0, |(k, _)| k.span());
        read_punts(src, pv, key_span, positions, &mut out, diags);
    }
    if let Some(tv) = table {
        let key_span = find(t, "table").map_or(0..0, |(k, _)| k.span());
        read_tables(src, tv, key_span, positions, &mut out, diags);
    }
    out
}

/// The `[[routing.punt]]` tables into `out.punt`.
fn read_punts(
    src: &Source,
    pv: &Spanned<DeValue<'_>>,
    key_span: Range<usize>,
    positions: &mut Positions,
    out: &mut Routing,
    diags: &mut Vec<Diagnostic>,
) {
    let path = "routing.punt";
    for (i, tt, at) in tables(src, path, path, pv, key_span, diags) {
        let label = format!("[[routing.punt]] #{}", i + 1);
        let mut r = Reader::new(src, tt, label, format!("{path}[{i}]"), at, diags);
        r.unknown_keys(ROUTING_PUNT_KEYS);
        let vrf = r.string("vrf", true);
        let tap = r.string("tap", true);
        let netns = r.string("netns", false);
        let fpm = r.socket_addr("fpm");
        let (pos, broken) = (r.pos, r.broken);
        if let (Some(vrf), Some(tap), false) = (vrf, tap, broken) {
            positions.routing_punts.push(pos);
            out.punt.push(RoutingPunt {
                vrf,
                tap,
                netns,
                fpm,
            });
        }
    }
}

/// The `[[routing.table]]` tables into `out.tables`.
fn read_tables(
    src: &Source,
    tv: &Spanned<DeValue<'_>>,
    key_span: Range<usize>,
    positions: &mut Positions,
    out: &mut Routing,
    diags: &mut Vec<Diagnostic>,
) {
    let path = "routing.table";
    for (i, tt, at) in tables(src, path, path, tv, key_span, diags) {
        let label = format!("[[routing.table]] #{}", i + 1);
        let mut r = Reader::new(src, tt, label, format!("{path}[{i}]"), at, diags);
        r.unknown_keys(ROUTING_TABLE_KEYS);
        let id = r.int("id", 1..(1 << 32), "1..=4294967295");
        if id.is_none() && r.get("id").is_none() {
            r.missing("id");
        }
        let vrf = r.string("vrf", true);
        let (pos, broken) = (r.pos, r.broken);
        if let (Some(id), Some(vrf), false) = (id.and_then(|n| u32::try_from(n).ok()), vrf, broken)
        {
            positions.routing_tables.push(pos);
            out.tables.push(RoutingTable { id, vrf });
        }
    }
}
