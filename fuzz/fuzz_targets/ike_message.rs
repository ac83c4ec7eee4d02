//! IKEv2 message parsing: plain, SK-protected (with fixed keys), payload
//! chains, and the responder state machine fed arbitrary datagrams.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::Instant;
use vecgate_ike::crypto::{DhGroup, Encr, IkeKeys, IkeSuite, Integ, Prf};
use vecgate_ike::message::{Header, Message};
use vecgate_ike::{Ike, IkeConfig};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::parse_plain(data) {
        // Whatever parses must build again and parse to the same payloads.
        if let Ok(wire) = m.build_plain() {
            let again = Message::parse_plain(&wire).expect("re-parse of built message");
            assert_eq!(again.payloads, m.payloads);
        }
    }
    let _ = Header::parse(data);
    for first in [33u8, 41, 44, 46] {
        let _ = vecgate_ike::payload::decode_chain(first, data);
    }
    for suite in [
        IkeSuite {
            encr: Encr::AesGcm16(16),
            prf: Prf::HmacSha256,
            integ: None,
            dh: DhGroup::Curve25519,
        },
        IkeSuite {
            encr: Encr::AesCbc(16),
            prf: Prf::HmacSha1,
            integ: Some(Integ::HmacSha1_96),
            dh: DhGroup::Modp2048,
        },
    ] {
        if let Ok(k) = IkeKeys::initial(&suite, &[0; 32], &[1; 16], &[2; 16], 1, 2) {
            let _ = Message::parse_protected(data, &k.sk_keys(&suite, false));
        }
    }
    let cfg = IkeConfig::new(
        "192.0.2.1:500".parse().unwrap(),
        "192.0.2.2:500".parse().unwrap(),
        b"k",
    );
    if let Ok(mut ike) = Ike::new(cfg) {
        let now = Instant::now();
        ike.handle_datagram(
            data,
            "192.0.2.1:500".parse().unwrap(),
            "192.0.2.2:500".parse().unwrap(),
            now,
        );
        ike.handle_datagram(
            data,
            "192.0.2.1:4500".parse().unwrap(),
            "192.0.2.2:4500".parse().unwrap(),
            now,
        );
        ike.handle_timeout(now);
        while ike.poll_action().is_some() {}
    }
});
