//! VXLAN view, repr and emit round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::vxlan::{Vxlan, VxlanRepr, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Vxlan::new_checked(data) else {
        return;
    };
    let _ = (p.flags(), p.vni_valid(), p.vni(), p.payload());
    let r = VxlanRepr::parse(&p).expect("checked view parses");
    let mut buf = data.to_vec();
    r.emit(&mut Vxlan::new_unchecked(&mut buf[..])).unwrap();
    let q = Vxlan::new_checked(&buf[..]).unwrap();
    assert_eq!(VxlanRepr::parse(&q), Ok(r));
    // Reserved bits are zero after emit.
    assert_eq!(&buf[..4], &[0x08, 0, 0, 0]);
    assert_eq!(buf[7], 0);
    assert_eq!(&buf[HEADER_LEN..], &data[HEADER_LEN..]);
});
