//! Rough transmit-rate measurement of the AF_PACKET sendmmsg path (run by
//! hand: `cargo test -p vecgate-io --release --test bench_tx -- --ignored
//! --nocapture`). Prints rates; asserts only that packets went out.

mod common;

use common::*;
use packet::{Gso, Offload, Pool, Port};
use std::time::{Duration, Instant};
use vecgate_io::{AfPacketOpts, AfPacketPort};

fn rate(port: &mut AfPacketPort, frame: &[u8], off: Offload, dur: Duration) -> (f64, f64) {
    let mut pool = Pool::new(256);
    let mut v = Vec::with_capacity(64);
    let start = Instant::now();
    let (mut pkts, mut bytes) = (0u64, 0u64);
    while start.elapsed() < dur {
        for _ in 0..64 {
            let mut p = pool.alloc().unwrap();
            p.set_data(frame);
            p.meta.offload = off;
            v.push(p);
        }
        let sent = port.tx_burst(&mut v, &mut pool).unwrap();
        pkts += sent.packets as u64;
        bytes += sent.bytes;
    }
    let s = start.elapsed().as_secs_f64();
    (pkts as f64 / s, bytes as f64 * 8.0 / s)
}

#[test]
#[ignore]
fn tx_rate() {
    let t = VethPair::new();
    let va = t.va.clone();
    let mut port =
        t.a.run_in(move || AfPacketPort::open(&va, AfPacketOpts::default()).unwrap());
    let mac_b = t.mac_b();
    // To B's MAC, for an address B does not own: B's kernel drops it.
    let frame = icmp_echo(
        mac_b,
        port.mac(),
        [10, 1, 1, 1],
        [10, 2, 2, 2],
        1,
        1,
        &[0; 1472],
    );
    let (pps, bps) = rate(
        &mut port,
        &frame,
        Offload::default(),
        Duration::from_secs(2),
    );
    println!(
        "1514 B frames: {:.2} Mpps, {:.2} Gbit/s",
        pps / 1e6,
        bps / 1e9
    );
    assert!(pps > 0.0);
    let payload = 64_000;
    let mut f = eth_ipv4(
        mac_b,
        port.mac(),
        [10, 1, 1, 1],
        [10, 2, 2, 2],
        17,
        8 + payload,
    );
    f.extend_from_slice(&[0x0f, 0xa0, 0x0f, 0xa0]);
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(f.len() + payload, 0);
    let off = Offload {
        needs_csum: true,
        csum_start: 34,
        csum_offset: 6,
        gso: Gso::UdpL4,
        gso_size: 1400,
        hdr_len: 42,
        ..Offload::default()
    };
    let (pps, bps) = rate(&mut port, &f, off, Duration::from_secs(2));
    println!("64 KB UDP GSO: {:.0} pkt/s, {:.2} Gbit/s", pps, bps / 1e9);
    println!("{:?}", port.stats());
    assert!(pps > 0.0);
}
