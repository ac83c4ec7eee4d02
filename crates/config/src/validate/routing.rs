//! `[routing]`: routes learned over FPM and the punt TUNs.

use super::{check_name, nth, V};
use std::collections::HashSet;

/// `[routing]`: table ids and VRFs one to one; tables only with `fpm`.
pub(super) fn check(v: &mut V<'_>) {
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
        let tp = nth(&v.pos.routing_tables, "routing.table", i);
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
        let pp = nth(&v.pos.routing_punts, "routing.punt", i);
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
