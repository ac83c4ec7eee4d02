//! ICMP for IPv4 (RFC 792): echo, destination unreachable (with the RFC 1191
//! next-hop MTU of "fragmentation needed"), time exceeded, parameter
//! problem; and a builder for the error messages a router sends (RFC 1812
//! §4.3.2).

use core::net::Ipv4Addr;

use crate::checksum;
use crate::ipv4::{self, protocol};
use crate::{Error, Result};

/// ICMP message types (RFC 792).
pub mod msg_type {
    pub const ECHO_REPLY: u8 = 0;
    pub const DST_UNREACHABLE: u8 = 3;
    pub const SOURCE_QUENCH: u8 = 4;
    pub const REDIRECT: u8 = 5;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
    pub const PARAM_PROBLEM: u8 = 12;

    /// Error messages, which must never trigger another error (RFC 1122
    /// §3.2.2).
    pub fn is_error(t: u8) -> bool {
        matches!(
            t,
            DST_UNREACHABLE | SOURCE_QUENCH | REDIRECT | TIME_EXCEEDED | PARAM_PROBLEM
        )
    }
}

/// Destination unreachable codes (RFC 792, RFC 1812 §5.2.7.1).
pub mod unreach_code {
    pub const NET: u8 = 0;
    pub const HOST: u8 = 1;
    pub const PROTOCOL: u8 = 2;
    pub const PORT: u8 = 3;
    /// Fragmentation needed and DF set; carries the next-hop MTU (RFC 1191).
    pub const FRAG_NEEDED: u8 = 4;
    pub const SRC_ROUTE_FAILED: u8 = 5;
    pub const NET_UNKNOWN: u8 = 6;
    pub const HOST_UNKNOWN: u8 = 7;
    pub const ADMIN_PROHIBITED: u8 = 13;
}

/// Time exceeded codes.
pub mod time_exceeded_code {
    pub const TTL: u8 = 0;
    pub const REASSEMBLY: u8 = 1;
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
    pub const MTU: Range<usize> = 6..8;
    pub const POINTER: usize = 4;
    pub const REST: Range<usize> = 4..8;
}

/// Length of the ICMP header (type, code, checksum, 4 bytes of rest).
pub const HEADER_LEN: usize = 8;
/// Largest error message sent (RFC 1812 §4.3.2.3): IP header included.
pub const MAX_ERROR_LEN: usize = ipv4::MIN_MTU;

/// A view of an ICMPv4 message.
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

    /// The 8-byte header fits; the whole buffer is the message.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
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

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    pub fn echo_ident(&self) -> u16 {
        self.u16_at(field::ECHO_IDENT)
    }

    pub fn echo_seq_no(&self) -> u16 {
        self.u16_at(field::ECHO_SEQNO)
    }

    /// Next-hop MTU of a "fragmentation needed" message (RFC 1191 §4).
    pub fn next_hop_mtu(&self) -> u16 {
        self.u16_at(field::MTU)
    }

    /// Pointer of a parameter problem message.
    pub fn pointer(&self) -> u8 {
        self.buffer.as_ref()[field::POINTER]
    }

    /// The 4 bytes after the checksum, whatever the type.
    pub fn rest_of_header(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::REST];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Checksum over the whole message (RFC 792).
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(self.buffer.as_ref())
    }

    /// Echo data, or the quoted datagram of an error.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16(field::CHECKSUM, v)
    }

    pub fn set_echo_ident(&mut self, v: u16) {
        self.set_u16(field::ECHO_IDENT, v)
    }

    pub fn set_echo_seq_no(&mut self, v: u16) {
        self.set_u16(field::ECHO_SEQNO, v)
    }

    pub fn set_rest_of_header(&mut self, v: u32) {
        self.buffer.as_mut()[field::REST].copy_from_slice(&v.to_be_bytes());
    }

    /// Computes the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }

    /// Turns an echo request into the reply in place (RFC 792: "the source
    /// and destination addresses are simply reversed, the type code changed
    /// to 0, and the checksum recomputed" — here incrementally).
    pub fn echo_request_to_reply(&mut self) {
        let old = u16::from_be_bytes([self.msg_type(), self.code()]);
        let new = u16::from_be_bytes([msg_type::ECHO_REPLY, self.code()]);
        let c = checksum::update_u16(self.checksum(), old, new);
        self.set_msg_type(msg_type::ECHO_REPLY);
        self.set_checksum(c);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// A parsed ICMPv4 message; `data` borrows the echo data or the quoted
/// original datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    EchoRequest {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    EchoReply {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    DstUnreachable {
        code: u8,
        /// Meaningful for [`unreach_code::FRAG_NEEDED`] only (0 otherwise).
        next_hop_mtu: u16,
        data: &'a [u8],
    },
    TimeExceeded {
        code: u8,
        data: &'a [u8],
    },
    ParamProblem {
        pointer: u8,
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Parses a message with a verified checksum; other types are
    /// [`Error::Unsupported`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&'a T>) -> Result<Icmpv4Repr<'a>> {
        p.check_len()?;
        if !p.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let data = &p.buffer.as_ref()[HEADER_LEN..];
        Ok(match (p.msg_type(), p.code()) {
            (msg_type::ECHO_REQUEST, 0) => Icmpv4Repr::EchoRequest {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            (msg_type::ECHO_REPLY, 0) => Icmpv4Repr::EchoReply {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            (msg_type::DST_UNREACHABLE, code) => Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu: if code == unreach_code::FRAG_NEEDED {
                    p.next_hop_mtu()
                } else {
                    0
                },
                data,
            },
            (msg_type::TIME_EXCEEDED, code) => Icmpv4Repr::TimeExceeded { code, data },
            (msg_type::PARAM_PROBLEM, 0) => Icmpv4Repr::ParamProblem {
                pointer: p.pointer(),
                data,
            },
            (msg_type::ECHO_REQUEST | msg_type::ECHO_REPLY | msg_type::PARAM_PROBLEM, _) => {
                return Err(Error::Malformed)
            }
            _ => return Err(Error::Unsupported),
        })
    }

    fn data(&self) -> &'a [u8] {
        match *self {
            Icmpv4Repr::EchoRequest { data, .. }
            | Icmpv4Repr::EchoReply { data, .. }
            | Icmpv4Repr::DstUnreachable { data, .. }
            | Icmpv4Repr::TimeExceeded { data, .. }
            | Icmpv4Repr::ParamProblem { data, .. } => data,
        }
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data().len()
    }

    /// Writes the message and its checksum into the first
    /// [`buffer_len`](Self::buffer_len) bytes ([`Error::Truncated`] if the
    /// buffer is shorter). The view should span exactly the message for
    /// [`Packet::verify_checksum`] to hold afterwards.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(
        &self,
        p: &mut Packet<&mut T>,
    ) -> Result<()> {
        let len = self.buffer_len();
        let buf = p.buffer.as_mut();
        if buf.len() < len {
            return Err(Error::Truncated);
        }
        let mut q = Packet::new_unchecked(&mut buf[..len]);
        let (t, code, rest) = match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, .. } => (
                msg_type::ECHO_REQUEST,
                0,
                (u32::from(ident) << 16) | u32::from(seq_no),
            ),
            Icmpv4Repr::EchoReply { ident, seq_no, .. } => (
                msg_type::ECHO_REPLY,
                0,
                (u32::from(ident) << 16) | u32::from(seq_no),
            ),
            Icmpv4Repr::DstUnreachable {
                code, next_hop_mtu, ..
            } => (msg_type::DST_UNREACHABLE, code, u32::from(next_hop_mtu)),
            Icmpv4Repr::TimeExceeded { code, .. } => (msg_type::TIME_EXCEEDED, code, 0),
            Icmpv4Repr::ParamProblem { pointer, .. } => {
                (msg_type::PARAM_PROBLEM, 0, u32::from(pointer) << 24)
            }
        };
        q.set_msg_type(t);
        q.set_code(code);
        q.set_rest_of_header(rest);
        q.data_mut().copy_from_slice(self.data());
        q.fill_checksum();
        Ok(())
    }
}

/// The part of `original` (an IPv4 datagram, starting at its header) an
/// error message quotes: all of it up to its total length (so link padding
/// is not quoted), at most what keeps the error within 576 bytes (RFC 1812
/// §4.3.2.3; at least the header + 64 bits RFC 792 asks for, whenever
/// the original has them).
pub fn error_quote(original: &[u8]) -> &[u8] {
    let mut len = original.len();
    if let Ok(p) = ipv4::Packet::new_checked(original) {
        len = usize::from(p.total_len());
    }
    &original[..len.min(MAX_ERROR_LEN - ipv4::HEADER_LEN - HEADER_LEN)]
}

/// Whether a router may answer `original` with an ICMP error (RFC 1812
/// §4.3.2.7, RFC 1122 §3.2.2): not about an ICMP error, not about a
/// non-first fragment, not about a datagram to a broadcast or multicast
/// address, not about one whose source is not a unique host. Link-level
/// broadcast is the caller's check. Unparsable originals get no error.
pub fn may_send_error(original: &[u8]) -> bool {
    let Ok(p) = ipv4::Packet::new_checked(original) else {
        return false;
    };
    if p.frag_offset() != 0 {
        return false;
    }
    let (src, dst) = (p.src_addr(), p.dst_addr());
    if dst.is_broadcast() || dst.is_multicast() {
        return false;
    }
    if src.is_unspecified() || src.is_broadcast() || src.is_multicast() || src.is_loopback() {
        return false;
    }
    if p.protocol() == protocol::ICMP {
        match p.payload().first() {
            Some(&t) if !msg_type::is_error(t) => {}
            _ => return false,
        }
    }
    true
}

/// The kind of error [`build_error`] sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    DstUnreachable { code: u8, next_hop_mtu: u16 },
    TimeExceeded { code: u8 },
    ParamProblem { pointer: u8 },
}

/// Builds a complete IPv4 + ICMP error about `original` into `out`, from
/// `src` to the original's source, and returns its length. The quote is
/// [`error_quote`], shortened further if `out` is smaller (but never below
/// the original header + 8 bytes: then [`Error::Truncated`]). The IP header
/// uses precedence "internetwork control" (RFC 1812 §4.3.2.5), identification
/// 0 and the given TTL. Call [`may_send_error`] first.
pub fn build_error(
    out: &mut [u8],
    src: Ipv4Addr,
    ttl: u8,
    kind: ErrorKind,
    original: &[u8],
) -> Result<usize> {
    let orig = ipv4::Packet::new_checked(original)?;
    let min_quote = (orig.header_len() + 8).min(usize::from(orig.total_len()));
    let room = out
        .len()
        .checked_sub(ipv4::HEADER_LEN + HEADER_LEN)
        .ok_or(Error::Truncated)?;
    let quote = error_quote(original);
    let quote = &quote[..quote.len().min(room)];
    if quote.len() < min_quote {
        return Err(Error::Truncated);
    }
    let icmp = match kind {
        ErrorKind::DstUnreachable { code, next_hop_mtu } => Icmpv4Repr::DstUnreachable {
            code,
            next_hop_mtu,
            data: quote,
        },
        ErrorKind::TimeExceeded { code } => Icmpv4Repr::TimeExceeded { code, data: quote },
        ErrorKind::ParamProblem { pointer } => Icmpv4Repr::ParamProblem {
            pointer,
            data: quote,
        },
    };
    let ip = ipv4::Ipv4Repr {
        src_addr: src,
        dst_addr: orig.src_addr(),
        protocol: protocol::ICMP,
        payload_len: icmp.buffer_len(),
        ttl,
        tos: 0xc0,
        ident: 0,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
    };
    let total = ip.buffer_len();
    let (hdr, rest) = out.split_at_mut(ipv4::HEADER_LEN);
    ip.emit(&mut ipv4::Packet::new_unchecked(hdr))?;
    icmp.emit(&mut Packet::new_unchecked(rest))?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Echo request id 0x1234 seq 1 "abcd" (the payload of ipv4's test
    // vector).
    const ECHO: [u8; 12] = [
        0x08, 0x00, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64,
    ];
    // The full IPv4 datagram it came in.
    const ECHO_IP: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, 0xab, 0xcd, 0x40, 0x00, 0x40, 0x01, 0x7b, 0x0d, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, 0x61, 0x62,
        0x63, 0x64,
    ];

    #[test]
    fn deconstruct_echo() {
        let p = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(p.msg_type(), msg_type::ECHO_REQUEST);
        assert_eq!(p.code(), 0);
        assert_eq!(p.echo_ident(), 0x1234);
        assert_eq!(p.echo_seq_no(), 1);
        assert_eq!(p.data(), b"abcd");
        assert!(p.verify_checksum());
        let r = Icmpv4Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Icmpv4Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                data: b"abcd"
            }
        );
        let mut out = [0u8; 12];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, ECHO);
    }

    #[test]
    fn echo_to_reply_in_place() {
        let mut b = ECHO;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.echo_request_to_reply();
        assert!(p.verify_checksum());
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(matches!(
            Icmpv4Repr::parse(&p),
            Ok(Icmpv4Repr::EchoReply {
                ident: 0x1234,
                seq_no: 1,
                ..
            })
        ));
        // The reply's checksum, by hand: 0x2104 + 0x0800 = 0x2904.
        assert_eq!(&b[..4], &[0, 0, 0x29, 0x04]);
    }

    #[test]
    fn malformed() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Packet::new_checked(&ECHO[..n]).err(),
                Some(Error::Truncated)
            );
        }
        // Every truncation with data is a checksum failure, never a panic.
        for n in HEADER_LEN..ECHO.len() {
            let p = Packet::new_checked(&ECHO[..n]).unwrap();
            assert_eq!(Icmpv4Repr::parse(&p), Err(Error::BadChecksum), "{n}");
        }
        let mut b = [0u8; 8];
        b[0] = 13; // timestamp
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.fill_checksum();
        assert_eq!(
            Icmpv4Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Unsupported)
        );
    }

    #[test]
    fn frag_needed_build_and_parse() {
        let mut out = [0u8; 600];
        let n = build_error(
            &mut out,
            Ipv4Addr::new(192, 0, 2, 1),
            64,
            ErrorKind::DstUnreachable {
                code: unreach_code::FRAG_NEEDED,
                next_hop_mtu: 1400,
            },
            &ECHO_IP,
        )
        .unwrap();
        assert_eq!(n, 20 + 8 + 32);
        let ip = ipv4::Packet::new_checked(&out[..n]).unwrap();
        let ipr = ipv4::Ipv4Repr::parse(&ip).unwrap();
        assert_eq!(ipr.dst_addr, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(ipr.protocol, protocol::ICMP);
        assert_eq!(ipr.tos, 0xc0);
        let icmp = Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(
            &ip.payload()[..8],
            &[
                3,
                4,
                icmp.checksum().to_be_bytes()[0],
                icmp.checksum().to_be_bytes()[1],
                0,
                0,
                0x05,
                0x78
            ]
        );
        assert_eq!(
            Icmpv4Repr::parse(&icmp).unwrap(),
            Icmpv4Repr::DstUnreachable {
                code: 4,
                next_hop_mtu: 1400,
                data: &ECHO_IP
            }
        );
    }

    #[test]
    fn quote_is_bounded() {
        // A 1500-byte datagram: the error quotes 548 bytes, 576 in all.
        let mut big = vec![0u8; 1500];
        big[..20].copy_from_slice(&ECHO_IP[..20]);
        big[2..4].copy_from_slice(&1500u16.to_be_bytes());
        assert_eq!(error_quote(&big).len(), 548);
        let mut out = [0u8; 1500];
        let n = build_error(
            &mut out,
            Ipv4Addr::new(192, 0, 2, 1),
            64,
            ErrorKind::TimeExceeded { code: 0 },
            &big,
        )
        .unwrap();
        assert_eq!(n, MAX_ERROR_LEN);
        // A smaller output buffer shortens the quote down to header + 8.
        let mut small = [0u8; 56];
        assert_eq!(
            build_error(
                &mut small,
                Ipv4Addr::LOCALHOST,
                64,
                ErrorKind::TimeExceeded { code: 0 },
                &big
            ),
            Ok(56)
        );
        let mut tiny = [0u8; 55];
        assert_eq!(
            build_error(
                &mut tiny,
                Ipv4Addr::LOCALHOST,
                64,
                ErrorKind::TimeExceeded { code: 0 },
                &big
            ),
            Err(Error::Truncated)
        );
        // Padding after total length is not quoted.
        let mut padded = ECHO_IP.to_vec();
        padded.extend_from_slice(&[0; 14]);
        assert_eq!(error_quote(&padded), &ECHO_IP[..]);
    }

    #[test]
    fn error_rules() {
        assert!(may_send_error(&ECHO_IP));
        // About an ICMP error: no.
        let mut b = ECHO_IP;
        b[20] = msg_type::TIME_EXCEEDED;
        assert!(!may_send_error(&b));
        // Non-first fragment: no.
        let mut b = ECHO_IP;
        b[6] = 0x00;
        b[7] = 0x10;
        assert!(!may_send_error(&b));
        // To a multicast group: no.
        let mut b = ECHO_IP;
        b[16] = 239;
        assert!(!may_send_error(&b));
        // From 0.0.0.0: no.
        let mut b = ECHO_IP;
        b[12..16].copy_from_slice(&[0, 0, 0, 0]);
        assert!(!may_send_error(&b));
        assert!(!may_send_error(&ECHO_IP[..19]));
    }
}
