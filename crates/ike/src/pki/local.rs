//! Our certificate chain and key: what we send in CERT payloads and sign
//! AUTH with (RFC 7296 §3.6, §2.15).

use super::key::SigningKey;
use super::name::{cert_has_id, cert_ids};
use super::scheme::SigHashes;
use super::{load_certs, AuthError, AuthMethod, CertInfo};
use crate::payload::{cert, Identity, Payload};
use std::fmt;
use x509_parser::parse_x509_certificate;

/// Our end-entity certificate, the intermediates sent with it, and the
/// private key of the end entity.
pub struct LocalCert {
    /// DER certificates: the end entity first, then its issuers.
    chain: Vec<Vec<u8>>,
    /// SHA-1 of each intermediate's SubjectPublicKeyInfo (chain[1..]),
    /// to match the CA hashes of a peer's CERTREQ.
    key_hashes: Vec<[u8; cert::CA_HASH_LEN]>,
    key: SigningKey,
    info: CertInfo,
    /// RSA keys sign with RSASSA-PSS (else PKCS#1 v1.5) in method 14.
    pub rsa_pss: bool,
    /// Send CERT payloads (off when the peer has our certificate
    /// configured, strongSwan's `send_cert = never`).
    pub send_certs: bool,
}

impl fmt::Debug for LocalCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalCert")
            .field("subject", &self.info.subject)
            .field("chain", &self.chain.len())
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl LocalCert {
    /// From a certificate file's bytes (PEM with the end entity first and
    /// any intermediates after it, or one DER certificate) and the key.
    /// The key must be the end entity's.
    pub fn new(certs: &[u8], key: SigningKey) -> Result<LocalCert, String> {
        let chain = load_certs(certs)?;
        let mut key_hashes = Vec::new();
        let mut info = None;
        for (i, der) in chain.iter().enumerate() {
            let (_, c) =
                parse_x509_certificate(der).map_err(|e| format!("certificate {}: {e}", i + 1))?;
            if i == 0 {
                if c.public_key().subject_public_key.data.as_ref() != key.public_key() {
                    return Err("the private key is not the certificate's".into());
                }
                info = Some(CertInfo::of(&c));
            } else {
                key_hashes.push(super::key_hash(c.public_key().raw));
            }
        }
        let info = info.ok_or("no certificate")?;
        Ok(LocalCert {
            chain,
            key_hashes,
            key,
            info,
            rsa_pss: true,
            send_certs: true,
        })
    }

    /// Signs with `key` instead of the certificate's own, so the peer
    /// must refuse the AUTH payload: for tests of that refusal only.
    #[doc(hidden)]
    pub fn with_foreign_key_for_tests(mut self, key: SigningKey) -> LocalCert {
        self.key = key;
        self
    }

    /// Subject, issuer and validity of the end entity.
    pub fn info(&self) -> &CertInfo {
        &self.info
    }

    /// The end-entity certificate (DER).
    pub fn end_entity(&self) -> &[u8] {
        &self.chain[0]
    }

    /// The identity to send for `configured`: the certificate's own
    /// subject DER for a DN (so the peer compares the very bytes), the
    /// configured one otherwise; an error naming what the certificate
    /// holds if it does not vouch for it (the peer would refuse it).
    pub fn identity(&self, configured: &Identity) -> Result<Identity, String> {
        let (_, c) = parse_x509_certificate(&self.chain[0]).map_err(|e| e.to_string())?;
        if !cert_has_id(&c, configured) {
            return Err(format!(
                "local_id \"{configured}\" is not in the certificate, which holds: {}",
                cert_ids(&c).join("; ")
            ));
        }
        Ok(match configured {
            Identity::Dn(_) => Identity::Dn(c.subject().as_raw().to_vec()),
            other => other.clone(),
        })
    }

    /// The subject DN as an identity (the default local ID).
    pub fn subject_id(&self) -> Identity {
        match parse_x509_certificate(&self.chain[0]) {
            Ok((_, c)) => Identity::Dn(c.subject().as_raw().to_vec()),
            Err(_) => Identity::Dn(Vec::new()),
        }
    }

    /// CERT payloads for a peer whose CERTREQs named `trusted` CA key
    /// hashes (RFC 7296 §3.7): the end entity, then each intermediate up
    /// to the first the peer trusts itself. All of them without CERTREQ;
    /// none when [`LocalCert::send_certs`] is off.
    pub fn cert_payloads(&self, trusted: &[[u8; cert::CA_HASH_LEN]]) -> Vec<Payload> {
        if !self.send_certs {
            return Vec::new();
        }
        let mut out = vec![cert::x509(&self.chain[0])];
        for (der, h) in self.chain[1..].iter().zip(&self.key_hashes) {
            if trusted.contains(h) {
                break;
            }
            out.push(cert::x509(der));
        }
        out
    }

    /// Signs AUTH octets (see [`SigningKey::sign`]).
    pub fn sign(&self, peer: SigHashes, octets: &[u8]) -> Result<(AuthMethod, Vec<u8>), AuthError> {
        self.key.sign(peer, self.rsa_pss, octets)
    }
}
