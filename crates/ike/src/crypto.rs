//! IKEv2 cryptography through aws-lc-rs (and crypto-bigint for MODP):
//! PRFs and prf+ (RFC 7296 §2.13), key derivation (§2.14, §2.17, §2.18),
//! PSK AUTH (§2.15), NAT-D hashes (§2.23), SK payload protection with
//! AES-CBC + HMAC (§3.14) or AES-GCM (RFC 5282), and DH groups 14
//! (RFC 3526), 19 (RFC 5903) and 31 (RFC 8031).

use crate::error::{Error, Result};
use crate::message::{Header, HEADER_LEN, MAX_MESSAGE_LEN};
use aws_lc_rs::{aead, agreement, cipher, constant_time, digest, hmac};
use crypto_bigint::modular::{MontyForm, MontyParams};
use crypto_bigint::{Odd, U2048};
use std::fmt;
use std::net::IpAddr;
use zeroize::Zeroizing;

/// Secret bytes: zeroed on drop.
pub type Secret = Zeroizing<Vec<u8>>;

/// Pseudo-random functions (transform type 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prf {
    /// PRF_HMAC_SHA1 (2).
    HmacSha1,
    /// PRF_HMAC_SHA2_256 (5).
    HmacSha256,
    /// PRF_HMAC_SHA2_384 (6).
    HmacSha384,
    /// PRF_HMAC_SHA2_512 (7).
    HmacSha512,
}

impl Prf {
    /// From a transform ID.
    pub fn from_id(id: u16) -> Option<Prf> {
        Some(match id {
            2 => Prf::HmacSha1,
            5 => Prf::HmacSha256,
            6 => Prf::HmacSha384,
            7 => Prf::HmacSha512,
            _ => return None,
        })
    }
    /// Transform ID.
    pub fn id(self) -> u16 {
        match self {
            Prf::HmacSha1 => 2,
            Prf::HmacSha256 => 5,
            Prf::HmacSha384 => 6,
            Prf::HmacSha512 => 7,
        }
    }
    fn alg(self) -> hmac::Algorithm {
        match self {
            Prf::HmacSha1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            Prf::HmacSha256 => hmac::HMAC_SHA256,
            Prf::HmacSha384 => hmac::HMAC_SHA384,
            Prf::HmacSha512 => hmac::HMAC_SHA512,
        }
    }
    /// Output (and preferred key) length in bytes.
    pub fn out_len(self) -> usize {
        match self {
            Prf::HmacSha1 => 20,
            Prf::HmacSha256 => 32,
            Prf::HmacSha384 => 48,
            Prf::HmacSha512 => 64,
        }
    }
    /// prf(key, data) over the concatenation of `parts`.
    pub fn prf(self, key: &[u8], parts: &[&[u8]]) -> Secret {
        let k = hmac::Key::new(self.alg(), key);
        let mut c = hmac::Context::with_key(&k);
        for p in parts {
            c.update(p);
        }
        Zeroizing::new(c.sign().as_ref().to_vec())
    }
    /// prf+ (RFC 7296 §2.13): T1 | T2 | ... truncated to `len` bytes.
    /// At most 255 iterations, so `len` is capped accordingly.
    pub fn prf_plus(self, key: &[u8], seed: &[u8], len: usize) -> Result<Secret> {
        if len > 255 * self.out_len() {
            return Err(Error::Crypto("prf+ output too long"));
        }
        let mut out = Zeroizing::new(Vec::with_capacity(len + self.out_len()));
        let mut t: Secret = Zeroizing::new(Vec::new());
        let mut n = 1u8;
        while out.len() < len {
            t = self.prf(key, &[&t, seed, &[n]]);
            out.extend_from_slice(&t);
            n = n.wrapping_add(1);
        }
        out.truncate(len);
        Ok(out)
    }
}

/// Integrity algorithms (transform type 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Integ {
    /// AUTH_HMAC_SHA1_96 (2).
    HmacSha1_96,
    /// AUTH_HMAC_SHA2_256_128 (12).
    HmacSha256_128,
    /// AUTH_HMAC_SHA2_384_192 (13).
    HmacSha384_192,
    /// AUTH_HMAC_SHA2_512_256 (14).
    HmacSha512_256,
}

impl Integ {
    /// From a transform ID.
    pub fn from_id(id: u16) -> Option<Integ> {
        Some(match id {
            2 => Integ::HmacSha1_96,
            12 => Integ::HmacSha256_128,
            13 => Integ::HmacSha384_192,
            14 => Integ::HmacSha512_256,
            _ => return None,
        })
    }
    /// Transform ID.
    pub fn id(self) -> u16 {
        match self {
            Integ::HmacSha1_96 => 2,
            Integ::HmacSha256_128 => 12,
            Integ::HmacSha384_192 => 13,
            Integ::HmacSha512_256 => 14,
        }
    }
    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            Integ::HmacSha1_96 => 20,
            Integ::HmacSha256_128 => 32,
            Integ::HmacSha384_192 => 48,
            Integ::HmacSha512_256 => 64,
        }
    }
    /// Truncated ICV length in bytes.
    pub fn icv_len(self) -> usize {
        match self {
            Integ::HmacSha1_96 => 12,
            Integ::HmacSha256_128 => 16,
            Integ::HmacSha384_192 => 24,
            Integ::HmacSha512_256 => 32,
        }
    }
    fn alg(self) -> hmac::Algorithm {
        match self {
            Integ::HmacSha1_96 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            Integ::HmacSha256_128 => hmac::HMAC_SHA256,
            Integ::HmacSha384_192 => hmac::HMAC_SHA384,
            Integ::HmacSha512_256 => hmac::HMAC_SHA512,
        }
    }
    /// Truncated MAC of `data`.
    pub fn mac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        let t = hmac::sign(&hmac::Key::new(self.alg(), key), data);
        t.as_ref()[..self.icv_len()].to_vec()
    }
}

/// Encryption algorithms (transform type 1) with their key size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encr {
    /// ENCR_AES_CBC (12), key bytes 16/32.
    AesCbc(u8),
    /// ENCR_AES_GCM_16 (20), key bytes 16/32 (plus 4 salt bytes of keymat).
    AesGcm16(u8),
}

impl Encr {
    /// From a transform ID and Key Length attribute (bits).
    pub fn from_transform(id: u16, key_bits: Option<u16>) -> Option<Encr> {
        let kb = key_bits?;
        // AES-192 is left out: aws-lc-rs offers no AES-192 CBC key type.
        if !matches!(kb, 128 | 256) {
            return None;
        }
        let bytes = (kb / 8) as u8;
        match id {
            12 => Some(Encr::AesCbc(bytes)),
            20 => Some(Encr::AesGcm16(bytes)),
            _ => None,
        }
    }
    /// Transform ID.
    pub fn id(self) -> u16 {
        match self {
            Encr::AesCbc(_) => 12,
            Encr::AesGcm16(_) => 20,
        }
    }
    /// Key Length attribute (bits).
    pub fn key_bits(self) -> u16 {
        match self {
            Encr::AesCbc(b) | Encr::AesGcm16(b) => u16::from(b) * 8,
        }
    }
    /// Keymat bytes taken for this cipher (RFC 5282 §7.1: GCM adds 4 salt bytes).
    pub fn keymat_len(self) -> usize {
        match self {
            Encr::AesCbc(b) => usize::from(b),
            Encr::AesGcm16(b) => usize::from(b) + 4,
        }
    }
    /// Whether this is a combined-mode (AEAD) cipher needing no INTEG.
    pub fn is_aead(self) -> bool {
        matches!(self, Encr::AesGcm16(_))
    }
}

/// Diffie-Hellman groups (transform type 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DhGroup {
    /// 2048-bit MODP (14, RFC 3526).
    Modp2048,
    /// NIST P-256 (19, RFC 5903).
    Ecp256,
    /// Curve25519 (31, RFC 8031).
    Curve25519,
}

impl DhGroup {
    /// From a transform ID.
    pub fn from_id(id: u16) -> Option<DhGroup> {
        Some(match id {
            14 => DhGroup::Modp2048,
            19 => DhGroup::Ecp256,
            31 => DhGroup::Curve25519,
            _ => return None,
        })
    }
    /// Transform ID.
    pub fn id(self) -> u16 {
        match self {
            DhGroup::Modp2048 => 14,
            DhGroup::Ecp256 => 19,
            DhGroup::Curve25519 => 31,
        }
    }
    /// KE data length on the wire.
    pub fn public_len(self) -> usize {
        match self {
            DhGroup::Modp2048 => 256,
            DhGroup::Ecp256 => 64,
            DhGroup::Curve25519 => 32,
        }
    }
}

/// RFC 3526 §3 2048-bit MODP prime, generator 2.
const MODP2048_P: &str = "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF";

fn modp_params() -> Result<MontyParams<{ U2048::LIMBS }>> {
    let p = U2048::from_be_hex(MODP2048_P);
    let odd: Option<Odd<U2048>> = Odd::new(p).into();
    Ok(MontyParams::new(odd.ok_or(Error::Crypto("MODP modulus"))?))
}

enum DhSecret {
    Ec(agreement::PrivateKey),
    Modp(Box<Zeroizing<[u8; 256]>>),
}

/// An ephemeral DH private key with its public value (KE data).
pub struct DhPrivate {
    group: DhGroup,
    secret: DhSecret,
    public: Vec<u8>,
}

impl fmt::Debug for DhPrivate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DhPrivate")
            .field("group", &self.group)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// Curve25519 public values (u-coordinates, top bit masked as RFC 7748
/// §5 requires) of small order: agreement with any of them gives the
/// all-zero secret (RFC 7748 §6.1), so they are refused up front.
const X25519_LOW_ORDER: [[u8; 32]; 7] = [
    [0; 32],
    [
        1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0,
    ],
    [
        0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4,
        0x6a, 0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49,
        0xb8, 0x00,
    ],
    [
        0x5f, 0x9c, 0x95, 0xbc, 0xa3, 0x50, 0x8c, 0x24, 0xb1, 0xd0, 0xb1, 0x55, 0x9c, 0x83, 0xef,
        0x5b, 0x04, 0x44, 0x5c, 0xc4, 0x58, 0x1c, 0x8e, 0x86, 0xd8, 0x22, 0x4e, 0xdd, 0xd0, 0x9f,
        0x11, 0x57,
    ],
    [
        0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0x7f,
    ],
    [
        0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0x7f,
    ],
    [
        0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0x7f,
    ],
];

impl DhGroup {
    /// Checks a peer's KE data before any DH work is spent on it (RFC 7296
    /// §2.6: an unauthenticated INIT must be cheap to refuse): its length
    /// (§3.4), for MODP the range 1 < y < p-1 (RFC 6989 §2.1), for
    /// Curve25519 no small-order point (RFC 7748 §6.1). P-256 points are
    /// checked on the curve by the agreement itself (RFC 6989 §2.3).
    pub fn check_public(self, peer: &[u8]) -> Result<()> {
        if peer.len() != self.public_len() {
            return Err(Error::Crypto("KE data length"));
        }
        match self {
            DhGroup::Modp2048 => {
                let p = U2048::from_be_hex(MODP2048_P);
                let y = U2048::from_be_slice(peer);
                if y <= U2048::ONE || y >= p.wrapping_sub(&U2048::ONE) {
                    return Err(Error::Crypto("invalid MODP public value"));
                }
            }
            DhGroup::Curve25519 => {
                let mut u = [0u8; 32];
                u.copy_from_slice(peer);
                u[31] &= 0x7f;
                if X25519_LOW_ORDER.iter().any(|l| ct_eq(l, &u)) {
                    return Err(Error::Crypto("small-order X25519 public value"));
                }
            }
            DhGroup::Ecp256 => {}
        }
        Ok(())
    }
}

thread_local! {
    /// DH key pairs generated on this thread ([`dh_keys_generated`]).
    static DH_KEYS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// DH key pairs generated on the calling thread so far: lets a test see
/// that refused input cost no key generation.
pub fn dh_keys_generated() -> u64 {
    DH_KEYS.with(|c| c.get())
}

impl DhPrivate {
    /// Generate a fresh key.
    pub fn generate(group: DhGroup) -> Result<DhPrivate> {
        DH_KEYS.with(|c| c.set(c.get() + 1));
        #[cfg(fuzzing)]
        if group != DhGroup::Modp2048 {
            // Known keys for fuzzing (see [`random`]).
            let mut k = [0u8; 32];
            random(&mut k)?;
            k[0] &= 0x7f; // below the P-256 order
            return Self::from_private_bytes(group, &k);
        }
        match group {
            DhGroup::Modp2048 => {
                let mut x = Zeroizing::new([0u8; 256]);
                // A 512-bit exponent: twice the group's ~112-bit strength
                // with a wide margin (RFC 3526 §8).
                random(&mut x[192..])?;
                Self::from_modp_exponent(x)
            }
            DhGroup::Ecp256 | DhGroup::Curve25519 => {
                let k = agreement::PrivateKey::generate(ec_alg(group))
                    .map_err(|_| Error::Crypto("keygen"))?;
                Self::from_ec(group, k)
            }
        }
    }

    /// Import a fixed private key (for known-answer tests).
    pub fn from_private_bytes(group: DhGroup, bytes: &[u8]) -> Result<DhPrivate> {
        match group {
            DhGroup::Modp2048 => {
                let mut x = Zeroizing::new([0u8; 256]);
                if bytes.len() > 256 {
                    return Err(Error::Crypto("MODP exponent too long"));
                }
                x[256 - bytes.len()..].copy_from_slice(bytes);
                Self::from_modp_exponent(x)
            }
            _ => {
                let k = agreement::PrivateKey::from_private_key(ec_alg(group), bytes)
                    .map_err(|_| Error::Crypto("bad private key"))?;
                Self::from_ec(group, k)
            }
        }
    }

    fn from_modp_exponent(x: Zeroizing<[u8; 256]>) -> Result<DhPrivate> {
        // crypto-bigint's Montgomery exponentiation runs in time
        // independent of the exponent's value.
        let params = modp_params()?;
        let g = MontyForm::new(&U2048::from_u8(2), params);
        let e = U2048::from_be_slice(&x[..]);
        let y = g.pow(&e).retrieve();
        Ok(DhPrivate {
            group: DhGroup::Modp2048,
            secret: DhSecret::Modp(Box::new(x)),
            public: y.to_be_bytes().to_vec(),
        })
    }

    fn from_ec(group: DhGroup, k: agreement::PrivateKey) -> Result<DhPrivate> {
        let pubkey = k
            .compute_public_key()
            .map_err(|_| Error::Crypto("public key"))?;
        let raw = pubkey.as_ref();
        // RFC 5903 §7: the KE data is x | y without the SEC1 0x04 prefix.
        let public = match group {
            DhGroup::Ecp256 => raw.get(1..).ok_or(Error::Crypto("P-256 key"))?.to_vec(),
            _ => raw.to_vec(),
        };
        Ok(DhPrivate {
            group,
            secret: DhSecret::Ec(k),
            public,
        })
    }

    /// Group of this key.
    pub fn group(&self) -> DhGroup {
        self.group
    }

    /// Public value as carried in the KE payload.
    pub fn public(&self) -> &[u8] {
        &self.public
    }

    /// Shared secret g^ir with the peer's KE data (validated).
    pub fn agree(&self, peer: &[u8]) -> Result<Secret> {
        self.group.check_public(peer)?;
        match &self.secret {
            DhSecret::Modp(x) => {
                let params = modp_params()?;
                // In range (RFC 6989 §2.1): checked by `check_public`.
                let y = U2048::from_be_slice(peer);
                let e = U2048::from_be_slice(&x[..]);
                let s = MontyForm::new(&y, params).pow(&e).retrieve();
                Ok(Zeroizing::new(s.to_be_bytes().to_vec()))
            }
            DhSecret::Ec(k) => {
                let mut buf = [0u8; 65];
                let peer_key: &[u8] = if self.group == DhGroup::Ecp256 {
                    buf[0] = 4;
                    buf[1..].copy_from_slice(peer);
                    &buf
                } else {
                    peer
                };
                let s = agreement::agree(
                    k,
                    agreement::UnparsedPublicKey::new(ec_alg(self.group), peer_key),
                    Error::Crypto("invalid EC public value"),
                    |s| Ok(Zeroizing::new(s.to_vec())),
                )?;
                // RFC 7748 §6.1: an all-zero X25519 result is refused.
                if ct_eq(&s, &vec![0u8; s.len()]) {
                    return Err(Error::Crypto("all-zero DH result"));
                }
                Ok(s)
            }
        }
    }
}

fn ec_alg(g: DhGroup) -> &'static agreement::Algorithm {
    match g {
        DhGroup::Ecp256 => &agreement::ECDH_P256,
        _ => &agreement::X25519,
    }
}

/// Fill a buffer with random bytes.
#[cfg(not(fuzzing))]
pub fn random(buf: &mut [u8]) -> Result<()> {
    aws_lc_rs::rand::fill(buf).map_err(|_| Error::Crypto("rng"))
}

/// Fuzzing builds only: every "random" byte (SPIs, nonces, DH private
/// keys, cookie secrets) comes from a seeded generator, so a fuzz target
/// knows the keys of the exchanges it drives and a crash replays. Never
/// compiled into a normal build (`cfg(fuzzing)` is set by cargo-fuzz).
#[cfg(fuzzing)]
pub fn random(buf: &mut [u8]) -> Result<()> {
    fuzz_rng::fill(buf);
    Ok(())
}

/// Restart the fuzzing generator from `seed` (see [`random`]).
#[cfg(fuzzing)]
pub fn fuzz_reseed(seed: u64) {
    fuzz_rng::reseed(seed);
}

#[cfg(fuzzing)]
mod fuzz_rng {
    use std::cell::Cell;

    thread_local!(static STATE: Cell<u64> = const { Cell::new(0) });

    pub(super) fn reseed(seed: u64) {
        STATE.with(|s| s.set(seed));
    }

    /// SplitMix64: deterministic, not cryptographic.
    pub(super) fn fill(buf: &mut [u8]) {
        STATE.with(|s| {
            for chunk in buf.chunks_mut(8) {
                let mut z = s.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
                s.set(z);
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^= z >> 31;
                chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
            }
        });
    }
}

/// Negotiated IKE SA algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IkeSuite {
    /// Encryption.
    pub encr: Encr,
    /// PRF.
    pub prf: Prf,
    /// Integrity (None for AEAD).
    pub integ: Option<Integ>,
    /// DH group.
    pub dh: DhGroup,
}

/// The seven IKE SA keys of RFC 7296 §2.14.
#[derive(Clone)]
pub struct IkeKeys {
    /// Child keymat seed.
    pub sk_d: Secret,
    /// Integrity initiator → responder.
    pub sk_ai: Secret,
    /// Integrity responder → initiator.
    pub sk_ar: Secret,
    /// Encryption initiator → responder.
    pub sk_ei: Secret,
    /// Encryption responder → initiator.
    pub sk_er: Secret,
    /// AUTH payload key, initiator.
    pub sk_pi: Secret,
    /// AUTH payload key, responder.
    pub sk_pr: Secret,
}

impl fmt::Debug for IkeKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IkeKeys(<redacted>)")
    }
}

impl IkeKeys {
    /// Derive from SKEYSEED (RFC 7296 §2.14):
    /// prf+(SKEYSEED, Ni | Nr | SPIi | SPIr).
    pub fn derive(
        suite: &IkeSuite,
        skeyseed: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> Result<IkeKeys> {
        let prf = suite.prf;
        let integ_len = suite.integ.map_or(0, Integ::key_len);
        let enc_len = suite.encr.keymat_len();
        let total = 3 * prf.out_len() + 2 * integ_len + 2 * enc_len;
        let mut seed = Vec::with_capacity(ni.len() + nr.len() + 16);
        seed.extend_from_slice(ni);
        seed.extend_from_slice(nr);
        seed.extend_from_slice(&spi_i.to_be_bytes());
        seed.extend_from_slice(&spi_r.to_be_bytes());
        let km = prf.prf_plus(skeyseed, &seed, total)?;
        let mut at = 0;
        let mut take = |n: usize| {
            let v = Zeroizing::new(km[at..at + n].to_vec());
            at += n;
            v
        };
        Ok(IkeKeys {
            sk_d: take(prf.out_len()),
            sk_ai: take(integ_len),
            sk_ar: take(integ_len),
            sk_ei: take(enc_len),
            sk_er: take(enc_len),
            sk_pi: take(prf.out_len()),
            sk_pr: take(prf.out_len()),
        })
    }

    /// Initial SA: SKEYSEED = prf(Ni | Nr, g^ir) (RFC 7296 §2.14).
    pub fn initial(
        suite: &IkeSuite,
        shared: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> Result<IkeKeys> {
        let mut nonces = Zeroizing::new(Vec::with_capacity(ni.len() + nr.len()));
        nonces.extend_from_slice(ni);
        nonces.extend_from_slice(nr);
        let skeyseed = suite.prf.prf(&nonces, &[shared]);
        Self::derive(suite, &skeyseed, ni, nr, spi_i, spi_r)
    }

    /// Rekeyed SA (RFC 7296 §2.18): SKEYSEED = prf(SK_d(old), g^ir(new) | Ni | Nr),
    /// computed with the old SA's PRF.
    #[allow(clippy::too_many_arguments)]
    pub fn rekeyed(
        old_prf: Prf,
        old_sk_d: &[u8],
        suite: &IkeSuite,
        shared: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> Result<IkeKeys> {
        let skeyseed = old_prf.prf(old_sk_d, &[shared, ni, nr]);
        Self::derive(suite, &skeyseed, ni, nr, spi_i, spi_r)
    }

    /// SK payload keys for one side.
    pub fn sk_keys(&self, suite: &IkeSuite, initiator: bool) -> SkKeys {
        let (eo, ao, ei, ai) = if initiator {
            (&self.sk_ei, &self.sk_ai, &self.sk_er, &self.sk_ar)
        } else {
            (&self.sk_er, &self.sk_ar, &self.sk_ei, &self.sk_ai)
        };
        SkKeys {
            encr: suite.encr,
            integ: suite.integ,
            enc_out: eo.clone(),
            integ_out: ao.clone(),
            enc_in: ei.clone(),
            integ_in: ai.clone(),
        }
    }
}

/// Child SA keymat (RFC 7296 §2.17): prf+(SK_d, [g^ir(new) |] Ni | Nr),
/// taken as encr i→r, integ i→r, encr r→i, integ r→i.
pub fn child_keymat(
    prf: Prf,
    sk_d: &[u8],
    shared: Option<&[u8]>,
    ni: &[u8],
    nr: &[u8],
    enc_len: usize,
    integ_len: usize,
) -> Result<[Secret; 4]> {
    let mut seed = Zeroizing::new(Vec::new());
    if let Some(s) = shared {
        seed.extend_from_slice(s);
    }
    seed.extend_from_slice(ni);
    seed.extend_from_slice(nr);
    let km = prf.prf_plus(sk_d, &seed, 2 * (enc_len + integ_len))?;
    let a = enc_len;
    let b = a + integ_len;
    let c = b + enc_len;
    Ok([
        Zeroizing::new(km[..a].to_vec()),
        Zeroizing::new(km[a..b].to_vec()),
        Zeroizing::new(km[b..c].to_vec()),
        Zeroizing::new(km[c..].to_vec()),
    ])
}

/// PSK AUTH data (RFC 7296 §2.15):
/// prf(prf(PSK, "Key Pad for IKEv2"), RealMessage | Nonce | prf(SK_p, IDbody)).
pub fn psk_auth(
    prf: Prf,
    psk: &[u8],
    message: &[u8],
    peer_nonce: &[u8],
    sk_p: &[u8],
    id_body: &[u8],
) -> Vec<u8> {
    let maced_id = prf.prf(sk_p, &[id_body]);
    let key = prf.prf(psk, &[b"Key Pad for IKEv2"]);
    prf.prf(&key, &[message, peer_nonce, &maced_id]).to_vec()
}

/// Constant-time equality.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    constant_time::verify_slices_are_equal(a, b).is_ok()
}

/// NAT-D hash (RFC 7296 §2.23): SHA-1(SPIi | SPIr | IP | Port).
pub fn nat_hash(spi_i: u64, spi_r: u64, ip: IpAddr, port: u16) -> Vec<u8> {
    let mut c = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
    c.update(&spi_i.to_be_bytes());
    c.update(&spi_r.to_be_bytes());
    match ip {
        IpAddr::V4(a) => c.update(&a.octets()),
        IpAddr::V6(a) => c.update(&a.octets()),
    }
    c.update(&port.to_be_bytes());
    c.finish().as_ref().to_vec()
}

/// Keys protecting SK payloads in one direction pair.
#[derive(Clone)]
pub struct SkKeys {
    encr: Encr,
    integ: Option<Integ>,
    enc_out: Secret,
    integ_out: Secret,
    enc_in: Secret,
    integ_in: Secret,
}

impl fmt::Debug for SkKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkKeys")
            .field("encr", &self.encr)
            .field("integ", &self.integ)
            .finish_non_exhaustive()
    }
}

fn gcm_key(key: &[u8]) -> Result<(aead::LessSafeKey, [u8; 4])> {
    let klen = key.len().checked_sub(4).ok_or(Error::Crypto("GCM key"))?;
    let alg = if klen == 16 {
        &aead::AES_128_GCM
    } else {
        &aead::AES_256_GCM
    };
    let k = aead::UnboundKey::new(alg, &key[..klen]).map_err(|_| Error::Crypto("GCM key"))?;
    let mut salt = [0u8; 4];
    salt.copy_from_slice(&key[klen..]);
    Ok((aead::LessSafeKey::new(k), salt))
}

fn cbc_alg(key: &[u8]) -> Result<&'static cipher::Algorithm> {
    Ok(match key.len() {
        16 => &cipher::AES_128,
        32 => &cipher::AES_256,
        _ => return Err(Error::Unsupported("AES-CBC key size")),
    })
}

impl SkKeys {
    /// Bytes of overhead an SK payload adds to its plaintext, at most.
    pub fn overhead(&self) -> usize {
        match self.encr {
            Encr::AesGcm16(_) => 4 + 8 + 1 + 16,
            Encr::AesCbc(_) => 4 + 16 + 16 + self.integ.map_or(0, Integ::icv_len),
        }
    }

    /// Encrypt `plain` into `out`, which holds the 28 header bytes
    /// (placeholder) and the SK/SKF generic header (plus SKF numbering)
    /// starting at `sk_off`. Sets lengths, writes the header, appends
    /// IV, ciphertext and ICV.
    pub fn seal(
        &self,
        out: &mut Vec<u8>,
        plain: Vec<u8>,
        sk_off: usize,
        header: &Header,
    ) -> Result<()> {
        let mut plain = Zeroizing::new(plain);
        match self.encr {
            Encr::AesGcm16(_) => {
                plain.push(0); // pad length 0 (RFC 5282 §3: no block alignment)
                let total = out.len() + 8 + plain.len() + 16;
                self.finish_header(out, total, sk_off, header)?;
                let mut iv = [0u8; 8];
                random(&mut iv)?;
                let (key, salt) = gcm_key(&self.enc_out)?;
                let mut nonce = [0u8; 12];
                nonce[..4].copy_from_slice(&salt);
                nonce[4..].copy_from_slice(&iv);
                let mut buf = plain.to_vec();
                key.seal_in_place_append_tag(
                    aead::Nonce::assume_unique_for_key(nonce),
                    aead::Aad::from(&out[..]),
                    &mut buf,
                )
                .map_err(|_| Error::Crypto("GCM seal"))?;
                out.extend_from_slice(&iv);
                out.extend_from_slice(&buf);
            }
            Encr::AesCbc(_) => {
                let integ = self.integ.ok_or(Error::Crypto("CBC without integrity"))?;
                let pad = (16 - (plain.len() + 1) % 16) % 16;
                let n = plain.len() + pad;
                plain.resize(n, 0);
                plain.push(pad as u8);
                let total = out.len() + 16 + plain.len() + integ.icv_len();
                self.finish_header(out, total, sk_off, header)?;
                let mut iv = [0u8; 16];
                random(&mut iv)?;
                let k = cipher::UnboundCipherKey::new(cbc_alg(&self.enc_out)?, &self.enc_out)
                    .map_err(|_| Error::Crypto("CBC key"))?;
                let ek = cipher::EncryptingKey::cbc(k).map_err(|_| Error::Crypto("CBC key"))?;
                let mut buf = plain.to_vec();
                ek.less_safe_encrypt(&mut buf, cipher::EncryptionContext::Iv128(iv.into()))
                    .map_err(|_| Error::Crypto("CBC encrypt"))?;
                out.extend_from_slice(&iv);
                out.extend_from_slice(&buf);
                let icv = integ.mac(&self.integ_out, out);
                out.extend_from_slice(&icv);
            }
        }
        Ok(())
    }

    fn finish_header(
        &self,
        out: &mut [u8],
        total: usize,
        sk_off: usize,
        header: &Header,
    ) -> Result<()> {
        if total > MAX_MESSAGE_LEN {
            return Err(Error::TooLong);
        }
        let mut h = *header;
        h.length = total as u32;
        h.emit(&mut out[..HEADER_LEN]);
        let plen = (total - sk_off) as u16;
        out[sk_off + 2..sk_off + 4].copy_from_slice(&plen.to_be_bytes());
        Ok(())
    }

    /// Verify and decrypt; `iv_off` is where the IV starts in `buf`
    /// (everything before it is authenticated data). Returns the inner
    /// payload chain without padding.
    pub fn open(&self, buf: &[u8], iv_off: usize) -> Result<Secret> {
        match self.encr {
            Encr::AesGcm16(_) => {
                if buf.len() < iv_off + 8 + 1 + 16 {
                    return Err(Error::Truncated("SK payload"));
                }
                let (key, salt) = gcm_key(&self.enc_in)?;
                let mut nonce = [0u8; 12];
                nonce[..4].copy_from_slice(&salt);
                nonce[4..].copy_from_slice(&buf[iv_off..iv_off + 8]);
                let mut ct = Zeroizing::new(buf[iv_off + 8..].to_vec());
                let pt = key
                    .open_in_place(
                        aead::Nonce::assume_unique_for_key(nonce),
                        aead::Aad::from(&buf[..iv_off]),
                        &mut ct,
                    )
                    .map_err(|_| Error::Integrity)?;
                strip_padding(pt)
            }
            Encr::AesCbc(_) => {
                let integ = self.integ.ok_or(Error::Crypto("CBC without integrity"))?;
                let icv = integ.icv_len();
                if buf.len() < iv_off + 16 + 16 + icv {
                    return Err(Error::Truncated("SK payload"));
                }
                let mac_end = buf.len() - icv;
                let want = integ.mac(&self.integ_in, &buf[..mac_end]);
                if !ct_eq(&want, &buf[mac_end..]) {
                    return Err(Error::Integrity);
                }
                let ct = &buf[iv_off + 16..mac_end];
                if ct.len() & 15 != 0 {
                    return Err(Error::BadLength("CBC ciphertext"));
                }
                let mut iv = [0u8; 16];
                iv.copy_from_slice(&buf[iv_off..iv_off + 16]);
                let k = cipher::UnboundCipherKey::new(cbc_alg(&self.enc_in)?, &self.enc_in)
                    .map_err(|_| Error::Crypto("CBC key"))?;
                let dk = cipher::DecryptingKey::cbc(k).map_err(|_| Error::Crypto("CBC key"))?;
                let mut pt = Zeroizing::new(ct.to_vec());
                let plain = dk
                    .decrypt(&mut pt, cipher::DecryptionContext::Iv128(iv.into()))
                    .map_err(|_| Error::Integrity)?;
                strip_padding(plain)
            }
        }
    }
}

fn strip_padding(pt: &[u8]) -> Result<Secret> {
    let (&pad, body) = pt.split_last().ok_or(Error::Malformed("SK padding"))?;
    let keep = body
        .len()
        .checked_sub(usize::from(pad))
        .ok_or(Error::Malformed("SK padding"))?;
    Ok(Zeroizing::new(body[..keep].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{exchange, Header, Message};
    use crate::payload::{Notify, Payload};

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn hmac_rfc4231_case2() {
        let out = Prf::HmacSha256.prf(b"Jefe", &[b"what do ya ", b"want for nothing?"]);
        assert_eq!(
            out.to_vec(),
            hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
        let t = Integ::HmacSha256_128.mac(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(t, hex("5bdcc146bf60754e6a042426089575c7"));
    }

    #[test]
    fn prf_plus_chains_blocks() {
        let k = b"key";
        let s = b"seed";
        let out = Prf::HmacSha1.prf_plus(k, s, 45).unwrap();
        let t1 = Prf::HmacSha1.prf(k, &[s, &[1]]);
        let t2 = Prf::HmacSha1.prf(k, &[&t1, s, &[2]]);
        let t3 = Prf::HmacSha1.prf(k, &[&t2, s, &[3]]);
        assert_eq!(&out[..20], &t1[..]);
        assert_eq!(&out[20..40], &t2[..]);
        assert_eq!(&out[40..], &t3[..5]);
        assert!(Prf::HmacSha1.prf_plus(k, s, 255 * 20 + 1).is_err());
    }

    #[test]
    fn x25519_rfc7748() {
        let a = DhPrivate::from_private_bytes(
            DhGroup::Curve25519,
            &hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"),
        )
        .unwrap();
        assert_eq!(
            a.public(),
            &hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")[..]
        );
        let s = a
            .agree(&hex(
                "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
            ))
            .unwrap();
        assert_eq!(
            s.to_vec(),
            hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        );
    }

    #[test]
    fn p256_rfc5903() {
        let i = DhPrivate::from_private_bytes(
            DhGroup::Ecp256,
            &hex("C88F01F510D9AC3F70A292DAA2316DE544E9AAB8AFE84049C62A9C57862D1433"),
        )
        .unwrap();
        let gi = hex(
            "DAD0B65394221CF9B051E1FECA5787D098DFE637FC90B9EF945D0C3772581180
             5271A0461CDB8252D61F1C456FA3E59AB1F45B33ACCF5F58389E0577B8990BB3",
        );
        assert_eq!(i.public(), &gi[..]);
        let gr = hex(
            "D12DFB5289C8D4F81208B70270398C342296970A0BCCB74C736FC7554494BF63
             56FBF3CA366CC23E8157854C13C58D6AAC23F046ADA30F8353E74F33039872AB",
        );
        let s = i.agree(&gr).unwrap();
        assert_eq!(
            s.to_vec(),
            hex("D6840F6B42F6EDAFD13116E0E12565202FEF8E9ECE7DCE03812464D04B9442DE")
        );
        // A point not on the curve is refused.
        let mut bad = gr.clone();
        bad[63] ^= 1;
        assert!(i.agree(&bad).is_err());
        assert!(i.agree(&gr[..32]).is_err());
    }

    #[test]
    fn modp2048_agreement_and_validation() {
        let one = DhPrivate::from_private_bytes(DhGroup::Modp2048, &[1]).unwrap();
        let mut two = vec![0u8; 256];
        two[255] = 2;
        assert_eq!(one.public(), &two[..]);
        let a = DhPrivate::generate(DhGroup::Modp2048).unwrap();
        let b = DhPrivate::generate(DhGroup::Modp2048).unwrap();
        assert_ne!(a.public(), b.public());
        let sa = a.agree(b.public()).unwrap();
        let sb = b.agree(a.public()).unwrap();
        assert_eq!(sa.len(), 256);
        assert_eq!(*sa, *sb);
        let mut one_v = vec![0u8; 256];
        one_v[255] = 1;
        assert!(a.agree(&one_v).is_err());
        assert!(a.agree(&[0xff; 256]).is_err());
        let pm1 = hex(MODP2048_P);
        let mut pm1 = pm1.clone();
        pm1[255] -= 1;
        assert!(a.agree(&pm1).is_err());
    }

    #[test]
    fn x25519_low_order_points_give_the_zero_secret() {
        // Each listed point, fed to aws-lc directly (bypassing
        // `check_public`), yields the all-zero secret, which it refuses:
        // the list holds what RFC 7748 §6.1 warns about.
        for (i, u) in X25519_LOW_ORDER.iter().enumerate() {
            let k = agreement::PrivateKey::generate(&agreement::X25519).unwrap();
            let r = agreement::agree(
                &k,
                agreement::UnparsedPublicKey::new(&agreement::X25519, u),
                (),
                |s| Ok(s.to_vec()),
            );
            assert!(
                r.is_err() || r.is_ok_and(|s| s.iter().all(|b| *b == 0)),
                "point {i}"
            );
            assert!(DhGroup::Curve25519.check_public(u).is_err(), "point {i}");
        }
        let mut u = X25519_LOW_ORDER[4];
        u[31] |= 0x80; // the masked top bit does not hide it
        assert!(DhGroup::Curve25519.check_public(&u).is_err());
        let good = DhPrivate::generate(DhGroup::Curve25519).unwrap();
        assert!(DhGroup::Curve25519.check_public(good.public()).is_ok());
    }

    #[test]
    fn ecdh_groups_agree() {
        for g in [DhGroup::Ecp256, DhGroup::Curve25519] {
            let a = DhPrivate::generate(g).unwrap();
            let b = DhPrivate::generate(g).unwrap();
            assert_eq!(a.public().len(), g.public_len());
            assert_eq!(*a.agree(b.public()).unwrap(), *b.agree(a.public()).unwrap());
        }
    }

    fn suites() -> Vec<IkeSuite> {
        vec![
            IkeSuite {
                encr: Encr::AesGcm16(16),
                prf: Prf::HmacSha256,
                integ: None,
                dh: DhGroup::Curve25519,
            },
            IkeSuite {
                encr: Encr::AesGcm16(32),
                prf: Prf::HmacSha256,
                integ: None,
                dh: DhGroup::Curve25519,
            },
            IkeSuite {
                encr: Encr::AesCbc(32),
                prf: Prf::HmacSha256,
                integ: Some(Integ::HmacSha256_128),
                dh: DhGroup::Modp2048,
            },
            IkeSuite {
                encr: Encr::AesCbc(16),
                prf: Prf::HmacSha1,
                integ: Some(Integ::HmacSha1_96),
                dh: DhGroup::Ecp256,
            },
        ]
    }

    #[test]
    fn sk_round_trip_and_tamper() {
        for suite in suites() {
            let keys =
                IkeKeys::initial(&suite, &[7; 32], &[1; 32], &[2; 32], 0x1111, 0x2222).unwrap();
            assert_eq!(keys.sk_ei.len(), suite.encr.keymat_len());
            assert_ne!(*keys.sk_ei, *keys.sk_er);
            let i = keys.sk_keys(&suite, true);
            let r = keys.sk_keys(&suite, false);
            let msg = Message {
                header: Header {
                    spi_i: 0x1111,
                    spi_r: 0x2222,
                    next: 0,
                    exchange: exchange::INFORMATIONAL,
                    flags: 0x08,
                    msg_id: 5,
                    length: 0,
                },
                payloads: vec![Payload::Notify(Notify::new(16384, vec![1, 2, 3]))],
            };
            let wire = msg.build_protected(&i).unwrap();
            let back = Message::parse_protected(&wire, &r).unwrap();
            assert_eq!(back.payloads, msg.payloads);
            assert_eq!(back.header.msg_id, 5);
            // Our own outbound keys do not open our messages.
            assert_eq!(Message::parse_protected(&wire, &i), Err(Error::Integrity));
            for pos in [0usize, 20, 40, wire.len() - 1] {
                let mut bad = wire.clone();
                bad[pos] ^= 0x40;
                assert!(Message::parse_protected(&bad, &r).is_err(), "pos {pos}");
            }
            for n in 0..wire.len() {
                assert!(Message::parse_protected(&wire[..n], &r).is_err());
            }
        }
    }

    #[test]
    fn child_keymat_order_and_pfs() {
        let [ei, ai, er, ar] =
            child_keymat(Prf::HmacSha256, &[9; 32], None, &[1; 16], &[2; 16], 20, 0).unwrap();
        let all = Prf::HmacSha256
            .prf_plus(&[9; 32], &[[1u8; 16], [2u8; 16]].concat(), 40)
            .unwrap();
        assert_eq!([&ei[..], &er[..]].concat(), all.to_vec());
        assert!(ai.is_empty() && ar.is_empty());
        let [ei2, ..] = child_keymat(
            Prf::HmacSha256,
            &[9; 32],
            Some(&[5; 32]),
            &[1; 16],
            &[2; 16],
            20,
            0,
        )
        .unwrap();
        assert_ne!(*ei, *ei2);
    }

    #[test]
    fn nat_hash_depends_on_every_input() {
        let a = nat_hash(1, 2, "10.0.0.1".parse().unwrap(), 500);
        assert_eq!(a.len(), 20);
        assert_ne!(a, nat_hash(1, 2, "10.0.0.1".parse().unwrap(), 4500));
        assert_ne!(a, nat_hash(1, 3, "10.0.0.1".parse().unwrap(), 500));
        assert_ne!(a, nat_hash(1, 2, "10.0.0.2".parse().unwrap(), 500));
    }

    #[test]
    fn debug_redacts() {
        let k = IkeKeys::initial(&suites()[0], &[7; 32], &[1; 32], &[2; 32], 1, 2).unwrap();
        assert!(!format!("{k:?}").contains('7'));
        let d = DhPrivate::generate(DhGroup::Curve25519).unwrap();
        assert!(format!("{d:?}").contains("redacted"));
    }
}
