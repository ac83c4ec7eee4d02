//! Throughput of `encrypt_batch` / `decrypt_batch` per algorithm, for
//! figures in reports (not a timed assertion). Run with
//! `cargo test --release -p vecgate-ipsec --test bench -- --ignored --nocapture`.

mod common;

use std::time::{Duration, Instant};

use common::*;
use packet::{Packet, Pool};
use vecgate_ipsec::{Algorithm, EspError, InboundSa, OutboundSa};

const BATCH: usize = 32;

fn run(alg: Algorithm, inner_len: usize, budget: Duration) -> (f64, f64) {
    let cfg = || {
        let mut c = config(alg, 0x4242, false, false, true);
        c.replay_window = 4096;
        c
    };
    let out = OutboundSa::new(cfg()).unwrap();
    let inb = InboundSa::new(cfg()).unwrap();
    let mut pool = Pool::new(BATCH);
    let inner = inner_v4(inner_len - 28, 1);
    let mut pkts: Vec<Packet> = (0..BATCH).map(|_| pool.alloc().unwrap()).collect();
    let mut st = vec![Ok(()); BATCH];
    let mut res = vec![Err(EspError::Truncated); BATCH];
    let (mut enc, mut dec) = (Duration::ZERO, Duration::ZERO);
    let mut bytes = 0u64;
    let start = Instant::now();
    while start.elapsed() < budget {
        for p in pkts.iter_mut() {
            assert!(p.set_data(&inner));
        }
        let t = Instant::now();
        out.encrypt_batch(&mut pkts, &mut st).unwrap();
        enc += t.elapsed();
        for p in pkts.iter_mut() {
            assert!(p.pull_front(20));
        }
        let t = Instant::now();
        inb.decrypt_batch(&mut pkts, &mut res).unwrap();
        dec += t.elapsed();
        assert!(res.iter().all(|r| r.is_ok()));
        bytes += (BATCH * inner_len) as u64;
    }
    (
        bytes as f64 / enc.as_secs_f64() / 1e9,
        bytes as f64 / dec.as_secs_f64() / 1e9,
    )
}

#[test]
#[ignore = "benchmark: run explicitly with --ignored --nocapture"]
fn throughput() {
    println!("algorithm            inner B   encrypt GB/s  decrypt GB/s");
    for alg in Algorithm::ALL {
        for len in [1500usize, 65_000] {
            let (e, d) = run(alg, len, Duration::from_millis(700));
            println!("{:<20} {len:>7}   {e:>12.2}  {d:>12.2}", alg.name());
        }
    }
}

/// The benchmark's own path, checked quickly in every test run so it
/// cannot rot.
#[test]
fn bench_path_works() {
    let (e, d) = run(Algorithm::AesGcm128, 1500, Duration::from_millis(1));
    assert!(e > 0.0 && d > 0.0);
}
