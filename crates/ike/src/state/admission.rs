//! Who may make the responder spend state and DH work on an IKE_SA_INIT
//! request (RFC 7296 §2.6, RFC 8019 §4): the source must be the configured
//! peer (unless the peer address is unspecified: any peer); cookies are
//! demanded when half-open SAs pile up in total or from one address, or
//! when INITs arrive faster than a rate; past the cookie check one source
//! address may hold only so many half-open SAs, and half-open SAs are
//! capped in a table of their own ([`super::half_open`]), apart from
//! established ones (so a flood never takes the room a rekey, an initiate
//! or a reconnect needs). Every refusal is a counter
//! ([`InitStats`]), never an event: unauthenticated input does not touch
//! a tunnel's state.

use super::{Ike, HALF_OPEN_TIMEOUT};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Half-open responder SAs per peer by default
/// ([`crate::IkeConfig::max_half_open`]), apart from the established ones.
pub const MAX_HALF_OPEN: usize = 64;
/// INITs remembered as half-open before they have an SA (bounds memory
/// under a flood; beyond it cookies are in force anyway).
const MAX_INIT_ATTEMPTS: usize = 1024;
/// The window the INIT rate is measured over.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// Why an IKE_SA_INIT request was dropped without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitDrop {
    /// Its source is not the tunnel's configured peer.
    UnknownPeer,
    /// Its source address holds the per-source limit of half-open SAs.
    SourceLimit,
    /// The half-open table is full ([`crate::IkeConfig::max_half_open`]).
    HalfOpenFull,
    /// Its KE payload is not a valid public value (checked before any DH).
    InvalidKe,
    /// It does not parse, or lacks a required payload.
    Malformed,
}

impl InitDrop {
    /// Every reason, in the order of [`InitStats::dropped`].
    pub const ALL: [InitDrop; 5] = [
        InitDrop::UnknownPeer,
        InitDrop::SourceLimit,
        InitDrop::HalfOpenFull,
        InitDrop::InvalidKe,
        InitDrop::Malformed,
    ];

    /// The label used in metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            InitDrop::UnknownPeer => "unknown-peer",
            InitDrop::SourceLimit => "source-limit",
            InitDrop::HalfOpenFull => "half-open-full",
            InitDrop::InvalidKe => "invalid-ke",
            InitDrop::Malformed => "malformed",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What unauthenticated IKE_SA_INIT requests cost this peer, since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InitStats {
    /// IKE_SA_INIT requests received (retransmissions included).
    pub received: u64,
    /// Answered with a COOKIE notify instead of state (§2.6).
    pub cookies_sent: u64,
    /// Answered NO_PROPOSAL_CHOSEN or INVALID_KE_PAYLOAD (no state).
    pub refused: u64,
    /// Dropped without an answer, by [`InitDrop`] (indexed as `ALL`).
    pub dropped: [u64; 5],
    /// Half-open SAs now (responder), INITs still counted as such included.
    pub half_open: usize,
}

impl InitStats {
    /// Dropped for `r`.
    pub fn dropped_for(&self, r: InitDrop) -> u64 {
        self.dropped[r.index()]
    }

    /// Dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }
}

/// INIT bookkeeping of one peer.
#[derive(Debug, Default)]
pub(super) struct Admission {
    pub(super) stats: InitStats,
    /// INITs past the cookie check that have not (yet) become a half-open
    /// SA, with their source: they count as half-open (an invalid KE or a
    /// refused proposal must count too).
    attempts: std::collections::VecDeque<(Instant, IpAddr)>,
    /// Arrival times of the INITs of the last [`RATE_WINDOW`] (at most
    /// the rate plus one are kept: enough to tell it is exceeded).
    recent: std::collections::VecDeque<Instant>,
    /// IKE_AUTH requests refused before the peer was authenticated, by
    /// reason ([`crate::pki::AuthError::kind`], or [`AUTH_MALFORMED`]);
    /// bounded by the number of reasons.
    auth_refused: Vec<(&'static str, u64)>,
}

/// The reason counted for an IKE_AUTH request that decrypted but does not
/// parse within the bounds (more payloads than [`crate::payload::MAX_PAYLOADS`],
/// a reassembled message over [`crate::message::MAX_MESSAGE_LEN`]).
pub const AUTH_MALFORMED: &str = "malformed";

impl Ike {
    /// Whether `remote` may open an IKE SA here: the configured peer, or
    /// anyone when the peer address is unspecified (RFC 7296 §2.6 leaves
    /// the policy to the responder).
    pub(super) fn peer_allowed(&self, remote: SocketAddr) -> bool {
        let want = self.cfg.remote_addr.ip();
        want.is_unspecified() || want == remote.ip()
    }

    pub(super) fn init_dropped(&mut self, r: InitDrop) {
        self.adm.stats.dropped[r.index()] += 1;
    }

    /// IKE_AUTH requests refused as responder, before the peer was
    /// authenticated, by reason: unauthenticated input costs a counter
    /// (RFC 7296 §2.21.2 answers it AUTHENTICATION_FAILED).
    pub fn auth_refusals(&self) -> &[(&'static str, u64)] {
        &self.adm.auth_refused
    }

    pub(super) fn auth_refused(&mut self, reason: &'static str) {
        let v = &mut self.adm.auth_refused;
        match v.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => v.push((reason, 1)),
        }
    }

    /// Counters of unauthenticated IKE_SA_INIT requests.
    pub fn init_stats(&self) -> InitStats {
        let mut s = self.adm.stats;
        s.half_open = self.half_open(None);
        s
    }

    fn expire_attempts(&mut self, now: Instant) {
        while let Some((t, _)) = self.adm.attempts.front() {
            if now < *t + HALF_OPEN_TIMEOUT {
                break;
            }
            self.adm.attempts.pop_front();
        }
    }

    /// Half-open responder SAs (and INITs counted as such), of one source
    /// address or all.
    pub(super) fn half_open(&self, from: Option<IpAddr>) -> usize {
        let attempts = self
            .adm
            .attempts
            .iter()
            .filter(|(_, ip)| from.is_none_or(|f| *ip == f))
            .count();
        self.half.count_from(from) + attempts
    }

    /// Notes an INIT's arrival; whether the INIT rate is over the limit.
    fn rate_exceeded(&mut self, now: Instant) -> bool {
        let q = &mut self.adm.recent;
        while q.front().is_some_and(|t| now >= *t + RATE_WINDOW) {
            q.pop_front();
        }
        let limit = self.cfg.cookie_rate as usize;
        if q.len() > limit {
            q.pop_front();
        }
        q.push_back(now);
        q.len() > limit
    }

    /// Whether cookies are in force for an INIT from `ip` (RFC 8019 §4.1):
    /// enough half-open SAs in all or from `ip`, or INITs arriving faster
    /// than `cookie_rate` per second.
    pub(super) fn cookies_needed(&mut self, ip: IpAddr, now: Instant) -> bool {
        self.expire_attempts(now);
        let fast = self.rate_exceeded(now);
        fast || self.half_open(None) >= self.cfg.cookie_threshold
            || self.half_open(Some(ip)) >= self.cfg.cookie_threshold_ip
    }

    /// Past the cookie check: whether state may be spent on an INIT from
    /// `ip`; counts the refusal otherwise.
    pub(super) fn room_for(&mut self, ip: IpAddr) -> bool {
        if self.half_open(Some(ip)) >= self.cfg.half_open_per_source {
            self.init_dropped(InitDrop::SourceLimit);
            return false;
        }
        if self.half_open(None) >= self.cfg.max_half_open {
            self.init_dropped(InitDrop::HalfOpenFull);
            return false;
        }
        true
    }

    /// An INIT got past the checks: it counts as half-open from now on,
    /// before any DH work is spent on it.
    pub(super) fn init_attempt(&mut self, ip: IpAddr, now: Instant) {
        if self.adm.attempts.len() >= MAX_INIT_ATTEMPTS {
            self.adm.attempts.pop_front();
        }
        self.adm.attempts.push_back((now, ip));
    }

    /// The INIT became a half-open SA, which counts itself from now on.
    pub(super) fn init_attempt_done(&mut self) {
        self.adm.attempts.pop_back();
    }
}
