//! Public-key authentication for IKE_AUTH: certificates, keys and
//! signatures (RFC 7296 §2.15, §3.6–§3.8; RFC 7427; RFC 4945 for what an
//! IKE peer checks in a certificate).
//!
//! - [`key`]: our private key (RSA, ECDSA P-256/P-384/P-521, Ed25519),
//!   loaded from PEM or DER, and the signatures it makes;
//! - [`scheme`]: the AUTH methods and RFC 7427 signature schemes on the
//!   wire (AlgorithmIdentifier, the SIGNATURE_HASH_ALGORITHMS notify) and
//!   verification of a peer's AUTH with aws-lc-rs;
//! - [`name`]: identities against certificates (subject DN, subjectAltName)
//!   and the configured `remote_id`;
//! - [`local`]: our certificate chain with its key ([`LocalCert`]);
//! - [`trust`]: the trust anchors, CRLs and limits a peer's chain is
//!   checked against ([`TrustStore`]), cheap checks first and one path
//!   verification (rustls-webpki) per IKE_AUTH.
//!
//! Certificates are parsed with x509-parser and verified with
//! rustls-webpki (aws-lc-rs algorithms): no ASN.1 is parsed here.

pub mod key;
pub mod local;
pub mod name;
pub mod scheme;
pub mod trust;

pub use key::SigningKey;
pub use local::LocalCert;
pub use scheme::{AuthMethod, SigHashes};
pub use trust::{CrlInfo, PeerCert, TrustStore};

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Largest certificate (DER) taken from a CERT payload or a file: a
/// 4096-bit RSA certificate with a few names is under 2 KiB.
pub const MAX_CERT_LEN: usize = 8192;
/// Default for [`TrustStore::max_chain`]: certificates from the end entity
/// up to, not counting, the trust anchor.
pub const DEFAULT_MAX_CHAIN: usize = 4;

/// Why a peer's public-key authentication was refused. The text is what
/// the log says after "AUTHENTICATION_FAILED:".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// The peer sent no certificate and none is configured for it.
    NoCertificate,
    /// More CERT payloads than the chain limit allows.
    TooManyCertificates(usize),
    /// A certificate larger than [`MAX_CERT_LEN`].
    CertificateTooLarge(usize),
    /// A certificate that does not parse, or of an encoding we do not take.
    Malformed(String),
    /// Past notAfter.
    Expired {
        /// Subject of the expired certificate.
        subject: String,
        /// Its notAfter, seconds since the epoch.
        not_after: i64,
    },
    /// Before notBefore.
    NotYetValid {
        /// Subject of the certificate.
        subject: String,
        /// Its notBefore, seconds since the epoch.
        not_before: i64,
    },
    /// Listed in a configured CRL.
    Revoked {
        /// Subject of the revoked certificate.
        subject: String,
    },
    /// No configured trust anchor issued the chain.
    UnknownCa {
        /// The issuer that was not found.
        issuer: String,
    },
    /// The path to an anchor is longer than [`TrustStore::max_chain`].
    ChainTooLong(usize),
    /// The peer's ID is not the configured `remote_id`, or not in the
    /// certificate.
    IdentityMismatch(String),
    /// The AUTH signature (or a signature in the chain) does not verify.
    BadSignature(String),
    /// An AUTH method or signature scheme we do not accept.
    Unsupported(String),
    /// basicConstraints / keyUsage / extendedKeyUsage forbid this use.
    Usage(String),
    /// The peer authenticated with a method other than the configured one
    /// (e.g. a PSK where a certificate is required).
    WrongMethod(u8),
    /// Anything else the path verification refused.
    Chain(String),
}

impl AuthError {
    /// A short name of the reason, for counters and metric labels.
    pub fn kind(&self) -> &'static str {
        match self {
            AuthError::NoCertificate => "no-certificate",
            AuthError::TooManyCertificates(_) => "too-many-certificates",
            AuthError::CertificateTooLarge(_) => "certificate-too-large",
            AuthError::Malformed(_) => "malformed-certificate",
            AuthError::Expired { .. } => "expired",
            AuthError::NotYetValid { .. } => "not-yet-valid",
            AuthError::Revoked { .. } => "revoked",
            AuthError::UnknownCa { .. } => "unknown-ca",
            AuthError::ChainTooLong(_) => "chain-too-long",
            AuthError::IdentityMismatch(_) => "identity-mismatch",
            AuthError::BadSignature(_) => "bad-signature",
            AuthError::Unsupported(_) => "unsupported",
            AuthError::Usage(_) => "certificate-usage",
            AuthError::WrongMethod(_) => "wrong-method",
            AuthError::Chain(_) => "chain",
        }
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::NoCertificate => f.write_str("no certificate from the peer"),
            AuthError::TooManyCertificates(n) => write!(f, "too many certificates ({n})"),
            AuthError::CertificateTooLarge(n) => write!(f, "certificate too large ({n} bytes)"),
            AuthError::Malformed(s) => write!(f, "malformed certificate: {s}"),
            AuthError::Expired { subject, not_after } => write!(
                f,
                "certificate expired: \"{subject}\" not after {}",
                iso8601(*not_after)
            ),
            AuthError::NotYetValid {
                subject,
                not_before,
            } => write!(
                f,
                "certificate not yet valid: \"{subject}\" not before {}",
                iso8601(*not_before)
            ),
            AuthError::Revoked { subject } => write!(f, "certificate revoked: \"{subject}\""),
            AuthError::UnknownCa { issuer } => write!(f, "unknown CA: \"{issuer}\""),
            AuthError::ChainTooLong(n) => write!(f, "chain too long (limit {n})"),
            AuthError::IdentityMismatch(s) => write!(f, "identity mismatch: {s}"),
            AuthError::BadSignature(s) => write!(f, "bad signature: {s}"),
            AuthError::Unsupported(s) => write!(f, "unsupported: {s}"),
            AuthError::Usage(s) => write!(f, "certificate usage: {s}"),
            AuthError::WrongMethod(m) => write!(f, "wrong auth method {m}"),
            AuthError::Chain(s) => write!(f, "chain: {s}"),
        }
    }
}

/// Subject, issuer, serial and validity of a certificate, as text and
/// seconds since the epoch: what `show ike`, metrics and logs report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// Subject DN.
    pub subject: String,
    /// Issuer DN.
    pub issuer: String,
    /// Serial number, hex with colons.
    pub serial: String,
    /// notBefore.
    pub not_before: i64,
    /// notAfter.
    pub not_after: i64,
}

impl CertInfo {
    /// Of a parsed certificate.
    pub fn of(c: &x509_parser::certificate::X509Certificate) -> CertInfo {
        CertInfo {
            subject: c.subject().to_string(),
            issuer: c.issuer().to_string(),
            serial: c.raw_serial_as_string(),
            not_before: c.validity().not_before.timestamp(),
            not_after: c.validity().not_after.timestamp(),
        }
    }

    /// Of a DER certificate.
    pub fn from_der(der: &[u8]) -> Result<CertInfo, String> {
        x509_parser::parse_x509_certificate(der)
            .map(|(_, c)| CertInfo::of(&c))
            .map_err(|e| e.to_string())
    }
}

fn is_pem(bytes: &[u8]) -> bool {
    bytes.windows(10).any(|w| w == b"-----BEGIN")
}

/// The certificates of a file: every PEM `CERTIFICATE` section, or the
/// whole file as one DER certificate. Each at most [`MAX_CERT_LEN`].
pub fn load_certs(bytes: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    use rustls_pki_types::pem::PemObject;
    let certs: Vec<Vec<u8>> = if is_pem(bytes) {
        rustls_pki_types::CertificateDer::pem_slice_iter(bytes)
            .map(|c| c.map(|c| c.to_vec()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("PEM: {e}"))?
    } else {
        vec![bytes.to_vec()]
    };
    if certs.is_empty() {
        return Err("no CERTIFICATE in the PEM data".into());
    }
    if let Some(c) = certs.iter().find(|c| c.len() > MAX_CERT_LEN) {
        return Err(format!(
            "a certificate of {} bytes (at most {MAX_CERT_LEN})",
            c.len()
        ));
    }
    Ok(certs)
}

/// The CRLs of a file: every PEM `X509 CRL` section, or the whole file as
/// one DER CRL.
pub fn load_crls(bytes: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    use rustls_pki_types::pem::PemObject;
    let crls: Vec<Vec<u8>> = if is_pem(bytes) {
        rustls_pki_types::CertificateRevocationListDer::pem_slice_iter(bytes)
            .map(|c| c.map(|c| c.to_vec()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("PEM: {e}"))?
    } else {
        vec![bytes.to_vec()]
    };
    if crls.is_empty() {
        return Err("no X509 CRL in the PEM data".into());
    }
    Ok(crls)
}

/// SHA-1 of a DER SubjectPublicKeyInfo: how CERTREQ names a CA (RFC 7296
/// §3.7).
pub fn key_hash(spki: &[u8]) -> [u8; crate::payload::cert::CA_HASH_LEN] {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, spki);
    let mut out = [0u8; crate::payload::cert::CA_HASH_LEN];
    out.copy_from_slice(d.as_ref());
    out
}

/// Seconds since the epoch for `t` (negative before 1970).
pub fn unix_secs(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// `t` (seconds since the epoch) as a time of day.
pub fn system_time(secs: i64) -> SystemTime {
    match u64::try_from(secs) {
        Ok(s) => UNIX_EPOCH + Duration::from_secs(s),
        Err(_) => UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()),
    }
}

/// `2026-05-01T12:00:00Z` for seconds since the epoch (UTC, proleptic
/// Gregorian; days from the civil-from-days algorithm).
pub fn iso8601(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Whole days from `now` until `not_after` (negative once past).
pub fn days_left(not_after: i64, now: SystemTime) -> i64 {
    (not_after - unix_secs(now)).div_euclid(86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(253_402_300_799), "9999-12-31T23:59:59Z");
        assert_eq!(iso8601(-1), "1969-12-31T23:59:59Z");
        let t = system_time(1_700_000_000);
        assert_eq!(unix_secs(t), 1_700_000_000);
        assert_eq!(unix_secs(system_time(-5)), -5);
        assert_eq!(days_left(1_700_000_000 + 86_400 * 30 + 5, t), 30);
        assert_eq!(days_left(1_700_000_000 - 1, t), -1);
    }
}
