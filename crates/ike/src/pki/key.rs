//! Our private key and the AUTH signatures it makes (RFC 7296 §2.15,
//! RFC 7427 §3): the scheme follows the key and what the peer announced
//! in SIGNATURE_HASH_ALGORITHMS.

use super::scheme::{auth_data, Hash, KeyKind, Scheme, SigHashes};
use super::{AuthError, AuthMethod};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self as sig, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;
use std::fmt;
use zeroize::Zeroizing;

/// Smallest RSA modulus we sign with (RFC 8247 §3.2: 2048 bits).
const MIN_RSA_BYTES: usize = 256;

/// A private key for IKE AUTH signatures. Its memory is cleared by
/// aws-lc when dropped; `Debug` shows only the kind.
pub enum SigningKey {
    /// RSA: PSS or PKCS#1 v1.5 in method 14.
    Rsa(RsaKeyPair),
    /// ECDSA: `der` signs for method 14, `fixed` (r‖s) for 9/10/11.
    Ecdsa {
        /// Curve.
        kind: KeyKind,
        /// DER-signature key pair.
        der: EcdsaKeyPair,
        /// Fixed-length-signature key pair.
        fixed: EcdsaKeyPair,
    },
    /// Ed25519: method 14 only (RFC 8420).
    Ed25519(Ed25519KeyPair),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({:?}, <redacted>)", self.kind())
    }
}

fn ec_algs(
    kind: KeyKind,
) -> Option<(
    &'static sig::EcdsaSigningAlgorithm,
    &'static sig::EcdsaSigningAlgorithm,
)> {
    Some(match kind {
        KeyKind::P256 => (
            &sig::ECDSA_P256_SHA256_ASN1_SIGNING,
            &sig::ECDSA_P256_SHA256_FIXED_SIGNING,
        ),
        KeyKind::P384 => (
            &sig::ECDSA_P384_SHA384_ASN1_SIGNING,
            &sig::ECDSA_P384_SHA384_FIXED_SIGNING,
        ),
        KeyKind::P521 => (
            &sig::ECDSA_P521_SHA512_ASN1_SIGNING,
            &sig::ECDSA_P521_SHA512_FIXED_SIGNING,
        ),
        _ => return None,
    })
}

/// The hash ECDSA uses on a curve in the classic methods (RFC 4754).
fn curve_hash(kind: KeyKind) -> Hash {
    match kind {
        KeyKind::P384 => Hash::Sha384,
        KeyKind::P521 => Hash::Sha512,
        _ => Hash::Sha256,
    }
}

impl SigningKey {
    /// A key from a PEM file (`PRIVATE KEY`, `RSA PRIVATE KEY`, `EC
    /// PRIVATE KEY`) or its DER (PKCS#8, PKCS#1 or SEC1). Encrypted keys
    /// are refused: the file's permissions protect it.
    pub fn from_bytes(bytes: &[u8]) -> Result<SigningKey, String> {
        if bytes.windows(9).any(|w| w == b"ENCRYPTED") {
            return Err(
                "encrypted private keys are not supported (store it unencrypted, mode 0600)".into(),
            );
        }
        let der: Zeroizing<Vec<u8>> = if bytes.windows(10).any(|w| w == b"-----BEGIN") {
            let k = PrivateKeyDer::from_pem_slice(bytes)
                .map_err(|e| format!("no private key in the PEM data: {e}"))?;
            Zeroizing::new(k.secret_der().to_vec())
        } else {
            Zeroizing::new(bytes.to_vec())
        };
        Self::from_der(&der)
    }

    /// A key from DER: PKCS#8 (RSA, EC, Ed25519), PKCS#1 (RSA) or SEC1 (EC).
    pub fn from_der(der: &[u8]) -> Result<SigningKey, String> {
        if let Ok(k) = RsaKeyPair::from_pkcs8(der).or_else(|_| RsaKeyPair::from_der(der)) {
            if k.public_modulus_len() < MIN_RSA_BYTES {
                return Err(format!(
                    "RSA key of {} bits: at least 2048 are needed",
                    k.public_modulus_len() * 8
                ));
            }
            return Ok(SigningKey::Rsa(k));
        }
        for kind in [KeyKind::P256, KeyKind::P384, KeyKind::P521] {
            let Some((d, f)) = ec_algs(kind) else {
                continue;
            };
            if let (Ok(der), Ok(fixed)) = (
                EcdsaKeyPair::from_private_key_der(d, der),
                EcdsaKeyPair::from_private_key_der(f, der),
            ) {
                return Ok(SigningKey::Ecdsa { kind, der, fixed });
            }
        }
        if let Ok(k) = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
            return Ok(SigningKey::Ed25519(k));
        }
        Err("not an RSA (2048+ bits), ECDSA P-256/P-384/P-521 or Ed25519 private key".into())
    }

    /// The key's kind.
    pub fn kind(&self) -> KeyKind {
        match self {
            SigningKey::Rsa(_) => KeyKind::Rsa,
            SigningKey::Ecdsa { kind, .. } => *kind,
            SigningKey::Ed25519(_) => KeyKind::Ed25519,
        }
    }

    /// The public key, as a certificate's subjectPublicKey holds it.
    pub fn public_key(&self) -> &[u8] {
        match self {
            SigningKey::Rsa(k) => k.public_key().as_ref(),
            SigningKey::Ecdsa { der, .. } => der.public_key().as_ref(),
            SigningKey::Ed25519(k) => k.public_key().as_ref(),
        }
    }

    /// Signs `octets` for an AUTH payload: (method used, AUTH data).
    /// Method 14 when the peer announced a hash our key can use
    /// (`rsa_pss` picks PSS over PKCS#1 v1.5 for RSA), else the classic
    /// ECDSA method; RSA without RFC 7427 would need SHA-1 signatures,
    /// which aws-lc-rs does not make, so that is an error.
    pub fn sign(
        &self,
        peer: SigHashes,
        rsa_pss: bool,
        octets: &[u8],
    ) -> Result<(AuthMethod, Vec<u8>), AuthError> {
        let failed = |_| AuthError::Unsupported("signing failed".into());
        let rng = SystemRandom::new();
        match self {
            SigningKey::Rsa(k) => {
                let h = [Hash::Sha256, Hash::Sha384, Hash::Sha512]
                    .into_iter()
                    .find(|h| peer.has(*h))
                    .ok_or_else(|| {
                        AuthError::Unsupported(
                            "the peer announced no SHA-2 hash for RFC 7427 signatures \
                             (an RSA key needs them)"
                                .into(),
                        )
                    })?;
                let (scheme, enc): (Scheme, &'static dyn sig::RsaEncoding) = match (rsa_pss, h) {
                    (true, Hash::Sha256) => (Scheme::RsaPss(h), &sig::RSA_PSS_SHA256),
                    (true, Hash::Sha384) => (Scheme::RsaPss(h), &sig::RSA_PSS_SHA384),
                    (true, Hash::Sha512) => (Scheme::RsaPss(h), &sig::RSA_PSS_SHA512),
                    (false, Hash::Sha256) => (Scheme::RsaPkcs1(h), &sig::RSA_PKCS1_SHA256),
                    (false, Hash::Sha384) => (Scheme::RsaPkcs1(h), &sig::RSA_PKCS1_SHA384),
                    (false, Hash::Sha512) => (Scheme::RsaPkcs1(h), &sig::RSA_PKCS1_SHA512),
                };
                let mut s = vec![0u8; k.public_modulus_len()];
                k.sign(enc, &rng, octets, &mut s).map_err(failed)?;
                Ok((AuthMethod::Signature(scheme), auth_data(scheme, &s)))
            }
            SigningKey::Ecdsa { kind, der, fixed } => {
                let h = curve_hash(*kind);
                if peer.has(h) {
                    let s = der.sign(&rng, octets).map_err(failed)?;
                    let scheme = Scheme::Ecdsa(h);
                    Ok((AuthMethod::Signature(scheme), auth_data(scheme, s.as_ref())))
                } else {
                    let s = fixed.sign(&rng, octets).map_err(failed)?;
                    Ok((AuthMethod::Ecdsa(h), s.as_ref().to_vec()))
                }
            }
            SigningKey::Ed25519(k) => {
                let s = k.sign(octets);
                Ok((
                    AuthMethod::Signature(Scheme::Ed25519),
                    auth_data(Scheme::Ed25519, s.as_ref()),
                ))
            }
        }
    }
}
