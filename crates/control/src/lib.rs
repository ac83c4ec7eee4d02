//! vecgate's management plane: the REST API (with its OpenAPI 3 document),
//! access control, Prometheus metrics, and the control state that applies
//! live changes.
//!
//! The API runs on its own thread with a small tokio runtime and never
//! blocks a worker: a change is applied to a copy of the running
//! [`vecgate_config::Config`], checked by the one validator
//! ([`vecgate_config::validate`]), turned into new dataplane tables by the
//! same builder `vecgate run` uses at startup, and published with
//! `SharedTables::store`; workers pick the tables up on their next vector.
//! Whatever needs a worker's own state (neighbours, trace, capture) goes
//! through its bounded command mailbox ([`dataplane::worker::Command`]).
//!
//! Changes that would need new sockets on every worker (adding or removing
//! a physical interface) are refused with 409: restart with the new
//! configuration. Tunnels are virtual ports and come and go live (their
//! port numbers stay stable; workers count up to
//! `dataplane::graph::MAX_VIRTUAL_PORTS` of them); ipsec tunnels too: their
//! SAs (static, or negotiated by IKEv2) are registered, started, stopped
//! and removed around the table swap through [`SaOps`], which also
//! installs, switches and removes static SAs of running tunnels. Key
//! material in requests is accepted (hex, or a key file path) but never
//! returned, logged or kept in the running configuration except as the
//! key file's path.

pub mod api;
pub mod auth;
pub mod build;
pub mod error;
pub mod fpm;
pub mod learned;
pub mod metrics;
pub mod model;
pub mod ops;
pub mod reload;
pub mod server;
pub mod state;

pub use auth::{Auth, Token};
pub use build::NetdevFacts;
pub use error::ApiError;
pub use ops::{
    read_key_file, HaOps, IkeSource, KeySource, PoolOps, PortOps, ReloadHook, SaOps, SaSource,
    TableBuilder,
};
pub use server::{check_endpoint, serve, ServerHandle, Tls};
pub use state::{Capabilities, Control, Dataplane};
