//! gre-input: decapsulates GRE (RFC 2784, key and sequence RFC 2890),
//! GRE with transparent Ethernet bridging (0x6558) and NVGRE (RFC 7637).
//!
//! ip-local sends IP protocol 47 here with `meta.aux` = offset of the GRE
//! header. The tunnel is found by (underlay VRF, outer destination = our
//! `local`, outer source = its `remote`, key / VSID); a GRE key that
//! matches no GRE tunnel but carries Ethernet is tried as an NVGRE VSID
//! (high 24 bits of the key, the low 8 bits being the FlowID). The inner
//! packet enters the tunnel's overlay VRF only, on its virtual port.
//!
//! Sequence numbers (RFC 2890 §2.2): with `sequence`, a packet without one
//! or not newer (serial-number arithmetic) than the last accepted one is
//! dropped. The last sequence number is kept per worker; since the peer's
//! packets of one tunnel share one outer 5-tuple, fanout sends them all to
//! one worker, where the check is exact.

use super::tunnel_util::{deliver, outer_addrs, Inner};
use super::{pull, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use crate::graph::{Ctx, Next, Node, NodeId};
use crate::tunnel::{DecapKey, KeyClass, TunnelKind, ETHERTYPE_TEB};
use packet::buffer::Packet;

#[derive(Default)]
pub struct GreInput {
    /// Per virtual port: last accepted sequence number, if any.
    last_seq: Vec<Option<u32>>,
}

node_errors! {
    enum E {
        TooShort => "too-short",
        BadVersion => "bad-version",
        BadFlags => "bad-flags",
        BadChecksum => "bad-checksum",
        UnknownPeer => "unknown-peer",
        UnknownKey => "unknown-key",
        NvgreBadFlags => "nvgre-checksum-or-sequence",
        BadProtocol => "bad-protocol",
        MissingSequence => "missing-sequence",
        OutOfOrder => "out-of-order",
    }
}

const NEXT: &[NodeId] = &[NodeId::EthernetInput, NodeId::Ip4Input, NodeId::Ip6Input];

impl Node for GreInput {
    fn name(&self) -> &'static str {
        "gre-input"
    }
    fn error_names(&self) -> &'static [&'static str] {
        ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        let tables = cx.tables.clone();
        for p in input.drain(..) {
            match self.one(&tables, &p) {
                Ok((idx, hlen, inner)) => {
                    let Some(tun) = tables.tunnels.tunnels.get(idx as usize) else {
                        next.drop(p, E::UnknownKey as u16);
                        continue;
                    };
                    let mut p = p;
                    if p.meta.trace {
                        cx.trace.add(
                            "gre-input",
                            format_args!(
                                "tunnel port {} {:?} len {}",
                                tun.port,
                                tun.def.kind,
                                p.len()
                            ),
                        );
                    }
                    if !pull(&mut p, hlen) {
                        next.drop(p, E::TooShort as u16);
                        continue;
                    }
                    deliver(cx, next, p, tun, inner);
                }
                Err(e) => {
                    if p.meta.trace {
                        cx.trace
                            .add("gre-input", format_args!("drop {}", ERRORS[e as usize]));
                    }
                    next.drop(p, e as u16);
                }
            }
        }
    }
}

impl GreInput {
    /// Validates one packet; returns (tunnel index, bytes to pull, inner).
    fn one(&mut self, t: &crate::tables::Tables, p: &Packet) -> Result<(u32, usize, Inner), E> {
        let d = p.data();
        let off = p.meta.aux as usize;
        let (src, dst) = outer_addrs(d).ok_or(E::TooShort)?;
        if d.len() < off + 4 {
            return Err(E::TooShort);
        }
        let gre = wire::gre::Gre::new_unchecked(&d[off..]);
        if gre.version() != 0 {
            return Err(E::BadVersion);
        }
        // Every reserved bit, also those RFC 2784 lets a receiver ignore.
        if !gre.reserved0_clear() {
            return Err(E::BadFlags);
        }
        let (c, s) = (gre.checksum_present(), gre.seq_present());
        let hlen = gre.header_len();
        if d.len() < off + hlen {
            return Err(E::TooShort);
        }
        // RFC 2784 §2.5: over the GRE header and the payload.
        if !gre.verify_checksum() {
            return Err(E::BadChecksum);
        }
        let key = gre.key();
        let seq = gre.sequence_number();
        let proto = gre.protocol_type();
        let vrf = p.meta.vrf;
        let mut dk = DecapKey {
            vrf,
            local: dst,
            remote: src,
            class: KeyClass::Gre(key),
        };
        let mut found = t.tunnels.lookup(&dk);
        if found.is_none() && proto == ETHERTYPE_TEB {
            if let Some(k) = key {
                dk.class = KeyClass::Nvgre(crate::nvgre::vsid_of_key(k));
                found = t.tunnels.lookup(&dk);
            }
        }
        let Some((idx, tun)) = found else {
            return Err(if t.tunnels.is_peer(vrf, dst, src) {
                E::UnknownKey
            } else {
                E::UnknownPeer
            });
        };
        let inner = match (tun.def.kind, tun.def.ethernet, proto) {
            (TunnelKind::Nvgre, _, _) if !crate::nvgre::flags_allowed(c, s) => {
                return Err(E::NvgreBadFlags)
            }
            (TunnelKind::Nvgre, _, ETHERTYPE_TEB) => Inner::Ethernet,
            (TunnelKind::Gre, true, ETHERTYPE_TEB) => Inner::Ethernet,
            (TunnelKind::Gre, false, ETHERTYPE_IPV4) => Inner::Ip4,
            (TunnelKind::Gre, false, ETHERTYPE_IPV6) => Inner::Ip6,
            _ => return Err(E::BadProtocol),
        };
        if tun.def.sequence {
            let seq = seq.ok_or(E::MissingSequence)?;
            let port = usize::from(tun.port);
            if self.last_seq.len() <= port {
                self.last_seq.resize(port + 1, None);
            }
            if let Some(last) = self.last_seq[port] {
                // Serial number arithmetic: newer iff 0 < seq - last < 2^31.
                let diff = seq.wrapping_sub(last);
                if diff == 0 || diff >= 0x8000_0000 {
                    return Err(E::OutOfOrder);
                }
            }
            self.last_seq[port] = Some(seq);
        }
        Ok((idx, off + hlen, inner))
    }
}
