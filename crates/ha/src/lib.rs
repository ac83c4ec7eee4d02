//! High availability: virtual addresses held by one gateway of a pair.
//!
//! [`vrrp`] is the sans-I/O VRRPv3 machine (RFC 5798 §6.4) of one
//! virtual router; [`speaker`] runs one per configured group for the
//! gateway, whose VRRP thread feeds it adverts, timers and link events and
//! carries out its outputs (frames, announcements, addresses, takeovers).
//! [`sync`] is the state sync's sealed, versioned message format;
//! [`syncer`] the sans-I/O state sync that speaks it: the gateway's sync
//! thread feeds it datagrams, the SA state's reservations, the IKE
//! thread's SAs and VRRP's role, carries out its actions, and asks it to
//! take over the synced state when VRRP makes this gateway master.

pub mod speaker;
pub mod sync;
pub mod syncer;
pub mod vrrp;

pub use vrrp::{Action, Config, Event, Machine, Reason, State, Stats};
