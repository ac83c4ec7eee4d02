//! Tunnels (`/tunnels`, `/ike`): overlay tunnels and ipsec tunnels
//! created and deleted live, an ipsec tunnel's SAs registered around the
//! table swap ([`SaOps`]).

use super::sas::static_sa;
use super::{lock, ApiError, Control};
use crate::model::{PortTraffic, TunnelCounters, TunnelInfo, TunnelSpec};
use crate::ops::{read_key_file, IkeSource, KeySource};
use vecgate_config::{Config, Tunnel, TunnelKind, Via};

/// Key material read from files before any lock, zeroized when dropped.
type Secret = zeroize::Zeroizing<Vec<u8>>;

/// The key and PSK files of a new tunnel, read.
struct Secrets {
    /// Per static SA: its key file's text, `None` for an inline key.
    keys: Vec<Option<Secret>>,
    psk: Option<Secret>,
}

impl Secrets {
    /// Reads the files `t` names (`hex`: the inline keys, per SA): private
    /// regular files only, so a FIFO or a device is refused at once.
    /// Errors name the request field.
    fn read(t: &Tunnel, hex: &[Option<&str>]) -> Result<Self, ApiError> {
        let sas = t.ipsec.as_ref().map_or(&[][..], |x| &x.sas[..]);
        let mut keys = Vec::with_capacity(sas.len());
        for (i, (sa, h)) in sas.iter().zip(hex).enumerate() {
            keys.push(match h {
                Some(_) => None,
                None => Some(read_key_file(&sa.key_file, &format!("sa[{i}].key_file"))?),
            });
        }
        let psk = match t.ipsec.as_ref().and_then(|x| x.ike.as_ref()) {
            Some(k) if k.uses_psk() => Some(read_key_file(&k.psk_file, "ike.psk_file")?),
            Some(_) => Some(zeroize::Zeroizing::new(Vec::new())),
            None => None,
        };
        Ok(Secrets { keys, psk })
    }
}

impl Control {
    /// Adds a tunnel: the spec becomes a `[[tunnel]]` table (defaults as in
    /// the file), is validated with the rest, and built into the tables.
    /// An ipsec tunnel is registered with the SA registry first (static
    /// keys read, or its IKEv2 state machine built), then published, then
    /// (IKEv2) started; a refusal on the way undoes the registration.
    pub fn add_tunnel(&self, spec: &TunnelSpec) -> Result<(), ApiError> {
        let mut tunnel = spec
            .to_tunnel()
            .map_err(|e| ApiError::bad(&e.field, e.message))?;
        let hex = static_sas_of(spec, &mut tunnel)?;
        if !self.caps.tunnels {
            // Validated first so bad input is still a 400 naming the field.
            self.with_tunnel(&tunnel)?;
            return Err(ApiError::new(
                409,
                "tunnels are not in this build of the dataplane yet",
                Some("kind"),
            ));
        }
        // Invalid input is refused before any file is opened, then key
        // and PSK files are read before any lock (this runs on the
        // blocking pool), then all is checked again under the lock.
        self.free(&spec.name)?;
        self.with_tunnel(&tunnel)?;
        let secrets = Secrets::read(&tunnel, &hex)?;
        let _serial = lock(&self.tunnel_ops);
        self.free(&spec.name)?;
        let probe = self.with_tunnel(&tunnel)?;
        let inline = hex.iter().any(Option::is_some);
        let mut recorded = tunnel.clone();
        let ops = if tunnel.kind == TunnelKind::Ipsec {
            let ops = self.sa_ops()?;
            let keys: Vec<KeySource<'_>> = hex
                .iter()
                .zip(&secrets.keys)
                .map(|(h, f)| KeySource::of(*h, f.as_deref().map(|t| &t[..])))
                .collect();
            let psk = secrets.psk.as_deref().map(|p| &p[..]);
            ops.add_tunnel(&probe, &tunnel, &keys, psk)?;
            // Inline keys are not written into the configuration (as with
            // POST /sas): the tunnel is recorded without its SAs.
            if inline {
                if let Some(x) = recorded.ipsec.as_mut() {
                    x.sas.clear();
                }
            }
            Some(ops)
        } else {
            None
        };
        let applied = self.apply("name", |c| {
            if c.tunnel(&spec.name).is_some() || c.interface(&spec.name).is_some() {
                return Err(in_use(&spec.name));
            }
            c.tunnels.push(recorded);
            Ok(Some(format!("tunnel[{}]", c.tunnels.len() - 1)))
        });
        if let Err(e) = applied {
            if let Some(ops) = ops {
                let _ = ops.remove_tunnel(&spec.name);
            }
            return Err(e);
        }
        if let Some(ops) = ops {
            if inline {
                lock(&self.inline_keyed).insert(spec.name.clone());
            }
            ops.start_tunnel(&spec.name);
        }
        self.count_from_now(&spec.name);
        Ok(())
    }

    /// 409 when an interface or a tunnel is called `name`.
    fn free(&self, name: &str) -> Result<(), ApiError> {
        let cfg = lock(&self.config);
        if cfg.tunnel(name).is_some() || cfg.interface(name).is_some() {
            return Err(in_use(name));
        }
        Ok(())
    }

    /// The running configuration with `t` added, or the validator's
    /// refusal naming the request's field.
    fn with_tunnel(&self, t: &Tunnel) -> Result<Config, ApiError> {
        let mut probe = self.config();
        probe.tunnels.push(t.clone());
        let object = format!("tunnel[{}]", probe.tunnels.len() - 1);
        match vecgate_config::validate(&probe).first() {
            Some(d) => Err(ApiError::invalid(d, Some(&object), "name")),
            None => Ok(probe),
        }
    }

    /// Reports tunnel `name`'s counters from now on (its port may have
    /// served a tunnel deleted long ago).
    fn count_from_now(&self, name: &str) {
        let cfg = self.config();
        let sum = self.counters();
        if let Some((_, Some(p))) = self.tunnel_ports(&cfg).into_iter().find(|(n, _)| n == name) {
            let snap = sum.ports.get(usize::from(p)).copied().unwrap_or_default();
            lock(&self.tunnel_base).insert(name.to_owned(), snap);
        }
    }

    /// Deletes a tunnel. Refused (409) while a route points at it, so
    /// traffic is never silently re-routed around a vanished tunnel (into
    /// a less specific route, e.g. the underlay): delete or re-point the
    /// routes first. Packets already on their way to its virtual port are
    /// dropped and counted (`interface-down` / `no-interface`): its port
    /// is not reused at once. An IKEv2 tunnel first deletes its IKE SA
    /// with the peer (RFC 7296 §1.4.1); an ipsec tunnel's SAs leave the
    /// registry once the tables no longer hold it.
    pub fn del_tunnel(&self, name: &str) -> Result<(), ApiError> {
        let _serial = lock(&self.tunnel_ops);
        let cfg = self.config();
        let t = cfg
            .tunnel(name)
            .ok_or_else(|| ApiError::not_found("name", format!("no tunnel \"{name}\"")))?;
        let routed = |c: &Config| {
            c.routes
                .iter()
                .find(|r| matches!(&r.via, Via::Tunnel(t) if t == name))
                .map(|r| {
                    ApiError::new(
                        409,
                        format!(
                            "route {} in vrf \"{}\" goes through tunnel \"{name}\": delete it first",
                            r.prefix, r.vrf
                        ),
                        Some("name"),
                    )
                })
        };
        // Checked before the peer is told anything.
        if let Some(e) = routed(&cfg) {
            return Err(e);
        }
        let ops = if t.kind == vecgate_config::TunnelKind::Ipsec {
            Some(self.sa_ops()?)
        } else {
            None
        };
        if let Some(ops) = ops {
            ops.stop_tunnel(name);
        }
        self.apply("name", |c| {
            let before = c.tunnels.len();
            c.tunnels.retain(|t| t.name != name);
            if before == c.tunnels.len() {
                return Err(ApiError::not_found("name", format!("no tunnel \"{name}\"")));
            }
            match routed(c) {
                Some(e) => Err(e),
                None => Ok(None),
            }
        })?;
        if let Some(ops) = ops {
            ops.remove_tunnel(name)?;
        }
        lock(&self.tunnel_base).remove(name);
        lock(&self.inline_keyed).remove(name);
        Ok(())
    }

    /// The virtual port of every tunnel in the published tables.
    pub(crate) fn tunnel_ports(&self, cfg: &Config) -> Vec<(String, Option<u16>)> {
        let tables = self.dp.tables.load();
        cfg.tunnels
            .iter()
            .map(|t| {
                let port = tables
                    .interfaces
                    .iter()
                    .flatten()
                    .find(|i| i.name == t.name)
                    .map(|i| i.port);
                (t.name.clone(), port)
            })
            .collect()
    }

    /// Counters of every tunnel's virtual port since its creation.
    pub fn tunnel_counters(&self) -> Vec<TunnelCounters> {
        let cfg = self.config();
        let sum = self.counters();
        let base = lock(&self.tunnel_base);
        self.tunnel_ports(&cfg)
            .into_iter()
            .map(|(name, port)| {
                let now = port
                    .and_then(|p| sum.ports.get(usize::from(p)).copied())
                    .unwrap_or_default();
                let b = base.get(&name).copied().unwrap_or_default();
                TunnelCounters {
                    traffic: PortTraffic::since(&now, &b),
                    tunnel: name,
                }
            })
            .collect()
    }

    pub fn tunnels(&self) -> Vec<TunnelInfo> {
        let counters = self.tunnel_counters();
        self.config()
            .tunnels
            .iter()
            .map(|t| {
                let c = counters.iter().find(|c| c.tunnel == t.name);
                TunnelInfo {
                    name: t.name.clone(),
                    kind: t.kind.as_str().to_owned(),
                    local: t.local.to_string(),
                    remote: t.remote.to_string(),
                    key: t.key,
                    vrf: t.vrf.clone(),
                    underlay_vrf: t.underlay_vrf.clone(),
                    mtu: t.mtu,
                    addresses: t.addresses.iter().map(|a| a.to_string()).collect(),
                    traffic: c.map(|c| c.traffic).unwrap_or_default(),
                }
            })
            .collect()
    }

    /// Connects `GET /ike` to the IKE control thread (which starts after
    /// the API).
    pub fn set_ike_source(&self, f: IkeSource) {
        *lock(&self.ike) = Some(f);
    }

    /// The IKEv2 tunnels (empty without IKE).
    pub fn ike(&self) -> Vec<crate::model::IkeTunnelInfo> {
        lock(&self.ike).as_ref().map(|f| f()).unwrap_or_default()
    }
}

fn in_use(name: &str) -> ApiError {
    ApiError::new(
        409,
        format!("name \"{name}\" is already in use"),
        Some("name"),
    )
}

/// The static SAs of a tunnel request, put into `tunnel` as the file
/// would hold them, and per SA its inline hex key (if it has one
/// instead of a key file). Errors name the field by its path
/// (`sa[1].spi`).
fn static_sas_of<'a>(
    spec: &'a TunnelSpec,
    tunnel: &mut vecgate_config::Tunnel,
) -> Result<Vec<Option<&'a str>>, ApiError> {
    let mut hex = Vec::new();
    for (i, s) in spec.sa.iter().flatten().enumerate() {
        let at = |f: &str| format!("sa[{i}].{f}");
        let direction: vecgate_config::SaDirection = s
            .direction
            .parse()
            .map_err(|e| ApiError::bad(&at("direction"), format!("{}: {e}", at("direction"))))?;
        for (f, v) in [
            ("lifetime_bytes", s.lifetime_bytes),
            ("lifetime_packets", s.lifetime_packets),
            ("lifetime_seconds", s.lifetime_seconds),
        ] {
            if v == Some(0) {
                return Err(ApiError::bad(
                    &at(f),
                    format!("{}: 0 is no limit: leave it out", at(f)),
                ));
            }
        }
        let (sa, h) = static_sa(direction, s.keying(), s.replay_window).map_err(|e| {
            let f = at(e.field.as_deref().unwrap_or("key"));
            ApiError::bad(&f, format!("{f}: {}", e.message))
        })?;
        if let Some(x) = tunnel.ipsec.as_mut() {
            x.sas.push(sa);
        }
        hex.push(h);
    }
    Ok(hex)
}
