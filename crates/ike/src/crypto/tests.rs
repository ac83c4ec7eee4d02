use super::dh::{MODP2048_P, X25519_LOW_ORDER};
use super::*;
use crate::message::{exchange, Header, Message};
use crate::payload::{Notify, Payload};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn hmac_rfc4231_case2() {
    let out = Prf::HmacSha256.prf(b"Jefe", &[b"what do ya ", b"want for nothing?"]);
    assert_eq!(
        out.to_vec(),
        hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    );
    let t = Integ::HmacSha256_128.mac(b"Jefe", b"what do ya want for nothing?");
    assert_eq!(t, hex("5bdcc146bf60754e6a042426089575c7"));
}

#[test]
fn prf_plus_chains_blocks() {
    let k = b"key";
    let s = b"seed";
    let out = Prf::HmacSha1.prf_plus(k, s, 45).unwrap();
    let t1 = Prf::HmacSha1.prf(k, &[s, &[1]]);
    let t2 = Prf::HmacSha1.prf(k, &[&t1, s, &[2]]);
    let t3 = Prf::HmacSha1.prf(k, &[&t2, s, &[3]]);
    assert_eq!(&out[..20], &t1[..]);
    assert_eq!(&out[20..40], &t2[..]);
    assert_eq!(&out[40..], &t3[..5]);
    assert!(Prf::HmacSha1.prf_plus(k, s, 255 * 20 + 1).is_err());
}

#[test]
fn x25519_rfc7748() {
    let a = DhPrivate::from_private_bytes(
        DhGroup::Curve25519,
        &hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"),
    )
    .unwrap();
    assert_eq!(
        a.public(),
        &hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")[..]
    );
    let s = a
        .agree(&hex(
            "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
        ))
        .unwrap();
    assert_eq!(
        s.to_vec(),
        hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
    );
}

#[test]
fn p256_rfc5903() {
    let i = DhPrivate::from_private_bytes(
        DhGroup::Ecp256,
        &hex("C88F01F510D9AC3F70A292DAA2316DE544E9AAB8AFE84049C62A9C57862D1433"),
    )
    .unwrap();
    let gi = hex(
        "DAD0B65394221CF9B051E1FECA5787D098DFE637FC90B9EF945D0C3772581180
         5271A0461CDB8252D61F1C456FA3E59AB1F45B33ACCF5F58389E0577B8990BB3",
    );
    assert_eq!(i.public(), &gi[..]);
    let gr = hex(
        "D12DFB5289C8D4F81208B70270398C342296970A0BCCB74C736FC7554494BF63
         56FBF3CA366CC23E8157854C13C58D6AAC23F046ADA30F8353E74F33039872AB",
    );
    let s = i.agree(&gr).unwrap();
    assert_eq!(
        s.to_vec(),
        hex("D6840F6B42F6EDAFD13116E0E12565202FEF8E9ECE7DCE03812464D04B9442DE")
    );
    // A point not on the curve is refused.
    let mut bad = gr.clone();
    bad[63] ^= 1;
    assert!(i.agree(&bad).is_err());
    assert!(i.agree(&gr[..32]).is_err());
}

#[test]
fn modp2048_agreement_and_validation() {
    let one = DhPrivate::from_private_bytes(DhGroup::Modp2048, &[1]).unwrap();
    let mut two = vec![0u8; 256];
    two[255] = 2;
    assert_eq!(one.public(), &two[..]);
    let a = DhPrivate::generate(DhGroup::Modp2048).unwrap();
    let b = DhPrivate::generate(DhGroup::Modp2048).unwrap();
    assert_ne!(a.public(), b.public());
    let sa = a.agree(b.public()).unwrap();
    let sb = b.agree(a.public()).unwrap();
    assert_eq!(sa.len(), 256);
    assert_eq!(*sa, *sb);
    let mut one_v = vec![0u8; 256];
    one_v[255] = 1;
    assert!(a.agree(&one_v).is_err());
    assert!(a.agree(&[0xff; 256]).is_err());
    let pm1 = hex(MODP2048_P);
    let mut pm1 = pm1.clone();
    pm1[255] -= 1;
    assert!(a.agree(&pm1).is_err());
}

#[test]
fn x25519_low_order_points_give_the_zero_secret() {
    // Each listed point, fed to aws-lc directly (bypassing
    // `check_public`), yields the all-zero secret, which it refuses:
    // the list holds what RFC 7748 §6.1 warns about.
    for (i, u) in X25519_LOW_ORDER.iter().enumerate() {
        let k = agreement::PrivateKey::generate(&agreement::X25519).unwrap();
        let r = agreement::agree(
            &k,
            agreement::UnparsedPublicKey::new(&agreement::X25519, u),
            (),
            |s| Ok(s.to_vec()),
        );
        assert!(
            r.is_err() || r.is_ok_and(|s| s.iter().all(|b| *b == 0)),
            "point {i}"
        );
        assert!(DhGroup::Curve25519.check_public(u).is_err(), "point {i}");
    }
    let mut u = X25519_LOW_ORDER[4];
    u[31] |= 0x80; // the masked top bit does not hide it
    assert!(DhGroup::Curve25519.check_public(&u).is_err());
    let good = DhPrivate::generate(DhGroup::Curve25519).unwrap();
    assert!(DhGroup::Curve25519.check_public(good.public()).is_ok());
}

#[test]
fn ecdh_groups_agree() {
    for g in [DhGroup::Ecp256, DhGroup::Curve25519] {
        let a = DhPrivate::generate(g).unwrap();
        let b = DhPrivate::generate(g).unwrap();
        assert_eq!(a.public().len(), g.public_len());
        assert_eq!(*a.agree(b.public()).unwrap(), *b.agree(a.public()).unwrap());
    }
}

fn suites() -> Vec<IkeSuite> {
    vec![
        IkeSuite {
            encr: Encr::AesGcm16(16),
            prf: Prf::HmacSha256,
            integ: None,
            dh: DhGroup::Curve25519,
        },
        IkeSuite {
            encr: Encr::AesGcm16(32),
            prf: Prf::HmacSha256,
            integ: None,
            dh: DhGroup::Curve25519,
        },
        IkeSuite {
            encr: Encr::AesCbc(32),
            prf: Prf::HmacSha256,
            integ: Some(Integ::HmacSha256_128),
            dh: DhGroup::Modp2048,
        },
        IkeSuite {
            encr: Encr::AesCbc(16),
            prf: Prf::HmacSha1,
            integ: Some(Integ::HmacSha1_96),
            dh: DhGroup::Ecp256,
        },
    ]
}

#[test]
fn sk_round_trip_and_tamper() {
    for suite in suites() {
        let keys = IkeKeys::initial(&suite, &[7; 32], &[1; 32], &[2; 32], 0x1111, 0x2222).unwrap();
        assert_eq!(keys.sk_ei.len(), suite.encr.keymat_len());
        assert_ne!(*keys.sk_ei, *keys.sk_er);
        let i = keys.sk_keys(&suite, true);
        let r = keys.sk_keys(&suite, false);
        let msg = Message {
            header: Header {
                spi_i: 0x1111,
                spi_r: 0x2222,
                next: 0,
                exchange: exchange::INFORMATIONAL,
                flags: 0x08,
                msg_id: 5,
                length: 0,
            },
            payloads: vec![Payload::Notify(Notify::new(16384, vec![1, 2, 3]))],
        };
        let wire = msg.build_protected(&i).unwrap();
        let back = Message::parse_protected(&wire, &r).unwrap();
        assert_eq!(back.payloads, msg.payloads);
        assert_eq!(back.header.msg_id, 5);
        // Our own outbound keys do not open our messages.
        assert_eq!(Message::parse_protected(&wire, &i), Err(Error::Integrity));
        for pos in [0usize, 20, 40, wire.len() - 1] {
            let mut bad = wire.clone();
            bad[pos] ^= 0x40;
            assert!(Message::parse_protected(&bad, &r).is_err(), "pos {pos}");
        }
        for n in 0..wire.len() {
            assert!(Message::parse_protected(&wire[..n], &r).is_err());
        }
    }
}

#[test]
fn child_keymat_order_and_pfs() {
    let [ei, ai, er, ar] =
        child_keymat(Prf::HmacSha256, &[9; 32], None, &[1; 16], &[2; 16], 20, 0).unwrap();
    let all = Prf::HmacSha256
        .prf_plus(&[9; 32], &[[1u8; 16], [2u8; 16]].concat(), 40)
        .unwrap();
    assert_eq!([&ei[..], &er[..]].concat(), all.to_vec());
    assert!(ai.is_empty() && ar.is_empty());
    let [ei2, ..] = child_keymat(
        Prf::HmacSha256,
        &[9; 32],
        Some(&[5; 32]),
        &[1; 16],
        &[2; 16],
        20,
        0,
    )
    .unwrap();
    assert_ne!(*ei, *ei2);
}

#[test]
fn nat_hash_depends_on_every_input() {
    let a = nat_hash(1, 2, "10.0.0.1".parse().unwrap(), 500);
    assert_eq!(a.len(), 20);
    assert_ne!(a, nat_hash(1, 2, "10.0.0.1".parse().unwrap(), 4500));
    assert_ne!(a, nat_hash(1, 3, "10.0.0.1".parse().unwrap(), 500));
    assert_ne!(a, nat_hash(1, 2, "10.0.0.2".parse().unwrap(), 500));
}

#[test]
fn debug_redacts() {
    let k = IkeKeys::initial(&suites()[0], &[7; 32], &[1; 32], &[2; 32], 1, 2).unwrap();
    assert!(!format!("{k:?}").contains('7'));
    let d = DhPrivate::generate(DhGroup::Curve25519).unwrap();
    assert!(format!("{d:?}").contains("redacted"));
}
