//! The transmit invariant: every frame a backend hands the kernel is a
//! packet the kernel sends as it is, or a GSO super-packet the kernel takes
//! whole and cuts into wire-sized packets — never one it refuses or
//! segments into something else. A frame that breaks it is a bug in the
//! node that built it; the backends check every frame in debug builds (and
//! the test ports always), refuse one that fails and count it as a
//! transmit error, so a test sees it as a counter that moved instead of as
//! a datagram the kernel dropped while vecgate counted it as sent.
//!
//! The checks follow what Linux does with a frame and its virtio-net
//! header (net/packet/af_packet.c `packet_snd`, include/linux/virtio_net.h
//! `virtio_net_hdr_to_skb`, net/core/dev.c `gso_features_check`): a plain
//! frame fits the MTU; a partial checksum lies inside the frame; a
//! super-packet fits [`gso_limit`](crate::gso_limit), its headers agree with
//! its GSO type and its length fields with its length, and every segment it
//! makes fits the MTU. Written from the bytes alone (no parsing crate): an
//! independent reading of what the nodes wrote.

use crate::buffer::{Gso, Offload, Packet, Pool};
use crate::gso_limit::{self, UDP_MAX_SEGMENTS};

/// What the port takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxLimits {
    /// The netdev's MTU (L3 bytes of one wire packet).
    pub mtu: u32,
    /// Bytes of link header in front of the L3 header (Ethernet: 14).
    pub link_hdr: usize,
    /// Partial checksums and super-packets may be handed over (virtio-net
    /// headers).
    pub offloads: bool,
    /// UDP GSO super-packets may be handed over.
    pub udp_gso: bool,
}

impl TxLimits {
    /// An Ethernet port of `mtu`.
    pub fn ethernet(mtu: u32, offloads: bool, udp_gso: bool) -> TxLimits {
        TxLimits {
            mtu,
            link_hdr: gso_limit::LINK_HDR_LEN,
            offloads,
            udp_gso,
        }
    }
}

/// Why a frame breaks the transmit invariant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxFault {
    /// Shorter than its link header.
    Runt,
    /// A plain frame longer than the MTU and its link header.
    OverMtu,
    /// A partial checksum or a super-packet on a port that takes neither,
    /// or a UDP GSO datagram on a port that may not send one whole.
    OffloadRefused,
    /// The partial checksum's place lies outside the frame.
    ChecksumOutside,
    /// A super-packet longer than the kernel takes whole
    /// ([`gso_limit::MAX_GSO_FRAME`]).
    TooLongWhole,
    /// A super-packet whose segment size is 0, or with more segments than
    /// UDP GSO allows.
    BadSegmentCount,
    /// A super-packet whose headers do not match its GSO type: not the IP
    /// version or transport it claims, or a length field that disagrees
    /// with its length.
    BadHeaders,
    /// A super-packet whose partial checksum is not its transport
    /// checksum (UDP GSO needs one).
    BadChecksumPlace,
    /// A super-packet whose segments would not fit the MTU.
    SegmentOverMtu,
}

impl TxFault {
    /// The name in logs and counters' documentation.
    pub fn name(self) -> &'static str {
        match self {
            TxFault::Runt => "runt",
            TxFault::OverMtu => "over-mtu",
            TxFault::OffloadRefused => "offload-refused",
            TxFault::ChecksumOutside => "checksum-outside",
            TxFault::TooLongWhole => "too-long-whole",
            TxFault::BadSegmentCount => "bad-segment-count",
            TxFault::BadHeaders => "bad-headers",
            TxFault::BadChecksumPlace => "bad-checksum-place",
            TxFault::SegmentOverMtu => "segment-over-mtu",
        }
    }
}

impl std::fmt::Display for TxFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

fn be16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(at)?, *d.get(at + 1)?]))
}

/// Checks one frame and the offload state it is handed over with. `Ok`:
/// the wire packets it becomes (1 for a plain frame, the segments of a
/// super-packet).
pub fn check(frame: &[u8], o: &Offload, lim: &TxLimits) -> Result<usize, TxFault> {
    let len = frame.len();
    let l = lim.link_hdr;
    if len < l {
        return Err(TxFault::Runt);
    }
    if (o.needs_csum || o.gso != Gso::None) && !lim.offloads {
        return Err(TxFault::OffloadRefused);
    }
    if o.needs_csum && usize::from(o.csum_start) + usize::from(o.csum_offset) + 2 > len {
        return Err(TxFault::ChecksumOutside);
    }
    if o.gso == Gso::None {
        if len - l > lim.mtu as usize {
            return Err(TxFault::OverMtu);
        }
        return Ok(1);
    }
    if o.gso == Gso::UdpL4 && !lim.udp_gso {
        return Err(TxFault::OffloadRefused);
    }
    if !gso_limit::frame_fits(len) {
        return Err(TxFault::TooLongWhole);
    }
    if usize::from(o.hdr_len) > len {
        return Err(TxFault::BadHeaders);
    }
    let gso_size = usize::from(o.gso_size);
    if gso_size == 0 {
        return Err(TxFault::BadSegmentCount);
    }
    let (v6, proto) = match o.gso {
        Gso::TcpV4 => (false, PROTO_TCP),
        Gso::TcpV6 => (true, PROTO_TCP),
        _ => (frame.get(l).is_some_and(|b| b >> 4 == 6), PROTO_UDP),
    };
    // The link header ends in the EtherType (no VLAN tags).
    let want_et = if v6 { ETHERTYPE_IPV6 } else { ETHERTYPE_IPV4 };
    if l < 2 || be16(frame, l - 2) != Some(want_et) {
        return Err(TxFault::BadHeaders);
    }
    let ip = &frame[l..];
    let (l4, got_proto) = if v6 {
        if ip.len() < 40 || ip[0] >> 4 != 6 || be16(ip, 4).map(usize::from) != Some(ip.len() - 40) {
            return Err(TxFault::BadHeaders);
        }
        (40, ip[6])
    } else {
        let ihl = usize::from(ip.first().map_or(0, |b| b & 0x0f)) * 4;
        if ip.len() < 20
            || ip[0] >> 4 != 4
            || ihl < 20
            || be16(ip, 2).map(usize::from) != Some(ip.len())
            // A fragment is not segmented.
            || be16(ip, 6).is_some_and(|f| f & 0x3fff != 0)
        {
            return Err(TxFault::BadHeaders);
        }
        (ihl, ip[9])
    };
    if got_proto != proto {
        return Err(TxFault::BadHeaders);
    }
    let l4_hdr = if proto == PROTO_TCP {
        let doff = usize::from(ip.get(l4 + 12).map_or(0, |b| b >> 4)) * 4;
        if doff < 20 {
            return Err(TxFault::BadHeaders);
        }
        doff
    } else {
        if be16(ip, l4 + 4).map(usize::from) != Some(ip.len().saturating_sub(l4)) {
            return Err(TxFault::BadHeaders);
        }
        8
    };
    let hdrs = l4 + l4_hdr;
    if hdrs > ip.len() {
        return Err(TxFault::BadHeaders);
    }
    let csum_at = if proto == PROTO_TCP { 16 } else { 6 };
    if o.needs_csum {
        if usize::from(o.csum_start) != l + l4 || usize::from(o.csum_offset) != csum_at {
            return Err(TxFault::BadChecksumPlace);
        }
    } else if proto == PROTO_UDP {
        // virtio_net_hdr_to_skb: UDP GSO without a partial checksum is EINVAL.
        return Err(TxFault::BadChecksumPlace);
    }
    let nseg = (ip.len() - hdrs).div_ceil(gso_size).max(1);
    if proto == PROTO_UDP && nseg > UDP_MAX_SEGMENTS {
        return Err(TxFault::BadSegmentCount);
    }
    // Every segment but the last is full: hdrs + gso_size bytes of L3.
    let seg_l3 = hdrs + gso_size.min(ip.len() - hdrs);
    if seg_l3 > lim.mtu as usize {
        return Err(TxFault::SegmentOverMtu);
    }
    Ok(nseg)
}

/// Whether the backends check every frame: in debug builds (the tests'
/// daemons), not in release builds, where the check would cost every
/// packet a header walk for a bug the tests exist to catch.
pub const ENABLED: bool = cfg!(debug_assertions);

/// Takes every packet that breaks the invariant out of `pkts` (the others
/// keep their order), hands each with its fault to `refused` (the backend
/// counts it as a transmit error and logs it) and then back to `pool`.
/// Returns how many were refused.
pub fn refuse_invalid(
    pkts: &mut Vec<Packet>,
    pool: &mut Pool,
    lim: &TxLimits,
    mut refused: impl FnMut(TxFault, &Packet),
) -> usize {
    // A stable partition: the valid ones move down over the refused.
    let mut keep = 0;
    for i in 0..pkts.len() {
        match check(pkts[i].data(), &pkts[i].meta.offload, lim) {
            Ok(_) => {
                pkts.swap(keep, i);
                keep += 1;
            }
            Err(f) => refused(f, &pkts[i]),
        }
    }
    let n = pkts.len() - keep;
    for p in pkts.drain(keep..) {
        pool.free(p);
    }
    n
}

#[cfg(test)]
mod tests;
