//! Shape phase of `[ha]` and its `[[ha.group]]` tables (a child of
//! `parse`, using its `Reader`).

use super::ipsec::read_strings;
use super::{find, tables, top_table, Reader, Source};
use crate::ha::{
    Ha, HaGroup, HaSync, DEFAULT_INTERVAL_CS, DEFAULT_MAX_SA_PPS, DEFAULT_PRIORITY,
    DEFAULT_SYNC_INTERVAL_MS, DEFAULT_TRACK_PENALTY, MAX_MAX_SA_PPS, MIN_MAX_SA_PPS,
};
use crate::position::{At, ObjPos, Positions};
use crate::Diagnostic;
use std::net::{IpAddr, SocketAddr};
use toml::de::DeTable;

const HA_KEYS: &[&str] = &[
    "priority",
    "interval_cs",
    "preempt",
    "track",
    "track_penalty",
    "group",
    "sync_local",
    "sync_peer",
    "sync_key_file",
    "sync_interval_ms",
    "max_sa_pps",
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
    let Some(mut r) = top_table(src, doc, "ha", HA_KEYS, diags) else {
        return (None, Positions::default().ha);
    };
    let t = r.table;
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
    let sync = read_sync(&mut r);
    let mut groups = Vec::new();
    if let Some((gk, gv)) = find(t, "group") {
        let key_span = gk.span();
        r.pos.keys.push(("group", src.span(key_span.clone())));
        for (i, gt, at) in tables(src, "ha.group", "ha.group", gv, key_span, r.diags) {
            let label = format!("[[ha.group]] #{}", i + 1);
            let mut g = Reader::new(src, gt, label, format!("ha.group[{i}]"), at, r.diags);
            g.unknown_keys(GROUP_KEYS);
            let vrid = g
                .int("vrid", 1..256, "1..=255")
                .and_then(|n| u8::try_from(n).ok());
            if vrid.is_none() && g.get("vrid").is_none() {
                g.missing("vrid");
            }
            let interface = g.string("interface", true);
            let mut addresses = Vec::new();
            // Reported where the group starts, as the whole list is read.
            let at_addrs = g.at("addresses").pos;
            for (j, s) in read_strings(&mut g, "addresses").into_iter().enumerate() {
                match s.parse::<IpAddr>() {
                    Ok(a) => addresses.push(a),
                    Err(_) => {
                        let field = format!("{}.addresses[{j}]", g.pos.path);
                        g.err(
                            At {
                                pos: at_addrs,
                                field,
                            },
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
            sync,
        }),
        pos,
    )
}

/// A `sync_local` / `sync_peer` value: ADDRESS:PORT, unicast, port set.
fn sock(r: &mut Reader<'_, '_, '_>, key: &'static str) -> Option<SocketAddr> {
    let a = r.socket_addr(key)?;
    if a.port() == 0 || a.ip().is_unspecified() || a.ip().is_multicast() {
        let at = r.at(key);
        r.err(
            at,
            format!("{key} = \"{a}\" must be a unicast address and a non-zero port"),
        );
        r.broken = true;
        return None;
    }
    Some(a)
}

/// The `sync_*` keys: all of local, peer and key file, or none.
fn read_sync(r: &mut Reader<'_, '_, '_>) -> Option<HaSync> {
    let local = sock(r, "sync_local");
    let peer = sock(r, "sync_peer");
    let key_file = r.string("sync_key_file", false);
    let interval_ms = r
        .int("sync_interval_ms", 10..10_001, "10..=10000 milliseconds")
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(DEFAULT_SYNC_INTERVAL_MS);
    let max_sa_pps = r
        .int(
            "max_sa_pps",
            MIN_MAX_SA_PPS as i128..MAX_MAX_SA_PPS as i128 + 1,
            "1000..=1073741824 packets per second per SA",
        )
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(DEFAULT_MAX_SA_PPS);
    let given = [
        (
            "sync_local",
            local.is_some() || r.pos.keys.iter().any(|k| k.0 == "sync_local"),
        ),
        (
            "sync_peer",
            peer.is_some() || r.pos.keys.iter().any(|k| k.0 == "sync_peer"),
        ),
        ("sync_key_file", key_file.is_some()),
    ];
    let any = given.iter().any(|g| g.1)
        || r.pos
            .keys
            .iter()
            .any(|k| k.0 == "sync_interval_ms" || k.0 == "max_sa_pps");
    if !any {
        return None;
    }
    let missing: Vec<&str> = given.iter().filter(|g| !g.1).map(|g| g.0).collect();
    if let Some(first) = missing.first() {
        let at = At {
            pos: r.pos.table,
            field: format!("{}.{first}", r.pos.path),
        };
        r.err(
            at,
            format!(
                "the state sync needs sync_local, sync_peer and sync_key_file together; missing {}",
                missing.join(", ")
            ),
        );
        r.broken = true;
        return None;
    }
    let (local, peer, key_file) = (local?, peer?, key_file?);
    if local.is_ipv4() != peer.is_ipv4() {
        let at = r.at("sync_peer");
        r.err(
            at,
            "sync_local and sync_peer must be of one address family".to_owned(),
        );
        r.broken = true;
        return None;
    }
    if local == peer {
        let at = r.at("sync_peer");
        r.err(at, "sync_peer must differ from sync_local".to_owned());
        r.broken = true;
        return None;
    }
    if key_file.is_empty() {
        let at = r.at("sync_key_file");
        r.err(at, "sync_key_file is empty".to_owned());
        r.broken = true;
        return None;
    }
    Some(HaSync {
        local,
        peer,
        key_file: key_file.into(),
        interval_ms,
        max_sa_pps,
    })
}
