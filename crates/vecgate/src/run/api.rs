//! The management API (its access control, TLS, the FPM route sources,
//! the live table builds it publishes) and the SIGHUP reload.

use super::ports::LivePorts;
use anyhow::{anyhow, Result};
use dataplane::tables::SharedTables;
use std::path::Path;
use std::sync::Arc;
use tracing::{error, info};
use vecgate_config::{Config, LoadError};
use vecgate_control::build::{Inputs, IpsecTables, Ports};
use vecgate_control::NetdevFacts;
use vecgate_keying::esp_tables::EspTables;

/// The API's access control: the bearer tokens from the configured files
/// (read once, never logged; private regular files of at least 32 bytes).
pub fn api_auth(cfg: &Config) -> Result<vecgate_control::Auth> {
    use vecgate_control::{Auth, Token};
    let what = |e: String| anyhow!("management API on {}: {e}", cfg.gateway.api);
    Ok(match (&cfg.gateway.api, &cfg.gateway.api_token_file) {
        (vecgate_config::ApiEndpoint::Tcp(_), Some(admin)) => Auth::Bearer {
            admin: Token::from_file(admin).map_err(what)?,
            readonly: cfg
                .gateway
                .api_readonly_token_file
                .as_deref()
                .map(Token::from_file)
                .transpose()
                .map_err(what)?,
        },
        _ => Auth::None,
    })
}

/// The TCP API's TLS certificate and key, if configured.
pub fn api_tls(cfg: &Config) -> Result<Option<vecgate_control::Tls>> {
    let g = &cfg.gateway;
    match (&g.api, &g.api_tls_cert_file, &g.api_tls_key_file) {
        (vecgate_config::ApiEndpoint::Tcp(_), Some(cert), Some(key)) => {
            vecgate_control::Tls::from_files(cert, key)
                .map(Some)
                .map_err(|e| anyhow!("management API on {}: {e}", g.api))
        }
        _ => Ok(None),
    }
}

/// Routes from FRR's zebra (dplane_fpm_nl), into the same
/// build-and-publish as the API's route changes: the `[routing] fpm`
/// listener, and a tenant VRF's own zebra through its namespace's
/// listener (host_tun::open).
pub fn start_fpm(
    cfg: &Config,
    ctl: &Arc<vecgate_control::Control>,
    tenant_fpm: Vec<vecgate_control::fpm::Source>,
) -> Result<()> {
    let mut sources = tenant_fpm;
    if let Some(addr) = cfg.routing.fpm {
        use vecgate_control::fpm;
        let l = fpm::listen(addr).map_err(|e| anyhow!("FPM server on {addr}: {e}"))?;
        info!(%addr, "FPM server listening for zebra (dplane_fpm_nl)");
        sources.push(fpm::Source {
            listener: l,
            label: addr.to_string(),
            settings: fpm::FpmSettings::from_config(&cfg.routing),
            vrf: None,
        });
    }
    if !sources.is_empty() {
        vecgate_control::fpm::spawn(ctl.clone(), sources)
            .map_err(|e| anyhow!("FPM server thread: {e}"))?;
    }
    Ok(())
}

/// Starts the management API on `gateway.api` with access control `auth`.
#[allow(clippy::too_many_arguments)]
pub fn start_api(
    cfg: &Config,
    auth: vecgate_control::Auth,
    tls: Option<vecgate_control::Tls>,
    shared: &Arc<SharedTables>,
    counters: &[Arc<dataplane::counters::WorkerCounters>],
    mailboxes: Vec<crossbeam_channel::Sender<dataplane::worker::Command>>,
    netdevs: &[NetdevFacts],
    esp: Option<Arc<vecgate_ipsec::EspRegistry>>,
    sa_state: &Arc<vecgate_ipsec::SaState>,
    ike: Option<(
        vecgate_keying::ike::IkeStatus,
        vecgate_keying::ike::IkeControl,
    )>,
    tports: Arc<std::sync::Mutex<Ports>>,
    held: crate::ha::Held,
    tenant_fpm: Vec<vecgate_control::fpm::Source>,
    live: &Arc<LivePorts>,
) -> Result<(vecgate_control::ServerHandle, Arc<vecgate_control::Control>)> {
    use vecgate_control::{Capabilities, Control, Dataplane};
    let nd = live.facts.clone();
    let sas = esp.clone().map(|reg| -> vecgate_control::SaSource {
        Box::new(move || vecgate_keying::sa_ops::sa_infos(&reg))
    });
    let ike_control = ike.as_ref().map(|(_, c)| c.clone());
    let sa_ops = esp.clone().map(|reg| -> Box<dyn vecgate_control::SaOps> {
        Box::new(vecgate_keying::sa_ops::ApiSaOps::new(
            reg,
            sa_state.clone(),
            ike_control,
        ))
    });
    let dp = Dataplane {
        tables: shared.clone(),
        build: Box::new(
            move |c: &Config, learned: &vecgate_control::learned::Learned| {
                // Only a table that is built gets published (Control::apply),
                // so the port assignment is committed with it.
                let mut tp = tports.lock().unwrap_or_else(|e| e.into_inner());
                let held = held.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let nd = nd.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let esp = esp.as_deref().map(EspTables);
                let inputs = Inputs {
                    netdevs: &nd,
                    learned,
                    held: &held,
                    ipsec: esp.as_ref().map(|e| e as &dyn IpsecTables),
                };
                tp.tables(c, &inputs)
            },
        ),
        counters: counters.to_vec(),
        mailboxes,
        netdevs: netdevs.to_vec(),
        sas,
        sa_ops,
    };
    // Tunnels are added and deleted live (stable virtual ports, workers
    // count up to MAX_VIRTUAL_PORTS of them).
    let ctl = Control::new(cfg.clone(), dp, Capabilities { tunnels: true });
    // Interfaces are attached and released live too.
    ctl.set_port_ops(live.clone());
    if let Some((st, _)) = ike {
        ctl.set_ike_source(Box::new(move || {
            st.lock().unwrap_or_else(|e| e.into_inner()).clone()
        }));
    }
    start_fpm(cfg, &ctl, tenant_fpm)?;
    let handle = vecgate_control::serve(&cfg.gateway.api, ctl.clone(), auth, tls)
        .map_err(|e| anyhow!("management API on {}: {e}", cfg.gateway.api))?;
    Ok((handle, ctl))
}

/// SIGHUP: the configuration file re-read, validated whole and its
/// difference applied ([`vecgate_control::Control::reload`]); every
/// error is logged with its line and nothing is applied.
pub fn reload_file(ctl: &vecgate_control::Control, path: &Path) {
    let cfg = match vecgate_config::load(path) {
        Ok(c) => c,
        Err(LoadError::Invalid { path, diagnostics }) => {
            for d in &diagnostics {
                error!("reload: {}:{}: {}", path.display(), d.line, d.message);
            }
            error!(
                errors = diagnostics.len(),
                "reload refused: invalid configuration, nothing applied"
            );
            ctl.reload_refused_early();
            return;
        }
        Err(e) => {
            error!("reload refused: {e}");
            ctl.reload_refused_early();
            return;
        }
    };
    match ctl.reload(cfg, false) {
        Ok(plan) => {
            for c in &plan.changes {
                info!("reload: {} {} {}: {}", c.op, c.object, c.name, c.detail);
            }
            for d in &plan.done {
                info!("IPsec: {d}");
            }
            info!(changes = plan.changes.len(), "reloaded {}", path.display());
        }
        Err(e) => error!("reload refused: {}", e.message),
    }
}
