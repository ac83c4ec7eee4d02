//! High availability: virtual addresses held by one gateway of a pair.
//!
//! [`vrrp`] is the sans-I/O VRRPv3 machine (RFC 5798 §6.4); the gateway
//! feeds it adverts, timers and link events and carries out its actions.
//! Every [`vrrp::Action::Transition`] is also what a state-sync module
//! will hook on (become master: take over the synced SAs).

pub mod vrrp;

pub use vrrp::{Action, Config, Event, Machine, Reason, State, Stats};
