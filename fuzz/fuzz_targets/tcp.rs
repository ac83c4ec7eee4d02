//! TCP view, options iterator, MSS clamping and repr round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wire::tcp::{Packet, TcpRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.src_port(),
        p.dst_port(),
        p.seq_number(),
        p.ack_number(),
        p.header_len(),
        p.flags(),
        (
            p.fin(),
            p.syn(),
            p.rst(),
            p.psh(),
            p.ack(),
            p.urg(),
            p.ece(),
            p.cwr(),
        ),
        p.window_len(),
        p.checksum(),
        p.urgent_at(),
        p.options(),
        p.payload(),
        p.segment_len(),
    );
    let mut consumed = 0;
    for o in p.options_iter() {
        let Ok((_, len)) = o else { break };
        consumed += len;
        assert!(consumed <= p.options().len());
    }
    let src4 = Ipv4Addr::new(192, 0, 2, 1);
    let dst4 = Ipv4Addr::new(192, 0, 2, 2);
    let _ = p.verify_checksum_v4(&src4, &dst4);
    let src6 = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    let dst6 = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
    let _ = p.verify_checksum_v6(&src6, &dst6);
    let (src, dst) = (IpAddr::from(src4), IpAddr::from(dst4));

    // Checksum filled, MSS clamped incrementally: still verifies.
    let mut m = data.to_vec();
    let mut mp = Packet::new_unchecked(&mut m[..]);
    if mp.fill_checksum(&src, &dst).is_err() {
        return;
    }
    let _ = mp.mss_offset();
    if let Ok(Some(old)) = mp.clamp_mss(536, true) {
        assert!(old > 536);
        assert!(mp.verify_checksum(&src, &dst));
    }
    let mp = Packet::new_checked(&m[..]).unwrap();
    let Ok(r) = TcpRepr::parse(&mp, &src, &dst) else {
        return;
    };
    let mut buf = vec![0u8; r.buffer_len()];
    if r.emit(
        &mut Packet::new_unchecked(&mut buf[..]),
        &src,
        &dst,
        mp.payload(),
    )
    .is_err()
    {
        // Options that do not fit 40 bytes once re-encoded.
        assert!(r.header_len() > 60);
        return;
    }
    let q = Packet::new_checked(&buf[..]).expect("emitted segment checks");
    assert_eq!(TcpRepr::parse(&q, &src, &dst), Ok(r));
});
