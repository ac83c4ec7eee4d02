//! The operator's verbs (`vecgate show …`, `route`, `set`, `rsc`, `trace`,
//! `capture`): each is one or two requests to the management API, printed
//! as aligned tables like `ip` / `vppctl`, or as the API's JSON with
//! `--json`.

pub mod client;

use client::Client;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use vecgate_config::ApiEndpoint;
use vecgate_control::model::TunnelSpec;

/// How to reach the daemon (global options).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Target {
    /// API endpoint: unix:/path, tcp:ADDR:PORT, or a socket path.
    #[arg(long, global = true)]
    pub api: Option<String>,
    /// Find the endpoint (and token file) in this configuration.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// File holding the bearer token (TCP endpoints).
    #[arg(long, global = true)]
    pub token_file: Option<PathBuf>,
    /// PEM CA (or the gateway's self-signed certificate) to check a TCP
    /// endpoint's TLS certificate against; also VECGATE_API_CA_FILE. With
    /// --config, the configuration's api_tls_cert_file is trusted.
    /// Without any, a TCP endpoint is spoken to in plain HTTP (a gateway
    /// with api_insecure_loopback).
    #[arg(long, global = true)]
    pub ca_file: Option<PathBuf>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

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

/// `vecgate tunnel add|del`: overlay tunnels (gre, nvgre, vxlan) and
/// IPsec tunnels live.
#[derive(clap::Subcommand, Debug)]
pub enum TunnelCmd {
    /// vecgate tunnel add NAME KIND LOCAL REMOTE [--key N] [--vrf V] ...
    ///
    /// ipsec, static keys: --sa-out SPI:ALG:KEYFILE --sa-in SPI:ALG:KEYFILE
    /// [--traffic PREFIX]... [--nat-t]; keyed by IKEv2: --ike-psk-file F
    /// [--ike-remote-id ID] [--ike-responder] ... (key files are read by
    /// the gateway; keys never go on the command line).
    Add {
        name: String,
        /// gre, nvgre, vxlan or ipsec.
        kind: String,
        local: String,
        remote: String,
        /// GRE key, NVGRE VSID or VXLAN VNI.
        #[arg(long)]
        key: Option<u32>,
        #[arg(long)]
        vrf: Option<String>,
        #[arg(long)]
        underlay_vrf: Option<String>,
        #[arg(long)]
        mtu: Option<u32>,
        /// The gateway's address on the overlay segment (repeatable).
        #[arg(long = "address")]
        addresses: Vec<String>,
        /// GRE payload: ip or ethernet.
        #[arg(long)]
        inner: Option<String>,
        #[arg(long)]
        checksum: bool,
        #[arg(long)]
        sequence: bool,
        /// VXLAN UDP port.
        #[arg(long)]
        port: Option<u16>,
        #[command(flatten)]
        ipsec: Box<IpsecArgs>,
    },
    /// vecgate tunnel del NAME (an IKEv2 tunnel deletes its IKE SA with
    /// the peer first)
    Del { name: String },
}

/// The `[[tunnel]]` IPsec keys of `vecgate tunnel add NAME ipsec ...`.
#[derive(clap::Args, Debug, Default)]
pub struct IpsecArgs {
    /// Remote prefix of the SPD (routed into the tunnel, accepted from
    /// it); repeatable.
    #[arg(long)]
    pub traffic: Vec<String>,
    /// ESP in UDP 4500 (RFC 3948).
    #[arg(long)]
    pub nat_t: bool,
    /// The outbound SA: SPI:ALGORITHM:KEY_FILE (e.g.
    /// 0x1001:aes128gcm16:/etc/vecgate/out.hex).
    #[arg(long, value_name = "SPI:ALG:KEYFILE")]
    pub sa_out: Option<String>,
    /// An inbound SA: SPI:ALGORITHM:KEY_FILE; repeatable.
    #[arg(long, value_name = "SPI:ALG:KEYFILE")]
    pub sa_in: Vec<String>,
    /// IKEv2 with the pre-shared key in this file (on the gateway).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["sa_out", "sa_in"])]
    pub ike_psk_file: Option<String>,
    #[arg(long, requires = "ike_psk_file")]
    pub ike_local_id: Option<String>,
    #[arg(long, requires = "ike_psk_file")]
    pub ike_remote_id: Option<String>,
    /// IKE proposal, strongSwan syntax; repeatable.
    #[arg(long, requires = "ike_psk_file")]
    pub ike_proposal: Vec<String>,
    /// ESP proposal, strongSwan syntax; repeatable.
    #[arg(long, requires = "ike_psk_file")]
    pub esp_proposal: Vec<String>,
    /// Wait for the peer instead of initiating.
    #[arg(long, requires = "ike_psk_file")]
    pub ike_responder: bool,
    /// Seconds between liveness checks.
    #[arg(long, requires = "ike_psk_file")]
    pub dpd: Option<u64>,
    #[arg(long, requires = "ike_psk_file")]
    pub ike_lifetime: Option<u64>,
    #[arg(long, requires = "ike_psk_file")]
    pub child_lifetime: Option<u64>,
    /// Packets until each child SA stops (rekeyed at 85 %).
    #[arg(long, requires = "ike_psk_file")]
    pub child_lifetime_packets: Option<u64>,
    /// Bytes until each child SA stops (rekeyed at 85 %).
    #[arg(long, requires = "ike_psk_file")]
    pub child_lifetime_bytes: Option<u64>,
    /// Our traffic selector; repeatable (default: the VRF's networks).
    #[arg(long, requires = "ike_psk_file")]
    pub local_traffic: Vec<String>,
}

impl IpsecArgs {
    /// Adds the IPsec keys given to a `POST /tunnels` request.
    fn fill(&self, spec: &mut TunnelSpec) -> Result<(), String> {
        use vecgate_control::model::{parse_spi, SpiText, TunnelSaSpec};
        if !self.traffic.is_empty() {
            spec.traffic = Some(self.traffic.clone());
        }
        if self.nat_t {
            spec.nat_t = Some(true);
        }
        let sa = |direction: &str, text: &str| -> Result<TunnelSaSpec, String> {
            let bad = || format!("--sa-{direction} {text}: expected SPI:ALGORITHM:KEY_FILE");
            let mut it = text.splitn(3, ':');
            let (Some(spi), Some(alg), Some(file)) = (it.next(), it.next(), it.next()) else {
                return Err(bad());
            };
            let spi = parse_spi(spi)
                .filter(|_| !file.is_empty())
                .ok_or_else(bad)?;
            Ok(TunnelSaSpec {
                direction: direction.to_owned(),
                replay_window: None,
                spi: SpiText(spi),
                algorithm: alg.to_owned(),
                key: None,
                key_file: Some(file.to_owned()),
                esn: None,
                lifetime_bytes: None,
                lifetime_packets: None,
                lifetime_seconds: None,
            })
        };
        let mut sas = Vec::new();
        if let Some(o) = &self.sa_out {
            sas.push(sa("out", o)?);
        }
        for i in &self.sa_in {
            sas.push(sa("in", i)?);
        }
        if !sas.is_empty() {
            spec.sa = Some(sas);
        }
        if let Some(psk) = &self.ike_psk_file {
            let local_traffic = self
                .local_traffic
                .iter()
                .map(|p| p.parse().map_err(|e| format!("--local-traffic {p}: {e}")))
                .collect::<Result<_, String>>()?;
            spec.ike = Some(vecgate_config::IkeSettings {
                psk_file: psk.into(),
                local_id: self.ike_local_id.clone(),
                remote_id: self.ike_remote_id.clone(),
                ike_proposals: self.ike_proposal.clone(),
                esp_proposals: self.esp_proposal.clone(),
                initiate: !self.ike_responder,
                dpd_interval: self.dpd,
                ike_lifetime: self.ike_lifetime,
                child_lifetime: self.child_lifetime,
                child_lifetime_packets: self.child_lifetime_packets,
                child_lifetime_bytes: self.child_lifetime_bytes,
                local_traffic,
                ..Default::default()
            });
        }
        Ok(())
    }
}

/// How an SA command gets its key: never on the command line (it would
/// show in `ps`).
#[derive(clap::Args, Debug)]
pub struct SaKey {
    /// Hex key file, read by the gateway (recorded in its configuration).
    #[arg(long, conflicts_with = "key_stdin")]
    pub key_file: Option<String>,
    /// Read the hex key from standard input and send it in the request.
    #[arg(long)]
    pub key_stdin: bool,
}

/// `vecgate sa add|switch|del`: static IPsec SAs live (make-before-break:
/// add the new inbound SA, switch outbound once the peer has it, delete
/// the old inbound SA last).
#[derive(clap::Subcommand, Debug)]
pub enum SaCmd {
    /// vecgate sa add TUNNEL SPI ALGORITHM (--key-file F | --key-stdin)
    Add {
        tunnel: String,
        spi: String,
        algorithm: String,
        #[command(flatten)]
        key: SaKey,
        #[arg(long)]
        replay_window: Option<u32>,
    },
    /// vecgate sa switch TUNNEL SPI ALGORITHM (--key-file F | --key-stdin)
    Switch {
        tunnel: String,
        spi: String,
        algorithm: String,
        #[command(flatten)]
        key: SaKey,
    },
    /// vecgate sa del SPI (inbound SAs)
    Del { spi: String },
    /// vecgate sa reset-state --config F TUNNEL [SPI]: the operator's
    /// override for a static SA refused at start (its state unreadable, or
    /// its key recorded for another SA): forgets the key's record in the
    /// state directory, so the SA starts at sequence number 1 again. Only
    /// with the gateway stopped, and only if the peer was rekeyed or never
    /// saw this key: a reused key with reused numbers repeats nonces.
    /// The gateway's configuration (`--config F`, required) gives its
    /// state_dir and the SAs' keys.
    ResetState {
        tunnel: String,
        /// Only this SA of the tunnel (default: all its static SAs).
        spi: Option<String>,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum RouteCmd {
    /// vecgate route add VRF PREFIX via X
    Add {
        vrf: String,
        prefix: String,
        #[arg(value_parser = ["via"])]
        via_kw: String,
        via: String,
    },
    /// vecgate route del VRF PREFIX
    Del { vrf: String, prefix: String },
}

#[derive(clap::Subcommand, Debug)]
pub enum SetCmd {
    /// vecgate set interface IFACE rsc|offloads on|off
    Interface {
        name: String,
        #[arg(value_parser = ["rsc", "offloads"])]
        switch: String,
        #[arg(value_parser = ["on", "off"])]
        value: String,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum TraceCmd {
    /// Trace the next N packets (per worker).
    Add { count: u64 },
    /// Print the recorded trace.
    Show,
    /// Forget the recorded trace.
    Clear,
}

fn resolve(t: &Target) -> Result<Client, String> {
    let mut token = t.token_file.clone();
    let mut ca = t
        .ca_file
        .clone()
        .or_else(|| std::env::var_os("VECGATE_API_CA_FILE").map(PathBuf::from));
    let endpoint = if let Some(a) = &t.api {
        if a.starts_with("unix:") || a.starts_with("tcp:") {
            a.parse::<ApiEndpoint>()?
        } else {
            ApiEndpoint::Unix(PathBuf::from(a))
        }
    } else if let Some(c) = &t.config {
        let cfg = vecgate_config::load(c).map_err(|e| e.to_string())?;
        if token.is_none() {
            token = cfg.gateway.api_token_file.clone();
        }
        if ca.is_none() {
            ca = cfg.gateway.api_tls_cert_file.clone();
        }
        cfg.gateway.api
    } else {
        ApiEndpoint::Unix(client::default_socket(Path::new("/run/vecgate"))?)
    };
    Client::new(endpoint, token.as_deref(), ca.as_deref())
}

fn json(r: &client::Response) -> Result<Value, String> {
    serde_json::from_slice(&r.body).map_err(|e| format!("bad JSON from the API: {e}"))
}

/// Aligned columns; the last column is not padded.
pub fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < w.len() {
                w[i] = w[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<width$}  ", width = w[i]));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(head.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

fn s(v: &Value) -> String {
    match v {
        Value::String(x) => x.clone(),
        Value::Null => "-".into(),
        Value::Bool(b) => if *b { "on" } else { "off" }.into(),
        Value::Array(a) => a.iter().map(s).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn rows(v: &Value, keys: &[&str]) -> Vec<Vec<String>> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|o| keys.iter().map(|k| s(&o[*k])).collect())
                .collect()
        })
        .unwrap_or_default()
}

fn print_or_json(t: &Target, v: &Value, text: impl FnOnce(&Value) -> String) {
    if t.json {
        println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
    } else {
        print!("{}", text(v));
    }
}

fn finish(r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vecgate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn enc(x: &str) -> String {
    let mut o = String::new();
    for b in x.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~:".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

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

/// The columns of a list view: (header, JSON key of each element).
type Columns = &'static [(&'static str, &'static str)];

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

/// The elements of the JSON array `v` as a table of `cols`.
fn columns_table(v: &Value, cols: Columns) -> String {
    let head: Vec<&str> = cols.iter().map(|c| c.0).collect();
    let keys: Vec<&str> = cols.iter().map(|c| c.1).collect();
    table(&head, &rows(v, &keys))
}

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

/// `show ha`: one line per virtual router.
fn show_ha(t: &Target, c: &Client) -> Result<(), String> {
    let v = json(&c.get("/ha")?)?;
    print_or_json(t, &v, ha_table);
    Ok(())
}

fn ha_table(v: &Value) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let groups = || v.as_array().into_iter().flatten();
    let rows: Vec<Vec<String>> = groups().map(|g| ha_row(g, now)).collect();
    let mut out = table(
        &[
            "Interface",
            "VRID",
            "AF",
            "State",
            "Prio(cfg/eff)",
            "Preempt",
            "Interval",
            "Master",
            "Last transition",
            "Tracked",
            "Addresses",
        ],
        &rows,
    );
    if let Some(y) = groups().map(|g| &g["sync"]).find(|y| y.is_object()) {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&ha_sync_line(y, now));
    }
    out
}

/// One virtual router's row of `show ha`.
fn ha_row(g: &Value, now: f64) -> Vec<String> {
    let last = &g["last_transition"];
    let last = match last["at_unix"].as_f64() {
        Some(at) => format!(
            "{} ({}) {:.0}s ago",
            s(&last["to"]),
            s(&last["reason"]),
            (now - at).max(0.0)
        ),
        None => "-".into(),
    };
    let tracked: Vec<String> = g["tracked"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let up = if t["up"].as_bool() == Some(true) {
                "up"
            } else {
                "down"
            };
            format!("{}:{up}", s(&t["interface"]))
        })
        .collect();
    let mut preempt = s(&g["preempt"]);
    if let Some(h) = g["preempt_held_secs"].as_u64().filter(|h| *h > 0) {
        preempt.push_str(&format!(" (held {h}s)"));
    }
    vec![
        s(&g["interface"]),
        s(&g["vrid"]),
        s(&g["family"]),
        s(&g["state"]),
        format!("{}/{}", s(&g["priority"]), s(&g["effective_priority"])),
        preempt,
        format!("{}cs", s(&g["advert_interval_cs"])),
        s(&g["master"]),
        last,
        if tracked.is_empty() {
            "-".into()
        } else {
            tracked.join(",")
        },
        s(&g["addresses"]),
    ]
}

/// The state-sync line of `show ha` (`now`: Unix time, seconds).
fn ha_sync_line(y: &Value, now: f64) -> String {
    let last = y["last_sync_unix"]
        .as_f64()
        .map_or("never".to_owned(), |at| {
            format!("{:.1}s ago", (now - at).max(0.0))
        });
    let rejected: u64 = y["rejected"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    let why: Vec<String> = y["rejected"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, n)| n.as_u64().unwrap_or(0) > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    format!(
        "State sync {} -> {}: {}, peer {}, last sync {last}, lag {} ms; synced SAs {} outbound, {} inbound, routes {}, tunnels {}, IKE SAs {}; messages sent {}, received {}, rejected {rejected}{}; takeovers {}{}\n",
        s(&y["local"]),
        s(&y["peer"]),
        s(&y["state"]),
        s(&y["peer_role"]),
        s(&y["lag_ms"]),
        s(&y["synced_outbound_sas"]),
        s(&y["synced_inbound_sas"]),
        s(&y["synced_routes"]),
        s(&y["synced_tunnels"]),
        s(&y["synced_ike_sas"]),
        s(&y["messages_sent"]),
        s(&y["messages_received"]),
        if why.is_empty() {
            String::new()
        } else {
            format!(" ({})", why.join(", "))
        },
        s(&y["takeovers"]),
        match y["adopted_ike_sas"].as_u64() {
            Some(n) if n > 0 => format!(" (the last adopted {n} IKE SAs)"),
            _ => String::new(),
        },
    ) + &unsafe_line(y)
}

/// The SAs a takeover retired, if any: the operator must re-key them.
fn unsafe_line(y: &serde_json::Value) -> String {
    let v: Vec<&str> = y["unsafe_sas"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str())
        .collect();
    if v.is_empty() {
        return String::new();
    }
    format!(
        "  UNSAFE after takeover (send nothing until re-keyed with a new key file): {}\n",
        v.join("; ")
    )
}

/// `vecgate ha …`: high-availability verbs.
#[derive(clap::Subcommand, Debug)]
pub enum HaCmd {
    /// Planned switchover: every VRRP group this gateway is master of (or
    /// the one named) sends priority 0 and becomes backup, so the peer
    /// takes over at once; preemption is then held back for --hold-secs.
    Switchover {
        #[arg(long)]
        interface: Option<String>,
        #[arg(long)]
        vrid: Option<u8>,
        /// Seconds without preemption afterwards (default 60).
        #[arg(long)]
        hold_secs: Option<u64>,
    },
}

pub fn ha(t: &Target, cmd: &HaCmd) -> ExitCode {
    finish(ha_inner(t, cmd))
}

fn ha_inner(t: &Target, cmd: &HaCmd) -> Result<(), String> {
    let c = resolve(t)?;
    match cmd {
        HaCmd::Switchover {
            interface,
            vrid,
            hold_secs,
        } => {
            let body = serde_json::json!({
                "interface": interface,
                "vrid": vrid,
                "hold_secs": hold_secs,
            });
            let r = c.ok(c.request("POST", "/ha/switchover", Some(&body.to_string()))?)?;
            let v = json(&r)?;
            print_or_json(t, &v, |v| {
                v.as_array()
                    .into_iter()
                    .flatten()
                    .map(|g| {
                        format!(
                            "vrid {} on {}: sent priority 0, now {} (preemption held {}s)\n",
                            s(&g["vrid"]),
                            s(&g["interface"]),
                            s(&g["state"]),
                            s(&g["preempt_held_secs"])
                        )
                    })
                    .collect()
            });
            Ok(())
        }
    }
}

/// `show ike`: the IKE SAs as the IKE thread's own table prints them.
fn show_ike(t: &Target, c: &Client) -> Result<(), String> {
    let v = json(&c.get("/ike")?)?;
    print_or_json(t, &v, |v| {
        serde_json::from_value::<Vec<vecgate_control::model::IkeTunnelInfo>>(v.clone())
            .map(|l| crate::ike::show_table(&l))
            .unwrap_or_else(|e| format!("unexpected /ike answer: {e}\n"))
    });
    Ok(())
}

/// `show node-counters`: vectors, packets and drops per graph node.
fn show_node_counters(t: &Target, c: &Client) -> Result<(), String> {
    let v = json(&c.get("/counters")?)?;
    print_or_json(t, &v["nodes"], |v| {
        let r: Vec<Vec<String>> = v
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|n| {
                        let drops: u64 = n["drops"]
                            .as_array()
                            .map(|d| d.iter().filter_map(|x| x["count"].as_u64()).sum())
                            .unwrap_or(0);
                        vec![
                            s(&n["node"]),
                            s(&n["vectors"]),
                            s(&n["packets"]),
                            drops.to_string(),
                        ]
                    })
                    .collect()
            })
            .unwrap_or_default();
        table(&["Node", "Vectors", "Packets", "Drops"], &r)
    });
    Ok(())
}

/// `show errors`: every non-zero drop counter, by node and reason.
fn show_errors(t: &Target, c: &Client) -> Result<(), String> {
    let v = json(&c.get("/counters")?)?;
    let mut errs = Vec::new();
    for n in v["nodes"].as_array().into_iter().flatten() {
        for d in n["drops"].as_array().into_iter().flatten() {
            if d["count"].as_u64().unwrap_or(0) > 0 {
                errs.push(serde_json::json!({"count": d["count"], "node": n["node"], "reason": d["reason"]}));
            }
        }
    }
    let errs = Value::Array(errs);
    print_or_json(t, &errs, |v| {
        table(
            &["Count", "Node", "Reason"],
            &rows(v, &["count", "node", "reason"]),
        )
    });
    Ok(())
}

/// `show runtime`: the gateway's status line and the busy nodes' vector
/// sizes.
fn show_runtime(t: &Target, c: &Client) -> Result<(), String> {
    let st = json(&c.get("/status")?)?;
    let cnt = json(&c.get("/counters")?)?;
    let v = serde_json::json!({"status": st, "nodes": cnt["nodes"]});
    print_or_json(t, &v, |v| {
        let st = &v["status"];
        let mut out = format!(
            "gateway {} (vecgate {}), {} workers, up {} s, tables generation {}, api {}\n",
            s(&st["name"]),
            s(&st["version"]),
            s(&st["workers"]),
            s(&st["uptime_seconds"]),
            s(&st["tables_generation"]),
            s(&st["api"])
        );
        let r: Vec<Vec<String>> = v["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|n| n["vectors"].as_u64().unwrap_or(0) > 0)
            .map(|n| {
                let (vec, pk) = (
                    n["vectors"].as_u64().unwrap_or(0),
                    n["packets"].as_u64().unwrap_or(0),
                );
                vec![
                    s(&n["node"]),
                    vec.to_string(),
                    pk.to_string(),
                    format!("{:.2}", pk as f64 / vec.max(1) as f64),
                ]
            })
            .collect();
        out.push_str(&table(&["Name", "Vectors", "Packets", "Vec/Call"], &r));
        out
    });
    Ok(())
}

pub fn route(t: &Target, cmd: &RouteCmd) -> ExitCode {
    finish((|| {
        let c = resolve(t)?;
        match cmd {
            RouteCmd::Add {
                vrf, prefix, via, ..
            } => {
                let body =
                    serde_json::json!({"vrf": vrf, "prefix": prefix, "via": via}).to_string();
                let r = c.ok(c.request("POST", "/routes", Some(&body))?)?;
                if t.json {
                    println!("{}", r.text());
                } else {
                    println!("route {prefix} via {via} added to vrf {vrf}");
                }
            }
            RouteCmd::Del { vrf, prefix } => {
                let path = format!("/routes?vrf={}&prefix={}", enc(vrf), enc(prefix));
                c.ok(c.request("DELETE", &path, None)?)?;
                if !t.json {
                    println!("route {prefix} deleted from vrf {vrf}");
                }
            }
        }
        Ok(())
    })())
}

pub fn tunnel(t: &Target, cmd: &TunnelCmd) -> ExitCode {
    finish((|| {
        let c = resolve(t)?;
        match cmd {
            TunnelCmd::Add {
                name,
                kind,
                local,
                remote,
                key,
                vrf,
                underlay_vrf,
                mtu,
                addresses,
                inner,
                checksum,
                sequence,
                port,
                ipsec,
            } => {
                let mut spec = TunnelSpec {
                    name: name.clone(),
                    kind: kind.clone(),
                    local: local.clone(),
                    remote: remote.clone(),
                    key: *key,
                    vrf: vrf.clone(),
                    underlay_vrf: underlay_vrf.clone(),
                    mtu: *mtu,
                    checksum: checksum.then_some(true),
                    sequence: sequence.then_some(true),
                    port: *port,
                    addresses: (!addresses.is_empty()).then(|| addresses.clone()),
                    inner: inner.clone(),
                    nat_t: None,
                    traffic: None,
                    sa: None,
                    ike: None,
                };
                ipsec.fill(&mut spec)?;
                let body = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
                let r = c.ok(c.request("POST", "/tunnels", Some(&body))?)?;
                if t.json {
                    println!("{}", r.text());
                } else {
                    println!("tunnel {name} ({kind} {local} -> {remote}) added");
                }
            }
            TunnelCmd::Del { name } => {
                c.ok(c.request("DELETE", &format!("/tunnels/{}", enc(name)), None)?)?;
                if !t.json {
                    println!("tunnel {name} deleted");
                }
            }
        }
        Ok(())
    })())
}

/// The key part of an SA request body (a stdin key is zeroized after).
fn sa_key(k: &SaKey, body: &mut serde_json::Map<String, Value>) -> Result<(), String> {
    match (&k.key_file, k.key_stdin) {
        (Some(f), false) => {
            body.insert("key_file".into(), Value::String(f.clone()));
        }
        (None, true) => {
            let mut text = zeroize::Zeroizing::new(String::new());
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| format!("reading the key from stdin: {e}"))?;
            body.insert("key".into(), Value::String(text.trim().to_owned()));
        }
        _ => return Err("give --key-file FILE or --key-stdin".into()),
    }
    Ok(())
}

pub fn sa(t: &Target, cmd: &SaCmd) -> ExitCode {
    if let SaCmd::ResetState { tunnel, spi } = cmd {
        let Some(config) = &t.config else {
            eprintln!(
                "vecgate sa reset-state: --config F is required (the gateway's configuration)"
            );
            return ExitCode::from(2);
        };
        return crate::sastate::reset_state(config, tunnel, spi.as_deref());
    }
    finish((|| {
        let c = resolve(t)?;
        match cmd {
            SaCmd::Add {
                tunnel,
                spi,
                algorithm,
                key,
                replay_window,
            } => {
                let mut body = serde_json::Map::new();
                body.insert("tunnel".into(), tunnel.as_str().into());
                body.insert("spi".into(), spi.as_str().into());
                body.insert("algorithm".into(), algorithm.as_str().into());
                if let Some(w) = replay_window {
                    body.insert("replay_window".into(), (*w).into());
                }
                sa_key(key, &mut body)?;
                let text = zeroize::Zeroizing::new(Value::Object(body).to_string());
                let r = c.ok(c.request("POST", "/sas", Some(&text))?)?;
                if t.json {
                    println!("{}", r.text());
                } else {
                    println!("inbound SA {spi} installed on tunnel {tunnel}");
                }
            }
            SaCmd::Switch {
                tunnel,
                spi,
                algorithm,
                key,
            } => {
                let mut body = serde_json::Map::new();
                body.insert("spi".into(), spi.as_str().into());
                body.insert("algorithm".into(), algorithm.as_str().into());
                sa_key(key, &mut body)?;
                let text = zeroize::Zeroizing::new(Value::Object(body).to_string());
                let path = format!("/tunnels/{}/switch", enc(tunnel));
                let r = c.ok(c.request("POST", &path, Some(&text))?)?;
                let v = json(&r)?;
                if t.json {
                    println!("{v}");
                } else {
                    println!(
                        "tunnel {tunnel}: outbound SA {} -> {}",
                        s(&v["old_spi"]),
                        s(&v["new_spi"])
                    );
                }
            }
            SaCmd::Del { spi } => {
                c.ok(c.request("DELETE", &format!("/sas/{}", enc(spi)), None)?)?;
                if !t.json {
                    println!("inbound SA {spi} deleted");
                }
            }
            SaCmd::ResetState { .. } => unreachable!("handled above"),
        }
        Ok(())
    })())
}

/// PATCH one switch of an interface.
pub fn set_switch(t: &Target, name: &str, switch: &str, on: bool) -> ExitCode {
    finish((|| {
        let c = resolve(t)?;
        let body = serde_json::json!({ switch: on }).to_string();
        let r = c.ok(c.request("PATCH", &format!("/interfaces/{}", enc(name)), Some(&body))?)?;
        if t.json {
            println!("{}", r.text());
        } else {
            println!("{name}: {switch} {}", if on { "on" } else { "off" });
        }
        Ok(())
    })())
}

pub fn set(t: &Target, cmd: &SetCmd) -> ExitCode {
    match cmd {
        SetCmd::Interface {
            name,
            switch,
            value,
        } => set_switch(t, name, switch, value == "on"),
    }
}

pub fn trace(t: &Target, cmd: &TraceCmd) -> ExitCode {
    finish((|| {
        let c = resolve(t)?;
        match cmd {
            TraceCmd::Add { count } => {
                let body = serde_json::json!({ "count": count }).to_string();
                let r = c.ok(c.request("POST", "/trace", Some(&body))?)?;
                let v = json(&r)?;
                print_or_json(t, &v, |v| {
                    format!(
                        "tracing the next {} packets on {} workers\n",
                        s(&v["count"]),
                        s(&v["workers"])
                    )
                });
            }
            TraceCmd::Show => {
                let v = json(&c.get("/trace")?)?;
                print_or_json(t, &v, |v| {
                    v["lines"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|l| s(l) + "\n")
                        .collect()
                });
            }
            TraceCmd::Clear => {
                c.ok(c.request("DELETE", "/trace", None)?)?;
            }
        }
        Ok(())
    })())
}

pub fn capture(t: &Target, iface: &str, count: u64, out: &Path, timeout_ms: u64) -> ExitCode {
    finish((|| {
        let mut c = resolve(t)?;
        c.timeout = std::time::Duration::from_millis(timeout_ms + 10_000);
        let body =
            serde_json::json!({"interface": iface, "count": count, "timeout_ms": timeout_ms})
                .to_string();
        let r = c.ok(c.request("POST", "/capture", Some(&body))?)?;
        if !r.content_type.starts_with("application/vnd.tcpdump.pcap") {
            return Err(format!(
                "expected a pcap from the API, got {:?}",
                r.content_type
            ));
        }
        std::fs::write(out, &r.body).map_err(|e| format!("writing {}: {e}", out.display()))?;
        let n = wire::pcap::Reader::new(&r.body)
            .map(|mut rd| std::iter::from_fn(move || rd.next_record().ok().flatten()).count())
            .unwrap_or(0);
        eprintln!("{n} packets captured on {iface} into {}", out.display());
        Ok(())
    })())
}

/// `vecgate reload --config F [--dry-run]`: F is validated here first
/// (every error printed as `F:LINE: message`, as `vecgate check` does,
/// and nothing sent), then sent whole to the gateway (`POST /config`),
/// which plans and applies the difference or refuses it whole. The plan
/// is printed like `terraform plan`: `+` added, `-` removed, `~` changed.
pub fn reload(t: &Target, dry_run: bool) -> ExitCode {
    let Some(path) = &t.config else {
        eprintln!("vecgate reload: --config FILE is required (the file to apply)");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vecgate reload: cannot read {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    if let Err(diags) = vecgate_config::parse(&text) {
        for d in &diags {
            eprintln!("{}:{}: {}", path.display(), d.line, d.message);
        }
        eprintln!(
            "{}: {} error(s), nothing reloaded",
            path.display(),
            diags.len()
        );
        return ExitCode::from(1);
    }
    finish((|| {
        let c = resolve(t)?;
        let q = if dry_run {
            "/config?dry_run=true"
        } else {
            "/config"
        };
        let r = c.ok(c.request_typed("POST", q, Some(&text), "application/toml")?)?;
        let v = json(&r)?;
        print_or_json(t, &v, |v| plan_text(v, dry_run));
        Ok(())
    })())
}

/// The plan as `terraform plan` prints it, one object per line.
fn plan_text(v: &Value, dry_run: bool) -> String {
    let changes = v["changes"].as_array().cloned().unwrap_or_default();
    let mut out = String::new();
    let (mut add, mut change, mut remove, mut restart) = (0, 0, 0, 0);
    for c in &changes {
        let op = c["op"].as_str().unwrap_or("?");
        match op {
            "+" => add += 1,
            "-" => remove += 1,
            _ => change += 1,
        }
        out.push_str(&format!("{op} {} {}", s(&c["object"]), s(&c["name"])));
        if let Some(d) = c["detail"].as_str().filter(|d| !d.is_empty()) {
            out.push_str(&format!(": {d}"));
        }
        if let Some(r) = c["restart"].as_str() {
            restart += 1;
            out.push_str(&format!(" (needs a restart: {r})"));
        }
        out.push('\n');
    }
    for d in v["done"].as_array().into_iter().flatten() {
        out.push_str(&format!("  {}\n", s(d)));
    }
    if changes.is_empty() {
        out.push_str("No changes: the running configuration is the file's.\n");
    } else if dry_run {
        out.push_str(&format!(
            "Plan: {add} to add, {change} to change, {remove} to remove (dry run, nothing applied).\n"
        ));
        if restart > 0 {
            out.push_str(&format!(
                "{restart} change(s) need a restart: `vecgate reload` refuses this file.\n"
            ));
        }
    } else {
        out.push_str(&format!(
            "Applied: {add} added, {change} changed, {remove} removed.\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ha_table_shows_each_router_and_the_sync_line() {
        let v = serde_json::json!([{
            "interface": "lan0", "vrid": 7, "family": "ipv4", "state": "master",
            "priority": 200, "effective_priority": 190, "preempt": true,
            "preempt_held_secs": 30, "advert_interval_cs": 100, "master": "10.1.0.1",
            "last_transition": null, "tracked": [{"interface": "wan", "up": false}],
            "addresses": ["10.1.0.254"],
            "sync": {"local": "a", "peer": "b", "state": "up", "peer_role": "backup",
                     "last_sync_unix": null, "lag_ms": 3, "synced_outbound_sas": 1,
                     "synced_inbound_sas": 2, "synced_routes": 4, "synced_tunnels": 3, "synced_ike_sas": 7,
                     "adopted_ike_sas": 1, "messages_sent": 5, "messages_received": 6,
                     "rejected": {"auth": 2, "stale": 0}, "takeovers": 1}
        }]);
        let out = ha_table(&v);
        let row = out.lines().nth(1).unwrap();
        for cell in [
            "lan0",
            "master",
            "200/190",
            "on (held 30s)",
            "100cs",
            "wan:down",
        ] {
            assert!(row.contains(cell), "{cell} missing in {row}");
        }
        assert!(out.ends_with(
            "State sync a -> b: up, peer backup, last sync never, lag 3 ms; synced SAs 1 outbound, 2 inbound, routes 4, tunnels 3, IKE SAs 7; messages sent 5, received 6, rejected 2 (auth 2); takeovers 1 (the last adopted 1 IKE SAs)\n"
        ), "{out}");
    }

    #[test]
    fn table_aligns() {
        let t = table(
            &["A", "Bee"],
            &[
                vec!["xyz".into(), "1".into()],
                vec!["q".into(), "22".into()],
            ],
        );
        assert_eq!(t, "A    Bee\nxyz  1\nq    22\n");
        assert_eq!(enc("10.0.0.0/8"), "10.0.0.0%2F8");
    }
}
