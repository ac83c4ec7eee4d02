//! VXLAN header, RFC 7348 §5.
//!
//! ```text
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |R|R|R|R|I|R|R|R|            Reserved                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                VXLAN Network Identifier (VNI) |   Reserved    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Carried in UDP to [`PORT`]; the payload is an Ethernet frame.

use crate::{Error, Result};

/// IANA-assigned UDP destination port (RFC 7348 §5).
pub const PORT: u16 = 4789;
/// VXLAN header length.
pub const HEADER_LEN: usize = 8;
/// Largest VNI (24 bits).
pub const VNI_MAX: u32 = 0x00ff_ffff;

mod field {
    pub const FLAGS: usize = 0;
    pub const VNI: core::ops::Range<usize> = 4..7;
    /// I flag: the VNI is valid.
    pub const F_I: u8 = 0x08;
}

/// A read/write view of a VXLAN packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vxlan<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Vxlan<T> {
    /// Wraps a buffer without any check.
    pub const fn new_unchecked(buffer: T) -> Self {
        Vxlan { buffer }
    }

    /// Wraps a buffer after checking its length and the I flag: the I flag
    /// MUST be set for a valid VNI (RFC 7348 §5), so a packet without it
    /// carries no usable VNI ([`Error::Malformed`]). The reserved bits are
    /// ignored on receipt, as §5 requires.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The validation done by [`Vxlan::new_checked`].
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[field::FLAGS] & field::F_I == 0 {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The flags byte (I flag and reserved bits).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The I flag.
    #[inline]
    pub fn vni_valid(&self) -> bool {
        self.flags() & field::F_I != 0
    }

    /// 24-bit VXLAN Network Identifier.
    #[inline]
    pub fn vni(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([0, b[4], b[5], b[6]])
    }

    /// The inner Ethernet frame.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Vxlan<T> {
    /// Writes the I flag and zeroes every reserved field (RFC 7348 §5: MUST
    /// be set to zero on transmission).
    #[inline]
    pub fn set_fixed(&mut self) {
        let b = self.buffer.as_mut();
        b[..HEADER_LEN].fill(0);
        b[field::FLAGS] = field::F_I;
    }

    /// Writes the VNI (low 24 bits of `vni`).
    #[inline]
    pub fn set_vni(&mut self, vni: u32) {
        let v = vni.to_be_bytes();
        self.buffer.as_mut()[field::VNI].copy_from_slice(&v[1..4]);
    }

    /// The inner Ethernet frame, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// A VXLAN header in plain form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VxlanRepr {
    /// VXLAN Network Identifier, 24 bits.
    pub vni: u32,
}

impl VxlanRepr {
    /// Parses a view (re-checking it).
    pub fn parse<T: AsRef<[u8]>>(p: &Vxlan<T>) -> Result<Self> {
        p.check_len()?;
        Ok(VxlanRepr { vni: p.vni() })
    }

    /// Always [`HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 8-byte header at the front of `p`.
    ///
    /// [`Error::Malformed`] if the VNI does not fit 24 bits,
    /// [`Error::Truncated`] if `p` is shorter than the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Vxlan<T>) -> Result<()> {
        if self.vni > VNI_MAX {
            return Err(Error::Malformed);
        }
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        p.set_fixed();
        p.set_vni(self.vni);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VNI 0xabcdef, payload "z".
    static PKT: [u8; 9] = [0x08, 0, 0, 0, 0xab, 0xcd, 0xef, 0, b'z'];

    #[test]
    fn deconstruct() {
        let p = Vxlan::new_checked(&PKT[..]).unwrap();
        assert!(p.vni_valid());
        assert_eq!(p.vni(), 0xab_cdef);
        assert_eq!(p.payload(), b"z");
        assert_eq!(VxlanRepr::parse(&p).unwrap(), VxlanRepr { vni: 0xab_cdef });
    }

    #[test]
    fn construct_zeroes_reserved() {
        let mut b = [0xffu8; 9];
        b[8] = b'z';
        VxlanRepr { vni: 0xab_cdef }
            .emit(&mut Vxlan::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(b, PKT);
    }

    #[test]
    fn reserved_ignored_on_receive() {
        let b = [0xff, 0xff, 0xff, 0xff, 0, 0, 42, 0xff];
        let p = Vxlan::new_checked(&b[..]).unwrap();
        assert_eq!(p.vni(), 42);
    }

    #[test]
    fn i_flag_required() {
        let mut b = PKT;
        b[0] = 0xf7;
        assert_eq!(Vxlan::new_checked(&b[..]).err(), Some(Error::Malformed));
    }

    #[test]
    fn truncations() {
        for n in 0..8 {
            assert_eq!(Vxlan::new_checked(&PKT[..n]).err(), Some(Error::Truncated));
        }
    }

    #[test]
    fn emit_errors() {
        let mut b = [0u8; 8];
        assert_eq!(
            VxlanRepr { vni: 1 << 24 }.emit(&mut Vxlan::new_unchecked(&mut b[..])),
            Err(Error::Malformed)
        );
        assert_eq!(
            VxlanRepr { vni: 1 }.emit(&mut Vxlan::new_unchecked(&mut b[..4])),
            Err(Error::Truncated)
        );
    }
}
