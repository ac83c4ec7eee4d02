//! Maps a validated configuration onto the dataplane's tables.
//!
//! The configuration names things (VRFs, interfaces, tunnels); the dataplane
//! numbers them (VRF ids, port indices). This module is the one place that
//! translates, so `run` at startup and the API on a live change build tables
//! the same way.

use dataplane::fib::Prefix;
use dataplane::tables::{IfFlags, Route, Tables, TablesBuilder};
use std::collections::HashMap;
use vecgate_config::{Config, Via};

/// What the host tells us about a netdev an interface attaches to.
#[derive(Clone, Copy, Debug)]
pub struct NetdevInfo {
    pub mac: [u8; 6],
    pub mtu: u32,
    /// The backend exchanges super-packets (vnet headers) with the kernel.
    pub offloads: bool,
}

/// VRF name → dataplane VRF id (0 is "default"; the others in config order).
pub fn vrf_ids(cfg: &Config) -> HashMap<String, u32> {
    let mut ids = HashMap::new();
    ids.insert("default".to_string(), 0);
    for name in cfg.vrfs() {
        let next = ids.len() as u32;
        ids.entry(name).or_insert(next);
    }
    ids
}

/// Builds the dataplane tables: port `i` is `cfg.interfaces[i]`, `netdevs[i]`
/// its netdev's facts.
pub fn build_tables(cfg: &Config, netdevs: &[NetdevInfo]) -> Result<Tables, String> {
    let vrfs = vrf_ids(cfg);
    let mut b = TablesBuilder::new();
    let mut by_id: Vec<(&String, &u32)> = vrfs.iter().collect();
    by_id.sort_by_key(|(_, id)| **id);
    for (name, id) in by_id {
        b.add_vrf(*id, name);
    }
    for (port, (ifc, nd)) in cfg.interfaces.iter().zip(netdevs).enumerate() {
        let addrs: Vec<Prefix> = ifc
            .addresses
            .iter()
            .map(|a| {
                Prefix::new(a.addr, a.prefix_len)
                    .map_err(|e| format!("interface {}: {e}", ifc.name))
            })
            .collect::<Result<_, _>>()?;
        let mtu = ifc.mtu.unwrap_or(nd.mtu).min(nd.mtu);
        b.add_interface(port as u16, &ifc.name, nd.mac, mtu, vrfs[&ifc.vrf], &addrs);
        b.set_flags(
            port as u16,
            IfFlags {
                offloads: nd.offloads && ifc.offloads,
                rsc: ifc.rsc,
                ipv6: true,
            },
        );
    }
    for r in &cfg.routes {
        let prefix = Prefix::new(r.prefix.addr, r.prefix.len).map_err(|e| e.to_string())?;
        let route = match &r.via {
            Via::Address(nh) => Route::Via {
                next_hop: *nh,
                port: None,
            },
            Via::Interface(name) => {
                let port = cfg
                    .interfaces
                    .iter()
                    .position(|i| &i.name == name)
                    .ok_or_else(|| format!("route {}: no interface {name}", r.prefix.addr))?;
                // On-link: the destination itself is resolved on that port.
                Route::Connected { port: port as u16 }
            }
            Via::Tunnel(name) => {
                return Err(format!(
                    "route {}/{} via tunnel {name}: tunnels arrive with the overlay dataplane (not in this build)",
                    r.prefix.addr, r.prefix.len
                ))
            }
        };
        b.add_route(vrfs[&r.vrf], prefix, route);
    }
    b.build().map_err(|e| e.to_string())
}
