//! The read-mostly state every worker routes with: interfaces, VRFs and
//! their FIBs, and the adjacencies FIB entries point to.
//!
//! The control thread builds a complete new [`Tables`] (with
//! [`TablesBuilder`]) and publishes it with [`SharedTables::store`]; workers
//! `load` it once per vector. Nothing is ever mutated in place, so a worker
//! never waits for the control thread and never sees a half-built table.

use crate::fib::{Fib4, Fib6, FxMap, Key, Lpm, Prefix};
use crate::tunnel::{DecapKey, KeyClass, Tunnel, TunnelDef, TunnelKind, TunnelTable, NO_TUNNEL};
use arc_swap::ArcSwap;
use std::fmt::{self, Write as _};
use std::hash::Hasher as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

mod builder;
mod patch;
pub use builder::{BuildError, TablesBuilder};
pub use patch::RoutePatch;

/// What a route sends matching packets to, as configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// An attached subnet on `port`: the next hop is the destination itself.
    Connected { port: u16 },
    /// One of our own addresses: delivered to ip-local.
    Local,
    /// Through a gateway; resolved recursively at build time to the port of
    /// the connected route covering `next_hop` (or, with `port`, pinned to
    /// that port, as an IPv6 link-local next hop needs).
    Via { next_hop: IpAddr, port: Option<u16> },
    /// Out of a point-to-point port, no neighbour resolution (the frame is
    /// sent to the Ethernet broadcast address).
    Port { port: u16 },
    /// Silently discarded (blackhole).
    Drop,
    /// Discarded with an ICMP destination unreachable.
    Unreachable,
    /// Into an overlay tunnel (reserved for the tunnel nodes).
    Tunnel(u32),
    /// Equal-cost multipath: member `i` of [`TablesBuilder::add_route_group`]'s
    /// groups. Members that do not resolve are left out; a group with none
    /// left is not installed at all (a learned route whose next hops are all
    /// unreachable must not hide a less specific route). Met while resolving
    /// another route's next hop, a group is unreachable (no recursion
    /// through multipath routes).
    Group(u32),
}

/// What a FIB entry resolves to: the forwarding decision, computed once at
/// table build time (VPP's adjacency).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Adj {
    Local,
    /// Attached subnet: resolve the packet's destination on `port`.
    Glean {
        port: u16,
    },
    /// Resolve `nh` on `port` and send there.
    Neighbor {
        port: u16,
        nh: IpAddr,
    },
    /// Point-to-point: no resolution.
    Port {
        port: u16,
    },
    Drop,
    Unreachable,
    Tunnel(u32),
    /// Equal-cost multipath: `count` adjacency indices at
    /// `Tables::ecmp[first..]`; a flow hash picks one per packet
    /// ([`Tables::lookup4_flow`]), so a flow keeps its path.
    Ecmp {
        first: u32,
        count: u16,
    },
}

/// Flags of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfFlags {
    /// The port exchanges GSO super-packets / partial checksums with the
    /// kernel, so interface-output need not segment in software.
    pub offloads: bool,
    /// Receive segment coalescing is enabled on this interface.
    pub rsc: bool,
    /// IPv6 enabled: the interface has an EUI-64 link-local address.
    pub ipv6: bool,
}

impl Default for IfFlags {
    fn default() -> Self {
        IfFlags {
            offloads: false,
            rsc: false,
            ipv6: true,
        }
    }
}

/// One interface (a port of every worker).
#[derive(Clone, Debug)]
pub struct Interface {
    pub port: u16,
    pub name: String,
    pub mac: [u8; 6],
    /// L3 MTU.
    pub mtu: u32,
    /// Index of the VRF in [`Tables::vrfs`] (what `Meta::vrf` holds).
    pub vrf: u16,
    pub v4: Vec<(Ipv4Addr, u8)>,
    pub v6: Vec<(Ipv6Addr, u8)>,
    /// EUI-64 link-local address (RFC 4291 §2.5.1, RFC 4862 §5.3).
    pub ll6: Option<Ipv6Addr>,
    pub flags: IfFlags,
    /// Adjacency for "resolve the destination on this port" (IPv4 / IPv6);
    /// used for replies to link-local sources.
    pub glean4: u32,
    pub glean6: u32,
}

impl Interface {
    pub fn has_v4(&self, a: Ipv4Addr) -> bool {
        self.v4.iter().any(|(x, _)| *x == a)
    }

    pub fn has_v6(&self, a: Ipv6Addr) -> bool {
        self.ll6 == Some(a) || self.v6.iter().any(|(x, _)| *x == a)
    }

    /// Whether `ip` is on this interface's link: in one of its subnets
    /// (IPv6 link-local always is). Only on-link senders create neighbour
    /// entries (an off-link address claimed in ARP or ND is not learned).
    pub fn on_link(&self, ip: IpAddr) -> bool {
        fn same(a: u128, b: u128, len: u8, bits: u8) -> bool {
            let len = u32::from(len.min(bits));
            len == 0 || (a ^ b) >> (u32::from(bits) - len) == 0
        }
        match ip {
            IpAddr::V4(a) => self
                .v4
                .iter()
                .any(|(x, l)| same(u32::from(a).into(), u32::from(*x).into(), *l, 32)),
            IpAddr::V6(a) => {
                a.segments()[0] & 0xffc0 == 0xfe80
                    || self
                        .v6
                        .iter()
                        .any(|(x, l)| same(u128::from(a), u128::from(*x), *l, 128))
            }
        }
    }

    /// Primary IPv4 address (source of ICMP errors sent from this port).
    pub fn primary_v4(&self) -> Option<Ipv4Addr> {
        self.v4.first().map(|(a, _)| *a)
    }

    /// A global IPv6 address if any, else the link-local one.
    pub fn primary_v6(&self) -> Option<Ipv6Addr> {
        self.v6.first().map(|(a, _)| *a).or(self.ll6)
    }

    /// Whether `a` is the solicited-node multicast group of one of our
    /// IPv6 addresses (RFC 4291 §2.7.1).
    pub fn is_our_solicited_node(&self, a: Ipv6Addr) -> bool {
        self.ll6
            .iter()
            .chain(self.v6.iter().map(|(x, _)| x))
            .any(|x| solicited_node(*x) == a)
    }
}

/// One VRF: an isolated routing domain. Its FIBs are shared between
/// published tables until a patch ([`Tables::patched`]) changes one, so a
/// route change copies only the FIB it touches.
#[derive(Clone, Debug)]
pub struct Vrf {
    /// Identifier from the configuration.
    pub id: u32,
    pub name: String,
    pub fib4: Arc<Fib4>,
    pub fib6: Arc<Fib6>,
}

impl fmt::Debug for Lpm<u32, u32> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fib4({} entries)", self.len())
    }
}

impl fmt::Debug for Lpm<u128, u32> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fib6({} entries)", self.len())
    }
}

/// The whole routing state at one instant.
#[derive(Clone, Debug, Default)]
pub struct Tables {
    /// Indexed by port; `None` for a port number without an interface.
    pub interfaces: Vec<Option<Interface>>,
    pub vrfs: Vec<Vrf>,
    /// Indexed by the values stored in the FIBs.
    pub adjs: Vec<Adj>,
    /// Incremented by the control thread for every published table.
    pub generation: u64,
    /// Overlay tunnels, their virtual ports and the decapsulation lookup.
    pub tunnels: TunnelTable,
    /// IPsec ESP tunnels and the SAD (see [`crate::esp`]).
    pub esp: crate::esp::EspTable,
    /// Members of [`Adj::Ecmp`] adjacencies (adjacency indices).
    pub ecmp: Vec<u32>,
    /// Route groups that were not installed because none of their next
    /// hops resolved: (VRF index, prefix).
    pub unresolved: Vec<(u16, Prefix)>,
    /// `adjs.len() + ecmp.len()` after the last full build: patches only
    /// add adjacencies, so past a multiple of this a full build is due.
    pub built_adjs: usize,
}

impl Tables {
    #[inline]
    pub fn iface(&self, port: u16) -> Option<&Interface> {
        self.interfaces
            .get(usize::from(port))
            .and_then(|i| i.as_ref())
    }

    #[inline]
    pub fn adj(&self, idx: u32) -> Adj {
        self.adjs.get(idx as usize).copied().unwrap_or(Adj::Drop)
    }

    /// Index in [`Tables::vrfs`] of the VRF with configuration id `id`.
    pub fn vrf_index(&self, id: u32) -> Option<u16> {
        self.vrfs.iter().position(|v| v.id == id).map(|i| i as u16)
    }

    /// IPv4 lookup in VRF index `vrf`.
    #[inline]
    pub fn lookup4(&self, vrf: u16, dst: Ipv4Addr) -> Option<u32> {
        self.vrfs
            .get(usize::from(vrf))?
            .fib4
            .lookup(u32::from(dst))
            .map(|(a, _)| a)
    }

    /// The member of an [`Adj::Ecmp`] adjacency `idx` that flow `hash`
    /// takes; any other adjacency is returned as it is.
    #[inline]
    pub fn pick(&self, idx: u32, hash: u32) -> u32 {
        match self.adj(idx) {
            Adj::Ecmp { first, count } if count > 0 => {
                let i = first as usize + (hash % u32::from(count)) as usize;
                self.ecmp.get(i).copied().unwrap_or(idx)
            }
            _ => idx,
        }
    }

    /// IPv4 lookup with multipath resolved for the flow `src` → `dst`.
    #[inline]
    pub fn lookup4_flow(&self, vrf: u16, src: Ipv4Addr, dst: Ipv4Addr, proto: u8) -> Option<u32> {
        let idx = self.lookup4(vrf, dst)?;
        let (s, d) = (u128::from(u32::from(src)), u128::from(u32::from(dst)));
        Some(self.pick(idx, flow_hash(s, d, proto)))
    }

    /// IPv6 lookup with multipath resolved for the flow `src` → `dst`.
    #[inline]
    pub fn lookup6_flow(&self, vrf: u16, src: Ipv6Addr, dst: Ipv6Addr, proto: u8) -> Option<u32> {
        let idx = self.lookup6(vrf, dst)?;
        Some(self.pick(idx, flow_hash(u128::from(src), u128::from(dst), proto)))
    }

    /// IPv6 lookup in VRF index `vrf`.
    #[inline]
    pub fn lookup6(&self, vrf: u16, dst: Ipv6Addr) -> Option<u32> {
        self.vrfs
            .get(usize::from(vrf))?
            .fib6
            .lookup(u128::from(dst))
            .map(|(a, _)| a)
    }

    /// `show ip fib`-like dump of every VRF.
    pub fn show_fib(&self) -> String {
        let mut s = String::new();
        for v in &self.vrfs {
            let _ = writeln!(s, "vrf {} ({}):", v.id, v.name);
            for (p, l, a) in v.fib4.entries() {
                let _ = writeln!(s, "  {}/{} -> {:?}", Ipv4Addr::from(p), l, self.adj(a));
            }
            for (p, l, a) in v.fib6.entries() {
                let _ = writeln!(s, "  {}/{} -> {:?}", Ipv6Addr::from(p), l, self.adj(a));
            }
        }
        s
    }
}

/// A flow's hash over its addresses and protocol (not the ports: the
/// fragments of a datagram then take the same path as its first one).
#[inline]
fn flow_hash(src: u128, dst: u128, proto: u8) -> u32 {
    let mut h = crate::fib::FxHasher::default();
    h.write_u128(src);
    h.write_u128(dst);
    h.write_u8(proto);
    let x = h.finish();
    (x ^ (x >> 32)) as u32
}

/// The published tables: workers `load()`, the control thread `store()`s.
pub struct SharedTables(ArcSwap<Tables>);

impl SharedTables {
    pub fn new(t: Tables) -> Arc<Self> {
        Arc::new(SharedTables(ArcSwap::from_pointee(t)))
    }

    /// Lock-free read of the current tables (once per vector).
    #[inline]
    pub fn load(&self) -> Arc<Tables> {
        self.0.load_full()
    }

    /// Publishes new tables; the generation is bumped past the current one.
    pub fn store(&self, mut t: Tables) {
        t.generation = self.0.load().generation + 1;
        self.0.store(Arc::new(t));
    }
}

/// fe80::/64 plus the modified EUI-64 interface identifier of `mac`
/// (RFC 4291 appendix A: flip the universal/local bit, insert ff:fe).
pub fn link_local_eui64(mac: [u8; 6]) -> Ipv6Addr {
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}

/// Solicited-node multicast address ff02::1:ffXX:XXXX (RFC 4291 §2.7.1).
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15],
    ])
}

/// Ethernet multicast MAC for an IPv6 multicast address (RFC 2464 §7).
pub fn multicast_mac_v6(a: Ipv6Addr) -> [u8; 6] {
    let o = a.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

#[cfg(test)]
mod tests;
