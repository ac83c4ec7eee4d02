//! Established IKE SAs as data, for a standby gateway (HA state sync):
//! [`Ike::export`] takes a [`SaSnapshot`] of each, [`SaSnapshot::encode`]
//! / [`SaSnapshot::decode`] carry it as bytes, and [`Ike::import`] builds
//! Established SAs from them that the state machine drives (liveness
//! answers, rekeys, deletes) as if it had negotiated them.
//!
//! What moves: SPIs, role, suite, the seven SK keys (RFC 7296 §2.14), the
//! message IDs both ways (§2.3), addresses and NAT-T, the request in
//! flight (its protected datagrams, so the importer retransmits the same
//! bytes under the same ID, §2.1), and each child SA's keys and selectors.
//! Lifetimes move as remaining durations, so the two clocks need not agree.
//! The cached response to the peer's last request does not move: see
//! [`Ike::answer_again`](super::retransmit).
//!
//! Decoding is of input from the sync link (sealed, but still bounded):
//! every length is checked, nothing is allocated beyond the input's size.

mod encoding;

use super::table::{Child, IkeSa, Pending, Req, St};
use super::{Action, AuthInfo, ChildSaKeys, Event, Ike};
use crate::crypto::{IkeKeys, IkeSuite};
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How far ahead of the synced ID an adopted SA takes the peer's first
/// request: the requests the old active may have answered after its last
/// sync reached us (the peer sends one at a time, RFC 7296 §2.3; a sync
/// goes out after each). Only an authenticated request moves the ID, and
/// only forward, so nothing old is accepted again.
pub(super) const ID_SLACK: u32 = 16;

/// What a request in flight was, so its response does what it would have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlight {
    /// A liveness check (RFC 7296 §2.4).
    Dpd,
    /// Deleting the IKE SA.
    DeleteIke,
    /// Deleting the child whose inbound SPI this is.
    DeleteChild(u32),
    /// A CREATE_CHILD_SA whose private DH value and nonce stayed with the
    /// old active: its response is taken (message IDs move on) and ignored.
    Other,
}

/// A request of ours the peer may not have answered yet.
#[derive(Clone)]
pub struct PendingSnapshot {
    /// Its message ID.
    pub msg_id: u32,
    /// What it was.
    pub kind: InFlight,
    /// The protected datagrams as sent (one per fragment), markerless.
    pub data: Vec<Vec<u8>>,
}

/// One child SA.
#[derive(Clone)]
pub struct ChildSnapshot {
    /// Keys, SPIs, selectors, addresses as the dataplane got them.
    pub keys: ChildSaKeys,
    /// Time left until the rekey, if one is planned.
    pub rekey_in: Option<Duration>,
    /// Time left until the hard expiry.
    pub expire_in: Option<Duration>,
}

/// One established IKE SA with its children.
#[derive(Clone)]
pub struct SaSnapshot {
    /// Initiator's SPI.
    pub spi_i: u64,
    /// Responder's SPI.
    pub spi_r: u64,
    /// We were the original initiator (RFC 7296 §2.2 role bits).
    pub initiator: bool,
    /// Negotiated algorithms.
    pub suite: IkeSuite,
    /// SK_d, SK_a*, SK_e*, SK_p*.
    pub keys: IkeKeys,
    /// Message ID of our next request.
    pub next_req: u32,
    /// Message ID of the peer's next request.
    pub peer_next: u32,
    /// Our address and port.
    pub local: SocketAddr,
    /// The peer's.
    pub remote: SocketAddr,
    /// IKE on the NAT-T port (non-ESP marker).
    pub natt: bool,
    /// IKE fragment size (RFC 7383), if the peer supports fragmentation.
    pub frag_size: Option<u16>,
    /// Time left until the IKE SA's rekey.
    pub rekey_in: Option<Duration>,
    /// Time left until its hard expiry.
    pub expire_in: Option<Duration>,
    /// Our request in flight.
    pub pending: Option<PendingSnapshot>,
    /// Its child SAs.
    pub children: Vec<ChildSnapshot>,
    /// How both sides authenticated (the peer's certificate chain with
    /// it, checked again at the adopting side's next rekey).
    pub auth: Option<AuthInfo>,
}

impl fmt::Debug for SaSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaSnapshot")
            .field("spi_i", &format_args!("{:016x}", self.spi_i))
            .field("spi_r", &format_args!("{:016x}", self.spi_r))
            .field("initiator", &self.initiator)
            .field("next_req", &self.next_req)
            .field("peer_next", &self.peer_next)
            .field("children", &self.children.len())
            .field("keys", &"<redacted>")
            .finish_non_exhaustive()
    }
}

fn remaining(at: Option<Instant>, now: Instant) -> Option<Duration> {
    at.map(|t| t.saturating_duration_since(now))
}

impl Ike {
    /// A snapshot of every established IKE SA (rekeyed-away and half-open
    /// SAs are left out: a standby cannot finish their exchanges).
    pub fn export(&self, now: Instant) -> Vec<SaSnapshot> {
        self.sas
            .iter()
            .filter(|s| s.state == St::Established && !s.dead)
            .filter_map(|s| {
                let pending = s.pending.as_ref().map(|p| PendingSnapshot {
                    msg_id: p.msg_id,
                    kind: match p.req {
                        Req::Dpd => InFlight::Dpd,
                        Req::DeleteIke => InFlight::DeleteIke,
                        Req::DeleteChild(spi) => InFlight::DeleteChild(spi),
                        _ => InFlight::Other,
                    },
                    data: p.data.clone(),
                });
                Some(SaSnapshot {
                    spi_i: s.spi_i,
                    spi_r: s.spi_r,
                    initiator: s.initiator,
                    suite: s.suite?,
                    keys: s.keys.clone()?,
                    next_req: s.next_req,
                    peer_next: s.peer_next,
                    local: s.local,
                    remote: s.remote,
                    natt: s.natt,
                    frag_size: s.frag_size.and_then(|f| u16::try_from(f).ok()),
                    rekey_in: remaining(s.rekey_at, now),
                    expire_in: remaining(s.expire_at, now),
                    pending,
                    children: s
                        .children
                        .iter()
                        .map(|c| ChildSnapshot {
                            keys: c.keys.clone(),
                            rekey_in: remaining(c.rekey_at, now),
                            expire_in: remaining(c.expire_at, now),
                        })
                        .collect(),
                    auth: s.auth.clone(),
                })
            })
            .collect()
    }

    /// Adopts an IKE SA the active negotiated: replaces any SA of ours
    /// with the same SPIs, queues [`Action::InstallChild`] for each child
    /// (the caller keys its dataplane as for a negotiated child) and an
    /// [`Event::IkeAdopted`]. A request in flight is retransmitted as it
    /// was at its first timer (RFC 7296 §2.1: same ID, same bytes).
    pub fn import(&mut self, snap: SaSnapshot, now: Instant) {
        self.forget(snap.spi_i, snap.spi_r);
        let mut sa = IkeSa::new(snap.initiator, snap.local, snap.remote, now);
        sa.spi_i = snap.spi_i;
        sa.spi_r = snap.spi_r;
        sa.state = St::Established;
        sa.adopted = true;
        sa.sk = Some(snap.keys.sk_keys(&snap.suite, snap.initiator));
        sa.suite = Some(snap.suite);
        sa.keys = Some(snap.keys);
        sa.natt = snap.natt;
        sa.next_req = snap.next_req;
        sa.peer_next = snap.peer_next;
        sa.frag_size = snap.frag_size.map(usize::from);
        sa.auth = snap.auth;
        sa.rekey_at = snap.rekey_in.map(|d| now + d);
        sa.expire_at = snap.expire_in.map(|d| now + d);
        sa.pending = snap.pending.map(|p| Pending {
            msg_id: p.msg_id,
            data: p.data,
            req: match p.kind {
                InFlight::Dpd => Req::Dpd,
                InFlight::DeleteIke => Req::DeleteIke,
                InFlight::DeleteChild(spi) => Req::DeleteChild(spi),
                InFlight::Other => Req::Adopted,
            },
            tries: 0,
            next_retx: now,
            started: now,
        });
        let (spi_i, spi_r, suite, nat) = (sa.spi_i, sa.spi_r, snap.suite, sa.natt);
        for c in snap.children {
            sa.children.push(Child {
                spi_in: c.keys.spi_in,
                spi_out: c.keys.spi_out,
                local_ts: c.keys.local_ts.clone(),
                remote_ts: c.keys.remote_ts.clone(),
                rekey_at: c.rekey_in.map(|d| now + d),
                expire_at: c.expire_in.map(|d| now + d),
                policy: c.keys.policy,
                keys: c.keys.clone(),
            });
            self.actions.push_back(Action::InstallChild(c.keys));
        }
        self.sas.push(sa);
        self.reconnect_at = None;
        self.event(Event::IkeAdopted {
            spi_i,
            spi_r,
            suite,
            nat,
        });
    }

    /// Drops IKE SA (spi_i, spi_r) without a word to the peer or the
    /// dataplane: the standby's shadow of it is replaced or was deleted.
    fn forget(&mut self, spi_i: u64, spi_r: u64) {
        self.sas.retain(|s| !(s.spi_i == spi_i && s.spi_r == spi_r));
    }

    /// Drops every IKE SA (half-open ones too) without a word to the peer
    /// and without actions: this gateway became the HA standby, the SAs
    /// are the new active's now (the caller unkeys its dataplane). No
    /// reconnection is scheduled.
    pub fn forget_all(&mut self) {
        self.sas.clear();
        self.half = super::half_open::HalfOpenTable::new(self.cfg.max_half_open);
        self.actions.clear();
        self.reconnect_at = None;
    }
}
