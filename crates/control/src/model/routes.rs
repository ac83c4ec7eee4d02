//! Routes (`/routes`).

use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa::ToSchema;

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
    /// "static" (the configuration file), "api" (`POST /routes`), "ipsec"
    /// (an ipsec tunnel's `traffic` selectors), or "fpm/PROTOCOL" as zebra
    /// reports it ("fpm/bgp").
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
