//! IPv4 (RFC 791) header with options, and the forwarding fast-path helpers
//! (TTL decrement with an incremental checksum update, RFC 1624/RFC 1812).

use core::net::Ipv4Addr;

use crate::checksum;
use crate::ethernet::MacAddr;
use crate::{Error, Result};

/// IP protocol numbers (IANA "Assigned Internet Protocol Numbers"), shared
/// by IPv4's Protocol and IPv6's Next Header.
pub mod protocol {
    /// IPv6 Hop-by-Hop Options.
    pub const HOPOPT: u8 = 0;
    pub const ICMP: u8 = 1;
    /// IPv4-in-IP encapsulation.
    pub const IPIP: u8 = 4;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    /// IPv6 encapsulation.
    pub const IPV6: u8 = 41;
    pub const IPV6_ROUTE: u8 = 43;
    pub const IPV6_FRAG: u8 = 44;
    pub const GRE: u8 = 47;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const IPV6_NONXT: u8 = 59;
    pub const IPV6_OPTS: u8 = 60;
}

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;
/// Largest header (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;
/// Every host must accept datagrams of this size (RFC 791 §3.1).
pub const MIN_MTU: usize = 576;

const FLAG_RESERVED: u16 = 0x8000;
const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// The Ethernet multicast address of an IPv4 group (RFC 1112 §6.4):
/// 01:00:5e followed by the low 23 bits of the group.
pub fn multicast_mac(group: &Ipv4Addr) -> MacAddr {
    let o = group.octets();
    MacAddr([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
}

/// A view of an IPv4 packet.
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

    /// Checks, in this order: the fixed header fits, version is 4, IHL ≥ 5
    /// (RFC 791 §3.1), the header fits, total length ≥ header length, and
    /// the buffer holds total-length bytes. A longer buffer is fine
    /// (Ethernet padding): [`payload`](Self::payload) ends at total length.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::BadVersion);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if len < hl {
            return Err(Error::Truncated);
        }
        let tl = usize::from(self.total_len());
        if tl < hl {
            return Err(Error::BadLength);
        }
        if len < tl {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        u16::from_be_bytes([self.b()[r.start], self.b()[r.start + 1]])
    }

    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::VER_IHL] & 0x0f) * 4
    }

    /// The whole Type of Service octet (DSCP << 2 | ECN).
    pub fn tos(&self) -> u8 {
        self.b()[field::TOS]
    }

    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    pub fn ecn(&self) -> u8 {
        self.tos() & 0x03
    }

    pub fn total_len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }

    pub fn dont_frag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & FLAG_DF != 0
    }

    pub fn more_frags(&self) -> bool {
        self.u16_at(field::FLG_OFF) & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (self.u16_at(field::FLG_OFF) & OFFSET_MASK) << 3
    }

    /// The reserved flag (RFC 791 §3.1, bit 0 of Flags, "must be zero"):
    /// read so that fragmentation passes it on as it came.
    pub fn reserved_flag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & FLAG_RESERVED != 0
    }

    /// True for any fragment, first included (MF set or offset non-zero).
    pub fn is_fragment(&self) -> bool {
        self.u16_at(field::FLG_OFF) & (FLAG_MF | OFFSET_MASK) != 0
    }

    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.b()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.b()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The header's option bytes (between the fixed header and the payload).
    pub fn options(&self) -> &[u8] {
        &self.b()[HEADER_LEN..self.header_len()]
    }

    /// The header checksum verifies (RFC 791 §3.1).
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(&self.b()[..self.header_len()])
    }

    /// Bytes from the end of the header to total length.
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.bm()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets version 4 and the IHL for `header_len` bytes (a multiple of 4).
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.bm()[field::VER_IHL] = 0x40 | ((header_len / 4) as u8 & 0x0f);
    }

    pub fn set_tos(&mut self, v: u8) {
        self.bm()[field::TOS] = v;
    }

    pub fn set_total_len(&mut self, v: u16) {
        self.set_u16(field::LENGTH, v)
    }

    pub fn set_ident(&mut self, v: u16) {
        self.set_u16(field::IDENT, v)
    }

    /// Sets DF, MF and the fragment offset (in bytes; a multiple of 8).
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let mut v = (offset >> 3) & OFFSET_MASK;
        if dont_frag {
            v |= FLAG_DF;
        }
        if more_frags {
            v |= FLAG_MF;
        }
        self.set_u16(field::FLG_OFF, v)
    }

    /// Sets or clears the reserved flag, leaving DF, MF and the offset.
    pub fn set_reserved_flag(&mut self, v: bool) {
        let w = self.u16_at(field::FLG_OFF) & !FLAG_RESERVED;
        self.set_u16(field::FLG_OFF, if v { w | FLAG_RESERVED } else { w })
    }

    pub fn set_ttl(&mut self, v: u8) {
        self.bm()[field::TTL] = v;
    }

    pub fn set_protocol(&mut self, v: u8) {
        self.bm()[field::PROTOCOL] = v;
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16(field::CHECKSUM, v)
    }

    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.bm()[field::SRC].copy_from_slice(&a.octets());
    }

    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.bm()[field::DST].copy_from_slice(&a.octets());
    }

    /// Recomputes the header checksum over the header (options included).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(&self.b()[..hl]);
        self.set_checksum(c);
    }

    /// Forwarding step (RFC 1812 §5.3.1): decrements the TTL and updates the
    /// checksum incrementally (RFC 1624 eqn. 3). Returns false, leaving the
    /// packet untouched, when the TTL is ≤ 1: the datagram must not be
    /// forwarded (the caller answers with ICMP time exceeded).
    #[inline]
    pub fn decrement_ttl(&mut self) -> bool {
        let ttl = self.ttl();
        if ttl <= 1 {
            return false;
        }
        self.set_ttl_update_checksum(ttl - 1);
        true
    }

    /// Sets the TTL and updates the checksum incrementally.
    #[inline]
    pub fn set_ttl_update_checksum(&mut self, ttl: u8) {
        // TTL is the high byte of the 16-bit word shared with Protocol.
        let p = u16::from(self.protocol());
        let old = (u16::from(self.ttl()) << 8) | p;
        let new = (u16::from(ttl) << 8) | p;
        let c = checksum::update_u16(self.checksum(), old, new);
        self.set_ttl(ttl);
        self.set_checksum(c);
    }

    /// Sets the ToS octet (e.g. ECN marking) with an incremental checksum
    /// update.
    pub fn set_tos_update_checksum(&mut self, tos: u8) {
        let hi = u16::from(self.b()[field::VER_IHL]) << 8;
        let old = hi | u16::from(self.tos());
        let c = checksum::update_u16(self.checksum(), old, hi | u16::from(tos));
        self.set_tos(tos);
        self.set_checksum(c);
    }

    /// Rewrites the source address with an incremental checksum update (of
    /// this header only: the caller fixes the L4 checksum).
    pub fn set_src_addr_update_checksum(&mut self, a: Ipv4Addr) {
        let c = checksum::update_addr_v4(self.checksum(), &self.src_addr(), &a);
        self.set_src_addr(a);
        self.set_checksum(c);
    }

    /// As [`set_src_addr_update_checksum`](Self::set_src_addr_update_checksum)
    /// for the destination.
    pub fn set_dst_addr_update_checksum(&mut self, a: Ipv4Addr) {
        let c = checksum::update_addr_v4(self.checksum(), &self.dst_addr(), &a);
        self.set_dst_addr(a);
        self.set_checksum(c);
    }

    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.bm()[HEADER_LEN..hl]
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        &mut self.bm()[hl..tl]
    }
}

/// Option type End of Option List (RFC 791 §3.1).
pub const OPT_EOL: u8 = 0;
/// Option type No Operation.
pub const OPT_NOP: u8 = 1;

/// One IPv4 option: its type octet and its data (without type and length;
/// empty for EOL/NOP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Option<'a> {
    pub kind: u8,
    pub data: &'a [u8],
}

impl Ipv4Option<'_> {
    /// The copied flag: the option goes into every fragment (RFC 791 §3.1).
    pub fn copied(&self) -> bool {
        self.kind & 0x80 != 0
    }
}

/// Iterator over the options area of a header. Stops after EOL; yields one
/// `Err(Malformed)` (and then stops) on an option whose length byte is
/// missing, below 2, or runs past the area. Bounded by the 40-byte area.
#[derive(Debug, Clone)]
pub struct Options<'a> {
    rest: &'a [u8],
}

impl<'a> Options<'a> {
    pub fn new(options: &'a [u8]) -> Options<'a> {
        Options { rest: options }
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = Result<Ipv4Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, after) = self.rest.split_first()?;
        match kind {
            OPT_EOL => {
                self.rest = &[];
                Some(Ok(Ipv4Option { kind, data: &[] }))
            }
            OPT_NOP => {
                self.rest = after;
                Some(Ok(Ipv4Option { kind, data: &[] }))
            }
            _ => {
                let len = after.first().map(|&l| usize::from(l));
                match len {
                    Some(l) if l >= 2 && l <= self.rest.len() => {
                        let data = &self.rest[2..l];
                        self.rest = &self.rest[l..];
                        Some(Ok(Ipv4Option { kind, data }))
                    }
                    _ => {
                        self.rest = &[];
                        Some(Err(Error::Malformed))
                    }
                }
            }
        }
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The options, parsed.
    pub fn options_iter(&self) -> Options<'_> {
        Options::new(self.options())
    }
}

/// A parsed IPv4 header (options are validated and skipped by
/// [`parse`](Ipv4Repr::parse); [`emit`](Ipv4Repr::emit) writes none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    pub src_addr: Ipv4Addr,
    pub dst_addr: Ipv4Addr,
    pub protocol: u8,
    pub payload_len: usize,
    pub ttl: u8,
    pub tos: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub more_frags: bool,
    /// In bytes.
    pub frag_offset: u16,
}

impl Ipv4Repr {
    /// Parses a header: lengths, version, a verified checksum and
    /// well-formed options; [`Error::BadChecksum`] otherwise.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Ipv4Repr> {
        p.check_len()?;
        if !p.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        for o in p.options_iter() {
            o?;
        }
        Ok(Ipv4Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: usize::from(p.total_len()) - p.header_len(),
            ttl: p.ttl(),
            tos: p.tos(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes a 20-byte header with its checksum. The payload length must
    /// fit in the 16-bit total length ([`Error::BadLength`] otherwise) and
    /// the buffer must hold the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(
        &self,
        p: &mut Packet<&mut T>,
    ) -> Result<()> {
        let total = u16::try_from(self.buffer_len()).map_err(|_| Error::BadLength)?;
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        p.set_version_and_header_len(HEADER_LEN);
        p.set_tos(self.tos);
        p.set_total_len(total);
        p.set_ident(self.ident);
        p.set_frag(self.dont_frag, self.more_frags, self.frag_offset);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        p.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reserved_flag_is_kept_apart_from_df_mf_and_offset() {
        let mut b = [0u8; 20];
        let mut p = super::Packet::new_unchecked(&mut b[..]);
        p.set_frag(true, true, 8 * 0x1fff);
        assert!(!p.reserved_flag());
        p.set_reserved_flag(true);
        assert!(p.reserved_flag() && p.dont_frag() && p.more_frags());
        assert_eq!(p.frag_offset(), 8 * 0x1fff);
        assert_eq!(&b[6..8], &[0xff, 0xff]);
        let mut p = super::Packet::new_unchecked(&mut b[..]);
        p.set_reserved_flag(false);
        assert_eq!(&b[6..8], &[0x7f, 0xff]);
    }

    use super::*;

    // 10.0.0.1 -> 10.0.0.2 ICMP echo request, DF, TTL 64, id 0xabcd.
    const ECHO: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, 0xab, 0xcd, 0x40, 0x00, 0x40, 0x01, 0x7b, 0x0d, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, 0x61, 0x62,
        0x63, 0x64,
    ];
    // 192.168.1.1 -> 224.0.0.1 UDP, Router Alert option (IHL 6), MF set,
    // offset 40 bytes, TTL 1.
    const WITH_OPTS: [u8; 28] = [
        0x46, 0x00, 0x00, 0x1c, 0x00, 0x01, 0x20, 0x05, 0x01, 0x11, 0x63, 0x1c, 0xc0, 0xa8, 0x01,
        0x01, 0xe0, 0x00, 0x00, 0x01, 0x94, 0x04, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
    ];

    fn echo_repr() -> Ipv4Repr {
        Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: protocol::ICMP,
            payload_len: 12,
            ttl: 64,
            tos: 0,
            ident: 0xabcd,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 32);
        assert_eq!(p.ident(), 0xabcd);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), protocol::ICMP);
        assert_eq!(p.checksum(), 0x7b0d);
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.payload().len(), 12);
        assert_eq!(p.options(), &[] as &[u8]);
    }

    #[test]
    fn deconstruct_options_fragment() {
        let p = Packet::new_checked(&WITH_OPTS[..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert!(p.more_frags() && p.is_fragment() && !p.dont_frag());
        assert_eq!(p.frag_offset(), 40);
        let opts: Vec<_> = p.options_iter().collect();
        assert_eq!(
            opts,
            vec![Ok(Ipv4Option {
                kind: 0x94,
                data: &[0, 0]
            })]
        );
        assert!(opts[0].unwrap().copied());
        assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(r.payload_len, 4);
        assert_eq!(r.frag_offset, 40);
        assert!(r.more_frags);
    }

    #[test]
    fn parse_emit() {
        let p = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p).unwrap(), echo_repr());
        let mut out = [0u8; 32];
        out[20..].copy_from_slice(&ECHO[20..]);
        echo_repr()
            .emit(&mut Packet::new_unchecked(&mut out[..]))
            .unwrap();
        assert_eq!(out, ECHO);
    }

    #[test]
    fn padding_allowed() {
        let mut b = ECHO.to_vec();
        b.extend_from_slice(&[0; 14]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload(), &ECHO[20..]);
    }

    #[test]
    fn malformed() {
        for n in 0..ECHO.len() {
            assert_eq!(
                Packet::new_checked(&ECHO[..n]).err(),
                Some(Error::Truncated),
                "{n}"
            );
        }
        for n in 0..WITH_OPTS.len() {
            assert!(Packet::new_checked(&WITH_OPTS[..n]).is_err(), "{n}");
        }
        let mut b = ECHO;
        b[0] = 0x65;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadVersion));
        b[0] = 0x44;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadLength));
        b[0] = 0x4f; // 60-byte header in a 32-byte buffer
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::Truncated));
        let mut b = ECHO;
        b[3] = 19; // total length shorter than the header
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadLength));
        let mut b = ECHO;
        b[11] ^= 1;
        assert_eq!(
            Ipv4Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::BadChecksum)
        );
    }

    #[test]
    fn bad_option_length() {
        let mut b = WITH_OPTS;
        b[21] = 1; // option length below 2
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.fill_checksum();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p), Err(Error::Malformed));
        let mut b = WITH_OPTS;
        b[21] = 5; // runs past the 4-byte options area
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.fill_checksum();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.options_iter().next(), Some(Err(Error::Malformed)));
    }

    #[test]
    fn ttl_decrement() {
        let mut b = ECHO;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        assert!(p.decrement_ttl());
        assert_eq!(p.ttl(), 63);
        assert!(p.verify_checksum());
        let incr = p.checksum();
        p.fill_checksum();
        assert_eq!(p.checksum(), incr);
        // TTL 1 is not forwarded and stays untouched.
        let mut b = WITH_OPTS;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        assert!(!p.decrement_ttl());
        assert_eq!(b, WITH_OPTS);
    }

    #[test]
    fn rewrites_keep_checksum_valid() {
        let mut b = ECHO;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_src_addr_update_checksum(Ipv4Addr::new(203, 0, 113, 7));
        p.set_dst_addr_update_checksum(Ipv4Addr::new(198, 51, 100, 255));
        p.set_tos_update_checksum(0xb8 | 3);
        assert!(p.verify_checksum());
        assert_eq!(p.ecn(), 3);
        assert_eq!(p.dscp(), 46);
    }

    #[test]
    fn emit_too_long() {
        let mut r = echo_repr();
        r.payload_len = 65_516;
        let mut out = [0u8; 20];
        assert_eq!(
            r.emit(&mut Packet::new_unchecked(&mut out[..])),
            Err(Error::BadLength)
        );
    }

    #[test]
    fn multicast_mac_maps_low_23_bits() {
        assert_eq!(
            multicast_mac(&Ipv4Addr::new(239, 255, 1, 2)).0,
            [0x01, 0x00, 0x5e, 0x7f, 0x01, 0x02]
        );
    }
}
