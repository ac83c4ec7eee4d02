//! IKEv2 (RFC 7296) control plane for vecgate, with PSK authentication,
//! NAT traversal (RFC 3947/3948 port floating), fragmentation (RFC 7383)
//! and child SAs handed out as plain data.
//!
//! Sans-IO: [`Ike`] takes datagrams and time in and returns [`Action`]s
//! (send these bytes, install/remove this child SA, events). Timers are
//! pulled, not pushed: ask [`Ike::next_timeout`] and call
//! [`Ike::handle_timeout`] when it passes. [`driver`] is a thin UDP loop
//! (ports 500 and 4500) around it; `vecgate-ike-peer` is a standalone
//! peer built on the driver, used by the strongSwan interop tests.
//!
//! ```
//! use std::time::Instant;
//! use vecgate_ike::{Action, Event, Ike, IkeConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut cfg = IkeConfig::new("192.0.2.1:500".parse()?, "192.0.2.2:500".parse()?, b"psk");
//! cfg.ike_proposals = IkeConfig::parse_ike_proposals(&["aes256-sha256-x25519"])?;
//! cfg.esp_proposals = IkeConfig::parse_esp_proposals(&["aes128gcm16"])?;
//! cfg.local_ts = vec!["10.1.0.0/16".parse()?];
//! cfg.remote_ts = vec!["10.2.0.0/16".parse()?];
//! let mut ike = Ike::new(cfg)?;
//! ike.initiate(Instant::now())?;
//! while let Some(action) = ike.poll_action() {
//!     match action {
//!         Action::Send { local, remote, data } => {
//!             // IKE_SA_INIT request from 192.0.2.1:500 to 192.0.2.2:500.
//!             assert_eq!((local.port(), remote.port()), (500, 500));
//!             assert_eq!(data[18], 34);
//!         }
//!         Action::InstallChild(keys) => println!("install {keys:?}"),
//!         Action::RemoveChild { spi_in, .. } => println!("remove {spi_in:08x}"),
//!         Action::Event(Event::Failed { reason, .. }) => println!("failed: {reason}"),
//!         Action::Event(e) => println!("{e:?}"),
//!     }
//! }
//! assert!(ike.next_timeout().is_some()); // retransmission timer
//! # Ok(())
//! # }
//! ```

pub mod config;
pub mod crypto;
pub mod driver;
pub mod error;
pub mod group;
pub mod message;
pub mod payload;
pub mod pki;
pub mod select;
pub mod state;

pub use config::{ChildPolicy, EspProposal, IkeConfig, IkeProposal, LocalAuth, Prefix, RemoteAuth};
pub use error::{Error, Result};
pub use payload::Identity;
pub use state::{
    Action, AuthInfo, ChildSaKeys, ChildSnapshot, Event, FailReason, Ike, InFlight, InitDrop,
    InitStats, PendingSnapshot, SaSnapshot, MAX_HALF_OPEN,
};
