//! Interfaces and VRFs (`/interfaces`, `/vrfs`).

use super::InterfaceTraffic;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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
