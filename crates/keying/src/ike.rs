//! IKEv2 for `kind = "ipsec"` tunnels with a `[tunnel.ike]` section: the
//! IKE control plane ([`IkePlane`], run on a thread of the gateway's) runs
//! a sans-IO [`vecgate_ike::Ike`] per tunnel and keys the ESP dataplane
//! through the [`EspRegistry`].
//!
//! Why the datagrams go through the dataplane: the gateway owns its
//! netdevs (AF_PACKET + an ingress guard), so a kernel socket on
//! UDP 500/4500 would never see IKE. ip-local punts IKE into
//! [`dataplane::punt::IkePunt`] and the thread injects its answers there; the
//! workers route them in the tunnel's underlay VRF (see `dataplane::punt::ike`).
//!
//! Keying (RFC 7296 §2.8, make-before-break): a new child SA's inbound SA
//! is installed first, then the tunnel's outbound SA is switched to it. A
//! child SA the library removes (after a rekey, a delete or a dead peer)
//! leaves the outbound path at once when it is the current one (packets
//! are then dropped as `no-sa`), while its inbound SA keeps accepting
//! stragglers for [`INBOUND_GRACE`] before it leaves the SAD. Until the
//! first child SA exists, the tunnel's packets are dropped as `no-sa`.
//!
//! NAT-T (RFC 3948): when the library reports `udp_encap` the SAs are
//! built with UDP encapsulation between the negotiated ports (4500 on our
//! side, whatever the peer's NAT shows on its side).
//!
//! This file holds the tunnels and the control plane's handles; beside
//! it `thread` (the loop), `actions` (the state machines' actions into
//! the dataplane), `status` (what `show ike` reads), `config` (the TOML
//! into [`IkeConfig`]) and `ha` (silent while HA backup, the active's IKE
//! SAs adopted on a takeover).

use dataplane::punt::IkePunt;
use dataplane::tables::SharedTables;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::warn;
use vecgate_config::{Config, IkeSettings, Tunnel};
use vecgate_ike::group::Member;
use vecgate_ike::{Ike, IkeConfig};
use vecgate_ipsec::{EspRegistry, Lifetime};
use zeroize::Zeroizing;

/// How long an inbound SA outlives its child SA (packets in flight, the
/// peer's last vector before it switched).
pub const INBOUND_GRACE: Duration = Duration::from_secs(2);
/// Longest the thread sleeps without looking at timers.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// As [`MAX_WAIT`], while an HA standby (it sends nothing and runs no
/// timer, so the turns are cheap): a takeover waits for it
/// (`vecgate_ha::syncer::ToIke::Adopt`).
const BACKUP_WAIT: Duration = Duration::from_millis(5);
/// Punted datagrams handled per turn of the loop: then the timers run
/// (retransmissions, liveness checks, rekeys), however full the queue.
const MAX_BATCH: usize = 64;
/// Longest the thread waits at shutdown for the peer to acknowledge our
/// IKE deletes (the workers wait for it, so this bounds the stop).
pub const SHUTDOWN_FLUSH: Duration = Duration::from_millis(500);

mod actions;
mod certs;
mod config;
mod ha;
mod status;
mod thread;

pub use certs::{auth_of, files as auth_files};
pub use config::{child_sa_configs, ike_config, ike_config_keyed, psk_from_text, read_psk};
use config::{child_volume_lifetime, ike_tunnels, DEFAULT_CHILD_PACKETS};
pub use ha::HaLink;
pub use status::show_table;
pub use vecgate_control::model::{IkeChildSaInfo as ChildInfo, IkeSaInfo, IkeTunnelInfo};

/// The status the thread publishes (`GET /ike`, `show ike`).
pub type IkeStatus = Arc<Mutex<Vec<IkeTunnelInfo>>>;

struct Child {
    keys_meta: ChildInfo,
    spi_in: u32,
    spi_out: u32,
    at: Instant,
    /// Id of the tunnel whose state machine (IKE SA) carries it: itself,
    /// or a sibling towards the same peer (a reused IKE SA).
    via: u32,
}

struct IkeSaState {
    spi_i: u64,
    spi_r: u64,
    algorithms: String,
    nat: bool,
    at: Instant,
}

struct TunnelIke {
    id: u32,
    name: String,
    ike: Ike,
    state: &'static str,
    last_error: Option<String>,
    ike_sas: Vec<IkeSaState>,
    children: Vec<Child>,
    ike_rekeys: u64,
    child_rekeys: u64,
    reconnect_at: Option<Instant>,
    child_rekey: Option<Duration>,
    ike_rekey: Option<Duration>,
    /// Packet and byte limits of its child SAs ([`child_volume_lifetime`]).
    child_volume: Lifetime,
    /// Children (spi_in) whose soft lifetime already asked for a rekey
    /// (both directions report it; one CREATE_CHILD_SA is enough).
    soft_rekeyed: Vec<u32>,
    /// Underlay VRF, kept for a retired tunnel (gone from the tables while
    /// its IKE SA still carries a sibling's children).
    underlay_vrf: Option<u16>,
    /// Retired: the IKE DELETE went out once no sibling child was left.
    delete_sent: bool,
    /// The INIT counters at the last summary line ([`ControlPlane::summarize`]).
    init_logged: vecgate_ike::InitStats,
    /// The IKE_AUTH refusal counters at the last summary line.
    auth_logged: Vec<(&'static str, u64)>,
    /// When a refusal of each reason was last logged on its own line.
    auth_warned: Vec<(&'static str, Instant)>,
    /// When a certificate's coming expiry was last warned about.
    expiry_warned: Option<Instant>,
}

impl Member for TunnelIke {
    fn tag(&self) -> u32 {
        self.id
    }
    fn ike(&self) -> &Ike {
        &self.ike
    }
    fn ike_mut(&mut self) -> &mut Ike {
        &mut self.ike
    }
}

/// The IKE state machines of every `[tunnel.ike]`, built before the
/// gateway attaches (a missing PSK file fails the start, not the thread).
pub struct Prepared {
    tunnels: Vec<TunnelIke>,
    reg: Arc<EspRegistry>,
    status: IkeStatus,
    cmds: crossbeam_channel::Receiver<Cmd>,
    control: IkeControl,
    /// `[ha]` has a state sync: the thread is gated by the HA role.
    ha: Option<HaLink>,
}

impl Prepared {
    /// What `GET /ike` reads (filled once the thread runs).
    pub fn status(&self) -> IkeStatus {
        self.status.clone()
    }

    /// Adds and removes tunnels of the running thread (the API's).
    pub fn control(&self) -> IkeControl {
        self.control.clone()
    }
}

/// What the API asks of the running IKE thread.
enum Cmd {
    Add(Box<TunnelIke>),
    Remove {
        name: String,
        done: crossbeam_channel::Sender<()>,
    },
    /// Forget it without a word to the peer (a pool connection that moved
    /// to another member, which carries its IKE SA on).
    Forget {
        name: String,
        done: crossbeam_channel::Sender<()>,
    },
    /// A child SA reached its soft lifetime (packets, bytes): rekey it.
    Rekey {
        tunnel: u32,
        spi: u32,
        outbound: bool,
    },
    /// Certificates, keys and CRLs read again (reload).
    SetAuth {
        name: String,
        local_id: vecgate_ike::Identity,
        auth: certs::Auth,
    },
}

/// Tunnels created and deleted while the IKE thread runs.
#[derive(Clone)]
pub struct IkeControl {
    tx: crossbeam_channel::Sender<Cmd>,
}

/// An IKEv2 tunnel built for the running thread (PSK read, proposals
/// parsed), not started yet.
pub struct NewTunnel(Box<TunnelIke>);

impl IkeControl {
    /// Starts `t`: an initiator negotiates at once, a responder waits.
    /// The tunnel must be in the published tables (its datagrams are
    /// routed in its underlay VRF).
    pub fn add(&self, t: NewTunnel) {
        if self.tx.send(Cmd::Add(t.0)).is_err() {
            warn!("IKE: the IKE thread is gone; tunnel not started");
        }
    }

    /// Reads running tunnel `t`'s certificate, key, CA and CRL files
    /// again; with `apply`, hands them to its state machine: the next
    /// IKE_AUTH signs and checks with them, and the next rekey checks the
    /// peer's certificate against them (a revoked peer is refused). The
    /// error names the `[tunnel.ike]` key at fault.
    pub fn reload_auth(
        &self,
        t: &Tunnel,
        s: &IkeSettings,
        apply: bool,
    ) -> Result<(), (&'static str, String)> {
        let auth = certs::auth_of(s, &t.name)?;
        if apply {
            let local_id = config::local_id_of(t, s, &auth);
            let _ = self.tx.send(Cmd::SetAuth {
                name: t.name.clone(),
                local_id,
                auth,
            });
        }
        Ok(())
    }

    /// Child SA `spi` (inbound or outbound) of registry tunnel `tunnel`
    /// reached its soft lifetime: rekey it by CREATE_CHILD_SA (RFC 7296
    /// §2.8) before the hard one stops it. SAs IKE does not own (static
    /// ones) are ignored.
    pub fn rekey(&self, tunnel: u32, spi: u32, outbound: bool) {
        let _ = self.tx.send(Cmd::Rekey {
            tunnel,
            spi,
            outbound,
        });
    }

    /// Forgets tunnel `name` and its IKE and ESP SAs without a word to
    /// the peer: a pool connection now carried by another member, which
    /// adopted its IKE SA (a DELETE from here would end it there too).
    /// Call before deleting the tunnel; returns once done (at most a turn
    /// of the thread's loop or two).
    pub fn forget(&self, name: &str) {
        let (done, wait) = crossbeam_channel::bounded(1);
        let cmd = Cmd::Forget {
            name: name.to_owned(),
            done,
        };
        if self.tx.send(cmd).is_ok() {
            let _ = wait.recv_timeout(MAX_WAIT * 3);
        }
    }

    /// Deletes tunnel `name`'s IKE SA with the peer (INFORMATIONAL DELETE,
    /// RFC 7296 §1.4.1) and forgets the tunnel; waits for the peer's
    /// answer for at most [`SHUTDOWN_FLUSH`] (plus one turn of the
    /// thread's loop). Returns at once for a tunnel the thread does not
    /// run.
    pub fn remove(&self, name: &str) {
        let (done, wait) = crossbeam_channel::bounded(1);
        let cmd = Cmd::Remove {
            name: name.to_owned(),
            done,
        };
        if self.tx.send(cmd).is_ok() {
            let _ = wait.recv_timeout(SHUTDOWN_FLUSH + MAX_WAIT * 3);
        }
    }
}

/// The state machine of IKE tunnel `t` of `cfg`, registered as `id`,
/// keyed with the contents of its PSK file (read by the caller; ignored
/// without `psk` authentication) and its certificate files. The error
/// names the `[tunnel.ike]` key at fault.
pub fn build_tunnel(
    cfg: &Config,
    t: &Tunnel,
    s: &IkeSettings,
    id: u32,
    psk_text: &[u8],
) -> Result<NewTunnel, (&'static str, String)> {
    let bad = |e: vecgate_ike::Error| format!("tunnel {}: {e}", t.name);
    if !s.ike_proposals.is_empty() {
        let v: Vec<&str> = s.ike_proposals.iter().map(String::as_str).collect();
        IkeConfig::parse_ike_proposals(&v).map_err(|e| ("ike_proposals", bad(e)))?;
    }
    if !s.esp_proposals.is_empty() {
        let v: Vec<&str> = s.esp_proposals.iter().map(String::as_str).collect();
        IkeConfig::parse_esp_proposals(&v).map_err(|e| ("esp_proposals", bad(e)))?;
    }
    let psk = if s.uses_psk() {
        psk_from_text(Zeroizing::new(psk_text.to_vec()), &s.psk_file, &t.name)
            .map_err(|e| ("psk_file", e))?
    } else {
        Zeroizing::new(Vec::new())
    };
    let auth = certs::auth_of(s, &t.name)?;
    let c = config::ike_config_with(cfg, t, s, &psk, auth).map_err(|e| ("psk_file", e))?;
    new_tunnel(t, s, id, c)
        .map(|x| NewTunnel(Box::new(x)))
        .map_err(|e| ("ike_proposals", e))
}

fn new_tunnel(t: &Tunnel, s: &IkeSettings, id: u32, c: IkeConfig) -> Result<TunnelIke, String> {
    let (child_rekey, ike_rekey) = (c.child_rekey_time, c.ike_rekey_time);
    let ike = Ike::new(c).map_err(|e| format!("tunnel {}: {e}", t.name))?;
    Ok(TunnelIke {
        id,
        name: t.name.clone(),
        ike,
        state: if s.initiate { "connecting" } else { "waiting" },
        last_error: None,
        ike_sas: Vec::new(),
        children: Vec::new(),
        ike_rekeys: 0,
        child_rekeys: 0,
        reconnect_at: None,
        child_rekey,
        ike_rekey,
        child_volume: child_volume_lifetime(
            s.child_lifetime_packets.unwrap_or(DEFAULT_CHILD_PACKETS),
            s.child_lifetime_bytes.unwrap_or(0),
        ),
        soft_rekeyed: Vec::new(),
        underlay_vrf: None,
        delete_sent: false,
        init_logged: Default::default(),
        auth_logged: Vec::new(),
        auth_warned: Vec::new(),
        expiry_warned: None,
    })
}

/// Builds a state machine per IKE tunnel (PSKs read, proposals parsed).
/// Without any, the thread still runs (idle: it sleeps on the punt queue)
/// so that IKE tunnels can be added live.
pub fn prepare(
    cfg: &Config,
    reg: Arc<EspRegistry>,
    ha: Option<HaLink>,
) -> Result<Prepared, String> {
    let mut tunnels = Vec::new();
    for (t, s) in ike_tunnels(cfg) {
        let id = reg
            .tunnel_id(&t.name)
            .ok_or_else(|| format!("tunnel {}: not registered", t.name))?;
        let c = ike_config(cfg, t, s)?;
        tunnels.push(new_tunnel(t, s, id, c)?);
    }
    // Few commands, each awaited by an API request.
    let (tx, cmds) = crossbeam_channel::bounded(64);
    Ok(Prepared {
        tunnels,
        reg,
        status: Arc::new(Mutex::new(Vec::new())),
        cmds,
        control: IkeControl { tx },
        ha,
    })
}

impl Prepared {
    /// The control plane, ready to run on the tables the workers use and
    /// their IKE punt queue.
    pub fn into_plane(self, shared: Arc<SharedTables>, punt: Arc<IkePunt>) -> IkePlane {
        let Prepared {
            tunnels,
            reg,
            status,
            cmds,
            control: _,
            ha,
        } = self;
        IkePlane(ControlPlane {
            tunnels,
            reg,
            shared,
            punt,
            removals: Vec::new(),
            status,
            cmds,
            deleting: Vec::new(),
            summary_at: Instant::now(),
            unmatched: 0,
            unmatched_logged: 0,
            inject_failed: 0,
            inject_failed_logged: 0,
            ha: ha.map(ha::IkeHa::new),
            sending: false,
        })
    }
}

/// The IKE control plane of every IKE tunnel, ready to run.
pub struct IkePlane(ControlPlane);

impl IkePlane {
    /// Runs until `stop` is set, then deletes the IKE SAs with their
    /// peers (the workers must still run: the deletes go out through
    /// them, and are awaited for at most [`SHUTDOWN_FLUSH`]).
    pub fn run(mut self, stop: &AtomicBool) {
        self.0.run(stop);
    }
}

struct ControlPlane {
    tunnels: Vec<TunnelIke>,
    reg: Arc<EspRegistry>,
    shared: Arc<SharedTables>,
    punt: Arc<IkePunt>,
    /// Inbound SAs to remove at the given time (make-before-break).
    removals: Vec<(Instant, u32)>,
    status: IkeStatus,
    /// Tunnels added and removed live ([`IkeControl`]).
    cmds: crossbeam_channel::Receiver<Cmd>,
    /// Tunnels being deleted live (by id): forgotten once the peer has
    /// acknowledged the IKE DELETE or at the deadline; then `done`.
    deleting: Vec<(u32, Instant, crossbeam_channel::Sender<()>)>,
    /// When the next summary of unauthenticated input may be logged.
    summary_at: Instant,
    /// Punted datagrams that fit no tunnel, and how many were logged.
    unmatched: u64,
    unmatched_logged: u64,
    /// Datagrams the inject queue refused, and how many were logged.
    inject_failed: u64,
    inject_failed_logged: u64,
    /// With an HA state sync: what was sent to the standby ([`ha`]).
    ha: Option<ha::IkeHa>,
    /// Whether this turn may transmit (false while HA backup, [`ha`]).
    sending: bool,
}
