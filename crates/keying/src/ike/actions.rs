//! Keying the ESP dataplane from the state machines' actions (RFC 7296
//! §2.8, make-before-break): datagrams out through the inject queue, a
//! new child SA's inbound SA installed before the tunnel's outbound SA
//! switches to it, a removed child's inbound SA kept for
//! [`INBOUND_GRACE`].

use super::status::ts_text;
use super::{child_sa_configs, Child, ChildInfo, ControlPlane, INBOUND_GRACE};
use std::time::Instant;
use tracing::{error, info, warn};
use vecgate_ike::{Action, ChildSaKeys};
use vecgate_ipsec::{InboundSa, OutboundSa};

impl ControlPlane {
    fn underlay_vrf(&self, id: u32) -> Option<u16> {
        self.shared.load().esp.by_id(id).map(|t| t.underlay_vrf)
    }

    pub(super) fn action(&mut self, i: usize, a: Action) {
        let now = Instant::now();
        match a {
            Action::Send {
                local,
                remote,
                data,
            } => {
                // HA backup: the standby never speaks (ike/ha.rs).
                if !self.sending {
                    return;
                }
                let id = self.tunnels[i].id;
                // A retired tunnel is gone from the tables: its last VRF.
                let vrf = self.underlay_vrf(id).or(self.tunnels[i].underlay_vrf);
                let Some(vrf) = vrf else {
                    warn!(tunnel = %self.tunnels[i].name, "IKE: tunnel not in the tables");
                    return;
                };
                self.tunnels[i].underlay_vrf = Some(vrf);
                // A stateless answer to an unauthenticated IKE_SA_INIT (a
                // COOKIE or INVALID_KE_PAYLOAD, responder SPI still zero:
                // RFC 7296 §2.6) never takes the last transmit slots: a
                // flood's answers cannot crowd out the live SAs' requests
                // and answers (liveness checks, rekeys).
                if is_stateless_init_answer(&data, local.port())
                    && self.punt.inject_free() < TX_RESERVED_FOR_LIVE_SAS
                {
                    self.inject_failed += 1;
                    return;
                }
                // A refused datagram is recovered by retransmission; counted
                // and summarized, not logged per datagram.
                if self.punt.inject(&data, local, remote, vrf).is_err() {
                    self.inject_failed += 1;
                }
            }
            Action::InstallChild(k) => self.install(i, &k, now),
            Action::RemoveChild { spi_in, spi_out } => self.remove(i, spi_in, spi_out, now),
            Action::Event(e) => self.event(i, e, now),
        }
    }

    /// Installs a child SA, make-before-break: inbound first, then the
    /// outbound switch.
    fn install(&mut self, i: usize, k: &ChildSaKeys, now: Instant) {
        // The child belongs to the tunnel whose selectors it was negotiated
        // for (its policy), whichever tunnel's IKE SA carries it: it goes
        // into that tunnel's SAs only, never another tenant's.
        let via = self.tunnels[i].id;
        let via_name = self.tunnels[i].name.clone();
        let target = match k.policy {
            None => Some(i),
            Some(tag) => self
                .tunnels
                .iter()
                .position(|t| t.id == tag && !t.ike.is_retired()),
        };
        let Some(ti) = target else {
            warn!(tunnel = %via_name, spi_in = format_args!("{:#010x}", k.spi_in),
                  "IKE: child SA for a tunnel that is gone, deleting it");
            self.tunnels[i].ike.delete_child(k.spi_in, now);
            return;
        };
        let t = &mut self.tunnels[ti];
        if ti != i {
            info!(tunnel = %t.name, ike_sa_of = %via_name,
                  "IKE: child SA negotiated inside another tunnel's IKE SA (same peer), bound by its traffic selectors");
            t.state = "established";
            t.last_error = None;
        }
        let limits = t.child_volume;
        // Both directions keep to what was negotiated (RFC 4301 §5.2),
        // which may be narrower than the tunnel's `traffic`.
        let sel = negotiated(k);
        let synced = self.ha.is_some();
        let ha = &self.ha;
        let built = child_sa_configs(k).and_then(|(mut inb, mut out)| {
            inb.lifetime = limits;
            out.lifetime = limits;
            let (inb, out) = match ha {
                Some(ha) => super::ha::attach(ha, &t.name, inb, out)?,
                None => (
                    InboundSa::new(inb).map_err(|e| e.to_string())?,
                    OutboundSa::new(out).map_err(|e| e.to_string())?,
                ),
            };
            Ok((inb.with_selectors(sel.clone()), out.with_selectors(sel)))
        });
        let (inb, out) = match built {
            Ok(x) => x,
            Err(e) => {
                error!(tunnel = %t.name, spi_in = format_args!("{:#010x}", k.spi_in), "IKE: child SA not installed: {e}");
                t.last_error = Some(format!("child SA not installed: {e}"));
                return;
            }
        };
        if synced {
            // Adopted again (a second takeover): the same SA, its old
            // inbound entry may still wait out its grace here.
            if self.reg.remove_inbound(k.spi_in).is_ok() {
                self.removals.retain(|r| r.1 != k.spi_in);
            }
        }
        if let Err(e) = self.reg.install_inbound(t.id, inb) {
            error!(tunnel = %t.name, "IKE: inbound SA not installed: {e}");
            return;
        }
        match self.reg.set_outbound(t.id, Some(out)) {
            Ok(old) => {
                info!(tunnel = %t.name, spi_in = format_args!("{:#010x}", k.spi_in),
                      spi_out = format_args!("{:#010x}", k.spi_out), algorithm = %k.algorithm,
                      udp_encap = k.udp_encap, replaced = ?old.map(|o| format!("{:#010x}", o.spi())),
                      "IKE: child SA installed");
            }
            Err(e) => error!(tunnel = %t.name, "IKE: outbound SA not switched: {e}"),
        }
        let ts = |v: &[vecgate_ike::payload::TrafficSelector]| -> Vec<String> {
            v.iter().map(ts_text).collect()
        };
        t.children.push(Child {
            keys_meta: ChildInfo {
                spi_in: format!("{:#010x}", k.spi_in),
                spi_out: format!("{:#010x}", k.spi_out),
                algorithm: k.algorithm.clone(),
                udp_encap: k.udp_encap,
                esn: k.esn,
                local_ts: ts(&k.local_ts),
                remote_ts: ts(&k.remote_ts),
                age_secs: 0,
                rekey_in_secs: None,
            },
            spi_in: k.spi_in,
            spi_out: k.spi_out,
            at: now,
            via,
        });
    }

    /// Removes a child SA: off the outbound path now if it is the current
    /// one, out of the SAD after [`INBOUND_GRACE`].
    fn remove(&mut self, i: usize, spi_in: u32, spi_out: u32, now: Instant) {
        // The tunnel it was installed for (may differ from the one whose
        // IKE SA carried it).
        let ti = self
            .tunnels
            .iter()
            .position(|t| t.children.iter().any(|c| c.spi_in == spi_in))
            .unwrap_or(i);
        let t = &mut self.tunnels[ti];
        t.children.retain(|c| c.spi_in != spi_in);
        if t.children.is_empty() && t.state == "established" && !t.ike.is_established() {
            t.state = "down";
        }
        let current = self
            .reg
            .tunnel_tx(t.id)
            .and_then(|tx| tx.current())
            .map(|s| s.spi());
        if current == Some(spi_out) {
            // The newest remaining child (if any) carries on.
            let next = t.children.last().map(|c| (c.spi_in, c.spi_out));
            if next.is_none() {
                let _ = self.reg.set_outbound(t.id, None);
                info!(tunnel = %t.name, "IKE: no child SA left, traffic stops (no-sa)");
            }
        }
        self.removals.push((now + INBOUND_GRACE, spi_in));
        info!(tunnel = %t.name, spi_in = format_args!("{spi_in:#010x}"),
              spi_out = format_args!("{spi_out:#010x}"), "IKE: child SA removed");
    }

    pub(super) fn expire_removals(&mut self, now: Instant) {
        let reg = &self.reg;
        self.removals.retain(|(at, spi)| {
            if *at > now {
                return true;
            }
            let _ = reg.remove_inbound(*spi);
            false
        });
    }
}

/// The selectors a child SA was negotiated for, as the ESP SAs check them.
fn negotiated(k: &ChildSaKeys) -> vecgate_ipsec::Selectors {
    let conv = |v: &[vecgate_ike::payload::TrafficSelector]| -> Vec<vecgate_ipsec::Selector> {
        v.iter()
            .map(|t| vecgate_ipsec::Selector {
                start: t.start,
                end: t.end,
                proto: t.ip_proto,
                start_port: t.start_port,
                end_port: t.end_port,
            })
            .collect()
    };
    vecgate_ipsec::Selectors {
        local: conv(&k.local_ts),
        remote: conv(&k.remote_ts),
    }
}

/// Transmit slots only datagrams of IKE SAs with state may take.
const TX_RESERVED_FOR_LIVE_SAS: usize = 64;

/// Whether `data` (an IKE message, after the non-ESP marker on port 4500,
/// RFC 3948 §2.2) is an IKE_SA_INIT response whose responder SPI is zero:
/// an answer that created no state.
fn is_stateless_init_answer(data: &[u8], local_port: u16) -> bool {
    let m = match data {
        [0, 0, 0, 0, rest @ ..] if local_port != 500 => rest,
        _ => data,
    };
    m.len() >= 28 && m[8..16] == [0; 8] && m[18] == 34 && m[19] & 0x20 != 0
}
