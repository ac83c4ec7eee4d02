//! Round trips, tampering, replay, truncation and sequence exhaustion.

mod common;

use std::sync::Arc;

use common::*;
use packet::{Packet, Pool};
use vecgate_ipsec::{
    Algorithm, Decrypted, EspError, EspRegistry, InboundSa, Lifetime, LifetimeEvent, OutboundSa,
    RegistryError,
};

fn encrypt_one(out: &OutboundSa, pool: &mut Pool, inner: &[u8], v6: bool) -> (Packet, u64) {
    let mut p = pool.alloc().unwrap();
    assert!(p.set_data(inner));
    let seq = out.reserve(1).unwrap().start;
    out.encrypt(&mut p, v6, seq).unwrap();
    (p, seq)
}

/// Encrypts, checks the outer headers, strips them (as the graph would),
/// returns the ESP bytes.
fn esp_bytes(
    out: &OutboundSa,
    pool: &mut Pool,
    inner: &[u8],
    v6: bool,
    ov6: bool,
    encap: bool,
) -> Vec<u8> {
    let (mut p, _) = encrypt_one(out, pool, inner, v6);
    let off = check_outer(p.data(), ov6, encap);
    assert!(p.pull_front(off));
    let v = p.data().to_vec();
    pool.free(p);
    v
}

fn decrypt_bytes(
    inb: &InboundSa,
    pool: &mut Pool,
    esp: &[u8],
) -> (Result<Decrypted, EspError>, Vec<u8>) {
    let mut p = pool.alloc().unwrap();
    assert!(p.set_data(esp));
    let r = inb.decrypt(&mut p);
    let v = p.data().to_vec();
    pool.free(p);
    (r, v)
}

#[test]
fn round_trip_every_combination() {
    let mut pool = Pool::new(4);
    let mut spi = 0x1000;
    for alg in Algorithm::ALL {
        for outer_v6 in [false, true] {
            for encap in [false, true] {
                for esn in [false, true] {
                    spi += 1;
                    let (out, inb) = pair(|| config(alg, spi, outer_v6, encap, esn));
                    for (k, len) in [0usize, 1, 2, 3, 13, 14, 15, 16, 17, 100, 1400, 8000, 65_000]
                        .into_iter()
                        .enumerate()
                    {
                        for v6 in [false, true] {
                            let inner = if v6 {
                                inner_v6(len)
                            } else {
                                inner_v4(len, k as u16)
                            };
                            let esp = esp_bytes(&out, &mut pool, &inner, v6, outer_v6, encap);
                            assert_eq!(u32::from_be_bytes(esp[..4].try_into().unwrap()), spi);
                            // Ciphertext never contains the cleartext inner header.
                            assert!(!esp.windows(20).any(|w| w == &inner[..20]), "{alg} leak");
                            let (r, plain) = decrypt_bytes(&inb, &mut pool, &esp);
                            let d = r.unwrap_or_else(|e| panic!("{alg} v6={v6} ov6={outer_v6} encap={encap} esn={esn} len={len}: {e}"));
                            assert_eq!(d.inner_v6, v6);
                            assert_eq!(plain, inner);
                        }
                    }
                    assert_eq!(inb.replay_top(), 26);
                    assert_eq!(out.lifetime().packets(), 26);
                    assert_eq!(inb.lifetime().packets(), 26);
                }
            }
        }
    }
}

#[test]
fn padding_and_alignment() {
    let mut pool = Pool::new(2);
    for alg in Algorithm::ALL {
        let (out, _) = pair(|| config(alg, 0x2000, false, false, false));
        for len in 28..100 {
            let esp = esp_bytes(&out, &mut pool, &inner_v4(len - 28, 1), false, false, false);
            let ct = esp.len() - 8 - alg.iv_len() - alg.icv_len();
            // RFC 4303 §2.4: ciphertext is block-aligned and ends on 4 bytes.
            assert_eq!(ct % alg.block_size().max(4), 0, "{alg} {len}");
            assert!(ct - len - 2 < alg.block_size().max(4), "minimal padding");
        }
    }
}

#[test]
fn aead_iv_is_the_sequence_number() {
    let mut pool = Pool::new(2);
    let (out, _) = pair(|| config(Algorithm::AesGcm128, 0x2100, false, false, true));
    let _ = out.reserve(0x1_0000_0000 - 3).unwrap();
    for _ in 0..5 {
        let (mut p, seq) = encrypt_one(&out, &mut pool, &inner_v4(10, 1), false);
        let d = &p.data_mut()[20..];
        assert_eq!(&d[4..8], &(seq as u32).to_be_bytes());
        assert_eq!(&d[8..16], &seq.to_be_bytes());
        pool.free(p);
    }
}

#[test]
fn cbc_ivs_differ() {
    let mut pool = Pool::new(2);
    let (out, _) = pair(|| config(Algorithm::AesCbc128HmacSha1_96, 0x2200, false, false, false));
    let a = esp_bytes(&out, &mut pool, &inner_v4(10, 1), false, false, false);
    let b = esp_bytes(&out, &mut pool, &inner_v4(10, 1), false, false, false);
    assert_ne!(&a[8..24], &b[8..24]);
    assert_ne!(&a[8..24], &[0u8; 16]);
}

#[test]
fn every_bit_flip_fails_the_icv() {
    let mut pool = Pool::new(2);
    for alg in Algorithm::ALL {
        for esn in [false, true] {
            let (out, inb) = pair(|| config(alg, 0x3000, false, false, esn));
            let esp = esp_bytes(&out, &mut pool, &inner_v4(40, 7), false, false, false);
            // SPI bytes are excluded: a changed SPI is "bad-spi" before any crypto.
            for byte in 4..esp.len() {
                for bit in 0..8 {
                    let mut t = esp.clone();
                    t[byte] ^= 1 << bit;
                    let (r, _) = decrypt_bytes(&inb, &mut pool, &t);
                    let e = r.unwrap_err();
                    if byte < 8 {
                        // A changed sequence number: ICV failure (or, for
                        // far jumps, possibly left of the window).
                        assert!(
                            matches!(e, EspError::IcvFail | EspError::TooOld),
                            "{alg} {byte}.{bit}: {e}"
                        );
                    } else {
                        assert_eq!(
                            e,
                            EspError::IcvFail,
                            "{alg} esn={esn} byte {byte} bit {bit}"
                        );
                    }
                }
            }
            for byte in 0..4 {
                let mut t = esp.clone();
                t[byte] ^= 0x80;
                assert_eq!(decrypt_bytes(&inb, &mut pool, &t).0, Err(EspError::BadSpi));
            }
            // Nothing was accepted, so the untouched packet still decrypts.
            assert_eq!(inb.replay_top(), 0);
            assert!(decrypt_bytes(&inb, &mut pool, &esp).0.is_ok());
        }
    }
}

#[test]
fn wrong_key_fails() {
    let mut pool = Pool::new(2);
    for alg in Algorithm::ALL {
        let out = OutboundSa::new(config(alg, 0x3100, false, false, false)).unwrap();
        let mut c = config(alg, 0x3100, false, false, false);
        c.key[0] ^= 1;
        let inb = InboundSa::new(c).unwrap();
        let esp = esp_bytes(&out, &mut pool, &inner_v4(40, 7), false, false, false);
        let e = decrypt_bytes(&inb, &mut pool, &esp).0.unwrap_err();
        if alg.is_aead() {
            assert_eq!(e, EspError::IcvFail);
        } else {
            // CBC+HMAC: the integrity key is right, so the ICV passes and
            // the wrong cipher key yields garbage that the padding (or
            // next header / inner header) check rejects.
            assert!(
                matches!(
                    e,
                    EspError::BadPadding | EspError::BadNextHeader | EspError::BadInner
                ),
                "{alg}: {e}"
            );
        }
        // Salt / integrity key (the last byte): always the ICV.
        let mut c = config(alg, 0x3100, false, false, false);
        let n = c.key.len();
        c.key[n - 1] ^= 1;
        let inb = InboundSa::new(c).unwrap();
        assert_eq!(
            decrypt_bytes(&inb, &mut pool, &esp).0,
            Err(EspError::IcvFail)
        );
    }
}

#[test]
fn replay_reorder_and_too_old() {
    let mut pool = Pool::new(2);
    for alg in Algorithm::ALL {
        let (out, inb) = pair(|| config(alg, 0x4000, false, false, false));
        let pkts: Vec<Vec<u8>> = (0..300)
            .map(|i| esp_bytes(&out, &mut pool, &inner_v4(20, i), false, false, false))
            .collect();
        // 1..=10 in order, then 12, then 11 (reordered within the window).
        for p in &pkts[..10] {
            assert!(decrypt_bytes(&inb, &mut pool, p).0.is_ok());
        }
        assert_eq!(decrypt_bytes(&inb, &mut pool, &pkts[11]).0.unwrap().seq, 12);
        assert_eq!(decrypt_bytes(&inb, &mut pool, &pkts[10]).0.unwrap().seq, 11);
        // Replays.
        assert_eq!(
            decrypt_bytes(&inb, &mut pool, &pkts[10]).0,
            Err(EspError::Replay)
        );
        assert_eq!(
            decrypt_bytes(&inb, &mut pool, &pkts[0]).0,
            Err(EspError::Replay)
        );
        // Jump ahead: 300; window 128 → 173 is the oldest acceptable.
        assert!(decrypt_bytes(&inb, &mut pool, &pkts[299]).0.is_ok());
        assert_eq!(
            decrypt_bytes(&inb, &mut pool, &pkts[171]).0,
            Err(EspError::TooOld)
        );
        assert_eq!(
            decrypt_bytes(&inb, &mut pool, &pkts[172]).0.unwrap().seq,
            173
        );
        assert_eq!(
            decrypt_bytes(&inb, &mut pool, &pkts[172]).0,
            Err(EspError::Replay)
        );
    }
}

#[test]
fn replay_is_checked_before_decrypting() {
    // A replayed sequence number with a forged body is reported as a
    // replay, not an ICV failure: the cheap check runs first.
    let mut pool = Pool::new(2);
    let (out, inb) = pair(|| config(Algorithm::AesGcm256, 0x4100, false, false, false));
    let esp = esp_bytes(&out, &mut pool, &inner_v4(20, 1), false, false, false);
    assert!(decrypt_bytes(&inb, &mut pool, &esp).0.is_ok());
    let mut forged = esp.clone();
    let n = forged.len();
    forged[n - 1] ^= 1;
    assert_eq!(
        decrypt_bytes(&inb, &mut pool, &forged).0,
        Err(EspError::Replay)
    );
}

#[test]
fn failed_icv_does_not_advance_the_window() {
    let mut pool = Pool::new(2);
    let (out, inb) = pair(|| config(Algorithm::AesGcm128, 0x4200, false, false, false));
    let pkts: Vec<Vec<u8>> = (0..200)
        .map(|i| esp_bytes(&out, &mut pool, &inner_v4(20, i), false, false, false))
        .collect();
    let mut forged = pkts[199].clone();
    forged[30] ^= 1;
    assert_eq!(
        decrypt_bytes(&inb, &mut pool, &forged).0,
        Err(EspError::IcvFail)
    );
    assert_eq!(inb.replay_top(), 0);
    // Had the forgery moved the window to 200, packet 1 would be too old.
    assert!(decrypt_bytes(&inb, &mut pool, &pkts[0]).0.is_ok());
    assert!(decrypt_bytes(&inb, &mut pool, &pkts[199]).0.is_ok());
}

#[test]
fn wrong_spi() {
    let mut pool = Pool::new(2);
    let out = OutboundSa::new(config(Algorithm::AesGcm128, 0x5000, false, false, false)).unwrap();
    let inb = InboundSa::new(config(Algorithm::AesGcm128, 0x5001, false, false, false)).unwrap();
    let esp = esp_bytes(&out, &mut pool, &inner_v4(20, 1), false, false, false);
    assert_eq!(
        decrypt_bytes(&inb, &mut pool, &esp).0,
        Err(EspError::BadSpi)
    );
    assert_eq!(EspError::BadSpi.as_str(), "bad-spi");
}

#[test]
fn truncated_at_every_length_never_panics() {
    let mut pool = Pool::new(2);
    for alg in Algorithm::ALL {
        let (out, inb) = pair(|| config(alg, 0x6000, false, false, true));
        let esp = esp_bytes(&out, &mut pool, &inner_v4(100, 1), false, false, false);
        let min = 8 + alg.iv_len() + alg.icv_len() + if alg.is_aead() { 2 } else { 16 };
        for n in 0..esp.len() {
            let (r, _) = decrypt_bytes(&inb, &mut pool, &esp[..n]);
            let e = r.unwrap_err();
            if n < min {
                assert_eq!(e, EspError::Truncated, "{alg} {n}");
            } else if !alg.is_aead() && (n - 8 - 16 - alg.icv_len()) % 16 != 0 {
                assert_eq!(e, EspError::BadLength, "{alg} {n}");
            } else {
                assert_eq!(e, EspError::IcvFail, "{alg} {n}");
            }
        }
        // Garbage of every length, including "ICV only" and zero-length
        // ciphertext shapes.
        for n in 0..200 {
            let mut g: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
            if n >= 4 {
                g[..4].copy_from_slice(&0x6000u32.to_be_bytes());
            }
            assert!(decrypt_bytes(&inb, &mut pool, &g).0.is_err());
        }
        assert!(decrypt_bytes(&inb, &mut pool, &esp).0.is_ok());
    }
}

#[test]
fn authentic_non_ip_inner_is_refused() {
    // Next header says IPv4 but the decrypted packet is not one: bad-inner.
    // (Authentic bad padding / next header: unit test in esp_vectors.rs.)
    let mut pool = Pool::new(2);
    let (out, inb) = pair(|| config(Algorithm::AesGcm128, 0x6100, false, false, false));
    let mut p = pool.alloc().unwrap();
    assert!(p.set_data(&[0x11; 40]));
    let seq = out.reserve(1).unwrap().start;
    out.encrypt(&mut p, false, seq).unwrap();
    assert!(p.pull_front(20));
    let esp = p.data().to_vec();
    assert_eq!(
        decrypt_bytes(&inb, &mut pool, &esp).0,
        Err(EspError::BadInner)
    );
}

/// With no configured limit a 32-bit SA still warns (soft) 2^24 numbers
/// before exhaustion, once; an ESN SA does not.
#[test]
fn soft_event_before_sequence_exhaustion_without_limits() {
    use vecgate_ipsec::tunnel_mode::SEQ_SOFT_MARGIN;
    let (out, _inb) = pair(|| config(Algorithm::AesGcm128, 0x7100, false, false, false));
    let edge = u64::from(u32::MAX) + 1 - SEQ_SOFT_MARGIN;
    let r = out.reserve(edge - 1).unwrap();
    assert_eq!(r.end, edge);
    assert_eq!(out.lifetime().take_event(), None);
    let r = out.reserve(1).unwrap();
    assert_eq!(r, edge..edge + 1);
    assert_eq!(out.lifetime().take_event(), Some(LifetimeEvent::Soft));
    out.reserve(1000).unwrap();
    assert_eq!(out.lifetime().take_event(), None);
    let (out, _inb) = pair(|| config(Algorithm::AesGcm128, 0x7200, false, false, true));
    out.reserve(edge + 1000).unwrap();
    assert_eq!(out.lifetime().take_event(), None);
}

#[test]
fn sequence_exhaustion_without_esn() {
    let mut pool = Pool::new(2);
    let (out, inb) = pair(|| config(Algorithm::AesGcm128, 0x7000, false, false, false));
    let r = out.reserve(u64::from(u32::MAX) - 3).unwrap();
    assert_eq!(r, 1..u64::from(u32::MAX) - 2);
    // Three numbers left: a batch of 5 gets the last three.
    let r = out.reserve(5).unwrap();
    assert_eq!(r, u64::from(u32::MAX) - 2..u64::from(u32::MAX) + 1);
    assert_eq!(out.reserve(1), Err(EspError::SeqExhausted));
    assert_eq!(out.lifetime().take_event(), Some(LifetimeEvent::Hard));
    assert_eq!(out.reserve(1), Err(EspError::SaExpired));
    // The last number is still usable by whoever reserved it, and the
    // receiver accepts it; beyond it encrypt refuses.
    let mut p = pool.alloc().unwrap();
    assert!(p.set_data(&inner_v4(10, 1)));
    assert_eq!(
        out.encrypt(&mut p, false, 1 << 32),
        Err(EspError::SeqExhausted)
    );
    assert!(p.set_data(&inner_v4(10, 1)));
    assert_eq!(out.encrypt(&mut p, false, 0), Err(EspError::SeqExhausted));
    assert!(p.set_data(&inner_v4(10, 1)));
    out.encrypt(&mut p, false, u64::from(u32::MAX)).unwrap();
    assert!(p.pull_front(20));
    assert_eq!(inb.decrypt(&mut p).unwrap().seq, u64::from(u32::MAX));
}

#[test]
fn sequence_crosses_32_bits_with_esn() {
    let mut pool = Pool::new(2);
    let (out, inb) = pair(|| {
        config(
            Algorithm::AesCbc256HmacSha256_128,
            0x7100,
            false,
            false,
            true,
        )
    });
    let _ = out.reserve(u64::from(u32::MAX) - 5).unwrap();
    inb.set_replay_top(u64::from(u32::MAX) - 10);
    for _ in 0..20 {
        let esp = esp_bytes(&out, &mut pool, &inner_v4(10, 1), false, false, false);
        let d = decrypt_bytes(&inb, &mut pool, &esp).0.unwrap();
        assert_eq!(d.seq, inb.replay_top());
    }
    assert_eq!(inb.replay_top(), (1u64 << 32) + 14);
}

#[test]
fn hard_lifetime_refuses_and_soft_fires_once() {
    let mut pool = Pool::new(2);
    let mk = || {
        let mut c = config(Algorithm::AesGcm128, 0x8000, false, false, false);
        c.lifetime = Lifetime {
            soft_packets: 3,
            hard_packets: 5,
            ..Default::default()
        };
        c
    };
    let (out, inb) = pair(mk);
    let mut esps = Vec::new();
    for i in 0..5 {
        esps.push(esp_bytes(
            &out,
            &mut pool,
            &inner_v4(10, i),
            false,
            false,
            false,
        ));
        if i == 2 {
            assert_eq!(out.lifetime().take_event(), Some(LifetimeEvent::Soft));
        }
    }
    assert_eq!(out.lifetime().take_event(), Some(LifetimeEvent::Hard));
    let mut p = pool.alloc().unwrap();
    assert!(p.set_data(&inner_v4(10, 9)));
    assert_eq!(out.encrypt(&mut p, false, 6), Err(EspError::LifetimeHard));
    assert_eq!(out.reserve(1), Err(EspError::SaExpired));
    for e in &esps {
        assert!(decrypt_bytes(&inb, &mut pool, e).0.is_ok());
    }
    assert_eq!(
        decrypt_bytes(&inb, &mut pool, &esps[0]).0,
        Err(EspError::LifetimeHard)
    );
}

#[test]
fn no_room_is_reported_not_panicked() {
    let mut pool = Pool::new(2);
    let (out, _) = pair(|| config(Algorithm::AesGcm128, 0x8100, true, true, false));
    let mut p = pool.alloc().unwrap();
    assert!(p.set_data(&[0x45; 64]));
    assert!(p.push_front(250).is_some());
    let seq = out.reserve(1).unwrap().start;
    assert_eq!(out.encrypt(&mut p, false, seq), Err(EspError::NoRoom));
    // A maximal frame leaves too little tailroom and too much length.
    let mut p = pool.alloc().unwrap();
    let big = vec![0x45u8; packet::buffer::MAX_FRAME];
    assert!(p.set_data(&big));
    assert!(out.encrypt(&mut p, false, seq + 1).is_err());
}

#[test]
fn batches_share_one_sa() {
    let mut pool = Pool::new(64);
    for alg in Algorithm::ALL {
        let (out, inb) = pair(|| config(alg, 0x9000, false, false, true));
        let mut pkts: Vec<Packet> = (0..20)
            .map(|i| {
                let mut p = pool.alloc().unwrap();
                let inner = if i % 2 == 0 {
                    inner_v4(i * 10, i as u16)
                } else {
                    inner_v6(i * 10)
                };
                assert!(p.set_data(&inner));
                p
            })
            .collect();
        let inners: Vec<Vec<u8>> = pkts.iter().map(|p| p.data().to_vec()).collect();
        let mut st = vec![Ok(()); 20];
        assert_eq!(out.encrypt_batch(&mut pkts, &mut st), Ok(None));
        assert!(st.iter().all(|s| s.is_ok()));
        for p in pkts.iter_mut() {
            assert!(p.pull_front(20));
        }
        // Deliver in reverse with one replay in the middle.
        pkts.reverse();
        let dup = pkts[3].data().to_vec();
        let mut dp = pool.alloc().unwrap();
        assert!(dp.set_data(&dup));
        pkts.push(dp);
        let mut res = vec![Err(EspError::Truncated); pkts.len()];
        assert_eq!(inb.decrypt_batch(&mut pkts, &mut res), Ok(None));
        for (i, r) in res.iter().enumerate().take(20) {
            let d = r.unwrap();
            assert_eq!(d.seq, 20 - i as u64);
            assert_eq!(pkts[i].data(), &inners[19 - i][..]);
            assert_eq!(d.inner_v6, (19 - i) % 2 == 1);
        }
        assert_eq!(res[20], Err(EspError::Replay));
        pool.free_all(&mut pkts);
    }
}

#[test]
fn concurrent_workers_get_unique_sequence_numbers() {
    let (out, _) = pair(|| config(Algorithm::AesGcm128, 0x9100, false, false, false));
    let out = Arc::new(out);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let out = Arc::clone(&out);
            std::thread::spawn(move || {
                let mut v = Vec::new();
                for _ in 0..1000 {
                    v.extend(out.reserve(7).unwrap());
                }
                v
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (1..=28_000).collect::<Vec<_>>());
}

#[test]
fn registry_make_before_break() {
    let mut pool = Pool::new(4);
    let reg = EspRegistry::new();
    let (old_out, old_in) = pair(|| config(Algorithm::AesGcm128, 0xa000, false, false, false));
    let (new_out, new_in) = pair(|| config(Algorithm::AesGcm256, 0xa001, false, false, false));
    let tx = reg.add_tunnel(1, "t", old_out).unwrap();
    reg.install_inbound(1, old_in).unwrap();
    let in_flight = esp_bytes(
        &tx.current().unwrap(),
        &mut pool,
        &inner_v4(10, 1),
        false,
        false,
        false,
    );

    // Rekey: inbound first, then switch outbound.
    reg.install_inbound(1, new_in).unwrap();
    let dup = InboundSa::new(config(Algorithm::AesGcm128, 0xa001, false, false, false)).unwrap();
    assert_eq!(
        reg.install_inbound(1, dup),
        Err(RegistryError::SpiInUse(0xa001))
    );
    let old = reg.switch_outbound(1, new_out).unwrap();
    assert_eq!(old.spi(), 0xa000);
    assert_eq!(tx.spi(), 0xa001);
    let fresh = esp_bytes(
        &tx.current().unwrap(),
        &mut pool,
        &inner_v4(10, 2),
        false,
        false,
        false,
    );

    // Both old (in flight) and new packets are accepted, in one vector.
    let mut pkts: Vec<Packet> = [&in_flight, &fresh]
        .iter()
        .map(|esp| {
            let mut p = pool.alloc().unwrap();
            assert!(p.set_data(esp));
            p
        })
        .collect();
    let mut out = vec![Err(EspError::Crypto); 2];
    reg.sad().decrypt(&mut pkts, &mut out);
    assert!(
        out.iter().all(|r| r.is_ok_and(|ok| ok.tunnel == 1)),
        "{out:?}"
    );
    assert!(reg.remove_inbound(0xa000).is_ok());
    assert_eq!(
        reg.remove_inbound(0xa000).err(),
        Some(RegistryError::NoSa(0xa000))
    );
    let spis: Vec<(u32, bool)> = reg.list().iter().map(|i| (i.spi, i.outbound)).collect();
    assert_eq!(spis, vec![(0xa001, true), (0xa001, false)]);
}

/// The slice API (ESP in UDP laid out in one UDP GSO datagram): every
/// algorithm seals three inner packets where they lie in one buffer and
/// opens them there again; the SA's lifetime counts them; a fourth slice
/// beyond the reservation is refused; a tampered slice fails alone; a
/// flow outside the SA's selectors is refused before any sequence number
/// is spent.
#[test]
fn slices_seal_and_open_where_they_lie() {
    use std::ops::Range;
    use vecgate_ipsec::{Selector, Selectors, TunnelTx};
    for (k, alg) in Algorithm::ALL.into_iter().enumerate() {
        let spi = 0x9000 + k as u32;
        let (out, inb) = pair(|| config(alg, spi, false, true, true));
        let tx = TunnelTx::new(out);
        let inners: Vec<Vec<u8>> = [1300, 1300, 77]
            .iter()
            .enumerate()
            .map(|(i, &n)| inner_v4(n, i as u16))
            .collect();
        let mut s = tx.sealer(&inners[0]).unwrap();
        s.reserve(3).unwrap();
        let mut buf = vec![0u8; 16];
        let mut ranges: Vec<Range<usize>> = Vec::new();
        for (i, inner) in inners.iter().enumerate() {
            let at = buf.len();
            let len = s.esp_len(inner.len());
            buf.resize(at + len, 0);
            let f = s.front();
            buf[at + f..at + f + inner.len()].copy_from_slice(inner);
            s.seal(&mut buf[at..at + len], inner.len(), i).unwrap();
            ranges.push(at..at + len);
        }
        let mut extra = vec![0u8; s.esp_len(20)];
        assert_eq!(
            s.seal(&mut extra, 20, 3),
            Err(EspError::SeqExhausted),
            "{alg}: beyond the reservation"
        );
        drop(s);
        let sa = tx.current().unwrap();
        assert_eq!(sa.lifetime().packets(), 3, "{alg}: accounted on drop");
        // Slice 1 tampered in flight.
        let mut bad = buf.clone();
        bad[ranges[1].start + 40] ^= 1;
        let mut res = vec![Err(EspError::Crypto); 3];
        inb.open_slices(&mut bad, &ranges, &mut res).unwrap();
        assert!(res[0].is_ok() && res[2].is_ok(), "{alg}: {res:?}");
        assert_eq!(res[1], Err(EspError::IcvFail));
        // The genuine datagram: slice 1 opens (0 and 2 are replays now).
        let mut res = vec![Err(EspError::Crypto); 3];
        inb.open_slices(&mut buf, &ranges, &mut res).unwrap();
        assert_eq!(res[0], Err(EspError::Replay));
        let d = res[1].expect("slice 1");
        assert_eq!((d.seq, d.inner_len), (2, inners[1].len()));
        let at = ranges[1].start + inb.esp_front();
        assert_eq!(&buf[at..at + d.inner_len], &inners[1][..], "{alg}");
        // Ranges outside the buffer are truncated, not a panic.
        let mut res = vec![Err(EspError::Crypto); 1];
        let len = buf.len();
        let outside = len - 4..len + 60;
        inb.open_slices(&mut buf, std::slice::from_ref(&outside), &mut res)
            .unwrap();
        assert_eq!(res[0], Err(EspError::Truncated));
    }
    // Selectors: 10.1.0.1 may not send through this SA.
    let (out, _inb) = pair(|| config(Algorithm::AesGcm128, 0x9100, false, true, true));
    let only = Selector {
        start: "10.9.0.0".parse().unwrap(),
        end: "10.9.0.255".parse().unwrap(),
        ..Selector::any(false)
    };
    let sels = Selectors {
        local: vec![only],
        remote: vec![Selector::any(false)],
    };
    let tx = TunnelTx::new(out.with_selectors(sels));
    assert_eq!(
        tx.sealer(&inner_v4(10, 1)).err(),
        Some(EspError::PolicyMismatch)
    );
    let sa = tx.current().unwrap();
    assert_eq!(sa.reserve(1).unwrap().start, 1, "no number spent");
}
