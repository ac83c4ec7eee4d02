//! Counters (`/counters`): ports, tunnels and graph nodes.

use dataplane::counters::PortSnapshot;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Counters of one tunnel's virtual port (all workers, since creation).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct TunnelCounters {
    pub tunnel: String,
    #[serde(flatten)]
    pub traffic: PortTraffic,
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
