//! What the control state asks of the rest of the gateway, behind traits
//! and closures so this crate opens no socket and needs no IPsec or IKE
//! dependency: building tables, attaching interfaces, the SA registry,
//! the IKE thread's and the VRRP speaker's views.

use crate::error::ApiError;
use crate::model::SaInfo;
use dataplane::tables::Tables;
use dataplane::worker::PortQueue;
use std::sync::Arc;
use vecgate_config::Config;

use crate::build::NetdevFacts;

/// Builds dataplane tables from a configuration and the learned routes
/// ([`crate::learned`]): the same function `vecgate run` uses at startup,
/// so live changes and restarts agree.
pub type TableBuilder =
    Box<dyn Fn(&Config, &crate::learned::Learned) -> Result<Tables, String> + Send + Sync>;

/// Interfaces attached and released while running (the binary's I/O
/// backends, behind a trait so this crate opens no socket).
pub trait PortOps: Send + Sync {
    /// Claims `ifc`'s netdev (one gateway per netdev), opens one queue on
    /// it per worker, in worker order, as at startup, and installs its
    /// ingress guard; from now on the table builder knows its facts.
    /// Nothing reaches a worker yet.
    fn open(
        &self,
        ifc: &vecgate_config::Interface,
    ) -> Result<(NetdevFacts, Vec<PortQueue>), String>;
    /// Releases what [`PortOps::open`] claimed for interface `name`
    /// (guard, netdev lock, facts), once no worker polls it any more.
    fn close(&self, name: &str);
}

/// Lists the IPsec SAs (vecgate's SA registry, behind a closure so this
/// crate needs no IPsec dependency).
pub type SaSource = Box<dyn Fn() -> Vec<SaInfo> + Send + Sync>;

/// Where an SA's key comes from: the request's hex text, or the text of
/// its key file, read by [`read_key_file`] before any lock is taken.
#[derive(Clone, Copy)]
pub enum KeySource<'a> {
    Hex(&'a str),
    File(&'a [u8]),
}

impl<'a> KeySource<'a> {
    /// The inline hex when the request has one, else the key file's text
    /// (empty when it was not read).
    pub fn of(hex: Option<&'a str>, file: Option<&'a [u8]>) -> Self {
        match (hex, file) {
            (Some(h), _) => KeySource::Hex(h),
            (None, f) => KeySource::File(f.unwrap_or(&[])),
        }
    }
}

/// Reads a key or PSK file named in a request (a private regular file of
/// at most 4 KiB, [`vecgate_config::secret`]): never blocks on a FIFO,
/// never reads a device. Called on the blocking pool, before any lock,
/// so a bad path costs one refused request and nothing else. `field`
/// names the request field in the error.
pub fn read_key_file(
    path: &std::path::Path,
    field: &str,
) -> Result<zeroize::Zeroizing<Vec<u8>>, ApiError> {
    vecgate_config::secret::read_secret_file(path, vecgate_config::secret::MAX_SECRET_LEN)
        .map_err(|e| ApiError::bad(field, format!("{field} {}: {e}", path.display())))
}

/// Runtime SA changes on vecgate's SA registry (behind a trait so this
/// crate needs no IPsec dependency). `sa` is the SA as the TOML would
/// hold it (its `key_file` is meaningless with [`KeySource::Hex`]).
/// Errors are [`ApiError`]s naming the field.
pub trait SaOps: Send + Sync {
    /// Installs an inbound SA for ipsec tunnel `t`.
    fn install_inbound(
        &self,
        t: &vecgate_config::Tunnel,
        sa: &vecgate_config::StaticSa,
        key: KeySource<'_>,
    ) -> Result<(), ApiError>;
    /// Switches `t`'s outbound SA; returns the previous SPI.
    fn switch_outbound(
        &self,
        t: &vecgate_config::Tunnel,
        sa: &vecgate_config::StaticSa,
        key: KeySource<'_>,
    ) -> Result<u32, ApiError>;
    /// Removes the inbound SA `spi`; returns its tunnel's name.
    fn remove_inbound(&self, spi: u32) -> Result<String, ApiError>;
    /// Registers the new ipsec tunnel `t` of `cfg` before it enters the
    /// tables: its static SAs keyed from `keys` (one per `t.ipsec.sas`, in
    /// order), or its IKEv2 state machine keyed with `psk` (the PSK file's
    /// contents; proposals parsed; not started yet). Errors name the
    /// request field (`sa[1].key`, `ike.psk_file`) and never hold key
    /// material.
    fn add_tunnel(
        &self,
        cfg: &vecgate_config::Config,
        t: &vecgate_config::Tunnel,
        keys: &[KeySource<'_>],
        psk: Option<&[u8]>,
    ) -> Result<(), ApiError>;
    /// Reads the certificate, key, CA and CRL files of running IKEv2
    /// tunnel `t` again (reload); with `apply`, its state machine takes
    /// them. Errors name the request field (`ike.crl_files`).
    fn reload_auth(&self, _t: &vecgate_config::Tunnel, _apply: bool) -> Result<(), ApiError> {
        Ok(())
    }
    /// The tunnel is in the published tables: an IKEv2 tunnel starts
    /// negotiating (or waits for the peer).
    fn start_tunnel(&self, name: &str);
    /// The tunnel is about to leave the tables: an IKEv2 tunnel tells the
    /// peer (INFORMATIONAL DELETE, RFC 7296 §1.4.1) and waits a moment for
    /// the answer. Blocks (call from a blocking context).
    fn stop_tunnel(&self, name: &str);
    /// The tunnel left the tables: its SAs leave the registry.
    fn remove_tunnel(&self, name: &str) -> Result<(), ApiError>;
}

/// Lists the IKEv2 tunnels with their IKE and child SAs (`GET /ike`).
pub type IkeSource = Box<dyn Fn() -> Vec<crate::model::IkeTunnelInfo> + Send + Sync>;

/// The VRRP speaker as the API sees it (`GET /ha`, `POST /ha/switchover`).
/// State sync will hang off the same speaker, not off this interface.
pub trait HaOps: Send + Sync {
    fn groups(&self) -> Vec<crate::model::HaGroupInfo>;
    /// Resigns mastership (priority 0, RFC 5798 §6.4.3); returns the groups
    /// that resigned. Blocks (call from a blocking context).
    fn switchover(
        &self,
        spec: &crate::model::HaSwitchover,
    ) -> Result<Vec<crate::model::HaGroupInfo>, ApiError>;
}

/// The pool member as the API sees it (`/pool`). Every call may wait on
/// etcd (bounded): call from a blocking context.
pub trait PoolOps: Send + Sync {
    fn show(&self) -> crate::model::PoolInfo;
    /// Checks and stores a connection: 400 naming the field, 409 when it
    /// does not fit, 503 without etcd or its quorum.
    fn add_connection(&self, spec: &crate::model::PoolConnectionSpec) -> Result<(), ApiError>;
    fn del_connection(&self, id: &str) -> Result<(), ApiError>;
    fn drain(&self, spec: &crate::model::PoolDrain) -> Result<(), ApiError>;
    fn rebalance(
        &self,
        spec: &crate::model::PoolRebalance,
    ) -> Result<Vec<crate::model::PoolMove>, ApiError>;
}

/// See [`Control::set_reload_hook`].
pub type ReloadHook = Arc<dyn Fn(bool) + Send + Sync>;
