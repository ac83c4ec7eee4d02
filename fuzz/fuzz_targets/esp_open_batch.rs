//! The batched ESP open (`InboundSa::decrypt_batch` and `open_slices`) on
//! both engines at once: a vector of up to 80 packets cut from the input,
//! some of them arbitrary bytes, some sealed with the matching outbound SA
//! (one vector, `encrypt_batch`) and then possibly damaged, with repeated
//! and reordered sequence numbers. The multi-buffer engine and aws-lc must
//! give the same verdict for every packet and the same inner bytes for
//! every accepted one; nothing may panic and every inner packet must lie
//! inside its slice.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::{Packet, Pool};
use std::cell::RefCell;
use vecgate_ipsec::{Algorithm, Decrypted, Engine, EspError, InboundSa, OutboundSa, SaConfig};

const MAX: usize = 80;

mod esp_sa;

use esp_sa::{assert_inside, load, sa_config};

fn cfg(alg: Algorithm, esn: bool) -> SaConfig {
    sa_config(alg, 0x2002, esn, 3)
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::new(3 * MAX));
}

/// A takes bytes off the front of the input.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

/// An inner IPv4 or IPv6 packet of `len` bytes (header fields made valid
/// enough for the trailer check), the rest from `body`.
fn inner(v6: bool, len: usize, body: &[u8]) -> Vec<u8> {
    let min = if v6 { 40 } else { 20 };
    let mut p = vec![0u8; len.max(min)];
    for (d, s) in p.iter_mut().zip(body.iter().cycle()) {
        *d = *s;
    }
    p[0] = if v6 { 0x60 } else { 0x45 };
    p
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let mode = inp.byte();
    let alg = Algorithm::ALL[usize::from(mode) % Algorithm::ALL.len()];
    let esn = mode & 0x08 != 0;
    let best = Engine::best(alg);
    let out = OutboundSa::new(cfg(alg, esn)).expect("outbound sa");
    let ins = [
        InboundSa::with_engine(cfg(alg, esn), best).expect("inbound sa"),
        InboundSa::with_engine(cfg(alg, esn), Engine::AwsLc).expect("inbound sa"),
    ];
    if esn {
        // Second epoch: the high bits are covered by the ICV.
        let _ = out.reserve(1 << 32);
        for i in &ins {
            i.set_replay_top(1 << 32);
        }
    }
    POOL.with(|pool| {
        let pool = &mut *pool.borrow_mut();
        // The vector: raw packets and sealed ones, in input order.
        let mut sealed: Vec<Packet> = Vec::new();
        let mut kinds = Vec::new();
        let mut raws = Vec::new();
        while kinds.len() < MAX && !inp.0.is_empty() {
            let k = inp.byte();
            let len = usize::from(inp.byte()) * 8 + usize::from(k >> 3);
            if k & 1 == 0 {
                raws.push(inp.take(len).to_vec());
                kinds.push(false);
            } else {
                let body = inp.take(16);
                let Some(p) = load(pool, &inner(k & 2 != 0, len, body)) else {
                    break;
                };
                sealed.push(p);
                kinds.push(true);
            }
        }
        let mut st = vec![Ok(()); sealed.len()];
        if out.encrypt_batch(&mut sealed, &mut st).is_err() {
            pool.free_all(&mut sealed);
            return;
        }
        // Damage some sealed packets: a byte flipped, or cut short.
        let mut esp: Vec<Vec<u8>> = Vec::new();
        let (mut s, mut r) = (sealed.iter().zip(&st), raws.into_iter());
        for &is_sealed in &kinds {
            if is_sealed {
                let Some((p, st)) = s.next() else { break };
                let mut b = p.data().get(20..).unwrap_or(&[]).to_vec();
                if st.is_err() {
                    b.clear();
                }
                let d = inp.byte();
                if d & 0x80 != 0 && !b.is_empty() {
                    let at = usize::from(inp.byte()) * 7 % b.len();
                    b[at] ^= 1 << (d & 7);
                } else if d & 0x40 != 0 {
                    b.truncate(usize::from(inp.byte()) * 4);
                } else if d & 0x20 != 0 {
                    // The same packet again: a replay inside the vector.
                    esp.push(b.clone());
                }
                esp.push(b);
            } else if let Some(raw) = r.next() {
                esp.push(raw);
            }
        }
        pool.free_all(&mut sealed);
        esp.truncate(MAX);

        // decrypt_batch on both engines: same verdicts, same inner bytes.
        let mut results: Vec<(Vec<Result<Decrypted, EspError>>, Vec<Vec<u8>>)> = Vec::new();
        for inb in &ins {
            let mut pkts: Vec<Packet> = esp.iter().filter_map(|b| load(pool, b)).collect();
            if pkts.len() != esp.len() {
                pool.free_all(&mut pkts);
                return;
            }
            let mut res = vec![Err(EspError::Crypto); pkts.len()];
            let refused = inb.decrypt_batch(&mut pkts, &mut res);
            assert!(refused.is_ok());
            let inners = pkts
                .iter()
                .zip(&res)
                .map(|(p, r)| {
                    if r.is_ok() {
                        p.data().to_vec()
                    } else {
                        Vec::new()
                    }
                })
                .collect();
            pool.free_all(&mut pkts);
            results.push((res, inners));
        }
        assert_eq!(results[0], results[1], "{alg} esn {esn}: engines disagree");

        // open_slices of the same packets laid end to end, on fresh SAs.
        let mut buf = Vec::new();
        let mut ranges = Vec::new();
        for b in &esp {
            ranges.push(buf.len()..buf.len() + b.len());
            buf.extend_from_slice(b);
        }
        let mut verdicts = Vec::new();
        for e in [best, Engine::AwsLc] {
            let inb = InboundSa::with_engine(cfg(alg, esn), e).expect("inbound sa");
            if esn {
                inb.set_replay_top(1 << 32);
            }
            let mut b = buf.clone();
            let mut res = vec![Err(EspError::Crypto); ranges.len()];
            let _ = inb.open_slices(&mut b, &ranges, &mut res);
            assert_inside(&inb, &res, &ranges);
            verdicts.push(res);
        }
        assert_eq!(
            verdicts[0], verdicts[1],
            "{alg} esn {esn}: engines disagree on slices"
        );
        assert_eq!(
            verdicts[0], results[0].0,
            "{alg} esn {esn}: slices and packets disagree"
        );
    });
});
