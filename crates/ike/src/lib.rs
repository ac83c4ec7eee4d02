//! IKEv2 (RFC 7296) control plane for vecgate.
//!
//! Sans-IO: [`Ike`] takes datagrams and time in and returns [`Action`]s
//! (send bytes, install/remove child SAs, events). [`driver`] is a thin
//! UDP socket loop around it.

pub mod crypto;
pub mod error;
pub mod message;
pub mod payload;

pub use error::{Error, Result};
