//! Receive-side completion of CHECKSUM_PARTIAL frames (see the module
//! notes of [`super`]: XDP loses `ip_summed`, so vecgate finishes the sum).

/// One's-complement sum of `data` added to `sum` (RFC 1071), not folded.
fn csum_add(mut sum: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        sum += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let mut rest = chunks.remainder();
    if rest.len() >= 2 {
        sum += u64::from(u16::from_be_bytes([rest[0], rest[1]])) << 16;
        rest = &rest[2..];
    }
    if let [b] = rest {
        sum += u64::from(*b) << if data.len() % 4 == 3 { 8 } else { 24 };
    }
    sum
}

/// Folds a sum to 16 bits with end-around carries (not complemented).
fn csum_fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Completes a TCP or UDP checksum (IPv4 or IPv6, optionally behind one
/// VLAN tag) that the sending kernel left partial (CHECKSUM_PARTIAL: the
/// field holds the folded pseudo-header sum, RFC 793 §3.1 / RFC 768 /
/// RFC 8200 §8.1). A field that verifies, or that is not the pseudo-header
/// sum, is left alone. Returns whether the frame was changed. Only reads
/// within the lengths the headers give, after checking them against the
/// frame.
pub fn complete_partial_csum(f: &mut [u8]) -> bool {
    let Some(mut l3) = f
        .get(12..14)
        .map(|b| (u16::from_be_bytes([b[0], b[1]]), 14))
    else {
        return false;
    };
    if matches!(l3.0, 0x8100 | 0x88a8) {
        match f.get(16..18) {
            Some(b) => l3 = (u16::from_be_bytes([b[0], b[1]]), 18),
            None => return false,
        }
    }
    let (ethertype, o) = l3;
    // (pseudo-header sum, L4 protocol, L4 range)
    let (pseudo, proto, l4) = match ethertype {
        0x0800 => {
            let Some(h) = f.get(o..o + 20) else {
                return false;
            };
            let ihl = usize::from(h[0] & 0xf) * 4;
            let tot = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let frag = u16::from_be_bytes([h[6], h[7]]) & 0x3fff;
            if h[0] >> 4 != 4 || ihl < 20 || tot < ihl || o + tot > f.len() || frag != 0 {
                return false;
            }
            let l4_len = tot - ihl;
            let sum = csum_add(0, &h[12..20]) + u64::from(h[9]) + l4_len as u64;
            (sum, h[9], o + ihl..o + tot)
        }
        0x86dd => {
            let Some(h) = f.get(o..o + 40) else {
                return false;
            };
            let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
            if h[0] >> 4 != 6 || o + 40 + plen > f.len() {
                return false;
            }
            let sum = csum_add(0, &h[8..40]) + u64::from(h[6]) + plen as u64;
            (sum, h[6], o + 40..o + 40 + plen)
        }
        _ => return false,
    };
    let field = match proto {
        6 if l4.len() >= 20 => l4.start + 16,
        17 if l4.len() >= 8 => l4.start + 6,
        _ => return false,
    };
    let cur = u16::from_be_bytes([f[field], f[field + 1]]);
    if cur != csum_fold(pseudo) {
        return false;
    }
    if csum_fold(csum_add(pseudo, &f[l4.clone()])) == 0xffff {
        return false; // complete and right already
    }
    f[field..field + 2].copy_from_slice(&[0, 0]);
    let mut c = !csum_fold(csum_add(pseudo, &f[l4]));
    if proto == 17 && c == 0 {
        c = 0xffff; // RFC 768: zero means "no checksum"
    }
    f[field..field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests;
