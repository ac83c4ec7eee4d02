//! An M+N pool of gateways on etcd: members register under leases, an
//! elected leader places each tenant's connections on them by capacity,
//! and when a member dies its connections move to another member with
//! their IPsec SAs, without renegotiation.
//!
//! The core is sans I/O, in the style of [`vecgate_ha::vrrp::Machine`]:
//! views, events and time in, writes and actions out, so every rule is
//! tested without etcd or sockets.
//!
//! - [`keys`]: where everything lives in etcd;
//! - [`records`]: the JSON records (members, placements, statuses, audit);
//! - [`connection`]: what a tenant asks for (a `[[tunnel]]` and its
//!   `[[route]]`s) and its check by the configuration's validator;
//! - [`placement`]: capacity per class, headroom for N failures,
//!   anti-affinity, sticky placement, the rebalance plan;
//! - [`view`]: a member's mirror of the pool's keys;
//! - [`leader`]: the leader's placement writes, fenced by its epoch;
//! - [`owner`]: what a member does with what is placed on it (failover,
//!   make-before-break handover), and what it writes back;
//! - [`seal`] and [`snapshot`]: the sealed SA state and the takeover rule;
//! - [`fence`]: when a member must stop serving (lease deadline on its
//!   monotonic clock; quorum loss is not a reason);
//! - [`etcd`]: the thin driver that carries all of it to etcd.
//!
//! **Epochs.** The leader's election key's create revision is the epoch.
//! Every placement write is a transaction comparing it, so a deposed
//! leader cannot write; every owner write compares the placement's mod
//! revision and the member key's lease, so a member that lost its
//! connection or its lease cannot write either.

pub mod connection;
pub mod etcd;
pub mod fence;
pub mod keys;
pub mod leader;
pub mod owner;
pub mod placement;
pub mod records;
pub mod seal;
pub mod snapshot;
pub mod view;

pub use connection::Connection;
pub use fence::{Fence, Gate, Probe};
pub use keys::Keys;
pub use leader::{Leader, Write};
pub use owner::{Action, Mode, Owner};
pub use records::{Capacity, Class, Demand, MemberRecord, Reason};
pub use seal::PoolKey;
pub use view::View;

/// Wall clock, ms since the Unix epoch (0 before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
