//! Stateless cookies (RFC 7296 §2.6): under load the responder answers an
//! IKE_SA_INIT with a COOKIE notify instead of creating state, and only
//! a request that returns the cookie proves its source address; the
//! initiator repeats its request with the cookie it was given.

use super::table::St;
use super::{Ike, HALF_OPEN_TIMEOUT};
use crate::crypto;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::payload::{notify, Notify};
use std::net::SocketAddr;
use std::time::Instant;

/// Longest cookie we echo (RFC 7296 §3.10.1: 1 to 64 octets).
const MAX_COOKIE: usize = 64;
/// INITs remembered as half-open before they have an SA (bounds memory
/// under a flood; beyond it cookies are in force anyway).
const MAX_INIT_ATTEMPTS: usize = 1024;

impl Ike {
    /// RFC 7296 §2.6: Cookie = <VersionIDofSecret> | Hash(Ni | IPi | SPIi | <secret>).
    fn cookie_for(&self, ni: &[u8], remote: SocketAddr, spi_i: u64) -> Vec<u8> {
        let ip = match remote.ip() {
            std::net::IpAddr::V4(a) => a.octets().to_vec(),
            std::net::IpAddr::V6(a) => a.octets().to_vec(),
        };
        let mut c = vec![0u8];
        c.extend_from_slice(
            &crypto::Prf::HmacSha256.prf(&self.cookie_secret[..], &[ni, &ip, &spi_i.to_be_bytes()]),
        );
        c
    }

    /// The COOKIE notify to answer an IKE_SA_INIT request with, when
    /// cookies are in force (enough half-open SAs, counting the INITs that
    /// were let through but made none: an invalid KE must count too) and
    /// the request does not carry the right one; None lets it through.
    pub(super) fn cookie_demand(
        &mut self,
        m: &Message,
        ni: &[u8],
        remote: SocketAddr,
        spi_i: u64,
        now: Instant,
    ) -> Option<Notify> {
        while let Some(t) = self.init_attempts.front() {
            if now < *t + HALF_OPEN_TIMEOUT {
                break;
            }
            self.init_attempts.pop_front();
        }
        let half_open =
            self.sas.iter().filter(|s| s.state == St::HalfOpen).count() + self.init_attempts.len();
        if half_open < self.cfg.cookie_threshold {
            return None;
        }
        let want = self.cookie_for(ni, remote, spi_i);
        let ok = m
            .notify(notify::COOKIE)
            .is_some_and(|c| crypto::ct_eq(&c.data, &want));
        (!ok).then(|| Notify::new(notify::COOKIE, want))
    }

    /// An INIT got past the cookie check: it counts as half-open from now
    /// on, before any DH work is spent on it.
    pub(super) fn init_attempt(&mut self, now: Instant) {
        if self.init_attempts.len() >= MAX_INIT_ATTEMPTS {
            self.init_attempts.pop_front();
        }
        self.init_attempts.push_back(now);
    }

    /// The INIT became a half-open SA, which counts itself from now on.
    pub(super) fn init_attempt_done(&mut self) {
        self.init_attempts.pop_back();
    }

    /// Initiator: the responder asked for a cookie; repeat the
    /// IKE_SA_INIT request with it.
    pub(super) fn cookie_received(&mut self, idx: usize, c: &Notify, now: Instant) -> Result<()> {
        if c.data.is_empty() || c.data.len() > MAX_COOKIE {
            return Err(Error::Malformed("cookie"));
        }
        self.sas[idx].cookie = Some(c.data.clone());
        self.send_init(idx, now)
    }
}
