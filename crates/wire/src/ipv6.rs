//! IPv6 (RFC 8200): the fixed header, a bounded walk over the extension
//! header chain to the upper-layer header, and the Fragment header.

use core::net::Ipv6Addr;

pub use crate::ipv4::protocol;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;
/// Every link must carry packets of this size (RFC 8200 §5).
pub const MIN_MTU: usize = 1280;
/// Most extension headers [`header_chain`] walks before giving up with
/// [`Error::Unsupported`]: bounds the work an attacker can cause.
pub const MAX_EXT_HEADERS: usize = 8;

/// A view of an IPv6 packet.
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

    /// The fixed header fits, version is 6, and the buffer holds the
    /// payload length (it may be longer: link padding). Jumbograms (payload
    /// length 0 with a Jumbo option, RFC 2675) are not recognised.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::BadVersion);
        }
        if len < HEADER_LEN + usize::from(self.payload_len()) {
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

    fn word0(&self) -> u32 {
        let b = self.b();
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    pub fn version(&self) -> u8 {
        self.b()[0] >> 4
    }

    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }

    pub fn payload_len(&self) -> u16 {
        u16::from_be_bytes([
            self.b()[field::LENGTH.start],
            self.b()[field::LENGTH.start + 1],
        ])
    }

    pub fn next_header(&self) -> u8 {
        self.b()[field::NXT_HDR]
    }

    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }

    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::SRC]);
        Ipv6Addr::from(a)
    }

    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::DST]);
        Ipv6Addr::from(a)
    }

    /// Header plus payload-length bytes: the packet without link padding.
    pub fn packet(&self) -> &[u8] {
        &self.b()[..HEADER_LEN + usize::from(self.payload_len())]
    }

    /// Everything after the fixed header, extension headers included.
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }

    /// Walks the extension headers, see [`header_chain`].
    pub fn header_chain(&self) -> Result<HeaderChain> {
        header_chain(self.packet())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_word0(&mut self, w: u32) {
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&w.to_be_bytes());
    }

    /// Sets version 6, the traffic class and the flow label in one go.
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        self.set_word0((6 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000f_ffff));
    }

    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = self.word0();
        self.set_word0((w & 0xf00f_ffff) | (u32::from(tc) << 20));
    }

    pub fn set_flow_label(&mut self, fl: u32) {
        let w = self.word0();
        self.set_word0((w & 0xfff0_0000) | (fl & 0x000f_ffff));
    }

    pub fn set_payload_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = v;
    }

    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Forwarding step (RFC 8200 §3): decrements the hop limit. Returns false,
    /// leaving the packet untouched, when it is ≤ 1: the packet must be
    /// discarded with ICMPv6 time exceeded (RFC 4443 §3.3).
    #[inline]
    pub fn decrement_hop_limit(&mut self) -> bool {
        let h = self.hop_limit();
        if h <= 1 {
            return false;
        }
        self.set_hop_limit(h - 1);
        true
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// Where the extension header chain of a packet leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeaderChain {
    /// The upper-layer protocol (TCP, UDP, ICMPv6, GRE, ...), or
    /// [`protocol::ESP`] (encrypted: the walk cannot go further),
    /// [`protocol::IPV6_NONXT`], or [`protocol::IPV6_FRAG`]'s *next header*
    /// for a non-first fragment (see `fragment`).
    pub protocol: u8,
    /// Offset of that header from the start of the IPv6 packet.
    pub offset: usize,
    /// Offset of the Fragment header, if any. When the fragment offset is
    /// non-zero, no upper-layer header is present at `offset`.
    pub fragment: Option<usize>,
}

/// Walks the extension headers of `packet` (starting with the fixed IPv6
/// header, [`Packet::new_checked`] already applied; pass
/// [`Packet::packet`] to exclude padding) up to the upper-layer header.
///
/// Understood: Hop-by-Hop (0, only directly after the fixed header, RFC
/// 8200 §4.1), Routing (43), Fragment (44), Destination Options (60), AH (51,
/// length in 4-byte units, RFC 4302 §2.2). ESP (50) and No Next Header (59)
/// end the walk. Every length is checked against the buffer; more than
/// [`MAX_EXT_HEADERS`] headers is [`Error::Unsupported`].
pub fn header_chain(packet: &[u8]) -> Result<HeaderChain> {
    if packet.len() < HEADER_LEN {
        return Err(Error::Truncated);
    }
    let mut next = packet[field::NXT_HDR];
    let mut off = HEADER_LEN;
    let mut fragment = None;
    for i in 0..=MAX_EXT_HEADERS {
        let len = match next {
            protocol::HOPOPT if i != 0 => return Err(Error::Malformed),
            protocol::HOPOPT | protocol::IPV6_ROUTE | protocol::IPV6_OPTS => {
                let l = packet.get(off + 1).ok_or(Error::Truncated)?;
                (usize::from(*l) + 1) * 8
            }
            protocol::AH => {
                let l = packet.get(off + 1).ok_or(Error::Truncated)?;
                (usize::from(*l) + 2) * 4
            }
            protocol::IPV6_FRAG => {
                if fragment.is_some() {
                    return Err(Error::Malformed);
                }
                fragment = Some(off);
                FRAG_HEADER_LEN
            }
            _ => {
                return Ok(HeaderChain {
                    protocol: next,
                    offset: off,
                    fragment,
                })
            }
        };
        if i == MAX_EXT_HEADERS {
            return Err(Error::Unsupported);
        }
        if packet.len() < off + len {
            return Err(Error::Truncated);
        }
        next = packet[off];
        let is_later_fragment = fragment == Some(off)
            && u16::from_be_bytes([packet[off + 2], packet[off + 3]]) & 0xfff8 != 0;
        off += len;
        if is_later_fragment {
            // A non-first fragment carries no headers after the Fragment
            // header, only data (RFC 8200 §4.5).
            return Ok(HeaderChain {
                protocol: next,
                offset: off,
                fragment,
            });
        }
    }
    Err(Error::Unsupported)
}

/// Convenience form of [`header_chain`]: (upper-layer protocol, offset).
pub fn upper_layer(packet: &[u8]) -> Result<(u8, usize)> {
    header_chain(packet).map(|c| (c.protocol, c.offset))
}

/// Length of the Fragment header.
pub const FRAG_HEADER_LEN: usize = 8;

/// A view of the Fragment extension header (RFC 8200 §4.5).
#[derive(Debug, Clone)]
pub struct FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FragmentHeader<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        FragmentHeader { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = FragmentHeader::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < FRAG_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[2], b[3]]) & 0xfff8
    }

    pub fn more_frags(&self) -> bool {
        self.buffer.as_ref()[3] & 1 != 0
    }

    pub fn ident(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> FragmentHeader<T> {
    pub fn set_next_header(&mut self, v: u8) {
        let b = self.buffer.as_mut();
        b[0] = v;
        b[1] = 0;
    }

    /// Offset in bytes (a multiple of 8) and the M flag.
    pub fn set_frag(&mut self, offset: u16, more_frags: bool) {
        let v = (offset & 0xfff8) | u16::from(more_frags);
        self.buffer.as_mut()[2..4].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_ident(&mut self, v: u32) {
        self.buffer.as_mut()[4..8].copy_from_slice(&v.to_be_bytes());
    }
}

/// A parsed Fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentRepr {
    pub next_header: u8,
    /// In bytes.
    pub frag_offset: u16,
    pub more_frags: bool,
    pub ident: u32,
}

impl FragmentRepr {
    pub fn parse<T: AsRef<[u8]> + ?Sized>(f: &FragmentHeader<&T>) -> Result<FragmentRepr> {
        f.check_len()?;
        Ok(FragmentRepr {
            next_header: f.next_header(),
            frag_offset: f.frag_offset(),
            more_frags: f.more_frags(),
            ident: f.ident(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        FRAG_HEADER_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, f: &mut FragmentHeader<&mut T>) {
        f.set_next_header(self.next_header);
        f.set_frag(self.frag_offset, self.more_frags);
        f.set_ident(self.ident);
    }
}

/// A parsed fixed IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    pub src_addr: Ipv6Addr,
    pub dst_addr: Ipv6Addr,
    pub next_header: u8,
    /// Bytes after the fixed header (extension headers included).
    pub payload_len: usize,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
}

impl Ipv6Repr {
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Ipv6Repr> {
        p.check_len()?;
        Ok(Ipv6Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            next_header: p.next_header(),
            payload_len: usize::from(p.payload_len()),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the fixed header. [`Error::BadLength`] if the payload does not
    /// fit the 16-bit length field, [`Error::Truncated`] if the buffer is
    /// shorter than the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(
        &self,
        p: &mut Packet<&mut T>,
    ) -> Result<()> {
        let len = u16::try_from(self.payload_len).map_err(|_| Error::BadLength)?;
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        p.set_version_tc_flow(self.traffic_class, self.flow_label);
        p.set_payload_len(len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // fe80::1 -> ff02::1, TC 0xb8, flow 0x12345, hop limit 64, UDP 8 bytes.
    const UDP: [u8; 48] = [
        0x6b, 0x81, 0x23, 0x45, 0x00, 0x08, 0x11, 0x40, //
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        0x12, 0x34, 0x56, 0x78, 0x00, 0x08, 0x00, 0x00,
    ];

    fn with_chain(exts: &[u8], first: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = UDP[..40].to_vec();
        v[6] = first;
        v.extend_from_slice(exts);
        v.extend_from_slice(payload);
        let pl = (v.len() - 40) as u16;
        v[4..6].copy_from_slice(&pl.to_be_bytes());
        v
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&UDP[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 8);
        assert_eq!(p.next_header(), protocol::UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), "fe80::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "ff02::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.payload(), &UDP[40..]);
        assert_eq!(upper_layer(p.packet()), Ok((protocol::UDP, 40)));
    }

    #[test]
    fn parse_emit() {
        let p = Packet::new_checked(&UDP[..]).unwrap();
        let r = Ipv6Repr::parse(&p).unwrap();
        assert_eq!(r.payload_len, 8);
        let mut out = [0u8; 48];
        out[40..].copy_from_slice(&UDP[40..]);
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, UDP);
        let mut p = Packet::new_unchecked(&mut out[..]);
        p.set_traffic_class(0x01);
        p.set_flow_label(0xfffff);
        assert_eq!(p.traffic_class(), 0x01);
        assert_eq!(p.flow_label(), 0xfffff);
        assert_eq!(p.version(), 6);
    }

    #[test]
    fn truncations() {
        for n in 0..UDP.len() {
            assert_eq!(
                Packet::new_checked(&UDP[..n]).err(),
                Some(Error::Truncated),
                "{n}"
            );
        }
        let mut b = UDP;
        b[0] = 0x4b;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadVersion));
    }

    #[test]
    fn walk_chain() {
        // HbH (8 bytes, Router Alert + pad) -> DestOpts (16 bytes) ->
        // Fragment (first, M=1) -> TCP.
        let exts = [
            60, 0, 5, 2, 0, 0, 1, 0, // HbH: RA option, PadN
            44, 1, 1, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // DestOpts, PadN
            6, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, // Fragment offset 0, M
        ];
        let pkt = with_chain(&exts, protocol::HOPOPT, &[0u8; 20]);
        let p = Packet::new_checked(&pkt[..]).unwrap();
        let c = p.header_chain().unwrap();
        assert_eq!(
            c,
            HeaderChain {
                protocol: protocol::TCP,
                offset: 72,
                fragment: Some(64)
            }
        );
        let f = FragmentHeader::new_checked(&pkt[64..]).unwrap();
        let fr = FragmentRepr::parse(&f).unwrap();
        assert_eq!(
            fr,
            FragmentRepr {
                next_header: 6,
                frag_offset: 0,
                more_frags: true,
                ident: 0xdeadbeef
            }
        );
        let mut out = [0u8; 8];
        fr.emit(&mut FragmentHeader::new_unchecked(&mut out[..]));
        assert_eq!(&out[..], &pkt[64..72]);
        // Every truncation of the chain is an error, not a panic.
        for n in 40..72 {
            assert!(header_chain(&pkt[..n]).is_err(), "{n}");
        }
    }

    #[test]
    fn later_fragment_stops() {
        // Fragment at offset 1448 whose next header says "Routing": the
        // bytes after it are data, not a Routing header.
        let exts = [43, 0, 0x05, 0xa8, 0, 0, 0, 1];
        let pkt = with_chain(&exts, protocol::IPV6_FRAG, &[0xff; 16]);
        let c = header_chain(&pkt).unwrap();
        assert_eq!(
            c,
            HeaderChain {
                protocol: 43,
                offset: 48,
                fragment: Some(40)
            }
        );
        let f = FragmentHeader::new_checked(&pkt[40..]).unwrap();
        assert_eq!(f.frag_offset(), 1448);
        assert!(!f.more_frags());
    }

    #[test]
    fn ah_and_esp() {
        // AH (payload len 4 -> (4+2)*4 = 24 bytes) -> ESP.
        let mut ah = vec![50, 4, 0, 0];
        ah.extend_from_slice(&[0; 20]);
        let pkt = with_chain(&ah, protocol::AH, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(upper_layer(&pkt), Ok((protocol::ESP, 64)));
        let pkt = with_chain(&[], protocol::IPV6_NONXT, &[]);
        assert_eq!(upper_layer(&pkt), Ok((protocol::IPV6_NONXT, 40)));
    }

    #[test]
    fn bad_chains() {
        // Hop-by-Hop after another extension header.
        let pkt = with_chain(&[0, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0, 0], 60, &[]);
        assert_eq!(upper_layer(&pkt), Err(Error::Malformed));
        // Two Fragment headers.
        let pkt = with_chain(&[44, 0, 0, 0, 0, 0, 0, 1, 17, 0, 0, 0, 0, 0, 0, 1], 44, &[]);
        assert_eq!(upper_layer(&pkt), Err(Error::Malformed));
        // Nine Destination Options headers: over the bound.
        let mut exts = Vec::new();
        for _ in 0..9 {
            exts.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        }
        let last = exts.len() - 8;
        exts[last] = protocol::IPV6_NONXT;
        let pkt = with_chain(&exts, 60, &[]);
        assert_eq!(upper_layer(&pkt), Err(Error::Unsupported));
        // Eight is fine.
        let pkt = with_chain(&exts[8..], 60, &[]);
        assert_eq!(upper_layer(&pkt), Ok((protocol::IPV6_NONXT, 40 + 64)));
        // A header length running past the packet.
        let pkt = with_chain(&[17, 200, 0, 0, 0, 0, 0, 0], 43, &[]);
        assert_eq!(upper_layer(&pkt), Err(Error::Truncated));
    }

    #[test]
    fn hop_limit() {
        let mut b = UDP;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        assert!(p.decrement_hop_limit());
        assert_eq!(p.hop_limit(), 63);
        p.set_hop_limit(1);
        assert!(!p.decrement_hop_limit());
        assert_eq!(p.hop_limit(), 1);
    }
}
