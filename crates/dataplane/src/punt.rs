//! Punt paths: the bounded queues on which the workers hand packets to
//! the control threads, and on which those threads hand theirs back to
//! be routed.
//!
//! - [`ike`]: IKE datagrams (UDP 500, and 4500 behind the non-ESP marker)
//!   to and from the IKE thread, those of live IKE SAs on a queue of
//!   their own.
//! - [`vrrp`]: VRRP advertisements to the speaker thread, each with the
//!   port it arrived on.
//! - [`host`]: BGP and BFD to and from the host's stack.
//! - [`slot_queue`]: the bounded queue of preallocated slots all three
//!   are built on (no allocation, no lock, no blocking in a worker).

pub mod host;
pub mod ike;
pub mod slot_queue;
pub mod vrrp;

pub use host::HostPunt;
pub use ike::IkePunt;
pub use vrrp::VrrpPunt;
