//! The legacy `struct virtio_net_hdr` (10 bytes) exchanged with the kernel by
//! AF_PACKET (PACKET_VNET_HDR) and TAP (IFF_VNET_HDR), and its conversion
//! to and from [`Offload`].
//!
//! The kernel uses host byte order for these fields on packet sockets and on
//! TAP unless TUNSETVNETLE/BE is set (virtio 0.9 "legacy" layout), so the
//! conversion is native-endian.

use packet::{Gso, Offload};

/// Size of the header (no `num_buffers`).
pub const VNET_HDR_LEN: usize = 10;

const F_NEEDS_CSUM: u8 = 1;
const F_DATA_VALID: u8 = 2;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_UDP: u8 = 3;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

/// Why a received header cannot be represented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VnetError {
    /// A segmentation type vecgate does not handle (UFO, unknown values).
    UnsupportedGso(u8),
}

/// Parses a header into offload metadata. The ECN bit of `gso_type` (CWR
/// seen on a segment, to be kept on the first one only) is not tracked.
pub fn decode(h: &[u8; VNET_HDR_LEN]) -> Result<Offload, VnetError> {
    let u16_at = |i: usize| u16::from_ne_bytes([h[i], h[i + 1]]);
    let gso = match h[1] & !GSO_ECN {
        GSO_NONE => Gso::None,
        GSO_TCPV4 => Gso::TcpV4,
        GSO_TCPV6 => Gso::TcpV6,
        GSO_UDP_L4 => Gso::UdpL4,
        other => return Err(VnetError::UnsupportedGso(other)),
    };
    Ok(Offload {
        needs_csum: h[0] & F_NEEDS_CSUM != 0,
        csum_valid: h[0] & F_DATA_VALID != 0,
        gso,
        hdr_len: u16_at(2),
        gso_size: u16_at(4),
        csum_start: u16_at(6),
        csum_offset: u16_at(8),
    })
}

/// Builds the header for a packet to transmit. For a plain packet without
/// pending checksum it is all zeros, which the kernel takes as "as is".
pub fn encode(o: &Offload) -> [u8; VNET_HDR_LEN] {
    let mut h = [0u8; VNET_HDR_LEN];
    if o.needs_csum {
        h[0] |= F_NEEDS_CSUM;
    } else if o.csum_valid {
        h[0] |= F_DATA_VALID;
    }
    h[1] = match o.gso {
        Gso::None => GSO_NONE,
        Gso::TcpV4 => GSO_TCPV4,
        Gso::TcpV6 => GSO_TCPV6,
        Gso::UdpL4 => GSO_UDP_L4,
    };
    if o.gso != Gso::None {
        h[2..4].copy_from_slice(&o.hdr_len.to_ne_bytes());
        h[4..6].copy_from_slice(&o.gso_size.to_ne_bytes());
    }
    if o.needs_csum {
        h[6..8].copy_from_slice(&o.csum_start.to_ne_bytes());
        h[8..10].copy_from_slice(&o.csum_offset.to_ne_bytes());
    }
    h
}

/// Whether `GSO_UDP` (UFO) should be told apart in counters.
pub fn is_ufo(e: VnetError) -> bool {
    e == VnetError::UnsupportedGso(GSO_UDP)
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
