use super::*;
use proptest::prelude::*;
use zeroize::Zeroizing;

const NOW: u64 = 1_800_000_000_000;

fn key(b: u8) -> SyncKey {
    SyncKey::new(&[b; KEY_LEN]).unwrap()
}

fn epoch(start_ms: u64, random: u64) -> Epoch {
    Epoch { start_ms, random }
}

fn body(master: bool) -> BodyRepr {
    BodyRepr {
        sent_ms: NOW,
        master,
        records: vec![
            RecordRepr {
                dir: Dir::Out,
                spi: 0x1001,
                key_id: [7; 32],
                ceiling: 1 << 21,
                used: 12345,
                window: Vec::new(),
            },
            RecordRepr {
                dir: Dir::In,
                spi: 0x2002,
                key_id: [9; 32],
                ceiling: 777,
                used: 0,
                window: vec![u64::MAX, 0x55, 0, 1],
            },
        ],
    }
}

/// A pair: A's sealer and B's opener.
fn pair() -> (Sealer, Opener) {
    let a = Sealer::new(&key(1), epoch(NOW - 5000, 11)).unwrap();
    let b = Opener::new(key(1), epoch(NOW - 4000, 22));
    (a, b)
}

#[test]
fn seal_open_round_trip() {
    let (mut a, mut b) = pair();
    let m = body(true);
    let d = a.seal(Kind::SaState, &m.emit()).unwrap();
    let o = b.open(&d, NOW).unwrap();
    assert_eq!(o.kind, Kind::SaState);
    assert_eq!(o.body, m);
    assert!(o.new_epoch);
    assert_eq!(o.counter, 1);
    let d2 = a.seal(Kind::Heartbeat, &body(false).emit()).unwrap();
    let o2 = b.open(&d2, NOW).unwrap();
    assert!(!o2.new_epoch);
    assert_eq!(o2.counter, 2);
}

#[test]
fn replays_and_reordering_are_rejected() {
    let (mut a, mut b) = pair();
    let d1 = a.seal(Kind::SaState, &body(true).emit()).unwrap();
    let d2 = a.seal(Kind::SaState, &body(true).emit()).unwrap();
    b.open(&d2, NOW).unwrap();
    assert_eq!(b.open(&d2, NOW), Err(Reject::Replay));
    assert_eq!(b.open(&d1, NOW), Err(Reject::Replay));
}

#[test]
fn wrong_key_and_tampering_are_rejected_and_change_nothing() {
    let (mut a, mut b) = pair();
    let mut other = Sealer::new(&key(2), epoch(NOW, 33)).unwrap();
    let d = other.seal(Kind::SaState, &body(true).emit()).unwrap();
    assert_eq!(b.open(&d, NOW), Err(Reject::Auth));
    assert_eq!(b.peer_epoch(), None);
    let good = a.seal(Kind::SaState, &body(true).emit()).unwrap();
    // Every single-bit flip of header (after the magic/version/kind) or
    // body fails authentication or the header check.
    for i in 0..good.len() {
        let mut t = good.clone();
        t[i] ^= 0x01;
        assert!(b.open(&t, NOW).is_err(), "flip at byte {i} accepted");
    }
    assert_eq!(b.peer_epoch(), None);
    // The original still opens: the forgeries moved no counter.
    assert!(b.open(&good, NOW).is_ok());
}

#[test]
fn reflection_stale_epoch_and_skew() {
    let own = epoch(NOW - 4000, 22);
    let mut b = Opener::new(key(1), own);
    // Our own datagram sent back to us.
    let mut me = Sealer::new(&key(1), own).unwrap();
    let d = me.seal(Kind::Heartbeat, &body(false).emit()).unwrap();
    assert_eq!(b.open(&d, NOW), Err(Reject::Reflected));
    // The peer restarted: the new epoch wins, the old one is stale.
    let mut old = Sealer::new(&key(1), epoch(NOW - 9000, 1)).unwrap();
    let mut new = Sealer::new(&key(1), epoch(NOW - 1000, 2)).unwrap();
    let d_old = old.seal(Kind::SaState, &body(true).emit()).unwrap();
    let d_new = new.seal(Kind::SaState, &body(true).emit()).unwrap();
    b.open(&d_new, NOW).unwrap();
    assert_eq!(b.open(&d_old, NOW), Err(Reject::StaleEpoch));
    // A recorded message from a boot long ago, replayed to a receiver
    // that just restarted: its send time is too old.
    let mut fresh = Opener::new(key(1), own);
    assert_eq!(fresh.open(&d_new, NOW + MAX_SKEW_MS + 1), Err(Reject::Skew));
    assert_eq!(fresh.peer_epoch(), None);
}

#[test]
fn nonces_differ_across_boots() {
    // Two boots with the same start time still seal the same body and
    // counter differently (distinct epoch keys).
    let e1 = Epoch::fresh(NOW).unwrap();
    let e2 = Epoch::fresh(NOW).unwrap();
    assert_ne!(e1, e2);
    let mut s1 = Sealer::new(&key(1), e1).unwrap();
    let mut s2 = Sealer::new(&key(1), e2).unwrap();
    let b = body(true).emit();
    let d1 = s1.seal(Kind::SaState, &b).unwrap();
    let d2 = s2.seal(Kind::SaState, &b).unwrap();
    assert_eq!(d1[24..32], d2[24..32]);
    assert_ne!(d1[HEADER_LEN..], d2[HEADER_LEN..]);
}

#[test]
fn pack_splits_below_the_mtu() {
    let r = RecordRepr {
        dir: Dir::In,
        spi: 1,
        key_id: [1; 32],
        ceiling: 5,
        used: 0,
        window: vec![0; 16],
    };
    let rs = vec![r; 40];
    let bodies = pack(NOW, true, &rs);
    assert!(bodies.len() > 1);
    assert_eq!(bodies.iter().map(|b| b.records.len()).sum::<usize>(), 40);
    let mut s = Sealer::new(&key(1), epoch(NOW, 1)).unwrap();
    for b in &bodies {
        assert!(s.seal(Kind::SaState, &b.emit()).unwrap().len() <= PACK_LEN);
    }
    assert_eq!(pack(NOW, false, &[]).len(), 1);
}

#[test]
fn body_rejects_bad_lengths() {
    let mut b = body(true).emit();
    assert!(Body::new_checked(&b[..]).is_ok());
    b.push(0);
    assert_eq!(Body::new_checked(&b[..]).err(), Some(Reject::Malformed));
    b.truncate(b.len() - 2);
    assert_eq!(Body::new_checked(&b[..]).err(), Some(Reject::Malformed));
    // A count claiming more records than there are.
    let mut c = body(true).emit();
    c[10..12].copy_from_slice(&u16::MAX.to_be_bytes());
    assert_eq!(Body::new_checked(&c[..]).err(), Some(Reject::Malformed));
    // An outbound record claiming a window.
    let mut d = body(true).emit();
    d[BODY_HEADER_LEN + 2..BODY_HEADER_LEN + 4].copy_from_slice(&1u16.to_be_bytes());
    assert!(Body::new_checked(&d[..]).is_err());
}

fn record() -> impl Strategy<Value = RecordRepr> {
    (
        any::<bool>(),
        any::<u32>(),
        any::<[u8; 32]>(),
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec(any::<u64>(), 0..40),
    )
        .prop_map(|(out, spi, key_id, ceiling, used, window)| RecordRepr {
            dir: if out { Dir::Out } else { Dir::In },
            spi,
            key_id,
            ceiling,
            used,
            window: if out { Vec::new() } else { window },
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn body_round_trips(sent in any::<u64>(), master in any::<bool>(),
                        records in prop::collection::vec(record(), 0..12)) {
        let b = BodyRepr { sent_ms: sent, master, records };
        let bytes = b.emit();
        let v = Body::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(usize::from(v.count()), v.records().count());
        prop_assert_eq!(BodyRepr::parse(&v), b);
    }

    #[test]
    fn decoders_never_panic(data in prop::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(h) = Header::new_checked(&data[..]) {
            let _ = (h.kind(), h.epoch(), h.counter(), h.aad().len(), h.sealed().len());
        }
        if let Ok(b) = Body::new_checked(&data[..]) {
            let r = BodyRepr::parse(&b);
            prop_assert_eq!(r.emit(), data.clone());
        }
        let (_, mut o) = pair();
        prop_assert!(o.open(&data, NOW).is_err());
        prop_assert_eq!(o.peer_epoch(), None);
    }

    #[test]
    fn seal_open_any_body(records in prop::collection::vec(record(), 0..6),
                          flip in any::<prop::sample::Index>()) {
        let (mut a, mut b) = pair();
        let body = BodyRepr { sent_ms: NOW, master: true, records };
        let d = a.seal(Kind::SaState, &body.emit()).unwrap();
        let mut t = d.clone();
        let i = flip.index(t.len());
        t[i] ^= 0x80;
        prop_assert!(b.open(&t, NOW).is_err());
        prop_assert_eq!(b.open(&d, NOW).unwrap().body, body);
        prop_assert_eq!(b.open(&d, NOW), Err(Reject::Replay));
    }
}

fn route(i: usize) -> RouteRepr {
    RouteRepr {
        vrf: "default".into(),
        prefix: format!("10.{}.{}.0/24", i / 256, i % 256),
        via: "t0".into(),
    }
}

#[test]
fn routes_round_trip_pack_and_open() {
    let rs: Vec<RouteRepr> = (0..300).map(route).collect();
    let chunks = pack_routes(NOW, true, 42, &rs);
    assert!(chunks.len() > 1);
    assert!(chunks.iter().all(|c| c.chunks as usize == chunks.len()));
    let (mut a, mut b) = pair();
    let mut back = Vec::new();
    for c in &chunks {
        let d = a.seal(Kind::Routes, &c.emit()).unwrap();
        assert!(d.len() <= PACK_LEN);
        let o = b.open(&d, NOW).unwrap();
        assert_eq!(o.kind, Kind::Routes);
        let r = o.routes.unwrap();
        assert_eq!((r.generation, r.master), (42, true));
        back.extend(r.routes);
    }
    assert_eq!(back, rs);
    // An empty set is one chunk.
    assert_eq!(pack_routes(NOW, true, 1, &[]).len(), 1);
}

#[test]
fn routes_body_rejects_bad_input() {
    let c = &pack_routes(NOW, true, 7, &[route(1), route(2)])[0];
    let good = c.emit();
    assert!(RoutesBody::new_checked(&good[..]).is_ok());
    // chunk >= chunks, chunks = 0
    let mut x = good.clone();
    x[20..22].copy_from_slice(&1u16.to_be_bytes());
    assert!(RoutesBody::new_checked(&x[..]).is_err());
    let mut x = good.clone();
    x[22..24].copy_from_slice(&0u16.to_be_bytes());
    assert!(RoutesBody::new_checked(&x[..]).is_err());
    // Not UTF-8.
    let mut x = good.clone();
    x[ROUTES_HEADER_LEN + 4] = 0xff;
    assert!(RoutesBody::new_checked(&x[..]).is_err());
    // Trailing or missing bytes.
    let mut x = good.clone();
    x.push(0);
    assert!(RoutesBody::new_checked(&x[..]).is_err());
    assert!(RoutesBody::new_checked(&good[..good.len() - 1]).is_err());
    // An SA body sealed as routes does not open as routes.
    let (mut a, mut b) = pair();
    let d = a.seal(Kind::Routes, &body(true).emit()).unwrap();
    assert_eq!(b.open(&d, NOW), Err(Reject::Malformed));
}

proptest! {
    #[test]
    fn routes_decoder_never_panics_and_round_trips(data in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(b) = RoutesBody::new_checked(&data[..]) {
            let r = RoutesRepr::parse(&b);
            prop_assert_eq!(r.routes.len(), usize::from(b.count()));
            prop_assert_eq!(r.emit(), data.clone());
        }
    }
}

fn ike_sa() -> impl Strategy<Value = IkeSaRepr> {
    (
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(spi_i, spi_r, s)| IkeSaRepr {
            spi_i,
            spi_r,
            state: Zeroizing::new(s),
        })
}

#[test]
fn ike_sas_seal_open_and_pack() {
    let (mut a, mut b) = pair();
    let sas = vec![
        IkeSaRepr {
            spi_i: 1,
            spi_r: 2,
            state: Zeroizing::new(vec![5; 400]),
        },
        IkeSaRepr {
            spi_i: 3,
            spi_r: 4,
            state: Zeroizing::new(vec![6; 10]),
        },
    ];
    let bodies = pack_ike(NOW, true, "ike0", sas.clone());
    assert_eq!(bodies.len(), 1);
    assert!(bodies[0].full_set);
    let d = a.seal(Kind::IkeSas, &bodies[0].emit().unwrap()).unwrap();
    // The keys are sealed: the state bytes are not in the datagram.
    assert!(!d.windows(16).any(|w| w == [5; 16]));
    let o = b.open(&d, NOW).unwrap();
    assert_eq!(o.kind, Kind::IkeSas);
    let ike = o.ike.unwrap();
    assert_eq!(
        (ike.tunnel.as_str(), ike.master, ike.sas),
        ("ike0", true, sas)
    );
    assert!(!format!("{:?}", bodies[0]).contains("5, 5"));
    // A set too large for one datagram goes one SA a body, not as a set.
    let big: Vec<_> = (0..3)
        .map(|i| IkeSaRepr {
            spi_i: i,
            spi_r: i,
            state: Zeroizing::new(vec![1; 7000]),
        })
        .collect();
    let bodies = pack_ike(NOW, true, "t", big);
    assert_eq!(bodies.len(), 3);
    assert!(bodies.iter().all(|b| !b.full_set && b.sas.len() == 1));
    // No SA: one empty whole set, so the standby forgets the tunnel's.
    let bodies = pack_ike(NOW, true, "t", vec![]);
    assert_eq!(bodies.len(), 1);
    assert!(bodies[0].full_set && bodies[0].sas.is_empty());
}

proptest! {
    #[test]
    fn ike_sas_round_trip(sent in any::<u64>(), master in any::<bool>(), full in any::<bool>(),
                          name in "[a-z0-9-]{0,40}", sas in prop::collection::vec(ike_sa(), 0..5)) {
        let r = IkeSasRepr { sent_ms: sent, master, full_set: full, tunnel: name, sas };
        let bytes = r.emit().unwrap();
        let v = IkeSasBody::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(usize::from(v.count()), v.sas().count());
        prop_assert_eq!(IkeSasRepr::parse(&v), r);
    }

    #[test]
    fn ike_sas_decoder_never_panics(data in prop::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(b) = IkeSasBody::new_checked(&data[..]) {
            let r = IkeSasRepr::parse(&b);
            prop_assert_eq!(r.sas.len(), usize::from(b.count()));
            prop_assert_eq!(&r.emit().unwrap()[..], &data[..]);
        }
    }
}
