//! Diffie-Hellman: groups 14 (RFC 3526), 19 (RFC 5903) and 31 (RFC 8031).

use super::*;

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
pub(super) const MODP2048_P: &str = "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF";

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
pub(super) const X25519_LOW_ORDER: [[u8; 32]; 7] = [
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
                // A 512-bit exponent: twice the group's ~112-bit strength
                // with a wide margin (RFC 3526 §8).
                let mut x = Zeroizing::new([0u8; 64]);
                random(&mut x[..])?;
                Self::from_private_bytes(group, &x[..])
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
