//! What the state machine hands its caller: [`Action`]s to carry out,
//! [`Event`]s to log, and negotiated child SAs as plain data.

use crate::crypto::{IkeSuite, Secret};
use crate::payload::{notify, Identity, TrafficSelector};
use crate::pki::{AuthError, AuthMethod, PeerCert};
use std::fmt;
use std::net::SocketAddr;

/// A negotiated child SA as plain data, for the ESP dataplane.
#[derive(Clone)]
pub struct ChildSaKeys {
    /// SPI we allocated: the peer sends ESP to us with it.
    pub spi_in: u32,
    /// SPI the peer allocated: we send with it.
    pub spi_out: u32,
    /// ESP algorithm, strongSwan style (`aes128gcm16`, `aes256-sha256`).
    pub algorithm: String,
    /// Decryption key for inbound traffic (for GCM: key ‖ 4-byte salt).
    pub enc_key_in: Secret,
    /// Encryption key for outbound traffic.
    pub enc_key_out: Secret,
    /// Integrity key inbound (empty for AEAD).
    pub integ_key_in: Secret,
    /// Integrity key outbound (empty for AEAD).
    pub integ_key_out: Secret,
    /// Our side's selectors.
    pub local_ts: Vec<TrafficSelector>,
    /// The peer's selectors.
    pub remote_ts: Vec<TrafficSelector>,
    /// Encapsulate ESP in UDP (RFC 3948) between `local` and `remote`.
    pub udp_encap: bool,
    /// 64-bit extended sequence numbers were negotiated.
    pub esn: bool,
    /// Outer local address (port is the NAT-T port when `udp_encap`).
    pub local: SocketAddr,
    /// Outer remote address.
    pub remote: SocketAddr,
    /// The [`ChildPolicy`] whose selectors it was negotiated for; None for
    /// the peer's own `local_ts`/`remote_ts`.
    pub policy: Option<u32>,
}

impl fmt::Debug for ChildSaKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSaKeys")
            .field("spi_in", &format_args!("{:08x}", self.spi_in))
            .field("spi_out", &format_args!("{:08x}", self.spi_out))
            .field("algorithm", &self.algorithm)
            .field("keys", &"<redacted>")
            .field("local_ts", &self.local_ts)
            .field("remote_ts", &self.remote_ts)
            .field("udp_encap", &self.udp_encap)
            .field("local", &self.local)
            .field("remote", &self.remote)
            .field("policy", &self.policy)
            .finish()
    }
}

/// How the two sides of an IKE SA authenticated (RFC 7296 §2.15): kept
/// with the SA through rekeys and HA sync, for `show ike` and for
/// checking the peer's certificate again at each rekey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthInfo {
    /// Method (and RFC 7427 scheme) of our AUTH payload.
    pub local: AuthMethod,
    /// The peer's.
    pub remote: AuthMethod,
    /// The identity the peer proved.
    pub peer_id: Identity,
    /// The peer's certificate (end entity first), when it signed.
    pub peer_cert: Option<PeerCert>,
}

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailReason {
    /// PSK or identity mismatch (ours or the peer's AUTHENTICATION_FAILED).
    AuthenticationFailed,
    /// No common proposal.
    NoProposalChosen,
    /// Traffic selectors do not overlap.
    TsUnacceptable,
    /// DH group disagreement that could not be resolved.
    InvalidKePayload,
    /// No response after all retransmissions (also: liveness check failed).
    Timeout,
    /// Another error notify from the peer.
    PeerError(u16),
    /// Malformed or unexpected content.
    Protocol(String),
    /// The peer's certificate or signature was refused (we answer
    /// AUTHENTICATION_FAILED), or no longer passes at a rekey.
    PeerAuth(AuthError),
}

impl FailReason {
    pub(super) fn from_notify(ty: u16) -> FailReason {
        match ty {
            notify::AUTHENTICATION_FAILED => FailReason::AuthenticationFailed,
            notify::NO_PROPOSAL_CHOSEN => FailReason::NoProposalChosen,
            notify::TS_UNACCEPTABLE => FailReason::TsUnacceptable,
            notify::INVALID_KE_PAYLOAD => FailReason::InvalidKePayload,
            t => FailReason::PeerError(t),
        }
    }
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailReason::AuthenticationFailed => f.write_str("AUTHENTICATION_FAILED"),
            FailReason::NoProposalChosen => f.write_str("NO_PROPOSAL_CHOSEN"),
            FailReason::TsUnacceptable => f.write_str("TS_UNACCEPTABLE"),
            FailReason::InvalidKePayload => f.write_str("INVALID_KE_PAYLOAD"),
            FailReason::Timeout => f.write_str("peer not responding"),
            FailReason::PeerError(t) => write!(f, "peer error notify {t}"),
            FailReason::Protocol(s) => write!(f, "protocol error: {s}"),
            FailReason::PeerAuth(e) => write!(f, "AUTHENTICATION_FAILED: {e}"),
        }
    }
}

/// Something that happened, for logs and for tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// IKE SA authenticated.
    IkeEstablished {
        /// Initiator SPI.
        spi_i: u64,
        /// Responder SPI.
        spi_r: u64,
        /// Negotiated algorithms.
        suite: IkeSuite,
        /// NAT detected (or forced): IKE and ESP use the NAT-T port.
        nat: bool,
    },
    /// An IKE SA another gateway negotiated was taken over
    /// ([`crate::Ike::import`], HA failover): no exchange with the peer.
    IkeAdopted {
        /// Initiator SPI.
        spi_i: u64,
        /// Responder SPI.
        spi_r: u64,
        /// Negotiated algorithms.
        suite: IkeSuite,
        /// IKE and ESP use the NAT-T port.
        nat: bool,
    },
    /// A child SA was installed.
    ChildEstablished {
        /// Our SPI.
        spi_in: u32,
        /// Peer SPI.
        spi_out: u32,
    },
    /// A child SA was replaced (the old one is deleted afterwards).
    ChildRekeyed {
        /// Old inbound SPI.
        old_spi_in: u32,
        /// New inbound SPI.
        new_spi_in: u32,
    },
    /// The IKE SA was replaced.
    IkeRekeyed {
        /// Old SPIs.
        old: (u64, u64),
        /// New SPIs.
        new: (u64, u64),
    },
    /// A child SA was removed.
    ChildDeleted {
        /// Our SPI.
        spi_in: u32,
        /// Peer SPI.
        spi_out: u32,
    },
    /// The IKE SA is gone.
    IkeDeleted {
        /// Initiator SPI.
        spi_i: u64,
        /// Responder SPI.
        spi_r: u64,
    },
    /// A child SA request (ours or the peer's) was refused because its
    /// selectors fit no policy (followed by `Failed { TsUnacceptable }`).
    TsRejected {
        /// The peer refused ours (else we refused the peer's).
        by_peer: bool,
        /// The initiator's selectors as offered.
        tsi: Vec<TrafficSelector>,
        /// The responder's selectors as offered.
        tsr: Vec<TrafficSelector>,
    },
    /// An exchange failed; `child` tells if only a child SA failed.
    Failed {
        /// Why.
        reason: FailReason,
        /// Only the child SA negotiation failed; the IKE SA lives on.
        child: bool,
    },
}

/// What the caller must do.
#[derive(Debug)]
pub enum Action {
    /// Send `data` from `local` to `remote` (the non-ESP marker is already
    /// prepended when the local port is the NAT-T port).
    Send {
        /// Our address (selects the socket: IKE or NAT-T port).
        local: SocketAddr,
        /// Destination.
        remote: SocketAddr,
        /// UDP payload.
        data: Vec<u8>,
    },
    /// Install a child SA (both directions).
    InstallChild(ChildSaKeys),
    /// Remove a child SA.
    RemoveChild {
        /// Our SPI.
        spi_in: u32,
        /// Peer SPI.
        spi_out: u32,
    },
    /// Log-worthy event.
    Event(Event),
}
