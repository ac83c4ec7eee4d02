//! IKE_AUTH with certificates (RFC 7296 §2.15, RFC 7427) between two
//! state machines, with a PKI made in the test: every key type through an
//! intermediate CA, mixed PSK/certificate sides, each refusal with its
//! reason and nothing installed, revocation at a rekey after a reload,
//! and the HA snapshot carrying the peer's chain.

#[path = "support/net.rs"]
mod net;
#[path = "support/pki.rs"]
mod pki;

use net::*;
use pki::{chain_pem, trust, Alg, Ca, Leaf, Spec};
use std::sync::Arc;
use std::time::Duration;
use vecgate_ike::pki::{AuthError, AuthMethod, SigningKey};
use vecgate_ike::{Event, FailReason, Identity, IkeConfig, LocalAuth, RemoteAuth};

/// A root, an intermediate under it, and an end entity for each side.
struct World {
    root: Ca,
    inter: Ca,
    a: Leaf,
    b: Leaf,
}

fn world(alg: Alg) -> World {
    let root = Ca::root("Root CA", alg);
    let inter = root.intermediate("Intermediate CA", alg);
    let a = inter.issue(&Spec::new("gw-a", &["a.vecgate.test"], alg));
    let b = inter.issue(&Spec::new("gw-b", &["b.vecgate.test", "192.0.2.2"], alg));
    World { root, inter, a, b }
}

fn local(leaf: &Leaf, inter: &Ca) -> LocalAuth {
    let pem = chain_pem(leaf, &[inter]);
    let key = SigningKey::from_bytes(leaf.key_pem.as_bytes()).unwrap();
    LocalAuth::Cert(Arc::new(
        vecgate_ike::pki::LocalCert::new(pem.as_bytes(), key).unwrap(),
    ))
}

/// Both sides sign; each trusts the root; ids are the FQDNs.
fn cert_pair(w: &World, f: impl FnOnce(&mut IkeConfig, &mut IkeConfig)) -> Net {
    pair(|a, b| {
        a.local_auth = local(&w.a, &w.inter);
        b.local_auth = local(&w.b, &w.inter);
        a.remote_auth = RemoteAuth::Cert(trust(&[&w.root.pem], &[]));
        b.remote_auth = RemoteAuth::Cert(trust(&[&w.root.pem], &[]));
        a.local_id = Identity::from_text("a.vecgate.test");
        b.local_id = Identity::from_text("b.vecgate.test");
        a.remote_id = Identity::from_text("b.vecgate.test");
        b.remote_id = Identity::from_text("a.vecgate.test");
        f(a, b);
    })
}

fn peer_auth_failures(p: &Peer) -> Vec<AuthError> {
    failed(p)
        .into_iter()
        .filter_map(|(r, _)| match r {
            FailReason::PeerAuth(e) => Some(e),
            _ => None,
        })
        .collect()
}

#[test]
fn every_key_type_through_an_intermediate() {
    for (alg, pss, want) in [
        (Alg::P256, true, "ecdsa-sha256"),
        (Alg::P384, true, "ecdsa-sha384"),
        (Alg::Ed25519, true, "ed25519"),
        (Alg::Rsa, true, "rsa-pss-sha256"),
        (Alg::Rsa, false, "rsa-pkcs1-sha256"),
    ] {
        let w = world(alg);
        let mut n = cert_pair(&w, |a, b| {
            for c in [a, b] {
                if let LocalAuth::Cert(l) = &mut c.local_auth {
                    Arc::get_mut(l).unwrap().rsa_pss = pss;
                }
            }
        });
        n.establish();
        assert!(established(&n.a) && established(&n.b), "{alg:?}");
        assert!(
            failed(&n.a).is_empty() && failed(&n.b).is_empty(),
            "{alg:?}"
        );
        assert_pair(&n.a.installed[0], &n.b.installed[0]);
        for (me, peer_cn, peer_id) in [
            (&n.a, "gw-b", "b.vecgate.test"),
            (&n.b, "gw-a", "a.vecgate.test"),
        ] {
            let info = me.ike.auth_info().expect("auth info");
            assert_eq!(info.remote.to_string(), want, "{alg:?}");
            assert_eq!(info.local.to_string(), want, "{alg:?}");
            assert_eq!(info.peer_id, Identity::from_text(peer_id));
            let pc = info.peer_cert.as_ref().unwrap();
            assert_eq!(
                pc.info.subject,
                format!("C=CH, O=vecgate test, CN={peer_cn}")
            );
            assert_eq!(pc.info.issuer, "C=CH, O=vecgate test, CN=Intermediate CA");
            // The path as verified: end entity and intermediate.
            assert_eq!(pc.chain.len(), 2);
        }
    }
}

#[test]
fn certificate_one_way_psk_the_other() {
    let w = world(Alg::P256);
    let mut n = pair(|a, b| {
        a.local_auth = local(&w.a, &w.inter);
        a.local_id = Identity::from_text("a.vecgate.test");
        b.remote_auth = RemoteAuth::Cert(trust(&[&w.root.pem], &[]));
        b.remote_id = Identity::from_text("a.vecgate.test");
        // b proves itself with the PSK, which a expects.
    });
    n.establish();
    assert!(established(&n.a) && established(&n.b));
    let (ia, ib) = (n.a.ike.auth_info().unwrap(), n.b.ike.auth_info().unwrap());
    assert_eq!((ia.local, ia.remote), (ib.remote, ib.local));
    assert_eq!(ia.remote, AuthMethod::Psk);
    assert_eq!(ib.remote.to_string(), "ecdsa-sha256");
    assert!(ia.peer_cert.is_none() && ib.peer_cert.is_some());
}

#[test]
fn distinguished_name_identities_and_wildcards() {
    let w = world(Alg::Ed25519);
    let mut n = cert_pair(&w, |a, b| {
        // A DN local_id is sent as the certificate's own subject bytes.
        a.local_id = Identity::from_text("C=CH, O=vecgate test, CN=gw-a");
        b.remote_id = Identity::from_text("C=CH, O=vecgate test, CN=*");
        a.remote_id = Identity::from_text("%any");
    });
    n.establish();
    assert!(established(&n.a) && established(&n.b));
    let id = &n.b.ike.auth_info().unwrap().peer_id;
    assert_eq!(id.to_string(), "C=CH, O=vecgate test, CN=gw-a");
}

/// `b` refuses `a`'s certificate for `why`: AUTHENTICATION_FAILED to
/// `a`, the reason on `b`'s side, no child on either.
fn refused(mut n: Net, why: impl Fn(&AuthError) -> bool, what: &str) {
    n.establish();
    assert!(!established(&n.a) && !established(&n.b), "{what}");
    assert!(
        n.a.installed.is_empty() && n.b.installed.is_empty(),
        "{what}"
    );
    let errs = peer_auth_failures(&n.b);
    assert_eq!(errs.len(), 1, "{what}: {:?}", failed(&n.b));
    assert!(why(&errs[0]), "{what}: {}", errs[0]);
    // The responder counts the refusal by its reason.
    assert_eq!(n.b.ike.auth_refusals(), &[(errs[0].kind(), 1)], "{what}");
    assert!(
        failed(&n.a).contains(&(FailReason::AuthenticationFailed, false)),
        "{what}: {:?}",
        failed(&n.a)
    );
    assert!(n.a.ike.ike_sas().is_empty(), "{what}");
    assert!(n.b.ike.ike_sas().is_empty(), "{what}");
}

#[test]
fn refusals_name_their_reason() {
    let w = world(Alg::P256);
    let leaf = |s: Spec| w.inter.issue(&s);
    let with_a = |l: Leaf, f: &dyn Fn(&mut IkeConfig, &mut IkeConfig)| {
        cert_pair(&w, |a, b| {
            a.local_auth = local(&l, &w.inter);
            f(a, b);
        })
    };
    let spec = || Spec::new("gw-a", &["a.vecgate.test"], Alg::P256);

    let expired = leaf(Spec {
        from: (2020, 1, 1),
        until: (2021, 1, 1),
        ..spec()
    });
    refused(
        with_a(expired, &|_, _| {}),
        |e| matches!(e, AuthError::Expired { .. }) && e.to_string().contains("expired"),
        "expired",
    );

    let early = leaf(Spec {
        from: (2090, 1, 1),
        ..spec()
    });
    refused(
        with_a(early, &|_, _| {}),
        |e| matches!(e, AuthError::NotYetValid { .. }),
        "not yet valid",
    );

    let revoked = leaf(spec());
    let crl = w.inter.crl(&[revoked.serial]);
    refused(
        with_a(revoked, &|_, b| {
            b.remote_auth = RemoteAuth::Cert(trust(&[&w.root.pem], &[&crl]))
        }),
        |e| matches!(e, AuthError::Revoked { .. }) && e.to_string().contains("revoked"),
        "revoked",
    );

    // The ID a sends is not in its certificate.
    refused(
        cert_pair(&w, |a, b| {
            a.local_auth = local(&w.a, &w.inter);
            a.local_id = Identity::from_text("a.vecgate.test");
            b.remote_id = Identity::from_text("%any");
            // a's certificate holds a.vecgate.test; make it claim more by
            // a certificate naming both, b expecting the other one.
            let both = w.inter.issue(&Spec::new(
                "gw-a",
                &["a.vecgate.test", "x.vecgate.test"],
                Alg::P256,
            ));
            a.local_auth = local(&both, &w.inter);
            b.remote_id = Identity::from_text("x.vecgate.test");
        }),
        |e| matches!(e, AuthError::IdentityMismatch(_)) && e.to_string().contains("remote_id"),
        "identity not the configured remote_id",
    );

    let other_root = Ca::root("Other Root", Alg::P256);
    let stranger = other_root.issue(&spec());
    refused(
        cert_pair(&w, |a, _| {
            a.local_auth = LocalAuth::Cert(Arc::new(stranger.local()));
        }),
        |e| matches!(e, AuthError::UnknownCa { .. }) && e.to_string().contains("unknown CA"),
        "unknown CA",
    );

    // Root -> I1 -> I2 -> I3 -> I4 -> end entity: five certificates from
    // the end entity to the anchor, one more than the default limit.
    let i1 = w.root.intermediate("I1", Alg::P256);
    let i2 = i1.intermediate("I2", Alg::P256);
    let i3 = i2.intermediate("I3", Alg::P256);
    let i4 = i3.intermediate("I4", Alg::P256);
    let deep = i4.issue(&spec());
    let deep_pem = chain_pem(&deep, &[&i4, &i3, &i2, &i1]);
    refused(
        cert_pair(&w, |a, _| {
            let key = SigningKey::from_bytes(deep.key_pem.as_bytes()).unwrap();
            a.local_auth = LocalAuth::Cert(Arc::new(
                vecgate_ike::pki::LocalCert::new(deep_pem.as_bytes(), key).unwrap(),
            ));
        }),
        |e| matches!(e, AuthError::ChainTooLong(4)),
        "chain too long",
    );

    // The certificate is a's, the signature another key's.
    let wrong = w.inter.issue(&spec());
    refused(
        cert_pair(&w, |a, _| {
            let other = SigningKey::from_bytes(w.b.key_pem.as_bytes()).unwrap();
            a.local_auth = LocalAuth::Cert(Arc::new(
                local_cert(&wrong, &w.inter).with_foreign_key_for_tests(other),
            ));
        }),
        |e| matches!(e, AuthError::BadSignature(_)) && e.to_string().contains("bad signature"),
        "wrong key",
    );

    // A certificate whose keyUsage forbids signatures.
    let encrypt_only = leaf(Spec {
        signing: false,
        ..spec()
    });
    refused(
        with_a(encrypt_only, &|_, _| {}),
        |e| matches!(e, AuthError::Usage(_)),
        "keyUsage",
    );

    // The peer uses the PSK where a certificate is required.
    refused(
        cert_pair(&w, |a, _| a.local_auth = LocalAuth::Psk),
        |e| matches!(e, AuthError::WrongMethod(2)),
        "PSK instead of a signature",
    );
}

/// `a`'s end entity followed by `n` filler certificates of about
/// `names` × 40 bytes each (an attacker's certificate set).
fn padded_set(w: &World, n: usize, names: usize) -> LocalAuth {
    let filler = Ca::root("Filler CA", Alg::P256);
    let sans: Vec<String> = (0..names)
        .map(|i| format!("filler-{i:04}.padding.vecgate.test"))
        .collect();
    let sans: Vec<&str> = sans.iter().map(String::as_str).collect();
    let mut pem = w.a.pem.clone();
    for i in 0..n {
        pem.push_str(
            &filler
                .issue(&Spec::new(&format!("filler {i}"), &sans, Alg::P256))
                .pem,
        );
    }
    let key = SigningKey::from_bytes(w.a.key_pem.as_bytes()).unwrap();
    LocalAuth::Cert(Arc::new(
        vecgate_ike::pki::LocalCert::new(pem.as_bytes(), key).unwrap(),
    ))
}

/// CERT payloads arrive before the peer is authenticated: an IKE_AUTH
/// with a hundred certificates (in RFC 7383 fragments) is refused by
/// the payload bound once reassembled, one with a dozen large ones by
/// the chain bound before any certificate is parsed. Each is counted
/// by its reason; nothing is installed, no signature is checked.
#[test]
fn oversized_certificate_sets_are_refused_and_counted() {
    let w = world(Alg::P256);
    // A hundred certificates of ~550 bytes: 55 KB, ~46 fragments.
    let mut n = cert_pair(&w, |a, _| a.local_auth = padded_set(&w, 99, 4));
    n.establish();
    let frags = n
        .wire
        .iter()
        .filter(|(from_a, d, ..)| *from_a && d.len() > 18 && d[18] == 35)
        .count();
    assert!(frags > 40, "the IKE_AUTH went in {frags} datagrams");
    assert!(!established(&n.a) && !established(&n.b));
    assert!(n.a.installed.is_empty() && n.b.installed.is_empty());
    assert_eq!(
        n.b.ike.auth_refusals(),
        &[(vecgate_ike::state::AUTH_MALFORMED, 1)]
    );
    assert!(failed(&n.b).is_empty(), "{:?}", failed(&n.b));
    // Its retransmissions are refused again, at the same cost.
    n.advance(Duration::from_secs(3));
    let r = n.b.ike.auth_refusals();
    assert!(
        r.len() == 1 && r[0].0 == vecgate_ike::state::AUTH_MALFORMED && r[0].1 > 1,
        "{r:?}"
    );
    assert!(n.b.installed.is_empty());

    // A dozen certificates of ~4 KB: under the payload bound, over the
    // chain bound.
    let mut n = cert_pair(&w, |a, _| a.local_auth = padded_set(&w, 11, 100));
    n.establish();
    assert!(n.a.installed.is_empty() && n.b.installed.is_empty());
    assert_eq!(
        peer_auth_failures(&n.b),
        vec![AuthError::TooManyCertificates(12)]
    );
    assert_eq!(n.b.ike.auth_refusals(), &[("too-many-certificates", 1)]);
    assert!(failed(&n.a).contains(&(FailReason::AuthenticationFailed, false)));
}

fn local_cert(leaf: &Leaf, inter: &Ca) -> vecgate_ike::pki::LocalCert {
    let pem = chain_pem(leaf, &[inter]);
    vecgate_ike::pki::LocalCert::new(
        pem.as_bytes(),
        SigningKey::from_bytes(leaf.key_pem.as_bytes()).unwrap(),
    )
    .unwrap()
}

#[test]
fn responder_refused_by_initiator() {
    // a (initiator) refuses b's certificate: a tells b with an
    // INFORMATIONAL AUTHENTICATION_FAILED and nothing stays installed.
    let w = world(Alg::P256);
    let other = Ca::root("Other Root", Alg::P256);
    let mut n = cert_pair(&w, |a, _| {
        a.remote_auth = RemoteAuth::Cert(trust(&[&other.pem], &[]));
    });
    n.establish();
    assert!(!established(&n.a));
    let errs = peer_auth_failures(&n.a);
    assert!(
        matches!(errs.as_slice(), [AuthError::UnknownCa { .. }]),
        "{errs:?}"
    );
    // b established, then learnt from a's notify and dropped it all.
    assert!(n.b.ike.ike_sas().is_empty());
    assert_eq!(n.b.installed.len(), n.b.removed.len());
}

#[test]
fn peer_certificate_configured_locally_when_none_is_sent() {
    let w = world(Alg::P384);
    let mut n = cert_pair(&w, |a, b| {
        if let LocalAuth::Cert(l) = &mut a.local_auth {
            Arc::get_mut(l).unwrap().send_certs = false;
        }
        let mut t = vecgate_ike::pki::TrustStore::default();
        t.pin_peer(w.a.pem.as_bytes()).unwrap();
        b.remote_auth = RemoteAuth::Cert(Arc::new(t));
    });
    n.establish();
    assert!(established(&n.a) && established(&n.b));
    assert_eq!(
        n.b.ike
            .auth_info()
            .unwrap()
            .peer_cert
            .as_ref()
            .unwrap()
            .info
            .subject,
        "C=CH, O=vecgate test, CN=gw-a"
    );

    // Without it configured, a peer that sends none is refused.
    let mut n = cert_pair(&w, |a, _| {
        if let LocalAuth::Cert(l) = &mut a.local_auth {
            Arc::get_mut(l).unwrap().send_certs = false;
        }
    });
    n.establish();
    assert!(matches!(
        peer_auth_failures(&n.b).as_slice(),
        [AuthError::NoCertificate]
    ));
}

#[test]
fn revocation_after_reload_fails_the_next_rekey() {
    let w = world(Alg::P256);
    let mut n = cert_pair(&w, |_, _| {});
    n.establish();
    assert!(established(&n.a) && established(&n.b));
    let child = n.a.installed[0].spi_in;
    // A rekey passes while the certificate is good.
    n.a.ike.rekey_child(child, n.now);
    n.run();
    assert_eq!(n.a.installed.len(), 2);
    // b reloads with a CRL revoking a's certificate.
    let crl = w.inter.crl(&[w.a.serial]);
    let id = n.b.ike.config().local_id.clone();
    let l = n.b.ike.config().local_auth.clone();
    n.b.ike
        .set_auth(id, l, RemoteAuth::Cert(trust(&[&w.root.pem], &[&crl])))
        .unwrap();
    // a's next child rekey is refused and b takes the tunnel down.
    let child = n.a.installed[1].spi_in;
    n.a.ike.rekey_child(child, n.now);
    n.run();
    assert!(
        matches!(
            peer_auth_failures(&n.b).as_slice(),
            [AuthError::Revoked { .. }]
        ),
        "{:?}",
        failed(&n.b)
    );
    assert!(n.a.ike.ike_sas().is_empty() && n.b.ike.ike_sas().is_empty());
    assert!(n.a.ike.child_sas().is_empty() && n.b.ike.child_sas().is_empty());
    assert_eq!(n.a.installed.len(), 2, "no new child for a revoked peer");
    assert_eq!(n.a.removed.len(), 2);
    assert_eq!(n.b.removed.len(), 2);

    // The same when b itself starts the rekey.
    let mut n = cert_pair(&w, |_, _| {});
    n.establish();
    let id = n.b.ike.config().local_id.clone();
    let l = n.b.ike.config().local_auth.clone();
    n.b.ike
        .set_auth(id, l, RemoteAuth::Cert(trust(&[&w.root.pem], &[&crl])))
        .unwrap();
    n.b.ike.rekey_ike(n.now);
    n.run();
    assert!(matches!(
        peer_auth_failures(&n.b).as_slice(),
        [AuthError::Revoked { .. }]
    ));
    assert!(n.a.ike.ike_sas().is_empty() && n.b.ike.ike_sas().is_empty());
    assert!(n
        .a
        .events
        .iter()
        .any(|e| matches!(e, Event::IkeDeleted { .. })));
}

#[test]
fn rekeyed_ike_sa_keeps_the_authentication_and_rekeys_with_certificates() {
    let w = world(Alg::Ed25519);
    let mut n = cert_pair(&w, |a, _| {
        a.ike_rekey_time = Some(Duration::from_secs(60));
        a.child_rekey_time = Some(Duration::from_secs(40));
    });
    n.establish();
    let before = n.a.ike.auth_info().cloned().unwrap();
    n.advance(Duration::from_secs(130));
    assert!(n
        .a
        .events
        .iter()
        .any(|e| matches!(e, Event::IkeRekeyed { .. })));
    assert!(n
        .a
        .events
        .iter()
        .any(|e| matches!(e, Event::ChildRekeyed { .. })));
    assert_eq!(n.a.ike.auth_info(), Some(&before));
    assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
    assert_eq!(n.a.ike.ike_sas().len(), 1);
}

#[test]
fn ha_snapshot_carries_the_peer_chain() {
    let w = world(Alg::P256);
    let mut n = cert_pair(&w, |_, _| {});
    n.establish();
    let snaps = n.b.ike.export(n.now);
    assert_eq!(snaps.len(), 1);
    let bytes = snaps[0].encode().unwrap();
    let back = vecgate_ike::SaSnapshot::decode(&bytes).unwrap();
    assert_eq!(back.auth, snaps[0].auth);
    assert_eq!(&*back.encode().unwrap(), &*bytes);
    let auth = back.auth.clone().unwrap();
    assert_eq!(auth.peer_cert.as_ref().unwrap().chain.len(), 2);
    // A standby adopting it knows the peer and checks it at the rekey:
    // with a's certificate revoked there, the rekey takes it down.
    let mut c = IkeConfig::new(addr("192.0.2.2:500"), addr("192.0.2.1:500"), b"secret-psk");
    c.local_ts = vec!["10.2.0.0/16".parse().unwrap()];
    c.remote_ts = vec!["10.1.0.0/16".parse().unwrap()];
    c.local_auth = local(&w.b, &w.inter);
    c.local_id = Identity::from_text("b.vecgate.test");
    c.remote_id = Identity::from_text("a.vecgate.test");
    let crl = w.inter.crl(&[w.a.serial]);
    c.remote_auth = RemoteAuth::Cert(trust(&[&w.root.pem], &[&crl]));
    let mut standby = vecgate_ike::Ike::new(c).unwrap();
    standby.import(back, n.now);
    assert_eq!(standby.auth_info(), Some(&auth));
    standby.rekey_ike(n.now);
    let mut failed_with = None;
    while let Some(a) = standby.poll_action() {
        if let vecgate_ike::Action::Event(Event::Failed { reason, .. }) = a {
            failed_with = Some(reason);
        }
    }
    assert!(matches!(
        failed_with,
        Some(FailReason::PeerAuth(AuthError::Revoked { .. }))
    ));
}
