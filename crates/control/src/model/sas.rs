//! IPsec SAs (`/sas`, `/tunnels/{name}/switch`): the request shapes,
//! their keying fields and key material that is never written back.

use super::DropCount;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The keying fields of a static-SA request, whichever shape it came in.
#[derive(Clone, Copy, Debug)]
pub struct SaKeying<'a> {
    pub spi: u32,
    pub algorithm: &'a str,
    pub key: Option<&'a HexKey>,
    pub key_file: Option<&'a str>,
    pub esn: Option<bool>,
    /// Bytes, packets, seconds.
    pub lifetimes: [Option<u64>; 3],
}

/// A static-SA request shape: its own fields, then the keying fields all
/// of them share (written once here), and [`SaKeying`] to read those.
macro_rules! sa_request {
    (
        $(#[$m:meta])*
        pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident: $t:ty,)* }
    ) => {
        $(#[$m])*
        #[derive(Clone, Debug, Deserialize, ToSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($(#[$fm])* pub $f: $t,)*
            /// SPI, as a number or hex text ("0x1001").
            #[schema(value_type = String, example = "0x1001")]
            pub spi: SpiText,
            /// aes128gcm16, aes256gcm16, aes128-sha1, aes256-sha256 or
            /// chacha20poly1305.
            pub algorithm: String,
            /// Key in hex (key ‖ salt for GCM / ChaCha, key ‖ integrity key for CBC).
            #[serde(default, skip_serializing_if = "never_written", serialize_with = "redacted")]
            #[schema(value_type = Option<String>, format = Password)]
            pub key: Option<HexKey>,
            /// Path of a hex key file on the gateway.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub key_file: Option<String>,
            /// 64-bit extended sequence numbers (RFC 4303 §2.2.1); default true.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub esn: Option<bool>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub lifetime_bytes: Option<u64>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub lifetime_packets: Option<u64>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub lifetime_seconds: Option<u64>,
        }

        impl $name {
            /// The shared keying fields.
            pub fn keying(&self) -> SaKeying<'_> {
                SaKeying {
                    spi: self.spi.0,
                    algorithm: &self.algorithm,
                    key: self.key.as_ref(),
                    key_file: self.key_file.as_deref(),
                    esn: self.esn,
                    lifetimes: [
                        self.lifetime_bytes,
                        self.lifetime_packets,
                        self.lifetime_seconds,
                    ],
                }
            }
        }
    };
}
sa_request! {
    /// One static SA of a new ipsec tunnel (`[[tunnel.sa]]`). The key comes
    /// from `key_file` (a hex file on the gateway) or inline as `key` (hex),
    /// exactly as `POST /sas` takes it; never echoed back (serialized, as a
    /// gateway's tunnel is for its HA peer, it names its key file only).
    #[derive(Serialize)]
    pub struct TunnelSaSpec {
        /// "in" or "out".
        pub direction: String,
        /// Anti-replay window of an inbound SA; default 1024 (0 = off).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(minimum = 0, maximum = 65536)]
        pub replay_window: Option<u32>,
    }
}

/// One IPsec security association, without key material.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SaInfo {
    /// SPI in hex.
    pub spi: String,
    pub tunnel: String,
    /// "inbound" or "outbound".
    pub direction: String,
    /// e.g. "aes-gcm-128".
    pub cipher: String,
    /// The code that runs the cipher: "aws-lc", or intel-ipsec-mb's
    /// multi-buffer engine with its instruction set for AES-CBC + HMAC
    /// (e.g. "ipsec-mb avx2+sha-ni").
    #[serde(default)]
    pub engine: String,
    /// 64-bit extended sequence numbers (RFC 4303 §2.2.1).
    #[serde(default)]
    pub esn: bool,
    pub packets: u64,
    pub bytes: u64,
    /// Packets refused on this SA (all reasons).
    #[serde(default)]
    pub drops: u64,
    /// Refusals by reason (e.g. "replay", "integrity"); only reasons seen.
    #[serde(default)]
    pub drop_reasons: Vec<DropCount>,
}

/// A request's inline key is never written out (a serialized request
/// names its key file only).
fn never_written(_: &Option<HexKey>) -> bool {
    true
}

/// What would stand for a key if one were written: nothing.
fn redacted<S: serde::Serializer>(_: &Option<HexKey>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_none()
}

/// Key material in a request: hex text, zeroized when dropped, never
/// printed (its `Debug` is redacted) and never serialized back.
#[derive(Clone, Default)]
pub struct HexKey(pub zeroize::Zeroizing<String>);

impl std::fmt::Debug for HexKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HexKey(<redacted>)")
    }
}

impl<'de> Deserialize<'de> for HexKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| HexKey(zeroize::Zeroizing::new(s)))
    }
}

/// A `[[tunnel.sa]]` as a request names it: by its key file, never its
/// key; the replay window for an inbound SA only.
impl From<&vecgate_config::StaticSa> for TunnelSaSpec {
    fn from(s: &vecgate_config::StaticSa) -> Self {
        let inbound = s.direction == vecgate_config::SaDirection::In;
        TunnelSaSpec {
            direction: s.direction.as_str().to_owned(),
            replay_window: inbound.then_some(s.replay_window),
            spi: SpiText(s.spi),
            algorithm: s.algorithm.as_str().to_owned(),
            key: None,
            key_file: Some(s.key_file.display().to_string()),
            esn: Some(s.esn),
            lifetime_bytes: s.lifetime_bytes,
            lifetime_packets: s.lifetime_packets,
            lifetime_seconds: s.lifetime_seconds,
        }
    }
}

sa_request! {
    /// POST /sas: a static inbound SA for an existing ipsec tunnel. The key
    /// comes from `key_file` (a hex file on the gateway, as in the TOML) or
    /// inline as `key` (hex); exactly one of them. Never echoed back.
    pub struct SaSpec {
        /// The ipsec tunnel.
        pub tunnel: String,
        /// Anti-replay window; default 1024 (0 = off).
        #[serde(default)]
        #[schema(minimum = 0, maximum = 65536)]
        pub replay_window: Option<u32>,
    }
}

sa_request! {
    /// POST /tunnels/{name}/switch: the new outbound SA of an ipsec tunnel
    /// (make-before-break: the peer must already have the matching inbound
    /// SA; our inbound SAs are untouched). Key as in [`SaSpec`].
    pub struct SaSwitch {}
}

/// An SPI in a request: a JSON number or text ("0x1001" or "4097");
/// written as a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpiText(pub u32);

impl Serialize for SpiText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.0)
    }
}

impl<'de> Deserialize<'de> for SpiText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        let v = match Raw::deserialize(d)? {
            Raw::N(n) => u32::try_from(n).ok(),
            Raw::S(s) => parse_spi(&s),
        };
        v.map(SpiText)
            .ok_or_else(|| serde::de::Error::custom("expected an SPI (a 32-bit number or hex)"))
    }
}

/// Parses "0x1001" / "4097".
pub fn parse_spi(s: &str) -> Option<u32> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Answer to POST /tunnels/{name}/switch.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SaSwitched {
    pub tunnel: String,
    /// The outbound SPI before (hex).
    pub old_spi: String,
    /// The outbound SPI now (hex).
    pub new_spi: String,
}
