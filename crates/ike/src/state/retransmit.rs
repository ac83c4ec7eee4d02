//! Retransmission (RFC 7296 §2.1): our request is resent with doubling
//! intervals until answered or given up on; a retransmitted request of
//! the peer gets the response we sent before, without being processed
//! again (for a fragmented request: once, on its first fragment, RFC
//! 7383 §2.6.1).

use super::table::{Pending, Req};
use super::{Action, FailReason, Ike};
use crate::message::{exchange, open_fragment, Header, Message};
use crate::payload::kind;
use std::time::Instant;

impl Ike {
    pub(super) fn send(&mut self, idx: usize, msg: Vec<u8>) {
        let sa = &self.sas[idx];
        let data = sa.wrap(msg);
        self.actions.push_back(Action::Send {
            local: sa.local,
            remote: sa.remote,
            data,
        });
    }

    pub(super) fn send_all(&mut self, idx: usize, msgs: Vec<Vec<u8>>) {
        for m in msgs {
            self.send(idx, m);
        }
    }

    /// Sends request `msg_id` and keeps it for retransmission; the window
    /// is taken until its response arrives.
    pub(super) fn start_request(
        &mut self,
        idx: usize,
        msg_id: u32,
        msg: Vec<Vec<u8>>,
        req: Req,
        now: Instant,
    ) {
        let base = self.cfg.retransmit_base;
        let sa = &mut self.sas[idx];
        sa.pending = Some(Pending {
            msg_id,
            data: msg.clone(),
            req,
            tries: 0,
            next_retx: now + base,
            started: now,
        });
        self.send_all(idx, msg);
    }

    /// The peer repeated its last request (`h.msg_id` is one below the
    /// next we expect): resend our response to it. An SA adopted from the
    /// old active of an HA pair ([`Ike::import`]) has no cached response:
    /// a repeated liveness check (an empty INFORMATIONAL, RFC 7296 §2.4)
    /// is answered afresh, as its answer changes nothing; any other
    /// request is left unanswered, since processing it again would act on
    /// it twice, and §2.2 lets a responder that lost its cached response
    /// stay silent (the peer then gives up on the exchange).
    pub(super) fn answer_again(&mut self, idx: usize, h: &Header, data: &[u8]) {
        let sa = &self.sas[idx];
        let Some(sk) = sa.sk.as_ref() else {
            return;
        };
        if let Some((id, r)) = sa.last_resp.clone() {
            let first_frag =
                h.next != kind::SKF || open_fragment(data, sk).is_ok_and(|f| f.info.number == 1);
            if id == h.msg_id && first_frag {
                self.send_all(idx, r);
            }
            return;
        }
        if h.exchange != exchange::INFORMATIONAL || h.next == kind::SKF {
            return;
        }
        let empty = Message::parse_protected(data, sk).is_ok_and(|m| m.payloads.is_empty());
        if !empty {
            return;
        }
        let sa = &mut self.sas[idx];
        if let Ok(msg) = sa.protect(exchange::INFORMATIONAL, h.msg_id, true, vec![]) {
            sa.last_resp = Some((h.msg_id, msg.clone()));
            self.send_all(idx, msg);
        }
    }

    /// Retransmits the request of IKE SA `idx` when due; false when it was
    /// given up on (the SA is dead then). A liveness check gives up at the
    /// DPD timeout even with retransmissions left.
    pub(super) fn retransmit(&mut self, idx: usize, now: Instant) -> bool {
        let base = self.cfg.retransmit_base;
        let tries_max = self.cfg.retransmit_tries;
        let dpd_timeout = self.cfg.dpd_timeout;
        let mut resend = None;
        let mut give_up = false;
        if let Some(p) = self.sas[idx].pending.as_mut() {
            let dpd_over =
                matches!(p.req, Req::Dpd) && dpd_timeout.is_some_and(|t| now >= p.started + t);
            if dpd_over || now >= p.next_retx {
                if dpd_over || p.tries >= tries_max {
                    give_up = true;
                } else {
                    p.tries += 1;
                    let back = base.saturating_mul(1u32 << p.tries.min(10));
                    p.next_retx = now + back;
                    if let (Req::Dpd, Some(t)) = (&p.req, dpd_timeout) {
                        p.next_retx = p.next_retx.min(p.started + t);
                    }
                    resend = Some(p.data.clone());
                }
            }
        }
        if give_up {
            self.sas[idx].dead = true;
            self.fail(FailReason::Timeout, false);
            return false;
        }
        if let Some(d) = resend {
            self.send_all(idx, d);
        }
        true
    }
}
