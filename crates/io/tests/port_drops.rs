//! `Port::take_drops` on a real AF_PACKET socket (needs root): a receive
//! ring nobody drains overflows, and the kernel's ring-full count comes back
//! once, then is reset.

mod common;

use common::*;
use packet::{Pool, Port};
use std::time::Duration;
use vecgate_io::{AfPacketOpts, AfPacketPort};

#[test]
fn full_rx_ring_is_reported_as_ring_full_drops_once() {
    let t = VethPair::new();
    let va = t.va.clone();
    let opts = AfPacketOpts {
        frames: 8,
        ..AfPacketOpts::default()
    };
    let mut port =
        t.a.run_in(move || AfPacketPort::open(&va, opts).expect("open af_packet"));
    assert_eq!(port.take_drops().rx_ring_full, 0, "fresh socket");
    // B sends 64 echo requests to an address behind A that nobody answers;
    // nothing reads the ring meanwhile (8 slots asked, rounded up to one
    // whole block of 15).
    let g = format!("10.99.{}.9", t.subnet);
    t.b.exec(&[
        "ip",
        "neigh",
        "replace",
        &g,
        "lladdr",
        &mac_str(port.mac()),
        "dev",
        &t.vb,
    ]);
    let sent = 64u64;
    t.b.try_exec(&[
        "ping",
        "-c",
        &sent.to_string(),
        "-i",
        "0.005",
        "-W",
        "0.1",
        &g,
    ]);
    let mut pool = Pool::new(64);
    let mut received = 0u64;
    recv_for(&mut port, &mut pool, Duration::from_millis(200), |_| {
        received += 1
    });
    let d = port.take_drops();
    assert!(
        received <= 15 + 2,
        "only the ring's slots were kept: {received}"
    );
    assert!(
        d.rx_ring_full + received >= sent,
        "{sent} sent, {received} received, {d:?}"
    );
    assert_eq!((d.rx_bad, d.tx_rejected, d.tx_full), (0, 0, 0), "{d:?}");
    // Read once: the kernel reset its counter.
    assert_eq!(port.take_drops().rx_ring_full, 0);
}
