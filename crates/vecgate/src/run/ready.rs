//! What the log and systemd are told: `ready` with one `attached` line
//! per interface (and systemd's READY, reload framing and watchdog), and
//! the counters at exit.

use anyhow::{Context, Result};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tracing::info;
use vecgate_config::Config;
use vecgate_control::NetdevFacts;

/// `ready` in the log and to systemd, once every port is attached and the
/// API's socket is bound (it answers from here on); then SIGHUP reloads.
#[allow(clippy::type_complexity)]
pub fn announce_ready(
    cfg: &Config,
    ctl: &vecgate_control::Control,
    api: &vecgate_control::ServerHandle,
    netdevs: &[NetdevFacts],
    beats: Vec<Arc<std::sync::atomic::AtomicU64>>,
) -> Result<(
    Option<Arc<crate::notify::Notifier>>,
    Option<crate::notify::Watchdog>,
    Arc<AtomicBool>,
)> {
    let nworkers = cfg.gateway.workers.max(1);
    let nports = cfg.interfaces.len();
    info!(
        gateway = %cfg.gateway.name,
        workers = nworkers,
        interfaces = nports,
        routes = cfg.routes.len(),
        "ready"
    );
    log_attached(cfg, netdevs);
    // systemd (Type=notify): ready now.
    let (notifier, watchdog) = notify_ready(ctl, api, beats, nports, nworkers);
    // SIGHUP reloads the file live (`vecgate reload`'s steps).
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .context("installing signal handlers")?;
    Ok((notifier, watchdog, hup))
}

/// systemd (Type=notify): READY once every port is attached and the API
/// answers, reloads framed, and the watchdog fed from the workers' beats.
fn notify_ready(
    ctl: &vecgate_control::Control,
    api: &vecgate_control::ServerHandle,
    beats: Vec<Arc<std::sync::atomic::AtomicU64>>,
    nports: usize,
    nworkers: usize,
) -> (
    Option<Arc<crate::notify::Notifier>>,
    Option<crate::notify::Watchdog>,
) {
    let notifier = crate::notify::Notifier::from_env().map(Arc::new);
    let watchdog = notifier
        .as_ref()
        .and_then(|_| crate::notify::Watchdog::from_env(beats));
    if let Some(n) = &notifier {
        n.send(&format!(
            "READY=1\nSTATUS=forwarding: {nports} interfaces, {nworkers} workers, API on {}",
            api.endpoint
        ));
        // Every live reload, however it came (SIGHUP, `vecgate reload`
        // from ExecReload=, POST /config), is framed for systemd.
        let n = n.clone();
        ctl.set_reload_hook(Arc::new(move |start| {
            if start {
                n.send(&crate::notify::reloading_message());
            } else {
                n.send("READY=1\nSTATUS=forwarding (reloaded)");
            }
        }));
    }
    (notifier, watchdog)
}

/// One `attached` line per interface.
fn log_attached(cfg: &Config, netdevs: &[NetdevFacts]) {
    for (ifc, nd) in cfg.interfaces.iter().zip(netdevs) {
        let mac = nd
            .mac
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        let addrs: Vec<String> = ifc
            .addresses
            .iter()
            .map(|a| format!("{}/{}", a.addr, a.prefix_len))
            .collect();
        info!(interface = %ifc.name, netdev = %ifc.host, driver = ifc.driver.as_str(), %mac, mtu = nd.mtu,
              offloads = nd.offloads, vrf = %ifc.vrf, addresses = %addrs.join(","), "attached");
    }
}

/// The final counters, logged at exit.
pub fn show_counters(ctl: &vecgate_control::Control) {
    let sum = ctl.counters();
    let mut ports = String::from(
        "Port                 rx-packets     rx-bytes  rx-missed  rx-errors   tx-packets     tx-bytes  tx-errors     drops\n",
    );
    for (name, p) in ctl.interface_counters() {
        ports.push_str(&format!(
            "{:<16} {:>14} {:>12} {:>10} {:>10} {:>12} {:>12} {:>10} {:>9}\n",
            name,
            p.rx_packets,
            p.rx_bytes,
            p.rx_missed,
            p.rx_errors,
            p.tx_packets,
            p.tx_bytes,
            p.tx_errors,
            p.drops
        ));
    }
    info!(
        "counters\n{}\n{}\n{}",
        ports,
        sum.show_runtime(),
        sum.show_errors()
    );
}
