//! The whole receive path: one arbitrary frame (with arbitrary offload
//! metadata, as a virtio-net header could claim) injected on a port of a
//! worker whose tables hold two interfaces, a GRE tunnel, a VXLAN tunnel and
//! routes into both, then the graph runs (ethernet-input, ARP/ND, IPv4/IPv6
//! input, lookup, ip-local with decapsulation, rewrite, ICMP errors,
//! fragmentation, tunnel encapsulation, GSO, RSC). Nothing may panic, and
//! every buffer must come back to the pool.
#![no_main]

use packet::buffer::{Gso, Offload};
use dataplane::fib::Prefix;
use dataplane::tables::{Route, SharedTables, TablesBuilder};
use dataplane::testing::{MockHandle, MockPort};
use dataplane::tunnel::{TunnelDef, TunnelKind};
use dataplane::worker::{Worker, WorkerConfig};
use packet::Port;
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;

const MAC0: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC1: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn p(s: &str) -> Prefix {
    s.parse().expect("prefix")
}

struct Rig {
    w: Worker,
    h: Vec<MockHandle>,
    now: u64,
}

fn rig() -> Rig {
    let mut b = TablesBuilder::new();
    b.add_vrf(1, "blue");
    b.add_interface(0, "lan", MAC0, 1500, 1, &[p("10.1.0.1/24"), p("2001:db8:1::1/64")]);
    b.add_interface(1, "wan", MAC1, 1500, 0, &[p("192.0.2.1/24"), p("2001:db8:f::1/64")]);
    for (port, kind, ethernet, key) in [(2u16, TunnelKind::Gre, false, 7u32), (3, TunnelKind::Vxlan, true, 9)] {
        let addrs = if ethernet { vec![p("10.9.0.1/24")] } else { vec![] };
        b.add_interface(port, &format!("t{port}"), [2, 0, 0, 0, 1, port as u8], 1400, 1, &addrs);
        b.add_tunnel(
            port,
            TunnelDef {
                kind,
                local: "192.0.2.1".parse().expect("ip"),
                remote: "192.0.2.2".parse().expect("ip"),
                key: Some(key),
                underlay_vrf: 0,
                ethernet,
                checksum: port == 2,
                sequence: false,
                udp_port: 4789,
            },
        );
    }
    b.add_route(1, p("10.2.0.0/24"), Route::Port { port: 2 });
    b.add_route(
        1,
        p("10.3.0.0/24"),
        Route::Via { next_hop: "10.9.0.2".parse().expect("ip"), port: None },
    );
    let shared = SharedTables::new(b.build().expect("tables"));
    let mut ports: Vec<Box<dyn Port>> = Vec::new();
    let mut h = Vec::new();
    for (name, mac) in [("lan", MAC0), ("wan", MAC1)] {
        let (port, handle) = MockPort::new(name, mac, 1500);
        ports.push(Box::new(port));
        h.push(handle);
    }
    let cfg = WorkerConfig { pool_size: 256, ..WorkerConfig::default() };
    Rig { w: Worker::new(0, ports, shared, cfg), h, now: 1 }
}

thread_local! {
    static RIG: RefCell<Rig> = RefCell::new(rig());
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 12 {
        return;
    }
    let (meta, frame) = data.split_at(12);
    let gso = match meta[0] % 4 {
        0 => Gso::None,
        1 => Gso::TcpV4,
        2 => Gso::TcpV6,
        _ => Gso::UdpL4,
    };
    let o = Offload {
        needs_csum: meta[1] & 1 != 0,
        csum_valid: meta[1] & 2 != 0,
        csum_start: u16::from_le_bytes([meta[2], meta[3]]),
        csum_offset: u16::from_le_bytes([meta[4], meta[5]]),
        gso,
        gso_size: u16::from_le_bytes([meta[6], meta[7]]),
        hdr_len: u16::from_le_bytes([meta[8], meta[9]]),
    };
    RIG.with(|r| {
        let r = &mut *r.borrow_mut();
        let port = usize::from(meta[10] & 1);
        r.h[port].inject_with(frame.to_vec(), o);
        r.now += u64::from(meta[11]);
        r.w.step(r.now);
        for h in &r.h {
            let _ = h.take_tx();
        }
    });
});
