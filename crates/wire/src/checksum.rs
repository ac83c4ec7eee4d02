//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Conventions: a *sum* (`u16`) is the folded one's-complement sum of some
//! bytes, not yet complemented; the *checksum* stored in a header is the
//! complement of the sum over everything it covers. Sums of disjoint pieces
//! are combined with [`combine`] as long as every piece starts at an even
//! offset of the covered data (RFC 1071 §2(B): byte order independence holds
//! per 16-bit word).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{Error, Result};

/// Fold a wide accumulator of 16-bit words into a 16-bit one's-complement sum
/// (RFC 1071 §4.1 "fold 32-bit sum to 16 bits", done twice for 64 bits).
#[inline]
fn fold(mut acc: u64) -> u16 {
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// One's-complement sum (not complemented) of `data`, read as big-endian
/// 16-bit words; an odd trailing byte is padded with a zero on the right
/// (RFC 1071 §4.1).
///
/// Speed comes from deferring carries (RFC 1071 §2(C)) and from byte-order
/// independence (§2(B)): words are read in little-endian order — plain
/// loads, no byte swap per word — added into wide accumulators, folded once
/// at the end, and the folded sum is swapped once. Long buffers go through
/// 16 independent 32-bit lanes of 16-bit words (a shape the compiler
/// vectorises), flushed every [`LANE_BLOCK`] bytes so no lane can overflow;
/// short ones through 32-bit words into one 64-bit accumulator.
#[inline]
pub fn data(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    for block in data.chunks(LANE_BLOCK) {
        acc += if block.len() >= 128 {
            sum_lanes(block)
        } else {
            sum_words(block)
        };
    }
    fold(acc).swap_bytes()
}

/// Copies `src` into `dst` (the first `src.len()` bytes; `dst` at least as
/// long) and returns the sum of the bytes copied, as [`data`] would: the
/// checksum rides along the copy instead of a second pass over memory.
/// Each block is copied (`memcpy`) and then summed while it is still in the
/// L1 cache, so the bytes come from memory once.
#[inline]
pub fn copy_data(dst: &mut [u8], src: &[u8]) -> u16 {
    let n = src.len().min(dst.len());
    let mut acc: u64 = 0;
    for (d, s) in dst[..n]
        .chunks_mut(FUSE_BLOCK)
        .zip(src[..n].chunks(FUSE_BLOCK))
    {
        d.copy_from_slice(s);
        acc += if d.len() >= 128 {
            sum_lanes(d)
        } else {
            sum_words(d)
        };
    }
    fold(acc).swap_bytes()
}

/// Bytes copied before they are summed (even, so every block starts at an
/// even offset; a few KiB stay in L1).
const FUSE_BLOCK: usize = 2048;

/// Bytes summed per lane flush: 2048 words of 32 bytes = 32768 additions of
/// at most 0xffff per lane, below 2^32.
const LANE_BLOCK: usize = 65_536;

/// Sum of `block` (at most [`LANE_BLOCK`] bytes) as little-endian words.
#[inline]
fn sum_lanes(block: &[u8]) -> u64 {
    let mut lanes = [0u32; 16];
    let mut chunks = block.chunks_exact(32);
    for c in &mut chunks {
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane += u32::from(u16::from_le_bytes([c[2 * i], c[2 * i + 1]]));
        }
    }
    lanes.iter().map(|&l| u64::from(l)).sum::<u64>() + sum_words(chunks.remainder())
}

/// Sum of `bytes` as little-endian words; an odd trailing byte is the low
/// byte of its word (the high one once the folded sum is swapped).
#[inline]
fn sum_words(bytes: &[u8]) -> u64 {
    let mut acc: u64 = 0;
    let mut words = bytes.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_le_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(*last);
    }
    acc
}

/// One's-complement sum of several partial sums.
#[inline]
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// The checksum to store for `bytes`: the complement of their sum.
#[inline]
pub fn checksum(bytes: &[u8]) -> u16 {
    !data(bytes)
}

/// True when `bytes`, including a stored checksum, sum to all ones
/// (RFC 1071 §1: "the result is checked ... if the result is all 1 bits").
#[inline]
pub fn verify(bytes: &[u8]) -> bool {
    data(bytes) == 0xffff
}

/// Sum of the IPv4 pseudo-header used by TCP and UDP (RFC 793 §3.1,
/// RFC 768): source, destination, zero, protocol, L4 length.
#[inline]
pub fn pseudo_header_v4(src: &Ipv4Addr, dst: &Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let s = src.octets();
    let d = dst.octets();
    let acc = u64::from(u16::from_be_bytes([s[0], s[1]]))
        + u64::from(u16::from_be_bytes([s[2], s[3]]))
        + u64::from(u16::from_be_bytes([d[0], d[1]]))
        + u64::from(u16::from_be_bytes([d[2], d[3]]))
        + u64::from(protocol)
        + u64::from(length);
    fold(acc)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 §8.1): source, destination,
/// 32-bit upper-layer length, three zero bytes, next header.
#[inline]
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, length: u32) -> u16 {
    let mut acc: u64 = 0;
    for w in src
        .octets()
        .chunks_exact(2)
        .chain(dst.octets().chunks_exact(2))
    {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    acc += u64::from(length >> 16) + u64::from(length & 0xffff) + u64::from(next_header);
    fold(acc)
}

/// Pseudo-header sum for either family; [`Error::Malformed`] when the two
/// addresses are of different families. For IPv4 the length must fit in 16
/// bits ([`Error::BadLength`]).
#[inline]
pub fn pseudo_header(src: &IpAddr, dst: &IpAddr, protocol: u8, length: u32) -> Result<u16> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let len = u16::try_from(length).map_err(|_| Error::BadLength)?;
            Ok(pseudo_header_v4(s, d, protocol, len))
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => Ok(pseudo_header_v6(s, d, protocol, length)),
        _ => Err(Error::Malformed),
    }
}

/// New checksum after one 16-bit word covered by `csum` changed from `old`
/// to `new`: RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`. Unlike eqn. 2 this
/// never turns a checksum of 0x0000 into the non-canonical -0 (RFC 1624 §3).
#[inline]
pub fn update_u16(csum: u16, old: u16, new: u16) -> u16 {
    !combine(&[!csum, !old, new])
}

/// As [`update_u16`], for a 32-bit field (two words) at an even offset.
#[inline]
pub fn update_u32(csum: u16, old: u32, new: u32) -> u16 {
    !combine(&[
        !csum,
        !((old >> 16) as u16),
        !(old as u16),
        (new >> 16) as u16,
        new as u16,
    ])
}

/// As [`update_u16`], for a field of any length that starts at an even
/// offset of the covered data and was replaced by `new` (same length
/// expected; with different lengths the result is still "remove the old sum,
/// add the new one").
#[inline]
pub fn update_bytes(csum: u16, old: &[u8], new: &[u8]) -> u16 {
    !combine(&[!csum, !data(old), data(new)])
}

/// Checksum update for an IPv4 address rewrite (NAT, RFC 3022 §4.2): valid
/// for the IPv4 header checksum and for TCP/UDP checksums, which cover the
/// address through the pseudo-header.
#[inline]
pub fn update_addr_v4(csum: u16, old: &Ipv4Addr, new: &Ipv4Addr) -> u16 {
    update_u32(csum, u32::from(*old), u32::from(*new))
}

/// Checksum update for an IPv6 address rewrite in an upper-layer checksum.
#[inline]
pub fn update_addr_v6(csum: u16, old: &Ipv6Addr, new: &Ipv6Addr) -> u16 {
    update_bytes(csum, &old.octets(), &new.octets())
}

/// Stores a computed transport checksum in the 16-bit field at `at` of
/// `buf` (a CHECKSUM_PARTIAL field, `csum_start + csum_offset`, whose
/// protocol the device does not know): a zero as all ones, the same value in
/// one's complement and the only legal one for UDP (RFC 768).
/// [`Error::Truncated`] when the field is not inside `buf`.
pub fn store_computed(buf: &mut [u8], at: usize, c: u16) -> Result<()> {
    let f = buf
        .get_mut(at..at.checked_add(2).ok_or(Error::Truncated)?)
        .ok_or(Error::Truncated)?;
    f.copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn store_computed_maps_zero_and_checks_bounds() {
        let mut b = [0u8; 4];
        super::store_computed(&mut b, 2, 0).unwrap();
        assert_eq!(b, [0, 0, 0xff, 0xff]);
        super::store_computed(&mut b, 0, 0xabcd).unwrap();
        assert_eq!(b, [0xab, 0xcd, 0xff, 0xff]);
        assert!(super::store_computed(&mut b, 3, 1).is_err());
        assert!(super::store_computed(&mut b, usize::MAX, 1).is_err());
    }

    use super::*;
    use proptest::prelude::*;

    /// Straightforward reference: 16-bit words with an end-around carry per
    /// addition.
    fn reference(bytes: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        for c in bytes.chunks(2) {
            let w = if c.len() == 2 {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                u16::from(c[0]) << 8
            };
            sum += u32::from(w);
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(data(&b), 0xddf2);
        assert_eq!(checksum(&b), !0xddf2);
    }

    #[test]
    fn odd_length_pads_right() {
        assert_eq!(data(&[0xab]), 0xab00);
        assert_eq!(data(&[0x00, 0x01, 0xab]), 0xab01);
        assert_eq!(data(&[]), 0);
    }

    #[test]
    fn known_ipv4_header() {
        // A captured IPv4 header (TCP SYN 192.168.0.1 -> 192.168.0.199),
        // checksum 0xb861 in place: it must verify, and recompute to itself.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert!(verify(&h));
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0xb861);
    }

    #[test]
    fn rfc1624_examples() {
        // RFC 1624 §4: HC = 0xDD2F, m = 0x5555 -> m' = 0x3285; the correct
        // result is 0x0000 (eqn. 2 would give the -0 0xFFFF).
        assert_eq!(update_u16(0xdd2f, 0x5555, 0x3285), 0x0000);
        // Going back the other way is consistent.
        assert_eq!(update_u16(0x0000, 0x3285, 0x5555), 0xdd2f);
        // No change keeps the checksum.
        assert_eq!(update_u16(0x1234, 0xabcd, 0xabcd), 0x1234);
    }

    #[test]
    fn pseudo_headers() {
        // 10.0.0.1 -> 10.0.0.2, UDP, length 8:
        // 0a00+0001+0a00+0002+0011+0008 = 0x141c
        let p = pseudo_header_v4(
            &Ipv4Addr::new(10, 0, 0, 1),
            &Ipv4Addr::new(10, 0, 0, 2),
            17,
            8,
        );
        assert_eq!(p, 0x141c);
        // ::1 -> ::2, next header 58, length 0x10000 (exercises the high half).
        let p6 = pseudo_header_v6(&Ipv6Addr::LOCALHOST, &"::2".parse().unwrap(), 58, 0x1_0000);
        assert_eq!(p6, 0x0001 + 0x0002 + 0x0001 + 58);
        // It equals the sum over the literal RFC 8200 pseudo-header bytes.
        let mut bytes = [0u8; 40];
        bytes[15] = 1;
        bytes[31] = 2;
        bytes[32..36].copy_from_slice(&0x1_0000u32.to_be_bytes());
        bytes[39] = 58;
        assert_eq!(p6, data(&bytes));
    }

    #[test]
    fn long_buffers_all_ones() {
        // Worst case for the lanes: every word 0xffff, across several lane
        // blocks and with odd tails.
        for len in [127, 128, 65_535, 65_536, 65_537, 200_001] {
            let b = vec![0xffu8; len];
            assert_eq!(data(&b), reference(&b), "{len}");
        }
        let b: Vec<u8> = (0..150_001u32).map(|i| (i * 31 + i / 7) as u8).collect();
        assert_eq!(data(&b), reference(&b));
    }

    #[test]
    fn pseudo_header_either_family() {
        let a4 = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let b4 = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(pseudo_header(&a4, &b4, 17, 8), Ok(0x141c));
        assert_eq!(pseudo_header(&a4, &b4, 17, 70_000), Err(Error::BadLength));
        let a6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert_eq!(pseudo_header(&a4, &a6, 17, 8), Err(Error::Malformed));
        assert_eq!(
            pseudo_header(&a6, &a6, 58, 8),
            Ok(pseudo_header_v6(
                &Ipv6Addr::LOCALHOST,
                &Ipv6Addr::LOCALHOST,
                58,
                8
            ))
        );
    }

    proptest! {
        #[test]
        fn copy_data_copies_and_sums_like_data(bytes in proptest::collection::vec(any::<u8>(), 0..9000)) {
            let mut dst = vec![0xa5u8; bytes.len() + 3];
            let sum = copy_data(&mut dst, &bytes);
            prop_assert_eq!(sum, data(&bytes));
            prop_assert_eq!(&dst[..bytes.len()], &bytes[..]);
            prop_assert!(dst[bytes.len()..].iter().all(|&b| b == 0xa5));
        }

        #[test]
        fn fast_sum_matches_reference(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            prop_assert_eq!(data(&bytes), reference(&bytes));
        }

        #[test]
        fn filled_checksum_verifies(mut bytes in proptest::collection::vec(any::<u8>(), 2..600)) {
            bytes[0] = 0;
            bytes[1] = 0;
            let c = checksum(&bytes);
            bytes[..2].copy_from_slice(&c.to_be_bytes());
            prop_assert!(verify(&bytes));
        }

        #[test]
        fn combine_of_even_split_is_whole(bytes in proptest::collection::vec(any::<u8>(), 0..600), cut in 0usize..300) {
            let cut = (cut * 2).min(bytes.len() & !1);
            prop_assert_eq!(
                combine(&[data(&bytes[..cut]), data(&bytes[cut..])]),
                // One's-complement +0/-0: both splits represent the same value.
                data(&bytes)
            );
        }

        #[test]
        fn incremental_equals_recompute(
            mut bytes in proptest::collection::vec(any::<u8>(), 8..400),
            at in 1usize..200,
            new16 in any::<u16>(),
            new32 in any::<u32>(),
        ) {
            // Checksum in bytes[0..2]; a field at an even offset >= 2.
            bytes[0] = 0;
            bytes[1] = 0;
            let c = checksum(&bytes);
            bytes[..2].copy_from_slice(&c.to_be_bytes());

            let off = (2 * at).min((bytes.len() - 4) & !1).max(2);
            let old16 = u16::from_be_bytes([bytes[off], bytes[off + 1]]);
            let c2 = update_u16(c, old16, new16);
            bytes[off..off + 2].copy_from_slice(&new16.to_be_bytes());
            bytes[..2].copy_from_slice(&c2.to_be_bytes());
            prop_assert!(verify(&bytes));

            let old32 = u32::from_be_bytes([bytes[off], bytes[off + 1], bytes[off + 2], bytes[off + 3]]);
            let c3 = update_u32(c2, old32, new32);
            bytes[off..off + 4].copy_from_slice(&new32.to_be_bytes());
            bytes[..2].copy_from_slice(&c3.to_be_bytes());
            prop_assert!(verify(&bytes));

            // Full recomputation agrees, up to the single +0/-0 ambiguity
            // (both 0x0000 and 0xffff verify only when the rest sums to 0xffff/0).
            bytes[0] = 0;
            bytes[1] = 0;
            let full = checksum(&bytes);
            prop_assert!(full == c3 || (full == 0xffff && c3 == 0) || (full == 0 && c3 == 0xffff));
        }

        #[test]
        fn address_rewrite(a in any::<u32>(), b in any::<u32>(), x in any::<[u8;16]>(), y in any::<[u8;16]>()) {
            let (a, b) = (Ipv4Addr::from(a), Ipv4Addr::from(b));
            let p1 = pseudo_header_v4(&a, &a, 6, 40);
            let p2 = pseudo_header_v4(&b, &a, 6, 40);
            let c = update_addr_v4(!p1, &a, &b);
            prop_assert!(c == !p2 || (c == 0 && !p2 == 0xffff) || (c == 0xffff && !p2 == 0));
            let (x, y) = (Ipv6Addr::from(x), Ipv6Addr::from(y));
            let q1 = pseudo_header_v6(&x, &y, 17, 100);
            let q2 = pseudo_header_v6(&y, &y, 17, 100);
            let c = update_addr_v6(!q1, &x, &y);
            prop_assert!(c == !q2 || (c == 0 && !q2 == 0xffff) || (c == 0xffff && !q2 == 0));
        }
    }
}
