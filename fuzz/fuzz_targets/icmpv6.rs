//! ICMPv6 view, NDP options iterator, repr round trip and the RFC 4443
//! error builder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::Ipv6Addr;
use wire::icmpv6::{self, ErrorKind, Icmpv6Repr, Packet};

const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);

fuzz_target!(|data: &[u8]| {
    let _ = icmpv6::error_quote(data);
    let kind = match data.last().copied().unwrap_or(0) % 4 {
        0 => ErrorKind::DstUnreachable { code: 0 },
        1 => ErrorKind::PktTooBig { mtu: 1280 },
        2 => ErrorKind::TimeExceeded { code: 0 },
        _ => ErrorKind::ParamProblem {
            code: 2,
            pointer: 40,
        },
    };
    if icmpv6::may_send_error(data, kind) {
        let mut out = [0u8; 1280];
        if let Ok(n) = icmpv6::build_error(&mut out, &SRC, 64, kind, data) {
            let ip = wire::ipv6::Packet::new_checked(&out[..n]).expect("error is valid IPv6");
            let p = Packet::new_checked(ip.payload()).expect("error is valid ICMPv6");
            assert!(p.verify_checksum(&SRC, &ip.dst_addr()));
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
        p.rest_of_header(),
        p.data(),
        p.verify_checksum(&SRC, &DST),
    );
    {
        let _ = (p.na_flags(), p.ra_hop_limit(), p.ra_flags());
    }
    if matches!(p.msg_type(), 135 | 136) {
        let _ = p.target_addr();
    }
    if p.msg_type() == 134 {
        let _ = (
            p.ra_router_lifetime(),
            p.ra_reachable_time(),
            p.ra_retrans_time(),
        );
    }
    for o in p.ndp_options().take(64) {
        let Ok(o) = o else { break };
        let mut b = vec![0u8; o.buffer_len()];
        assert_eq!(o.emit(&mut b), Ok(o.buffer_len()));
    }
    let mut fixed = data.to_vec();
    Packet::new_unchecked(&mut fixed[..]).fill_checksum(&SRC, &DST);
    let fp = Packet::new_checked(&fixed[..]).unwrap();
    assert!(fp.verify_checksum(&SRC, &DST));
    let Ok(r) = Icmpv6Repr::parse(&SRC, &DST, &fp) else {
        return;
    };
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&SRC, &DST, &mut Packet::new_unchecked(&mut buf[..]))
        .unwrap();
    let q = Packet::new_checked(&buf[..]).expect("emitted ICMPv6 checks");
    assert_eq!(Icmpv6Repr::parse(&SRC, &DST, &q), Ok(r));
});
