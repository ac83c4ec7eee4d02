//! The HA state sync's datagrams: header, SA body, routes and IKE SA body views,
//! the repr round trips, and the opener (wrong key, replays, any bytes)
//! never panicking and never accepting what it did not seal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vecgate_ha::sync::{
    Body, BodyRepr, Epoch, Header, IkeSasBody, IkeSasRepr, Kind, Opener, RoutesBody, RoutesRepr,
    Sealer, SyncKey, TunnelsBody, TunnelsRepr,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Header::new_checked(data) {
        let _ = (h.kind(), h.epoch(), h.counter(), h.aad().len(), h.sealed().len());
    }
    if let Ok(b) = Body::new_checked(data) {
        assert_eq!(b.records().count(), usize::from(b.count()));
        let r = BodyRepr::parse(&b);
        // Views check reserved bytes: a parsed body emits the same bytes.
        assert_eq!(r.emit(), data);
        // Sealed and opened, it comes back the same.
        let key = SyncKey::new(&[3; 32]).unwrap();
        let a = Epoch { start_ms: 1, random: 2 };
        let mut s = Sealer::new(&key, a).unwrap();
        if let Ok(d) = s.seal(Kind::SaState, data) {
            let mut o = Opener::new(key, Epoch { start_ms: 1, random: 3 });
            let got = o.open(&d, r.sent_ms);
            assert_eq!(got.map(|g| g.body), Ok(r));
            assert!(o.open(&d, 0).is_err(), "a replay opened");
        }
    }
    if let Ok(b) = RoutesBody::new_checked(data) {
        let r = RoutesRepr::parse(&b);
        assert_eq!(r.routes.len(), usize::from(b.count()));
        assert_eq!(r.emit(), data);
    }
    if let Ok(b) = TunnelsBody::new_checked(data) {
        let r = TunnelsRepr::parse(&b);
        assert_eq!(r.emit(), data);
    }
    if let Ok(b) = IkeSasBody::new_checked(data) {
        let r = IkeSasRepr::parse(&b);
        assert_eq!(r.sas.len(), usize::from(b.count()));
        // Each SA's state is the IKE crate's: canonical, so what parses
        // encodes back to the same bytes.
        for sa in &r.sas {
            if let Ok(snap) = vecgate_ike::SaSnapshot::decode(&sa.state) {
                assert_eq!(snap.encode().as_deref().map(|v| &v[..]), Ok(&sa.state[..]));
            }
        }
        assert_eq!(r.emit().as_deref().map(|v| &v[..]), Some(data));
        let key = SyncKey::new(&[3; 32]).unwrap();
        let mut s = Sealer::new(&key, Epoch { start_ms: 1, random: 2 }).unwrap();
        if let Ok(d) = s.seal(Kind::IkeSas, data) {
            let mut o = Opener::new(key, Epoch { start_ms: 1, random: 3 });
            let got = o.open(&d, r.sent_ms).map(|g| g.ike);
            assert_eq!(got, Ok(Some(r)));
        }
    }
    // Unsealed input never opens, and changes nothing.
    let key = SyncKey::new(&[3; 32]).unwrap();
    let mut o = Opener::new(key, Epoch { start_ms: 1, random: 3 });
    assert!(o.open(data, 0).is_err());
    assert!(o.peer_epoch().is_none());
});
