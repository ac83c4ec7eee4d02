//! Internet checksum (RFC 1071) and completion of partial L4 checksums.
//!
//! # The partial-checksum convention
//!
//! A packet with `offload.needs_csum` follows Linux's CHECKSUM_PARTIAL /
//! `VIRTIO_NET_HDR_F_NEEDS_CSUM` contract (virtio spec §5.1.6.2, and
//! `skb_checksum_help()` in the kernel's `net/core/dev.c`): the checksum field
//! at `csum_start + csum_offset` already holds the *folded, uncomplemented*
//! pseudo-header sum (TCP: `~tcp_v4_check(len, saddr, daddr, 0)`), so the
//! device only has to sum every byte from `csum_start` to the end of the
//! frame, fold, complement, and store the result over that field. Like the
//! kernel, a result of 0 is stored as 0xFFFF (the same value in one's
//! complement, and the only legal spelling for UDP, RFC 768).

use super::hdr::{self, PROTO_TCP, PROTO_UDP};
use super::OffloadError;
use packet::buffer::{Gso, Packet};

/// Adds `data` to a running one's-complement sum (RFC 1071 §4.1), kept
/// unfolded in 64 bits so several pieces and a pseudo-header can be added
/// before one final [`fold`]. The bytes are summed by [`wire::checksum::data`];
/// an odd trailing byte is padded with a zero on its right, so only a piece
/// that starts at an even offset of the checksummed range may be summed
/// separately.
#[inline]
pub fn sum(data: &[u8], initial: u64) -> u64 {
    initial + u64::from(wire::checksum::data(data))
}

/// Folds a running sum to 16 bits (end-around carry), without complementing.
#[inline]
pub fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Folds and complements: the value that goes into a checksum field.
#[inline]
pub fn finish(s: u64) -> u16 {
    !fold(s)
}

/// Completes a partial L4 checksum (see the module docs for the convention)
/// and clears `needs_csum`. A packet without `needs_csum` is left alone.
/// GSO super-packets are refused: their checksums are finished per segment.
pub fn complete(pkt: &mut Packet) -> Result<(), OffloadError> {
    let o = pkt.meta.offload;
    if !o.needs_csum {
        return Ok(());
    }
    if o.gso != Gso::None {
        return Err(OffloadError::Unsupported);
    }
    let start = usize::from(o.csum_start);
    let field = start + usize::from(o.csum_offset);
    let d = pkt.data_mut();
    if start >= d.len() || field + 2 > d.len() {
        return Err(OffloadError::BadCsumOffsets);
    }
    let c = finish(sum(&d[start..], 0));
    wire::checksum::store_computed(d, field, c).map_err(|_| OffloadError::BadCsumOffsets)?;
    pkt.meta.offload.needs_csum = false;
    pkt.meta.offload.csum_valid = true;
    Ok(())
}

/// Verifies the TCP or UDP checksum of the IP packet at `meta.l3_offset`.
/// See [`verify_l4_at`].
pub fn verify_l4(pkt: &Packet) -> bool {
    verify_l4_at(pkt.data(), usize::from(pkt.meta.l3_offset))
}

/// Verifies the TCP or UDP checksum (pseudo-header included) of the IP
/// packet at `l3`. False for anything else: other protocols, fragments,
/// truncated or malformed headers, and a zero UDP checksum over IPv6
/// (RFC 8200 §8.1). A zero UDP checksum over IPv4 means "none" (RFC 768)
/// and is accepted.
pub fn verify_l4_at(d: &[u8], l3: usize) -> bool {
    let Ok(ip) = hdr::parse_ip(d, l3, true) else {
        return false;
    };
    if ip.is_fragment(d) {
        return false;
    }
    let l4_len = ip.end - ip.l4;
    match ip.proto {
        PROTO_TCP if l4_len >= hdr::TCP_MIN_LEN => {}
        PROTO_UDP if l4_len >= hdr::UDP_LEN => {
            let u = hdr::udp(d, ip.l4);
            if usize::from(u.len()) != l4_len {
                return false;
            }
            if u.checksum() == 0 {
                return !ip.v6;
            }
        }
        _ => return false,
    }
    let s = sum(&d[ip.l4..ip.end], hdr::pseudo_sum(d, &ip, l4_len));
    fold(s) == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::buffer::Pool;

    /// Independent RFC 1071 reference: 16-bit words, u32 accumulator.
    fn reference(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for c in data.chunks(2) {
            let w = if c.len() == 2 {
                u32::from(c[0]) << 8 | u32::from(c[1])
            } else {
                u32::from(c[0]) << 8
            };
            acc += w;
            acc = (acc & 0xffff) + (acc >> 16);
        }
        !(acc as u16)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 numerical example: the sum of these words is 0xddf2.
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&bytes, 0)), 0xddf2);
        assert_eq!(finish(sum(&bytes, 0)), !0xddf2);
    }

    #[test]
    fn matches_reference_on_all_small_lengths() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 151 + 7) as u8).collect();
        for n in 0..data.len() {
            assert_eq!(finish(sum(&data[..n], 0)), reference(&data[..n]), "len {n}");
        }
    }

    /// An IPv4/UDP frame with a NEEDS_CSUM partial checksum, as the kernel
    /// hands it over a vnet header.
    fn partial_udp4(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12] = 0x08;
        let total = 20 + 8 + payload.len();
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        f.extend_from_slice(&ip);
        let ulen = (8 + payload.len()) as u16;
        f.extend_from_slice(&[0x12, 0x34, 0x56, 0x78]);
        f.extend_from_slice(&ulen.to_be_bytes());
        // Pseudo-header sum, folded, not complemented.
        let mut ph = vec![10, 0, 0, 1, 10, 0, 0, 2, 0, 17];
        ph.extend_from_slice(&ulen.to_be_bytes());
        let p = !reference(&ph);
        f.extend_from_slice(&p.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn complete_then_verify() {
        let mut pool = Pool::new(2);
        let mut p = pool.alloc().unwrap();
        assert!(p.set_data(&partial_udp4(b"hello, odd length")));
        p.meta.l3_offset = 14;
        assert!(!verify_l4(&p));
        p.meta.offload.needs_csum = true;
        p.meta.offload.csum_start = 34;
        p.meta.offload.csum_offset = 6;
        complete(&mut p).unwrap();
        assert!(!p.meta.offload.needs_csum);
        assert!(verify_l4(&p));
        // Independent check: pseudo header + UDP segment sums to zero.
        let d = p.data();
        let mut ph = vec![10, 0, 0, 1, 10, 0, 0, 2, 0, 17];
        ph.extend_from_slice(&d[38..40]);
        ph.extend_from_slice(&d[34..]);
        assert_eq!(reference(&ph), 0);
        // A flipped payload bit is caught.
        let mut q = pool.alloc().unwrap();
        let mut bad = p.data().to_vec();
        bad[45] ^= 0x10;
        assert!(q.set_data(&bad));
        q.meta.l3_offset = 14;
        assert!(!verify_l4(&q));
    }

    #[test]
    fn complete_rejects_bad_offsets() {
        let mut pool = Pool::new(1);
        let mut p = pool.alloc().unwrap();
        assert!(p.set_data(&[0u8; 40]));
        p.meta.offload.needs_csum = true;
        p.meta.offload.csum_start = 30;
        p.meta.offload.csum_offset = 9;
        assert_eq!(complete(&mut p), Err(OffloadError::BadCsumOffsets));
        assert!(p.meta.offload.needs_csum);
        p.meta.offload.csum_start = 40;
        p.meta.offload.csum_offset = 0;
        assert_eq!(complete(&mut p), Err(OffloadError::BadCsumOffsets));
    }

    proptest::proptest! {
        #[test]
        fn complete_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
                                 start in 0u16..400, off in 0u16..400, l3 in 0u16..64) {
            let mut pool = Pool::new(1);
            let mut p = pool.alloc().unwrap();
            assert!(p.set_data(&bytes));
            p.meta.l3_offset = l3;
            p.meta.offload.needs_csum = true;
            p.meta.offload.csum_start = start;
            p.meta.offload.csum_offset = off;
            let fits = usize::from(start) < bytes.len() && usize::from(start + off) + 2 <= bytes.len();
            proptest::prop_assert_eq!(complete(&mut p).is_ok(), fits);
            let _ = verify_l4(&p);
        }
    }
}
