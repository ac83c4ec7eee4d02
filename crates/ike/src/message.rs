//! IKE header (RFC 7296 §3.1) and whole messages, plain or protected by an
//! SK payload (§3.14) or SKF fragments (RFC 7383 §2.5).

use crate::crypto::SkKeys;
use crate::error::{Error, Result};
use crate::payload::typed::Kind;
use crate::payload::{self, kind, Payload, RawPayloads};

/// Upper bound on a message we accept or build: IKE over UDP never needs
/// more, and it bounds every allocation driven by wire input.
pub const MAX_MESSAGE_LEN: usize = 65_535;
/// IKE header length.
pub const HEADER_LEN: usize = 28;

/// Exchange types (RFC 7296 §3.1).
pub mod exchange {
    /// IKE_SA_INIT.
    pub const IKE_SA_INIT: u8 = 34;
    /// IKE_AUTH.
    pub const IKE_AUTH: u8 = 35;
    /// CREATE_CHILD_SA.
    pub const CREATE_CHILD_SA: u8 = 36;
    /// INFORMATIONAL.
    pub const INFORMATIONAL: u8 = 37;
}

/// Header flags.
pub mod flags {
    /// Sender is the original initiator of the IKE SA.
    pub const INITIATOR: u8 = 0x08;
    /// Higher version supported.
    pub const VERSION: u8 = 0x10;
    /// Message is a response.
    pub const RESPONSE: u8 = 0x20;
}

/// The fixed IKE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Initiator's SPI.
    pub spi_i: u64,
    /// Responder's SPI (0 in the first IKE_SA_INIT request).
    pub spi_r: u64,
    /// First payload type.
    pub next: u8,
    /// Exchange type.
    pub exchange: u8,
    /// Flags (see [`flags`]).
    pub flags: u8,
    /// Message ID.
    pub msg_id: u32,
    /// Total length including the header.
    pub length: u32,
}

impl Header {
    /// Parse and validate a header against the datagram length.
    pub fn parse(buf: &[u8]) -> Result<Header> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated("IKE header"));
        }
        if buf.len() > MAX_MESSAGE_LEN {
            return Err(Error::TooLong);
        }
        if buf[17] >> 4 != 2 {
            return Err(Error::BadVersion(buf[17] >> 4));
        }
        let be32 = |o: usize| u32::from_be_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
        let be64 = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&buf[o..o + 8]);
            u64::from_be_bytes(a)
        };
        let h = Header {
            spi_i: be64(0),
            spi_r: be64(8),
            next: buf[16],
            exchange: buf[18],
            flags: buf[19],
            msg_id: be32(20),
            length: be32(24),
        };
        if h.length as usize != buf.len() {
            return Err(Error::BadLength("IKE header"));
        }
        Ok(h)
    }

    /// Write the 28 header bytes.
    pub fn emit(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.spi_i.to_be_bytes());
        out[8..16].copy_from_slice(&self.spi_r.to_be_bytes());
        out[16] = self.next;
        out[17] = 0x20;
        out[18] = self.exchange;
        out[19] = self.flags;
        out[20..24].copy_from_slice(&self.msg_id.to_be_bytes());
        out[24..28].copy_from_slice(&self.length.to_be_bytes());
    }

    /// Response flag set.
    pub fn is_response(&self) -> bool {
        self.flags & flags::RESPONSE != 0
    }
    /// Sent by the original initiator.
    pub fn from_initiator(&self) -> bool {
        self.flags & flags::INITIATOR != 0
    }
}

/// A message with its payloads decoded (after decryption if protected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Header (its `next`/`length` are recomputed on build).
    pub header: Header,
    /// Payloads in order.
    pub payloads: Vec<Payload>,
}

impl Message {
    /// Build an unprotected message (IKE_SA_INIT).
    pub fn build_plain(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; HEADER_LEN];
        let first = payload::encode_chain(&self.payloads, &mut out);
        if out.len() > MAX_MESSAGE_LEN {
            return Err(Error::TooLong);
        }
        let mut h = self.header;
        h.next = first;
        h.length = out.len() as u32;
        h.emit(&mut out[..HEADER_LEN]);
        Ok(out)
    }

    /// Parse an unprotected message; an SK payload is an error here.
    pub fn parse_plain(buf: &[u8]) -> Result<Message> {
        let header = Header::parse(buf)?;
        let payloads = payload::decode_chain(header.next, &buf[HEADER_LEN..])?;
        Ok(Message { header, payloads })
    }

    /// Build a message whose payloads all go inside one SK payload.
    pub fn build_protected(&self, keys: &SkKeys) -> Result<Vec<u8>> {
        let mut inner = Vec::new();
        let first = payload::encode_chain(&self.payloads, &mut inner);
        let mut out = vec![0u8; HEADER_LEN];
        out.extend_from_slice(&[first, 0, 0, 0]);
        let mut h = self.header;
        h.next = kind::SK;
        keys.seal(&mut out, inner, HEADER_LEN, &h)?;
        Ok(out)
    }

    /// Parse a message that carries an SK payload: verify, decrypt and
    /// decode. Payloads before SK are decoded too (none in practice).
    pub fn parse_protected(buf: &[u8], keys: &SkKeys) -> Result<Message> {
        let header = Header::parse(buf)?;
        let mut payloads = Vec::new();
        for raw in RawPayloads::new(header.next, &buf[HEADER_LEN..], HEADER_LEN) {
            let raw = raw?;
            match raw.ty {
                kind::SK => {
                    let body_off = raw.offset + 4;
                    let plain = keys.open(buf, body_off)?;
                    payloads.extend(payload::decode_chain(raw.next, &plain)?);
                    return Ok(Message { header, payloads });
                }
                kind::SKF => return Err(Error::Unsupported("SKF outside reassembly")),
                _ => payloads.push(Payload::decode(raw.ty, raw.critical, raw.body)?),
            }
        }
        Err(Error::Malformed("missing SK payload"))
    }

    /// The first payload of kind `K` ([`payload::typed`]).
    pub fn get<K: Kind>(&self) -> Option<K::Body<'_>> {
        self.payloads.iter().find_map(K::body)
    }

    /// The first payload of kind `K`; its absence is malformed input.
    pub fn need<K: Kind>(&self) -> Result<K::Body<'_>> {
        self.get::<K>().ok_or(Error::Malformed(K::MISSING))
    }

    /// Notify payloads of a type.
    pub fn notify(&self, ty: u16) -> Option<&payload::Notify> {
        self.payloads.iter().find_map(|p| match p {
            Payload::Notify(n) if n.ty == ty => Some(n),
            _ => None,
        })
    }

    /// The CERT payloads, in order: (encoding, data).
    pub fn certs(&self) -> impl Iterator<Item = (u8, &[u8])> {
        self.payloads.iter().filter_map(|p| match p {
            Payload::Cert { encoding, data } => Some((*encoding, data.as_slice())),
            _ => None,
        })
    }

    /// The CERTREQ payloads, in order: (encoding, data).
    pub fn cert_reqs(&self) -> impl Iterator<Item = (u8, &[u8])> {
        self.payloads.iter().filter_map(|p| match p {
            Payload::CertReq { encoding, data } => Some((*encoding, data.as_slice())),
            _ => None,
        })
    }

    /// First error notify, if any.
    pub fn error_notify(&self) -> Option<u16> {
        self.payloads.iter().find_map(|p| match p {
            Payload::Notify(n) if n.is_error() => Some(n.ty),
            _ => None,
        })
    }
}

/// Parsed SKF fragment header fields (RFC 7383 §2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentInfo {
    /// 1-based fragment number.
    pub number: u16,
    /// Total fragments.
    pub total: u16,
}

/// Read fragment numbering from an SKF payload body.
pub fn fragment_info(body: &[u8]) -> Result<FragmentInfo> {
    if body.len() < 4 {
        return Err(Error::Truncated("SKF"));
    }
    let number = u16::from_be_bytes([body[0], body[1]]);
    let total = u16::from_be_bytes([body[2], body[3]]);
    if number == 0 || total == 0 || number > total {
        return Err(Error::Malformed("SKF numbering"));
    }
    Ok(FragmentInfo { number, total })
}

/// Most fragments we build or reassemble for one message (RFC 7383 §2.5
/// allows up to 65535; real messages need a handful).
pub const MAX_FRAGMENTS: usize = 64;

impl Message {
    /// Build the message as RFC 7383 SKF fragments of at most `max_len`
    /// bytes each (IKE header included). One fragment if it fits.
    pub fn build_fragments(&self, keys: &SkKeys, max_len: usize) -> Result<Vec<Vec<u8>>> {
        let mut inner = Vec::new();
        let first = payload::encode_chain(&self.payloads, &mut inner);
        let fixed = HEADER_LEN + 4 + keys.overhead();
        let chunk = max_len
            .checked_sub(fixed)
            .filter(|c| *c >= 16)
            .ok_or(Error::Malformed("fragment size too small"))?;
        let total = inner.len().div_ceil(chunk).max(1);
        if total > MAX_FRAGMENTS {
            return Err(Error::TooLong);
        }
        let mut h = self.header;
        h.next = kind::SKF;
        let mut out = Vec::with_capacity(total);
        for i in 0..total {
            let part = inner
                .get(i * chunk..inner.len().min((i + 1) * chunk))
                .unwrap_or(&[]);
            let mut buf = vec![0u8; HEADER_LEN];
            // Only the first fragment names the first inner payload (§2.5).
            buf.extend_from_slice(&[if i == 0 { first } else { 0 }, 0, 0, 0]);
            buf.extend_from_slice(&((i + 1) as u16).to_be_bytes());
            buf.extend_from_slice(&(total as u16).to_be_bytes());
            keys.seal(&mut buf, part.to_vec(), HEADER_LEN, &h)?;
            out.push(buf);
        }
        Ok(out)
    }
}

/// One verified and decrypted SKF fragment.
#[derive(Debug)]
pub struct Fragment {
    /// Header of the datagram carrying it.
    pub header: Header,
    /// Numbering.
    pub info: FragmentInfo,
    /// First inner payload type (fragment 1 only; 0 otherwise).
    pub next: u8,
    /// Decrypted chunk of the inner payload chain.
    pub plain: crate::crypto::Secret,
}

/// Verify and decrypt one SKF fragment (RFC 7383 §2.6: each fragment is
/// authenticated on its own, before reassembly).
pub fn open_fragment(buf: &[u8], keys: &SkKeys) -> Result<Fragment> {
    let header = Header::parse(buf)?;
    if header.next != kind::SKF {
        return Err(Error::Malformed("not a fragment"));
    }
    let raw = RawPayloads::new(header.next, &buf[HEADER_LEN..], HEADER_LEN)
        .next()
        .ok_or(Error::Truncated("SKF"))??;
    let info = fragment_info(raw.body)?;
    let iv_off = raw.offset + 8;
    let plain = keys.open(buf, iv_off)?;
    Ok(Fragment {
        header,
        info,
        next: raw.next,
        plain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::{DhGroup, Encr, IkeKeys, IkeSuite, Integ, Prf};
    use crate::payload::Notify;

    #[test]
    fn header_rejects_bad_version_and_length() {
        let m = Message {
            header: Header {
                spi_i: 1,
                spi_r: 0,
                next: 0,
                exchange: exchange::IKE_SA_INIT,
                flags: flags::INITIATOR,
                msg_id: 0,
                length: 0,
            },
            payloads: vec![Payload::Nonce(vec![7; 16])],
        };
        let mut w = m.build_plain().unwrap();
        assert_eq!(w.len(), 28 + 4 + 16);
        assert_eq!(w[16], kind::NONCE);
        assert_eq!(Message::parse_plain(&w).unwrap(), {
            let mut x = m.clone();
            x.header.next = kind::NONCE;
            x.header.length = w.len() as u32;
            x
        });
        w[17] = 0x10;
        assert_eq!(Header::parse(&w), Err(Error::BadVersion(1)));
        w[17] = 0x20;
        w.push(0);
        assert_eq!(Header::parse(&w), Err(Error::BadLength("IKE header")));
        assert_eq!(
            Header::parse(&vec![0u8; MAX_MESSAGE_LEN + 1]),
            Err(Error::TooLong)
        );
    }

    #[test]
    fn fragments_round_trip_and_authenticate() {
        for suite in [
            IkeSuite {
                encr: Encr::AesGcm16(16),
                prf: Prf::HmacSha256,
                integ: None,
                dh: DhGroup::Curve25519,
            },
            IkeSuite {
                encr: Encr::AesCbc(32),
                prf: Prf::HmacSha256,
                integ: Some(Integ::HmacSha256_128),
                dh: DhGroup::Ecp256,
            },
        ] {
            let k = IkeKeys::initial(&suite, &[3; 32], &[1; 16], &[2; 16], 9, 10).unwrap();
            let (i, r) = (k.sk_keys(&suite, true), k.sk_keys(&suite, false));
            let m = Message {
                header: Header {
                    spi_i: 9,
                    spi_r: 10,
                    next: 0,
                    exchange: exchange::IKE_AUTH,
                    flags: flags::INITIATOR,
                    msg_id: 1,
                    length: 0,
                },
                payloads: (0..20)
                    .map(|n| Payload::Notify(Notify::new(40000 + n, vec![n as u8; 30])))
                    .collect(),
            };
            let frags = m.build_fragments(&i, 256).unwrap();
            assert!(frags.len() > 3);
            let mut plain = Vec::new();
            let mut first = 0;
            for (n, f) in frags.iter().enumerate() {
                assert!(f.len() <= 256);
                let o = open_fragment(f, &r).unwrap();
                assert_eq!(usize::from(o.info.number), n + 1);
                assert_eq!(usize::from(o.info.total), frags.len());
                if n == 0 {
                    first = o.next;
                } else {
                    assert_eq!(o.next, 0);
                }
                plain.extend_from_slice(&o.plain);
                // Every fragment is authenticated on its own.
                let mut bad = f.clone();
                bad[33] ^= 1; // fragment number
                assert!(open_fragment(&bad, &r).is_err());
            }
            assert_eq!(payload::decode_chain(first, &plain).unwrap(), m.payloads);
            assert!(m.build_fragments(&i, 40).is_err());
        }
    }
}
