//! IKE_AUTH (RFC 7296 §1.2, §2.15): each side proves it holds the PSK
//! over its view of the IKE_SA_INIT exchange; the first child SA is
//! negotiated in the same exchange.

use super::table::{rand_spi32, Req, St};
use super::{Event, FailReason, Ike};
use crate::crypto;
use crate::error::Result;
use crate::message::{exchange, Message};
use crate::payload::typed::{Auth, IdI, IdR};
use crate::payload::{notify, Notify, Payload};
use std::time::Instant;

/// AUTH method: shared key message integrity code (RFC 7296 §3.8).
const AUTH_PSK: u8 = 2;

impl Ike {
    pub(super) fn send_auth(&mut self, idx: usize, now: Instant) -> Result<()> {
        let spi_in = rand_spi32()?;
        let sa = &self.sas[idx];
        let keys = sa.keys()?;
        let prf = sa.prf()?;
        let idi = self.cfg.local_id.to_body();
        let auth = crypto::psk_auth(prf, &self.cfg.psk, &sa.init_req, &sa.nr, &keys.sk_pi, &idi);
        let (tsi, tsr) = self.config_ts();
        let p = vec![
            Payload::IdI(self.cfg.local_id.clone()),
            Payload::IdR(self.cfg.remote_id.clone()),
            Payload::Auth {
                method: AUTH_PSK,
                data: auth,
            },
            Payload::Sa(self.esp_offer(spi_in, false, None)),
            Payload::TsI(tsi),
            Payload::TsR(tsr),
        ];
        let msg = sa.protect(exchange::IKE_AUTH, 1, false, p)?;
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

    /// Verifies the peer's PSK AUTH payload (RFC 7296 §2.15) in an IKE_AUTH
    /// request (`from_initiator`: IDi, signed over our view of its
    /// IKE_SA_INIT request, Nr and SK_pi) or response (IDr, IKE_SA_INIT
    /// response, Ni, SK_pr), and that the ID is the configured remote ID.
    fn peer_auth_ok(&self, idx: usize, m: &Message, from_initiator: bool) -> Result<bool> {
        let sa = &self.sas[idx];
        let keys = sa.keys()?;
        let prf = sa.prf()?;
        let id = if from_initiator {
            m.get::<IdI>()
        } else {
            m.get::<IdR>()
        };
        let auth = m.get::<Auth>();
        let (signed, nonce, sk_p) = if from_initiator {
            (&sa.init_req, &sa.nr, &keys.sk_pi)
        } else {
            (&sa.init_resp, &sa.ni, &keys.sk_pr)
        };
        Ok(match (id, auth) {
            (Some(id), Some((AUTH_PSK, data))) if *id == self.cfg.remote_id => {
                let want = crypto::psk_auth(prf, &self.cfg.psk, signed, nonce, sk_p, &id.to_body());
                crypto::ct_eq(&want, data)
            }
            _ => false,
        })
    }

    pub(super) fn auth_request(
        &mut self,
        idx: usize,
        m: &Message,
        now: Instant,
    ) -> Result<Vec<Payload>> {
        let ok = self.peer_auth_ok(idx, m, true)?;
        let sa = &self.sas[idx];
        let keys = sa.keys()?;
        let prf = sa.prf()?;
        if !ok {
            self.sas[idx].dead = true;
            self.fail(FailReason::AuthenticationFailed, false);
            return Ok(vec![Payload::Notify(Notify::new(
                notify::AUTHENTICATION_FAILED,
                vec![],
            ))]);
        }
        let idr = self.cfg.local_id.to_body();
        let my_auth =
            crypto::psk_auth(prf, &self.cfg.psk, &sa.init_resp, &sa.ni, &keys.sk_pr, &idr);
        let mut out = vec![
            Payload::IdR(self.cfg.local_id.clone()),
            Payload::Auth {
                method: AUTH_PSK,
                data: my_auth,
            },
        ];
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
        let ok = self.peer_auth_ok(idx, m, false)?;
        if !ok {
            let peer_said = m.error_notify();
            self.sas[idx].dead = true;
            self.fail(
                match peer_said {
                    Some(e) => FailReason::from_notify(e),
                    None => FailReason::AuthenticationFailed,
                },
                false,
            );
            if peer_said.is_none() {
                // RFC 7296 §2.21.2: tell the responder its AUTH failed.
                let sa = &mut self.sas[idx];
                let id = sa.next_req;
                let msg = sa.protect(
                    exchange::INFORMATIONAL,
                    id,
                    false,
                    vec![Payload::Notify(Notify::new(
                        notify::AUTHENTICATION_FAILED,
                        vec![],
                    ))],
                )?;
                self.send_all(idx, msg);
            }
            return Ok(());
        }
        let sa = &self.sas[idx];
        let (ni, nr) = (sa.ni.clone(), sa.nr.clone());
        self.established(idx, now);
        let ts = self.config_ts();
        self.child_from_response(idx, m, spi_in, (&ni, &nr), None, &ts, None, false, now)
    }
}
