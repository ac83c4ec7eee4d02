//! SA keys and configurations from the configuration file: a key file is
//! read as hex (text and bytes zeroized on drop) and checked against the
//! algorithm's length, then a configured SA becomes an [`SaConfig`].

use vecgate_config::ipsec::{parse_key_hex, soft_of};
use vecgate_config::secret::{read_secret_file, MAX_SECRET_LEN};
use vecgate_config::{StaticSa, Tunnel};
use zeroize::Zeroizing;

use crate::{Algorithm, Lifetime, SaConfig, TunnelEndpoints, UdpEncap};

/// Reads a hex key file (a private regular file, see
/// [`vecgate_config::secret`]); the text and the bytes are zeroized on drop.
pub fn read_key(sa: &StaticSa, tunnel: &str) -> Result<Zeroizing<Vec<u8>>, String> {
    let text = read_secret_file(&sa.key_file, MAX_SECRET_LEN)
        .map_err(|e| format!("{}: {e}", key_what(sa, tunnel)))?;
    key_from_text(sa, tunnel, &text)
}

fn key_what(sa: &StaticSa, tunnel: &str) -> String {
    format!(
        "tunnel {tunnel} sa {:#x} key_file {}",
        sa.spi,
        sa.key_file.display()
    )
}

/// The key held by the text of `sa`'s key file (hex), checked for the
/// algorithm's length.
pub fn key_from_text(
    sa: &StaticSa,
    tunnel: &str,
    text: &[u8],
) -> Result<Zeroizing<Vec<u8>>, String> {
    let what = || key_what(sa, tunnel);
    let text = std::str::from_utf8(text)
        .map_err(|_| format!("{}: the key file must hold hex digits only", what()))?;
    let key = Zeroizing::new(parse_key_hex(text).map_err(|e| format!("{}: {e}", what()))?);
    let want = sa.algorithm.key_len();
    if key.len() != want {
        return Err(format!(
            "{}: {} bytes, {} needs {want} (key ‖ salt for GCM/ChaCha, key ‖ integrity key for CBC)",
            what(),
            key.len(),
            sa.algorithm
        ));
    }
    Ok(key)
}

/// The library's SA configuration for a configured SA of tunnel `t`.
pub fn sa_config(t: &Tunnel, sa: &StaticSa) -> Result<SaConfig, String> {
    sa_config_keyed(t, sa, read_key(sa, &t.name)?)
}

/// [`sa_config`] with the key given (checked for the algorithm's length).
pub fn sa_config_keyed(
    t: &Tunnel,
    sa: &StaticSa,
    key: Zeroizing<Vec<u8>>,
) -> Result<SaConfig, String> {
    let want = sa.algorithm.key_len();
    if key.len() != want {
        return Err(format!(
            "tunnel {} sa {:#x}: key is {} bytes, {} needs {want} (key ‖ salt for GCM/ChaCha, key ‖ integrity key for CBC)",
            t.name,
            sa.spi,
            key.len(),
            sa.algorithm
        ));
    }
    let x = t.ipsec.as_ref();
    let algorithm: Algorithm = sa
        .algorithm
        .as_str()
        .parse()
        .map_err(|_| format!("tunnel {}: algorithm {}", t.name, sa.algorithm))?;
    Ok(SaConfig {
        spi: sa.spi,
        algorithm,
        key,
        esn: sa.esn,
        replay_window: sa.replay_window,
        lifetime: Lifetime {
            soft_bytes: soft_of(sa.lifetime_bytes),
            hard_bytes: sa.lifetime_bytes.unwrap_or(0),
            soft_packets: soft_of(sa.lifetime_packets),
            hard_packets: sa.lifetime_packets.unwrap_or(0),
            soft_seconds: soft_of(sa.lifetime_seconds),
            hard_seconds: sa.lifetime_seconds.unwrap_or(0),
        },
        tunnel: TunnelEndpoints {
            local: t.local,
            remote: t.remote,
        },
        encap: x.is_some_and(|x| x.nat_t).then_some(UdpEncap {
            sport: wire::esp::NAT_T_PORT,
            dport: wire::esp::NAT_T_PORT,
        }),
        df: true,
    })
}
