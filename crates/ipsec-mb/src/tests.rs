//! Known answers for the primitives as the library computes them, one at
//! a time and side by side in one burst: AES-CBC from RFC 3602 §4 (cases
//! #1-#4) and NIST SP 800-38A F.2.5/F.2.6 (AES-256), HMAC-SHA-1 from
//! RFC 2202 §3 truncated to 96 bits as RFC 2404 §3 uses it, HMAC-SHA-256
//! from RFC 4231 §4 (cases 1-5; 6 and 7 have keys longer than a block,
//! which ESP never uses and [`HmacKey`] refuses).

use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn mgr() -> Option<Mgr> {
    let c = Choice::detect()?;
    Some(Mgr::new(c).expect("a detected choice initialises"))
}

struct Cbc {
    key: &'static str,
    iv: &'static str,
    pt: &'static str,
    ct: &'static str,
}

const CBC: [Cbc; 6] = [
    // RFC 3602 §4 case #1..#4.
    Cbc {
        key: "06a9214036b8a15b512e03d534120006",
        iv: "3dafba429d9eb430b422da802c9fac41",
        pt: "53696e676c6520626c6f636b206d7367",
        ct: "e353779c1079aeb82708942dbe77181a",
    },
    Cbc {
        key: "c286696d887c9aa0611bbb3e2025a45a",
        iv: "562e17996d093d28ddb3ba695a2e6f58",
        pt: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
        ct: "d296cd94c2cccf8a3a863028b5e1dc0a7586602d253cfff91b8266bea6d61ab1",
    },
    Cbc {
        key: "6c3ea0477630ce21a2ce334aa746c2cd",
        iv: "c782dc4c098c66cbd9cd27d825682c81",
        pt: "5468697320697320612034382d62797465206d657373616765202865786163746c7920332041455320626c6f636b7329",
        ct: "d0a02b3836451753d493665d33f0e8862dea54cdb293abc7506939276772f8d5021c19216bad525c8579695d83ba2684",
    },
    Cbc {
        key: "56e47a38c5598974bc46903dba290349",
        iv: "8ce82eefbea0da3c44699ed7db51b7d9",
        pt: "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf",
        ct: "c30e32ffedc0774e6aff6af0869f71aa0f3af07a9a31a9c684db207eb0ef8e4e35907aa632c3ffdf868bb7b29d3d46ad83ce9f9a102ee99d49a53e87f4c3da55",
    },
    // SP 800-38A F.2.5 (CBC-AES256.Encrypt), first two blocks.
    Cbc {
        key: "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
        iv: "000102030405060708090a0b0c0d0e0f",
        pt: "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51",
        ct: "f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d",
    },
    // SP 800-38A F.2.5, all four blocks.
    Cbc {
        key: "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
        iv: "000102030405060708090a0b0c0d0e0f",
        pt: "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
        ct: "f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d39f23369a9d9bacfa530e26304231461b2eb05e2c39be9fcda6c19078c6a9d1b",
    },
];

fn iv16(s: &str) -> [u8; 16] {
    hex(s).try_into().unwrap()
}

#[test]
fn aes_cbc_known_answers_one_at_a_time() {
    let Some(mut m) = mgr() else { return };
    for c in &CBC {
        let key = AesKey::new(&hex(c.key)).unwrap();
        let mut b = hex(c.pt);
        m.cbc(
            &key,
            Direction::Encrypt,
            [CbcJob {
                data: &mut b,
                iv: iv16(c.iv),
            }],
        )
        .unwrap();
        assert_eq!(b, hex(c.ct), "encrypt {}", c.key);
        m.cbc(
            &key,
            Direction::Decrypt,
            [CbcJob {
                data: &mut b,
                iv: iv16(c.iv),
            }],
        )
        .unwrap();
        assert_eq!(b, hex(c.pt), "decrypt {}", c.key);
    }
}

#[test]
fn aes_cbc_known_answers_side_by_side() {
    let Some(mut m) = mgr() else { return };
    // More jobs than one burst takes (64), each a case by turns, all of one
    // key size per call as ESP batches are.
    for size in [16usize, 32] {
        let cases: Vec<&Cbc> = CBC.iter().filter(|c| hex(c.key).len() == size).collect();
        let key_hex = cases[0].key;
        let cases: Vec<&Cbc> = cases.into_iter().filter(|c| c.key == key_hex).collect();
        let key = AesKey::new(&hex(key_hex)).unwrap();
        let mut bufs: Vec<Vec<u8>> = (0..150).map(|i| hex(cases[i % cases.len()].pt)).collect();
        m.cbc(
            &key,
            Direction::Encrypt,
            bufs.iter_mut().enumerate().map(|(i, b)| CbcJob {
                data: b,
                iv: iv16(cases[i % cases.len()].iv),
            }),
        )
        .unwrap();
        for (i, b) in bufs.iter().enumerate() {
            assert_eq!(b, &hex(cases[i % cases.len()].ct), "job {i}");
        }
        m.cbc(
            &key,
            Direction::Decrypt,
            bufs.iter_mut().enumerate().map(|(i, b)| CbcJob {
                data: b,
                iv: iv16(cases[i % cases.len()].iv),
            }),
        )
        .unwrap();
        for (i, b) in bufs.iter().enumerate() {
            assert_eq!(b, &hex(cases[i % cases.len()].pt), "job {i}");
        }
    }
}

#[test]
fn cbc_refuses_partial_blocks_before_ciphering() {
    let Some(mut m) = mgr() else { return };
    let key = AesKey::new(&[1; 16]).unwrap();
    let mut a = [7u8; 32];
    let mut b = [7u8; 17];
    let r = m.cbc(
        &key,
        Direction::Encrypt,
        [
            CbcJob {
                data: &mut a,
                iv: [0; 16],
            },
            CbcJob {
                data: &mut b,
                iv: [0; 16],
            },
        ],
    );
    assert!(r.is_err());
    assert_eq!(a, [7u8; 32], "nothing ciphered");
    let mut e: [u8; 0] = [];
    assert!(m
        .cbc(
            &key,
            Direction::Encrypt,
            [CbcJob {
                data: &mut e,
                iv: [0; 16]
            }]
        )
        .is_err());
    assert!(AesKey::new(&[0; 24]).is_err());
}

struct Mac {
    key: Vec<u8>,
    data: Vec<u8>,
    tag: &'static str,
}

/// The five inputs shared by RFC 2202 §3 test cases 1-5 (HMAC-SHA-1) and
/// RFC 4231 §4.2-4.6 (HMAC-SHA-256), with both full-length digests.
fn mac_vectors() -> [(Vec<u8>, Vec<u8>, &'static str, &'static str); 5] {
    [
        (
            vec![0x0b; 20],
            b"Hi There".to_vec(),
            "b617318655057264e28bc0b6fb378c8ef146be00",
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
        ),
        (
            b"Jefe".to_vec(),
            b"what do ya want for nothing?".to_vec(),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
        ),
        (
            vec![0xaa; 20],
            vec![0xdd; 50],
            "125d7342b9ac11cd91a39af48aa17b4f63f175d3",
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
        ),
        (
            hex("0102030405060708090a0b0c0d0e0f10111213141516171819"),
            vec![0xcd; 50],
            "4c9007f4026250c6bc8414f9bf50c86c2d7235da",
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
        ),
        (
            vec![0x0c; 20],
            b"Test With Truncation".to_vec(),
            "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04",
            "a3b6167473100ee06e0c796c2955552bfa6f7c0a6a8aef8b93f860aab0cd20c5",
        ),
    ]
}

/// RFC 2202 §3 test cases 1-5 (HMAC-SHA-1).
fn sha1_cases() -> Vec<Mac> {
    mac_vectors()
        .into_iter()
        .map(|(key, data, tag, _)| Mac { key, data, tag })
        .collect()
}

/// RFC 4231 §4.2-4.6 (HMAC-SHA-256).
fn sha256_cases() -> Vec<Mac> {
    mac_vectors()
        .into_iter()
        .map(|(key, data, _, tag)| Mac { key, data, tag })
        .collect()
}

fn check_macs(m: &mut Mgr, hash: Hash, cases: &[Mac], tag_len: usize) {
    // One at a time.
    for c in cases {
        let key = HmacKey::new(hash, &c.key).unwrap();
        let mut tag = [0u8; 32];
        m.hmac(
            &key,
            tag_len,
            [HmacJob {
                msg: &c.data,
                tag: &mut tag,
            }],
        )
        .unwrap();
        assert_eq!(&tag[..tag_len], &hex(c.tag)[..tag_len], "{hash:?}");
        assert!(tag[tag_len..].iter().all(|b| *b == 0), "wrote past the tag");
    }
    // Side by side: every case's key in turn, 100 messages of one key.
    for c in cases {
        let key = HmacKey::new(hash, &c.key).unwrap();
        let mut tags = vec![[0u8; 32]; 100];
        m.hmac(
            &key,
            tag_len,
            tags.iter_mut().map(|t| HmacJob {
                msg: &c.data,
                tag: t,
            }),
        )
        .unwrap();
        for t in &tags {
            assert_eq!(&t[..tag_len], &hex(c.tag)[..tag_len]);
        }
    }
}

#[test]
fn hmac_sha1_known_answers() {
    let Some(mut m) = mgr() else { return };
    let cases = sha1_cases();
    check_macs(&mut m, Hash::Sha1, &cases, 20);
    // HMAC-SHA1-96 (RFC 2404 §3): the first 12 bytes.
    check_macs(&mut m, Hash::Sha1, &cases, 12);
}

#[test]
fn hmac_sha256_known_answers() {
    let Some(mut m) = mgr() else { return };
    let cases = sha256_cases();
    check_macs(&mut m, Hash::Sha256, &cases, 32);
    // HMAC-SHA-256-128 (RFC 4868 §2.6 / RFC 4231 §4.6): 16 bytes.
    check_macs(&mut m, Hash::Sha256, &cases, 16);
}

#[test]
fn hmac_of_messages_of_every_length_in_one_burst() {
    // Lanes finish at different times: lengths 1..200 side by side must
    // each give what they give alone.
    let Some(mut m) = mgr() else { return };
    for hash in [Hash::Sha1, Hash::Sha256] {
        let key = HmacKey::new(hash, &[0x42; 32]).unwrap();
        let msgs: Vec<Vec<u8>> = (1..200)
            .map(|n| (0..n).map(|i| (i * 7 + n) as u8).collect())
            .collect();
        let mut together = vec![[0u8; 32]; msgs.len()];
        m.hmac(
            &key,
            hash.digest_len(),
            msgs.iter()
                .zip(together.iter_mut())
                .map(|(msg, tag)| HmacJob { msg, tag }),
        )
        .unwrap();
        for (msg, t) in msgs.iter().zip(&together) {
            let mut alone = [0u8; 32];
            m.hmac(
                &key,
                hash.digest_len(),
                [HmacJob {
                    msg,
                    tag: &mut alone,
                }],
            )
            .unwrap();
            assert_eq!(t, &alone, "{hash:?} len {}", msg.len());
        }
    }
}

#[test]
fn bad_hmac_parameters() {
    let Some(mut m) = mgr() else { return };
    assert!(HmacKey::new(Hash::Sha1, &[0; 65]).is_err());
    let key = HmacKey::new(Hash::Sha1, &[0; 20]).unwrap();
    for len in [0, 21] {
        let mut t = [0u8; 32];
        let job = HmacJob {
            msg: b"x",
            tag: &mut t,
        };
        assert!(m.hmac(&key, len, [job]).is_err());
    }
    let mut t = [0u8; 32];
    let empty = HmacJob {
        msg: &[],
        tag: &mut t,
    };
    assert!(m.hmac(&key, 12, [empty]).is_err());
    assert!(!format!("{}", Error(E_INPUT)).is_empty());
}

#[test]
fn choice_by_features() {
    let sse = F_SSE4_2 | F_CMOV | F_AESNI | F_PCLMULQDQ;
    assert_eq!(Choice::for_features(F_SSE4_2 | F_CMOV), None);
    assert_eq!(Choice::for_features(sse | F_AESNI_EMU), None);
    let avx2 = sse | F_AVX | F_AVX2 | F_BMI2;
    let c = Choice::for_features(avx2 | F_SHANI).unwrap();
    assert_eq!((c.cipher, c.hash()), (Arch::Avx2, Arch::Sse));
    assert_eq!(c.name(), "ipsec-mb avx2+sha-ni");
    let c = Choice::for_features(avx2).unwrap();
    assert_eq!((c.cipher, c.hash()), (Arch::Avx2, Arch::Avx2));
    let c = Choice::for_features(avx2 | F_AVX512_SKX | F_SHANI).unwrap();
    assert_eq!((c.cipher, c.hash()), (Arch::Avx512, Arch::Sse));
    let c = Choice::for_features(sse).unwrap();
    assert_eq!(
        (c.cipher, c.hash(), c.name()),
        (Arch::Sse, Arch::Sse, "ipsec-mb sse")
    );
    // Every choice this machine's library can run initialises.
    if let Some(c) = Choice::detect() {
        assert!(Mgr::new(c).is_some());
        assert!(version().starts_with('1'), "{}", version());
    }
}
