//! VRRP version 3 advertisements (RFC 5798 §5), IPv4 and IPv6.
//!
//! The message carries no length of its own: the address family (from the
//! IP header) sets the size of each address and the count field their
//! number, so the view is built with the [`Family`] it was received in.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::{Error, Result};

/// IP protocol / next header of VRRP (RFC 5798 §5.1.1.4, §5.1.2.3).
pub const PROTOCOL: u8 = 112;
/// The only version this module parses (RFC 5798 §5.2.1).
pub const VERSION: u8 = 3;
/// The only type defined (RFC 5798 §5.2.2).
pub const TYPE_ADVERTISEMENT: u8 = 1;
/// TTL / hop limit of every advertisement; a receiver drops others
/// (RFC 5798 §5.1.1.3, §7.1).
pub const TTL: u8 = 255;
/// IPv4 multicast group (RFC 5798 §5.1.1.2).
pub const GROUP_V4: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 18);
/// IPv6 multicast group (RFC 5798 §5.1.2.2).
pub const GROUP_V6: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x12);
/// Priority of the address owner (RFC 5798 §5.2.4).
pub const PRIORITY_OWNER: u8 = 255;
/// Priority a master sends when it stops (RFC 5798 §5.2.4).
pub const PRIORITY_STOP: u8 = 0;
/// Fixed part: version/type, VRID, priority, count, interval, checksum.
pub const HEADER_LEN: usize = 8;
/// Largest interval the 12-bit field holds, in centiseconds.
pub const MAX_INTERVAL_CS: u16 = 0x0fff;

mod field {
    use core::ops::Range;
    pub const VER_TYPE: usize = 0;
    pub const VRID: usize = 1;
    pub const PRIORITY: usize = 2;
    pub const COUNT: usize = 3;
    pub const INTERVAL: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// Address family of the IP header the message came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub const fn addr_len(self) -> usize {
        match self {
            Family::V4 => 4,
            Family::V6 => 16,
        }
    }

    pub const fn of(addr: &IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// The multicast group advertisements go to.
    pub const fn group(self) -> IpAddr {
        match self {
            Family::V4 => IpAddr::V4(GROUP_V4),
            Family::V6 => IpAddr::V6(GROUP_V6),
        }
    }
}

/// The virtual router MAC address (RFC 5798 §7.3): 00-00-5E-00-01-{VRID}
/// for IPv4, 00-00-5E-00-02-{VRID} for IPv6.
pub const fn virtual_mac(family: Family, vrid: u8) -> [u8; 6] {
    let f = match family {
        Family::V4 => 1,
        Family::V6 => 2,
    };
    [0x00, 0x00, 0x5e, 0x00, f, vrid]
}

/// A view of a VRRPv3 advertisement.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    family: Family,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T, family: Family) -> Packet<T> {
        Packet { buffer, family }
    }

    pub fn new_checked(buffer: T, family: Family) -> Result<Packet<T>> {
        let p = Packet::new_unchecked(buffer, family);
        p.check_len()?;
        Ok(p)
    }

    /// The fixed part and `count` addresses fit in the buffer
    /// ([`Error::Truncated`]); the buffer may be longer (padding).
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN || b.len() < self.message_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub const fn family(&self) -> Family {
        self.family
    }

    /// Fixed part plus the addresses the count field announces.
    pub fn message_len(&self) -> usize {
        HEADER_LEN + usize::from(self.count()) * self.family.addr_len()
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TYPE] >> 4
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TYPE] & 0x0f
    }

    pub fn vrid(&self) -> u8 {
        self.buffer.as_ref()[field::VRID]
    }

    pub fn priority(&self) -> u8 {
        self.buffer.as_ref()[field::PRIORITY]
    }

    pub fn count(&self) -> u8 {
        self.buffer.as_ref()[field::COUNT]
    }

    /// Maximum advertisement interval in centiseconds (12 bits; the 4
    /// reserved bits above it are ignored, RFC 5798 §5.2.6).
    pub fn max_advert_int(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::INTERVAL.start], b[field::INTERVAL.start + 1]])
            & MAX_INTERVAL_CS
    }

    pub fn checksum(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::CHECKSUM.start], b[field::CHECKSUM.start + 1]])
    }

    /// The message up to its last address.
    pub fn message(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.message_len()]
    }

    /// The `i`th address, `None` past the count.
    pub fn addr(&self, i: usize) -> Option<IpAddr> {
        if i >= usize::from(self.count()) {
            return None;
        }
        let n = self.family.addr_len();
        let b = self
            .buffer
            .as_ref()
            .get(HEADER_LEN + i * n..HEADER_LEN + (i + 1) * n)?;
        Some(match self.family {
            Family::V4 => IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])),
            Family::V6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(b);
                IpAddr::V6(Ipv6Addr::from(o))
            }
        })
    }

    pub fn addrs(&self) -> impl Iterator<Item = IpAddr> + '_ {
        (0..usize::from(self.count())).filter_map(|i| self.addr(i))
    }

    fn sum(&self, src: &IpAddr, dst: &IpAddr) -> Result<u16> {
        let len = u32::try_from(self.message_len()).map_err(|_| Error::BadLength)?;
        let ph = checksum::pseudo_header(src, dst, PROTOCOL, len)?;
        Ok(checksum::combine(&[ph, checksum::data(self.message())]))
    }

    /// Checksum over the pseudo-header of RFC 8200 §8.1 with next header
    /// 112 (RFC 5798 §5.2.8); over IPv4 the IPv4 pseudo-header, which
    /// sums to the same value and is what keepalived sends.
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        self.sum(src, dst) == Ok(0xffff)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_version_type(&mut self, version: u8, ty: u8) {
        self.buffer.as_mut()[field::VER_TYPE] = (version << 4) | (ty & 0x0f);
    }

    pub fn set_vrid(&mut self, v: u8) {
        self.buffer.as_mut()[field::VRID] = v;
    }

    pub fn set_priority(&mut self, v: u8) {
        self.buffer.as_mut()[field::PRIORITY] = v;
    }

    pub fn set_count(&mut self, v: u8) {
        self.buffer.as_mut()[field::COUNT] = v;
    }

    /// Stores the low 12 bits; the reserved bits are sent as zero.
    pub fn set_max_advert_int(&mut self, cs: u16) {
        self.buffer.as_mut()[field::INTERVAL]
            .copy_from_slice(&(cs & MAX_INTERVAL_CS).to_be_bytes());
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Computes the checksum; count and addresses must be in place.
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) -> Result<()> {
        self.set_checksum(0);
        let c = !self.sum(src, dst)?;
        self.set_checksum(c);
        Ok(())
    }
}

/// A parsed advertisement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VrrpRepr {
    pub vrid: u8,
    pub priority: u8,
    /// Centiseconds, 1..=4095.
    pub max_advert_int: u16,
    /// All of one family.
    pub addrs: Vec<IpAddr>,
}

impl VrrpRepr {
    /// Checks what RFC 5798 §7.1 lets a parser check: version 3
    /// ([`Error::BadVersion`]), type advertisement
    /// ([`Error::Unsupported`]), the checksum ([`Error::BadChecksum`]).
    /// TTL, VRID and address list are the receiving router's business.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        p: &Packet<&T>,
        src: &IpAddr,
        dst: &IpAddr,
    ) -> Result<VrrpRepr> {
        p.check_len()?;
        if p.version() != VERSION {
            return Err(Error::BadVersion);
        }
        if p.msg_type() != TYPE_ADVERTISEMENT {
            return Err(Error::Unsupported);
        }
        if Family::of(src) != p.family() {
            return Err(Error::Malformed);
        }
        if !p.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        Ok(VrrpRepr {
            vrid: p.vrid(),
            priority: p.priority(),
            max_advert_int: p.max_advert_int(),
            addrs: p.addrs().collect(),
        })
    }

    pub fn family(&self) -> Option<Family> {
        self.addrs.first().map(Family::of)
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + self
                .addrs
                .iter()
                .map(|a| Family::of(a).addr_len())
                .sum::<usize>()
    }

    /// Writes the message and its checksum into `buf` (at least
    /// [`buffer_len`](Self::buffer_len) bytes, else [`Error::Truncated`]).
    /// More than 255 addresses, mixed families, an address of the other
    /// family than `src`, or an interval out of 1..=4095 are
    /// [`Error::Malformed`].
    pub fn emit(&self, buf: &mut [u8], src: &IpAddr, dst: &IpAddr) -> Result<usize> {
        let family = Family::of(src);
        let count = u8::try_from(self.addrs.len()).map_err(|_| Error::Malformed)?;
        if self.addrs.iter().any(|a| Family::of(a) != family)
            || self.max_advert_int == 0
            || self.max_advert_int > MAX_INTERVAL_CS
        {
            return Err(Error::Malformed);
        }
        let len = self.buffer_len();
        let buf = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let mut p = Packet::new_unchecked(&mut buf[..], family);
        p.set_version_type(VERSION, TYPE_ADVERTISEMENT);
        p.set_vrid(self.vrid);
        p.set_priority(self.priority);
        p.set_count(count);
        p.set_max_advert_int(self.max_advert_int);
        let mut off = HEADER_LEN;
        for a in &self.addrs {
            match a {
                IpAddr::V4(v) => buf[off..off + 4].copy_from_slice(&v.octets()),
                IpAddr::V6(v) => buf[off..off + 16].copy_from_slice(&v.octets()),
            }
            off += family.addr_len();
        }
        Packet::new_unchecked(&mut buf[..], family).fill_checksum(src, dst)?;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // keepalived 2.2.7, vrrp_version 3, VRID 51, priority 150, advert_int
    // 1, VIP 10.251.2.100, sent from 10.251.2.1 (captured with tcpdump).
    const KA_V4: [u8; 12] = [
        0x31, 0x33, 0x96, 0x01, 0x00, 0x64, 0x3d, 0x7d, 0x0a, 0xfb, 0x02, 0x64,
    ];
    // Same keepalived, VRID 52, priority 100, VIP 2001:db8::100, sent from
    // fe80::1 to ff02::12.
    const KA_V6: [u8; 24] = [
        0x31, 0x34, 0x64, 0x01, 0x00, 0x64, 0x3d, 0x8e, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0x01, 0x00,
    ];

    fn src4() -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 251, 2, 1))
    }
    fn src6() -> IpAddr {
        IpAddr::V6("fe80::1".parse().unwrap())
    }

    #[test]
    fn keepalived_v4() {
        let p = Packet::new_checked(&KA_V4[..], Family::V4).unwrap();
        assert_eq!((p.version(), p.msg_type()), (3, 1));
        assert_eq!((p.vrid(), p.priority(), p.count()), (51, 150, 1));
        assert_eq!(p.max_advert_int(), 100);
        assert_eq!(p.checksum(), 0x3d7d);
        assert!(p.verify_checksum(&src4(), &Family::V4.group()));
        let r = VrrpRepr::parse(&p, &src4(), &Family::V4.group()).unwrap();
        assert_eq!(r.addrs, vec![IpAddr::V4(Ipv4Addr::new(10, 251, 2, 100))]);
        let mut out = [0u8; 12];
        assert_eq!(r.emit(&mut out, &src4(), &Family::V4.group()), Ok(12));
        assert_eq!(out, KA_V4);
        // Another source: the pseudo-header makes the checksum fail.
        let other = IpAddr::V4(Ipv4Addr::new(10, 251, 2, 2));
        assert_eq!(
            VrrpRepr::parse(&p, &other, &Family::V4.group()),
            Err(Error::BadChecksum)
        );
    }

    #[test]
    fn keepalived_v6() {
        let g = Family::V6.group();
        let p = Packet::new_checked(&KA_V6[..], Family::V6).unwrap();
        assert_eq!((p.vrid(), p.priority(), p.count()), (52, 100, 1));
        let r = VrrpRepr::parse(&p, &src6(), &g).unwrap();
        assert_eq!(r.addrs, vec!["2001:db8::100".parse::<IpAddr>().unwrap()]);
        let mut out = [0u8; 24];
        r.emit(&mut out, &src6(), &g).unwrap();
        assert_eq!(out, KA_V6);
        // Read as IPv4 it is a different (and failing) message.
        let p4 = Packet::new_checked(&KA_V6[..], Family::V4).unwrap();
        assert_eq!(p4.message_len(), 12);
        assert!(VrrpRepr::parse(&p4, &src6(), &g).is_err());
    }

    #[test]
    fn malformed() {
        for n in 0..KA_V4.len() {
            assert_eq!(
                Packet::new_checked(&KA_V4[..n], Family::V4).err(),
                Some(Error::Truncated)
            );
        }
        let (s, g) = (src4(), Family::V4.group());
        let mut b = KA_V4;
        b[0] = 0x21;
        let p = Packet::new_checked(&b[..], Family::V4).unwrap();
        assert_eq!(VrrpRepr::parse(&p, &s, &g), Err(Error::BadVersion));
        b[0] = 0x32;
        let p = Packet::new_checked(&b[..], Family::V4).unwrap();
        assert_eq!(VrrpRepr::parse(&p, &s, &g), Err(Error::Unsupported));
        let mut b = KA_V4;
        b[3] = 255;
        assert!(Packet::new_checked(&b[..], Family::V4).is_err());
        let r = VrrpRepr {
            vrid: 1,
            priority: 100,
            max_advert_int: 0,
            addrs: vec![s],
        };
        assert_eq!(r.emit(&mut [0; 12], &s, &g), Err(Error::Malformed));
        let r = VrrpRepr {
            max_advert_int: 100,
            ..r
        };
        assert_eq!(r.emit(&mut [0; 11], &s, &g), Err(Error::Truncated));
        assert_eq!(r.emit(&mut [0; 12], &src6(), &g), Err(Error::Malformed));
    }

    #[test]
    fn virtual_macs() {
        assert_eq!(virtual_mac(Family::V4, 51), [0, 0, 0x5e, 0, 1, 51]);
        assert_eq!(virtual_mac(Family::V6, 7), [0, 0, 0x5e, 0, 2, 7]);
    }
}
