//! Semantic checks of `[ha]` (a child of `validate`).

use super::V;
use std::collections::HashSet;
use std::net::IpAddr;

pub(super) fn check(v: &mut V<'_>) {
    let Some(h) = &v.cfg.ha else {
        return;
    };
    let p = v.pos.ha.clone();
    for t in &h.track {
        if !v.cfg.interfaces.iter().any(|i| &i.name == t) {
            v.err(
                p.key("track"),
                "[ha]",
                format!("track: no [[interface]] named \"{t}\""),
            );
        }
    }
    let mut seen = HashSet::new();
    for (i, g) in h.groups.iter().enumerate() {
        let gp = p.sub(i, &format!("group[{i}]"));
        let label = format!("[[ha.group]] vrid {}", g.vrid);
        if g.vrid == 0 {
            v.err(gp.key("vrid"), &label, "vrid must be 1..=255".to_owned());
        }
        for t in &g.track {
            if !v.cfg.interfaces.iter().any(|i| &i.name == t) {
                v.err(
                    gp.key("track"),
                    &label,
                    format!("track: no [[interface]] named \"{t}\""),
                );
            }
        }
        if g.priority == Some(0) {
            v.err(
                gp.key("priority"),
                &label,
                "priority must be 1..=255".to_owned(),
            );
        }
        let Some(first) = g.addresses.first() else {
            v.err(
                gp.key("addresses"),
                &label,
                "needs at least one address".to_owned(),
            );
            continue;
        };
        if g.addresses.len() > 255 {
            v.err(
                gp.key("addresses"),
                &label,
                "at most 255 addresses".to_owned(),
            );
        }
        let v4 = first.is_ipv4();
        if g.addresses.iter().any(|a| a.is_ipv4() != v4) {
            v.err(
                gp.key("addresses"),
                &label,
                "addresses must all be IPv4 or all IPv6 (one group per family, RFC 5798 §1)"
                    .to_owned(),
            );
            continue;
        }
        if g.addresses.iter().any(|a| match a {
            IpAddr::V4(x) => x.is_multicast() || x.is_unspecified() || x.is_broadcast(),
            IpAddr::V6(x) => x.is_multicast() || x.is_unspecified(),
        }) {
            v.err(
                gp.key("addresses"),
                &label,
                "addresses must be unicast".to_owned(),
            );
        }
        match v.cfg.interfaces.iter().find(|i| i.name == g.interface) {
            None => v.err(
                gp.key("interface"),
                &label,
                format!("no [[interface]] named \"{}\"", g.interface),
            ),
            Some(i) => {
                if !i.addresses.iter().any(|a| a.addr.is_ipv4() == v4) {
                    v.err(
                        gp.key("interface"),
                        &label,
                        format!(
                            "interface \"{}\" has no {} address to send advertisements from",
                            g.interface,
                            if v4 { "IPv4" } else { "IPv6" }
                        ),
                    );
                }
            }
        }
        if !seen.insert((g.interface.clone(), v4, g.vrid)) {
            v.err(
                gp.key("vrid"),
                &label,
                format!(
                    "vrid {} is used twice on \"{}\" for one address family",
                    g.vrid, g.interface
                ),
            );
        }
    }
}
