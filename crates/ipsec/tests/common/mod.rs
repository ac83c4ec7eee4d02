//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vecgate_ipsec::{
    Algorithm, InboundSa, Lifetime, OutboundSa, SaConfig, TunnelEndpoints, UdpEncap,
};
use zeroize::Zeroizing;

pub const V4_LOCAL: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
pub const V4_REMOTE: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
pub const V6_LOCAL: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const V6_REMOTE: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 2);

/// A deterministic key for `alg` that differs per `seed`.
pub fn key(alg: Algorithm, seed: u8) -> Vec<u8> {
    (0..alg.key_len())
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

pub fn config(alg: Algorithm, spi: u32, outer_v6: bool, encap: bool, esn: bool) -> SaConfig {
    let tunnel = if outer_v6 {
        TunnelEndpoints {
            local: IpAddr::V6(V6_LOCAL),
            remote: IpAddr::V6(V6_REMOTE),
        }
    } else {
        TunnelEndpoints {
            local: IpAddr::V4(V4_LOCAL),
            remote: IpAddr::V4(V4_REMOTE),
        }
    };
    SaConfig {
        spi,
        algorithm: alg,
        key: Zeroizing::new(key(alg, spi as u8)),
        esn,
        replay_window: 128,
        lifetime: Lifetime::default(),
        tunnel,
        encap: encap.then_some(UdpEncap {
            sport: 4500,
            dport: 4500,
        }),
        df: true,
    }
}

pub fn pair(cfg: impl Fn() -> SaConfig) -> (OutboundSa, InboundSa) {
    (
        OutboundSa::new(cfg()).unwrap(),
        InboundSa::new(cfg()).unwrap(),
    )
}

fn csum(b: &[u8]) -> u16 {
    let mut s = 0u32;
    for c in b.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An IPv4 ICMP echo request 10.1.0.1 -> 10.2.0.1 with `payload_len` bytes
/// of payload (pattern), valid checksums.
pub fn inner_v4(payload_len: usize, ident: u16) -> Vec<u8> {
    let total = 20 + 8 + payload_len;
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[4..6].copy_from_slice(&ident.to_be_bytes());
    p[8] = 63;
    p[9] = 1;
    p[12..16].copy_from_slice(&[10, 1, 0, 1]);
    p[16..20].copy_from_slice(&[10, 2, 0, 1]);
    let c = csum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20] = 8;
    p[24..26].copy_from_slice(&ident.to_be_bytes());
    p[26..28].copy_from_slice(&1u16.to_be_bytes());
    for (i, b) in p[28..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_add(0x30);
    }
    let c = csum(&p[20..]);
    p[22..24].copy_from_slice(&c.to_be_bytes());
    p
}

/// An IPv6 UDP datagram fd00:1::1 -> fd00:2::1 port 7000 -> 9 with
/// `payload_len` bytes, valid checksum.
pub fn inner_v6(payload_len: usize) -> Vec<u8> {
    let ulen = 8 + payload_len;
    let mut p = vec![0u8; 40 + ulen];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(ulen as u16).to_be_bytes());
    p[6] = 17;
    p[7] = 64;
    let src: Ipv6Addr = "fd00:1::1".parse().unwrap();
    let dst: Ipv6Addr = "fd00:2::1".parse().unwrap();
    p[8..24].copy_from_slice(&src.octets());
    p[24..40].copy_from_slice(&dst.octets());
    p[40..42].copy_from_slice(&7000u16.to_be_bytes());
    p[42..44].copy_from_slice(&9u16.to_be_bytes());
    p[44..46].copy_from_slice(&(ulen as u16).to_be_bytes());
    for (i, b) in p[48..].iter_mut().enumerate() {
        *b = (i as u8) ^ 0x5a;
    }
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&(ulen as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 17]);
    pseudo.extend_from_slice(&p[40..]);
    let c = csum(&pseudo);
    p[46..48].copy_from_slice(&c.to_be_bytes());
    p
}

/// Checks the outer header(s) produced for `cfg` and returns the offset of
/// the ESP header.
pub fn check_outer(frame: &[u8], outer_v6: bool, encap: bool) -> usize {
    let (ip_len, proto) = if outer_v6 {
        assert_eq!(frame[0] >> 4, 6);
        let plen = u16::from_be_bytes([frame[4], frame[5]]) as usize;
        assert_eq!(plen + 40, frame.len());
        assert_eq!(&frame[8..24], &V6_LOCAL.octets());
        assert_eq!(&frame[24..40], &V6_REMOTE.octets());
        (40, frame[6])
    } else {
        assert_eq!(frame[0], 0x45);
        let tl = u16::from_be_bytes([frame[2], frame[3]]) as usize;
        assert_eq!(tl, frame.len());
        assert_eq!(csum(&frame[..20]), 0, "outer IPv4 checksum");
        assert_eq!(frame[6] & 0x40, 0x40, "DF");
        assert_eq!(frame[8], 64);
        assert_eq!(&frame[12..16], &V4_LOCAL.octets());
        assert_eq!(&frame[16..20], &V4_REMOTE.octets());
        (20, frame[9])
    };
    if !encap {
        assert_eq!(proto, 50);
        return ip_len;
    }
    assert_eq!(proto, 17);
    let u = &frame[ip_len..];
    assert_eq!(u16::from_be_bytes([u[0], u[1]]), 4500);
    assert_eq!(u16::from_be_bytes([u[2], u[3]]), 4500);
    assert_eq!(u16::from_be_bytes([u[4], u[5]]) as usize, u.len());
    let c = u16::from_be_bytes([u[6], u[7]]);
    if outer_v6 {
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&frame[8..40]);
        pseudo.extend_from_slice(&(u.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 17]);
        pseudo.extend_from_slice(u);
        assert_ne!(c, 0);
        assert_eq!(csum(&pseudo), 0, "outer UDP/IPv6 checksum");
    } else {
        assert_eq!(c, 0, "RFC 3948 zero UDP checksum");
    }
    assert_eq!(
        wire::esp::UdpEncap::classify(&u[8..]),
        wire::esp::UdpEncap::Esp
    );
    ip_len + 8
}
