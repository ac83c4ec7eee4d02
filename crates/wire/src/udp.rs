//! UDP (RFC 768) with its pseudo-header checksum: optional over IPv4 (zero
//! means "none"), mandatory over IPv6 (RFC 8200 §8.1).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::ipv4::protocol;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;
/// Offset of the checksum from the start of the header: the `csum_offset`
/// of a virtio-net header asking for UDP checksum offload.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM.start;

/// A view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The header fits, the length field is at least 8
    /// ([`Error::BadLength`]) and the buffer holds that many bytes
    /// ([`Error::Truncated`]). The buffer may be longer (IP padding).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let l = usize::from(self.len());
        if l < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if len < l {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[r.start], b[r.start + 1]])
    }

    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// The length field: header plus payload.
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// A length field below the header size can only come from
    /// `new_unchecked`; kept for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Header and payload, up to the length field.
    pub fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..usize::from(self.len())]
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    fn sum(&self, pseudo: u16) -> u16 {
        checksum::combine(&[pseudo, checksum::data(self.datagram())])
    }

    /// Over IPv4 a zero checksum means the sender computed none (RFC 768)
    /// and is accepted.
    pub fn verify_checksum_v4(&self, src: &Ipv4Addr, dst: &Ipv4Addr) -> bool {
        self.checksum() == 0
            || self.sum(checksum::pseudo_header_v4(
                src,
                dst,
                protocol::UDP,
                self.len(),
            )) == 0xffff
    }

    /// Over IPv6 the checksum is mandatory: zero fails (RFC 8200 §8.1). A
    /// tunnel endpoint accepting zero checksums (RFC 6935) checks
    /// [`checksum`](Self::checksum) itself.
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        self.checksum() != 0
            && self.sum(checksum::pseudo_header_v6(
                src,
                dst,
                protocol::UDP,
                u32::from(self.len()),
            )) == 0xffff
    }

    /// Either family; false for mixed families.
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => self.verify_checksum_v4(s, d),
            (IpAddr::V6(s), IpAddr::V6(d)) => self.verify_checksum_v6(s, d),
            _ => false,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_src_port(&mut self, v: u16) {
        self.set_u16(field::SRC_PORT, v)
    }

    pub fn set_dst_port(&mut self, v: u16) {
        self.set_u16(field::DST_PORT, v)
    }

    pub fn set_len(&mut self, v: u16) {
        self.set_u16(field::LENGTH, v)
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16(field::CHECKSUM, v)
    }

    /// Stores a checksum computed over the datagram: a zero is sent as all
    /// ones (RFC 768), zero meaning "none".
    pub fn set_computed_checksum(&mut self, c: u16) {
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    fn fill_with_pseudo(&mut self, pseudo: u16) {
        self.set_checksum(0);
        let c = !self.sum(pseudo);
        self.set_computed_checksum(c);
    }

    /// Computes the checksum over the pseudo-header and the datagram (up to
    /// the length field, which must be set).
    pub fn fill_checksum_v4(&mut self, src: &Ipv4Addr, dst: &Ipv4Addr) {
        let ph = checksum::pseudo_header_v4(src, dst, protocol::UDP, self.len());
        self.fill_with_pseudo(ph)
    }

    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let ph = checksum::pseudo_header_v6(src, dst, protocol::UDP, u32::from(self.len()));
        self.fill_with_pseudo(ph)
    }

    /// Either family; [`Error::Malformed`] for mixed families.
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) -> Result<()> {
        let ph = checksum::pseudo_header(src, dst, protocol::UDP, u32::from(self.len()))?;
        self.fill_with_pseudo(ph);
        Ok(())
    }

    /// Prepares checksum offload (virtio-net `NEEDS_CSUM`, Linux
    /// `CHECKSUM_PARTIAL`): stores the folded, *uncomplemented* pseudo-header
    /// sum; whoever completes it adds the datagram's sum from `csum_start`.
    pub fn set_partial_checksum(&mut self, src: &IpAddr, dst: &IpAddr) -> Result<()> {
        let ph = checksum::pseudo_header(src, dst, protocol::UDP, u32::from(self.len()))?;
        self.set_checksum(ph);
        Ok(())
    }

    /// Applies an incremental update (e.g. [`checksum::update_addr_v4`] for
    /// NAT) unless the datagram carries no checksum; keeps zero meaning
    /// "none" by mapping a result of zero to all ones.
    pub fn update_checksum(&mut self, f: impl FnOnce(u16) -> u16) {
        let c = self.checksum();
        if c == 0 {
            return;
        }
        let n = f(c);
        self.set_checksum(if n == 0 { 0xffff } else { n });
    }

    /// Rewrites the source port, updating the checksum incrementally.
    pub fn set_src_port_update_checksum(&mut self, port: u16) {
        let old = self.src_port();
        self.set_src_port(port);
        self.update_checksum(|c| checksum::update_u16(c, old, port));
    }

    /// Rewrites the destination port, updating the checksum incrementally.
    pub fn set_dst_port_update_checksum(&mut self, port: u16) {
        let old = self.dst_port();
        self.set_dst_port(port);
        self.update_checksum(|c| checksum::update_u16(c, old, port));
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// A parsed UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload_len: usize,
}

impl UdpRepr {
    /// Parses a datagram whose checksum verifies for `src`/`dst` (see
    /// [`Packet::verify_checksum`]); [`Error::BadChecksum`] otherwise.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        p: &Packet<&T>,
        src: &IpAddr,
        dst: &IpAddr,
    ) -> Result<UdpRepr> {
        p.check_len()?;
        if !p.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: usize::from(p.len()) - HEADER_LEN,
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes ports and length, with a zero checksum: for callers that put
    /// the payload in place themselves and then call a `fill_checksum*`.
    pub fn emit_header<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(
        &self,
        p: &mut Packet<&mut T>,
    ) -> Result<()> {
        let len = u16::try_from(self.buffer_len()).map_err(|_| Error::BadLength)?;
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(len);
        p.set_checksum(0);
        Ok(())
    }

    /// Writes the header, copies `payload` (whose length must equal
    /// `payload_len`, else [`Error::BadLength`]) and fills the checksum.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(
        &self,
        p: &mut Packet<&mut T>,
        src: &IpAddr,
        dst: &IpAddr,
        payload: &[u8],
    ) -> Result<()> {
        if payload.len() != self.payload_len {
            return Err(Error::BadLength);
        }
        if p.buffer.as_ref().len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        self.emit_header(p)?;
        p.payload_mut().copy_from_slice(payload);
        p.fill_checksum(src, dst)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn computed_zero_checksum_is_sent_as_all_ones() {
        let mut b = [0u8; 8];
        let mut p = super::Packet::new_unchecked(&mut b[..]);
        p.set_computed_checksum(0);
        assert_eq!(p.checksum(), 0xffff);
        p.set_computed_checksum(0x1234);
        assert_eq!(&b[6..8], &[0x12, 0x34]);
    }

    use super::*;

    // 10.0.0.1:12345 -> 10.0.0.2:53, "hello".
    const UDP4: [u8; 13] = [
        0x30, 0x39, 0x00, 0x35, 0x00, 0x0d, 0x77, 0x91, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
    ];
    // fe80::1 -> fe80::2, same ports and payload.
    const UDP6: [u8; 13] = [
        0x30, 0x39, 0x00, 0x35, 0x00, 0x0d, 0x8e, 0x8f, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
    ];

    fn v4() -> (IpAddr, IpAddr) {
        (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        )
    }

    fn v6() -> (IpAddr, IpAddr) {
        (
            IpAddr::V6("fe80::1".parse().unwrap()),
            IpAddr::V6("fe80::2".parse().unwrap()),
        )
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&UDP4[..]).unwrap();
        assert_eq!(p.src_port(), 12345);
        assert_eq!(p.dst_port(), 53);
        assert_eq!(p.len(), 13);
        assert_eq!(p.checksum(), 0x7791);
        assert_eq!(p.payload(), b"hello");
        let (s, d) = v4();
        assert!(p.verify_checksum(&s, &d));
        let (s6, d6) = v6();
        assert!(!p.verify_checksum(&s6, &d6));
        assert!(!p.verify_checksum(&s, &d6));
        let p6 = Packet::new_checked(&UDP6[..]).unwrap();
        assert!(p6.verify_checksum(&s6, &d6));
    }

    #[test]
    fn parse_emit() {
        for (bytes, (s, d)) in [(UDP4, v4()), (UDP6, v6())] {
            let p = Packet::new_checked(&bytes[..]).unwrap();
            let r = UdpRepr::parse(&p, &s, &d).unwrap();
            assert_eq!(
                r,
                UdpRepr {
                    src_port: 12345,
                    dst_port: 53,
                    payload_len: 5
                }
            );
            let mut out = [0u8; 13];
            r.emit(&mut Packet::new_unchecked(&mut out[..]), &s, &d, b"hello")
                .unwrap();
            assert_eq!(out, bytes);
            assert_eq!(
                r.emit(&mut Packet::new_unchecked(&mut out[..]), &s, &d, b"hell"),
                Err(Error::BadLength)
            );
        }
    }

    #[test]
    fn zero_checksum_rules() {
        let mut b = UDP4;
        b[6] = 0;
        b[7] = 0;
        let p = Packet::new_checked(&b[..]).unwrap();
        let (s, d) = v4();
        assert!(p.verify_checksum(&s, &d), "zero = none over IPv4");
        let (s6, d6) = v6();
        assert!(!p.verify_checksum(&s6, &d6), "mandatory over IPv6");
        // NAT rewrite keeps "none".
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_src_port_update_checksum(1);
        assert_eq!(p.checksum(), 0);
    }

    #[test]
    fn incremental_port_and_addr_rewrite() {
        let mut b = UDP4;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_src_port_update_checksum(40000);
        p.set_dst_port_update_checksum(5353);
        let (old, new) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(192, 0, 2, 99));
        p.update_checksum(|c| checksum::update_addr_v4(c, &old, &new));
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum_v4(&new, &Ipv4Addr::new(10, 0, 0, 2)));
    }

    #[test]
    fn partial_checksum_completes() {
        // What a NIC/kernel does with NEEDS_CSUM: sum from csum_start over
        // the datagram (partial sum in place) and store the complement.
        let mut b = UDP4;
        let (s, d) = v4();
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_partial_checksum(&s, &d).unwrap();
        let c = checksum::checksum(&b);
        b[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].copy_from_slice(&c.to_be_bytes());
        assert_eq!(b, UDP4);
    }

    #[test]
    fn malformed() {
        for n in 0..UDP4.len() {
            assert_eq!(
                Packet::new_checked(&UDP4[..n]).err(),
                Some(Error::Truncated),
                "{n}"
            );
        }
        let mut b = UDP4;
        b[5] = 7;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadLength));
        // Longer buffer: payload stops at the length field.
        let mut b = UDP4.to_vec();
        b.extend_from_slice(&[0; 5]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload(), b"hello");
        let (s, d) = v4();
        assert!(p.verify_checksum(&s, &d));
        let mut bad = UDP4;
        bad[12] ^= 0x40;
        let p = Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, &s, &d), Err(Error::BadChecksum));
    }
}
