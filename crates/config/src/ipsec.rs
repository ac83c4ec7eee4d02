//! `kind = "ipsec"` tunnels: statically keyed SAs (RFC 4303 tunnel mode, as
//! `ip xfrm state` would set them) and the tunnel's policy.
//!
//! ```toml
//! [[tunnel]]
//! name = "to-b"
//! kind = "ipsec"
//! local = "192.0.2.1"
//! remote = "192.0.2.2"
//! vrf = "blue"
//! nat_t = true                  # ESP in UDP 4500 (RFC 3948); default false
//! traffic = ["10.2.0.0/24"]     # remote selectors (see below)
//!
//! [[tunnel.sa]]
//! direction = "out"             # exactly one "out", one or more "in"
//! spi = 0x1001                  # 256..=0xffffffff (RFC 4303 §2.1)
//! algorithm = "aes128gcm16"     # aes128gcm16 | aes256gcm16 | aes128-sha1 | aes256-sha256 | chacha20poly1305
//! key_file = "/etc/vecgate/a-to-b.hex"
//! esn = true                    # default true (RFC 4303 §2.2.1)
//! replay_window = 1024          # inbound only; 0 = off; default 1024
//! lifetime_bytes = 1000000000   # hard limits; soft = 85 % of hard
//! ```
//!
//! Keys are never written in this file: `key_file` holds the key as hex
//! (whitespace ignored), read when the gateway starts and zeroized after
//! use. For AES-GCM and ChaCha20-Poly1305 the key is cipher key ‖ 4-byte
//! salt (RFC 4106 §8.1, RFC 7634 §2); for CBC+HMAC cipher key ‖ integrity
//! key.
//!
//! Instead of static SAs, a tunnel may be keyed by IKEv2 (RFC 7296) with a
//! pre-shared key: a `[tunnel.ike]` table (never together with
//! `[[tunnel.sa]]`):
//!
//! ```toml
//! [tunnel.ike]
//! psk_file = "/etc/vecgate/to-b.psk"   # the PSK itself never in this file
//! local_id = "192.0.2.1"                # ip, fqdn or keyid:...; default: local
//! remote_id = "gw-b.example.net"        # default: remote
//! ike_proposals = ["aes256-sha256-modp2048"]   # strongSwan syntax
//! esp_proposals = ["aes128gcm16"]
//! initiate = true                       # false: wait for the peer
//! dpd_interval = 30                     # seconds; liveness checks
//! ike_lifetime = 14400                  # seconds until the IKE SA is rekeyed
//! child_lifetime = 3600                 # seconds until a child SA is rekeyed
//! child_lifetime_packets = 4278190080   # packets until it stops (rekey at 85 %)
//! child_lifetime_bytes = 0              # bytes likewise; default: no byte limit
//! local_traffic = ["10.1.0.0/24"]       # our selectors; default: any
//! # Who may cost us an IKE_SA_INIT (RFC 7296 §2.6, RFC 8019 §4):
//! cookie_threshold = 16                 # half-open SAs before COOKIEs
//! cookie_threshold_per_source = 3       # the same, from one address
//! cookie_rate = 20                      # INITs a second before COOKIEs
//! half_open_per_source = 5              # half-open SAs one address may hold
//! max_half_open = 64                    # half-open SAs held at most
//! ```
//!
//! With certificates instead of a PSK (RFC 7296 §2.15 signatures, RFC 7427):
//!
//! ```toml
//! [tunnel.ike]
//! auth = "pubkey"                       # "psk" (default) | "pubkey"
//! remote_auth = "pubkey"                # how the peer must prove it; default: as auth
//! cert_file = "/etc/vecgate/gw-a.pem"   # ours, then its intermediates (PEM)
//! key_file = "/etc/vecgate/gw-a.key"    # its private key (PKCS#8, RSA or EC PEM), chmod 600
//! ca_files = ["/etc/vecgate/root.pem"]  # anchors the peer's chain must reach
//! crl_files = ["/etc/vecgate/root.crl"] # revocation lists (PEM or DER)
//! remote_cert_file = "/etc/vecgate/gw-b.pem"  # the peer's own certificate, if it sends none
//! local_id = "gw-a.example.net"         # must be in our certificate; default: its subject
//! remote_id = "C=CH, O=Example, CN=*"   # a DN (wildcards per attribute), FQDN, e-mail or IP
//! ```
//!
//! `traffic` then becomes the remote traffic selectors proposed to the peer.
//!
//! The SPD: `traffic` lists the remote prefixes. Outbound, each is routed
//! into the tunnel (in the tunnel's VRF, as if written as `[[route]] via =
//! "<tunnel>"`; more routes may be added that way). Inbound, a decrypted
//! packet whose source is outside every `traffic` prefix is dropped
//! ("policy-mismatch", RFC 4301 §5.2). An empty `traffic` accepts any
//! source and routes nothing by itself.

use crate::model::Prefix;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Default anti-replay window (packets).
pub const DEFAULT_REPLAY_WINDOW: u32 = 1024;
/// Largest anti-replay window the dataplane supports.
pub const MAX_REPLAY_WINDOW: u32 = 1 << 16;
/// Soft lifetime as a percentage of the hard one (rekey time, RFC 4301
/// §4.4.2.1 leaves the margin to the implementation).
pub const SOFT_LIFETIME_PERCENT: u64 = 85;

/// The IPsec part of a `[[tunnel]]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ipsec {
    /// UDP encapsulation on port 4500 (RFC 3948).
    #[serde(default)]
    pub nat_t: bool,
    /// Remote traffic selectors (routed in, checked on decryption).
    #[serde(default)]
    pub traffic: Vec<Prefix>,
    /// `[[tunnel.sa]]`, in file order.
    #[serde(default)]
    pub sas: Vec<StaticSa>,
    /// `[tunnel.ike]`: keys negotiated by IKEv2 instead of `sas`.
    #[serde(default)]
    pub ike: Option<IkeSettings>,
}

/// How one side of an IKE SA proves its identity (RFC 7296 §2.15).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum IkeAuth {
    /// The pre-shared key of `psk_file`.
    #[default]
    Psk,
    /// A signature by the key of a certificate (RFC 7427; classic RSA and
    /// ECDSA methods for peers without it).
    Pubkey,
}

impl IkeAuth {
    /// The keyword of the TOML and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            IkeAuth::Psk => "psk",
            IkeAuth::Pubkey => "pubkey",
        }
    }
}

impl FromStr for IkeAuth {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "psk" => Ok(IkeAuth::Psk),
            "pubkey" => Ok(IkeAuth::Pubkey),
            _ => Err(format!(
                "\"{s}\" is not an authentication method (expected \"psk\" or \"pubkey\")"
            )),
        }
    }
}

impl fmt::Display for IkeAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[tunnel.ike]`: IKEv2 with a pre-shared key or certificates (RFC 7296 §2.15). The one
/// definition of a tunnel's IKE settings: the TOML reader fills it, and
/// `POST /tunnels` takes it as its `ike` object (schema `IkeSpec`, with
/// the `schema` feature), so a new setting is added here once. In JSON an
/// optional field may also be `null` (= left out).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema), schema(as = IkeSpec))]
#[serde(deny_unknown_fields)]
pub struct IkeSettings {
    /// How we authenticate: `psk` (default) or `pubkey`.
    #[serde(default, deserialize_with = "null_is_default")]
    #[cfg_attr(feature = "schema", schema(nullable))]
    pub auth: IkeAuth,
    /// How the peer must authenticate; default: as `auth`.
    #[serde(default)]
    pub remote_auth: Option<IkeAuth>,
    /// File on the gateway holding the PSK (read at start, zeroized; never
    /// logged); never the PSK itself. Required when either side uses
    /// `psk`.
    #[serde(default, deserialize_with = "null_is_default")]
    #[cfg_attr(feature = "schema", schema(value_type = String, nullable))]
    pub psk_file: PathBuf,
    /// Our certificate (PEM; intermediates may follow it), sent in CERT
    /// payloads. Required with `auth = "pubkey"`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schema(value_type = Option<String>))]
    pub cert_file: Option<PathBuf>,
    /// The certificate's private key (a private file, like `psk_file`).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schema(value_type = Option<String>))]
    pub key_file: Option<PathBuf>,
    /// Trust anchors (PEM or DER CA certificates) the peer's chain must
    /// reach with `remote_auth = "pubkey"`.
    #[serde(default, deserialize_with = "null_is_default")]
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>, nullable))]
    pub ca_files: Vec<PathBuf>,
    /// Certificate revocation lists (PEM or DER), re-read on reload.
    #[serde(default, deserialize_with = "null_is_default")]
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>, nullable))]
    pub crl_files: Vec<PathBuf>,
    /// The peer's own certificate, trusted as is (for a peer that sends
    /// none, or without a CA).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schema(value_type = Option<String>))]
    pub remote_cert_file: Option<PathBuf>,
    /// Our identity: an address, an FQDN or `keyid:...`; default: `local`.
    #[serde(default)]
    pub local_id: Option<String>,
    /// The identity the peer must present; default: `remote`.
    #[serde(default)]
    pub remote_id: Option<String>,
    /// IKE SA proposals in strongSwan syntax (`aes256-sha256-modp2048`);
    /// empty: the library's default.
    #[serde(default, deserialize_with = "null_is_default")]
    #[cfg_attr(feature = "schema", schema(nullable))]
    pub ike_proposals: Vec<String>,
    /// Child SA (ESP) proposals (`aes128gcm16`); empty: the library's
    /// default.
    #[serde(default, deserialize_with = "null_is_default")]
    #[cfg_attr(feature = "schema", schema(nullable))]
    pub esp_proposals: Vec<String>,
    /// Start the negotiation (and re-establish it) instead of waiting for
    /// the peer; default true.
    #[serde(default = "yes", deserialize_with = "null_is_yes")]
    #[cfg_attr(feature = "schema", schema(nullable))]
    pub initiate: bool,
    /// Seconds of silence before a liveness check (RFC 7296 §2.4).
    #[serde(default)]
    pub dpd_interval: Option<u64>,
    /// Seconds until the IKE SA is rekeyed (default 14400, less up to
    /// 10 % at random, as strongSwan).
    #[serde(default)]
    pub ike_lifetime: Option<u64>,
    /// Seconds until each child SA is rekeyed (default 3600, less up to
    /// 10 % at random, as strongSwan).
    #[serde(default)]
    pub child_lifetime: Option<u64>,
    /// Packets (either direction) after which a child SA stops (its rekey
    /// starts at 85 % of them). Default: below the 32-bit sequence space.
    #[serde(default)]
    pub child_lifetime_packets: Option<u64>,
    /// Bytes (either direction) after which a child SA stops (its rekey
    /// starts at 85 % of them). Default: no byte limit.
    #[serde(default)]
    pub child_lifetime_bytes: Option<u64>,
    /// Our traffic selectors; empty: the networks of the tunnel VRF's
    /// interfaces, else any address of the family.
    #[serde(default, deserialize_with = "null_is_default")]
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>, nullable))]
    pub local_traffic: Vec<Prefix>,
    /// Half-open IKE SAs above which an IKE_SA_INIT must carry a COOKIE
    /// (RFC 7296 §2.6); default [`ADMISSION_DEFAULTS`] (16). 0: always.
    #[serde(default)]
    pub cookie_threshold: Option<u32>,
    /// The same for the half-open SAs of one source address (RFC 8019
    /// §4.1); default 3.
    #[serde(default)]
    pub cookie_threshold_per_source: Option<u32>,
    /// IKE_SA_INIT requests a second above which every INIT must carry a
    /// COOKIE (RFC 8019 §4.1); default 20. 0: always.
    #[serde(default)]
    pub cookie_rate: Option<u32>,
    /// Half-open IKE SAs one source address may hold, cookie or not
    /// (RFC 8019 §4.3); default 5.
    #[serde(default)]
    pub half_open_per_source: Option<u32>,
    /// Half-open IKE SAs held at most, apart from the established ones;
    /// default 64.
    #[serde(default)]
    pub max_half_open: Option<u32>,
}

/// The `[tunnel.ike]` keys that bound what an unauthenticated IKE_SA_INIT
/// may cost (RFC 7296 §2.6, RFC 8019 §4), with their defaults (those of
/// the IKE library's `IkeConfig::new`) and largest values.
pub const ADMISSION_DEFAULTS: [(&str, u32, u32); 5] = [
    ("cookie_threshold", 16, MAX_HALF_OPEN_LIMIT),
    ("cookie_threshold_per_source", 3, MAX_HALF_OPEN_LIMIT),
    ("cookie_rate", 20, 1_000_000),
    ("half_open_per_source", 5, MAX_HALF_OPEN_LIMIT),
    ("max_half_open", 64, MAX_HALF_OPEN_LIMIT),
];

/// The admission limits a tunnel's IKE runs with (`GET /ike`): the
/// values in force of the `[tunnel.ike]` keys of the same names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct IkeAdmission {
    /// Half-open SAs from which INITs must carry a COOKIE.
    pub cookie_threshold: u64,
    /// The same, counted per source address.
    pub cookie_threshold_per_source: u64,
    /// INITs a second above which every INIT must carry a COOKIE.
    pub cookie_rate: u64,
    /// Half-open SAs one source address may hold.
    pub half_open_per_source: u64,
    /// Half-open SAs held at most.
    pub max_half_open: u64,
}

/// Largest `max_half_open` (each half-open SA holds keys and two messages,
/// a few KiB).
pub const MAX_HALF_OPEN_LIMIT: u32 = 4096;

impl IkeSettings {
    /// How the peer must authenticate (`remote_auth`, else `auth`).
    pub fn peer_auth(&self) -> IkeAuth {
        self.remote_auth.unwrap_or(self.auth)
    }

    /// Whether either side authenticates with the PSK of `psk_file`.
    pub fn uses_psk(&self) -> bool {
        self.auth == IkeAuth::Psk || self.peer_auth() == IkeAuth::Psk
    }

    /// The admission keys ([`ADMISSION_DEFAULTS`]) as set, in that order.
    pub fn admission_keys(&self) -> [(&'static str, Option<u32>); 5] {
        let set = [
            self.cookie_threshold,
            self.cookie_threshold_per_source,
            self.cookie_rate,
            self.half_open_per_source,
            self.max_half_open,
        ];
        std::array::from_fn(|i| (ADMISSION_DEFAULTS[i].0, set[i]))
    }

    /// The admission keys' values in force: as set, else the default.
    pub fn admission(&self) -> [(&'static str, u32); 5] {
        let set = self.admission_keys();
        std::array::from_fn(|i| (set[i].0, set[i].1.unwrap_or(ADMISSION_DEFAULTS[i].1)))
    }
}

/// An optional list given as `null` in JSON is an empty one.
fn null_is_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// `initiate: null` in JSON is the default, true.
fn null_is_yes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Option::<bool>::deserialize(d).map(|b| b.unwrap_or(true))
}

/// Keywords of IKE/ESP proposal strings (strongSwan syntax) that the IKEv2
/// implementation understands; validation checks each `-`-separated token.
pub const PROPOSAL_TOKENS: &[&str] = &[
    "aes128",
    "aes",
    "aes256",
    "aes128gcm16",
    "aes128gcm128",
    "aes128gcm",
    "aes256gcm16",
    "aes256gcm128",
    "aes256gcm",
    "modp2048",
    "ecp256",
    "x25519",
    "curve25519",
    "sha1",
    "sha",
    "sha256",
    "sha2_256",
    "sha384",
    "sha2_384",
    "sha512",
    "sha2_512",
    "prfsha1",
    "prfsha256",
    "prfsha384",
    "prfsha512",
    "esn",
    "noesn",
];

impl Ipsec {
    /// The outbound SA (validation ensures there is exactly one).
    pub fn outbound(&self) -> Option<&StaticSa> {
        self.sas.iter().find(|s| s.direction == SaDirection::Out)
    }

    /// The inbound SAs.
    pub fn inbound(&self) -> impl Iterator<Item = &StaticSa> {
        self.sas.iter().filter(|s| s.direction == SaDirection::In)
    }
}

/// Which way an SA protects traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SaDirection {
    In,
    Out,
}

impl SaDirection {
    pub fn as_str(self) -> &'static str {
        match self {
            SaDirection::In => "in",
            SaDirection::Out => "out",
        }
    }
}

impl FromStr for SaDirection {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "in" => Ok(SaDirection::In),
            "out" => Ok(SaDirection::Out),
            _ => Err(format!("unknown direction \"{s}\" (expected in or out)")),
        }
    }
}

/// ESP transforms (strongSwan's proposal keywords).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EspAlgorithm {
    /// AES-128-GCM, 16-byte ICV (RFC 4106).
    #[serde(rename = "aes128gcm16")]
    Aes128Gcm16,
    /// AES-256-GCM, 16-byte ICV (RFC 4106).
    #[serde(rename = "aes256gcm16")]
    Aes256Gcm16,
    /// AES-128-CBC (RFC 3602) + HMAC-SHA1-96 (RFC 2404).
    #[serde(rename = "aes128-sha1")]
    Aes128Sha1,
    /// AES-256-CBC (RFC 3602) + HMAC-SHA-256-128 (RFC 4868).
    #[serde(rename = "aes256-sha256")]
    Aes256Sha256,
    /// ChaCha20-Poly1305 (RFC 7634).
    #[serde(rename = "chacha20poly1305")]
    Chacha20Poly1305,
}

impl EspAlgorithm {
    pub const ALL: [EspAlgorithm; 5] = [
        EspAlgorithm::Aes128Gcm16,
        EspAlgorithm::Aes256Gcm16,
        EspAlgorithm::Aes128Sha1,
        EspAlgorithm::Aes256Sha256,
        EspAlgorithm::Chacha20Poly1305,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EspAlgorithm::Aes128Gcm16 => "aes128gcm16",
            EspAlgorithm::Aes256Gcm16 => "aes256gcm16",
            EspAlgorithm::Aes128Sha1 => "aes128-sha1",
            EspAlgorithm::Aes256Sha256 => "aes256-sha256",
            EspAlgorithm::Chacha20Poly1305 => "chacha20poly1305",
        }
    }

    /// Bytes the key file must hold.
    pub fn key_len(self) -> usize {
        match self {
            EspAlgorithm::Aes128Gcm16 => 16 + 4,
            EspAlgorithm::Aes256Gcm16 | EspAlgorithm::Chacha20Poly1305 => 32 + 4,
            EspAlgorithm::Aes128Sha1 => 16 + 20,
            EspAlgorithm::Aes256Sha256 => 32 + 32,
        }
    }
}

impl fmt::Display for EspAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EspAlgorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        EspAlgorithm::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown algorithm \"{s}\" (expected aes128gcm16, aes256gcm16, aes128-sha1, aes256-sha256 or chacha20poly1305)"
                )
            })
    }
}

/// `[[tunnel.sa]]`: one statically keyed SA.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticSa {
    pub direction: SaDirection,
    pub spi: u32,
    pub algorithm: EspAlgorithm,
    /// Hex key file (never the key itself).
    pub key_file: PathBuf,
    /// 64-bit extended sequence numbers (RFC 4303 §2.2.1).
    #[serde(default = "yes")]
    pub esn: bool,
    /// Anti-replay window (inbound; 0 = off).
    #[serde(default = "default_window")]
    pub replay_window: u32,
    /// Hard lifetimes; `None` = unlimited.
    #[serde(default)]
    pub lifetime_bytes: Option<u64>,
    #[serde(default)]
    pub lifetime_packets: Option<u64>,
    #[serde(default)]
    pub lifetime_seconds: Option<u64>,
}

fn yes() -> bool {
    true
}

fn default_window() -> u32 {
    DEFAULT_REPLAY_WINDOW
}

/// The soft limit for a hard limit (0 = none).
pub fn soft_of(hard: Option<u64>) -> u64 {
    hard.map_or(0, |h| {
        h / 100 * SOFT_LIFETIME_PERCENT + h % 100 * SOFT_LIFETIME_PERCENT / 100
    })
}

/// Parses a hex key file's content: hex digits, whitespace ignored, an
/// optional `0x` prefix. The caller zeroizes the result.
pub fn parse_key_hex(text: &str) -> Result<Vec<u8>, String> {
    let t = text.trim();
    let t = t.strip_prefix("0x").unwrap_or(t);
    // The digits are key material too.
    let digits: zeroize::Zeroizing<Vec<u8>> = t
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .map(|b| match b {
            b'0'..=b'9' => Ok(b - b'0'),
            b'a'..=b'f' => Ok(b - b'a' + 10),
            b'A'..=b'F' => Ok(b - b'A' + 10),
            _ => Err("the key file must hold hex digits only".to_string()),
        })
        .collect::<Result<Vec<u8>, _>>()
        .map(zeroize::Zeroizing::new)?;
    if !digits.len().is_multiple_of(2) {
        return Err("the key file holds an odd number of hex digits".to_string());
    }
    Ok(digits.chunks(2).map(|d| d[0] << 4 | d[1]).collect())
}

/// Emits the tunnel's IPsec keys and `[[tunnel.sa]]` tables (the latter
/// last: TOML keys after them would belong to the SA table).
pub(crate) fn emit(x: &Ipsec, s: &mut String, quote: impl Fn(&str) -> String) {
    use std::fmt::Write;
    if x.nat_t {
        let _ = writeln!(s, "nat_t = true");
    }
    if !x.traffic.is_empty() {
        let t: Vec<String> = x.traffic.iter().map(|p| quote(&p.to_string())).collect();
        let _ = writeln!(s, "traffic = [{}]", t.join(", "));
    }
    if let Some(k) = &x.ike {
        let list = |v: &[String]| v.iter().map(|p| quote(p)).collect::<Vec<_>>().join(", ");
        let _ = writeln!(s, "\n[tunnel.ike]");
        if k.auth != IkeAuth::Psk {
            let _ = writeln!(s, "auth = {}", quote(k.auth.as_str()));
        }
        if let Some(a) = k.remote_auth {
            let _ = writeln!(s, "remote_auth = {}", quote(a.as_str()));
        }
        let path = |p: &std::path::Path| quote(&p.to_string_lossy());
        if !k.psk_file.as_os_str().is_empty() {
            let _ = writeln!(s, "psk_file = {}", path(&k.psk_file));
        }
        for (key, v) in [
            ("cert_file", &k.cert_file),
            ("key_file", &k.key_file),
            ("remote_cert_file", &k.remote_cert_file),
        ] {
            if let Some(v) = v {
                let _ = writeln!(s, "{key} = {}", path(v));
            }
        }
        for (key, v) in [("ca_files", &k.ca_files), ("crl_files", &k.crl_files)] {
            if !v.is_empty() {
                let l: Vec<String> = v.iter().map(|p| path(p)).collect();
                let _ = writeln!(s, "{key} = [{}]", l.join(", "));
            }
        }
        for (key, v) in [("local_id", &k.local_id), ("remote_id", &k.remote_id)] {
            if let Some(v) = v {
                let _ = writeln!(s, "{key} = {}", quote(v));
            }
        }
        for (key, v) in [
            ("ike_proposals", &k.ike_proposals),
            ("esp_proposals", &k.esp_proposals),
        ] {
            if !v.is_empty() {
                let _ = writeln!(s, "{key} = [{}]", list(v));
            }
        }
        if !k.initiate {
            let _ = writeln!(s, "initiate = false");
        }
        for (key, v) in [
            ("dpd_interval", k.dpd_interval),
            ("ike_lifetime", k.ike_lifetime),
            ("child_lifetime", k.child_lifetime),
            ("child_lifetime_packets", k.child_lifetime_packets),
            ("child_lifetime_bytes", k.child_lifetime_bytes),
        ] {
            if let Some(v) = v {
                let _ = writeln!(s, "{key} = {v}");
            }
        }
        if !k.local_traffic.is_empty() {
            let t: Vec<String> = k
                .local_traffic
                .iter()
                .map(|p| quote(&p.to_string()))
                .collect();
            let _ = writeln!(s, "local_traffic = [{}]", t.join(", "));
        }
        for (key, v) in k.admission_keys() {
            if let Some(v) = v {
                let _ = writeln!(s, "{key} = {v}");
            }
        }
    }
    for sa in &x.sas {
        let _ = writeln!(s, "\n[[tunnel.sa]]");
        let _ = writeln!(s, "direction = {}", quote(sa.direction.as_str()));
        let _ = writeln!(s, "spi = {:#010x}", sa.spi);
        let _ = writeln!(s, "algorithm = {}", quote(sa.algorithm.as_str()));
        let _ = writeln!(s, "key_file = {}", quote(&sa.key_file.to_string_lossy()));
        if !sa.esn {
            let _ = writeln!(s, "esn = false");
        }
        if sa.replay_window != DEFAULT_REPLAY_WINDOW {
            let _ = writeln!(s, "replay_window = {}", sa.replay_window);
        }
        for (k, v) in [
            ("lifetime_bytes", sa.lifetime_bytes),
            ("lifetime_packets", sa.lifetime_packets),
            ("lifetime_seconds", sa.lifetime_seconds),
        ] {
            if let Some(v) = v {
                let _ = writeln!(s, "{k} = {v}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_keys() {
        assert_eq!(
            parse_key_hex(" 0x0a0B\n ff \n").unwrap(),
            vec![0x0a, 0x0b, 0xff]
        );
        assert!(parse_key_hex("abc").is_err());
        assert!(parse_key_hex("zz").is_err());
    }

    #[test]
    fn soft_is_85_percent() {
        assert_eq!(soft_of(Some(1000)), 850);
        assert_eq!(soft_of(Some(u64::MAX)), u64::MAX / 100 * 85 + 15 * 85 / 100);
        assert_eq!(soft_of(None), 0);
    }

    #[test]
    fn algorithm_names() {
        for a in EspAlgorithm::ALL {
            assert_eq!(a.as_str().parse::<EspAlgorithm>().unwrap(), a);
        }
        assert!("3des".parse::<EspAlgorithm>().is_err());
    }
}
