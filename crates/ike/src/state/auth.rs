//! IKE_AUTH (RFC 7296 §1.2, §2.15): each side proves its identity over
//! its view of the IKE_SA_INIT exchange — with the PSK or a signature and
//! its certificates ([`super::proof`]) — and the first child SA is
//! negotiated in the same exchange.

use super::table::{rand_spi32, Req, St};
use super::{Event, FailReason, Ike};
use crate::error::Result;
use crate::message::{exchange, Message};
use crate::payload::{notify, Notify, Payload};
use std::time::Instant;

fn auth_failed() -> Payload {
    Payload::Notify(Notify::new(notify::AUTHENTICATION_FAILED, vec![]))
}

impl Ike {
    /// IDi, [CERT+], [CERTREQ], [IDr], AUTH, SA, TSi, TSr (RFC 7296 §1.2).
    pub(super) fn send_auth(&mut self, idx: usize, now: Instant) -> Result<()> {
        let spi_in = rand_spi32()?;
        let id = self.cfg.local_id.clone();
        let (method, auth) = match self.own_auth(idx, &id)? {
            Ok(x) => x,
            Err(e) => {
                self.sas[idx].dead = true;
                self.fail(
                    FailReason::Protocol(format!("cannot authenticate: {e}")),
                    false,
                );
                return Ok(());
            }
        };
        self.sas[idx].auth_sent = Some(method);
        let (tsi, tsr) = self.config_ts();
        let mut p = vec![Payload::IdI(id)];
        p.extend(self.cert_payloads(&self.sas[idx].peer_cas));
        p.extend(self.cert_request());
        p.extend(self.wanted_idr());
        p.extend([
            auth,
            Payload::Sa(self.esp_offer(spi_in, false, None)),
            Payload::TsI(tsi),
            Payload::TsR(tsr),
        ]);
        let msg = self.sas[idx].protect(exchange::IKE_AUTH, 1, false, p)?;
        self.start_request(idx, 1, msg, Req::Auth { spi_in }, now);
        Ok(())
    }

    fn established(&mut self, idx: usize, now: Instant) {
        let sa = &mut self.sas[idx];
        sa.state = St::Established;
        (sa.rekey_at, sa.expire_at) = super::lifetime::ike_deadlines(&self.cfg, now);
        let (spi_i, spi_r, nat) = (sa.spi_i, sa.spi_r, sa.natt);
        if let Some(suite) = sa.suite {
            self.event(Event::IkeEstablished {
                spi_i,
                spi_r,
                suite,
                nat,
            });
        }
    }

    pub(super) fn auth_request(
        &mut self,
        idx: usize,
        m: &Message,
        now: Instant,
    ) -> Result<Vec<Payload>> {
        let peer = match self.check_peer(idx, m, true)? {
            Ok(p) => p,
            Err(reason) => {
                self.auth_refused(match &reason {
                    FailReason::PeerAuth(e) => e.kind(),
                    _ => "authentication-failed",
                });
                self.sas[idx].dead = true;
                self.fail(reason, false);
                return Ok(vec![auth_failed()]);
            }
        };
        let id = self.cfg.local_id.clone();
        let (method, auth) = match self.own_auth(idx, &id)? {
            Ok(x) => x,
            Err(e) => {
                self.sas[idx].dead = true;
                self.fail(
                    FailReason::Protocol(format!("cannot authenticate: {e}")),
                    false,
                );
                return Ok(vec![auth_failed()]);
            }
        };
        let mut out = vec![Payload::IdR(id)];
        out.extend(self.cert_payloads(&super::proof::requested_cas(m)));
        out.push(auth);
        self.authenticated(idx, method, peer);
        let sa = &self.sas[idx];
        let (ni, nr) = (sa.ni.clone(), sa.nr.clone());
        self.established(idx, now);
        out.extend(self.child_response(idx, m, (&ni, &nr), false, None, now)?);
        Ok(out)
    }

    pub(super) fn auth_response(
        &mut self,
        idx: usize,
        m: &Message,
        spi_in: u32,
        now: Instant,
    ) -> Result<()> {
        let peer = match self.check_peer(idx, m, false)? {
            Ok(p) => p,
            Err(ours) => {
                let peer_said = m.error_notify();
                self.sas[idx].dead = true;
                self.fail(
                    match peer_said {
                        Some(e) => FailReason::from_notify(e),
                        None => ours,
                    },
                    false,
                );
                if peer_said.is_none() {
                    // RFC 7296 §2.21.2: tell the responder its AUTH failed.
                    let sa = &mut self.sas[idx];
                    let id = sa.next_req;
                    let msg =
                        sa.protect(exchange::INFORMATIONAL, id, false, vec![auth_failed()])?;
                    self.send_all(idx, msg);
                }
                return Ok(());
            }
        };
        let method = self.sas[idx]
            .auth_sent
            .unwrap_or(crate::pki::AuthMethod::Psk);
        self.authenticated(idx, method, peer);
        let sa = &self.sas[idx];
        let (ni, nr) = (sa.ni.clone(), sa.nr.clone());
        self.established(idx, now);
        let ts = self.config_ts();
        self.child_from_response(idx, m, spi_in, (&ni, &nr), None, &ts, None, false, now)
    }
}
