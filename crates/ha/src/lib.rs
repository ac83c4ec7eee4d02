//! High availability: virtual addresses held by one gateway of a pair.
//!
//! [`vrrp`] is the sans-I/O VRRPv3 machine (RFC 5798 §6.4); the gateway
//! feeds it adverts, timers and link events and carries out its actions.
//! [`sync`] is the state sync's sealed, versioned message format; the
//! gateway's sync thread carries it and takes over the synced SAs on
//! [`vrrp::Action::Transition`] to master.

pub mod sync;
pub mod vrrp;

pub use vrrp::{Action, Config, Event, Machine, Reason, State, Stats};
