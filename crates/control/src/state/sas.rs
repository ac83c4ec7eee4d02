//! Static IPsec SAs (`/sas`, `/tunnels/{name}/switch`): installed,
//! switched and removed on running tunnels through the SA registry
//! ([`SaOps`]), and recorded in the running configuration when keyed from
//! a file.

use super::{lock, ApiError, Control};
use crate::model::{SaInfo, SaKeying, SaSpec, SaSwitch, SaSwitched};
use crate::ops::{read_key_file, KeySource, SaOps};
use vecgate_config::{Config, SaDirection, StaticSa, Tunnel, TunnelKind};

impl Control {
    /// The IPsec SAs (empty without IPsec).
    pub fn sas(&self) -> Vec<SaInfo> {
        self.dp.sas.as_ref().map(|f| f()).unwrap_or_default()
    }

    /// `POST /sas`: installs an inbound SA on an existing static ipsec
    /// tunnel. A `key_file` SA is also recorded in the running
    /// configuration (so `GET /config` reproduces it); an inline key is
    /// not (it would have to be written out).
    pub fn add_sa(&self, spec: &SaSpec) -> Result<SaInfo, ApiError> {
        let ops = self.sa_ops()?;
        let (sa, hex) = static_sa(SaDirection::In, spec.keying(), spec.replay_window)?;
        // Read before the configuration lock (the caller runs this on the
        // blocking pool): a bad key file never holds up other requests.
        let text = Self::key_file_text(hex, &sa)?;
        let mut cfg = lock(&self.config);
        let t = Self::ipsec_tunnel(&cfg, &spec.tunnel, "tunnel")?;
        let key = KeySource::of(hex, text.as_deref().map(|t| &t[..]));
        ops.install_inbound(t, &sa, key)?;
        if hex.is_none() && !lock(&self.inline_keyed).contains(&spec.tunnel) {
            if let Some(x) = cfg
                .tunnels
                .iter_mut()
                .find(|t| t.name == spec.tunnel)
                .and_then(|t| t.ipsec.as_mut())
            {
                x.sas.push(sa);
            }
        }
        drop(cfg);
        let spi = format!("{:#010x}", spec.spi.0);
        self.sas()
            .into_iter()
            .find(|s| s.spi == spi && s.direction == "inbound")
            .ok_or_else(|| ApiError::new(500, "SA vanished after installation", None))
    }

    /// `POST /tunnels/{name}/switch`: the tunnel sends with the new SA
    /// from the next vector on; the inbound SAs stay (make-before-break,
    /// RFC 7296 §2.8: the peer switches on its own schedule).
    pub fn switch_sa(&self, tunnel: &str, spec: &SaSwitch) -> Result<SaSwitched, ApiError> {
        let ops = self.sa_ops()?;
        let (sa, hex) = static_sa(SaDirection::Out, spec.keying(), None)?;
        let text = Self::key_file_text(hex, &sa)?;
        let mut cfg = lock(&self.config);
        let t = Self::ipsec_tunnel(&cfg, tunnel, "name")?;
        let key = KeySource::of(hex, text.as_deref().map(|t| &t[..]));
        let old = ops.switch_outbound(t, &sa, key)?;
        if hex.is_none() && !lock(&self.inline_keyed).contains(tunnel) {
            if let Some(x) = cfg
                .tunnels
                .iter_mut()
                .find(|t| t.name == tunnel)
                .and_then(|t| t.ipsec.as_mut())
            {
                x.sas.retain(|s| s.direction != SaDirection::Out);
                x.sas.push(sa);
            }
        }
        Ok(SaSwitched {
            tunnel: tunnel.to_owned(),
            old_spi: format!("{old:#010x}"),
            new_spi: format!("{:#010x}", spec.spi.0),
        })
    }

    /// `DELETE /sas/{spi}`: removes an inbound SA (packets still using it
    /// are then dropped as `bad-spi`). The outbound SA is replaced with a
    /// switch, never deleted.
    pub fn del_sa(&self, spi: u32) -> Result<(), ApiError> {
        let ops = self.sa_ops()?;
        let hex = format!("{spi:#010x}");
        let owner = self
            .sas()
            .into_iter()
            .find(|s| s.spi == hex && s.direction == "inbound")
            .ok_or_else(|| ApiError::not_found("spi", format!("no inbound SA with spi {hex}")))?;
        let mut cfg = lock(&self.config);
        Self::ipsec_tunnel(&cfg, &owner.tunnel, "spi")?;
        let tunnel = ops.remove_inbound(spi)?;
        if let Some(x) = cfg
            .tunnels
            .iter_mut()
            .find(|t| t.name == tunnel)
            .and_then(|t| t.ipsec.as_mut())
        {
            x.sas
                .retain(|s| !(s.direction == SaDirection::In && s.spi == spi));
        }
        Ok(())
    }

    pub(crate) fn sa_ops(&self) -> Result<&dyn SaOps, ApiError> {
        self.dp.sa_ops.as_deref().ok_or_else(|| {
            ApiError::new(
                409,
                "this gateway runs no IPsec (no ipsec tunnel in its configuration)",
                None,
            )
        })
    }

    /// The static ipsec tunnel `name` of `cfg` (404 / 400 / 409 otherwise).
    fn ipsec_tunnel<'a>(cfg: &'a Config, name: &str, field: &str) -> Result<&'a Tunnel, ApiError> {
        let t = cfg
            .tunnel(name)
            .ok_or_else(|| ApiError::not_found(field, format!("no tunnel \"{name}\"")))?;
        if t.kind != TunnelKind::Ipsec {
            return Err(ApiError::bad(
                field,
                format!(
                    "tunnel \"{name}\" is a {} tunnel, not ipsec",
                    t.kind.as_str()
                ),
            ));
        }
        if t.ipsec.as_ref().is_some_and(|x| x.ike.is_some()) {
            return Err(ApiError::new(
                409,
                format!("tunnel \"{name}\" is keyed by IKEv2; its SAs are negotiated"),
                Some(field),
            ));
        }
        Ok(t)
    }

    /// The key file's text of a request without an inline key (read
    /// before the configuration lock: a bad key file never holds up other
    /// requests).
    fn key_file_text(
        hex: Option<&str>,
        sa: &StaticSa,
    ) -> Result<Option<zeroize::Zeroizing<Vec<u8>>>, ApiError> {
        match hex {
            Some(_) => Ok(None),
            None => read_key_file(&sa.key_file, "key_file").map(Some),
        }
    }
}

/// The SA as the TOML holds it, and where its key comes from.
pub(super) fn static_sa<'a>(
    direction: SaDirection,
    k: SaKeying<'a>,
    replay_window: Option<u32>,
) -> Result<(StaticSa, Option<&'a str>), ApiError> {
    let SaKeying {
        spi,
        algorithm,
        key,
        key_file,
        esn,
        lifetimes,
    } = k;
    // SPIs 0..=255 are reserved (RFC 4303 §2.1).
    if spi < 256 {
        return Err(ApiError::bad(
            "spi",
            format!("spi {spi:#x} is reserved (RFC 4303 §2.1: use 0x100 or above)"),
        ));
    }
    let alg: vecgate_config::EspAlgorithm = algorithm.parse().map_err(|_| {
        ApiError::bad(
            "algorithm",
            format!("algorithm \"{algorithm}\" is not one of aes128gcm16, aes256gcm16, aes128-sha1, aes256-sha256, chacha20poly1305"),
        )
    })?;
    let window = replay_window.unwrap_or(vecgate_config::ipsec::DEFAULT_REPLAY_WINDOW);
    if window > vecgate_config::ipsec::MAX_REPLAY_WINDOW {
        return Err(ApiError::bad(
            "replay_window",
            format!(
                "replay_window = {window} is out of range (at most {})",
                vecgate_config::ipsec::MAX_REPLAY_WINDOW
            ),
        ));
    }
    let (hex, file) = match (key, key_file) {
        (Some(k), None) => (Some(k.0.as_str()), "<inline key>".into()),
        (None, Some(f)) if !f.is_empty() => (None, std::path::PathBuf::from(f)),
        (Some(_), Some(_)) => return Err(ApiError::bad("key", "give key or key_file, not both")),
        _ => return Err(ApiError::bad("key", "key (hex) or key_file is required")),
    };
    Ok((
        StaticSa {
            direction,
            spi,
            algorithm: alg,
            key_file: file,
            esn: esn.unwrap_or(true),
            replay_window: window,
            lifetime_bytes: lifetimes[0],
            lifetime_packets: lifetimes[1],
            lifetime_seconds: lifetimes[2],
        },
        hex,
    ))
}
