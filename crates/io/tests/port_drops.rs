//! `Port::take_drops` on a real AF_PACKET socket (needs root): a receive
//! ring nobody drains overflows, and the kernel's ring-full count comes back
//! once, then is reset.

mod common;

use common::*;
use packet::{Pool, Port};
use std::time::Duration;
use vecgate_io::{AfPacketOpts, AfPacketPort};

fn open_a(t: &VethPair, opts: AfPacketOpts) -> AfPacketPort {
    let va = t.va.clone();
    t.a.run_in(move || AfPacketPort::open(&va, opts).expect("open af_packet"))
}

/// B sends `n` echo requests (ping `extra` arguments) to an address behind
/// A's `port` that nobody answers, while nothing reads the port.
fn unanswered_pings(t: &VethPair, port: &AfPacketPort, n: u64, extra: &[&str]) {
    let g = t.ghost(port.mac());
    let count = n.to_string();
    let mut args = vec!["ping", "-c", &count, "-i", "0.005", "-W", "0.1"];
    args.extend_from_slice(extra);
    args.push(&g);
    t.b.try_exec(&args);
}

#[test]
fn full_rx_ring_is_reported_as_ring_full_drops_once() {
    let t = VethPair::new();
    let opts = AfPacketOpts {
        frames: 8,
        slot_size: vecgate_io::af_packet::SLOT_MAX,
        ..AfPacketOpts::default()
    };
    // 64 echo requests; nothing reads the ring meanwhile (8 slots asked,
    // rounded up to one whole block of 15).
    let sent = 64u64;
    let mut port = open_a(&t, opts);
    assert_eq!(port.take_drops().rx_ring_full, 0, "fresh socket");
    unanswered_pings(&t, &port, sent, &[]);
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

/// Frames larger than a ring slot wait whole in the socket's receive
/// buffer; when it is full the kernel cuts them to the slot instead, and
/// the port drops them as lost to a full receive side (`rx_ring_full`),
/// never hands on a cut frame.
#[test]
fn frames_over_a_full_receive_buffer_are_counted_as_ring_full() {
    let t = VethPair::new();
    t.a.exec(&["ip", "link", "set", &t.va, "mtu", "9000"]);
    t.b.exec(&["ip", "link", "set", &t.vb, "mtu", "9000"]);
    let opts = AfPacketOpts {
        slot_size: 2048,
        rcvbuf: 1,
        ..AfPacketOpts::default()
    };
    // 20 echo requests of 6028 bytes (over a 2 KiB slot), none read
    // while they arrive.
    let sent = 20u64;
    let mut port = open_a(&t, opts);
    unanswered_pings(&t, &port, sent, &["-s", "6000"]);
    let mut pool = Pool::new(64);
    let (mut whole, mut cut) = (0u64, 0u64);
    recv_for(&mut port, &mut pool, Duration::from_millis(200), |p| {
        if p.len() >= 6000 + 28 + 14 {
            whole += 1
        } else if p.len() > 1000 {
            cut += 1
        }
    });
    let d = port.take_drops();
    assert_eq!(cut, 0, "a cut frame was handed on");
    assert!(whole >= 1, "the first large frame is queued whole");
    assert!(d.rx_ring_full >= 1, "{d:?}");
    assert_eq!(whole + d.rx_ring_full, sent, "{whole} whole, {d:?}");
    assert_eq!(d.rx_bad, 0, "{d:?}");
}
