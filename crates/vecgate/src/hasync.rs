//! The HA state sync's driver thread: it owns the sync socket (a kernel
//! UDP socket on a dedicated link, `[ha] sync_local` / `sync_peer`) and
//! drives a [`vecgate_ha::syncer::Syncer`], which holds the protocol and
//! all its state. Other threads reach it through a channel
//! ([`Message`]): the SA state's reserve hook, the IKE thread, VRRP. It
//! answers VRRP's takeover on a channel of its own, tells the IKE thread
//! its role and hands it the shadow to adopt, and publishes its status
//! for the API.

use crossbeam_channel::{Receiver, Sender};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::{info, warn};
use vecgate_config::HaSync;
use vecgate_ha::sync::{Epoch, SyncKey, KEY_LEN, MAX_DATAGRAM};
use vecgate_ha::syncer::{
    Action, Event, Message, Now, SyncConfig, SyncStatus, Syncer, ToIke, IKE_ADOPT_WAIT,
};
use vecgate_ipsec::SaState;

mod tunnels;

/// Longest the driver waits for a datagram before it looks at its
/// channel and timers again (a takeover or a reserved ceiling waits at
/// most this long).
const TURN: Duration = Duration::from_millis(5);

/// Messages queued for the driver at most: a full queue drops a reserved
/// ceiling or an IKE SA set (the next interval's resend repairs both);
/// VRRP's messages wait for room.
pub const QUEUE: usize = 4096;

/// The sync's status as the driver last published it (`None`: no sync).
pub type SharedStatus = Arc<Mutex<Option<SyncStatus>>>;

/// Reads the key file: a private regular file owned by the user vecgate
/// runs as, holding 64 hex digits.
pub fn read_key(cfg: &HaSync) -> Result<SyncKey, String> {
    use vecgate_config::secret::{read_owned_secret_file, MAX_SECRET_LEN};
    let what = || format!("[ha] sync_key_file {}", cfg.key_file.display());
    let text = read_owned_secret_file(
        &cfg.key_file,
        MAX_SECRET_LEN,
        rustix::process::geteuid().as_raw(),
    )
    .map_err(|e| format!("{}: {e}", what()))?;
    let text =
        std::str::from_utf8(&text).map_err(|_| format!("{}: must hold hex digits only", what()))?;
    let bytes = zeroize::Zeroizing::new(
        vecgate_config::ipsec::parse_key_hex(text).map_err(|e| format!("{}: {e}", what()))?,
    );
    SyncKey::new(&bytes).ok_or_else(|| {
        format!(
            "{}: {} bytes, the sync key is {KEY_LEN} bytes (64 hex digits; e.g. `openssl rand -hex 32`)",
            what(),
            bytes.len()
        )
    })
}

/// How long VRRP waits for a takeover's answer before it takes the
/// addresses anyway: the peer's first word, then the IKE thread's
/// adoption, then a loaded machine's scheduling.
pub fn takeover_wait(cfg: &HaSync) -> Duration {
    sync_config(cfg).dead_interval() + IKE_ADOPT_WAIT + Duration::from_secs(1)
}

fn sync_config(cfg: &HaSync) -> SyncConfig {
    SyncConfig {
        local: cfg.local,
        peer: cfg.peer,
        interval: Duration::from_millis(u64::from(cfg.interval_ms)),
        max_sa_pps: cfg.max_sa_pps,
    }
}

/// What the driver is connected to.
pub struct Wiring {
    pub ctl: Arc<vecgate_control::Control>,
    pub sas: Arc<SaState>,
    /// From the reserve hook, the IKE thread and VRRP.
    pub messages: Receiver<Message>,
    /// To the IKE thread (when one runs).
    pub ike: Option<Sender<ToIke>>,
    /// A takeover is done: VRRP may take the addresses.
    pub taken_over: Sender<()>,
    pub status: SharedStatus,
}

/// Opens the socket and starts the driver thread; it stops with `stop`.
pub fn start(
    cfg: &HaSync,
    w: Wiring,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, String> {
    let key = read_key(cfg)?;
    let sock =
        UdpSocket::bind(cfg.local).map_err(|e| format!("[ha] sync_local {}: {e}", cfg.local))?;
    sock.set_read_timeout(Some(TURN))
        .map_err(|e| format!("[ha] sync_local {}: {e}", cfg.local))?;
    let now = Now::read();
    let epoch = Epoch::fresh(now.wall_ms).map_err(|e| format!("state sync: {e}"))?;
    let syncer =
        Syncer::new(sync_config(cfg), key, epoch).map_err(|e| format!("state sync: {e}"))?;
    info!(local = %cfg.local, peer = %cfg.peer, interval_ms = cfg.interval_ms, "state sync listening");
    std::thread::Builder::new()
        .name("vg-hasync".into())
        .spawn(move || run(syncer, &sock, &w, &stop))
        .map_err(|e| format!("spawning the state sync thread: {e}"))
}

fn run(mut s: Syncer, sock: &UdpSocket, w: &Wiring, stop: &AtomicBool) {
    let mut follow = tunnels::Follow(&w.ctl);
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    let first = s.start();
    carry_out(&mut s, first, sock, w);
    while !stop.load(Ordering::Relaxed) {
        // The socket's read timeout paces the loop.
        let mut acts = match sock.recv_from(&mut buf) {
            Ok((n, from)) => s.handle(
                Now::read(),
                Event::Datagram {
                    data: &buf[..n],
                    from,
                },
                &*w.sas,
                &mut follow,
            ),
            Err(_) => Vec::new(),
        };
        while let Ok(m) = w.messages.try_recv() {
            acts.extend(s.handle(Now::read(), m.into(), &*w.sas, &mut follow));
        }
        acts.extend(s.poll(Now::read(), &*w.sas, &mut follow));
        carry_out(&mut s, acts, sock, w);
        let now = Now::read();
        *w.status.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.status(now.at));
    }
}

/// Carries out the syncer's actions (a failed send is counted by it).
fn carry_out(s: &mut Syncer, acts: Vec<Action>, sock: &UdpSocket, w: &Wiring) {
    let peer = s.config().peer;
    let mut failed = 0;
    for a in acts {
        match a {
            Action::Send(d) => {
                if sock.send_to(&d, peer).is_err() {
                    failed += 1;
                }
            }
            Action::Ike(m) => {
                if let Some(ike) = &w.ike {
                    if ike.send(m).is_err() {
                        warn!("state sync: the IKE thread is gone");
                    }
                }
            }
            Action::TakenOver => {
                let _ = w.taken_over.try_send(());
            }
        }
    }
    for _ in 0..failed {
        // Only counted: nothing else follows from it.
        let _ = s.handle(
            Now::read(),
            Event::SendFailed,
            &*w.sas,
            &mut tunnels::Follow(&w.ctl),
        );
    }
}

fn unix(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// The status as `/ha` reports it.
pub fn info(s: &SyncStatus) -> vecgate_control::model::HaSyncInfo {
    vecgate_control::model::HaSyncInfo {
        local: s.local.map(|a| a.to_string()).unwrap_or_default(),
        peer: s.peer.map(|a| a.to_string()).unwrap_or_default(),
        state: if s.up { "up" } else { "down" }.to_owned(),
        peer_role: s
            .peer_master
            .map(|m| if m { "master" } else { "backup" }.to_owned()),
        last_sync_unix: s.last_received_ms.map(unix),
        lag_ms: s.lag_ms,
        synced_outbound_sas: s.synced_out as u64,
        synced_inbound_sas: s.synced_in as u64,
        messages_sent: s.sent,
        messages_received: s.received,
        send_errors: s.send_errors,
        rejected: s
            .rejected
            .iter()
            .map(|(r, n)| ((*r).to_owned(), *n))
            .collect(),
        takeovers: s.takeovers,
        last_takeover_unix: s.last_takeover.map(|t| unix(t.0)),
        last_takeover_sas: s.last_takeover.map_or(0, |t| t.1 as u64),
        synced_routes: s.synced_routes as u64,
        route_changes: s.route_changes,
        route_errors: s.route_errors,
        synced_ike_sas: s.synced_ike_sas as u64,
        adopted_ike_sas: s.adopted_ike_sas as u64,
        unsafe_sas: s.unsafe_sas.clone(),
        synced_tunnels: s.synced_tunnels as u64,
        tunnel_changes: s.tunnel_changes,
        tunnel_errors: s.tunnel_errors,
    }
}
