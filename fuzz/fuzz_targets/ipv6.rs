//! IPv6 view, extension-header walk, Fragment header and repr round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::ipv6::{self, FragmentHeader, FragmentRepr, Ipv6Repr, Packet, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.version(),
        p.traffic_class(),
        p.flow_label(),
        p.payload_len(),
        p.next_header(),
        p.hop_limit(),
        p.src_addr(),
        p.dst_addr(),
        p.payload(),
    );
    let pkt = p.packet();
    if let Ok(c) = p.header_chain() {
        assert!(c.offset <= pkt.len());
        assert_eq!(ipv6::upper_layer(pkt), Ok((c.protocol, c.offset)));
        if let Some(fo) = c.fragment {
            let f = FragmentHeader::new_checked(&pkt[fo..]).expect("walker saw a whole header");
            let fr = FragmentRepr::parse(&f).unwrap();
            let mut b = [0u8; ipv6::FRAG_HEADER_LEN];
            fr.emit(&mut FragmentHeader::new_unchecked(&mut b[..]));
            assert_eq!(
                FragmentRepr::parse(&FragmentHeader::new_checked(&b[..]).unwrap()),
                Ok(fr)
            );
        }
    }
    let Ok(r) = Ipv6Repr::parse(&p) else {
        return;
    };
    let mut buf = vec![0u8; HEADER_LEN + r.payload_len];
    r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
    buf[HEADER_LEN..].copy_from_slice(p.payload());
    let q = Packet::new_checked(&buf[..]).expect("emitted header checks");
    assert_eq!(Ipv6Repr::parse(&q), Ok(r));
});
