//! The virtio-net header (`wire::vnet`, the one codec of its layout)
//! exchanged with the kernel by AF_PACKET (PACKET_VNET_HDR) and TAP
//! (IFF_VNET_HDR), converted to and from the packets' [`Offload`].
//!
//! The conversion is lenient where the kernel is (a GSO type with
//! `gso_size` 0 or a stray ECN bit is taken as given, as before); only a
//! segmentation type vecgate cannot represent is refused.

use packet::{Gso, Offload};
use wire::vnet::{gso, Header, F_DATA_VALID, F_NEEDS_CSUM, HEADER_LEN};

/// Size of the header (no `num_buffers`).
pub const VNET_HDR_LEN: usize = HEADER_LEN;

/// Why a received header cannot be represented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VnetError {
    /// A segmentation type vecgate does not handle (UFO, unknown values).
    UnsupportedGso(u8),
}

/// Parses a header into offload metadata. The ECN bit of `gso_type` (CWR
/// seen on a segment, to be kept on the first one only) is not tracked.
pub fn decode(h: &[u8; VNET_HDR_LEN]) -> Result<Offload, VnetError> {
    let h = Header::new_unchecked(&h[..]);
    let gso = match h.gso_type() & !gso::ECN {
        gso::NONE => Gso::None,
        gso::TCPV4 => Gso::TcpV4,
        gso::TCPV6 => Gso::TcpV6,
        gso::UDP_L4 => Gso::UdpL4,
        other => return Err(VnetError::UnsupportedGso(other)),
    };
    Ok(Offload {
        needs_csum: h.flags() & F_NEEDS_CSUM != 0,
        csum_valid: h.flags() & F_DATA_VALID != 0,
        gso,
        hdr_len: h.hdr_len(),
        gso_size: h.gso_size(),
        csum_start: h.csum_start(),
        csum_offset: h.csum_offset(),
    })
}

/// Builds the header for a packet to transmit. For a plain packet without
/// pending checksum it is all zeros, which the kernel takes as "as is".
pub fn encode(o: &Offload) -> [u8; VNET_HDR_LEN] {
    let mut buf = [0u8; VNET_HDR_LEN];
    let mut h = Header::new_unchecked(&mut buf[..]);
    if o.needs_csum {
        h.set_flags(F_NEEDS_CSUM);
        h.set_csum_start(o.csum_start);
        h.set_csum_offset(o.csum_offset);
    } else if o.csum_valid {
        h.set_flags(F_DATA_VALID);
    }
    h.set_gso_type(match o.gso {
        Gso::None => gso::NONE,
        Gso::TcpV4 => gso::TCPV4,
        Gso::TcpV6 => gso::TCPV6,
        Gso::UdpL4 => gso::UDP_L4,
    });
    if o.gso != Gso::None {
        h.set_hdr_len(o.hdr_len);
        h.set_gso_size(o.gso_size);
    }
    buf
}

/// Whether `GSO_UDP` (UFO) should be told apart in counters.
pub fn is_ufo(e: VnetError) -> bool {
    e == VnetError::UnsupportedGso(gso::UDP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp4_super_packet_round_trip() {
        let o = Offload {
            needs_csum: true,
            csum_valid: false,
            csum_start: 34,
            csum_offset: 16,
            gso: Gso::TcpV4,
            gso_size: 1448,
            hdr_len: 66,
        };
        let h = encode(&o);
        assert_eq!(h[0], 1);
        assert_eq!(h[1], 1);
        assert_eq!(u16::from_ne_bytes([h[4], h[5]]), 1448);
        assert_eq!(decode(&h).unwrap(), o);
    }

    #[test]
    fn plain_packet_is_zero_header() {
        assert_eq!(encode(&Offload::default()), [0; 10]);
        assert_eq!(decode(&[0; 10]).unwrap(), Offload::default());
    }

    #[test]
    fn data_valid_and_ecn() {
        let mut h = [0u8; 10];
        h[0] = 2;
        h[1] = 0x80 | 4;
        let o = decode(&h).unwrap();
        assert!(o.csum_valid && !o.needs_csum);
        assert_eq!(o.gso, Gso::TcpV6);
    }

    #[test]
    fn ufo_is_rejected() {
        let mut h = [0u8; 10];
        h[1] = 3;
        let e = decode(&h).unwrap_err();
        assert!(is_ufo(e));
        h[1] = 9;
        assert_eq!(decode(&h), Err(VnetError::UnsupportedGso(9)));
    }
}
