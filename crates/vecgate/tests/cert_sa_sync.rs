//! A certificate-authenticated IKE SA travels through both state syncs
//! with its authentication: the HA sync's IKE SA bodies (one datagram)
//! and the pool's sealed snapshot (`vecgate_pool::snapshot`), each
//! carrying the IKE crate's encoding. A gateway adopting it knows the
//! peer's identity and chain (`show ike`'s auth) and re-checks the chain
//! at the next rekey, as it would its own. The PKI is made by `openssl`
//! (RSA-2048 and ECDSA P-256, through an intermediate CA); the two IKE
//! state machines talk in memory.

mod common;

use common::pki::Pki;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use vecgate_ha::sync::{pack_ike, IkeSaRepr, IkeSasBody, IkeSasRepr};
use vecgate_ike::pki::{LocalCert, SigningKey, TrustStore};
use vecgate_ike::{Action, Identity, Ike, IkeConfig, LocalAuth, RemoteAuth, SaSnapshot};
use vecgate_pool::snapshot::Snapshot;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Side `me` of `pki` (certificate `me.pem` with its intermediate, key
/// `me.key`), trusting the root, expecting `peer`'s FQDN.
fn side(pki: &Pki, me: &str, peer: &str, local: &str, remote: &str) -> Ike {
    let mut c = IkeConfig::new(addr(local), addr(remote), b"unused");
    let key = SigningKey::from_bytes(&pki.read(&format!("{me}.key"))).unwrap();
    c.local_auth = LocalAuth::Cert(Arc::new(
        LocalCert::new(&pki.read(&format!("{me}.pem")), key).unwrap(),
    ));
    let mut t = TrustStore::default();
    t.add_anchors(&pki.read("root.pem")).unwrap();
    c.remote_auth = RemoteAuth::Cert(Arc::new(t));
    c.local_id = Identity::from_text(&format!("{me}.vecgate.test"));
    c.remote_id = Identity::from_text(&format!("{peer}.vecgate.test"));
    let (mine, theirs) = if me == "a" {
        ("10.1.0.0/24", "10.2.0.0/24")
    } else {
        ("10.2.0.0/24", "10.1.0.0/24")
    };
    c.local_ts = vec![mine.parse().unwrap()];
    c.remote_ts = vec![theirs.parse().unwrap()];
    c.initiate = me == "a";
    Ike::new(c).unwrap()
}

/// Delivers datagrams between the two until neither has anything to say;
/// the events of `b`.
fn pump(a: &mut Ike, b: &mut Ike, now: Instant) -> Vec<vecgate_ike::Event> {
    let mut events = Vec::new();
    for _ in 0..100 {
        let mut moved = false;
        for from_a in [true, false] {
            let (src, dst) = if from_a {
                (&mut *a, &mut *b)
            } else {
                (&mut *b, &mut *a)
            };
            while let Some(act) = src.poll_action() {
                moved = true;
                match act {
                    Action::Send {
                        local,
                        remote,
                        data,
                    } => dst.handle_datagram(&data, remote, local, now),
                    Action::Event(e) if !from_a => events.push(e),
                    _ => {}
                }
            }
        }
        if !moved {
            return events;
        }
    }
    panic!("the exchanges did not end");
}

#[test]
fn certificate_sas_keep_their_authentication_through_ha_and_pool_sync() {
    for newkey in ["rsa:2048", "ec -pkeyopt ec_paramgen_curve:P-256"] {
        let pki = Pki::new(newkey);
        pki.leaf("a", "a.vecgate.test");
        pki.leaf("b", "b.vecgate.test");
        let now = Instant::now();
        let mut a = side(&pki, "a", "b", "192.0.2.1:500", "192.0.2.2:500");
        let mut b = side(&pki, "b", "a", "192.0.2.2:500", "192.0.2.1:500");
        a.initiate(now).unwrap();
        pump(&mut a, &mut b, now);
        assert!(a.is_established() && b.is_established(), "{newkey}");
        let auth = b.auth_info().cloned().expect("b authenticated a");
        let chain = &auth.peer_cert.as_ref().expect("a's chain").chain;
        assert_eq!(chain.len(), 2, "{newkey}: end entity and intermediate");
        let snaps = b.export(now);
        assert_eq!(snaps.len(), 1);
        assert_eq!(snaps[0].auth.as_ref(), Some(&auth), "{newkey}");
        let repr = IkeSaRepr {
            spi_i: snaps[0].spi_i,
            spi_r: snaps[0].spi_r,
            state: snaps[0].encode().unwrap(),
        };
        eprintln!("{newkey}: an IKE SA with its peer chain encodes in {} bytes", repr.state.len());

        // HA: the tunnel's set fits one datagram whole, the SA not left out.
        let bodies = pack_ike(1, true, "ike0", vec![repr.clone()]);
        assert_eq!(bodies.len(), 1, "{newkey}");
        assert!(bodies[0].full_set && bodies[0].sas.len() == 1, "{newkey}");
        let wire = bodies[0].emit().unwrap();
        let back = IkeSasRepr::parse(&IkeSasBody::new_checked(&wire[..]).unwrap());
        let from_ha = SaSnapshot::decode(&back.sas[0].state).unwrap();
        assert_eq!(from_ha.auth.as_ref(), Some(&auth), "{newkey}: HA sync");

        // Pool: the sealed snapshot's body.
        let snap = Snapshot {
            released: false,
            placement_rev: 3,
            sas: Vec::new(),
            ike: vec![repr],
        };
        let body = snap.emit("ike0", 1).unwrap();
        let parsed = Snapshot::parse(&body, "ike0").unwrap();
        let from_pool = SaSnapshot::decode(&parsed.ike[0].state).unwrap();
        assert_eq!(from_pool.auth.as_ref(), Some(&auth), "{newkey}: pool");

        // A gateway adopting it shows the peer and re-checks its chain at
        // the next rekey (which succeeds: nothing was revoked).
        let mut standby = side(&pki, "b", "a", "192.0.2.2:500", "192.0.2.1:500");
        standby.import(from_pool, now);
        assert_eq!(standby.auth_info(), Some(&auth), "{newkey}");
        standby.rekey_ike(now);
        let events = pump(&mut a, &mut standby, now);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, vecgate_ike::Event::IkeRekeyed { .. }))
                && !events
                    .iter()
                    .any(|e| matches!(e, vecgate_ike::Event::Failed { .. })),
            "{newkey}: {events:?}"
        );
        assert!(standby.is_established(), "{newkey}");
        assert_eq!(
            standby.auth_info().and_then(|x| x.peer_cert.as_ref()).map(|c| c.chain.len()),
            Some(2),
            "{newkey}"
        );
    }
}
