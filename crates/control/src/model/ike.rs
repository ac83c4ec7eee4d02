//! IKEv2 tunnels and their SAs (`/ike`).

use super::IkeAdmission;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A child SA negotiated by IKEv2 (never key material).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IkeChildSaInfo {
    /// Our SPI (the peer sends with it), hex.
    pub spi_in: String,
    /// The peer's SPI (we send with it), hex.
    pub spi_out: String,
    /// ESP algorithm, strongSwan style (e.g. "aes128gcm16").
    pub algorithm: String,
    /// ESP in UDP 4500 (RFC 3948).
    pub udp_encap: bool,
    /// 64-bit extended sequence numbers negotiated (RFC 7296 §3.3.2).
    #[serde(default)]
    pub esn: bool,
    pub local_ts: Vec<String>,
    pub remote_ts: Vec<String>,
    /// Seconds since it was installed.
    pub age_secs: u64,
    /// Seconds until it is rekeyed; absent without a child lifetime.
    pub rekey_in_secs: Option<u64>,
}

/// An IKE SA (never key material).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IkeSaInfo {
    /// Initiator SPI, hex.
    pub spi_i: String,
    /// Responder SPI, hex.
    pub spi_r: String,
    /// Negotiated encryption/PRF/integrity/DH group.
    pub algorithms: String,
    /// NAT detected (or UDP encapsulation forced).
    pub nat: bool,
    pub age_secs: u64,
    pub rekey_in_secs: Option<u64>,
}

/// One IKEv2-keyed tunnel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IkeTunnelInfo {
    pub tunnel: String,
    pub local: String,
    pub remote: String,
    /// We start the negotiation (otherwise we wait for the peer).
    pub initiator: bool,
    /// "connecting", "waiting", "established", "failed" or "down".
    pub state: String,
    /// Why the last exchange failed, if it did.
    pub last_error: Option<String>,
    pub ike_sas: Vec<IkeSaInfo>,
    pub child_sas: Vec<IkeChildSaInfo>,
    pub ike_rekeys: u64,
    pub child_rekeys: u64,
    /// Half-open IKE SAs now (responder; RFC 7296 §2.6).
    #[serde(default)]
    pub half_open: u64,
    /// IKE_SA_INIT requests received (unauthenticated), since start.
    #[serde(default)]
    pub inits_received: u64,
    /// IKE_SA_INIT requests answered with a COOKIE instead of state.
    #[serde(default)]
    pub cookies_sent: u64,
    /// IKE_SA_INIT requests answered NO_PROPOSAL_CHOSEN / INVALID_KE_PAYLOAD.
    #[serde(default)]
    pub inits_refused: u64,
    /// IKE_SA_INIT requests dropped unanswered, by reason ("unknown-peer",
    /// "source-limit", "half-open-full", "invalid-ke", "malformed").
    #[serde(default)]
    pub inits_dropped: Vec<IkeDropCount>,
    /// IKE_AUTH requests refused before the peer was authenticated, by
    /// reason: "malformed" (over the message's bounds, e.g. too many
    /// payloads), "too-many-certificates", "certificate-too-large",
    /// "unknown-ca", "expired", "not-yet-valid", "revoked",
    /// "identity-mismatch", "chain-too-long", "bad-signature",
    /// "wrong-method", "authentication-failed" (PSK), ...
    #[serde(default)]
    pub auths_refused: Vec<IkeDropCount>,
    /// The admission limits in force (`[tunnel.ike]` keys or defaults).
    #[serde(default)]
    pub admission: IkeAdmission,
    /// How the current IKE SA's two sides authenticated each other.
    #[serde(default)]
    pub auth: Option<IkeAuthInfo>,
    /// Our certificate (`cert_file`), with `auth = "pubkey"`.
    #[serde(default)]
    pub local_cert: Option<IkeCertInfo>,
}

/// How the two sides of an IKE SA proved their identities (RFC 7296
/// §2.15, RFC 7427).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IkeAuthInfo {
    /// Our AUTH method: "psk", or the signature scheme (e.g.
    /// "ecdsa-sha256", "rsa-pss-sha256", "ecdsa-256 (classic)").
    pub local_method: String,
    /// The peer's.
    pub remote_method: String,
    /// The identity the peer proved.
    pub peer_id: String,
    /// The peer's certificate, when it signed.
    #[serde(default)]
    pub peer_cert: Option<IkeCertInfo>,
}

/// A certificate as `show ike` names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IkeCertInfo {
    /// Subject DN (`C=CH, O=Example, CN=gw-b`).
    pub subject: String,
    /// Issuer DN.
    pub issuer: String,
    /// Serial number, hex.
    pub serial: String,
    /// End of validity (RFC 3339, UTC).
    pub not_after: String,
    /// Whole days until then (negative once expired).
    pub days_left: i64,
}

/// Requests (IKE_SA_INIT dropped, IKE_AUTH refused) counted for one
/// reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IkeDropCount {
    pub reason: String,
    pub count: u64,
}
