//! Longest-prefix-match FIBs, one IPv4 and one IPv6 per VRF.
//!
//! Layout: one hash table per prefix length *present* in the table, probed
//! from the longest length down (the scheme of many software routers when
//! the set of lengths in use is small, as it is for a gateway). A lookup is
//! at most 33 (IPv4) / 129 (IPv6) probes, in practice a handful, and never
//! allocates. Values are adjacency indices into [`crate::tables::Tables`]'s
//! adjacency vector, so a route is resolved once at table build time, not per
//! packet.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// A small multiplicative hasher for fixed-width integer keys: SipHash's
/// DoS resistance buys nothing here (keys come from the configuration, not
/// the wire), and it is several times slower.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

const FX_K: u64 = 0x517c_c1b7_2722_0a95;

impl Hasher for FxHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(FX_K);
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(FX_K);
    }
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.write_u64(i as u64);
        self.write_u64((i >> 64) as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

/// `HashMap` with [`FxHasher`].
pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// An address as an unsigned integer of `BITS` bits (u32 for IPv4, u128 for
/// IPv6), so one LPM implementation serves both families.
pub trait Key: Copy + Eq + Hash + Ord + fmt::Debug {
    const BITS: u8;
    /// The address with every bit after the first `len` cleared.
    fn mask(self, len: u8) -> Self;
}

impl Key for u32 {
    const BITS: u8 = 32;
    #[inline]
    fn mask(self, len: u8) -> Self {
        if len == 0 {
            0
        } else if len >= 32 {
            self
        } else {
            self & (u32::MAX << (32 - len))
        }
    }
}

impl Key for u128 {
    const BITS: u8 = 128;
    #[inline]
    fn mask(self, len: u8) -> Self {
        if len == 0 {
            0
        } else if len >= 128 {
            self
        } else {
            self & (u128::MAX << (128 - len))
        }
    }
}

/// Longest-prefix-match table from prefixes of `K` to values `V`.
#[derive(Clone)]
pub struct Lpm<K: Key, V: Copy> {
    /// (length, table), sorted by length, longest first.
    levels: Vec<(u8, FxMap<K, V>)>,
    len: usize,
}

impl<K: Key, V: Copy> Default for Lpm<K, V> {
    fn default() -> Self {
        Lpm {
            levels: Vec::new(),
            len: 0,
        }
    }
}

impl<K: Key, V: Copy> Lpm<K, V> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts or replaces `prefix/len`; host bits of `prefix` are ignored.
    /// Returns the previous value. Lengths above `K::BITS` are clamped.
    pub fn insert(&mut self, prefix: K, len: u8, value: V) -> Option<V> {
        let len = len.min(K::BITS);
        let key = prefix.mask(len);
        let pos = match self.levels.binary_search_by(|(l, _)| len.cmp(l)) {
            Ok(i) => i,
            Err(i) => {
                self.levels.insert(i, (len, FxMap::default()));
                i
            }
        };
        let old = self.levels[pos].1.insert(key, value);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Removes `prefix/len`, returning its value.
    pub fn remove(&mut self, prefix: K, len: u8) -> Option<V> {
        let len = len.min(K::BITS);
        let pos = self.levels.binary_search_by(|(l, _)| len.cmp(l)).ok()?;
        let old = self.levels[pos].1.remove(&prefix.mask(len));
        if old.is_some() {
            self.len -= 1;
            if self.levels[pos].1.is_empty() {
                self.levels.remove(pos);
            }
        }
        old
    }

    /// The value of the longest prefix containing `addr`, and that prefix's
    /// length. No allocation.
    #[inline]
    pub fn lookup(&self, addr: K) -> Option<(V, u8)> {
        for (len, table) in &self.levels {
            if let Some(v) = table.get(&addr.mask(*len)) {
                return Some((*v, *len));
            }
        }
        None
    }

    /// The value stored for exactly `prefix/len`.
    pub fn get_exact(&self, prefix: K, len: u8) -> Option<V> {
        let len = len.min(K::BITS);
        let pos = self.levels.binary_search_by(|(l, _)| len.cmp(l)).ok()?;
        self.levels[pos].1.get(&prefix.mask(len)).copied()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every (prefix, length, value), longest prefixes first, sorted within a
    /// length (for `show ip fib` and tests; allocates).
    pub fn entries(&self) -> Vec<(K, u8, V)> {
        let mut out = Vec::with_capacity(self.len);
        for (len, table) in &self.levels {
            let mut level: Vec<(K, u8, V)> = table.iter().map(|(k, v)| (*k, *len, *v)).collect();
            level.sort_by_key(|e| e.0);
            out.extend(level);
        }
        out
    }
}

/// IPv4 FIB: address → adjacency index.
pub type Fib4 = Lpm<u32, u32>;
/// IPv6 FIB: address → adjacency index.
pub type Fib6 = Lpm<u128, u32>;

/// An IP prefix (address and length), as written in the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

/// Why a prefix is not valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixError(pub String);

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad prefix: {}", self.0)
    }
}

impl std::error::Error for PrefixError {}

impl Prefix {
    /// A prefix; the length must fit the family (0..=32 / 0..=128). The
    /// address keeps its host bits (an interface address such as
    /// 10.0.0.1/24 is a `Prefix` too); use [`Prefix::network`] to drop them.
    pub fn new(addr: IpAddr, len: u8) -> Result<Self, PrefixError> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return Err(PrefixError(format!("{addr}/{len}: length above {max}")));
        }
        Ok(Prefix { addr, len })
    }

    pub fn v4(a: Ipv4Addr, len: u8) -> Result<Self, PrefixError> {
        Self::new(IpAddr::V4(a), len)
    }

    pub fn v6(a: Ipv6Addr, len: u8) -> Result<Self, PrefixError> {
        Self::new(IpAddr::V6(a), len)
    }

    /// The prefix with host bits cleared.
    pub fn network(&self) -> Prefix {
        let addr = match self.addr {
            IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a).mask(self.len))),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a).mask(self.len))),
        };
        Prefix {
            addr,
            len: self.len,
        }
    }

    /// Whether `ip` lies inside this prefix (same family only).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                u32::from(p).mask(self.len) == u32::from(a).mask(self.len)
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                u128::from(p).mask(self.len) == u128::from(a).mask(self.len)
            }
            _ => false,
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = PrefixError;
    /// "10.0.0.0/8", "2001:db8::/32"; a bare address is a host prefix.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| PrefixError(s.to_string()))?;
        let len = match l {
            Some(l) => l.parse().map_err(|_| PrefixError(s.to_string()))?,
            None if addr.is_ipv4() => 32,
            None => 128,
        };
        Prefix::new(addr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive<K: Key>(routes: &[(K, u8, u32)], addr: K) -> Option<(u32, u8)> {
        routes
            .iter()
            .filter(|(p, l, _)| p.mask(*l) == addr.mask(*l))
            .max_by_key(|(_, l, _)| *l)
            .map(|(_, l, v)| (*v, *l))
    }

    #[test]
    fn default_route_and_host_routes() {
        let mut f = Fib4::new();
        f.insert(0, 0, 1);
        f.insert(u32::from(Ipv4Addr::new(10, 0, 0, 0)), 8, 2);
        f.insert(u32::from(Ipv4Addr::new(10, 1, 2, 3)), 32, 3);
        assert_eq!(f.lookup(u32::from(Ipv4Addr::new(1, 1, 1, 1))), Some((1, 0)));
        assert_eq!(
            f.lookup(u32::from(Ipv4Addr::new(10, 9, 9, 9))),
            Some((2, 8))
        );
        assert_eq!(
            f.lookup(u32::from(Ipv4Addr::new(10, 1, 2, 3))),
            Some((3, 32))
        );
        assert_eq!(f.remove(u32::from(Ipv4Addr::new(10, 1, 2, 3)), 32), Some(3));
        assert_eq!(
            f.lookup(u32::from(Ipv4Addr::new(10, 1, 2, 3))),
            Some((2, 8))
        );
        assert_eq!(f.len(), 2);
        let mut g = Fib6::new();
        g.insert(u128::from("2001:db8::".parse::<Ipv6Addr>().unwrap()), 32, 7);
        g.insert(u128::MAX, 128, 8);
        assert_eq!(
            g.lookup(u128::from("2001:db8::5".parse::<Ipv6Addr>().unwrap())),
            Some((7, 32))
        );
        assert_eq!(g.lookup(u128::MAX), Some((8, 128)));
        assert_eq!(g.lookup(1), None);
    }

    #[test]
    fn prefix_parse_and_contains() {
        let p: Prefix = "10.1.0.0/16".parse().unwrap();
        assert!(p.contains("10.1.200.3".parse().unwrap()));
        assert!(!p.contains("10.2.0.1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert!("::/129".parse::<Prefix>().is_err());
        assert_eq!(
            "10.1.2.3/8"
                .parse::<Prefix>()
                .unwrap()
                .network()
                .to_string(),
            "10.0.0.0/8"
        );
        assert_eq!("::1".parse::<Prefix>().unwrap().len, 128);
    }

    proptest! {
        #[test]
        fn v4_matches_naive(routes in prop::collection::vec((any::<u32>(), 0u8..=32, any::<u32>()), 0..64),
                            probes in prop::collection::vec(any::<u32>(), 1..64)) {
            let mut f = Fib4::new();
            let mut model: Vec<(u32, u8, u32)> = Vec::new();
            for (p, l, v) in &routes {
                f.insert(*p, *l, *v);
                model.retain(|(q, m, _)| !(m == l && q.mask(*m) == p.mask(*l)));
                model.push((*p, *l, *v));
            }
            // Probe random addresses and addresses inside every route.
            let inside = routes.iter().map(|(p, _, _)| *p ^ 1);
            for a in probes.iter().copied().chain(inside) {
                prop_assert_eq!(f.lookup(a), naive(&model, a));
            }
        }

        #[test]
        fn v6_matches_naive(routes in prop::collection::vec((any::<u128>(), 0u8..=128, any::<u32>()), 0..64),
                            probes in prop::collection::vec(any::<u128>(), 1..64)) {
            let mut f = Fib6::new();
            let mut model: Vec<(u128, u8, u32)> = Vec::new();
            for (p, l, v) in &routes {
                f.insert(*p, *l, *v);
                model.retain(|(q, m, _)| !(m == l && q.mask(*m) == p.mask(*l)));
                model.push((*p, *l, *v));
            }
            let inside = routes.iter().map(|(p, _, _)| *p ^ 1);
            for a in probes.iter().copied().chain(inside) {
                prop_assert_eq!(f.lookup(a), naive(&model, a));
            }
        }
    }
}
