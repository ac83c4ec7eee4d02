//! ip4-fragment: IPv4 packets larger than the outgoing MTU without DF are
//! cut into fragments (RFC 791) by [`crate::offload::fragment`]; each
//! fragment goes back to ip-rewrite (L3 already done, `flags::L3_DONE`
//! kept) for its L2 header.

use super::{icmp_aux, icmp_error::kind};
use crate::graph::{Ctx, Next, Node, NodeId};
use crate::offload::fragment::fragment_ipv4;
use crate::offload::OffloadError;
use packet::buffer::Packet;

#[derive(Default)]
pub struct Ip4Fragment {
    out: Vec<Packet>,
}

node_errors! {
    enum E {
        NoBuffers => "no-buffers",
        Failed => "fragmentation-failed",
        NoInterface => "no-interface",
    }
}

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

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        for mut p in input.drain(..) {
            let Some(mtu) = cx
                .tables
                .iface(p.meta.tx_port)
                .map(|i| i.mtu.min(0xffff) as u16)
            else {
                next.drop(p, E::NoInterface as u16);
                continue;
            };
            self.out.clear();
            match fragment_ipv4(&p, 0, mtu, &mut cx.pool, &mut self.out) {
                Ok(0) => next.enqueue(NodeId::IpRewrite, p),
                Ok(n) => {
                    if p.meta.trace {
                        cx.trace.add(
                            "ip4-fragment",
                            format_args!("len {} mtu {mtu}: {n} fragments", p.len()),
                        );
                    }
                    for f in self.out.drain(..) {
                        next.enqueue(NodeId::IpRewrite, f);
                    }
                    cx.pool.free(p);
                }
                Err(OffloadError::DontFragment { mtu }) => {
                    p.meta.aux = icmp_aux(kind::TOO_BIG, u32::from(mtu));
                    next.enqueue(NodeId::IcmpError, p);
                }
                Err(e) => {
                    cx.pool.free_all(&mut self.out);
                    let r = if e == OffloadError::NoBuffers {
                        E::NoBuffers
                    } else {
                        E::Failed
                    };
                    next.drop(p, r as u16);
                }
            }
        }
    }
}
