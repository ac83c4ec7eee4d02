//! Sealed state: what a connection's owner keeps in etcd (its IKE and
//! child SAs, static SAs' ceilings and replay windows) is sealed with
//! AES-256-GCM under a key derived from `pool_key_file`, so etcd and
//! anyone reading it only ever hold ciphertext.
//!
//! ```text
//! 0      4     5        8          16           24           32        64
//! | VGPS | ver | 0 0 0 | epoch     | written ms | generation | salt     | sealed body | tag (16)
//! ```
//!
//! **One key per blob.** Each blob draws 32 random bytes of salt and
//! seals under HKDF-SHA256(salt, pool key, label) (RFC 5869 §2) with a
//! zero nonce: a (key, nonce) pair repeats only if two 256-bit salts do,
//! however many blobs the pool writes over its life (random 96-bit nonces
//! under one key would wear out after 2^32 blobs, NIST SP 800-38D §8.3).
//!
//! **Bound to its connection and epoch.** The associated data is the
//! header, the pool's name and the connection's id: a blob copied to
//! another connection or pool does not open, and its epoch (the leader's
//! term it was written in), write time and generation cannot be altered.
//! The write time is what the takeover margin is measured from
//! ([`crate::snapshot`]).

use aws_lc_rs::{aead, hkdf};
use std::fmt;
use std::path::Path;
use zeroize::Zeroizing;

pub const MAGIC: [u8; 4] = *b"VGPS";
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 64;
pub const TAG_LEN: usize = 16;
pub const SALT_LEN: usize = 32;
/// The key file holds 32 bytes (64 hex digits).
pub const KEY_LEN: usize = 32;
/// The largest blob opened (etcd's request limit is 1.5 MiB).
pub const MAX_BLOB: usize = 256 * 1024;

const HKDF_INFO: &[u8] = b"vecgate pool state v1";
/// The id the key check is sealed under: not a valid connection id.
const KEYCHECK_ID: &str = "~keycheck";
const KEYCHECK_BODY: &[u8] = b"vecgate pool key check";

/// The pool key (zeroized on drop, never printed).
#[derive(Clone)]
pub struct PoolKey(Zeroizing<[u8; KEY_LEN]>);

impl fmt::Debug for PoolKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PoolKey(..)")
    }
}

impl PoolKey {
    pub fn new(bytes: &[u8]) -> Option<PoolKey> {
        if bytes.len() != KEY_LEN {
            return None;
        }
        let mut k = Zeroizing::new([0u8; KEY_LEN]);
        k.copy_from_slice(bytes);
        Some(PoolKey(k))
    }

    /// Reads `pool_key_file`: a private regular file owned by `owner` (the
    /// user vecgate runs as) holding 64 hex digits, as the HA sync's key.
    pub fn read(path: &Path, owner: u32) -> Result<PoolKey, String> {
        use vecgate_config::secret::{read_owned_secret_file, MAX_SECRET_LEN};
        let what = || format!("[pool] pool_key_file {}", path.display());
        let text = read_owned_secret_file(path, MAX_SECRET_LEN, owner)
            .map_err(|e| format!("{}: {e}", what()))?;
        let text = std::str::from_utf8(&text)
            .map_err(|_| format!("{}: must hold hex digits only", what()))?;
        let bytes = Zeroizing::new(
            vecgate_config::ipsec::parse_key_hex(text).map_err(|e| format!("{}: {e}", what()))?,
        );
        PoolKey::new(&bytes).ok_or_else(|| {
            format!(
                "{}: {} bytes, the pool key is {KEY_LEN} bytes (64 hex digits; e.g. `openssl rand -hex 32`)",
                what(),
                bytes.len()
            )
        })
    }

    fn blob_key(&self, salt: &[u8]) -> Result<aead::LessSafeKey, SealError> {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(&self.0[..]);
        let info = [HKDF_INFO];
        let okm = prk
            .expand(&info, &aead::AES_256_GCM)
            .map_err(|_| SealError::Crypto)?;
        Ok(aead::LessSafeKey::new(aead::UnboundKey::from(okm)))
    }
}

/// What the clear header says about a blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    /// The leader's epoch when the owner wrote it.
    pub epoch: i64,
    /// The owner's wall clock at the write, ms since the Unix epoch.
    pub written_ms: u64,
    /// Counts the owner's writes of this connection's state.
    pub generation: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SealError {
    Crypto,
    TooLarge,
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SealError::Crypto => "the AEAD failed",
            SealError::TooLarge => "state larger than a sealed blob may be",
        })
    }
}

/// Why a blob did not open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// Too short or long, bad magic or reserved bytes.
    Malformed,
    Version,
    /// Did not authenticate: another pool key, another connection or pool,
    /// or altered.
    Auth,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpenError::Malformed => "not a sealed state blob",
            OpenError::Version => "a sealed state blob of another version",
            OpenError::Auth => {
                "does not authenticate: pool_key_file differs from the one that sealed it, or the blob was altered or moved"
            }
        })
    }
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

fn aad(header: &[u8], pool: &str, conn: &str) -> Vec<u8> {
    let mut a = Vec::with_capacity(HEADER_LEN + pool.len() + conn.len() + 1);
    a.extend_from_slice(header);
    a.extend_from_slice(pool.as_bytes());
    a.push(0);
    a.extend_from_slice(conn.as_bytes());
    a
}

/// Seals `body` for connection `conn` of pool `pool`.
pub fn seal(
    key: &PoolKey,
    pool: &str,
    conn: &str,
    info: Info,
    body: &[u8],
) -> Result<Vec<u8>, SealError> {
    if HEADER_LEN + body.len() + TAG_LEN > MAX_BLOB {
        return Err(SealError::TooLarge);
    }
    let mut salt = [0u8; SALT_LEN];
    aws_lc_rs::rand::fill(&mut salt).map_err(|_| SealError::Crypto)?;
    let mut out = Vec::with_capacity(HEADER_LEN + body.len() + TAG_LEN);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[VERSION, 0, 0, 0]);
    out.extend_from_slice(&info.epoch.to_be_bytes());
    out.extend_from_slice(&info.written_ms.to_be_bytes());
    out.extend_from_slice(&info.generation.to_be_bytes());
    out.extend_from_slice(&salt);
    let k = key.blob_key(&salt)?;
    // Zeroizing: the body holds SA keys.
    let mut sealed = Zeroizing::new(body.to_vec());
    let nonce = aead::Nonce::assume_unique_for_key([0u8; aead::NONCE_LEN]);
    k.seal_in_place_append_tag(nonce, aead::Aad::from(aad(&out, pool, conn)), &mut *sealed)
        .map_err(|_| SealError::Crypto)?;
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// The clear header of a blob, unauthenticated (for `pool show`; never
/// acted on).
pub fn peek(blob: &[u8]) -> Result<Info, OpenError> {
    if blob.len() < HEADER_LEN + TAG_LEN || blob.len() > MAX_BLOB || blob[..4] != MAGIC {
        return Err(OpenError::Malformed);
    }
    if blob[4] != VERSION {
        return Err(OpenError::Version);
    }
    if blob[5..8] != [0, 0, 0] {
        return Err(OpenError::Malformed);
    }
    Ok(Info {
        epoch: be64(&blob[8..16]) as i64,
        written_ms: be64(&blob[16..24]),
        generation: be64(&blob[24..32]),
    })
}

/// Opens a blob of connection `conn` of pool `pool`: nothing of it is
/// believed before it authenticates.
pub fn open(
    key: &PoolKey,
    pool: &str,
    conn: &str,
    blob: &[u8],
) -> Result<(Info, Zeroizing<Vec<u8>>), OpenError> {
    let info = peek(blob)?;
    let header = &blob[..HEADER_LEN];
    let k = key
        .blob_key(&header[32..HEADER_LEN])
        .map_err(|_| OpenError::Auth)?;
    let mut buf = Zeroizing::new(blob[HEADER_LEN..].to_vec());
    let nonce = aead::Nonce::assume_unique_for_key([0u8; aead::NONCE_LEN]);
    let n = k
        .open_in_place(nonce, aead::Aad::from(aad(header, pool, conn)), &mut buf)
        .map_err(|_| OpenError::Auth)?
        .len();
    buf.truncate(n);
    Ok((info, buf))
}

/// The pool's key check (`keycheck`): the first member seals it, every
/// member that joins must open it, so a member with another key is
/// refused at start-up instead of failing at its first takeover.
pub fn keycheck(key: &PoolKey, pool: &str) -> Result<Vec<u8>, SealError> {
    seal(
        key,
        pool,
        KEYCHECK_ID,
        Info {
            epoch: 0,
            written_ms: 0,
            generation: 0,
        },
        KEYCHECK_BODY,
    )
}

/// Whether `blob` is the key check of `pool` under `key`.
pub fn keycheck_opens(key: &PoolKey, pool: &str, blob: &[u8]) -> Result<(), OpenError> {
    let (_, body) = open(key, pool, KEYCHECK_ID, blob)?;
    if &body[..] != KEYCHECK_BODY {
        return Err(OpenError::Auth);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(b: u8) -> PoolKey {
        PoolKey::new(&[b; KEY_LEN]).unwrap()
    }
    const INFO: Info = Info {
        epoch: 42,
        written_ms: 1_700_000_000_000,
        generation: 9,
    };

    #[test]
    fn round_trip_and_binding() {
        let blob = seal(&key(1), "p", "c1", INFO, b"secret state").unwrap();
        assert!(!blob.windows(6).any(|w| w == b"secret"), "ciphertext only");
        let (info, body) = open(&key(1), "p", "c1", &blob).unwrap();
        assert_eq!(info, INFO);
        assert_eq!(&body[..], b"secret state");
        assert_eq!(peek(&blob), Ok(INFO));
        // Wrong key, connection, pool: no.
        assert_eq!(
            open(&key(2), "p", "c1", &blob).unwrap_err(),
            OpenError::Auth
        );
        assert_eq!(
            open(&key(1), "p", "c2", &blob).unwrap_err(),
            OpenError::Auth
        );
        assert_eq!(
            open(&key(1), "q", "c1", &blob).unwrap_err(),
            OpenError::Auth
        );
        // "p" + "c1" must not equal "pc" + "1".
        assert_eq!(
            open(&key(1), "pc", "1", &blob).unwrap_err(),
            OpenError::Auth
        );
        // Header fields are authenticated: a changed epoch, write time or
        // generation fails.
        for at in [8, 16, 24, 40, 70] {
            let mut b = blob.clone();
            b[at] ^= 1;
            assert_eq!(
                open(&key(1), "p", "c1", &b).unwrap_err(),
                OpenError::Auth,
                "{at}"
            );
        }
        // Two seals of one body differ (fresh salt).
        assert_ne!(
            blob,
            seal(&key(1), "p", "c1", INFO, b"secret state").unwrap()
        );
    }

    #[test]
    fn malformed_and_version() {
        assert_eq!(peek(b""), Err(OpenError::Malformed));
        let mut b = seal(&key(1), "p", "c", INFO, b"").unwrap();
        assert_eq!(b.len(), HEADER_LEN + TAG_LEN);
        b[4] = 2;
        assert_eq!(peek(&b), Err(OpenError::Version));
        b[4] = 1;
        b[6] = 1;
        assert_eq!(peek(&b), Err(OpenError::Malformed));
        assert_eq!(
            seal(&key(1), "p", "c", INFO, &vec![0; MAX_BLOB]),
            Err(SealError::TooLarge)
        );
    }

    #[test]
    fn keycheck_tells_keys_apart() {
        let k = keycheck(&key(3), "p").unwrap();
        assert_eq!(keycheck_opens(&key(3), "p", &k), Ok(()));
        assert_eq!(keycheck_opens(&key(4), "p", &k), Err(OpenError::Auth));
        assert_eq!(keycheck_opens(&key(3), "other", &k), Err(OpenError::Auth));
        // A connection's state is not a key check.
        let s = seal(&key(3), "p", "c", INFO, KEYCHECK_BODY).unwrap();
        assert_eq!(keycheck_opens(&key(3), "p", &s), Err(OpenError::Auth));
        assert!(format!("{:?}", key(3)).contains(".."));
    }

    proptest! {
        #[test]
        fn open_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = open(&key(1), "p", "c", &b);
            let mut m = MAGIC.to_vec();
            m.extend_from_slice(&[VERSION, 0, 0, 0]);
            m.extend_from_slice(&b);
            let _ = open(&key(1), "p", "c", &m);
        }
    }
}
