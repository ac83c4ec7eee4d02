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
use vecgate_control::learned::{Hop, Learned};

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

/// Virtual port numbers of tunnels, kept stable across live changes: a
/// tunnel keeps its port for its whole life, so adding or deleting one
/// never renumbers another (its neighbour entries, counters and in-flight
/// packets stay its own), and a deleted tunnel's port is not handed out
/// again until the allocator has gone round all
/// [`dataplane::graph::MAX_VIRTUAL_PORTS`] (packets still carrying it are
/// dropped as `interface-down`, counted, instead of entering another
/// tunnel). At startup tunnel `i` gets port `interfaces + i`.
#[derive(Clone, Debug)]
pub struct TunnelPorts {
    first: usize,
    by_name: HashMap<String, u16>,
    /// Where the next search for a free port starts (round robin).
    cursor: usize,
}

impl TunnelPorts {
    /// An allocator for a gateway with `physical` interfaces.
    pub fn new(physical: usize) -> Self {
        TunnelPorts {
            first: physical,
            by_name: HashMap::new(),
            cursor: 0,
        }
    }

    /// Ports for `cfg`'s tunnels: existing names keep theirs, new ones get
    /// free ports. Nothing changes until [`TunnelPorts::commit`].
    pub fn assign(&self, cfg: &Config) -> Result<Assignment, String> {
        let max = dataplane::graph::MAX_VIRTUAL_PORTS;
        let mut out: HashMap<String, u16> = HashMap::new();
        for t in &cfg.tunnels {
            if let Some(p) = self.by_name.get(&t.name) {
                out.insert(t.name.clone(), *p);
            }
        }
        let mut cursor = self.cursor;
        for t in &cfg.tunnels {
            if out.contains_key(&t.name) {
                continue;
            }
            let used = |p: u16| out.values().any(|v| *v == p);
            let mut found = None;
            for k in 0..max {
                let slot = (cursor + k) % max;
                let port = u16::try_from(self.first + slot)
                    .map_err(|_| "too many interfaces for tunnel ports".to_string())?;
                if !used(port) {
                    found = Some((slot, port));
                    break;
                }
            }
            let (slot, port) = found.ok_or_else(|| {
                format!(
                    "tunnel {}: no free virtual port (at most {max} tunnels)",
                    t.name
                )
            })?;
            cursor = (slot + 1) % max;
            out.insert(t.name.clone(), port);
        }
        Ok(Assignment { ports: out, cursor })
    }

    /// Makes `a` (from [`TunnelPorts::assign`]) the current assignment.
    pub fn commit(&mut self, a: Assignment) {
        self.by_name = a.ports;
        self.cursor = a.cursor;
    }
}

/// Tunnel name → virtual port, as [`TunnelPorts::assign`] proposes it.
#[derive(Clone, Debug)]
pub struct Assignment {
    pub ports: HashMap<String, u16>,
    cursor: usize,
}

/// Builds the dataplane tables: port `i` is `cfg.interfaces[i]`, `netdevs[i]`
/// its netdev's facts; tunnel `t` is on virtual port `tunnel_ports[t.name]`
/// (from a [`TunnelPorts`] that lives as long as the gateway).
/// The IPsec SAs come from `esp` (created once by [`vecgate_ipsec::static_sas::load`] and
/// shared by every rebuild); ipsec tunnels need them. The learned routes
/// that win their prefix by administrative distance
/// ([`vecgate_control::learned`]) go in as multipath route groups; `held`
/// are the VRRP virtual addresses this gateway holds, per port.
pub fn build_tables_ported(
    cfg: &Config,
    netdevs: &[NetdevInfo],
    esp: Option<&vecgate_ipsec::EspRegistry>,
    tunnel_ports: &HashMap<String, u16>,
    learned: &Learned,
    held: &HashMap<u16, Vec<std::net::IpAddr>>,
) -> Result<Tables, String> {
    let port_of = |name: &str| {
        tunnel_ports
            .get(name)
            .copied()
            .ok_or_else(|| format!("tunnel {name}: no virtual port assigned"))
    };
    let vrfs = vrf_ids(cfg);
    let mut b = TablesBuilder::new();
    let mut by_id: Vec<(&String, &u32)> = vrfs.iter().collect();
    by_id.sort_by_key(|(_, id)| **id);
    for (name, id) in by_id {
        b.add_vrf(*id, name);
    }
    for (port, (ifc, nd)) in cfg.interfaces.iter().zip(netdevs).enumerate() {
        let mut addrs: Vec<Prefix> = ifc
            .addresses
            .iter()
            .map(|a| {
                Prefix::new(a.addr, a.prefix_len)
                    .map_err(|e| format!("interface {}: {e}", ifc.name))
            })
            .collect::<Result<_, _>>()?;
        // VRRP virtual addresses held as master (crate::ha): host
        // addresses of the interface, answered and accepted like the others.
        for v in held.get(&(port as u16)).into_iter().flatten() {
            if !addrs.iter().any(|a| a.addr == *v) {
                let len = if v.is_ipv4() { 32 } else { 128 };
                addrs.push(Prefix::new(*v, len).map_err(|e| format!("virtual address {v}: {e}"))?);
            }
        }
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
    // Tunnels: virtual ports from `tunnel_ports`.
    for t in &cfg.tunnels {
        let kind = match t.kind {
            CfgKind::Gre => TunnelKind::Gre,
            CfgKind::Nvgre => TunnelKind::Nvgre,
            CfgKind::Vxlan => TunnelKind::Vxlan,
            CfgKind::Ipsec => {
                let reg = esp.ok_or_else(|| format!("tunnel {}: no IPsec SAs loaded", t.name))?;
                let pl = crate::ipsec_wiring::Placement {
                    port: port_of(&t.name)?,
                    vrf: vrfs[&t.vrf],
                    underlay_vrf: vrfs[&t.underlay_vrf],
                    underlay_mtu: underlay_mtu(cfg, netdevs, t.local),
                    gateway: &cfg.gateway.name,
                };
                crate::ipsec_wiring::add_tunnel(&mut b, reg, t, pl)?;
                continue;
            }
        };
        let port = port_of(&t.name)?;
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
                let t = cfg
                    .tunnel(name)
                    .ok_or_else(|| format!("route {}: no tunnel {name}", r.prefix.addr))?;
                let port = port_of(name)?;
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
    for (vrf, r) in learned.installable(cfg) {
        let Some(id) = vrfs.get(vrf) else {
            continue;
        };
        let hops = r
            .hops
            .iter()
            .map(|h| match h {
                Hop::Via(a) => Route::Via {
                    next_hop: *a,
                    port: None,
                },
                Hop::Blackhole => Route::Drop,
                Hop::Unreachable => Route::Unreachable,
            })
            .collect();
        b.add_route_group(*id, r.prefix, hops);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(names: &[&str]) -> Config {
        let mut text = String::from(
            "[gateway]\nname = \"g\"\n[[interface]]\nname = \"wan\"\nhost = \"veth0\"\ndriver = \"af_packet\"\naddresses = [\"192.0.2.1/24\"]\n",
        );
        for (i, n) in names.iter().enumerate() {
            text.push_str(&format!(
                "[[tunnel]]\nname = \"{n}\"\nkind = \"gre\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.{}\"\n",
                i + 10
            ));
        }
        vecgate_config::parse(&text).expect("test config parses")
    }

    #[test]
    fn tunnel_ports_are_stable_and_not_reused_at_once() {
        let mut tp = TunnelPorts::new(1);
        let a = tp.assign(&cfg(&["a", "b", "c"])).unwrap();
        assert_eq!(
            (a.ports["a"], a.ports["b"], a.ports["c"]),
            (1, 2, 3),
            "startup order"
        );
        tp.commit(a);
        // Deleting "a" renumbers nobody.
        let b = tp.assign(&cfg(&["b", "c"])).unwrap();
        assert_eq!((b.ports["b"], b.ports["c"]), (2, 3));
        tp.commit(b);
        // A new tunnel does not get the freed port 1.
        let c = tp.assign(&cfg(&["b", "c", "d"])).unwrap();
        assert_eq!(c.ports["d"], 4);
        tp.commit(c);
        let d = tp.assign(&cfg(&["b", "c", "d", "e"])).unwrap();
        assert_eq!(d.ports["e"], 5);
    }
}
