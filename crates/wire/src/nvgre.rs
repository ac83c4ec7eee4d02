//! NVGRE: Network Virtualization using GRE, RFC 7637.
//!
//! An NVGRE header is a GRE header with only K set, protocol 0x6558 and the
//! key split into a 24-bit Virtual Subnet ID and an 8-bit FlowID (§3.2):
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |0| |1|0|   Reserved0     | Ver |   Protocol Type 0x6558        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |               Virtual Subnet ID (VSID)        |    FlowID     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The payload is an Ethernet frame without FCS.

use crate::gre::{Gre, Protocol};
use crate::{Error, Result};

/// NVGRE header length.
pub const HEADER_LEN: usize = 8;
/// Protocol type NVGRE requires (Transparent Ethernet Bridging).
pub const PROTOCOL: u16 = 0x6558;
/// Largest VSID value (24 bits).
pub const VSID_MAX: u32 = 0x00ff_ffff;

mod field {
    pub const FLAGS: usize = 0;
    pub const VER: usize = 1;
    pub const PROTOCOL: core::ops::Range<usize> = 2..4;
    pub const VSID: core::ops::Range<usize> = 4..7;
    pub const FLOW_ID: usize = 7;

    /// C, K and S bits of the first byte.
    pub const CKS_MASK: u8 = 0xb0;
    /// Only K set.
    pub const K_ONLY: u8 = 0x20;
}

/// True for VSIDs RFC 7637 §3.2 reserves: 0x0-0xFFF ("reserved for future
/// use") and 0xFFFFFF ("reserved for vendor-specific NVE-to-NVE
/// communication"). The parser accepts them; the gateway decides.
pub const fn vsid_is_reserved(vsid: u32) -> bool {
    vsid <= 0xfff || vsid == VSID_MAX
}

/// A read/write view of an NVGRE packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nvgre<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Nvgre<T> {
    /// Wraps a buffer without any check.
    pub const fn new_unchecked(buffer: T) -> Self {
        Nvgre { buffer }
    }

    /// Wraps a buffer after the GRE checks of
    /// [`Gre::check_len`](crate::gre::Gre::check_len) and the NVGRE rules of
    /// RFC 7637 §3.2: C and S MUST be zero and K MUST be one, and the
    /// protocol type MUST be 0x6558 ([`Error::Malformed`] otherwise).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The validation done by [`Nvgre::new_checked`].
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        Gre::new_unchecked(b).check_len()?;
        if b[field::FLAGS] & field::CKS_MASK != field::K_ONLY {
            return Err(Error::Malformed);
        }
        if self.protocol_type() != PROTOCOL {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Raw protocol type (0x6558 after `new_checked`).
    #[inline]
    pub fn protocol_type(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::PROTOCOL.start], b[field::PROTOCOL.start + 1]])
    }

    /// The whole 32-bit GRE key: `vsid << 8 | flow_id`.
    #[inline]
    pub fn key(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }

    /// 24-bit Virtual Subnet ID.
    #[inline]
    pub fn vsid(&self) -> u32 {
        self.key() >> 8
    }

    /// 8-bit FlowID (per-flow entropy, §3.2).
    #[inline]
    pub fn flow_id(&self) -> u8 {
        self.buffer.as_ref()[field::FLOW_ID]
    }

    /// The inner Ethernet frame.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Nvgre<T> {
    /// Writes the fixed part: only K set, version 0, protocol 0x6558.
    #[inline]
    pub fn set_fixed(&mut self) {
        let b = self.buffer.as_mut();
        b[field::FLAGS] = field::K_ONLY;
        b[field::VER] = 0;
        b[field::PROTOCOL].copy_from_slice(&PROTOCOL.to_be_bytes());
    }

    /// Writes the VSID (the low 24 bits of `vsid`).
    #[inline]
    pub fn set_vsid(&mut self, vsid: u32) {
        let v = vsid.to_be_bytes();
        self.buffer.as_mut()[field::VSID].copy_from_slice(&v[1..4]);
    }

    /// Writes the FlowID.
    #[inline]
    pub fn set_flow_id(&mut self, flow_id: u8) {
        self.buffer.as_mut()[field::FLOW_ID] = flow_id;
    }

    /// The inner Ethernet frame, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// An NVGRE header in plain form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NvgreRepr {
    /// Virtual Subnet ID, 24 bits.
    pub vsid: u32,
    /// FlowID.
    pub flow_id: u8,
}

impl NvgreRepr {
    /// Parses a view (re-checking it).
    pub fn parse<T: AsRef<[u8]>>(p: &Nvgre<T>) -> Result<Self> {
        p.check_len()?;
        Ok(NvgreRepr {
            vsid: p.vsid(),
            flow_id: p.flow_id(),
        })
    }

    /// Always [`HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// True when the VSID is reserved (see [`vsid_is_reserved`]).
    pub const fn vsid_is_reserved(&self) -> bool {
        vsid_is_reserved(self.vsid)
    }

    /// The equivalent plain GRE header.
    pub const fn to_gre(&self) -> crate::gre::GreRepr {
        crate::gre::GreRepr {
            checksum: false,
            key: Some((self.vsid << 8) | self.flow_id as u32),
            seq: None,
            protocol: Protocol::TransparentEthernet,
        }
    }

    /// Writes the 8-byte header at the front of `p`.
    ///
    /// [`Error::Malformed`] if the VSID does not fit 24 bits,
    /// [`Error::Truncated`] if `p` is shorter than the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Nvgre<T>) -> Result<()> {
        if self.vsid > VSID_MAX {
            return Err(Error::Malformed);
        }
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        p.set_fixed();
        p.set_vsid(self.vsid);
        p.set_flow_id(self.flow_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gre::GreRepr;

    /// VSID 0x123456, FlowID 0x9a, payload "xy".
    static PKT: [u8; 10] = [0x20, 0x00, 0x65, 0x58, 0x12, 0x34, 0x56, 0x9a, b'x', b'y'];

    #[test]
    fn deconstruct() {
        let p = Nvgre::new_checked(&PKT[..]).unwrap();
        assert_eq!(p.vsid(), 0x12_3456);
        assert_eq!(p.flow_id(), 0x9a);
        assert_eq!(p.key(), 0x1234_569a);
        assert_eq!(p.payload(), b"xy");
        let r = NvgreRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            NvgreRepr {
                vsid: 0x12_3456,
                flow_id: 0x9a
            }
        );
        assert!(!r.vsid_is_reserved());
        // Also a valid GRE packet with the same key.
        let g = Gre::new_checked(&PKT[..]).unwrap();
        assert_eq!(GreRepr::parse(&g).unwrap(), r.to_gre());
    }

    #[test]
    fn construct() {
        let mut b = [0xffu8; 10];
        b[8..].copy_from_slice(b"xy");
        NvgreRepr {
            vsid: 0x12_3456,
            flow_id: 0x9a,
        }
        .emit(&mut Nvgre::new_unchecked(&mut b[..]))
        .unwrap();
        assert_eq!(b, PKT);
        // Same bytes through the GRE emitter.
        let mut g = [0u8; 10];
        g[8..].copy_from_slice(b"xy");
        NvgreRepr {
            vsid: 0x12_3456,
            flow_id: 0x9a,
        }
        .to_gre()
        .emit(&mut Gre::new_unchecked(&mut g[..]))
        .unwrap();
        assert_eq!(g, PKT);
    }

    #[test]
    fn emit_errors() {
        let mut b = [0u8; 8];
        let r = NvgreRepr {
            vsid: 0x100_0000,
            flow_id: 0,
        };
        assert_eq!(
            r.emit(&mut Nvgre::new_unchecked(&mut b[..])),
            Err(Error::Malformed)
        );
        let r = NvgreRepr {
            vsid: 5000,
            flow_id: 0,
        };
        assert_eq!(
            r.emit(&mut Nvgre::new_unchecked(&mut b[..7])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn truncations() {
        for n in 0..8 {
            assert_eq!(Nvgre::new_checked(&PKT[..n]).err(), Some(Error::Truncated));
        }
    }

    #[test]
    fn rejects_non_nvgre() {
        // C set (header grows to 12 bytes, so pad the buffer).
        let mut b = [0u8; 16];
        b[..10].copy_from_slice(&PKT);
        b[0] = 0xa0;
        assert_eq!(Nvgre::new_checked(&b[..]).err(), Some(Error::Malformed));
        b[0] = 0x30; // S set
        assert_eq!(Nvgre::new_checked(&b[..]).err(), Some(Error::Malformed));
        b[0] = 0x00; // K clear
        assert_eq!(Nvgre::new_checked(&b[..]).err(), Some(Error::Malformed));
        let mut b = PKT;
        b[2..4].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(Nvgre::new_checked(&b[..]).err(), Some(Error::Malformed));
        let mut b = PKT;
        b[1] = 1;
        assert_eq!(Nvgre::new_checked(&b[..]).err(), Some(Error::BadVersion));
    }

    #[test]
    fn reserved_vsids() {
        assert!(vsid_is_reserved(0));
        assert!(vsid_is_reserved(0xfff));
        assert!(!vsid_is_reserved(0x1000));
        assert!(!vsid_is_reserved(0xff_fffe));
        assert!(vsid_is_reserved(0xff_ffff));
        // Reserved values still parse.
        let b = [0x20, 0x00, 0x65, 0x58, 0, 0, 0, 1];
        let r = NvgreRepr::parse(&Nvgre::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.vsid, 0);
        assert!(r.vsid_is_reserved());
    }
}
