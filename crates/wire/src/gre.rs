//! Generic Routing Encapsulation: RFC 2784 with the key and sequence number
//! extensions of RFC 2890.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |C| |K|S| Reserved0       | Ver |         Protocol Type         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |      Checksum (optional)      |       Reserved1 (Optional)    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                         Key (optional)                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                 Sequence Number (Optional)                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The view's buffer must end where the GRE packet ends (the outer IP
//! payload length), because the checksum covers the whole GRE payload.

use crate::{checksum, Error, Result};

/// IP protocol number of GRE (IANA).
pub const IP_PROTOCOL: u8 = 47;

/// Length of the mandatory part of the header.
pub const BASE_HEADER_LEN: usize = 4;
/// Largest header: base + checksum/reserved1 + key + sequence number.
pub const MAX_HEADER_LEN: usize = 16;

mod field {
    pub const FLAGS: usize = 0;
    pub const VER: usize = 1;
    pub const PROTOCOL: core::ops::Range<usize> = 2..4;

    /// C: checksum and Reserved1 present (RFC 2784 §2.5).
    pub const F_CHECKSUM: u8 = 0x80;
    /// K: key present (RFC 2890 §2.1).
    pub const F_KEY: u8 = 0x20;
    /// S: sequence number present (RFC 2890 §2.1).
    pub const F_SEQ: u8 = 0x10;
    /// Bits 1, 4 and 5 of Reserved0: the RFC 1701 routing, strict source
    /// route and (top) recursion-control bits. With K and S taken by RFC
    /// 2890, these are the remaining ones of bits 1-5 that RFC 2784 §2.5.1
    /// says a receiver MUST discard on.
    pub const F_MUST_DISCARD: u8 = 0x4c;
    /// Reserved0 in the first byte: bits 1, 4-7 (bits 0, 2, 3 are C, K, S).
    pub const RESERVED0_HI: u8 = 0x4f;
    /// Reserved0 in the second byte: bits 8-12.
    pub const RESERVED0_LO: u8 = 0xf8;
    /// Version occupies bits 13-15.
    pub const VER_MASK: u8 = 0x07;
}

/// Well-known GRE protocol types (EtherType values, RFC 2784 §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// 0x0800.
    Ipv4,
    /// 0x86dd.
    Ipv6,
    /// 0x6558, Transparent Ethernet Bridging: an Ethernet frame inside.
    TransparentEthernet,
    /// Anything else, kept verbatim.
    Unknown(u16),
}

impl From<u16> for Protocol {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => Protocol::Ipv4,
            0x86dd => Protocol::Ipv6,
            0x6558 => Protocol::TransparentEthernet,
            other => Protocol::Unknown(other),
        }
    }
}

impl From<Protocol> for u16 {
    fn from(p: Protocol) -> u16 {
        match p {
            Protocol::Ipv4 => 0x0800,
            Protocol::Ipv6 => 0x86dd,
            Protocol::TransparentEthernet => 0x6558,
            Protocol::Unknown(v) => v,
        }
    }
}

/// Header length implied by the C, K and S bits of the first byte.
#[inline]
fn header_len_for(flags: u8) -> usize {
    let mut len = BASE_HEADER_LEN;
    if flags & field::F_CHECKSUM != 0 {
        len += 4;
    }
    if flags & field::F_KEY != 0 {
        len += 4;
    }
    if flags & field::F_SEQ != 0 {
        len += 4;
    }
    len
}

/// A read/write view of a GRE packet (header and payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gre<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Gre<T> {
    /// Wraps a buffer without any check; getters may panic on short input.
    pub const fn new_unchecked(buffer: T) -> Self {
        Gre { buffer }
    }

    /// Wraps a buffer after checking the version, the reserved bits and that
    /// the whole flag-dependent header is present.
    ///
    /// Errors: [`Error::Truncated`] for a short buffer, [`Error::BadVersion`]
    /// for a version other than 0 (RFC 2784 §2.3.1; version 1 is PPTP), and
    /// [`Error::Malformed`] when any of Reserved0 bits 1-5 other than K and S
    /// is set (RFC 2784 §2.5.1: such packets MUST be discarded by a receiver
    /// that does not implement RFC 1701). Bits 6-12 are ignored on receipt.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The validation done by [`Gre::new_checked`].
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < BASE_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[field::VER] & field::VER_MASK != 0 {
            return Err(Error::BadVersion);
        }
        if b[field::FLAGS] & field::F_MUST_DISCARD != 0 {
            return Err(Error::Malformed);
        }
        if b.len() < header_len_for(b[field::FLAGS]) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length from the C, K and S bits: 4, 8, 12 or 16.
    #[inline]
    pub fn header_len(&self) -> usize {
        header_len_for(self.buffer.as_ref()[field::FLAGS])
    }

    /// C bit: checksum (and Reserved1) present.
    #[inline]
    pub fn checksum_present(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & field::F_CHECKSUM != 0
    }

    /// K bit: key present.
    #[inline]
    pub fn key_present(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & field::F_KEY != 0
    }

    /// S bit: sequence number present.
    #[inline]
    pub fn seq_present(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & field::F_SEQ != 0
    }

    /// Every Reserved0 bit is zero (bits 1 and 4-12, with K and S of RFC
    /// 2890 taken out), as every sender transmits them (RFC 2784 §2.5.1).
    /// Stricter than [`Gre::check_len`], which ignores bits 6-12 on receipt;
    /// the gateway refuses them, as it refuses anything it would not send.
    #[inline]
    pub fn reserved0_clear(&self) -> bool {
        let b = self.buffer.as_ref();
        b[field::FLAGS] & field::RESERVED0_HI == 0 && b[field::VER] & field::RESERVED0_LO == 0
    }

    /// Version field (0 for every packet accepted by `new_checked`).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER] & field::VER_MASK
    }

    /// Raw protocol type (an EtherType).
    #[inline]
    pub fn protocol_type(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::PROTOCOL.start], b[field::PROTOCOL.start + 1]])
    }

    /// Protocol type as an enum.
    #[inline]
    pub fn protocol(&self) -> Protocol {
        Protocol::from(self.protocol_type())
    }

    /// Checksum field, when C is set.
    #[inline]
    pub fn checksum(&self) -> Option<u16> {
        if !self.checksum_present() {
            return None;
        }
        let b = self.buffer.as_ref();
        Some(u16::from_be_bytes([b[4], b[5]]))
    }

    /// Reserved1 field, when C is set (sent as zero, RFC 2784 §2.5.2).
    #[inline]
    pub fn reserved1(&self) -> Option<u16> {
        if !self.checksum_present() {
            return None;
        }
        let b = self.buffer.as_ref();
        Some(u16::from_be_bytes([b[6], b[7]]))
    }

    #[inline]
    fn key_offset(&self) -> usize {
        if self.checksum_present() {
            8
        } else {
            4
        }
    }

    #[inline]
    fn seq_offset(&self) -> usize {
        self.key_offset() + if self.key_present() { 4 } else { 0 }
    }

    /// Key field, when K is set (RFC 2890 §2.1).
    #[inline]
    pub fn key(&self) -> Option<u32> {
        if !self.key_present() {
            return None;
        }
        let o = self.key_offset();
        let b = self.buffer.as_ref();
        Some(u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]))
    }

    /// Sequence number, when S is set (RFC 2890 §2.2).
    #[inline]
    pub fn sequence_number(&self) -> Option<u32> {
        if !self.seq_present() {
            return None;
        }
        let o = self.seq_offset();
        let b = self.buffer.as_ref();
        Some(u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]))
    }

    /// True when C is clear, or the checksum over header and payload
    /// verifies (RFC 2784 §2.5: the one's complement sum including the
    /// checksum field itself is 0xffff).
    pub fn verify_checksum(&self) -> bool {
        !self.checksum_present() || checksum::verify(self.buffer.as_ref())
    }

    /// The encapsulated packet.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let hl = self.header_len();
        &self.buffer.as_ref()[hl..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Gre<T> {
    /// Writes the C, K and S bits, clearing every reserved bit and the
    /// version (reserved bits MUST be sent as zero, RFC 2784 §2.5.1).
    #[inline]
    pub fn set_flags(&mut self, checksum: bool, key: bool, seq: bool) {
        let mut f = 0;
        if checksum {
            f |= field::F_CHECKSUM;
        }
        if key {
            f |= field::F_KEY;
        }
        if seq {
            f |= field::F_SEQ;
        }
        let b = self.buffer.as_mut();
        b[field::FLAGS] = f;
        b[field::VER] = 0;
    }

    /// Writes the protocol type.
    #[inline]
    pub fn set_protocol_type(&mut self, v: u16) {
        self.buffer.as_mut()[field::PROTOCOL].copy_from_slice(&v.to_be_bytes());
    }

    /// Writes the checksum field (needs C set); no-op otherwise.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        if self.checksum_present() {
            let b = self.buffer.as_mut();
            b[4..6].copy_from_slice(&v.to_be_bytes());
            b[6..8].fill(0);
        }
    }

    /// Writes the key (needs K set); no-op otherwise.
    #[inline]
    pub fn set_key(&mut self, v: u32) {
        if self.key_present() {
            let o = self.key_offset();
            self.buffer.as_mut()[o..o + 4].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// Writes the sequence number (needs S set); no-op otherwise.
    #[inline]
    pub fn set_sequence_number(&mut self, v: u32) {
        if self.seq_present() {
            let o = self.seq_offset();
            self.buffer.as_mut()[o..o + 4].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// Computes and stores the checksum over header and payload (needs C
    /// set; no-op otherwise). The payload must already be in place.
    pub fn fill_checksum(&mut self) {
        if self.checksum_present() {
            self.set_checksum(0);
            let c = checksum::checksum(self.buffer.as_ref());
            self.set_checksum(c);
        }
    }

    /// The encapsulated packet, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[hl..]
    }
}

/// A GRE header in plain form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GreRepr {
    /// C bit: a checksum over header and payload is carried.
    pub checksum: bool,
    /// K bit and key (RFC 2890 §2.1).
    pub key: Option<u32>,
    /// S bit and sequence number (RFC 2890 §2.2).
    pub seq: Option<u32>,
    /// Protocol type of the payload.
    pub protocol: Protocol,
}

impl GreRepr {
    /// Parses a checked view, verifying the checksum when present
    /// ([`Error::BadChecksum`] otherwise).
    pub fn parse<T: AsRef<[u8]>>(p: &Gre<T>) -> Result<Self> {
        p.check_len()?;
        if !p.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        Ok(GreRepr {
            checksum: p.checksum_present(),
            key: p.key(),
            seq: p.sequence_number(),
            protocol: p.protocol(),
        })
    }

    /// Header length this representation emits.
    pub const fn header_len(&self) -> usize {
        let mut len = BASE_HEADER_LEN;
        if self.checksum {
            len += 4;
        }
        if self.key.is_some() {
            len += 4;
        }
        if self.seq.is_some() {
            len += 4;
        }
        len
    }

    /// Writes the header into the front of `p`, whose payload (after
    /// `header_len()` bytes) must already be in place, and fills the
    /// checksum when `self.checksum`. [`Error::Truncated`] if `p` is shorter
    /// than the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Gre<T>) -> Result<()> {
        if p.buffer.as_ref().len() < self.header_len() {
            return Err(Error::Truncated);
        }
        p.set_flags(self.checksum, self.key.is_some(), self.seq.is_some());
        p.set_protocol_type(self.protocol.into());
        if let Some(k) = self.key {
            p.set_key(k);
        }
        if let Some(s) = self.seq {
            p.set_sequence_number(s);
        }
        p.fill_checksum();
        Ok(())
    }

    /// Writes the header immediately before `buf[payload_offset..]` (the
    /// headroom case of the encap path) and returns where the GRE header
    /// starts. The checksum, if any, covers `buf[start..]` to its end.
    ///
    /// [`Error::Truncated`] if the headroom is too small or
    /// `payload_offset` is beyond `buf`.
    pub fn emit_before(&self, buf: &mut [u8], payload_offset: usize) -> Result<usize> {
        if payload_offset > buf.len() {
            return Err(Error::Truncated);
        }
        let start = payload_offset
            .checked_sub(self.header_len())
            .ok_or(Error::Truncated)?;
        let mut p = Gre::new_unchecked(&mut buf[start..]);
        self.emit(&mut p)?;
        Ok(start)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reserved0_clear_sees_every_reserved_bit_but_not_c_k_s_or_version() {
        let mut b = [0xb0u8, 0x07, 0x08, 0x00];
        assert!(super::Gre::new_unchecked(&b[..]).reserved0_clear());
        for bit in [1u16, 4, 5, 6, 7, 8, 9, 10, 11, 12] {
            let w = (0xb007u16 | (0x8000 >> bit)).to_be_bytes();
            b[..2].copy_from_slice(&w);
            assert!(
                !super::Gre::new_unchecked(&b[..]).reserved0_clear(),
                "bit {bit}"
            );
        }
    }

    use super::*;

    /// C+K+S, protocol IPv4, key 0x01020304, seq 7, payload "abcd".
    /// Checksum computed by hand: sum of 16-bit words
    /// b000 0800 0000 0000 0102 0304 0000 0007 6162 6364 = 0x1_80d3 -> 80d4,
    /// complement 0x7f2b.
    static PKT_CKS: [u8; 20] = [
        0xb0, 0x00, 0x08, 0x00, 0x7f, 0x2b, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00,
        0x07, b'a', b'b', b'c', b'd',
    ];

    /// Only K, protocol 0x6558, key 0xdeadbeef, empty payload.
    static PKT_KEY: [u8; 8] = [0x20, 0x00, 0x65, 0x58, 0xde, 0xad, 0xbe, 0xef];

    fn repr_cks() -> GreRepr {
        GreRepr {
            checksum: true,
            key: Some(0x0102_0304),
            seq: Some(7),
            protocol: Protocol::Ipv4,
        }
    }

    #[test]
    fn deconstruct_full() {
        let p = Gre::new_checked(&PKT_CKS[..]).unwrap();
        assert_eq!(p.header_len(), 16);
        assert!(p.checksum_present() && p.key_present() && p.seq_present());
        assert_eq!(p.version(), 0);
        assert_eq!(p.protocol(), Protocol::Ipv4);
        assert_eq!(p.checksum(), Some(0x7f2b));
        assert_eq!(p.reserved1(), Some(0));
        assert_eq!(p.key(), Some(0x0102_0304));
        assert_eq!(p.sequence_number(), Some(7));
        assert!(p.verify_checksum());
        assert_eq!(p.payload(), b"abcd");
        assert_eq!(GreRepr::parse(&p).unwrap(), repr_cks());
    }

    #[test]
    fn deconstruct_key_only() {
        let p = Gre::new_checked(&PKT_KEY[..]).unwrap();
        assert_eq!(p.header_len(), 8);
        assert_eq!(p.checksum(), None);
        assert_eq!(p.sequence_number(), None);
        assert_eq!(p.key(), Some(0xdead_beef));
        assert_eq!(p.protocol(), Protocol::TransparentEthernet);
        assert!(p.payload().is_empty());
    }

    #[test]
    fn seq_only_offset() {
        let b = [0x10, 0, 0x86, 0xdd, 0, 0, 1, 0, 0xaa];
        let p = Gre::new_checked(&b[..]).unwrap();
        assert_eq!(p.key(), None);
        assert_eq!(p.sequence_number(), Some(256));
        assert_eq!(p.protocol(), Protocol::Ipv6);
        assert_eq!(p.payload(), &[0xaa]);
    }

    #[test]
    fn construct_full() {
        let mut b = [0xffu8; 20];
        b[16..].copy_from_slice(b"abcd");
        let mut p = Gre::new_unchecked(&mut b[..]);
        repr_cks().emit(&mut p).unwrap();
        assert_eq!(b, PKT_CKS);
    }

    #[test]
    fn construct_key_only() {
        let mut b = [0xffu8; 8];
        GreRepr {
            checksum: false,
            key: Some(0xdead_beef),
            seq: None,
            protocol: Protocol::TransparentEthernet,
        }
        .emit(&mut Gre::new_unchecked(&mut b[..]))
        .unwrap();
        assert_eq!(b, PKT_KEY);
    }

    #[test]
    fn emit_short_buffer() {
        let mut b = [0u8; 15];
        assert_eq!(
            repr_cks().emit(&mut Gre::new_unchecked(&mut b[..])),
            Err(Error::Truncated)
        );
        assert_eq!(b, [0u8; 15]);
    }

    #[test]
    fn emit_before_headroom() {
        let mut b = [0u8; 30];
        b[26..].copy_from_slice(b"abcd");
        let start = repr_cks().emit_before(&mut b, 26).unwrap();
        assert_eq!(start, 10);
        assert_eq!(&b[10..], &PKT_CKS[..]);
        assert_eq!(repr_cks().emit_before(&mut b, 15), Err(Error::Truncated));
        assert_eq!(repr_cks().emit_before(&mut b, 31), Err(Error::Truncated));
    }

    #[test]
    fn bad_checksum() {
        let mut b = PKT_CKS;
        b[19] ^= 1;
        let p = Gre::new_checked(&b[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(GreRepr::parse(&p), Err(Error::BadChecksum));
    }

    #[test]
    fn odd_length_checksum() {
        let mut b = [0u8; 13];
        b[8..].copy_from_slice(b"hello");
        let r = GreRepr {
            checksum: true,
            key: None,
            seq: None,
            protocol: Protocol::Unknown(0x88be),
        };
        r.emit(&mut Gre::new_unchecked(&mut b[..])).unwrap();
        let p = Gre::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(GreRepr::parse(&p).unwrap(), r);
        assert_eq!(u16::from(p.protocol()), 0x88be);
    }

    #[test]
    fn truncations() {
        for n in 0..16 {
            assert_eq!(
                Gre::new_checked(&PKT_CKS[..n]).err(),
                Some(Error::Truncated),
                "len {n}"
            );
        }
        for n in 0..8 {
            assert_eq!(
                Gre::new_checked(&PKT_KEY[..n]).err(),
                Some(Error::Truncated)
            );
        }
    }

    #[test]
    fn version_and_reserved() {
        let mut b = PKT_KEY;
        b[1] = 0x01; // PPTP enhanced GRE
        assert_eq!(Gre::new_checked(&b[..]).err(), Some(Error::BadVersion));
        for bit in [0x40u8, 0x08, 0x04] {
            let mut b = PKT_KEY;
            b[0] |= bit;
            assert_eq!(Gre::new_checked(&b[..]).err(), Some(Error::Malformed));
        }
        // Bits 6-12 are ignored on receipt.
        let mut b = PKT_KEY;
        b[0] |= 0x03;
        b[1] |= 0xf8;
        let p = Gre::new_checked(&b[..]).unwrap();
        assert_eq!(p.key(), Some(0xdead_beef));
    }
}
