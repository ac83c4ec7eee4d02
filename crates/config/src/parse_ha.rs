//! Shape phase of `[ha]` and its `[[ha.group]]` tables (a child of
//! `parse`, using its `Reader`).

use super::ipsec::read_strings;
use super::{find, tables, type_name, Reader, Source};
use crate::ha::{Ha, HaGroup, DEFAULT_INTERVAL_CS, DEFAULT_PRIORITY, DEFAULT_TRACK_PENALTY};
use crate::validate::{ObjPos, Pos};
use crate::Diagnostic;
use std::net::IpAddr;
use toml::de::{DeTable, DeValue};

const HA_KEYS: &[&str] = &[
    "priority",
    "interval_cs",
    "preempt",
    "track",
    "track_penalty",
    "group",
];
const GROUP_KEYS: &[&str] = &[
    "vrid",
    "interface",
    "addresses",
    "priority",
    "track",
    "track_penalty",
];

/// Reads `[ha]` when present; `ObjPos::subs` holds the groups' positions.
pub(super) fn read(
    src: &Source,
    doc: &DeTable<'_>,
    diags: &mut Vec<Diagnostic>,
) -> (Option<Ha>, ObjPos) {
    let Some((k, v)) = find(doc, "ha") else {
        return (None, ObjPos::default());
    };
    let DeValue::Table(t) = v.get_ref() else {
        diags.push(Diagnostic::at(
            src.span(k.span()),
            format!(
                "\"ha\" must be a table ([ha]), found {}",
                type_name(v.get_ref())
            ),
        ));
        return (None, ObjPos::default());
    };
    let mut r = Reader {
        src,
        table: t,
        label: "[ha]".to_owned(),
        pos: ObjPos::new(src.span(v.span())),
        diags,
        broken: false,
    };
    r.unknown_keys(HA_KEYS);
    let priority = r
        .int("priority", 1..256, "1..=255")
        .and_then(|n| u8::try_from(n).ok())
        .unwrap_or(DEFAULT_PRIORITY);
    let interval_cs = r
        .int("interval_cs", 1..4096, "1..=4095 centiseconds")
        .and_then(|n| u16::try_from(n).ok())
        .unwrap_or(DEFAULT_INTERVAL_CS);
    let preempt = r.boolean("preempt", true);
    let track = read_strings(&mut r, "track");
    let track_penalty = r
        .int("track_penalty", 0..256, "0..=255")
        .and_then(|n| u8::try_from(n).ok())
        .unwrap_or(DEFAULT_TRACK_PENALTY);
    let mut groups = Vec::new();
    if let Some((gk, gv)) = find(t, "group") {
        let key_span = gk.span();
        r.pos.keys.push(("group", src.span(key_span.clone())));
        for (i, (gt, at)) in tables(src, "ha.group", gv, key_span, r.diags)
            .into_iter()
            .enumerate()
        {
            let mut g = Reader {
                src,
                table: gt,
                label: format!("[[ha.group]] #{}", i + 1),
                pos: ObjPos::new(at),
                diags: r.diags,
                broken: false,
            };
            g.unknown_keys(GROUP_KEYS);
            let vrid = g
                .int("vrid", 1..256, "1..=255")
                .and_then(|n| u8::try_from(n).ok());
            if vrid.is_none() && g.get("vrid").is_none() {
                g.missing("vrid");
            }
            let interface = g.string("interface", true);
            let mut addresses = Vec::new();
            let at_addrs: Pos = g.key_pos("addresses");
            for s in read_strings(&mut g, "addresses") {
                match s.parse::<IpAddr>() {
                    Ok(a) => addresses.push(a),
                    Err(_) => {
                        g.err(
                            at_addrs,
                            format!("addresses: \"{s}\" is not an IPv4 or IPv6 address"),
                        );
                        g.broken = true;
                    }
                }
            }
            let priority = g
                .int("priority", 1..256, "1..=255")
                .and_then(|n| u8::try_from(n).ok());
            let track = read_strings(&mut g, "track");
            let track_penalty = g
                .int("track_penalty", 0..256, "0..=255")
                .and_then(|n| u8::try_from(n).ok());
            let (pos, broken) = (g.pos, g.broken);
            if let (Some(vrid), Some(interface), false) = (vrid, interface, broken) {
                r.pos.subs.push(pos);
                groups.push(HaGroup {
                    vrid,
                    interface,
                    addresses,
                    priority,
                    track,
                    track_penalty,
                });
            }
        }
    }
    let pos = r.pos;
    (
        Some(Ha {
            priority,
            interval_cs,
            preempt,
            track,
            track_penalty,
            groups,
        }),
        pos,
    )
}
