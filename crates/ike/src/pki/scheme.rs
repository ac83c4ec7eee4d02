//! AUTH methods and signature schemes on the wire (RFC 7296 §3.8,
//! RFC 7427 §3, RFC 8420) and verification of a peer's AUTH payload with
//! aws-lc-rs.
//!
//! Method 14 (Digital Signature) names its scheme by an ASN.1
//! AlgorithmIdentifier inside the AUTH data; we emit the encodings of
//! RFC 7427 Appendix A and read the peer's with x509-parser. The classic
//! methods fix the scheme by the method number: RSA (1) is PKCS#1 v1.5
//! with SHA-1, ECDSA (9/10/11) is r‖s over SHA-256/384/512 (RFC 4754).

use super::AuthError;
use aws_lc_rs::signature::{self as sig, VerificationAlgorithm};
use std::fmt;
use x509_parser::oid_registry::{self as oids, Oid};
use x509_parser::prelude::FromDer;
use x509_parser::signature_algorithm::RsaSsaPssParams;
use x509_parser::x509::{AlgorithmIdentifier, SubjectPublicKeyInfo};

/// AUTH method numbers (RFC 7296 §3.8, RFC 4754, RFC 7427).
pub mod method {
    /// RSA Digital Signature (PKCS#1 v1.5; SHA-1 in practice).
    pub const RSA: u8 = 1;
    /// Shared Key Message Integrity Code.
    pub const PSK: u8 = 2;
    /// ECDSA with SHA-256 on the P-256 curve.
    pub const ECDSA_256: u8 = 9;
    /// ECDSA with SHA-384 on the P-384 curve.
    pub const ECDSA_384: u8 = 10;
    /// ECDSA with SHA-512 on the P-521 curve.
    pub const ECDSA_521: u8 = 11;
    /// Digital Signature, scheme named in the AUTH data (RFC 7427).
    pub const DIGITAL_SIGNATURE: u8 = 14;
}

/// A hash of the SIGNATURE_HASH_ALGORITHMS registry (RFC 7427 §4,
/// RFC 8420 §2 for Identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hash {
    /// SHA2-256 (2).
    Sha256,
    /// SHA2-384 (3).
    Sha384,
    /// SHA2-512 (4).
    Sha512,
}

impl Hash {
    /// Registry number.
    pub fn id(self) -> u16 {
        match self {
            Hash::Sha256 => 2,
            Hash::Sha384 => 3,
            Hash::Sha512 => 4,
        }
    }
    fn oid(self) -> Oid<'static> {
        match self {
            Hash::Sha256 => oids::OID_NIST_HASH_SHA256,
            Hash::Sha384 => oids::OID_NIST_HASH_SHA384,
            Hash::Sha512 => oids::OID_NIST_HASH_SHA512,
        }
    }
    fn from_oid(o: &Oid) -> Option<Hash> {
        [Hash::Sha256, Hash::Sha384, Hash::Sha512]
            .into_iter()
            .find(|h| h.oid() == *o)
    }
    fn len(self) -> u32 {
        match self {
            Hash::Sha256 => 32,
            Hash::Sha384 => 48,
            Hash::Sha512 => 64,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Hash::Sha256 => "sha256",
            Hash::Sha384 => "sha384",
            Hash::Sha512 => "sha512",
        }
    }
}

/// Identity "hash" of RFC 8420 (EdDSA signs the octets themselves).
const HASH_IDENTITY: u16 = 5;

/// The hashes a peer announced in SIGNATURE_HASH_ALGORITHMS (RFC 7427
/// §4): a small set, unknown numbers ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct SigHashes(u8);

impl SigHashes {
    /// What we announce and accept in method 14: SHA2-256/384/512 and
    /// Identity (SHA-1 is not taken for signatures, RFC 8247 §3.2).
    pub fn ours() -> SigHashes {
        SigHashes(0b11_1100)
    }
    /// Parse the notify data: a list of 16-bit numbers.
    pub fn parse(data: &[u8]) -> SigHashes {
        let mut bits = 0u8;
        for c in data.chunks_exact(2) {
            let id = u16::from_be_bytes([c[0], c[1]]);
            if (1..=5).contains(&id) {
                bits |= 1 << id;
            }
        }
        SigHashes(bits)
    }
    /// The notify data.
    pub fn emit(self) -> Vec<u8> {
        (1u16..=5)
            .filter(|i| self.0 & (1 << i) != 0)
            .flat_map(u16::to_be_bytes)
            .collect()
    }
    /// Whether `h` was announced.
    pub fn has(self, h: Hash) -> bool {
        self.0 & (1 << h.id()) != 0
    }
    /// Whether Identity (RFC 8420, EdDSA) was announced.
    pub fn has_identity(self) -> bool {
        self.0 & (1 << HASH_IDENTITY) != 0
    }
    /// Whether anything was announced.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// A method-14 signature scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// RSASSA-PKCS1-v1_5 (`sha256WithRSAEncryption`, ...).
    RsaPkcs1(Hash),
    /// RSASSA-PSS, MGF1 with the same hash, salt as long as the hash.
    RsaPss(Hash),
    /// ECDSA, DER-encoded signature (`ecdsa-with-SHA256`, ...).
    Ecdsa(Hash),
    /// PureEdDSA over Ed25519 (RFC 8420).
    Ed25519,
}

/// The method and scheme an AUTH payload was made with: what `show ike`
/// and the log report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthMethod {
    /// Pre-shared key (2).
    Psk,
    /// RFC 7427 Digital Signature (14).
    Signature(Scheme),
    /// Classic RSA (1), PKCS#1 v1.5 with SHA-1.
    RsaSha1,
    /// Classic ECDSA (9, 10, 11) with its curve's hash.
    Ecdsa(Hash),
}

impl AuthMethod {
    /// AUTH method number.
    pub fn number(self) -> u8 {
        match self {
            AuthMethod::Psk => method::PSK,
            AuthMethod::Signature(_) => method::DIGITAL_SIGNATURE,
            AuthMethod::RsaSha1 => method::RSA,
            AuthMethod::Ecdsa(Hash::Sha256) => method::ECDSA_256,
            AuthMethod::Ecdsa(Hash::Sha384) => method::ECDSA_384,
            AuthMethod::Ecdsa(Hash::Sha512) => method::ECDSA_521,
        }
    }
}

impl AuthMethod {
    /// Two bytes for the HA sync: the method number and, for method 14,
    /// the scheme (high nibble) and hash number (low nibble).
    pub fn to_code(self) -> [u8; 2] {
        let detail = match self {
            AuthMethod::Signature(Scheme::RsaPkcs1(h)) => 0x10 | h.id() as u8,
            AuthMethod::Signature(Scheme::RsaPss(h)) => 0x20 | h.id() as u8,
            AuthMethod::Signature(Scheme::Ecdsa(h)) => 0x30 | h.id() as u8,
            AuthMethod::Signature(Scheme::Ed25519) => 0x40,
            _ => 0,
        };
        [self.number(), detail]
    }

    /// Inverse of [`AuthMethod::to_code`]; None for anything else.
    pub fn from_code(c: [u8; 2]) -> Option<AuthMethod> {
        let hash = |n: u8| match n & 0x0f {
            2 => Some(Hash::Sha256),
            3 => Some(Hash::Sha384),
            4 => Some(Hash::Sha512),
            _ => None,
        };
        let m = match c {
            [method::PSK, 0] => AuthMethod::Psk,
            [method::RSA, 0] => AuthMethod::RsaSha1,
            [method::ECDSA_256, 0] => AuthMethod::Ecdsa(Hash::Sha256),
            [method::ECDSA_384, 0] => AuthMethod::Ecdsa(Hash::Sha384),
            [method::ECDSA_521, 0] => AuthMethod::Ecdsa(Hash::Sha512),
            [method::DIGITAL_SIGNATURE, 0x40] => AuthMethod::Signature(Scheme::Ed25519),
            [method::DIGITAL_SIGNATURE, d] => AuthMethod::Signature(match d >> 4 {
                1 => Scheme::RsaPkcs1(hash(d)?),
                2 => Scheme::RsaPss(hash(d)?),
                3 => Scheme::Ecdsa(hash(d)?),
                _ => return None,
            }),
            _ => return None,
        };
        Some(m)
    }
}

impl fmt::Display for AuthMethod {
    /// `psk`, `rsa-pss-sha256`, `rsa-pkcs1-sha384`, `ecdsa-sha256`,
    /// `ed25519` (RFC 7427), `rsa-sha1 (classic)`, `ecdsa-256 (classic)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthMethod::Psk => f.write_str("psk"),
            AuthMethod::Signature(Scheme::RsaPkcs1(h)) => write!(f, "rsa-pkcs1-{}", h.name()),
            AuthMethod::Signature(Scheme::RsaPss(h)) => write!(f, "rsa-pss-{}", h.name()),
            AuthMethod::Signature(Scheme::Ecdsa(h)) => write!(f, "ecdsa-{}", h.name()),
            AuthMethod::Signature(Scheme::Ed25519) => f.write_str("ed25519"),
            AuthMethod::RsaSha1 => f.write_str("rsa-sha1 (classic)"),
            AuthMethod::Ecdsa(h) => {
                let bits = match h {
                    Hash::Sha256 => 256,
                    Hash::Sha384 => 384,
                    Hash::Sha512 => 521,
                };
                write!(f, "ecdsa-{bits} (classic)")
            }
        }
    }
}

/// id-mgf1 (RFC 8017 Appendix B.2.1), absent from oid-registry.
const OID_MGF1: Oid<'static> = Oid::new(std::borrow::Cow::Borrowed(&[
    0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08,
]));

/// A DER tag-length-value (definite length; we only encode).
pub(crate) fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let len = n.to_be_bytes();
        let skip = len.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (len.len() - skip) as u8);
        out.extend_from_slice(&len[skip..]);
    }
    out.extend_from_slice(content);
    out
}

fn oid_tlv(o: &Oid) -> Vec<u8> {
    tlv(0x06, o.as_bytes())
}

/// AlgorithmIdentifier { hash, NULL } as strongSwan and RFC 7427 write it.
fn hash_alg_id(h: Hash) -> Vec<u8> {
    tlv(0x30, &[oid_tlv(&h.oid()), vec![0x05, 0x00]].concat())
}

impl Scheme {
    /// The AlgorithmIdentifier we put in the AUTH data (RFC 7427 §3 and
    /// Appendix A; RFC 8420 §2 for Ed25519).
    pub fn alg_id(self) -> Vec<u8> {
        let null = [0x05u8, 0x00];
        match self {
            Scheme::RsaPkcs1(h) => {
                let o = match h {
                    Hash::Sha256 => oids::OID_PKCS1_SHA256WITHRSA,
                    Hash::Sha384 => oids::OID_PKCS1_SHA384WITHRSA,
                    Hash::Sha512 => oids::OID_PKCS1_SHA512WITHRSA,
                };
                tlv(0x30, &[oid_tlv(&o), null.to_vec()].concat())
            }
            Scheme::RsaPss(h) => {
                let mgf = tlv(0x30, &[oid_tlv(&OID_MGF1), hash_alg_id(h)].concat());
                let salt = tlv(0x02, &[h.len() as u8]);
                let params = tlv(
                    0x30,
                    &[
                        tlv(0xa0, &hash_alg_id(h)),
                        tlv(0xa1, &mgf),
                        tlv(0xa2, &salt),
                    ]
                    .concat(),
                );
                tlv(
                    0x30,
                    &[oid_tlv(&oids::OID_PKCS1_RSASSAPSS), params].concat(),
                )
            }
            Scheme::Ecdsa(h) => {
                let o = match h {
                    Hash::Sha256 => oids::OID_SIG_ECDSA_WITH_SHA256,
                    Hash::Sha384 => oids::OID_SIG_ECDSA_WITH_SHA384,
                    Hash::Sha512 => oids::OID_SIG_ECDSA_WITH_SHA512,
                };
                tlv(0x30, &oid_tlv(&o))
            }
            Scheme::Ed25519 => tlv(0x30, &oid_tlv(&oids::OID_SIG_ED25519)),
        }
    }

    /// The scheme an AlgorithmIdentifier names, if we take it.
    pub fn from_alg_id(der: &[u8]) -> Result<Scheme, AuthError> {
        let unsupported = |what: &str| AuthError::Unsupported(format!("signature scheme {what}"));
        let (rest, a) = AlgorithmIdentifier::from_der(der)
            .map_err(|_| unsupported("(unparsable AlgorithmIdentifier)"))?;
        if !rest.is_empty() {
            return Err(unsupported("(trailing bytes)"));
        }
        let o = &a.algorithm;
        let pkcs1 = [
            (oids::OID_PKCS1_SHA256WITHRSA, Hash::Sha256),
            (oids::OID_PKCS1_SHA384WITHRSA, Hash::Sha384),
            (oids::OID_PKCS1_SHA512WITHRSA, Hash::Sha512),
        ];
        let ecdsa = [
            (oids::OID_SIG_ECDSA_WITH_SHA256, Hash::Sha256),
            (oids::OID_SIG_ECDSA_WITH_SHA384, Hash::Sha384),
            (oids::OID_SIG_ECDSA_WITH_SHA512, Hash::Sha512),
        ];
        if let Some((_, h)) = pkcs1.iter().find(|(x, _)| x == o) {
            return Ok(Scheme::RsaPkcs1(*h));
        }
        if let Some((_, h)) = ecdsa.iter().find(|(x, _)| x == o) {
            return Ok(Scheme::Ecdsa(*h));
        }
        if *o == oids::OID_SIG_ED25519 {
            return Ok(Scheme::Ed25519);
        }
        if *o == oids::OID_PKCS1_RSASSAPSS {
            let p = a
                .parameters
                .as_ref()
                .ok_or_else(|| unsupported("RSASSA-PSS without parameters"))?;
            let p = RsaSsaPssParams::try_from(p)
                .map_err(|_| unsupported("(unparsable RSASSA-PSS parameters)"))?;
            let h = Hash::from_oid(p.hash_algorithm_oid())
                .ok_or_else(|| unsupported("RSASSA-PSS with SHA-1"))?;
            let mgf = p
                .mask_gen_algorithm()
                .map_err(|_| unsupported("(RSASSA-PSS mask generation)"))?;
            // aws-lc-rs verifies PSS with MGF1 over the same hash and a
            // salt as long as the hash (RFC 8017 §9.1 recommends it).
            if mgf.mgf != OID_MGF1
                || Hash::from_oid(&mgf.hash) != Some(h)
                || p.salt_length() != h.len()
                || p.trailer_field() != 1
            {
                return Err(unsupported(
                    "RSASSA-PSS parameters other than MGF1 with the same hash and salt",
                ));
            }
            return Ok(Scheme::RsaPss(h));
        }
        Err(unsupported(&format!("OID {o}")))
    }

    /// The hash announced for it in SIGNATURE_HASH_ALGORITHMS.
    fn announced_by(self, h: SigHashes) -> bool {
        match self {
            Scheme::RsaPkcs1(x) | Scheme::RsaPss(x) | Scheme::Ecdsa(x) => h.has(x),
            Scheme::Ed25519 => h.has_identity(),
        }
    }
}

/// The kind of a public key, from its SubjectPublicKeyInfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// RSA (rsaEncryption or RSASSA-PSS key).
    Rsa,
    /// ECDSA on P-256.
    P256,
    /// ECDSA on P-384.
    P384,
    /// ECDSA on P-521.
    P521,
    /// Ed25519.
    Ed25519,
}

/// A peer's public key: its kind and the bytes aws-lc-rs verifies with
/// (RSAPublicKey DER, uncompressed EC point, Ed25519 key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// Kind.
    pub kind: KeyKind,
    /// subjectPublicKey contents.
    pub bytes: Vec<u8>,
}

impl PublicKey {
    /// From a certificate's SubjectPublicKeyInfo.
    pub fn from_spki(spki: &SubjectPublicKeyInfo) -> Result<PublicKey, AuthError> {
        let o = &spki.algorithm.algorithm;
        let kind = if *o == oids::OID_PKCS1_RSAENCRYPTION || *o == oids::OID_PKCS1_RSASSAPSS {
            KeyKind::Rsa
        } else if *o == oids::OID_SIG_ED25519 {
            KeyKind::Ed25519
        } else if *o == oids::OID_KEY_TYPE_EC_PUBLIC_KEY {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())
                .ok_or_else(|| AuthError::Unsupported("EC key without a named curve".into()))?;
            if curve == oids::OID_EC_P256 {
                KeyKind::P256
            } else if curve == oids::OID_NIST_EC_P384 {
                KeyKind::P384
            } else if curve == oids::OID_NIST_EC_P521 {
                KeyKind::P521
            } else {
                return Err(AuthError::Unsupported(format!("EC curve {curve}")));
            }
        } else {
            return Err(AuthError::Unsupported(format!("public key type {o}")));
        };
        Ok(PublicKey {
            kind,
            bytes: spki.subject_public_key.data.to_vec(),
        })
    }

    /// Verifies the peer's AUTH payload (`method`, `data`) over `octets`
    /// (RFC 7296 §2.15 signed octets). Method 14 schemes must use a hash
    /// we announced (`ours`).
    pub fn verify(
        &self,
        method_no: u8,
        data: &[u8],
        octets: &[u8],
        ours: SigHashes,
    ) -> Result<AuthMethod, AuthError> {
        let (used, alg, signature): (AuthMethod, &'static dyn VerificationAlgorithm, &[u8]) =
            match (method_no, self.kind) {
                (method::DIGITAL_SIGNATURE, _) => {
                    let n = usize::from(*data.first().ok_or_else(|| bad("empty AUTH data"))?);
                    let id = data
                        .get(1..1 + n)
                        .ok_or_else(|| bad("AlgorithmIdentifier past the AUTH data"))?;
                    let scheme = Scheme::from_alg_id(id)?;
                    if !scheme.announced_by(ours) {
                        return Err(AuthError::Unsupported(format!(
                            "{} was not announced",
                            AuthMethod::Signature(scheme)
                        )));
                    }
                    let alg = verification_alg(scheme, self.kind).ok_or_else(|| {
                        AuthError::Unsupported(format!(
                            "{} with a {:?} key",
                            AuthMethod::Signature(scheme),
                            self.kind
                        ))
                    })?;
                    (AuthMethod::Signature(scheme), alg, &data[1 + n..])
                }
                (method::RSA, KeyKind::Rsa) => (
                    AuthMethod::RsaSha1,
                    &sig::RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY,
                    data,
                ),
                (method::ECDSA_256, KeyKind::P256) => (
                    AuthMethod::Ecdsa(Hash::Sha256),
                    &sig::ECDSA_P256_SHA256_FIXED,
                    data,
                ),
                (method::ECDSA_384, KeyKind::P384) => (
                    AuthMethod::Ecdsa(Hash::Sha384),
                    &sig::ECDSA_P384_SHA384_FIXED,
                    data,
                ),
                (method::ECDSA_521, KeyKind::P521) => (
                    AuthMethod::Ecdsa(Hash::Sha512),
                    &sig::ECDSA_P521_SHA512_FIXED,
                    data,
                ),
                (
                    m @ (method::RSA | method::ECDSA_256 | method::ECDSA_384 | method::ECDSA_521),
                    k,
                ) => {
                    return Err(AuthError::Unsupported(format!(
                        "AUTH method {m} with a {k:?} key"
                    )))
                }
                (m, _) => return Err(AuthError::WrongMethod(m)),
            };
        sig::UnparsedPublicKey::new(alg, &self.bytes)
            .verify(octets, signature)
            .map_err(|_| {
                AuthError::BadSignature(format!(
                    "{used} AUTH does not verify with the certificate's key"
                ))
            })?;
        Ok(used)
    }
}

fn bad(s: &str) -> AuthError {
    AuthError::BadSignature(s.into())
}

fn verification_alg(s: Scheme, k: KeyKind) -> Option<&'static dyn VerificationAlgorithm> {
    use Hash::*;
    use KeyKind::*;
    Some(match (s, k) {
        (Scheme::RsaPkcs1(Sha256), Rsa) => &sig::RSA_PKCS1_2048_8192_SHA256,
        (Scheme::RsaPkcs1(Sha384), Rsa) => &sig::RSA_PKCS1_2048_8192_SHA384,
        (Scheme::RsaPkcs1(Sha512), Rsa) => &sig::RSA_PKCS1_2048_8192_SHA512,
        (Scheme::RsaPss(Sha256), Rsa) => &sig::RSA_PSS_2048_8192_SHA256,
        (Scheme::RsaPss(Sha384), Rsa) => &sig::RSA_PSS_2048_8192_SHA384,
        (Scheme::RsaPss(Sha512), Rsa) => &sig::RSA_PSS_2048_8192_SHA512,
        (Scheme::Ecdsa(Sha256), P256) => &sig::ECDSA_P256_SHA256_ASN1,
        (Scheme::Ecdsa(Sha384), P256) => &sig::ECDSA_P256_SHA384_ASN1,
        (Scheme::Ecdsa(Sha512), P256) => &sig::ECDSA_P256_SHA512_ASN1,
        (Scheme::Ecdsa(Sha256), P384) => &sig::ECDSA_P384_SHA256_ASN1,
        (Scheme::Ecdsa(Sha384), P384) => &sig::ECDSA_P384_SHA384_ASN1,
        (Scheme::Ecdsa(Sha512), P384) => &sig::ECDSA_P384_SHA512_ASN1,
        (Scheme::Ecdsa(Sha256), P521) => &sig::ECDSA_P521_SHA256_ASN1,
        (Scheme::Ecdsa(Sha384), P521) => &sig::ECDSA_P521_SHA384_ASN1,
        (Scheme::Ecdsa(Sha512), P521) => &sig::ECDSA_P521_SHA512_ASN1,
        (Scheme::Ed25519, Ed25519) => &sig::ED25519,
        _ => return None,
    })
}

/// Splits method-14 AUTH data into the AlgorithmIdentifier and signature
/// (for tests and tools).
pub fn auth_data(scheme: Scheme, signature: &[u8]) -> Vec<u8> {
    let id = scheme.alg_id();
    let mut out = Vec::with_capacity(1 + id.len() + signature.len());
    out.push(id.len() as u8);
    out.extend_from_slice(&id);
    out.extend_from_slice(signature);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn rfc7427_appendix_a_encodings() {
        // A.1.3 sha256WithRSAEncryption, A.3.1 ecdsa-with-sha256.
        assert_eq!(
            Scheme::RsaPkcs1(Hash::Sha256).alg_id(),
            hex("300d06092a864886f70d01010b0500")
        );
        assert_eq!(
            Scheme::Ecdsa(Hash::Sha256).alg_id(),
            hex("300a06082a8648ce3d040302")
        );
        assert_eq!(Scheme::Ed25519.alg_id(), hex("300506032b6570"));
        for s in [
            Scheme::RsaPkcs1(Hash::Sha256),
            Scheme::RsaPkcs1(Hash::Sha384),
            Scheme::RsaPkcs1(Hash::Sha512),
            Scheme::RsaPss(Hash::Sha256),
            Scheme::RsaPss(Hash::Sha384),
            Scheme::RsaPss(Hash::Sha512),
            Scheme::Ecdsa(Hash::Sha256),
            Scheme::Ecdsa(Hash::Sha384),
            Scheme::Ecdsa(Hash::Sha512),
            Scheme::Ed25519,
        ] {
            assert_eq!(Scheme::from_alg_id(&s.alg_id()), Ok(s), "{s:?}");
        }
    }

    #[test]
    fn pss_with_strongswan_parameters() {
        // RSASSA-PSS, SHA-256, MGF1-SHA-256, salt 32, as charon sends it.
        let id = hex(
            "3041 0609 2a864886f70d01010a 3034 a00f 300d 0609 608648016503040201 0500
             a11c 301a 0609 2a864886f70d010108 300d 0609 608648016503040201 0500
             a203 0201 20",
        );
        assert_eq!(Scheme::RsaPss(Hash::Sha256).alg_id(), id);
        // Hash parameters left out (absent instead of NULL) read the same.
        let id = hex(
            "303d 0609 2a864886f70d01010a 3030 a00d 300b 0609 608648016503040201
             a11a 3018 0609 2a864886f70d010108 300b 0609 608648016503040201
             a203 0201 20",
        );
        assert_eq!(Scheme::from_alg_id(&id), Ok(Scheme::RsaPss(Hash::Sha256)));
        // Salt 20 is refused: aws-lc-rs checks salt = hash length.
        let mut salt20 = Scheme::RsaPss(Hash::Sha256).alg_id();
        *salt20.last_mut().unwrap() = 20;
        assert!(Scheme::from_alg_id(&salt20).is_err());
        // sha1WithRSAEncryption and junk are refused.
        assert!(Scheme::from_alg_id(&hex("300d06092a864886f70d0101050500")).is_err());
        assert!(Scheme::from_alg_id(&[0x30, 0x80]).is_err());
        assert!(Scheme::from_alg_id(&[]).is_err());
    }

    #[test]
    fn hash_notify() {
        let h = SigHashes::parse(&[0, 2, 0, 3, 0, 4, 0, 5, 0, 9, 0xff]);
        assert!(h.has(Hash::Sha256) && h.has(Hash::Sha384) && h.has_identity());
        assert_eq!(SigHashes::ours().emit(), vec![0, 2, 0, 3, 0, 4, 0, 5]);
        assert_eq!(
            SigHashes::parse(&SigHashes::ours().emit()),
            SigHashes::ours()
        );
        assert!(SigHashes::parse(&[0, 1]).has(Hash::Sha256).eq(&false));
        assert!(SigHashes::default().is_empty());
    }

    #[test]
    fn tlv_lengths() {
        assert_eq!(tlv(4, &[1; 3]), vec![4, 3, 1, 1, 1]);
        assert_eq!(&tlv(4, &[0; 200])[..3], &[4, 0x81, 200]);
        assert_eq!(&tlv(4, &[0; 300])[..4], &[4, 0x82, 1, 44]);
    }
}
