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

mod dh;
mod keymat;
mod sk;

pub use dh::{dh_keys_generated, DhGroup, DhPrivate};
pub use keymat::{child_keymat, out_in, IkeKeys, IkeSuite};
pub use sk::SkKeys;

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

/// The octets an AUTH signature covers (RFC 7296 §2.15):
/// RealMessage | Nonce | prf(SK_p, IDbody).
pub fn signed_octets(
    prf: Prf,
    message: &[u8],
    peer_nonce: &[u8],
    sk_p: &[u8],
    id_body: &[u8],
) -> Vec<u8> {
    let maced_id = prf.prf(sk_p, &[id_body]);
    [message, peer_nonce, &maced_id].concat()
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

#[cfg(test)]
mod tests;
