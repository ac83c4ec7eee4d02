//! ARP (RFC 826). The view reads any hardware/protocol sizes the header
//! announces; the [`ArpRepr`] covers the one case vecgate speaks: Ethernet
//! hardware addresses and IPv4 protocol addresses.

use core::net::Ipv4Addr;

use crate::ethernet::{ethertype, MacAddr};
use crate::{Error, Result};

/// Hardware type Ethernet (RFC 826 `ares_hrd$Ethernet`).
pub const HTYPE_ETHERNET: u16 = 1;

/// ARP operation codes (RFC 826 `ares_op$REQUEST`/`REPLY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Request,
    Reply,
    Unknown(u16),
}

impl From<u16> for Operation {
    fn from(v: u16) -> Self {
        match v {
            1 => Operation::Request,
            2 => Operation::Reply,
            x => Operation::Unknown(x),
        }
    }
}

impl From<Operation> for u16 {
    fn from(o: Operation) -> u16 {
        match o {
            Operation::Request => 1,
            Operation::Reply => 2,
            Operation::Unknown(x) => x,
        }
    }
}

mod field {
    use core::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    pub const FIXED_LEN: usize = 8;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const ETH_IPV4_LEN: usize = 28;

/// A view of an ARP packet.
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

    /// The buffer holds the fixed part and both address pairs of the sizes
    /// the header announces. Trailing bytes (Ethernet padding) are allowed.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < field::FIXED_LEN || b.len() < self.buffer_len_announced() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    fn buffer_len_announced(&self) -> usize {
        let b = self.buffer.as_ref();
        field::FIXED_LEN + 2 * (usize::from(b[field::HLEN]) + usize::from(b[field::PLEN]))
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn hardware_type(&self) -> u16 {
        self.u16_at(field::HTYPE)
    }

    pub fn protocol_type(&self) -> u16 {
        self.u16_at(field::PTYPE)
    }

    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    pub fn operation(&self) -> Operation {
        self.u16_at(field::OPER).into()
    }

    fn sha_range(&self) -> core::ops::Range<usize> {
        let h = usize::from(self.hardware_len());
        field::FIXED_LEN..field::FIXED_LEN + h
    }

    fn spa_range(&self) -> core::ops::Range<usize> {
        let s = self.sha_range().end;
        s..s + usize::from(self.protocol_len())
    }

    fn tha_range(&self) -> core::ops::Range<usize> {
        let s = self.spa_range().end;
        s..s + usize::from(self.hardware_len())
    }

    fn tpa_range(&self) -> core::ops::Range<usize> {
        let s = self.tha_range().end;
        s..s + usize::from(self.protocol_len())
    }

    pub fn source_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.sha_range()]
    }

    pub fn source_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.spa_range()]
    }

    pub fn target_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.tha_range()]
    }

    pub fn target_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.tpa_range()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_hardware_type(&mut self, v: u16) {
        self.set_u16(field::HTYPE, v)
    }

    pub fn set_protocol_type(&mut self, v: u16) {
        self.set_u16(field::PTYPE, v)
    }

    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v
    }

    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v
    }

    pub fn set_operation(&mut self, op: Operation) {
        self.set_u16(field::OPER, op.into())
    }

    /// Address setters copy `a`, which must have the announced length.
    pub fn set_source_hardware_addr(&mut self, a: &[u8]) {
        let r = self.sha_range();
        self.buffer.as_mut()[r].copy_from_slice(a)
    }

    pub fn set_source_protocol_addr(&mut self, a: &[u8]) {
        let r = self.spa_range();
        self.buffer.as_mut()[r].copy_from_slice(a)
    }

    pub fn set_target_hardware_addr(&mut self, a: &[u8]) {
        let r = self.tha_range();
        self.buffer.as_mut()[r].copy_from_slice(a)
    }

    pub fn set_target_protocol_addr(&mut self, a: &[u8]) {
        let r = self.tpa_range();
        self.buffer.as_mut()[r].copy_from_slice(a)
    }
}

/// An Ethernet/IPv4 ARP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    pub operation: Operation,
    pub source_hardware_addr: MacAddr,
    pub source_protocol_addr: Ipv4Addr,
    pub target_hardware_addr: MacAddr,
    pub target_protocol_addr: Ipv4Addr,
}

fn ipv4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

impl ArpRepr {
    /// Parses an Ethernet/IPv4 ARP packet; any other hardware or protocol
    /// type is [`Error::Unsupported`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<ArpRepr> {
        p.check_len()?;
        if p.hardware_type() != HTYPE_ETHERNET
            || p.protocol_type() != ethertype::IPV4
            || p.hardware_len() != 6
            || p.protocol_len() != 4
        {
            return Err(Error::Unsupported);
        }
        Ok(ArpRepr {
            operation: p.operation(),
            source_hardware_addr: MacAddr::from_bytes(p.source_hardware_addr())?,
            source_protocol_addr: ipv4(p.source_protocol_addr()),
            target_hardware_addr: MacAddr::from_bytes(p.target_hardware_addr())?,
            target_protocol_addr: ipv4(p.target_protocol_addr()),
        })
    }

    pub fn buffer_len(&self) -> usize {
        ETH_IPV4_LEN
    }

    /// The reply to this request (RFC 826 "Packet Reception"): the sender
    /// becomes the target, `our_mac` answers for the requested address.
    pub fn reply(&self, our_mac: MacAddr) -> ArpRepr {
        ArpRepr {
            operation: Operation::Reply,
            source_hardware_addr: our_mac,
            source_protocol_addr: self.target_protocol_addr,
            target_hardware_addr: self.source_hardware_addr,
            target_protocol_addr: self.source_protocol_addr,
        }
    }

    /// Writes 28 bytes; the buffer must be at least that long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Packet<&mut T>) {
        p.set_hardware_type(HTYPE_ETHERNET);
        p.set_protocol_type(ethertype::IPV4);
        p.set_hardware_len(6);
        p.set_protocol_len(4);
        p.set_operation(self.operation);
        p.set_source_hardware_addr(&self.source_hardware_addr.0);
        p.set_source_protocol_addr(&self.source_protocol_addr.octets());
        p.set_target_hardware_addr(&self.target_hardware_addr.0);
        p.set_target_protocol_addr(&self.target_protocol_addr.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Who has 192.168.1.1? Tell 192.168.1.100 (from 52:54:00:12:34:56),
    // with 18 bytes of Ethernet padding as captured on the wire.
    const REQUEST: [u8; 46] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0xc0,
        0xa8, 0x01, 0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x01, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn repr() -> ArpRepr {
        ArpRepr {
            operation: Operation::Request,
            source_hardware_addr: MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]),
            source_protocol_addr: Ipv4Addr::new(192, 168, 1, 100),
            target_hardware_addr: MacAddr::ZERO,
            target_protocol_addr: Ipv4Addr::new(192, 168, 1, 1),
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(p.hardware_type(), 1);
        assert_eq!(p.protocol_type(), 0x0800);
        assert_eq!(p.operation(), Operation::Request);
        assert_eq!(p.source_protocol_addr(), &[192, 168, 1, 100]);
        assert_eq!(p.target_protocol_addr(), &[192, 168, 1, 1]);
    }

    #[test]
    fn parse_and_emit() {
        let p = Packet::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(ArpRepr::parse(&p).unwrap(), repr());
        let mut out = [0u8; 28];
        repr().emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(&out[..], &REQUEST[..28]);
    }

    #[test]
    fn reply_swaps() {
        let me = MacAddr([2, 0, 0, 0, 0, 1]);
        let r = repr().reply(me);
        assert_eq!(r.operation, Operation::Reply);
        assert_eq!(r.source_protocol_addr, Ipv4Addr::new(192, 168, 1, 1));
        assert_eq!(r.source_hardware_addr, me);
        assert_eq!(r.target_hardware_addr, repr().source_hardware_addr);
        let mut out = [0u8; 28];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(&out[6..8], &[0, 2]);
    }

    #[test]
    fn truncated() {
        for n in 0..28 {
            assert_eq!(
                Packet::new_checked(&REQUEST[..n]).err(),
                Some(Error::Truncated),
                "{n}"
            );
        }
        // A huge announced size must not read out of bounds.
        let mut b = REQUEST;
        b[4] = 255;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::Truncated));
    }

    #[test]
    fn other_types_unsupported() {
        let mut b = REQUEST;
        b[3] = 0xdd; // ptype 0x08dd
        assert_eq!(
            ArpRepr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Unsupported)
        );
    }
}
