//! ip6-input: validates the IPv6 header (RFC 8200 §3): version, payload
//! length against the frame (trailing padding trimmed), and a non-multicast
//! source (RFC 4291 §2.7). Extension headers are walked only for local
//! delivery (ip-local); a router forwards them untouched (RFC 8200 §4).

use crate::graph::{Ctx, Next, Node, NodeId};
use packet::buffer::Packet;
use wire::ipv6;

pub struct Ip6Input;

node_errors! {
    enum E {
        TooShort => "too-short",
        BadVersion => "bad-version",
        BadLength => "bad-length",
        BadSource => "bad-source",
    }
}

const NEXT: &[NodeId] = &[NodeId::Ip6Lookup];

#[inline]
fn check(d: &[u8]) -> Result<usize, E> {
    if d.len() < 40 {
        return Err(E::TooShort);
    }
    if d[0] >> 4 != 6 {
        return Err(E::BadVersion);
    }
    let total = 40 + usize::from(ipv6::Packet::new_unchecked(d).payload_len());
    // A payload length of 0 with a hop-by-hop jumbo option (RFC 2675) is
    // not supported: 0 means no payload here.
    if total > d.len() {
        return Err(E::BadLength);
    }
    if d[8] == 0xff {
        return Err(E::BadSource);
    }
    Ok(total)
}

impl Node for Ip6Input {
    fn name(&self) -> &'static str {
        "ip6-input"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        for mut p in input.drain(..) {
            match check(p.data()) {
                Ok(total) => {
                    p.truncate(total);
                    if p.meta.trace {
                        let ip = ipv6::Packet::new_unchecked(p.data());
                        cx.trace.add(
                            "ip6-input",
                            format_args!(
                                "{} -> {} nh {} hlim {} len {total}",
                                ip.src_addr(),
                                ip.dst_addr(),
                                ip.next_header(),
                                ip.hop_limit()
                            ),
                        );
                    }
                    next.enqueue(NodeId::Ip6Lookup, p);
                }
                Err(e) => {
                    if p.meta.trace {
                        cx.trace
                            .add("ip6-input", format_args!("drop {}", ERRORS[e as usize]));
                    }
                    next.drop(p, e as u16);
                }
            }
        }
    }
}
