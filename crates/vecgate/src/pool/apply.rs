//! The applier: the member's [`Action`]s carried out on this gateway
//! through the API's live-change path, the local addresses taken and
//! released, and the actual state reported back.
//!
//! Per connection, the steps are ordered so that nothing is sent before
//! it can be received: the tunnel, then its local address (held on the
//! underlay interface and announced), then the routes into it. Stopping
//! to send (a handover) removes the routes only: the tunnel and its
//! address keep receiving until the new owner has announced the address
//! and the member says remove.
//!
//! IKE-keyed connections carry their SA state ([`super::sas`]): sealed
//! whenever it changes, adopted from the sealed blob by the member that
//! takes them over (and from our own last state when the fence opens
//! again), forgotten without a delete when they leave.

use super::api::underlay_of;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};
use vecgate_config::Config;
use vecgate_control::model::{RouteKey, RouteSpec, TunnelSpec};
use vecgate_pool::etcd::member::{Report, Status};
use vecgate_pool::seal::{self, Info};
use vecgate_pool::snapshot::Snapshot;
use vecgate_pool::{Action, Connection, Mode, PoolKey};

/// What the applier has done with one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Installed {
    /// Nothing in the dataplane (fenced, or not yet).
    No,
    /// Tunnel and address, no routes: receives, sends nothing.
    Receiving,
    /// Tunnel, address and routes.
    Serving,
}

struct Local {
    connection: Connection,
    placement_rev: i64,
    /// What it should be while the fence lets us serve.
    wanted: Installed,
    now: Installed,
    /// The first packet it sent is reported once.
    first_packet: bool,
    /// Keyed by IKEv2: its SA state is carried.
    ike: bool,
    /// The SA state to adopt when its tunnel is (re)added: the old
    /// owner's sealed state, then ours as last sealed.
    carried: Option<(Snapshot, Info)>,
}

pub(super) struct Applier {
    ctl: Arc<vecgate_control::Control>,
    held: crate::ha::Held,
    mailbox: Option<crossbeam_channel::Sender<dataplane::worker::Command>>,
    base: Config,
    pool: String,
    key: PoolKey,
    reports: mpsc::Sender<Report>,
    status: watch::Receiver<Arc<Status>>,
    conns: BTreeMap<String, Local>,
    serving: bool,
    generation: u64,
    /// Announcements due (a lost gratuitous ARP, or one sent before the
    /// underlay next hop resolved, is sent again).
    announce: Vec<(Instant, u16)>,
    /// IKE SA carrying (absent without an IKE thread linked to the pool).
    carrier: Option<super::sas::Carrier>,
}

/// When a taken address (and an L2 tunnel's overlay addresses) is
/// announced again after the first time.
const REANNOUNCE: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(3)];

impl Applier {
    pub(super) fn new(
        cfg: &Config,
        w: &super::Wiring,
        key: PoolKey,
        reports: mpsc::Sender<Report>,
        status: watch::Receiver<Arc<Status>>,
        carrier: Option<super::sas::Carrier>,
    ) -> Applier {
        Applier {
            ctl: w.ctl.clone(),
            held: w.held.clone(),
            mailbox: w.mailbox.clone(),
            base: cfg.clone(),
            pool: cfg
                .pool
                .as_ref()
                .map_or_else(String::new, |p| p.name.clone()),
            key,
            reports,
            status,
            conns: BTreeMap::new(),
            serving: false,
            generation: 0,
            announce: Vec::new(),
            carrier,
        }
    }

    pub(super) fn run(mut self, actions: Receiver<Action>, stop: &AtomicBool) {
        loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            match actions.recv_timeout(Duration::from_millis(100)) {
                Ok(a) => self.act(a),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.tick();
        }
        let ids: Vec<String> = self.conns.keys().cloned().collect();
        for id in ids {
            let _ = self.set(&id, Installed::No);
        }
    }

    fn report(&self, r: Report) {
        if self.reports.blocking_send(r).is_err() {
            warn!("pool: the member is gone; report dropped");
        }
    }

    fn act(&mut self, a: Action) {
        match a {
            Action::Apply {
                conn,
                connection,
                placement_rev,
                mode,
                blob,
                ..
            } => {
                info!(connection = %conn, ?mode, "pool: applying");
                let ike = self.carrier.is_some() && is_ike(&connection);
                let carried = match (mode, blob) {
                    (Mode::Fresh, _) | (_, None) => None,
                    (_, Some(b)) if ike => self.open(&conn, &b),
                    _ => None,
                };
                let adopting = carried.as_ref().is_some_and(|(s, _)| !s.ike.is_empty());
                self.conns.insert(
                    conn.clone(),
                    Local {
                        connection: *connection,
                        placement_rev,
                        wanted: Installed::Serving,
                        now: Installed::No,
                        first_packet: false,
                        ike,
                        carried,
                    },
                );
                let result = self.set(&conn, Installed::Serving);
                if result.is_err() {
                    self.conns.remove(&conn);
                }
                self.report(Report::Applied {
                    conn: conn.clone(),
                    result: result.map(|()| Vec::new()),
                });
                // An adopted state is written back once the IKE thread
                // has keyed it here (tick): until then the old owner's
                // blob stands, ceilings and all.
                if !adopting {
                    if let Some(blob) = self.sealed(&conn, placement_rev, false) {
                        self.report(Report::State { conn, blob });
                    }
                }
            }
            Action::Update {
                conn,
                connection,
                placement_rev,
            } => {
                info!(connection = %conn, "pool: updating");
                let _ = self.set(&conn, Installed::No);
                let result = match self.conns.get_mut(&conn) {
                    Some(l) => {
                        l.connection = *connection;
                        l.placement_rev = placement_rev;
                        self.set(&conn, Installed::Serving)
                    }
                    None => Err(format!("connection \"{conn}\" is not held here")),
                };
                self.report(Report::Applied {
                    conn,
                    result: result.map(|()| Vec::new()),
                });
            }
            Action::Release {
                conn,
                placement_rev,
            } => {
                info!(connection = %conn, "pool: handing over: sending stops");
                let _ = self.set(&conn, Installed::Receiving);
                // IKE falls silent too: the new owner adopts the state
                // sealed now (its message IDs, its child SAs).
                self.refresh(&conn);
                self.silence(&conn);
                if let Some(blob) = self.sealed(&conn, placement_rev, true) {
                    self.report(Report::Released {
                        conn,
                        placement_rev,
                        blob,
                    });
                }
            }
            Action::Remove { conn } => {
                info!(connection = %conn, "pool: removing");
                let _ = self.set(&conn, Installed::No);
                self.conns.remove(&conn);
            }
        }
    }

    /// Announces `port` now and again after [`REANNOUNCE`].
    fn announce_port(&mut self, port: u16) {
        let now = Instant::now();
        self.send_announce(port);
        self.announce
            .extend(REANNOUNCE.iter().map(|d| (now + *d, port)));
    }

    fn send_announce(&self, port: u16) {
        if let Some(mb) = &self.mailbox {
            let _ = mb.try_send(dataplane::worker::Command::Announce(port));
        }
    }

    /// Follows the fence, sends the announcements due, and reports each
    /// connection's first packet.
    fn tick(&mut self) {
        self.seal_changes();
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = self.announce.drain(..).partition(|(t, _)| *t <= now);
        self.announce = later;
        for (_, port) in due {
            self.send_announce(port);
        }
        let serving = {
            let st = self.status.borrow();
            st.registered && st.fence.serving
        };
        if serving != self.serving {
            self.serving = serving;
            if serving {
                info!("pool: serving again (lease renewed)");
            } else if !self.conns.is_empty() {
                warn!("pool: fenced: every connection taken down until the lease is renewed");
            }
            let ids: Vec<String> = self.conns.keys().cloned().collect();
            for id in ids {
                let to = match (serving, self.conns.get(&id)) {
                    (true, Some(l)) => l.wanted,
                    _ => Installed::No,
                };
                if let Err(e) = self.set(&id, to) {
                    warn!(connection = %id, error = %e, "pool: restoring after the fence");
                }
            }
        }
        let waiting: Vec<String> = self
            .conns
            .iter()
            .filter(|(_, l)| !l.first_packet && l.now == Installed::Serving)
            .map(|(id, _)| id.clone())
            .collect();
        if waiting.is_empty() {
            return;
        }
        for c in self.ctl.tunnel_counters() {
            if c.traffic.tx_packets == 0 || !waiting.contains(&c.tunnel) {
                continue;
            }
            if let Some(l) = self.conns.get_mut(&c.tunnel) {
                l.first_packet = true;
            }
            self.report(Report::FirstPacket {
                conn: c.tunnel,
                at_ms: vecgate_pool::now_ms(),
            });
        }
    }

    /// Brings connection `id` to `to` in the dataplane (`wanted` is what
    /// the fence restores; `Installed::No` from the member is final).
    fn set(&mut self, id: &str, to: Installed) -> Result<(), String> {
        let Some(l) = self.conns.get(id) else {
            return Err(format!("connection \"{id}\" is not held here"));
        };
        let from = l.now;
        let c = l.connection.clone();
        let fenced = !self.serving && to != Installed::No;
        if let Some(l) = self.conns.get_mut(id) {
            l.wanted = to;
        }
        if fenced {
            // Recorded: put in place when the lease is renewed.
            return Ok(());
        }
        let r = self.change(&c, from, to);
        let now = match &r {
            Ok(()) => to,
            Err(_) => {
                let _ = self.change(&c, to, Installed::No);
                Installed::No
            }
        };
        if let Some(l) = self.conns.get_mut(id) {
            l.now = now;
        }
        r
    }

    fn change(&mut self, c: &Connection, from: Installed, to: Installed) -> Result<(), String> {
        use Installed::*;
        let t = &c.tunnel;
        if from == No && to != No {
            self.adopt(&t.name);
            self.ctl
                .add_tunnel(&TunnelSpec::from(t))
                .map_err(|e| format!("tunnel {}: {}", t.name, e.message))?;
            self.address(t.local, &t.underlay_vrf, true)?;
            // An L2 tunnel's overlay addresses now answer from this
            // member's MAC: the far end learns it from the announcement.
            if t.carries_ethernet() {
                if let Some(p) = self.ctl.port_of(&t.name) {
                    self.announce_port(p);
                }
            }
        }
        if from != Serving && to == Serving {
            for r in &c.routes {
                self.ctl
                    .add_route(&RouteSpec {
                        vrf: Some(r.vrf.clone()),
                        prefix: r.prefix.to_string(),
                        via: r.via.to_string(),
                    })
                    .map_err(|e| format!("route {}: {}", r.prefix, e.message))?;
            }
        }
        if from == Serving && to != Serving || to == No {
            for r in &c.routes {
                let _ = self.ctl.del_route(&RouteKey {
                    vrf: Some(r.vrf.clone()),
                    prefix: r.prefix.to_string(),
                });
            }
        }
        if to == No && from != No {
            self.silence(&t.name);
            let _ = self.ctl.del_tunnel(&t.name);
            self.address(t.local, &t.underlay_vrf, false)?;
        }
        Ok(())
    }

    /// Takes (and announces) or releases a connection's local address on
    /// its underlay interface.
    fn address(&mut self, a: IpAddr, vrf: &str, take: bool) -> Result<(), String> {
        let ifc = underlay_of(&self.base, a, vrf)
            .ok_or_else(|| format!("local {a}: in no subnet of this member's interfaces"))?;
        let port = self
            .ctl
            .port_of(ifc)
            .ok_or_else(|| format!("interface {ifc} has no port"))?;
        {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let v = held.entry(port).or_default();
            v.retain(|x| *x != a);
            if take {
                v.push(a);
            }
        }
        self.ctl
            .rebuild()
            .map_err(|e| format!("publishing address {a}: {}", e.message))?;
        if take {
            self.announce_port(port);
        }
        Ok(())
    }

    /// The connection's state, sealed for etcd. Plain tunnels carry no
    /// SA state: the snapshot says which placement it was held under
    /// and whether sending has stopped. An IKE-keyed one carries what
    /// [`Applier::seal_changes`] last took (kept as what it adopts if the
    /// fence takes it down and gives it back).
    fn sealed(&mut self, conn: &str, placement_rev: i64, released: bool) -> Option<Vec<u8>> {
        let epoch = self.status.borrow().view.leader().map_or(0, |l| l.epoch);
        let (sas, ike) = match self.conns.get(conn).and_then(|l| l.carried.as_ref()) {
            Some((s, _)) => (s.sas.clone(), s.ike.clone()),
            None => (Vec::new(), Vec::new()),
        };
        let snap = Snapshot {
            released,
            placement_rev,
            sas,
            ike,
        };
        let now = vecgate_pool::now_ms();
        self.generation += 1;
        let body = snap.emit(conn, now).ok()?;
        let info = Info {
            epoch,
            written_ms: now,
            generation: self.generation,
        };
        if let Some(l) = self.conns.get_mut(conn) {
            if !snap.ike.is_empty() {
                l.carried = Some((snap, info));
            }
        }
        match seal::seal(&self.key, &self.pool, conn, info, &body) {
            Ok(b) => Some(b),
            Err(e) => {
                warn!(connection = %conn, error = %e, "pool: sealing the state");
                None
            }
        }
    }
}

/// Whether connection `c` is keyed by IKEv2.
fn is_ike(c: &Connection) -> bool {
    c.tunnel.ipsec.as_ref().is_some_and(|x| x.ike.is_some())
}

impl Applier {
    /// Opens the sealed state of `conn` (a new owner's takeover).
    fn open(&self, conn: &str, blob: &[u8]) -> Option<(Snapshot, Info)> {
        let r = seal::open(&self.key, &self.pool, conn, blob)
            .map_err(|e| e.to_string())
            .and_then(|(info, body)| {
                Snapshot::parse(&body, conn)
                    .map(|s| (s, info))
                    .map_err(|e| e.to_string())
            });
        match r {
            Ok(x) => Some(x),
            Err(e) => {
                warn!(connection = %conn, error = %e, "pool: the sealed state does not open: IKE negotiates afresh");
                None
            }
        }
    }

    /// Before tunnel `name` is added: its carried IKE SAs go to the IKE
    /// thread, which adopts them instead of initiating.
    fn adopt(&mut self, name: &str) {
        let Some(carrier) = self.carrier.as_ref() else {
            return;
        };
        let Some(l) = self
            .conns
            .values()
            .find(|l| l.ike && l.connection.tunnel.name == name)
        else {
            return;
        };
        if let Some((snap, info)) = &l.carried {
            carrier.adopt(name, snap, info);
        }
    }

    /// Tunnel `name` stops here: IKE forgets it without a word to the peer.
    fn silence(&mut self, name: &str) {
        let ike = self
            .conns
            .values()
            .any(|l| l.ike && l.connection.tunnel.name == name);
        if let (true, Some(c)) = (ike, self.carrier.as_mut()) {
            c.hear();
            c.forget(name);
        }
    }

    /// Takes connection `conn`'s state as it stands (a handover seals it
    /// next).
    fn refresh(&mut self, conn: &str) {
        let Some(carrier) = self.carrier.as_mut() else {
            return;
        };
        carrier.hear();
        let Some(l) = self.conns.get_mut(conn).filter(|l| l.ike) else {
            return;
        };
        if let Some((sas, ike)) = carrier.state(&l.connection.tunnel.name) {
            let info = l.carried.as_ref().map_or(
                Info {
                    epoch: 0,
                    written_ms: 0,
                    generation: 0,
                },
                |(_, i)| *i,
            );
            l.carried = Some((
                Snapshot {
                    released: false,
                    placement_rev: l.placement_rev,
                    sas,
                    ike,
                },
                info,
            ));
        }
    }

    /// Seals and reports the state of every IKE-keyed connection we serve
    /// whose IKE SAs or outbound ceilings changed since last sealed.
    fn seal_changes(&mut self) {
        let Some(carrier) = self.carrier.as_mut() else {
            return;
        };
        carrier.hear();
        let mut due = Vec::new();
        for (id, l) in &self.conns {
            if !l.ike || l.now != Installed::Serving {
                continue;
            }
            if let Some((sas, ike)) = carrier.changed(&l.connection.tunnel.name) {
                due.push((id.clone(), l.placement_rev, sas, ike));
            }
        }
        for (id, rev, sas, ike) in due {
            if let Some(l) = self.conns.get_mut(&id) {
                let info = l.carried.as_ref().map(|(_, i)| *i).unwrap_or(Info {
                    epoch: 0,
                    written_ms: 0,
                    generation: 0,
                });
                l.carried = Some((
                    Snapshot {
                        released: false,
                        placement_rev: rev,
                        sas,
                        ike,
                    },
                    info,
                ));
            }
            if let Some(blob) = self.sealed(&id, rev, false) {
                self.report(Report::State { conn: id, blob });
            }
        }
    }
}
