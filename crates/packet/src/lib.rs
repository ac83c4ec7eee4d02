//! The bottom of vecgate's crate graph: the packet buffer and its
//! preallocated pool ([`buffer`]), the offload metadata a packet carries
//! ([`Offload`], [`Gso`]), and the interface an I/O backend implements
//! ([`port`]), how large a super-packet handed to the kernel may be
//! ([`gso_limit`]) and what every frame handed to it must be
//! ([`tx_check`]), and how a polling loop waits when its ports run dry
//! ([`idle`]).
//!
//! Everything that handles packets (the ESP transforms in `vecgate-ipsec`,
//! the graph in `dataplane`, the backends in `vecgate-io`) imports them from
//! here, so none of those crates has to depend on another just to name a
//! packet.

pub mod buffer;
pub mod gso_limit;
pub mod idle;
pub mod port;
pub mod tx_check;

pub use buffer::{Gso, Meta, Offload, Packet, Pool, VECTOR_SIZE};
pub use idle::IdleSpin;
pub use port::{Port, PortDrops, Sent};
