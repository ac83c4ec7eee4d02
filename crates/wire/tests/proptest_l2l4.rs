//! Property tests for the L2–L4 formats: every Repr built and emitted parses
//! back to itself with verifying checksums, and no parser panics on any
//! input.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use wire::ethernet::{self, EthernetRepr, MacAddr, VlanTag};
use wire::{arp, checksum, icmpv4, icmpv6, ipv4, ipv6, tcp, udp, vnet};

fn mac() -> impl Strategy<Value = MacAddr> {
    any::<[u8; 6]>().prop_map(MacAddr)
}

fn vlan() -> impl Strategy<Value = VlanTag> {
    (
        prop_oneof![
            Just(ethernet::ethertype::VLAN),
            Just(ethernet::ethertype::QINQ)
        ],
        0u8..8,
        any::<bool>(),
        0u16..4096,
    )
        .prop_map(|(tpid, pcp, dei, vid)| VlanTag {
            tpid,
            pcp,
            dei,
            vid,
        })
}

fn v4() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from)
}

fn v6() -> impl Strategy<Value = Ipv6Addr> {
    any::<u128>().prop_map(Ipv6Addr::from)
}

proptest! {
    #[test]
    fn ethernet_roundtrip(
        src in mac(), dst in mac(),
        tags in proptest::option::of((vlan(), proptest::option::of(vlan()))),
        et in prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x0806), Just(0x6558)],
        payload in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let (vlan, inner_vlan) = match tags { Some((a, b)) => (Some(a), b), None => (None, None) };
        let r = EthernetRepr { src_addr: src, dst_addr: dst, vlan, inner_vlan, ethertype: et };
        let mut buf = vec![0u8; r.buffer_len(payload.len())];
        r.emit(&mut ethernet::Frame::new_unchecked(&mut buf[..]));
        buf[r.header_len()..].copy_from_slice(&payload);
        let f = ethernet::Frame::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&f).unwrap(), r);
        prop_assert_eq!(f.payload(), &payload[..]);
        prop_assert_eq!(f.ethertype(), et);
    }

    #[test]
    fn arp_roundtrip(op in 1u16..3, sha in mac(), spa in v4(), tha in mac(), tpa in v4()) {
        let r = arp::ArpRepr {
            operation: op.into(),
            source_hardware_addr: sha, source_protocol_addr: spa,
            target_hardware_addr: tha, target_protocol_addr: tpa,
        };
        let mut buf = [0u8; arp::ETH_IPV4_LEN];
        r.emit(&mut arp::Packet::new_unchecked(&mut buf[..]));
        prop_assert_eq!(arp::ArpRepr::parse(&arp::Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn ipv4_roundtrip_and_ttl(
        src in v4(), dst in v4(), proto in any::<u8>(), ttl in any::<u8>(), tos in any::<u8>(),
        ident in any::<u16>(), df in any::<bool>(), mf in any::<bool>(), off in 0u16..8192,
        payload_len in 0usize..200,
    ) {
        let r = ipv4::Ipv4Repr {
            src_addr: src, dst_addr: dst, protocol: proto, payload_len, ttl, tos, ident,
            dont_frag: df, more_frags: mf, frag_offset: off * 8,
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut ipv4::Packet::new_unchecked(&mut buf[..])).unwrap();
        let p = ipv4::Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(ipv4::Ipv4Repr::parse(&p).unwrap(), r);
        // The fast-path TTL decrement keeps the checksum equal to a full
        // recomputation.
        let mut p = ipv4::Packet::new_checked(&mut buf[..]).unwrap();
        if p.decrement_ttl() {
            prop_assert_eq!(p.ttl(), ttl - 1);
            prop_assert!(p.verify_checksum());
        } else {
            prop_assert!(ttl <= 1);
        }
    }

    #[test]
    fn ipv6_roundtrip(
        src in v6(), dst in v6(), nh in any::<u8>(), hl in any::<u8>(), tc in any::<u8>(),
        fl in 0u32..(1 << 20), payload_len in 0usize..200,
    ) {
        let r = ipv6::Ipv6Repr {
            src_addr: src, dst_addr: dst, next_header: nh, payload_len, hop_limit: hl,
            traffic_class: tc, flow_label: fl,
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut ipv6::Packet::new_unchecked(&mut buf[..])).unwrap();
        let p = ipv6::Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(ipv6::Ipv6Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn udp_roundtrip(
        sp in any::<u16>(), dp in any::<u16>(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        s4 in v4(), d4 in v4(), s6 in v6(), d6 in v6(),
    ) {
        let r = udp::UdpRepr { src_port: sp, dst_port: dp, payload_len: payload.len() };
        for (s, d) in [(IpAddr::V4(s4), IpAddr::V4(d4)), (IpAddr::V6(s6), IpAddr::V6(d6))] {
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut udp::Packet::new_unchecked(&mut buf[..]), &s, &d, &payload).unwrap();
            let p = udp::Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.checksum() != 0);
            prop_assert_eq!(udp::UdpRepr::parse(&p, &s, &d).unwrap(), r);
            prop_assert_eq!(p.payload(), &payload[..]);
        }
    }

    #[test]
    fn tcp_roundtrip(
        sp in any::<u16>(), dp in any::<u16>(), seq in any::<u32>(), ack in proptest::option::of(any::<u32>()),
        fl in any::<u8>(), win in any::<u16>(), mss in proptest::option::of(any::<u16>()),
        ws in proptest::option::of(0u8..15), sp_ok in any::<bool>(),
        ts in proptest::option::of(any::<(u32, u32)>()),
        sacks in proptest::collection::vec(any::<(u32, u32)>(), 0..3),
        payload in proptest::collection::vec(any::<u8>(), 0..100),
        s4 in v4(), d4 in v4(), s6 in v6(), d6 in v6(),
    ) {
        let mut sack_ranges = [None; 3];
        for (i, s) in sacks.iter().enumerate() { sack_ranges[i] = Some(*s); }
        let r = tcp::TcpRepr {
            src_port: sp, dst_port: dp, seq_number: seq, ack_number: ack,
            flags: if ack.is_some() { fl | tcp::flags::ACK } else { fl & !tcp::flags::ACK },
            window_len: win, urgent_at: 0, max_seg_size: mss, window_scale: ws,
            sack_permitted: sp_ok, sack_ranges, timestamp: ts, payload_len: payload.len(),
        };
        prop_assume!(r.header_len() <= tcp::MAX_HEADER_LEN);
        for (s, d) in [(IpAddr::V4(s4), IpAddr::V4(d4)), (IpAddr::V6(s6), IpAddr::V6(d6))] {
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut tcp::Packet::new_unchecked(&mut buf[..]), &s, &d, &payload).unwrap();
            let p = tcp::Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(tcp::TcpRepr::parse(&p, &s, &d).unwrap(), r);
            // MSS clamping keeps the checksum valid.
            let mut p = tcp::Packet::new_checked(&mut buf[..]).unwrap();
            let clamped = p.clamp_mss(1200, true).unwrap();
            prop_assert!(p.verify_checksum(&s, &d));
            let expect = mss.filter(|&m| m > 1200 && r.flags & tcp::flags::SYN != 0);
            prop_assert_eq!(clamped, expect);
        }
    }

    #[test]
    fn icmpv4_echo_roundtrip(ident in any::<u16>(), seq in any::<u16>(), data in proptest::collection::vec(any::<u8>(), 0..100), req in any::<bool>()) {
        let r = if req {
            icmpv4::Icmpv4Repr::EchoRequest { ident, seq_no: seq, data: &data }
        } else {
            icmpv4::Icmpv4Repr::EchoReply { ident, seq_no: seq, data: &data }
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut icmpv4::Packet::new_unchecked(&mut buf[..])).unwrap();
        let p = icmpv4::Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(icmpv4::Icmpv4Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn icmpv6_ndp_roundtrip(
        s in v6(), d in v6(), target in v6(), ll in proptest::option::of(mac()),
        flags in any::<u8>(), which in 0u8..4,
    ) {
        prop_assume!(!target.is_multicast());
        let r = match which {
            0 => icmpv6::Icmpv6Repr::NeighborSolicit { target, lladdr: ll },
            1 => icmpv6::Icmpv6Repr::NeighborAdvert { flags: flags & 0xe0, target, lladdr: ll },
            2 => icmpv6::Icmpv6Repr::RouterSolicit { lladdr: ll },
            _ => icmpv6::Icmpv6Repr::RouterAdvert {
                hop_limit: flags, flags: flags & 0xc0, router_lifetime: 1800,
                reachable_time: 0, retrans_time: 0, lladdr: ll, mtu: Some(1500),
            },
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&s, &d, &mut icmpv6::Packet::new_unchecked(&mut buf[..])).unwrap();
        let p = icmpv6::Packet::new_checked(&buf[..]).unwrap();
        prop_assert!(p.verify_checksum(&s, &d));
        prop_assert_eq!(icmpv6::Icmpv6Repr::parse(&s, &d, &p).unwrap(), r);
    }

    #[test]
    fn icmp_errors_verify(
        payload in proptest::collection::vec(any::<u8>(), 0..1600),
        s4 in v4(), d4 in v4(), s6 in v6(), d6 in v6(), me6 in v6(),
    ) {
        // IPv4 error about a datagram of any size.
        let ip = ipv4::Ipv4Repr {
            src_addr: s4, dst_addr: d4, protocol: 17, payload_len: payload.len(), ttl: 1,
            tos: 0, ident: 1, dont_frag: true, more_frags: false, frag_offset: 0,
        };
        let mut orig = vec![0u8; ip.buffer_len()];
        ip.emit(&mut ipv4::Packet::new_unchecked(&mut orig[..])).unwrap();
        orig[20..].copy_from_slice(&payload);
        let mut out = [0u8; 1500];
        match icmpv4::build_error(&mut out, d4, 64, icmpv4::ErrorKind::TimeExceeded { code: 0 }, &orig) {
            Ok(n) => {
                prop_assert!(n <= icmpv4::MAX_ERROR_LEN);
                let p = ipv4::Packet::new_checked(&out[..n]).unwrap();
                prop_assert!(p.verify_checksum());
                let i = icmpv4::Packet::new_checked(p.payload()).unwrap();
                prop_assert!(i.verify_checksum());
                let quoted = n - 28;
                prop_assert_eq!(i.data(), &orig[..quoted]);
            }
            Err(e) => prop_assert!(false, "{e}"),
        }
        // IPv6.
        let ip6 = ipv6::Ipv6Repr {
            src_addr: s6, dst_addr: d6, next_header: 17, payload_len: payload.len(),
            hop_limit: 1, traffic_class: 0, flow_label: 0,
        };
        let mut orig = vec![0u8; ip6.buffer_len()];
        ip6.emit(&mut ipv6::Packet::new_unchecked(&mut orig[..])).unwrap();
        orig[40..].copy_from_slice(&payload);
        let mut out = [0u8; 1500];
        let n = icmpv6::build_error(&mut out, &me6, 64, icmpv6::ErrorKind::PktTooBig { mtu: 1280 }, &orig).unwrap();
        prop_assert!(n <= icmpv6::MAX_ERROR_LEN);
        let p = ipv6::Packet::new_checked(&out[..n]).unwrap();
        let i = icmpv6::Packet::new_checked(p.payload()).unwrap();
        prop_assert!(i.verify_checksum(&me6, &s6));
    }

    #[test]
    fn vnet_roundtrip(b in any::<[u8; 10]>()) {
        let h = vnet::Header::new_checked(&b[..]).unwrap();
        if let Ok(r) = vnet::VnetRepr::parse(&h) {
            let mut out = [0u8; 10];
            r.emit(&mut vnet::Header::new_unchecked(&mut out[..]));
            // Unknown flag bits are dropped; everything else survives.
            let mut want = b;
            want[0] &= vnet::F_NEEDS_CSUM | vnet::F_DATA_VALID;
            prop_assert_eq!(out, want);
        }
    }

    /// No parser panics on arbitrary bytes, and anything `new_checked`
    /// accepts can be read through every getter.
    #[test]
    fn parsers_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        let a6 = Ipv6Addr::LOCALHOST;
        let a4 = IpAddr::V4(Ipv4Addr::LOCALHOST);
        if let Ok(f) = ethernet::Frame::new_checked(&b[..]) {
            let _ = (f.ethertype(), f.vlan_id(), f.inner_vlan_id(), f.payload().len());
            let _ = EthernetRepr::parse(&f);
        }
        if let Ok(p) = arp::Packet::new_checked(&b[..]) {
            let _ = (p.source_hardware_addr(), p.target_protocol_addr());
            let _ = arp::ArpRepr::parse(&p);
        }
        if let Ok(p) = ipv4::Packet::new_checked(&b[..]) {
            let _ = (p.payload().len(), p.options_iter().count());
            let _ = ipv4::Ipv4Repr::parse(&p);
            let _ = icmpv4::may_send_error(&b);
            let _ = icmpv4::error_quote(&b);
        }
        if let Ok(p) = ipv6::Packet::new_checked(&b[..]) {
            let _ = p.header_chain();
            let _ = ipv6::Ipv6Repr::parse(&p);
            let _ = icmpv6::may_send_error(&b, icmpv6::ErrorKind::TimeExceeded { code: 0 });
        }
        let _ = ipv6::header_chain(&b);
        if let Ok(p) = icmpv4::Packet::new_checked(&b[..]) {
            let _ = icmpv4::Icmpv4Repr::parse(&p);
        }
        if let Ok(p) = icmpv6::Packet::new_checked(&b[..]) {
            let _ = icmpv6::Icmpv6Repr::parse(&a6, &a6, &p);
            let _ = p.ndp_options().count();
        }
        if let Ok(p) = udp::Packet::new_checked(&b[..]) {
            let _ = udp::UdpRepr::parse(&p, &a4, &a4);
        }
        if let Ok(p) = tcp::Packet::new_checked(&b[..]) {
            let _ = tcp::TcpRepr::parse(&p, &a4, &a4);
            let _ = p.mss_offset();
        }
        let mut m = b.clone();
        if let Ok(mut p) = tcp::Packet::new_checked(&mut m[..]) {
            let _ = p.clamp_mss(536, true);
        }
        let _ = tcp::TcpOptions::new(&b).count();
        let _ = icmpv6::NdpOptions::new(&b).count();
        let _ = ipv4::Options::new(&b).count();
        let _ = checksum::data(&b);
    }

    /// Truncating a valid frame anywhere is an error or a shorter valid
    /// parse, never a panic; for IPv4 always an error.
    #[test]
    fn truncated_ipv4_always_err(payload_len in 0usize..64, cut in any::<proptest::sample::Index>()) {
        let r = ipv4::Ipv4Repr {
            src_addr: Ipv4Addr::LOCALHOST, dst_addr: Ipv4Addr::LOCALHOST, protocol: 6,
            payload_len, ttl: 9, tos: 0, ident: 0, dont_frag: false, more_frags: false, frag_offset: 0,
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut ipv4::Packet::new_unchecked(&mut buf[..])).unwrap();
        let cut = cut.index(buf.len());
        prop_assert!(ipv4::Packet::new_checked(&buf[..cut]).is_err());
    }
}
