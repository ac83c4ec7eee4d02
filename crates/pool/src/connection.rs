//! A connection: what a tenant asks the pool to run. It is one
//! `[[tunnel]]` and the `[[route]]`s of its tenant VRF that use it, the
//! shapes of the configuration file, and the bandwidth it reserves.
//!
//! Its id is the tunnel's name (unique in the pool, as in a gateway); its
//! tenant is the tunnel's VRF, so a tenant's connections are grouped by
//! VRF as in the file. The tunnel's `local` address belongs to the
//! connection, not to a member: it moves with it.
//!
//! Checked by the configuration's own validator ([`Connection::check`]):
//! the tunnel and its routes are judged inside the member's configuration
//! as if the file held them, so a connection the pool stores is one any
//! member would accept. Keys stay in files (`key_file`, `psk_file`) that
//! every member holds: the pool stores paths, never keys.

use crate::records::{Class, Demand};
use serde::{Deserialize, Serialize};
use vecgate_config::{Config, FieldError, Route, Tunnel, TunnelKind, Via};

/// The most bandwidth one connection may reserve (10 Tbit/s).
pub const MAX_BANDWIDTH_MBPS: u64 = 10_000_000;
/// The most routes one connection may carry.
pub const MAX_ROUTES: usize = 1024;

/// `conn/<id>`: the desired state of one connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    pub tunnel: Tunnel,
    #[serde(default)]
    pub routes: Vec<Route>,
    /// Mbit/s reserved on the member that runs it, in the tunnel's class.
    pub bandwidth_mbps: u64,
}

impl Connection {
    /// Its id: the tunnel's name.
    pub fn id(&self) -> &str {
        &self.tunnel.name
    }

    /// Its tenant: the tunnel's VRF.
    pub fn tenant(&self) -> &str {
        &self.tunnel.vrf
    }

    pub fn class(&self) -> Class {
        class_of(self.tunnel.kind)
    }

    pub fn demand(&self) -> Demand {
        Demand {
            class: self.class(),
            mbps: self.bandwidth_mbps,
        }
    }

    /// Judges the connection inside `base` (the checking member's own
    /// configuration, which holds no tunnel of this name): the pool's own
    /// rules first, then the configuration's validator on `base` with the
    /// tunnel and routes added. Every problem is returned, each naming its
    /// field (`tunnel`, `routes[2].vrf`, `bandwidth_mbps`).
    pub fn check(&self, base: &Config) -> Result<(), Vec<FieldError>> {
        let mut errs = Vec::new();
        let mut err = |field: String, message: String| errs.push(FieldError { field, message });
        if self.bandwidth_mbps == 0 || self.bandwidth_mbps > MAX_BANDWIDTH_MBPS {
            err(
                "bandwidth_mbps".into(),
                format!(
                    "bandwidth_mbps = {} is out of range (expected 1..={MAX_BANDWIDTH_MBPS})",
                    self.bandwidth_mbps
                ),
            );
        }
        if self.routes.len() > MAX_ROUTES {
            err(
                "routes".into(),
                format!("{} routes, at most {MAX_ROUTES}", self.routes.len()),
            );
        }
        for (i, r) in self.routes.iter().enumerate() {
            if r.vrf != self.tunnel.vrf {
                err(
                    format!("routes[{i}].vrf"),
                    format!(
                        "route {} is in VRF \"{}\": a connection's routes are in its tunnel's VRF \"{}\" (the tenant)",
                        r.prefix, r.vrf, self.tunnel.vrf
                    ),
                );
            }
            if let Via::Interface(n) | Via::Tunnel(n) = &r.via {
                if n != &self.tunnel.name {
                    err(
                        format!("routes[{i}].via"),
                        format!(
                            "route {} goes via \"{n}\": a connection's routes go via its own tunnel \"{}\" or a next-hop address",
                            r.prefix, self.tunnel.name
                        ),
                    );
                }
            }
        }
        if base.tunnels.iter().any(|t| t.name == self.tunnel.name)
            || base.interfaces.iter().any(|i| i.name == self.tunnel.name)
        {
            err(
                "tunnel.name".into(),
                format!(
                    "\"{}\" is already the name of this member's own interface or tunnel",
                    self.tunnel.name
                ),
            );
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        let mut cfg = base.clone();
        cfg.tunnels.push(self.tunnel.clone());
        let first_route = cfg.routes.len();
        cfg.routes.extend(self.routes.iter().cloned().map(|mut r| {
            // The validator resolves `via` by name: ours is the tunnel.
            if let Via::Interface(n) = &r.via {
                r.via = Via::Tunnel(n.clone());
            }
            r
        }));
        let diags = vecgate_config::validate(&cfg);
        if diags.is_empty() {
            return Ok(());
        }
        Err(diags
            .into_iter()
            .map(|d| FieldError {
                field: field_of(&d.message, &self.routes, first_route),
                message: d.message,
            })
            .collect())
    }
}

/// The field a validator message is about: `routes` when it names a
/// route, else `tunnel`.
fn field_of(message: &str, routes: &[Route], _first: usize) -> String {
    if message.starts_with("[[route]]") {
        if let Some(i) = routes
            .iter()
            .position(|r| message.contains(&r.prefix.to_string()))
        {
            return format!("routes[{i}]");
        }
        return "routes".into();
    }
    "tunnel".into()
}

/// The class a tunnel kind's load is counted in.
pub fn class_of(k: TunnelKind) -> Class {
    match k {
        TunnelKind::Ipsec => Class::Ipsec,
        TunnelKind::Gre | TunnelKind::Nvgre | TunnelKind::Vxlan => Class::Gre,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Config {
        vecgate_config::parse(
            r#"
[gateway]
name = "gw"
[[interface]]
name = "wan0"
host = "veth-wan"
driver = "af_packet"
addresses = ["192.0.2.1/24"]
[[interface]]
name = "lan-blue"
host = "veth-blue"
driver = "af_packet"
addresses = ["10.1.0.1/24"]
vrf = "blue"
"#,
        )
        .expect("base config")
    }

    fn conn(text: &str) -> Connection {
        let mut c: Connection = serde_json::from_str(text).expect("json");
        c.bandwidth_mbps = c.bandwidth_mbps.max(1);
        c
    }

    const GRE: &str = r#"{"tunnel":{"name":"blue-1","kind":"gre","local":"192.0.2.100",
        "remote":"198.51.100.1","key":7,"vrf":"blue","underlay_vrf":"default","mtu":null,
        "checksum":false,"sequence":false,"port":4789},
        "routes":[{"vrf":"blue","prefix":"10.2.0.0/24","via":{"tunnel":"blue-1"}}],
        "bandwidth_mbps":100}"#;

    #[test]
    fn a_valid_connection_passes() {
        let c = conn(GRE);
        assert_eq!(c.id(), "blue-1");
        assert_eq!(c.tenant(), "blue");
        assert_eq!(c.class(), Class::Gre);
        assert_eq!(c.check(&base()), Ok(()));
    }

    #[test]
    fn pool_rules_name_their_field() {
        let mut c = conn(GRE);
        c.bandwidth_mbps = 0;
        c.routes[0].vrf = "red".into();
        let e = c.check(&base()).unwrap_err();
        let fields: Vec<&str> = e.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["bandwidth_mbps", "routes[0].vrf"], "{e:?}");

        let mut c = conn(GRE);
        c.routes[0].via = Via::Tunnel("other".into());
        assert_eq!(c.check(&base()).unwrap_err()[0].field, "routes[0].via");

        let mut c = conn(GRE);
        c.tunnel.name = "wan0".into();
        c.routes.clear();
        assert_eq!(c.check(&base()).unwrap_err()[0].field, "tunnel.name");
    }

    #[test]
    fn the_configuration_validator_judges_the_rest() {
        let mut c = conn(GRE);
        c.tunnel.remote = "2001:db8::1".parse().unwrap();
        let e = c.check(&base()).unwrap_err();
        assert_eq!(e[0].field, "tunnel", "{e:?}");
        assert!(e[0].message.contains("same address family"), "{e:?}");

        let mut c = conn(GRE);
        c.tunnel.vrf = "nosuch".into();
        c.routes.clear();
        // A tunnel in a VRF no interface is in is the validator's call,
        // not ours: whatever it says is passed on.
        let _ = c.check(&base());
    }
}
