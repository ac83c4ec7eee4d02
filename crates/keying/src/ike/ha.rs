//! The IKE thread in an HA pair with a state sync: the standby sends
//! nothing and adopts the active's IKE SAs when it takes over, so the
//! peer sees the same IKE SA and child SAs (no renegotiation). The sync's
//! driver tells it its role and hands it the shadow ([`ToIke`]); it hands
//! the sync its SAs ([`Message`]).
//!
//! - Backup ([`ControlPlane::sending`] false): no initiation, no timers
//!   (liveness checks, rekeys, retransmissions), punted datagrams dropped,
//!   no datagram out: the standby never speaks on the virtual addresses.
//! - Active: each tunnel's established IKE SAs go to the standby
//!   ([`Message::IkeSas`]) whenever one changed (anything but the clock:
//!   `SaSnapshot::change_key`), and all of them every [`FULL_EVERY`].
//! - Takeover ([`ToIke::Adopt`]): the shadow is imported
//!   ([`vecgate_ike::Ike::import`]); its child SAs are keyed as
//!   negotiated ones, attached to the [`SaState`] ([`attach`]) so their
//!   outbound numbers start past the old active's synced ceiling and
//!   their replay windows are the synced ones. A tunnel without a shadow
//!   negotiates as without HA.
//! - A pool member ([`HaLink::pool`]) is always active: the pool moves
//!   single connections, not the gateway's role. Its applier hands each
//!   moved connection's IKE SAs over ([`ToIke::Adopt`]) *before* it adds
//!   the tunnel; a shadow whose tunnel is not here yet waits for it, and
//!   the tunnel then adopts it instead of initiating (no IKE_SA_INIT). A
//!   connection that leaves the member is forgotten without a word to the
//!   peer ([`super::IkeControl::forget`]): its new owner carries on.

use super::ControlPlane;
use crossbeam_channel::{Receiver, Sender};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{info, warn};
use vecgate_ha::sync::IkeSaRepr;
use vecgate_ha::syncer::{Adoption, IkeShadow, Message, Moved, Now, ToIke, Words};
use vecgate_ike::group;
use vecgate_ike::SaSnapshot;
use vecgate_ipsec::seqstore::KeyId;
use vecgate_ipsec::{InboundSa, OutboundSa, SaConfig, SaState};
use zeroize::Zeroizing;

/// Every tunnel's SA set is resent this often, changed or not (a lost
/// datagram is repaired within it).
pub const FULL_EVERY: Duration = Duration::from_secs(1);

/// The IKE thread's link to the state sync's driver.
pub struct HaLink {
    /// Where child SAs are attached (both gateways may use their keys).
    pub sas: Arc<SaState>,
    pub to_sync: Sender<Message>,
    pub from_sync: Receiver<ToIke>,
    /// A pool member's link (module doc): always active, shadows may wait
    /// for their tunnels.
    pub pool: bool,
}

/// The thread's HA state: its role, a takeover's shadow not adopted yet,
/// the old active's words for the adopted child SAs, and what the active
/// last sent per tunnel id.
pub(super) struct IkeHa {
    link: HaLink,
    /// Elected master, not draining: may transmit.
    may_send: bool,
    /// Fully backup: the IKE SAs are the active's.
    backup: bool,
    adoption: Option<Adoption>,
    words: Words,
    sent: HashMap<u32, Vec<Zeroizing<Vec<u8>>>>,
    full_at: Option<Instant>,
    /// A pool member's shadows whose tunnels are not added yet, by name.
    pending: HashMap<String, IkeShadow>,
}

impl IkeHa {
    /// Until the sync says otherwise: backup (a pool member: active).
    pub(super) fn new(link: HaLink) -> IkeHa {
        let pool = link.pool;
        IkeHa {
            link,
            may_send: pool,
            backup: !pool,
            adoption: None,
            words: Words::default(),
            sent: HashMap::new(),
            full_at: None,
            pending: HashMap::new(),
        }
    }

    /// A pool member's shadow for tunnel `name`, handed over before the
    /// tunnel was added (module doc).
    pub(super) fn pending_for(&mut self, name: &str) -> Option<IkeShadow> {
        if !self.link.pool {
            return None;
        }
        self.hear();
        self.take_adoption();
        self.pending.remove(name)
    }

    /// A pool member's adoption: its shadows wait for their tunnels, its
    /// words join those of earlier adoptions (each names other keys).
    fn take_adoption(&mut self) {
        if !self.link.pool {
            return;
        }
        if let Some(Adoption { shadow, words }) = self.adoption.take() {
            self.words.max_pps = words.max_pps;
            self.words.by_key.extend(words.by_key);
            self.pending.extend(shadow);
        }
    }

    /// Takes what the sync said since the last turn.
    fn hear(&mut self) {
        while let Ok(m) = self.link.from_sync.try_recv() {
            match m {
                ToIke::Role { may_send, backup } => {
                    self.may_send = may_send;
                    self.backup = backup;
                }
                ToIke::Adopt(a) => self.adoption = Some(a),
            }
        }
    }

    fn tell(&self, m: Message) {
        // A full queue loses an SA set: the next full resend repairs it.
        let _ = self.link.to_sync.try_send(m);
    }
}

impl ControlPlane {
    /// Whether this thread may transmit now (module doc): always without
    /// a state sync; with one, only while elected master (the standby
    /// never sends on the virtual addresses, and must not answer or start
    /// exchanges of SAs it shadows). Not while draining after a
    /// switchover: the new master has adopted the IKE SAs, and two
    /// gateways answering the peer would move the message IDs apart.
    pub(super) fn may_send(&mut self) -> bool {
        match self.ha.as_mut() {
            None => true,
            Some(ha) => {
                ha.hear();
                ha.may_send
            }
        }
    }

    /// Active: sends the SA sets that changed since last sent (all every
    /// [`FULL_EVERY`]).
    pub(super) fn sync_ike(&mut self, now: Instant) {
        let Some(ha) = self.ha.as_mut() else { return };
        let full = ha.full_at.is_none_or(|t| now >= t);
        if full {
            ha.full_at = Some(now + FULL_EVERY);
        }
        for t in &self.tunnels {
            let mut keys = Vec::new();
            let mut sas = Vec::new();
            for s in t.ike.export(now) {
                match (s.change_key(), s.encode()) {
                    (Ok(k), Ok(state)) => {
                        keys.push(k);
                        sas.push(IkeSaRepr {
                            spi_i: s.spi_i,
                            spi_r: s.spi_r,
                            state,
                        });
                    }
                    (Err(e), _) | (_, Err(e)) => {
                        warn!(tunnel = %t.name, "state sync: IKE SA not synced: {e}");
                    }
                }
            }
            if full || ha.sent.get(&t.id) != Some(&keys) {
                ha.tell(Message::IkeSas {
                    tunnel: t.name.clone(),
                    sas,
                });
                ha.sent.insert(t.id, keys);
            }
        }
    }

    /// Backup after being master (a switchover done, preemption, a blip
    /// of both claiming master): the IKE SAs are the new active's. They
    /// are forgotten without a word to the peer and their ESP SAs leave
    /// the dataplane now (no traffic comes here any more); a later
    /// takeover adopts them again from the sync, and initiators wait to
    /// start again in case it has none.
    pub(super) fn step_down(&mut self, to_start: &mut Vec<u32>) {
        if !self.ha.as_ref().is_some_and(|ha| ha.backup)
            || !self
                .tunnels
                .iter()
                .any(|t| t.ike.has_sa() || !t.children.is_empty())
        {
            return;
        }
        let mut sas = 0;
        for t in &mut self.tunnels {
            sas += t.ike.ike_sas().len();
            t.ike.forget_all();
            for c in t.children.drain(..) {
                let _ = self.reg.remove_inbound(c.spi_in);
                self.removals.retain(|r| r.1 != c.spi_in);
            }
            let _ = self.reg.set_outbound(t.id, None);
            t.ike_sas.clear();
            t.state = "down";
            if t.ike.config().initiate && !to_start.contains(&t.id) {
                to_start.push(t.id);
            }
        }
        if let Some(ha) = self.ha.as_mut() {
            ha.sent.clear();
            ha.full_at = None;
        }
        info!(
            ike_sas = sas,
            "IKE: backup now: the IKE SAs are the active's (forgotten here, adopted again from its sync on a takeover)"
        );
    }

    /// Forgets tunnel `x` without a word to the peer (a pool connection
    /// moved away): its IKE SAs dropped, its ESP SAs out of the
    /// dataplane, the tunnel gone from this thread.
    pub(super) fn forget(&mut self, x: usize) {
        let mut t = self.tunnels.remove(x);
        t.ike.forget_all();
        for c in t.children.drain(..) {
            let _ = self.reg.remove_inbound(c.spi_in);
            self.removals.retain(|r| r.1 != c.spi_in);
        }
        let _ = self.reg.set_outbound(t.id, None);
        if let Some(ha) = self.ha.as_mut() {
            ha.sent.remove(&t.id);
        }
        group::refresh_policies(&mut self.tunnels);
        info!(tunnel = %t.name, "IKE: tunnel forgotten without a delete (its new owner carries its IKE SA)");
    }

    /// Takeover: imports the active's IKE SAs, once, into the tunnels of
    /// the same name; those no longer wait to initiate.
    pub(super) fn adopt_shadow(&mut self, to_start: &mut Vec<u32>, now: Instant) {
        let Some(ha) = self.ha.as_mut() else { return };
        if ha.link.pool {
            // Each moved connection's shadow, adopted by its tunnel.
            ha.take_adoption();
            let mut adopted = false;
            for t in &mut self.tunnels {
                if let Some(sas) = ha.pending.remove(&t.name) {
                    let n = import_shadow(t, &sas, now);
                    if n > 0 {
                        to_start.retain(|i| *i != t.id);
                        adopted = true;
                        info!(tunnel = %t.name, ike_sas = n, "IKE: took over the old owner's IKE SAs (no renegotiation)");
                    }
                }
            }
            if adopted {
                self.drain_all();
            }
            return;
        }
        let Some(Adoption { shadow, words }) = ha.adoption.take() else {
            return;
        };
        ha.words = words;
        for t in &mut self.tunnels {
            let Some(sas) = shadow.get(&t.name) else {
                if t.ike.config().initiate {
                    info!(tunnel = %t.name, "IKE: taking over without the active's IKE SA (none synced): negotiating afresh");
                }
                continue;
            };
            let adopted = import_shadow(t, sas, now);
            if adopted > 0 {
                to_start.retain(|i| *i != t.id);
                info!(tunnel = %t.name, ike_sas = adopted, "IKE: took over the active's IKE SAs (no renegotiation)");
            }
        }
        // Keys the adopted child SAs (their actions), then lets the
        // takeover take the addresses.
        self.drain_all();
        if let Some(ha) = &self.ha {
            ha.tell(Message::IkeAdopted);
        }
    }
}

/// Imports the IKE SAs of `sas` into tunnel `t`; how many it took.
pub(super) fn import_shadow(t: &mut super::TunnelIke, sas: &IkeShadow, now: Instant) -> usize {
    let mut adopted = 0;
    for state in sas.values() {
        match SaSnapshot::decode(state) {
            Ok(s) => {
                t.ike.import(s, now);
                adopted += 1;
            }
            Err(e) => warn!(tunnel = %t.name, "IKE: synced IKE SA unusable: {e}"),
        }
    }
    adopted
}

/// The ESP SAs of a child with a state sync: attached to the
/// [`SaState`] like static SAs (both gateways may use the key), then
/// moved past what the old active may have used when a takeover's words
/// name their keys (past its space: retired, and rekeyed by IKE on its
/// soft lifetime). Without a usable state directory they are plain SAs,
/// with a warning: a takeover may then repeat numbers the far end drops
/// as replays until they pass the old active's.
pub(super) fn attach(
    ha: &IkeHa,
    tunnel: &str,
    inb: SaConfig,
    out: SaConfig,
) -> Result<(InboundSa, OutboundSa), String> {
    let sas = &ha.link.sas;
    if !sas.available() {
        warn!(%tunnel, "IKE: no state directory: child SA sequence numbers are not synced to the HA peer");
        let i = InboundSa::new(inb).map_err(|e| e.to_string())?;
        let o = OutboundSa::new(out).map_err(|e| e.to_string())?;
        return Ok((i, o));
    }
    let kin = KeyId::of(inb.algorithm, &inb.key);
    let kout = KeyId::of(out.algorithm, &out.key);
    let i = sas.inbound(tunnel, inb).map_err(String::from)?;
    let o = sas.outbound(tunnel, out).map_err(String::from)?;
    for k in [&kin, &kout] {
        sas.ephemeral(k);
        if let Moved::Unsafe { sa } = ha.words.take_over(k, &**sas, Now::read()) {
            ha.tell(Message::IkeUnsafe(sa.to_string()));
        }
    }
    Ok((i, o))
}
