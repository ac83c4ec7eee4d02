//! NVGRE (RFC 7637) where it differs from plain GRE, for the graph: GRE
//! with only the key bit set, protocol 0x6558 (transparent Ethernet
//! bridging), and the key field split into a 24-bit Virtual Subnet ID and
//! an 8-bit FlowID (§3.2; the header view is `wire::nvgre`).
//!
//! NVGRE shares IP protocol 47 with GRE, so gre-input receives both (a
//! key that matches no GRE tunnel is tried as a VSID) and tunnel-encap
//! sends both from the tunnel's header template ([`crate::tunnel`]); the
//! NVGRE-specific parts of those are these functions.

use wire::nvgre::{Nvgre, HEADER_LEN, VSID_MAX};

/// The GRE key field of a VSID, FlowID 0 (filled per packet).
#[inline]
pub fn key_of_vsid(vsid: u32) -> u32 {
    (vsid & VSID_MAX) << 8
}

/// The VSID in a received GRE key field.
#[inline]
pub fn vsid_of_key(key: u32) -> u32 {
    key >> 8
}

/// Whether a received header's GRE flags are NVGRE's: neither checksum nor
/// sequence number (§3.2: C and S are 0).
#[inline]
pub fn flags_allowed(checksum: bool, sequence: bool) -> bool {
    !(checksum || sequence)
}

/// Writes the FlowID (from the inner flow hash, so the peer's fanout
/// spreads the flows) into the NVGRE header at `l4`; the caller built the
/// header from the template, so it is in `d`.
#[inline]
pub fn set_flow_id(d: &mut [u8], l4: usize, hash: u32) {
    if let Some(h) = d.get_mut(l4..l4 + HEADER_LEN) {
        Nvgre::new_unchecked(h).set_flow_id(hash as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_and_vsid() {
        assert_eq!(key_of_vsid(0x12_3456), 0x1234_5600);
        assert_eq!(vsid_of_key(0x1234_56ab), 0x12_3456);
        assert_eq!(key_of_vsid(0xff12_3456), 0x1234_5600);
        let mut d = [0u8; 8];
        set_flow_id(&mut d, 0, 0x1_23ab);
        assert_eq!(d[7], 0xab);
        assert!(flags_allowed(false, false) && !flags_allowed(true, false));
    }
}
