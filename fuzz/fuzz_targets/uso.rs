//! offload::uso on arbitrary bytes: `unpack` (a received UDP GSO datagram
//! claimed to be packed VXLAN, with arbitrary segment size and UDP offset)
//! and `pack` (an arbitrary frame claimed to be an encapsulated TCP
//! super-packet), and `merge_inner` (the frame's slices, less a prefix,
//! claimed to be opened ESP inner packets). Nothing may panic; an unpacked
//! or merged packet must stay within its buffer and keep its headers'
//! lengths consistent with its size.
#![no_main]

use packet::buffer::{Gso, Offload, Pool};
use dataplane::offload::uso::{merge_inner, pack, unpack, PackSpec};
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::new(160));
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 6 {
        return;
    }
    let (meta, frame) = data.split_at(6);
    let gso_size = u16::from_le_bytes([meta[0], meta[1]]);
    let udp = usize::from(meta[2] % 64);
    let inner_l3 = usize::from(meta[3]);
    POOL.with(|pool| {
        let pool = &mut *pool.borrow_mut();
        let Some(mut p) = pool.alloc() else { return };
        if !p.set_data(frame) {
            pool.free(p);
            return;
        }
        let before = p.len();
        p.meta.offload = Offload {
            needs_csum: meta[4] & 1 != 0,
            csum_valid: false,
            csum_start: udp as u16,
            csum_offset: 6,
            gso: Gso::UdpL4,
            gso_size,
            hdr_len: 0,
        };
        if unpack(&mut p, udp).is_ok() {
            assert!(p.len() <= before);
            let o = p.meta.offload;
            assert!(matches!(o.gso, Gso::TcpV4 | Gso::TcpV6));
            assert!(usize::from(o.hdr_len) < p.len());
        }
        p.meta.offload.gso = if meta[5] & 1 == 0 { Gso::TcpV4 } else { Gso::TcpV6 };
        p.meta.offload.gso_size = gso_size;
        let spec = PackSpec { udp_offset: udp, inner_l3_offset: inner_l3, mss: 0 };
        let mut out = Vec::new();
        let _ = pack(&p, &spec, pool, &mut out);
        pool.free_all(&mut out);
        // The slices of the frame, each less `skip` bytes in front, as
        // the inner packets of opened ESP slices.
        let slice = usize::from(gso_size.max(1));
        let skip = usize::from(meta[3] % 32);
        let len = p.len();
        let inner: Vec<_> = (0..len)
            .step_by(slice)
            .map(|a| (a + skip).min(len)..(a + slice).min(len))
            .collect();
        if merge_inner(&mut p, &inner).is_ok() {
            assert!(p.len() <= len);
            let o = p.meta.offload;
            assert!(matches!(o.gso, Gso::TcpV4 | Gso::TcpV6));
            assert!(usize::from(o.hdr_len) < p.len());
        }
        pool.free(p);
    });
});
