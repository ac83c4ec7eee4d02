//! `vecgate show …`: the gateway's objects and counters as tables.

use super::client::Client;
use super::ha::show_ha;
use super::table::{columns_table, table, Cell, Columns};
use super::{enc, finish, json, print_or_json, resolve, typed, Target};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::process::ExitCode;
use vecgate_control::model::{
    CountersInfo, DropCount, InterfaceCounters, InterfaceInfo, NeighborInfo, NodeCounters,
    RouteInfo, SaInfo, StatusInfo, TunnelInfo, VrfInfo,
};

#[derive(clap::Subcommand, Debug)]
pub enum Show {
    Interfaces,
    /// Routes (connected, local, static, api, learned over FPM) with their
    /// source, distance and whether they are in the FIB, optionally of one
    /// VRF.
    Routes {
        vrf: Option<String>,
    },
    Vrfs,
    Neighbors,
    Tunnels,
    Sa,
    /// IKEv2 tunnels: IKE and child SAs, state, algorithms, SPIs, rekeys.
    Ike,
    /// VRRP virtual routers: state, priorities, master, last transition,
    /// tracked links.
    Ha,
    /// Per-interface packet and byte counters, and losses at the interface
    /// (receive ring full, bad frames, transmit rejects).
    Stats,
    /// Per-node vectors, packets and drops.
    NodeCounters,
    /// Non-zero drop counters by node and reason.
    Errors,
    /// Gateway status and per-node vector sizes.
    Runtime,
    /// The running configuration (TOML).
    Config,
}

/// `vecgate show WHAT`.
pub fn show(t: &Target, what: &Show) -> ExitCode {
    finish(show_inner(t, what))
}

fn show_inner(t: &Target, what: &Show) -> Result<(), String> {
    let c = resolve(t)?;
    match what {
        Show::Config => {
            print!("{}", c.get("/config")?.text());
            Ok(())
        }
        Show::Interfaces => show_list(t, &c, "/interfaces", INTERFACE_COLUMNS),
        Show::Routes { vrf } => {
            let path = match vrf {
                Some(v) => format!("/routes?vrf={}", enc(v)),
                None => "/routes".into(),
            };
            show_list(t, &c, &path, ROUTE_COLUMNS)
        }
        Show::Vrfs => show_list(t, &c, "/vrfs", VRF_COLUMNS),
        Show::Neighbors => show_list(t, &c, "/neighbors", NEIGHBOR_COLUMNS),
        Show::Tunnels => show_list(t, &c, "/tunnels", TUNNEL_COLUMNS),
        Show::Sa => show_sas(t, &c),
        Show::Ike => show_ike(t, &c),
        Show::Ha => show_ha(t, &c),
        Show::Stats => {
            // As `ip -s link`: receive losses (ring full = missed, unusable
            // frames = errors), transmit rejects; Drops is their total plus
            // packets the kernel had no room for on transmit.
            let v = json(&c.get("/counters")?)?;
            let counters: CountersInfo = typed(&v)?;
            print_or_json(t, &v["interfaces"], |_| {
                columns_table(&counters.interfaces, STATS_COLUMNS)
            });
            Ok(())
        }
        Show::NodeCounters => show_node_counters(t, &c),
        Show::Errors => show_errors(t, &c),
        Show::Runtime => show_runtime(t, &c),
    }
}

const INTERFACE_COLUMNS: Columns<InterfaceInfo> = &[
    ("Name", |i| i.name.cell()),
    ("Host", |i| i.host.cell()),
    ("Driver", |i| i.driver.cell()),
    ("MAC", |i| i.mac.cell()),
    ("MTU", |i| i.mtu.cell()),
    ("VRF", |i| i.vrf.cell()),
    ("RSC", |i| i.rsc.cell()),
    ("Offloads", |i| i.offloads_active.cell()),
    ("Addresses", |i| i.addresses.cell()),
];

const ROUTE_COLUMNS: Columns<RouteInfo> = &[
    ("VRF", |r| r.vrf.cell()),
    ("Prefix", |r| r.prefix.cell()),
    ("Via", |r| r.via.cell()),
    ("Kind", |r| r.kind.cell()),
    ("Source", |r| r.source.cell()),
    ("Distance", |r| r.distance.cell()),
    ("Active", |r| r.active.cell()),
];

const VRF_COLUMNS: Columns<VrfInfo> = &[
    ("Name", |v| v.name.cell()),
    ("Id", |v| v.id.cell()),
    ("Routes", |v| v.routes.cell()),
    ("Interfaces", |v| v.interfaces.cell()),
    ("Tunnels", |v| v.tunnels.cell()),
];

const NEIGHBOR_COLUMNS: Columns<NeighborInfo> = &[
    ("Interface", |n| n.interface.cell()),
    ("Address", |n| n.address.cell()),
    ("MAC", |n| n.mac.cell()),
    ("State", |n| n.state.cell()),
    ("Workers", |n| n.workers.cell()),
];

const TUNNEL_COLUMNS: Columns<TunnelInfo> = &[
    ("Name", |t| t.name.cell()),
    ("Kind", |t| t.kind.cell()),
    ("Local", |t| t.local.cell()),
    ("Remote", |t| t.remote.cell()),
    ("Key", |t| t.key.cell()),
    ("VRF", |t| t.vrf.cell()),
    ("Underlay", |t| t.underlay_vrf.cell()),
    ("RxPkts", |t| t.traffic.rx_packets.cell()),
    ("RxBytes", |t| t.traffic.rx_bytes.cell()),
    ("TxPkts", |t| t.traffic.tx_packets.cell()),
    ("TxBytes", |t| t.traffic.tx_bytes.cell()),
    ("Drops", |t| t.traffic.drops.cell()),
];

const SA_COLUMNS: Columns<SaInfo> = &[
    ("SPI", |a| a.spi.cell()),
    ("Tunnel", |a| a.tunnel.cell()),
    ("Direction", |a| a.direction.cell()),
    ("Cipher", |a| a.cipher.cell()),
    ("Engine", |a| a.engine.cell()),
    ("Packets", |a| a.packets.cell()),
    ("Bytes", |a| a.bytes.cell()),
    ("Drops", |a| a.drops.cell()),
];

const STATS_COLUMNS: Columns<InterfaceCounters> = &[
    ("Interface", |i| i.interface.cell()),
    ("RX-packets", |i| i.counters.traffic.rx_packets.cell()),
    ("RX-bytes", |i| i.counters.traffic.rx_bytes.cell()),
    ("RX-missed", |i| i.counters.rx_missed.cell()),
    ("RX-errors", |i| i.counters.rx_errors.cell()),
    ("TX-packets", |i| i.counters.traffic.tx_packets.cell()),
    ("TX-bytes", |i| i.counters.traffic.tx_bytes.cell()),
    ("TX-errors", |i| i.counters.tx_errors.cell()),
    ("Drops", |i| i.counters.traffic.drops.cell()),
];

/// GET `path` (a JSON array of `T`) and print it as a table of `cols`.
fn show_list<T: DeserializeOwned>(
    t: &Target,
    c: &Client,
    path: &str,
    cols: Columns<T>,
) -> Result<(), String> {
    let v = json(&c.get(path)?)?;
    let items: Vec<T> = typed(&v)?;
    print_or_json(t, &v, |_| columns_table(&items, cols));
    Ok(())
}

/// `show sa`: one line per SA, then its refusals by reason.
fn show_sas(t: &Target, c: &Client) -> Result<(), String> {
    let v = json(&c.get("/sas")?)?;
    let sas: Vec<SaInfo> = typed(&v)?;
    print_or_json(t, &v, |_| {
        let mut out = columns_table(&sas, SA_COLUMNS);
        for sa in &sas {
            for d in &sa.drop_reasons {
                out.push_str(&format!(
                    "  {} {}: {} {}\n",
                    sa.spi, sa.direction, d.reason, d.count
                ));
            }
        }
        out
    });
    Ok(())
}

/// `show ike`: the IKE SAs as the IKE thread's own table prints them.
fn show_ike(t: &Target, c: &Client) -> Result<(), String> {
    let v = json(&c.get("/ike")?)?;
    let tunnels: Vec<vecgate_control::model::IkeTunnelInfo> = typed(&v)?;
    print_or_json(t, &v, |_| vecgate_keying::ike::show_table(&tunnels));
    Ok(())
}

/// `show node-counters`: vectors, packets and drops per graph node.
fn show_node_counters(t: &Target, c: &Client) -> Result<(), String> {
    let v = json(&c.get("/counters")?)?;
    let counters: CountersInfo = typed(&v)?;
    print_or_json(t, &v["nodes"], |_| {
        let r: Vec<Vec<String>> = counters
            .nodes
            .iter()
            .map(|n| {
                let drops: u64 = n.drops.iter().map(|d| d.count).sum();
                vec![
                    n.node.clone(),
                    n.vectors.to_string(),
                    n.packets.to_string(),
                    drops.to_string(),
                ]
            })
            .collect();
        table(&["Node", "Vectors", "Packets", "Drops"], &r)
    });
    Ok(())
}

/// `show errors`: every non-zero drop counter, by node and reason.
fn show_errors(t: &Target, c: &Client) -> Result<(), String> {
    let counters: CountersInfo = typed(&json(&c.get("/counters")?)?)?;
    let errs: Vec<(&NodeCounters, &DropCount)> = counters
        .nodes
        .iter()
        .flat_map(|n| n.drops.iter().map(move |d| (n, d)))
        .filter(|(_, d)| d.count > 0)
        .collect();
    let v = Value::Array(
        errs.iter()
            .map(|(n, d)| serde_json::json!({"count": d.count, "node": n.node, "reason": d.reason}))
            .collect(),
    );
    print_or_json(t, &v, |_| {
        let r: Vec<Vec<String>> = errs
            .iter()
            .map(|(n, d)| vec![d.count.to_string(), n.node.clone(), d.reason.clone()])
            .collect();
        table(&["Count", "Node", "Reason"], &r)
    });
    Ok(())
}

/// `show runtime`: the gateway's status line and the busy nodes' vector
/// sizes.
fn show_runtime(t: &Target, c: &Client) -> Result<(), String> {
    let st = json(&c.get("/status")?)?;
    let cnt = json(&c.get("/counters")?)?;
    let status: StatusInfo = typed(&st)?;
    let counters: CountersInfo = typed(&cnt)?;
    let v = serde_json::json!({"status": st, "nodes": cnt["nodes"]});
    print_or_json(t, &v, |_| {
        let mut out = format!(
            "gateway {} (vecgate {}), {} workers, up {} s, tables generation {}, api {}\n",
            status.name,
            status.version,
            status.workers,
            status.uptime_seconds,
            status.tables_generation,
            status.api
        );
        let r: Vec<Vec<String>> = counters
            .nodes
            .iter()
            .filter(|n| n.vectors > 0)
            .map(|n| {
                vec![
                    n.node.clone(),
                    n.vectors.to_string(),
                    n.packets.to_string(),
                    format!("{:.2}", n.packets as f64 / n.vectors.max(1) as f64),
                ]
            })
            .collect();
        out.push_str(&table(&["Name", "Vectors", "Packets", "Vec/Call"], &r));
        out
    });
    Ok(())
}
