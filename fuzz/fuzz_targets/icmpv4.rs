//! ICMPv4 view, repr round trip and the RFC 1812 error builder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::Ipv4Addr;
use wire::icmpv4::{self, ErrorKind, Icmpv4Repr, Packet};

fuzz_target!(|data: &[u8]| {
    // The input as an original datagram an error is built about.
    let _ = icmpv4::error_quote(data);
    if icmpv4::may_send_error(data) {
        let mut out = [0u8; 576];
        let kind = match data.last().copied().unwrap_or(0) % 3 {
            0 => ErrorKind::DstUnreachable {
                code: 4,
                next_hop_mtu: 1400,
            },
            1 => ErrorKind::TimeExceeded { code: 0 },
            _ => ErrorKind::ParamProblem { pointer: 1 },
        };
        if let Ok(n) = icmpv4::build_error(&mut out, Ipv4Addr::new(192, 0, 2, 1), 64, kind, data) {
            assert!(n <= out.len());
            let ip = wire::ipv4::Packet::new_checked(&out[..n]).expect("error is valid IPv4");
            let p = Packet::new_checked(ip.payload()).expect("error is valid ICMP");
            assert!(p.verify_checksum());
            Icmpv4Repr::parse(&p).expect("error parses");
        }
    }

    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.msg_type(),
        p.code(),
        p.checksum(),
        p.echo_ident(),
        p.echo_seq_no(),
        p.next_hop_mtu(),
        p.pointer(),
        p.rest_of_header(),
        p.verify_checksum(),
        p.data(),
    );
    // Fix the checksum so the parser's deeper checks are reached.
    let mut fixed = data.to_vec();
    Packet::new_unchecked(&mut fixed[..]).fill_checksum();
    let fp = Packet::new_checked(&fixed[..]).unwrap();
    assert!(fp.verify_checksum());
    let Ok(r) = Icmpv4Repr::parse(&fp) else {
        return;
    };
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
    let q = Packet::new_checked(&buf[..]).expect("emitted ICMP checks");
    assert_eq!(Icmpv4Repr::parse(&q), Ok(r));
});
