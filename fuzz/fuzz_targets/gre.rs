//! GRE view, repr and emit round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::gre::{Gre, GreRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Gre::new_checked(data) else {
        return;
    };
    let _ = (
        p.header_len(),
        p.checksum_present(),
        p.key_present(),
        p.seq_present(),
        p.version(),
        p.protocol(),
        p.checksum(),
        p.reserved1(),
        p.key(),
        p.sequence_number(),
        p.verify_checksum(),
    );
    assert_eq!(p.payload().len(), data.len() - p.header_len());
    let Ok(r) = GreRepr::parse(&p) else {
        return;
    };
    assert_eq!(r.header_len(), p.header_len());
    // emit(parse(x)) parses back to the same repr with the same payload.
    let mut buf = data.to_vec();
    r.emit(&mut Gre::new_unchecked(&mut buf[..])).unwrap();
    let q = Gre::new_checked(&buf[..]).expect("emitted header must check");
    assert_eq!(GreRepr::parse(&q), Ok(r));
    assert_eq!(q.payload(), p.payload());
    // The headroom form writes the same bytes.
    let mut front = vec![0u8; data.len()];
    front[r.header_len()..].copy_from_slice(p.payload());
    assert_eq!(r.emit_before(&mut front, r.header_len()), Ok(0));
    assert_eq!(front, buf);
});
