//! `[[route]]`s: prefixes, and a `via` that exists in the route's VRF.

use super::{at_line, check_name, family, nth, unicast, Pos, V};
use crate::model::*;
use std::collections::{HashMap, HashSet};

pub(super) fn check(v: &mut V<'_>, broken_names: &HashSet<String>) {
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
        let p = nth(&v.pos.routes, "route", i);
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
                    v.err(vp.clone(), &label, m);
                } else if !unicast(*a) {
                    v.err(
                        vp.clone(),
                        &label,
                        format!("via {a} is not a unicast address"),
                    );
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
                        v.err(vp.clone(), &label, m);
                        None
                    }
                    (None, None) => {
                        if !broken_names.contains(n) {
                            let m = format!("via \"{n}\": no interface or tunnel has that name");
                            v.err(vp.clone(), &label, m);
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
            v.err(p.whole(), &label, m);
        } else {
            seen.insert(key, p.table);
        }
    }
}
