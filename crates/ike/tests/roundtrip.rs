//! Property tests: every payload we can build parses back to itself, plain
//! and inside SK; arbitrary bytes never panic the parsers or the state
//! machine.

use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;
use vecgate_ike::crypto::{DhGroup, Encr, IkeKeys, IkeSuite, Integ, Prf};
use vecgate_ike::message::{Header, Message};
use vecgate_ike::payload::{
    Delete, Identity, Notify, Payload, Proposal, TrafficSelector, Transform,
};
use vecgate_ike::{Ike, IkeConfig};

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn transform() -> impl Strategy<Value = Transform> {
    (1u8..6, any::<u16>(), prop::option::of(any::<u16>())).prop_map(|(ty, id, k)| Transform {
        ty,
        id,
        key_len: k,
        unknown_attr: false,
    })
}

fn proposal() -> impl Strategy<Value = Proposal> {
    (
        any::<u8>(),
        1u8..4,
        bytes(9),
        prop::collection::vec(transform(), 0..6),
    )
        .prop_map(|(num, protocol, spi, transforms)| Proposal {
            num,
            protocol,
            spi,
            transforms,
        })
}

fn ip_pair() -> impl Strategy<Value = (IpAddr, IpAddr)> {
    prop_oneof![
        (any::<u32>(), any::<u32>())
            .prop_map(|(a, b)| (IpAddr::V4(Ipv4Addr::from(a)), IpAddr::V4(Ipv4Addr::from(b)))),
        (any::<u128>(), any::<u128>())
            .prop_map(|(a, b)| (IpAddr::V6(Ipv6Addr::from(a)), IpAddr::V6(Ipv6Addr::from(b)))),
    ]
}

fn ts() -> impl Strategy<Value = TrafficSelector> {
    (any::<u8>(), any::<u16>(), any::<u16>(), ip_pair()).prop_map(|(p, sp, ep, (s, e))| {
        TrafficSelector {
            ip_proto: p,
            start_port: sp,
            end_port: ep,
            start: s,
            end: e,
        }
    })
}

fn identity() -> impl Strategy<Value = Identity> {
    prop_oneof![
        any::<u32>().prop_map(|a| Identity::Ipv4(a.into())),
        any::<u128>().prop_map(|a| Identity::Ipv6(a.into())),
        "[a-z0-9.-]{0,30}".prop_map(Identity::Fqdn),
        "[a-z]{1,8}@[a-z]{1,8}".prop_map(Identity::Rfc822),
        bytes(40).prop_map(Identity::KeyId),
        bytes(60).prop_map(Identity::Dn),
        (prop::sample::select(vec![4u8, 10, 12]), bytes(20))
            .prop_map(|(t, d)| Identity::Other(t, d)),
    ]
}

fn payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        prop::collection::vec(proposal(), 1..4).prop_map(Payload::Sa),
        (any::<u16>(), bytes(300)).prop_map(|(group, data)| Payload::Ke { group, data }),
        prop::collection::vec(any::<u8>(), 16..=256).prop_map(Payload::Nonce),
        identity().prop_map(Payload::IdI),
        identity().prop_map(Payload::IdR),
        (any::<u8>(), bytes(64)).prop_map(|(method, data)| Payload::Auth { method, data }),
        (any::<u8>(), bytes(300)).prop_map(|(encoding, data)| Payload::Cert { encoding, data }),
        (any::<u8>(), bytes(80)).prop_map(|(encoding, data)| Payload::CertReq { encoding, data }),
        (0u8..4, bytes(9), any::<u16>(), bytes(64)).prop_map(|(protocol, spi, ty, data)| {
            Payload::Notify(Notify {
                protocol,
                spi,
                ty,
                data,
            })
        }),
        Just(Payload::Delete(Delete {
            protocol: 1,
            spis: vec![]
        })),
        prop::collection::vec(any::<u32>(), 0..8)
            .prop_map(|spis| Payload::Delete(Delete { protocol: 3, spis })),
        prop::collection::vec(ts(), 0..5).prop_map(Payload::TsI),
        prop::collection::vec(ts(), 0..5).prop_map(Payload::TsR),
        bytes(40).prop_map(Payload::Vendor),
        (prop::sample::select(vec![47u8, 48, 99]), bytes(40))
            .prop_map(|(ty, data)| Payload::Other { ty, data }),
    ]
}

fn header() -> impl Strategy<Value = Header> {
    (
        any::<u64>(),
        any::<u64>(),
        34u8..38,
        any::<u8>(),
        any::<u32>(),
    )
        .prop_map(|(spi_i, spi_r, exchange, flags, msg_id)| Header {
            spi_i,
            spi_r,
            next: 0,
            exchange,
            flags,
            msg_id,
            length: 0,
        })
}

fn suite() -> impl Strategy<Value = IkeSuite> {
    prop::sample::select(vec![
        IkeSuite {
            encr: Encr::AesGcm16(16),
            prf: Prf::HmacSha256,
            integ: None,
            dh: DhGroup::Curve25519,
        },
        IkeSuite {
            encr: Encr::AesGcm16(32),
            prf: Prf::HmacSha384,
            integ: None,
            dh: DhGroup::Ecp256,
        },
        IkeSuite {
            encr: Encr::AesCbc(16),
            prf: Prf::HmacSha1,
            integ: Some(Integ::HmacSha1_96),
            dh: DhGroup::Modp2048,
        },
        IkeSuite {
            encr: Encr::AesCbc(32),
            prf: Prf::HmacSha512,
            integ: Some(Integ::HmacSha512_256),
            dh: DhGroup::Modp2048,
        },
    ])
}

proptest! {
    #[test]
    fn plain_round_trip(h in header(), payloads in prop::collection::vec(payload(), 0..8)) {
        let m = Message { header: h, payloads };
        let wire = m.build_plain().unwrap();
        let back = Message::parse_plain(&wire).unwrap();
        prop_assert_eq!(back.payloads, m.payloads);
        prop_assert_eq!(back.header.msg_id, h.msg_id);
        prop_assert_eq!(back.header.length as usize, wire.len());
    }

    #[test]
    fn protected_round_trip(
        h in header(),
        payloads in prop::collection::vec(payload(), 0..6),
        s in suite(),
        seed in bytes(64),
    ) {
        let keys = IkeKeys::initial(&s, &seed, &[1; 16], &[2; 16], h.spi_i, h.spi_r).unwrap();
        let m = Message { header: h, payloads };
        let wire = m.build_protected(&keys.sk_keys(&s, true)).unwrap();
        let back = Message::parse_protected(&wire, &keys.sk_keys(&s, false)).unwrap();
        prop_assert_eq!(back.payloads, m.payloads);
    }

    #[test]
    fn parsers_never_panic(data in bytes(600)) {
        let _ = Message::parse_plain(&data);
        let _ = Header::parse(&data);
        let _ = vecgate_ike::payload::decode_chain(33, &data);
        let _ = vecgate_ike::payload::sa::parse(&data);
        let _ = vecgate_ike::payload::ts::parse(&data);
    }

    #[test]
    fn mutated_messages_never_panic(
        payloads in prop::collection::vec(payload(), 1..5),
        h in header(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut wire = Message { header: h, payloads }.build_plain().unwrap();
        for (i, v) in flips {
            let at = i.index(wire.len());
            wire[at] = v;
        }
        let _ = Message::parse_plain(&wire);
    }
}

#[test]
fn state_machine_survives_random_datagrams() {
    let cfg = IkeConfig::new(
        "192.0.2.1:500".parse().unwrap(),
        "192.0.2.2:500".parse().unwrap(),
        b"k",
    );
    let ike = std::cell::RefCell::new(Ike::new(cfg).unwrap());
    let mut runner = proptest::test_runner::TestRunner::default();
    let now = Instant::now();
    runner
        .run(
            &(header(), prop::collection::vec(payload(), 0..6)),
            |(mut h, p)| {
                h.exchange = 34;
                h.spi_r = 0;
                h.msg_id = 0;
                h.flags = 0x08;
                let wire = Message {
                    header: h,
                    payloads: p,
                }
                .build_plain()
                .unwrap();
                let mut ike = ike.borrow_mut();
                ike.handle_datagram(
                    &wire,
                    "192.0.2.1:500".parse().unwrap(),
                    "192.0.2.2:500".parse().unwrap(),
                    now,
                );
                while ike.poll_action().is_some() {}
                Ok(())
            },
        )
        .unwrap();
}
