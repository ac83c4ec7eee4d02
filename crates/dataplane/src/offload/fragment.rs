//! IPv4 fragmentation (RFC 791 §2.3 "Fragmentation", §3.2 "fragmentation
//! procedure", RFC 1191 for DF).
//!
//! Used on egress when a packet that is not a GSO super-packet exceeds the
//! port's MTU (e.g. after encapsulation). IPv6 routers never fragment
//! (RFC 8200 §5): the caller sends ICMPv6 Packet Too Big instead.

use super::csum::{finish, sum};
use super::hdr;
use super::OffloadError;
use packet::buffer::{Gso, Offload, Packet, Pool, MAX_FRAME};

/// Smallest MTU every IPv4 module must support (RFC 791 §3.2, "Fragment
/// Offset" and "Total Length").
pub const MIN_MTU: u16 = 68;

/// Options of the first fragment that later fragments carry: only those
/// whose copied flag (the high bit of the type, RFC 791 §3.1 "Options") is
/// set, padded with End-of-Option-List to a multiple of 4 bytes.
fn copied_options(opts: &[u8], buf: &mut [u8; 40]) -> Result<usize, OffloadError> {
    let mut i = 0;
    let mut n = 0;
    while i < opts.len() {
        let kind = opts[i];
        match kind {
            0 => break,
            1 => i += 1,
            _ => {
                let len = usize::from(*opts.get(i + 1).ok_or(OffloadError::Malformed)?);
                if len < 2 || i + len > opts.len() {
                    return Err(OffloadError::Malformed);
                }
                if kind & 0x80 != 0 {
                    buf[n..n + len].copy_from_slice(&opts[i..i + len]);
                    n += len;
                }
                i += len;
            }
        }
    }
    let padded = n.div_ceil(4) * 4;
    buf[n..padded].fill(0);
    Ok(padded)
}

/// Fragments the IPv4 packet at `l3_offset` so that every fragment's IP
/// packet is at most `mtu` bytes, appending the fragments (each with the
/// L2 header in front) to `out`. Returns the number of fragments, or 0 if
/// the packet already fits (nothing is emitted then: send the original).
///
/// Per RFC 791: fragment data on 8-byte boundaries; the same
/// identification; MF on all but the last (the last keeps the original MF,
/// so fragments of fragments work); offsets relative to the original's;
/// the first fragment carries every option, the others only the "copied"
/// ones; a fresh header checksum each. DF set: [`OffloadError::DontFragment`]
/// (the caller answers ICMP type 3 code 4 with the MTU, RFC 1191).
///
/// A pending partial L4 checksum (`needs_csum`) is completed into the
/// fragment that holds the checksum field, since no one can do it after the
/// payload is split. GSO super-packets must be segmented instead.
pub fn fragment_ipv4(
    pkt: &Packet,
    l3_offset: usize,
    mtu: u16,
    pool: &mut Pool,
    out: &mut Vec<Packet>,
) -> Result<usize, OffloadError> {
    let d = pkt.data();
    let o = pkt.meta.offload;
    if o.gso != Gso::None {
        return Err(OffloadError::Unsupported);
    }
    let ip = hdr::parse_ip(d, l3_offset, false)?;
    if ip.v6 {
        return Err(OffloadError::Unsupported);
    }
    let mtu_us = usize::from(mtu);
    if ip.end - ip.l3 <= mtu_us {
        return Ok(0);
    }
    if mtu < MIN_MTU {
        return Err(OffloadError::MtuTooSmall);
    }
    let v4 = hdr::ip4(d, ip.l3);
    let (df, mf_in, reserved) = (v4.dont_frag(), v4.more_frags(), v4.reserved_flag());
    if df {
        return Err(OffloadError::DontFragment { mtu });
    }
    let hlen1 = ip.l4 - ip.l3;
    let mut opts = [0u8; 40];
    let olen = copied_options(&d[ip.l3 + 20..ip.l4], &mut opts)?;
    let hlen2 = 20 + olen;
    // 68 - 60 = 8: at least one 8-byte block fits after any header.
    let max1 = (mtu_us - hlen1) & !7;
    let max2 = (mtu_us - hlen2) & !7;
    let data = &d[ip.l4..ip.end];
    let orig_off = usize::from(v4.frag_offset());
    if orig_off + data.len() > usize::from(u16::MAX) {
        return Err(OffloadError::Malformed);
    }
    let nfrag = 1 + data.len().saturating_sub(max1).div_ceil(max2);
    if pool.available() < nfrag {
        return Err(OffloadError::NoBuffers);
    }
    if ip.l3 + mtu_us > MAX_FRAME {
        return Err(OffloadError::TooBig);
    }

    // Where to write the completed partial checksum, relative to `data`.
    let pending = if o.needs_csum {
        let start = usize::from(o.csum_start);
        let field = start + usize::from(o.csum_offset);
        if start < ip.l4 || field + 2 > ip.end {
            return Err(OffloadError::BadCsumOffsets);
        }
        let c = finish(sum(&d[start..ip.end], 0));
        let c = if c == 0 { 0xffff } else { c };
        Some((field - ip.l4, c.to_be_bytes()))
    } else {
        None
    };

    let base = out.len();
    let mut pos = 0;
    let mut i = 0;
    while pos < data.len() {
        let first = i == 0;
        let (hl, max) = if first { (hlen1, max1) } else { (hlen2, max2) };
        let n = max.min(data.len() - pos);
        let last = pos + n == data.len();
        let Some(mut f) = pool.alloc() else {
            while out.len() > base {
                if let Some(p) = out.pop() {
                    pool.free(p);
                }
            }
            return Err(OffloadError::NoBuffers);
        };
        let l3 = ip.l3;
        let len = l3 + hl + n;
        let area = f.rx_area();
        area[..l3].copy_from_slice(&d[..l3]);
        if first {
            area[l3..l3 + hl].copy_from_slice(&d[l3..ip.l4]);
        } else {
            area[l3..l3 + 20].copy_from_slice(&d[l3..l3 + 20]);
            area[l3] = 0x40 | (hl / 4) as u8;
            area[l3 + 20..l3 + hl].copy_from_slice(&opts[..olen]);
        }
        area[l3 + hl..len].copy_from_slice(&data[pos..pos + n]);
        if let Some((at, bytes)) = pending {
            for (k, b) in bytes.iter().enumerate() {
                if (pos..pos + n).contains(&(at + k)) {
                    area[l3 + hl + at + k - pos] = *b;
                }
            }
        }
        f.set_len(len);
        f.meta = pkt.meta;
        f.meta.offload = Offload::default();
        let s = f.data_mut();
        hdr::set_ip_len(s, l3, false, len);
        let mut h = hdr::ip4_mut(s, l3);
        // In bytes, a multiple of 8 (max1, max2 are) below 2^16 (checked).
        h.set_frag(false, !last || mf_in, (orig_off + pos) as u16);
        h.set_reserved_flag(reserved);
        hdr::set_ipv4_csum(s, l3);
        out.push(f);
        pos += n;
        i += 1;
    }
    Ok(i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload::testutil::*;
    use proptest::prelude::*;

    fn rd16(d: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([d[at], d[at + 1]])
    }

    /// A tiny reassembler (RFC 815 style, without holes tracking: the
    /// fragments must tile the payload exactly). Checks each fragment's
    /// header on the way and returns (first fragment's header, payload, MF
    /// of the last fragment).
    fn reassemble(frags: &[Packet], l3: usize, mtu: usize) -> (Vec<u8>, Vec<u8>, bool) {
        let mut parts: Vec<(usize, bool, Vec<u8>)> = Vec::new();
        let mut id = None;
        let mut first_hdr = Vec::new();
        for f in frags {
            let d = f.data();
            assert!(ipv4_hdr_ok(d, l3), "fragment header checksum");
            let ihl = usize::from(d[l3] & 15) * 4;
            let total = usize::from(rd16(d, l3 + 2));
            assert_eq!(l3 + total, d.len());
            assert!(total <= mtu, "fragment {total} > mtu {mtu}");
            let w = rd16(d, l3 + 6);
            assert_eq!(w & 0x4000, 0);
            let off = usize::from(w & 0x1fff) * 8;
            let mf = w & 0x2000 != 0;
            assert_eq!(*id.get_or_insert(rd16(d, l3 + 4)), rd16(d, l3 + 4));
            if mf {
                assert_eq!(
                    (total - ihl) % 8,
                    0,
                    "non-last fragment data on 8-byte boundary"
                );
            }
            if parts.is_empty() {
                first_hdr = d[..l3 + ihl].to_vec();
            }
            parts.push((off, mf, d[l3 + ihl..].to_vec()));
        }
        parts.sort_by_key(|p| p.0);
        let base = parts[0].0;
        let mut data = Vec::new();
        for (off, mf, bytes) in &parts[..parts.len() - 1] {
            assert!(*mf);
            assert_eq!(off - base, data.len(), "fragments tile the payload");
            data.extend_from_slice(bytes);
        }
        let (off, mf, bytes) = parts.last().unwrap();
        assert_eq!(off - base, data.len());
        data.extend_from_slice(bytes);
        (first_hdr, data, *mf)
    }

    fn frame(opts: &[u8], frag: u16, n: usize) -> Vec<u8> {
        let mut f = eth(0x0800);
        let ihl = 20 + opts.len();
        f.extend_from_slice(&ipv4(ihl + n, 0xbeef, frag, 64, 17, opts));
        f.extend_from_slice(&payload(n, 4));
        f
    }

    #[test]
    fn fragments_and_reassembles() {
        let mut pool = Pool::new(64);
        let f = frame(&[], 0, 4000);
        let p = packet(&mut pool, &f, 14);
        let mut out = Vec::new();
        assert_eq!(fragment_ipv4(&p, 14, 1500, &mut pool, &mut out), Ok(3));
        let (h, data, mf) = reassemble(&out, 14, 1500);
        assert!(!mf);
        assert_eq!(data, f[34..]);
        assert_eq!(h[..16], f[..16], "L2 header, version/IHL/TOS kept");
        assert_eq!(h[18..20], f[18..20], "identification kept");
        assert_eq!(h[22..24], f[22..24], "TTL/protocol kept");
        assert_eq!(h[26..34], f[26..34], "addresses kept");
        assert_eq!(out[0].len(), 14 + 1500);
    }

    #[test]
    fn only_copied_options_after_the_first() {
        // Record Route (type 7, not copied), NOP, Loose Source Route
        // (type 0x83, copied), padded to 24 option bytes... here 8 + 1 + 11 + pad.
        let mut opts = vec![7, 7, 4, 0, 0, 0, 0];
        opts.push(1);
        opts.extend_from_slice(&[0x83, 11, 4, 10, 0, 0, 1, 10, 0, 0, 2]);
        while opts.len() % 4 != 0 {
            opts.push(0);
        }
        let mut pool = Pool::new(64);
        let f = frame(&opts, 0, 3000);
        let p = packet(&mut pool, &f, 14);
        let mut out = Vec::new();
        let n = fragment_ipv4(&p, 14, 576, &mut pool, &mut out).unwrap();
        assert!(n > 2);
        assert_eq!(out[0].data()[34..34 + opts.len()], opts[..]);
        for later in &out[1..] {
            let d = later.data();
            assert_eq!(d[14], 0x48, "IHL 8: 20 + 12 bytes of copied options");
            assert_eq!(d[34..45], [0x83, 11, 4, 10, 0, 0, 1, 10, 0, 0, 2]);
            assert_eq!(d[45], 0, "padded with EOL");
        }
        let (_, data, _) = reassemble(&out, 14, 576);
        assert_eq!(data, f[14 + 20 + opts.len()..]);
    }

    #[test]
    fn fragment_of_a_fragment_keeps_offsets_and_mf() {
        let mut pool = Pool::new(64);
        let f = frame(&[], 0x2000 | 100, 2000);
        let p = packet(&mut pool, &f, 14);
        let mut out = Vec::new();
        fragment_ipv4(&p, 14, 1000, &mut pool, &mut out).unwrap();
        assert_eq!(rd16(out[0].data(), 20) & 0x1fff, 100);
        let (_, data, mf) = reassemble(&out, 14, 1000);
        assert!(mf, "the original was not the last fragment");
        assert_eq!(data, f[34..]);
    }

    #[test]
    fn dont_fragment_small_mtu_and_fits() {
        let mut pool = Pool::new(8);
        let mut out = Vec::new();
        let p = packet(&mut pool, &frame(&[], 0x4000, 2000), 14);
        assert_eq!(
            fragment_ipv4(&p, 14, 1400, &mut pool, &mut out),
            Err(OffloadError::DontFragment { mtu: 1400 })
        );
        let p = packet(&mut pool, &frame(&[], 0, 2000), 14);
        assert_eq!(
            fragment_ipv4(&p, 14, 67, &mut pool, &mut out),
            Err(OffloadError::MtuTooSmall)
        );
        assert_eq!(fragment_ipv4(&p, 14, 2020, &mut pool, &mut out), Ok(0));
        assert!(out.is_empty());
        let p6 = packet(&mut pool, &udp_frame(true, &[0; 3000]), 14);
        assert_eq!(
            fragment_ipv4(&p6, 14, 1280, &mut pool, &mut out),
            Err(OffloadError::Unsupported)
        );
    }

    #[test]
    fn pending_checksum_is_completed() {
        let mut pool = Pool::new(16);
        let mut f = udp_frame(false, &payload(3000, 8));
        // Make it a NEEDS_CSUM packet: checksum field = folded pseudo sum.
        let ulen = f.len() - 34;
        let ph = pseudo(&f, 14, 17, ulen);
        let partial = !rfc1071(&ph);
        f[40..42].copy_from_slice(&partial.to_be_bytes());
        assert!(!l4_ok(&f, 14));
        let mut p = packet(&mut pool, &f, 14);
        p.meta.offload.needs_csum = true;
        p.meta.offload.csum_start = 34;
        p.meta.offload.csum_offset = 6;
        let mut out = Vec::new();
        assert_eq!(fragment_ipv4(&p, 14, 1500, &mut pool, &mut out), Ok(3));
        let (h, data, _) = reassemble(&out, 14, 1500);
        let mut whole = h.clone();
        whole.extend_from_slice(&data);
        let total = (whole.len() - 14) as u16;
        whole[16..18].copy_from_slice(&total.to_be_bytes());
        assert!(l4_ok(&whole, 14), "reassembled UDP checksum verifies");
        assert!(out.iter().all(|f| !f.meta.offload.needs_csum));
    }

    proptest! {
        #[test]
        fn reassembly_gives_back_the_original(n in 1usize..9000, mtu in 68u16..9100, optwords in 0usize..10) {
            let mut opts = Vec::new();
            for k in 0..optwords {
                // Alternate copied (0x88, stream id) and uncopied (0x44-ish
                // timestamp-like, type 68) 4-byte options.
                opts.extend_from_slice(&[if k % 2 == 0 { 0x88 } else { 68 }, 4, k as u8, 1]);
            }
            // Enough buffers for the worst case: 8 data bytes per fragment.
            let per = ((usize::from(mtu) - 60) & !7).max(8);
            let mut pool = Pool::new(n / per + 3);
            let f = frame(&opts, 0, n);
            let p = packet(&mut pool, &f, 14);
            let mut out = Vec::new();
            let r = fragment_ipv4(&p, 14, mtu, &mut pool, &mut out);
            if f.len() - 14 <= usize::from(mtu) {
                prop_assert_eq!(r, Ok(0));
            } else {
                prop_assert_eq!(r, Ok(out.len()));
                let (_, data, mf) = reassemble(&out, 14, usize::from(mtu));
                prop_assert!(!mf);
                prop_assert_eq!(&data[..], &f[14 + 20 + opts.len()..]);
            }
        }

        #[test]
        fn never_panics_on_mutated_headers(n in 0usize..3000, mtu in any::<u16>(),
                        muts in proptest::collection::vec((0usize..64, any::<u8>()), 0..8)) {
            let mut pool = Pool::new(100);
            let mut f = frame(&[0x88, 4, 0, 1, 7, 3, 4, 0], 0, n);
            for (at, v) in muts {
                if at < f.len() { f[at] = v; }
            }
            let p = packet(&mut pool, &f, 14);
            let mut out = Vec::new();
            if let Ok(k) = fragment_ipv4(&p, 14, mtu, &mut pool, &mut out) {
                prop_assert_eq!(k, out.len());
                for fr in &out {
                    prop_assert!(fr.len() - 14 <= usize::from(mtu));
                }
            }
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..3000), l3 in 0usize..40,
                        mtu in any::<u16>(), needs in any::<bool>(), cs in any::<u16>(), co in any::<u16>()) {
            let mut pool = Pool::new(100);
            let mut p = packet(&mut pool, &bytes, l3 as u16);
            p.meta.offload.needs_csum = needs;
            p.meta.offload.csum_start = cs;
            p.meta.offload.csum_offset = co;
            let mut out = Vec::new();
            let before = pool.available();
            if fragment_ipv4(&p, l3, mtu, &mut pool, &mut out).is_err() {
                prop_assert!(out.is_empty());
                prop_assert_eq!(pool.available(), before);
            }
        }
    }
}
