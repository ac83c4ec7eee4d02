//! Configuration of one IKE peer and strongSwan-style proposal strings.

use crate::crypto::{DhGroup, Encr, Integ, Prf};
use crate::error::{Error, Result};
use crate::payload::sa::{self, Proposal, Transform};
use crate::payload::{Identity, TrafficSelector};
use crate::pki::{LocalCert, TrustStore};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use zeroize::Zeroizing;

/// An IP prefix used as a traffic selector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix {
    /// Network address.
    pub addr: IpAddr,
    /// Prefix length.
    pub len: u8,
}

impl Prefix {
    /// Selector covering the prefix.
    pub fn to_ts(self) -> TrafficSelector {
        TrafficSelector::from_prefix(self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = Error;
    fn from_str(s: &str) -> Result<Prefix> {
        let (a, l) = s.split_once('/').unwrap_or((s, ""));
        let addr: IpAddr = a
            .parse()
            .map_err(|_| Error::Config(format!("bad prefix address {a:?}")))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = if l.is_empty() {
            max
        } else {
            l.parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| Error::Config(format!("bad prefix length {l:?}")))?
        };
        Ok(Prefix { addr, len })
    }
}

/// One IKE SA proposal: any listed algorithm of each kind is acceptable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IkeProposal {
    /// Ciphers.
    pub encr: Vec<Encr>,
    /// Integrity algorithms (empty for AEAD-only proposals).
    pub integ: Vec<Integ>,
    /// PRFs.
    pub prf: Vec<Prf>,
    /// DH groups; the first is used for our KE payload.
    pub dh: Vec<DhGroup>,
}

/// One ESP proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EspProposal {
    /// Ciphers.
    pub encr: Vec<Encr>,
    /// Integrity algorithms (empty for AEAD).
    pub integ: Vec<Integ>,
    /// PFS groups for CREATE_CHILD_SA; empty = no PFS.
    pub dh: Vec<DhGroup>,
}

enum Tok {
    Encr(Encr),
    Integ(Integ, Prf),
    Prf(Prf),
    Dh(DhGroup),
    Esn,
}

fn token(t: &str) -> Option<Tok> {
    let hash = |h: &str| -> Option<(Integ, Prf)> {
        Some(match h {
            "sha1" | "sha" => (Integ::HmacSha1_96, Prf::HmacSha1),
            "sha256" | "sha2_256" => (Integ::HmacSha256_128, Prf::HmacSha256),
            "sha384" | "sha2_384" => (Integ::HmacSha384_192, Prf::HmacSha384),
            "sha512" | "sha2_512" => (Integ::HmacSha512_256, Prf::HmacSha512),
            _ => return None,
        })
    };
    Some(match t {
        "aes128" | "aes" => Tok::Encr(Encr::AesCbc(16)),
        "aes256" => Tok::Encr(Encr::AesCbc(32)),
        "aes128gcm16" | "aes128gcm128" | "aes128gcm" => Tok::Encr(Encr::AesGcm16(16)),
        "aes256gcm16" | "aes256gcm128" | "aes256gcm" => Tok::Encr(Encr::AesGcm16(32)),
        "modp2048" => Tok::Dh(DhGroup::Modp2048),
        "ecp256" => Tok::Dh(DhGroup::Ecp256),
        "x25519" | "curve25519" => Tok::Dh(DhGroup::Curve25519),
        "esn" | "noesn" => Tok::Esn,
        _ => {
            if let Some(h) = t.strip_prefix("prf") {
                Tok::Prf(hash(h)?.1)
            } else {
                let (i, p) = hash(t)?;
                Tok::Integ(i, p)
            }
        }
    })
}

fn bad(s: &str, why: &str) -> Error {
    Error::Config(format!("proposal {s:?}: {why}"))
}

impl FromStr for IkeProposal {
    type Err = Error;
    /// strongSwan syntax: `aes128gcm16-prfsha256-ecp256`,
    /// `aes256-sha256-modp2048`, `aes128-sha1-x25519`. Without an explicit
    /// PRF, the integrity hash names the PRF too (as strongSwan does).
    fn from_str(s: &str) -> Result<IkeProposal> {
        let mut p = IkeProposal {
            encr: vec![],
            integ: vec![],
            prf: vec![],
            dh: vec![],
        };
        let mut implied_prf = vec![];
        for t in s.split('-') {
            match token(t).ok_or_else(|| bad(s, &format!("unknown algorithm {t:?}")))? {
                Tok::Encr(e) => p.encr.push(e),
                Tok::Integ(i, f) => {
                    p.integ.push(i);
                    implied_prf.push(f);
                }
                Tok::Prf(f) => p.prf.push(f),
                Tok::Dh(g) => p.dh.push(g),
                Tok::Esn => return Err(bad(s, "ESN is not an IKE algorithm")),
            }
        }
        if p.prf.is_empty() {
            p.prf = implied_prf;
        }
        let aead = p.encr.iter().all(|e| e.is_aead());
        if aead {
            p.integ.clear();
        }
        if p.encr.is_empty() || p.prf.is_empty() || p.dh.is_empty() || (!aead && p.integ.is_empty())
        {
            return Err(bad(
                s,
                "needs a cipher, a PRF (or integrity), integrity for CBC and a DH group",
            ));
        }
        if p.encr.iter().any(|e| e.is_aead()) && !aead {
            return Err(bad(s, "mixes AEAD and non-AEAD ciphers"));
        }
        Ok(p)
    }
}

impl FromStr for EspProposal {
    type Err = Error;
    /// strongSwan syntax: `aes128gcm16`, `aes256-sha256`, `aes128-sha1-modp2048`.
    fn from_str(s: &str) -> Result<EspProposal> {
        let mut p = EspProposal {
            encr: vec![],
            integ: vec![],
            dh: vec![],
        };
        for t in s.split('-') {
            match token(t).ok_or_else(|| bad(s, &format!("unknown algorithm {t:?}")))? {
                Tok::Encr(e) => p.encr.push(e),
                Tok::Integ(i, _) => p.integ.push(i),
                Tok::Dh(g) => p.dh.push(g),
                Tok::Esn => {}
                Tok::Prf(_) => return Err(bad(s, "PRF in an ESP proposal")),
            }
        }
        let aead = p.encr.iter().all(|e| e.is_aead());
        if p.encr.is_empty() || (!aead && p.integ.is_empty()) {
            return Err(bad(s, "needs a cipher and, for CBC, integrity"));
        }
        if aead {
            p.integ.clear();
        } else if p.encr.iter().any(|e| e.is_aead()) {
            return Err(bad(s, "mixes AEAD and non-AEAD ciphers"));
        }
        Ok(p)
    }
}

impl IkeProposal {
    /// Wire proposal (RFC 7296 §3.3).
    pub fn to_wire(&self, num: u8, spi: Vec<u8>) -> Proposal {
        let mut t: Vec<Transform> = self
            .encr
            .iter()
            .map(|e| Transform::with_key_len(sa::TT_ENCR, e.id(), e.key_bits()))
            .collect();
        t.extend(self.prf.iter().map(|p| Transform::new(sa::TT_PRF, p.id())));
        t.extend(
            self.integ
                .iter()
                .map(|i| Transform::new(sa::TT_INTEG, i.id())),
        );
        t.extend(self.dh.iter().map(|g| Transform::new(sa::TT_DH, g.id())));
        Proposal {
            num,
            protocol: sa::PROTO_IKE,
            spi,
            transforms: t,
        }
    }
}

impl EspProposal {
    /// Wire proposal; `pfs` adds the DH transforms (CREATE_CHILD_SA only).
    pub fn to_wire(&self, num: u8, spi: u32, pfs: bool) -> Proposal {
        let mut t: Vec<Transform> = self
            .encr
            .iter()
            .map(|e| Transform::with_key_len(sa::TT_ENCR, e.id(), e.key_bits()))
            .collect();
        t.extend(
            self.integ
                .iter()
                .map(|i| Transform::new(sa::TT_INTEG, i.id())),
        );
        if pfs {
            t.extend(self.dh.iter().map(|g| Transform::new(sa::TT_DH, g.id())));
        }
        // Extended sequence numbers preferred, 32-bit ones accepted
        // (RFC 7296 §3.3.2: the responder picks one).
        t.push(Transform::new(sa::TT_ESN, 1));
        t.push(Transform::new(sa::TT_ESN, 0));
        Proposal {
            num,
            protocol: sa::PROTO_ESP,
            spi: spi.to_be_bytes().to_vec(),
            transforms: t,
        }
    }
}

/// Another set of selectors that child SAs inside this peer's IKE SAs
/// may be negotiated for: several tunnels towards one peer gateway share
/// its IKE SA (RFC 7296 §1.3, §2.9; strongSwan reuses an IKE SA for every
/// child towards the same peer). A child negotiated for a policy is
/// tagged with its `tag` ([`crate::ChildSaKeys::policy`]) so the caller
/// installs it for the right tunnel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildPolicy {
    /// The caller's name for it (vecgate: the tunnel id).
    pub tag: u32,
    /// Our protected prefixes.
    pub local_ts: Vec<Prefix>,
    /// Peer's protected prefixes.
    pub remote_ts: Vec<Prefix>,
    /// ESP proposals for its children (empty: the peer's `esp_proposals`).
    pub esp_proposals: Vec<EspProposal>,
}

/// How we prove our identity in IKE_AUTH (RFC 7296 §2.15).
#[derive(Debug, Clone)]
pub enum LocalAuth {
    /// The pre-shared key ([`IkeConfig::psk`]).
    Psk,
    /// A signature with our certificate's key; the certificate (and its
    /// intermediates) go in CERT payloads.
    Cert(Arc<LocalCert>),
}

/// How the peer must prove its identity.
#[derive(Debug, Clone)]
pub enum RemoteAuth {
    /// The pre-shared key.
    Psk,
    /// A signature by a certificate that chains to one of these anchors
    /// (or is the peer certificate configured in it).
    Cert(Arc<TrustStore>),
}

/// Everything one IKE peer needs. The PSK is read by the caller (from a
/// file) and never printed: `Debug` redacts it.
#[derive(Clone)]
pub struct IkeConfig {
    /// Our address; its port is the IKE port (500), NAT-T uses `natt_port`.
    pub local_addr: SocketAddr,
    /// Peer address and IKE port. As a responder only IKE_SA_INITs from
    /// this address are served, unless it is unspecified (0.0.0.0 or :::
    /// any peer, limited per source address).
    pub remote_addr: SocketAddr,
    /// NAT-T port on both sides (RFC 3948), normally 4500.
    pub natt_port: u16,
    /// Our identity.
    pub local_id: Identity,
    /// Identity the peer must present.
    pub remote_id: Identity,
    /// Pre-shared key.
    pub psk: Zeroizing<Vec<u8>>,
    /// How we authenticate (PSK unless a certificate is configured).
    pub local_auth: LocalAuth,
    /// How the peer must authenticate; either side may differ from the
    /// other (a certificate here, a PSK there).
    pub remote_auth: RemoteAuth,
    /// The time of day certificates are checked at (validity, CRLs);
    /// `SystemTime::now` but for tests.
    pub wall_clock: fn() -> SystemTime,
    /// IKE proposals in preference order.
    pub ike_proposals: Vec<IkeProposal>,
    /// ESP proposals in preference order.
    pub esp_proposals: Vec<EspProposal>,
    /// Our protected prefixes.
    pub local_ts: Vec<Prefix>,
    /// Peer's protected prefixes.
    pub remote_ts: Vec<Prefix>,
    /// Rekey the IKE SA after this long (None: never).
    pub ike_rekey_time: Option<Duration>,
    /// Rekey each child SA after this long (None: never).
    pub child_rekey_time: Option<Duration>,
    /// Rekey this many percent earlier at random (0..=50), per SA, so SAs
    /// created together do not all rekey at once (strongSwan's rand_time).
    pub rekey_jitter_percent: u8,
    /// Delete a child SA this long after creation if it was not rekeyed.
    pub child_life_time: Option<Duration>,
    /// Delete the IKE SA this long after creation if it was not rekeyed.
    pub ike_life_time: Option<Duration>,
    /// With `initiate`: start a new IKE SA this long after the last one
    /// failed or was deleted (keeps the tunnel up). None: do not.
    pub reconnect_delay: Option<Duration>,
    /// Liveness check when nothing was received for this long.
    pub dpd_interval: Option<Duration>,
    /// A liveness check (RFC 7296 §2.4) unanswered this long declares the
    /// peer dead, sooner than the full retransmission schedule would (a
    /// restarted peer is then found again within seconds). None: the
    /// retransmission schedule decides.
    pub dpd_timeout: Option<Duration>,
    /// First retransmission timeout (RFC 7296 §2.1), doubled each time.
    pub retransmit_base: Duration,
    /// Retransmissions before giving up.
    pub retransmit_tries: u32,
    /// Half-open SAs above which IKE_SA_INIT requires a COOKIE (§2.6).
    pub cookie_threshold: usize,
    /// Half-open SAs from one source address above which INITs from it
    /// require a COOKIE (RFC 8019 §4.1; strongSwan's cookie_threshold_ip).
    pub cookie_threshold_ip: usize,
    /// IKE_SA_INIT requests per second above which every INIT requires a
    /// COOKIE (RFC 8019 §4.1: a rate, not only a count, starts them).
    pub cookie_rate: u32,
    /// Half-open SAs one source address may hold, cookie or not; INITs
    /// beyond are dropped (RFC 8019 §4.3; strongSwan's block_threshold).
    pub half_open_per_source: usize,
    /// Half-open SAs held at most (their own table, apart from the
    /// established SAs, RFC 8019 §4); INITs beyond are dropped.
    pub max_half_open: usize,
    /// Whether we initiate (otherwise we only respond).
    pub initiate: bool,
    /// Always UDP-encapsulate ESP and float to NAT-T even without NAT.
    pub force_encap: bool,
    /// RFC 7383 fragmentation: offered when Some, and encrypted messages
    /// larger than this many bytes (UDP payload) are fragmented.
    pub fragment_size: Option<usize>,
}

impl fmt::Debug for IkeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IkeConfig")
            .field("local_addr", &self.local_addr)
            .field("remote_addr", &self.remote_addr)
            .field("local_id", &self.local_id)
            .field("remote_id", &self.remote_id)
            .field("psk", &"<redacted>")
            .field("local_auth", &self.local_auth)
            .field("remote_auth", &self.remote_auth)
            .field("ike_proposals", &self.ike_proposals)
            .field("esp_proposals", &self.esp_proposals)
            .field("local_ts", &self.local_ts)
            .field("remote_ts", &self.remote_ts)
            .finish_non_exhaustive()
    }
}

impl IkeConfig {
    /// A configuration with defaults: proposals `aes256gcm16-prfsha256-x25519`
    /// and `aes256-sha256-modp2048`, ESP `aes256gcm16`, 1 s retransmission
    /// base, 5 tries, cookies at 16 half-open SAs (3 from one address) or
    /// 20 INITs a second, 5 half-open SAs per address and 64 in all, no
    /// rekeying, no DPD.
    pub fn new(local_addr: SocketAddr, remote_addr: SocketAddr, psk: &[u8]) -> IkeConfig {
        IkeConfig {
            local_addr,
            remote_addr,
            natt_port: 4500,
            local_id: Identity::from_text(&local_addr.ip().to_string()),
            remote_id: Identity::from_text(&remote_addr.ip().to_string()),
            psk: Zeroizing::new(psk.to_vec()),
            local_auth: LocalAuth::Psk,
            remote_auth: RemoteAuth::Psk,
            wall_clock: SystemTime::now,
            ike_proposals: ["aes256gcm16-prfsha256-x25519", "aes256-sha256-modp2048"]
                .iter()
                .filter_map(|s| s.parse().ok())
                .collect(),
            esp_proposals: ["aes256gcm16"]
                .iter()
                .filter_map(|s| s.parse().ok())
                .collect(),
            local_ts: vec![],
            remote_ts: vec![],
            ike_rekey_time: None,
            child_rekey_time: None,
            rekey_jitter_percent: 0,
            child_life_time: None,
            ike_life_time: None,
            reconnect_delay: None,
            dpd_interval: None,
            dpd_timeout: None,
            retransmit_base: Duration::from_secs(1),
            retransmit_tries: 5,
            cookie_threshold: 16,
            cookie_threshold_ip: 3,
            cookie_rate: 20,
            half_open_per_source: 5,
            max_half_open: crate::MAX_HALF_OPEN,
            initiate: false,
            force_encap: false,
            fragment_size: Some(1280),
        }
    }

    /// Parse a list of IKE proposal strings.
    pub fn parse_ike_proposals(list: &[&str]) -> Result<Vec<IkeProposal>> {
        list.iter().map(|s| s.parse()).collect()
    }

    /// Parse a list of ESP proposal strings.
    pub fn parse_esp_proposals(list: &[&str]) -> Result<Vec<EspProposal>> {
        list.iter().map(|s| s.parse()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_strongswan_proposals() {
        let p: IkeProposal = "aes128gcm16-prfsha256-ecp256".parse().unwrap();
        assert_eq!(p.encr, vec![Encr::AesGcm16(16)]);
        assert_eq!(p.prf, vec![Prf::HmacSha256]);
        assert!(p.integ.is_empty());
        assert_eq!(p.dh, vec![DhGroup::Ecp256]);
        let p: IkeProposal = "aes256-sha256-modp2048".parse().unwrap();
        assert_eq!(p.encr, vec![Encr::AesCbc(32)]);
        assert_eq!(p.integ, vec![Integ::HmacSha256_128]);
        assert_eq!(p.prf, vec![Prf::HmacSha256]);
        let p: IkeProposal = "aes128-sha1-x25519".parse().unwrap();
        assert_eq!(p.dh, vec![DhGroup::Curve25519]);
        assert_eq!(p.integ, vec![Integ::HmacSha1_96]);
        assert!("aes128gcm16-ecp256".parse::<IkeProposal>().is_err());
        assert!("aes128-sha1".parse::<IkeProposal>().is_err());
        assert!("des-sha1-modp2048".parse::<IkeProposal>().is_err());
        let e: EspProposal = "aes128gcm16".parse().unwrap();
        assert_eq!(e.encr, vec![Encr::AesGcm16(16)]);
        let e: EspProposal = "aes256-sha256-modp2048-noesn".parse().unwrap();
        assert_eq!(e.integ, vec![Integ::HmacSha256_128]);
        assert_eq!(e.dh, vec![DhGroup::Modp2048]);
        assert!("aes128".parse::<EspProposal>().is_err());
    }

    #[test]
    fn prefixes() {
        let p: Prefix = "10.0.0.0/8".parse().unwrap();
        assert_eq!(p.len, 8);
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert_eq!("fd00::1".parse::<Prefix>().unwrap().len, 128);
    }

    #[test]
    fn debug_redacts_psk() {
        let c = IkeConfig::new(
            "10.0.0.1:500".parse().unwrap(),
            "10.0.0.2:500".parse().unwrap(),
            b"supersecret",
        );
        assert!(!format!("{c:?}").contains("supersecret"));
        assert_eq!(c.ike_proposals.len(), 2);
    }
}
