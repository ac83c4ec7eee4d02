//! The half-open table (RFC 7296 §2.6, RFC 8019 §4): the state an
//! unauthenticated IKE_SA_INIT buys — a responder's SA before IKE_AUTH —
//! lives here, capped, apart from the SA table that holds established SAs,
//! our own initiations and rekeys. A full half-open table refuses INITs
//! and nothing else: it cannot refuse an initiate, a reconnect or a rekey,
//! and an established SA's loss is seen as the SA table going empty
//! whatever a flood left half-open.
//!
//! An SA leaves this table only for the time a message protected by its
//! keys is handled ([`Ike::promote_half_open`]); it stays in the SA table
//! once IKE_AUTH established it, and comes back otherwise
//! ([`Ike::demote_half_open`]).

use super::table::{IkeSa, St};
use super::{Action, Ike, HALF_OPEN_TIMEOUT};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

/// Responder SAs between IKE_SA_INIT and IKE_AUTH, at most `cap`.
pub(super) struct HalfOpenTable {
    sas: Vec<IkeSa>,
    cap: usize,
}

impl HalfOpenTable {
    pub(super) fn new(cap: usize) -> HalfOpenTable {
        HalfOpenTable {
            sas: Vec::new(),
            cap,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.sas.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &IkeSa> {
        self.sas.iter()
    }

    /// Half-open SAs whose peer is `ip` (all with None).
    pub(super) fn count_from(&self, ip: Option<IpAddr>) -> usize {
        self.sas
            .iter()
            .filter(|s| ip.is_none_or(|ip| s.remote.ip() == ip))
            .count()
    }

    /// Adds `sa`; gives it back when the table is full.
    pub(super) fn insert(&mut self, sa: IkeSa) -> Result<(), Box<IkeSa>> {
        if self.sas.len() >= self.cap {
            return Err(Box::new(sa));
        }
        self.sas.push(sa);
        Ok(())
    }

    /// The SA an IKE_SA_INIT request from `remote` with `spi_i` created
    /// (its retransmission gets the same answer, RFC 7296 §2.1).
    pub(super) fn by_init(&self, spi_i: u64, remote: SocketAddr) -> Option<&IkeSa> {
        self.sas
            .iter()
            .find(|s| s.spi_i == spi_i && s.remote == remote)
    }

    /// Takes out the SA with these SPIs.
    pub(super) fn take(&mut self, spi_i: u64, spi_r: u64) -> Option<IkeSa> {
        let i = self
            .sas
            .iter()
            .position(|s| s.spi_i == spi_i && s.spi_r == spi_r)?;
        Some(self.sas.swap_remove(i))
    }

    /// Whether `spi` is either SPI of a half-open SA.
    pub(super) fn owns_spi(&self, spi: u64) -> bool {
        self.sas.iter().any(|s| s.spi_i == spi || s.spi_r == spi)
    }

    /// Forgets the SAs older than [`HALF_OPEN_TIMEOUT`].
    pub(super) fn expire(&mut self, now: Instant) {
        self.sas.retain(|s| now < s.created + HALF_OPEN_TIMEOUT);
    }

    /// When the oldest SA expires.
    pub(super) fn next_expiry(&self) -> Option<Instant> {
        self.sas.iter().map(|s| s.created + HALF_OPEN_TIMEOUT).min()
    }

    /// Fuzzing builds: the SA with these SPIs.
    #[cfg(fuzzing)]
    pub(super) fn get(&self, spi_i: u64, spi_r: u64) -> Option<&IkeSa> {
        self.sas
            .iter()
            .find(|s| s.spi_i == spi_i && s.spi_r == spi_r)
    }
}

impl IkeSa {
    /// A responder's SA before IKE_AUTH: the state an INIT costs us.
    pub(super) fn is_half_open(&self) -> bool {
        !self.dead && !self.initiator && self.state == St::HalfOpen
    }

    /// `msg` sent to the SA's peer (non-ESP marker on NAT-T).
    pub(super) fn send_action(&self, msg: Vec<u8>) -> Action {
        Action::Send {
            local: self.local,
            remote: self.remote,
            data: self.wrap(msg),
        }
    }
}

impl Ike {
    /// A protected message for half-open SA (spi_i, spi_r): the SA moves
    /// into the SA table to be handled there; its index.
    pub(super) fn promote_half_open(&mut self, spi_i: u64, spi_r: u64) -> Option<usize> {
        let sa = self.half.take(spi_i, spi_r)?;
        self.sas.push(sa);
        Some(self.sas.len() - 1)
    }

    /// Moves SAs still half-open (their message did not finish IKE_AUTH)
    /// back to the half-open table; keeps the SA table free of them.
    pub(super) fn demote_half_open(&mut self) {
        let mut i = 0;
        while i < self.sas.len() {
            if self.sas[i].is_half_open() {
                let sa = self.sas.remove(i);
                // It came from there: room was left for it.
                let _ = self.half.insert(sa);
            } else {
                i += 1;
            }
        }
    }
}
