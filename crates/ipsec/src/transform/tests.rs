//! The multi-buffer engine against aws-lc one packet at a time, byte for
//! byte: random batches of ESP packets of random lengths (1 to 4 000
//! blocks), sequence numbers with and without ESN high bits (crossing
//! 2^32 inside a chunk), more packets than a chunk holds. Sealed bytes and
//! ICVs must be identical, each engine must accept what the other sealed,
//! both must refuse exactly the packets with a flipped byte, and CBC
//! decryption must give back the plaintext.

use proptest::prelude::*;
use wire::esp::HEADER_LEN;

use super::{Transform, Unit};
use crate::engine::Engine;
use crate::{Algorithm, EspError};

const CBC: [Algorithm; 2] = [
    Algorithm::AesCbc128HmacSha1_96,
    Algorithm::AesCbc256HmacSha256_128,
];

fn mb() -> Option<Engine> {
    match Engine::best(Algorithm::AesCbc128HmacSha1_96) {
        Engine::AwsLc => None,
        e => Some(e),
    }
}

fn transform(alg: Algorithm, esn: bool, outbound: bool, engine: Engine) -> Transform {
    let key: Vec<u8> = (0..alg.key_len()).map(|i| (i as u8) ^ 0x5c).collect();
    Transform::new(alg, 0x1234, esn, &key, outbound, engine).unwrap()
}

/// An ESP packet of `blocks` cipher blocks: header, IV, payload, ICV room.
fn packet(alg: Algorithm, blocks: usize, fill: u8) -> Vec<u8> {
    let len = HEADER_LEN + 16 + 16 * blocks + alg.icv_len();
    (0..len)
        .map(|i| (i as u8).wrapping_mul(fill) ^ fill)
        .collect()
}

fn units<'a>(bufs: &'a mut [Vec<u8>], seqs: &[u64]) -> Vec<Option<Unit<'a>>> {
    bufs.iter_mut()
        .zip(seqs)
        .map(|(b, &seq)| Some(Unit { esp: b, seq }))
        .collect()
}

/// Seals every packet one at a time on aws-lc.
fn seal_one_by_one(t: &Transform, bufs: &mut [Vec<u8>], seqs: &[u64]) {
    for (b, &seq) in bufs.iter_mut().zip(seqs) {
        let mut r = [Ok(())];
        t.seal(&mut [Some(Unit { esp: b, seq })], &mut r);
        r[0].unwrap();
    }
}

fn batch() -> impl Strategy<Value = (Vec<usize>, u64, bool)> {
    (
        prop::collection::vec(prop_oneof![8 => 1usize..120, 1 => 3000usize..4090], 1..150),
        any::<u64>(),
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn multi_buffer_equals_aws_lc_one_at_a_time((blocks, seq0, esn) in batch(), flip in any::<u64>()) {
        let Some(engine) = mb() else { return Ok(()) };
        for alg in CBC {
            // ESN: start just below an epoch boundary so the batch may
            // cross 2^32; without: a 32-bit number.
            let seq0 = if esn { (seq0 & 0xffff_ffff_0000_0000) | 0xffff_ffc0 } else { seq0 as u32 as u64 };
            let seqs: Vec<u64> = (0..blocks.len() as u64).map(|i| seq0.wrapping_add(i)).collect();
            let plain: Vec<Vec<u8>> = blocks.iter().enumerate().map(|(i, &b)| packet(alg, b, i as u8 | 1)).collect();

            let mut a = plain.clone();
            seal_one_by_one(&transform(alg, esn, true, Engine::AwsLc), &mut a, &seqs);
            let mut m = plain.clone();
            let mut res = vec![Ok(()); m.len()];
            let t = transform(alg, esn, true, engine);
            prop_assert_eq!(t.engine(), engine);
            t.seal(&mut units(&mut m, &seqs), &mut res);
            prop_assert!(res.iter().all(|r| r.is_ok()));
            prop_assert!(a == m, "{alg}: sealed bytes differ");

            // Each engine accepts what the other sealed; a flipped byte is
            // refused by both.
            let bad: Vec<bool> = (0..m.len()).map(|i| (flip >> (i % 64)) & 1 == 1).collect();
            for (b, &f) in m.iter_mut().zip(&bad) {
                if f {
                    let at = (flip as usize) % b.len();
                    b[at] ^= 0x01;
                }
            }
            for e in [Engine::AwsLc, engine] {
                let inb = transform(alg, esn, false, e);
                let mut bufs = m.clone();
                let mut res = vec![Ok(()); bufs.len()];
                inb.verify(&mut units(&mut bufs, &seqs), &mut res);
                for (i, (r, &f)) in res.iter().zip(&bad).enumerate() {
                    prop_assert_eq!(*r, if f { Err(EspError::IcvFail) } else { Ok(()) }, "{} {} #{}", alg, e, i);
                }
                prop_assert!(bufs == m, "{} {}: verify changed the packets", alg, e);
                // Decrypt the authentic ones: the plaintext comes back.
                let mut us = units(&mut bufs, &seqs);
                for (u, &f) in us.iter_mut().zip(&bad) {
                    if f {
                        *u = None;
                    }
                }
                let mut res = vec![Ok(()); us.len()];
                inb.decrypt(&mut us, &mut res);
                drop(us);
                prop_assert!(res.iter().all(|r| r.is_ok()));
                let icv = alg.icv_len();
                for ((b, p), &f) in bufs.iter().zip(&plain).zip(&bad) {
                    if !f {
                        prop_assert_eq!(&b[..b.len() - icv], &p[..p.len() - icv], "{} {}", alg, e);
                    }
                }
            }
        }
    }
}

#[test]
fn malformed_units_are_refused_not_sliced() {
    let engines: Vec<Engine> = [Some(Engine::AwsLc), mb()].into_iter().flatten().collect();
    for e in engines {
        for alg in CBC {
            let out = transform(alg, true, true, e);
            let inb = transform(alg, true, false, e);
            // Too short for header + IV + ICV, not whole blocks, empty.
            let lens = [
                0,
                8,
                24 + alg.icv_len(),
                24 + 15 + alg.icv_len(),
                24 + 17 + alg.icv_len(),
            ];
            let mut bufs: Vec<Vec<u8>> = lens.iter().map(|&n| vec![0xab; n]).collect();
            let mut good = packet(alg, 3, 7);
            let seqs = vec![1u64; lens.len() + 1];
            bufs.push(std::mem::take(&mut good));
            let mut res = vec![Ok(()); bufs.len()];
            out.seal(&mut units(&mut bufs, &seqs), &mut res);
            assert!(
                res[..lens.len()]
                    .iter()
                    .all(|r| *r == Err(EspError::Crypto)),
                "{e} {res:?}"
            );
            assert_eq!(res[lens.len()], Ok(()));
            let mut res = vec![Ok(()); bufs.len()];
            inb.verify(&mut units(&mut bufs, &seqs), &mut res);
            assert!(
                res[..lens.len()]
                    .iter()
                    .all(|r| *r == Err(EspError::Crypto)),
                "{e} {res:?}"
            );
            assert_eq!(res[lens.len()], Ok(()));
            // The wrong direction's transform refuses instead of guessing.
            let mut res = vec![Ok(())];
            inb.seal(&mut units(&mut bufs[lens.len()..], &seqs), &mut res);
            assert_eq!(res[0], Err(EspError::Crypto));
        }
    }
}

#[test]
fn engines_are_named() {
    assert_eq!(Engine::AwsLc.name(), "aws-lc");
    assert_eq!(Engine::best(Algorithm::AesGcm128), Engine::AwsLc);
    if let Some(e) = mb() {
        assert!(e.name().starts_with("ipsec-mb "), "{e}");
        // An AEAD never runs on it even when asked.
        let t = transform(Algorithm::AesGcm128, false, true, e);
        assert_eq!(t.engine(), Engine::AwsLc);
    }
}
