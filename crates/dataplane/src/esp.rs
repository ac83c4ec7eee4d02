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
//! The SAs themselves live in `vecgate-ipsec`: the tables hold shared
//! pointers to a tunnel's [`TunnelTx`] and to the [`InboundSad`], which the
//! registry there owns. They are shared, not rebuilt, when the control plane
//! publishes new tables, so sequence numbers and replay windows survive
//! route changes, and an SA switch (make-before-break rekey) is a pointer
//! swap inside the registry, not a table rebuild.

use crate::fib::Prefix;
use std::net::IpAddr;
use std::sync::Arc;
use vecgate_ipsec::{InboundSad, TunnelTx};

/// What the control plane says about an ESP tunnel (see
/// [`TablesBuilder::add_esp_tunnel`](crate::tables::TablesBuilder::add_esp_tunnel)).
#[derive(Clone, Debug)]
pub struct EspTunnelDef {
    /// Stable tunnel id, the one `vecgate_ipsec::RxOk::tunnel` reports.
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
    pub tx: Arc<TunnelTx>,
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
    /// Whether an ESP packet for this tunnel's SA came the way its peer
    /// sends: received in the underlay VRF `vrf` (an index), addressed to
    /// our outer address, and, without NAT traversal (where a NAT rewrites
    /// it), from the peer's. An SPI is no secret: the same packet arriving
    /// in a tenant's VRF is a tenant reaching into the underlay.
    #[inline]
    pub fn accepts_outer(&self, vrf: u16, src: IpAddr, dst: IpAddr) -> bool {
        vrf == self.underlay_vrf
            && dst == self.def.local
            && (self.def.nat_t || src == self.def.remote)
    }

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
    pub sad: Option<Arc<InboundSad>>,
    /// Some tunnel uses NAT-T: ip-local sends UDP 4500 to esp-decrypt.
    pub nat_t: bool,
    /// Every tunnel's (underlay VRF index, local outer address): where IKE
    /// may arrive (ip-local punts nothing else to the control plane).
    pub endpoints: Vec<(u16, IpAddr)>,
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

    /// Whether `(vrf, dst)` is some tunnel's underlay endpoint: IKE for
    /// any other VRF or address is not ours to answer.
    #[inline]
    pub fn is_endpoint(&self, vrf: u16, dst: IpAddr) -> bool {
        self.endpoints.contains(&(vrf, dst))
    }

    /// Whether any ESP tunnel exists (ip-local dispatch).
    #[inline]
    pub fn any(&self) -> bool {
        self.sad.is_some()
    }
}
