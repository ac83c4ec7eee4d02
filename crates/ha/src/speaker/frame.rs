//! The advertisement as an Ethernet frame (RFC 5798 §5.1).

use std::net::IpAddr;

use wire::vrrp::{Family, VrrpRepr};

use super::GroupSpec;

/// Group `g`'s advertisement with `priority`: to the group's multicast MAC
/// from the interface's own, from its primary address, TTL / hop limit
/// 255, traffic class internetwork control as routers send it.
pub fn advert_frame(g: &GroupSpec, priority: u8) -> Option<Vec<u8>> {
    let repr = VrrpRepr {
        vrid: g.vrid,
        priority,
        max_advert_int: g.interval_cs,
        addrs: g.vips.clone(),
    };
    let dst = g.family.group();
    let mut vr = vec![0u8; repr.buffer_len()];
    repr.emit(&mut vr, &g.primary, &dst).ok()?;
    let mut f = Vec::with_capacity(14 + 40 + vr.len());
    match g.family {
        Family::V4 => f.extend_from_slice(&[0x01, 0x00, 0x5e, 0x00, 0x00, 0x12]),
        Family::V6 => f.extend_from_slice(&[0x33, 0x33, 0x00, 0x00, 0x00, 0x12]),
    }
    f.extend_from_slice(&g.mac);
    match (g.primary, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&[0x08, 0x00]);
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[1] = 0xc0; // internetwork control
            h[2..4].copy_from_slice(&u16::try_from(20 + vr.len()).ok()?.to_be_bytes());
            h[8] = wire::vrrp::TTL;
            h[9] = wire::vrrp::PROTOCOL;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let sum = wire::checksum::checksum(&h);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
            f.extend_from_slice(&h);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x86, 0xdd]);
            let mut h = [0u8; 40];
            h[0] = 0x6c; // traffic class 0xc0
            h[4..6].copy_from_slice(&u16::try_from(vr.len()).ok()?.to_be_bytes());
            h[6] = wire::vrrp::PROTOCOL;
            h[7] = wire::vrrp::TTL;
            h[8..24].copy_from_slice(&s.octets());
            h[24..40].copy_from_slice(&d.octets());
            f.extend_from_slice(&h);
        }
        _ => return None,
    }
    f.extend_from_slice(&vr);
    Some(f)
}
