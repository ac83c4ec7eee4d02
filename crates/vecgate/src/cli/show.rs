//! `vecgate show …`: the gateway's objects and counters as tables.

use super::client::Client;
use super::ha::show_ha;
use super::table::{columns_table, s, table, Columns};
use super::{enc, finish, json, print_or_json, resolve, typed, Target};
use serde_json::Value;
use std::process::ExitCode;
use vecgate_control::model::{CountersInfo, DropCount, NodeCounters, StatusInfo};

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
            print_or_json(t, &v["interfaces"], |v| columns_table(v, STATS_COLUMNS));
            Ok(())
        }
        Show::NodeCounters => show_node_counters(t, &c),
        Show::Errors => show_errors(t, &c),
        Show::Runtime => show_runtime(t, &c),
    }
}

const INTERFACE_COLUMNS: Columns = &[
    ("Name", "name"),
    ("Host", "host"),
    ("Driver", "driver"),
    ("MAC", "mac"),
    ("MTU", "mtu"),
    ("VRF", "vrf"),
    ("RSC", "rsc"),
    ("Offloads", "offloads_active"),
    ("Addresses", "addresses"),
];

const ROUTE_COLUMNS: Columns = &[
    ("VRF", "vrf"),
    ("Prefix", "prefix"),
    ("Via", "via"),
    ("Kind", "kind"),
    ("Source", "source"),
    ("Distance", "distance"),
    ("Active", "active"),
];

const VRF_COLUMNS: Columns = &[
    ("Name", "name"),
    ("Id", "id"),
    ("Routes", "routes"),
    ("Interfaces", "interfaces"),
    ("Tunnels", "tunnels"),
];

const NEIGHBOR_COLUMNS: Columns = &[
    ("Interface", "interface"),
    ("Address", "address"),
    ("MAC", "mac"),
    ("State", "state"),
    ("Workers", "workers"),
];

const TUNNEL_COLUMNS: Columns = &[
    ("Name", "name"),
    ("Kind", "kind"),
    ("Local", "local"),
    ("Remote", "remote"),
    ("Key", "key"),
    ("VRF", "vrf"),
    ("Underlay", "underlay_vrf"),
    ("RxPkts", "rx_packets"),
    ("RxBytes", "rx_bytes"),
    ("TxPkts", "tx_packets"),
    ("TxBytes", "tx_bytes"),
    ("Drops", "drops"),
];

const SA_COLUMNS: Columns = &[
    ("SPI", "spi"),
    ("Tunnel", "tunnel"),
    ("Direction", "direction"),
    ("Cipher", "cipher"),
    ("Packets", "packets"),
    ("Bytes", "bytes"),
    ("Drops", "drops"),
];

const STATS_COLUMNS: Columns = &[
    ("Interface", "interface"),
    ("RX-packets", "rx_packets"),
    ("RX-bytes", "rx_bytes"),
    ("RX-missed", "rx_missed"),
    ("RX-errors", "rx_errors"),
    ("TX-packets", "tx_packets"),
    ("TX-bytes", "tx_bytes"),
    ("TX-errors", "tx_errors"),
    ("Drops", "drops"),
];

/// GET `path` (a JSON array) and print it as a table of `cols`.
fn show_list(t: &Target, c: &Client, path: &str, cols: Columns) -> Result<(), String> {
    let v = json(&c.get(path)?)?;
    print_or_json(t, &v, |v| columns_table(v, cols));
    Ok(())
}

/// `show sa`: one line per SA, then its refusals by reason.
fn show_sas(t: &Target, c: &Client) -> Result<(), String> {
    let v = json(&c.get("/sas")?)?;
    print_or_json(t, &v, |v| {
        let mut out = columns_table(v, SA_COLUMNS);
        for sa in v.as_array().into_iter().flatten() {
            for d in sa["drop_reasons"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "  {} {}: {} {}\n",
                    s(&sa["spi"]),
                    s(&sa["direction"]),
                    s(&d["reason"]),
                    s(&d["count"])
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
    print_or_json(t, &v, |v| {
        serde_json::from_value::<Vec<vecgate_control::model::IkeTunnelInfo>>(v.clone())
            .map(|l| vecgate_keying::ike::show_table(&l))
            .unwrap_or_else(|e| format!("unexpected /ike answer: {e}\n"))
    });
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
