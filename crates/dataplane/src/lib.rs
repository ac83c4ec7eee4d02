//! vecgate's dataplane: packets move through a graph of nodes in vectors.
//!
//! Layout: [`buffer`] (packets and the pool), [`port`] (the I/O backend
//! interface), and, in later modules, the graph, its nodes, the FIBs and the
//! neighbour tables.

pub mod buffer;
pub mod offload;
pub mod port;

pub use buffer::{Gso, Meta, Offload, Packet, Pool, VECTOR_SIZE};
pub use port::Port;
