//! Certificates and the payloads that carry them, as a peer or a file
//! presents them: CERT / CERTREQ payload bodies, certificate chains
//! checked against a fixed trust store (anchor and CRL made by openssl),
//! the AUTH data of every method against a fixed key, PEM/DER files of
//! certificates, CRLs and keys, and DN text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::SystemTime;
use vecgate_ike::payload::{kind, Identity, Payload};
use vecgate_ike::pki::name::{dn_from_text, id_matches};
use vecgate_ike::pki::scheme::Scheme;
use vecgate_ike::pki::{load_certs, load_crls, PeerCert, SigHashes, SigningKey, TrustStore};

const CA: &[u8] = include_bytes!("../../crates/ike/tests/data/pki/fuzz_ca.crt");
const CRL: &[u8] = include_bytes!("../../crates/ike/tests/data/pki/fuzz_ca.crl");
const PEER: &[u8] = include_bytes!("../../crates/ike/tests/data/pki/fuzz_a.crt");

fuzz_target!(|data: &[u8]| {
    let Some((&op, rest)) = data.split_first() else {
        return;
    };
    // Payload bodies parse and build back to the same bytes.
    for ty in [kind::CERT, kind::CERTREQ] {
        if let Ok(p) = Payload::decode(ty, false, rest) {
            let mut out = Vec::new();
            p.emit_body(&mut out);
            assert_eq!(out, rest);
        }
    }
    let mut t = TrustStore::default();
    t.add_anchors(CA).expect("fuzz CA");
    t.add_crls(CRL).expect("fuzz CRL");
    match op % 6 {
        0 => {
            // A chain: lengths in the input, then the certificates.
            let mut certs = Vec::new();
            let mut r = rest;
            while let [hi, lo, tail @ ..] = r {
                let n = usize::from(u16::from_be_bytes([*hi, *lo])) % (tail.len() + 1);
                certs.push(&tail[..n]);
                r = &tail[n..];
            }
            let id = Identity::from_text("a.vecgate.test");
            let any = Identity::from_text("%any");
            if let Ok(p) = t.validate(&certs, &id, &any, SystemTime::now()) {
                assert!(t.recheck(&p, SystemTime::now()).is_ok());
            }
        }
        1 => {
            // The real peer certificate with the input as AUTH data, for
            // each method number in the input's first byte.
            let peer = PeerCert::from_chain(load_certs(PEER).expect("fuzz peer")).expect("peer");
            if let Some((&m, sig)) = rest.split_first() {
                let _ = peer.key().verify(m, sig, b"octets", SigHashes::ours());
            }
            let _ = Scheme::from_alg_id(rest);
            let _ = SigHashes::parse(rest).emit();
        }
        2 => {
            let _ = load_certs(rest).map(|c| PeerCert::from_chain(c));
            let _ = TrustStore::default().add_anchors(rest);
            let _ = TrustStore::default().pin_peer(rest);
        }
        3 => {
            let _ = load_crls(rest);
            let _ = TrustStore::default().add_crls(rest);
        }
        4 => {
            let _ = SigningKey::from_bytes(rest);
        }
        _ => {
            let text = String::from_utf8_lossy(rest);
            let (a, b) = text.split_once('|').unwrap_or((&text, ""));
            if let Some(der) = dn_from_text(a) {
                let id = Identity::Dn(der);
                assert!(id_matches(&id, &id));
                let _ = id.to_string();
            }
            let _ = id_matches(&Identity::from_text(a), &Identity::from_text(b));
            let _ = Identity::parse(rest).map(|i| i.to_string());
        }
    }
});
