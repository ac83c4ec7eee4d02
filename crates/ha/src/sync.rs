//! The state sync's messages (issue 16): what the active gateway tells the
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

use aws_lc_rs::{aead, hkdf};
use std::fmt;
use zeroize::Zeroizing;

mod chunked;
pub mod ike_sas;
pub mod tunnels;
use chunked::{Head, CHUNKED_HEADER_LEN};
pub use ike_sas::{pack_ike, IkeSaRepr, IkeSasBody, IkeSasRepr};
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

/// Direction of a synced SA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Out,
    In,
}

/// One record of a [`Body`].
#[derive(Debug, Clone, Copy)]
pub struct Record<'a>(&'a [u8]);

impl<'a> Record<'a> {
    pub fn dir(&self) -> Dir {
        if self.0[0] == 2 {
            Dir::In
        } else {
            Dir::Out
        }
    }
    pub fn spi(&self) -> u32 {
        u32::from_be_bytes([self.0[4], self.0[5], self.0[6], self.0[7]])
    }
    pub fn key_id(&self) -> [u8; 32] {
        let mut k = [0u8; 32];
        k.copy_from_slice(&self.0[8..40]);
        k
    }
    /// Outbound: the reserved (durable) ceiling. Inbound: the window's top.
    pub fn ceiling(&self) -> u64 {
        be64(&self.0[40..48])
    }
    /// Outbound: the highest number handed out.
    pub fn used(&self) -> u64 {
        be64(&self.0[48..56])
    }
    /// Inbound: the window's ring of 64-bit blocks.
    pub fn window(&self) -> impl ExactSizeIterator<Item = u64> + 'a {
        self.0[RECORD_LEN..].chunks_exact(8).map(be64)
    }
}

/// An opened body.
#[derive(Debug, Clone, Copy)]
pub struct Body<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> Body<T> {
    /// Checks that the records exactly fill the body.
    pub fn new_checked(buf: T) -> Result<Self, Reject> {
        let b = buf.as_ref();
        if b.len() < BODY_HEADER_LEN || b.len() > MAX_DATAGRAM || b[8] > 1 || b[9] != 0 {
            return Err(Reject::Malformed);
        }
        let count = usize::from(u16::from_be_bytes([b[10], b[11]]));
        let mut at = BODY_HEADER_LEN;
        for _ in 0..count {
            let r = b.get(at..at + RECORD_LEN).ok_or(Reject::Malformed)?;
            let words = usize::from(u16::from_be_bytes([r[2], r[3]]));
            if !(r[0] == 1 || r[0] == 2)
                || r[1] != 0
                || words > MAX_WINDOW_WORDS
                || (r[0] == 1 && words != 0)
            {
                return Err(Reject::Malformed);
            }
            at += RECORD_LEN + words * 8;
        }
        if at != b.len() {
            return Err(Reject::Malformed);
        }
        Ok(Body(buf))
    }
    pub fn sent_ms(&self) -> u64 {
        be64(self.0.as_ref())
    }
    /// Whether the sender is master of its VRRP groups.
    pub fn master(&self) -> bool {
        self.0.as_ref()[8] == 1
    }
    pub fn count(&self) -> u16 {
        let b = self.0.as_ref();
        u16::from_be_bytes([b[10], b[11]])
    }
    pub fn records(&self) -> Records<'_> {
        Records {
            rest: &self.0.as_ref()[BODY_HEADER_LEN..],
        }
    }
}

/// The records of a checked body.
pub struct Records<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;
    fn next(&mut self) -> Option<Record<'a>> {
        let hdr = self.rest.get(..RECORD_LEN)?;
        let words = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
        let len = RECORD_LEN + words * 8;
        let r = self.rest.get(..len)?;
        self.rest = &self.rest[len..];
        Some(Record(r))
    }
}

// ------------------------------------------------------------------- reprs

/// A record as the control plane builds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordRepr {
    pub dir: Dir,
    pub spi: u32,
    pub key_id: [u8; 32],
    pub ceiling: u64,
    pub used: u64,
    pub window: Vec<u64>,
}

impl RecordRepr {
    pub fn parse(r: &Record<'_>) -> RecordRepr {
        RecordRepr {
            dir: r.dir(),
            spi: r.spi(),
            key_id: r.key_id(),
            ceiling: r.ceiling(),
            used: r.used(),
            window: r.window().collect(),
        }
    }
    pub fn buffer_len(&self) -> usize {
        RECORD_LEN + 8 * self.words()
    }
    fn words(&self) -> usize {
        match self.dir {
            Dir::Out => 0,
            Dir::In => self.window.len().min(MAX_WINDOW_WORDS),
        }
    }
    fn emit(&self, out: &mut Vec<u8>) {
        let words = self.words();
        out.push(match self.dir {
            Dir::Out => 1,
            Dir::In => 2,
        });
        out.push(0);
        out.extend_from_slice(&(words as u16).to_be_bytes());
        out.extend_from_slice(&self.spi.to_be_bytes());
        out.extend_from_slice(&self.key_id);
        out.extend_from_slice(&self.ceiling.to_be_bytes());
        out.extend_from_slice(&self.used.to_be_bytes());
        for w in &self.window[..words] {
            out.extend_from_slice(&w.to_be_bytes());
        }
    }
}

/// A body as the control plane builds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyRepr {
    pub sent_ms: u64,
    pub master: bool,
    pub records: Vec<RecordRepr>,
}

impl BodyRepr {
    pub fn parse<T: AsRef<[u8]>>(b: &Body<T>) -> BodyRepr {
        BodyRepr {
            sent_ms: b.sent_ms(),
            master: b.master(),
            records: b.records().map(|r| RecordRepr::parse(&r)).collect(),
        }
    }

    /// The body's bytes (at most `u16::MAX` records: callers pack far
    /// fewer, see [`pack`]).
    pub fn emit(&self) -> Vec<u8> {
        let n = self.records.len().min(usize::from(u16::MAX));
        let mut out = Vec::with_capacity(
            BODY_HEADER_LEN
                + self.records[..n]
                    .iter()
                    .map(RecordRepr::buffer_len)
                    .sum::<usize>(),
        );
        out.extend_from_slice(&self.sent_ms.to_be_bytes());
        out.push(u8::from(self.master));
        out.push(0);
        out.extend_from_slice(&(n as u16).to_be_bytes());
        for r in &self.records[..n] {
            r.emit(&mut out);
        }
        out
    }
}

/// Splits records into bodies that each seal into at most [`PACK_LEN`]
/// bytes (a record larger than that goes alone; at least one body, so a
/// standby with nothing to store still hears the active).
pub fn pack(sent_ms: u64, master: bool, records: &[RecordRepr]) -> Vec<BodyRepr> {
    let room = PACK_LEN - HEADER_LEN - TAG_LEN - BODY_HEADER_LEN;
    let mut out = Vec::new();
    let mut cur: Vec<RecordRepr> = Vec::new();
    let mut used = 0;
    for r in records {
        let l = r.buffer_len();
        if !cur.is_empty() && used + l > room {
            out.push(std::mem::take(&mut cur));
            used = 0;
        }
        used += l;
        cur.push(r.clone());
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    out.into_iter()
        .map(|records| BodyRepr {
            sent_ms,
            master,
            records,
        })
        .collect()
}

// ------------------------------------------------------------------ routes

pub const ROUTES_HEADER_LEN: usize = CHUNKED_HEADER_LEN;

/// A route as the API names it: VRF, prefix, next hop (interface, tunnel
/// or address), each at most 255 bytes of UTF-8.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteRepr {
    pub vrf: String,
    pub prefix: String,
    pub via: String,
}

impl RouteRepr {
    fn buffer_len(&self) -> usize {
        4 + self.vrf.len() + self.prefix.len() + self.via.len()
    }
    fn fits(&self) -> bool {
        self.vrf.len() <= 255 && self.prefix.len() <= 255 && self.via.len() <= 255
    }
}

/// An opened [`Kind::Routes`] body.
#[derive(Debug, Clone, Copy)]
pub struct RoutesBody<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> RoutesBody<T> {
    /// Checks the chunk numbers, that the routes exactly fill the body and
    /// that every string is UTF-8.
    pub fn new_checked(buf: T) -> Result<Self, Reject> {
        let b = buf.as_ref();
        let count = chunked::check(b)?;
        let mut at = ROUTES_HEADER_LEN;
        for _ in 0..count {
            let h = b.get(at..at + 4).ok_or(Reject::Malformed)?;
            if h[3] != 0 {
                return Err(Reject::Malformed);
            }
            let mut p = at + 4;
            for l in [h[0], h[1], h[2]] {
                let f = b.get(p..p + usize::from(l)).ok_or(Reject::Malformed)?;
                std::str::from_utf8(f).map_err(|_| Reject::Malformed)?;
                p += usize::from(l);
            }
            at = p;
        }
        if at != b.len() {
            return Err(Reject::Malformed);
        }
        Ok(RoutesBody(buf))
    }
    pub fn sent_ms(&self) -> u64 {
        chunked::sent_ms(self.0.as_ref())
    }
    pub fn master(&self) -> bool {
        chunked::master(self.0.as_ref())
    }
    pub fn count(&self) -> u16 {
        chunked::count(self.0.as_ref())
    }
    /// Names the whole route set this chunk belongs to.
    pub fn generation(&self) -> u64 {
        chunked::generation(self.0.as_ref())
    }
    pub fn chunk(&self) -> u16 {
        chunked::chunk(self.0.as_ref())
    }
    pub fn chunks(&self) -> u16 {
        chunked::chunks(self.0.as_ref())
    }
    /// The routes (checked UTF-8: never lossy).
    pub fn routes(&self) -> Vec<RouteRepr> {
        let b = self.0.as_ref();
        let mut out = Vec::new();
        let mut at = ROUTES_HEADER_LEN;
        while let Some(h) = b.get(at..at + 4) {
            let mut p = at + 4;
            let mut f = [String::new(), String::new(), String::new()];
            for (i, l) in [h[0], h[1], h[2]].into_iter().enumerate() {
                let l = usize::from(l);
                f[i] = b
                    .get(p..p + l)
                    .map(|x| String::from_utf8_lossy(x).into_owned())
                    .unwrap_or_default();
                p += l;
            }
            let [vrf, prefix, via] = f;
            out.push(RouteRepr { vrf, prefix, via });
            at = p;
        }
        out
    }
}

/// One chunk of a route set, as the control plane builds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutesRepr {
    pub sent_ms: u64,
    pub master: bool,
    pub generation: u64,
    pub chunk: u16,
    pub chunks: u16,
    pub routes: Vec<RouteRepr>,
}

impl RoutesRepr {
    pub fn parse<T: AsRef<[u8]>>(b: &RoutesBody<T>) -> RoutesRepr {
        RoutesRepr {
            sent_ms: b.sent_ms(),
            master: b.master(),
            generation: b.generation(),
            chunk: b.chunk(),
            chunks: b.chunks(),
            routes: b.routes(),
        }
    }

    /// The body's bytes; routes with a field over 255 bytes are left out
    /// (the API's names and prefixes are far shorter).
    pub fn emit(&self) -> Vec<u8> {
        let rs: Vec<&RouteRepr> = self
            .routes
            .iter()
            .filter(|r| r.fits())
            .take(usize::from(u16::MAX))
            .collect();
        let head = Head {
            sent_ms: self.sent_ms,
            master: self.master,
            generation: self.generation,
            chunk: self.chunk,
            chunks: self.chunks,
        };
        let mut out = head.start(rs.len(), rs.iter().map(|r| r.buffer_len()).sum());
        for r in rs {
            out.extend_from_slice(&[
                r.vrf.len() as u8,
                r.prefix.len() as u8,
                r.via.len() as u8,
                0,
            ]);
            out.extend_from_slice(r.vrf.as_bytes());
            out.extend_from_slice(r.prefix.as_bytes());
            out.extend_from_slice(r.via.as_bytes());
        }
        out
    }
}

/// Splits a route set into chunks ([`chunked::split`]; routes with a
/// field over 255 bytes are left out).
pub fn pack_routes(
    sent_ms: u64,
    master: bool,
    generation: u64,
    routes: &[RouteRepr],
) -> Vec<RoutesRepr> {
    let chunks = chunked::split(routes.iter().filter(|r| r.fits()), RouteRepr::buffer_len);
    let n = chunks.len() as u16;
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, routes)| RoutesRepr {
            sent_ms,
            master,
            generation,
            chunk: i as u16,
            chunks: n,
            routes,
        })
        .collect()
}

// ------------------------------------------------------------------ crypto

/// Why a message could not be sealed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SealError {
    Crypto,
    TooLarge,
    /// 2^64 messages in one epoch: restart.
    Exhausted,
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SealError::Crypto => "the AEAD failed",
            SealError::TooLarge => "message larger than a sync datagram",
            SealError::Exhausted => "message counter exhausted",
        })
    }
}

/// The shared key from the key file (zeroized on drop).
#[derive(Clone)]
pub struct SyncKey(Zeroizing<[u8; KEY_LEN]>);

impl SyncKey {
    pub fn new(bytes: &[u8]) -> Option<SyncKey> {
        let mut k = Zeroizing::new([0u8; KEY_LEN]);
        if bytes.len() != KEY_LEN {
            return None;
        }
        k.copy_from_slice(bytes);
        Some(SyncKey(k))
    }

    /// The AEAD key of `epoch` (RFC 5869: extract with the epoch as salt,
    /// expand with a fixed label).
    fn epoch_key(&self, epoch: &Epoch) -> Result<aead::LessSafeKey, SealError> {
        let salt = hkdf::Salt::new(hkdf::HKDF_SHA256, &epoch.bytes());
        let prk = salt.extract(&self.0[..]);
        let info = [HKDF_INFO];
        let okm = prk
            .expand(&info, &aead::AES_256_GCM)
            .map_err(|_| SealError::Crypto)?;
        Ok(aead::LessSafeKey::new(aead::UnboundKey::from(okm)))
    }
}

impl fmt::Debug for SyncKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SyncKey(..)")
    }
}

fn nonce(counter: u64) -> aead::Nonce {
    let mut n = [0u8; aead::NONCE_LEN];
    n[4..].copy_from_slice(&counter.to_be_bytes());
    aead::Nonce::assume_unique_for_key(n)
}

/// Seals our messages: one epoch per process, counters from 1.
pub struct Sealer {
    epoch: Epoch,
    key: aead::LessSafeKey,
    next: u64,
}

impl Sealer {
    pub fn new(key: &SyncKey, epoch: Epoch) -> Result<Sealer, SealError> {
        Ok(Sealer {
            epoch,
            key: key.epoch_key(&epoch)?,
            next: 1,
        })
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Messages sealed so far.
    pub fn sent(&self) -> u64 {
        self.next - 1
    }

    /// One datagram: header, sealed `body`, tag.
    pub fn seal(&mut self, kind: Kind, body: &[u8]) -> Result<Vec<u8>, SealError> {
        if HEADER_LEN + body.len() + TAG_LEN > MAX_DATAGRAM {
            return Err(SealError::TooLarge);
        }
        if self.next == u64::MAX {
            return Err(SealError::Exhausted);
        }
        let counter = self.next;
        self.next += 1;
        let mut out = Vec::with_capacity(HEADER_LEN + body.len() + TAG_LEN);
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.push(kind.code());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.epoch.bytes());
        out.extend_from_slice(&counter.to_be_bytes());
        // Zeroizing: the plaintext of an IKE SA body holds keys.
        let mut sealed = Zeroizing::new(body.to_vec());
        self.key
            .seal_in_place_append_tag(nonce(counter), aead::Aad::from(&out[..]), &mut *sealed)
            .map_err(|_| SealError::Crypto)?;
        out.extend_from_slice(&sealed);
        Ok(out)
    }
}

/// An authenticated, fresh message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub kind: Kind,
    pub epoch: Epoch,
    pub counter: u64,
    /// A new epoch of the peer (it restarted, or we did).
    pub new_epoch: bool,
    /// Send time, role and (for [`Kind::SaState`]) the SA records.
    pub body: BodyRepr,
    /// [`Kind::Routes`]: the chunk of routes.
    pub routes: Option<RoutesRepr>,
    /// [`Kind::IkeSas`]: one tunnel's IKE SAs.
    pub ike: Option<IkeSasRepr>,
    /// [`Kind::Tunnels`]: the chunk of tunnels.
    pub tunnels: Option<TunnelsRepr>,
}

/// Opens the peer's messages and keeps its epoch and last counter.
pub struct Opener {
    key: SyncKey,
    own: Epoch,
    /// The peer's current epoch, its key, and the last counter accepted.
    current: Option<(Epoch, aead::LessSafeKey, u64)>,
}

impl Opener {
    /// `own` is our sealer's epoch (a datagram carrying it is reflected).
    pub fn new(key: SyncKey, own: Epoch) -> Opener {
        Opener {
            key,
            own,
            current: None,
        }
    }

    /// The peer's current epoch.
    pub fn peer_epoch(&self) -> Option<Epoch> {
        self.current.as_ref().map(|c| c.0)
    }

    /// Opens `datagram` at wall-clock time `now_ms`. Nothing changes unless
    /// it authenticates, parses and is fresh.
    pub fn open(&mut self, datagram: &[u8], now_ms: u64) -> Result<Opened, Reject> {
        let h = Header::new_checked(datagram)?;
        let epoch = h.epoch();
        let counter = h.counter();
        if epoch == self.own {
            return Err(Reject::Reflected);
        }
        let mut fresh = None;
        match &self.current {
            Some((e, _, last)) if *e == epoch => {
                if counter <= *last {
                    return Err(Reject::Replay);
                }
            }
            Some((e, _, _)) if epoch < *e => return Err(Reject::StaleEpoch),
            _ => fresh = Some(self.key.epoch_key(&epoch).map_err(|_| Reject::Auth)?),
        }
        // Zeroizing: an IKE SA body opens into keys.
        let mut buf = Zeroizing::new(h.sealed().to_vec());
        let plain_len = {
            let key = match (&fresh, &self.current) {
                (Some(k), _) => k,
                (None, Some(c)) => &c.1,
                (None, None) => return Err(Reject::Auth),
            };
            key.open_in_place(nonce(counter), aead::Aad::from(h.aad()), &mut buf)
                .map_err(|_| Reject::Auth)?
                .len()
        };
        let plain = &buf[..plain_len];
        let role = |sent_ms, master| BodyRepr {
            sent_ms,
            master,
            records: Vec::new(),
        };
        let mut tunnels = None;
        let (repr, routes, ike) = match h.kind() {
            Kind::Routes => {
                let r = RoutesRepr::parse(&RoutesBody::new_checked(plain)?);
                (role(r.sent_ms, r.master), Some(r), None)
            }
            Kind::IkeSas => {
                let r = IkeSasRepr::parse(&IkeSasBody::new_checked(plain)?);
                (role(r.sent_ms, r.master), None, Some(r))
            }
            Kind::Tunnels => {
                let r = TunnelsRepr::parse(&TunnelsBody::new_checked(plain)?);
                let repr = role(r.sent_ms, r.master);
                tunnels = Some(r);
                (repr, None, None)
            }
            _ => (BodyRepr::parse(&Body::new_checked(plain)?), None, None),
        };
        let new_epoch = fresh.is_some();
        if new_epoch && repr.sent_ms.abs_diff(now_ms) > MAX_SKEW_MS {
            return Err(Reject::Skew);
        }
        match fresh {
            Some(k) => self.current = Some((epoch, k, counter)),
            None => {
                if let Some(c) = &mut self.current {
                    c.2 = counter;
                }
            }
        }
        Ok(Opened {
            kind: h.kind(),
            epoch,
            counter,
            new_epoch,
            body: repr,
            routes,
            ike,
            tunnels,
        })
    }
}

#[cfg(test)]
mod tests;
