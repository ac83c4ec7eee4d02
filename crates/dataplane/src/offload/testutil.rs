//! Test helpers: frame builders and an independent checksum verifier
//! (RFC 1071 written from scratch, not the code under test).

use packet::buffer::{Packet, Pool};

pub const SRC4: [u8; 4] = [192, 0, 2, 1];
pub const DST4: [u8; 4] = [198, 51, 100, 7];
pub const SRC6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub const DST6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;
pub const URG: u8 = 0x20;
pub const CWR: u8 = 0x80;

/// RFC 1071 checksum: complemented 16-bit one's complement sum, computed
/// word by word with an end-around carry at each step.
pub fn rfc1071(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    let mut i = 0;
    while i < data.len() {
        let hi = u32::from(data[i]);
        let lo = if i + 1 < data.len() {
            u32::from(data[i + 1])
        } else {
            0
        };
        acc += (hi << 8) | lo;
        if acc > 0xffff {
            acc -= 0xffff;
        }
        i += 2;
    }
    !(acc as u16)
}

fn rd16(d: &[u8], at: usize) -> u16 {
    (u16::from(d[at]) << 8) | u16::from(d[at + 1])
}

/// Pseudo header bytes for an L4 segment of the IP packet at `l3` (no
/// IPv6 extension headers).
pub fn pseudo(frame: &[u8], l3: usize, proto: u8, l4_len: usize) -> Vec<u8> {
    let mut p = Vec::new();
    if frame[l3] >> 4 == 4 {
        p.extend_from_slice(&frame[l3 + 12..l3 + 20]);
        p.extend_from_slice(&[0, proto]);
        p.extend_from_slice(&(l4_len as u16).to_be_bytes());
    } else {
        p.extend_from_slice(&frame[l3 + 8..l3 + 40]);
        p.extend_from_slice(&(l4_len as u32).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, proto]);
    }
    p
}

/// The IP header at `l3`: (header length, protocol, packet end per length).
pub fn ip_info(frame: &[u8], l3: usize) -> (usize, u8, usize) {
    if frame[l3] >> 4 == 4 {
        let ihl = usize::from(frame[l3] & 15) * 4;
        (ihl, frame[l3 + 9], l3 + usize::from(rd16(frame, l3 + 2)))
    } else {
        (
            40,
            frame[l3 + 6],
            l3 + 40 + usize::from(rd16(frame, l3 + 4)),
        )
    }
}

/// Does the IPv4 header at `l3` carry a correct checksum?
pub fn ipv4_hdr_ok(frame: &[u8], l3: usize) -> bool {
    let ihl = usize::from(frame[l3] & 15) * 4;
    rfc1071(&frame[l3..l3 + ihl]) == 0
}

/// Does the TCP/UDP segment of the IP packet at `l3` carry a correct
/// checksum (pseudo header included)?
pub fn l4_ok(frame: &[u8], l3: usize) -> bool {
    let (hl, proto, end) = ip_info(frame, l3);
    let l4 = l3 + hl;
    let mut all = pseudo(frame, l3, proto, end - l4);
    all.extend_from_slice(&frame[l4..end]);
    rfc1071(&all) == 0
}

pub fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IPv4 header (checksum filled in).
pub fn ipv4(total: usize, id: u16, frag: u16, ttl: u8, proto: u8, opts: &[u8]) -> Vec<u8> {
    let ihl = 20 + opts.len();
    assert_eq!(ihl % 4, 0);
    let mut h = vec![0x40 | (ihl / 4) as u8, 0x10];
    h.extend_from_slice(&(total as u16).to_be_bytes());
    h.extend_from_slice(&id.to_be_bytes());
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[ttl, proto, 0, 0]);
    h.extend_from_slice(&SRC4);
    h.extend_from_slice(&DST4);
    h.extend_from_slice(opts);
    let c = rfc1071(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

pub fn ipv6(payload_len: usize, next: u8) -> Vec<u8> {
    let mut h = vec![0x60, 0x00, 0x12, 0x34];
    h.extend_from_slice(&(payload_len as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&SRC6);
    h.extend_from_slice(&DST6);
    h
}

/// TCP segment description for [`tcp_frame`].
#[derive(Clone, Debug)]
pub struct Tcp {
    pub v6: bool,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub opts: Vec<u8>,
    pub id: u16,
    pub df: bool,
    pub ttl: u8,
}

impl Tcp {
    pub fn new(v6: bool) -> Self {
        Tcp {
            v6,
            seq: 1000,
            ack: 77,
            flags: ACK,
            window: 512,
            opts: ts_opt(100, 50),
            id: 0x4242,
            df: true,
            ttl: 64,
        }
    }
}

/// TCP timestamp option padded with two NOPs (RFC 7323 Appendix A layout).
pub fn ts_opt(tsval: u32, tsecr: u32) -> Vec<u8> {
    let mut o = vec![1, 1, 8, 10];
    o.extend_from_slice(&tsval.to_be_bytes());
    o.extend_from_slice(&tsecr.to_be_bytes());
    o
}

/// Ethernet + IP + TCP + payload with correct checksums.
pub fn tcp_frame(t: &Tcp, payload: &[u8]) -> Vec<u8> {
    assert_eq!(t.opts.len() % 4, 0);
    let mut seg = vec![0x30, 0x39, 0x01, 0xbb];
    seg.extend_from_slice(&t.seq.to_be_bytes());
    seg.extend_from_slice(&t.ack.to_be_bytes());
    seg.push((((20 + t.opts.len()) / 4) << 4) as u8);
    seg.push(t.flags);
    seg.extend_from_slice(&t.window.to_be_bytes());
    seg.extend_from_slice(&[0, 0, 0, 0]);
    seg.extend_from_slice(&t.opts);
    seg.extend_from_slice(payload);
    finish_frame(
        t.v6,
        6,
        &seg,
        t.id,
        if t.df { 0x4000 } else { 0 },
        t.ttl,
        16,
    )
}

/// Ethernet + IP + UDP + payload with correct checksums.
pub fn udp_frame(v6: bool, payload: &[u8]) -> Vec<u8> {
    let mut seg = vec![0x30, 0x39, 0x12, 0xb5];
    seg.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    seg.extend_from_slice(&[0, 0]);
    seg.extend_from_slice(payload);
    finish_frame(v6, 17, &seg, 7, 0, 64, 6)
}

fn finish_frame(
    v6: bool,
    proto: u8,
    seg: &[u8],
    id: u16,
    frag: u16,
    ttl: u8,
    csum_at: usize,
) -> Vec<u8> {
    let mut f = if v6 {
        let mut f = eth(0x86dd);
        let mut h = ipv6(seg.len(), proto);
        h[7] = ttl;
        f.extend_from_slice(&h);
        f
    } else {
        let mut f = eth(0x0800);
        f.extend_from_slice(&ipv4(20 + seg.len(), id, frag, ttl, proto, &[]));
        f
    };
    let l4 = f.len();
    f.extend_from_slice(seg);
    let mut all = pseudo(&f, 14, proto, seg.len());
    all.extend_from_slice(seg);
    let mut c = rfc1071(&all);
    if c == 0 && proto == 17 {
        c = 0xffff;
    }
    f[l4 + csum_at..l4 + csum_at + 2].copy_from_slice(&c.to_be_bytes());
    f
}

pub fn payload(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) ^ (i >> 8) as u8)
        .collect()
}

/// `bytes` in a buffer from `pool` sized to them (a small one when they
/// fit, as a port's receive takes them).
pub fn packet(pool: &mut Pool, bytes: &[u8], l3: u16) -> Packet {
    let mut p = pool.alloc_for(bytes.len()).expect("pool");
    assert!(p.set_data(bytes));
    p.meta.l3_offset = l3;
    p
}
