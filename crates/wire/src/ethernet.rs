//! Ethernet II frames (IEEE 802.3 with an EtherType), with up to two VLAN
//! tags: a single IEEE 802.1Q tag (TPID 0x8100) or an 802.1ad QinQ stack
//! (an S-tag, TPID 0x88a8 — or 0x8100 as older switches send — followed by
//! a C-tag). The FCS is not part of the frames vecgate sees.

use core::fmt;

use crate::{Error, Result};

/// EtherType values vecgate recognises (IEEE registry).
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const IPV6: u16 = 0x86dd;
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service VLAN tag (QinQ).
    pub const QINQ: u16 = 0x88a8;
    /// Transparent Ethernet Bridging: an Ethernet frame inside GRE/NVGRE.
    pub const TEB: u16 = 0x6558;
}

/// A 48-bit IEEE MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// From the first six bytes of `b`.
    pub fn from_bytes(b: &[u8]) -> Result<MacAddr> {
        match b.get(..6) {
            Some(s) => {
                let mut a = [0u8; 6];
                a.copy_from_slice(s);
                Ok(MacAddr(a))
            }
            None => Err(Error::Truncated),
        }
    }

    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    pub fn is_broadcast(&self) -> bool {
        self.0 == [0xff; 6]
    }

    /// Group bit (I/G, the least significant bit of the first octet); true
    /// for broadcast too.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Locally administered bit (U/L).
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(a: [u8; 6]) -> Self {
        MacAddr(a)
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl core::str::FromStr for MacAddr {
    type Err = Error;

    /// Parses `aa:bb:cc:dd:ee:ff` (or with `-`).
    fn from_str(s: &str) -> Result<MacAddr> {
        let mut a = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in a.iter_mut() {
            let p = parts.next().ok_or(Error::Malformed)?;
            if p.is_empty() || p.len() > 2 {
                return Err(Error::Malformed);
            }
            *byte = u8::from_str_radix(p, 16).map_err(|_| Error::Malformed)?;
        }
        if parts.next().is_some() {
            return Err(Error::Malformed);
        }
        Ok(MacAddr(a))
    }
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const HEADER_LEN: usize = 14;
    pub const TAG_LEN: usize = 4;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = field::HEADER_LEN;
/// Length of one VLAN tag (TPID + TCI).
pub const VLAN_TAG_LEN: usize = field::TAG_LEN;
/// Most VLAN tags a frame may carry here.
pub const MAX_VLAN_TAGS: usize = 2;

fn is_tpid(t: u16) -> bool {
    t == ethertype::VLAN || t == ethertype::QINQ
}

/// A view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Frame::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// The buffer holds the whole header, including every VLAN tag the TPIDs
    /// announce. A third stacked tag is [`Error::Unsupported`].
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let mut tags = 0;
        let mut off = field::ETHERTYPE.start;
        loop {
            let t = u16::from_be_bytes([b[off], b[off + 1]]);
            if !is_tpid(t) {
                return Ok(());
            }
            if tags == MAX_VLAN_TAGS {
                return Err(Error::Unsupported);
            }
            tags += 1;
            off += field::TAG_LEN;
            if b.len() < off + 2 {
                return Err(Error::Truncated);
            }
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, off: usize) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[off], b[off + 1]])
    }

    pub fn dst_addr(&self) -> MacAddr {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        MacAddr(a)
    }

    pub fn src_addr(&self) -> MacAddr {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        MacAddr(a)
    }

    /// The EtherType/TPID right after the addresses (0x8100 on a tagged
    /// frame).
    pub fn outer_ethertype(&self) -> u16 {
        self.u16_at(field::ETHERTYPE.start)
    }

    /// Number of VLAN tags (0, 1 or 2).
    pub fn vlan_tags(&self) -> usize {
        let mut n = 0;
        while n < MAX_VLAN_TAGS && is_tpid(self.u16_at(field::ETHERTYPE.start + n * field::TAG_LEN))
        {
            n += 1;
        }
        n
    }

    /// Header length including VLAN tags: where the payload starts.
    pub fn header_len(&self) -> usize {
        field::HEADER_LEN + self.vlan_tags() * field::TAG_LEN
    }

    /// The EtherType of the payload, after any VLAN tags.
    pub fn ethertype(&self) -> u16 {
        self.u16_at(self.header_len() - 2)
    }

    /// TCI of tag `i` (0 = outermost).
    fn tci(&self, i: usize) -> Option<u16> {
        (i < self.vlan_tags()).then(|| self.u16_at(field::HEADER_LEN + i * field::TAG_LEN))
    }

    /// VLAN ID (12 bits) of the outermost tag — the only one of a plain
    /// 802.1Q frame.
    pub fn vlan_id(&self) -> Option<u16> {
        self.tci(0).map(|t| t & 0x0fff)
    }

    /// VLAN ID of the inner (C-) tag of a QinQ frame.
    pub fn inner_vlan_id(&self) -> Option<u16> {
        self.tci(1).map(|t| t & 0x0fff)
    }

    /// Priority code point of the outermost tag.
    pub fn vlan_pcp(&self) -> Option<u8> {
        self.tci(0).map(|t| (t >> 13) as u8)
    }

    pub fn payload(&self) -> &[u8] {
        let h = self.header_len();
        &self.buffer.as_ref()[h..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dst_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }

    pub fn set_src_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }

    /// Writes the EtherType/TPID right after the addresses.
    pub fn set_outer_ethertype(&mut self, t: u16) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&t.to_be_bytes());
    }

    /// Writes the payload EtherType after the VLAN tags already present.
    pub fn set_ethertype(&mut self, t: u16) {
        let off = self.header_len() - 2;
        self.buffer.as_mut()[off..off + 2].copy_from_slice(&t.to_be_bytes());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// One VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// [`ethertype::VLAN`] or [`ethertype::QINQ`].
    pub tpid: u16,
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (12 bits).
    pub vid: u16,
}

impl VlanTag {
    /// A plain 802.1Q tag.
    pub fn dot1q(vid: u16) -> VlanTag {
        VlanTag {
            tpid: ethertype::VLAN,
            pcp: 0,
            dei: false,
            vid,
        }
    }

    fn tci(&self) -> u16 {
        (u16::from(self.pcp & 7) << 13) | (u16::from(self.dei) << 12) | (self.vid & 0x0fff)
    }

    fn from_tci(tpid: u16, tci: u16) -> VlanTag {
        VlanTag {
            tpid,
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }
}

/// A parsed Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    pub src_addr: MacAddr,
    pub dst_addr: MacAddr,
    /// Outermost tag (the only one for 802.1Q).
    pub vlan: Option<VlanTag>,
    /// Inner C-tag of a QinQ frame; only emitted when `vlan` is set.
    pub inner_vlan: Option<VlanTag>,
    /// EtherType of the payload.
    pub ethertype: u16,
}

impl EthernetRepr {
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        let tag = |i: usize| {
            (i < frame.vlan_tags()).then(|| {
                let off = field::ETHERTYPE.start + i * field::TAG_LEN;
                VlanTag::from_tci(frame.u16_at(off), frame.u16_at(off + 2))
            })
        };
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            vlan: tag(0),
            inner_vlan: tag(1),
            ethertype: frame.ethertype(),
        })
    }

    pub fn header_len(&self) -> usize {
        let tags = match (self.vlan, self.inner_vlan) {
            (None, _) => 0,
            (Some(_), None) => 1,
            (Some(_), Some(_)) => 2,
        };
        field::HEADER_LEN + tags * field::TAG_LEN
    }

    /// Header length; the payload follows it.
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len
    }

    /// Writes the header; the buffer must hold at least
    /// [`header_len`](Self::header_len) bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, frame: &mut Frame<&mut T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        let b = frame.buffer.as_mut();
        let mut off = field::ETHERTYPE.start;
        let tags = [self.vlan, self.vlan.and(self.inner_vlan)];
        for t in tags.iter().flatten() {
            b[off..off + 2].copy_from_slice(&t.tpid.to_be_bytes());
            b[off + 2..off + 4].copy_from_slice(&t.tci().to_be_bytes());
            off += field::TAG_LEN;
        }
        b[off..off + 2].copy_from_slice(&self.ethertype.to_be_bytes());
    }
}

/// The EtherType announcing the header at `l3` of an Ethernet frame: the
/// two bytes right before it (after any VLAN tags). `None` when `l3` leaves
/// no room for them.
pub fn ethertype_before(frame: &[u8], l3: usize) -> Option<u16> {
    let b = frame.get(l3.checked_sub(2)?..l3)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ethertype_before_reads_the_two_bytes_before_l3() {
        let mut f = [0u8; 18];
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f[16..18].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(super::ethertype_before(&f, 18), Some(0x86dd));
        assert_eq!(super::ethertype_before(&f, 14), Some(0x8100));
        assert_eq!(super::ethertype_before(&f, 1), None);
        assert_eq!(super::ethertype_before(&f, 19), None);
    }

    use super::*;

    // ff:ff:ff:ff:ff:ff <- 52:54:00:12:34:56, IPv4, 4 payload bytes.
    const UNTAGGED: [u8; 18] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x00, 0xaa,
        0xbb, 0xcc, 0xdd,
    ];
    // Same, 802.1Q VLAN 100 with PCP 5, carrying IPv6.
    const TAGGED: [u8; 20] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x81, 0x00, 0xa0,
        0x64, 0x86, 0xdd, 0x60, 0x00,
    ];
    // QinQ: S-tag 0x88a8 VID 10, C-tag 0x8100 VID 20, ARP.
    const QINQ: [u8; 23] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x88, 0xa8, 0x00,
        0x0a, 0x81, 0x00, 0x00, 0x14, 0x08, 0x06, 0x00,
    ];

    #[test]
    fn deconstruct_untagged() {
        let f = Frame::new_checked(&UNTAGGED[..]).unwrap();
        assert!(f.dst_addr().is_broadcast());
        assert_eq!(f.src_addr(), MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]));
        assert_eq!(f.ethertype(), ethertype::IPV4);
        assert_eq!(f.header_len(), 14);
        assert_eq!(f.vlan_id(), None);
        assert_eq!(f.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn deconstruct_tagged() {
        let f = Frame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(f.outer_ethertype(), ethertype::VLAN);
        assert_eq!(f.ethertype(), ethertype::IPV6);
        assert_eq!(f.vlan_id(), Some(100));
        assert_eq!(f.vlan_pcp(), Some(5));
        assert_eq!(f.inner_vlan_id(), None);
        assert_eq!(f.header_len(), 18);
        assert_eq!(f.payload(), &[0x60, 0x00]);
    }

    #[test]
    fn deconstruct_qinq() {
        let f = Frame::new_checked(&QINQ[..]).unwrap();
        assert_eq!(f.vlan_tags(), 2);
        assert_eq!(f.vlan_id(), Some(10));
        assert_eq!(f.inner_vlan_id(), Some(20));
        assert_eq!(f.ethertype(), ethertype::ARP);
        assert_eq!(f.header_len(), 22);
    }

    #[test]
    fn parse_emit_roundtrip() {
        for bytes in [&UNTAGGED[..], &TAGGED[..], &QINQ[..]] {
            let f = Frame::new_checked(bytes).unwrap();
            let r = EthernetRepr::parse(&f).unwrap();
            assert_eq!(r.header_len(), f.header_len());
            let mut out = vec![0u8; bytes.len()];
            let h = r.header_len();
            out[h..].copy_from_slice(&bytes[h..]);
            r.emit(&mut Frame::new_unchecked(&mut out[..]));
            assert_eq!(&out[..], bytes);
        }
    }

    #[test]
    fn construct() {
        let mut b = [0u8; 16];
        let mut f = Frame::new_unchecked(&mut b[..]);
        f.set_dst_addr(MacAddr::BROADCAST);
        f.set_src_addr(MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]));
        f.set_ethertype(ethertype::ARP);
        f.payload_mut().copy_from_slice(&[1, 2]);
        assert_eq!(
            &b[..14],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0, 0x12, 0x34, 0x56, 8, 6]
        );
        assert_eq!(&b[14..], &[1, 2]);
    }

    #[test]
    fn truncations_are_errors() {
        for bytes in [&UNTAGGED[..], &TAGGED[..], &QINQ[..]] {
            let f = Frame::new_checked(bytes).unwrap();
            for n in 0..f.header_len() {
                assert_eq!(
                    Frame::new_checked(&bytes[..n]).err(),
                    Some(Error::Truncated),
                    "{n}"
                );
            }
        }
    }

    #[test]
    fn three_tags_unsupported() {
        let mut b = QINQ.to_vec();
        b[20] = 0x81;
        b[21] = 0x00;
        b.extend_from_slice(&[0, 5, 8, 0]);
        assert_eq!(Frame::new_checked(&b[..]).err(), Some(Error::Unsupported));
    }

    #[test]
    fn mac_display_parse() {
        let m = MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0xab]);
        assert_eq!(m.to_string(), "52:54:00:12:34:ab");
        assert_eq!("52:54:00:12:34:ab".parse::<MacAddr>(), Ok(m));
        assert!("52:54:00:12:34".parse::<MacAddr>().is_err());
        assert!("52:54:00:12:34:ab:cd".parse::<MacAddr>().is_err());
        assert!(MacAddr([0x33, 0x33, 0, 0, 0, 1]).is_multicast());
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(m.is_unicast() && m.is_local()); // 0x52: U/L bit set (QEMU range)
        assert!(!MacAddr([0x00, 0x1b, 0x21, 1, 2, 3]).is_local());
    }
}
