//! The Linux `struct virtio_net_hdr` (include/uapi/linux/virtio_net.h) that
//! TUN/TAP (`IFF_VNET_HDR`) and AF_PACKET (`PACKET_VNET_HDR`) put in front of
//! every frame to carry checksum and segmentation offload state.
//!
//! Fields are in the *native* byte order: these interfaces use the legacy
//! virtio layout unless told otherwise (`TUNSETVNETLE`), which on the
//! little-endian machines vecgate runs on is little-endian. Conversion to
//! the packets' `Offload` lives in `vecgate-io` (`io/src/vnet.rs`; wire
//! depends on nothing).

use crate::{Error, Result};

/// Flag: the checksum from `csum_start` must still be computed and stored
/// at `csum_start + csum_offset` (`VIRTIO_NET_HDR_F_NEEDS_CSUM`).
pub const F_NEEDS_CSUM: u8 = 1;
/// Flag: the checksum was already verified (`VIRTIO_NET_HDR_F_DATA_VALID`).
pub const F_DATA_VALID: u8 = 2;

/// `VIRTIO_NET_HDR_GSO_*` values.
pub mod gso {
    pub const NONE: u8 = 0;
    pub const TCPV4: u8 = 1;
    /// UFO (UDP fragmentation offload), obsolete.
    pub const UDP: u8 = 3;
    pub const TCPV6: u8 = 4;
    /// UDP segmentation (USO), kernel 6.2+.
    pub const UDP_L4: u8 = 5;
    /// Bit or'ed into the type: the segments carry ECN CWR handling.
    pub const ECN: u8 = 0x80;
}

mod field {
    use core::ops::Range;
    pub const FLAGS: usize = 0;
    pub const GSO_TYPE: usize = 1;
    pub const HDR_LEN: Range<usize> = 2..4;
    pub const GSO_SIZE: Range<usize> = 4..6;
    pub const CSUM_START: Range<usize> = 6..8;
    pub const CSUM_OFFSET: Range<usize> = 8..10;
    pub const NUM_BUFFERS: Range<usize> = 10..12;
}

/// Size of `struct virtio_net_hdr`.
pub const HEADER_LEN: usize = 10;
/// Size of `struct virtio_net_hdr_mrg_rxbuf` (with `num_buffers`).
pub const HEADER_LEN_MRG: usize = 12;

/// A view of a virtio-net header (the first 10 bytes of the buffer; the
/// frame follows, at [`HEADER_LEN`] or [`HEADER_LEN_MRG`] per the
/// interface's configured header size).
#[derive(Debug, Clone)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    pub const fn new_unchecked(buffer: T) -> Header<T> {
        Header { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Header<T>> {
        let h = Header::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_ne_bytes([b[r.start], b[r.start + 1]])
    }

    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The raw type, ECN bit included.
    pub fn gso_type(&self) -> u8 {
        self.buffer.as_ref()[field::GSO_TYPE]
    }

    pub fn hdr_len(&self) -> u16 {
        self.u16_at(field::HDR_LEN)
    }

    pub fn gso_size(&self) -> u16 {
        self.u16_at(field::GSO_SIZE)
    }

    pub fn csum_start(&self) -> u16 {
        self.u16_at(field::CSUM_START)
    }

    pub fn csum_offset(&self) -> u16 {
        self.u16_at(field::CSUM_OFFSET)
    }

    /// `num_buffers` of the 12-byte layout, if the buffer has it.
    pub fn num_buffers(&self) -> Option<u16> {
        (self.buffer.as_ref().len() >= HEADER_LEN_MRG).then(|| self.u16_at(field::NUM_BUFFERS))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_ne_bytes());
    }

    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::FLAGS] = v;
    }

    pub fn set_gso_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::GSO_TYPE] = v;
    }

    pub fn set_hdr_len(&mut self, v: u16) {
        self.set_u16(field::HDR_LEN, v)
    }

    pub fn set_gso_size(&mut self, v: u16) {
        self.set_u16(field::GSO_SIZE, v)
    }

    pub fn set_csum_start(&mut self, v: u16) {
        self.set_u16(field::CSUM_START, v)
    }

    pub fn set_csum_offset(&mut self, v: u16) {
        self.set_u16(field::CSUM_OFFSET, v)
    }

    /// Zeroes the header: "no offload", what a plain frame carries.
    pub fn clear(&mut self) {
        self.buffer.as_mut()[..HEADER_LEN].fill(0);
    }
}

/// Segmentation kind, without the ECN bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GsoType {
    #[default]
    None,
    TcpV4,
    /// UFO: accepted on parse for completeness; vecgate never emits it.
    Udp,
    TcpV6,
    UdpL4,
}

impl GsoType {
    fn from_raw(v: u8) -> Result<GsoType> {
        Ok(match v & !gso::ECN {
            gso::NONE => GsoType::None,
            gso::TCPV4 => GsoType::TcpV4,
            gso::UDP => GsoType::Udp,
            gso::TCPV6 => GsoType::TcpV6,
            gso::UDP_L4 => GsoType::UdpL4,
            _ => return Err(Error::Unsupported),
        })
    }

    fn raw(self) -> u8 {
        match self {
            GsoType::None => gso::NONE,
            GsoType::TcpV4 => gso::TCPV4,
            GsoType::Udp => gso::UDP,
            GsoType::TcpV6 => gso::TCPV6,
            GsoType::UdpL4 => gso::UDP_L4,
        }
    }
}

/// A parsed virtio-net header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VnetRepr {
    pub needs_csum: bool,
    pub data_valid: bool,
    pub gso_type: GsoType,
    pub ecn: bool,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetRepr {
    /// Parses the header. An unknown GSO type is [`Error::Unsupported`]; a
    /// GSO type other than none with a zero `gso_size`, or ECN without GSO,
    /// is [`Error::Malformed`]. Unknown flag bits are ignored, as the kernel
    /// does.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(h: &Header<&T>) -> Result<VnetRepr> {
        h.check_len()?;
        let raw = h.gso_type();
        let gso_type = GsoType::from_raw(raw)?;
        let ecn = raw & gso::ECN != 0;
        if (gso_type != GsoType::None && h.gso_size() == 0) || (gso_type == GsoType::None && ecn) {
            return Err(Error::Malformed);
        }
        Ok(VnetRepr {
            needs_csum: h.flags() & F_NEEDS_CSUM != 0,
            data_valid: h.flags() & F_DATA_VALID != 0,
            gso_type,
            ecn,
            hdr_len: h.hdr_len(),
            gso_size: h.gso_size(),
            csum_start: h.csum_start(),
            csum_offset: h.csum_offset(),
        })
    }

    /// Checks the offsets against the frame that follows the header: the
    /// checksum field (`csum_start + csum_offset`, 2 bytes) lies inside a
    /// `frame_len`-byte frame when `needs_csum`, and `hdr_len` does not
    /// exceed it. Backends call this before trusting kernel-provided
    /// offsets in the dataplane.
    pub fn check_frame(&self, frame_len: usize) -> Result<()> {
        if self.needs_csum {
            let end = usize::from(self.csum_start) + usize::from(self.csum_offset) + 2;
            if end > frame_len {
                return Err(Error::BadLength);
            }
        }
        if usize::from(self.hdr_len) > frame_len {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 10 bytes (a 12-byte buffer's `num_buffers` is left alone).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, h: &mut Header<&mut T>) {
        let mut flags = 0;
        if self.needs_csum {
            flags |= F_NEEDS_CSUM;
        }
        if self.data_valid {
            flags |= F_DATA_VALID;
        }
        h.set_flags(flags);
        h.set_gso_type(self.gso_type.raw() | if self.ecn { gso::ECN } else { 0 });
        h.set_hdr_len(self.hdr_len);
        h.set_gso_size(self.gso_size);
        h.set_csum_start(self.csum_start);
        h.set_csum_offset(self.csum_offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TSO super-packet header as TUN hands it over: NEEDS_CSUM, TCPV4,
    /// hdr_len 66 (14 + 20 + 32), gso_size 1448, csum_start 34 (Ethernet +
    /// IPv4), csum_offset 16 (TCP checksum).
    fn tso() -> [u8; 10] {
        let mut b = [0u8; 10];
        b[0] = 1;
        b[1] = 1;
        b[2..4].copy_from_slice(&66u16.to_ne_bytes());
        b[4..6].copy_from_slice(&1448u16.to_ne_bytes());
        b[6..8].copy_from_slice(&34u16.to_ne_bytes());
        b[8..10].copy_from_slice(&16u16.to_ne_bytes());
        b
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn byte_exact_little_endian() {
        assert_eq!(
            tso(),
            [0x01, 0x01, 0x42, 0x00, 0xa8, 0x05, 0x22, 0x00, 0x10, 0x00]
        );
    }

    #[test]
    fn parse_emit() {
        let b = tso();
        let h = Header::new_checked(&b[..]).unwrap();
        let r = VnetRepr::parse(&h).unwrap();
        assert_eq!(
            r,
            VnetRepr {
                needs_csum: true,
                data_valid: false,
                gso_type: GsoType::TcpV4,
                ecn: false,
                hdr_len: 66,
                gso_size: 1448,
                csum_start: 34,
                csum_offset: 16,
            }
        );
        assert_eq!(h.num_buffers(), None);
        let mut out = [0xffu8; 12];
        r.emit(&mut Header::new_unchecked(&mut out[..]));
        assert_eq!(&out[..10], &b[..]);
        assert_eq!(
            Header::new_checked(&out[..]).unwrap().num_buffers(),
            Some(0xffff)
        );
        assert_eq!(r.check_frame(65_000), Ok(()));
        assert_eq!(r.check_frame(51), Err(Error::BadLength));
        assert_eq!(r.check_frame(52), Err(Error::BadLength)); // hdr_len 66
        assert_eq!(VnetRepr { hdr_len: 0, ..r }.check_frame(52), Ok(()));
    }

    #[test]
    fn every_gso_type_and_ecn() {
        for (raw, t) in [
            (gso::NONE, GsoType::None),
            (gso::TCPV4, GsoType::TcpV4),
            (gso::UDP, GsoType::Udp),
            (gso::TCPV6, GsoType::TcpV6),
            (gso::UDP_L4, GsoType::UdpL4),
        ] {
            let mut b = tso();
            b[1] = raw;
            let r = VnetRepr::parse(&Header::new_checked(&b[..]).unwrap()).unwrap();
            assert_eq!(r.gso_type, t);
            let mut out = [0u8; 10];
            r.emit(&mut Header::new_unchecked(&mut out[..]));
            assert_eq!(out, b);
        }
        let mut b = tso();
        b[1] = gso::TCPV6 | gso::ECN;
        let r = VnetRepr::parse(&Header::new_checked(&b[..]).unwrap()).unwrap();
        assert!(r.ecn && r.gso_type == GsoType::TcpV6);
    }

    #[test]
    fn malformed() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Header::new_checked(&tso()[..n]).err(),
                Some(Error::Truncated)
            );
        }
        let mut b = tso();
        b[1] = 2;
        assert_eq!(
            VnetRepr::parse(&Header::new_checked(&b[..]).unwrap()),
            Err(Error::Unsupported)
        );
        let mut b = tso();
        b[4] = 0;
        b[5] = 0;
        assert_eq!(
            VnetRepr::parse(&Header::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed)
        );
        let mut b = [0u8; 10];
        b[1] = gso::ECN;
        assert_eq!(
            VnetRepr::parse(&Header::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed)
        );
        // All zeroes: a plain frame.
        let r = VnetRepr::parse(&Header::new_checked(&[0u8; 10][..]).unwrap()).unwrap();
        assert_eq!(r, VnetRepr::default());
    }
}
