//! The API's JSON shapes. Addresses and prefixes travel as strings in their
//! usual text forms; key material never appears in any of them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

mod counters;
mod ha;
mod ike;
mod inspect;
mod interfaces;
mod pool;
mod reload;
mod routes;
mod sas;
mod tunnels;

pub use counters::*;
pub use ha::*;
pub use ike::*;
pub use inspect::*;
pub use interfaces::*;
pub use pool::*;
pub use reload::*;
pub use routes::*;
pub use sas::*;
pub use tunnels::*;

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
