//! [`TablesBuilder`]: checks a configuration and builds a complete
//! [`Tables`] from it, resolving routes to adjacencies.

use super::*;

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
                fib4: Arc::new(Fib4::new()),
                fib6: Arc::new(Fib6::new()),
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
        // An IP tunnel's (GRE carrying IP, ESP) subnet has no neighbours to
        // resolve: the subnet, and every gateway in it, is the tunnel port
        // itself (a BGP peer at the tunnel's far end).
        let ip_tunnels: Vec<u16> = self
            .tunnels
            .iter()
            .filter(|(_, d)| !d.ethernet)
            .map(|(p, _)| *p)
            .chain(self.esp.iter().map(|(p, _)| *p))
            .collect();
        for d in &self.ifaces {
            let on_subnet = if ip_tunnels.contains(&d.port) {
                Route::Port { port: d.port }
            } else {
                Route::Connected { port: d.port }
            };
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
                        defs4[v].insert(u32::from(net.addr_v4()), p.len, on_subnet);
                    }
                    IpAddr::V6(a) => {
                        ifc.v6.push((a, p.len));
                        defs6[v].insert(u128::from(net.addr_v6()), p.len, on_subnet);
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
                Arc::make_mut(&mut t.vrfs[v].fib4).insert(p, l, i);
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
                Arc::make_mut(&mut t.vrfs[v].fib6).insert(p, l, i);
            }
        }
        t.built_adjs = t.adjs.len() + t.ecmp.len();
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
            let underlay_vrf = vrf_of(def.underlay_vrf)?;
            if !t.esp.endpoints.contains(&(underlay_vrf, def.local)) {
                t.esp.endpoints.push((underlay_vrf, def.local));
            }
            t.esp.tunnels.push(EspTunnel {
                port: *port,
                underlay_vrf,
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
