//! The AUTH payload and what travels with it (RFC 7296 §2.15, §3.6–§3.8,
//! RFC 7427): each side MACs (PSK) or signs (certificate) its first
//! IKE_SA_INIT message, the other side's nonce and prf(SK_p, its ID). Ours
//! is made per `local_auth`, the peer's checked per `remote_auth`; the
//! CERT, CERTREQ and SIGNATURE_HASH_ALGORITHMS payloads around them are
//! chosen here too.

use super::{AuthInfo, FailReason, Ike};
use crate::config::{LocalAuth, RemoteAuth};
use crate::crypto;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::payload::cert::{self, CA_HASH_LEN};
use crate::payload::typed::{Auth, IdI, IdR};
use crate::payload::{notify, Identity, Notify, Payload};
use crate::pki::name::{id_matches, ANY};
use crate::pki::scheme::method;
use crate::pki::{AuthError, AuthMethod, PeerCert, SigHashes};

/// A verified peer: its method, identity and certificate.
pub(super) type Verified = (AuthMethod, Identity, Option<PeerCert>);

/// The CA key hashes of a message's X.509 CERTREQs, at most
/// [`cert::MAX_CA_HASHES`] in all.
pub(super) fn requested_cas(m: &Message) -> Vec<[u8; CA_HASH_LEN]> {
    m.cert_reqs()
        .filter(|(enc, _)| *enc == cert::encoding::X509_SIGNATURE)
        .flat_map(|(_, data)| cert::ca_hashes(data))
        .take(cert::MAX_CA_HASHES)
        .filter_map(|h| <[u8; CA_HASH_LEN]>::try_from(h).ok())
        .collect()
}

/// The peer's SIGNATURE_HASH_ALGORITHMS, empty if it sent none.
pub(super) fn announced_hashes(m: &Message) -> SigHashes {
    m.notify(notify::SIGNATURE_HASH_ALGORITHMS)
        .map(|n| SigHashes::parse(&n.data))
        .unwrap_or_default()
}

/// Whether an identity names one peer (an IDr worth sending): not
/// `%any` nor a DN with wildcards.
fn is_specific(id: &Identity) -> bool {
    match id {
        Identity::Fqdn(f) => f != ANY,
        Identity::Dn(_) => !id.to_string().contains('*'),
        _ => true,
    }
}

impl Ike {
    /// Whether either side signs: then SIGNATURE_HASH_ALGORITHMS goes in
    /// IKE_SA_INIT (RFC 7427 §4).
    pub(super) fn uses_signatures(&self) -> bool {
        matches!(self.cfg.local_auth, LocalAuth::Cert(_))
            || matches!(self.cfg.remote_auth, RemoteAuth::Cert(_))
    }

    /// Our SIGNATURE_HASH_ALGORITHMS notify.
    pub(super) fn hash_notify() -> Payload {
        Payload::Notify(Notify::new(
            notify::SIGNATURE_HASH_ALGORITHMS,
            SigHashes::ours().emit(),
        ))
    }

    /// Our CERTREQ (RFC 7296 §3.7) when the peer must sign and we trust
    /// CAs: the SHA-1 hashes of their keys.
    pub(super) fn cert_request(&self) -> Option<Payload> {
        match &self.cfg.remote_auth {
            RemoteAuth::Cert(t) if t.ca_hashes().next().is_some() => {
                Some(cert::request(t.ca_hashes()))
            }
            _ => None,
        }
    }

    /// Our CERT payloads for a peer that trusts `cas` (none with a PSK).
    pub(super) fn cert_payloads(&self, cas: &[[u8; CA_HASH_LEN]]) -> Vec<Payload> {
        match &self.cfg.local_auth {
            LocalAuth::Cert(c) => c.cert_payloads(cas),
            LocalAuth::Psk => Vec::new(),
        }
    }

    /// The IDr an initiator names (RFC 7296 §3.5), if it names one peer.
    pub(super) fn wanted_idr(&self) -> Option<Payload> {
        is_specific(&self.cfg.remote_id).then(|| Payload::IdR(self.cfg.remote_id.clone()))
    }

    /// Our AUTH payload in IKE SA `idx` for identity `id`, with the
    /// method used; Err(text) if our key cannot sign for this peer.
    pub(super) fn own_auth(
        &self,
        idx: usize,
        id: &Identity,
    ) -> Result<std::result::Result<(AuthMethod, Payload), String>> {
        let sa = &self.sas[idx];
        let keys = sa.keys()?;
        let prf = sa.prf()?;
        let (msg, nonce, sk_p) = if sa.initiator {
            (&sa.init_req, &sa.nr, &keys.sk_pi)
        } else {
            (&sa.init_resp, &sa.ni, &keys.sk_pr)
        };
        let body = id.to_body();
        Ok(match &self.cfg.local_auth {
            LocalAuth::Psk => {
                let data = crypto::psk_auth(prf, &self.cfg.psk, msg, nonce, sk_p, &body);
                Ok((
                    AuthMethod::Psk,
                    Payload::Auth {
                        method: method::PSK,
                        data,
                    },
                ))
            }
            LocalAuth::Cert(c) => {
                let octets = crypto::signed_octets(prf, msg, nonce, sk_p, &body);
                c.sign(sa.peer_hashes, &octets)
                    .map(|(m, data)| {
                        (
                            m,
                            Payload::Auth {
                                method: m.number(),
                                data,
                            },
                        )
                    })
                    .map_err(|e| e.to_string())
            }
        })
    }

    /// Checks the peer's ID and AUTH payload in an IKE_AUTH request
    /// (`from_initiator`: IDi over its IKE_SA_INIT request, Nr and SK_pi)
    /// or response (IDr, IKE_SA_INIT response, Ni, SK_pr): the ID must be
    /// what `remote_id` accepts, and the AUTH a PSK MAC or a signature by
    /// a certificate that passes [`crate::pki::TrustStore::validate`].
    pub(super) fn check_peer(
        &self,
        idx: usize,
        m: &Message,
        from_initiator: bool,
    ) -> Result<std::result::Result<Verified, FailReason>> {
        let sa = &self.sas[idx];
        let keys = sa.keys()?;
        let prf = sa.prf()?;
        let id = if from_initiator {
            m.get::<IdI>()
        } else {
            m.get::<IdR>()
        };
        let (Some(id), Some((meth, data))) = (id, m.get::<Auth>()) else {
            return Ok(Err(FailReason::AuthenticationFailed));
        };
        let (msg, nonce, sk_p) = if from_initiator {
            (&sa.init_req, &sa.nr, &keys.sk_pi)
        } else {
            (&sa.init_resp, &sa.ni, &keys.sk_pr)
        };
        let body = id.to_body();
        Ok(match &self.cfg.remote_auth {
            RemoteAuth::Psk => {
                let ok = meth == method::PSK && id_matches(&self.cfg.remote_id, id) && {
                    let want = crypto::psk_auth(prf, &self.cfg.psk, msg, nonce, sk_p, &body);
                    crypto::ct_eq(&want, data)
                };
                if ok {
                    Ok((AuthMethod::Psk, id.clone(), None))
                } else {
                    Err(FailReason::AuthenticationFailed)
                }
            }
            RemoteAuth::Cert(trust) => {
                let verdict = (|| {
                    if meth == method::PSK {
                        return Err(AuthError::WrongMethod(meth));
                    }
                    let certs: Vec<&[u8]> = m
                        .certs()
                        .filter(|(enc, _)| *enc == cert::encoding::X509_SIGNATURE)
                        .map(|(_, d)| d)
                        .collect();
                    let now = (self.cfg.wall_clock)();
                    let peer = trust.validate(&certs, id, &self.cfg.remote_id, now)?;
                    let octets = crypto::signed_octets(prf, msg, nonce, sk_p, &body);
                    let used = peer.key().verify(meth, data, &octets, SigHashes::ours())?;
                    Ok((used, id.clone(), Some(peer)))
                })();
                verdict.map_err(FailReason::PeerAuth)
            }
        })
    }

    /// Records how an SA authenticated.
    pub(super) fn authenticated(&mut self, idx: usize, local: AuthMethod, peer: Verified) {
        let (remote, peer_id, peer_cert) = peer;
        self.sas[idx].auth = Some(AuthInfo {
            local,
            remote,
            peer_id,
            peer_cert,
        });
    }

    /// At a rekey or new child: the peer's certificate checked again
    /// against the current anchors and CRLs (a reload may have revoked
    /// it, time may have expired it).
    pub(super) fn recheck_peer(&self, idx: usize) -> std::result::Result<(), AuthError> {
        let cert = self.sas[idx]
            .auth
            .as_ref()
            .and_then(|a| a.peer_cert.as_ref());
        match (&self.cfg.remote_auth, cert) {
            (RemoteAuth::Cert(t), Some(c)) => t.recheck(c, (self.cfg.wall_clock)()),
            _ => Ok(()),
        }
    }

    /// How the current IKE SA authenticated (None before IKE_AUTH).
    pub fn auth_info(&self) -> Option<&AuthInfo> {
        self.current().and_then(|i| self.sas[i].auth.as_ref())
    }

    /// Replaces how we and the peer authenticate, and our identity (a
    /// reload with new certificates, keys or CRLs): the next IKE_AUTH
    /// uses them, and the next rekey checks the peer's certificate
    /// against the new trust. Refused as [`Ike::new`] would refuse it.
    pub fn set_auth(
        &mut self,
        local_id: Identity,
        local: LocalAuth,
        remote: RemoteAuth,
    ) -> Result<()> {
        self.cfg.local_id = checked_local_id(local_id, &local, &remote)?;
        self.cfg.local_auth = local;
        self.cfg.remote_auth = remote;
        Ok(())
    }
}

/// Our identity as sent: the certificate must vouch for it (a DN becomes
/// the certificate's own subject bytes); a trust store must be able to
/// authenticate someone.
pub(super) fn checked_local_id(
    id: Identity,
    local: &LocalAuth,
    remote: &RemoteAuth,
) -> Result<Identity> {
    if let RemoteAuth::Cert(t) = remote {
        if !t.is_usable() {
            return Err(Error::Config(
                "the peer must sign but no CA nor peer certificate is configured".into(),
            ));
        }
    }
    match local {
        LocalAuth::Cert(c) => c.identity(&id).map_err(Error::Config),
        LocalAuth::Psk => Ok(id),
    }
}
