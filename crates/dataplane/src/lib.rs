//! vecgate's dataplane: packets move through a graph of nodes in vectors.
//!
//! Layout: packets, their pool and the port trait come from the `packet`
//! crate; here are [`fib`] and [`tables`] (routing state published by the
//! control thread), [`neighbour`] (ARP / ND), [`graph`] and [`nodes`] (the
//! vector graph), [`punt`] (the queues to and from the control threads),
//! [`counters`] and [`trace`], and [`worker`] (the loop that drives ports
//! and the graph).

pub mod counters;
pub mod esp;
pub mod fib;
pub mod graph;
pub mod neighbour;
pub mod nodes;
pub mod nvgre;
pub mod offload;
pub mod punt;
pub mod tables;
pub mod trace;
pub mod tunnel;
pub mod worker;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(test)]
mod tests;
