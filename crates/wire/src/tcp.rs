//! TCP segments (RFC 9293): header, flags, a bounded options parser (RFC
//! 9293 §3.1 kinds, RFC 7323 window scale and timestamps, RFC 2018 SACK),
//! pseudo-header checksum, and in-place MSS clamping with an incremental
//! checksum update.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::ipv4::protocol;
use crate::{Error, Result};

/// Flag bits of the 14th header octet.
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// Option kinds.
pub mod option_kind {
    pub const EOL: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMPS: u8 = 8;
}

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    pub const DATA_OFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WIN_SIZE: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;
/// Largest header (data offset 15).
pub const MAX_HEADER_LEN: usize = 60;
/// Offset of the checksum in the header: the `csum_offset` of a virtio-net
/// header asking for TCP checksum offload.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM.start;

/// A view of a TCP segment. TCP has no length field: the buffer is the
/// segment (the IP payload).
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The fixed header fits, data offset ≥ 5 ([`Error::BadLength`]), and
    /// the header with its options fits ([`Error::Truncated`]).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if len < hl {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        u16::from_be_bytes([self.b()[r.start], self.b()[r.start + 1]])
    }

    fn u32_at(&self, r: core::ops::Range<usize>) -> u32 {
        let b = &self.b()[r];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    pub fn seq_number(&self) -> u32 {
        self.u32_at(field::SEQ_NUM)
    }

    pub fn ack_number(&self) -> u32 {
        self.u32_at(field::ACK_NUM)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::DATA_OFF] >> 4) * 4
    }

    /// The flag octet (see [`flags`]).
    pub fn flags(&self) -> u8 {
        self.b()[field::FLAGS]
    }

    pub fn fin(&self) -> bool {
        self.flags() & flags::FIN != 0
    }

    pub fn syn(&self) -> bool {
        self.flags() & flags::SYN != 0
    }

    pub fn rst(&self) -> bool {
        self.flags() & flags::RST != 0
    }

    pub fn psh(&self) -> bool {
        self.flags() & flags::PSH != 0
    }

    pub fn ack(&self) -> bool {
        self.flags() & flags::ACK != 0
    }

    pub fn urg(&self) -> bool {
        self.flags() & flags::URG != 0
    }

    pub fn ece(&self) -> bool {
        self.flags() & flags::ECE != 0
    }

    pub fn cwr(&self) -> bool {
        self.flags() & flags::CWR != 0
    }

    pub fn window_len(&self) -> u16 {
        self.u16_at(field::WIN_SIZE)
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    pub fn urgent_at(&self) -> u16 {
        self.u16_at(field::URGENT)
    }

    /// The option bytes.
    pub fn options(&self) -> &[u8] {
        &self.b()[HEADER_LEN..self.header_len()]
    }

    /// The options, parsed.
    pub fn options_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }

    /// Sequence space the segment occupies: payload plus one for SYN and
    /// one for FIN (RFC 9293 §3.4).
    pub fn segment_len(&self) -> usize {
        self.payload().len() + usize::from(self.syn()) + usize::from(self.fin())
    }

    fn sum(&self, pseudo: u16) -> u16 {
        checksum::combine(&[pseudo, checksum::data(self.b())])
    }

    pub fn verify_checksum_v4(&self, src: &Ipv4Addr, dst: &Ipv4Addr) -> bool {
        self.sum(pseudo_v4(src, dst, self.b().len())) == 0xffff
    }

    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        self.sum(pseudo_v6(src, dst, self.b().len())) == 0xffff
    }

    /// Either family; false for mixed families.
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => self.verify_checksum_v4(s, d),
            (IpAddr::V6(s), IpAddr::V6(d)) => self.verify_checksum_v6(s, d),
            _ => false,
        }
    }

    /// Offset (from the start of the header) of the MSS option's value, if
    /// the options hold one. Malformed options are an error.
    pub fn mss_offset(&self) -> Result<Option<usize>> {
        let mut off = HEADER_LEN;
        for o in self.options_iter() {
            let (o, len) = o?;
            if let TcpOption::MaxSegmentSize(_) = o {
                return Ok(Some(off + 2));
            }
            off += len;
        }
        Ok(None)
    }

    /// The TSval of a Timestamps option (RFC 7323 §3) whose value starts
    /// `at` bytes into the header (an offset found once per flow); `None`
    /// when the header is shorter.
    pub fn tsval_at(&self, at: usize) -> Option<u32> {
        let b = self.b().get(at..at.checked_add(4)?)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

fn pseudo_v4(src: &Ipv4Addr, dst: &Ipv4Addr, len: usize) -> u16 {
    // Lengths above 16 bits cannot occur under IPv4; summing the high half
    // keeps this total anyway.
    let len = len as u32;
    checksum::combine(&[
        checksum::pseudo_header_v4(src, dst, protocol::TCP, 0),
        (len >> 16) as u16,
        len as u16,
    ])
}

fn pseudo_v6(src: &Ipv6Addr, dst: &Ipv6Addr, len: usize) -> u16 {
    checksum::pseudo_header_v6(
        src,
        dst,
        protocol::TCP,
        u32::try_from(len).unwrap_or(u32::MAX),
    )
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.bm()[r].copy_from_slice(&v.to_be_bytes());
    }

    fn set_u32(&mut self, r: core::ops::Range<usize>, v: u32) {
        self.bm()[r].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_src_port(&mut self, v: u16) {
        self.set_u16(field::SRC_PORT, v)
    }

    pub fn set_dst_port(&mut self, v: u16) {
        self.set_u16(field::DST_PORT, v)
    }

    pub fn set_seq_number(&mut self, v: u32) {
        self.set_u32(field::SEQ_NUM, v)
    }

    pub fn set_ack_number(&mut self, v: u32) {
        self.set_u32(field::ACK_NUM, v)
    }

    /// Sets the data offset for `len` header bytes (a multiple of 4, ≤ 60);
    /// clears the reserved bits.
    pub fn set_header_len(&mut self, len: usize) {
        self.bm()[field::DATA_OFF] = ((len / 4) as u8 & 0x0f) << 4;
    }

    pub fn set_flags(&mut self, f: u8) {
        self.bm()[field::FLAGS] = f;
    }

    /// Writes the TSval at `at` (see [`Packet::tsval_at`]); false, writing
    /// nothing, when the header is shorter.
    pub fn set_tsval_at(&mut self, at: usize, v: u32) -> bool {
        let Some(b) = at.checked_add(4).and_then(|end| self.bm().get_mut(at..end)) else {
            return false;
        };
        b.copy_from_slice(&v.to_be_bytes());
        true
    }

    pub fn set_window_len(&mut self, v: u16) {
        self.set_u16(field::WIN_SIZE, v)
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16(field::CHECKSUM, v)
    }

    pub fn set_urgent_at(&mut self, v: u16) {
        self.set_u16(field::URGENT, v)
    }

    fn fill_with_pseudo(&mut self, pseudo: u16) {
        self.set_checksum(0);
        let c = !self.sum(pseudo);
        self.set_checksum(c);
    }

    /// Computes the checksum over the pseudo-header and the whole buffer.
    pub fn fill_checksum_v4(&mut self, src: &Ipv4Addr, dst: &Ipv4Addr) {
        let ph = pseudo_v4(src, dst, self.b().len());
        self.fill_with_pseudo(ph)
    }

    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let ph = pseudo_v6(src, dst, self.b().len());
        self.fill_with_pseudo(ph)
    }

    /// Either family; [`Error::Malformed`] for mixed families.
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) -> Result<()> {
        let ph = self.pseudo(src, dst)?;
        self.fill_with_pseudo(ph);
        Ok(())
    }

    fn pseudo(&self, src: &IpAddr, dst: &IpAddr) -> Result<u16> {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Ok(pseudo_v4(s, d, self.b().len())),
            (IpAddr::V6(s), IpAddr::V6(d)) => Ok(pseudo_v6(s, d, self.b().len())),
            _ => Err(Error::Malformed),
        }
    }

    /// Prepares checksum offload (virtio-net `NEEDS_CSUM`, Linux
    /// `CHECKSUM_PARTIAL`): stores the folded, uncomplemented pseudo-header
    /// sum for the current buffer length.
    pub fn set_partial_checksum(&mut self, src: &IpAddr, dst: &IpAddr) -> Result<()> {
        let ph = self.pseudo(src, dst)?;
        self.set_checksum(ph);
        Ok(())
    }

    /// MSS clamping: if this is a SYN whose MSS option exceeds `max_mss`,
    /// rewrites it to `max_mss` in place and returns the old value.
    ///
    /// With `update_checksum` the checksum is updated incrementally (RFC
    /// 1624; an option at an odd offset updates the two words it straddles).
    /// Pass false for a segment whose checksum field holds a partial
    /// (pseudo-header) sum for offload: that sum does not cover the options.
    pub fn clamp_mss(&mut self, max_mss: u16, update_checksum: bool) -> Result<Option<u16>> {
        if !self.syn() {
            return Ok(None);
        }
        let Some(off) = self.mss_offset()? else {
            return Ok(None);
        };
        let b = self.b();
        let old = u16::from_be_bytes([b[off], b[off + 1]]);
        if old <= max_mss {
            return Ok(None);
        }
        // Word-aligned span covering the two value bytes.
        let start = off & !1;
        let end = (off + 3) & !1;
        let mut before = [0u8; 4];
        before[..end - start].copy_from_slice(&self.b()[start..end]);
        self.bm()[off..off + 2].copy_from_slice(&max_mss.to_be_bytes());
        if update_checksum {
            let mut after = [0u8; 4];
            after[..end - start].copy_from_slice(&self.b()[start..end]);
            let c = checksum::update_bytes(
                self.checksum(),
                &before[..end - start],
                &after[..end - start],
            );
            self.set_checksum(c);
        }
        Ok(Some(old))
    }

    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.bm()[HEADER_LEN..hl]
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.bm()[hl..]
    }
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    EndOfList,
    NoOperation,
    MaxSegmentSize(u16),
    WindowScale(u8),
    SackPermitted,
    /// Up to four (left, right) edges (RFC 2018 §3).
    SackRange([Option<(u32, u32)>; 4]),
    Timestamps {
        tsval: u32,
        tsecr: u32,
    },
    Unknown {
        kind: u8,
        data: &'a [u8],
    },
}

/// Iterator over an options area, yielding each option with the number of
/// bytes it takes. Ends after EOL. A missing length byte, a length below 2
/// or past the area, or a known option with the wrong length (RFC 9293
/// §3.1, RFC 7323, RFC 2018) yields `Err(Malformed)` once and ends the
/// iteration. At most 40 bytes, so bounded.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    rest: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    pub fn new(options: &'a [u8]) -> TcpOptions<'a> {
        TcpOptions { rest: options }
    }

    fn parse_one(&mut self) -> Result<(TcpOption<'a>, usize)> {
        let kind = self.rest[0];
        match kind {
            option_kind::EOL => {
                self.rest = &[];
                return Ok((TcpOption::EndOfList, 1));
            }
            option_kind::NOP => {
                self.rest = &self.rest[1..];
                return Ok((TcpOption::NoOperation, 1));
            }
            _ => {}
        }
        let len = usize::from(*self.rest.get(1).ok_or(Error::Malformed)?);
        if len < 2 || len > self.rest.len() {
            return Err(Error::Malformed);
        }
        let data = &self.rest[2..len];
        self.rest = &self.rest[len..];
        let u32_at =
            |o: usize| u32::from_be_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
        let opt = match (kind, len) {
            (option_kind::MSS, 4) => {
                TcpOption::MaxSegmentSize(u16::from_be_bytes([data[0], data[1]]))
            }
            (option_kind::WINDOW_SCALE, 3) => TcpOption::WindowScale(data[0]),
            (option_kind::SACK_PERMITTED, 2) => TcpOption::SackPermitted,
            (option_kind::TIMESTAMPS, 10) => TcpOption::Timestamps {
                tsval: u32_at(0),
                tsecr: u32_at(4),
            },
            (option_kind::SACK, 10 | 18 | 26 | 34) => {
                let mut r = [None; 4];
                for (i, slot) in r.iter_mut().enumerate().take((len - 2) / 8) {
                    *slot = Some((u32_at(i * 8), u32_at(i * 8 + 4)));
                }
                TcpOption::SackRange(r)
            }
            (
                option_kind::MSS
                | option_kind::WINDOW_SCALE
                | option_kind::SACK_PERMITTED
                | option_kind::TIMESTAMPS
                | option_kind::SACK,
                _,
            ) => return Err(Error::Malformed),
            _ => TcpOption::Unknown { kind, data },
        };
        Ok((opt, len))
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<(TcpOption<'a>, usize)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = self.parse_one();
        if r.is_err() {
            self.rest = &[];
        }
        Some(r)
    }
}

/// A parsed TCP header (options vecgate cares about; unknown ones skipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq_number: u32,
    /// Present iff the ACK flag is set.
    pub ack_number: Option<u32>,
    /// Flag octet; the ACK bit follows `ack_number` on emit.
    pub flags: u8,
    pub window_len: u16,
    pub urgent_at: u16,
    pub max_seg_size: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    pub sack_ranges: [Option<(u32, u32)>; 3],
    pub timestamp: Option<(u32, u32)>,
    pub payload_len: usize,
}

impl TcpRepr {
    /// Parses a segment whose checksum verifies for `src`/`dst` and whose
    /// options are well-formed.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        p: &Packet<&T>,
        src: &IpAddr,
        dst: &IpAddr,
    ) -> Result<TcpRepr> {
        p.check_len()?;
        if !p.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        let mut r = TcpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq_number: p.seq_number(),
            ack_number: p.ack().then(|| p.ack_number()),
            flags: p.flags(),
            window_len: p.window_len(),
            urgent_at: p.urgent_at(),
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload_len: p.payload().len(),
        };
        for o in p.options_iter() {
            match o?.0 {
                TcpOption::MaxSegmentSize(m) => r.max_seg_size = Some(m),
                TcpOption::WindowScale(w) => r.window_scale = Some(w),
                TcpOption::SackPermitted => r.sack_permitted = true,
                TcpOption::Timestamps { tsval, tsecr } => r.timestamp = Some((tsval, tsecr)),
                TcpOption::SackRange(s) => {
                    r.sack_ranges.copy_from_slice(&s[..3]);
                }
                _ => {}
            }
        }
        Ok(r)
    }

    fn options_len(&self) -> usize {
        let sacks = self.sack_ranges.iter().flatten().count();
        4 * usize::from(self.max_seg_size.is_some())
            + if self.timestamp.is_some() {
                12
            } else {
                4 * usize::from(self.sack_permitted)
            }
            + 4 * usize::from(self.window_scale.is_some())
            + if sacks > 0 { 4 + 8 * sacks } else { 0 }
    }

    /// Header length with options, padded to 4 bytes (may exceed 60 for an
    /// impossible option set: `emit` refuses it).
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options_len()
    }

    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Writes the header and options (zero checksum) into a view that spans
    /// exactly the segment (header + `payload_len`). Options go in Linux's
    /// order: MSS, SACK-permitted+timestamps, window scale, SACK blocks.
    pub fn emit_header<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(
        &self,
        p: &mut Packet<&mut T>,
    ) -> Result<()> {
        let hl = self.header_len();
        if hl > MAX_HEADER_LEN {
            return Err(Error::BadLength);
        }
        if p.buffer.as_ref().len() < hl {
            return Err(Error::Truncated);
        }
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq_number(self.seq_number);
        p.set_ack_number(self.ack_number.unwrap_or(0));
        p.set_header_len(hl);
        let f = if self.ack_number.is_some() {
            self.flags | flags::ACK
        } else {
            self.flags & !flags::ACK
        };
        p.set_flags(f);
        p.set_window_len(self.window_len);
        p.set_checksum(0);
        p.set_urgent_at(self.urgent_at);
        let o = &mut p.bm()[HEADER_LEN..hl];
        let mut i = 0;
        let mut put = |bytes: &[u8]| {
            o[i..i + bytes.len()].copy_from_slice(bytes);
            i += bytes.len();
        };
        if let Some(m) = self.max_seg_size {
            let m = m.to_be_bytes();
            put(&[option_kind::MSS, 4, m[0], m[1]]);
        }
        match (self.sack_permitted, self.timestamp) {
            (sp, Some((v, e))) => {
                if sp {
                    put(&[option_kind::SACK_PERMITTED, 2]);
                } else {
                    put(&[option_kind::NOP, option_kind::NOP]);
                }
                put(&[option_kind::TIMESTAMPS, 10]);
                put(&v.to_be_bytes());
                put(&e.to_be_bytes());
            }
            (true, None) => put(&[
                option_kind::NOP,
                option_kind::NOP,
                option_kind::SACK_PERMITTED,
                2,
            ]),
            (false, None) => {}
        }
        if let Some(w) = self.window_scale {
            put(&[option_kind::NOP, option_kind::WINDOW_SCALE, 3, w]);
        }
        let sacks = self.sack_ranges.iter().flatten().count();
        if sacks > 0 {
            put(&[
                option_kind::NOP,
                option_kind::NOP,
                option_kind::SACK,
                (2 + 8 * sacks) as u8,
            ]);
            for (l, r) in self.sack_ranges.iter().flatten() {
                put(&l.to_be_bytes());
                put(&r.to_be_bytes());
            }
        }
        Ok(())
    }

    /// Writes header, options and `payload` (length must equal
    /// `payload_len`), then the checksum. The view must span exactly
    /// [`buffer_len`](Self::buffer_len) bytes, since TCP's checksum covers
    /// the whole buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(
        &self,
        p: &mut Packet<&mut T>,
        src: &IpAddr,
        dst: &IpAddr,
        payload: &[u8],
    ) -> Result<()> {
        if payload.len() != self.payload_len || p.buffer.as_ref().len() != self.buffer_len() {
            return Err(Error::BadLength);
        }
        self.emit_header(p)?;
        p.payload_mut().copy_from_slice(payload);
        p.fill_checksum(src, dst)
    }
}

#[cfg(test)]
mod tests;
