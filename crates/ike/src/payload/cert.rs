//! CERT and CERTREQ payloads (RFC 7296 §3.6, §3.7): an encoding byte and
//! the certificate, or a list of SHA-1 hashes of trusted CAs' public keys.

use super::Payload;
use crate::error::{Error, Result};

/// Certificate encodings (RFC 7296 §3.6).
pub mod encoding {
    /// X.509 Certificate - Signature: a DER certificate.
    pub const X509_SIGNATURE: u8 = 4;
    /// Hash and URL of X.509 certificate (not fetched by us).
    pub const HASH_URL_X509: u8 = 12;
}

/// Length of one CA hash in a CERTREQ (SHA-1 of a SubjectPublicKeyInfo).
pub const CA_HASH_LEN: usize = 20;
/// CA hashes read from one CERTREQ payload; more are ignored (bounds
/// the work a peer's request costs).
pub const MAX_CA_HASHES: usize = 64;

/// Body of a CERT or CERTREQ payload: (encoding, data).
pub(super) fn decode(body: &[u8], what: &'static str) -> Result<(u8, Vec<u8>)> {
    let (&enc, data) = body.split_first().ok_or(Error::Truncated(what))?;
    Ok((enc, data.to_vec()))
}

/// The CA hashes of a CERTREQ for X.509 certificates (at most
/// [`MAX_CA_HASHES`]; a trailing partial hash is ignored).
pub fn ca_hashes(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    data.chunks_exact(CA_HASH_LEN).take(MAX_CA_HASHES)
}

/// A CERT payload carrying a DER certificate.
pub fn x509(der: &[u8]) -> Payload {
    Payload::Cert {
        encoding: encoding::X509_SIGNATURE,
        data: der.to_vec(),
    }
}

/// A CERTREQ for X.509 certificates from the CAs with these key hashes.
pub fn request<'a>(hashes: impl IntoIterator<Item = &'a [u8; CA_HASH_LEN]>) -> Payload {
    Payload::CertReq {
        encoding: encoding::X509_SIGNATURE,
        data: hashes.into_iter().flatten().copied().collect(),
    }
}
