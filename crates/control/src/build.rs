//! Maps a validated configuration onto the dataplane's tables.
//!
//! The configuration names things (VRFs, interfaces, tunnels); the
//! dataplane numbers them (VRF ids, port indices). This module is the one
//! place that translates, so `vecgate run` at startup and the API on a live
//! change ([`crate::Control::apply`]) build tables the same way. What the
//! configuration does not say comes in [`Inputs`]: the netdevs' facts,
//! the ports given out so far ([`Ports`]), the routes learned over FPM,
//! the VRRP virtual addresses held, and the ipsec tunnels' SAs (kept by
//! the binary's SA registry, behind [`IpsecTables`]).

use crate::learned::Learned;
use dataplane::fib::Prefix;
use dataplane::tables::{IfFlags, Route, Tables, TablesBuilder};
use dataplane::tunnel::{derived_mac, Tunnel, TunnelDef, TunnelKind};
use std::collections::HashMap;
use std::net::IpAddr;
use vecgate_config::{Config, TunnelKind as CfgKind, Via};

mod ports;

pub use ports::{Assignment, Ports};

/// What the host reported about the netdev an interface attaches to.
#[derive(Clone, Copy, Debug)]
pub struct NetdevFacts {
    pub mac: [u8; 6],
    pub mtu: u32,
    /// The backend exchanges super-packets (vnet headers) with the kernel.
    pub offloads: bool,
}

/// Where an ipsec tunnel goes in the tables.
#[derive(Clone, Copy, Debug)]
pub struct Placement<'a> {
    /// Its virtual port.
    pub port: u16,
    /// Overlay and underlay VRF ids.
    pub vrf: u32,
    pub underlay_vrf: u32,
    /// MTU of the interface that reaches `remote`.
    pub underlay_mtu: u32,
    /// The gateway's name (seeds the interface MAC).
    pub gateway: &'a str,
}

/// Puts an ipsec tunnel into the tables: its interface and its SAs, which
/// live in the SA registry this crate does not depend on. Any closure of
/// that shape is one.
pub trait IpsecTables {
    fn add_tunnel(
        &self,
        b: &mut TablesBuilder,
        t: &vecgate_config::Tunnel,
        at: Placement<'_>,
    ) -> Result<(), String>;
}

impl<F> IpsecTables for F
where
    F: Fn(&mut TablesBuilder, &vecgate_config::Tunnel, Placement<'_>) -> Result<(), String>,
{
    fn add_tunnel(
        &self,
        b: &mut TablesBuilder,
        t: &vecgate_config::Tunnel,
        at: Placement<'_>,
    ) -> Result<(), String> {
        self(b, t, at)
    }
}

/// Everything a build needs besides the configuration.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    /// Per interface name: its netdev's facts.
    pub netdevs: &'a HashMap<String, NetdevFacts>,
    /// Routes learned over FPM; those that win their prefix by
    /// administrative distance go in as multipath route groups.
    pub learned: &'a Learned,
    /// The VRRP virtual addresses this gateway holds, per port.
    pub held: &'a HashMap<u16, Vec<IpAddr>>,
    /// `None`: a configuration with an ipsec tunnel does not build.
    pub ipsec: Option<&'a dyn IpsecTables>,
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

/// Builds the dataplane tables: interface `i` on port
/// `ports.ifaces[i.name]` with the facts `inputs.netdevs[i.name]`, tunnel
/// `t` on virtual port `ports.ports[t.name]`.
pub fn tables(cfg: &Config, ports: &Assignment, inputs: &Inputs<'_>) -> Result<Tables, String> {
    let mut b = Build {
        cfg,
        ports,
        inputs,
        vrfs: vrf_ids(cfg),
        b: TablesBuilder::new(),
    };
    b.vrfs();
    b.interfaces()?;
    b.tunnels()?;
    b.routes()?;
    b.learned();
    b.b.build().map_err(|e| e.to_string())
}

impl Ports {
    /// Builds `cfg`'s tables on the ports its interfaces and tunnels get
    /// ([`Ports::assign`]), and keeps that assignment only when the build
    /// succeeds (only tables that are built get published).
    pub fn tables(&mut self, cfg: &Config, inputs: &Inputs<'_>) -> Result<Tables, String> {
        let a = self.assign(cfg)?;
        let built = tables(cfg, &a, inputs)?;
        self.commit(a);
        Ok(built)
    }
}

/// One build in progress.
struct Build<'a> {
    cfg: &'a Config,
    ports: &'a Assignment,
    inputs: &'a Inputs<'a>,
    vrfs: HashMap<String, u32>,
    b: TablesBuilder,
}

impl Build<'_> {
    fn tunnel_port(&self, name: &str) -> Result<u16, String> {
        let ports = &self.ports.ports;
        ports
            .get(name)
            .copied()
            .ok_or_else(|| format!("tunnel {name}: no virtual port assigned"))
    }

    fn iface_port(&self, name: &str) -> Result<u16, String> {
        let ports = &self.ports.ifaces;
        ports
            .get(name)
            .copied()
            .ok_or_else(|| format!("interface {name}: no port assigned"))
    }

    fn vrfs(&mut self) {
        let mut by_id: Vec<(&String, &u32)> = self.vrfs.iter().collect();
        by_id.sort_by_key(|(_, id)| **id);
        for (name, id) in by_id {
            self.b.add_vrf(*id, name);
        }
    }

    /// Each interface with its addresses, and the VRRP virtual addresses
    /// held on it as host addresses (answered and accepted like the
    /// others).
    fn interfaces(&mut self) -> Result<(), String> {
        for ifc in &self.cfg.interfaces {
            let port = self.iface_port(&ifc.name)?;
            let nd = self
                .inputs
                .netdevs
                .get(&ifc.name)
                .copied()
                .ok_or_else(|| format!("interface {}: its netdev is not attached", ifc.name))?;
            let mut addrs = prefixes(&ifc.addresses, &format!("interface {}", ifc.name))?;
            for v in self.inputs.held.get(&port).into_iter().flatten() {
                if !addrs.iter().any(|a| a.addr == *v) {
                    let len = if v.is_ipv4() { 32 } else { 128 };
                    addrs.push(
                        Prefix::new(*v, len).map_err(|e| format!("virtual address {v}: {e}"))?,
                    );
                }
            }
            let mtu = ifc.mtu.unwrap_or(nd.mtu).min(nd.mtu);
            let vrf = self.vrfs[&ifc.vrf];
            self.b
                .add_interface(port, &ifc.name, nd.mac, mtu, vrf, &addrs);
            let flags = IfFlags {
                offloads: nd.offloads && ifc.offloads,
                rsc: ifc.rsc,
                ipv6: true,
            };
            self.b.set_flags(port, flags);
        }
        Ok(())
    }

    /// Each tunnel on its virtual port: overlay tunnels here, ipsec ones
    /// by [`Inputs::ipsec`].
    fn tunnels(&mut self) -> Result<(), String> {
        let (cfg, inputs) = (self.cfg, self.inputs);
        for t in &cfg.tunnels {
            let port = self.tunnel_port(&t.name)?;
            let underlay_mtu = underlay_mtu(cfg, inputs.netdevs, t.local);
            let kind = match t.kind {
                CfgKind::Gre => TunnelKind::Gre,
                CfgKind::Nvgre => TunnelKind::Nvgre,
                CfgKind::Vxlan => TunnelKind::Vxlan,
                CfgKind::Ipsec => {
                    let ipsec = inputs
                        .ipsec
                        .ok_or_else(|| format!("tunnel {}: no IPsec SAs loaded", t.name))?;
                    let at = Placement {
                        port,
                        vrf: self.vrfs[&t.vrf],
                        underlay_vrf: self.vrfs[&t.underlay_vrf],
                        underlay_mtu,
                        gateway: &cfg.gateway.name,
                    };
                    ipsec.add_tunnel(&mut self.b, t, at)?;
                    continue;
                }
            };
            let def = TunnelDef {
                kind,
                local: t.local,
                remote: t.remote,
                key: t.key,
                underlay_vrf: self.vrfs[&t.underlay_vrf],
                ethernet: t.carries_ethernet(),
                checksum: t.checksum,
                sequence: t.sequence,
                udp_port: t.port,
            };
            let probe = Tunnel::new(port, def.clone(), 0)
                .ok_or_else(|| format!("tunnel {}: local and remote differ in family", t.name))?;
            let derived = underlay_mtu.saturating_sub(probe.mtu_overhead() as u32);
            let mtu = t.mtu.map_or(derived, |m| m.min(derived));
            let addrs = prefixes(&t.addresses, &format!("tunnel {}", t.name))?;
            let mac = derived_mac(&cfg.gateway.name, &t.name);
            self.b
                .add_interface(port, &t.name, mac, mtu, self.vrfs[&t.vrf], &addrs);
            let flags = IfFlags {
                offloads: false,
                rsc: false,
                ipv6: true,
            };
            self.b.set_flags(port, flags);
            self.b.add_tunnel(port, def);
        }
        Ok(())
    }

    /// The static routes.
    fn routes(&mut self) -> Result<(), String> {
        let cfg = self.cfg;
        for r in &cfg.routes {
            let prefix = Prefix::new(r.prefix.addr, r.prefix.len).map_err(|e| e.to_string())?;
            let route = match &r.via {
                Via::Address(nh) => Route::Via {
                    next_hop: *nh,
                    port: None,
                },
                Via::Interface(name) => {
                    let port = self
                        .iface_port(name)
                        .map_err(|_| format!("route {}: no interface {name}", r.prefix.addr))?;
                    // On-link: the destination itself is resolved on that port.
                    Route::Connected { port }
                }
                Via::Tunnel(name) => {
                    let t = cfg
                        .tunnel(name)
                        .ok_or_else(|| format!("route {}: no tunnel {name}", r.prefix.addr))?;
                    let port = self.tunnel_port(name)?;
                    if standby_end(cfg, t.local, self.inputs.held) {
                        // Its local end is a VRRP virtual address we do not
                        // hold: the backup never transmits from it.
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
            self.b.add_route(self.vrfs[&r.vrf], prefix, route);
        }
        Ok(())
    }

    /// The learned routes that win their prefix, as multipath groups.
    fn learned(&mut self) {
        for (vrf, r) in self.inputs.learned.installable(self.cfg) {
            let Some(id) = self.vrfs.get(vrf) else {
                continue;
            };
            let hops = r.hops.iter().map(|h| h.route()).collect();
            self.b.add_route_group(*id, r.prefix, hops);
        }
    }
}

/// The addresses of `what` as dataplane prefixes.
fn prefixes(addrs: &[vecgate_config::IfAddr], what: &str) -> Result<Vec<Prefix>, String> {
    addrs
        .iter()
        .map(|a| Prefix::new(a.addr, a.prefix_len).map_err(|e| format!("{what}: {e}")))
        .collect()
}

/// Whether `local` is a virtual address of a `[[ha.group]]` that this
/// gateway does not hold (`held`): then it is the backup, and a tunnel
/// with that local end must not send (the master does, from the same
/// address; RFC 5798 §6.4.2: a backup "MUST NOT" accept or forward for the
/// virtual router). Routes through such a tunnel drop until it is master.
fn standby_end(cfg: &Config, local: IpAddr, held: &HashMap<u16, Vec<IpAddr>>) -> bool {
    let virtual_addr = cfg
        .ha
        .as_ref()
        .is_some_and(|h| h.groups.iter().any(|g| g.addresses.contains(&local)));
    virtual_addr && !held.values().flatten().any(|a| *a == local)
}

/// MTU of the underlay under a tunnel: that of the interface owning its
/// `local` address (or whose subnet holds it); 1500 if none does.
fn underlay_mtu(cfg: &Config, netdevs: &HashMap<String, NetdevFacts>, local: IpAddr) -> u32 {
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
    use super::ports::tests::cfg;
    use super::*;

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
}
