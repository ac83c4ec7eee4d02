//! ip4-fragment: IPv4 packets larger than the outgoing MTU without DF are
//! cut into fragments (RFC 791) by `offload::fragment`; each fragment goes
//! back to ip-rewrite (L3 already done) for its L2 header.

use crate::buffer::Packet;
use crate::graph::{Ctx, Next, Node, NodeId};

#[derive(Default)]
pub struct Ip4Fragment {
    #[allow(dead_code)]
    out: Vec<Packet>,
}

#[derive(Clone, Copy)]
#[repr(u16)]
enum E {
    Unavailable,
}

const ERRORS: &[&str] = &["fragmentation-unavailable"];
const NEXT: &[NodeId] = &[NodeId::IpRewrite, NodeId::IcmpError];

impl Node for Ip4Fragment {
    fn name(&self) -> &'static str {
        "ip4-fragment"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, _cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        for p in input.drain(..) {
            // OFFLOAD-HOOK(fragment): call
            // `crate::offload::fragment::fragment_ipv4` here once it lands,
            // enqueue each fragment to ip-rewrite (flags::L3_DONE kept).
            next.drop(p, E::Unavailable as u16);
        }
    }
}
