//! Ethernet II / 802.1Q / QinQ view and repr round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::ethernet::{EthernetRepr, Frame};

fuzz_target!(|data: &[u8]| {
    let Ok(f) = Frame::new_checked(data) else {
        return;
    };
    let _ = (
        f.dst_addr(),
        f.src_addr(),
        f.outer_ethertype(),
        f.vlan_tags(),
        f.ethertype(),
        f.vlan_id(),
        f.inner_vlan_id(),
        f.vlan_pcp(),
    );
    assert_eq!(f.payload().len(), data.len() - f.header_len());
    let Ok(r) = EthernetRepr::parse(&f) else {
        return;
    };
    assert_eq!(r.header_len(), f.header_len());
    let mut buf = data.to_vec();
    r.emit(&mut Frame::new_unchecked(&mut buf[..]));
    let g = Frame::new_checked(&buf[..]).expect("emitted frame checks");
    assert_eq!(EthernetRepr::parse(&g), Ok(r));
    assert_eq!(g.payload(), f.payload());
});
