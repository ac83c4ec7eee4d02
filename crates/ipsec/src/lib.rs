//! IPsec ESP in tunnel mode (RFC 4303) for vecgate: security associations,
//! the AEAD and CBC+HMAC transforms, anti-replay, lifetimes and the SAD.
//!
//! This crate does no I/O and owns no graph: the dataplane's esp-encrypt and
//! esp-decrypt nodes hand it [`dataplane::Packet`]s (one at a time or as a
//! vector) and get back typed drop reasons ([`EspError::as_str`]). All
//! cryptography is aws-lc-rs; nothing here implements a cipher.
//!
//! Sequence numbers are assigned by the caller in batches
//! ([`OutboundSa::reserve`]) so several workers can share one outbound SA
//! without a lock, the way wireguard-go assigns nonces at dispatch.

pub mod error;
pub mod esp;
pub mod lifetime;
pub mod replay;
pub mod sa;
pub mod sad;

pub use error::EspError;
pub use esp::Decrypted;
pub use lifetime::{Lifetime, LifetimeEvent};
pub use replay::ReplayWindow;
pub use sa::{Algorithm, InboundSa, OutboundSa, SaConfig, TunnelEndpoints, UdpEncap};
pub use sad::{Sad, TunnelSas};
