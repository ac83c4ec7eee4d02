//! The ESP tunnels' part of a table build
//! ([`vecgate_control::build::IpsecTables`]): each ipsec tunnel's virtual
//! port, SPD routes and the SAD, from the [`EspRegistry`]. The tables only
//! hold shared pointers into the registry, so a table rebuilt for a route
//! change keeps sequence numbers and replay windows.

use dataplane::esp::EspTunnelDef;
use dataplane::fib::Prefix;
use dataplane::tables::{IfFlags, Route, TablesBuilder};
use vecgate_config::Tunnel;
use vecgate_control::build::{IpsecTables, Placement};
use vecgate_ipsec::EspRegistry;

/// The ipsec tunnels of a table build, with their SAs from a registry.
#[derive(Clone, Copy)]
pub struct EspTables<'a>(pub &'a EspRegistry);

impl IpsecTables for EspTables<'_> {
    fn add_tunnel(
        &self,
        b: &mut TablesBuilder,
        t: &Tunnel,
        at: Placement<'_>,
    ) -> Result<(), String> {
        add_tunnel(b, self.0, t, at)
    }
}

/// Adds ipsec tunnel `t` to `b`: its interface (MTU = underlay MTU − ESP
/// overhead), the ESP tunnel, and a route into it for each `traffic`
/// prefix.
fn add_tunnel(
    b: &mut TablesBuilder,
    reg: &EspRegistry,
    t: &Tunnel,
    pl: Placement<'_>,
) -> Result<(), String> {
    let Placement {
        port,
        vrf,
        underlay_vrf,
        underlay_mtu,
        gateway,
    } = pl;
    let id = reg.tunnel_id(&t.name).ok_or_else(|| {
        format!(
            "tunnel {}: not in the SA registry (POST /tunnels registers it)",
            t.name
        )
    })?;
    let tx = reg
        .tunnel_tx(id)
        .ok_or_else(|| format!("tunnel {}: no SAs", t.name))?;
    let derived = underlay_mtu.saturating_sub(tx.overhead() as u32);
    let mtu = t.mtu.map_or(derived, |m| m.min(derived));
    let addrs: Vec<Prefix> = t
        .addresses
        .iter()
        .map(|a| Prefix::new(a.addr, a.prefix_len).map_err(|e| format!("tunnel {}: {e}", t.name)))
        .collect::<Result<_, _>>()?;
    let mac = dataplane::tunnel::derived_mac(gateway, &t.name);
    b.add_interface(port, &t.name, mac, mtu, vrf, &addrs);
    b.set_flags(
        port,
        IfFlags {
            offloads: false,
            rsc: false,
            ipv6: true,
        },
    );
    let x = t.ipsec.clone().unwrap_or_default();
    let traffic: Vec<Prefix> = x
        .traffic
        .iter()
        .map(|p| Prefix::new(p.addr, p.len).map_err(|e| format!("tunnel {}: {e}", t.name)))
        .collect::<Result<_, _>>()?;
    for p in &traffic {
        b.add_route(vrf, *p, Route::Port { port });
    }
    b.add_esp_tunnel(
        port,
        EspTunnelDef {
            id,
            local: t.local,
            remote: t.remote,
            underlay_vrf,
            // IKEv2 decides on UDP encapsulation at run time: let UDP 4500
            // reach esp-decrypt in case it does.
            nat_t: x.nat_t || x.ike.is_some(),
            traffic,
            tx,
        },
    );
    b.set_esp_sad(reg.sad());
    Ok(())
}

#[cfg(test)]
mod tests;
