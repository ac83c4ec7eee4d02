//! Zero-copy typed views and builders for every packet format vecgate speaks.
//!
//! Each format lives in a file named after it. The pattern (after smoltcp's
//! `wire`): a `Xxx<T: AsRef<[u8]>>` view wraps a buffer; `new_checked`
//! validates every length once so the getters after it cannot go out of
//! bounds; setters need `AsMut<[u8]>`; a plain `XxxRepr` struct with
//! `parse`/`emit` serves the control plane and the tests. Malformed input is a
//! typed [`Error`], never a panic.

pub mod error;

pub mod checksum;

pub mod arp;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;

pub mod esp;
pub mod gre;
pub mod nvgre;
pub mod vxlan;

pub mod vrrp;

pub mod pcap;
pub mod vnet;

pub use error::{Error, Result};
