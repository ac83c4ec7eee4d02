//! IPsec ESP tunnels (RFC 4303 tunnel mode) as the graph sees them.
//!
//! An ESP tunnel is one more tunnel kind in the overlay model of
//! [`crate::tunnel`]: it owns a *virtual port* with an
//! [`Interface`](crate::tables::Interface) in its overlay VRF, routes point
//! at it (`Route::Port`), and interface-output hands packets for that port to
//! esp-encrypt, which encrypts them, prepends the SA's outer header and
//! routes the result in the underlay VRF. Inbound, ip-local hands IP
//! protocol 50 and UDP port 4500 (NAT-T, RFC 3948) to esp-decrypt, which
//! finds the SA by SPI, decrypts, checks the inner packet against the
//! tunnel's selectors and delivers it to ip4/ip6-input as if received on the
//! virtual port.
//!
//! Why traits: the crypto, the SAs and the SAD live in `vecgate-ipsec`, which
//! depends on this crate (for [`Packet`]). The nodes therefore work against
//! two small object-safe traits ([`EspOutbound`], [`EspInbound`]) that
//! `vecgate_ipsec::dp` implements; the tables hold `Arc<dyn ...>`. No
//! dependency cycle, one crate per concern, and the dataplane can be tested
//! with a mock transform. The SA objects are shared, not rebuilt, when the
//! control plane publishes new tables, so sequence numbers and replay
//! windows survive route changes, and an SA switch (make-before-break
//! rekey) is a pointer swap inside the implementation, not a table rebuild.

use crate::buffer::Packet;
use crate::fib::Prefix;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

/// Drop reasons of the crypto, in the order of `vecgate_ipsec::EspError::ALL`
/// with the names of `EspError::as_str` (a test in vecgate-ipsec keeps them
/// equal). A [`Reason`] indexes this table.
pub const CRYPTO_REASONS: [&str; 17] = [
    "truncated",
    "bad-length",
    "bad-spi",
    "replay",
    "too-old",
    "icv-fail",
    "bad-padding",
    "bad-next-header",
    "dummy",
    "seq-exhausted",
    "sa-expired",
    "lifetime-hard",
    "no-room",
    "bad-inner",
    "bad-config",
    "crypto",
    "no-sa",
];

/// Index into [`CRYPTO_REASONS`].
pub type Reason = u8;

/// Reason used when an implementation reports an index out of range.
pub const REASON_CRYPTO: Reason = 15;

/// The outbound side of one ESP tunnel: its current outbound SA.
pub trait EspOutbound: Send + Sync + fmt::Debug {
    /// Encrypts a vector in place. Each packet holds an inner IPv4/IPv6
    /// packet (data at the IP header, checksums complete, no GSO) and
    /// leaves as outer IP (+ UDP for NAT-T) + ESP. `status[i]` receives the
    /// result of `pkts[i]`; `Err` means the SA refused the whole vector
    /// (expired, sequence numbers exhausted) and nothing was encrypted.
    fn encrypt(&self, pkts: &mut [Packet], status: &mut [Result<(), Reason>])
        -> Result<(), Reason>;

    /// Most bytes encryption adds to a packet (outer headers, ESP header,
    /// IV, padding, trailer, ICV): the tunnel MTU is the underlay MTU
    /// minus this.
    fn overhead(&self) -> usize;

    /// The current outbound SPI (for `show` commands and traces).
    fn spi(&self) -> u32;
}

/// What esp-decrypt learns about an authentic packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxOk {
    /// [`EspTunnelDef::id`] of the tunnel the SA belongs to.
    pub tunnel: u32,
    /// The inner packet is IPv6.
    pub inner_v6: bool,
}

/// The inbound SAD: SAs by SPI, of every tunnel.
pub trait EspInbound: Send + Sync + fmt::Debug {
    /// Decrypts a vector in place; each packet's data starts at the ESP
    /// header (outer IP and UDP already pulled). `out[i]` receives the
    /// result of `pkts[i]`; on success the data is the inner IP packet.
    /// Packets with an unknown SPI get `bad-spi`.
    fn decrypt(&self, pkts: &mut [Packet], out: &mut [Result<RxOk, Reason>]);
}

/// What the control plane says about an ESP tunnel (see
/// [`TablesBuilder::add_esp_tunnel`](crate::tables::TablesBuilder::add_esp_tunnel)).
#[derive(Clone, Debug)]
pub struct EspTunnelDef {
    /// Stable tunnel id, the one [`RxOk::tunnel`] reports.
    pub id: u32,
    /// Outer addresses (local = ours).
    pub local: IpAddr,
    pub remote: IpAddr,
    /// Configuration id of the VRF whose FIB reaches `remote`.
    pub underlay_vrf: u32,
    /// UDP encapsulation (RFC 3948) on port 4500.
    pub nat_t: bool,
    /// Inbound policy (RFC 4301 §5.2): a decrypted packet's source must lie
    /// in one of these prefixes (the tunnel's remote traffic selectors);
    /// empty = any.
    pub traffic: Vec<Prefix>,
    pub tx: Arc<dyn EspOutbound>,
}

/// One ESP tunnel as the workers use it.
#[derive(Clone, Debug)]
pub struct EspTunnel {
    /// Its virtual port.
    pub port: u16,
    /// Index of the underlay VRF in `Tables::vrfs`.
    pub underlay_vrf: u16,
    /// Outer header family.
    pub v6: bool,
    pub def: EspTunnelDef,
}

impl EspTunnel {
    /// Whether the inner source `src` is allowed by the tunnel's selectors.
    #[inline]
    pub fn allows(&self, src: IpAddr) -> bool {
        self.def.traffic.is_empty() || self.def.traffic.iter().any(|p| p.contains(src))
    }
}

/// The ESP part of the tables.
#[derive(Clone, Debug, Default)]
pub struct EspTable {
    pub tunnels: Vec<EspTunnel>,
    /// Per port: index into `tunnels`, or [`crate::tunnel::NO_TUNNEL`].
    pub by_port: Vec<u32>,
    /// Tunnel id → index into `tunnels`.
    pub by_id: crate::fib::FxMap<u32, u32>,
    /// The SAD shared by every tunnel; `None` without ESP tunnels.
    pub sad: Option<Arc<dyn EspInbound>>,
    /// Some tunnel uses NAT-T: ip-local sends UDP 4500 to esp-decrypt.
    pub nat_t: bool,
}

impl EspTable {
    /// The tunnel behind virtual port `port`.
    #[inline]
    pub fn at_port(&self, port: u16) -> Option<&EspTunnel> {
        let i = *self.by_port.get(usize::from(port))?;
        self.tunnels.get(i as usize)
    }

    /// The tunnel with id `id`.
    #[inline]
    pub fn by_id(&self, id: u32) -> Option<&EspTunnel> {
        let i = *self.by_id.get(&id)?;
        self.tunnels.get(i as usize)
    }

    /// Whether any ESP tunnel exists (ip-local dispatch).
    #[inline]
    pub fn any(&self) -> bool {
        self.sad.is_some()
    }
}
