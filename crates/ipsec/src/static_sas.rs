//! The SAs the configuration file keys statically (`[[tunnel.sa]]`):
//! created in a fresh [`EspRegistry`] at start ([`load`]) and re-applied
//! to the running one on SIGHUP ([`reload`]). Tunnels keyed by IKEv2 are
//! registered pending here and keyed by the IKE thread.

use std::sync::Arc;

use vecgate_config::{Config, SaDirection, TunnelKind};

use crate::keys::sa_config;
use crate::{EspRegistry, InboundSa, OutboundSa, SaConfig};

/// How SAs keyed from files are made. The gateway's maker resumes them
/// from its state directory (their keys outlive the process: sequence
/// ceilings and replay windows, [`crate::seqstore`]) and refuses a key
/// used by another SA; [`Plain`] only builds them.
pub trait SaMaker {
    fn outbound(&self, tunnel: &str, cfg: SaConfig) -> Result<OutboundSa, String>;
    fn inbound(&self, tunnel: &str, cfg: SaConfig) -> Result<InboundSa, String>;
}

/// Builds SAs with nothing persisted (tests and tools).
pub struct Plain;

impl SaMaker for Plain {
    fn outbound(&self, tunnel: &str, cfg: SaConfig) -> Result<OutboundSa, String> {
        let spi = cfg.spi;
        OutboundSa::new(cfg).map_err(|e| format!("tunnel {tunnel} sa {spi:#x}: {e}"))
    }
    fn inbound(&self, tunnel: &str, cfg: SaConfig) -> Result<InboundSa, String> {
        let spi = cfg.spi;
        InboundSa::new(cfg).map_err(|e| format!("tunnel {tunnel} sa {spi:#x}: {e}"))
    }
}

/// Creates every ipsec tunnel's SAs; tunnel ids are the tunnels' order
/// among the ipsec tunnels. `Ok(None)` without ipsec tunnels.
pub fn load(cfg: &Config, make: &dyn SaMaker) -> Result<Option<Arc<EspRegistry>>, String> {
    let mut any = false;
    let reg = EspRegistry::new();
    for (id, t) in cfg
        .tunnels
        .iter()
        .filter(|t| t.kind == TunnelKind::Ipsec)
        .enumerate()
    {
        any = true;
        if t.ipsec.as_ref().is_some_and(|x| x.ike.is_some()) {
            // Keyed by IKEv2 later (crate::ike); drops as no-sa until then.
            reg.add_pending_tunnel(id as u32, &t.name)
                .map_err(|e| format!("tunnel {}: {e}", t.name))?;
            continue;
        }
        let x = t
            .ipsec
            .as_ref()
            .filter(|x| !x.sas.is_empty())
            .ok_or_else(|| {
                format!(
                    "tunnel {}: neither [[tunnel.sa]] nor [tunnel.ike]: nothing keys it",
                    t.name
                )
            })?;
        let out = x
            .outbound()
            .ok_or_else(|| format!("tunnel {}: no outbound SA", t.name))?;
        let sa = make.outbound(&t.name, sa_config(t, out)?)?;
        reg.add_tunnel(id as u32, &t.name, sa)
            .map_err(|e| e.to_string())?;
        for s in x.inbound() {
            let sa = make.inbound(&t.name, sa_config(t, s)?)?;
            reg.install_inbound(id as u32, sa)
                .map_err(|e| format!("tunnel {}: {e}", t.name))?;
        }
        debug_assert!(x.sas.iter().any(|s| s.direction == SaDirection::Out));
    }
    Ok(any.then(|| Arc::new(reg)))
}

/// Applies the SAs of a re-read configuration to the running registry (on
/// SIGHUP), in make-before-break order (RFC 7296 §2.8): new inbound SAs
/// are installed first, then a changed outbound SA is switched to, and
/// inbound SAs no longer configured are removed last. SAs whose SPI is
/// unchanged are kept as they are (keys are not re-read for them). Other
/// configuration changes go through the API. Returns what was done.
pub fn reload(reg: &EspRegistry, cfg: &Config, make: &dyn SaMaker) -> Result<Vec<String>, String> {
    let mut done = Vec::new();
    let installed = reg.list();
    let mut work = Vec::new();
    for t in cfg.tunnels.iter().filter(|t| t.kind == TunnelKind::Ipsec) {
        let Some(x) = t.ipsec.as_ref() else { continue };
        if x.ike.is_some() {
            // Keyed by IKEv2, not by the file.
            continue;
        }
        let id = reg
            .tunnel_id(&t.name)
            .ok_or_else(|| format!("tunnel {}: new ipsec tunnels need a restart", t.name))?;
        work.push((t, x, id));
    }
    for (t, x, id) in &work {
        for s in x.inbound() {
            if !installed
                .iter()
                .any(|i| !i.outbound && i.spi == s.spi && i.tunnel == *id)
            {
                let sa = make.inbound(&t.name, sa_config(t, s)?)?;
                reg.install_inbound(*id, sa)
                    .map_err(|e| format!("tunnel {}: {e}", t.name))?;
                done.push(format!(
                    "tunnel {}: installed inbound SA {:#010x}",
                    t.name, s.spi
                ));
            }
        }
    }
    for (t, x, id) in &work {
        let Some(o) = x.outbound() else { continue };
        let cur = reg.tunnel_tx(*id).map(|tx| tx.spi());
        if cur != Some(o.spi) {
            let sa = make.outbound(&t.name, sa_config(t, o)?)?;
            let old = reg.switch_outbound(*id, sa).map_err(|e| e.to_string())?;
            done.push(format!(
                "tunnel {}: switched outbound SA {:#010x} -> {:#010x}",
                t.name,
                old.spi(),
                o.spi
            ));
        }
    }
    for (t, x, id) in &work {
        for i in installed.iter().filter(|i| !i.outbound && i.tunnel == *id) {
            if !x.inbound().any(|s| s.spi == i.spi) {
                reg.remove_inbound(i.spi).map_err(|e| e.to_string())?;
                done.push(format!(
                    "tunnel {}: removed inbound SA {:#010x}",
                    t.name, i.spi
                ));
            }
        }
    }
    Ok(done)
}
