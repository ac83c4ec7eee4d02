//! IKEv2 for `kind = "ipsec"` tunnels with a `[tunnel.ike]` section: one
//! control thread runs a sans-IO [`vecgate_ike::Ike`] per tunnel and keys
//! the ESP dataplane through the [`EspRegistry`].
//!
//! Why the datagrams go through the dataplane: the gateway owns its
//! netdevs (AF_PACKET + an nftables ingress guard), so a kernel socket on
//! UDP 500/4500 would never see IKE. ip-local punts IKE into
//! [`dataplane::ike_punt::Punt`] and the thread injects its answers there; the
//! workers route them in the tunnel's underlay VRF (see `dataplane::ike_punt`).
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

use dataplane::ike_punt::Punt;
use dataplane::tables::SharedTables;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tracing::{error, info, warn};
use vecgate_config::{Config, IkeSettings, Tunnel};
use vecgate_ike::group::{self, Leaving, Member, Reaped};
use vecgate_ike::{Action, ChildSaKeys, Ike, IkeConfig};
use vecgate_ipsec::{EspRegistry, Lifetime};
use vecgate_ipsec::{InboundSa, OutboundSa};
use zeroize::Zeroizing;

/// How long an inbound SA outlives its child SA (packets in flight, the
/// peer's last vector before it switched).
pub const INBOUND_GRACE: Duration = Duration::from_secs(2);
/// Longest the thread sleeps without looking at timers.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// Punted datagrams handled per turn of the loop: then the timers run
/// (retransmissions, liveness checks, rekeys), however full the queue.
const MAX_BATCH: usize = 64;
/// Longest the thread waits at shutdown for the peer to acknowledge our
/// IKE deletes (the workers wait for it, so this bounds the stop).
pub const SHUTDOWN_FLUSH: Duration = Duration::from_millis(500);

mod config;
mod status;

pub use config::{child_sa_configs, ike_config, ike_config_keyed, psk_from_text, read_psk};
use config::{child_volume_lifetime, ike_tunnels, DEFAULT_CHILD_PACKETS};
pub use status::show_table;
use status::ts_text;
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

/// The running IKE thread.
pub struct IkeHandle {
    thread: Option<JoinHandle<()>>,
}

impl IkeHandle {
    /// Waits for the thread (after `stop` was set).
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                error!("the IKE thread panicked");
            }
        }
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
    /// A child SA reached its soft lifetime (packets, bytes): rekey it.
    Rekey {
        tunnel: u32,
        spi: u32,
        outbound: bool,
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
/// keyed with the contents of its PSK file (read by the caller). The
/// error names the `[tunnel.ike]` key at fault.
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
    let psk = psk_from_text(Zeroizing::new(psk_text.to_vec()), &s.psk_file, &t.name)
        .map_err(|e| ("psk_file", e))?;
    let c = ike_config_keyed(cfg, t, s, &psk).map_err(|e| ("psk_file", e))?;
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
    })
}

/// Builds a state machine per IKE tunnel (PSKs read, proposals parsed).
/// Without any, the thread still runs (idle: it sleeps on the punt queue)
/// so that IKE tunnels can be added live.
pub fn prepare(cfg: &Config, reg: Arc<EspRegistry>) -> Result<Prepared, String> {
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
    })
}

impl Prepared {
    /// Starts the control thread; it runs until `stop` is set.
    pub fn start(
        self,
        shared: Arc<SharedTables>,
        punt: Arc<Punt>,
        stop: Arc<AtomicBool>,
    ) -> Result<IkeHandle, String> {
        spawn(self, shared, punt, stop)
    }
}

fn spawn(
    p: Prepared,
    shared: Arc<SharedTables>,
    punt: Arc<Punt>,
    stop: Arc<AtomicBool>,
) -> Result<IkeHandle, String> {
    let Prepared {
        tunnels,
        reg,
        status,
        cmds,
        control: _,
    } = p;
    let mut cp = ControlPlane {
        tunnels,
        reg,
        shared,
        punt,
        removals: Vec::new(),
        status: status.clone(),
        cmds,
        deleting: Vec::new(),
        summary_at: Instant::now(),
        unmatched: 0,
        unmatched_logged: 0,
        inject_failed: 0,
        inject_failed_logged: 0,
    };
    let thread = std::thread::Builder::new()
        .name("vg-ike".into())
        .spawn(move || cp.run(&stop))
        .map_err(|e| format!("spawning the IKE thread: {e}"))?;
    Ok(IkeHandle {
        thread: Some(thread),
    })
}

struct ControlPlane {
    tunnels: Vec<TunnelIke>,
    reg: Arc<EspRegistry>,
    shared: Arc<SharedTables>,
    punt: Arc<Punt>,
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
}

impl ControlPlane {
    fn run(&mut self, stop: &AtomicBool) {
        // Tunnel ids, started from the back.
        let mut to_start: Vec<u32> = self
            .tunnels
            .iter()
            .filter(|t| t.ike.config().initiate)
            .map(|t| t.id)
            .rev()
            .collect();
        group::refresh_policies(&mut self.tunnels);
        while !stop.load(Ordering::Relaxed) {
            self.commands(&mut to_start, Instant::now());
            if !to_start.is_empty() {
                self.start_some(&mut to_start, Instant::now());
                self.drain_all();
            }
            let now = Instant::now();
            let next = group::next_timeout(&self.tunnels)
                .into_iter()
                .chain(self.removals.iter().map(|r| r.0))
                .min();
            let wait = next.map_or(MAX_WAIT, |n| n.saturating_duration_since(now).min(MAX_WAIT));
            if let Some(d) = self.punt.recv_timeout(wait) {
                self.datagram(&d);
                self.punt.release(d);
                // A bounded batch of whatever else is queued, then the
                // timers: a flood never starves them.
                for _ in 1..MAX_BATCH {
                    let Some(d) = self.punt.recv_timeout(Duration::ZERO) else {
                        break;
                    };
                    self.datagram(&d);
                    self.punt.release(d);
                }
                // What the batch produced leaves before the next one.
                self.drain_all();
            }
            let now = Instant::now();
            group::handle_timeout(&mut self.tunnels, now);
            self.reap_retired(now);
            self.drain_all();
            self.expire_removals(now);
            self.finish_deletes(now);
            self.summarize(now);
            self.publish(now);
        }
        self.shutdown();
    }

    /// Takes the API's requests: a new tunnel joins (an initiator is
    /// queued to start), a deleted one sends its IKE DELETE (RFC 7296
    /// §1.4.1) and is forgotten by [`ControlPlane::finish_deletes`].
    fn commands(&mut self, to_start: &mut Vec<u32>, now: Instant) {
        while let Ok(c) = self.cmds.try_recv() {
            match c {
                Cmd::Add(t) => {
                    info!(tunnel = %t.name, initiator = t.ike.config().initiate, "IKE: tunnel added");
                    if t.ike.config().initiate {
                        to_start.insert(0, t.id);
                    }
                    self.tunnels.push(*t);
                    group::refresh_policies(&mut self.tunnels);
                }
                Cmd::Rekey {
                    tunnel,
                    spi,
                    outbound,
                } => self.soft_lifetime(tunnel, spi, outbound, now),
                Cmd::Remove { name, done } => {
                    let Some(x) = self
                        .tunnels
                        .iter()
                        .position(|t| t.name == name && !t.ike.is_retired())
                    else {
                        let _ = done.send(());
                        continue;
                    };
                    let id = self.tunnels[x].id;
                    to_start.retain(|i| *i != id);
                    // No reconnection while it goes.
                    self.tunnels[x].reconnect_at = None;
                    let carried: Vec<(u32, u32)> = self.tunnels[x]
                        .children
                        .iter()
                        .map(|c| (c.via, c.spi_in))
                        .collect();
                    match group::remove(&mut self.tunnels, x, &carried, now) {
                        Leaving::Retired => {
                            info!(tunnel = %name, "IKE: tunnel deleted; its IKE SA stays for the other tunnels' child SAs in it");
                            let _ = done.send(());
                        }
                        Leaving::Deleting => {
                            if self.tunnels[x].ike.is_established() {
                                info!(tunnel = %name, "IKE: deleting the IKE SA (tunnel deleted)");
                            }
                            self.deleting.push((id, now + SHUTDOWN_FLUSH, done));
                        }
                    }
                    self.drain_all();
                }
            }
        }
        self.finish_deletes(now);
    }

    /// A child SA of tunnel `tunnel` crossed its soft packet or byte limit
    /// (reported once per direction): the IKE SA carrying it starts a
    /// CREATE_CHILD_SA rekey, once per child.
    fn soft_lifetime(&mut self, tunnel: u32, spi: u32, outbound: bool, now: Instant) {
        let Some(t) = self.tunnels.iter_mut().find(|t| t.id == tunnel) else {
            return;
        };
        let Some((via, spi_in)) = t
            .children
            .iter()
            .find(|c| {
                if outbound {
                    c.spi_out == spi
                } else {
                    c.spi_in == spi
                }
            })
            .map(|c| (c.via, c.spi_in))
        else {
            return;
        };
        let live: Vec<u32> = t.children.iter().map(|c| c.spi_in).collect();
        t.soft_rekeyed.retain(|s| live.contains(s));
        if t.soft_rekeyed.contains(&spi_in) {
            return;
        }
        t.soft_rekeyed.push(spi_in);
        let name = t.name.clone();
        if let Some(v) = self.tunnels.iter_mut().find(|t| t.id == via) {
            info!(tunnel = %name, spi_in = format_args!("{spi_in:#010x}"),
                  "IKE: child SA reached its soft lifetime, rekeying (CREATE_CHILD_SA)");
            v.ike.rekey_child(spi_in, now);
            self.drain_all();
        }
    }

    /// Forgets deleted tunnels whose IKE SA is gone (the peer answered)
    /// or whose deadline passed.
    fn finish_deletes(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.deleting.len() {
            let (id, deadline, _) = &self.deleting[i];
            let pos = self.tunnels.iter().position(|t| t.id == *id);
            let gone = pos.is_none_or(|p| !self.tunnels[p].ike.is_established());
            if gone || now >= *deadline {
                let (_, _, done) = self.deleting.swap_remove(i);
                if let Some(p) = pos {
                    let t = self.tunnels.remove(p);
                    if !gone {
                        warn!(tunnel = %t.name, "IKE: tunnel deleted without the peer's delete acknowledgement");
                    }
                    info!(tunnel = %t.name, "IKE: tunnel removed");
                }
                let _ = done.send(());
            } else {
                i += 1;
            }
        }
    }

    /// Retired tunnels ([`group::reap`]): the IKE SA is deleted once it
    /// carries no other tunnel's child SA, the tunnel forgotten once it has
    /// no IKE SA.
    fn reap_retired(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.tunnels.len() {
            let t = &mut self.tunnels[i];
            match group::reap(&mut t.ike, &mut t.delete_sent, now) {
                Some(Reaped::Gone) => {
                    info!(tunnel = %t.name, "IKE: retired IKE SA gone, tunnel removed");
                    self.tunnels.remove(i);
                    continue;
                }
                Some(Reaped::DeleteSent) => {
                    info!(tunnel = %t.name, "IKE: retired IKE SA carries no child SA any more, deleting it");
                }
                None => {}
            }
            i += 1;
        }
    }

    /// Starts queued initiators, paced per peer ([`group::start_some`]).
    fn start_some(&mut self, to_start: &mut Vec<u32>, now: Instant) {
        group::start_some(&mut self.tunnels, to_start, now, |t, e| {
            error!(tunnel = %t.name, "IKE: cannot initiate: {e}");
        });
    }

    /// Leaves politely: the peer learns the SAs are gone (RFC 7296 §1.4.1)
    /// instead of waiting for its DPD. The workers keep running until this
    /// returns (run.rs stops them after joining this thread), so the
    /// INFORMATIONAL deletes are sent; their answers are awaited for at
    /// most [`SHUTDOWN_FLUSH`].
    fn shutdown(&mut self) {
        let start = Instant::now();
        let mut n = 0;
        for t in &mut self.tunnels {
            if t.ike.is_established() {
                t.ike.delete_ike(start);
                n += 1;
            }
        }
        self.drain_all();
        if n > 0 {
            info!(tunnels = n, "IKE: deleting the IKE SAs before stopping");
        }
        while start.elapsed() < SHUTDOWN_FLUSH
            && self.tunnels.iter().any(|t| t.ike.is_established())
        {
            if let Some(d) = self.punt.recv_timeout(Duration::from_millis(10)) {
                self.datagram(&d);
                self.punt.release(d);
            }
            group::handle_timeout(&mut self.tunnels, Instant::now());
            self.drain_all();
        }
        let left = self
            .tunnels
            .iter()
            .filter(|t| t.ike.is_established())
            .count();
        if left > 0 {
            warn!(
                tunnels = left,
                "IKE: stopping without the peer's delete acknowledgement"
            );
        }
        // The last injected datagrams leave with the workers' next vector.
        std::thread::sleep(Duration::from_millis(20));
    }

    /// Hands a punted datagram to the tunnel it belongs to: the one owning
    /// its IKE SPI (several tunnels may join the same two gateways), else
    /// (a new IKE_SA_INIT) one whose addresses match — preferably one
    /// without an IKE SA yet — else (a NAT'd peer) the one with our address.
    fn datagram(&mut self, d: &dataplane::ike_punt::Datagram) {
        let now = Instant::now();
        let pick = group::owner(
            &self.tunnels,
            d.data(),
            d.local,
            d.remote,
            dataplane::ike_punt::NAT_T_PORT,
        );
        match pick {
            Some(i) => self.tunnels[i]
                .ike
                .handle_datagram(d.data(), d.local, d.remote, now),
            // Counted and summarized, not logged per datagram.
            None => self.unmatched += 1,
        }
    }

    fn drain_all(&mut self) {
        for i in 0..self.tunnels.len() {
            while let Some(a) = self.tunnels[i].ike.poll_action() {
                self.action(i, a);
            }
        }
    }

    fn underlay_vrf(&self, id: u32) -> Option<u16> {
        self.shared.load().esp.by_id(id).map(|t| t.underlay_vrf)
    }

    fn action(&mut self, i: usize, a: Action) {
        let now = Instant::now();
        match a {
            Action::Send {
                local,
                remote,
                data,
            } => {
                let id = self.tunnels[i].id;
                // A retired tunnel is gone from the tables: its last VRF.
                let vrf = self.underlay_vrf(id).or(self.tunnels[i].underlay_vrf);
                let Some(vrf) = vrf else {
                    warn!(tunnel = %self.tunnels[i].name, "IKE: tunnel not in the tables");
                    return;
                };
                self.tunnels[i].underlay_vrf = Some(vrf);
                // A refused datagram is recovered by retransmission; counted
                // and summarized, not logged per datagram.
                if self.punt.inject(&data, local, remote, vrf).is_err() {
                    self.inject_failed += 1;
                }
            }
            Action::InstallChild(k) => self.install(i, &k, now),
            Action::RemoveChild { spi_in, spi_out } => self.remove(i, spi_in, spi_out, now),
            Action::Event(e) => self.event(i, e, now),
        }
    }

    /// Installs a child SA, make-before-break: inbound first, then the
    /// outbound switch.
    fn install(&mut self, i: usize, k: &ChildSaKeys, now: Instant) {
        // The child belongs to the tunnel whose selectors it was negotiated
        // for (its policy), whichever tunnel's IKE SA carries it: it goes
        // into that tunnel's SAs only, never another tenant's.
        let via = self.tunnels[i].id;
        let via_name = self.tunnels[i].name.clone();
        let target = match k.policy {
            None => Some(i),
            Some(tag) => self
                .tunnels
                .iter()
                .position(|t| t.id == tag && !t.ike.is_retired()),
        };
        let Some(ti) = target else {
            warn!(tunnel = %via_name, spi_in = format_args!("{:#010x}", k.spi_in),
                  "IKE: child SA for a tunnel that is gone, deleting it");
            self.tunnels[i].ike.delete_child(k.spi_in, now);
            return;
        };
        let t = &mut self.tunnels[ti];
        if ti != i {
            info!(tunnel = %t.name, ike_sa_of = %via_name,
                  "IKE: child SA negotiated inside another tunnel's IKE SA (same peer), bound by its traffic selectors");
            t.state = "established";
            t.last_error = None;
        }
        let limits = t.child_volume;
        // Both directions keep to what was negotiated (RFC 4301 §5.2),
        // which may be narrower than the tunnel's `traffic`.
        let sel = negotiated(k);
        let built = child_sa_configs(k).and_then(|(mut inb, mut out)| {
            inb.lifetime = limits;
            out.lifetime = limits;
            let inb = InboundSa::new(inb).map_err(|e| e.to_string())?;
            let out = OutboundSa::new(out).map_err(|e| e.to_string())?;
            Ok((inb.with_selectors(sel.clone()), out.with_selectors(sel)))
        });
        let (inb, out) = match built {
            Ok(x) => x,
            Err(e) => {
                error!(tunnel = %t.name, spi_in = format_args!("{:#010x}", k.spi_in), "IKE: child SA not installed: {e}");
                t.last_error = Some(format!("child SA not installed: {e}"));
                return;
            }
        };
        if let Err(e) = self.reg.install_inbound(t.id, inb) {
            error!(tunnel = %t.name, "IKE: inbound SA not installed: {e}");
            return;
        }
        match self.reg.set_outbound(t.id, Some(out)) {
            Ok(old) => {
                info!(tunnel = %t.name, spi_in = format_args!("{:#010x}", k.spi_in),
                      spi_out = format_args!("{:#010x}", k.spi_out), algorithm = %k.algorithm,
                      udp_encap = k.udp_encap, replaced = ?old.map(|o| format!("{:#010x}", o.spi())),
                      "IKE: child SA installed");
            }
            Err(e) => error!(tunnel = %t.name, "IKE: outbound SA not switched: {e}"),
        }
        let ts = |v: &[vecgate_ike::payload::TrafficSelector]| -> Vec<String> {
            v.iter().map(ts_text).collect()
        };
        t.children.push(Child {
            keys_meta: ChildInfo {
                spi_in: format!("{:#010x}", k.spi_in),
                spi_out: format!("{:#010x}", k.spi_out),
                algorithm: k.algorithm.clone(),
                udp_encap: k.udp_encap,
                esn: k.esn,
                local_ts: ts(&k.local_ts),
                remote_ts: ts(&k.remote_ts),
                age_secs: 0,
                rekey_in_secs: None,
            },
            spi_in: k.spi_in,
            spi_out: k.spi_out,
            at: now,
            via,
        });
    }

    /// Removes a child SA: off the outbound path now if it is the current
    /// one, out of the SAD after [`INBOUND_GRACE`].
    fn remove(&mut self, i: usize, spi_in: u32, spi_out: u32, now: Instant) {
        // The tunnel it was installed for (may differ from the one whose
        // IKE SA carried it).
        let ti = self
            .tunnels
            .iter()
            .position(|t| t.children.iter().any(|c| c.spi_in == spi_in))
            .unwrap_or(i);
        let t = &mut self.tunnels[ti];
        t.children.retain(|c| c.spi_in != spi_in);
        if t.children.is_empty() && t.state == "established" && !t.ike.is_established() {
            t.state = "down";
        }
        let current = self
            .reg
            .tunnel_tx(t.id)
            .and_then(|tx| tx.current())
            .map(|s| s.spi());
        if current == Some(spi_out) {
            // The newest remaining child (if any) carries on.
            let next = t.children.last().map(|c| (c.spi_in, c.spi_out));
            if next.is_none() {
                let _ = self.reg.set_outbound(t.id, None);
                info!(tunnel = %t.name, "IKE: no child SA left, traffic stops (no-sa)");
            }
        }
        self.removals.push((now + INBOUND_GRACE, spi_in));
        info!(tunnel = %t.name, spi_in = format_args!("{spi_in:#010x}"),
              spi_out = format_args!("{spi_out:#010x}"), "IKE: child SA removed");
    }

    fn expire_removals(&mut self, now: Instant) {
        let reg = &self.reg;
        self.removals.retain(|(at, spi)| {
            if *at > now {
                return true;
            }
            let _ = reg.remove_inbound(*spi);
            false
        });
    }
}

/// The selectors a child SA was negotiated for, as the ESP SAs check them.
fn negotiated(k: &ChildSaKeys) -> vecgate_ipsec::Selectors {
    let conv = |v: &[vecgate_ike::payload::TrafficSelector]| -> Vec<vecgate_ipsec::Selector> {
        v.iter()
            .map(|t| vecgate_ipsec::Selector {
                start: t.start,
                end: t.end,
                proto: t.ip_proto,
                start_port: t.start_port,
                end_port: t.end_port,
            })
            .collect()
    };
    vecgate_ipsec::Selectors {
        local: conv(&k.local_ts),
        remote: conv(&k.remote_ts),
    }
}
