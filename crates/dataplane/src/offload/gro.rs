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
//!   here unless the packet is marked DATA_VALID or NEEDS_CSUM); a TCP
//!   super-packet with its checksum partial at its TCP header counts as
//!   one (large) segment, so packets decapsulated whole from a jumbo
//!   underlay and marked for the host's MSS still coalesce;
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
//! - the result stays within the 16-bit IP length and a large buffer (a
//!   head received into a small one moves into a large one to grow).
//!
//! Coalescing works over one vector at a time: merged segments disappear
//! from the vector, the super-packet stays at the position of its first
//! segment, everything else keeps its order, and nothing is held between
//! calls (so no timer and no flush). A segment that cannot extend its flow's
//! super-packet starts a new one; a segment that cannot be merged at all
//! ends the flow's super-packet, so data never overtakes anything.

use super::csum::{fold, verify_l4_at};
use super::hdr::{
    self, Ip, PROTO_TCP, TCP_ACK, TCP_CWR, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN, TCP_URG,
};
use packet::buffer::{Gso, Packet, Pool, BUF_SIZE, MAX_FRAME, VECTOR_SIZE};
use packet::gso_limit;

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
            if wire::ethernet::ethertype_before(d, l3) != Some(want) {
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
        // A TCP super-packet whose checksum is left partial at this TCP
        // header (what offload::tso::mark makes of a packet decapsulated
        // whole from a large-MTU underlay, wider than the host's link) is
        // data like a segment: it may extend or start a super-packet.
        let tcp_gso = matches!((o.gso, ip.v6), (Gso::TcpV4, false) | (Gso::TcpV6, true))
            && o.needs_csum
            && usize::from(o.csum_start) == ip.l4
            && o.csum_offset == 16;
        if o.gso != Gso::None && !tcp_gso {
            return Err(Refusal::AlreadyGso);
        }
        let t = hdr::tcp(d, ip.l4);
        let mut key = FlowKey {
            v6: ip.v6,
            ports: u32::from(t.src_port()) << 16 | u32::from(t.dst_port()),
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
            seq: t.seq_number(),
            flags: t.flags(),
            ip,
        })
    }

    /// Slot index for `key`: the existing flow, or a free slot, or `None`
    /// when the table is full.
    fn lookup(&self, key: &FlowKey) -> Option<usize> {
        // Five words, a multiply each (FxHash's step): a byte-wise hash
        // was 36 dependent multiplies per packet.
        let (src, dst) = (u128::from_le_bytes(key.src), u128::from_le_bytes(key.dst));
        let mut h: u64 = 0;
        for w in [
            src as u64,
            (src >> 64) as u64,
            dst as u64,
            (dst >> 64) as u64,
            u64::from(key.ports),
        ] {
            h = (h.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        let mut i = (h ^ (h >> 32)) as usize & self.mask;
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
            // A head in a small buffer moves into a large one to grow.
            let verdict = verdict.and_then(|ts| {
                if pool.grow(&mut out[slot.idx]) {
                    Ok(ts)
                } else {
                    Err(Refusal::TooBig)
                }
            });
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
            id_first: if seg.ip.v6 {
                0
            } else {
                hdr::ip4(d, seg.ip.l3).ident()
            },
            id_mode: IdMode::Unknown,
            ts_at,
            last_tsval: ts_at
                .and_then(|t| hdr::tcp(d, seg.ip.l4).tsval_at(t))
                .unwrap_or(0),
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
            let v4 = hdr::ip4(d, l3);
            let (id, df) = (v4.ident(), v4.dont_frag());
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
            // t + 4 <= thl (find_ts checked the option's length).
            let tsval = hdr::tcp(d, l4).tsval_at(t).unwrap_or(0);
            // RFC 7323 §5.3: timestamps compare in serial-number arithmetic.
            if (tsval.wrapping_sub(slot.last_tsval) as i32) < 0 {
                return Err(Refusal::TimestampBackwards);
            }
            new_ts = Some(tsval);
        }
        if seg.payload > slot.gso_size {
            return Err(Refusal::Larger);
        }
        let head_seq = hdr::tcp(h, hl4).seq_number();
        let head_end = hl4 + thl + (slot.next_seq.wrapping_sub(head_seq) as usize);
        let new_end = head_end + seg.payload;
        // Room behind the frame once the head is in a large buffer
        // (`Pool::grow` moves a small one before the merge).
        let tailroom = if head.is_small() {
            BUF_SIZE.saturating_sub(head.headroom() + head.len())
        } else {
            head.tailroom()
        };
        // A super-packet the kernel sends whole (within the IP length
        // fields too).
        if !gso_limit::l3_fits(new_end - l3)
            || new_end > MAX_FRAME
            || seg.payload > tailroom + (head.len() - head_end.min(head.len()))
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
        let head_seq = hdr::tcp(head.data(), hl4).seq_number();
        let head_end = hl4 + thl + (slot.next_seq.wrapping_sub(head_seq) as usize);
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
            hdr::tcp_mut(h, hl4).set_tsval_at(t, v);
            slot.last_tsval = v;
        }
        if !seg.ip.v6 && slot.id_mode == IdMode::Unknown {
            let id = hdr::ip4(pkt.data(), l3).ident();
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
        hdr::tcp_mut(d, l4).set_checksum(pseudo);
        let o = &mut head.meta.offload;
        // A head that was a super-packet already keeps its segment size
        // (the egress MSS it was cut for) if that is the smaller.
        let prior = (o.gso != Gso::None && o.gso_size > 0).then_some(o.gso_size);
        o.gso = if v6 { Gso::TcpV6 } else { Gso::TcpV4 };
        o.gso_size = prior.map_or(slot.gso_size as u16, |g| g.min(slot.gso_size as u16));
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
mod tests;
