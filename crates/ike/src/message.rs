//! IKE header (RFC 7296 §3.1) and whole messages, plain or protected by an
//! SK payload (§3.14) or SKF fragments (RFC 7383 §2.5).

use crate::crypto::SkKeys;
use crate::error::{Error, Result};
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
                    let plain = keys.open(buf, raw.offset, body_off)?;
                    payloads.extend(payload::decode_chain(raw.next, &plain)?);
                    return Ok(Message { header, payloads });
                }
                kind::SKF => return Err(Error::Unsupported("SKF outside reassembly")),
                _ => payloads.push(Payload::decode(raw.ty, raw.critical, raw.body)?),
            }
        }
        Err(Error::Malformed("missing SK payload"))
    }

    /// Notify payloads of a type.
    pub fn notify(&self, ty: u16) -> Option<&payload::Notify> {
        self.payloads.iter().find_map(|p| match p {
            Payload::Notify(n) if n.ty == ty => Some(n),
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
