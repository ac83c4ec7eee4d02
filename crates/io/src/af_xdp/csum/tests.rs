use super::*;

/// The SYN the test `rx_tcp_from_peer_has_complete_checksum` captured
/// from a veth peer before the fix: checksum field 0x8300 is the
/// pseudo-header sum.
const PARTIAL_SYN: [u8; 74] = [
    0x86, 0x59, 0xd6, 0xf7, 0xca, 0x3b, 0x0e, 0xa7, 0xad, 0x72, 0xbb, 0x69, 0x08, 0x00, 0x45, 0x00,
    0x00, 0x3c, 0x97, 0x39, 0x40, 0x00, 0x40, 0x06, 0x20, 0xb1, 0x0a, 0x63, 0xb7, 0x02, 0x0a, 0x63,
    0xb7, 0x09, 0x9b, 0xc0, 0x15, 0xb3, 0xc7, 0xa5, 0x9a, 0xb5, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02,
    0xfa, 0xf0, 0x83, 0x00, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x44, 0xbc,
    0x91, 0xe2, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x0a,
];

fn verifies_v4(f: &[u8]) -> bool {
    let mut ph = Vec::new();
    ph.extend_from_slice(&f[26..34]);
    ph.extend_from_slice(&[0, f[23]]);
    ph.extend_from_slice(&((f.len() - 34) as u16).to_be_bytes());
    csum_fold(csum_add(csum_add(0, &ph), &f[34..])) == 0xffff
}

#[test]
fn completes_a_partial_tcp_checksum_once() {
    let mut f = PARTIAL_SYN;
    assert!(!verifies_v4(&f));
    assert!(complete_partial_csum(&mut f));
    assert!(verifies_v4(&f));
    assert_eq!(f[..50], PARTIAL_SYN[..50]);
    assert_eq!(f[52..], PARTIAL_SYN[52..]);
    // Complete now: left alone.
    let g = f;
    assert!(!complete_partial_csum(&mut f));
    assert_eq!(f, g);
}

#[test]
fn leaves_wrong_but_not_partial_checksums_and_short_frames() {
    let mut f = PARTIAL_SYN;
    f[50] ^= 0x01; // corrupt, and not the pseudo-header sum
    let g = f;
    assert!(!complete_partial_csum(&mut f));
    assert_eq!(f, g);
    for n in 0..PARTIAL_SYN.len() {
        let mut t = PARTIAL_SYN[..n].to_vec();
        assert!(!complete_partial_csum(&mut t), "truncated to {n}");
    }
}

#[test]
fn odd_lengths_sum_like_rfc1071() {
    // 16-bit big-endian words, the odd byte padded with zero.
    assert_eq!(csum_fold(csum_add(0, &[0x01, 0x02, 0x03])), 0x0402);
    assert_eq!(csum_fold(csum_add(0, &[1, 2, 3, 4, 5])), 0x0906);
    assert_eq!(csum_fold(csum_add(0, &[0xff; 7])), 0xff00);
}
