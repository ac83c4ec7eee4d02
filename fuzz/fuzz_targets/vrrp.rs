//! VRRPv3 view (both families), checksum and repr round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wire::vrrp::{Family, Packet, VrrpRepr};

fuzz_target!(|data: &[u8]| {
    let v4 = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let v6 = IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1));
    for (family, src) in [(Family::V4, v4), (Family::V6, v6)] {
        let Ok(p) = Packet::new_checked(data, family) else {
            continue;
        };
        let dst = family.group();
        let _ = (
            p.version(),
            p.msg_type(),
            p.vrid(),
            p.priority(),
            p.max_advert_int(),
            p.checksum(),
            p.message(),
            p.addrs().count(),
            p.verify_checksum(&src, &dst),
            p.verify_checksum(&v4, &v6),
        );
        assert_eq!(p.addrs().count(), usize::from(p.count()));
        // A filled checksum verifies; a parsed repr emits the same message
        // (reserved bits cleared).
        let mut m = p.message().to_vec();
        let mut mp = Packet::new_unchecked(&mut m[..], family);
        mp.fill_checksum(&src, &dst).unwrap();
        let mp = Packet::new_checked(&m[..], family).unwrap();
        assert!(mp.verify_checksum(&src, &dst));
        if let Ok(r) = VrrpRepr::parse(&mp, &src, &dst) {
            let mut out = vec![0u8; r.buffer_len()];
            if r.emit(&mut out, &src, &dst).is_ok() {
                let o = Packet::new_checked(&out[..], family).unwrap();
                assert_eq!(VrrpRepr::parse(&o, &src, &dst), Ok(r));
            }
        }
        let _ = VrrpRepr::parse(&p, &src, &dst);
    }
});
