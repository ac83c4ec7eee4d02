use super::*;
use crate::seqstore::Take;
use crate::{Algorithm, EspError, Lifetime, TunnelEndpoints};
use zeroize::Zeroizing;

fn sa(spi: u32, key: &[u8]) -> SaConfig {
    SaConfig {
        spi,
        algorithm: Algorithm::AesGcm128,
        key: Zeroizing::new(key.to_vec()),
        esn: false,
        replay_window: 64,
        lifetime: Lifetime::default(),
        tunnel: TunnelEndpoints {
            local: std::net::Ipv4Addr::new(192, 0, 2, 1).into(),
            remote: std::net::Ipv4Addr::new(192, 0, 2, 2).into(),
        },
        encap: None,
        df: true,
    }
}

/// A fresh directory of its own, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("vg-sastate-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn window(w: &Mutex<ReplayWindow>) -> MutexGuard<'_, ReplayWindow> {
    lock(w)
}

/// The sync's paths: the standby follows the active's ceiling, never
/// moves down, and taking over starts past the peer's ceiling with a
/// durable, published ceiling above it; an inbound SA adopts a window
/// ahead of its own and rejects what it says was seen.
#[test]
fn follow_take_over_and_adopt_window() {
    let dir = Dir::new("ha");
    let st = SaState::open(&dir.0, true, None).unwrap();
    let (k_out, k_in) = ([1u8; 20], [2u8; 20]);
    let out = st.outbound("t0", sa(0x1001, &k_out)).unwrap();
    let inb = st.inbound("t0", sa(0x2001, &k_in)).unwrap();
    let id_out = KeyId::of(Algorithm::AesGcm128, &k_out);
    let id_in = KeyId::of(Algorithm::AesGcm128, &k_in);
    assert!(st.tick(Instant::now()).is_empty());
    let c = out.seq_counter().clone();
    assert!(c.ceiling() >= 1, "the ticker reserved a first block");

    // Standby: follow the active's ceiling, never back.
    let (_, before) = st.follow_outbound(&id_out, 10_000).unwrap();
    assert_eq!((before, c.next()), (1, 10_000));
    assert_eq!(st.follow_outbound(&id_out, 5), None);
    assert_eq!(c.next(), 10_000);

    // Takeover: past the peer's ceiling, usable at once, durable.
    let to = 1u64 << 30;
    let t = st.take_over_outbound(&id_out, to).unwrap().unwrap();
    assert_eq!((t.next, t.retired), (to, false));
    assert!(c.ceiling() > to);
    assert_eq!(c.take(1), Take::Ok(to..to + 1));
    let rec = Store::peek(&dir.0, &id_out).unwrap().unwrap();
    assert!(
        rec.ceiling >= c.ceiling(),
        "{} < {}",
        rec.ceiling,
        c.ceiling()
    );

    // Inbound: adopt a window ahead of ours, never one behind.
    let w = inb.replay_handle();
    let ring = vec![u64::MAX; window(&w).ring().len()];
    let adopted = st.adopt_window(&id_in, 500, &ring).unwrap();
    assert_eq!(adopted.map(|x| x.1), Some(500));
    assert!(
        window(&w).check(500).is_err(),
        "500 was seen by the old active"
    );
    assert!(window(&w).check(440).is_err(), "so was 440 (all bits set)");
    assert_eq!(st.adopt_window(&id_in, 400, &ring).unwrap(), None);
    assert_eq!(window(&w).top(), 500);
    let rin = Store::peek(&dir.0, &id_in).unwrap().unwrap();
    assert!(rin.ceiling >= 500, "the adopted top is durable first");

    let snap = st.snapshot();
    assert!(snap
        .iter()
        .any(|s| s.outbound && s.key == id_out && s.ceiling > to));
    assert!(snap
        .iter()
        .any(|s| !s.outbound && s.key == id_in && s.ceiling == 500));

    // A takeover past the space retires the SA: it refuses to send with
    // its own drop reason, its record says the space is used up (a
    // restart does not resume below), the bucket is untouched.
    let k_ret = [3u8; 20];
    let ret = st.outbound("t1", sa(0x3001, &k_ret)).unwrap();
    let id_ret = KeyId::of(Algorithm::AesGcm128, &k_ret);
    assert!(st.tick(Instant::now()).is_empty());
    assert!(ret.reserve(1).is_ok());
    assert!(!st.is_retired(&id_ret));
    let past = u64::from(u32::MAX) + 1;
    let t = st.take_over_outbound(&id_ret, past).unwrap().unwrap();
    assert_eq!((t.next, t.retired), (past, true));
    assert!(st.is_retired(&id_ret));
    assert_eq!(ret.reserve(1), Err(EspError::SeqUnsafeAfterTakeover));
    assert!(st.tick(Instant::now()).is_empty());
    assert_eq!(ret.reserve(1), Err(EspError::SeqUnsafeAfterTakeover));
    let rr = Store::peek(&dir.0, &id_ret).unwrap().unwrap();
    assert_eq!(rr.ceiling, u64::from(u32::MAX));
    drop((out, inb, ret));
}

/// The reserve hook hears each outbound ceiling before the workers may
/// use it, and a sender's rate bound holds the ceiling back until the
/// bucket has filled.
#[test]
fn reserve_hook_hears_ceilings_before_they_are_published() {
    let dir = Dir::new("hook");
    let heard = Arc::new(Mutex::new(Vec::<SaSnapshot>::new()));
    let h = heard.clone();
    let st = SaState::open(
        &dir.0,
        true,
        Some(Box::new(move |s: &SaSnapshot| lock(&h).push(s.clone()))),
    )
    .unwrap();
    let out = st.outbound("t0", sa(0x1001, &[4u8; 20])).unwrap();
    let c = out.seq_counter().clone();
    let t0 = Instant::now();
    st.set_max_pps(1000);
    assert!(st.tick(t0).is_empty());
    assert_eq!(c.ceiling(), 0, "an empty bucket grants nothing");
    assert!(lock(&heard).is_empty());
    assert!(st.tick(t0 + Duration::from_millis(100)).is_empty());
    let seen = lock(&heard).clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].ceiling, 100, "100 ms at 1000/s");
    assert_eq!(c.ceiling(), 100);
    st.set_max_pps(0);
    assert!(st.tick(t0 + Duration::from_millis(120)).is_empty());
    assert!(c.ceiling() > 100, "unbounded again");
    assert_eq!(lock(&heard).last().map(|s| s.ceiling), Some(c.ceiling()));
}

/// A write that fails publishes nothing: the SA waits at its old ceiling
/// (the caller is told which write failed), and carries on once the
/// directory is writable again.
#[test]
fn a_failed_write_publishes_nothing() {
    let dir = Dir::new("fail");
    let st = SaState::open(&dir.0, true, None).unwrap();
    let out = st.outbound("t0", sa(0x1001, &[5u8; 20])).unwrap();
    let c = out.seq_counter().clone();
    // The records' directory replaced by a file: every write fails, root's
    // too.
    let sa_dir = dir.0.join("sa");
    std::fs::remove_dir_all(&sa_dir).unwrap();
    std::fs::write(&sa_dir, b"not a directory").unwrap();
    let failed = st.tick(Instant::now());
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(c.ceiling(), 0, "nothing published");
    assert_eq!(out.reserve(1), Err(EspError::SeqNotDurable));
    let taken = st.take_over_outbound(&KeyId::of(Algorithm::AesGcm128, &[5u8; 20]), 1000);
    assert!(taken.is_err());
    assert_eq!(
        c.ceiling(),
        0,
        "a takeover's ceiling is not published either"
    );
    std::fs::remove_file(&sa_dir).unwrap();
    std::fs::create_dir(&sa_dir).unwrap();
    assert!(st.tick(Instant::now()).is_empty());
    assert!(c.ceiling() >= 1000);
    assert!(out.reserve(1).is_ok());
}
