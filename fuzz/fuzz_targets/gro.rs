//! GRO/RSC (`offload::gro::Coalescer`) on arbitrary runs of segments: up
//! to 64 TCP segments of four flows (IPv4 or IPv6, valid checksums) whose
//! sequence numbers, sizes, IDs, flags, options and checksums the input
//! perturbs, mixed with raw frames. Nothing may panic, and coalescing only
//! moves bytes: every packet is either passed on or merged (out + merged =
//! in), the TCP payload (count and byte sum) is the same before and after,
//! and every buffer returns to the pool.
#![no_main]

use dataplane::offload::gro::{Coalescer, GroConfig};
use libfuzzer_sys::fuzz_target;
use packet::buffer::{Packet, Pool};
use std::cell::RefCell;
use std::net::{Ipv4Addr, Ipv6Addr};
use wire::checksum;

const POOL: usize = 96;

thread_local! {
    static STATE: RefCell<Pool> = RefCell::new(Pool::new(POOL));
}

#[derive(Clone, Copy, Default)]
struct Flow {
    seq: u32,
    id: u16,
    tsval: u32,
}

/// One TCP segment behind Ethernet with valid IP and TCP checksums.
fn segment(v6: bool, flow: usize, f: &Flow, flags: u8, ttl: u8, ts: bool, payload: &[u8]) -> Vec<u8> {
    let mut tcp = Vec::with_capacity(32 + payload.len());
    tcp.extend_from_slice(&(1000 + flow as u16).to_be_bytes());
    tcp.extend_from_slice(&80u16.to_be_bytes());
    tcp.extend_from_slice(&f.seq.to_be_bytes());
    tcp.extend_from_slice(&77u32.to_be_bytes());
    let thl = if ts { 32 } else { 20 };
    tcp.push((thl / 4) << 4);
    tcp.push(flags);
    tcp.extend_from_slice(&512u16.to_be_bytes());
    tcp.extend_from_slice(&[0, 0, 0, 0]);
    if ts {
        tcp.extend_from_slice(&[1, 1, 8, 10]);
        tcp.extend_from_slice(&f.tsval.to_be_bytes());
        tcp.extend_from_slice(&5u32.to_be_bytes());
    }
    tcp.extend_from_slice(payload);
    let (s4, d4) = (Ipv4Addr::new(10, 0, 0, 1 + flow as u8), Ipv4Addr::new(10, 0, 1, 1));
    let (s6, d6) = (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1 + flow as u16),
        Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 1),
    );
    let ph = if v6 {
        checksum::pseudo_header_v6(&s6, &d6, 6, tcp.len() as u32)
    } else {
        checksum::pseudo_header_v4(&s4, &d4, 6, tcp.len() as u16)
    };
    let c = !checksum::combine(&[ph, checksum::data(&tcp)]);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    let mut fr = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    if v6 {
        fr.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        fr.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
        fr.extend_from_slice(&[6, ttl]);
        fr.extend_from_slice(&s6.octets());
        fr.extend_from_slice(&d6.octets());
    } else {
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + tcp.len()) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&f.id.to_be_bytes());
        ip[6] = 0x40;
        ip[8] = ttl;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&s4.octets());
        ip[16..20].copy_from_slice(&d4.octets());
        let c = !checksum::data(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        fr.extend_from_slice(&[8, 0]);
        fr.extend_from_slice(&ip);
    }
    fr.extend_from_slice(&tcp);
    fr
}

/// The TCP payload of an Ethernet frame as its headers describe it (none
/// for anything else): what coalescing must carry over unchanged.
fn tcp_payload(d: &[u8]) -> &[u8] {
    let parse = || -> Option<&[u8]> {
        let et = u16::from_be_bytes([*d.get(12)?, *d.get(13)?]);
        let (l4, end) = match (et, d.get(14)? >> 4) {
            (0x0800, 4) => {
                let ihl = usize::from(d[14] & 0x0f) * 4;
                let total = usize::from(u16::from_be_bytes([*d.get(16)?, *d.get(17)?]));
                if *d.get(23)? != 6 || ihl < 20 || total < ihl {
                    return None;
                }
                (14 + ihl, 14 + total)
            }
            (0x86dd, 6) => {
                let plen = usize::from(u16::from_be_bytes([*d.get(18)?, *d.get(19)?]));
                if *d.get(20)? != 6 {
                    return None;
                }
                (54, 54 + plen)
            }
            _ => return None,
        };
        let thl = usize::from(d.get(l4 + 12)? >> 4) * 4;
        if thl < 20 || l4 + thl > end {
            return None;
        }
        d.get(l4 + thl..end)
    };
    parse().unwrap_or(&[])
}

fn tally(frames: impl Iterator<Item = Vec<u8>>) -> (usize, u64) {
    frames.fold((0, 0), |(n, s), f| {
        let p = tcp_payload(&f);
        (n + p.len(), s + p.iter().map(|b| u64::from(*b)).sum::<u64>())
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, recs)) = data.split_first() else {
        return;
    };
    let mut flows = [Flow::default(); 4];
    for (i, f) in flows.iter_mut().enumerate() {
        f.seq = 1000 * i as u32;
        f.id = 0x4000 + i as u16;
    }
    let mut frames: Vec<Vec<u8>> = Vec::new();
    for r in recs.chunks_exact(8).take(64) {
        let flow = usize::from(r[0] & 3);
        let v6 = r[0] & 4 != 0;
        if r[0] & 8 != 0 {
            // A raw frame: the record itself, or it appended to the last.
            let mut f = frames.last().cloned().unwrap_or_default();
            if r[1] & 1 == 0 {
                f.clear();
            }
            f.extend_from_slice(&r[2..]);
            if let Some(at) = usize::from(r[2]).checked_rem(f.len().max(1)) {
                if let Some(b) = f.get_mut(at) {
                    *b ^= r[3];
                }
            }
            frames.push(f);
            continue;
        }
        let len = usize::from(r[1]) * 5;
        let fl = &mut flows[flow];
        match r[2] % 8 {
            0 => fl.seq = fl.seq.wrapping_sub(u32::from(r[2])),
            1 => fl.seq = fl.seq.wrapping_add(u32::from(r[2])),
            _ => {}
        }
        match r[3] % 8 {
            0 => {}
            1 => fl.id = fl.id.wrapping_add(u16::from(r[3])),
            _ => fl.id = fl.id.wrapping_add(1),
        }
        if r[6] & 1 != 0 {
            fl.tsval = fl.tsval.wrapping_add(u32::from(r[6] >> 1)).wrapping_sub(8);
        }
        // ACK always (as a data segment), the input may add PSH, CWR, ECE,
        // SYN, FIN, RST, URG.
        let flags = 0x10 | if r[0] & 0x10 != 0 { r[4] } else { r[4] & 0x08 };
        let ttl = if r[5] & 0x80 != 0 { r[5] } else { 64 };
        let payload: Vec<u8> = (0..len).map(|i| r[7].wrapping_add(i as u8)).collect();
        let mut f = segment(v6, flow, fl, flags, ttl, r[6] & 2 == 0, &payload);
        fl.seq = fl.seq.wrapping_add(len as u32);
        if r[5] & 0x7f == 0x7f && f.len() > 60 {
            // A corrupted payload byte: the checksum no longer holds.
            let n = f.len();
            f[n - 1] ^= 0x5a;
        }
        if r[5] & 0x7f == 0x7e {
            // Ethernet padding after the IP packet.
            f.extend_from_slice(&[0u8; 6]);
        }
        frames.push(f);
    }
    let gro_cfg = GroConfig {
        allow_ts_advance: cfg & 1 != 0,
        max_flows: usize::from(cfg >> 1 & 7) + 1,
        ..GroConfig::ethernet()
    };
    STATE.with(|pool| {
        let pool = &mut *pool.borrow_mut();
        let mut pkts: Vec<Packet> = Vec::new();
        let mut fed = Vec::new();
        for f in &frames {
            let Some(mut p) = pool.alloc() else { break };
            if !p.set_data(f) {
                pool.free(p);
                continue;
            }
            if cfg & 0x10 != 0 {
                p.meta.offload.csum_valid = true;
            }
            fed.push(f.clone());
            pkts.push(p);
        }
        let n = pkts.len();
        let mut c = Coalescer::new(gro_cfg);
        c.coalesce(&mut pkts, pool);
        let st = c.stats().clone();
        assert_eq!(st.packets_in, n as u64);
        assert_eq!(pkts.len() as u64 + st.merged, n as u64, "out + merged = in");
        {
            let before = tally(fed.into_iter());
            let after = tally(pkts.iter().map(|p| p.data().to_vec()));
            assert_eq!(before, after, "TCP payload (bytes, byte sum) preserved");
        }
        pool.free_all(&mut pkts);
        assert_eq!(pool.available(), pool.capacity(), "every buffer returned");
    });
});
