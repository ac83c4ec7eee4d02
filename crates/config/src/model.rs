//! The typed configuration model.
//!
//! These types are what the dataplane and the control API consume. They can
//! be built from a file ([`crate::parse`]) or in code; in both cases
//! [`crate::validate`] is the one place that decides whether they make sense.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

/// The name of the VRF that always exists and that every object defaults to.
pub const DEFAULT_VRF: &str = "default";
/// IANA-assigned VXLAN UDP destination port (RFC 7348 §5).
pub const VXLAN_PORT: u16 = 4789;

/// A whole gateway configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// `[gateway]`.
    pub gateway: Gateway,
    /// `[[interface]]` tables, in file order.
    pub interfaces: Vec<Interface>,
    /// `[[tunnel]]` tables, in file order.
    pub tunnels: Vec<Tunnel>,
    /// `[[route]]` tables, in file order.
    pub routes: Vec<Route>,
    /// `[routing]`: routes learned from a routing daemon (absent: none).
    #[serde(default)]
    pub routing: Routing,
    /// `[ha]`: VRRP virtual addresses (absent: a standalone gateway).
    #[serde(default)]
    pub ha: Option<crate::ha::Ha>,
    /// `[pool]`: member of a pool of gateways on etcd (absent: not).
    #[serde(default)]
    pub pool: Option<crate::pool::Pool>,
}

/// Default [`Routing::max_routes`]: per VRF, routes learned over FPM.
pub const DEFAULT_MAX_ROUTES: u32 = 1 << 20;
/// Default [`Routing::max_nexthop_groups`].
pub const DEFAULT_MAX_NEXTHOP_GROUPS: u32 = 1 << 16;
/// Linux's main routing table (`RT_TABLE_MAIN`), mapped to the default
/// VRF when no `[[routing.table]]` is given.
pub const MAIN_TABLE: u32 = 254;

/// `[routing]`: an FPM server for FRR's zebra (`dplane_fpm_nl`), which
/// streams its selected routes as netlink messages; each kernel table id
/// they carry maps to one of our VRFs.
///
/// ```toml
/// [routing]
/// fpm = "127.0.0.1:2620"        # zebra: fpm address 127.0.0.1 port 2620
/// max_routes = 1048576          # per VRF, learned routes (default 2^20)
/// max_nexthop_groups = 65536    # (default 2^16)
///
/// [[routing.table]]             # none given: table 254 -> "default"
/// id = 254
/// vrf = "default"
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routing {
    /// Where the FPM server listens (TCP); `None`: no FPM.
    #[serde(default)]
    pub fpm: Option<SocketAddr>,
    /// Kernel table id → VRF, as `[[routing.table]]`.
    #[serde(default)]
    pub tables: Vec<RoutingTable>,
    /// Most learned routes one VRF holds; more are refused and counted.
    #[serde(default = "default_max_routes")]
    pub max_routes: u32,
    /// Most next-hop groups (RTM_NEWNEXTHOP objects) held.
    #[serde(default = "default_max_nexthop_groups")]
    pub max_nexthop_groups: u32,
    /// `[[routing.punt]]`: VRFs whose BGP and BFD go to the host's stack.
    #[serde(default)]
    pub punt: Vec<RoutingPunt>,
}

/// `[[routing.punt]]`: BGP (TCP 179) and BFD (UDP 3784, 3785, 4784)
/// addressed to the gateway in `vrf` go to the host's stack through the
/// TUN device `tap`, which vecgate creates with the VRF's addresses; what
/// the host sends on it is routed in `vrf` (VPP linux-cp's model).
///
/// A tenant VRF's addresses overlap other VRFs', so its TUN needs a host
/// routing domain of its own: `netns` puts the TUN in that network
/// namespace (created when missing), where the tenant's own zebra and
/// bgpd run (SONiC's and linux-cp's per-VRF model, without the kernel's
/// `vrf` module), and `fpm` listens for that zebra inside it: every route
/// it sends, whatever its table, is the VRF's.
///
/// ```toml
/// [[routing.punt]]
/// vrf = "red"
/// tap = "vg-red"
/// netns = "vg-red"            # ip netns exec vg-red zebra/bgpd ...
/// fpm = "127.0.0.1:2620"      # in vg-red: fpm address 127.0.0.1 port 2620
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutingPunt {
    pub vrf: String,
    /// Host interface name (at most 15 bytes).
    pub tap: String,
    /// Network namespace (`/run/netns/NAME`) the TUN lives in; `None`:
    /// vecgate's own.
    #[serde(default)]
    pub netns: Option<String>,
    /// FPM listener inside `netns` for the VRF's own zebra.
    #[serde(default)]
    pub fpm: Option<SocketAddr>,
}

fn default_max_routes() -> u32 {
    DEFAULT_MAX_ROUTES
}

fn default_max_nexthop_groups() -> u32 {
    DEFAULT_MAX_NEXTHOP_GROUPS
}

impl Default for Routing {
    fn default() -> Self {
        Routing {
            fpm: None,
            tables: Vec::new(),
            max_routes: DEFAULT_MAX_ROUTES,
            max_nexthop_groups: DEFAULT_MAX_NEXTHOP_GROUPS,
            punt: Vec::new(),
        }
    }
}

impl Routing {
    /// The table → VRF map in force: the configured one, or table 254 to
    /// the default VRF.
    pub fn table_map(&self) -> Vec<RoutingTable> {
        if self.tables.is_empty() {
            vec![RoutingTable {
                id: MAIN_TABLE,
                vrf: DEFAULT_VRF.to_owned(),
            }]
        } else {
            self.tables.clone()
        }
    }
}

/// `[[routing.table]]`: routes zebra sends for kernel table `id` go into
/// VRF `vrf`'s FIB.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutingTable {
    /// Kernel routing table id (1..=4294967295; 254 is "main").
    pub id: u32,
    /// VRF name.
    pub vrf: String,
}

/// `[gateway]`: process-wide settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gateway {
    /// Gateway name; also names the default API socket.
    pub name: String,
    /// Dataplane worker threads (1..=64).
    pub workers: usize,
    /// Where the control API listens.
    pub api: ApiEndpoint,
    /// File holding the admin bearer token; required for a TCP `api` (the
    /// token itself never appears in the configuration).
    #[serde(default)]
    pub api_token_file: Option<PathBuf>,
    /// File holding a read-only bearer token (GET only); TCP `api` only.
    #[serde(default)]
    pub api_readonly_token_file: Option<PathBuf>,
    /// PEM certificate chain the TCP `api` presents (TLS, RFC 8446);
    /// required for a TCP `api` unless `api_insecure_loopback`.
    #[serde(default)]
    pub api_tls_cert_file: Option<PathBuf>,
    /// PEM private key of `api_tls_cert_file`: a secret file (private,
    /// regular, at most 4 KiB: [`crate::secret`]).
    #[serde(default)]
    pub api_tls_key_file: Option<PathBuf>,
    /// Allows a TCP `api` without TLS, on a loopback address only (tokens
    /// would cross the network in clear otherwise).
    #[serde(default)]
    pub api_insecure_loopback: bool,
    /// Where state that must survive restarts lives (static SAs' sequence
    /// ceilings and replay windows); `None` = [`Gateway::default_state_dir`].
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// Workers poll their ports without ever sleeping, as DPDK's lcores do:
    /// no wakeup per batch, for cores dedicated to the workers, at the price
    /// of one CPU per worker kept busy (on a CPU shared with other work it
    /// costs more than it saves: docs/benchmarks.md). Default: sleep in
    /// poll(2) when idle.
    #[serde(default)]
    pub busy_poll: bool,
    /// Microseconds a worker keeps polling (yielding its CPU between polls)
    /// after the last packet before it sleeps in poll(2): a steady stream
    /// then costs no wakeup per batch, an idle gateway still sleeps. `None`:
    /// the default, 50 (`packet::idle`); 0 sleeps at once.
    #[serde(default)]
    pub idle_spin_us: Option<u32>,
}

impl Gateway {
    /// The keys that name a file or directory on the gateway, as set.
    pub fn path_keys(&self) -> [(&'static str, &Option<PathBuf>); 5] {
        [
            ("api_token_file", &self.api_token_file),
            ("api_readonly_token_file", &self.api_readonly_token_file),
            ("api_tls_cert_file", &self.api_tls_cert_file),
            ("api_tls_key_file", &self.api_tls_key_file),
            ("state_dir", &self.state_dir),
        ]
    }

    /// `/var/lib/vecgate/<name>`.
    pub fn default_state_dir(name: &str) -> PathBuf {
        PathBuf::from(format!("/var/lib/vecgate/{name}"))
    }

    /// The state directory in effect.
    pub fn state_dir(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| Self::default_state_dir(&self.name))
    }
}

/// Where the control API listens: `unix:/path` or `tcp:addr:port`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ApiEndpoint {
    /// A Unix stream socket at this path.
    Unix(PathBuf),
    /// A TCP listener.
    Tcp(SocketAddr),
}

impl ApiEndpoint {
    /// The default endpoint for a gateway called `name`.
    pub fn default_for(name: &str) -> Self {
        ApiEndpoint::Unix(PathBuf::from(format!("/run/vecgate/{name}.sock")))
    }
}

impl fmt::Display for ApiEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiEndpoint::Unix(p) => write!(f, "unix:{}", p.display()),
            ApiEndpoint::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

impl FromStr for ApiEndpoint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(format!(
                    "api \"{s}\": the unix socket path must be absolute (e.g. \"unix:/run/vecgate/gw.sock\")"
                ));
            }
            if path.contains('\0') {
                return Err(format!("api \"{s}\": the path contains a NUL byte"));
            }
            Ok(ApiEndpoint::Unix(PathBuf::from(path)))
        } else if let Some(addr) = s.strip_prefix("tcp:") {
            addr.parse::<SocketAddr>().map(ApiEndpoint::Tcp).map_err(|_| {
                format!(
                    "api \"{s}\": expected \"tcp:ADDRESS:PORT\" (e.g. \"tcp:127.0.0.1:9090\" or \"tcp:[::1]:9090\")"
                )
            })
        } else {
            Err(format!(
                "api \"{s}\": expected \"unix:/path\" or \"tcp:ADDRESS:PORT\""
            ))
        }
    }
}

impl TryFrom<String> for ApiEndpoint {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<ApiEndpoint> for String {
    fn from(a: ApiEndpoint) -> String {
        a.to_string()
    }
}

/// `[[interface]]`: a Linux netdev the gateway attaches to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    /// vecgate's own name (a route target; unique across interfaces and tunnels).
    pub name: String,
    /// The Linux netdev it attaches to.
    pub host: String,
    /// The I/O backend.
    pub driver: Driver,
    /// Addresses owned by the gateway on this interface.
    pub addresses: Vec<IfAddr>,
    /// The VRF the interface belongs to.
    pub vrf: String,
    /// MTU; `None` means "use the netdev's MTU".
    pub mtu: Option<u32>,
    /// Receive segment coalescing (GRO in software) on this interface.
    pub rsc: bool,
    /// Use the netdev's offloads (vnet header, GSO/TSO, checksum) when the driver can.
    pub offloads: bool,
}

/// I/O backend of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Driver {
    /// `AF_PACKET` socket (TPACKET rings, `PACKET_VNET_HDR`).
    AfPacket,
    /// `AF_XDP` socket.
    AfXdp,
    /// A TAP device created by vecgate.
    Tap,
}

impl Driver {
    /// All drivers, in documentation order.
    pub const ALL: [Driver; 3] = [Driver::AfPacket, Driver::AfXdp, Driver::Tap];

    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Driver::AfPacket => "af_packet",
            Driver::AfXdp => "af_xdp",
            Driver::Tap => "tap",
        }
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Driver {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Driver::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| format!("unknown driver \"{s}\" (expected af_packet, af_xdp or tap)"))
    }
}

/// Tunnel encapsulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TunnelKind {
    /// GRE (RFC 2784, key and sequence RFC 2890) carrying IP.
    Gre,
    /// NVGRE (RFC 7637): GRE carrying Ethernet, 24-bit VSID in the key.
    Nvgre,
    /// VXLAN (RFC 7348): UDP carrying Ethernet, 24-bit VNI.
    Vxlan,
    /// IPsec ESP tunnel mode (RFC 4303) keyed by IKEv2 (RFC 7296).
    Ipsec,
}

impl TunnelKind {
    /// All kinds, in documentation order.
    pub const ALL: [TunnelKind; 4] = [
        TunnelKind::Gre,
        TunnelKind::Nvgre,
        TunnelKind::Vxlan,
        TunnelKind::Ipsec,
    ];

    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            TunnelKind::Gre => "gre",
            TunnelKind::Nvgre => "nvgre",
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Ipsec => "ipsec",
        }
    }
}

impl fmt::Display for TunnelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TunnelKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TunnelKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!("unknown tunnel kind \"{s}\" (expected gre, nvgre, vxlan or ipsec)")
            })
    }
}

/// `[[tunnel]]`: an overlay tunnel endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tunnel {
    /// Route-target name (unique across interfaces and tunnels).
    pub name: String,
    /// Encapsulation.
    pub kind: TunnelKind,
    /// Outer source address (must be the same family as `remote`).
    pub local: IpAddr,
    /// Outer destination address.
    pub remote: IpAddr,
    /// GRE key, NVGRE VSID or VXLAN VNI.
    pub key: Option<u32>,
    /// Overlay VRF the tunnel belongs to (routes in this VRF may point at it).
    pub vrf: String,
    /// VRF whose FIB reaches `remote`.
    pub underlay_vrf: String,
    /// Overlay MTU; `None` derives it from the underlay.
    pub mtu: Option<u32>,
    /// GRE checksum present (RFC 2784 §2.5); GRE only.
    pub checksum: bool,
    /// GRE sequence numbers (RFC 2890 §2.2); GRE only.
    pub sequence: bool,
    /// VXLAN UDP destination port; meaningful for VXLAN only (others keep 4789).
    pub port: u16,
    /// The gateway's own addresses on the overlay segment (needed by L2
    /// tunnels, whose far side resolves the gateway by ARP / ND).
    #[serde(default)]
    pub addresses: Vec<IfAddr>,
    /// What a GRE tunnel carries; NVGRE and VXLAN always carry Ethernet.
    #[serde(default)]
    pub inner: TunnelInner,
    /// `kind = "ipsec"`: static SAs, NAT-T and traffic selectors
    /// ([`crate::ipsec`]); `None` for the other kinds.
    #[serde(default)]
    pub ipsec: Option<crate::ipsec::Ipsec>,
}

impl Tunnel {
    /// Whether the tunnel carries Ethernet frames (NVGRE, VXLAN, GRE with
    /// `inner = "ethernet"`, i.e. transparent Ethernet bridging 0x6558).
    pub fn carries_ethernet(&self) -> bool {
        match self.kind {
            TunnelKind::Nvgre | TunnelKind::Vxlan => true,
            TunnelKind::Gre => self.inner == TunnelInner::Ethernet,
            TunnelKind::Ipsec => false,
        }
    }
}

/// Payload of a GRE tunnel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TunnelInner {
    /// IPv4 / IPv6 packets (GRE protocol 0x0800 / 0x86DD).
    #[default]
    Ip,
    /// Ethernet frames (GRE protocol 0x6558, as Open vSwitch's GRE ports).
    Ethernet,
}

impl TunnelInner {
    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            TunnelInner::Ip => "ip",
            TunnelInner::Ethernet => "ethernet",
        }
    }
}

impl fmt::Display for TunnelInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TunnelInner {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ip" => Ok(TunnelInner::Ip),
            "ethernet" => Ok(TunnelInner::Ethernet),
            _ => Err(format!(
                "unknown tunnel inner \"{s}\" (expected ip or ethernet)"
            )),
        }
    }
}

/// `[[route]]`: a static route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// VRF whose FIB holds the route.
    pub vrf: String,
    /// Destination.
    pub prefix: Prefix,
    /// Where matching packets go.
    pub via: Via,
}

/// Next hop of a route.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// Out of an interface (directly connected destination).
    Interface(String),
    /// Into a tunnel.
    Tunnel(String),
    /// A next-hop address, resolved through the route's own VRF.
    Address(IpAddr),
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Via::Interface(n) | Via::Tunnel(n) => f.write_str(n),
            Via::Address(a) => write!(f, "{a}"),
        }
    }
}

fn max_len(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// Splits `a.b.c.d/len`, checking `len` against the address family.
fn parse_cidr(s: &str) -> Result<(IpAddr, u8), String> {
    let (a, l) = s
        .split_once('/')
        .ok_or_else(|| format!("\"{s}\" is not ADDRESS/LENGTH (e.g. \"10.1.0.1/24\")"))?;
    let addr: IpAddr = a
        .parse()
        .map_err(|_| format!("\"{s}\": \"{a}\" is not an IPv4 or IPv6 address"))?;
    let len: u8 = l
        .parse()
        .ok()
        .filter(|len| *len <= max_len(addr))
        .ok_or_else(|| {
            format!(
                "\"{s}\": prefix length \"{l}\" must be 0..={} for {}",
                max_len(addr),
                if addr.is_ipv4() { "IPv4" } else { "IPv6" }
            )
        })?;
    Ok((addr, len))
}

/// Keeps the first `len` bits of `addr`.
pub fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let m = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(bits & m))
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let m = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(bits & m))
        }
    }
}

/// An interface address: host bits allowed (`10.1.0.1/24`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IfAddr {
    /// The address itself.
    pub addr: IpAddr,
    /// Length of the connected subnet.
    pub prefix_len: u8,
}

impl IfAddr {
    /// The connected subnet.
    pub fn network(&self) -> Prefix {
        Prefix {
            addr: mask(self.addr, self.prefix_len),
            len: self.prefix_len,
        }
    }
}

impl fmt::Display for IfAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

impl FromStr for IfAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix_len) = parse_cidr(s)?;
        Ok(IfAddr { addr, prefix_len })
    }
}

impl TryFrom<String> for IfAddr {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<IfAddr> for String {
    fn from(a: IfAddr) -> String {
        a.to_string()
    }
}

/// A route prefix. Host bits must be zero; [`crate::validate`] enforces it so
/// that a typo such as `10.2.0.1/24` is caught instead of silently masked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Prefix {
    /// Network address.
    pub addr: IpAddr,
    /// Prefix length.
    pub len: u8,
}

impl Prefix {
    /// The same prefix with host bits cleared.
    pub fn masked(&self) -> Prefix {
        Prefix {
            addr: mask(self.addr, self.len),
            len: self.len,
        }
    }

    /// True if the two prefixes share at least one address.
    pub fn overlaps(&self, other: &Prefix) -> bool {
        if self.addr.is_ipv4() != other.addr.is_ipv4() {
            return false;
        }
        let len = self.len.min(other.len);
        mask(self.addr, len) == mask(other.addr, len)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = String;
    /// Parses the syntax only; host bits are checked by validation.
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, len) = parse_cidr(s)?;
        Ok(Prefix { addr, len })
    }
}

impl TryFrom<String> for Prefix {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Prefix> for String {
    fn from(p: Prefix) -> String {
        p.to_string()
    }
}

impl Config {
    /// Every VRF named anywhere, sorted, `"default"` first (it always exists).
    pub fn vrfs(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .interfaces
            .iter()
            .map(|i| i.vrf.as_str())
            .chain(
                self.tunnels
                    .iter()
                    .flat_map(|t| [t.vrf.as_str(), t.underlay_vrf.as_str()]),
            )
            .chain(self.routes.iter().map(|r| r.vrf.as_str()))
            .chain(self.routing.tables.iter().map(|t| t.vrf.as_str()))
            .filter(|v| *v != DEFAULT_VRF)
            .map(str::to_owned)
            .collect();
        v.sort();
        v.dedup();
        v.insert(0, DEFAULT_VRF.to_owned());
        v
    }

    /// The interface called `name`.
    pub fn interface(&self, name: &str) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.name == name)
    }

    /// The tunnel called `name`.
    pub fn tunnel(&self, name: &str) -> Option<&Tunnel> {
        self.tunnels.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parsing() {
        let a: IfAddr = "10.1.0.1/24".parse().unwrap();
        assert_eq!(a.network().to_string(), "10.1.0.0/24");
        assert!("10.1.0.1/33".parse::<IfAddr>().is_err());
        assert!("fd01::1/129".parse::<IfAddr>().is_err());
        assert!("fd01::1/128".parse::<IfAddr>().is_ok());
        assert!("10.1.0.1".parse::<IfAddr>().is_err());
        assert!("x/8".parse::<Prefix>().is_err());
        let p: Prefix = "10.2.0.1/24".parse().unwrap();
        assert_eq!(p.masked().to_string(), "10.2.0.0/24");
        assert_eq!(mask("1.2.3.4".parse().unwrap(), 0).to_string(), "0.0.0.0");
        assert_eq!(mask("fd01::1".parse().unwrap(), 128).to_string(), "fd01::1");
    }

    #[test]
    fn overlap() {
        let p = |s: &str| s.parse::<Prefix>().unwrap();
        assert!(p("10.0.0.0/8").overlaps(&p("10.2.0.0/24")));
        assert!(p("10.2.0.0/24").overlaps(&p("10.0.0.0/8")));
        assert!(!p("10.1.0.0/24").overlaps(&p("10.2.0.0/24")));
        assert!(!p("0.0.0.0/0").overlaps(&p("::/0")));
    }

    #[test]
    fn api_endpoint() {
        assert_eq!(
            "tcp:127.0.0.1:9090".parse::<ApiEndpoint>().unwrap(),
            ApiEndpoint::Tcp("127.0.0.1:9090".parse().unwrap())
        );
        assert_eq!(
            "unix:/run/x.sock"
                .parse::<ApiEndpoint>()
                .unwrap()
                .to_string(),
            "unix:/run/x.sock"
        );
        assert!("unix:rel.sock".parse::<ApiEndpoint>().is_err());
        assert!("tcp:127.0.0.1".parse::<ApiEndpoint>().is_err());
        assert!("http://x".parse::<ApiEndpoint>().is_err());
    }
}
