//! Certificate checks one by one, outside the state machine: bounds come
//! before parsing and cheap checks before signatures; the classic AUTH
//! methods; CERTREQ honoured; keys in every file format we read.
//! `data/pki/` holds openssl-made vectors: an RSA key in PKCS#1 with its
//! self-signed certificate and a SHA-1 PKCS#1 v1.5 signature (method 1,
//! which aws-lc-rs verifies but does not make), a SEC1 EC key, an Ed25519
//! key and an encrypted key.

#[path = "support/pki.rs"]
mod pki;

use pki::{chain_pem, trust, Alg, Ca, Spec};
use std::time::SystemTime;
use vecgate_ike::payload::Payload;
use vecgate_ike::pki::scheme::method;
use vecgate_ike::pki::{
    key_hash, AuthError, AuthMethod, LocalCert, PeerCert, SigHashes, SigningKey, TrustStore,
};
use vecgate_ike::Identity;

fn data(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/data/pki/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn any() -> Identity {
    Identity::from_text("%any")
}

#[test]
fn bounds_come_before_any_parsing() {
    let t = TrustStore::default();
    let junk = vec![0x30u8; 100];
    let six: Vec<&[u8]> = vec![&junk; 6];
    // Six certificates of junk: refused by count, none parsed.
    assert_eq!(
        t.validate(&six, &any(), &any(), SystemTime::now()),
        Err(AuthError::TooManyCertificates(6))
    );
    let big = vec![0x30u8; 9000];
    assert_eq!(
        t.validate(&[&big], &any(), &any(), SystemTime::now()),
        Err(AuthError::CertificateTooLarge(9000))
    );
    assert!(matches!(
        t.validate(&[&junk], &any(), &any(), SystemTime::now()),
        Err(AuthError::Malformed(_))
    ));
    assert_eq!(
        t.validate(&[], &any(), &any(), SystemTime::now()),
        Err(AuthError::NoCertificate)
    );
}

#[test]
fn cheap_checks_come_before_signatures() {
    // Two roots with the same name: the forged chain names a trusted CA
    // but is not signed by it.
    let good = Ca::root("Root CA", Alg::P256);
    let forger = Ca::root("Root CA", Alg::P256);
    let t = trust(&[&good.pem], &[]);
    let id = Identity::from_text("a.vecgate.test");
    let forged = forger.issue(&Spec::new("gw-a", &["a.vecgate.test"], Alg::P256));
    let now = SystemTime::now();
    // Identity, then validity, are refused as such before any signature.
    let other = Identity::from_text("b.vecgate.test");
    assert!(matches!(
        t.validate(&[&forged.der], &other, &any(), now),
        Err(AuthError::IdentityMismatch(s)) if s.contains("not in its certificate")
    ));
    assert!(matches!(
        t.validate(&[&forged.der], &id, &other, now),
        Err(AuthError::IdentityMismatch(s)) if s.contains("remote_id")
    ));
    let old = forger.issue(&Spec {
        until: (2021, 1, 1),
        ..Spec::new("gw-a", &["a.vecgate.test"], Alg::P256)
    });
    assert!(matches!(
        t.validate(&[&old.der], &id, &any(), now),
        Err(AuthError::Expired { .. })
    ));
    // Everything cheap passes: the path verification finds the forgery.
    let e = t.validate(&[&forged.der], &id, &any(), now).unwrap_err();
    assert!(
        matches!(e, AuthError::BadSignature(_) | AuthError::UnknownCa { .. }),
        "{e}"
    );
    // The real one passes.
    let real = good.issue(&Spec::new("gw-a", &["a.vecgate.test"], Alg::P256));
    let p = t.validate(&[&real.der], &id, &any(), now).unwrap();
    assert_eq!(p.chain, vec![real.der.clone()]);
    // Addresses and e-mail names are matched in subjectAltName.
    let multi = good.issue(&Spec::new("gw-m", &["192.0.2.7", "2001:db8::7"], Alg::P256));
    for id in ["192.0.2.7", "2001:db8::7", "C=CH, O=vecgate test, CN=gw-m"] {
        assert!(t
            .validate(&[&multi.der], &Identity::from_text(id), &any(), now)
            .is_ok());
    }
    assert!(t
        .validate(
            &[&multi.der],
            &Identity::from_text("192.0.2.8"),
            &any(),
            now
        )
        .is_err());
}

#[test]
fn recheck_sees_a_crl_loaded_later_and_time_passing() {
    let root = Ca::root("Root CA", Alg::Ed25519);
    let inter = root.intermediate("Intermediate CA", Alg::Ed25519);
    let leaf = inter.issue(&Spec {
        until: (2090, 1, 1),
        ..Spec::new("gw-a", &["a.vecgate.test"], Alg::Ed25519)
    });
    let t = trust(&[&root.pem], &[]);
    let id = Identity::from_text("a.vecgate.test");
    let now = SystemTime::now();
    let p = t
        .validate(&[&leaf.der, &inter.der], &id, &any(), now)
        .unwrap();
    assert!(t.recheck(&p, now).is_ok());
    let crl = inter.crl(&[leaf.serial]);
    assert!(matches!(
        trust(&[&root.pem], &[&crl]).recheck(&p, now),
        Err(AuthError::Revoked { .. })
    ));
    // The intermediate revoked by the root: the chain fails too.
    let root_crl = root.crl(&[inter.serial]);
    let t2 = trust(&[&root.pem], &[&root_crl]);
    let inter_serial_revoked = t2.recheck(&p, now);
    assert!(
        matches!(inter_serial_revoked, Err(AuthError::Revoked { ref subject }) if subject.contains("Intermediate")),
        "{inter_serial_revoked:?}"
    );
    let later = vecgate_ike::pki::system_time(4_102_444_800); // 2100-01-01
    assert!(matches!(
        t.recheck(&p, later),
        Err(AuthError::Expired { .. })
    ));
}

#[test]
fn classic_methods_when_the_peer_announced_no_hashes() {
    let ca = Ca::root("Root CA", Alg::P256);
    let msg = b"InitiatorSignedOctets";
    for (alg, m) in [
        (Alg::P256, method::ECDSA_256),
        (Alg::P384, method::ECDSA_384),
    ] {
        let leaf = ca.issue(&Spec::new("gw", &["gw.vecgate.test"], alg));
        let local = leaf.local();
        let (used, sig) = local.sign(SigHashes::default(), msg).unwrap();
        assert_eq!(used.number(), m);
        assert!(used.to_string().ends_with("(classic)"));
        let peer = PeerCert::from_chain(vec![leaf.der.clone()]).unwrap();
        assert_eq!(peer.key().verify(m, &sig, msg, SigHashes::ours()), Ok(used));
        let mut bad = sig.clone();
        bad[5] ^= 1;
        assert!(matches!(
            peer.key().verify(m, &bad, msg, SigHashes::ours()),
            Err(AuthError::BadSignature(_))
        ));
        // Method 14 when SHA-2 was announced.
        let (used, sig) = local.sign(SigHashes::ours(), msg).unwrap();
        assert_eq!(used.number(), method::DIGITAL_SIGNATURE);
        assert!(peer.key().verify(14, &sig, msg, SigHashes::ours()).is_ok());
        // A scheme we did not announce is refused.
        assert!(matches!(
            peer.key().verify(14, &sig, msg, SigHashes::default()),
            Err(AuthError::Unsupported(_))
        ));
    }
    // RSA needs RFC 7427 (a SHA-1 signature is not made).
    let rsa = ca
        .issue(&Spec::new("gw", &["gw.vecgate.test"], Alg::Rsa))
        .local();
    assert!(matches!(
        rsa.sign(SigHashes::default(), msg),
        Err(AuthError::Unsupported(_))
    ));
    // Method 1 is verified: openssl's SHA-1 PKCS#1 v1.5 signature.
    let cert = vecgate_ike::pki::load_certs(&data("rsa.crt")).unwrap();
    let peer = PeerCert::from_chain(cert).unwrap();
    assert_eq!(
        peer.key().verify(
            method::RSA,
            &data("rsa_sha1.sig"),
            &data("rsa_sha1.msg"),
            SigHashes::ours()
        ),
        Ok(AuthMethod::RsaSha1)
    );
    assert!(peer
        .key()
        .verify(
            method::ECDSA_256,
            &data("rsa_sha1.sig"),
            &data("rsa_sha1.msg"),
            SigHashes::ours()
        )
        .is_err());
    // The PSK method is no signature.
    assert_eq!(
        peer.key()
            .verify(method::PSK, &[0; 32], msg, SigHashes::ours()),
        Err(AuthError::WrongMethod(method::PSK))
    );
}

#[test]
fn certreq_names_what_the_peer_trusts() {
    let root = Ca::root("Root CA", Alg::P256);
    let inter = root.intermediate("Intermediate CA", Alg::P256);
    let leaf = inter.issue(&Spec::new("gw", &["gw.vecgate.test"], Alg::P256));
    let pem = chain_pem(&leaf, &[&inter]);
    let l = LocalCert::new(
        pem.as_bytes(),
        SigningKey::from_bytes(leaf.key_pem.as_bytes()).unwrap(),
    )
    .unwrap();
    let count = |p: Vec<Payload>| p.len();
    let inter_hash = {
        let (_, c) = x509_parser::parse_x509_certificate(&inter.der).unwrap();
        key_hash(c.public_key().raw)
    };
    // The peer trusts the intermediate itself: the end entity suffices.
    assert_eq!(count(l.cert_payloads(&[inter_hash])), 1);
    // Trusting the root, or nothing said: the intermediate goes along.
    let root_hash = {
        let (_, c) = x509_parser::parse_x509_certificate(&root.der).unwrap();
        key_hash(c.public_key().raw)
    };
    assert_eq!(count(l.cert_payloads(&[root_hash])), 2);
    assert_eq!(count(l.cert_payloads(&[])), 2);
    // Our CERTREQ names our anchors by the same hash.
    let t = trust(&[&root.pem], &[]);
    assert_eq!(t.ca_hashes().collect::<Vec<_>>(), vec![&root_hash]);
}

#[test]
fn keys_in_every_format() {
    let rsa = SigningKey::from_bytes(&data("rsa_pkcs1.key")).unwrap();
    assert_eq!(format!("{rsa:?}"), "SigningKey(Rsa, <redacted>)");
    let ec = SigningKey::from_bytes(&data("ec_sec1.key")).unwrap();
    assert_eq!(format!("{ec:?}"), "SigningKey(P256, <redacted>)");
    let ed = SigningKey::from_bytes(&data("ed25519.key")).unwrap();
    assert_eq!(format!("{ed:?}"), "SigningKey(Ed25519, <redacted>)");
    let e = SigningKey::from_bytes(&data("ec_encrypted.key")).unwrap_err();
    assert!(e.contains("encrypted"), "{e}");
    assert!(SigningKey::from_bytes(b"-----BEGIN NOTHING-----\n").is_err());
    assert!(SigningKey::from_bytes(&[0x30, 0x03, 1, 2, 3]).is_err());
    // A key that is not the certificate's is refused.
    let e = LocalCert::new(&data("rsa.crt"), ec).unwrap_err();
    assert!(e.contains("not the certificate's"), "{e}");
    assert!(LocalCert::new(&data("rsa.crt"), rsa).is_ok());
    // DER keys (PKCS#8) as rcgen writes them.
    let k = pki::key(Alg::P384);
    assert!(SigningKey::from_bytes(k.serialized_der()).is_ok());
}

#[test]
fn local_identity_must_be_in_the_certificate() {
    let ca = Ca::root("Root CA", Alg::P256);
    let leaf = ca.issue(&Spec::new(
        "gw",
        &["gw.vecgate.test", "192.0.2.1"],
        Alg::P256,
    ));
    let l = leaf.local();
    assert!(l.identity(&Identity::from_text("gw.vecgate.test")).is_ok());
    assert!(l.identity(&Identity::from_text("192.0.2.1")).is_ok());
    // A DN is sent as the certificate's own subject bytes.
    let dn = l
        .identity(&Identity::from_text("c=CH, o=VECGATE TEST, cn=gw"))
        .unwrap();
    assert_eq!(dn, l.subject_id());
    let e = l
        .identity(&Identity::from_text("other.vecgate.test"))
        .unwrap_err();
    assert!(e.contains("gw.vecgate.test"), "{e}");
}

#[test]
fn openssl_made_vectors_validate() {
    // The fuzz targets' PKI: an Ed25519 CA with an (empty) CRL and two
    // end entities, made by openssl.
    let mut t = TrustStore::default();
    assert_eq!(t.add_anchors(&data("fuzz_ca.crt")), Ok(1));
    assert_eq!(t.add_crls(&data("fuzz_ca.crl")), Ok(1));
    assert_eq!(t.crls()[0].revoked, 0);
    assert_eq!(t.crls()[0].issuer, "C=CH, O=vecgate fuzz, CN=Fuzz CA");
    let a = vecgate_ike::pki::load_certs(&data("fuzz_a.crt")).unwrap();
    let p = t
        .validate(
            &[&a[0]],
            &Identity::from_text("a.vecgate.test"),
            &any(),
            SystemTime::now(),
        )
        .unwrap();
    assert_eq!(p.info.subject, "C=CH, O=vecgate fuzz, CN=gw-a");
    let key = SigningKey::from_bytes(&data("fuzz_a.key")).unwrap();
    assert!(LocalCert::new(&data("fuzz_a.crt"), key).is_ok());
}
