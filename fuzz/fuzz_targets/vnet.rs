//! virtio_net_hdr view, repr round trip and frame-offset checks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::vnet::{Header, VnetRepr, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(h) = Header::new_checked(data) else {
        return;
    };
    let _ = (
        h.flags(),
        h.gso_type(),
        h.hdr_len(),
        h.gso_size(),
        h.csum_start(),
        h.csum_offset(),
        h.num_buffers(),
    );
    let Ok(r) = VnetRepr::parse(&h) else {
        return;
    };
    let frame_len = data.len() - HEADER_LEN;
    if r.check_frame(frame_len).is_ok() {
        if r.needs_csum {
            assert!(usize::from(r.csum_start) + usize::from(r.csum_offset) + 2 <= frame_len);
        }
        assert!(usize::from(r.hdr_len) <= frame_len);
    }
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut Header::new_unchecked(&mut buf[..]));
    let q = Header::new_checked(&buf[..]).unwrap();
    assert_eq!(VnetRepr::parse(&q), Ok(r));
});
