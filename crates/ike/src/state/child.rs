//! Child SAs (RFC 7296 §1.3.1, §1.3.3, §2.9): the first one inside
//! IKE_AUTH, new and rekeyed ones in CREATE_CHILD_SA; which tunnel
//! (own selectors or a [`ChildPolicy`]) a peer's request belongs to;
//! keying material handed out as [`ChildSaKeys`].

use super::table::{
    agree_ke, answer_ke, ke_payload, nonce, rand_spi32, ts_of, Child, Req, Request, Task,
};
use super::{Action, ChildSaKeys, Event, FailReason, Ike};
use crate::config::EspProposal;
use crate::crypto::{child_keymat, out_in, DhPrivate, Secret};
use crate::error::Result;
use crate::message::{exchange, Message};
use crate::payload::typed::{Ke, Nonce, Sa, TsI, TsR};
use crate::payload::{notify, sa as sap, Notify, Payload, Proposal, TrafficSelector};
use crate::select::{self, EspSuite};
use std::time::Instant;

/// Child SAs per IKE SA.
const MAX_CHILDREN: usize = 64;

/// A negotiated child SA, before its keys are derived.
struct NewChild<'a> {
    suite: &'a EspSuite,
    /// g^ir of the exchange's own DH (PFS), if it had one.
    g_ir: Option<&'a Secret>,
    /// (Ni, Nr) of the exchange.
    nonces: (&'a [u8], &'a [u8]),
    /// Whether we sent the request: i→r keys are then outbound.
    we_initiated_exchange: bool,
    /// (inbound, outbound) SPIs.
    spis: (u32, u32),
    local_ts: Vec<TrafficSelector>,
    remote_ts: Vec<TrafficSelector>,
    policy: Option<u32>,
}

impl Ike {
    /// CREATE_CHILD_SA request for a new child or a rekey (None when the
    /// child or policy is gone, or the own selectors are retired).
    pub(super) fn child_request(&self, idx: usize, t: Task) -> Result<Option<Request>> {
        let sa = &self.sas[idx];
        let rekey_of = if let Task::RekeyChild(s) = t {
            Some(s)
        } else {
            None
        };
        let (ts, policy) = match t {
            Task::RekeyChild(s) => match sa.children.iter().find(|c| c.spi_in == s) {
                Some(c) => ((c.local_ts.clone(), c.remote_ts.clone()), c.policy),
                None => return Ok(None),
            },
            Task::NewChild(Some(tag)) => match self.policies.iter().find(|p| p.tag == tag) {
                Some(p) => ((ts_of(&p.local_ts), ts_of(&p.remote_ts)), Some(tag)),
                None => return Ok(None),
            },
            _ if self.retired => return Ok(None),
            _ => (self.config_ts(), None),
        };
        let spi_in = rand_spi32()?;
        let ni = nonce()?;
        let pfs = self
            .esp_proposals(policy)
            .first()
            .and_then(|p| p.dh.first().copied());
        let dh = pfs.map(DhPrivate::generate).transpose()?;
        let mut p = Vec::new();
        if let Some(old) = rekey_of {
            p.push(Payload::Notify(Notify {
                protocol: sap::PROTO_ESP,
                spi: old.to_be_bytes().to_vec(),
                ty: notify::REKEY_SA,
                data: vec![],
            }));
        }
        p.push(Payload::Sa(self.esp_offer(spi_in, true, policy)));
        p.push(Payload::Nonce(ni.clone()));
        if let Some(d) = &dh {
            p.push(ke_payload(d));
        }
        p.push(Payload::TsI(ts.0.clone()));
        p.push(Payload::TsR(ts.1.clone()));
        Ok(Some(Request {
            exchange: exchange::CREATE_CHILD_SA,
            payloads: p,
            req: Req::CreateChild {
                spi_in,
                rekey_of,
                dh,
                ni,
                ts,
                policy,
            },
        }))
    }

    pub(super) fn config_ts(&self) -> (Vec<TrafficSelector>, Vec<TrafficSelector>) {
        (ts_of(&self.cfg.local_ts), ts_of(&self.cfg.remote_ts))
    }

    /// The ESP proposals of the own selectors (None) or of a policy.
    pub(super) fn esp_proposals(&self, policy: Option<u32>) -> &[EspProposal] {
        policy
            .and_then(|tag| self.policies.iter().find(|p| p.tag == tag))
            .map(|p| &p.esp_proposals[..])
            .filter(|v| !v.is_empty())
            .unwrap_or(&self.cfg.esp_proposals)
    }

    /// The policy whose selectors fit a peer's request (RFC 7296 §2.9):
    /// `tsi` are the initiator's (our remote side), `tsr` ours. A policy
    /// that takes the request whole (nothing narrowed away) beats one that
    /// only overlaps; then the own selectors come first, then the policies
    /// in order. `only` restricts the choice (a rekey keeps its policy).
    /// Returns the tag and the narrowed (tsi, tsr).
    #[allow(clippy::type_complexity)]
    fn fit_policy(
        &self,
        tsi: &[TrafficSelector],
        tsr: &[TrafficSelector],
        only: Option<Option<u32>>,
    ) -> Option<(Option<u32>, Vec<TrafficSelector>, Vec<TrafficSelector>)> {
        let own = (!self.retired).then_some((None, &self.cfg.remote_ts, &self.cfg.local_ts));
        let others = self
            .policies
            .iter()
            .map(|p| (Some(p.tag), &p.remote_ts, &p.local_ts));
        let mut partial = None;
        for (tag, remote, local) in own.into_iter().chain(others) {
            if only.is_some_and(|o| o != tag) {
                continue;
            }
            let (Some(n_i), Some(n_r)) = (select::narrow(tsi, remote), select::narrow(tsr, local))
            else {
                continue;
            };
            let whole = |offered: &[TrafficSelector], got: &[TrafficSelector]| {
                offered.iter().all(|t| got.contains(t))
            };
            if whole(tsi, &n_i) && whole(tsr, &n_r) {
                return Some((tag, n_i, n_r));
            }
            if partial.is_none() {
                partial = Some((tag, n_i, n_r));
            }
        }
        partial
    }

    /// Our ESP proposals (RFC 7296 §3.3), numbered from 1.
    pub(super) fn esp_offer(&self, spi: u32, pfs: bool, policy: Option<u32>) -> Vec<Proposal> {
        self.esp_proposals(policy)
            .iter()
            .enumerate()
            .map(|(i, p)| p.to_wire(i as u8 + 1, spi, pfs))
            .collect()
    }

    /// Keys a negotiated child SA from IKE SA `idx`'s SK_d (RFC 7296
    /// §2.17) and installs it.
    fn install_child(&mut self, idx: usize, c: NewChild<'_>, now: Instant) -> Result<()> {
        let NewChild {
            suite,
            g_ir,
            nonces: (ni, nr),
            we_initiated_exchange,
            spis: (spi_in, spi_out),
            local_ts,
            remote_ts,
            policy,
        } = c;
        let sa = &self.sas[idx];
        let keys = sa.keys()?;
        let km = child_keymat(
            sa.prf()?,
            &keys.sk_d,
            g_ir.map(|s| s.as_slice()),
            ni,
            nr,
            suite.encr.keymat_len(),
            suite.integ.map_or(0, |i| i.key_len()),
        )?;
        let [ei, ai, er, ar] = km;
        let ((enc_out, int_out), (enc_in, int_in)) =
            out_in(we_initiated_exchange, (ei, ai), (er, ar));
        let sa = &mut self.sas[idx];
        if sa.children.len() >= MAX_CHILDREN {
            self.fail(FailReason::Protocol("too many child SAs".into()), true);
            return Ok(());
        }
        let udp = sa.natt;
        let keys = ChildSaKeys {
            spi_in,
            spi_out,
            algorithm: suite.name(),
            enc_key_in: enc_in,
            enc_key_out: enc_out,
            integ_key_in: int_in,
            integ_key_out: int_out,
            local_ts: local_ts.clone(),
            remote_ts: remote_ts.clone(),
            udp_encap: udp,
            esn: suite.esn,
            local: sa.local,
            remote: sa.remote,
            policy,
        };
        let (rekey_at, expire_at) = super::lifetime::child_deadlines(&self.cfg, now);
        sa.children.push(Child {
            spi_in,
            spi_out,
            local_ts,
            remote_ts,
            policy,
            rekey_at,
            expire_at,
            keys: keys.clone(),
        });
        self.actions.push_back(Action::InstallChild(keys));
        self.event(Event::ChildEstablished { spi_in, spi_out });
        Ok(())
    }

    /// The peer refused our child SA with error notify `e`: a refusal of
    /// our selectors `ts` (TSi, TSr) is reported as such (RFC 7296 §2.9).
    fn child_refused(&mut self, e: u16, ts: &(Vec<TrafficSelector>, Vec<TrafficSelector>)) {
        if e == notify::TS_UNACCEPTABLE {
            self.event(Event::TsRejected {
                by_peer: true,
                tsi: ts.0.clone(),
                tsr: ts.1.clone(),
            });
        }
        self.fail(FailReason::from_notify(e), true);
    }

    /// Responder side of child negotiation (IKE_AUTH or CREATE_CHILD_SA).
    pub(super) fn child_response(
        &mut self,
        idx: usize,
        m: &Message,
        (ni, nr): (&[u8], &[u8]),
        pfs_ctx: bool,
        only: Option<Option<u32>>,
        now: Instant,
    ) -> Result<Vec<Payload>> {
        let props = m.need::<Sa>()?;
        let tsi = m.need::<TsI>()?;
        let tsr = m.need::<TsR>()?;
        // The peer's TSi is its side (our remote), TSr ours: the tunnel
        // (own selectors or a policy) is chosen by them (RFC 7296 §2.9).
        let Some((policy, n_i, n_r)) = self.fit_policy(tsi, tsr, only) else {
            self.event(Event::TsRejected {
                by_peer: false,
                tsi: tsi.to_vec(),
                tsr: tsr.to_vec(),
            });
            self.fail(FailReason::TsUnacceptable, true);
            return Ok(vec![Payload::Notify(Notify::new(
                notify::TS_UNACCEPTABLE,
                vec![],
            ))]);
        };
        let Some((num, spi_out, suite)) =
            select::select_esp(props, self.esp_proposals(policy), pfs_ctx)
        else {
            self.fail(FailReason::NoProposalChosen, true);
            return Ok(vec![Payload::Notify(Notify::new(
                notify::NO_PROPOSAL_CHOSEN,
                vec![],
            ))]);
        };
        let mut extra = Vec::new();
        let mut g_ir = None;
        if let (Some(g), true) = (suite.dh, pfs_ctx) {
            let (shared, ke) = match answer_ke(g, m.get::<Ke>().unwrap_or((0, &[])))? {
                Ok(x) => x,
                Err(refusal) => return Ok(vec![refusal]),
            };
            g_ir = Some(shared);
            extra.push(ke);
        }
        let spi_in = rand_spi32()?;
        let child = NewChild {
            suite: &suite,
            g_ir: g_ir.as_ref(),
            nonces: (ni, nr),
            we_initiated_exchange: false,
            spis: (spi_in, spi_out),
            local_ts: n_r.clone(),
            remote_ts: n_i.clone(),
            policy,
        };
        self.install_child(idx, child, now)?;
        let mut out = vec![Payload::Sa(vec![select::esp_reply(num, &suite, spi_in)])];
        if pfs_ctx {
            out.push(Payload::Nonce(nr.to_vec()));
        }
        out.extend(extra);
        out.push(Payload::TsI(n_i));
        out.push(Payload::TsR(n_r));
        Ok(out)
    }

    pub(super) fn create_child_request(
        &mut self,
        idx: usize,
        m: &Message,
        now: Instant,
    ) -> Result<Vec<Payload>> {
        let props = m.need::<Sa>()?;
        let ni = m.need::<Nonce>()?.to_vec();
        let nr = nonce()?;
        if props.iter().any(|p| p.protocol == sap::PROTO_IKE) {
            if matches!(
                self.sas[idx].pending.as_ref().map(|p| &p.req),
                Some(Req::RekeyIke { .. })
            ) {
                return Ok(vec![Payload::Notify(Notify::new(
                    notify::TEMPORARY_FAILURE,
                    vec![],
                ))]);
            }
            return self.ike_rekey_request(idx, m, props, &ni, &nr, now);
        }
        let rekey_of = m
            .notify(notify::REKEY_SA)
            .and_then(|n| <[u8; 4]>::try_from(n.spi.as_slice()).ok())
            .map(u32::from_be_bytes);
        let old = match rekey_of {
            Some(spi_out) => match self.sas[idx].children.iter().find(|c| c.spi_out == spi_out) {
                Some(c) => Some((c.spi_in, c.policy)),
                None => {
                    return Ok(vec![Payload::Notify(Notify {
                        protocol: sap::PROTO_ESP,
                        spi: spi_out.to_be_bytes().to_vec(),
                        ty: notify::CHILD_SA_NOT_FOUND,
                        data: vec![],
                    })])
                }
            },
            None => None,
        };
        // Both ends rekeying the same child at once (RFC 7296 §2.8.1):
        // refuse, and each side retries after a random delay.
        let colliding = matches!(
            self.sas[idx].pending.as_ref().map(|p| &p.req),
            Some(Req::CreateChild { rekey_of: Some(o), .. }) if Some(*o) == old.map(|x| x.0)
        );
        if colliding {
            return Ok(vec![Payload::Notify(Notify::new(
                notify::TEMPORARY_FAILURE,
                vec![],
            ))]);
        }
        let before = self.sas[idx].children.len();
        // A rekeyed child keeps its tunnel (the selectors are the same).
        let only = old.map(|x| x.1);
        let out = self.child_response(idx, m, (&ni, &nr), true, only, now)?;
        if let (Some((old_in, _)), true) = (old, self.sas[idx].children.len() > before) {
            if let Some(c) = self.sas[idx].children.last() {
                let new_spi_in = c.spi_in;
                self.event(Event::ChildRekeyed {
                    old_spi_in: old_in,
                    new_spi_in,
                });
            }
        }
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn child_from_response(
        &mut self,
        idx: usize,
        m: &Message,
        spi_in: u32,
        (ni, nr): (&[u8], &[u8]),
        g_ir: Option<&Secret>,
        ts: &(Vec<TrafficSelector>, Vec<TrafficSelector>),
        policy: Option<u32>,
        pfs_ctx: bool,
        now: Instant,
    ) -> Result<()> {
        if let Some(e) = m.error_notify() {
            self.child_refused(e, ts);
            return Ok(());
        }
        let Some(props) = m.get::<Sa>() else {
            self.fail(FailReason::Protocol("no child SA in response".into()), true);
            return Ok(());
        };
        let Some((_, spi_out, suite)) =
            select::select_esp(props, self.esp_proposals(policy), pfs_ctx && g_ir.is_some())
                .filter(|_| props.len() == 1)
        else {
            self.fail(FailReason::NoProposalChosen, true);
            return Ok(());
        };
        let tsi = m.get::<TsI>().map(<[_]>::to_vec);
        let tsr = m.get::<TsR>().map(<[_]>::to_vec);
        let (Some(tsi), Some(tsr)) = (tsi, tsr) else {
            self.fail(FailReason::TsUnacceptable, true);
            return Ok(());
        };
        let as_prefix_ok = |got: &[TrafficSelector], asked: &[TrafficSelector]| {
            !got.is_empty()
                && got
                    .iter()
                    .all(|g| asked.iter().any(|a| g.intersect(a) == Some(*g)))
        };
        if !as_prefix_ok(&tsi, &ts.0) || !as_prefix_ok(&tsr, &ts.1) {
            self.fail(FailReason::TsUnacceptable, true);
            return Ok(());
        }
        let child = NewChild {
            suite: &suite,
            g_ir,
            nonces: (ni, nr),
            we_initiated_exchange: true,
            spis: (spi_in, spi_out),
            local_ts: tsi,
            remote_ts: tsr,
            policy,
        };
        self.install_child(idx, child, now)
    }

    /// Initiator: the response to our CREATE_CHILD_SA for a child.
    pub(super) fn create_child_response(
        &mut self,
        idx: usize,
        m: &Message,
        req: Req,
        now: Instant,
    ) -> Result<()> {
        let Req::CreateChild {
            spi_in,
            rekey_of,
            dh,
            ni,
            ts,
            policy,
        } = req
        else {
            return Ok(());
        };
        if let (Some(notify::TEMPORARY_FAILURE), Some(old)) = (m.error_notify(), rekey_of) {
            self.rekey_collided(idx, old, now)?;
            return Ok(());
        }
        if let Some(e) = m.error_notify() {
            self.child_refused(e, &ts);
            return Ok(());
        }
        let nr = m.need::<Nonce>()?.to_vec();
        let g_ir = match &dh {
            Some(d) => match agree_ke(d, m.need::<Ke>()?)? {
                Some(s) => Some(s),
                None => {
                    self.fail(FailReason::InvalidKePayload, true);
                    return Ok(());
                }
            },
            None => None,
        };
        let n_before = self.sas[idx].children.len();
        self.child_from_response(
            idx,
            m,
            spi_in,
            (&ni, &nr),
            g_ir.as_ref(),
            &ts,
            policy,
            true,
            now,
        )?;
        if let (Some(old), true) = (rekey_of, self.sas[idx].children.len() > n_before) {
            self.event(Event::ChildRekeyed {
                old_spi_in: old,
                new_spi_in: spi_in,
            });
            // Make-before-break: the old SA goes only now.
            self.sas[idx].queue.push_front(Task::DeleteChild(old));
        }
        Ok(())
    }
}
