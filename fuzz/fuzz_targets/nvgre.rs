//! NVGRE view, repr and emit round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::gre::{Gre, GreRepr};
use wire::nvgre::{Nvgre, NvgreRepr, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Nvgre::new_checked(data) else {
        return;
    };
    let _ = (
        p.protocol_type(),
        p.key(),
        p.vsid(),
        p.flow_id(),
        p.payload(),
    );
    let r = NvgreRepr::parse(&p).expect("checked view parses");
    let _ = r.vsid_is_reserved();
    // Every NVGRE packet is a GRE packet with the same key.
    let g = Gre::new_checked(data).expect("NVGRE is GRE");
    assert_eq!(GreRepr::parse(&g), Ok(r.to_gre()));
    let mut buf = data.to_vec();
    r.emit(&mut Nvgre::new_unchecked(&mut buf[..])).unwrap();
    let q = Nvgre::new_checked(&buf[..]).unwrap();
    assert_eq!(NvgreRepr::parse(&q), Ok(r));
    assert_eq!(&buf[HEADER_LEN..], &data[HEADER_LEN..]);
});
