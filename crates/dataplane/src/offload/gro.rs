//! Receive segment coalescing (GRO / RSC): merges in-order TCP segments of
//! one flow, found in the same vector, into a super-packet that the kernel
//! accepts through a vnet header (`VIRTIO_NET_HDR_GSO_TCPV4/6` +
//! `NEEDS_CSUM`), so that one write carries up to 64 KB.
//!
//! The merge rules are the kernel's (`tcp_gro_receive()`,
//! `inet_gro_receive()`, `ipv6_gro_receive()`), as wireguard-go's
//! `tcp_offload_linux.go` also applies them; a segment is merged only if
//! - it is IPv4 without options or fragmentation, or IPv6 without extension
//!   headers, carries TCP with payload, and its checksum is valid (verified
//!   here unless the packet is marked DATA_VALID or NEEDS_CSUM);
//! - it has no SYN/FIN/RST/URG, and the super-packet has not seen PSH yet
//!   (PSH is merged on the last segment and ends the super-packet);
//! - same addresses and ports; same TOS, TTL and DF (IPv4) or traffic
//!   class, flow label and hop limit (IPv6); IPv4 IDs incrementing by one
//!   per segment, or (DF set only) all equal;
//! - its sequence number continues the super-packet, same ACK number, same
//!   window, no CWR, and identical TCP options (optionally: timestamps
//!   may advance, see [`GroConfig::allow_ts_advance`]);
//! - its payload is no larger than the first segment's (`gso_size`), and
//!   no segment follows one smaller than `gso_size`;
//! - the result stays within the 16-bit IP length and a buffer.
//!
//! Coalescing works over one vector at a time: merged segments disappear
//! from the vector, the super-packet stays at the position of its first
//! segment, everything else keeps its order, and nothing is held between
//! calls (so no timer and no flush). A segment that cannot extend its flow's
//! super-packet starts a new one; a segment that cannot be merged at all
//! ends the flow's super-packet, so data never overtakes anything.

use super::csum::{fold, verify_l4_at};
use super::hdr::{
    self, be16, be32, put16, put32, Ip, PROTO_TCP, TCP_ACK, TCP_CWR, TCP_FIN, TCP_PSH, TCP_RST,
    TCP_SYN, TCP_URG,
};
use packet::buffer::{Gso, Packet, Pool, MAX_FRAME, VECTOR_SIZE};

/// Why a packet was not merged into a super-packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not IPv4/IPv6 + TCP (or the headers are malformed).
    NotTcp,
    /// IPv4 options, an IPv4 fragment or IPv6 extension headers.
    IpLayout,
    /// Already a super-packet (offload GSO set).
    AlreadyGso,
    /// L4 checksum wrong: never merged, passed on as is.
    BadChecksum,
    /// SYN, FIN, RST or URG set.
    Flags,
    /// No payload (a pure ACK).
    NoPayload,
    /// CWR set on a segment that would not be the first.
    Cwr,
    /// The super-packet already ended (PSH merged).
    Pushed,
    /// A segment smaller than `gso_size` was merged last.
    AfterShort,
    /// Sequence number does not continue the super-packet.
    SeqGap,
    /// Different ACK number.
    AckDiffers,
    /// Different window.
    WindowDiffers,
    /// Different TOS/TTL/DF or traffic class/flow label/hop limit.
    IpFieldsDiffer,
    /// IPv4 ID neither incrementing nor (with DF) fixed.
    IpId,
    /// Different TCP options.
    OptionsDiffer,
    /// Timestamp went backwards (only with `allow_ts_advance`).
    TimestampBackwards,
    /// Payload larger than the super-packet's `gso_size`.
    Larger,
    /// Would exceed 64 KB.
    TooBig,
    /// More flows in the vector than the table holds.
    TableFull,
}

impl Refusal {
    /// Number of reasons, for counter arrays.
    pub const COUNT: usize = 19;
    /// Every reason, in counter order.
    pub const ALL: [Refusal; Refusal::COUNT] = [
        Refusal::NotTcp,
        Refusal::IpLayout,
        Refusal::AlreadyGso,
        Refusal::BadChecksum,
        Refusal::Flags,
        Refusal::NoPayload,
        Refusal::Cwr,
        Refusal::Pushed,
        Refusal::AfterShort,
        Refusal::SeqGap,
        Refusal::AckDiffers,
        Refusal::WindowDiffers,
        Refusal::IpFieldsDiffer,
        Refusal::IpId,
        Refusal::OptionsDiffer,
        Refusal::TimestampBackwards,
        Refusal::Larger,
        Refusal::TooBig,
        Refusal::TableFull,
    ];

    /// Counter name.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::NotTcp => "not_tcp",
            Refusal::IpLayout => "ip_layout",
            Refusal::AlreadyGso => "already_gso",
            Refusal::BadChecksum => "bad_checksum",
            Refusal::Flags => "flags",
            Refusal::NoPayload => "no_payload",
            Refusal::Cwr => "cwr",
            Refusal::Pushed => "pushed",
            Refusal::AfterShort => "after_short",
            Refusal::SeqGap => "seq_gap",
            Refusal::AckDiffers => "ack_differs",
            Refusal::WindowDiffers => "window_differs",
            Refusal::IpFieldsDiffer => "ip_fields_differ",
            Refusal::IpId => "ip_id",
            Refusal::OptionsDiffer => "options_differ",
            Refusal::TimestampBackwards => "timestamp_backwards",
            Refusal::Larger => "larger",
            Refusal::TooBig => "too_big",
            Refusal::TableFull => "table_full",
        }
    }
}

/// Counters of a [`Coalescer`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroStats {
    /// Packets handed to [`Coalescer::coalesce`].
    pub packets_in: u64,
    /// Super-packets produced (two segments or more).
    pub super_out: u64,
    /// Segments merged into a super-packet (and their buffers freed).
    pub merged: u64,
    /// Packets not merged, by [`Refusal`] (index = position in `Refusal::ALL`).
    pub refused: [u64; Refusal::COUNT],
}

impl GroStats {
    pub fn refused(&self, r: Refusal) -> u64 {
        self.refused[r as usize]
    }
}

/// Coalescer settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroConfig {
    /// Offset of the IP header in every packet (14 behind Ethernet, 0 for
    /// a TUN device).
    pub l3_offset: usize,
    /// Check that the two bytes before the IP header are the matching
    /// EtherType (0x0800 / 0x86DD), so ARP or VLAN-tagged frames are left
    /// alone. Needs `l3_offset >= 2`.
    pub check_ethertype: bool,
    /// Accept segments whose options differ only in a TCP timestamp
    /// (RFC 7323) TSval that did not go backwards, with an equal TSecr; the
    /// super-packet carries the latest TSval (as Windows RSC does). Off by
    /// default: the Linux kernel requires identical options.
    pub allow_ts_advance: bool,
    /// Flows tracked per vector; more distinct flows pass unmerged.
    pub max_flows: usize,
}

impl GroConfig {
    /// Frames that start with an untagged Ethernet header.
    pub fn ethernet() -> Self {
        GroConfig {
            l3_offset: 14,
            check_ethertype: true,
            allow_ts_advance: false,
            max_flows: VECTOR_SIZE,
        }
    }
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct FlowKey {
    v6: bool,
    src: [u8; 16],
    dst: [u8; 16],
    ports: u32,
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum IdMode {
    #[default]
    Unknown,
    Incrementing,
    Fixed,
}

/// One tracked flow: its current super-packet under construction.
#[derive(Clone, Copy, Default)]
struct Slot {
    gen: u32,
    key: FlowKey,
    /// Index of the super-packet (its first segment) in the output vector.
    idx: usize,
    /// Why nothing more may be appended, if so.
    closed: Option<Refusal>,
    next_seq: u32,
    gso_size: usize,
    last_len: usize,
    segs: usize,
    id_first: u16,
    id_mode: IdMode,
    /// Offset of the TSval in the TCP header, if a timestamp option exists.
    ts_at: Option<usize>,
    last_tsval: u32,
}

/// Parsed fields of a candidate segment.
struct Seg {
    ip: Ip,
    key: FlowKey,
    thl: usize,
    payload: usize,
    seq: u32,
    flags: u8,
}

/// The coalescer: a flow table sized to the vector, allocated once.
pub struct Coalescer {
    cfg: GroConfig,
    table: Box<[Slot]>,
    mask: usize,
    gen: u32,
    input: Vec<Packet>,
    stats: GroStats,
}

impl Coalescer {
    pub fn new(cfg: GroConfig) -> Self {
        let size = (cfg.max_flows.max(1) * 2).next_power_of_two();
        Coalescer {
            cfg,
            table: vec![Slot::default(); size].into_boxed_slice(),
            mask: size - 1,
            gen: 0,
            input: Vec::with_capacity(VECTOR_SIZE),
            stats: GroStats::default(),
        }
    }

    pub fn stats(&self) -> &GroStats {
        &self.stats
    }

    pub fn config(&self) -> &GroConfig {
        &self.cfg
    }

    /// Coalesces the vector in place (see the module docs); merged segments'
    /// buffers go back to `pool`. Super-packets leave with `offload.gso`,
    /// `gso_size`, `hdr_len`, and `needs_csum` with the pseudo-header sum in
    /// the TCP checksum field (the NEEDS_CSUM convention, see
    /// [`csum`](super::csum)).
    pub fn coalesce(&mut self, pkts: &mut Vec<Packet>, pool: &mut Pool) {
        self.gen = self.gen.wrapping_add(1);
        if self.gen == 0 {
            self.table.fill(Slot::default());
            self.gen = 1;
        }
        let mut input = std::mem::take(&mut self.input);
        std::mem::swap(pkts, &mut input);
        // Capacity circulates between the two vectors: this only grows
        // when a vector is larger than any seen before.
        pkts.reserve(input.len());
        for pkt in input.drain(..) {
            self.stats.packets_in += 1;
            self.one(pkt, pkts, pool);
        }
        self.input = input;
        for i in 0..self.table.len() {
            let s = self.table[i];
            if s.gen == self.gen {
                self.finish(&s, pkts);
            }
        }
    }

    fn refuse(&mut self, r: Refusal) {
        self.stats.refused[r as usize] += 1;
    }

    fn parse(&self, d: &[u8], o: &packet::buffer::Offload) -> Result<Seg, Refusal> {
        let l3 = self.cfg.l3_offset;
        let ip = hdr::parse_ip(d, l3, false).map_err(|e| match e {
            super::OffloadError::Unsupported => Refusal::IpLayout,
            _ => Refusal::NotTcp,
        })?;
        if self.cfg.check_ethertype {
            let want = if ip.v6 { 0x86dd } else { 0x0800 };
            if l3 < 2 || be16(d, l3 - 2) != want {
                return Err(Refusal::NotTcp);
            }
        }
        if ip.proto != PROTO_TCP {
            return Err(Refusal::NotTcp);
        }
        if !ip.v6 && (ip.l4 != l3 + 20 || ip.is_fragment(d)) {
            return Err(Refusal::IpLayout);
        }
        let thl = hdr::tcp_hdr_len(d, &ip).map_err(|_| Refusal::NotTcp)?;
        if o.gso != Gso::None {
            return Err(Refusal::AlreadyGso);
        }
        let mut key = FlowKey {
            v6: ip.v6,
            ports: be32(d, ip.l4),
            ..FlowKey::default()
        };
        if ip.v6 {
            key.src.copy_from_slice(&d[l3 + 8..l3 + 24]);
            key.dst.copy_from_slice(&d[l3 + 24..l3 + 40]);
        } else {
            key.src[..4].copy_from_slice(&d[l3 + 12..l3 + 16]);
            key.dst[..4].copy_from_slice(&d[l3 + 16..l3 + 20]);
        }
        Ok(Seg {
            key,
            thl,
            payload: ip.end - ip.l4 - thl,
            seq: be32(d, ip.l4 + 4),
            flags: d[ip.l4 + 13],
            ip,
        })
    }

    /// Slot index for `key`: the existing flow, or a free slot, or `None`
    /// when the table is full.
    fn lookup(&self, key: &FlowKey) -> Option<usize> {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in key
            .src
            .iter()
            .chain(key.dst.iter())
            .chain(key.ports.to_be_bytes().iter())
        {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        let mut i = (h ^ (h >> 29)) as usize & self.mask;
        for _ in 0..self.table.len() {
            let s = &self.table[i];
            if s.gen != self.gen || s.key == *key {
                return Some(i);
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    fn one(&mut self, pkt: Packet, out: &mut Vec<Packet>, pool: &mut Pool) {
        let seg = match self.parse(pkt.data(), &pkt.meta.offload) {
            Ok(s) => s,
            Err(r) => {
                self.refuse(r);
                out.push(pkt);
                return;
            }
        };
        let Some(si) = self.lookup(&seg.key) else {
            self.refuse(Refusal::TableFull);
            out.push(pkt);
            return;
        };
        let existing = self.table[si].gen == self.gen;

        // Packets that may neither extend nor start a super-packet end the
        // flow's current one, so nothing later overtakes them.
        let o = pkt.meta.offload;
        let ineligible = if seg.flags & (TCP_SYN | TCP_FIN | TCP_RST | TCP_URG) != 0
            || seg.flags & TCP_ACK == 0
        {
            Some(Refusal::Flags)
        } else if seg.payload == 0 {
            Some(Refusal::NoPayload)
        } else if !(o.csum_valid || o.needs_csum || verify_l4_at(pkt.data(), self.cfg.l3_offset)) {
            Some(Refusal::BadChecksum)
        } else {
            None
        };
        if let Some(r) = ineligible {
            self.refuse(r);
            if existing {
                // End the flow's super-packet; the next segment starts a
                // new one (segs == 0: no head, the slot stays in the
                // probe chain).
                let s = self.table[si];
                self.finish(&s, out);
                self.table[si].segs = 0;
            }
            out.push(pkt);
            return;
        }

        if existing && self.table[si].segs > 0 {
            let slot = self.table[si];
            let verdict = match slot.closed {
                Some(r) => Err(r),
                None => self.can_merge(&slot, &out[slot.idx], &pkt, &seg),
            };
            match verdict {
                Ok(ts) => {
                    self.merge(si, out, &pkt, &seg, ts);
                    self.stats.merged += 1;
                    pool.free(pkt);
                    return;
                }
                Err(r) => {
                    self.refuse(r);
                    self.finish(&slot, out);
                }
            }
        }
        // Start a new super-packet with this segment.
        let d = pkt.data();
        let ts_at = find_ts(&d[seg.ip.l4 + 20..seg.ip.l4 + seg.thl]).map(|o| 20 + o);
        self.table[si] = Slot {
            gen: self.gen,
            key: seg.key,
            idx: out.len(),
            closed: (seg.flags & TCP_PSH != 0).then_some(Refusal::Pushed),
            next_seq: seg.seq.wrapping_add(seg.payload as u32),
            gso_size: seg.payload,
            last_len: seg.payload,
            segs: 1,
            id_first: if seg.ip.v6 { 0 } else { be16(d, seg.ip.l3 + 4) },
            id_mode: IdMode::Unknown,
            ts_at,
            last_tsval: ts_at.map_or(0, |t| be32(d, seg.ip.l4 + t)),
        };
        out.push(pkt);
    }

    /// Checks the merge rules; on success returns the new TSval to store
    /// in the super-packet, if timestamps may advance and did.
    fn can_merge(
        &self,
        slot: &Slot,
        head: &Packet,
        pkt: &Packet,
        seg: &Seg,
    ) -> Result<Option<u32>, Refusal> {
        let h = head.data();
        let d = pkt.data();
        let l3 = seg.ip.l3;
        let (hl4, l4) = (slot_l4(h, l3), seg.ip.l4);
        if slot.last_len < slot.gso_size {
            return Err(Refusal::AfterShort);
        }
        if seg.flags & TCP_CWR != 0 {
            return Err(Refusal::Cwr);
        }
        if seg.seq != slot.next_seq {
            return Err(Refusal::SeqGap);
        }
        if d[l4 + 8..l4 + 12] != h[hl4 + 8..hl4 + 12] {
            return Err(Refusal::AckDiffers);
        }
        if d[l4 + 14..l4 + 16] != h[hl4 + 14..hl4 + 16] {
            return Err(Refusal::WindowDiffers);
        }
        // Same flags apart from PSH and the first segment's CWR (as the
        // kernel: FIN, SYN, RST, URG were refused above; ECE must match).
        if (d[l4 + 13] ^ h[hl4 + 13]) & !(TCP_PSH | TCP_CWR) != 0 {
            return Err(Refusal::Flags);
        }
        if seg.ip.v6 {
            // Version, traffic class, flow label; hop limit.
            if d[l3..l3 + 4] != h[l3..l3 + 4] || d[l3 + 7] != h[l3 + 7] {
                return Err(Refusal::IpFieldsDiffer);
            }
        } else {
            let df_differs = (d[l3 + 6] ^ h[l3 + 6]) & 0x40 != 0;
            if d[l3 + 1] != h[l3 + 1] || d[l3 + 8] != h[l3 + 8] || df_differs {
                return Err(Refusal::IpFieldsDiffer);
            }
            let id = be16(d, l3 + 4);
            let df = d[l3 + 6] & 0x40 != 0;
            let incr = id == slot.id_first.wrapping_add(slot.segs as u16);
            let fixed = df && id == slot.id_first;
            let ok = match slot.id_mode {
                IdMode::Unknown => incr || fixed,
                IdMode::Incrementing => incr,
                IdMode::Fixed => fixed,
            };
            if !ok {
                return Err(Refusal::IpId);
            }
        }
        let thl = usize::from(h[hl4 + 12] >> 4) * 4;
        if thl != seg.thl {
            return Err(Refusal::OptionsDiffer);
        }
        let mut new_ts = None;
        if d[l4 + 20..l4 + thl] != h[hl4 + 20..hl4 + thl] {
            // Only a TSval difference may be tolerated.
            let Some(t) = slot.ts_at.filter(|_| self.cfg.allow_ts_advance) else {
                return Err(Refusal::OptionsDiffer);
            };
            if d[l4 + 20..l4 + t] != h[hl4 + 20..hl4 + t]
                || d[l4 + t + 4..l4 + thl] != h[hl4 + t + 4..hl4 + thl]
            {
                return Err(Refusal::OptionsDiffer);
            }
            let tsval = be32(d, l4 + t);
            // RFC 7323 §5.3: timestamps compare in serial-number arithmetic.
            if (tsval.wrapping_sub(slot.last_tsval) as i32) < 0 {
                return Err(Refusal::TimestampBackwards);
            }
            new_ts = Some(tsval);
        }
        if seg.payload > slot.gso_size {
            return Err(Refusal::Larger);
        }
        let head_end = hl4 + thl + (slot.next_seq.wrapping_sub(be32(h, hl4 + 4)) as usize);
        let new_end = head_end + seg.payload;
        let ip_len = new_end - l3 - if seg.ip.v6 { hdr::IPV6_HDR_LEN } else { 0 };
        if ip_len > usize::from(u16::MAX)
            || new_end > MAX_FRAME
            || seg.payload > head.tailroom() + (head.len() - head_end.min(head.len()))
        {
            return Err(Refusal::TooBig);
        }
        Ok(new_ts)
    }

    fn merge(&mut self, si: usize, out: &mut [Packet], pkt: &Packet, seg: &Seg, ts: Option<u32>) {
        let slot = &mut self.table[si];
        let head = &mut out[slot.idx];
        let l3 = seg.ip.l3;
        let hl4 = slot_l4(head.data(), l3);
        let thl = seg.thl;
        let head_end =
            hl4 + thl + (slot.next_seq.wrapping_sub(be32(head.data(), hl4 + 4)) as usize);
        // Drop the first segment's Ethernet padding before appending.
        head.truncate(head_end);
        let src = &pkt.data()[seg.ip.l4 + thl..seg.ip.end];
        if let Some(room) = head.push_back(src.len()) {
            room.copy_from_slice(src);
        }
        let h = head.data_mut();
        if seg.flags & TCP_PSH != 0 {
            h[hl4 + 13] |= TCP_PSH;
            slot.closed = Some(Refusal::Pushed);
        }
        if let (Some(v), Some(t)) = (ts, slot.ts_at) {
            put32(h, hl4 + t, v);
            slot.last_tsval = v;
        }
        if !seg.ip.v6 && slot.id_mode == IdMode::Unknown {
            let id = be16(pkt.data(), l3 + 4);
            slot.id_mode = if id == slot.id_first {
                IdMode::Fixed
            } else {
                IdMode::Incrementing
            };
        }
        slot.next_seq = slot.next_seq.wrapping_add(seg.payload as u32);
        slot.last_len = seg.payload;
        slot.segs += 1;
    }

    /// Turns a head with merged segments into a proper super-packet: IP
    /// length and header checksum, pseudo-header sum in the TCP checksum
    /// field, offload metadata.
    fn finish(&mut self, slot: &Slot, out: &mut [Packet]) {
        if slot.segs < 2 {
            return;
        }
        let l3 = self.cfg.l3_offset;
        let head = &mut out[slot.idx];
        let d = head.data_mut();
        let len = d.len();
        let v6 = d[l3] >> 4 == 6;
        let l4 = slot_l4(d, l3);
        let thl = usize::from(d[l4 + 12] >> 4) * 4;
        hdr::set_ip_len(d, l3, v6, len);
        if !v6 {
            hdr::set_ipv4_csum(d, l3);
        }
        let ip = Ip {
            v6,
            l3,
            l4,
            proto: PROTO_TCP,
            end: len,
        };
        let pseudo = fold(hdr::pseudo_sum(d, &ip, len - l4));
        put16(d, l4 + 16, pseudo);
        let o = &mut head.meta.offload;
        o.gso = if v6 { Gso::TcpV6 } else { Gso::TcpV4 };
        o.gso_size = slot.gso_size as u16;
        o.hdr_len = (l4 + thl) as u16;
        o.needs_csum = true;
        o.csum_valid = false;
        o.csum_start = l4 as u16;
        o.csum_offset = 16;
        self.stats.super_out += 1;
    }
}

/// L4 offset of a head that passed [`Coalescer::parse`] (no IP options or
/// extension headers).
fn slot_l4(d: &[u8], l3: usize) -> usize {
    if d[l3] >> 4 == 6 {
        l3 + hdr::IPV6_HDR_LEN
    } else {
        l3 + 20
    }
}

/// Offset of the TSval inside TCP options `opts`, if a well-formed
/// timestamp option (kind 8, length 10, RFC 7323 §3) is present.
fn find_ts(opts: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => return None,
            1 => i += 1,
            kind => {
                let len = usize::from(*opts.get(i + 1)?);
                if len < 2 || i + len > opts.len() {
                    return None;
                }
                if kind == 8 && len == 10 {
                    return Some(i + 2);
                }
                i += len;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload::gso;
    use crate::offload::testutil::*;
    use proptest::prelude::*;

    fn rd16(d: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([d[at], d[at + 1]])
    }

    fn gro() -> Coalescer {
        Coalescer::new(GroConfig::ethernet())
    }

    /// Segments of one flow: `sizes` payload bytes each, contiguous.
    fn segs(t: &Tcp, sizes: &[usize]) -> Vec<Vec<u8>> {
        let mut t = t.clone();
        let mut v = Vec::new();
        for (i, n) in sizes.iter().enumerate() {
            v.push(tcp_frame(&t, &payload(*n, i as u8)));
            t.seq = t.seq.wrapping_add(*n as u32);
            t.id = t.id.wrapping_add(1);
        }
        v
    }

    fn run(c: &mut Coalescer, frames: &[Vec<u8>], pool: &mut Pool) -> Vec<Packet> {
        let mut v: Vec<Packet> = frames.iter().map(|f| packet(pool, f, 14)).collect();
        c.coalesce(&mut v, pool);
        v
    }

    /// Completes the NEEDS_CSUM checksum the way a NIC would, computed with
    /// the test's own RFC 1071 code, and checks it verifies.
    fn complete_and_verify(p: &Packet) -> Vec<u8> {
        let o = p.meta.offload;
        assert!(o.needs_csum);
        let mut d = p.data().to_vec();
        let at = usize::from(o.csum_start + o.csum_offset);
        let c = rfc1071(&d[usize::from(o.csum_start)..]);
        d[at..at + 2].copy_from_slice(&c.to_be_bytes());
        assert!(
            l4_ok(&d, 14),
            "super-packet checksum completes to a valid one"
        );
        d
    }

    #[test]
    fn merges_in_order_segments() {
        for v6 in [false, true] {
            let mut pool = Pool::new(64);
            let mut c = gro();
            let t = Tcp::new(v6);
            let frames = segs(&t, &[1000, 1000, 1000, 400]);
            let out = run(&mut c, &frames, &mut pool);
            assert_eq!(out.len(), 1);
            let p = &out[0];
            let o = p.meta.offload;
            assert_eq!(o.gso, if v6 { Gso::TcpV6 } else { Gso::TcpV4 });
            assert_eq!(o.gso_size, 1000);
            let l4 = if v6 { 54 } else { 34 };
            assert_eq!(usize::from(o.hdr_len), l4 + 32);
            assert_eq!(usize::from(o.csum_start), l4);
            assert_eq!(o.csum_offset, 16);
            let d = complete_and_verify(p);
            if v6 {
                assert_eq!(usize::from(rd16(&d, 18)), d.len() - 54);
            } else {
                assert_eq!(usize::from(rd16(&d, 16)), d.len() - 14);
                assert!(ipv4_hdr_ok(&d, 14));
            }
            let mut want = Vec::new();
            for f in &frames {
                want.extend_from_slice(&f[l4 + 32..]);
            }
            assert_eq!(d[l4 + 32..], want[..]);
            assert_eq!(c.stats().merged, 3);
            assert_eq!(c.stats().super_out, 1);
            assert_eq!(c.stats().packets_in, 4);
            assert_eq!(pool.available(), 63, "merged buffers returned");
        }
    }

    /// Runs `frames` and expects `n` packets out and one refusal `r`.
    fn expect(frames: &[Vec<u8>], n: usize, r: Refusal) -> Vec<Packet> {
        expect_cfg(GroConfig::ethernet(), frames, n, r)
    }

    fn expect_cfg(cfg: GroConfig, frames: &[Vec<u8>], n: usize, r: Refusal) -> Vec<Packet> {
        let mut pool = Pool::new(64);
        let mut c = Coalescer::new(cfg);
        let out = run(&mut c, frames, &mut pool);
        assert_eq!(out.len(), n, "packets out");
        assert_eq!(
            c.stats().refused(r),
            1,
            "refusal {} counted: {:?}",
            r.name(),
            c.stats()
        );
        assert_eq!(c.stats().refused.iter().sum::<u64>(), 1, "{:?}", c.stats());
        out
    }

    fn second_with(f: impl Fn(&mut Tcp)) -> Vec<Vec<u8>> {
        let t = Tcp::new(false);
        let mut v = segs(&t, &[1000]);
        let mut t2 = t.clone();
        t2.seq += 1000;
        t2.id += 1;
        f(&mut t2);
        v.push(tcp_frame(&t2, &payload(1000, 1)));
        v
    }

    #[test]
    fn seq_gap_starts_a_new_super_packet() {
        let t = Tcp::new(false);
        let mut frames = segs(&t, &[1000]);
        let mut t2 = t.clone();
        t2.seq += 5000;
        t2.id += 1;
        frames.extend(segs(&t2, &[1000, 1000]));
        let out = expect(&frames, 2, Refusal::SeqGap);
        assert_eq!(out[0].meta.offload.gso, Gso::None);
        assert_eq!(out[0].data(), &frames[0][..]);
        assert_eq!(out[1].meta.offload.gso, Gso::TcpV4);
        assert_eq!(out[1].len(), frames[1].len() + 1000);
    }

    #[test]
    fn refuses_different_ack() {
        expect(&second_with(|t| t.ack += 1), 2, Refusal::AckDiffers);
    }

    #[test]
    fn refuses_different_window() {
        expect(&second_with(|t| t.window += 1), 2, Refusal::WindowDiffers);
    }

    #[test]
    fn refuses_different_ttl() {
        expect(&second_with(|t| t.ttl -= 1), 2, Refusal::IpFieldsDiffer);
    }

    #[test]
    fn refuses_different_df() {
        expect(&second_with(|t| t.df = false), 2, Refusal::IpFieldsDiffer);
    }

    #[test]
    fn refuses_different_tos() {
        let mut f = second_with(|_| {});
        f[1][15] = 0x20;
        f[1][24..26].fill(0);
        let c = rfc1071(&f[1][14..34]);
        f[1][24..26].copy_from_slice(&c.to_be_bytes());
        expect(&f, 2, Refusal::IpFieldsDiffer);
    }

    #[test]
    fn refuses_different_ipv6_flow_label_and_hop_limit() {
        let t = Tcp::new(true);
        let mut f = segs(&t, &[1000, 1000]);
        f[1][17] ^= 1; // flow label (not in the pseudo header: checksum stays valid)
        expect(&f, 2, Refusal::IpFieldsDiffer);
        let mut f = segs(&t, &[1000, 1000]);
        f[1][21] -= 1; // hop limit
        expect(&f, 2, Refusal::IpFieldsDiffer);
    }

    #[test]
    fn ipv4_id_rules() {
        // DF clear: the ID must increment.
        expect(
            &second_with(|t| {
                t.df = false;
                t.id -= 1;
            }),
            2,
            Refusal::IpFieldsDiffer,
        );
        let t = Tcp {
            df: false,
            ..Tcp::new(false)
        };
        let mut f = segs(&t, &[1000]);
        let mut t2 = t.clone();
        t2.seq += 1000; // same ID, DF clear
        f.push(tcp_frame(&t2, &payload(1000, 1)));
        expect(&f, 2, Refusal::IpId);
        // DF set: a fixed ID merges...
        let t = Tcp::new(false);
        let mut f = segs(&t, &[1000]);
        let mut t2 = t.clone();
        for _ in 0..2 {
            t2.seq += 1000;
            f.push(tcp_frame(&t2, &payload(1000, 1)));
        }
        let mut pool = Pool::new(8);
        assert_eq!(run(&mut gro(), &f, &mut pool).len(), 1);
        // ...but not a jump.
        expect(&second_with(|t| t.id += 7), 2, Refusal::IpId);
    }

    #[test]
    fn refuses_different_options() {
        expect(
            &second_with(|t| t.opts = ts_opt(100, 51)),
            2,
            Refusal::OptionsDiffer,
        );
        // The kernel's rule: even an advancing TSval is a difference.
        expect(
            &second_with(|t| t.opts = ts_opt(101, 50)),
            2,
            Refusal::OptionsDiffer,
        );
    }

    #[test]
    fn timestamps_may_advance_when_allowed() {
        let cfg = GroConfig {
            allow_ts_advance: true,
            ..GroConfig::ethernet()
        };
        let mut f = second_with(|t| t.opts = ts_opt(101, 50));
        let mut t3 = Tcp::new(false);
        t3.seq += 2000;
        t3.id += 2;
        t3.opts = ts_opt(101, 50);
        f.push(tcp_frame(&t3, &payload(1000, 2)));
        let mut pool = Pool::new(8);
        let mut c = Coalescer::new(cfg);
        let out = run(&mut c, &f, &mut pool);
        assert_eq!(out.len(), 1);
        let d = complete_and_verify(&out[0]);
        assert_eq!(d[58..62], 101u32.to_be_bytes(), "latest TSval carried");
        expect_cfg(
            cfg,
            &second_with(|t| t.opts = ts_opt(99, 50)),
            2,
            Refusal::TimestampBackwards,
        );
        expect_cfg(
            cfg,
            &second_with(|t| t.opts = ts_opt(101, 49)),
            2,
            Refusal::OptionsDiffer,
        );
    }

    #[test]
    fn refuses_syn_fin_rst_urg() {
        for fl in [SYN, FIN, RST, URG] {
            let out = expect(&second_with(|t| t.flags |= fl), 2, Refusal::Flags);
            assert!(out.iter().all(|p| p.meta.offload.gso == Gso::None));
        }
    }

    #[test]
    fn psh_only_on_the_last_merged() {
        let t = Tcp::new(false);
        let mut f = segs(&t, &[1000]);
        let mut t2 = t.clone();
        t2.seq += 1000;
        t2.id += 1;
        t2.flags |= PSH;
        f.push(tcp_frame(&t2, &payload(1000, 1)));
        let mut t3 = t.clone();
        t3.seq += 2000;
        t3.id += 2;
        f.extend(segs(&t3, &[1000, 1000]));
        let out = expect(&f, 2, Refusal::Pushed);
        assert_eq!(
            out[0].data()[47] & PSH,
            PSH,
            "PSH carried on the super-packet"
        );
        assert_eq!(out[0].len(), f[0].len() + 1000);
        assert_eq!(out[1].data()[47] & PSH, 0);
        assert_eq!(out[1].meta.offload.gso, Gso::TcpV4);
    }

    #[test]
    fn cwr_only_on_the_first() {
        expect(&second_with(|t| t.flags |= CWR), 2, Refusal::Cwr);
    }

    #[test]
    fn never_larger_after_smaller() {
        let t = Tcp::new(false);
        expect(&segs(&t, &[500, 1000]), 2, Refusal::Larger);
        // A smaller one may come last, and nothing after it.
        let out = expect(&segs(&t, &[1000, 500, 500]), 2, Refusal::AfterShort);
        assert_eq!(out[0].meta.offload.gso_size, 1000);
        assert_eq!(out[0].len(), 14 + 20 + 32 + 1500);
    }

    #[test]
    fn bad_checksum_is_never_merged_nor_overtaken() {
        let t = Tcp::new(false);
        let mut f = segs(&t, &[1000, 1000, 1000]);
        f[1][100] ^= 0xff;
        let out = expect(&f, 3, Refusal::BadChecksum);
        assert_eq!(out[1].data(), &f[1][..], "bad segment untouched");
        assert!(out.iter().all(|p| p.meta.offload.gso == Gso::None));
    }

    #[test]
    fn data_valid_skips_verification() {
        let t = Tcp::new(false);
        let mut f = segs(&t, &[1000, 1000]);
        f[1][100] ^= 0xff;
        let mut pool = Pool::new(8);
        let mut v: Vec<Packet> = f.iter().map(|x| packet(&mut pool, x, 14)).collect();
        v[1].meta.offload.csum_valid = true;
        gro().coalesce(&mut v, &mut pool);
        assert_eq!(v.len(), 1, "DATA_VALID trusted");
    }

    #[test]
    fn pure_ack_is_not_merged_and_ends_the_run() {
        let t = Tcp::new(false);
        let mut f = segs(&t, &[1000]);
        let mut t2 = t.clone();
        t2.seq += 1000;
        t2.id += 1;
        f.push(tcp_frame(&t2, &[]));
        t2.id += 1;
        f.push(tcp_frame(&t2, &payload(1000, 1)));
        let out = expect(&f, 3, Refusal::NoPayload);
        assert_eq!(out[1].data(), &f[1][..]);
    }

    #[test]
    fn too_big_splits() {
        let t = Tcp::new(false);
        let f = segs(&t, &[1448; 50]);
        let mut pool = Pool::new(64);
        let mut c = gro();
        let out = run(&mut c, &f, &mut pool);
        assert_eq!(out.len(), 2);
        assert_eq!(c.stats().refused(Refusal::TooBig), 1);
        for p in &out {
            assert!(rd16(p.data(), 16) as usize == p.len() - 14);
            complete_and_verify(p);
        }
        let total: usize = out.iter().map(|p| p.len() - 66).sum();
        assert_eq!(total, 50 * 1448);
    }

    #[test]
    fn non_tcp_and_ip_options_pass() {
        let mut pool = Pool::new(8);
        let mut c = gro();
        let udp = udp_frame(false, &[1; 100]);
        let out = run(&mut c, &[udp.clone(), udp], &mut pool);
        assert_eq!(out.len(), 2);
        assert_eq!(c.stats().refused(Refusal::NotTcp), 2);
        // VLAN-tagged EtherType at the expected place: left alone.
        let t = Tcp::new(false);
        let mut f = segs(&t, &[1000, 1000]);
        for x in &mut f {
            x[12..14].copy_from_slice(&[0x81, 0x00]);
        }
        let mut c = gro();
        assert_eq!(run(&mut c, &f, &mut pool).len(), 2);
        assert_eq!(c.stats().refused(Refusal::NotTcp), 2);
    }

    #[test]
    fn ip_options_extension_headers_and_fragments_pass() {
        // IPv4 with a (copied, NOP-padded) option: IHL 6.
        let mut f = Vec::new();
        for i in 0..2u32 {
            let t = Tcp::new(false);
            let base = tcp_frame(
                &Tcp {
                    seq: t.seq + i * 100,
                    id: t.id + i as u16,
                    ..t
                },
                &payload(100, 0),
            );
            let mut x = base[..14].to_vec();
            let seg = &base[34..];
            x.extend_from_slice(&ipv4(
                24 + seg.len(),
                0x4242 + i as u16,
                0x4000,
                64,
                6,
                &[0x94, 4, 0, 0],
            ));
            x.extend_from_slice(seg);
            f.push(x);
        }
        expect_two(&f, Refusal::IpLayout);
        // IPv6 with a hop-by-hop header in front of TCP.
        let t = Tcp::new(true);
        let f: Vec<Vec<u8>> = segs(&t, &[100, 100])
            .into_iter()
            .map(|b| {
                let mut x = b[..14].to_vec();
                let mut ip = b[14..54].to_vec();
                let plen = u16::from_be_bytes([ip[4], ip[5]]) + 8;
                ip[4..6].copy_from_slice(&plen.to_be_bytes());
                ip[6] = 0;
                x.extend_from_slice(&ip);
                x.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
                x.extend_from_slice(&b[54..]);
                x
            })
            .collect();
        expect_two(&f, Refusal::IpLayout);
        // IPv4 fragments (MF set).
        let mut f = segs(&Tcp::new(false), &[100, 100]);
        for x in &mut f {
            x[20] |= 0x20;
            x[24..26].fill(0);
            let c = rfc1071(&x[14..34]);
            x[24..26].copy_from_slice(&c.to_be_bytes());
        }
        expect_two(&f, Refusal::IpLayout);
    }

    fn expect_two(frames: &[Vec<u8>], r: Refusal) {
        let mut pool = Pool::new(8);
        let mut c = gro();
        let out = run(&mut c, frames, &mut pool);
        assert_eq!(out.len(), 2);
        assert_eq!(c.stats().refused(r), 2, "{:?}", c.stats());
        for (o, f) in out.iter().zip(frames) {
            assert_eq!(o.data(), &f[..]);
        }
    }

    #[test]
    fn super_packets_pass_untouched() {
        let f = segs(&Tcp::new(false), &[1000, 1000]);
        let mut pool = Pool::new(8);
        let mut v: Vec<Packet> = f.iter().map(|x| packet(&mut pool, x, 14)).collect();
        for p in &mut v {
            p.meta.offload.gso = Gso::TcpV4;
            p.meta.offload.gso_size = 500;
        }
        let mut c = gro();
        c.coalesce(&mut v, &mut pool);
        assert_eq!(v.len(), 2);
        assert_eq!(c.stats().refused(Refusal::AlreadyGso), 2);
    }

    #[test]
    fn table_full_passes_extra_flows() {
        let cfg = GroConfig {
            max_flows: 1,
            ..GroConfig::ethernet()
        };
        // Table of 2 slots; 3 flows (different source ports), 2 segments each.
        let mut frames = Vec::new();
        for port in 0..3u8 {
            for x in segs(&Tcp::new(false), &[100, 100]) {
                let mut x = x;
                x[35] = port; // source port low byte, checksum adjusted below
                x[50..52].fill(0);
                let mut all = pseudo(&x, 14, 6, x.len() - 34);
                all.extend_from_slice(&x[34..]);
                let c = rfc1071(&all);
                x[50..52].copy_from_slice(&c.to_be_bytes());
                frames.push(x);
            }
        }
        let mut pool = Pool::new(16);
        let mut c = Coalescer::new(cfg);
        let out = run(&mut c, &frames, &mut pool);
        assert_eq!(c.stats().super_out, 2);
        assert_eq!(c.stats().refused(Refusal::TableFull), 2);
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn refusal_table_is_consistent() {
        for (i, r) in Refusal::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
            assert!(!r.name().is_empty());
        }
    }

    #[test]
    fn interleaved_flows_keep_positions() {
        let a = Tcp::new(false);
        let b = Tcp::new(true);
        let fa = segs(&a, &[800, 800, 800]);
        let fb = segs(&b, &[700, 700]);
        let udp = udp_frame(false, &[3; 50]);
        let frames = vec![
            fa[0].clone(),
            fb[0].clone(),
            udp.clone(),
            fa[1].clone(),
            fb[1].clone(),
            fa[2].clone(),
        ];
        let mut pool = Pool::new(16);
        let mut c = gro();
        let out = run(&mut c, &frames, &mut pool);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].meta.offload.gso, Gso::TcpV4);
        assert_eq!(out[0].meta.offload.gso_size, 800);
        assert_eq!(out[1].meta.offload.gso, Gso::TcpV6);
        assert_eq!(out[2].data(), &udp[..]);
        assert_eq!(c.stats().super_out, 2);
    }

    #[test]
    fn ethernet_padding_is_dropped_before_merging() {
        let t = Tcp {
            opts: Vec::new(),
            ..Tcp::new(false)
        };
        let mut f = segs(&t, &[2, 2, 2]);
        for x in &mut f {
            assert!(x.len() < 60);
            x.resize(60, 0xee);
        }
        let mut pool = Pool::new(8);
        let out = run(&mut gro(), &f, &mut pool);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), 54 + 6);
        complete_and_verify(&out[0]);
    }

    #[test]
    fn roundtrip_segment_coalesce_segment() {
        for (v6, flags) in [(false, ACK | PSH | CWR), (true, ACK | PSH), (false, ACK)] {
            let mut t = Tcp::new(v6);
            t.flags = flags;
            let big = tcp_frame(&t, &payload(30_000, 7));
            let mut pool = Pool::new(128);
            let mut sp = packet(&mut pool, &big, 14);
            sp.meta.offload.gso = if v6 { Gso::TcpV6 } else { Gso::TcpV4 };
            sp.meta.offload.gso_size = 1448;
            let mut s1 = Vec::new();
            gso::segment(&sp, &mut pool, &mut s1).unwrap();
            let copies: Vec<Vec<u8>> = s1.iter().map(|p| p.data().to_vec()).collect();
            let mut c = gro();
            c.coalesce(&mut s1, &mut pool);
            assert_eq!(s1.len(), 1, "{:?}", c.stats());
            let g = &s1[0];
            let d = complete_and_verify(g);
            assert_eq!(d.len(), big.len());
            // Headers equal apart from the checksums.
            let mut a = d.clone();
            let mut b = big.clone();
            let l4 = if v6 { 54 } else { 34 };
            for x in [&mut a, &mut b] {
                x[l4 + 16..l4 + 18].fill(0);
                if !v6 {
                    x[24..26].fill(0);
                }
            }
            assert_eq!(a, b);
            // And segmenting the result again gives the same segments.
            let mut s2 = Vec::new();
            gso::segment(g, &mut pool, &mut s2).unwrap();
            let again: Vec<Vec<u8>> = s2.iter().map(|p| p.data().to_vec()).collect();
            assert_eq!(again, copies);
        }
    }

    proptest! {
        #[test]
        fn roundtrip_any_sizes(n in 1usize..40_000, mss in 200u16..9000, v6 in any::<bool>(), seq in any::<u32>(), id in any::<u16>()) {
            let mut t = Tcp::new(v6);
            t.seq = seq;
            t.id = id;
            let big = tcp_frame(&t, &payload(n, 1));
            let mut pool = Pool::new(256);
            let mut sp = packet(&mut pool, &big, 14);
            sp.meta.offload.gso = if v6 { Gso::TcpV6 } else { Gso::TcpV4 };
            sp.meta.offload.gso_size = mss;
            let mut s = Vec::new();
            gso::segment(&sp, &mut pool, &mut s).unwrap();
            let nseg = s.len();
            let mut c = gro();
            c.coalesce(&mut s, &mut pool);
            prop_assert_eq!(s.len(), 1);
            prop_assert_eq!(c.stats().merged as usize, nseg - 1);
            let d = if nseg > 1 { complete_and_verify(&s[0]) } else { s[0].data().to_vec() };
            let l4 = if v6 { 54 } else { 34 };
            prop_assert_eq!(&d[l4 + 32..], &big[l4 + 32..]);
        }

        #[test]
        fn never_panics_on_mutations(
            sizes in proptest::collection::vec(1usize..1500, 1..12),
            muts in proptest::collection::vec((0usize..12, 0usize..80, any::<u8>()), 0..12),
            valid in proptest::collection::vec(any::<bool>(), 12),
            ts in any::<bool>(),
        ) {
            let t = Tcp::new(muts.len() % 2 == 0);
            let mut f = segs(&t, &sizes);
            for (k, at, v) in &muts {
                let k = k % f.len();
                if *at < f[k].len() { f[k][*at] = *v; }
            }
            let mut pool = Pool::new(32);
            let mut v: Vec<Packet> = f.iter().map(|x| packet(&mut pool, x, 14)).collect();
            for (p, ok) in v.iter_mut().zip(&valid) {
                p.meta.offload.csum_valid = *ok;
            }
            let before = pool.available();
            let mut c = Coalescer::new(GroConfig { allow_ts_advance: ts, ..GroConfig::ethernet() });
            c.coalesce(&mut v, &mut pool);
            let st = c.stats();
            prop_assert_eq!(v.len() + st.merged as usize, f.len());
            prop_assert_eq!(pool.available(), before + st.merged as usize);
        }

        #[test]
        fn never_panics_on_garbage(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..20), l3 in 0usize..30) {
            let mut pool = Pool::new(32);
            let mut v: Vec<Packet> = frames.iter().map(|x| packet(&mut pool, x, 14)).collect();
            for (i, p) in v.iter_mut().enumerate() {
                p.meta.offload.csum_valid = i % 2 == 0;
                p.meta.offload.needs_csum = i % 3 == 0;
            }
            let mut c = Coalescer::new(GroConfig { l3_offset: l3, check_ethertype: false, allow_ts_advance: true, max_flows: 4 });
            c.coalesce(&mut v, &mut pool);
            prop_assert_eq!(v.len() + c.stats().merged as usize, frames.len());
        }
    }
}
