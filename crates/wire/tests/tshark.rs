//! An independent dissector judges our builders: every packet kind the crate
//! emits goes into one pcap, tshark dissects it with checksum validation on,
//! and the test asserts (a) no frame is malformed or carries expert info of
//! severity warning or above and (b) the field values tshark reads are the
//! ones we meant to write.
//!
//! tshark is required: a missing binary fails the test (CI installs it).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use wire::esp::{self, Esp, EspRepr, EspTrailer};
use wire::ethernet::{ethertype, EthernetRepr, Frame, MacAddr, VlanTag};
use wire::gre::{Gre, GreRepr, Protocol};
use wire::icmpv4::{self, Icmpv4Repr};
use wire::icmpv6::{self, Icmpv6Repr};
use wire::ipv4::{self, protocol, Ipv4Repr};
use wire::ipv6::{self, FragmentHeader, FragmentRepr, Ipv6Repr};
use wire::nvgre::{Nvgre, NvgreRepr};
use wire::pcap::{LinkType, Writer, DEFAULT_SNAPLEN};
use wire::tcp::{self, TcpRepr};
use wire::udp::{self, UdpRepr};
use wire::vxlan::{self, Vxlan, VxlanRepr};
use wire::{arp, pcap};

const TSHARK: &str = "/usr/bin/tshark";
/// `*.checksum.status` value of a verified checksum (PROTO_CHECKSUM_E_GOOD;
/// 0 is bad, 2 unverified).
const GOOD: &str = "1";

const MAC_A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
const MAC_B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
const MAC_C: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0c]);
const MAC_D: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0d]);
const V4_A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const V4_B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const V4_IN_A: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const V4_IN_B: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
const V6_A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const V6_B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const V6_IN_A: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const V6_IN_B: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// IP protocol 253 (RFC 3692 experimentation): tshark shows it as data,
/// which keeps inner packets free of any dissector's opinion.
const PROTO_EXPERIMENT: u8 = 253;

// ---------------------------------------------------------------- builders

fn eth(dst: MacAddr, src: MacAddr, vlan: Option<u16>, ty: u16, payload: &[u8]) -> Vec<u8> {
    let repr = EthernetRepr {
        src_addr: src,
        dst_addr: dst,
        vlan: vlan.map(VlanTag::dot1q),
        inner_vlan: None,
        ethertype: ty,
    };
    let mut b = vec![0u8; repr.header_len() + payload.len()];
    repr.emit(&mut Frame::new_unchecked(&mut b[..]));
    b[repr.header_len()..].copy_from_slice(payload);
    b
}

fn v4_repr(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload_len: usize) -> Ipv4Repr {
    Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: proto,
        payload_len,
        ttl: 64,
        tos: 0,
        ident: 0x1234,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    }
}

fn ipv4_with(repr: Ipv4Repr, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; ipv4::HEADER_LEN + payload.len()];
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut b[..]))
        .unwrap();
    b[ipv4::HEADER_LEN..].copy_from_slice(payload);
    b
}

fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_with(v4_repr(src, dst, proto, payload.len()), payload)
}

/// IPv6 fixed header in front of `payload` (which may start with
/// extension headers; `next` names the first).
fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, payload: &[u8]) -> Vec<u8> {
    let repr = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: next,
        payload_len: payload.len(),
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0x12345,
    };
    let mut b = vec![0u8; ipv6::HEADER_LEN + payload.len()];
    repr.emit(&mut ipv6::Packet::new_unchecked(&mut b[..]))
        .unwrap();
    b[ipv6::HEADER_LEN..].copy_from_slice(payload);
    b
}

fn icmp4(src: Ipv4Addr, dst: Ipv4Addr, r: Icmpv4Repr) -> Vec<u8> {
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut icmpv4::Packet::new_unchecked(&mut b[..]))
        .unwrap();
    ipv4(src, dst, protocol::ICMP, &b)
}

fn icmp4_error(kind: icmpv4::ErrorKind, original: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 576];
    let n = icmpv4::build_error(&mut out, V4_B, 64, kind, original).unwrap();
    out.truncate(n);
    out
}

/// ICMPv6 in IPv6; NDP messages get hop limit 255 as RFC 4861 requires.
fn icmp6(src: Ipv6Addr, dst: Ipv6Addr, r: Icmpv6Repr) -> Vec<u8> {
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&src, &dst, &mut icmpv6::Packet::new_unchecked(&mut b[..]))
        .unwrap();
    let mut p = ipv6(src, dst, protocol::ICMPV6, &b);
    if matches!(
        r,
        Icmpv6Repr::NeighborSolicit { .. } | Icmpv6Repr::NeighborAdvert { .. }
    ) {
        ipv6::Packet::new_unchecked(&mut p[..]).set_hop_limit(255);
    }
    p
}

fn icmp6_error(kind: icmpv6::ErrorKind, original: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 1280];
    let n = icmpv6::build_error(&mut out, &V6_B, 64, kind, original).unwrap();
    out.truncate(n);
    out
}

/// A Hop-by-Hop or Destination Options header (RFC 8200 §4.3, §4.6) of
/// 8 bytes: `opt` (type, len, data) then PadN to the end.
fn ipv6_opts_header(next: u8, opt: &[u8]) -> Vec<u8> {
    let mut h = vec![next, 0];
    h.extend_from_slice(opt);
    let pad = 8 - h.len();
    assert!(pad >= 2, "option too long for one 8-byte header");
    h.extend_from_slice(&[1, (pad - 2) as u8]);
    h.resize(8, 0);
    h
}

fn ipv6_fragment(next: u8, offset: u16, more: bool, ident: u32) -> Vec<u8> {
    let r = FragmentRepr {
        next_header: next,
        frag_offset: offset,
        more_frags: more,
        ident,
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut FragmentHeader::new_unchecked(&mut b[..]));
    b
}

fn udp_bytes(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let r = UdpRepr {
        src_port: sport,
        dst_port: dport,
        payload_len: payload.len(),
    };
    let mut u = vec![0u8; r.buffer_len()];
    r.emit(
        &mut udp::Packet::new_unchecked(&mut u[..]),
        &src,
        &dst,
        payload,
    )
    .unwrap();
    u
}

/// UDP in IPv4 with its checksum.
fn udp4(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let u = udp_bytes(src.into(), dst.into(), sport, dport, payload);
    ipv4(src, dst, protocol::UDP, &u)
}

/// UDP in IPv6 with its (mandatory) checksum.
fn udp6(src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let u = udp_bytes(src.into(), dst.into(), sport, dport, payload);
    ipv6(src, dst, protocol::UDP, &u)
}

fn tcp_bytes(src: IpAddr, dst: IpAddr, r: TcpRepr, payload: &[u8]) -> Vec<u8> {
    let mut t = vec![0u8; r.buffer_len()];
    r.emit(
        &mut tcp::Packet::new_unchecked(&mut t[..]),
        &src,
        &dst,
        payload,
    )
    .unwrap();
    t
}

fn tcp_repr(sport: u16, dport: u16, seq: u32, flags: u8, payload_len: usize) -> TcpRepr {
    TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq_number: seq,
        ack_number: None,
        flags,
        window_len: 64240,
        urgent_at: 0,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload_len,
    }
}

fn gre(repr: GreRepr, payload: &[u8]) -> Vec<u8> {
    let hl = repr.header_len();
    let mut b = vec![0u8; hl + payload.len()];
    b[hl..].copy_from_slice(payload);
    repr.emit(&mut Gre::new_unchecked(&mut b[..])).unwrap();
    b
}

fn nvgre(vsid: u32, flow_id: u8, inner: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 8 + inner.len()];
    b[8..].copy_from_slice(inner);
    NvgreRepr { vsid, flow_id }
        .emit(&mut Nvgre::new_unchecked(&mut b[..]))
        .unwrap();
    b
}

fn vxlan(vni: u32, inner: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 8 + inner.len()];
    b[8..].copy_from_slice(inner);
    VxlanRepr { vni }
        .emit(&mut Vxlan::new_unchecked(&mut b[..]))
        .unwrap();
    b
}

/// An ESP packet with an 8-byte IV, opaque "ciphertext" made of a payload
/// and a correct trailer, and a 12-byte ICV (HMAC-SHA1-96 sized).
fn esp_packet(spi: u32, seq: u32) -> Vec<u8> {
    let payload = b"opaque-ciphertext";
    let pad = esp::padding_len(payload.len(), 16);
    let t = EspTrailer {
        pad_len: pad as u8,
        next_header: protocol::IPIP,
    };
    let mut b = vec![0u8; esp::HEADER_LEN + 8 + payload.len() + t.len() + 12];
    EspRepr { spi, seq }
        .emit(&mut Esp::new_unchecked(&mut b[..]))
        .unwrap();
    let body = &mut b[esp::HEADER_LEN..];
    body[..8].copy_from_slice(&[0x11; 8]);
    body[8..8 + payload.len()].copy_from_slice(payload);
    let tail = 8 + payload.len();
    t.emit(&mut body[tail..tail + t.len()]).unwrap();
    let n = body.len();
    body[n - 12..].fill(0x22);
    b
}

fn arp_frame(
    op: arp::Operation,
    sha: MacAddr,
    spa: Ipv4Addr,
    tha: MacAddr,
    tpa: Ipv4Addr,
) -> Vec<u8> {
    let r = arp::ArpRepr {
        operation: op,
        source_hardware_addr: sha,
        source_protocol_addr: spa,
        target_hardware_addr: tha,
        target_protocol_addr: tpa,
    };
    let mut a = vec![0u8; r.buffer_len()];
    r.emit(&mut arp::Packet::new_unchecked(&mut a[..]));
    let dst = if op == arp::Operation::Request {
        MacAddr::BROADCAST
    } else {
        tha
    };
    eth(dst, sha, None, ethertype::ARP, &a)
}

// ---------------------------------------------------------------- cases

/// One frame and what tshark must read in it. Values are compared with the
/// `-T fields` output of the field; a field that occurs several times in a
/// frame (inner and outer headers) reads as "outer,inner".
struct Case {
    name: &'static str,
    frame: Vec<u8>,
    expect: Vec<(&'static str, String)>,
}

fn case(name: &'static str, frame: Vec<u8>, expect: &[(&'static str, &str)]) -> Case {
    Case {
        name,
        frame,
        expect: expect.iter().map(|(f, v)| (*f, v.to_string())).collect(),
    }
}

fn add(v: &mut Vec<Case>, name: &'static str, frame: Vec<u8>, expect: &[(&'static str, &str)]) {
    v.push(case(name, frame, expect));
}

fn inner_v4() -> Vec<u8> {
    ipv4(V4_IN_A, V4_IN_B, PROTO_EXPERIMENT, b"inner-v4")
}

fn inner_v6() -> Vec<u8> {
    ipv6(V6_IN_A, V6_IN_B, PROTO_EXPERIMENT, b"inner-v6")
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();

    // --- Ethernet, 802.1Q, ARP.
    add(
        &mut v,
        "ethernet+ipv4",
        eth(MAC_B, MAC_A, None, ethertype::IPV4, &inner_v4()),
        &[
            ("eth.src", "02:00:00:00:00:0a"),
            ("eth.dst", "02:00:00:00:00:0b"),
            ("eth.type", "0x0800"),
            ("ip.src", "10.1.0.1"),
            ("ip.checksum.status", GOOD),
        ],
    );
    add(
        &mut v,
        "802.1q",
        eth(MAC_B, MAC_A, Some(100), ethertype::IPV4, &inner_v4()),
        &[
            ("vlan.id", "100"),
            ("vlan.etype", "0x0800"),
            ("ip.dst", "10.1.0.2"),
        ],
    );
    let qinq = EthernetRepr {
        src_addr: MAC_A,
        dst_addr: MAC_B,
        vlan: Some(VlanTag {
            tpid: ethertype::QINQ,
            pcp: 3,
            dei: false,
            vid: 200,
        }),
        inner_vlan: Some(VlanTag::dot1q(300)),
        ethertype: ethertype::IPV4,
    };
    let inner = inner_v4();
    let mut qf = vec![0u8; qinq.header_len() + inner.len()];
    qinq.emit(&mut Frame::new_unchecked(&mut qf[..]));
    qf[qinq.header_len()..].copy_from_slice(&inner);
    add(
        &mut v,
        "802.1ad qinq",
        qf,
        &[
            ("ieee8021ad.id", "200"),
            ("ieee8021ad.priority", "3"),
            ("vlan.id", "300"),
            ("eth.type", "0x88a8"),
            ("ip.dst", "10.1.0.2"),
        ],
    );
    add(
        &mut v,
        "arp request",
        arp_frame(arp::Operation::Request, MAC_A, V4_A, MacAddr::ZERO, V4_B),
        &[
            ("arp.opcode", "1"),
            ("arp.src.hw_mac", "02:00:00:00:00:0a"),
            ("arp.dst.proto_ipv4", "192.0.2.2"),
        ],
    );
    add(
        &mut v,
        "arp reply",
        arp_frame(arp::Operation::Reply, MAC_B, V4_B, MAC_A, V4_A),
        &[
            ("arp.opcode", "2"),
            ("arp.src.hw_mac", "02:00:00:00:00:0b"),
            ("arp.src.proto_ipv4", "192.0.2.2"),
        ],
    );

    // --- IPv4 with an option, IPv4 fragments.
    let mut opt4 = vec![0u8; 24 + 8];
    {
        let mut p = ipv4::Packet::new_unchecked(&mut opt4[..]);
        p.set_version_and_header_len(24);
        p.set_total_len(32);
        p.set_ident(0x4242);
        p.set_frag(false, false, 0);
        p.set_ttl(1);
        p.set_protocol(PROTO_EXPERIMENT);
        p.set_src_addr(V4_A);
        p.set_dst_addr(V4_B);
        p.options_mut().copy_from_slice(&[0x94, 0x04, 0x00, 0x00]); // Router Alert
        p.payload_mut().copy_from_slice(b"opt-data");
        p.fill_checksum();
    }
    add(
        &mut v,
        "ipv4 with router alert option",
        eth(MAC_B, MAC_A, None, ethertype::IPV4, &opt4),
        &[
            ("ip.hdr_len", "24"),
            ("ip.opt.type", "148"),
            ("ip.id", "0x4242"),
            ("ip.checksum.status", GOOD),
        ],
    );
    let frag = |more, offset: u16, data: &[u8]| {
        let mut r = v4_repr(V4_A, V4_B, PROTO_EXPERIMENT, data.len());
        r.ident = 0x7777;
        r.dont_frag = false;
        r.more_frags = more;
        r.frag_offset = offset;
        eth(MAC_B, MAC_A, None, ethertype::IPV4, &ipv4_with(r, data))
    };
    add(
        &mut v,
        "ipv4 first fragment",
        frag(true, 0, &[0x5a; 16]),
        &[
            ("ip.flags.mf", "1"),
            ("ip.frag_offset", "0"),
            ("ip.id", "0x7777"),
        ],
    );
    add(
        &mut v,
        "ipv4 last fragment",
        frag(false, 16, &[0x5b; 5]),
        &[
            ("ip.flags.mf", "0"),
            // tshark 4.0 shows the raw field, in 8-byte units.
            ("ip.frag_offset", "2"),
            ("ip.fragment.count", "2"),
            ("ip.checksum.status", GOOD),
        ],
    );

    // --- IPv6 with Hop-by-Hop + Destination Options + Fragment headers.
    let mut chain = ipv6_opts_header(protocol::IPV6_OPTS, &[0x05, 0x02, 0x00, 0x00]);
    chain.extend(ipv6_opts_header(protocol::IPV6_FRAG, &[]));
    chain.extend(ipv6_fragment(PROTO_EXPERIMENT, 0, true, 0xabcd_0001));
    chain.extend_from_slice(&[0x6a; 24]);
    let ext = ipv6(V6_A, V6_B, protocol::HOPOPT, &chain);
    // Our own walker reaches the payload behind the chain.
    let hc = ipv6::header_chain(&ext).unwrap();
    assert_eq!(
        (hc.protocol, hc.offset, hc.fragment),
        (PROTO_EXPERIMENT, 64, Some(56))
    );
    add(
        &mut v,
        "ipv6 hbh+dstopts+frag",
        eth(MAC_B, MAC_A, None, ethertype::IPV6, &ext),
        &[
            ("ipv6.nxt", "0"),
            ("ipv6.hopopts.nxt", "60"),
            ("ipv6.opt.router_alert", "0"),
            ("ipv6.dstopts.nxt", "44"),
            ("ipv6.fraghdr.nxt", "253"),
            ("ipv6.fraghdr.more", "1"),
            ("ipv6.fraghdr.ident", "0xabcd0001"),
            ("ipv6.flow", "0x012345"),
        ],
    );

    // --- ICMPv4: echo, unreachable (fragmentation needed), time exceeded.
    add(
        &mut v,
        "icmpv4 echo request",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV4,
            &icmp4(
                V4_A,
                V4_B,
                Icmpv4Repr::EchoRequest {
                    ident: 0x1234,
                    seq_no: 7,
                    data: b"ping-data",
                },
            ),
        ),
        &[
            ("icmp.type", "8"),
            ("icmp.code", "0"),
            ("icmp.seq", "7"),
            ("icmp.checksum.status", GOOD),
        ],
    );
    add(
        &mut v,
        "icmpv4 echo reply",
        eth(
            MAC_A,
            MAC_B,
            None,
            ethertype::IPV4,
            &icmp4(
                V4_B,
                V4_A,
                Icmpv4Repr::EchoReply {
                    ident: 0x1234,
                    seq_no: 7,
                    data: b"ping-data",
                },
            ),
        ),
        &[
            ("icmp.type", "0"),
            ("icmp.seq", "7"),
            ("icmp.checksum.status", GOOD),
        ],
    );
    let big = ipv4(V4_A, V4_IN_B, PROTO_EXPERIMENT, &[0x77; 1400]);
    add(
        &mut v,
        "icmpv4 frag needed",
        eth(
            MAC_A,
            MAC_B,
            None,
            ethertype::IPV4,
            &icmp4_error(
                icmpv4::ErrorKind::DstUnreachable {
                    code: icmpv4::unreach_code::FRAG_NEEDED,
                    next_hop_mtu: 1400,
                },
                &big,
            ),
        ),
        &[
            ("icmp.type", "3"),
            ("icmp.code", "4"),
            ("icmp.mtu", "1400"),
            ("icmp.checksum.status", GOOD),
            ("ip.dst", "192.0.2.1,10.1.0.2"),
        ],
    );
    add(
        &mut v,
        "icmpv4 time exceeded",
        eth(
            MAC_A,
            MAC_B,
            None,
            ethertype::IPV4,
            &icmp4_error(icmpv4::ErrorKind::TimeExceeded { code: 0 }, &inner_v4()),
        ),
        &[
            ("icmp.type", "11"),
            ("icmp.code", "0"),
            ("icmp.checksum.status", GOOD),
            ("ip.src", "192.0.2.2,10.1.0.1"),
        ],
    );

    // --- ICMPv6: echo, packet too big, neighbour solicitation/advert.
    add(
        &mut v,
        "icmpv6 echo request",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV6,
            &icmp6(
                V6_A,
                V6_B,
                Icmpv6Repr::EchoRequest {
                    ident: 0x4321,
                    seq_no: 9,
                    data: b"ping6",
                },
            ),
        ),
        &[
            ("icmpv6.type", "128"),
            ("icmpv6.echo.identifier", "0x4321"),
            ("icmpv6.echo.sequence_number", "9"),
            ("icmpv6.checksum.status", GOOD),
        ],
    );
    let big6 = ipv6(V6_A, V6_IN_B, PROTO_EXPERIMENT, &[0x66; 1400]);
    add(
        &mut v,
        "icmpv6 packet too big",
        eth(
            MAC_A,
            MAC_B,
            None,
            ethertype::IPV6,
            &icmp6_error(icmpv6::ErrorKind::PktTooBig { mtu: 1280 }, &big6),
        ),
        &[
            ("icmpv6.type", "2"),
            ("icmpv6.mtu", "1280"),
            ("icmpv6.checksum.status", GOOD),
            ("ipv6.dst", "2001:db8::1,fd00::2"),
        ],
    );
    let sn = icmpv6::solicited_node(&V6_B);
    add(
        &mut v,
        "icmpv6 neighbor solicitation",
        eth(
            icmpv6::multicast_mac(&sn),
            MAC_A,
            None,
            ethertype::IPV6,
            &icmp6(
                V6_A,
                sn,
                Icmpv6Repr::NeighborSolicit {
                    target: V6_B,
                    lladdr: Some(MAC_A),
                },
            ),
        ),
        &[
            ("icmpv6.type", "135"),
            ("icmpv6.nd.ns.target_address", "2001:db8::2"),
            ("icmpv6.opt.linkaddr", "02:00:00:00:00:0a"),
            ("icmpv6.checksum.status", GOOD),
            ("ipv6.dst", "ff02::1:ff00:2"),
            ("eth.dst", "33:33:ff:00:00:02"),
        ],
    );
    add(
        &mut v,
        "icmpv6 neighbor advertisement",
        eth(
            MAC_A,
            MAC_B,
            None,
            ethertype::IPV6,
            &icmp6(
                V6_B,
                V6_A,
                Icmpv6Repr::NeighborAdvert {
                    flags: icmpv6::na_flags::SOLICITED | icmpv6::na_flags::OVERRIDE,
                    target: V6_B,
                    lladdr: Some(MAC_B),
                },
            ),
        ),
        &[
            ("icmpv6.type", "136"),
            ("icmpv6.nd.na.target_address", "2001:db8::2"),
            ("icmpv6.nd.na.flag.s", "1"),
            ("icmpv6.nd.na.flag.o", "1"),
            ("icmpv6.nd.na.flag.r", "0"),
            ("icmpv6.opt.linkaddr", "02:00:00:00:00:0b"),
            ("icmpv6.checksum.status", GOOD),
        ],
    );

    // --- UDP over IPv4 and IPv6 (odd payload length: checksum padding).
    add(
        &mut v,
        "udp/ipv4",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV4,
            &udp4(V4_A, V4_B, 40000, 40001, b"udp-v4!"),
        ),
        &[
            ("udp.srcport", "40000"),
            ("udp.dstport", "40001"),
            ("udp.length", "15"),
            ("udp.checksum.status", GOOD),
        ],
    );
    add(
        &mut v,
        "udp/ipv6",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV6,
            &udp6(V6_A, V6_B, 40002, 40003, b"udp-v6!"),
        ),
        &[
            ("udp.srcport", "40002"),
            ("udp.dstport", "40003"),
            ("udp.length", "15"),
            ("udp.checksum.status", GOOD),
        ],
    );

    // --- TCP: SYN and SYN-ACK with MSS, window scale, SACK-permitted and
    // timestamps over IPv4; a data segment with SACK blocks over IPv6.
    let mut syn = tcp_repr(40000, 80, 0x0102_0304, tcp::flags::SYN, 0);
    syn.max_seg_size = Some(1460);
    syn.window_scale = Some(7);
    syn.sack_permitted = true;
    syn.timestamp = Some((1000, 0));
    add(
        &mut v,
        "tcp syn/ipv4",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV4,
            &ipv4(
                V4_A,
                V4_B,
                protocol::TCP,
                &tcp_bytes(V4_A.into(), V4_B.into(), syn, &[]),
            ),
        ),
        &[
            ("tcp.flags.syn", "1"),
            ("tcp.flags.ack", "0"),
            ("tcp.seq_raw", "16909060"),
            ("tcp.options.mss_val", "1460"),
            ("tcp.options.wscale.shift", "7"),
            ("tcp.options.sack_perm", "0402"),
            ("tcp.options.timestamp.tsval", "1000"),
            ("tcp.checksum.status", GOOD),
        ],
    );
    let mut synack = tcp_repr(80, 40000, 0x0a0b_0c0d, tcp::flags::SYN, 0);
    synack.ack_number = Some(0x0102_0305);
    synack.max_seg_size = Some(1400);
    synack.window_scale = Some(9);
    synack.sack_permitted = true;
    synack.timestamp = Some((5000, 1000));
    add(
        &mut v,
        "tcp syn-ack/ipv4",
        eth(
            MAC_A,
            MAC_B,
            None,
            ethertype::IPV4,
            &ipv4(
                V4_B,
                V4_A,
                protocol::TCP,
                &tcp_bytes(V4_B.into(), V4_A.into(), synack, &[]),
            ),
        ),
        &[
            ("tcp.flags.syn", "1"),
            ("tcp.flags.ack", "1"),
            ("tcp.ack_raw", "16909061"),
            ("tcp.options.mss_val", "1400"),
            ("tcp.options.wscale.shift", "9"),
            ("tcp.options.timestamp.tsecr", "1000"),
            ("tcp.checksum.status", GOOD),
        ],
    );
    let mut data = tcp_repr(40010, 443, 1000, tcp::flags::PSH, b"tcp-over-v6".len());
    data.ack_number = Some(2000);
    data.timestamp = Some((7, 8));
    data.sack_ranges = [Some((3000, 4000)), Some((5000, 6000)), None];
    add(
        &mut v,
        "tcp data+sack/ipv6",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV6,
            &ipv6(
                V6_A,
                V6_B,
                protocol::TCP,
                &tcp_bytes(V6_A.into(), V6_B.into(), data, b"tcp-over-v6"),
            ),
        ),
        &[
            ("tcp.flags.push", "1"),
            ("tcp.len", "11"),
            ("tcp.options.sack_le", "3000,5000"),
            ("tcp.options.sack_re", "4000,6000"),
            ("tcp.options.timestamp.tsval", "7"),
            ("tcp.checksum.status", GOOD),
        ],
    );

    // --- GRE with checksum + key + sequence over IPv4 and IPv6.
    let full = |protocol, key, seq| GreRepr {
        checksum: true,
        key: Some(key),
        seq: Some(seq),
        protocol,
    };
    add(
        &mut v,
        "gre(c,k,s)/ipv4 inner ipv4",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV4,
            &ipv4(
                V4_A,
                V4_B,
                protocol::GRE,
                &gre(full(Protocol::Ipv4, 0x0102_0304, 7), &inner_v4()),
            ),
        ),
        &[
            ("gre.flags.checksum", "1"),
            ("gre.flags.key", "1"),
            ("gre.flags.sequence_number", "1"),
            ("gre.key", "0x01020304"),
            ("gre.sequence_number", "7"),
            ("gre.checksum.status", GOOD),
            ("gre.proto", "0x0800"),
            ("ip.src", "192.0.2.1,10.1.0.1"),
            ("ip.checksum.status", "1,1"),
        ],
    );
    add(
        &mut v,
        "gre(c,k,s)/ipv4 inner ipv6",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV4,
            &ipv4(
                V4_A,
                V4_B,
                protocol::GRE,
                &gre(full(Protocol::Ipv6, 0xfeed_f00d, 8), &inner_v6()),
            ),
        ),
        &[
            ("gre.key", "0xfeedf00d"),
            ("gre.sequence_number", "8"),
            ("gre.checksum.status", GOOD),
            ("gre.proto", "0x86dd"),
            ("ipv6.src", "fd00::1"),
        ],
    );
    add(
        &mut v,
        "gre(c,k,s)/ipv6 inner ipv4",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV6,
            &ipv6(
                V6_A,
                V6_B,
                protocol::GRE,
                &gre(full(Protocol::Ipv4, 42, 9), &inner_v4()),
            ),
        ),
        &[
            ("ipv6.src", "2001:db8::1"),
            ("gre.key", "0x0000002a"),
            ("gre.sequence_number", "9"),
            ("gre.checksum.status", GOOD),
            ("ip.src", "10.1.0.1"),
        ],
    );
    add(
        &mut v,
        "gre(c,k,s)/ipv6 inner ipv6",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV6,
            &ipv6(
                V6_A,
                V6_B,
                protocol::GRE,
                &gre(full(Protocol::Ipv6, 43, 10), &inner_v6()),
            ),
        ),
        &[
            ("ipv6.src", "2001:db8::1,fd00::1"),
            ("gre.key", "0x0000002b"),
            ("gre.sequence_number", "10"),
            ("gre.checksum.status", GOOD),
        ],
    );
    // --- GRE transparent Ethernet bridging (what OVS's L2 GRE sends).
    let inner_eth = eth(MAC_D, MAC_C, None, ethertype::IPV4, &inner_v4());
    add(
        &mut v,
        "gre(k)/ipv4 inner ethernet",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV4,
            &ipv4(
                V4_A,
                V4_B,
                protocol::GRE,
                &gre(
                    GreRepr {
                        checksum: false,
                        key: Some(1000),
                        seq: None,
                        protocol: Protocol::TransparentEthernet,
                    },
                    &inner_eth,
                ),
            ),
        ),
        &[
            ("gre.proto", "0x6558"),
            ("gre.key", "0x000003e8"),
            ("eth.src", "02:00:00:00:00:0a,02:00:00:00:00:0c"),
            ("ip.src", "192.0.2.1,10.1.0.1"),
        ],
    );
    // --- NVGRE: tshark 4.0 has no NVGRE-specific fields, it reads the
    // header as GRE with key = VSID << 8 | FlowID.
    add(
        &mut v,
        "nvgre",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV4,
            &ipv4(
                V4_A,
                V4_B,
                protocol::GRE,
                &nvgre(0x12_3456, 0x9a, &inner_eth),
            ),
        ),
        &[
            ("gre.flags.key", "1"),
            ("gre.flags.checksum", "0"),
            ("gre.flags.sequence_number", "0"),
            ("gre.proto", "0x6558"),
            ("gre.key", "0x1234569a"),
            ("eth.dst", "02:00:00:00:00:0b,02:00:00:00:00:0d"),
        ],
    );
    // --- VXLAN over UDP 4789.
    add(
        &mut v,
        "vxlan",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV4,
            &udp4(
                V4_A,
                V4_B,
                49152,
                vxlan::PORT,
                &vxlan(0xab_cdef, &inner_eth),
            ),
        ),
        &[
            ("udp.dstport", "4789"),
            ("udp.checksum.status", GOOD),
            ("vxlan.flag_i", "1"),
            ("vxlan.vni", "11259375"),
            ("eth.src", "02:00:00:00:00:0a,02:00:00:00:00:0c"),
        ],
    );
    add(
        &mut v,
        "vxlan/ipv6",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV6,
            &udp6(V6_A, V6_B, 49153, vxlan::PORT, &vxlan(7, &inner_eth)),
        ),
        &[
            ("udp.checksum.status", GOOD),
            ("vxlan.vni", "7"),
            ("ip.dst", "10.1.0.2"),
        ],
    );
    // --- ESP, raw and UDP-encapsulated.
    add(
        &mut v,
        "esp/ipv4",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV4,
            &ipv4(V4_A, V4_B, protocol::ESP, &esp_packet(0x0000_1001, 1)),
        ),
        &[("esp.spi", "0x00001001"), ("esp.sequence", "1")],
    );
    add(
        &mut v,
        "esp/udp4500",
        eth(
            MAC_B,
            MAC_A,
            None,
            ethertype::IPV4,
            &udp4(
                V4_A,
                V4_B,
                esp::NAT_T_PORT,
                esp::NAT_T_PORT,
                &esp_packet(0x0000_2002, 1),
            ),
        ),
        &[
            ("udp.dstport", "4500"),
            ("udp.checksum.status", GOOD),
            ("esp.spi", "0x00002002"),
            ("esp.sequence", "1"),
        ],
    );

    v
}

// ---------------------------------------------------------------- runner

/// A unique temporary path removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(tag: &str) -> TempFile {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut p = std::env::temp_dir();
        p.push(format!(
            "vecgate-wire-{tag}-{}-{n}.pcap",
            std::process::id()
        ));
        TempFile(p)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn write_pcap(frames: &[&[u8]]) -> TempFile {
    let f = TempFile::new("tshark");
    let mut w = Writer::new(Vec::new(), LinkType::Ethernet, DEFAULT_SNAPLEN).unwrap();
    for (i, fr) in frames.iter().enumerate() {
        w.write_packet(Duration::new(1_700_000_000 + i as u64, 0), fr)
            .unwrap();
    }
    let bytes = w.into_inner();
    // Our own reader reads back what we wrote.
    let back: Vec<_> = pcap::Reader::new(&bytes)
        .unwrap()
        .collect::<wire::Result<_>>()
        .unwrap();
    assert_eq!(back.len(), frames.len());
    std::fs::write(&f.0, &bytes).unwrap();
    f
}

/// Preferences that make tshark verify every checksum it knows.
const PREFS: &[&str] = &[
    "-o",
    "ip.check_checksum:TRUE",
    "-o",
    "tcp.check_checksum:TRUE",
    "-o",
    "udp.check_checksum:TRUE",
    // Absolute sequence numbers, so SACK edges read as written.
    "-o",
    "tcp.relative_sequence_numbers:FALSE",
];

fn tshark(args: &[&str]) -> String {
    let out = Command::new("timeout")
        .arg("120")
        .arg(TSHARK)
        .args(["-n"])
        .args(PREFS)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {TSHARK}: {e} (tshark is required)"));
    assert!(
        out.status.success(),
        "tshark failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("tshark output is UTF-8")
}

/// Runs tshark once over `file`, extracting `fields` for every frame.
fn dissect(file: &TempFile, fields: &[&str]) -> Vec<HashMap<String, String>> {
    let path = file.0.to_str().unwrap();
    let mut args = vec!["-r", path, "-T", "fields", "-E", "separator=\t"];
    for f in fields {
        args.push("-e");
        args.push(f);
    }
    tshark(&args)
        .lines()
        .map(|line| {
            fields
                .iter()
                .map(|f| f.to_string())
                .zip(line.split('\t').map(str::to_string))
                .collect()
        })
        .collect()
}

/// Frame numbers tshark flags as malformed or with warning/error expert
/// info.
fn problems(file: &TempFile) -> String {
    let path = file.0.to_str().unwrap();
    tshark(&[
        "-r",
        path,
        "-Y",
        "_ws.malformed || _ws.expert.severity >= warning",
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-e",
        "_ws.expert.message",
    ])
}

fn check(cases: &[Case]) -> Vec<String> {
    let frames: Vec<&[u8]> = cases.iter().map(|c| c.frame.as_slice()).collect();
    let file = write_pcap(&frames);
    let mut errors = Vec::new();

    let bad = problems(&file);
    if !bad.trim().is_empty() {
        errors.push(format!("tshark reports problems (frame, message):\n{bad}"));
    }

    let mut fields: Vec<&str> = vec!["frame.number", "frame.protocols"];
    for c in cases {
        for (f, _) in &c.expect {
            if !fields.contains(f) {
                fields.push(f);
            }
        }
    }
    let rows = dissect(&file, &fields);
    if rows.len() != cases.len() {
        errors.push(format!(
            "tshark saw {} frames, wrote {}",
            rows.len(),
            cases.len()
        ));
        return errors;
    }
    for (i, (c, row)) in cases.iter().zip(&rows).enumerate() {
        for (f, want) in &c.expect {
            let got = row.get(*f).map(String::as_str).unwrap_or("");
            if got != want {
                errors.push(format!(
                    "frame {} ({}): {f} = {got:?}, want {want:?} [{}]",
                    i + 1,
                    c.name,
                    row.get("frame.protocols").map(String::as_str).unwrap_or("")
                ));
            }
        }
    }
    errors
}

/// The outer layers of a frame, split with the crate's own views, named
/// after the fuzz target that parses each.
fn layers(frame: &[u8]) -> Vec<(&'static str, &[u8])> {
    let mut out = vec![("packet", frame), ("ethernet", frame)];
    let Ok(f) = Frame::new_checked(frame) else {
        return out;
    };
    // Views hand out slices tied to themselves: slice the frame instead.
    let l3 = &frame[f.header_len()..];
    let (proto, l4) = match f.ethertype() {
        ethertype::ARP => {
            out.push(("arp", l3));
            return out;
        }
        ethertype::IPV4 => {
            let Ok(p) = ipv4::Packet::new_checked(l3) else {
                return out;
            };
            out.push(("ipv4", l3));
            (
                p.protocol(),
                &l3[p.header_len()..usize::from(p.total_len())],
            )
        }
        ethertype::IPV6 => {
            out.push(("ipv6", l3));
            let Ok(c) = ipv6::header_chain(l3) else {
                return out;
            };
            (c.protocol, &l3[c.offset..])
        }
        _ => return out,
    };
    match proto {
        protocol::ICMP => out.push(("icmpv4", l4)),
        protocol::ICMPV6 => out.push(("icmpv6", l4)),
        protocol::TCP => out.push(("tcp", l4)),
        protocol::ESP => out.push(("esp", l4)),
        protocol::GRE => {
            out.push(("gre", l4));
            if Nvgre::new_checked(l4).is_ok() {
                out.push(("nvgre", l4));
            }
        }
        protocol::UDP => {
            out.push(("udp", l4));
            if let Ok(u) = udp::Packet::new_checked(l4) {
                let payload = &l4[udp::HEADER_LEN..usize::from(u.len())];
                match u.dst_port() {
                    vxlan::PORT => out.push(("vxlan", payload)),
                    esp::NAT_T_PORT => out.push(("esp", payload)),
                    _ => {}
                }
            }
        }
        _ => {}
    }
    out
}

/// With `WIRE_FUZZ_SEEDS=DIR` set, also writes every frame, and each of its
/// layers, to `DIR/<fuzz target>/`: valid, checksum-correct packets are the
/// seeds the fuzzers need to get past the checksums
/// (`scripts/fuzz.sh seed`).
fn write_fuzz_seeds(cases: &[Case]) {
    let Some(dir) = std::env::var_os("WIRE_FUZZ_SEEDS") else {
        return;
    };
    for (i, c) in cases.iter().enumerate() {
        let name: String = c
            .name
            .chars()
            .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '_' })
            .collect();
        for (target, bytes) in layers(&c.frame) {
            let d = PathBuf::from(&dir).join(target);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(format!("{i:02}-{name}")), bytes).unwrap();
        }
    }
}

#[test]
fn tshark_dissects_every_builder() {
    assert!(
        std::path::Path::new(TSHARK).exists(),
        "{TSHARK} is missing: install the Debian package tshark"
    );
    let cases = cases();
    write_fuzz_seeds(&cases);
    let errors = check(&cases);
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The judge must be able to say no: a frame with a corrupted GRE checksum
/// and one with a wrong key must both be caught.
#[test]
fn tshark_catches_corruption() {
    let mut cases = cases();
    let i = cases
        .iter()
        .position(|c| c.name.starts_with("gre(c,k,s)/ipv4 inner ipv4"))
        .unwrap();
    let mut c = cases.swap_remove(i);
    let n = c.frame.len();
    c.frame[n - 1] ^= 0x55; // payload byte covered by the GRE checksum
    let errors = check(&[c]);
    let joined = errors.join("\n");
    assert!(joined.contains("gre.checksum.status"), "{joined}");
    assert!(joined.contains("tshark reports problems"), "{joined}");
}
