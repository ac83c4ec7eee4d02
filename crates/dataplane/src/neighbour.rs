//! Neighbour resolution: ARP (RFC 826) for IPv4 and Neighbor Discovery
//! (RFC 4861) for IPv6.
//!
//! - [`table`]: the per-worker tables, one state machine for both
//!   families, and what the workers share of them ([`NeighbourShared`]);
//!   re-exported here.
//! - [`packets`]: the frames the gateway originates to resolve and
//!   announce (ARP requests, gratuitous ARP, NS, unsolicited NA).
//! - [`solicited`]: the solicitations every worker sent, so a reply
//!   creates an entry only if it answers one.

pub mod packets;
pub mod solicited;
mod table;

pub use table::*;
