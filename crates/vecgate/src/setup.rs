//! Maps a validated configuration onto the dataplane's tables.
//!
//! The configuration names things (VRFs, interfaces, tunnels); the dataplane
//! numbers them (VRF ids, port indices). This module is the one place that
//! translates, so `run` at startup and the API on a live change build tables
//! the same way.

use dataplane::fib::Prefix;
use dataplane::tables::{IfFlags, Route, Tables, TablesBuilder};
use dataplane::tunnel::{derived_mac, Tunnel, TunnelDef, TunnelKind};
use std::collections::HashMap;
use std::net::IpAddr;
use vecgate_config::{Config, TunnelKind as CfgKind, Via};

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
/// The IPsec SAs come from `esp` (created once by [`crate::esp::load`] and
/// shared by every rebuild); ipsec tunnels need them.
pub fn build_tables_with(
    cfg: &Config,
    netdevs: &[NetdevInfo],
    esp: Option<&vecgate_ipsec::dp::EspRegistry>,
) -> Result<Tables, String> {
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
    // Tunnels: virtual port `interfaces.len() + i` for `cfg.tunnels[i]`.
    let nports = cfg.interfaces.len();
    for (i, t) in cfg.tunnels.iter().enumerate() {
        let kind = match t.kind {
            CfgKind::Gre => TunnelKind::Gre,
            CfgKind::Nvgre => TunnelKind::Nvgre,
            CfgKind::Vxlan => TunnelKind::Vxlan,
            CfgKind::Ipsec => {
                let reg = esp.ok_or_else(|| format!("tunnel {}: no IPsec SAs loaded", t.name))?;
                let pl = crate::esp::Placement {
                    port: (nports + i) as u16,
                    vrf: vrfs[&t.vrf],
                    underlay_vrf: vrfs[&t.underlay_vrf],
                    underlay_mtu: underlay_mtu(cfg, netdevs, t.local),
                    gateway: &cfg.gateway.name,
                };
                crate::esp::add_tunnel(&mut b, reg, t, pl)?;
                continue;
            }
        };
        let port = (nports + i) as u16;
        let def = TunnelDef {
            kind,
            local: t.local,
            remote: t.remote,
            key: t.key,
            underlay_vrf: vrfs[&t.underlay_vrf],
            ethernet: t.carries_ethernet(),
            checksum: t.checksum,
            sequence: t.sequence,
            udp_port: t.port,
        };
        let probe = Tunnel::new(port, def.clone(), 0)
            .ok_or_else(|| format!("tunnel {}: local and remote differ in family", t.name))?;
        let derived =
            underlay_mtu(cfg, netdevs, t.local).saturating_sub(probe.mtu_overhead() as u32);
        let mtu = t.mtu.map_or(derived, |m| m.min(derived));
        let addrs: Vec<Prefix> = t
            .addresses
            .iter()
            .map(|a| {
                Prefix::new(a.addr, a.prefix_len).map_err(|e| format!("tunnel {}: {e}", t.name))
            })
            .collect::<Result<_, _>>()?;
        let mac = derived_mac(&cfg.gateway.name, &t.name);
        b.add_interface(port, &t.name, mac, mtu, vrfs[&t.vrf], &addrs);
        b.set_flags(
            port,
            IfFlags {
                offloads: false,
                rsc: false,
                ipv6: true,
            },
        );
        b.add_tunnel(port, def);
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
                let i = cfg
                    .tunnels
                    .iter()
                    .position(|t| &t.name == name)
                    .ok_or_else(|| format!("route {}: no tunnel {name}", r.prefix.addr))?;
                let t = &cfg.tunnels[i];
                let port = (nports + i) as u16;
                if t.carries_ethernet() {
                    // An L2 segment: the destination is resolved on it.
                    Route::Connected { port }
                } else {
                    // Point-to-point: no resolution.
                    Route::Port { port }
                }
            }
        };
        b.add_route(vrfs[&r.vrf], prefix, route);
    }
    b.build().map_err(|e| e.to_string())
}

/// MTU of the underlay under a tunnel: that of the interface owning its
/// `local` address (or whose subnet holds it); 1500 if none does.
fn underlay_mtu(cfg: &Config, netdevs: &[NetdevInfo], local: IpAddr) -> u32 {
    let within = |a: &vecgate_config::IfAddr| {
        a.addr == local
            || a.network()
                == vecgate_config::IfAddr {
                    addr: local,
                    prefix_len: a.prefix_len,
                }
                .network()
    };
    cfg.interfaces
        .iter()
        .zip(netdevs)
        .find(|(i, _)| i.addresses.iter().any(within))
        .map_or(1500, |(i, nd)| i.mtu.unwrap_or(nd.mtu).min(nd.mtu))
}
