//! The state sync's messages: what the active gateway tells the
//! standby over the sync link, sealed with AES-256-GCM.
//!
//! A datagram is a 32-byte header in clear (authenticated as the AEAD's
//! additional data), then the sealed body and its 16-byte tag:
//!
//! ```text
//! 0      4       5     6      8                16               24        32
//! | VGHS | ver=1 | kind | 0  0 | epoch start ms | epoch random | counter |
//! ```
//!
//! **Nonces under a key that lives in a file.** Every boot picks a fresh
//! epoch (its start time and 64 random bits) and seals under
//! HKDF-SHA256(salt = epoch, ikm = the file's key) (RFC 5869 §2); the nonce
//! is the counter, never reused within an epoch. Two boots share a key only
//! if their 128-bit epochs collide, so a restart never repeats a
//! (key, nonce) pair (RFC 5116 §5.1.1's requirement).
//!
//! **Replays.** The receiver keeps the peer's current epoch and the last
//! counter it accepted: a lower or equal counter is a replay, an epoch
//! older than the current one is stale, a new epoch must authenticate and
//! carry a send time within [`MAX_SKEW_MS`] of the receiver's clock (a
//! receiver that restarted has no epoch yet). A message carrying the
//! receiver's own epoch is a reflection. None of these checks changes
//! anything until the message has authenticated, and each datagram costs
//! at most one HKDF and one AEAD open of at most [`MAX_DATAGRAM`] bytes.
//!
//! **Body** (after opening): send time (ms since the Unix epoch), role,
//! then the records of the static ESP SAs, each naming its key by
//! [`KeyId`](../../vecgate_ipsec/seqstore/struct.KeyId.html) bytes:
//!
//! ```text
//! body:   sent ms (8) | role (1) | 0 (1) | record count (2) | records
//! record: dir (1) | 0 (1) | window words (2) | SPI (4) | key id (32)
//!         | ceiling or top (8) | used (8) | window words × 8
//! ```
//!
//! A [`Kind::Routes`] body carries one chunk of the active's static routes
//! (a set is named by its generation and split into chunks):
//!
//! ```text
//! body:  sent ms (8) | role (1) | 0 (1) | route count (2) | generation (8)
//!        | chunk (2) | chunks (2) | routes
//! route: vrf len (1) | prefix len (1) | via len (1) | 0 (1) | vrf | prefix | via
//! ```
//!
//! A [`Kind::IkeSas`] body carries one tunnel's IKE SAs ([`ike_sas`]), a
//! [`Kind::Tunnels`] body one chunk of the active's tunnels ([`tunnels`]).
//!
//! Views ([`Header`], [`Body`], [`Record`], [`RoutesBody`], [`IkeSasBody`])
//! check lengths once in `new_checked`; getters after it cannot go out of
//! bounds.

use std::fmt;

mod chunked;
pub mod ike_sas;
mod records;
mod routes;
mod seal;
pub mod tunnels;
pub use ike_sas::{pack_ike, IkeSaRepr, IkeSasBody, IkeSasRepr};
pub use records::{pack, Body, BodyRepr, Dir, Record, RecordRepr, Records};
pub use routes::{pack_routes, RouteRepr, RoutesBody, RoutesRepr, ROUTES_HEADER_LEN};
pub use seal::{Opened, Opener, SealError, Sealer, SyncKey};
pub use tunnels::{pack_tunnels, TunnelsBody, TunnelsRepr};

pub const MAGIC: [u8; 4] = *b"VGHS";
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 32;
pub const TAG_LEN: usize = 16;
/// Largest datagram sent or accepted (records are split across datagrams).
pub const MAX_DATAGRAM: usize = 16 * 1024;
/// Datagram size a sender packs records into (below a 1500-byte MTU).
pub const PACK_LEN: usize = 1400;
pub const BODY_HEADER_LEN: usize = 12;
pub const RECORD_LEN: usize = 56;
/// Largest replay window carried (the ring of `replay::MAX_WINDOW` bits).
pub const MAX_WINDOW_WORDS: usize = 2048;
/// A message whose send time is further than this from the receiver's
/// clock never opens a new epoch.
pub const MAX_SKEW_MS: u64 = 60_000;
/// The key file holds 32 bytes (64 hex digits).
pub const KEY_LEN: usize = 32;

const HKDF_INFO: &[u8] = b"vecgate ha sync v1";

/// Message kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Role only (the standby's liveness towards the active).
    Heartbeat,
    /// Role and the static SAs' sequence state.
    SaState,
    /// Role and one chunk of the active's static routes.
    Routes,
    /// Role and one tunnel's established IKE SAs ([`IkeSasBody`]).
    IkeSas,
    /// Role and one chunk of the active's tunnels ([`TunnelsBody`]).
    Tunnels,
}

impl Kind {
    pub fn code(self) -> u8 {
        match self {
            Kind::Heartbeat => 1,
            Kind::SaState => 2,
            Kind::Routes => 3,
            Kind::IkeSas => 4,
            Kind::Tunnels => 5,
        }
    }
    pub fn from_code(c: u8) -> Option<Kind> {
        match c {
            1 => Some(Kind::Heartbeat),
            2 => Some(Kind::SaState),
            3 => Some(Kind::Routes),
            4 => Some(Kind::IkeSas),
            5 => Some(Kind::Tunnels),
            _ => None,
        }
    }
}

/// Why a datagram was rejected (the metric's `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reject {
    /// Too short or long, bad magic, unknown kind, or a body that does not
    /// parse.
    Malformed,
    /// Another version.
    Version,
    /// Did not authenticate (wrong key, tampered).
    Auth,
    /// Counter not above the last accepted one.
    Replay,
    /// An epoch older than the peer's current one.
    StaleEpoch,
    /// A new epoch whose send time is too far from our clock.
    Skew,
    /// Our own epoch: a reflected datagram.
    Reflected,
}

impl Reject {
    pub const ALL: [Reject; 7] = [
        Reject::Malformed,
        Reject::Version,
        Reject::Auth,
        Reject::Replay,
        Reject::StaleEpoch,
        Reject::Skew,
        Reject::Reflected,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Reject::Malformed => "malformed",
            Reject::Version => "version",
            Reject::Auth => "auth",
            Reject::Replay => "replay",
            Reject::StaleEpoch => "stale_epoch",
            Reject::Skew => "skew",
            Reject::Reflected => "reflected",
        }
    }
}

impl fmt::Display for Reject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sender's boot: its start time and 64 random bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch {
    pub start_ms: u64,
    pub random: u64,
}

impl Epoch {
    /// A fresh epoch starting now.
    pub fn fresh(start_ms: u64) -> Result<Epoch, SealError> {
        let mut r = [0u8; 8];
        aws_lc_rs::rand::fill(&mut r).map_err(|_| SealError::Crypto)?;
        Ok(Epoch {
            start_ms,
            random: u64::from_be_bytes(r),
        })
    }

    fn bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.start_ms.to_be_bytes());
        b[8..].copy_from_slice(&self.random.to_be_bytes());
        b
    }
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

// ------------------------------------------------------------------ views

/// The clear header of a datagram.
#[derive(Debug, Clone, Copy)]
pub struct Header<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> Header<T> {
    /// Checks length, magic, version and kind.
    pub fn new_checked(buf: T) -> Result<Self, Reject> {
        let b = buf.as_ref();
        if b.len() < HEADER_LEN + TAG_LEN || b.len() > MAX_DATAGRAM || b[..4] != MAGIC {
            return Err(Reject::Malformed);
        }
        if b[4] != VERSION {
            return Err(Reject::Version);
        }
        if Kind::from_code(b[5]).is_none() {
            return Err(Reject::Malformed);
        }
        Ok(Header(buf))
    }
    pub fn kind(&self) -> Kind {
        Kind::from_code(self.0.as_ref()[5]).unwrap_or(Kind::Heartbeat)
    }
    pub fn epoch(&self) -> Epoch {
        let b = self.0.as_ref();
        Epoch {
            start_ms: be64(&b[8..16]),
            random: be64(&b[16..24]),
        }
    }
    pub fn counter(&self) -> u64 {
        be64(&self.0.as_ref()[24..32])
    }
    /// The header bytes (the AEAD's additional data).
    pub fn aad(&self) -> &[u8] {
        &self.0.as_ref()[..HEADER_LEN]
    }
    /// Sealed body and tag.
    pub fn sealed(&self) -> &[u8] {
        &self.0.as_ref()[HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests;
