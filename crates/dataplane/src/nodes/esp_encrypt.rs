//! esp-encrypt: packets that interface-output found leaving through an ESP
//! tunnel's virtual port are encrypted with the tunnel's current outbound SA
//! (RFC 4303 tunnel mode) and routed in the underlay VRF.
//!
//! The vector is cut into runs of consecutive packets for one tunnel; each
//! run is encrypted with one call (`vecgate_ipsec::TunnelTx::encrypt`): the SA is
//! loaded once, its sequence numbers are reserved once (an atomic add, so
//! several workers share one SA without a lock), and the crypto runs over
//! the whole run. The outer IP (+ UDP for NAT-T) header comes from the SA's
//! template.
//!
//! Super-packets are segmented *before* encryption (each ESP packet is one
//! inner segment; RFC 4303 has no segmentation of its own): the inner
//! segments are at most the tunnel MTU, which ip-rewrite enforced on the
//! virtual port (ICMP too-big / PMTU) and SYN MSS clamping keeps true, and
//! the tunnel MTU is the underlay MTU minus `TunnelTx::overhead`, so
//! every ESP packet fits the underlay. Partial checksums are completed
//! first: after encryption nobody can.
//!
//! With UDP encapsulation (NAT-T, RFC 3948) the ESP packets of one
//! super-packet leave as UDP GSO datagrams, one kernel send for up to 44 of
//! them; UDP segmentation gives back the same packets. A TCP super-packet
//! is sealed straight into the datagrams ([`uso::pack_slices`]): each inner
//! segment is copied once, behind its ESP header, and encrypted where it
//! lies ("packed-super-packets"); anything else is segmented, sealed and
//! then joined ([`uso::join`]).
//!
//! Drop reasons: the crypto's own ([`EspError::NAMES`]) followed by this
//! node's.

use super::tunnel_util::clamp_mss;
use super::{pull, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_LEN};
use crate::esp::EspTunnel;
use crate::graph::{flags, Ctx, Next, Node, NodeId};
use crate::offload::{csum, gso, uso, OffloadError, SegmentSpec};
use packet::buffer::{Gso, Offload, Packet, Pool};
use vecgate_ipsec::{EspError, SliceSealer};

node_errors! {
    /// Reasons after the crypto's.
    enum E after EspError {
        NoTunnel => "no-tunnel",
        NotIp => "not-ip",
        SegmentationFailed => "segmentation-failed",
        ChecksumFailed => "checksum-failed",
        SegmentedSuperPackets => "segmented-super-packets",
        Segments => "segments",
        Encrypted => "encrypted",
        UdpGsoDatagrams => "udp-gso-datagrams",
        PackedSuperPackets => "packed-super-packets",
    }
}

const NEXT: &[NodeId] = &[NodeId::Ip4Lookup, NodeId::Ip6Lookup];

#[derive(Default)]
pub struct EspEncrypt {
    /// Packets of the current run (one tunnel), ready for the crypto.
    batch: Vec<Packet>,
    /// Per packet of `batch`: which input packet it came from (the
    /// segments of one super-packet share it).
    origin: Vec<u32>,
    status: Vec<Result<(), EspError>>,
    segs: Vec<Packet>,
    /// Sealed ESP-in-UDP packets of one super-packet, to be joined.
    run: Vec<Packet>,
    joined: Vec<Packet>,
}

impl Node for EspEncrypt {
    fn name(&self) -> &'static str {
        "esp-encrypt"
    }
    fn error_names(&self) -> &'static [&'static str] {
        &ERRORS
    }
    fn next_nodes(&self) -> &'static [NodeId] {
        NEXT
    }

    fn process(&mut self, cx: &mut Ctx, input: &mut Vec<Packet>, next: &mut Next<'_>) {
        let tables = cx.tables.clone();
        let mut cur: Option<&EspTunnel> = None;
        for (i, mut p) in input.drain(..).enumerate() {
            let origin = i as u32;
            let Some(tun) = tables.esp.at_port(p.meta.tx_port) else {
                next.drop(p, E::NoTunnel as u16);
                continue;
            };
            if cur.is_some_and(|c| c.port != tun.port) {
                if let Some(c) = cur {
                    self.flush(c, &mut cx.pool, next);
                }
            }
            cur = Some(tun);
            // The tunnel's own counters: what the overlay handed it.
            if let Some(c) = cx.port_counters(tun.port) {
                c.tx_packets.add(1);
                c.tx_bytes.add(p.len() as u64);
            }
            // The point-to-point virtual port got an Ethernet header from
            // ip-rewrite; ESP carries the IP packet.
            let et = if p.len() >= ETH_LEN {
                wire::ethernet::Frame::new_unchecked(p.data()).outer_ethertype()
            } else {
                0
            };
            if !(et == ETHERTYPE_IPV4 || et == ETHERTYPE_IPV6) || !pull(&mut p, ETH_LEN) {
                next.drop(p, E::NotIp as u16);
                continue;
            }
            let mtu = tables.iface(tun.port).map_or(0, |i| i.mtu);
            clamp_mss(&mut p, 0, et == ETHERTYPE_IPV6, mtu);
            if p.meta.trace {
                cx.trace.add(
                    "esp-encrypt",
                    format_args!(
                        "port {} spi {:#010x} len {}",
                        tun.port,
                        tun.def.tx.spi(),
                        p.len()
                    ),
                );
            }
            if p.meta.offload.gso == Gso::None {
                if csum::complete(&mut p).is_err() {
                    next.drop(p, E::ChecksumFailed as u16);
                    continue;
                }
                p.meta.offload = Offload::default();
                self.batch.push(p);
                self.origin.push(origin);
                continue;
            }
            // A large-MTU underlay takes the super-packet whole (one ESP
            // packet, one seal over up to 64 KB) or in few large pieces.
            if p.len() <= mtu as usize {
                // One packet now: the partial checksum (pseudo-header over
                // the whole super-packet, Linux's convention) is completed.
                p.meta.offload.gso = Gso::None;
                if csum::complete(&mut p).is_err() {
                    next.drop(p, E::ChecksumFailed as u16);
                    continue;
                }
                p.meta.offload = Offload::default();
                self.batch.push(p);
                self.origin.push(origin);
                continue;
            }
            let mss = super::tunnel_encap::big_mss(&p, 0, mtu as usize);
            if tun.def.nat_t {
                // What came before this packet leaves before it.
                self.flush(tun, &mut cx.pool, next);
                match self.seal_packed(tun, &p, mss, &mut cx.pool, next) {
                    Ok(true) => {
                        cx.pool.free(p);
                        continue;
                    }
                    Ok(false) => {}
                    Err(reason) => {
                        next.drop(p, reason);
                        continue;
                    }
                }
            }
            let mut spec = SegmentSpec::plain(0);
            spec.mss = mss;
            self.segs.clear();
            match gso::segment_with(&p, &spec, &mut cx.pool, &mut self.segs) {
                Ok(n) => {
                    cx.pool.free(p);
                    next.count(E::SegmentedSuperPackets as u16, 1);
                    next.count(E::Segments as u16, n as u64);
                    for mut s in self.segs.drain(..) {
                        s.meta.offload = Offload::default();
                        self.batch.push(s);
                        self.origin.push(origin);
                    }
                }
                Err(_) => next.drop(p, E::SegmentationFailed as u16),
            }
        }
        if let Some(c) = cur {
            self.flush(c, &mut cx.pool, next);
        }
    }
}

impl EspEncrypt {
    /// Encrypts the collected run for `tun` and hands it to the underlay.
    /// With UDP encapsulation (NAT-T) the sealed packets of one
    /// super-packet leave joined into UDP GSO datagrams ([`uso::join`]):
    /// one kernel send for all of them, the same packets on the wire.
    fn flush(&mut self, tun: &EspTunnel, pool: &mut Pool, next: &mut Next<'_>) {
        if self.batch.is_empty() {
            return;
        }
        self.status.clear();
        self.status.resize(self.batch.len(), Ok(()));
        if let Err(r) = tun.def.tx.encrypt(&mut self.batch, &mut self.status) {
            self.origin.clear();
            for p in self.batch.drain(..) {
                next.drop(p, r.index());
            }
            return;
        }
        let to = if tun.v6 {
            NodeId::Ip6Lookup
        } else {
            NodeId::Ip4Lookup
        };
        let mut ok = 0u64;
        let mut run_origin = None;
        let mut batch = std::mem::take(&mut self.batch);
        let status = std::mem::take(&mut self.status);
        let origins = std::mem::take(&mut self.origin);
        for ((mut p, st), &origin) in batch.drain(..).zip(status.iter()).zip(origins.iter()) {
            match st {
                Ok(()) => {
                    ok += 1;
                    p.meta.vrf = tun.underlay_vrf;
                    // Our own packet now: ip-rewrite keeps its TTL and
                    // icmp-error does not answer it.
                    p.meta.flags = flags::LOCAL;
                    p.meta.l3_offset = 0;
                    p.meta.aux = 0;
                    if run_origin != Some(origin) {
                        self.emit_run(to, pool, next);
                        run_origin = Some(origin);
                    }
                    self.run.push(p);
                }
                Err(r) => {
                    self.emit_run(to, pool, next);
                    run_origin = None;
                    next.drop(p, r.index());
                }
            }
        }
        self.emit_run(to, pool, next);
        self.batch = batch;
        self.status = status;
        self.origin = origins;
        self.origin.clear();
        next.count(E::Encrypted as u16, ok);
    }

    /// ESP in UDP (RFC 3948) of a TCP super-packet, sealed straight into
    /// UDP GSO datagrams ([`uso::pack_slices`]): each inner segment is
    /// copied once, into its place behind its ESP header, and encrypted
    /// there; what UDP segmentation makes of the datagrams is what sealing
    /// the segments one by one and joining them would have sent, without
    /// the join's second copy. `Ok(false)`: not packable (not TCP, too few
    /// segments), nothing done, for the usual path; `Err`: the drop reason.
    fn seal_packed(
        &mut self,
        tun: &EspTunnel,
        p: &Packet,
        mss: u16,
        pool: &mut Pool,
        next: &mut Next<'_>,
    ) -> Result<bool, u16> {
        let mut sealer = tun.def.tx.sealer(p.data()).map_err(|e| e.index())?;
        let mut outer = [0u8; 48];
        let olen = sealer.outer().len();
        outer
            .get_mut(..olen)
            .ok_or(E::SegmentationFailed as u16)?
            .copy_from_slice(sealer.outer());
        let mut wrap = EspSlices {
            sealer: &mut sealer,
            began: false,
            err: None,
        };
        let made = match uso::pack_slices(
            p,
            &outer[..olen],
            0,
            0,
            mss,
            &mut wrap,
            pool,
            &mut self.joined,
        ) {
            Ok(n) => n,
            Err(_) if !wrap.began => return Ok(false),
            Err(_) => return Err(wrap.err.map_or(E::SegmentationFailed as u16, |e| e.index())),
        };
        next.count(E::PackedSuperPackets as u16, 1);
        next.count(E::SegmentedSuperPackets as u16, 1);
        next.count(E::Segments as u16, made as u64);
        next.count(E::Encrypted as u16, made as u64);
        let to = if tun.v6 {
            NodeId::Ip6Lookup
        } else {
            NodeId::Ip4Lookup
        };
        let mut datagrams = 0u64;
        for mut d in self.joined.drain(..) {
            if d.meta.offload.gso == Gso::UdpL4 {
                datagrams += 1;
            }
            d.meta.vrf = tun.underlay_vrf;
            d.meta.flags = flags::LOCAL;
            d.meta.l3_offset = 0;
            d.meta.aux = 0;
            next.enqueue(to, d);
        }
        next.count(E::UdpGsoDatagrams as u16, datagrams);
        Ok(true)
    }

    /// Sends the sealed packets of one input packet, joined if they can be.
    fn emit_run(&mut self, to: NodeId, pool: &mut Pool, next: &mut Next<'_>) {
        if self.run.len() >= 2 {
            let made = uso::join(&mut self.run, &mut self.joined, pool);
            next.count(E::UdpGsoDatagrams as u16, made as u64);
        } else {
            self.joined.append(&mut self.run);
        }
        for p in self.joined.drain(..) {
            next.enqueue(to, p);
        }
    }
}

/// ESP's slices of a UDP GSO datagram: header and IV in front of each
/// inner segment, sealed in place with the slice's sequence number.
struct EspSlices<'a> {
    sealer: &'a mut SliceSealer,
    /// Sequence numbers were reserved: an error now drops the packet.
    began: bool,
    err: Option<EspError>,
}

impl EspSlices<'_> {
    fn fail(&mut self, e: EspError) -> OffloadError {
        self.err = Some(e);
        OffloadError::Unsupported
    }
}

impl uso::Slices for EspSlices<'_> {
    fn begin(&mut self, nseg: usize) -> Result<(), OffloadError> {
        self.began = true;
        self.sealer.reserve(nseg).map_err(|e| self.fail(e))
    }
    fn front(&self) -> usize {
        self.sealer.front()
    }
    fn slice_len(&self, seg: usize) -> usize {
        self.sealer.esp_len(seg)
    }
    fn ipv4_id(&self, i: usize) -> u16 {
        // As esp-encrypt numbers single packets: the sequence number.
        self.sealer.seq(i) as u16
    }
    fn finish(&mut self, slice: &mut [u8], seg: usize, i: usize) -> Result<(), OffloadError> {
        self.sealer.seal(slice, seg, i).map_err(|e| self.fail(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_reasons_follow_the_crypto_reasons() {
        assert_eq!(ERRORS[E::NoTunnel as usize], "no-tunnel");
        assert_eq!(ERRORS[E::Encrypted as usize], "encrypted");
        assert_eq!(ERRORS[E::UdpGsoDatagrams as usize], "udp-gso-datagrams");
        assert_eq!(ERRORS.len(), E::PackedSuperPackets as usize + 1);
    }
}
