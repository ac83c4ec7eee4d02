//! SA payload: proposals, transforms and attributes (RFC 7296 §3.3).

use crate::error::{Error, Result};

/// Protocol IDs in a proposal (RFC 7296 §3.3.1).
pub const PROTO_IKE: u8 = 1;
/// ESP protocol ID.
pub const PROTO_ESP: u8 = 3;

/// Transform types (RFC 7296 §3.3.2).
pub const TT_ENCR: u8 = 1;
/// Pseudo-random function.
pub const TT_PRF: u8 = 2;
/// Integrity algorithm.
pub const TT_INTEG: u8 = 3;
/// Diffie-Hellman group (key exchange method).
pub const TT_DH: u8 = 4;
/// Extended sequence numbers.
pub const TT_ESN: u8 = 5;

/// Key Length attribute type (RFC 7296 §3.3.5), always TV format.
pub const ATTR_KEY_LENGTH: u16 = 14;

const MAX_PROPOSALS: usize = 64;
const MAX_TRANSFORMS: usize = 64;

/// One transform of a proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Transform {
    /// Transform type (`TT_*`).
    pub ty: u8,
    /// Transform ID within the type.
    pub id: u16,
    /// Key Length attribute in bits, if present.
    pub key_len: Option<u16>,
    /// An attribute we did not recognise was present: RFC 7296 §3.3.6 says
    /// such a transform must be rejected, so selection skips it.
    pub unknown_attr: bool,
}

impl Transform {
    /// A transform without attributes.
    pub const fn new(ty: u8, id: u16) -> Self {
        Transform {
            ty,
            id,
            key_len: None,
            unknown_attr: false,
        }
    }
    /// A transform with a Key Length attribute.
    pub const fn with_key_len(ty: u8, id: u16, bits: u16) -> Self {
        Transform {
            ty,
            id,
            key_len: Some(bits),
            unknown_attr: false,
        }
    }
}

/// One proposal (RFC 7296 §3.3.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// Proposal number (1-based).
    pub num: u8,
    /// `PROTO_IKE` or `PROTO_ESP`.
    pub protocol: u8,
    /// SPI: empty in an initial IKE_SA_INIT, 8 bytes for an IKE rekey,
    /// 4 bytes for ESP.
    pub spi: Vec<u8>,
    /// Transforms in wire order.
    pub transforms: Vec<Transform>,
}

impl Proposal {
    /// First transform of a type.
    pub fn first(&self, ty: u8) -> Option<&Transform> {
        self.transforms.iter().find(|t| t.ty == ty)
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Parse an SA payload body.
pub fn parse(body: &[u8]) -> Result<Vec<Proposal>> {
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        if rest.len() < 8 {
            return Err(Error::Truncated("proposal"));
        }
        if out.len() >= MAX_PROPOSALS {
            return Err(Error::TooMany("proposals"));
        }
        let last = rest[0];
        let len = usize::from(be16(rest, 2));
        if len < 8 || len > rest.len() {
            return Err(Error::BadLength("proposal"));
        }
        let (p, tail) = rest.split_at(len);
        let num = p[4];
        let protocol = p[5];
        let spi_size = usize::from(p[6]);
        let ntrans = usize::from(p[7]);
        if 8 + spi_size > p.len() {
            return Err(Error::BadLength("proposal SPI"));
        }
        if ntrans > MAX_TRANSFORMS {
            return Err(Error::TooMany("transforms"));
        }
        let spi = p[8..8 + spi_size].to_vec();
        let mut tr = &p[8 + spi_size..];
        let mut transforms = Vec::with_capacity(ntrans);
        for i in 0..ntrans {
            if tr.len() < 8 {
                return Err(Error::Truncated("transform"));
            }
            let tlast = tr[0];
            let tlen = usize::from(be16(tr, 2));
            if tlen < 8 || tlen > tr.len() {
                return Err(Error::BadLength("transform"));
            }
            if (tlast == 0) != (i + 1 == ntrans) || (tlast != 0 && tlast != 3) {
                return Err(Error::Malformed("transform last flag"));
            }
            let mut t = Transform::new(tr[4], be16(tr, 6));
            let mut attrs = &tr[8..tlen];
            while !attrs.is_empty() {
                if attrs.len() < 4 {
                    return Err(Error::Truncated("attribute"));
                }
                let at = be16(attrs, 0);
                let tv = at & 0x8000 != 0;
                let aty = at & 0x7fff;
                if tv {
                    if aty == ATTR_KEY_LENGTH {
                        t.key_len = Some(be16(attrs, 2));
                    } else {
                        t.unknown_attr = true;
                    }
                    attrs = &attrs[4..];
                } else {
                    let alen = usize::from(be16(attrs, 2));
                    if 4 + alen > attrs.len() {
                        return Err(Error::BadLength("attribute"));
                    }
                    t.unknown_attr = true;
                    attrs = &attrs[4 + alen..];
                }
            }
            transforms.push(t);
            tr = &tr[tlen..];
        }
        if !tr.is_empty() {
            return Err(Error::BadLength("proposal transforms"));
        }
        out.push(Proposal {
            num,
            protocol,
            spi,
            transforms,
        });
        rest = tail;
        match last {
            0 => {
                if !rest.is_empty() {
                    return Err(Error::BadLength("SA payload"));
                }
                return Ok(out);
            }
            2 => {}
            _ => return Err(Error::Malformed("proposal last flag")),
        }
    }
}

/// Append an SA payload body.
pub fn emit(props: &[Proposal], out: &mut Vec<u8>) {
    for (pi, p) in props.iter().enumerate() {
        let start = out.len();
        out.push(if pi + 1 == props.len() { 0 } else { 2 });
        out.push(0);
        out.extend_from_slice(&[0, 0]);
        out.push(p.num);
        out.push(p.protocol);
        out.push(p.spi.len() as u8);
        out.push(p.transforms.len() as u8);
        out.extend_from_slice(&p.spi);
        for (ti, t) in p.transforms.iter().enumerate() {
            out.push(if ti + 1 == p.transforms.len() { 0 } else { 3 });
            out.push(0);
            let len: u16 = if t.key_len.is_some() { 12 } else { 8 };
            out.extend_from_slice(&len.to_be_bytes());
            out.push(t.ty);
            out.push(0);
            out.extend_from_slice(&t.id.to_be_bytes());
            if let Some(k) = t.key_len {
                out.extend_from_slice(&(0x8000 | ATTR_KEY_LENGTH).to_be_bytes());
                out.extend_from_slice(&k.to_be_bytes());
            }
        }
        let plen = (out.len() - start) as u16;
        out[start + 2..start + 4].copy_from_slice(&plen.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_attributes() {
        let props = vec![Proposal {
            num: 1,
            protocol: PROTO_ESP,
            spi: vec![1, 2, 3, 4],
            transforms: vec![
                Transform::with_key_len(TT_ENCR, 20, 128),
                Transform::new(TT_ESN, 0),
            ],
        }];
        let mut b = Vec::new();
        emit(&props, &mut b);
        assert_eq!(b.len(), 8 + 4 + 12 + 8);
        assert_eq!(&b[12..16], &[3, 0, 0, 12]);
        assert_eq!(parse(&b).unwrap(), props);
        // Truncate every way: never panics, always errors.
        for n in 0..b.len() {
            assert!(parse(&b[..n]).is_err());
        }
    }

    #[test]
    fn unknown_attribute_is_flagged() {
        let b = [
            0, 0, 0, 20, 1, 1, 0, 1, 0, 0, 0, 12, 1, 0, 0, 12, 0x80, 0x07, 0, 1,
        ];
        let p = parse(&b).unwrap();
        assert!(p[0].transforms[0].unknown_attr);
    }
}
