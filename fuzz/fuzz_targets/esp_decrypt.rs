//! The ESP input path: arbitrary bytes (as they would reach esp-decrypt after
//! the outer IP/UDP header) through `InboundSa::decrypt` for every
//! algorithm, with anti-replay and ESN on. Decryption must fail cleanly on
//! anything not sealed with the key; half of the inputs are first sealed
//! with the matching outbound SA and then mutated, so the fuzzer also
//! reaches the replay window, padding and next-header checks. Mode bit 7:
//! the bytes are instead a UDP GSO datagram's ESP slices (slice size from
//! the mode byte), opened in place with `InboundSa::open_slices`; every
//! inner packet it reports must lie inside its slice.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::Pool;
use std::cell::RefCell;
use vecgate_ipsec::{Algorithm, InboundSa, OutboundSa, SaConfig};

mod esp_sa;

use esp_sa::{assert_inside, load, sa_config};

fn cfg(alg: Algorithm) -> SaConfig {
    sa_config(alg, 0x1001, true, 1)
}

struct State {
    pool: Pool,
    sas: Vec<(OutboundSa, InboundSa)>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State {
        pool: Pool::new(2),
        sas: Algorithm::ALL
            .iter()
            .map(|a| {
                (
                    OutboundSa::new(cfg(*a)).expect("outbound sa"),
                    InboundSa::new(cfg(*a)).expect("inbound sa"),
                )
            })
            .collect(),
    });
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    STATE.with(|s| {
        let s = &mut *s.borrow_mut();
        for (out, inb) in &s.sas {
            if mode & 0x80 != 0 {
                let mut buf = rest.to_vec();
                let slice = usize::from(mode & 0x7f) * 16 + 1;
                let ranges: Vec<_> = (0..buf.len())
                    .step_by(slice)
                    .map(|a| a..(a + slice).min(buf.len()))
                    .collect();
                let mut res = vec![Err(vecgate_ipsec::EspError::Crypto); ranges.len()];
                let _ = inb.open_slices(&mut buf, &ranges, &mut res);
                assert_inside(inb, &res, &ranges);
                continue;
            }
            if mode & 1 == 0 {
                if let Some(mut p) = load(&mut s.pool, rest) {
                    let _ = inb.decrypt(&mut p);
                    s.pool.free(p);
                }
                continue;
            }
            // Seal `rest` as an inner packet, strip the outer IPv4 header,
            // flip one byte chosen by the input, decrypt.
            let Some(mut p) = load(&mut s.pool, rest) else {
                continue;
            };
            let Ok(seq) = out.reserve(1) else {
                s.pool.free(p);
                continue;
            };
            if out.encrypt(&mut p, mode & 2 != 0, seq.start).is_ok() && p.pull_front(20) {
                if mode & 4 != 0 && !p.is_empty() {
                    let i = usize::from(mode >> 3) % p.len();
                    p.data_mut()[i] ^= 0x80;
                }
                let _ = inb.decrypt(&mut p);
            }
            s.pool.free(p);
        }
    });
});
