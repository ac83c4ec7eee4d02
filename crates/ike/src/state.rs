//! The sans-IO IKEv2 state machine (RFC 7296), one file per exchange:
//! [`sa_init`] (IKE_SA_INIT), [`auth`] (IKE_AUTH), [`child`] and
//! [`ike_rekey`] (CREATE_CHILD_SA), [`informational`] (delete, liveness),
//! with [`retransmit`], [`cookies`], [`fragments`] and [`lifetime`]
//! (rekey/expiry deadlines) beside them, the SA table in [`table`] and the
//! half-open responder SAs apart in [`half_open`].
//!
//! Input: datagrams with their addresses and the current time. Output:
//! [`Action`]s drained with [`Ike::poll_action`]. Timers: the caller asks
//! [`Ike::next_timeout`] and calls [`Ike::handle_timeout`] then. This
//! file dispatches a datagram to its exchange and runs the timers.

mod admission;
mod auth;
mod child;
mod cookies;
mod fragments;
mod half_open;
mod ike_rekey;
mod informational;
mod lifetime;
mod output;
mod proof;
mod retransmit;
mod sa_init;
mod snapshot;
mod table;

pub use admission::{InitDrop, InitStats, AUTH_MALFORMED, MAX_HALF_OPEN};
pub use output::{Action, AuthInfo, ChildSaKeys, Event, FailReason};
pub use snapshot::{ChildSnapshot, InFlight, PendingSnapshot, SaSnapshot};

use crate::config::{ChildPolicy, IkeConfig};
use crate::crypto;
use crate::error::{Error, Result};
use crate::message::{exchange, open_fragment, Header, Message};
use crate::payload::{kind, Payload};
use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use table::{push_task, IkeSa, Req, St, Task};
use zeroize::Zeroizing;

/// A responder's half-open SA is dropped after this long.
const HALF_OPEN_TIMEOUT: Duration = Duration::from_secs(30);
/// RFC 3948 §2.2: non-ESP marker before IKE messages on the NAT-T port.
pub const NON_ESP_MARKER: [u8; 4] = [0; 4];

/// One IKE peer: the configured connection and its IKE SAs.
pub struct Ike {
    cfg: IkeConfig,
    /// Established SAs, our own initiations and rekeys.
    sas: Vec<IkeSa>,
    /// Responder SAs between IKE_SA_INIT and IKE_AUTH, capped apart.
    half: half_open::HalfOpenTable,
    actions: VecDeque<Action>,
    cookie_secret: Zeroizing<[u8; 32]>,
    dropped: u64,
    last_error: Option<Error>,
    reconnect_at: Option<Instant>,
    /// Other tunnels' selectors this peer's IKE SAs may carry children for.
    policies: Vec<ChildPolicy>,
    /// The own selectors no longer take new children ([`Ike::retire`]).
    retired: bool,
    /// IKE_SA_INIT admission: half-open accounting, rate, counters.
    adm: admission::Admission,
}

impl fmt::Debug for Ike {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ike")
            .field("cfg", &self.cfg)
            .field("sas", &self.sas.len())
            .field("half_open", &self.half.len())
            .finish_non_exhaustive()
    }
}

impl Ike {
    /// New peer; nothing is sent until [`Ike::initiate`] or a datagram.
    pub fn new(mut cfg: IkeConfig) -> Result<Ike> {
        if cfg.ike_proposals.is_empty() || cfg.esp_proposals.is_empty() {
            return Err(Error::Config("no proposals".into()));
        }
        cfg.local_id =
            proof::checked_local_id(cfg.local_id.clone(), &cfg.local_auth, &cfg.remote_auth)?;
        let mut cookie_secret = Zeroizing::new([0u8; 32]);
        crypto::random(&mut cookie_secret[..])?;
        Ok(Ike {
            half: half_open::HalfOpenTable::new(cfg.max_half_open),
            cfg,
            sas: Vec::new(),
            actions: VecDeque::new(),
            cookie_secret,
            dropped: 0,
            last_error: None,
            reconnect_at: None,
            policies: Vec::new(),
            retired: false,
            adm: admission::Admission::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &IkeConfig {
        &self.cfg
    }

    /// Next action for the caller, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Datagrams rejected as malformed or unusable, and the last reason.
    pub fn dropped(&self) -> (u64, Option<&Error>) {
        (self.dropped, self.last_error.as_ref())
    }

    /// IKE_SA_INIT requests answered NO_PROPOSAL_CHOSEN or
    /// INVALID_KE_PAYLOAD. Unauthenticated input: counted here, not
    /// reported as a failure of the tunnel ([`Ike::init_stats`]).
    pub fn refused_inits(&self) -> u64 {
        self.adm.stats.refused
    }

    /// Whether an IKE SA is established.
    pub fn is_established(&self) -> bool {
        self.sas
            .iter()
            .any(|s| s.state == St::Established && !s.dead)
    }

    /// (SPIi, SPIr) of established IKE SAs.
    pub fn ike_sas(&self) -> Vec<(u64, u64)> {
        self.sas
            .iter()
            .filter(|s| s.state == St::Established && !s.dead)
            .map(|s| (s.spi_i, s.spi_r))
            .collect()
    }

    /// Whether `spi` is either SPI of a live IKE SA (half-open included):
    /// lets a caller with several peers behind one address pair hand a
    /// datagram to the state machine it belongs to (RFC 7296 §2.6: SPIs
    /// identify the IKE SA, not the addresses). The peer's SPI counts too,
    /// so a retransmitted IKE_SA_INIT (responder SPI still zero) finds the
    /// half-open SA it created.
    pub fn owns_spi(&self, spi: u64) -> bool {
        spi != 0
            && (self.half.owns_spi(spi)
                || self
                    .sas
                    .iter()
                    .any(|s| !s.dead && (s.spi_i == spi || s.spi_r == spi)))
    }

    /// Our SPI of every live IKE SA, half-open ones included (the
    /// initiator's SPI of an SA we initiated, the responder's otherwise):
    /// a datagram that carries one belongs to an SA of ours, as only the
    /// peer (and the path) learnt it; a spoofed flood cannot name one.
    pub fn local_spis(&self) -> impl Iterator<Item = u64> + '_ {
        self.sas
            .iter()
            .filter(|s| !s.dead)
            .chain(self.half.iter())
            .map(|s| if s.initiator { s.spi_i } else { s.spi_r })
            .filter(|s| *s != 0)
    }

    /// Whether any IKE SA exists (half-open, established or rekeyed).
    pub fn has_sa(&self) -> bool {
        self.half.len() > 0 || self.sas.iter().any(|s| !s.dead)
    }

    /// Whether an IKE SA we initiated is not established yet: what peers
    /// count as our half-open SAs (the responder's half-open SAs, which
    /// anyone may create with the peer's address, do not count).
    pub fn is_connecting(&self) -> bool {
        self.sas
            .iter()
            .any(|s| !s.dead && s.initiator && s.state != St::Established)
    }

    /// (spi_in, spi_out) of installed child SAs.
    pub fn child_sas(&self) -> Vec<(u32, u32)> {
        self.sas
            .iter()
            .flat_map(|s| s.children.iter().map(|c| (c.spi_in, c.spi_out)))
            .collect()
    }

    /// Replaces the other tunnels' selectors ([`ChildPolicy`]) this peer's
    /// IKE SAs may carry children for. Installed children keep their tags.
    pub fn set_policies(&mut self, policies: Vec<ChildPolicy>) {
        self.policies = policies;
    }

    /// The other tunnels' selectors (see [`Ike::set_policies`]).
    pub fn policies(&self) -> &[ChildPolicy] {
        &self.policies
    }

    /// The own selectors' tunnel is gone while its IKE SA still carries
    /// children of other policies: no new child for the own selectors, no
    /// reconnection; the IKE SA lives on (DPD, rekeys) for the others.
    pub fn retire(&mut self) {
        self.retired = true;
        self.cfg.initiate = false;
        self.reconnect_at = None;
    }

    /// Whether [`Ike::retire`] was called.
    pub fn is_retired(&self) -> bool {
        self.retired
    }

    /// (spi_in, policy tag) of installed child SAs; None is the own
    /// selectors.
    pub fn child_policies(&self) -> Vec<(u32, Option<u32>)> {
        self.sas
            .iter()
            .filter(|s| !s.dead)
            .flat_map(|s| s.children.iter().map(|c| (c.spi_in, c.policy)))
            .collect()
    }

    pub(super) fn event(&mut self, e: Event) {
        self.actions.push_back(Action::Event(e));
    }

    pub(super) fn fail(&mut self, reason: FailReason, child: bool) {
        self.event(Event::Failed { reason, child });
    }

    /// Queue a new child SA with the configured selectors.
    pub fn create_child(&mut self, now: Instant) {
        self.queue_task(Task::NewChild(None), now);
    }

    /// Queue a new child SA for the [`ChildPolicy`] tagged `tag` inside
    /// the current IKE SA (CREATE_CHILD_SA, RFC 7296 §1.3.1).
    pub fn create_child_for(&mut self, tag: u32, now: Instant) {
        self.queue_task(Task::NewChild(Some(tag)), now);
    }

    /// Rekey the child whose inbound SPI is `spi_in` (make-before-break).
    pub fn rekey_child(&mut self, spi_in: u32, now: Instant) {
        self.queue_task(Task::RekeyChild(spi_in), now);
    }

    /// Rekey the IKE SA (RFC 7296 §1.3.2).
    pub fn rekey_ike(&mut self, now: Instant) {
        self.queue_task(Task::RekeyIke, now);
    }

    /// Delete one child SA.
    pub fn delete_child(&mut self, spi_in: u32, now: Instant) {
        self.queue_task(Task::DeleteChild(spi_in), now);
    }

    /// Delete the IKE SA and with it all child SAs.
    pub fn delete_ike(&mut self, now: Instant) {
        self.queue_task(Task::DeleteIke, now);
    }

    /// Feed one received UDP payload. `local` is the address it arrived on
    /// (the NAT-T port means a non-ESP marker precedes IKE messages).
    pub fn handle_datagram(
        &mut self,
        data: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) {
        let data = if local.port() == self.cfg.natt_port {
            match data.strip_prefix(&NON_ESP_MARKER[..]) {
                Some(d) => d,
                None => return, // ESP-in-UDP: the dataplane's business.
            }
        } else {
            data
        };
        let h = match Header::parse(data) {
            Ok(h) => h,
            Err(e) => {
                self.dropped += 1;
                self.last_error = Some(e);
                return;
            }
        };
        let r = if h.exchange == exchange::IKE_SA_INIT {
            if h.is_response() {
                self.on_init_response(&h, data, now)
            } else {
                self.on_init_request(&h, data, local, remote, now)
            }
        } else {
            self.on_protected(&h, data, local, remote, now)
        };
        if let Err(e) = r {
            // Unauthenticated junk must not be able to flood the event log:
            // count it and keep the last reason for diagnostics.
            self.dropped += 1;
            self.last_error = Some(e);
        }
        self.sweep(now);
    }

    /// A message protected by an IKE SA's keys: find the SA, drop what is
    /// not the next request or the awaited response, verify and decrypt
    /// (collecting fragments), then hand it to its exchange.
    fn on_protected(
        &mut self,
        h: &Header,
        data: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> Result<()> {
        let found = self
            .sas
            .iter()
            .position(|s| !s.dead && s.spi_i == h.spi_i && s.spi_r == h.spi_r);
        // A half-open SA is handled in the SA table, and goes back to its
        // own table unless this finished IKE_AUTH ([`Ike::sweep`]).
        let Some(idx) = found.or_else(|| self.promote_half_open(h.spi_i, h.spi_r)) else {
            return Ok(());
        };
        let sa = &self.sas[idx];
        let Some(sk) = sa.sk.as_ref() else {
            return Ok(());
        };
        if h.is_response() {
            if sa.pending.as_ref().map(|p| p.msg_id) != Some(h.msg_id) {
                return Ok(());
            }
        } else if h.msg_id.wrapping_add(1) == sa.peer_next {
            self.answer_again(idx, h, data);
            return Ok(());
        } else if h.msg_id != sa.peer_next
            && !(sa.adopted && h.msg_id.wrapping_sub(sa.peer_next) < snapshot::ID_SLACK)
        {
            return Ok(());
        }
        // An IKE_AUTH request to a half-open SA comes from a peer not yet
        // authenticated: what does not parse is refused and counted.
        let unauthenticated = h.exchange == exchange::IKE_AUTH
            && !h.is_response()
            && !sa.initiator
            && sa.state == St::HalfOpen;
        let opened = if h.next == kind::SKF {
            // Integrity failures are dropped silently (RFC 7296 §2.21).
            open_fragment(data, sk).and_then(|f| self.reassemble(idx, f))
        } else {
            Message::parse_protected(data, sk).map(Some)
        };
        let m = match opened {
            Ok(Some(m)) => m,
            Ok(None) => return Ok(()),
            Err(e) => {
                if unauthenticated && e != Error::Integrity {
                    self.auth_refused(admission::AUTH_MALFORMED);
                }
                return Err(e);
            }
        };
        let sa = &mut self.sas[idx];
        sa.last_rx = now;
        if sa.remote != remote || sa.local != local {
            // Follow the peer's NAT mapping once the message authenticated.
            sa.remote = remote;
            sa.local = local;
            sa.natt = local.port() == self.cfg.natt_port;
        }
        if h.is_response() {
            let p = sa.pending.take().ok_or(Error::Malformed("no pending"))?;
            sa.next_req = sa.next_req.wrapping_add(1);
            self.on_response(idx, &m, p.req, now)?;
        } else {
            // Authenticated: an adopted SA's peer IDs are known from here.
            sa.adopted = false;
            let resp = self.on_request(idx, h, &m, now)?;
            if let Some(payloads) = resp {
                let sa = &mut self.sas[idx];
                let msg = sa.protect(h.exchange, h.msg_id, true, payloads)?;
                sa.peer_next = h.msg_id.wrapping_add(1);
                sa.last_resp = Some((h.msg_id, msg.clone()));
                self.send_all(idx, msg);
            }
        }
        if idx < self.sas.len() {
            self.run_queue(idx, now);
        }
        Ok(())
    }

    fn on_request(
        &mut self,
        idx: usize,
        h: &Header,
        m: &Message,
        now: Instant,
    ) -> Result<Option<Vec<Payload>>> {
        let state = self.sas[idx].state;
        match (h.exchange, state) {
            (exchange::IKE_AUTH, St::HalfOpen) if h.msg_id == 1 => {
                self.auth_request(idx, m, now).map(Some)
            }
            (exchange::CREATE_CHILD_SA, St::Established) => {
                if let Err(e) = self.recheck_peer(idx) {
                    // The peer's certificate no longer passes (revoked
                    // by a reloaded CRL, expired): no new keys for it,
                    // and the IKE SA goes (RFC 7296 §1.4.1).
                    self.fail(FailReason::PeerAuth(e), false);
                    let sa = &mut self.sas[idx];
                    sa.queue.clear();
                    sa.queue.push_back(Task::DeleteIke);
                    return Ok(Some(vec![Payload::Notify(crate::payload::Notify::new(
                        crate::payload::notify::AUTHENTICATION_FAILED,
                        vec![],
                    ))]));
                }
                self.create_child_request(idx, m, now).map(Some)
            }
            (exchange::INFORMATIONAL, St::Established | St::HalfOpen) => {
                self.info_request(idx, m).map(Some)
            }
            _ => Ok(None),
        }
    }

    fn on_response(&mut self, idx: usize, m: &Message, req: Req, now: Instant) -> Result<()> {
        match req {
            Req::Init => Ok(()),
            Req::Auth { spi_in } => self.auth_response(idx, m, spi_in, now),
            Req::CreateChild { .. } => self.create_child_response(idx, m, req, now),
            Req::RekeyIke { .. } => self.ike_rekey_response(idx, m, req, now),
            Req::Adopted => Ok(()),
            Req::DeleteChild(_) | Req::DeleteIke | Req::Dpd => {
                self.informational_response(idx, req);
                Ok(())
            }
        }
    }

    /// Fuzzing builds only: the SK keys of IKE SA (spi_i, spi_r), so a
    /// fuzz target can open and reseal the messages it mutates.
    #[cfg(fuzzing)]
    pub fn fuzz_sk_keys(&self, spi_i: u64, spi_r: u64) -> Option<&crypto::SkKeys> {
        self.sas
            .iter()
            .find(|s| !s.dead && s.spi_i == spi_i && s.spi_r == spi_r)
            .or_else(|| self.half.get(spi_i, spi_r))
            .and_then(|s| s.sk.as_ref())
    }

    /// Earliest time [`Ike::handle_timeout`] has work to do.
    pub fn next_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut add = |x: Instant| t = Some(t.map_or(x, |y| y.min(x)));
        for sa in self.sas.iter().filter(|s| !s.dead) {
            if let Some(p) = &sa.pending {
                add(p.next_retx);
            }
            if sa.state == St::HalfOpen {
                add(sa.created + HALF_OPEN_TIMEOUT);
            }
            if sa.state == St::Established {
                lifetime::deadlines(sa).for_each(&mut add);
                if let (Some(d), None) = (self.cfg.dpd_interval, &sa.pending) {
                    add(sa.last_rx + d);
                }
            }
        }
        if let Some(r) = self.reconnect_at {
            add(r);
        }
        if let Some(x) = self.half.next_expiry() {
            add(x);
        }
        t
    }

    /// Run timers: retransmissions (RFC 7296 §2.1, doubling, give-up),
    /// rekeying, liveness checks, half-open expiry.
    pub fn handle_timeout(&mut self, now: Instant) {
        for idx in 0..self.sas.len() {
            if self.sas[idx].dead || !self.retransmit(idx, now) {
                continue;
            }
            let sa = &mut self.sas[idx];
            match sa.state {
                St::HalfOpen if now >= sa.created + HALF_OPEN_TIMEOUT => {
                    sa.dead = true;
                    continue;
                }
                St::Established => {}
                _ => continue,
            }
            let mut tasks = lifetime::due(sa, now);
            if let Some(d) = self.cfg.dpd_interval {
                // Liveness check after `d` without hearing from the peer
                // while nothing else is going on (RFC 7296 §2.4).
                if sa.pending.is_none() && sa.queue.is_empty() && now >= sa.last_rx + d {
                    tasks.push(Task::Dpd);
                }
            }
            for t in tasks {
                push_task(&mut sa.queue, t);
            }
            self.run_queue(idx, now);
        }
        self.half.expire(now);
        self.sweep(now);
        if self.reconnect_at.is_some_and(|r| now >= r) {
            self.reconnect_at = None;
            if let Err(e) = self.initiate(now) {
                self.dropped += 1;
                self.last_error = Some(e);
            }
        }
    }
}

/// Strip the RFC 3948 non-ESP marker; None if the datagram is ESP.
pub fn strip_marker(data: &[u8]) -> Option<&[u8]> {
    data.strip_prefix(&NON_ESP_MARKER[..])
}
