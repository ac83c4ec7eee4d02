//! Interfaces (`/interfaces`) and the VRFs they and the tunnels make
//! (`/vrfs`).

use super::{lock, ApiError, Control};
use crate::model::{InterfaceInfo, InterfacePatch, InterfaceSpec, InterfaceTraffic, VrfInfo};
use crate::NetdevFacts;
use dataplane::counters::PortSnapshot;
use dataplane::neighbour::fmt_mac;
use dataplane::tables::Tables;
use vecgate_config::Via;

impl Control {
    /// The port of interface or tunnel `name` in the published tables.
    pub fn port_of(&self, name: &str) -> Option<u16> {
        Self::port_in(&self.dp.tables.load(), name)
    }

    pub(super) fn port_in(tables: &Tables, name: &str) -> Option<u16> {
        tables
            .interfaces
            .iter()
            .flatten()
            .find(|i| i.name == name)
            .map(|i| i.port)
    }

    /// Every configured interface with its port's counters (ports are
    /// stable per interface, not its place in the file: one added live
    /// sits above the tunnels' first ports).
    pub fn interface_counters(&self) -> Vec<(String, PortSnapshot)> {
        let cfg = self.config();
        let sum = self.counters();
        let tables = self.dp.tables.load();
        cfg.interfaces
            .iter()
            .map(|i| {
                let c = Self::port_in(&tables, &i.name)
                    .and_then(|p| sum.ports.get(usize::from(p)).copied())
                    .unwrap_or_default();
                (i.name.clone(), c)
            })
            .collect()
    }

    pub fn interfaces(&self) -> Vec<InterfaceInfo> {
        let cfg = self.config();
        let sum = self.counters();
        let tables = self.dp.tables.load();
        cfg.interfaces
            .iter()
            .enumerate()
            .map(|(i, ifc)| {
                let port = Self::port_in(&tables, &ifc.name);
                let t = port.and_then(|p| tables.iface(p));
                // Facts from the tables (every attached interface is in
                // them), else from startup.
                let nd = t
                    .map(|t| NetdevFacts {
                        mac: t.mac,
                        mtu: t.mtu,
                        offloads: false,
                    })
                    .or_else(|| self.dp.netdevs.get(i).copied())
                    .unwrap_or(NetdevFacts {
                        mac: [0; 6],
                        mtu: 0,
                        offloads: false,
                    });
                let c = port
                    .and_then(|p| sum.ports.get(usize::from(p)).copied())
                    .unwrap_or_default();
                InterfaceInfo {
                    name: ifc.name.clone(),
                    host: ifc.host.clone(),
                    driver: ifc.driver.as_str().to_owned(),
                    mac: fmt_mac(nd.mac),
                    mtu: t.map_or(nd.mtu, |t| t.mtu),
                    vrf: ifc.vrf.clone(),
                    addresses: ifc.addresses.iter().map(|a| a.to_string()).collect(),
                    rsc: ifc.rsc,
                    offloads: ifc.offloads,
                    offloads_active: t.is_some_and(|t| t.flags.offloads),
                    counters: InterfaceTraffic::from(&c),
                }
            })
            .collect()
    }

    /// Adds an interface: the spec becomes an `[[interface]]` table
    /// (defaults as in the file), is validated with the rest, and its
    /// netdev is attached ([`Control::apply`]). 409 when the name is in use
    /// or the netdev cannot be attached (missing, held by another gateway).
    pub fn add_interface(&self, spec: &InterfaceSpec) -> Result<(), ApiError> {
        let ifc = spec
            .to_interface()
            .map_err(|e| ApiError::bad(&e.field, e.message))?;
        let _serial = lock(&self.tunnel_ops);
        self.apply("name", |c| {
            if c.interface(&ifc.name).is_some() || c.tunnel(&ifc.name).is_some() {
                return Err(ApiError::new(
                    409,
                    format!("name \"{}\" is already in use", ifc.name),
                    Some("name"),
                ));
            }
            c.interfaces.push(ifc);
            Ok(Some(format!("interface[{}]", c.interfaces.len() - 1)))
        })
    }

    /// Deletes an interface: gone from the tables, its queues closed on
    /// every worker, its netdev released. Refused (409) while a route or
    /// a tunnel's underlay depends on it (validation names which).
    pub fn del_interface(&self, name: &str) -> Result<(), ApiError> {
        let _serial = lock(&self.tunnel_ops);
        self.apply("name", |c| {
            let before = c.interfaces.len();
            c.interfaces.retain(|i| i.name != name);
            if c.interfaces.len() == before {
                return Err(ApiError::not_found(
                    "name",
                    format!("no interface \"{name}\""),
                ));
            }
            if let Some(r) = c
                .routes
                .iter()
                .find(|r| matches!(&r.via, Via::Interface(i) if i == name))
            {
                return Err(ApiError::new(
                    409,
                    format!(
                        "route {} in vrf \"{}\" goes through interface \"{name}\": delete it first",
                        r.prefix, r.vrf
                    ),
                    Some("name"),
                ));
            }
            Ok(None)
        })
    }

    pub fn patch_interface(&self, name: &str, p: &InterfacePatch) -> Result<(), ApiError> {
        if let Some(m) = p.mtu {
            if !(68..=65535).contains(&m) {
                return Err(ApiError::bad(
                    "mtu",
                    format!("mtu = {m} is out of range (expected 68..=65535)"),
                ));
            }
        }
        self.apply("rsc", |c| {
            let (i, ifc) = c
                .interfaces
                .iter_mut()
                .enumerate()
                .find(|(_, i)| i.name == name)
                .ok_or_else(|| ApiError::not_found("name", format!("no interface \"{name}\"")))?;
            if let Some(v) = p.rsc {
                ifc.rsc = v;
            }
            if let Some(v) = p.offloads {
                ifc.offloads = v;
            }
            if let Some(m) = p.mtu {
                ifc.mtu = Some(m);
            }
            Ok(Some(format!("interface[{i}]")))
        })
    }

    pub fn vrfs(&self) -> Vec<VrfInfo> {
        let cfg = self.config();
        let tables = self.dp.tables.load();
        cfg.vrfs()
            .into_iter()
            .map(|name| VrfInfo {
                id: tables
                    .vrfs
                    .iter()
                    .find(|v| v.name == name)
                    .map_or(0, |v| v.id),
                interfaces: cfg
                    .interfaces
                    .iter()
                    .filter(|i| i.vrf == name)
                    .map(|i| i.name.clone())
                    .collect(),
                tunnels: cfg
                    .tunnels
                    .iter()
                    .filter(|t| t.vrf == name)
                    .map(|t| t.name.clone())
                    .collect(),
                routes: cfg.routes.iter().filter(|r| r.vrf == name).count() as u64,
                name,
            })
            .collect()
    }
}
