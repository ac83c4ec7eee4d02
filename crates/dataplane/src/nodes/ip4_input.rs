//! ip4-input: validates the IPv4 header (RFC 791, RFC 1812 §5.2.2) before
//! anything reads it: version, IHL, total length against the frame, header
//! checksum (skipped when the sender vouched for it with DATA_VALID), and
//! the source address. Trailing Ethernet padding is trimmed.

use crate::graph::{Ctx, Next, Node, NodeId};
use packet::buffer::Packet;
use wire::ipv4;

pub struct Ip4Input;

node_errors! {
    enum E {
        TooShort => "too-short",
        BadVersion => "bad-version",
        BadIhl => "bad-ihl",
        BadLength => "bad-length",
        BadChecksum => "bad-checksum",
        BadSource => "bad-source",
    }
}

const NEXT: &[NodeId] = &[NodeId::Ip4Lookup];

/// Validates an IPv4 header at the start of `d`; returns the total length.
/// The checks are `ipv4::Packet::check_len`'s, in its order, each counted
/// under its own reason (its `Truncated` covers three of them).
#[inline]
fn check(d: &[u8], csum_valid: bool) -> Result<usize, E> {
    if d.len() < ipv4::HEADER_LEN {
        return Err(E::TooShort);
    }
    // In bounds from here on: the fixed header is there.
    let ip = ipv4::Packet::new_unchecked(d);
    if ip.version() != 4 {
        return Err(E::BadVersion);
    }
    let ihl = ip.header_len();
    if ihl < ipv4::HEADER_LEN || ihl > d.len() {
        return Err(E::BadIhl);
    }
    let total = usize::from(ip.total_len());
    if total < ihl || total > d.len() {
        return Err(E::BadLength);
    }
    if !csum_valid && !ip.verify_checksum() {
        return Err(E::BadChecksum);
    }
    let src = ip.src_addr();
    if src.is_multicast() || src.is_broadcast() {
        return Err(E::BadSource);
    }
    Ok(total)
}

impl Node for Ip4Input {
    fn name(&self) -> &'static str {
        "ip4-input"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        for mut p in input.drain(..) {
            match check(p.data(), p.meta.offload.csum_valid) {
                Ok(total) => {
                    p.truncate(total);
                    if p.meta.trace {
                        let ip = ipv4::Packet::new_unchecked(p.data());
                        cx.trace.add(
                            "ip4-input",
                            format_args!(
                                "{} -> {} proto {} ttl {} len {total}",
                                ip.src_addr(),
                                ip.dst_addr(),
                                ip.protocol(),
                                ip.ttl()
                            ),
                        );
                    }
                    next.enqueue(NodeId::Ip4Lookup, p);
                }
                Err(e) => {
                    if p.meta.trace {
                        cx.trace
                            .add("ip4-input", format_args!("drop {}", ERRORS[e as usize]));
                    }
                    next.drop(p, e as u16);
                }
            }
        }
    }
}
