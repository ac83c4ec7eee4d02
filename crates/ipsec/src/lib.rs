//! IPsec ESP in tunnel mode (RFC 4303) for vecgate: everything but the
//! wire format (`wire::esp`) and the graph nodes (`dataplane`'s
//! esp-encrypt / esp-decrypt).
//!
//! - [`sa`]: an SA's configuration, algorithm, keys and outer header
//!   template; [`tunnel_mode`]: sealing and opening packets with it;
//!   [`replay`]: the anti-replay window; [`lifetime`]: soft/hard limits.
//! - [`registry`]: every tunnel's SAs as the graph calls them (outbound
//!   SA per tunnel, the inbound SAD by SPI) and the runtime interface that
//!   installs, switches and removes them.
//! - [`keys`]: key files and configured SAs → [`SaConfig`];
//!   [`static_sas`]: the configuration file's SAs at start.
//! - [`seqstore`]: sequence numbers and replay windows that survive
//!   restarts (the counter, the planner, the records on disk);
//!   [`sastate`]: [`SaState`], their owner in a running gateway (the
//!   reservations ahead of use, and what a state sync reads and moves).
//! - [`error`]: the drop reasons, each defined once.
//!
//! This crate owns no graph and does no I/O but the state directory's
//! files ([`seqstore::Store`]): the esp nodes hand it [`packet::Packet`]s
//! (one at a time or as a vector) and get back typed
//! drop reasons ([`EspError::as_str`]). The cryptography is aws-lc-rs's,
//! and for AES-CBC + HMAC intel-ipsec-mb's multi-buffer engine where the
//! CPU has AES-NI ([`engine`]); nothing here implements a cipher.
//!
//! Sequence numbers are assigned by the caller in batches
//! ([`OutboundSa::reserve`]) so several workers can share one outbound SA
//! without a lock, the way wireguard-go assigns nonces at dispatch.
//!
//! ```
//! use packet::Pool;
//! use vecgate_ipsec::{Algorithm, InboundSa, Lifetime, OutboundSa, SaConfig, TunnelEndpoints};
//! use zeroize::Zeroizing;
//!
//! let cfg = || SaConfig {
//!     spi: 0x1000,
//!     algorithm: "aes128gcm16".parse().unwrap(),
//!     key: Zeroizing::new(vec![7u8; Algorithm::AesGcm128.key_len()]), // key ‖ salt
//!     esn: true,
//!     replay_window: 1024,
//!     lifetime: Lifetime::default(),
//!     tunnel: TunnelEndpoints {
//!         local: "192.0.2.1".parse().unwrap(),
//!         remote: "192.0.2.2".parse().unwrap(),
//!     },
//!     encap: None,
//!     df: true,
//! };
//! let (tx, rx) = (OutboundSa::new(cfg()).unwrap(), InboundSa::new(cfg()).unwrap());
//! let mut pool = Pool::new(1);
//! let mut pkt = pool.alloc().unwrap();
//! let inner = [0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
//! pkt.set_data(&inner);
//!
//! let seq = tx.reserve(1).unwrap().start; // a worker reserves per vector
//! tx.encrypt(&mut pkt, false, seq).unwrap(); // now outer IPv4 + ESP
//! pkt.pull_front(20); // the receive path strips the outer header
//! let d = rx.decrypt(&mut pkt).unwrap();
//! assert_eq!((d.seq, d.inner_v6), (1, false));
//! assert_eq!(pkt.data(), &inner);
//! ```

pub mod engine;
pub mod error;
pub mod keys;
pub mod lifetime;
pub mod registry;
pub mod replay;
pub mod sa;
pub mod sastate;
pub mod selectors;
pub mod seqstore;
pub mod static_sas;
mod transform;
pub mod tunnel_mode;

pub use engine::Engine;
pub use error::EspError;
pub use lifetime::{Lifetime, LifetimeEvent};
pub use registry::{
    EspRegistry, InboundSad, RegistryError, RxOk, RxSlice, SaEvent, SaInfo, TunnelTx,
};
pub use replay::ReplayWindow;
pub use sa::{Algorithm, InboundSa, OutboundSa, SaConfig, TunnelEndpoints, UdpEncap};
pub use sastate::{NotDurable, SaSnapshot, SaState};
pub use selectors::{Selector, Selectors};
pub use tunnel_mode::{Decrypted, SliceSealer};
