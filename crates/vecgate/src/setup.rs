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

/// Port numbers of interfaces and tunnels, kept stable across live
/// changes: an interface or tunnel keeps its port for its whole life, so
/// adding or deleting one never renumbers another (its neighbour entries,
/// counters and in-flight packets stay its own). At startup interface `i`
/// gets port `i` and tunnel `j` port `interfaces + j`; what is added
/// later gets a free port of the range above the startup interfaces
/// ([`dataplane::graph::MAX_VIRTUAL_PORTS`] of them, which every worker
/// counts from the start), round robin, so a deleted one's port is not
/// handed out again until the allocator has gone round (packets still
/// carrying it are dropped as `interface-down` / `no-interface`, counted,
/// instead of reaching another interface or tunnel).
#[derive(Clone, Debug)]
pub struct Ports {
    first: usize,
    ifaces: HashMap<String, u16>,
    tunnels: HashMap<String, u16>,
    /// Where the next search for a free port starts (round robin).
    cursor: usize,
}

impl Ports {
    /// An allocator for a gateway started with `cfg`'s interfaces.
    pub fn new(cfg: &Config) -> Self {
        Ports {
            first: cfg.interfaces.len(),
            ifaces: cfg
                .interfaces
                .iter()
                .enumerate()
                .map(|(i, ifc)| (ifc.name.clone(), i as u16))
                .collect(),
            tunnels: HashMap::new(),
            cursor: 0,
        }
    }

    /// Ports for `cfg`'s interfaces and tunnels: existing names keep
    /// theirs, new ones get free ports. Nothing changes until
    /// [`Ports::commit`].
    pub fn assign(&self, cfg: &Config) -> Result<Assignment, String> {
        let max = dataplane::graph::MAX_VIRTUAL_PORTS;
        let mut ifaces: HashMap<String, u16> = HashMap::new();
        let mut tunnels: HashMap<String, u16> = HashMap::new();
        for i in &cfg.interfaces {
            if let Some(p) = self.ifaces.get(&i.name) {
                ifaces.insert(i.name.clone(), *p);
            }
        }
        for t in &cfg.tunnels {
            if let Some(p) = self.tunnels.get(&t.name) {
                tunnels.insert(t.name.clone(), *p);
            }
        }
        let mut cursor = self.cursor;
        let new_ifaces = cfg.interfaces.iter().map(|i| (true, &i.name));
        let new_tunnels = cfg.tunnels.iter().map(|t| (false, &t.name));
        for (is_iface, name) in new_ifaces.chain(new_tunnels) {
            let known = if is_iface { &ifaces } else { &tunnels };
            if known.contains_key(name) {
                continue;
            }
            let used = |p: u16| ifaces.values().chain(tunnels.values()).any(|v| *v == p);
            let mut found = None;
            for k in 0..max {
                let slot = (cursor + k) % max;
                let port = u16::try_from(self.first + slot)
                    .map_err(|_| "too many interfaces for the port numbers".to_string())?;
                if !used(port) {
                    found = Some((slot, port));
                    break;
                }
            }
            let (slot, port) = found.ok_or_else(|| {
                format!("{name}: no free port (at most {max} tunnels and interfaces added live)")
            })?;
            cursor = (slot + 1) % max;
            if is_iface {
                ifaces.insert(name.clone(), port);
            } else {
                tunnels.insert(name.clone(), port);
            }
        }
        Ok(Assignment {
            ifaces,
            ports: tunnels,
            cursor,
        })
    }

    /// Makes `a` (from [`Ports::assign`]) the current assignment.
    pub fn commit(&mut self, a: Assignment) {
        self.ifaces = a.ifaces;
        self.tunnels = a.ports;
        self.cursor = a.cursor;
    }
}

/// Interface and tunnel names → ports, as [`Ports::assign`] proposes them.
#[derive(Clone, Debug, Default)]
pub struct Assignment {
    pub ifaces: HashMap<String, u16>,
    /// Tunnels' virtual ports.
    pub ports: HashMap<String, u16>,
    cursor: usize,
}

/// Builds the dataplane tables: interface `i` is on port
/// `ports.ifaces[i.name]` with netdev facts `netdevs[i.name]`, tunnel `t`
/// on virtual port `ports.ports[t.name]` (from a [`Ports`] that lives as
/// long as the gateway).
/// The IPsec SAs come from `esp` (created once by [`vecgate_ipsec::static_sas::load`] and
/// shared by every rebuild); ipsec tunnels need them. The learned routes
/// that win their prefix by administrative distance
/// ([`vecgate_control::learned`]) go in as multipath route groups; `held`
/// are the VRRP virtual addresses this gateway holds, per port.
pub fn build_tables_ported(
    cfg: &Config,
    netdevs: &HashMap<String, NetdevInfo>,
    esp: Option<&vecgate_ipsec::EspRegistry>,
    ports: &Assignment,
    learned: &Learned,
    held: &HashMap<u16, Vec<std::net::IpAddr>>,
) -> Result<Tables, String> {
    let port_of = |name: &str| {
        ports
            .ports
            .get(name)
            .copied()
            .ok_or_else(|| format!("tunnel {name}: no virtual port assigned"))
    };
    let iface_port = |name: &str| {
        ports
            .ifaces
            .get(name)
            .copied()
            .ok_or_else(|| format!("interface {name}: no port assigned"))
    };
    let netdev = |name: &str| {
        netdevs
            .get(name)
            .copied()
            .ok_or_else(|| format!("interface {name}: its netdev is not attached"))
    };
    let vrfs = vrf_ids(cfg);
    let mut b = TablesBuilder::new();
    let mut by_id: Vec<(&String, &u32)> = vrfs.iter().collect();
    by_id.sort_by_key(|(_, id)| **id);
    for (name, id) in by_id {
        b.add_vrf(*id, name);
    }
    for ifc in &cfg.interfaces {
        let port = usize::from(iface_port(&ifc.name)?);
        let nd = netdev(&ifc.name)?;
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
                let port = iface_port(name)
                    .map_err(|_| format!("route {}: no interface {name}", r.prefix.addr))?;
                // On-link: the destination itself is resolved on that port.
                Route::Connected { port }
            }
            Via::Tunnel(name) => {
                let t = cfg
                    .tunnel(name)
                    .ok_or_else(|| format!("route {}: no tunnel {name}", r.prefix.addr))?;
                let port = port_of(name)?;
                if standby_end(cfg, t.local, held) {
                    // Its local end is a VRRP virtual address we do not
                    // hold: the backup never transmits on it (issue 16).
                    Route::Drop
                } else if t.carries_ethernet() {
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

/// Whether `local` is a virtual address of a `[[ha.group]]` that this
/// gateway does not hold (`held`, crate::ha): then it is the backup, and a
/// tunnel with that local end must not send (the master does, from the same
/// address; RFC 5798 §6.4.2: a backup "MUST NOT" accept or forward for the
/// virtual router). Routes through such a tunnel drop until it is master.
fn standby_end(
    cfg: &Config,
    local: std::net::IpAddr,
    held: &HashMap<u16, Vec<std::net::IpAddr>>,
) -> bool {
    let virtual_addr = cfg
        .ha
        .as_ref()
        .is_some_and(|h| h.groups.iter().any(|g| g.addresses.contains(&local)));
    virtual_addr && !held.values().flatten().any(|a| *a == local)
}

/// MTU of the underlay under a tunnel: that of the interface owning its
/// `local` address (or whose subnet holds it); 1500 if none does.
fn underlay_mtu(cfg: &Config, netdevs: &HashMap<String, NetdevInfo>, local: IpAddr) -> u32 {
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
        .filter_map(|i| Some((i, netdevs.get(&i.name)?)))
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
        let mut tp = Ports::new(&cfg(&[]));
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
        assert_eq!(d.ifaces["wan"], 0);
    }

    /// A tunnel whose local end is a VRRP virtual address sends only while
    /// the address is held; other tunnels always.
    #[test]
    fn only_the_holder_of_a_virtual_address_sends_from_it() {
        let mut text = String::from(
            "[gateway]\nname = \"g\"\n[[interface]]\nname = \"wan\"\nhost = \"veth0\"\ndriver = \"af_packet\"\naddresses = [\"192.0.2.1/24\"]\n",
        );
        text.push_str(
            "[ha]\n[[ha.group]]\nvrid = 20\ninterface = \"wan\"\naddresses = [\"192.0.2.100\"]\n",
        );
        let c = vecgate_config::parse(&text).expect("test config parses");
        let vip: IpAddr = "192.0.2.100".parse().unwrap();
        let own: IpAddr = "192.0.2.1".parse().unwrap();
        let mut held = HashMap::new();
        assert!(standby_end(&c, vip, &held), "backup: drop");
        assert!(!standby_end(&c, own, &held), "not a virtual address");
        held.insert(0u16, vec![vip]);
        assert!(!standby_end(&c, vip, &held), "master: send");
        assert!(!standby_end(&cfg(&["a"]), vip, &HashMap::new()), "no [ha]");
    }

    /// An interface added live takes the next free port of the shared
    /// range; removing an interface renumbers nothing, and its port is
    /// not handed out at once.
    #[test]
    fn interfaces_added_live_share_the_range_with_tunnels() {
        let mut tp = Ports::new(&cfg(&[]));
        let a = tp.assign(&cfg(&["a"])).unwrap();
        assert_eq!((a.ifaces["wan"], a.ports["a"]), (0, 1));
        tp.commit(a);
        let mut two = cfg(&["a"]);
        let mut lan = two.interfaces[0].clone();
        lan.name = "lan".into();
        lan.host = "veth1".into();
        lan.addresses.clear();
        two.interfaces.push(lan);
        let b = tp.assign(&two).unwrap();
        assert_eq!((b.ifaces["wan"], b.ifaces["lan"], b.ports["a"]), (0, 2, 1));
        tp.commit(b);
        // lan leaves, a tunnel comes: not on lan's port.
        let c = tp.assign(&cfg(&["a", "b"])).unwrap();
        assert_eq!(c.ports["b"], 3);
        assert!(!c.ifaces.contains_key("lan"));
    }
}
