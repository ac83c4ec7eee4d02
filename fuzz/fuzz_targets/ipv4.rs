//! IPv4 view, options iterator and repr round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::ipv4::{Ipv4Repr, Packet, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.version(),
        p.tos(),
        p.dscp(),
        p.ecn(),
        p.total_len(),
        p.ident(),
        p.dont_frag(),
        p.more_frags(),
        p.frag_offset(),
        p.is_fragment(),
        p.ttl(),
        p.protocol(),
        p.checksum(),
        p.src_addr(),
        p.dst_addr(),
        p.options(),
        p.verify_checksum(),
        p.payload(),
    );
    for o in p.options_iter().take(64).map_while(Result::ok) {
        let _ = (o.kind, o.data, o.copied());
    }
    let Ok(r) = Ipv4Repr::parse(&p) else {
        return;
    };
    assert_eq!(r.payload_len, p.payload().len());
    // Options are not emitted: the round trip goes through a fresh buffer.
    let mut buf = vec![0u8; HEADER_LEN + r.payload_len];
    r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
    buf[HEADER_LEN..].copy_from_slice(p.payload());
    let q = Packet::new_checked(&buf[..]).expect("emitted header checks");
    assert_eq!(Ipv4Repr::parse(&q), Ok(r));
    // TTL decrement keeps the checksum valid.
    let mut m = data.to_vec();
    let mut mp = Packet::new_unchecked(&mut m[..]);
    if mp.decrement_ttl() {
        assert!(mp.verify_checksum());
    }
});
