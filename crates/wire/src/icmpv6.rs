//! ICMPv6 (RFC 4443) and the Neighbor Discovery messages vecgate needs
//! (RFC 4861): router solicitation/advertisement (minimal), neighbor
//! solicitation/advertisement with their link-layer address options. The
//! ND options and address mappings are in `ndp.rs`, the error builder in
//! `errors.rs` (both re-exported here).

use core::net::Ipv6Addr;

use crate::checksum;
use crate::ethernet::MacAddr;
use crate::ipv6::protocol;
use crate::{Error, Result};

mod errors;
mod ndp;

pub use errors::{build_error, error_quote, may_send_error, ErrorKind, MAX_ERROR_LEN};
pub use ndp::{multicast_mac, na_flags, ndp_option, solicited_node, NdpOption, NdpOptions};

/// ICMPv6 message types (RFC 4443 §2.1, RFC 4861 §4).
pub mod msg_type {
    pub const DST_UNREACHABLE: u8 = 1;
    pub const PKT_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const PARAM_PROBLEM: u8 = 4;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
    pub const ROUTER_SOLICIT: u8 = 133;
    pub const ROUTER_ADVERT: u8 = 134;
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    pub const NEIGHBOR_ADVERT: u8 = 136;
    pub const REDIRECT: u8 = 137;

    /// Error messages have the high bit of the type clear (RFC 4443 §2.1).
    pub fn is_error(t: u8) -> bool {
        t < 128
    }
}

/// Destination unreachable codes (RFC 4443 §3.1).
pub mod unreach_code {
    pub const NO_ROUTE: u8 = 0;
    pub const ADMIN_PROHIBITED: u8 = 1;
    pub const BEYOND_SCOPE: u8 = 2;
    pub const ADDR_UNREACHABLE: u8 = 3;
    pub const PORT_UNREACHABLE: u8 = 4;
    pub const POLICY_FAILED: u8 = 5;
    pub const REJECT_ROUTE: u8 = 6;
}

/// Parameter problem codes (RFC 4443 §3.4).
pub mod param_problem_code {
    pub const ERRONEOUS_HEADER: u8 = 0;
    pub const UNRECOGNIZED_NXT_HDR: u8 = 1;
    pub const UNRECOGNIZED_OPTION: u8 = 2;
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
    /// NS/NA target address.
    pub const TARGET: Range<usize> = 8..24;
    /// RA fields.
    pub const RA_HOP_LIMIT: usize = 4;
    pub const RA_FLAGS: usize = 5;
    pub const RA_LIFETIME: Range<usize> = 6..8;
    pub const RA_REACHABLE: Range<usize> = 8..12;
    pub const RA_RETRANS: Range<usize> = 12..16;
}

/// Length of the ICMPv6 header (type, code, checksum, 4 bytes of rest).
pub const HEADER_LEN: usize = 8;
const NS_NA_LEN: usize = 24;
const RS_LEN: usize = 8;
const RA_LEN: usize = 16;

/// A view of an ICMPv6 message.
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

    /// The 8-byte header fits, and for NDP types the fixed part of the
    /// message too (RFC 4861 §7.1.1 "ICMP length ... is 24 or more octets"),
    /// so the NDP getters below cannot go out of bounds.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let need = match self.msg_type() {
            msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT => NS_NA_LEN,
            msg_type::ROUTER_ADVERT => RA_LEN,
            msg_type::ROUTER_SOLICIT => RS_LEN,
            _ => HEADER_LEN,
        };
        if len < need {
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

    fn u32_at(&self, r: core::ops::Range<usize>) -> u32 {
        let b = &self.b()[r];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    pub fn msg_type(&self) -> u8 {
        self.b()[field::TYPE]
    }

    pub fn code(&self) -> u8 {
        self.b()[field::CODE]
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

    /// The 4 bytes after the checksum: the MTU of packet too big, the
    /// pointer of parameter problem.
    pub fn rest_of_header(&self) -> u32 {
        self.u32_at(field::REST)
    }

    /// Echo data, or the quoted packet of an error message.
    pub fn data(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }

    /// Target of an NS/NA (valid after `new_checked` on those types).
    pub fn target_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::TARGET]);
        Ipv6Addr::from(a)
    }

    /// R/S/O flags of an NA (see [`na_flags`]).
    pub fn na_flags(&self) -> u8 {
        self.b()[field::REST.start] & 0xe0
    }

    pub fn ra_hop_limit(&self) -> u8 {
        self.b()[field::RA_HOP_LIMIT]
    }

    /// M (0x80) and O (0x40) flags of an RA.
    pub fn ra_flags(&self) -> u8 {
        self.b()[field::RA_FLAGS]
    }

    pub fn ra_router_lifetime(&self) -> u16 {
        self.u16_at(field::RA_LIFETIME)
    }

    pub fn ra_reachable_time(&self) -> u32 {
        self.u32_at(field::RA_REACHABLE)
    }

    pub fn ra_retrans_time(&self) -> u32 {
        self.u32_at(field::RA_RETRANS)
    }

    /// Offset of the NDP options for this message type (0 if none).
    fn ndp_options_offset(&self) -> Option<usize> {
        match self.msg_type() {
            msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT => Some(NS_NA_LEN),
            msg_type::ROUTER_ADVERT => Some(RA_LEN),
            msg_type::ROUTER_SOLICIT => Some(RS_LEN),
            _ => None,
        }
    }

    /// The NDP options of an RS/RA/NS/NA; empty for other types.
    pub fn ndp_options(&self) -> NdpOptions<'_> {
        match self.ndp_options_offset() {
            Some(off) => NdpOptions::new(self.b().get(off..).unwrap_or(&[])),
            None => NdpOptions::new(&[]),
        }
    }

    /// Checksum over the IPv6 pseudo-header and the whole buffer (RFC 4443
    /// §2.3).
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let Ok(len) = u32::try_from(self.b().len()) else {
            return false;
        };
        let ph = checksum::pseudo_header_v6(src, dst, protocol::ICMPV6, len);
        checksum::combine(&[ph, checksum::data(self.b())]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    pub fn set_msg_type(&mut self, v: u8) {
        self.bm()[field::TYPE] = v;
    }

    pub fn set_code(&mut self, v: u8) {
        self.bm()[field::CODE] = v;
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.bm()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_rest_of_header(&mut self, v: u32) {
        self.bm()[field::REST].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_target_addr(&mut self, a: &Ipv6Addr) {
        self.bm()[field::TARGET].copy_from_slice(&a.octets());
    }

    /// Computes the checksum over the pseudo-header and the whole buffer.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let len = u32::try_from(self.b().len()).unwrap_or(u32::MAX);
        let ph = checksum::pseudo_header_v6(src, dst, protocol::ICMPV6, len);
        let c = !checksum::combine(&[ph, checksum::data(self.b())]);
        self.set_checksum(c);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[HEADER_LEN..]
    }
}

/// A parsed ICMPv6 message. NDP messages carry the options vecgate uses;
/// the rest (prefix information...) is reachable through
/// [`Packet::ndp_options`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    DstUnreachable {
        code: u8,
        data: &'a [u8],
    },
    PktTooBig {
        mtu: u32,
        data: &'a [u8],
    },
    TimeExceeded {
        code: u8,
        data: &'a [u8],
    },
    ParamProblem {
        code: u8,
        pointer: u32,
        data: &'a [u8],
    },
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
    RouterSolicit {
        lladdr: Option<MacAddr>,
    },
    RouterAdvert {
        hop_limit: u8,
        /// M (0x80) and O (0x40).
        flags: u8,
        router_lifetime: u16,
        reachable_time: u32,
        retrans_time: u32,
        lladdr: Option<MacAddr>,
        mtu: Option<u32>,
    },
    NeighborSolicit {
        target: Ipv6Addr,
        /// Source link-layer address option.
        lladdr: Option<MacAddr>,
    },
    NeighborAdvert {
        /// See [`na_flags`].
        flags: u8,
        target: Ipv6Addr,
        /// Target link-layer address option.
        lladdr: Option<MacAddr>,
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Parses a message whose checksum verifies against `src`/`dst`.
    /// NDP messages are validated as RFC 4861 §6.1/§7.1 asks of the ICMP
    /// part (code 0, lengths, no zero-length option, target not multicast);
    /// checking the IP hop limit is 255 is the caller's job. Unknown types
    /// are [`Error::Unsupported`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        p: &Packet<&'a T>,
    ) -> Result<Icmpv6Repr<'a>> {
        p.check_len()?;
        if !p.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        let data: &'a [u8] = &p.buffer.as_ref()[HEADER_LEN..];
        let t = p.msg_type();
        let code = p.code();
        if !msg_type::is_error(t) && code != 0 {
            return Err(Error::Malformed);
        }
        let ll = |want: u8| -> Result<Option<MacAddr>> {
            let mut found = None;
            for o in p.ndp_options() {
                match (o?, want) {
                    (NdpOption::SourceLinkLayerAddr(m), ndp_option::SOURCE_LL_ADDR)
                    | (NdpOption::TargetLinkLayerAddr(m), ndp_option::TARGET_LL_ADDR) => {
                        found = Some(m)
                    }
                    _ => {}
                }
            }
            Ok(found)
        };
        Ok(match t {
            msg_type::DST_UNREACHABLE => Icmpv6Repr::DstUnreachable { code, data },
            msg_type::PKT_TOO_BIG => Icmpv6Repr::PktTooBig {
                mtu: p.rest_of_header(),
                data,
            },
            msg_type::TIME_EXCEEDED => Icmpv6Repr::TimeExceeded { code, data },
            msg_type::PARAM_PROBLEM => Icmpv6Repr::ParamProblem {
                code,
                pointer: p.rest_of_header(),
                data,
            },
            msg_type::ECHO_REQUEST => Icmpv6Repr::EchoRequest {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            msg_type::ECHO_REPLY => Icmpv6Repr::EchoReply {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            msg_type::ROUTER_SOLICIT => Icmpv6Repr::RouterSolicit {
                lladdr: ll(ndp_option::SOURCE_LL_ADDR)?,
            },
            msg_type::ROUTER_ADVERT => {
                let mut mtu = None;
                for o in p.ndp_options() {
                    if let NdpOption::Mtu(m) = o? {
                        mtu = Some(m);
                    }
                }
                Icmpv6Repr::RouterAdvert {
                    hop_limit: p.ra_hop_limit(),
                    flags: p.ra_flags(),
                    router_lifetime: p.ra_router_lifetime(),
                    reachable_time: p.ra_reachable_time(),
                    retrans_time: p.ra_retrans_time(),
                    lladdr: ll(ndp_option::SOURCE_LL_ADDR)?,
                    mtu,
                }
            }
            msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT => {
                let target = p.target_addr();
                if target.is_multicast() {
                    return Err(Error::Malformed);
                }
                if t == msg_type::NEIGHBOR_SOLICIT {
                    Icmpv6Repr::NeighborSolicit {
                        target,
                        lladdr: ll(ndp_option::SOURCE_LL_ADDR)?,
                    }
                } else {
                    Icmpv6Repr::NeighborAdvert {
                        flags: p.na_flags(),
                        target,
                        lladdr: ll(ndp_option::TARGET_LL_ADDR)?,
                    }
                }
            }
            _ => return Err(Error::Unsupported),
        })
    }

    fn opt_len(m: &Option<MacAddr>) -> usize {
        if m.is_some() {
            8
        } else {
            0
        }
    }

    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::DstUnreachable { data, .. }
            | Icmpv6Repr::PktTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. }
            | Icmpv6Repr::ParamProblem { data, .. }
            | Icmpv6Repr::EchoRequest { data, .. }
            | Icmpv6Repr::EchoReply { data, .. } => HEADER_LEN + data.len(),
            Icmpv6Repr::RouterSolicit { lladdr } => RS_LEN + Self::opt_len(lladdr),
            Icmpv6Repr::RouterAdvert { lladdr, mtu, .. } => {
                RA_LEN + Self::opt_len(lladdr) + if mtu.is_some() { 8 } else { 0 }
            }
            Icmpv6Repr::NeighborSolicit { lladdr, .. }
            | Icmpv6Repr::NeighborAdvert { lladdr, .. } => NS_NA_LEN + Self::opt_len(lladdr),
        }
    }

    /// Writes the message into the first [`buffer_len`](Self::buffer_len)
    /// bytes of the view and fills the checksum for `src`/`dst`
    /// ([`Error::Truncated`] if the buffer is shorter).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(
        &self,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        p: &mut Packet<&mut T>,
    ) -> Result<()> {
        let len = self.buffer_len();
        let buf = p.buffer.as_mut().get_mut(..len).ok_or(Error::Truncated)?;
        buf.fill(0);
        let mut q = Packet::new_unchecked(&mut *buf);
        let echo = |ident: u16, seq: u16| (u32::from(ident) << 16) | u32::from(seq);
        let (t, code, rest, data): (u8, u8, u32, &[u8]) = match *self {
            Icmpv6Repr::DstUnreachable { code, data } => (msg_type::DST_UNREACHABLE, code, 0, data),
            Icmpv6Repr::PktTooBig { mtu, data } => (msg_type::PKT_TOO_BIG, 0, mtu, data),
            Icmpv6Repr::TimeExceeded { code, data } => (msg_type::TIME_EXCEEDED, code, 0, data),
            Icmpv6Repr::ParamProblem {
                code,
                pointer,
                data,
            } => (msg_type::PARAM_PROBLEM, code, pointer, data),
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => (msg_type::ECHO_REQUEST, 0, echo(ident, seq_no), data),
            Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => (msg_type::ECHO_REPLY, 0, echo(ident, seq_no), data),
            Icmpv6Repr::RouterSolicit { .. } => (msg_type::ROUTER_SOLICIT, 0, 0, &[]),
            Icmpv6Repr::RouterAdvert {
                hop_limit,
                flags,
                router_lifetime,
                ..
            } => (
                msg_type::ROUTER_ADVERT,
                0,
                (u32::from(hop_limit) << 24)
                    | (u32::from(flags) << 16)
                    | u32::from(router_lifetime),
                &[],
            ),
            Icmpv6Repr::NeighborSolicit { .. } => (msg_type::NEIGHBOR_SOLICIT, 0, 0, &[]),
            Icmpv6Repr::NeighborAdvert { flags, .. } => (
                msg_type::NEIGHBOR_ADVERT,
                0,
                u32::from(flags & 0xe0) << 24,
                &[],
            ),
        };
        q.set_msg_type(t);
        q.set_code(code);
        q.set_rest_of_header(rest);
        q.data_mut()[..data.len()].copy_from_slice(data);
        let b = q.bm();
        match *self {
            Icmpv6Repr::RouterSolicit { lladdr: Some(m) } => {
                NdpOption::SourceLinkLayerAddr(m).emit(&mut b[RS_LEN..])?;
            }
            Icmpv6Repr::RouterAdvert {
                reachable_time,
                retrans_time,
                lladdr,
                mtu,
                ..
            } => {
                b[field::RA_REACHABLE].copy_from_slice(&reachable_time.to_be_bytes());
                b[field::RA_RETRANS].copy_from_slice(&retrans_time.to_be_bytes());
                let mut off = RA_LEN;
                if let Some(m) = lladdr {
                    off += NdpOption::SourceLinkLayerAddr(m).emit(&mut b[off..])?;
                }
                if let Some(m) = mtu {
                    NdpOption::Mtu(m).emit(&mut b[off..])?;
                }
            }
            Icmpv6Repr::NeighborSolicit { target, lladdr }
            | Icmpv6Repr::NeighborAdvert { target, lladdr, .. } => {
                b[field::TARGET].copy_from_slice(&target.octets());
                if let Some(m) = lladdr {
                    let o = if t == msg_type::NEIGHBOR_SOLICIT {
                        NdpOption::SourceLinkLayerAddr(m)
                    } else {
                        NdpOption::TargetLinkLayerAddr(m)
                    };
                    o.emit(&mut b[NS_NA_LEN..])?;
                }
            }
            _ => {}
        }
        q.fill_checksum(src, dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
