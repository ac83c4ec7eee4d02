//! The IKE thread's loop: the API's commands, initiators paced per peer,
//! punted datagrams in bounded batches (those of our live IKE SAs first,
//! [`dataplane::punt::ike::Class`]), then the timers every turn however
//! full the queues are, and what the state machines asked for; tunnels
//! deleted live and at shutdown.

use super::{Cmd, ControlPlane, BACKUP_WAIT, MAX_BATCH, MAX_WAIT, SHUTDOWN_FLUSH};
use dataplane::punt::ike::Class;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tracing::{error, info, warn};
use vecgate_ike::group::{self, Leaving, Reaped};

impl ControlPlane {
    pub(super) fn run(&mut self, stop: &AtomicBool) {
        // Tunnel ids, started from the back.
        let mut to_start: Vec<u32> = self
            .tunnels
            .iter()
            .filter(|t| t.ike.config().initiate)
            .map(|t| t.id)
            .rev()
            .collect();
        group::refresh_policies(&mut self.tunnels);
        while !stop.load(Ordering::Relaxed) {
            // HA backup: nothing is sent, no timer runs (ike/ha.rs).
            self.sending = self.may_send();
            if self.sending {
                self.adopt_shadow(&mut to_start, Instant::now());
            } else {
                self.step_down(&mut to_start);
            }
            self.commands(&mut to_start, Instant::now());
            if !to_start.is_empty() && self.sending {
                self.start_some(&mut to_start, Instant::now());
                self.drain_all();
            }
            let now = Instant::now();
            let timers = self.sending.then(|| group::next_timeout(&self.tunnels));
            let next = timers
                .flatten()
                .into_iter()
                .chain(self.removals.iter().map(|r| r.0))
                .min();
            // A backup looks often: a takeover waits for it to adopt the
            // active's IKE SAs (the sync's takeover) before taking the
            // addresses.
            let cap = if self.ha.is_some() && !self.sending {
                BACKUP_WAIT
            } else {
                MAX_WAIT
            };
            let wait = next.map_or(cap, |n| n.saturating_duration_since(now).min(cap));
            if let Some(d) = self.punt.recv_timeout(wait) {
                self.datagram(&d);
                self.punt.release(d);
                // Bounded batches of whatever else is queued, our SAs'
                // datagrams first, then the timers: a flood never starves
                // them. What a batch produced leaves before the next one.
                self.batch(Class::Known);
                self.drain_all();
                self.batch(Class::Other);
                self.drain_all();
            }
            let now = Instant::now();
            if self.sending {
                group::handle_timeout(&mut self.tunnels, now);
            }
            self.reap_retired(now);
            self.drain_all();
            self.expire_removals(now);
            self.finish_deletes(now);
            self.summarize(now);
            self.warn_expiry(now);
            self.publish(now);
            self.publish_spis();
            if self.sending {
                self.sync_ike(now);
            }
        }
        self.shutdown();
    }

    /// Takes the API's requests: a new tunnel joins (an initiator is
    /// queued to start), a deleted one sends its IKE DELETE (RFC 7296
    /// §1.4.1) and is forgotten by [`ControlPlane::finish_deletes`].
    fn commands(&mut self, to_start: &mut Vec<u32>, now: Instant) {
        while let Ok(c) = self.cmds.try_recv() {
            match c {
                Cmd::Add(mut t) => {
                    info!(tunnel = %t.name, initiator = t.ike.config().initiate, "IKE: tunnel added");
                    // A pool connection moved here adopts its old owner's
                    // IKE SAs instead of initiating (ike/ha.rs).
                    let shadow = self.ha.as_mut().and_then(|h| h.pending_for(&t.name));
                    let adopted =
                        shadow.map_or(0, |sas| super::ha::import_shadow(&mut t, &sas, now));
                    if adopted > 0 {
                        info!(tunnel = %t.name, ike_sas = adopted, "IKE: took over the old owner's IKE SAs (no renegotiation)");
                    } else if t.ike.config().initiate {
                        to_start.insert(0, t.id);
                    }
                    self.tunnels.push(*t);
                    group::refresh_policies(&mut self.tunnels);
                    if adopted > 0 {
                        self.drain_all();
                    }
                }
                Cmd::Forget { name, done } => {
                    if let Some(x) = self.tunnels.iter().position(|t| t.name == name) {
                        to_start.retain(|i| *i != self.tunnels[x].id);
                        self.forget(x);
                    }
                    let _ = done.send(());
                }
                Cmd::Rekey {
                    tunnel,
                    spi,
                    outbound,
                } => self.soft_lifetime(tunnel, spi, outbound, now),
                Cmd::SetAuth {
                    name,
                    local_id,
                    auth,
                } => {
                    let Some(t) = self.tunnels.iter_mut().find(|t| t.name == name) else {
                        continue;
                    };
                    match t.ike.set_auth(local_id, auth.local, auth.remote) {
                        Ok(()) => {
                            info!(tunnel = %name, "IKE: certificates, keys and CRLs reloaded")
                        }
                        Err(e) => warn!(tunnel = %name, "IKE: reloaded certificates refused: {e}"),
                    }
                }
                Cmd::Remove { name, done } => {
                    let Some(x) = self
                        .tunnels
                        .iter()
                        .position(|t| t.name == name && !t.ike.is_retired())
                    else {
                        let _ = done.send(());
                        continue;
                    };
                    let id = self.tunnels[x].id;
                    to_start.retain(|i| *i != id);
                    // No reconnection while it goes.
                    self.tunnels[x].reconnect_at = None;
                    let carried: Vec<(u32, u32)> = self.tunnels[x]
                        .children
                        .iter()
                        .map(|c| (c.via, c.spi_in))
                        .collect();
                    match group::remove(&mut self.tunnels, x, &carried, now) {
                        Leaving::Retired => {
                            info!(tunnel = %name, "IKE: tunnel deleted; its IKE SA stays for the other tunnels' child SAs in it");
                            let _ = done.send(());
                        }
                        Leaving::Deleting => {
                            if self.tunnels[x].ike.is_established() {
                                info!(tunnel = %name, "IKE: deleting the IKE SA (tunnel deleted)");
                            }
                            self.deleting.push((id, now + SHUTDOWN_FLUSH, done));
                        }
                    }
                    self.drain_all();
                }
            }
        }
        self.finish_deletes(now);
    }

    /// A child SA of tunnel `tunnel` crossed its soft packet or byte limit
    /// (reported once per direction): the IKE SA carrying it starts a
    /// CREATE_CHILD_SA rekey, once per child.
    fn soft_lifetime(&mut self, tunnel: u32, spi: u32, outbound: bool, now: Instant) {
        let Some(t) = self.tunnels.iter_mut().find(|t| t.id == tunnel) else {
            return;
        };
        let Some((via, spi_in)) = t
            .children
            .iter()
            .find(|c| {
                if outbound {
                    c.spi_out == spi
                } else {
                    c.spi_in == spi
                }
            })
            .map(|c| (c.via, c.spi_in))
        else {
            return;
        };
        let live: Vec<u32> = t.children.iter().map(|c| c.spi_in).collect();
        t.soft_rekeyed.retain(|s| live.contains(s));
        if t.soft_rekeyed.contains(&spi_in) {
            return;
        }
        t.soft_rekeyed.push(spi_in);
        let name = t.name.clone();
        if let Some(v) = self.tunnels.iter_mut().find(|t| t.id == via) {
            info!(tunnel = %name, spi_in = format_args!("{spi_in:#010x}"),
                  "IKE: child SA reached its soft lifetime, rekeying (CREATE_CHILD_SA)");
            v.ike.rekey_child(spi_in, now);
            self.drain_all();
        }
    }

    /// Forgets deleted tunnels whose IKE SA is gone (the peer answered)
    /// or whose deadline passed.
    fn finish_deletes(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.deleting.len() {
            let (id, deadline, _) = &self.deleting[i];
            let pos = self.tunnels.iter().position(|t| t.id == *id);
            let gone = pos.is_none_or(|p| !self.tunnels[p].ike.is_established());
            if gone || now >= *deadline {
                let (_, _, done) = self.deleting.swap_remove(i);
                if let Some(p) = pos {
                    let t = self.tunnels.remove(p);
                    if !gone {
                        warn!(tunnel = %t.name, "IKE: tunnel deleted without the peer's delete acknowledgement");
                    }
                    info!(tunnel = %t.name, "IKE: tunnel removed");
                }
                let _ = done.send(());
            } else {
                i += 1;
            }
        }
    }

    /// Retired tunnels ([`group::reap`]): the IKE SA is deleted once it
    /// carries no other tunnel's child SA, the tunnel forgotten once it has
    /// no IKE SA.
    fn reap_retired(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.tunnels.len() {
            let t = &mut self.tunnels[i];
            match group::reap(&mut t.ike, &mut t.delete_sent, now) {
                Some(Reaped::Gone) => {
                    info!(tunnel = %t.name, "IKE: retired IKE SA gone, tunnel removed");
                    self.tunnels.remove(i);
                    continue;
                }
                Some(Reaped::DeleteSent) => {
                    info!(tunnel = %t.name, "IKE: retired IKE SA carries no child SA any more, deleting it");
                }
                None => {}
            }
            i += 1;
        }
    }

    /// Starts queued initiators, paced per peer ([`group::start_some`]).
    fn start_some(&mut self, to_start: &mut Vec<u32>, now: Instant) {
        group::start_some(&mut self.tunnels, to_start, now, |t, e| {
            error!(tunnel = %t.name, "IKE: cannot initiate: {e}");
        });
    }

    /// Leaves politely: the peer learns the SAs are gone (RFC 7296 §1.4.1)
    /// instead of waiting for its DPD. The workers keep running until this
    /// returns (run.rs stops them after joining this thread), so the
    /// INFORMATIONAL deletes are sent; their answers are awaited for at
    /// most [`SHUTDOWN_FLUSH`].
    fn shutdown(&mut self) {
        let start = Instant::now();
        let mut n = 0;
        for t in &mut self.tunnels {
            if t.ike.is_established() {
                t.ike.delete_ike(start);
                n += 1;
            }
        }
        self.drain_all();
        if n > 0 {
            info!(tunnels = n, "IKE: deleting the IKE SAs before stopping");
        }
        while start.elapsed() < SHUTDOWN_FLUSH
            && self.tunnels.iter().any(|t| t.ike.is_established())
        {
            if let Some(d) = self.punt.recv_timeout(Duration::from_millis(10)) {
                self.datagram(&d);
                self.punt.release(d);
            }
            group::handle_timeout(&mut self.tunnels, Instant::now());
            self.drain_all();
        }
        let left = self
            .tunnels
            .iter()
            .filter(|t| t.ike.is_established())
            .count();
        if left > 0 {
            warn!(
                tunnels = left,
                "IKE: stopping without the peer's delete acknowledgement"
            );
        }
        // The last injected datagrams leave with the workers' next vector.
        std::thread::sleep(Duration::from_millis(20));
    }

    /// Hands a punted datagram to the tunnel it belongs to: the one owning
    /// its IKE SPI (several tunnels may join the same two gateways), else
    /// (a new IKE_SA_INIT) one whose addresses match — preferably one
    /// without an IKE SA yet — else (a NAT'd peer) the one with our address.
    fn datagram(&mut self, d: &dataplane::punt::ike::Datagram) {
        if !self.sending {
            return;
        }
        let now = Instant::now();
        let pick = group::owner(
            &self.tunnels,
            d.data(),
            d.local,
            d.remote,
            dataplane::punt::ike::NAT_T_PORT,
        );
        match pick {
            Some(i) => self.tunnels[i]
                .ike
                .handle_datagram(d.data(), d.local, d.remote, now),
            // Counted and summarized, not logged per datagram.
            None => self.unmatched += 1,
        }
    }

    /// Handles up to [`MAX_BATCH`] queued datagrams of `class`.
    fn batch(&mut self, class: Class) {
        for _ in 0..MAX_BATCH {
            let Some(d) = self.punt.try_recv(class) else {
                return;
            };
            self.datagram(&d);
            self.punt.release(d);
        }
    }

    /// Tells the workers our SPIs of live IKE SAs: datagrams carrying one
    /// take the punt queue a spoofed flood cannot fill
    /// ([`dataplane::punt::ike::Class::Known`]).
    fn publish_spis(&self) {
        let spis = self.tunnels.iter().flat_map(|t| t.ike.local_spis());
        self.punt.set_known_spis(spis.collect());
    }

    pub(super) fn drain_all(&mut self) {
        for i in 0..self.tunnels.len() {
            while let Some(a) = self.tunnels[i].ike.poll_action() {
                self.action(i, a);
            }
        }
    }
}
