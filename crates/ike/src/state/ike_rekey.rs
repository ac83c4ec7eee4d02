//! Rekeying the IKE SA in CREATE_CHILD_SA (RFC 7296 §1.3.2, §2.18): a new
//! IKE SA is keyed from the old one's SK_d and a fresh DH, the children
//! move over, and the initiator of the rekey deletes the old SA.

use super::table::{
    agree_ke, answer_ke, ke_payload, nonce, rand_spi64, IkeSa, Req, Request, St, Task,
};
use super::{Event, FailReason, Ike};
use crate::crypto::{DhPrivate, IkeKeys, IkeSuite};
use crate::error::{Error, Result};
use crate::message::{exchange, Message};
use crate::payload::typed::{Ke, Nonce, Sa};
use crate::payload::{notify, sa as sap, Notify, Payload, Proposal};
use crate::select;
use std::time::Instant;

impl Ike {
    /// Our CREATE_CHILD_SA request rekeying IKE SA `idx`.
    pub(super) fn ike_rekey_offer(&self, idx: usize) -> Result<Request> {
        let sa = &self.sas[idx];
        let suite = sa.suite.ok_or(Error::Malformed("no suite"))?;
        let spi = rand_spi64()?;
        let ni = nonce()?;
        let dh = DhPrivate::generate(suite.dh)?;
        let payloads = vec![
            Payload::Sa(self.ike_offer(spi.to_be_bytes().to_vec())),
            Payload::Nonce(ni.clone()),
            ke_payload(&dh),
        ];
        Ok(Request {
            exchange: exchange::CREATE_CHILD_SA,
            payloads,
            req: Req::RekeyIke { spi, dh, ni },
        })
    }

    /// Initiator: the response to our IKE rekey.
    pub(super) fn ike_rekey_response(
        &mut self,
        idx: usize,
        m: &Message,
        req: Req,
        now: Instant,
    ) -> Result<()> {
        let Req::RekeyIke { spi, dh, ni } = req else {
            return Ok(());
        };
        if m.error_notify() == Some(notify::TEMPORARY_FAILURE) {
            self.ike_rekey_collided(idx, now)?;
            return Ok(());
        }
        if let Some(e) = m.error_notify() {
            self.fail(FailReason::from_notify(e), false);
            return Ok(());
        }
        let props = m.need::<Sa>()?;
        let Some((num, suite)) = select::select_ike(props, &self.cfg.ike_proposals) else {
            self.fail(FailReason::NoProposalChosen, false);
            return Ok(());
        };
        let peer_spi = props
            .iter()
            .find(|p| p.num == num)
            .and_then(|p| <[u8; 8]>::try_from(p.spi.as_slice()).ok())
            .map(u64::from_be_bytes)
            .ok_or(Error::Malformed("rekey SPI"))?;
        let nr = m.need::<Nonce>()?.to_vec();
        let peer = m.need::<Ke>()?;
        let shared = match suite.dh == dh.group() {
            true => agree_ke(&dh, peer)?,
            false => None,
        };
        let Some(shared) = shared else {
            self.fail(FailReason::InvalidKePayload, false);
            return Ok(());
        };
        self.finish_ike_rekey(idx, suite, &shared, &ni, &nr, spi, peer_spi, true, now)
    }

    pub(super) fn ike_rekey_request(
        &mut self,
        idx: usize,
        m: &Message,
        props: &[Proposal],
        ni: &[u8],
        nr: &[u8],
        now: Instant,
    ) -> Result<Vec<Payload>> {
        let Some((num, suite)) = select::select_ike(props, &self.cfg.ike_proposals) else {
            self.fail(FailReason::NoProposalChosen, false);
            return Ok(vec![Payload::Notify(Notify::new(
                notify::NO_PROPOSAL_CHOSEN,
                vec![],
            ))]);
        };
        let Some(peer_spi) = props
            .iter()
            .find(|p| p.num == num && p.protocol == sap::PROTO_IKE)
            .and_then(|p| <[u8; 8]>::try_from(p.spi.as_slice()).ok())
            .map(u64::from_be_bytes)
        else {
            return Ok(vec![Payload::Notify(Notify::new(
                notify::INVALID_SYNTAX,
                vec![],
            ))]);
        };
        let (shared, ke) = match answer_ke(suite.dh, m.need::<Ke>()?)? {
            Ok(x) => x,
            Err(refusal) => return Ok(vec![refusal]),
        };
        let my_spi = rand_spi64()?;
        self.finish_ike_rekey(idx, suite, &shared, ni, nr, peer_spi, my_spi, false, now)?;
        Ok(vec![
            Payload::Sa(vec![select::ike_reply(
                num,
                &suite,
                my_spi.to_be_bytes().to_vec(),
            )]),
            Payload::Nonce(nr.to_vec()),
            ke,
        ])
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_ike_rekey(
        &mut self,
        idx: usize,
        suite: IkeSuite,
        shared: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
        we_initiated: bool,
        now: Instant,
    ) -> Result<()> {
        // No room check: half-open SAs cannot take an established SA's
        // room (their own account), and the rekeyed SA replaces this one.
        let old = &mut self.sas[idx];
        let old_keys = old.keys()?;
        let keys = IkeKeys::rekeyed(
            old.prf()?,
            &old_keys.sk_d,
            &suite,
            shared,
            ni,
            nr,
            spi_i,
            spi_r,
        )?;
        let mut sa = IkeSa::new(we_initiated, old.local, old.remote, now);
        sa.spi_i = spi_i;
        sa.spi_r = spi_r;
        sa.ni = ni.to_vec();
        sa.nr = nr.to_vec();
        sa.sk = Some(keys.sk_keys(&suite, we_initiated));
        sa.keys = Some(keys);
        sa.suite = Some(suite);
        sa.natt = old.natt;
        sa.frag_size = old.frag_size;
        // The new SA stands on the old one's authentication (§2.18).
        sa.auth = old.auth.clone();
        sa.peer_hashes = old.peer_hashes;
        sa.state = St::Established;
        (sa.rekey_at, sa.expire_at) = super::lifetime::ike_deadlines(&self.cfg, now);
        // Children move to the new IKE SA (RFC 7296 §2.18).
        sa.children = std::mem::take(&mut old.children);
        old.rekey_at = None;
        let old_spis = (old.spi_i, old.spi_r);
        self.sas.push(sa);
        self.event(Event::IkeRekeyed {
            old: old_spis,
            new: (spi_i, spi_r),
        });
        if we_initiated {
            self.sas[idx].queue.clear();
            self.sas[idx].queue.push_back(Task::DeleteIke);
        }
        Ok(())
    }
}
