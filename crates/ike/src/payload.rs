//! IKEv2 payloads (RFC 7296 §3.2–§3.16, RFC 7383 §2.5).
//!
//! [`RawPayloads`] walks a payload chain without copying; [`Payload`] is the
//! owned representation the state machine and the tests use.

pub mod cert;
pub mod sa;
pub mod ts;
pub mod typed;

use crate::error::{Error, Result};
use std::net::{Ipv4Addr, Ipv6Addr};

pub use sa::{Proposal, Transform};
pub use ts::TrafficSelector;

/// Payload type numbers (RFC 7296 §3.2).
pub mod kind {
    /// No next payload.
    pub const NONE: u8 = 0;
    /// Security Association.
    pub const SA: u8 = 33;
    /// Key Exchange.
    pub const KE: u8 = 34;
    /// Identification - Initiator.
    pub const IDI: u8 = 35;
    /// Identification - Responder.
    pub const IDR: u8 = 36;
    /// Certificate.
    pub const CERT: u8 = 37;
    /// Certificate Request.
    pub const CERTREQ: u8 = 38;
    /// Authentication.
    pub const AUTH: u8 = 39;
    /// Nonce.
    pub const NONCE: u8 = 40;
    /// Notify.
    pub const NOTIFY: u8 = 41;
    /// Delete.
    pub const DELETE: u8 = 42;
    /// Vendor ID.
    pub const VENDOR: u8 = 43;
    /// Traffic Selector - Initiator.
    pub const TSI: u8 = 44;
    /// Traffic Selector - Responder.
    pub const TSR: u8 = 45;
    /// Encrypted and Authenticated.
    pub const SK: u8 = 46;
    /// Configuration.
    pub const CP: u8 = 47;
    /// EAP.
    pub const EAP: u8 = 48;
    /// Encrypted and Authenticated Fragment (RFC 7383).
    pub const SKF: u8 = 53;
}

/// Notify message types (RFC 7296 §3.10.1, RFC 7383, RFC 7296 IANA).
pub mod notify {
    /// Error: critical payload not understood.
    pub const UNSUPPORTED_CRITICAL_PAYLOAD: u16 = 1;
    /// Error: unknown IKE SPI.
    pub const INVALID_IKE_SPI: u16 = 4;
    /// Error: major version.
    pub const INVALID_MAJOR_VERSION: u16 = 5;
    /// Error: syntax.
    pub const INVALID_SYNTAX: u16 = 7;
    /// Error: message ID out of window.
    pub const INVALID_MESSAGE_ID: u16 = 9;
    /// Error: unknown child SPI.
    pub const INVALID_SPI: u16 = 11;
    /// Error: no acceptable proposal.
    pub const NO_PROPOSAL_CHOSEN: u16 = 14;
    /// Error: wrong DH group, data = the group wanted.
    pub const INVALID_KE_PAYLOAD: u16 = 17;
    /// Error: AUTH did not verify.
    pub const AUTHENTICATION_FAILED: u16 = 24;
    /// Error: single pair required.
    pub const SINGLE_PAIR_REQUIRED: u16 = 34;
    /// Error: no more SAs.
    pub const NO_ADDITIONAL_SAS: u16 = 35;
    /// Error: CP address failure.
    pub const INTERNAL_ADDRESS_FAILURE: u16 = 36;
    /// Error: CP required.
    pub const FAILED_CP_REQUIRED: u16 = 37;
    /// Error: traffic selectors unacceptable.
    pub const TS_UNACCEPTABLE: u16 = 38;
    /// Error: selectors invalid.
    pub const INVALID_SELECTORS: u16 = 39;
    /// Error: try again later (simultaneous rekey).
    pub const TEMPORARY_FAILURE: u16 = 43;
    /// Error: child SA not found.
    pub const CHILD_SA_NOT_FOUND: u16 = 44;
    /// Status: initial contact.
    pub const INITIAL_CONTACT: u16 = 16384;
    /// Status: window size.
    pub const SET_WINDOW_SIZE: u16 = 16385;
    /// Status: more TS possible.
    pub const ADDITIONAL_TS_POSSIBLE: u16 = 16386;
    /// Status: NAT-D source hash (RFC 7296 §2.23).
    pub const NAT_DETECTION_SOURCE_IP: u16 = 16388;
    /// Status: NAT-D destination hash.
    pub const NAT_DETECTION_DESTINATION_IP: u16 = 16389;
    /// Status: anti-DoS cookie (§2.6).
    pub const COOKIE: u16 = 16390;
    /// Status: transport mode wanted.
    pub const USE_TRANSPORT_MODE: u16 = 16391;
    /// Status: rekeying the child SA with this SPI.
    pub const REKEY_SA: u16 = 16393;
    /// Status: no TFC padding.
    pub const ESP_TFC_PADDING_NOT_SUPPORTED: u16 = 16394;
    /// Status: non-first fragments.
    pub const NON_FIRST_FRAGMENTS_ALSO: u16 = 16395;
    /// Status: RFC 7383 fragmentation supported.
    pub const IKEV2_FRAGMENTATION_SUPPORTED: u16 = 16430;
    /// Status: RFC 7427 hash algorithms.
    pub const SIGNATURE_HASH_ALGORITHMS: u16 = 16431;
}

/// Upper bound on payloads in one chain (ours send < 16).
pub const MAX_PAYLOADS: usize = 64;

/// An identity (RFC 7296 §3.5).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Identity {
    /// ID_IPV4_ADDR.
    Ipv4(Ipv4Addr),
    /// ID_IPV6_ADDR.
    Ipv6(Ipv6Addr),
    /// ID_FQDN.
    Fqdn(String),
    /// ID_RFC822_ADDR.
    Rfc822(String),
    /// ID_DER_ASN1_DN: a distinguished name, DER (as in a certificate's
    /// subject; compared attribute by attribute, [`crate::pki::name`]).
    Dn(Vec<u8>),
    /// ID_KEY_ID: opaque octets.
    KeyId(Vec<u8>),
    /// Any other ID type, kept opaque.
    Other(u8, Vec<u8>),
}

impl Identity {
    /// ID type number.
    pub fn id_type(&self) -> u8 {
        match self {
            Identity::Ipv4(_) => 1,
            Identity::Fqdn(_) => 2,
            Identity::Rfc822(_) => 3,
            Identity::Ipv6(_) => 5,
            Identity::Dn(_) => 9,
            Identity::KeyId(_) => 11,
            Identity::Other(t, _) => *t,
        }
    }

    /// The body of an ID payload: type, 3 reserved bytes, data. This is
    /// also `RestOfInitIDPayload` for AUTH (RFC 7296 §2.15).
    pub fn to_body(&self) -> Vec<u8> {
        let mut b = vec![self.id_type(), 0, 0, 0];
        match self {
            Identity::Ipv4(a) => b.extend_from_slice(&a.octets()),
            Identity::Ipv6(a) => b.extend_from_slice(&a.octets()),
            Identity::Fqdn(s) | Identity::Rfc822(s) => b.extend_from_slice(s.as_bytes()),
            Identity::Dn(d) | Identity::KeyId(d) | Identity::Other(_, d) => b.extend_from_slice(d),
        }
        b
    }

    /// Parse an ID payload body.
    pub fn parse(body: &[u8]) -> Result<Self> {
        if body.len() < 4 {
            return Err(Error::Truncated("ID payload"));
        }
        let d = &body[4..];
        Ok(match body[0] {
            1 => {
                let a: [u8; 4] = d.try_into().map_err(|_| Error::BadLength("ID_IPV4"))?;
                Identity::Ipv4(a.into())
            }
            5 => {
                let a: [u8; 16] = d.try_into().map_err(|_| Error::BadLength("ID_IPV6"))?;
                Identity::Ipv6(a.into())
            }
            2 => Identity::Fqdn(
                String::from_utf8(d.to_vec()).map_err(|_| Error::Malformed("ID_FQDN"))?,
            ),
            3 => Identity::Rfc822(
                String::from_utf8(d.to_vec()).map_err(|_| Error::Malformed("ID_RFC822"))?,
            ),
            9 => Identity::Dn(d.to_vec()),
            11 => Identity::KeyId(d.to_vec()),
            t => Identity::Other(t, d.to_vec()),
        })
    }

    /// Parse the strongSwan-like textual form: an IP address, `keyid:...`,
    /// a DN (`C=CH, O=example, CN=gw1`), `user@host`, `%any` or an FQDN.
    /// Text with `=` that is not a DN of known attributes stays an FQDN;
    /// [`crate::pki::name::dn_from_text`] tells them apart for callers
    /// that want to refuse it.
    pub fn from_text(s: &str) -> Self {
        if let Ok(a) = s.parse::<Ipv4Addr>() {
            Identity::Ipv4(a)
        } else if let Ok(a) = s.parse::<Ipv6Addr>() {
            Identity::Ipv6(a)
        } else if let Some(k) = s.strip_prefix("keyid:") {
            Identity::KeyId(k.as_bytes().to_vec())
        } else if let Some(dn) = crate::pki::name::looks_like_dn(s)
            .then(|| crate::pki::name::dn_from_text(s))
            .flatten()
        {
            Identity::Dn(dn)
        } else if s.contains('@') {
            Identity::Rfc822(s.to_string())
        } else {
            Identity::Fqdn(s.to_string())
        }
    }
}

impl std::fmt::Display for Identity {
    /// The textual form [`Identity::from_text`] reads (DNs as
    /// `C=.., O=.., CN=..`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = |d: &[u8]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
        match self {
            Identity::Ipv4(a) => write!(f, "{a}"),
            Identity::Ipv6(a) => write!(f, "{a}"),
            Identity::Fqdn(s) | Identity::Rfc822(s) => f.write_str(s),
            Identity::Dn(d) => f.write_str(&crate::pki::name::dn_text(d)),
            Identity::KeyId(d) => match std::str::from_utf8(d) {
                Ok(s) if s.chars().all(|c| c.is_ascii_graphic()) => write!(f, "keyid:{s}"),
                _ => write!(f, "keyid:#{}", hex(d)),
            },
            Identity::Other(t, d) => write!(f, "id-type-{t}:#{}", hex(d)),
        }
    }
}

/// A Notify payload (RFC 7296 §3.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    /// Protocol ID (0 or 1 for IKE, 3 for ESP).
    pub protocol: u8,
    /// SPI (empty for IKE-level notifies).
    pub spi: Vec<u8>,
    /// Notify type.
    pub ty: u16,
    /// Notification data.
    pub data: Vec<u8>,
}

impl Notify {
    /// IKE-level notify without SPI.
    pub fn new(ty: u16, data: Vec<u8>) -> Self {
        Notify {
            protocol: 0,
            spi: Vec::new(),
            ty,
            data,
        }
    }
    /// Whether this is an error type (< 16384).
    pub fn is_error(&self) -> bool {
        self.ty < 16384
    }
}

/// A Delete payload (RFC 7296 §3.11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    /// 1 = the IKE SA itself, 3 = ESP child SAs.
    pub protocol: u8,
    /// SPIs of the ESP SAs (inbound SPIs of the sender); empty for IKE.
    pub spis: Vec<u32>,
}

/// One decoded payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// SA.
    Sa(Vec<Proposal>),
    /// KE: DH group and public value.
    Ke {
        /// Group number.
        group: u16,
        /// Public value.
        data: Vec<u8>,
    },
    /// Ni or Nr.
    Nonce(Vec<u8>),
    /// IDi.
    IdI(Identity),
    /// IDr.
    IdR(Identity),
    /// CERT.
    Cert {
        /// Certificate encoding ([`cert::encoding`]).
        encoding: u8,
        /// Certificate data (DER for X.509).
        data: Vec<u8>,
    },
    /// CERTREQ.
    CertReq {
        /// Certificate encoding wanted.
        encoding: u8,
        /// Certification authority: concatenated SHA-1 key hashes.
        data: Vec<u8>,
    },
    /// AUTH.
    Auth {
        /// Auth method ([`crate::pki::scheme::method`]).
        method: u8,
        /// Authentication data.
        data: Vec<u8>,
    },
    /// N.
    Notify(Notify),
    /// D.
    Delete(Delete),
    /// TSi.
    TsI(Vec<TrafficSelector>),
    /// TSr.
    TsR(Vec<TrafficSelector>),
    /// Vendor ID (ignored).
    Vendor(Vec<u8>),
    /// Any other non-critical payload (CP, EAP, ...), ignored.
    Other {
        /// Payload type.
        ty: u8,
        /// Body.
        data: Vec<u8>,
    },
}

impl Payload {
    /// Wire payload type.
    pub fn kind(&self) -> u8 {
        match self {
            Payload::Sa(_) => kind::SA,
            Payload::Ke { .. } => kind::KE,
            Payload::Nonce(_) => kind::NONCE,
            Payload::IdI(_) => kind::IDI,
            Payload::IdR(_) => kind::IDR,
            Payload::Cert { .. } => kind::CERT,
            Payload::CertReq { .. } => kind::CERTREQ,
            Payload::Auth { .. } => kind::AUTH,
            Payload::Notify(_) => kind::NOTIFY,
            Payload::Delete(_) => kind::DELETE,
            Payload::TsI(_) => kind::TSI,
            Payload::TsR(_) => kind::TSR,
            Payload::Vendor(_) => kind::VENDOR,
            Payload::Other { ty, .. } => *ty,
        }
    }

    /// Decode one payload body of type `ty`.
    pub fn decode(ty: u8, critical: bool, body: &[u8]) -> Result<Payload> {
        Ok(match ty {
            kind::SA => Payload::Sa(sa::parse(body)?),
            kind::KE => {
                if body.len() < 4 {
                    return Err(Error::Truncated("KE payload"));
                }
                Payload::Ke {
                    group: u16::from_be_bytes([body[0], body[1]]),
                    data: body[4..].to_vec(),
                }
            }
            kind::NONCE => {
                // RFC 7296 §3.9: 16..=256 octets.
                if body.len() < 16 || body.len() > 256 {
                    return Err(Error::BadLength("nonce"));
                }
                Payload::Nonce(body.to_vec())
            }
            kind::IDI => Payload::IdI(Identity::parse(body)?),
            kind::IDR => Payload::IdR(Identity::parse(body)?),
            kind::CERT => {
                let (encoding, data) = cert::decode(body, "CERT payload")?;
                Payload::Cert { encoding, data }
            }
            kind::CERTREQ => {
                let (encoding, data) = cert::decode(body, "CERTREQ payload")?;
                Payload::CertReq { encoding, data }
            }
            kind::AUTH => {
                if body.len() < 4 {
                    return Err(Error::Truncated("AUTH payload"));
                }
                Payload::Auth {
                    method: body[0],
                    data: body[4..].to_vec(),
                }
            }
            kind::NOTIFY => {
                if body.len() < 4 {
                    return Err(Error::Truncated("notify"));
                }
                let spi_len = usize::from(body[1]);
                if 4 + spi_len > body.len() {
                    return Err(Error::BadLength("notify SPI"));
                }
                Payload::Notify(Notify {
                    protocol: body[0],
                    spi: body[4..4 + spi_len].to_vec(),
                    ty: u16::from_be_bytes([body[2], body[3]]),
                    data: body[4 + spi_len..].to_vec(),
                })
            }
            kind::DELETE => {
                if body.len() < 4 {
                    return Err(Error::Truncated("delete"));
                }
                let protocol = body[0];
                let spi_size = usize::from(body[1]);
                let n = usize::from(u16::from_be_bytes([body[2], body[3]]));
                let spis = match (protocol, spi_size) {
                    (1, 0) if body.len() == 4 => Vec::new(),
                    (2 | 3, 4) if body.len() == 4 + 4 * n => body[4..]
                        .chunks_exact(4)
                        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                    _ => return Err(Error::Malformed("delete payload")),
                };
                Payload::Delete(Delete { protocol, spis })
            }
            kind::TSI => Payload::TsI(ts::parse(body)?),
            kind::TSR => Payload::TsR(ts::parse(body)?),
            kind::VENDOR => Payload::Vendor(body.to_vec()),
            kind::SK | kind::SKF => return Err(Error::Malformed("nested SK payload")),
            _ if critical => return Err(Error::UnsupportedCritical(ty)),
            _ => Payload::Other {
                ty,
                data: body.to_vec(),
            },
        })
    }

    /// Append this payload's body (no generic header).
    pub fn emit_body(&self, out: &mut Vec<u8>) {
        match self {
            Payload::Sa(p) => sa::emit(p, out),
            Payload::Ke { group, data } => {
                out.extend_from_slice(&group.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(data);
            }
            Payload::Nonce(n) | Payload::Vendor(n) => out.extend_from_slice(n),
            Payload::IdI(id) | Payload::IdR(id) => out.extend_from_slice(&id.to_body()),
            Payload::Cert { encoding, data } | Payload::CertReq { encoding, data } => {
                out.push(*encoding);
                out.extend_from_slice(data);
            }
            Payload::Auth { method, data } => {
                out.extend_from_slice(&[*method, 0, 0, 0]);
                out.extend_from_slice(data);
            }
            Payload::Notify(n) => {
                out.push(n.protocol);
                out.push(n.spi.len() as u8);
                out.extend_from_slice(&n.ty.to_be_bytes());
                out.extend_from_slice(&n.spi);
                out.extend_from_slice(&n.data);
            }
            Payload::Delete(d) => {
                out.push(d.protocol);
                out.push(if d.protocol == 1 { 0 } else { 4 });
                out.extend_from_slice(&(d.spis.len() as u16).to_be_bytes());
                for s in &d.spis {
                    out.extend_from_slice(&s.to_be_bytes());
                }
            }
            Payload::TsI(t) | Payload::TsR(t) => ts::emit(t, out),
            Payload::Other { data, .. } => out.extend_from_slice(data),
        }
    }
}

/// One payload in a chain, borrowed from the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawPayload<'a> {
    /// Payload type.
    pub ty: u8,
    /// Critical bit (RFC 7296 §3.2).
    pub critical: bool,
    /// Next payload field (for SK/SKF: the first inner payload's type).
    pub next: u8,
    /// Body without the 4-byte generic header.
    pub body: &'a [u8],
    /// Offset of the generic header within the buffer walked.
    pub offset: usize,
}

/// Zero-copy walk over a payload chain; errors end the walk.
#[derive(Debug, Clone)]
pub struct RawPayloads<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
    next: u8,
    count: usize,
    done: bool,
}

impl<'a> RawPayloads<'a> {
    /// Walk `buf` whose first payload has type `first`; `base` is added to
    /// the reported offsets (e.g. 28 when `buf` follows the IKE header).
    pub fn new(first: u8, buf: &'a [u8], base: usize) -> Self {
        RawPayloads {
            buf,
            pos: 0,
            base,
            next: first,
            count: 0,
            done: false,
        }
    }
}

impl<'a> Iterator for RawPayloads<'a> {
    type Item = Result<RawPayload<'a>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.next == kind::NONE {
            self.done = true;
            if self.pos != self.buf.len() {
                return Some(Err(Error::BadLength("trailing bytes after payloads")));
            }
            return None;
        }
        self.done = true;
        self.count += 1;
        if self.count > MAX_PAYLOADS {
            return Some(Err(Error::TooMany("payloads")));
        }
        let rest = &self.buf[self.pos..];
        if rest.len() < 4 {
            return Some(Err(Error::Truncated("payload header")));
        }
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        if len < 4 || len > rest.len() {
            return Some(Err(Error::BadLength("payload")));
        }
        let ty = self.next;
        let p = RawPayload {
            ty,
            critical: rest[1] & 0x80 != 0,
            next: rest[0],
            body: &rest[4..len],
            offset: self.base + self.pos,
        };
        self.pos += len;
        if ty == kind::SK || ty == kind::SKF {
            // The encrypted payload must be last (RFC 7296 §3.14); its
            // next-payload field names the first inner payload.
            if self.pos != self.buf.len() {
                return Some(Err(Error::Malformed("SK not last")));
            }
        } else {
            self.next = p.next;
            self.done = false;
        }
        Some(Ok(p))
    }
}

/// Decode a whole plaintext chain into owned payloads.
pub fn decode_chain(first: u8, buf: &[u8]) -> Result<Vec<Payload>> {
    let mut out = Vec::new();
    for raw in RawPayloads::new(first, buf, 0) {
        let raw = raw?;
        if raw.ty == kind::SK || raw.ty == kind::SKF {
            return Err(Error::Malformed("unexpected SK payload"));
        }
        out.push(Payload::decode(raw.ty, raw.critical, raw.body)?);
    }
    Ok(out)
}

/// Encode a chain; returns the first payload's type (0 for none).
pub fn encode_chain(payloads: &[Payload], out: &mut Vec<u8>) -> u8 {
    for (i, p) in payloads.iter().enumerate() {
        let start = out.len();
        let next = payloads.get(i + 1).map_or(kind::NONE, Payload::kind);
        out.extend_from_slice(&[next, 0, 0, 0]);
        p.emit_body(out);
        let len = (out.len() - start) as u16;
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    }
    payloads.first().map_or(kind::NONE, Payload::kind)
}
