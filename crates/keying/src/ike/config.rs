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
    let psk = if s.uses_psk() {
        read_psk(&s.psk_file, &t.name)?
    } else {
        Zeroizing::new(Vec::new())
    };
    ike_config_keyed(cfg, t, s, &psk)
}

/// [`ike_config`] with the PSK given (certificate files still read).
pub fn ike_config_keyed(
    cfg: &Config,
    t: &Tunnel,
    s: &IkeSettings,
    psk: &[u8],
) -> Result<IkeConfig, String> {
    let auth = super::certs::auth_of(s, &t.name).map_err(|(_, e)| e)?;
    ike_config_with(cfg, t, s, psk, auth)
}

/// [`ike_config`] with the PSK and the certificate authentication given.
pub fn ike_config_with(
    cfg: &Config,
    t: &Tunnel,
    s: &IkeSettings,
    psk: &[u8],
    auth: super::certs::Auth,
) -> Result<IkeConfig, String> {
    let mut c = IkeConfig::new(
        SocketAddr::new(t.local, dataplane::punt::ike::IKE_PORT),
        SocketAddr::new(t.remote, dataplane::punt::ike::IKE_PORT),
        psk,
    );
    c.local_id = local_id_of(t, s, &auth);
    c.local_auth = auth.local;
    c.remote_auth = auth.remote;
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
    // strongSwan's defaults when not configured (swanctl.conf): IKE SAs
    // rekeyed after 4 h, child SAs after 1 h, each up to 10 % earlier at
    // random (rand_time) so SAs made together do not rekey together.
    let ike_secs = s.ike_lifetime.unwrap_or(DEFAULT_IKE_LIFETIME);
    let child_secs = s.child_lifetime.unwrap_or(DEFAULT_CHILD_LIFETIME);
    c.ike_rekey_time = Some(Duration::from_secs(ike_secs));
    c.child_rekey_time = Some(Duration::from_secs(child_secs));
    c.rekey_jitter_percent = REKEY_JITTER_PERCENT;
    // Hard limits a little after the rekey times (RFC 7296 §2.8: the
    // rekey must win; the library deletes what was not rekeyed).
    c.ike_life_time = Some(Duration::from_secs(hard_after(ike_secs)));
    c.child_life_time = Some(Duration::from_secs(hard_after(child_secs)));
    c.reconnect_delay = s.initiate.then_some(RECONNECT_DELAY);
    // What an unauthenticated IKE_SA_INIT may cost (RFC 8019 §4).
    let [ct, cts, rate, per_source, max] = s.admission().map(|(_, v)| v);
    c.cookie_threshold = ct as usize;
    c.cookie_threshold_ip = cts as usize;
    c.cookie_rate = rate;
    c.half_open_per_source = per_source as usize;
    c.max_half_open = max as usize;
    Ok(c)
}

/// Our identity: `local_id`, else our certificate's subject, else our
/// address.
pub fn local_id_of(
    t: &Tunnel,
    s: &IkeSettings,
    auth: &super::certs::Auth,
) -> vecgate_ike::Identity {
    match (&s.local_id, &auth.default_local_id) {
        (Some(id), _) => vecgate_ike::Identity::from_text(id),
        (None, Some(id)) => id.clone(),
        (None, None) => vecgate_ike::Identity::from_text(&t.local.to_string()),
    }
}

/// IKE SA rekey time when `ike_lifetime` is not set (strongSwan's
/// rekey_time for IKE SAs).
pub const DEFAULT_IKE_LIFETIME: u64 = 4 * 3600;
/// Child SA rekey time when `child_lifetime` is not set (strongSwan's).
pub const DEFAULT_CHILD_LIFETIME: u64 = 3600;
/// Rekeys happen up to this much earlier at random (strongSwan's
/// rand_time defaults to the 10 % between rekey_time and life_time).
pub const REKEY_JITTER_PERCENT: u8 = 10;
/// Child SA hard packet limit when `child_lifetime_packets` is not set:
/// well below the 32-bit sequence space (2^32 - 2^24), so the rekey (at
/// the 85 % soft limit) starts long before `seq-exhausted` could stop the
/// tunnel, with or without ESN.
pub const DEFAULT_CHILD_PACKETS: u64 = (1 << 32) - (1 << 24);

/// The hard time limit of an SA rekeyed after `secs`: 10 % and 30 s later,
/// so a rekey delayed by retransmissions still wins.
pub fn hard_after(secs: u64) -> u64 {
    secs.saturating_add(secs / 10).saturating_add(30)
}

/// The volume limits of a child SA: hard at `packets` / `bytes` (0: no
/// byte limit), soft at 85 % of each, where the IKE thread rekeys it by
/// CREATE_CHILD_SA (RFC 7296 §2.8) while the hard limit is still far.
pub fn child_volume_lifetime(packets: u64, bytes: u64) -> Lifetime {
    let some = |x: u64| (x != 0).then_some(x);
    Lifetime {
        soft_packets: vecgate_config::ipsec::soft_of(some(packets)),
        hard_packets: packets,
        soft_bytes: vecgate_config::ipsec::soft_of(some(bytes)),
        hard_bytes: bytes,
        ..Lifetime::default()
    }
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
        // As negotiated (RFC 7296 §3.3.2): ESN whenever the peer offers it.
        esn: k.esn,
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
            esn: true,
            local: "192.0.2.1:4500".parse().unwrap(),
            remote: "198.51.100.9:31000".parse().unwrap(),
            policy: None,
        };
        let (inb, out) = child_sa_configs(&k).unwrap();
        assert!(inb.esn && out.esn, "as negotiated");
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
    fn default_limits_rekey_long_before_the_sequence_space_ends() {
        let l = child_volume_lifetime(DEFAULT_CHILD_PACKETS, 0);
        // Hard below 2^32 (the last 32-bit sequence number), soft at 85 %:
        // the rekey has 15 % of the SA's packets to complete.
        assert!(l.hard_packets < 1 << 32);
        assert_eq!(
            u128::from(l.soft_packets),
            u128::from(DEFAULT_CHILD_PACKETS) * 85 / 100
        );
        assert!(l.hard_packets - l.soft_packets > 600_000_000);
        assert_eq!(
            (l.soft_bytes, l.hard_bytes),
            (0, 0),
            "no byte limit by default"
        );
        let l = child_volume_lifetime(4000, 1_000_000);
        assert_eq!((l.soft_packets, l.hard_packets), (3400, 4000));
        assert_eq!((l.soft_bytes, l.hard_bytes), (850_000, 1_000_000));
        assert_eq!((l.soft_seconds, l.hard_seconds), (0, 0), "time is IKE's");
        // The hard time limit comes after the rekey time, also at the top.
        assert_eq!(hard_after(3600), 3990);
        assert_eq!(hard_after(u64::MAX), u64::MAX);
    }

    #[test]
    fn lifetimes_default_to_strongswans() {
        let text = "[gateway]\nname = \"g\"\n\n[[interface]]\nname = \"wan\"\nhost = \"w0\"\ndriver = \"af_packet\"\naddresses = [\"192.0.2.1/24\"]\n\n[[tunnel]]\nname = \"t\"\nkind = \"ipsec\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n\n[tunnel.ike]\npsk_file = \"/nonexistent\"\n";
        let cfg = vecgate_config::parse(text).unwrap();
        let (t, s) = ike_tunnels(&cfg).next().unwrap();
        let c = ike_config_keyed(&cfg, t, s, b"psk").unwrap();
        assert_eq!(c.ike_rekey_time, Some(Duration::from_secs(4 * 3600)));
        assert_eq!(c.child_rekey_time, Some(Duration::from_secs(3600)));
        assert_eq!(c.rekey_jitter_percent, 10);
        assert_eq!(c.child_life_time, Some(Duration::from_secs(3990)));
        assert_eq!(
            c.ike_life_time,
            Some(Duration::from_secs(4 * 3600 + 1440 + 30))
        );
        let mut s2 = s.clone();
        s2.child_lifetime = Some(7);
        let c = ike_config_keyed(&cfg, t, &s2, b"psk").unwrap();
        assert_eq!(c.child_rekey_time, Some(Duration::from_secs(7)));
        assert_eq!(c.child_life_time, Some(Duration::from_secs(37)));
    }

    #[test]
    fn admission_keys_default_to_the_librarys_and_are_applied() {
        let text = "[gateway]\nname = \"g\"\n\n[[interface]]\nname = \"wan\"\nhost = \"w0\"\ndriver = \"af_packet\"\naddresses = [\"192.0.2.1/24\"]\n\n[[tunnel]]\nname = \"t\"\nkind = \"ipsec\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n\n[tunnel.ike]\npsk_file = \"/nonexistent\"\n";
        let cfg = vecgate_config::parse(text).unwrap();
        let (t, s) = ike_tunnels(&cfg).next().unwrap();
        let c = ike_config_keyed(&cfg, t, s, b"psk").unwrap();
        let lib = IkeConfig::new(c.local_addr, c.remote_addr, b"psk");
        let got = (
            c.cookie_threshold,
            c.cookie_threshold_ip,
            c.cookie_rate,
            c.half_open_per_source,
            c.max_half_open,
        );
        let want = (
            lib.cookie_threshold,
            lib.cookie_threshold_ip,
            lib.cookie_rate,
            lib.half_open_per_source,
            lib.max_half_open,
        );
        assert_eq!(got, want);
        assert_eq!(got, (16, 3, 20, 5, 64));
        let text = text.replace(
            "/nonexistent\"\n",
            "/nonexistent\"\ncookie_threshold = 8\ncookie_threshold_per_source = 1\ncookie_rate = 100\nhalf_open_per_source = 2\nmax_half_open = 256\n",
        );
        let cfg = vecgate_config::parse(&text).unwrap();
        let (t, s) = ike_tunnels(&cfg).next().unwrap();
        let c = ike_config_keyed(&cfg, t, s, b"psk").unwrap();
        assert_eq!(c.cookie_threshold, 8);
        assert_eq!(c.cookie_threshold_ip, 1);
        assert_eq!(c.cookie_rate, 100);
        assert_eq!(c.half_open_per_source, 2);
        assert_eq!(c.max_half_open, 256);
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
