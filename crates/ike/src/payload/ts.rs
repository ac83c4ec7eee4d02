//! Traffic selector payloads TSi/TSr (RFC 7296 §3.13).

use crate::error::{Error, Result};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// TS_IPV4_ADDR_RANGE.
pub const TS_IPV4: u8 = 7;
/// TS_IPV6_ADDR_RANGE.
pub const TS_IPV6: u8 = 8;

const MAX_TS: usize = 32;

/// One traffic selector: an address range, a protocol and a port range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrafficSelector {
    /// IP protocol, 0 = any.
    pub ip_proto: u8,
    /// First port.
    pub start_port: u16,
    /// Last port.
    pub end_port: u16,
    /// First address.
    pub start: IpAddr,
    /// Last address (same family as `start`).
    pub end: IpAddr,
}

impl TrafficSelector {
    /// Selector covering a whole prefix, any protocol and port.
    pub fn from_prefix(addr: IpAddr, len: u8) -> Self {
        let (start, end) = match addr {
            IpAddr::V4(a) => {
                let a = u32::from(a);
                let mask = if len == 0 {
                    0
                } else {
                    u32::MAX << (32 - u32::from(len.min(32)))
                };
                (
                    IpAddr::V4(Ipv4Addr::from(a & mask)),
                    IpAddr::V4(Ipv4Addr::from(a | !mask)),
                )
            }
            IpAddr::V6(a) => {
                let a = u128::from(a);
                let mask = if len == 0 {
                    0
                } else {
                    u128::MAX << (128 - u32::from(len.min(128)))
                };
                (
                    IpAddr::V6(Ipv6Addr::from(a & mask)),
                    IpAddr::V6(Ipv6Addr::from(a | !mask)),
                )
            }
        };
        TrafficSelector {
            ip_proto: 0,
            start_port: 0,
            end_port: 65535,
            start,
            end,
        }
    }

    /// Intersection of two selectors (RFC 7296 §2.9 narrowing), if non-empty.
    pub fn intersect(&self, o: &TrafficSelector) -> Option<TrafficSelector> {
        let ip_proto = match (self.ip_proto, o.ip_proto) {
            (0, p) | (p, 0) => p,
            (a, b) if a == b => a,
            _ => return None,
        };
        let sp = self.start_port.max(o.start_port);
        let ep = self.end_port.min(o.end_port);
        if sp > ep {
            return None;
        }
        let (start, end) = match (self.start, self.end, o.start, o.end) {
            (IpAddr::V4(a), IpAddr::V4(b), IpAddr::V4(c), IpAddr::V4(d)) => {
                let s = u32::from(a).max(u32::from(c));
                let e = u32::from(b).min(u32::from(d));
                if s > e {
                    return None;
                }
                (IpAddr::V4(s.into()), IpAddr::V4(e.into()))
            }
            (IpAddr::V6(a), IpAddr::V6(b), IpAddr::V6(c), IpAddr::V6(d)) => {
                let s = u128::from(a).max(u128::from(c));
                let e = u128::from(b).min(u128::from(d));
                if s > e {
                    return None;
                }
                (IpAddr::V6(s.into()), IpAddr::V6(e.into()))
            }
            _ => return None,
        };
        Some(TrafficSelector {
            ip_proto,
            start_port: sp,
            end_port: ep,
            start,
            end,
        })
    }
}

/// Parse a TS payload body.
pub fn parse(body: &[u8]) -> Result<Vec<TrafficSelector>> {
    if body.len() < 4 {
        return Err(Error::Truncated("TS payload"));
    }
    let n = usize::from(body[0]);
    if n > MAX_TS {
        return Err(Error::TooMany("traffic selectors"));
    }
    let mut rest = &body[4..];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        if rest.len() < 8 {
            return Err(Error::Truncated("traffic selector"));
        }
        let ty = rest[0];
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        let alen = match ty {
            TS_IPV4 => 4,
            TS_IPV6 => 16,
            _ => return Err(Error::Unsupported("traffic selector type")),
        };
        if len != 8 + 2 * alen || rest.len() < len {
            return Err(Error::BadLength("traffic selector"));
        }
        let a = &rest[8..8 + alen];
        let b = &rest[8 + alen..8 + 2 * alen];
        let (start, end) = if alen == 4 {
            let mut x = [0u8; 4];
            let mut y = [0u8; 4];
            x.copy_from_slice(a);
            y.copy_from_slice(b);
            (IpAddr::from(x), IpAddr::from(y))
        } else {
            let mut x = [0u8; 16];
            let mut y = [0u8; 16];
            x.copy_from_slice(a);
            y.copy_from_slice(b);
            (IpAddr::from(x), IpAddr::from(y))
        };
        out.push(TrafficSelector {
            ip_proto: rest[1],
            start_port: u16::from_be_bytes([rest[4], rest[5]]),
            end_port: u16::from_be_bytes([rest[6], rest[7]]),
            start,
            end,
        });
        rest = &rest[len..];
    }
    if !rest.is_empty() {
        return Err(Error::BadLength("TS payload"));
    }
    Ok(out)
}

/// Append a TS payload body.
pub fn emit(ts: &[TrafficSelector], out: &mut Vec<u8>) {
    out.extend_from_slice(&[ts.len() as u8, 0, 0, 0]);
    for t in ts {
        let (ty, len) = match t.start {
            IpAddr::V4(_) => (TS_IPV4, 16u16),
            IpAddr::V6(_) => (TS_IPV6, 40u16),
        };
        out.push(ty);
        out.push(t.ip_proto);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&t.start_port.to_be_bytes());
        out.extend_from_slice(&t.end_port.to_be_bytes());
        for a in [t.start, t.end] {
            match a {
                IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_and_narrowing() {
        let a = TrafficSelector::from_prefix("10.1.0.0".parse().unwrap(), 16);
        assert_eq!(a.end, "10.1.255.255".parse::<IpAddr>().unwrap());
        let b = TrafficSelector::from_prefix("10.1.2.0".parse().unwrap(), 24);
        assert_eq!(a.intersect(&b), Some(b));
        let c = TrafficSelector::from_prefix("10.2.0.0".parse().unwrap(), 16);
        assert_eq!(a.intersect(&c), None);
        let v6 = TrafficSelector::from_prefix("fd00::".parse().unwrap(), 64);
        assert_eq!(a.intersect(&v6), None);
        let all = TrafficSelector::from_prefix("0.0.0.0".parse().unwrap(), 0);
        assert_eq!(all.end, "255.255.255.255".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn round_trip() {
        let ts = vec![
            TrafficSelector::from_prefix("192.168.0.0".parse().unwrap(), 24),
            TrafficSelector::from_prefix("fd00::".parse().unwrap(), 48),
        ];
        let mut b = Vec::new();
        emit(&ts, &mut b);
        assert_eq!(b.len(), 4 + 16 + 40);
        assert_eq!(parse(&b).unwrap(), ts);
        for n in 0..b.len() {
            assert!(parse(&b[..n]).is_err());
        }
    }
}
