//! A tunnel's certificate authentication from the files its `[tunnel.ike]`
//! names (RFC 7296 §2.15 signatures, RFC 7427): our certificate chain and
//! private key, the trust anchors, CRLs and pinned peer certificate. Read
//! when the tunnel is built and again on reload, so a renewed certificate
//! or a new CRL applies without a restart. Also what `show ike` says of
//! the certificates in use.

use std::path::Path;
use std::sync::Arc;
use vecgate_config::{IkeAuth, IkeSettings};
use vecgate_control::model::{IkeAuthInfo, IkeCertInfo, IkeTunnelInfo};
use vecgate_ike::pki::{LocalCert, SigningKey, TrustStore};
use vecgate_ike::{Identity, Ike, IkeConfig, LocalAuth, RemoteAuth};

/// How both sides authenticate, as `[tunnel.ike]` of tunnel `tunnel`
/// configures it, and our identity. The error names the key at fault and
/// says why, naming the file.
pub struct Auth {
    pub local: LocalAuth,
    pub remote: RemoteAuth,
    /// Our identity when `local_id` is not set: the certificate's subject
    /// (as strongSwan's default); `None` with a PSK.
    pub default_local_id: Option<Identity>,
}

fn public(key: &'static str, path: &Path) -> Result<Vec<u8>, (&'static str, String)> {
    vecgate_config::secret::read_public_file(path)
        .map_err(|e| (key, format!("{key} {}: {e}", path.display())))
}

/// Reads and checks every file of `s` that its methods use.
pub fn auth_of(s: &IkeSettings, tunnel: &str) -> Result<Auth, (&'static str, String)> {
    let at = |(k, e): (&'static str, String)| (k, format!("tunnel {tunnel}: {e}"));
    let mut out = Auth {
        local: LocalAuth::Psk,
        remote: RemoteAuth::Psk,
        default_local_id: None,
    };
    if s.auth == IkeAuth::Pubkey {
        let (Some(cert_file), Some(key_file)) = (&s.cert_file, &s.key_file) else {
            return Err(at((
                "cert_file",
                "auth = \"pubkey\" needs cert_file and key_file".into(),
            )));
        };
        let key = vecgate_config::secret::read_secret_file(
            key_file,
            vecgate_config::secret::MAX_SECRET_LEN,
        )
        .map_err(|e| e.to_string())
        .and_then(|b| SigningKey::from_bytes(&b))
        .map_err(|e| at(("key_file", format!("key_file {}: {e}", key_file.display()))))?;
        let chain = public("cert_file", cert_file).map_err(at)?;
        let l = LocalCert::new(&chain, key).map_err(|e| {
            at((
                "cert_file",
                format!("cert_file {}: {e}", cert_file.display()),
            ))
        })?;
        out.default_local_id = Some(l.subject_id());
        out.local = LocalAuth::Cert(Arc::new(l));
    }
    if s.peer_auth() == IkeAuth::Pubkey {
        let mut t = TrustStore::default();
        for f in &s.ca_files {
            let b = public("ca_files", f).map_err(at)?;
            t.add_anchors(&b)
                .map_err(|e| at(("ca_files", format!("ca_files {}: {e}", f.display()))))?;
        }
        for f in &s.crl_files {
            let b = public("crl_files", f).map_err(at)?;
            t.add_crls(&b)
                .map_err(|e| at(("crl_files", format!("crl_files {}: {e}", f.display()))))?;
        }
        if let Some(f) = &s.remote_cert_file {
            let b = public("remote_cert_file", f).map_err(at)?;
            t.pin_peer(&b).map_err(|e| {
                at((
                    "remote_cert_file",
                    format!("remote_cert_file {}: {e}", f.display()),
                ))
            })?;
        }
        out.remote = RemoteAuth::Cert(Arc::new(t));
    }
    Ok(out)
}

/// The files of `s` its authentication methods read, with their keys.
pub fn files(s: &IkeSettings) -> Vec<(&'static str, &Path)> {
    let mut v = Vec::new();
    if s.auth == IkeAuth::Pubkey {
        v.extend(s.cert_file.as_deref().map(|p| ("cert_file", p)));
        v.extend(s.key_file.as_deref().map(|p| ("key_file", p)));
    }
    if s.peer_auth() == IkeAuth::Pubkey {
        v.extend(s.ca_files.iter().map(|p| ("ca_files", p.as_path())));
        v.extend(s.crl_files.iter().map(|p| ("crl_files", p.as_path())));
        v.extend(
            s.remote_cert_file
                .as_deref()
                .map(|p| ("remote_cert_file", p)),
        );
    }
    v
}

/// `show ike`'s form of a certificate.
fn cert_info(c: &vecgate_ike::pki::CertInfo, now: std::time::SystemTime) -> IkeCertInfo {
    IkeCertInfo {
        subject: c.subject.clone(),
        issuer: c.issuer.clone(),
        serial: c.serial.clone(),
        not_after: vecgate_ike::pki::iso8601(c.not_after),
        days_left: vecgate_ike::pki::days_left(c.not_after, now),
    }
}

/// How the current IKE SA's sides authenticated (`GET /ike`).
pub fn auth_info(ike: &Ike) -> Option<IkeAuthInfo> {
    let a = ike.auth_info()?;
    let now = (ike.config().wall_clock)();
    Some(IkeAuthInfo {
        local_method: a.local.to_string(),
        remote_method: a.remote.to_string(),
        peer_id: a.peer_id.to_string(),
        peer_cert: a.peer_cert.as_ref().map(|p| cert_info(&p.info, now)),
    })
}

/// Our certificate, when we sign with one.
pub fn local_cert_info(c: &IkeConfig) -> Option<IkeCertInfo> {
    match &c.local_auth {
        LocalAuth::Cert(l) => Some(cert_info(l.info(), (c.wall_clock)())),
        LocalAuth::Psk => None,
    }
}

/// `show ike`'s authentication lines of a tunnel (none with PSKs and no
/// SA yet).
pub fn show_lines(t: &IkeTunnelInfo) -> String {
    let mut s = String::new();
    let cert = |c: &IkeCertInfo| {
        format!(
            "\"{}\" issuer \"{}\" serial {} expires {} ({} days)",
            c.subject, c.issuer, c.serial, c.not_after, c.days_left
        )
    };
    if let Some(c) = &t.local_cert {
        s.push_str(&format!("  local cert {}\n", cert(c)));
    }
    if let Some(a) = &t.auth {
        s.push_str(&format!(
            "  auth  local {} remote {} peer-id \"{}\"\n",
            a.local_method, a.remote_method, a.peer_id
        ));
        if let Some(c) = &a.peer_cert {
            s.push_str(&format!("  peer cert {}\n", cert(c)));
        }
    }
    s
}

/// A certificate closer than this to its end is warned about.
pub const EXPIRY_WARN_DAYS: i64 = 30;
/// How often the warning is repeated while it holds.
const EXPIRY_WARN_EVERY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

impl super::ControlPlane {
    /// One warning line a day per tunnel whose certificate (ours or the
    /// peer's) ends within [`EXPIRY_WARN_DAYS`]: renew before the peer
    /// (or we) refuse it.
    pub(super) fn warn_expiry(&mut self, now: std::time::Instant) {
        for t in &mut self.tunnels {
            if t.expiry_warned
                .is_some_and(|at| now.saturating_duration_since(at) < EXPIRY_WARN_EVERY)
            {
                continue;
            }
            let c = t.ike.config();
            let wall = (c.wall_clock)();
            let ours = match &c.local_auth {
                LocalAuth::Cert(l) => Some(("our", l.info().clone())),
                LocalAuth::Psk => None,
            };
            let peer = t
                .ike
                .auth_info()
                .and_then(|a| a.peer_cert.as_ref())
                .map(|p| ("the peer's", p.info.clone()));
            let mut warned = false;
            for (whose, info) in ours.into_iter().chain(peer) {
                let days = vecgate_ike::pki::days_left(info.not_after, wall);
                if days <= EXPIRY_WARN_DAYS {
                    tracing::warn!(
                        "IKE: tunnel {}: {whose} certificate \"{}\" expires {} ({days} days left)",
                        t.name,
                        info.subject,
                        vecgate_ike::pki::iso8601(info.not_after)
                    );
                    warned = true;
                }
            }
            if warned {
                t.expiry_warned = Some(now);
            }
        }
    }
}
