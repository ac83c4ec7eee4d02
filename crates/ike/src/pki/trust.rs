//! What a peer's certificate is checked against: trust anchors, CRLs, a
//! certificate configured for the peer, and the chain limit.
//!
//! A CERT payload arrives before its sender is authenticated, so the
//! order of the checks bounds what a forged one costs (RFC 7296 §2.6's
//! spirit, RFC 4945 §5): counts and sizes first; then parsing and the
//! cheap checks — identity, validity times, usage, a path to a known
//! anchor by issuer names, CRL serials; only then one path verification
//! (rustls-webpki: every signature of that one path, CRL signatures, EKU),
//! and the AUTH signature last ([`crate::pki::scheme::PublicKey::verify`]).

use super::name::{cert_has_id, dn_text, id_matches};
use super::scheme::PublicKey;
use super::{iso8601, key_hash, load_certs, unix_secs, AuthError, CertInfo, MAX_CERT_LEN};
use crate::payload::{cert, Identity};
use rustls_pki_types::{CertificateDer, TrustAnchor, UnixTime};
use std::fmt;
use std::time::SystemTime;
use webpki::{
    CertRevocationList, ExtendedKeyUsageValidator, KeyPurposeId, KeyPurposeIdIter,
    OwnedCertRevocationList, RevocationCheckDepth, RevocationOptionsBuilder, UnknownStatusPolicy,
};
use x509_parser::certificate::X509Certificate;
use x509_parser::parse_x509_certificate;

/// A trust anchor: webpki's form, its subject and key hash (CERTREQ).
struct Anchor {
    ta: TrustAnchor<'static>,
    /// Subject DER, tag included (webpki keeps only the contents).
    subject: Vec<u8>,
    hash: [u8; cert::CA_HASH_LEN],
    info: CertInfo,
}

/// Trust anchors, CRLs, an optional certificate configured for the peer,
/// and the chain limit.
pub struct TrustStore {
    anchors: Vec<Anchor>,
    /// Each CRL with its issuer DER (tag included).
    crls: Vec<(CertRevocationList<'static>, Vec<u8>)>,
    crl_info: Vec<CrlInfo>,
    pinned: Option<Vec<u8>>,
    /// Certificates from the end entity up to, not counting, the anchor.
    pub max_chain: usize,
}

/// A loaded CRL, for `vecgate check` and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrlInfo {
    /// Issuer DN.
    pub issuer: String,
    /// Revoked serials listed.
    pub revoked: usize,
    /// nextUpdate, seconds since the epoch.
    pub next_update: Option<i64>,
}

impl fmt::Debug for TrustStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrustStore")
            .field(
                "anchors",
                &self
                    .anchors
                    .iter()
                    .map(|a| &a.info.subject)
                    .collect::<Vec<_>>(),
            )
            .field("crls", &self.crl_info)
            .field("pinned", &self.pinned.is_some())
            .field("max_chain", &self.max_chain)
            .finish()
    }
}

impl Default for TrustStore {
    fn default() -> Self {
        TrustStore::new(super::DEFAULT_MAX_CHAIN)
    }
}

/// A peer's certificate that passed: what `show ike` reports and what a
/// rekey checks again.
#[derive(Clone, PartialEq, Eq)]
pub struct PeerCert {
    /// The end entity.
    pub info: CertInfo,
    /// The path as verified: end entity first, then intermediates (DER).
    pub chain: Vec<Vec<u8>>,
    key: PublicKey,
}

impl fmt::Debug for PeerCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerCert")
            .field("info", &self.info)
            .field("chain", &self.chain.len())
            .finish()
    }
}

impl PeerCert {
    /// The end entity's public key (verifies the AUTH payload).
    pub fn key(&self) -> &PublicKey {
        &self.key
    }

    /// Rebuilt from a chain (HA sync); the chain is parsed, not verified:
    /// the next rekey verifies it ([`TrustStore::recheck`]).
    pub fn from_chain(chain: Vec<Vec<u8>>) -> Result<PeerCert, AuthError> {
        let ee = chain.first().ok_or(AuthError::NoCertificate)?;
        let c = parse(ee)?;
        Ok(PeerCert {
            info: CertInfo::of(&c),
            key: PublicKey::from_spki(c.public_key())?,
            chain,
        })
    }
}

fn parse(der: &[u8]) -> Result<X509Certificate<'_>, AuthError> {
    if der.len() > MAX_CERT_LEN {
        return Err(AuthError::CertificateTooLarge(der.len()));
    }
    match parse_x509_certificate(der) {
        Ok(([], c)) => Ok(c),
        Ok(_) => Err(AuthError::Malformed("trailing bytes".into())),
        Err(e) => Err(AuthError::Malformed(e.to_string())),
    }
}

/// notBefore <= now <= notAfter.
fn check_time(c: &X509Certificate, now: i64) -> Result<(), AuthError> {
    let v = c.validity();
    if now > v.not_after.timestamp() {
        return Err(AuthError::Expired {
            subject: c.subject().to_string(),
            not_after: v.not_after.timestamp(),
        });
    }
    if now < v.not_before.timestamp() {
        return Err(AuthError::NotYetValid {
            subject: c.subject().to_string(),
            not_before: v.not_before.timestamp(),
        });
    }
    Ok(())
}

/// keyUsage, when present, allows signing (RFC 4945 §5.1.3.2).
fn check_signer_usage(c: &X509Certificate) -> Result<(), AuthError> {
    match c.key_usage() {
        Ok(Some(ku)) if !(ku.value.digital_signature() || ku.value.non_repudiation()) => {
            Err(AuthError::Usage(format!(
                "keyUsage of \"{}\" allows no signatures",
                c.subject()
            )))
        }
        Ok(_) => Ok(()),
        Err(e) => Err(AuthError::Malformed(e.to_string())),
    }
}

/// An issuer is a CA (basicConstraints) whose keyUsage, when present,
/// allows certificate signing (RFC 5280 §4.2.1.3, §4.2.1.9).
fn check_ca(c: &X509Certificate) -> Result<(), AuthError> {
    let ca = matches!(c.basic_constraints(), Ok(Some(b)) if b.value.ca);
    let signs = match c.key_usage() {
        Ok(Some(ku)) => ku.value.key_cert_sign(),
        _ => true,
    };
    if !(ca && signs) {
        return Err(AuthError::Usage(format!(
            "\"{}\" is not a CA that may sign certificates",
            c.subject()
        )));
    }
    Ok(())
}

/// Extended key usages an IKE peer's certificate may carry: none at all,
/// or one of these (RFC 4945 §5.1.3.12 asks for ipsecIKE or any; the
/// TLS and IPsec end-system purposes are what deployed CAs issue, and
/// strongSwan's ikeIntermediate).
struct IkeEku;

const EKUS: &[&[u8]] = &[
    &[0x2b, 6, 1, 5, 5, 7, 3, 1],  // serverAuth
    &[0x2b, 6, 1, 5, 5, 7, 3, 2],  // clientAuth
    &[0x2b, 6, 1, 5, 5, 7, 3, 5],  // ipsecEndSystem
    &[0x2b, 6, 1, 5, 5, 7, 3, 6],  // ipsecTunnel
    &[0x2b, 6, 1, 5, 5, 7, 3, 7],  // ipsecUser
    &[0x2b, 6, 1, 5, 5, 7, 3, 17], // ipsecIKE
    &[0x2b, 6, 1, 5, 5, 8, 2, 2],  // ikeIntermediate
    &[0x55, 0x1d, 0x25, 0x00],     // anyExtendedKeyUsage
];

impl ExtendedKeyUsageValidator for IkeEku {
    fn validate(&self, iter: KeyPurposeIdIter<'_, '_>) -> Result<(), webpki::Error> {
        let mut present = Vec::new();
        for id in iter {
            let id = id?;
            if EKUS.iter().any(|e| KeyPurposeId::new(e) == id) {
                return Ok(());
            }
            present.push(id.to_decoded_oid());
        }
        if present.is_empty() {
            return Ok(());
        }
        Err(webpki::Error::RequiredEkuNotFoundContext(
            webpki::RequiredEkuNotFoundContext {
                required: webpki::KeyUsage::required(EKUS[5]),
                present,
            },
        ))
    }
}

/// The signature algorithms a chain may use.
static ALGS: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] = &[
    webpki::aws_lc_rs::ECDSA_P256_SHA256,
    webpki::aws_lc_rs::ECDSA_P256_SHA384,
    webpki::aws_lc_rs::ECDSA_P256_SHA512,
    webpki::aws_lc_rs::ECDSA_P384_SHA256,
    webpki::aws_lc_rs::ECDSA_P384_SHA384,
    webpki::aws_lc_rs::ECDSA_P384_SHA512,
    webpki::aws_lc_rs::ECDSA_P521_SHA256,
    webpki::aws_lc_rs::ECDSA_P521_SHA384,
    webpki::aws_lc_rs::ECDSA_P521_SHA512,
    webpki::aws_lc_rs::ED25519,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA384,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA512,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
    webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
    webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
    webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
];

fn chain_error(e: webpki::Error, subject: &str, issuer: &str) -> AuthError {
    use webpki::Error as W;
    let secs = |t: UnixTime| i64::try_from(t.as_secs()).unwrap_or(i64::MAX);
    match e {
        W::CertExpired { not_after, .. } => AuthError::Expired {
            subject: subject.into(),
            not_after: secs(not_after),
        },
        W::CertNotValidYet { not_before, .. } => AuthError::NotYetValid {
            subject: subject.into(),
            not_before: secs(not_before),
        },
        W::CertRevoked => AuthError::Revoked {
            subject: subject.into(),
        },
        W::UnknownIssuer => AuthError::UnknownCa {
            issuer: issuer.into(),
        },
        W::InvalidSignatureForPublicKey => {
            AuthError::BadSignature("a certificate of the chain is not signed by its issuer".into())
        }
        W::RequiredEkuNotFoundContext(_) => {
            AuthError::Usage("extendedKeyUsage allows no IKE use".into())
        }
        W::CaUsedAsEndEntity | W::EndEntityUsedAsCa | W::PathLenConstraintViolated => {
            AuthError::Usage(format!("{e:?}"))
        }
        other => AuthError::Chain(format!("{other:?}")),
    }
}

impl TrustStore {
    /// Empty: no anchor, no CRL, chains up to `max_chain` certificates.
    pub fn new(max_chain: usize) -> TrustStore {
        TrustStore {
            anchors: Vec::new(),
            crls: Vec::new(),
            crl_info: Vec::new(),
            pinned: None,
            max_chain: max_chain.max(1),
        }
    }

    /// Adds the certificates of a CA file (PEM, several allowed, or one
    /// DER) as trust anchors; their number.
    pub fn add_anchors(&mut self, bytes: &[u8]) -> Result<usize, String> {
        let certs = load_certs(bytes)?;
        for (i, der) in certs.iter().enumerate() {
            let c = parse(der).map_err(|e| format!("certificate {}: {e}", i + 1))?;
            let ta = webpki::anchor_from_trusted_cert(&CertificateDer::from(der.as_slice()))
                .map_err(|e| format!("certificate {}: {e:?}", i + 1))?
                .to_owned();
            self.anchors.push(Anchor {
                ta,
                subject: c.subject().as_raw().to_vec(),
                hash: key_hash(c.public_key().raw),
                info: CertInfo::of(&c),
            });
        }
        Ok(certs.len())
    }

    /// Adds the CRLs of a file (PEM `X509 CRL` sections or one DER CRL);
    /// their number.
    pub fn add_crls(&mut self, bytes: &[u8]) -> Result<usize, String> {
        let ders = super::load_crls(bytes)?;
        for (i, der) in ders.iter().enumerate() {
            let crl = OwnedCertRevocationList::from_der(der)
                .map_err(|e| format!("CRL {}: {e:?}", i + 1))?;
            let (_, parsed) =
                x509_parser::parse_x509_crl(der).map_err(|e| format!("CRL {}: {e}", i + 1))?;
            self.crl_info.push(CrlInfo {
                issuer: parsed.issuer().to_string(),
                revoked: parsed.iter_revoked_certificates().count(),
                next_update: parsed.next_update().map(|t| t.timestamp()),
            });
            self.crls.push((
                CertRevocationList::Owned(crl),
                parsed.issuer().as_raw().to_vec(),
            ));
        }
        Ok(ders.len())
    }

    /// The peer's own certificate, used when it sends none (RFC 7296
    /// §3.6 allows leaving CERT out when the peer has it). Without trust
    /// anchors it is trusted as it is (validity and identity still
    /// checked).
    pub fn pin_peer(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut certs = load_certs(bytes)?;
        if certs.len() != 1 {
            return Err(format!(
                "the peer's certificate file holds {} certificates, not one",
                certs.len()
            ));
        }
        let der = certs.remove(0);
        parse(&der).map_err(|e| e.to_string())?;
        self.pinned = Some(der);
        Ok(())
    }

    /// Subjects of the trust anchors (for logs and `vecgate check`).
    pub fn anchors(&self) -> impl Iterator<Item = &CertInfo> {
        self.anchors.iter().map(|a| &a.info)
    }

    /// The loaded CRLs.
    pub fn crls(&self) -> &[CrlInfo] {
        &self.crl_info
    }

    /// Whether the peer can be authenticated at all: an anchor or its
    /// certificate configured.
    pub fn is_usable(&self) -> bool {
        !self.anchors.is_empty() || self.pinned.is_some()
    }

    /// SHA-1 hashes of the anchors' keys, for our CERTREQ (RFC 7296 §3.7).
    pub fn ca_hashes(&self) -> impl Iterator<Item = &[u8; cert::CA_HASH_LEN]> {
        self.anchors.iter().map(|a| &a.hash)
    }

    /// Checks a peer's certificates (the X.509 CERT payloads' data, end
    /// entity first) for the identity `id` it claims, which must be what
    /// `remote_id` accepts. `now` is the time of day.
    pub fn validate(
        &self,
        certs: &[&[u8]],
        id: &Identity,
        remote_id: &Identity,
        now: SystemTime,
    ) -> Result<PeerCert, AuthError> {
        self.check(certs, Some((id, remote_id)), now)
    }

    /// Checks a chain accepted before against the current anchors and
    /// CRLs (at a rekey, after a reload): validity, revocation, path.
    pub fn recheck(&self, peer: &PeerCert, now: SystemTime) -> Result<(), AuthError> {
        let certs: Vec<&[u8]> = peer.chain.iter().map(Vec::as_slice).collect();
        self.check(&certs, None, now).map(|_| ())
    }

    fn check(
        &self,
        certs: &[&[u8]],
        ids: Option<(&Identity, &Identity)>,
        now: SystemTime,
    ) -> Result<PeerCert, AuthError> {
        // Counts and sizes before parsing anything; the peer may add its
        // root to the path, hence one more than the limit.
        if certs.len() > self.max_chain + 1 {
            return Err(AuthError::TooManyCertificates(certs.len()));
        }
        if let Some(big) = certs.iter().find(|c| c.len() > MAX_CERT_LEN) {
            return Err(AuthError::CertificateTooLarge(big.len()));
        }
        let ee_der: &[u8] = match (certs.first(), &self.pinned) {
            (Some(c), _) => c,
            (None, Some(p)) => p,
            (None, None) => return Err(AuthError::NoCertificate),
        };
        let ee = parse(ee_der)?;
        let subject = ee.subject().to_string();
        if let Some((id, remote_id)) = ids {
            if !id_matches(remote_id, id) {
                return Err(AuthError::IdentityMismatch(format!(
                    "peer ID \"{id}\" is not the configured remote_id \"{remote_id}\""
                )));
            }
            if !cert_has_id(&ee, id) {
                return Err(AuthError::IdentityMismatch(format!(
                    "peer ID \"{id}\" is not in its certificate \"{subject}\""
                )));
            }
        }
        let secs = unix_secs(now);
        check_time(&ee, secs)?;
        check_signer_usage(&ee)?;
        let key = PublicKey::from_spki(ee.public_key())?;
        let peer = |chain: Vec<Vec<u8>>| PeerCert {
            info: CertInfo::of(&ee),
            chain,
            key: key.clone(),
        };
        if self.anchors.is_empty() {
            // Only a configured peer certificate is trusted then.
            return match &self.pinned {
                Some(p) if p.as_slice() == ee_der => Ok(peer(vec![ee_der.to_vec()])),
                _ => Err(AuthError::UnknownCa {
                    issuer: ee.issuer().to_string(),
                }),
            };
        }
        // A path to an anchor by issuer names, every link parsed and its
        // times and CA flags checked; no signature yet.
        let mut rest: Vec<(&[u8], X509Certificate)> = Vec::new();
        for der in certs.iter().skip(1) {
            rest.push((der, parse(der)?));
        }
        let mut path: Vec<(&[u8], X509Certificate)> = Vec::new();
        let mut issuer: &[u8] = ee.tbs_certificate.issuer.as_raw();
        loop {
            if self.anchors.iter().any(|a| a.subject == issuer) {
                break;
            }
            if path.len() + 1 >= self.max_chain {
                return Err(AuthError::ChainTooLong(self.max_chain));
            }
            let Some(i) = rest
                .iter()
                .position(|(_, c)| c.subject().as_raw() == issuer)
            else {
                return Err(AuthError::UnknownCa {
                    issuer: dn_text(issuer),
                });
            };
            let (der, c) = rest.swap_remove(i);
            check_time(&c, secs)?;
            check_ca(&c)?;
            issuer = c.tbs_certificate.issuer.as_raw();
            path.push((der, c));
        }
        // Revoked serials, by the CRLs of each link's issuer (their
        // signatures are checked in the path verification below).
        for c in std::iter::once(&ee).chain(path.iter().map(|(_, c)| c)) {
            let of_issuer = self.crls.iter().filter(|(_, i)| i == c.issuer().as_raw());
            for (crl, _) in of_issuer {
                if matches!(crl.find_serial(c.raw_serial()), Ok(Some(_))) {
                    return Err(AuthError::Revoked {
                        subject: c.subject().to_string(),
                    });
                }
            }
        }
        // One path verification: signatures, CRL signatures, EKU,
        // constraints.
        let inter: Vec<CertificateDer> =
            path.iter().map(|(d, _)| CertificateDer::from(*d)).collect();
        let anchors: Vec<TrustAnchor> = self.anchors.iter().map(|a| a.ta.clone()).collect();
        let crls: Vec<&CertRevocationList> = self.crls.iter().map(|(c, _)| c).collect();
        let revocation = RevocationOptionsBuilder::new(&crls).ok().map(|b| {
            b.with_depth(RevocationCheckDepth::Chain)
                .with_status_policy(UnknownStatusPolicy::Allow)
                .build()
        });
        let ee_cert = CertificateDer::from(ee_der);
        let end = webpki::EndEntityCert::try_from(&ee_cert)
            .map_err(|e| AuthError::Malformed(format!("{e:?}")))?;
        let time = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
            u64::try_from(secs).unwrap_or(0),
        ));
        end.verify_for_usage(ALGS, &anchors, &inter, time, IkeEku, revocation, None)
            .map_err(|e| chain_error(e, &subject, &ee.issuer().to_string()))?;
        let mut chain = vec![ee_der.to_vec()];
        chain.extend(path.iter().map(|(d, _)| d.to_vec()));
        Ok(peer(chain))
    }
}

impl fmt::Display for CrlInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CRL of \"{}\", {} revoked", self.issuer, self.revoked)?;
        if let Some(n) = self.next_update {
            write!(f, ", next update {}", iso8601(n))?;
        }
        Ok(())
    }
}
