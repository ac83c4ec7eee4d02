//! The running configuration the sync reads and changes
//! ([`vecgate_ha::syncer::Running`]), through the management API's own
//! calls: static routes by their `POST /routes` shape, tunnels by their
//! `POST /tunnels` request ([`TunnelSpec`], built from the running
//! tunnel: secrets by file path only, which must exist on both gateways).

use vecgate_control::model::{RouteKey, RouteSpec, TunnelSpec};
use vecgate_control::Control;
use vecgate_ha::sync::RouteRepr;

/// The API's calls on the gateway's [`Control`].
pub struct Follow<'a>(pub &'a Control);

/// Tunnel `t` as the request text the standby compares and applies.
/// Through a `Value`, whose keys are sorted: the text then does not depend
/// on the struct's field order, so gateways of two versions compare equal
/// tunnels as equal during an upgrade.
fn spec_text(t: &vecgate_config::Tunnel) -> String {
    serde_json::to_value(TunnelSpec::from(t))
        .map(|v| v.to_string())
        .unwrap_or_default()
}

impl vecgate_ha::syncer::Running for Follow<'_> {
    fn routes(&self) -> Vec<RouteRepr> {
        self.0
            .config()
            .routes
            .iter()
            .map(|r| RouteRepr {
                vrf: r.vrf.clone(),
                prefix: r.prefix.to_string(),
                via: r.via.to_string(),
            })
            .collect()
    }

    fn tunnels(&self) -> Vec<(String, String)> {
        self.0
            .config()
            .tunnels
            .iter()
            .map(|t| (t.name.clone(), spec_text(t)))
            .collect()
    }

    fn tunnel_name(&self, spec: &str) -> Option<String> {
        serde_json::from_str::<TunnelSpec>(spec)
            .ok()
            .map(|s| s.name)
    }

    fn add_route(&mut self, r: &RouteRepr) -> Result<(), String> {
        self.0
            .add_route(&RouteSpec {
                vrf: Some(r.vrf.clone()),
                prefix: r.prefix.clone(),
                via: r.via.clone(),
            })
            .map(drop)
            .map_err(|e| e.message)
    }

    fn del_route(&mut self, r: &RouteRepr) -> Result<(), String> {
        self.0
            .del_route(&RouteKey {
                vrf: Some(r.vrf.clone()),
                prefix: r.prefix.clone(),
            })
            .map_err(|e| e.message)
    }

    fn add_tunnel(&mut self, spec: &str) -> Result<(), String> {
        let spec: TunnelSpec = serde_json::from_str(spec).map_err(|e| e.to_string())?;
        self.0.add_tunnel(&spec).map_err(|e| e.message)
    }

    fn del_tunnel(&mut self, name: &str) -> Result<(), String> {
        self.0.del_tunnel(name).map_err(|e| e.message)
    }
}
