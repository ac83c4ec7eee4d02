//! Stateless cookies (RFC 7296 §2.6): under load the responder answers an
//! IKE_SA_INIT with a COOKIE notify instead of creating state, and only
//! a request that returns the cookie proves its source address; the
//! initiator repeats its request with the cookie it was given.

use super::Ike;
use crate::crypto;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::payload::{notify, Notify};
use std::net::SocketAddr;
use std::time::Instant;

/// Longest cookie we echo (RFC 7296 §3.10.1: 1 to 64 octets).
const MAX_COOKIE: usize = 64;

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
    /// cookies are in force ([`Ike::cookies_needed`]) and the request does
    /// not carry the right one; None lets it through.
    pub(super) fn cookie_demand(
        &mut self,
        m: &Message,
        ni: &[u8],
        remote: SocketAddr,
        spi_i: u64,
        now: Instant,
    ) -> Option<Notify> {
        if !self.cookies_needed(remote.ip(), now) {
            return None;
        }
        let want = self.cookie_for(ni, remote, spi_i);
        let ok = m
            .notify(notify::COOKIE)
            .is_some_and(|c| crypto::ct_eq(&c.data, &want));
        (!ok).then(|| Notify::new(notify::COOKIE, want))
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
