//! Tunnels (`/tunnels`).

use super::{PortTraffic, TunnelSaSpec};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One tunnel, as configured.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct TunnelInfo {
    pub name: String,
    /// gre, nvgre, vxlan or ipsec.
    pub kind: String,
    pub local: String,
    pub remote: String,
    pub key: Option<u32>,
    pub vrf: String,
    pub underlay_vrf: String,
    pub mtu: Option<u32>,
    /// The gateway's addresses on the overlay segment (L2 tunnels).
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Traffic of the tunnel's virtual port since the tunnel was created
    /// (all workers): packets handed to the tunnel / received from it,
    /// inner bytes, and packets the tunnel could not send.
    #[serde(flatten)]
    pub traffic: PortTraffic,
}

/// POST /tunnels: the `[[tunnel]]` keys of the configuration file, in
/// the configuration's own request shape (one list of tunnel keys, in
/// `vecgate_config`). A `kind = "ipsec"` tunnel also takes the file's
/// IPsec keys: `nat_t`, `traffic`, and either static SAs (`sa`, as
/// `[[tunnel.sa]]`, here with an optional inline key) or IKEv2 (`ike`, as
/// `[tunnel.ike]`).
pub type TunnelSpec = vecgate_config::TunnelSpec<TunnelSaSpec>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A gateway's tunnel as a request (what an HA peer is sent) parses
    /// back into the same tunnel, names its key files and never a key.
    #[test]
    fn a_tunnel_spec_round_trips_through_json_without_keys() {
        let cfg = vecgate_config::parse(
            r#"
[gateway]
name = "t"

[[interface]]
name = "wan0"
host = "wan0"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[[tunnel]]
name = "e0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.7"
traffic = ["10.2.0.0/24"]

[[tunnel.sa]]
direction = "out"
spi = 0x1001
algorithm = "aes128gcm16"
key_file = "/k/1001.hex"
esn = false

[[tunnel.sa]]
direction = "in"
spi = 0x2001
algorithm = "aes256-sha256"
key_file = "/k/2001.hex"
replay_window = 128
lifetime_bytes = 1000000
"#,
        )
        .unwrap();
        let t = &cfg.tunnels[0];
        let text = serde_json::to_value(TunnelSpec::from(t))
            .unwrap()
            .to_string();
        assert!(!text.contains("\"key\":"), "{text}");
        let back: TunnelSpec = serde_json::from_str(&text).unwrap();
        let sas: Vec<(String, u32, Option<String>, Option<bool>)> = back
            .sa
            .iter()
            .flatten()
            .map(|s| (s.direction.clone(), s.spi.0, s.key_file.clone(), s.esn))
            .collect();
        assert_eq!(
            sas,
            [
                (
                    "out".into(),
                    0x1001,
                    Some("/k/1001.hex".into()),
                    Some(false)
                ),
                ("in".into(), 0x2001, Some("/k/2001.hex".into()), Some(true)),
            ]
        );
        let sa = &back.sa.as_ref().unwrap()[1];
        assert_eq!(
            (sa.replay_window, sa.lifetime_bytes),
            (Some(128), Some(1_000_000))
        );
        let mut tunnel = back.to_tunnel().unwrap();
        tunnel.ipsec.as_mut().unwrap().sas = t.ipsec.as_ref().unwrap().sas.clone();
        assert_eq!(&tunnel, t);
    }
}
