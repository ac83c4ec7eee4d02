//! The SAs the configuration file keys statically (`[[tunnel.sa]]`):
//! created in a fresh [`EspRegistry`] at start ([`load`]); a reload
//! changes them through the API's SA steps (`vecgate_control`'s
//! `Control::reload`). Tunnels keyed by IKEv2 are
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
