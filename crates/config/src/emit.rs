//! `Config::to_toml`: the model back to the public file shape.

use crate::model::*;
use std::fmt::Write;

/// A TOML basic string (quotes, backslashes and control characters escaped).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Config {
    /// Renders the configuration in the public file shape. Keys equal to
    /// their default are left out, except `workers` and `api`, which are
    /// spelled out so the file says what the gateway will do. For a valid
    /// config, `parse(&c.to_toml()) == Ok(c)`.
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        let g = &self.gateway;
        let _ = writeln!(s, "[gateway]");
        let _ = writeln!(s, "name = {}", quote(&g.name));
        let _ = writeln!(s, "workers = {}", g.workers);
        let _ = writeln!(s, "api = {}", quote(&g.api.to_string()));
        for (key, f) in g.path_keys() {
            if let Some(p) = f {
                let _ = writeln!(s, "{key} = {}", quote(&p.to_string_lossy()));
            }
        }
        if g.api_insecure_loopback {
            let _ = writeln!(s, "api_insecure_loopback = true");
        }
        if g.busy_poll {
            let _ = writeln!(s, "busy_poll = true");
        }
        if let Some(us) = g.idle_spin_us {
            let _ = writeln!(s, "idle_spin_us = {us}");
        }
        for i in &self.interfaces {
            let _ = writeln!(s, "\n[[interface]]");
            let _ = writeln!(s, "name = {}", quote(&i.name));
            let _ = writeln!(s, "host = {}", quote(&i.host));
            let _ = writeln!(s, "driver = {}", quote(i.driver.as_str()));
            let addrs: Vec<String> = i.addresses.iter().map(|a| quote(&a.to_string())).collect();
            let _ = writeln!(s, "addresses = [{}]", addrs.join(", "));
            if i.vrf != DEFAULT_VRF {
                let _ = writeln!(s, "vrf = {}", quote(&i.vrf));
            }
            if let Some(m) = i.mtu {
                let _ = writeln!(s, "mtu = {m}");
            }
            if !i.rsc {
                let _ = writeln!(s, "rsc = false");
            }
            if !i.offloads {
                let _ = writeln!(s, "offloads = false");
            }
        }
        for t in &self.tunnels {
            let _ = writeln!(s, "\n[[tunnel]]");
            let _ = writeln!(s, "name = {}", quote(&t.name));
            let _ = writeln!(s, "kind = {}", quote(t.kind.as_str()));
            let _ = writeln!(s, "local = {}", quote(&t.local.to_string()));
            let _ = writeln!(s, "remote = {}", quote(&t.remote.to_string()));
            if let Some(k) = t.key {
                let _ = writeln!(s, "key = {k}");
            }
            if t.vrf != DEFAULT_VRF {
                let _ = writeln!(s, "vrf = {}", quote(&t.vrf));
            }
            if t.underlay_vrf != DEFAULT_VRF {
                let _ = writeln!(s, "underlay_vrf = {}", quote(&t.underlay_vrf));
            }
            if let Some(m) = t.mtu {
                let _ = writeln!(s, "mtu = {m}");
            }
            if t.checksum {
                let _ = writeln!(s, "checksum = true");
            }
            if t.sequence {
                let _ = writeln!(s, "sequence = true");
            }
            if t.port != VXLAN_PORT {
                let _ = writeln!(s, "port = {}", t.port);
            }
            if !t.addresses.is_empty() {
                let a: Vec<String> = t.addresses.iter().map(|a| quote(&a.to_string())).collect();
                let _ = writeln!(s, "addresses = [{}]", a.join(", "));
            }
            if t.inner != TunnelInner::Ip {
                let _ = writeln!(s, "inner = {}", quote(t.inner.as_str()));
            }
            if let Some(x) = &t.ipsec {
                crate::ipsec::emit(x, &mut s, quote);
            }
        }
        for r in &self.routes {
            let _ = writeln!(s, "\n[[route]]");
            if r.vrf != DEFAULT_VRF {
                let _ = writeln!(s, "vrf = {}", quote(&r.vrf));
            }
            let _ = writeln!(s, "prefix = {}", quote(&r.prefix.to_string()));
            let _ = writeln!(s, "via = {}", quote(&r.via.to_string()));
        }
        let rt = &self.routing;
        if *rt != Routing::default() {
            let _ = writeln!(s, "\n[routing]");
            if let Some(a) = rt.fpm {
                let _ = writeln!(s, "fpm = {}", quote(&a.to_string()));
            }
            if rt.max_routes != DEFAULT_MAX_ROUTES {
                let _ = writeln!(s, "max_routes = {}", rt.max_routes);
            }
            if rt.max_nexthop_groups != DEFAULT_MAX_NEXTHOP_GROUPS {
                let _ = writeln!(s, "max_nexthop_groups = {}", rt.max_nexthop_groups);
            }
            for t in &rt.tables {
                let _ = writeln!(s, "\n[[routing.table]]");
                let _ = writeln!(s, "id = {}", t.id);
                let _ = writeln!(s, "vrf = {}", quote(&t.vrf));
            }
            for p in &rt.punt {
                let _ = writeln!(s, "\n[[routing.punt]]");
                let _ = writeln!(s, "vrf = {}", quote(&p.vrf));
                let _ = writeln!(s, "tap = {}", quote(&p.tap));
                if let Some(n) = &p.netns {
                    let _ = writeln!(s, "netns = {}", quote(n));
                }
                if let Some(a) = p.fpm {
                    let _ = writeln!(s, "fpm = {}", quote(&a.to_string()));
                }
            }
        }
        crate::ha::emit(self, &mut s, quote);
        crate::pool::emit(self, &mut s, quote);
        s
    }
}
