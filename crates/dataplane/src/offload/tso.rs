//! Marking a large TCP packet as a super-packet: the reverse view of
//! [`gso`](super::gso). A tunnel whose underlay carries large frames (a veth
//! or virtio underlay with a 64 KB MTU between two gateways) delivers whole
//! super-packets, decapsulated as single TCP packets far above the host
//! link's MTU. Instead of answering "fragmentation needed" for data the
//! sending host cut into MSS-sized pieces in the first place, the gateway
//! hands the packet on as a TCP super-packet with `gso_size` = the egress
//! MSS: the kernel (through a vnet header) or [`gso::segment`](super::gso)
//! cuts it, exactly as Linux forwards GRO'd packets.
//!
//! Only a complete, verified TCP packet is marked: its checksum is checked
//! (unless the packet already carries `csum_valid` or a partial checksum),
//! then replaced by the pseudo-header sum with `needs_csum` set (the
//! CHECKSUM_PARTIAL convention of [`csum`](super::csum)).

use super::csum::{fold, verify_l4_at};
use super::hdr;
use super::OffloadError;
use packet::buffer::{Gso, Offload, Packet};

const PROTO_TCP: u8 = 6;

/// Largest TCP payload per segment for an IP MTU of `mtu`, given the packet's
/// own IP + TCP header lengths.
pub fn mss_for(pkt: &Packet, l3: usize, mtu: usize) -> Result<usize, OffloadError> {
    tcp_at(pkt.data(), l3, mtu, false).map(|(_, _, mss)| mss)
}

/// The TCP packet at `l3`: its IP view, TCP header length and the payload
/// per segment that fits `mtu` (what [`mss_for`], [`mark`] and [`shrink`]
/// all start from). `whole`: a fragment is refused as unsupported (a
/// fragment's payload cannot be cut into TCP segments).
fn tcp_at(
    d: &[u8],
    l3: usize,
    mtu: usize,
    whole: bool,
) -> Result<(hdr::Ip, usize, usize), OffloadError> {
    let ip = hdr::parse_ip(d, l3, true)?;
    if ip.proto != PROTO_TCP || (whole && ip.is_fragment(d)) {
        return Err(OffloadError::Unsupported);
    }
    let thl = hdr::tcp_hdr_len(d, &ip)?;
    let hdrs = ip.l4 - l3 + thl;
    if mtu <= hdrs {
        return Err(OffloadError::MtuTooSmall);
    }
    Ok((ip, thl, mtu - hdrs))
}

/// Length of the IP + L4 headers of the super-packet at `l3`, read from the
/// packet itself. The virtio-net header's `hdr_len` cannot be used for this:
/// the kernel fills it with `skb_headlen()` (include/linux/virtio_net.h
/// `virtio_net_hdr_from_skb`: "a hint as to how much should be linear"),
/// which includes payload whenever TCP put data in the skb's linear area —
/// small retransmissions do — so a 2-segment super-packet can claim 2948
/// bytes of headers.
pub fn segment_hdr_len(pkt: &Packet, l3: usize) -> Result<usize, OffloadError> {
    let d = pkt.data();
    let ip = hdr::parse_ip(d, l3, true)?;
    let l4 = match ip.proto {
        PROTO_TCP => hdr::tcp_hdr_len(d, &ip)?,
        hdr::PROTO_UDP => hdr::UDP_LEN,
        _ => return Err(OffloadError::Unsupported),
    };
    Ok(ip.l4 - l3 + l4)
}

/// Turns the TCP packet at `l3` into a super-packet of `mtu`-sized segments.
/// `Ok(false)` if it already fits (nothing changed).
pub fn mark(pkt: &mut Packet, l3: usize, mtu: usize) -> Result<bool, OffloadError> {
    if pkt.meta.offload.gso != Gso::None {
        return Err(OffloadError::Unsupported);
    }
    let d = pkt.data();
    let (ip, thl, mss) = tcp_at(d, l3, mtu, true)?;
    let mss = mss.min(usize::from(u16::MAX));
    if ip.end - ip.l4 - thl <= mss {
        return Ok(false);
    }
    let o = pkt.meta.offload;
    if o.needs_csum {
        // A partial checksum must start at this TCP header to be reused.
        if usize::from(o.csum_start) != ip.l4 || o.csum_offset != 16 {
            return Err(OffloadError::BadCsumOffsets);
        }
    } else if !o.csum_valid && !verify_l4_at(&d[..ip.end], l3) {
        return Err(OffloadError::Malformed);
    }
    pkt.truncate(ip.end);
    let d = pkt.data_mut();
    let pseudo = fold(hdr::pseudo_sum(d, &ip, ip.end - ip.l4));
    hdr::tcp_mut(d, ip.l4).set_checksum(pseudo);
    pkt.meta.offload = Offload {
        needs_csum: true,
        csum_valid: false,
        csum_start: ip.l4 as u16,
        csum_offset: 16,
        gso: if ip.v6 { Gso::TcpV6 } else { Gso::TcpV4 },
        gso_size: mss as u16,
        hdr_len: (ip.l4 + thl) as u16,
    };
    Ok(true)
}

/// Lowers a TCP super-packet's segment size to what fits `mtu`. A packet
/// decapsulated from a large-MTU underlay carries the peer's large segments
/// (multiples of the sender's MSS, tunnel-encap's `big_mss`), which the
/// hosts' link cannot take; any smaller size is as valid for TCP
/// segmentation. `Ok(false)` if its segments already fit.
pub fn shrink(pkt: &mut Packet, l3: usize, mtu: usize) -> Result<bool, OffloadError> {
    let o = pkt.meta.offload;
    if !matches!(o.gso, Gso::TcpV4 | Gso::TcpV6) {
        return Err(OffloadError::Unsupported);
    }
    let d = pkt.data();
    let (ip, thl, mss) = tcp_at(d, l3, mtu, true)?;
    let mss = mss.min(usize::from(u16::MAX));
    if usize::from(o.gso_size) <= mss {
        return Ok(false);
    }
    if o.needs_csum {
        // A partial checksum must start at this TCP header to be reused.
        if usize::from(o.csum_start) != ip.l4 || o.csum_offset != 16 {
            return Err(OffloadError::BadCsumOffsets);
        }
    } else {
        if !o.csum_valid && !verify_l4_at(&d[..ip.end], l3) {
            return Err(OffloadError::Malformed);
        }
        pkt.truncate(ip.end);
        let d = pkt.data_mut();
        let pseudo = fold(hdr::pseudo_sum(d, &ip, ip.end - ip.l4));
        hdr::tcp_mut(d, ip.l4).set_checksum(pseudo);
        pkt.meta.offload.needs_csum = true;
        pkt.meta.offload.csum_valid = false;
        pkt.meta.offload.csum_start = ip.l4 as u16;
        pkt.meta.offload.csum_offset = 16;
    }
    pkt.meta.offload.gso_size = mss as u16;
    pkt.meta.offload.hdr_len = (ip.l4 + thl) as u16;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload::{csum, gso};
    use packet::buffer::Pool;

    /// Ethernet + IPv4 + TCP (with a 12-byte timestamp option) carrying
    /// `payload` bytes, all checksums complete.
    fn big_tcp(pool: &mut Pool, payload: usize) -> Packet {
        let mut f = vec![0u8; 14 + 20 + 32 + payload];
        f[12] = 0x08;
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + 32 + payload) as u16).to_be_bytes());
        ip[6] = 0x40;
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[10, 1, 0, 2]);
        ip[16..20].copy_from_slice(&[10, 2, 0, 2]);
        let c = csum::finish(csum::sum(&f[14..34], 0));
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let t = &mut f[34..66];
        t[0..2].copy_from_slice(&1234u16.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[4..8].copy_from_slice(&1000u32.to_be_bytes());
        t[12] = 8 << 4;
        t[13] = 0x10;
        t[20..22].copy_from_slice(&[1, 1]);
        t[22..24].copy_from_slice(&[8, 10]);
        for (i, b) in f[66..].iter_mut().enumerate() {
            *b = (i * 7 % 251) as u8;
        }
        let mut p = pool.alloc().unwrap();
        assert!(p.set_data(&f));
        let ip = hdr::parse_ip(p.data(), 14, false).unwrap();
        let s = hdr::pseudo_sum(p.data(), &ip, ip.end - ip.l4);
        let c = csum::finish(csum::sum(&p.data()[ip.l4..], s));
        p.data_mut()[50..52].copy_from_slice(&c.to_be_bytes());
        assert!(verify_l4_at(p.data(), 14));
        p
    }

    #[test]
    fn marks_and_segments_back_to_valid_mss_segments() {
        let mut pool = Pool::new(64);
        let mut p = big_tcp(&mut pool, 30_000);
        assert!(mark(&mut p, 14, 1500).unwrap());
        let o = p.meta.offload;
        assert_eq!(o.gso, Gso::TcpV4);
        assert_eq!(o.gso_size, 1448);
        assert_eq!(o.hdr_len, 66);
        assert!(o.needs_csum);
        let mut segs = Vec::with_capacity(32);
        let n = gso::segment_with(&p, &gso::SegmentSpec::plain(14), &mut pool, &mut segs).unwrap();
        assert_eq!(n, 30_000usize.div_ceil(1448));
        for s in &segs {
            assert!(s.len() - 14 <= 1500);
            assert!(
                verify_l4_at(s.data(), 14),
                "every segment's checksum verifies"
            );
        }
    }

    #[test]
    fn fitting_packets_are_left_alone() {
        let mut pool = Pool::new(4);
        let mut p = big_tcp(&mut pool, 1000);
        assert!(!mark(&mut p, 14, 1500).unwrap());
        assert_eq!(p.meta.offload, Offload::default());
    }

    #[test]
    fn a_bad_checksum_is_refused() {
        let mut pool = Pool::new(4);
        let mut p = big_tcp(&mut pool, 5000);
        p.data_mut()[100] ^= 1;
        assert_eq!(mark(&mut p, 14, 1500), Err(OffloadError::Malformed));
        assert_eq!(p.meta.offload.gso, Gso::None);
    }

    #[test]
    fn mss_for_counts_options() {
        let mut pool = Pool::new(4);
        let p = big_tcp(&mut pool, 100);
        assert_eq!(mss_for(&p, 14, 1500).unwrap(), 1448);
        assert_eq!(mss_for(&p, 14, 40), Err(OffloadError::MtuTooSmall));
    }

    #[test]
    fn large_segments_shrink_to_the_egress_mss() {
        let mut pool = Pool::new(64);
        let mut p = big_tcp(&mut pool, 30_000);
        // As a 9000-byte underlay's peer cut it: 8 × 1448-byte segments.
        assert!(mark(&mut p, 14, 52 + 8 * 1448).unwrap());
        assert_eq!(p.meta.offload.gso_size, 8 * 1448);
        assert!(shrink(&mut p, 14, 1500).unwrap());
        assert_eq!(p.meta.offload.gso_size, 1448);
        assert_eq!(p.meta.offload.hdr_len, 66);
        assert!(!shrink(&mut p, 14, 1500).unwrap(), "already fits");
        let mut segs = Vec::with_capacity(32);
        let n = gso::segment_with(&p, &gso::SegmentSpec::plain(14), &mut pool, &mut segs).unwrap();
        assert_eq!(n, 30_000usize.div_ceil(1448));
        assert!(segs
            .iter()
            .all(|s| s.len() - 14 <= 1500 && verify_l4_at(s.data(), 14)));
        let mut plain = big_tcp(&mut pool, 3000);
        assert_eq!(shrink(&mut plain, 14, 1500), Err(OffloadError::Unsupported));
    }
}
