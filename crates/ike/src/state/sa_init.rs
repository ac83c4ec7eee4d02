//! IKE_SA_INIT (RFC 7296 §1.2): both sides' proposal, DH exchange and
//! nonces, NAT detection (§2.23) and fragmentation support (RFC 7383);
//! the keys it yields protect everything that follows.

use super::proof::{announced_hashes, requested_cas};
use super::table::{ke_payload, nonce, rand_spi64, IkeSa, Req, St};
use super::{Action, FailReason, Ike, InitDrop};
use crate::crypto::{self, DhGroup, DhPrivate, IkeKeys, IkeSuite};
use crate::error::{Error, Result};
use crate::message::{exchange, flags, Header, Message};
use crate::payload::typed::{Ke, Nonce, Sa};
use crate::payload::{notify, Notify, Payload, Proposal};
use crate::select;
use std::net::SocketAddr;
use std::time::Instant;

/// At most this many IKE SAs of ours per peer that we start (initiated,
/// established); half-open responder SAs have their own table
/// ([`super::half_open`]) and a rekey is never refused for room.
pub(super) const MAX_SAS: usize = 64;

pub(super) fn nat_payloads(
    spi_i: u64,
    spi_r: u64,
    local: SocketAddr,
    remote: SocketAddr,
    force: bool,
) -> [Payload; 2] {
    // With `force`, a source hash over port 0 makes the peer believe we
    // are behind a NAT, so both sides float to NAT-T (as strongSwan's
    // kernel-libipsec does).
    let src_port = if force { 0 } else { local.port() };
    [
        Payload::Notify(Notify::new(
            notify::NAT_DETECTION_SOURCE_IP,
            crypto::nat_hash(spi_i, spi_r, local.ip(), src_port),
        )),
        Payload::Notify(Notify::new(
            notify::NAT_DETECTION_DESTINATION_IP,
            crypto::nat_hash(spi_i, spi_r, remote.ip(), remote.port()),
        )),
    ]
}

/// NAT present per RFC 7296 §2.23: our address not what the peer saw, or
/// the peer's source not what it claims. No NAT-D payloads: no NAT.
fn nat_detected(
    m: &Message,
    spi_i: u64,
    spi_r: u64,
    local: SocketAddr,
    remote: SocketAddr,
) -> bool {
    let mut srcs = m.payloads.iter().filter_map(|p| match p {
        Payload::Notify(n) if n.ty == notify::NAT_DETECTION_SOURCE_IP => Some(&n.data),
        _ => None,
    });
    let dst = m.notify(notify::NAT_DETECTION_DESTINATION_IP);
    let mut nat = false;
    if let Some(d) = dst {
        nat |= d.data != crypto::nat_hash(spi_i, spi_r, local.ip(), local.port());
    }
    let want = crypto::nat_hash(spi_i, spi_r, remote.ip(), remote.port());
    let mut any = false;
    let mut matched = false;
    for s in srcs.by_ref() {
        any = true;
        matched |= *s == want;
    }
    nat | (any && !matched)
}

impl Ike {
    /// Start a new IKE SA towards the configured peer.
    pub fn initiate(&mut self, now: Instant) -> Result<()> {
        if self.sas.iter().filter(|s| !s.dead).count() >= MAX_SAS {
            return Err(Error::TooMany("IKE SAs"));
        }
        let mut sa = IkeSa::new(true, self.cfg.local_addr, self.cfg.remote_addr, now);
        sa.spi_i = rand_spi64()?;
        sa.ni = nonce()?;
        let group = self
            .cfg
            .ike_proposals
            .iter()
            .find_map(|p| p.dh.first().copied())
            .ok_or_else(|| Error::Config("no DH group in the IKE proposals".into()))?;
        sa.dh = Some(DhPrivate::generate(group)?);
        self.sas.push(sa);
        let idx = self.sas.len() - 1;
        self.send_init(idx, now)
    }

    pub(super) fn send_init(&mut self, idx: usize, now: Instant) -> Result<()> {
        let sa = &self.sas[idx];
        let dh = sa.dh.as_ref().ok_or(Error::Malformed("no DH"))?;
        let mut p = Vec::new();
        if let Some(c) = &sa.cookie {
            p.push(Payload::Notify(Notify::new(notify::COOKIE, c.clone())));
        }
        p.push(Payload::Sa(self.ike_offer(Vec::new())));
        p.push(ke_payload(dh));
        p.push(Payload::Nonce(sa.ni.clone()));
        p.extend(nat_payloads(
            sa.spi_i,
            0,
            sa.local,
            sa.remote,
            self.cfg.force_encap,
        ));
        if self.cfg.fragment_size.is_some() {
            p.push(Payload::Notify(Notify::new(
                notify::IKEV2_FRAGMENTATION_SUPPORTED,
                vec![],
            )));
        }
        if self.uses_signatures() {
            p.push(Ike::hash_notify());
        }
        let msg = Message {
            header: sa.header(exchange::IKE_SA_INIT, 0, false),
            payloads: p,
        }
        .build_plain()?;
        let sa = &mut self.sas[idx];
        sa.init_req = msg.clone();
        self.start_request(idx, 0, vec![msg], Req::Init, now);
        Ok(())
    }

    fn plain_reply(
        &mut self,
        h: &Header,
        local: SocketAddr,
        remote: SocketAddr,
        n: Notify,
    ) -> Result<()> {
        let msg = Message {
            header: Header {
                spi_i: h.spi_i,
                spi_r: 0,
                next: 0,
                exchange: exchange::IKE_SA_INIT,
                flags: flags::RESPONSE,
                msg_id: 0,
                length: 0,
            },
            payloads: vec![Payload::Notify(n)],
        }
        .build_plain()?;
        self.actions.push_back(Action::Send {
            local,
            remote,
            data: msg,
        });
        Ok(())
    }

    /// Our IKE SA proposals (RFC 7296 §3.3), numbered from 1, with `spi`
    /// (empty in IKE_SA_INIT, the new SA's in a rekey, §3.3.1).
    pub(super) fn ike_offer(&self, spi: Vec<u8>) -> Vec<Proposal> {
        self.cfg
            .ike_proposals
            .iter()
            .enumerate()
            .map(|(i, pr)| pr.to_wire(i as u8 + 1, spi.clone()))
            .collect()
    }

    pub(super) fn on_init_request(
        &mut self,
        h: &Header,
        data: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> Result<()> {
        if h.spi_r != 0 || h.msg_id != 0 || h.is_response() {
            return Ok(());
        }
        self.adm.stats.received += 1;
        if !self.peer_allowed(remote) {
            self.init_dropped(InitDrop::UnknownPeer);
            return Ok(());
        }
        // A retransmitted request gets the same response (RFC 7296 §2.1).
        if let Some(sa) = self.half.by_init(h.spi_i, remote) {
            if let (true, Some((_, r))) = (sa.init_req == data, &sa.last_resp) {
                let sends: Vec<Action> = r.iter().map(|m| sa.send_action(m.clone())).collect();
                self.actions.extend(sends);
            }
            return Ok(());
        }
        if self
            .sas
            .iter()
            .any(|s| !s.initiator && s.spi_i == h.spi_i && s.remote == remote)
        {
            return Ok(());
        }
        let parsed = Message::parse_plain(data).and_then(|m| {
            let ni = m.need::<Nonce>()?.to_vec();
            Ok((m, ni))
        });
        let (m, ni) = match parsed {
            Ok(x) => x,
            Err(e) => {
                self.init_dropped(InitDrop::Malformed);
                return Err(e);
            }
        };
        if let Some(c) = self.cookie_demand(&m, &ni, remote, h.spi_i, now) {
            self.adm.stats.cookies_sent += 1;
            return self.plain_reply(h, local, remote, c);
        }
        if !self.room_for(remote.ip()) {
            return Ok(());
        }
        self.init_attempt(remote.ip(), now);
        let (props, ke) = match (m.need::<Sa>(), m.need::<Ke>()) {
            (Ok(p), Ok(k)) => (p, k),
            (Err(e), _) | (_, Err(e)) => {
                self.init_dropped(InitDrop::Malformed);
                return Err(e);
            }
        };
        let Some((num, suite)) = select::select_ike(props, &self.cfg.ike_proposals) else {
            // Unauthenticated: a counter, not a tunnel failure (anyone can
            // send this, as often as they like).
            self.adm.stats.refused += 1;
            return self.plain_reply(
                h,
                local,
                remote,
                Notify::new(notify::NO_PROPOSAL_CHOSEN, vec![]),
            );
        };
        let (group, ke) = ke;
        if group != suite.dh.id() {
            self.adm.stats.refused += 1;
            return self.plain_reply(
                h,
                local,
                remote,
                Notify::new(
                    notify::INVALID_KE_PAYLOAD,
                    suite.dh.id().to_be_bytes().to_vec(),
                ),
            );
        }
        // Refuse an invalid KE before spending a key pair on it.
        if let Err(e) = suite.dh.check_public(ke) {
            self.init_dropped(InitDrop::InvalidKe);
            return Err(e);
        }
        let dh = DhPrivate::generate(suite.dh)?;
        let shared = dh.agree(ke)?;
        let mut sa = IkeSa::new(false, local, remote, now);
        sa.spi_i = h.spi_i;
        sa.spi_r = rand_spi64()?;
        sa.nr = nonce()?;
        sa.ni = ni;
        let keys = IkeKeys::initial(&suite, &shared, &sa.ni, &sa.nr, sa.spi_i, sa.spi_r)?;
        sa.sk = Some(keys.sk_keys(&suite, false));
        sa.keys = Some(keys);
        sa.suite = Some(suite);
        sa.natt = local.port() == self.cfg.natt_port;
        let mut p = vec![
            Payload::Sa(vec![select::ike_reply(num, &suite, Vec::new())]),
            ke_payload(&dh),
            Payload::Nonce(sa.nr.clone()),
        ];
        p.extend(self.cert_request());
        p.extend(nat_payloads(
            sa.spi_i,
            sa.spi_r,
            local,
            remote,
            self.cfg.force_encap,
        ));
        if m.notify(notify::IKEV2_FRAGMENTATION_SUPPORTED).is_some() {
            if let Some(f) = self.cfg.fragment_size {
                sa.frag_size = Some(f);
                p.push(Payload::Notify(Notify::new(
                    notify::IKEV2_FRAGMENTATION_SUPPORTED,
                    vec![],
                )));
            }
        }
        // RFC 7427 §4: answered only if asked.
        sa.peer_hashes = announced_hashes(&m);
        if !sa.peer_hashes.is_empty() && self.uses_signatures() {
            p.push(Ike::hash_notify());
        }
        let resp = Message {
            header: sa.header(exchange::IKE_SA_INIT, 0, true),
            payloads: p,
        }
        .build_plain()?;
        sa.init_req = data.to_vec();
        sa.init_resp = resp.clone();
        sa.peer_next = 1;
        sa.last_resp = Some((0, vec![resp.clone()]));
        let send = sa.send_action(resp);
        self.init_attempt_done();
        if self.half.insert(sa).is_err() {
            // [`Ike::room_for`] keeps this from happening.
            self.init_dropped(InitDrop::HalfOpenFull);
            return Ok(());
        }
        self.actions.push_back(send);
        Ok(())
    }

    pub(super) fn on_init_response(&mut self, h: &Header, data: &[u8], now: Instant) -> Result<()> {
        let Some(idx) = self
            .sas
            .iter()
            .position(|s| s.initiator && s.state == St::InitSent && s.spi_i == h.spi_i)
        else {
            return Ok(());
        };
        if self.sas[idx].pending.as_ref().map(|p| p.msg_id) != Some(0) {
            return Ok(());
        }
        let m = Message::parse_plain(data)?;
        if let Some(c) = m.notify(notify::COOKIE) {
            return self.cookie_received(idx, c, now);
        }
        if let Some(n) = m.notify(notify::INVALID_KE_PAYLOAD) {
            let want = <[u8; 2]>::try_from(n.data.as_slice())
                .ok()
                .map(u16::from_be_bytes);
            let offered = self.cfg.ike_proposals.iter().flat_map(|p| p.dh.iter());
            let cur = self.sas[idx].dh.as_ref().map(|d| d.group().id());
            match want.and_then(DhGroup::from_id) {
                Some(g) if Some(g.id()) != cur && offered.clone().any(|o| *o == g) => {
                    self.sas[idx].dh = Some(DhPrivate::generate(g)?);
                    return self.send_init(idx, now);
                }
                _ => {
                    self.sas[idx].dead = true;
                    self.fail(FailReason::InvalidKePayload, false);
                    return Ok(());
                }
            }
        }
        if let Some(e) = m.error_notify() {
            self.sas[idx].dead = true;
            self.fail(FailReason::from_notify(e), false);
            return Ok(());
        }
        let props = m.need::<Sa>()?;
        let suite = match select::select_ike(props, &self.cfg.ike_proposals) {
            Some((_, s)) if props.len() == 1 => s,
            _ => {
                self.sas[idx].dead = true;
                self.fail(FailReason::NoProposalChosen, false);
                return Ok(());
            }
        };
        let (group, ke) = m.need::<Ke>()?;
        let nr = m.need::<Nonce>()?.to_vec();
        let sa = &mut self.sas[idx];
        let dh = sa.dh.take().ok_or(Error::Malformed("no DH"))?;
        if group != suite.dh.id() || dh.group() != suite.dh {
            sa.dead = true;
            self.fail(FailReason::InvalidKePayload, false);
            return Ok(());
        }
        let shared = dh.agree(ke)?;
        sa.spi_r = h.spi_r;
        sa.nr = nr;
        let keys = IkeKeys::initial(&suite, &shared, &sa.ni, &sa.nr, sa.spi_i, sa.spi_r)?;
        sa.sk = Some(keys.sk_keys(&suite, true));
        sa.keys = Some(keys);
        sa.suite = Some(suite);
        sa.init_resp = data.to_vec();
        sa.pending = None;
        if m.notify(notify::IKEV2_FRAGMENTATION_SUPPORTED).is_some() {
            sa.frag_size = self.cfg.fragment_size;
        }
        sa.peer_hashes = announced_hashes(&m);
        sa.peer_cas = requested_cas(&m);
        sa.next_req = 1;
        sa.last_rx = now;
        let nat = nat_detected(&m, sa.spi_i, sa.spi_r, sa.local, sa.remote);
        if nat || self.cfg.force_encap {
            // RFC 7296 §2.23: float to the NAT-T port from IKE_AUTH on.
            sa.natt = true;
            sa.local.set_port(self.cfg.natt_port);
            sa.remote.set_port(self.cfg.natt_port);
        }
        sa.state = St::AuthSent;
        self.send_auth(idx, now)
    }
}

impl IkeSuite {
    /// strongSwan-style name of the IKE suite, for logs.
    pub fn name(&self) -> String {
        let e = match self.encr {
            crypto::Encr::AesCbc(b) => format!("aes{}", u16::from(b) * 8),
            crypto::Encr::AesGcm16(b) => format!("aes{}gcm16", u16::from(b) * 8),
        };
        let p = match self.prf {
            crypto::Prf::HmacSha1 => "prfsha1",
            crypto::Prf::HmacSha256 => "prfsha256",
            crypto::Prf::HmacSha384 => "prfsha384",
            crypto::Prf::HmacSha512 => "prfsha512",
        };
        let d = match self.dh {
            DhGroup::Modp2048 => "modp2048",
            DhGroup::Ecp256 => "ecp256",
            DhGroup::Curve25519 => "x25519",
        };
        // strongSwan's proposal keywords: `sha256` alone stands for the
        // same hash as integrity and PRF; the PRF is spelled out otherwise.
        let i = match self.integ {
            None => None,
            Some(crypto::Integ::HmacSha1_96) => Some("sha1"),
            Some(crypto::Integ::HmacSha256_128) => Some("sha256"),
            Some(crypto::Integ::HmacSha384_192) => Some("sha384"),
            Some(crypto::Integ::HmacSha512_256) => Some("sha512"),
        };
        match i {
            Some(i) if p.strip_prefix("prf") == Some(i) => format!("{e}-{i}-{d}"),
            Some(i) => format!("{e}-{i}-{p}-{d}"),
            None => format!("{e}-{p}-{d}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suite_names_are_strongswan_keywords() {
        let s = |encr, prf, integ, dh| {
            IkeSuite {
                encr,
                prf,
                integ,
                dh,
            }
            .name()
        };
        assert_eq!(
            s(
                crypto::Encr::AesCbc(32),
                crypto::Prf::HmacSha256,
                Some(crypto::Integ::HmacSha256_128),
                DhGroup::Modp2048
            ),
            "aes256-sha256-modp2048"
        );
        assert_eq!(
            s(
                crypto::Encr::AesCbc(16),
                crypto::Prf::HmacSha256,
                Some(crypto::Integ::HmacSha1_96),
                DhGroup::Ecp256
            ),
            "aes128-sha1-prfsha256-ecp256"
        );
        assert_eq!(
            s(
                crypto::Encr::AesGcm16(16),
                crypto::Prf::HmacSha256,
                None,
                DhGroup::Curve25519
            ),
            "aes128gcm16-prfsha256-x25519"
        );
    }
}
