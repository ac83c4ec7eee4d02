//! The API's JSON shapes. Addresses and prefixes travel as strings in their
//! usual text forms; key material never appears in any of them.

use dataplane::counters::PortSnapshot;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// What an unauthenticated IKE_SA_INIT may cost a tunnel (RFC 7296 §2.6,
/// RFC 8019 §4), defined beside the `[tunnel.ike]` keys it reports.
pub use vecgate_config::ipsec::IkeAdmission;

/// Every error: what went wrong and, for bad input, which field.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// Gateway-wide facts (`vecgate show runtime`).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct StatusInfo {
    pub name: String,
    pub version: String,
    pub workers: u64,
    pub uptime_seconds: u64,
    /// Generation of the published dataplane tables (bumped by every change).
    pub tables_generation: u64,
    pub api: String,
}

/// One interface: configuration, netdev facts and its counters.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct InterfaceInfo {
    pub name: String,
    /// The Linux netdev.
    pub host: String,
    pub driver: String,
    pub mac: String,
    /// L3 MTU in use.
    pub mtu: u32,
    pub vrf: String,
    pub addresses: Vec<String>,
    /// Receive segment coalescing switch.
    pub rsc: bool,
    /// Offloads switch as configured.
    pub offloads: bool,
    /// Whether super-packets are exchanged with the kernel (switch and
    /// backend both allow it).
    pub offloads_active: bool,
    #[serde(flatten)]
    pub counters: InterfaceTraffic,
}

/// PATCH /interfaces/{name}: the runtime switches; absent fields keep
/// their value.
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InterfacePatch {
    #[serde(default)]
    pub rsc: Option<bool>,
    #[serde(default)]
    pub offloads: Option<bool>,
    /// L3 MTU (68..=65535; capped by the netdev's).
    #[serde(default)]
    #[schema(minimum = 68, maximum = 65535)]
    pub mtu: Option<u32>,
}

/// POST /interfaces: the `[[interface]]` keys of the configuration file,
/// in the configuration's own request shape (`vecgate_config`).
pub use vecgate_config::InterfaceSpec;

/// One VRF.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct VrfInfo {
    pub name: String,
    /// Dataplane id (0 is "default").
    pub id: u32,
    pub interfaces: Vec<String>,
    pub tunnels: Vec<String>,
    /// Static routes in this VRF.
    pub routes: u64,
}

/// One route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RouteInfo {
    pub vrf: String,
    pub prefix: String,
    /// Interface, tunnel or next-hop address.
    pub via: String,
    /// "static" (configured), "connected" (an interface's subnet),
    /// "local" (one of the gateway's own addresses) or "learned" (from a
    /// routing daemon over FPM).
    pub kind: String,
    /// Where the route comes from: "connected" (connected and local),
    /// "static" (the configuration file), "api" (`POST /routes`), or
    /// "fpm/PROTOCOL" as zebra reports it ("fpm/bgp").
    pub source: String,
    /// Administrative distance: lowest wins a prefix (connected 0, static
    /// and api 1, fpm/bgp 20, fpm/ospf 110, ...).
    pub distance: u8,
    /// In the FIB: false for a learned route that lost its prefix to a
    /// lower distance or whose next hops do not resolve.
    pub active: bool,
}

/// POST /routes.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// Default "default".
    #[serde(default)]
    pub vrf: Option<String>,
    /// e.g. "10.9.0.0/24" (host bits must be zero).
    pub prefix: String,
    /// Interface name, tunnel name or next-hop address.
    pub via: String,
}

/// DELETE /routes?vrf=…&prefix=….
#[derive(Clone, Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RouteKey {
    /// Default "default".
    pub vrf: Option<String>,
    pub prefix: String,
}

/// GET /routes?vrf=….
#[derive(Clone, Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RouteFilter {
    /// Only this VRF.
    pub vrf: Option<String>,
}

/// One neighbour (ARP / ND) entry, merged over the workers.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct NeighborInfo {
    pub interface: String,
    pub address: String,
    pub mac: String,
    /// incomplete, reachable, stale or probe.
    pub state: String,
    /// Workers holding the entry.
    pub workers: Vec<u64>,
}

/// One tunnel, as configured.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct TunnelInfo {
    pub name: String,
    /// gre, nvgre, vxlan or ipsec.
    pub kind: String,
    pub local: String,
    pub remote: String,
    pub key: Option<u32>,
    pub vrf: String,
    pub underlay_vrf: String,
    pub mtu: Option<u32>,
    /// The gateway's addresses on the overlay segment (L2 tunnels).
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Traffic of the tunnel's virtual port since the tunnel was created
    /// (all workers): packets handed to the tunnel / received from it,
    /// inner bytes, and packets the tunnel could not send.
    #[serde(flatten)]
    pub traffic: PortTraffic,
}

/// POST /tunnels: the `[[tunnel]]` keys of the configuration file, in
/// the configuration's own request shape (one list of tunnel keys, in
/// `vecgate_config`). A `kind = "ipsec"` tunnel also takes the file's
/// IPsec keys: `nat_t`, `traffic`, and either static SAs (`sa`, as
/// `[[tunnel.sa]]`, here with an optional inline key) or IKEv2 (`ike`, as
/// `[tunnel.ike]`).
pub type TunnelSpec = vecgate_config::TunnelSpec<TunnelSaSpec>;

/// The keying fields of a static-SA request, whichever shape it came in.
#[derive(Clone, Copy, Debug)]
pub struct SaKeying<'a> {
    pub spi: u32,
    pub algorithm: &'a str,
    pub key: Option<&'a HexKey>,
    pub key_file: Option<&'a str>,
    pub esn: Option<bool>,
    /// Bytes, packets, seconds.
    pub lifetimes: [Option<u64>; 3],
}

/// A static-SA request shape: its own fields, then the keying fields all
/// of them share (written once here), and [`SaKeying`] to read those.
macro_rules! sa_request {
    (
        $(#[$m:meta])*
        pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident: $t:ty,)* }
    ) => {
        $(#[$m])*
        #[derive(Clone, Debug, Deserialize, ToSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($(#[$fm])* pub $f: $t,)*
            /// SPI, as a number or hex text ("0x1001").
            #[schema(value_type = String, example = "0x1001")]
            pub spi: SpiText,
            /// aes128gcm16, aes256gcm16, aes128-sha1, aes256-sha256 or
            /// chacha20poly1305.
            pub algorithm: String,
            /// Key in hex (key ‖ salt for GCM / ChaCha, key ‖ integrity key for CBC).
            #[serde(default, skip_serializing_if = "never_written", serialize_with = "redacted")]
            #[schema(value_type = Option<String>, format = Password)]
            pub key: Option<HexKey>,
            /// Path of a hex key file on the gateway.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub key_file: Option<String>,
            /// 64-bit extended sequence numbers (RFC 4303 §2.2.1); default true.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub esn: Option<bool>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub lifetime_bytes: Option<u64>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub lifetime_packets: Option<u64>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub lifetime_seconds: Option<u64>,
        }

        impl $name {
            /// The shared keying fields.
            pub fn keying(&self) -> SaKeying<'_> {
                SaKeying {
                    spi: self.spi.0,
                    algorithm: &self.algorithm,
                    key: self.key.as_ref(),
                    key_file: self.key_file.as_deref(),
                    esn: self.esn,
                    lifetimes: [
                        self.lifetime_bytes,
                        self.lifetime_packets,
                        self.lifetime_seconds,
                    ],
                }
            }
        }
    };
}
sa_request! {
    /// One static SA of a new ipsec tunnel (`[[tunnel.sa]]`). The key comes
    /// from `key_file` (a hex file on the gateway) or inline as `key` (hex),
    /// exactly as `POST /sas` takes it; never echoed back (serialized, as a
    /// gateway's tunnel is for its HA peer, it names its key file only).
    #[derive(Serialize)]
    pub struct TunnelSaSpec {
        /// "in" or "out".
        pub direction: String,
        /// Anti-replay window of an inbound SA; default 1024 (0 = off).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(minimum = 0, maximum = 65536)]
        pub replay_window: Option<u32>,
    }
}

/// One IPsec security association, without key material.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SaInfo {
    /// SPI in hex.
    pub spi: String,
    pub tunnel: String,
    /// "inbound" or "outbound".
    pub direction: String,
    /// e.g. "aes-gcm-128".
    pub cipher: String,
    /// 64-bit extended sequence numbers (RFC 4303 §2.2.1).
    #[serde(default)]
    pub esn: bool,
    pub packets: u64,
    pub bytes: u64,
    /// Packets refused on this SA (all reasons).
    #[serde(default)]
    pub drops: u64,
    /// Refusals by reason (e.g. "replay", "integrity"); only reasons seen.
    #[serde(default)]
    pub drop_reasons: Vec<DropCount>,
}

/// A request's inline key is never written out (a serialized request
/// names its key file only).
fn never_written(_: &Option<HexKey>) -> bool {
    true
}

/// What would stand for a key if one were written: nothing.
fn redacted<S: serde::Serializer>(_: &Option<HexKey>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_none()
}

/// Key material in a request: hex text, zeroized when dropped, never
/// printed (its `Debug` is redacted) and never serialized back.
#[derive(Clone, Default)]
pub struct HexKey(pub zeroize::Zeroizing<String>);

impl std::fmt::Debug for HexKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HexKey(<redacted>)")
    }
}

impl<'de> Deserialize<'de> for HexKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| HexKey(zeroize::Zeroizing::new(s)))
    }
}

/// A `[[tunnel.sa]]` as a request names it: by its key file, never its
/// key; the replay window for an inbound SA only.
impl From<&vecgate_config::StaticSa> for TunnelSaSpec {
    fn from(s: &vecgate_config::StaticSa) -> Self {
        let inbound = s.direction == vecgate_config::SaDirection::In;
        TunnelSaSpec {
            direction: s.direction.as_str().to_owned(),
            replay_window: inbound.then_some(s.replay_window),
            spi: SpiText(s.spi),
            algorithm: s.algorithm.as_str().to_owned(),
            key: None,
            key_file: Some(s.key_file.display().to_string()),
            esn: Some(s.esn),
            lifetime_bytes: s.lifetime_bytes,
            lifetime_packets: s.lifetime_packets,
            lifetime_seconds: s.lifetime_seconds,
        }
    }
}

sa_request! {
    /// POST /sas: a static inbound SA for an existing ipsec tunnel. The key
    /// comes from `key_file` (a hex file on the gateway, as in the TOML) or
    /// inline as `key` (hex); exactly one of them. Never echoed back.
    pub struct SaSpec {
        /// The ipsec tunnel.
        pub tunnel: String,
        /// Anti-replay window; default 1024 (0 = off).
        #[serde(default)]
        #[schema(minimum = 0, maximum = 65536)]
        pub replay_window: Option<u32>,
    }
}

sa_request! {
    /// POST /tunnels/{name}/switch: the new outbound SA of an ipsec tunnel
    /// (make-before-break: the peer must already have the matching inbound
    /// SA; our inbound SAs are untouched). Key as in [`SaSpec`].
    pub struct SaSwitch {}
}

/// An SPI in a request: a JSON number or text ("0x1001" or "4097");
/// written as a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpiText(pub u32);

impl Serialize for SpiText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.0)
    }
}

impl<'de> Deserialize<'de> for SpiText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        let v = match Raw::deserialize(d)? {
            Raw::N(n) => u32::try_from(n).ok(),
            Raw::S(s) => parse_spi(&s),
        };
        v.map(SpiText)
            .ok_or_else(|| serde::de::Error::custom("expected an SPI (a 32-bit number or hex)"))
    }
}

/// Parses "0x1001" / "4097".
pub fn parse_spi(s: &str) -> Option<u32> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Answer to POST /tunnels/{name}/switch.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SaSwitched {
    pub tunnel: String,
    /// The outbound SPI before (hex).
    pub old_spi: String,
    /// The outbound SPI now (hex).
    pub new_spi: String,
}

/// Counters of one tunnel's virtual port (all workers, since creation).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct TunnelCounters {
    pub tunnel: String,
    #[serde(flatten)]
    pub traffic: PortTraffic,
}

/// A child SA negotiated by IKEv2 (never key material).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IkeChildSaInfo {
    /// Our SPI (the peer sends with it), hex.
    pub spi_in: String,
    /// The peer's SPI (we send with it), hex.
    pub spi_out: String,
    /// ESP algorithm, strongSwan style (e.g. "aes128gcm16").
    pub algorithm: String,
    /// ESP in UDP 4500 (RFC 3948).
    pub udp_encap: bool,
    /// 64-bit extended sequence numbers negotiated (RFC 7296 §3.3.2).
    #[serde(default)]
    pub esn: bool,
    pub local_ts: Vec<String>,
    pub remote_ts: Vec<String>,
    /// Seconds since it was installed.
    pub age_secs: u64,
    /// Seconds until it is rekeyed; absent without a child lifetime.
    pub rekey_in_secs: Option<u64>,
}

/// An IKE SA (never key material).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IkeSaInfo {
    /// Initiator SPI, hex.
    pub spi_i: String,
    /// Responder SPI, hex.
    pub spi_r: String,
    /// Negotiated encryption/PRF/integrity/DH group.
    pub algorithms: String,
    /// NAT detected (or UDP encapsulation forced).
    pub nat: bool,
    pub age_secs: u64,
    pub rekey_in_secs: Option<u64>,
}

/// One IKEv2-keyed tunnel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IkeTunnelInfo {
    pub tunnel: String,
    pub local: String,
    pub remote: String,
    /// We start the negotiation (otherwise we wait for the peer).
    pub initiator: bool,
    /// "connecting", "waiting", "established", "failed" or "down".
    pub state: String,
    /// Why the last exchange failed, if it did.
    pub last_error: Option<String>,
    pub ike_sas: Vec<IkeSaInfo>,
    pub child_sas: Vec<IkeChildSaInfo>,
    pub ike_rekeys: u64,
    pub child_rekeys: u64,
    /// Half-open IKE SAs now (responder; RFC 7296 §2.6).
    #[serde(default)]
    pub half_open: u64,
    /// IKE_SA_INIT requests received (unauthenticated), since start.
    #[serde(default)]
    pub inits_received: u64,
    /// IKE_SA_INIT requests answered with a COOKIE instead of state.
    #[serde(default)]
    pub cookies_sent: u64,
    /// IKE_SA_INIT requests answered NO_PROPOSAL_CHOSEN / INVALID_KE_PAYLOAD.
    #[serde(default)]
    pub inits_refused: u64,
    /// IKE_SA_INIT requests dropped unanswered, by reason ("unknown-peer",
    /// "source-limit", "half-open-full", "invalid-ke", "malformed").
    #[serde(default)]
    pub inits_dropped: Vec<IkeDropCount>,
    /// The admission limits in force (`[tunnel.ike]` keys or defaults).
    #[serde(default)]
    pub admission: IkeAdmission,
}

/// IKE_SA_INIT requests dropped for one reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IkeDropCount {
    pub reason: String,
    pub count: u64,
}

/// Counters of one interface (all workers summed).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct InterfaceCounters {
    pub interface: String,
    #[serde(flatten)]
    pub counters: InterfaceTraffic,
}

/// Traffic of one port, an interface or a tunnel's virtual port (all
/// workers summed). Written once here; interfaces add their own losses
/// ([`InterfaceTraffic`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PortTraffic {
    #[serde(default)]
    pub rx_packets: u64,
    #[serde(default)]
    pub rx_bytes: u64,
    #[serde(default)]
    pub tx_packets: u64,
    #[serde(default)]
    pub tx_bytes: u64,
    /// Packets the port lost itself. An interface: transmit shortfall
    /// (kernel refused or had no room, or the port was down) plus
    /// `rx_missed` plus `rx_errors`; a tunnel: packets it could not send.
    /// Graph drops are per node, not here.
    #[serde(default)]
    pub drops: u64,
}

/// An interface's counters: its traffic and what the kernel lost or
/// refused on the way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InterfaceTraffic {
    #[serde(flatten)]
    pub traffic: PortTraffic,
    /// Frames the kernel dropped because vecgate's receive ring was full
    /// (the gateway did not keep up). Polled every ~100 ms.
    #[serde(default)]
    pub rx_missed: u64,
    /// Frames received but unusable (bad ring descriptor or virtio-net
    /// header).
    #[serde(default)]
    pub rx_errors: u64,
    /// Packets the kernel rejected as malformed on transmit (part of
    /// `drops`).
    #[serde(default)]
    pub tx_errors: u64,
}

impl PortTraffic {
    /// The traffic of a port since `base` was taken.
    pub fn since(now: &PortSnapshot, base: &PortSnapshot) -> Self {
        PortTraffic {
            rx_packets: now.rx_packets.saturating_sub(base.rx_packets),
            rx_bytes: now.rx_bytes.saturating_sub(base.rx_bytes),
            tx_packets: now.tx_packets.saturating_sub(base.tx_packets),
            tx_bytes: now.tx_bytes.saturating_sub(base.tx_bytes),
            drops: now.drops.saturating_sub(base.drops),
        }
    }
}

impl From<&PortSnapshot> for InterfaceTraffic {
    fn from(p: &PortSnapshot) -> Self {
        InterfaceTraffic {
            traffic: PortTraffic::since(p, &PortSnapshot::default()),
            rx_missed: p.rx_missed,
            rx_errors: p.rx_errors,
            tx_errors: p.tx_errors,
        }
    }
}

/// Drops of one node for one reason.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct DropCount {
    pub reason: String,
    pub count: u64,
}

/// Counters of one graph node (all workers summed).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct NodeCounters {
    pub node: String,
    /// Times the node ran (one vector each).
    pub vectors: u64,
    pub packets: u64,
    pub drops: Vec<DropCount>,
}

/// GET /counters.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct CountersInfo {
    pub workers: u64,
    pub interfaces: Vec<InterfaceCounters>,
    #[serde(default)]
    pub tunnels: Vec<TunnelCounters>,
    pub nodes: Vec<NodeCounters>,
}

/// POST /trace.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceArm {
    /// Packets to trace per worker (1..=10000).
    #[schema(minimum = 1, maximum = 10000)]
    pub count: u64,
}

/// Answer to POST /trace.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct TraceArmed {
    pub count: u64,
    /// Workers that were armed.
    pub workers: u64,
}

/// GET /trace: every line recorded so far (kept until DELETE /trace).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct TraceInfo {
    pub lines: Vec<String>,
}

/// POST /capture.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CaptureSpec {
    pub interface: String,
    /// Frames to capture, both directions (1..=10000).
    #[schema(minimum = 1, maximum = 10000)]
    pub count: u64,
    /// Give up after this long and return what was captured (default
    /// 10000, at most 60000).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 60000)]
    pub timeout_ms: Option<u64>,
}

/// One line of a reload plan (`POST /config`, `vecgate reload`).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct PlanChange {
    /// `+` added, `-` removed, `~` changed.
    pub op: String,
    /// gateway, routing, ha, interface, vrf, tunnel, sa or route.
    pub object: String,
    /// Interface or tunnel name, `VRF PREFIX`, `TUNNEL in|out SPI`, or the
    /// section.
    pub name: String,
    /// What changes (`mtu: 1500 → 1400`), or what is added or removed.
    pub detail: String,
    /// Why only a restart can apply this change; absent when it is applied
    /// live.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart: Option<String>,
}

/// The answer to `POST /config`: the plan from the running configuration
/// to the new one, and whether it was applied (`false` for a dry run).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ReloadPlan {
    pub applied: bool,
    pub changes: Vec<PlanChange>,
    /// What was done to the SA registry and the IKE thread, in order
    /// (`tunnel t: installed inbound SA 0x00001101`).
    pub done: Vec<String>,
}

/// `POST /config?dry_run=true` only plans.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
pub struct ReloadQuery {
    pub dry_run: Option<bool>,
}

/// One VRRP virtual router (`GET /ha`, `vecgate show ha`; RFC 5798).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HaGroupInfo {
    pub interface: String,
    pub vrid: u8,
    /// "ipv4" or "ipv6".
    pub family: String,
    /// The virtual addresses.
    pub addresses: Vec<String>,
    /// "init", "backup" or "master" (RFC 5798 §6.4).
    pub state: String,
    /// Priority as configured.
    pub priority: u8,
    /// Priority advertised now: configured less the tracking penalty.
    pub effective_priority: u8,
    pub preempt: bool,
    /// After `POST /ha/switchover`: seconds left during which this router
    /// does not preempt (0: not held).
    pub preempt_held_secs: u64,
    /// Advertisement_Interval, centiseconds.
    pub advert_interval_cs: u16,
    /// The master's address (ours when master), if known.
    pub master: Option<String>,
    pub last_transition: Option<HaTransitionInfo>,
    pub tracked: Vec<HaTrackedInfo>,
    pub adverts_sent: u64,
    pub adverts_received: u64,
    pub priority_zero_sent: u64,
    pub priority_zero_received: u64,
    pub became_master: u64,
    pub became_backup: u64,
    /// The state sync with the peer gateway (`[ha] sync_*`), the same for
    /// every group; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<HaSyncInfo>,
}

/// The HA state sync: the link to the peer gateway and what
/// crossed it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HaSyncInfo {
    /// This gateway's `sync_local` and the peer's address.
    pub local: String,
    pub peer: String,
    /// "up" (a message from the peer within 3 intervals) or "down".
    pub state: String,
    /// The peer's role in its last message: "master" or "backup".
    pub peer_role: Option<String>,
    /// Unix time of the last message accepted from the peer, seconds.
    pub last_sync_unix: Option<f64>,
    /// Our clock minus the peer's send time of that message, ms.
    pub lag_ms: Option<i64>,
    /// Static ESP SAs whose state the peer synced to us.
    pub synced_outbound_sas: u64,
    pub synced_inbound_sas: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub send_errors: u64,
    /// Rejected datagrams by reason: malformed, version, auth, replay,
    /// stale_epoch, skew, reflected, source.
    pub rejected: std::collections::BTreeMap<String, u64>,
    /// Takeovers of synced state (becoming master).
    pub takeovers: u64,
    /// Unix time of the last one and the SAs it moved.
    pub last_takeover_unix: Option<f64>,
    pub last_takeover_sas: u64,
    /// Static routes in the last route set applied from the active, the
    /// changes (additions, removals) and the refusals it took.
    pub synced_routes: u64,
    pub route_changes: u64,
    pub route_errors: u64,
    /// IKE SAs of the active held as the standby's shadow, and how many
    /// the last takeover adopted (no renegotiation).
    #[serde(default)]
    pub synced_ike_sas: u64,
    #[serde(default)]
    pub adopted_ike_sas: u64,
    /// Static outbound SAs a takeover could not bound (the sync link was
    /// down too long: the old active may have used any number left): they
    /// send nothing (`seq-unsafe-after-takeover`) until re-keyed.
    #[serde(default)]
    pub unsafe_sas: Vec<String>,
    /// Tunnels in the last tunnel set applied from the active, the changes
    /// (additions, replacements, removals) and the refusals it took.
    #[serde(default)]
    pub synced_tunnels: u64,
    #[serde(default)]
    pub tunnel_changes: u64,
    #[serde(default)]
    pub tunnel_errors: u64,
}

/// The last state change of a virtual router.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HaTransitionInfo {
    /// Unix time, seconds.
    pub at_unix: f64,
    pub to: String,
    /// "owner", "startup", "master-down", "master-stopped", "preempted",
    /// "shutdown", "interface-down" or "switchover".
    pub reason: String,
}

/// A tracked interface and its link.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HaTrackedInfo {
    pub interface: String,
    pub up: bool,
}

/// `POST /ha/switchover`: which virtual routers resign (all this gateway
/// is master of when neither is given), and for how long they then hold
/// preemption back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HaSwitchover {
    pub interface: Option<String>,
    pub vrid: Option<u8>,
    /// Seconds without preemption after resigning (default 60, at most
    /// 86400).
    pub hold_secs: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gateway's tunnel as a request (what an HA peer is sent) parses
    /// back into the same tunnel, names its key files and never a key.
    #[test]
    fn a_tunnel_spec_round_trips_through_json_without_keys() {
        let cfg = vecgate_config::parse(
            r#"
[gateway]
name = "t"

[[interface]]
name = "wan0"
host = "wan0"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[[tunnel]]
name = "e0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.7"
traffic = ["10.2.0.0/24"]

[[tunnel.sa]]
direction = "out"
spi = 0x1001
algorithm = "aes128gcm16"
key_file = "/k/1001.hex"
esn = false

[[tunnel.sa]]
direction = "in"
spi = 0x2001
algorithm = "aes256-sha256"
key_file = "/k/2001.hex"
replay_window = 128
lifetime_bytes = 1000000
"#,
        )
        .unwrap();
        let t = &cfg.tunnels[0];
        let text = serde_json::to_value(TunnelSpec::from(t))
            .unwrap()
            .to_string();
        assert!(!text.contains("\"key\":"), "{text}");
        let back: TunnelSpec = serde_json::from_str(&text).unwrap();
        let sas: Vec<(String, u32, Option<String>, Option<bool>)> = back
            .sa
            .iter()
            .flatten()
            .map(|s| (s.direction.clone(), s.spi.0, s.key_file.clone(), s.esn))
            .collect();
        assert_eq!(
            sas,
            [
                (
                    "out".into(),
                    0x1001,
                    Some("/k/1001.hex".into()),
                    Some(false)
                ),
                ("in".into(), 0x2001, Some("/k/2001.hex".into()), Some(true)),
            ]
        );
        let sa = &back.sa.as_ref().unwrap()[1];
        assert_eq!(
            (sa.replay_window, sa.lifetime_bytes),
            (Some(128), Some(1_000_000))
        );
        let mut tunnel = back.to_tunnel().unwrap();
        tunnel.ipsec.as_mut().unwrap().sas = t.ipsec.as_ref().unwrap().sas.clone();
        assert_eq!(&tunnel, t);
    }
}
