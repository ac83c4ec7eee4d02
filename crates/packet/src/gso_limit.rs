//! How large a super-packet may be when it is handed to the kernel whole:
//! the one size rule every node that builds one (UDP GSO packing and
//! joining, receive coalescing) and the transmit check
//! ([`crate::tx_check`]) apply.
//!
//! Linux segments in software every GSO frame whose length, counted from
//! its link header, reaches the netdev's `gso_max_size`
//! (net/core/dev.c `gso_features_check`: `skb->len >=
//! netif_get_gso_max_size()`). On the direct transmit path that AF_PACKET
//! takes with PACKET_QDISC_BYPASS that software segmentation is a refusal:
//! `dev_direct_xmit` frees the segments, counts the frame in the netdev's
//! `tx_dropped` and `sendmsg` fails with ENOBUFS. Every netdev starts with
//! `gso_max_size` and `gso_ipv4_max_size` at 65 536
//! (`GSO_LEGACY_MAX_SIZE`; only BIG TCP set-ups raise them). So a frame of
//! 65 536 bytes is lost where one of 65 535 goes out: 46 ESP-in-UDP packets
//! of 1 424 bytes behind an outer IPv4 + UDP header make an IP packet of
//! 65 532 bytes — within the IP length field — and a 65 546-byte frame.
//!
//! The limit is stated from the outer L3 header because that is where the
//! nodes build super-packets; the link header comes later (ip-rewrite). It
//! is below both IP length fields' limits (IPv4 total length, IPv6 payload
//! length), so a super-packet within it is also a valid IP packet.

/// The kernel's default `gso_max_size`: a GSO frame this long or longer
/// is segmented in software before it leaves (see the module doc).
pub const KERNEL_GSO_MAX_SIZE: usize = 65_536;

/// The link header a super-packet gets in front of its L3 header before it
/// leaves: Ethernet (vecgate sends no VLAN tags).
pub const LINK_HDR_LEN: usize = 14;

/// The longest GSO frame, link header included, the kernel takes whole.
pub const MAX_GSO_FRAME: usize = KERNEL_GSO_MAX_SIZE - 1;

/// The longest super-packet from its (outer) L3 header to its end: 65 521.
pub const MAX_GSO_L3: usize = MAX_GSO_FRAME - LINK_HDR_LEN;

/// Linux refuses UDP GSO datagrams of more segments than this
/// (`UDP_MAX_SEGMENTS`, include/linux/udp.h; `virtio_net_hdr_to_skb`
/// returns EINVAL).
pub const UDP_MAX_SEGMENTS: usize = 128;

/// Whether a super-packet of `l3_len` bytes from its L3 header may be sent
/// whole.
#[inline]
pub const fn l3_fits(l3_len: usize) -> bool {
    l3_len <= MAX_GSO_L3
}

/// Whether a GSO frame of `frame_len` bytes, link header included, may be
/// handed to the kernel whole.
#[inline]
pub const fn frame_fits(frame_len: usize) -> bool {
    frame_len <= MAX_GSO_FRAME
}

/// How many slices of `slice` bytes one UDP GSO datagram may carry behind
/// its outer IP + UDP header of `outer_hdr` bytes: as many as keep it
/// within [`MAX_GSO_L3`], at most [`UDP_MAX_SEGMENTS`]. 0 for an empty
/// slice.
#[inline]
pub const fn udp_segments(outer_hdr: usize, slice: usize) -> usize {
    if slice == 0 {
        return 0;
    }
    let n = MAX_GSO_L3.saturating_sub(outer_hdr) / slice;
    if n < UDP_MAX_SEGMENTS {
        n
    } else {
        UDP_MAX_SEGMENTS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_from_the_report_does_not_fit_and_one_less_slice_does() {
        // Outer IPv4 + UDP (28), slices of 1424 bytes (AES-GCM ESP).
        assert_eq!(udp_segments(28, 1424), 45);
        assert!(!frame_fits(LINK_HDR_LEN + 28 + 46 * 1424));
        assert!(frame_fits(LINK_HDR_LEN + 28 + 45 * 1424));
        // IPv6 outer (48): the IPv6 payload length would allow more.
        assert_eq!(udp_segments(48, 1424), 45);
        assert!(frame_fits(LINK_HDR_LEN + 48 + 45 * 1424));
    }

    #[test]
    fn every_slice_size_stays_within_the_frame_and_the_ip_length() {
        for outer in [28, 48] {
            for slice in 1..=9000 {
                let n = udp_segments(outer, slice);
                let l3 = outer + n * slice;
                assert!(l3_fits(l3) && frame_fits(l3 + LINK_HDR_LEN));
                assert!(n <= UDP_MAX_SEGMENTS);
                // One more would not fit (unless the segment cap bound it).
                if n < UDP_MAX_SEGMENTS {
                    assert!(!l3_fits(l3 + slice), "{outer} {slice}");
                }
                assert!(l3 <= 65_535, "IPv4 total length");
            }
        }
        assert_eq!(udp_segments(28, 0), 0);
        assert_eq!(udp_segments(70_000, 10), 0);
    }

    #[test]
    fn the_limit_is_the_last_frame_the_kernel_takes() {
        assert!(frame_fits(65_535));
        assert!(!frame_fits(65_536));
        assert!(l3_fits(65_521));
        assert!(!l3_fits(65_522));
    }
}
