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

/// One VRF: an isolated routing domain.
#[derive(Clone, Debug)]
pub struct Vrf {
    /// Identifier from the configuration.
    pub id: u32,
    pub name: String,
    pub fib4: Fib4,
    pub fib6: Fib6,
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

/// Why the builder refused a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    UnknownVrf(u32),
    UnknownPort(u16),
    DuplicatePort(u16),
    DuplicateVrf(u32),
    BadPrefix(String),
    /// A tunnel whose endpoints differ in family, or two tunnels the
    /// receiver could not tell apart.
    BadTunnel(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::UnknownVrf(v) => write!(f, "unknown vrf {v}"),
            BuildError::UnknownPort(p) => write!(f, "unknown port {p}"),
            BuildError::DuplicatePort(p) => write!(f, "port {p} defined twice"),
            BuildError::DuplicateVrf(v) => write!(f, "vrf {v} defined twice"),
            BuildError::BadPrefix(s) => write!(f, "bad prefix {s}"),
            BuildError::BadTunnel(s) => write!(f, "bad tunnel: {s}"),
        }
    }
}

impl std::error::Error for BuildError {}

struct IfDef {
    port: u16,
    name: String,
    mac: [u8; 6],
    mtu: u32,
    vrf: u32,
    addrs: Vec<Prefix>,
    flags: IfFlags,
}

/// Builds [`Tables`] without the configuration crate (the binary maps its
/// config onto these calls; tests call them directly). VRF 0 ("default")
/// always exists.
pub struct TablesBuilder {
    vrfs: Vec<(u32, String)>,
    ifaces: Vec<IfDef>,
    routes: Vec<(u32, Prefix, Route)>,
    tunnels: Vec<(u16, TunnelDef)>,
    esp: Vec<(u16, crate::esp::EspTunnelDef)>,
    esp_sad: Option<Arc<vecgate_ipsec::InboundSad>>,
    /// Next hops of [`Route::Group`] routes.
    groups: Vec<Vec<Route>>,
    error: Option<BuildError>,
}

impl Default for TablesBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl TablesBuilder {
    pub fn new() -> Self {
        TablesBuilder {
            vrfs: vec![(0, "default".to_string())],
            ifaces: Vec::new(),
            routes: Vec::new(),
            tunnels: Vec::new(),
            esp: Vec::new(),
            esp_sad: None,
            groups: Vec::new(),
            error: None,
        }
    }

    fn fail(&mut self, e: BuildError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    pub fn add_vrf(&mut self, id: u32, name: &str) -> &mut Self {
        if self.vrfs.iter().any(|(v, _)| *v == id) {
            if id != 0 {
                self.fail(BuildError::DuplicateVrf(id));
            }
        } else {
            self.vrfs.push((id, name.to_string()));
        }
        self
    }

    /// An interface on `port` in VRF `vrf` (configuration id) with addresses
    /// such as 10.0.0.1/24: each address becomes a Local host route and its
    /// subnet a Connected route.
    pub fn add_interface(
        &mut self,
        port: u16,
        name: &str,
        mac: [u8; 6],
        mtu: u32,
        vrf: u32,
        addrs: &[Prefix],
    ) -> &mut Self {
        if self.ifaces.iter().any(|i| i.port == port) {
            self.fail(BuildError::DuplicatePort(port));
            return self;
        }
        self.ifaces.push(IfDef {
            port,
            name: name.to_string(),
            mac,
            mtu,
            vrf,
            addrs: addrs.to_vec(),
            flags: IfFlags::default(),
        });
        self
    }

    /// Sets the flags of an interface added before.
    pub fn set_flags(&mut self, port: u16, flags: IfFlags) -> &mut Self {
        match self.ifaces.iter_mut().find(|i| i.port == port) {
            Some(i) => i.flags = flags,
            None => self.fail(BuildError::UnknownPort(port)),
        }
        self
    }

    /// A tunnel behind virtual port `port`, which must also be added with
    /// [`TablesBuilder::add_interface`] (its overlay VRF, addresses, MTU and
    /// MAC). Routes reach it as `Route::Port` (IP tunnels) or
    /// `Route::Connected` / `Route::Via` (Ethernet tunnels).
    pub fn add_tunnel(&mut self, port: u16, def: TunnelDef) -> &mut Self {
        self.tunnels.push((port, def));
        self
    }

    /// An IPsec ESP tunnel behind virtual port `port` (added with
    /// [`TablesBuilder::add_interface`] too, its MTU the underlay's minus
    /// the ESP overhead); routes reach it as `Route::Port`. Needs
    /// [`TablesBuilder::set_esp_sad`].
    pub fn add_esp_tunnel(&mut self, port: u16, def: crate::esp::EspTunnelDef) -> &mut Self {
        self.esp.push((port, def));
        self
    }

    /// The inbound SAD shared by every ESP tunnel (kept across rebuilds by
    /// whoever owns it).
    pub fn set_esp_sad(&mut self, sad: Arc<vecgate_ipsec::InboundSad>) -> &mut Self {
        self.esp_sad = Some(sad);
        self
    }

    pub fn add_route(&mut self, vrf: u32, prefix: Prefix, route: Route) -> &mut Self {
        self.routes.push((vrf, prefix.network(), route));
        self
    }

    /// A route over several next hops (equal-cost multipath; one is fine
    /// too): installed with the members that resolve, or not at all when
    /// none does (then listed in [`Tables::unresolved`]).
    pub fn add_route_group(&mut self, vrf: u32, prefix: Prefix, hops: Vec<Route>) -> &mut Self {
        let g = self.groups.len() as u32;
        self.groups.push(hops);
        self.add_route(vrf, prefix, Route::Group(g))
    }

    pub fn build(&self) -> Result<Tables, BuildError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let mut t = Tables::default();
        let mut adj_idx: FxMap<Adj, u32> = FxMap::default();
        let mut intern = |t: &mut Tables, a: Adj| -> u32 {
            *adj_idx.entry(a).or_insert_with(|| {
                t.adjs.push(a);
                (t.adjs.len() - 1) as u32
            })
        };
        for (id, name) in &self.vrfs {
            t.vrfs.push(Vrf {
                id: *id,
                name: name.clone(),
                fib4: Fib4::new(),
                fib6: Fib6::new(),
            });
        }
        let vrf_of = |id: u32| -> Result<u16, BuildError> {
            self.vrfs
                .iter()
                .position(|(v, _)| *v == id)
                .map(|i| i as u16)
                .ok_or(BuildError::UnknownVrf(id))
        };
        let max_port = self
            .ifaces
            .iter()
            .map(|i| usize::from(i.port) + 1)
            .max()
            .unwrap_or(0);
        t.interfaces = vec![None; max_port];
        // Per VRF, the route definitions (prefix → Route), for recursive
        // resolution of Via routes.
        let mut defs4: Vec<Lpm<u32, Route>> = vec![Lpm::new(); self.vrfs.len()];
        let mut defs6: Vec<Lpm<u128, Route>> = vec![Lpm::new(); self.vrfs.len()];
        let local = intern(&mut t, Adj::Local);
        for d in &self.ifaces {
            let vrf = vrf_of(d.vrf)?;
            let glean4 = intern(&mut t, Adj::Glean { port: d.port });
            // Same adjacency for both families: the family comes from the packet.
            let glean6 = glean4;
            let mut ifc = Interface {
                port: d.port,
                name: d.name.clone(),
                mac: d.mac,
                mtu: d.mtu,
                vrf,
                v4: Vec::new(),
                v6: Vec::new(),
                ll6: d.flags.ipv6.then(|| link_local_eui64(d.mac)),
                flags: d.flags,
                glean4,
                glean6,
            };
            let v = usize::from(vrf);
            for p in &d.addrs {
                let net = p.network();
                match p.addr {
                    IpAddr::V4(a) => {
                        ifc.v4.push((a, p.len));
                        defs4[v].insert(
                            u32::from(net.addr_v4()),
                            p.len,
                            Route::Connected { port: d.port },
                        );
                    }
                    IpAddr::V6(a) => {
                        ifc.v6.push((a, p.len));
                        defs6[v].insert(
                            u128::from(net.addr_v6()),
                            p.len,
                            Route::Connected { port: d.port },
                        );
                    }
                }
            }
            for (a, _) in &ifc.v4 {
                defs4[v].insert(u32::from(*a), 32, Route::Local);
            }
            for a in ifc.v6.iter().map(|(a, _)| *a).chain(ifc.ll6) {
                defs6[v].insert(u128::from(a), 128, Route::Local);
            }
            t.interfaces[usize::from(d.port)] = Some(ifc);
        }
        t.tunnels.by_port = vec![NO_TUNNEL; t.interfaces.len()];
        for (port, def) in &self.tunnels {
            if t.iface(*port).is_none() {
                return Err(BuildError::UnknownPort(*port));
            }
            let uv = vrf_of(def.underlay_vrf)?;
            let tun = Tunnel::new(*port, def.clone(), uv).ok_or_else(|| {
                BuildError::BadTunnel(format!(
                    "port {port}: local {} and remote {} differ in family",
                    def.local, def.remote
                ))
            })?;
            let idx = t.tunnels.tunnels.len() as u32;
            let key = DecapKey {
                vrf: uv,
                local: def.local,
                remote: def.remote,
                class: KeyClass::of(def),
            };
            if t.tunnels.decap.insert(key, idx).is_some() {
                return Err(BuildError::BadTunnel(format!(
                    "port {port}: same endpoints and key as another tunnel"
                )));
            }
            t.tunnels.peers.insert((uv, def.local, def.remote), ());
            if def.kind == TunnelKind::Vxlan {
                if !t.tunnels.vxlan_ports.contains(&def.udp_port) {
                    t.tunnels.vxlan_ports.push(def.udp_port);
                }
            } else {
                t.tunnels.any_gre = true;
            }
            t.tunnels.by_port[usize::from(*port)] = idx;
            t.tunnels.tunnels.push(tun);
        }
        self.build_esp(&mut t, &vrf_of)?;
        for (vrf, p, r) in &self.routes {
            let v = usize::from(vrf_of(*vrf)?);
            if let Route::Connected { port }
            | Route::Port { port }
            | Route::Via {
                port: Some(port), ..
            } = r
            {
                if t.iface(*port).is_none() {
                    return Err(BuildError::UnknownPort(*port));
                }
            }
            match p.addr {
                IpAddr::V4(a) => {
                    defs4[v].insert(u32::from(a), p.len, *r);
                }
                IpAddr::V6(a) => {
                    defs6[v].insert(u128::from(a), p.len, *r);
                }
            }
        }
        // Multipath member lists, shared by every route with the same set.
        let mut ecmp_idx: FxMap<Vec<u32>, u32> = FxMap::default();
        // A group's adjacency: its resolvable members (deduplicated, in
        // order), one plain adjacency, or None when nothing resolves.
        let mut group = |t: &mut Tables,
                         intern: &mut dyn FnMut(&mut Tables, Adj) -> u32,
                         g: u32,
                         res: &dyn Fn(Route) -> Adj|
         -> Option<u32> {
            let mut members: Vec<u32> = Vec::new();
            for r in self.groups.get(g as usize).into_iter().flatten() {
                let a = res(*r);
                if matches!(
                    a,
                    Adj::Glean { .. } | Adj::Neighbor { .. } | Adj::Port { .. }
                ) || (matches!(a, Adj::Drop | Adj::Unreachable)
                    && !matches!(r, Route::Via { .. }))
                {
                    let i = intern(t, a);
                    if !members.contains(&i) {
                        members.push(i);
                    }
                }
            }
            match members.len() {
                0 => None,
                1 => Some(members[0]),
                n => {
                    let count = n.min(usize::from(u16::MAX)) as u16;
                    members.truncate(usize::from(count));
                    let first = *ecmp_idx.entry(members.clone()).or_insert_with(|| {
                        let first = t.ecmp.len() as u32;
                        t.ecmp.extend_from_slice(&members);
                        first
                    });
                    Some(intern(t, Adj::Ecmp { first, count }))
                }
            }
        };
        for v in 0..t.vrfs.len() {
            let key4 = |nh: IpAddr| match nh {
                IpAddr::V4(a) => Some(u32::from(a)),
                IpAddr::V6(_) => None,
            };
            for (p, l, r) in defs4[v].entries() {
                let i = match r {
                    Route::Group(g) => {
                        let d = &defs4[v];
                        match group(&mut t, &mut intern, g, &|r| resolve(d, r, 0, key4)) {
                            Some(i) => i,
                            None => {
                                t.unresolved.push((
                                    v as u16,
                                    Prefix {
                                        addr: IpAddr::V4(Ipv4Addr::from(p)),
                                        len: l,
                                    },
                                ));
                                continue;
                            }
                        }
                    }
                    _ => {
                        let a = resolve(&defs4[v], r, 0, key4);
                        if a == Adj::Local {
                            local
                        } else {
                            intern(&mut t, a)
                        }
                    }
                };
                t.vrfs[v].fib4.insert(p, l, i);
            }
            let key6 = |nh: IpAddr| match nh {
                IpAddr::V6(a) => Some(u128::from(a)),
                IpAddr::V4(_) => None,
            };
            for (p, l, r) in defs6[v].entries() {
                let i = match r {
                    Route::Group(g) => {
                        let d = &defs6[v];
                        match group(&mut t, &mut intern, g, &|r| resolve(d, r, 0, key6)) {
                            Some(i) => i,
                            None => {
                                t.unresolved.push((
                                    v as u16,
                                    Prefix {
                                        addr: IpAddr::V6(Ipv6Addr::from(p)),
                                        len: l,
                                    },
                                ));
                                continue;
                            }
                        }
                    }
                    _ => intern(&mut t, resolve(&defs6[v], r, 0, key6)),
                };
                t.vrfs[v].fib6.insert(p, l, i);
            }
        }
        Ok(t)
    }
}

impl TablesBuilder {
    /// ESP tunnels: virtual ports, ids, the SAD (see [`crate::esp`]).
    fn build_esp(
        &self,
        t: &mut Tables,
        vrf_of: &dyn Fn(u32) -> Result<u16, BuildError>,
    ) -> Result<(), BuildError> {
        use crate::esp::EspTunnel;
        if self.esp.is_empty() {
            return Ok(());
        }
        let Some(sad) = &self.esp_sad else {
            return Err(BuildError::BadTunnel("ESP tunnels without a SAD".into()));
        };
        t.esp.sad = Some(sad.clone());
        t.esp.by_port = vec![NO_TUNNEL; t.interfaces.len()];
        for (port, def) in &self.esp {
            if t.iface(*port).is_none() {
                return Err(BuildError::UnknownPort(*port));
            }
            if t.tunnels.at_port(*port).is_some() || t.esp.at_port(*port).is_some() {
                return Err(BuildError::DuplicatePort(*port));
            }
            if def.local.is_ipv4() != def.remote.is_ipv4() {
                return Err(BuildError::BadTunnel(format!(
                    "port {port}: local {} and remote {} differ in family",
                    def.local, def.remote
                )));
            }
            let idx = t.esp.tunnels.len() as u32;
            if t.esp.by_id.insert(def.id, idx).is_some() {
                return Err(BuildError::BadTunnel(format!(
                    "port {port}: ESP tunnel id {} used twice",
                    def.id
                )));
            }
            t.esp.nat_t |= def.nat_t;
            t.esp.by_port[usize::from(*port)] = idx;
            t.esp.tunnels.push(EspTunnel {
                port: *port,
                underlay_vrf: vrf_of(def.underlay_vrf)?,
                v6: def.local.is_ipv6(),
                def: def.clone(),
            });
        }
        Ok(())
    }
}

/// Resolves a route definition to an adjacency, following Via routes
/// through the definitions (at most 8 levels; a loop or an unreachable next
/// hop becomes `Unreachable`).
fn resolve<K: Key>(
    defs: &Lpm<K, Route>,
    r: Route,
    depth: u8,
    key: impl Fn(IpAddr) -> Option<K> + Copy,
) -> Adj {
    match r {
        Route::Connected { port } => Adj::Glean { port },
        Route::Local => Adj::Local,
        Route::Port { port } => Adj::Port { port },
        Route::Drop => Adj::Drop,
        Route::Unreachable => Adj::Unreachable,
        Route::Tunnel(t) => Adj::Tunnel(t),
        // Resolved by the build loop; as another route's next hop: no
        // recursion through multipath.
        Route::Group(_) => Adj::Unreachable,
        Route::Via {
            next_hop,
            port: Some(port),
        } => Adj::Neighbor { port, nh: next_hop },
        Route::Via {
            next_hop,
            port: None,
        } => {
            if depth >= 8 {
                return Adj::Unreachable;
            }
            let Some(k) = key(next_hop) else {
                return Adj::Unreachable;
            };
            match defs.lookup(k) {
                None => Adj::Unreachable,
                Some((inner, _)) => match resolve(defs, inner, depth + 1, key) {
                    Adj::Glean { port } => Adj::Neighbor { port, nh: next_hop },
                    // Our own address as gateway: a configuration error.
                    Adj::Local => Adj::Unreachable,
                    other => other,
                },
            }
        }
    }
}

impl Prefix {
    fn addr_v4(&self) -> Ipv4Addr {
        match self.addr {
            IpAddr::V4(a) => a,
            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        }
    }
    fn addr_v6(&self) -> Ipv6Addr {
        match self.addr {
            IpAddr::V6(a) => a,
            IpAddr::V4(_) => Ipv6Addr::UNSPECIFIED,
        }
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
