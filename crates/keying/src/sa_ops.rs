//! The API's SA operations on the running registry (`POST /sas`, `POST
//! /tunnels/{name}/switch`, `DELETE /sas/{spi}`), the ipsec side of `POST
//! /tunnels` / `DELETE /tunnels/{name}` (static SAs through the
//! [`SaState`], IKE tunnels through the IKE thread) and `GET /sas`. SAs,
//! keys and reload live in `vecgate-ipsec`; the tables only hold shared
//! pointers into the registry, so a route change through the API keeps
//! sequence numbers and replay windows.

use std::sync::Arc;
use std::time::{Duration, Instant};
use vecgate_config::ipsec::parse_key_hex;
use vecgate_config::{Config, SaDirection, StaticSa, Tunnel};
use vecgate_ipsec::keys::{key_from_text, sa_config_keyed};
use vecgate_ipsec::sastate::StartError;
use vecgate_ipsec::{Algorithm, EspRegistry, InboundSa, OutboundSa, SaConfig, SaState};
use zeroize::Zeroizing;

/// Longest wait for a new outbound SA's first durable block of sequence
/// numbers before switching to it anyway (its packets then wait as
/// `seq-not-durable` until the block is written).
const FIRST_BLOCK_WAIT: Duration = Duration::from_secs(2);

/// Waits until the state ticker has made `sa`'s first sequence numbers
/// durable (within one tick): a switch to it then drops nothing, where a
/// switch before would drop the tunnel's packets as `seq-not-durable`
/// until the block is written.
fn first_block(sa: &OutboundSa) {
    let c = sa.seq_counter();
    let end = Instant::now() + FIRST_BLOCK_WAIT;
    while c.ceiling() < c.next() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The registry's SAs as the API's `GET /sas` shows them (never keys).
pub fn sa_infos(reg: &EspRegistry) -> Vec<vecgate_control::model::SaInfo> {
    reg.list()
        .into_iter()
        .map(|i| vecgate_control::model::SaInfo {
            spi: format!("{:#010x}", i.spi),
            tunnel: i.tunnel_name,
            direction: if i.outbound { "outbound" } else { "inbound" }.into(),
            cipher: match i.algorithm {
                Algorithm::AesGcm128 => "aes-gcm-128",
                Algorithm::AesGcm256 => "aes-gcm-256",
                Algorithm::AesCbc128HmacSha1_96 => "aes-cbc-128-hmac-sha1-96",
                Algorithm::AesCbc256HmacSha256_128 => "aes-cbc-256-hmac-sha256-128",
                Algorithm::ChaCha20Poly1305 => "chacha20-poly1305",
            }
            .into(),
            engine: i.engine.name().into(),
            esn: i.esn,
            packets: i.packets,
            bytes: i.bytes,
            drops: i.drops.iter().map(|(_, n)| n).sum(),
            drop_reasons: i
                .drops
                .iter()
                .map(|(r, n)| vecgate_control::model::DropCount {
                    reason: (*r).to_owned(),
                    count: *n,
                })
                .collect(),
        })
        .collect()
}

/// Registry ids of tunnels created live start here (those of the file
/// are their order among its ipsec tunnels, far below).
const LIVE_TUNNEL_IDS: u32 = 1 << 20;

/// The API's SA operations on the running registry (`POST /sas`, `POST
/// /tunnels/{name}/switch`, `DELETE /sas/{spi}`) and the ipsec side of
/// `POST /tunnels` / `DELETE /tunnels/{name}`. Keys from the request are
/// zeroized after use and never appear in an error message.
pub struct ApiSaOps {
    reg: Arc<EspRegistry>,
    /// Where static SAs resume and reserve their sequence numbers.
    sas: Arc<SaState>,
    /// The running IKE thread (always started by `run`, idle without IKE
    /// tunnels).
    ike: Option<crate::ike::IkeControl>,
    /// IKE tunnels registered but not in the published tables yet.
    starting: std::sync::Mutex<std::collections::HashMap<String, crate::ike::NewTunnel>>,
    next_id: std::sync::atomic::AtomicU32,
}

impl ApiSaOps {
    pub fn new(
        reg: Arc<EspRegistry>,
        sas: Arc<SaState>,
        ike: Option<crate::ike::IkeControl>,
    ) -> Self {
        ApiSaOps {
            reg,
            sas,
            ike,
            starting: Default::default(),
            next_id: LIVE_TUNNEL_IDS.into(),
        }
    }

    fn starting(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, crate::ike::NewTunnel>> {
        self.starting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A registry id no tunnel has.
    fn fresh_id(&self) -> u32 {
        loop {
            let id = self
                .next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if self.reg.tunnel_tx(id).is_none() {
                return id;
            }
        }
    }

    /// The static SAs of new tunnel `t`, keyed from `keys` (errors name
    /// `sa[i].key` / `sa[i].key_file`, never the key).
    fn static_sas(
        &self,
        t: &Tunnel,
        keys: &[vecgate_control::KeySource<'_>],
    ) -> Result<(OutboundSa, Vec<InboundSa>), vecgate_control::state::ApiError> {
        let sas = t.ipsec.as_ref().map_or(&[][..], |x| &x.sas[..]);
        if sas.len() != keys.len() {
            return Err(api_err(500, "sa", "one key source per SA expected"));
        }
        let mut out = None;
        let mut ins = Vec::new();
        for (i, (sa, key)) in sas.iter().zip(keys).enumerate() {
            let cfg = Self::keyed(t, sa, *key).map_err(|e| {
                let f = format!("sa[{i}].{}", e.field.as_deref().unwrap_or("key"));
                api_err(e.status, &f, format!("{f}: {}", e.message))
            })?;
            let alg = || format!("sa[{i}].algorithm");
            match sa.direction {
                SaDirection::Out => {
                    out = Some(
                        self.sas
                            .outbound(&t.name, cfg)
                            .map_err(|e| start_err(e, &alg(), &key_field(i, *key)))?,
                    )
                }
                SaDirection::In => ins.push(
                    self.sas
                        .inbound(&t.name, cfg)
                        .map_err(|e| start_err(e, &alg(), &key_field(i, *key)))?,
                ),
            }
        }
        let out = out.ok_or_else(|| {
            api_err(
                400,
                "sa",
                format!(
                    "tunnel {}: no outbound SA (sa with direction \"out\")",
                    t.name
                ),
            )
        })?;
        Ok((out, ins))
    }
}

/// An SA refused at creation: its configuration is a 400 on `sa_field`,
/// its state (key reused, state unreadable) a 409 on `key_field`.
fn start_err(e: StartError, sa_field: &str, key_field: &str) -> vecgate_control::state::ApiError {
    match e {
        StartError::Sa(m) => api_err(400, sa_field, m),
        StartError::State(m) => api_err(409, key_field, m),
    }
}

/// The field that names SA `i`'s key in an API request.
fn key_field(i: usize, key: vecgate_control::KeySource<'_>) -> String {
    match key {
        vecgate_control::KeySource::Hex(_) => format!("sa[{i}].key"),
        vecgate_control::KeySource::File(_) => format!("sa[{i}].key_file"),
    }
}

fn api_err(status: u16, field: &str, m: impl Into<String>) -> vecgate_control::state::ApiError {
    vecgate_control::state::ApiError::new(status, m, Some(field))
}

impl ApiSaOps {
    fn keyed(
        t: &Tunnel,
        sa: &StaticSa,
        key: vecgate_control::KeySource<'_>,
    ) -> Result<SaConfig, vecgate_control::state::ApiError> {
        let bytes = match key {
            vecgate_control::KeySource::Hex(h) => Zeroizing::new(
                parse_key_hex(h).map_err(|_| api_err(400, "key", "key must be hex digits"))?,
            ),
            vecgate_control::KeySource::File(text) => {
                key_from_text(sa, &t.name, text).map_err(|e| api_err(400, "key_file", e))?
            }
        };
        let field = match key {
            vecgate_control::KeySource::Hex(_) => "key",
            vecgate_control::KeySource::File(_) => "key_file",
        };
        sa_config_keyed(t, sa, bytes).map_err(|e| api_err(400, field, e))
    }

    fn id(&self, t: &Tunnel, field: &str) -> Result<u32, vecgate_control::state::ApiError> {
        self.reg
            .tunnel_id(&t.name)
            .ok_or_else(|| api_err(409, field, format!("tunnel {} has no SAs yet", t.name)))
    }
}

impl vecgate_control::SaOps for ApiSaOps {
    fn install_inbound(
        &self,
        t: &Tunnel,
        sa: &StaticSa,
        key: vecgate_control::KeySource<'_>,
    ) -> Result<(), vecgate_control::state::ApiError> {
        let id = self.id(t, "tunnel")?;
        let cfg = Self::keyed(t, sa, key)?;
        let sa = self
            .sas
            .inbound(&t.name, cfg)
            .map_err(|e| start_err(e, "algorithm", "key"))?;
        self.reg.install_inbound(id, sa).map_err(|e| match e {
            vecgate_ipsec::RegistryError::SpiInUse(_) => api_err(409, "spi", e.to_string()),
            _ => api_err(409, "tunnel", e.to_string()),
        })
    }

    fn switch_outbound(
        &self,
        t: &Tunnel,
        sa: &StaticSa,
        key: vecgate_control::KeySource<'_>,
    ) -> Result<u32, vecgate_control::state::ApiError> {
        let id = self.id(t, "name")?;
        let cfg = Self::keyed(t, sa, key)?;
        let sa = self
            .sas
            .outbound(&t.name, cfg)
            .map_err(|e| start_err(e, "algorithm", "key"))?;
        first_block(&sa);
        self.reg
            .switch_outbound(id, sa)
            .map(|old| old.spi())
            .map_err(|e| api_err(409, "name", e.to_string()))
    }

    fn remove_inbound(&self, spi: u32) -> Result<String, vecgate_control::state::ApiError> {
        let tunnel = self
            .reg
            .list()
            .into_iter()
            .find(|i| !i.outbound && i.spi == spi)
            .map(|i| i.tunnel_name)
            .ok_or_else(|| api_err(404, "spi", format!("no inbound SA with spi {spi:#010x}")))?;
        self.reg
            .remove_inbound(spi)
            .map(|_| tunnel)
            .map_err(|e| api_err(404, "spi", e.to_string()))
    }

    fn add_tunnel(
        &self,
        cfg: &Config,
        t: &Tunnel,
        keys: &[vecgate_control::KeySource<'_>],
        psk: Option<&[u8]>,
    ) -> Result<(), vecgate_control::state::ApiError> {
        if self.reg.tunnel_id(&t.name).is_some() {
            return Err(api_err(
                409,
                "name",
                format!("tunnel {} is registered already", t.name),
            ));
        }
        let x = t.ipsec.clone().unwrap_or_default();
        if let Some(s) = &x.ike {
            if self.ike.is_none() {
                return Err(api_err(409, "ike", "this gateway runs no IKE thread"));
            }
            let id = self.fresh_id();
            let psk = psk.ok_or_else(|| api_err(500, "ike.psk_file", "PSK not read"))?;
            let built = crate::ike::build_tunnel(cfg, t, s, id, psk)
                .map_err(|(f, m)| api_err(400, &format!("ike.{f}"), m))?;
            self.reg
                .add_pending_tunnel(id, &t.name)
                .map_err(|e| api_err(409, "name", e.to_string()))?;
            self.starting().insert(t.name.clone(), built);
            return Ok(());
        }
        if x.sas.is_empty() {
            return Err(api_err(
                400,
                "sa",
                format!(
                    "tunnel {}: give its SAs (sa) or IKEv2 (ike): nothing keys it",
                    t.name
                ),
            ));
        }
        let (out, ins) = self.static_sas(t, keys)?;
        let id = self.fresh_id();
        self.reg
            .add_tunnel(id, &t.name, out)
            .map_err(|e| api_err(409, "name", e.to_string()))?;
        for sa in ins {
            let spi = sa.spi();
            if let Err(e) = self.reg.install_inbound(id, sa) {
                let _ = self.reg.remove_tunnel(id);
                let i = x
                    .sas
                    .iter()
                    .position(|s| s.direction == SaDirection::In && s.spi == spi)
                    .unwrap_or(0);
                return Err(api_err(409, &format!("sa[{i}].spi"), e.to_string()));
            }
        }
        Ok(())
    }

    fn reload_auth(&self, t: &Tunnel, apply: bool) -> Result<(), vecgate_control::state::ApiError> {
        let (Some(ike), Some(s)) = (&self.ike, t.ipsec.as_ref().and_then(|x| x.ike.as_ref()))
        else {
            return Ok(());
        };
        ike.reload_auth(t, s, apply)
            .map_err(|(f, m)| api_err(400, &format!("ike.{f}"), m))
    }

    fn start_tunnel(&self, name: &str) {
        let t = self.starting().remove(name);
        if let (Some(t), Some(ike)) = (t, &self.ike) {
            ike.add(t);
        }
    }

    fn stop_tunnel(&self, name: &str) {
        if let Some(ike) = &self.ike {
            ike.remove(name);
        }
    }

    fn remove_tunnel(&self, name: &str) -> Result<(), vecgate_control::state::ApiError> {
        self.starting().remove(name);
        let id = self
            .reg
            .tunnel_id(name)
            .ok_or_else(|| api_err(404, "name", format!("tunnel {name} has no SAs")))?;
        let spis = self
            .reg
            .remove_tunnel(id)
            .map_err(|e| api_err(404, "name", e.to_string()))?;
        tracing::info!(
            tunnel = name,
            inbound_sas = spis.len(),
            "IPsec: tunnel removed with its SAs"
        );
        Ok(())
    }
}
