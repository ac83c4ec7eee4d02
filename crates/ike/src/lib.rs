//! IKEv2 (RFC 7296) control plane for vecgate.
//!
//! Sans-IO: [`Ike`] takes datagrams and time in and returns [`Action`]s
//! (send bytes, install/remove child SAs, events). [`driver`] is a thin
//! UDP socket loop around it.

pub mod crypto;
pub mod driver;
pub mod error;
pub mod message;
pub mod payload;

pub use error::{Error, Result};
pub mod config;
pub mod select;
pub mod state;

pub use config::{EspProposal, IkeConfig, IkeProposal, Prefix};
pub use payload::Identity;
pub use state::{Action, ChildSaKeys, Event, FailReason, Ike};
