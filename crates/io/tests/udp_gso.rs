//! Whether an AF_PACKET port may send UDP GSO datagrams whole (needs root):
//! with PACKET_QDISC_BYPASS the kernel drops what would need software
//! segmentation, so the port follows the netdev's `tx-udp-segmentation`
//! feature — read by name through ethtool, re-read by `recheck`.

mod common;

use common::*;
use packet::Port;
use vecgate_io::{netdev, AfPacketOpts, AfPacketPort};

fn ethtool_uso(ns: &Netns, dev: &str, on: bool) {
    ns.exec(&[
        "ethtool",
        "-K",
        dev,
        "tx-udp-segmentation",
        if on { "on" } else { "off" },
    ]);
}

#[test]
fn udp_segmentation_feature_is_read_by_name() {
    let t = VethPair::new();
    let va = t.va.clone();
    assert!(
        t.a.run_in(move || netdev::udp_segmentation(&va).unwrap()),
        "veth default: on"
    );
    ethtool_uso(&t.a, &t.va, false);
    let va = t.va.clone();
    assert!(!t.a.run_in(move || netdev::udp_segmentation(&va).unwrap()));
    // The peer's setting is its own.
    let vb = t.vb.clone();
    assert!(t.b.run_in(move || netdev::udp_segmentation(&vb).unwrap()));
    assert!(t
        .a
        .run_in(|| netdev::udp_segmentation("vg-no-such0").is_err()));
}

#[test]
fn port_follows_the_feature_with_qdisc_bypass_only() {
    let t = VethPair::new();
    let open = |bypass: bool| {
        let va = t.va.clone();
        let opts = AfPacketOpts {
            qdisc_bypass: bypass,
            ..AfPacketOpts::default()
        };
        t.a.run_in(move || AfPacketPort::open(&va, opts).expect("open af_packet"))
    };
    let mut bypass = open(true);
    let mut queued = open(false);
    assert!(bypass.udp_gso() && queued.udp_gso());
    ethtool_uso(&t.a, &t.va, false);
    // Cached until the worker's next recheck.
    assert!(bypass.udp_gso());
    let (mut bypass, queued) = t.a.run_in(move || {
        bypass.recheck();
        queued.recheck();
        (bypass, queued)
    });
    assert!(!bypass.udp_gso(), "bypass: the kernel would drop it");
    assert!(
        queued.udp_gso(),
        "through the qdisc layer the kernel segments"
    );
    ethtool_uso(&t.a, &t.va, true);
    let bypass = t.a.run_in(move || {
        bypass.recheck();
        bypass
    });
    assert!(bypass.udp_gso());
    // No vnet headers: no super-packets at all.
    let va = t.va.clone();
    let plain = t.a.run_in(move || {
        AfPacketPort::open(
            &va,
            AfPacketOpts {
                vnet_hdr: false,
                ..AfPacketOpts::default()
            },
        )
        .expect("open af_packet")
    });
    assert!(!plain.udp_gso());
    drop(queued);
}
