//! A certificate-authenticated IKE SA travels through both state syncs
//! with its authentication: the HA sync's IKE SA bodies (one datagram)
//! and the pool's sealed snapshot (`vecgate_pool::snapshot`), each
//! carrying the IKE crate's encoding. A gateway adopting it knows the
//! peer's identity and chain (`show ike`'s auth) and re-checks the chain
//! at the next rekey, as it would its own. The PKI is made by `openssl`
//! (RSA-2048 and ECDSA P-256, through an intermediate CA); the two IKE
//! state machines talk in memory.

mod common;
// The IKE crate's in-memory harness: two state machines, one network.
#[path = "../../ike/tests/support/net.rs"]
mod net;

use common::pki::Pki;
use net::{pair, Peer};
use std::sync::Arc;
use vecgate_ha::sync::{pack_ike, IkeSaRepr, IkeSasBody, IkeSasRepr};
use vecgate_ike::pki::{LocalCert, SigningKey, TrustStore};
use vecgate_ike::{Event, Identity, IkeConfig, LocalAuth, RemoteAuth, SaSnapshot};
use vecgate_pool::snapshot::Snapshot;

/// Side `me` of `pki` signs with its certificate (`me.pem`, with its
/// intermediate) and key, trusts the root and expects `peer`'s FQDN.
fn certs(c: &mut IkeConfig, pki: &Pki, me: &str, peer: &str) {
    let key = SigningKey::from_bytes(&pki.read(&format!("{me}.key"))).unwrap();
    c.local_auth = LocalAuth::Cert(Arc::new(
        LocalCert::new(&pki.read(&format!("{me}.pem")), key).unwrap(),
    ));
    let mut t = TrustStore::default();
    t.add_anchors(&pki.read("root.pem")).unwrap();
    c.remote_auth = RemoteAuth::Cert(Arc::new(t));
    c.local_id = Identity::from_text(&format!("{me}.vecgate.test"));
    c.remote_id = Identity::from_text(&format!("{peer}.vecgate.test"));
}

#[test]
fn certificate_sas_keep_their_authentication_through_ha_and_pool_sync() {
    for newkey in ["rsa:2048", "ec -pkeyopt ec_paramgen_curve:P-256"] {
        let pki = Pki::new(newkey);
        pki.leaf("a", "a.vecgate.test");
        pki.leaf("b", "b.vecgate.test");
        let mut n = pair(|a, b| {
            certs(a, &pki, "a", "b");
            certs(b, &pki, "b", "a");
        });
        n.establish();
        assert!(
            n.a.ike.is_established() && n.b.ike.is_established(),
            "{newkey}"
        );
        let auth = n.b.ike.auth_info().cloned().expect("b authenticated a");
        let chain = &auth.peer_cert.as_ref().expect("a's chain").chain;
        assert_eq!(chain.len(), 2, "{newkey}: end entity and intermediate");
        let snaps = n.b.ike.export(n.now);
        assert_eq!(snaps.len(), 1);
        assert_eq!(snaps[0].auth.as_ref(), Some(&auth), "{newkey}");
        let repr = IkeSaRepr {
            spi_i: snaps[0].spi_i,
            spi_r: snaps[0].spi_r,
            state: snaps[0].encode().unwrap(),
        };
        eprintln!(
            "{newkey}: an IKE SA with its peer chain encodes in {} bytes",
            repr.state.len()
        );

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
        let mut standby = pair(|_, b| certs(b, &pki, "b", "a")).b;
        standby.ike.import(from_pool, n.now);
        assert_eq!(standby.ike.auth_info(), Some(&auth), "{newkey}");
        n.b = Peer {
            events: Vec::new(),
            ..standby
        };
        n.b.ike.rekey_ike(n.now);
        n.run();
        assert!(
            n.b.events
                .iter()
                .any(|e| matches!(e, Event::IkeRekeyed { .. }))
                && !n.b.events.iter().any(|e| matches!(e, Event::Failed { .. })),
            "{newkey}: {:?}",
            n.b.events
        );
        assert!(n.b.ike.is_established(), "{newkey}");
        assert_eq!(
            n.b.ike
                .auth_info()
                .and_then(|x| x.peer_cert.as_ref())
                .map(|c| c.chain.len()),
            Some(2),
            "{newkey}"
        );
    }
}
