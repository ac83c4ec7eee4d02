//! UDP view, checksum rules (v4 and v6) and repr round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wire::udp::{Packet, UdpRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let v4 = (Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2));
    let v6 = (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2),
    );
    let _ = (
        p.src_port(),
        p.dst_port(),
        p.len(),
        p.is_empty(),
        p.checksum(),
        p.datagram(),
        p.payload(),
        p.verify_checksum_v4(&v4.0, &v4.1),
        p.verify_checksum_v6(&v6.0, &v6.1),
    );
    for (src, dst) in [
        (IpAddr::from(v4.0), IpAddr::from(v4.1)),
        (IpAddr::from(v6.0), IpAddr::from(v6.1)),
    ] {
        // After filling, the checksum verifies and the repr round-trips.
        let mut m = p.datagram().to_vec();
        let mut mp = Packet::new_unchecked(&mut m[..]);
        if mp.fill_checksum(&src, &dst).is_err() {
            continue;
        }
        let mp = Packet::new_checked(&m[..]).unwrap();
        assert!(mp.verify_checksum(&src, &dst));
        let r = UdpRepr::parse(&mp, &src, &dst).expect("filled checksum parses");
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(
            &mut Packet::new_unchecked(&mut buf[..]),
            &src,
            &dst,
            mp.payload(),
        )
        .unwrap();
        assert_eq!(buf, m);
        let _ = UdpRepr::parse(&p, &src, &dst);
    }
});
