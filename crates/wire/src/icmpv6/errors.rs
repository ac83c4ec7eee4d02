//! ICMPv6 error messages (RFC 4443 §2.4, §3): when one may be sent, what
//! it quotes, and the whole IPv6 + ICMPv6 packet.

use core::net::Ipv6Addr;

use super::{msg_type, param_problem_code, Icmpv6Repr, Packet, HEADER_LEN};
use crate::ipv6::{self, protocol};
use crate::{Error, Result};

/// Largest error message, IPv6 header included (RFC 4443 §2.4 (c)).
pub const MAX_ERROR_LEN: usize = ipv6::MIN_MTU;
/// The part of `original` (an IPv6 packet, from its fixed header) an error
/// quotes: all of it up to its payload length (no link padding), at most
/// what keeps the error within the minimum MTU (RFC 4443 §2.4 (c)).
pub fn error_quote(original: &[u8]) -> &[u8] {
    let mut len = original.len();
    if let Ok(p) = ipv6::Packet::new_checked(original) {
        len = p.packet().len();
    }
    &original[..len.min(MAX_ERROR_LEN - ipv6::HEADER_LEN - HEADER_LEN)]
}

/// The kind of error [`build_error`] sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    DstUnreachable { code: u8 },
    PktTooBig { mtu: u32 },
    TimeExceeded { code: u8 },
    ParamProblem { code: u8, pointer: u32 },
}

/// Whether an error of `kind` may be sent about `original` (RFC 4443 §2.4
/// (e)): never about an ICMPv6 error (or a redirect), never to an
/// unspecified or multicast source, and about a packet sent to a multicast
/// address only packet too big or parameter problem code 2. Unparsable
/// originals get no error. (Rate limiting, §2.4 (f), is the caller's.)
pub fn may_send_error(original: &[u8], kind: ErrorKind) -> bool {
    let Ok(p) = ipv6::Packet::new_checked(original) else {
        return false;
    };
    let src = p.src_addr();
    if src.is_unspecified() || src.is_multicast() {
        return false;
    }
    if p.dst_addr().is_multicast() {
        let allowed = matches!(
            kind,
            ErrorKind::PktTooBig { .. }
                | ErrorKind::ParamProblem {
                    code: param_problem_code::UNRECOGNIZED_OPTION,
                    ..
                }
        );
        if !allowed {
            return false;
        }
    }
    if let Ok(c) = p.header_chain() {
        if c.protocol == protocol::ICMPV6 {
            match p.packet().get(c.offset) {
                Some(&t) if !msg_type::is_error(t) && t != msg_type::REDIRECT => {}
                _ => return false,
            }
        }
    }
    true
}

/// Builds a complete IPv6 + ICMPv6 error about `original` into `out`, from
/// `src` to the original's source, and returns its length. The quote is
/// [`error_quote`], shortened if `out` is smaller (but never below the
/// original's 40-byte header: then [`Error::Truncated`]). Call
/// [`may_send_error`] first.
pub fn build_error(
    out: &mut [u8],
    src: &Ipv6Addr,
    hop_limit: u8,
    kind: ErrorKind,
    original: &[u8],
) -> Result<usize> {
    let orig = ipv6::Packet::new_checked(original)?;
    let room = out
        .len()
        .checked_sub(ipv6::HEADER_LEN + HEADER_LEN)
        .ok_or(Error::Truncated)?;
    let quote = error_quote(original);
    let quote = &quote[..quote.len().min(room)];
    if quote.len() < ipv6::HEADER_LEN {
        return Err(Error::Truncated);
    }
    let icmp = match kind {
        ErrorKind::DstUnreachable { code } => Icmpv6Repr::DstUnreachable { code, data: quote },
        ErrorKind::PktTooBig { mtu } => Icmpv6Repr::PktTooBig { mtu, data: quote },
        ErrorKind::TimeExceeded { code } => Icmpv6Repr::TimeExceeded { code, data: quote },
        ErrorKind::ParamProblem { code, pointer } => Icmpv6Repr::ParamProblem {
            code,
            pointer,
            data: quote,
        },
    };
    let dst = orig.src_addr();
    let ip = ipv6::Ipv6Repr {
        src_addr: *src,
        dst_addr: dst,
        next_header: protocol::ICMPV6,
        payload_len: icmp.buffer_len(),
        hop_limit,
        traffic_class: 0,
        flow_label: 0,
    };
    let total = ip.buffer_len();
    let (hdr, rest) = out.split_at_mut(ipv6::HEADER_LEN);
    ip.emit(&mut ipv6::Packet::new_unchecked(hdr))?;
    icmp.emit(
        src,
        &dst,
        &mut Packet::new_unchecked(&mut rest[..icmp.buffer_len()]),
    )?;
    Ok(total)
}
