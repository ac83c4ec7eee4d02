//! The IKE thread's configuration wiring: each `[tunnel.ike]` of the
//! gateway's configuration as a [`vecgate_ike::IkeConfig`] (PSK read,
//! selectors and lifetimes derived), and a negotiated child SA's keys as
//! the ESP dataplane's [`SaConfig`]s.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use vecgate_config::{Config, IkeSettings, Tunnel, TunnelKind};
use vecgate_ike::{ChildSaKeys, IkeConfig, Prefix};
use vecgate_ipsec::{Algorithm, Lifetime, SaConfig, TunnelEndpoints, UdpEncap};
use zeroize::Zeroizing;

/// Delay before an initiator starts over after a failure or deletion.
const RECONNECT_DELAY: Duration = Duration::from_secs(3);
/// Anti-replay window of negotiated inbound SAs.
const REPLAY_WINDOW: u32 = 1024;

pub(super) fn ike_tunnels(cfg: &Config) -> impl Iterator<Item = (&Tunnel, &IkeSettings)> {
    cfg.tunnels
        .iter()
        .filter(|t| t.kind == TunnelKind::Ipsec)
        .filter_map(|t| Some((t, t.ipsec.as_ref()?.ike.as_ref()?)))
}

/// Reads a PSK file (a private regular file, see
/// [`vecgate_config::secret`]): its bytes, one trailing newline ignored.
/// Zeroized.
pub fn read_psk(path: &std::path::Path, tunnel: &str) -> Result<Zeroizing<Vec<u8>>, String> {
    let b = vecgate_config::secret::read_secret_file(path, vecgate_config::secret::MAX_SECRET_LEN)
        .map_err(|e| format!("tunnel {tunnel}: psk_file {}: {e}", path.display()))?;
    psk_from_text(b, path, tunnel)
}

/// The PSK held by a PSK file's contents: one trailing newline ignored.
pub fn psk_from_text(
    mut b: Zeroizing<Vec<u8>>,
    path: &std::path::Path,
    tunnel: &str,
) -> Result<Zeroizing<Vec<u8>>, String> {
    for _ in 0..2 {
        if matches!(b.last(), Some(b'\n' | b'\r')) {
            b.pop();
        }
    }
    if b.is_empty() {
        return Err(format!(
            "tunnel {tunnel}: psk_file {} is empty",
            path.display()
        ));
    }
    Ok(b)
}

fn to_ike_prefix(p: &vecgate_config::Prefix) -> Prefix {
    Prefix {
        addr: p.addr,
        len: p.len,
    }
}

fn any_of(addr: IpAddr) -> Prefix {
    Prefix {
        addr: if addr.is_ipv4() {
            IpAddr::from([0u8; 4])
        } else {
            IpAddr::from([0u16; 8])
        },
        len: 0,
    }
}

/// The library configuration of tunnel `t`. Local selectors: `local_traffic`,
/// else the networks of the interfaces in the tunnel's VRF, else any.
/// Remote selectors: the tunnel's `traffic`, else any.
pub fn ike_config(cfg: &Config, t: &Tunnel, s: &IkeSettings) -> Result<IkeConfig, String> {
    let psk = read_psk(&s.psk_file, &t.name)?;
    ike_config_keyed(cfg, t, s, &psk)
}

/// [`ike_config`] with the PSK given.
pub fn ike_config_keyed(
    cfg: &Config,
    t: &Tunnel,
    s: &IkeSettings,
    psk: &[u8],
) -> Result<IkeConfig, String> {
    let mut c = IkeConfig::new(
        SocketAddr::new(t.local, dataplane::ike_punt::IKE_PORT),
        SocketAddr::new(t.remote, dataplane::ike_punt::IKE_PORT),
        psk,
    );
    if let Some(id) = &s.local_id {
        c.local_id = vecgate_ike::Identity::from_text(id);
    }
    if let Some(id) = &s.remote_id {
        c.remote_id = vecgate_ike::Identity::from_text(id);
    }
    let bad = |e: vecgate_ike::Error| format!("tunnel {}: {e}", t.name);
    if !s.ike_proposals.is_empty() {
        let v: Vec<&str> = s.ike_proposals.iter().map(String::as_str).collect();
        c.ike_proposals = IkeConfig::parse_ike_proposals(&v).map_err(bad)?;
    }
    if !s.esp_proposals.is_empty() {
        let v: Vec<&str> = s.esp_proposals.iter().map(String::as_str).collect();
        c.esp_proposals = IkeConfig::parse_esp_proposals(&v).map_err(bad)?;
    }
    let traffic = t
        .ipsec
        .as_ref()
        .map(|x| x.traffic.clone())
        .unwrap_or_default();
    c.remote_ts = traffic.iter().map(to_ike_prefix).collect();
    if c.remote_ts.is_empty() {
        c.remote_ts = vec![any_of(t.local)];
    }
    c.local_ts = s.local_traffic.iter().map(to_ike_prefix).collect();
    if c.local_ts.is_empty() {
        c.local_ts = cfg
            .interfaces
            .iter()
            .filter(|i| i.vrf == t.vrf)
            .flat_map(|i| i.addresses.iter())
            .map(|a| to_ike_prefix(&a.network()))
            .filter(|p| {
                c.remote_ts
                    .iter()
                    .any(|r| r.addr.is_ipv4() == p.addr.is_ipv4())
            })
            .collect();
    }
    if c.local_ts.is_empty() {
        c.local_ts = vec![any_of(t.local)];
    }
    c.initiate = s.initiate;
    c.dpd_interval = s.dpd_interval.map(Duration::from_secs);
    // An unanswered liveness check declares the peer dead after three
    // intervals (at least 5 s), so a restarted peer is found again soon.
    c.dpd_timeout = s
        .dpd_interval
        .map(|d| Duration::from_secs((d.saturating_mul(3)).max(5)));
    c.ike_rekey_time = s.ike_lifetime.map(Duration::from_secs);
    c.child_rekey_time = s.child_lifetime.map(Duration::from_secs);
    // Hard limits a little after the rekey times (RFC 7296 §2.8: the
    // rekey must win; the library deletes what was not rekeyed).
    c.ike_life_time = s.ike_lifetime.map(|x| Duration::from_secs(x + x / 10 + 30));
    c.child_life_time = s
        .child_lifetime
        .map(|x| Duration::from_secs(x + x / 10 + 30));
    c.reconnect_delay = s.initiate.then_some(RECONNECT_DELAY);
    Ok(c)
}

/// The SA configurations (inbound, outbound) of a negotiated child SA.
pub fn child_sa_configs(k: &ChildSaKeys) -> Result<(SaConfig, SaConfig), String> {
    let algorithm: Algorithm = k
        .algorithm
        .parse()
        .map_err(|_| format!("ESP algorithm {} is not in the dataplane", k.algorithm))?;
    let encap = k.udp_encap.then_some(UdpEncap {
        sport: k.local.port(),
        dport: k.remote.port(),
    });
    let key = |enc: &[u8], integ: &[u8]| {
        let mut v = Zeroizing::new(Vec::with_capacity(enc.len() + integ.len()));
        v.extend_from_slice(enc);
        v.extend_from_slice(integ);
        v
    };
    let sa = |spi: u32, key: Zeroizing<Vec<u8>>| SaConfig {
        spi,
        algorithm,
        key,
        // The library proposes no ESN (RFC 7296 §3.3.2, ESN transform 0).
        esn: false,
        replay_window: REPLAY_WINDOW,
        lifetime: Lifetime::default(),
        tunnel: TunnelEndpoints {
            local: k.local.ip(),
            remote: k.remote.ip(),
        },
        encap,
        df: true,
    };
    Ok((
        sa(k.spi_in, key(&k.enc_key_in, &k.integ_key_in)),
        sa(k.spi_out, key(&k.enc_key_out, &k.integ_key_out)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vecgate_ipsec::{InboundSa, OutboundSa};

    #[test]
    fn child_keys_become_sa_configs() {
        let k = ChildSaKeys {
            spi_in: 0xc000_0001,
            spi_out: 0xd000_0002,
            algorithm: "aes256-sha256".into(),
            enc_key_in: Zeroizing::new(vec![1; 32]),
            enc_key_out: Zeroizing::new(vec![2; 32]),
            integ_key_in: Zeroizing::new(vec![3; 32]),
            integ_key_out: Zeroizing::new(vec![4; 32]),
            local_ts: vec![],
            remote_ts: vec![],
            udp_encap: true,
            local: "192.0.2.1:4500".parse().unwrap(),
            remote: "198.51.100.9:31000".parse().unwrap(),
            policy: None,
        };
        let (inb, out) = child_sa_configs(&k).unwrap();
        assert_eq!(inb.spi, 0xc000_0001);
        assert_eq!(out.spi, 0xd000_0002);
        assert_eq!(inb.algorithm, Algorithm::AesCbc256HmacSha256_128);
        // Cipher key ‖ integrity key, each direction its own.
        assert_eq!(&inb.key[..32], &[1; 32]);
        assert_eq!(&inb.key[32..], &[3; 32]);
        assert_eq!(&out.key[..32], &[2; 32]);
        assert_eq!(&out.key[32..], &[4; 32]);
        assert_eq!(
            out.encap,
            Some(UdpEncap {
                sport: 4500,
                dport: 31000
            })
        );
        assert!(InboundSa::new(inb).is_ok());
        assert!(OutboundSa::new(out).is_ok());
        let mut k2 = k.clone();
        k2.algorithm = "aes128gcm16".into();
        k2.enc_key_in = Zeroizing::new(vec![5; 20]);
        k2.enc_key_out = Zeroizing::new(vec![6; 20]);
        k2.integ_key_in = Zeroizing::new(vec![]);
        k2.integ_key_out = Zeroizing::new(vec![]);
        k2.udp_encap = false;
        let (inb, out) = child_sa_configs(&k2).unwrap();
        assert_eq!(inb.algorithm, Algorithm::AesGcm128);
        assert_eq!(inb.key.len(), 20);
        assert!(out.encap.is_none());
        assert!(InboundSa::new(inb).is_ok());
        k2.algorithm = "3des-md5".into();
        assert!(child_sa_configs(&k2).is_err());
    }

    #[test]
    fn psk_file_trailing_newline_is_ignored() {
        let dir = std::env::temp_dir().join(format!("vg-psk-{}", std::process::id()));
        std::fs::write(&dir, b"s3cret\n").unwrap();
        assert!(read_psk(&dir, "t").unwrap_err().contains("chmod 600"));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(&read_psk(&dir, "t").unwrap()[..], b"s3cret");
        std::fs::write(&dir, b"\n").unwrap();
        assert!(read_psk(&dir, "t").is_err());
        let _ = std::fs::remove_file(&dir);
        assert!(read_psk(&dir, "t").unwrap_err().contains("psk_file"));
    }
}
