//! The SA table: one peer's IKE SAs with their child SAs, the request in
//! flight and the exchanges queued behind it (window size 1, RFC 7296
//! §2.3), and the random values every exchange draws (SPIs, nonces).

use super::fragments::Reassembly;
use super::{Action, Event, FailReason, Ike, NON_ESP_MARKER};
use crate::config::Prefix;
use crate::crypto::{self, DhGroup, DhPrivate, IkeKeys, IkeSuite, Secret, SkKeys};
use crate::error::{Error, Result};
use crate::message::{flags, Header};
use crate::payload::{notify, Notify, Payload, TrafficSelector};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

/// Queued exchanges per IKE SA waiting for the window (size 1).
pub(super) const MAX_TASKS: usize = 16;
/// Nonce length we send (RFC 7296 §2.10: at least half the PRF key size).
const NONCE_LEN: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum St {
    InitSent,
    AuthSent,
    HalfOpen,
    Established,
}

/// An exchange we want to start once the window is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Task {
    /// A new child for the own selectors (None) or a [`crate::ChildPolicy`].
    NewChild(Option<u32>),
    RekeyChild(u32),
    RekeyIke,
    DeleteChild(u32),
    DeleteIke,
    Dpd,
}

/// Our request in flight, with what its response needs.
pub(super) enum Req {
    Init,
    Auth {
        spi_in: u32,
    },
    CreateChild {
        spi_in: u32,
        rekey_of: Option<u32>,
        dh: Option<DhPrivate>,
        ni: Vec<u8>,
        ts: (Vec<TrafficSelector>, Vec<TrafficSelector>),
        policy: Option<u32>,
    },
    RekeyIke {
        spi: u64,
        dh: DhPrivate,
        ni: Vec<u8>,
    },
    DeleteChild(u32),
    DeleteIke,
    Dpd,
    /// A request the old active of an HA pair started ([`super::snapshot`]):
    /// its response only moves the message IDs on.
    Adopted,
}

pub(super) struct Pending {
    pub(super) msg_id: u32,
    pub(super) data: Vec<Vec<u8>>,
    pub(super) req: Req,
    pub(super) tries: u32,
    pub(super) next_retx: Instant,
    pub(super) started: Instant,
}

pub(super) struct Child {
    pub(super) spi_in: u32,
    pub(super) spi_out: u32,
    pub(super) local_ts: Vec<TrafficSelector>,
    pub(super) remote_ts: Vec<TrafficSelector>,
    pub(super) rekey_at: Option<Instant>,
    pub(super) expire_at: Option<Instant>,
    pub(super) policy: Option<u32>,
    /// As handed to the dataplane: what [`Ike::export`] gives a standby.
    pub(super) keys: super::ChildSaKeys,
}

pub(super) struct IkeSa {
    pub(super) spi_i: u64,
    pub(super) spi_r: u64,
    pub(super) initiator: bool,
    pub(super) state: St,
    pub(super) suite: Option<IkeSuite>,
    pub(super) keys: Option<IkeKeys>,
    pub(super) sk: Option<SkKeys>,
    pub(super) ni: Vec<u8>,
    pub(super) nr: Vec<u8>,
    pub(super) dh: Option<DhPrivate>,
    pub(super) cookie: Option<Vec<u8>>,
    pub(super) init_req: Vec<u8>,
    pub(super) init_resp: Vec<u8>,
    pub(super) local: SocketAddr,
    pub(super) remote: SocketAddr,
    pub(super) natt: bool,
    pub(super) next_req: u32,
    pub(super) pending: Option<Pending>,
    pub(super) queue: VecDeque<Task>,
    pub(super) peer_next: u32,
    pub(super) last_resp: Option<(u32, Vec<Vec<u8>>)>,
    pub(super) frag_size: Option<usize>,
    pub(super) reasm: Option<Reassembly>,
    pub(super) children: Vec<Child>,
    pub(super) created: Instant,
    pub(super) last_rx: Instant,
    pub(super) rekey_at: Option<Instant>,
    pub(super) expire_at: Option<Instant>,
    pub(super) dead: bool,
    /// Hashes the peer announced for RFC 7427 signatures (§4).
    pub(super) peer_hashes: crate::pki::SigHashes,
    /// CA key hashes of the peer's CERTREQs (RFC 7296 §3.7), for the
    /// chain we send.
    pub(super) peer_cas: Vec<[u8; crate::payload::cert::CA_HASH_LEN]>,
    /// How both sides authenticated, once IKE_AUTH is done.
    pub(super) auth: Option<super::AuthInfo>,
    /// The method of the AUTH payload we sent as initiator.
    pub(super) auth_sent: Option<crate::pki::AuthMethod>,
    /// Taken over from another gateway ([`Ike::import`]) and no request of
    /// the peer processed since: the old one may have answered requests
    /// after its last sync, so the peer's next ID may be a little ahead.
    pub(super) adopted: bool,
}

impl IkeSa {
    pub(super) fn new(
        initiator: bool,
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> IkeSa {
        IkeSa {
            spi_i: 0,
            spi_r: 0,
            initiator,
            state: if initiator {
                St::InitSent
            } else {
                St::HalfOpen
            },
            suite: None,
            keys: None,
            sk: None,
            ni: Vec::new(),
            nr: Vec::new(),
            dh: None,
            cookie: None,
            init_req: Vec::new(),
            init_resp: Vec::new(),
            local,
            remote,
            natt: false,
            next_req: 0,
            pending: None,
            queue: VecDeque::new(),
            peer_next: 0,
            last_resp: None,
            frag_size: None,
            reasm: None,
            children: Vec::new(),
            created: now,
            last_rx: now,
            rekey_at: None,
            expire_at: None,
            dead: false,
            peer_hashes: crate::pki::SigHashes::default(),
            peer_cas: Vec::new(),
            auth: None,
            auth_sent: None,
            adopted: false,
        }
    }

    pub(super) fn header(&self, exch: u8, msg_id: u32, response: bool) -> Header {
        let mut f = 0;
        if self.initiator {
            f |= flags::INITIATOR;
        }
        if response {
            f |= flags::RESPONSE;
        }
        Header {
            spi_i: self.spi_i,
            spi_r: self.spi_r,
            next: 0,
            exchange: exch,
            flags: f,
            msg_id,
            length: 0,
        }
    }

    /// Prepends the non-ESP marker on the NAT-T port (RFC 3948 §2.2).
    pub(super) fn wrap(&self, msg: Vec<u8>) -> Vec<u8> {
        if self.natt {
            let mut d = Vec::with_capacity(msg.len() + 4);
            d.extend_from_slice(&NON_ESP_MARKER);
            d.extend_from_slice(&msg);
            d
        } else {
            msg
        }
    }

    pub(super) fn prf(&self) -> Result<crypto::Prf> {
        Ok(self.suite.ok_or(Error::Malformed("no suite"))?.prf)
    }

    pub(super) fn keys(&self) -> Result<&IkeKeys> {
        self.keys.as_ref().ok_or(Error::Malformed("no keys"))
    }
}

pub(super) fn ts_of(v: &[Prefix]) -> Vec<TrafficSelector> {
    v.iter().map(|p| p.to_ts()).collect()
}

pub(super) fn rand_spi64() -> Result<u64> {
    let mut b = [0u8; 8];
    loop {
        crypto::random(&mut b)?;
        let v = u64::from_be_bytes(b);
        if v != 0 {
            return Ok(v);
        }
    }
}

pub(super) fn rand_spi32() -> Result<u32> {
    let mut b = [0u8; 4];
    loop {
        crypto::random(&mut b)?;
        let v = u32::from_be_bytes(b);
        // SPIs 1..=255 are reserved by IANA (RFC 4303 §2.1).
        if v > 255 {
            return Ok(v);
        }
    }
}

pub(super) fn nonce() -> Result<Vec<u8>> {
    let mut n = vec![0u8; NONCE_LEN];
    crypto::random(&mut n)?;
    Ok(n)
}

/// The KE payload carrying our public value (RFC 7296 §3.4).
pub(super) fn ke_payload(dh: &DhPrivate) -> Payload {
    Payload::Ke {
        group: dh.group().id(),
        data: dh.public().to_vec(),
    }
}

/// The responder's half of a CREATE_CHILD_SA DH (RFC 7296 §1.3): the
/// peer's KE (group, data) must be of the chosen group `g`, else the
/// answer is `Err`, the INVALID_KE_PAYLOAD notify naming `g` (§1.3.1,
/// §3.10.1); otherwise a fresh key of ours gives g^ir and our KE payload.
#[allow(clippy::type_complexity)]
pub(super) fn answer_ke(
    g: DhGroup,
    (group, ke): (u16, &[u8]),
) -> Result<std::result::Result<(Secret, Payload), Payload>> {
    if group != g.id() {
        return Ok(Err(Payload::Notify(Notify::new(
            notify::INVALID_KE_PAYLOAD,
            g.id().to_be_bytes().to_vec(),
        ))));
    }
    g.check_public(ke)?;
    let dh = DhPrivate::generate(g)?;
    Ok(Ok((dh.agree(ke)?, ke_payload(&dh))))
}

/// The initiator's half: the peer's KE in the response must be of the
/// group we offered (RFC 7296 §1.3); then g^ir, else None.
pub(super) fn agree_ke(dh: &DhPrivate, (group, ke): (u16, &[u8])) -> Result<Option<Secret>> {
    if group != dh.group().id() {
        return Ok(None);
    }
    dh.agree(ke).map(Some)
}

impl Ike {
    /// The newest established IKE SA: where new exchanges go.
    pub(super) fn current(&self) -> Option<usize> {
        self.sas
            .iter()
            .rposition(|s| s.state == St::Established && !s.dead)
    }

    /// A child SA is gone: the dataplane drops its SAs, the owner hears of it.
    pub(super) fn child_removed(&mut self, c: &Child) {
        self.actions.push_back(Action::RemoveChild {
            spi_in: c.spi_in,
            spi_out: c.spi_out,
        });
        self.event(Event::ChildDeleted {
            spi_in: c.spi_in,
            spi_out: c.spi_out,
        });
    }

    /// Forgets dead IKE SAs (their children are removed), moves SAs still
    /// half-open back to their own table, and schedules a reconnection
    /// when the last SA of ours (initiated or established) went: a
    /// responder's half-open SA, which anyone with the peer's address can
    /// create, neither holds a reconnection back nor starts one.
    pub(super) fn sweep(&mut self, now: Instant) {
        let mut lost = false;
        let mut i = 0;
        while i < self.sas.len() {
            if self.sas[i].dead {
                let sa = self.sas.remove(i);
                lost |= sa.initiator || sa.state == St::Established;
                for c in &sa.children {
                    self.child_removed(c);
                }
                if sa.state == St::Established {
                    self.event(Event::IkeDeleted {
                        spi_i: sa.spi_i,
                        spi_r: sa.spi_r,
                    });
                }
            } else {
                i += 1;
            }
        }
        self.demote_half_open();
        if let (true, true, Some(d)) = (
            lost && self.sas.is_empty(),
            self.cfg.initiate,
            self.cfg.reconnect_delay,
        ) {
            self.reconnect_at = Some(now + d);
        }
    }

    pub(super) fn queue_task(&mut self, t: Task, now: Instant) {
        let idx = match t {
            Task::RekeyChild(spi) | Task::DeleteChild(spi) => self
                .sas
                .iter()
                .position(|s| !s.dead && s.children.iter().any(|c| c.spi_in == spi)),
            _ => self.current(),
        };
        if let Some(i) = idx {
            push_task(&mut self.sas[i].queue, t);
            self.run_queue(i, now);
        }
    }

    /// Starts queued exchanges while the window is free.
    pub(super) fn run_queue(&mut self, idx: usize, now: Instant) {
        while self.sas[idx].pending.is_none()
            && self.sas[idx].state == St::Established
            && !self.sas[idx].dead
        {
            let Some(t) = self.sas[idx].queue.pop_front() else {
                return;
            };
            match self.start_task(idx, t, now) {
                Ok(()) => {}
                Err(e) => self.fail(FailReason::Protocol(e.to_string()), true),
            }
        }
    }

    fn start_task(&mut self, idx: usize, t: Task, now: Instant) -> Result<()> {
        let t = match t {
            Task::NewChild(_) | Task::RekeyChild(_) | Task::RekeyIke => {
                match self.recheck_peer(idx) {
                    Ok(()) => t,
                    Err(e) => {
                        // New keys only for a peer whose certificate still
                        // passes; the tunnel goes down instead.
                        self.fail(FailReason::PeerAuth(e), false);
                        self.sas[idx].queue.clear();
                        Task::DeleteIke
                    }
                }
            }
            _ => t,
        };
        let built = match t {
            Task::NewChild(_) | Task::RekeyChild(_) => self.child_request(idx, t)?,
            Task::RekeyIke => Some(self.ike_rekey_offer(idx)?),
            Task::DeleteChild(spi) => self.delete_child_request(idx, spi),
            Task::DeleteIke => Some(Ike::delete_ike_request()),
            Task::Dpd => Some(Ike::dpd_request()),
        };
        let Some(Request {
            exchange: exch,
            payloads,
            req,
        }) = built
        else {
            return Ok(());
        };
        let sa = &self.sas[idx];
        let id = sa.next_req;
        let msg = sa.protect(exch, id, false, payloads)?;
        self.start_request(idx, id, msg, req, now);
        Ok(())
    }
}

/// A request ready to be protected and sent.
pub(super) struct Request {
    pub(super) exchange: u8,
    pub(super) payloads: Vec<crate::payload::Payload>,
    pub(super) req: Req,
}

/// Queues `t` unless it is queued already or the queue is full.
pub(super) fn push_task(q: &mut VecDeque<Task>, t: Task) {
    if q.len() < MAX_TASKS && !q.contains(&t) {
        q.push_back(t);
    }
}
