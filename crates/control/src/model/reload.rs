//! Reload plans (`POST /config`).

use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa::ToSchema;

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
