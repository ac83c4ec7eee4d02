//! The traffic selectors an SA was negotiated for (RFC 7296 §2.9, §3.13.1),
//! checked on every packet the SA carries: inbound after decryption (RFC
//! 4301 §5.2, "the packet must match the SA's selectors"), outbound before
//! encryption (nothing leaves under an SA the peer did not agree to).
//!
//! A packet matches when its source lies in one of the sender's selectors
//! and its destination in one of the receiver's, each with protocol and
//! port: the source port against the sender's selector, the destination
//! port against the receiver's. ICMP carries type and code in the port
//! fields (RFC 4301 §4.4.1.1: type in the high byte). A packet without
//! ports (a non-first fragment, an unparsable transport header) matches
//! only selectors that allow every port (RFC 4301 §7).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One selector: an address range, an IP protocol (0 = any) and a port
/// range, as IKEv2 negotiates them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selector {
    pub start: IpAddr,
    pub end: IpAddr,
    /// IP protocol, 0 = any.
    pub proto: u8,
    pub start_port: u16,
    pub end_port: u16,
}

/// The selectors of one SA: ours (the addresses behind us) and the peer's.
/// An empty side allows nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selectors {
    pub local: Vec<Selector>,
    pub remote: Vec<Selector>,
}

/// The fields of an inner packet the selectors look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fields {
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    /// (source, destination) port, or ICMP (type << 8 | code) twice; `None`
    /// when the packet carries none the selectors could check.
    ports: Option<(u16, u16)>,
}

const ICMP: u8 = 1;
const ICMPV6: u8 = 58;

impl Selector {
    /// The whole address family, every protocol and port.
    pub fn any(v6: bool) -> Self {
        let (start, end) = if v6 {
            (
                Ipv6Addr::UNSPECIFIED.into(),
                Ipv6Addr::from(u128::MAX).into(),
            )
        } else {
            (Ipv4Addr::UNSPECIFIED.into(), Ipv4Addr::BROADCAST.into())
        };
        Selector {
            start,
            end,
            proto: 0,
            start_port: 0,
            end_port: u16::MAX,
        }
    }

    fn contains(&self, a: IpAddr) -> bool {
        match (self.start, self.end, a) {
            (IpAddr::V4(s), IpAddr::V4(e), IpAddr::V4(a)) => s <= a && a <= e,
            (IpAddr::V6(s), IpAddr::V6(e), IpAddr::V6(a)) => s <= a && a <= e,
            _ => false,
        }
    }

    fn all_ports(&self) -> bool {
        self.start_port == 0 && self.end_port == u16::MAX
    }

    /// Whether `f` matches this selector on `addr` with `port` (the
    /// packet's port on this selector's side).
    fn matches(&self, addr: IpAddr, proto: u8, port: Option<u16>) -> bool {
        if !self.contains(addr) || (self.proto != 0 && self.proto != proto) {
            return false;
        }
        match port {
            _ if self.all_ports() => true,
            Some(p) => self.start_port <= p && p <= self.end_port,
            None => false,
        }
    }
}

impl Selectors {
    /// Whether a decrypted packet (`inner`, starting at its IP header) may
    /// have come through this SA: sent by the peer (source in `remote`) to
    /// us (destination in `local`).
    pub fn allows_inbound(&self, inner: &[u8]) -> bool {
        fields(inner).is_some_and(|f| {
            let (sp, dp) = split(f.ports);
            self.remote.iter().any(|s| s.matches(f.src, f.proto, sp))
                && self.local.iter().any(|s| s.matches(f.dst, f.proto, dp))
        })
    }

    /// Whether a packet about to be encrypted (`inner`) may leave through
    /// this SA: source in `local`, destination in `remote`.
    pub fn allows_outbound(&self, inner: &[u8]) -> bool {
        fields(inner).is_some_and(|f| {
            let (sp, dp) = split(f.ports);
            self.local.iter().any(|s| s.matches(f.src, f.proto, sp))
                && self.remote.iter().any(|s| s.matches(f.dst, f.proto, dp))
        })
    }
}

fn split(p: Option<(u16, u16)>) -> (Option<u16>, Option<u16>) {
    (p.map(|p| p.0), p.map(|p| p.1))
}

fn be16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(at)?, *d.get(at + 1)?]))
}

/// The ports (or ICMP type/code) of transport header `l4` of protocol
/// `proto`; `None` if it has none or is truncated.
fn ports(proto: u8, l4: &[u8]) -> Option<(u16, u16)> {
    match proto {
        // TCP, UDP, SCTP, UDP-Lite: source and destination port first.
        6 | 17 | 132 | 136 => Some((be16(l4, 0)?, be16(l4, 2)?)),
        ICMP | ICMPV6 => {
            let tc = be16(l4, 0)?;
            Some((tc, tc))
        }
        _ => None,
    }
}

/// Source, destination, protocol and ports of an IPv4/IPv6 packet; `None`
/// if it is neither or its header is truncated.
fn fields(d: &[u8]) -> Option<Fields> {
    match d.first()? >> 4 {
        4 => {
            let h = d.get(..20)?;
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]).into();
            let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]).into();
            let proto = h[9];
            let frag_off = be16(h, 6)? & 0x1fff;
            let ports = if frag_off != 0 || ihl < 20 {
                None
            } else {
                d.get(ihl..).and_then(|l4| ports(proto, l4))
            };
            Some(Fields {
                src,
                dst,
                proto,
                ports,
            })
        }
        6 => {
            let h = d.get(..40)?;
            let a = |at: usize| -> IpAddr {
                let mut o = [0u8; 16];
                o.copy_from_slice(&h[at..at + 16]);
                Ipv6Addr::from(o).into()
            };
            let (src, dst) = (a(8), a(24));
            // Walk the extension headers (at most 8, as ip-local does) to
            // the transport protocol; a non-first fragment has no ports.
            let (mut nh, mut off, mut first_frag) = (h[6], 40usize, true);
            for _ in 0..8 {
                match nh {
                    0 | 43 | 60 => {
                        let len = (usize::from(*d.get(off + 1)?) + 1) * 8;
                        nh = *d.get(off)?;
                        off += len;
                    }
                    44 => {
                        first_frag = be16(d, off + 2)? & 0xfff8 == 0;
                        nh = *d.get(off)?;
                        off += 8;
                    }
                    _ => break,
                }
            }
            let ports = if first_frag {
                d.get(off..).and_then(|l4| ports(nh, l4))
            } else {
                None
            };
            Some(Fields {
                src,
                dst,
                proto: nh,
                ports,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sel(start: &str, end: &str, proto: u8, ports: (u16, u16)) -> Selector {
        Selector {
            start: start.parse().unwrap(),
            end: end.parse().unwrap(),
            proto,
            start_port: ports.0,
            end_port: ports.1,
        }
    }

    fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0, 8, 0, 0]);
        p
    }

    /// The peer negotiated 10.2.0.0/24 → 10.1.0.5, UDP to port 53 only.
    fn dns() -> Selectors {
        Selectors {
            local: vec![sel("10.1.0.5", "10.1.0.5", 17, (53, 53))],
            remote: vec![sel("10.2.0.0", "10.2.0.255", 17, (0, 65535))],
        }
    }

    #[test]
    fn source_destination_protocol_and_ports() {
        let s = dns();
        assert!(s.allows_inbound(&udp4([10, 2, 0, 9], [10, 1, 0, 5], 4000, 53)));
        // Destination port, destination address, source, protocol.
        assert!(!s.allows_inbound(&udp4([10, 2, 0, 9], [10, 1, 0, 5], 4000, 54)));
        assert!(!s.allows_inbound(&udp4([10, 2, 0, 9], [10, 1, 0, 6], 4000, 53)));
        assert!(!s.allows_inbound(&udp4([10, 3, 0, 9], [10, 1, 0, 5], 4000, 53)));
        let mut tcp = udp4([10, 2, 0, 9], [10, 1, 0, 5], 4000, 53);
        tcp[9] = 6;
        assert!(!s.allows_inbound(&tcp));
        // The reply leaves; the same packet the other way round does not.
        assert!(s.allows_outbound(&udp4([10, 1, 0, 5], [10, 2, 0, 9], 53, 4000)));
        assert!(!s.allows_outbound(&udp4([10, 1, 0, 5], [10, 2, 0, 9], 54, 4000)));
        assert!(!s.allows_outbound(&udp4([10, 2, 0, 9], [10, 1, 0, 5], 4000, 53)));
    }

    #[test]
    fn fragments_without_ports_match_only_any_port() {
        let mut f = udp4([10, 2, 0, 9], [10, 1, 0, 5], 4000, 53);
        f[6] = 0x00;
        f[7] = 0x10; // offset 16 × 8
        assert!(!dns().allows_inbound(&f));
        let any = Selectors {
            local: vec![Selector::any(false)],
            remote: vec![Selector::any(false)],
        };
        assert!(any.allows_inbound(&f));
        assert!(!any.allows_inbound(&[0x45, 0, 0]), "truncated");
        assert!(!any.allows_inbound(&[]), "empty");
    }

    proptest! {
        /// Never panics, and "any" selectors of the packet's family allow
        /// every parsable packet both ways.
        #[test]
        fn arbitrary_packets(mut d in proptest::collection::vec(any::<u8>(), 0..80), v6 in any::<bool>()) {
            if let Some(b) = d.first_mut() {
                *b = (*b & 0x0f) | if v6 { 0x60 } else { 0x40 };
            }
            let any = Selectors { local: vec![Selector::any(v6)], remote: vec![Selector::any(v6)] };
            let parsable = fields(&d).is_some();
            prop_assert_eq!(any.allows_inbound(&d), parsable);
            prop_assert_eq!(any.allows_outbound(&d), parsable);
            let _ = dns().allows_inbound(&d);
        }
    }
}
