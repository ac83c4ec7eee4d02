//! Keying the ESP dataplane: who installs, switches and removes the SAs
//! the esp nodes use.
//!
//! - [`ike`]: IKEv2 for `kind = "ipsec"` tunnels with a `[tunnel.ike]`
//!   section: the IKE control plane drives a sans-IO [`vecgate_ike::Ike`]
//!   per tunnel over the dataplane's punt path and keys the
//!   [`vecgate_ipsec::EspRegistry`] from its actions (make-before-break);
//!   with an HA state sync it is silent while backup and adopts the
//!   active's IKE SAs on a takeover. The gateway runs it on a thread of
//!   its own ([`ike::IkePlane::run`]).
//! - [`sa_ops`]: the API's SA operations ([`vecgate_control::SaOps`]):
//!   static SAs through the [`vecgate_ipsec::SaState`], IKE tunnels
//!   through the running IKE control plane, `GET /sas`.
//! - [`lifetime`]: SA lifetime events as the log says them.
//! - [`esp_tables`]: the ESP tunnels' part of every table build (their
//!   ports, SPD routes and the SAD, from the registry).

pub mod esp_tables;
pub mod ike;
pub mod lifetime;
pub mod sa_ops;
