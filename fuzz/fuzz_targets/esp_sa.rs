//! What the ESP fuzz targets share: a tunnel-mode SA's configuration, a
//! packet loaded from bytes, and the bound every inner packet that
//! `InboundSa::open_slices` reports must keep.

use packet::{Packet, Pool};
use std::net::{IpAddr, Ipv4Addr};
use std::ops::Range;
use vecgate_ipsec::{
    Algorithm, Decrypted, EspError, InboundSa, Lifetime, SaConfig, TunnelEndpoints,
};
use zeroize::Zeroizing;

/// An SA between 192.0.2.1 and 192.0.2.2 whose key byte `i` is `i × step`
/// (two targets with different steps never share a key by accident).
pub fn sa_config(alg: Algorithm, spi: u32, esn: bool, step: usize) -> SaConfig {
    SaConfig {
        spi,
        algorithm: alg,
        key: Zeroizing::new((0..alg.key_len()).map(|i| (i * step) as u8).collect()),
        esn,
        replay_window: 64,
        lifetime: Lifetime::default(),
        tunnel: TunnelEndpoints {
            local: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            remote: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
        },
        encap: None,
        df: true,
    }
}

/// A packet from `pool` holding `bytes`; `None` (nothing held) when the
/// pool is empty or the bytes do not fit.
pub fn load(pool: &mut Pool, bytes: &[u8]) -> Option<Packet> {
    let mut p = pool.alloc()?;
    if p.set_data(bytes) {
        Some(p)
    } else {
        pool.free(p);
        None
    }
}

/// Every inner packet `open_slices` accepted lies inside its own slice.
pub fn assert_inside(
    inb: &InboundSa,
    res: &[Result<Decrypted, EspError>],
    ranges: &[Range<usize>],
) {
    for (r, range) in res.iter().zip(ranges) {
        if let Ok(d) = r {
            let at = range.start + inb.esp_front();
            assert!(at + d.inner_len <= range.end);
        }
    }
}
