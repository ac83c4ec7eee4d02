use super::*;
use proptest::prelude::*;
use std::collections::HashSet;

fn ident() -> SaIdentity {
    SaIdentity {
        tunnel: "to-b".into(),
        outbound: true,
        spi: 0x1001,
    }
}

#[test]
fn counter_never_passes_its_ceiling() {
    let c = SeqCounter::resume(0, false);
    assert_eq!(c.take(4), Take::Wait, "nothing before the first block");
    c.publish(10);
    assert_eq!(c.take(4), Take::Ok(1..5));
    assert_eq!(c.take(100), Take::Ok(5..11), "cut at the ceiling");
    assert_eq!(c.take(1), Take::Wait);
    c.publish(5); // never lowered
    assert_eq!(c.ceiling(), 10);
    c.publish(u64::MAX);
    assert_eq!(c.ceiling(), u32::MAX as u64);
    assert_eq!(c.take(u64::MAX), Take::Ok(11..(1 << 32)));
    assert_eq!(c.take(1), Take::Exhausted);
    let u = SeqCounter::unbounded(true);
    assert_eq!(u.take(3), Take::Ok(1..4));
    assert_eq!(u.take(0), Take::Ok(4..4));
}

#[test]
fn skip_to_only_moves_up_and_waits_for_a_new_ceiling() {
    let c = SeqCounter::resume(0, false);
    c.publish(100);
    assert_eq!(c.take(4), Take::Ok(1..5));
    // The HA standby follows the active: numbers below the jump are
    // never handed out, a lower jump changes nothing.
    c.skip_to(50);
    c.skip_to(10);
    assert_eq!(c.take(1), Take::Ok(50..51));
    // Past the ceiling: nothing until a ceiling above it is published.
    c.skip_to(200);
    assert_eq!(c.take(1), Take::Wait);
    c.publish(300);
    assert_eq!(c.take(1), Take::Ok(200..201));
    c.skip_to(u64::MAX);
    assert_eq!(c.next(), (u32::MAX as u64) + 1);
    assert_eq!(c.take(1), Take::Wait);
}

#[test]
fn a_retired_counter_hands_out_nothing_whatever_is_published() {
    for esn in [false, true] {
        let c = SeqCounter::resume(0, esn);
        c.publish(100);
        assert_eq!(c.take(1), Take::Ok(1..2));
        c.retire();
        assert!(c.retired());
        assert_eq!(c.take(1), Take::Retired);
        c.publish(u64::MAX);
        assert_eq!(c.take(1), Take::Retired);
        assert_eq!(c.take(0), Take::Retired);
        assert_eq!(c.next(), c.last() + 1);
    }
}

#[test]
fn resume_starts_above_the_durable_ceiling() {
    let c = SeqCounter::resume(1000, false);
    c.publish(2000);
    assert_eq!(c.take(1), Take::Ok(1001..1002));
    // A ceiling at the end of the space: exhausted, not waiting.
    let c = SeqCounter::resume(u32::MAX as u64, false);
    assert_eq!(c.take(1), Take::Exhausted);
}

#[test]
fn planner_renews_at_half_a_block_and_follows_the_rate() {
    let mut p = Planner::new(100, 10_000, Duration::from_secs(1));
    let t0 = Instant::now();
    assert_eq!(p.plan(t0, 1, 0, u64::MAX, 0), Some(101));
    assert_eq!(p.plan(t0, 1, 101, u64::MAX, 0), None);
    // 2000 packets per second seen: a block of one second of them.
    let t1 = t0 + Duration::from_secs(1);
    assert_eq!(p.plan(t1, 2001, 2101, u64::MAX, 0), Some(4001));
    // Refused packets count as traffic and force a renewal.
    assert!(p.plan(t1, 2001, 2500, u64::MAX, 5).is_some());
    // A jump is not a rate.
    let t2 = t1 + Duration::from_millis(20);
    assert_eq!(
        p.plan(t2, 1 << 30, 1 << 30, u64::MAX, 1),
        Some((1 << 30) + 100)
    );
    // Never beyond the end of the space.
    assert_eq!(p.plan(t1, 10, 10, 50, 0), Some(50));
    assert_eq!(p.plan(t1, 10, 50, 50, 0), None);
}

#[test]
fn record_round_trip_and_corruption() {
    let r = Record {
        sa: ident(),
        key: KeyId::of(Algorithm::AesGcm128, &[7; 20]),
        ceiling: 1 << 40,
        window: Some(vec![u64::MAX, 5]),
    };
    let text = r.encode();
    assert_eq!(Record::decode(&text).unwrap(), r);
    assert!(!text.contains("0707"), "never the key");
    // Any single flipped character is caught.
    for i in 0..text.len() {
        let mut b = text.clone().into_bytes();
        b[i] ^= 0x01;
        if let Ok(s) = String::from_utf8(b) {
            assert!(Record::decode(&s).is_err(), "flip at {i}: {s}");
        }
    }
    assert!(Record::decode(&text[..text.len() / 2]).is_err(), "torn");
    assert!(Record::decode("").is_err());
}

#[test]
fn key_ids_are_domain_separated() {
    let k = [9u8; 20];
    let a = KeyId::of(Algorithm::AesGcm128, &k);
    assert_eq!(a, KeyId::of(Algorithm::AesGcm128, &k));
    assert_ne!(a, KeyId::of(Algorithm::AesGcm128, &[8u8; 20]));
    let plain = digest::digest(&digest::SHA256, &k);
    assert_ne!(&a.0[..], plain.as_ref());
    assert!(!format!("{a:?}").contains(&a.hex()));
}

#[test]
fn resume_decisions() {
    let p = Path::new("/x");
    assert_eq!(resume(&ident(), None, p), Ok(Resume::Fresh));
    let e = resume(&ident(), Some(Err("torn".into())), p).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("0x00001001") && m.contains("to-b") && m.contains("reset-state"),
        "{m}"
    );
    let mut other = ident();
    other.spi = 0x2002;
    let rec = Record {
        sa: other,
        key: KeyId([1; 32]),
        ceiling: 5,
        window: None,
    };
    let m = resume(&ident(), Some(Ok(rec.clone())), p)
        .unwrap_err()
        .to_string();
    assert!(m.contains("0x00002002") && m.contains("0x00001001"), "{m}");
    let mut same = rec;
    same.sa = ident();
    assert_eq!(
        resume(&ident(), Some(Ok(same)), p),
        Ok(Resume::From {
            ceiling: 5,
            window: None
        })
    );
}

#[test]
fn store_saves_loads_and_locks() {
    let dir = std::env::temp_dir().join(format!("vg-seqstore-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let s = Store::open(&dir).unwrap();
    assert_eq!(
        fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(Store::check(&dir), Ok(None));
    assert!(Store::check(&dir.join("sub")).unwrap().is_some());
    let e = Store::open(&dir).unwrap_err();
    assert!(e.to_string().contains("in use"), "{e}");
    let key = KeyId::of(Algorithm::AesGcm128, &[1; 20]);
    assert!(s.load(&key).is_none());
    let r = Record {
        sa: ident(),
        key,
        ceiling: 4096,
        window: None,
    };
    s.save(&r).unwrap();
    assert_eq!(s.load(&key), Some(Ok(r.clone())));
    fs::write(s.path_of(&key), "vecgate-sa-state 1\ngarbage").unwrap();
    assert!(matches!(s.load(&key), Some(Err(_))));
    drop(s);
    let gone = Store::reset_offline(&dir, &[key]).unwrap();
    assert_eq!(gone.len(), 1);
    let s = Store::open(&dir).unwrap();
    assert!(s.load(&key).is_none());
    drop(s);
    fs::remove_dir_all(&dir).unwrap();
}

/// One step of the crash model.
#[derive(Debug, Clone)]
enum Op {
    /// A worker takes up to n numbers and sends them at once.
    Send(u64),
    /// The control thread plans and starts writing the next block (the
    /// temporary file is written, not yet renamed).
    BeginWrite(u64),
    /// The write became durable (rename + directory fsync done).
    Durable,
    /// The control thread publishes what is durable.
    Publish,
    /// The process dies (and the write in flight may be lost).
    Crash,
    /// The machine loses power: the same, for what is not durable.
    PowerLoss,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..300).prop_map(Op::Send),
        2 => (1u64..500).prop_map(Op::BeginWrite),
        2 => Just(Op::Durable),
        2 => Just(Op::Publish),
        1 => Just(Op::Crash),
        1 => Just(Op::PowerLoss),
    ]
}

proptest! {
    /// Whatever the interleaving of reservations, writes, publications,
    /// sends and crashes, no sequence number is ever sent twice, and
    /// none beyond what was durable when it was sent.
    #[test]
    fn no_number_is_ever_sent_twice(ops in proptest::collection::vec(op(), 1..200), esn in any::<bool>()) {
        let mut durable = 0u64; // on disk
        let mut in_flight: Option<u64> = None; // temp file, not renamed
        let mut ready: Option<u64> = None; // durable, not yet published
        let mut c = SeqCounter::resume(durable, esn);
        let mut sent = HashSet::new();
        for op in ops {
            match op {
                Op::Send(n) => {
                    if let Take::Ok(r) = c.take(n) {
                        for s in r {
                            prop_assert!(s <= durable, "sent {s} above durable {durable}");
                            prop_assert!(sent.insert(s), "{s} sent twice");
                        }
                    }
                }
                Op::BeginWrite(block) => {
                    in_flight = Some(c.next().saturating_add(block).min(c.last()));
                }
                Op::Durable => {
                    if let Some(v) = in_flight.take() {
                        // rename: the new record replaces the old.
                        durable = v.max(durable);
                        ready = Some(durable);
                    }
                }
                Op::Publish => {
                    if let Some(v) = ready.take() {
                        c.publish(v);
                    }
                }
                Op::Crash | Op::PowerLoss => {
                    in_flight = None;
                    ready = None;
                    c = SeqCounter::resume(durable, esn);
                }
            }
        }
    }

    /// The planner never asks for a ceiling below the current position
    /// or past the end of the space, and asks whenever less than half
    /// of the minimum block is left; only an inbound planner lowers.
    #[test]
    fn planner_bounds(pos in 0u64..1 << 40, ahead in 0u64..1 << 22, last in 1u64..1 << 41, demand in 0u64..10) {
        let mut p = Planner::new(64, 1 << 20, Duration::from_secs(2));
        let ceiling = pos.saturating_add(ahead);
        if let Some(v) = p.plan(Instant::now(), pos, ceiling, last, demand) {
            prop_assert!(v <= last);
            prop_assert!(v >= pos.min(last));
            prop_assert!(v > ceiling || ceiling >= last || v == last, "outbound never lowers");
        } else {
            prop_assert!(ceiling >= last || ahead >= 32);
        }
    }

    /// Decoding arbitrary text never panics.
    #[test]
    fn decode_never_panics(s in ".{0,400}") {
        let _ = Record::decode(&s);
    }
}
