//! Neighbor Discovery (RFC 4861) pieces of ICMPv6: the NA flags, the
//! options (§4.6) with their reader and writer, and the solicited-node and
//! multicast-MAC mappings an NS is sent to. The NS/NA/RS/RA messages
//! themselves are [`super::Icmpv6Repr`] variants.

use core::net::Ipv6Addr;

use crate::ethernet::MacAddr;
use crate::{Error, Result};

/// Neighbor Advertisement flags (RFC 4861 §4.4).
pub mod na_flags {
    pub const ROUTER: u8 = 0x80;
    pub const SOLICITED: u8 = 0x40;
    pub const OVERRIDE: u8 = 0x20;
}

/// NDP option types (RFC 4861 §4.6).
pub mod ndp_option {
    pub const SOURCE_LL_ADDR: u8 = 1;
    pub const TARGET_LL_ADDR: u8 = 2;
    pub const PREFIX_INFO: u8 = 3;
    pub const REDIRECTED_HDR: u8 = 4;
    pub const MTU: u8 = 5;
}

/// The solicited-node multicast address of `addr` (RFC 4291 §2.7.1):
/// ff02::1:ff00:0/104 followed by the low 24 bits of `addr`.
pub fn solicited_node(addr: &Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, o[13], o[14], o[15],
    ])
}

/// The Ethernet address of an IPv6 multicast group (RFC 2464 §7): 33:33
/// followed by the last 32 bits of the group.
pub fn multicast_mac(group: &Ipv6Addr) -> MacAddr {
    let o = group.octets();
    MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// One NDP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdpOption<'a> {
    SourceLinkLayerAddr(MacAddr),
    TargetLinkLayerAddr(MacAddr),
    Mtu(u32),
    PrefixInfo {
        prefix_len: u8,
        /// L (0x80) and A (0x40).
        flags: u8,
        valid_lifetime: u32,
        preferred_lifetime: u32,
        prefix: Ipv6Addr,
    },
    /// Anything else: the type and the bytes after type and length.
    Other {
        kind: u8,
        data: &'a [u8],
    },
}

impl NdpOption<'_> {
    /// Bytes the option takes on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            NdpOption::SourceLinkLayerAddr(_)
            | NdpOption::TargetLinkLayerAddr(_)
            | NdpOption::Mtu(_) => 8,
            NdpOption::PrefixInfo { .. } => 32,
            NdpOption::Other { data, .. } => (data.len() + 2).div_ceil(8) * 8,
        }
    }

    /// Writes the option (zero-padded to its 8-byte multiple) at the start
    /// of `buf`; [`Error::Truncated`] if it does not fit, [`Error::BadLength`]
    /// if an `Other` option is too long for the length octet.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let units = u8::try_from(len / 8).map_err(|_| Error::BadLength)?;
        let buf = buf.get_mut(..len).ok_or(Error::Truncated)?;
        buf.fill(0);
        buf[1] = units;
        match self {
            NdpOption::SourceLinkLayerAddr(m) | NdpOption::TargetLinkLayerAddr(m) => {
                buf[0] = if matches!(self, NdpOption::SourceLinkLayerAddr(_)) {
                    ndp_option::SOURCE_LL_ADDR
                } else {
                    ndp_option::TARGET_LL_ADDR
                };
                buf[2..8].copy_from_slice(&m.0);
            }
            NdpOption::Mtu(mtu) => {
                buf[0] = ndp_option::MTU;
                buf[4..8].copy_from_slice(&mtu.to_be_bytes());
            }
            NdpOption::PrefixInfo {
                prefix_len,
                flags,
                valid_lifetime,
                preferred_lifetime,
                prefix,
            } => {
                buf[0] = ndp_option::PREFIX_INFO;
                buf[2] = *prefix_len;
                buf[3] = *flags;
                buf[4..8].copy_from_slice(&valid_lifetime.to_be_bytes());
                buf[8..12].copy_from_slice(&preferred_lifetime.to_be_bytes());
                buf[16..32].copy_from_slice(&prefix.octets());
            }
            NdpOption::Other { kind, data } => {
                buf[0] = *kind;
                buf[2..2 + data.len()].copy_from_slice(data);
            }
        }
        Ok(len)
    }
}

/// Iterator over NDP options. An option of length 0 (RFC 4861 §4.6: "nodes
/// MUST silently discard an ND packet that contains an option with length
/// zero"), one running past the buffer, or a known option too short for its
/// contents yields `Err` once and ends the iteration. Bounded by the buffer
/// since every option advances at least 8 bytes.
#[derive(Debug, Clone)]
pub struct NdpOptions<'a> {
    rest: &'a [u8],
}

impl<'a> NdpOptions<'a> {
    pub fn new(options: &'a [u8]) -> NdpOptions<'a> {
        NdpOptions { rest: options }
    }
}

impl<'a> Iterator for NdpOptions<'a> {
    type Item = Result<NdpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = self.parse_one();
        if r.is_err() {
            self.rest = &[];
        }
        Some(r)
    }
}

impl<'a> NdpOptions<'a> {
    fn parse_one(&mut self) -> Result<NdpOption<'a>> {
        let (kind, units) = match self.rest {
            [k, u, ..] => (*k, usize::from(*u)),
            _ => return Err(Error::Truncated),
        };
        if units == 0 {
            return Err(Error::Malformed);
        }
        let len = units * 8;
        let opt = self.rest.get(..len).ok_or(Error::Truncated)?;
        self.rest = &self.rest[len..];
        let u32_at = |o: usize| u32::from_be_bytes([opt[o], opt[o + 1], opt[o + 2], opt[o + 3]]);
        Ok(match kind {
            ndp_option::SOURCE_LL_ADDR => {
                NdpOption::SourceLinkLayerAddr(MacAddr::from_bytes(&opt[2..])?)
            }
            ndp_option::TARGET_LL_ADDR => {
                NdpOption::TargetLinkLayerAddr(MacAddr::from_bytes(&opt[2..])?)
            }
            ndp_option::MTU => NdpOption::Mtu(u32_at(4)),
            ndp_option::PREFIX_INFO => {
                // RFC 4861 §4.6.2: length 4.
                if units != 4 {
                    return Err(Error::Malformed);
                }
                let mut p = [0u8; 16];
                p.copy_from_slice(&opt[16..32]);
                NdpOption::PrefixInfo {
                    prefix_len: opt[2],
                    flags: opt[3],
                    valid_lifetime: u32_at(4),
                    preferred_lifetime: u32_at(8),
                    prefix: Ipv6Addr::from(p),
                }
            }
            _ => NdpOption::Other {
                kind,
                data: &opt[2..],
            },
        })
    }
}
