//! What the IKE thread publishes (`GET /ike`, `vecgate show ike`,
//! `/metrics`): each tunnel's state, IKE and child SAs and rekey counts,
//! kept from the library's [`Event`]s, and their text forms.

use super::{ControlPlane, IkeSaInfo, IkeSaState, IkeTunnelInfo, TunnelIke};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// At most one summary of unauthenticated input per tunnel this often.
const SUMMARY_EVERY: Duration = Duration::from_secs(10);
use tracing::{info, warn};
use vecgate_control::model::{IkeAdmission, IkeDropCount};
use vecgate_ike::{Event, FailReason, InitDrop};

impl ControlPlane {
    pub(super) fn event(&mut self, i: usize, e: Event, now: Instant) {
        // A rekeyed child counts for the tunnel it is installed for, which
        // may not be the one whose IKE SA carries it.
        let i = match &e {
            Event::ChildRekeyed { new_spi_in, .. } => self
                .tunnels
                .iter()
                .position(|t| t.children.iter().any(|c| c.spi_in == *new_spi_in))
                .unwrap_or(i),
            _ => i,
        };
        let t = &mut self.tunnels[i];
        match e {
            Event::IkeEstablished {
                spi_i,
                spi_r,
                suite,
                nat,
            }
            | Event::IkeAdopted {
                spi_i,
                spi_r,
                suite,
                nat,
            } => {
                let algorithms = suite.name();
                let how = if matches!(e, Event::IkeAdopted { .. }) {
                    "IKE: SA adopted from the HA peer's sync"
                } else {
                    "IKE: SA established"
                };
                info!(tunnel = %t.name, spi_i = format_args!("{spi_i:016x}"), spi_r = format_args!("{spi_r:016x}"),
                      %algorithms, nat, "{how}");
                t.state = "established";
                t.last_error = None;
                t.reconnect_at = None;
                t.ike_sas.push(IkeSaState {
                    spi_i,
                    spi_r,
                    algorithms,
                    nat,
                    at: now,
                });
            }
            Event::ChildEstablished { spi_in, spi_out } => {
                info!(tunnel = %t.name, spi_in = format_args!("{spi_in:#010x}"),
                      spi_out = format_args!("{spi_out:#010x}"), "IKE: child SA established");
            }
            Event::ChildRekeyed {
                old_spi_in,
                new_spi_in,
            } => {
                t.child_rekeys += 1;
                info!(tunnel = %t.name, old = format_args!("{old_spi_in:#010x}"),
                      new = format_args!("{new_spi_in:#010x}"), "IKE: child SA rekeyed");
            }
            Event::IkeRekeyed { old, new } => {
                t.ike_rekeys += 1;
                if let Some(s) = t.ike_sas.iter_mut().find(|s| (s.spi_i, s.spi_r) == old) {
                    s.spi_i = new.0;
                    s.spi_r = new.1;
                    s.at = now;
                }
                info!(tunnel = %t.name, old = format_args!("{:016x}/{:016x}", old.0, old.1),
                      new = format_args!("{:016x}/{:016x}", new.0, new.1), "IKE: SA rekeyed");
            }
            Event::ChildDeleted { spi_in, spi_out } => {
                info!(tunnel = %t.name, spi_in = format_args!("{spi_in:#010x}"),
                      spi_out = format_args!("{spi_out:#010x}"), "IKE: child SA deleted");
            }
            Event::IkeDeleted { spi_i, spi_r } => {
                t.ike_sas.retain(|s| (s.spi_i, s.spi_r) != (spi_i, spi_r));
                if t.ike_sas.is_empty() {
                    t.state = "down";
                }
                info!(tunnel = %t.name, spi_i = format_args!("{spi_i:016x}"),
                      spi_r = format_args!("{spi_r:016x}"), "IKE: SA deleted");
            }
            Event::TsRejected { by_peer, tsi, tsr } => {
                let txt = |v: &[vecgate_ike::payload::TrafficSelector]| {
                    v.iter().map(ts_text).collect::<Vec<_>>().join(", ")
                };
                let (tsi, tsr) = (txt(&tsi), txt(&tsr));
                if by_peer {
                    warn!(tunnel = %t.name, %tsi, %tsr, "IKE: the peer refused our child SA's traffic selectors (TS_UNACCEPTABLE)");
                } else {
                    warn!(tunnel = %t.name, %tsi, %tsr, "IKE: child SA refused (TS_UNACCEPTABLE): its traffic selectors fit no tunnel towards this peer");
                }
            }
            Event::Failed { reason, child } => {
                let what = if child { "child SA" } else { "IKE SA" };
                // A refused certificate or signature comes from a peer not
                // (or no longer) authenticated: one line per reason and
                // SUMMARY_EVERY, the rest in the counters and the summary.
                let quiet = match &reason {
                    FailReason::PeerAuth(e) => {
                        let k = e.kind();
                        match t.auth_warned.iter_mut().find(|(r, _)| *r == k) {
                            Some((_, at)) if now < *at + SUMMARY_EVERY => true,
                            Some((_, at)) => {
                                *at = now;
                                false
                            }
                            None => {
                                t.auth_warned.push((k, now));
                                false
                            }
                        }
                    }
                    _ => false,
                };
                if !quiet {
                    warn!(tunnel = %t.name, %reason, "IKE: {what} negotiation failed");
                }
                t.last_error = Some(format!("{what}: {reason}"));
                // A tunnel without a child SA carries nothing: an IKE SA
                // whose first child was refused is as failed as no IKE SA.
                if (!child && t.ike_sas.is_empty()) || (child && t.children.is_empty()) {
                    t.state = "failed";
                }
            }
        }
    }

    /// One log line per tunnel and [`SUMMARY_EVERY`] at most about the
    /// unauthenticated IKE_SA_INITs it saw (a flood costs counters, not a
    /// line per packet), and one about datagrams that fit no tunnel.
    pub(super) fn summarize(&mut self, now: Instant) {
        if now < self.summary_at {
            return;
        }
        self.summary_at = now + SUMMARY_EVERY;
        for t in &mut self.tunnels {
            let refused = t.ike.auth_refusals().to_vec();
            let last = std::mem::replace(&mut t.auth_logged, refused);
            let grown: Vec<String> = t
                .auth_logged
                .iter()
                .filter_map(|(r, n)| {
                    let before = last.iter().find(|l| l.0 == *r).map_or(0, |l| l.1);
                    (*n > before).then(|| format!("{r} {}", n - before))
                })
                .collect();
            if !grown.is_empty() {
                info!(tunnel = %t.name, refused = %grown.join(", "),
                      "IKE: IKE_AUTH requests refused before authentication in the last {}s", SUMMARY_EVERY.as_secs());
            }
            let s = t.ike.init_stats();
            let last = std::mem::replace(&mut t.init_logged, s);
            if s.received == last.received {
                continue;
            }
            let d = |r: InitDrop| s.dropped_for(r) - last.dropped_for(r);
            let dropped: Vec<String> = InitDrop::ALL
                .iter()
                .filter(|r| d(**r) > 0)
                .map(|r| format!("{} {}", r.name(), d(*r)))
                .collect();
            info!(tunnel = %t.name, inits = s.received - last.received,
                  cookies_sent = s.cookies_sent - last.cookies_sent,
                  refused = s.refused - last.refused,
                  dropped = %dropped.join(", "), half_open = s.half_open,
                  "IKE: unauthenticated IKE_SA_INIT requests in the last {}s", SUMMARY_EVERY.as_secs());
        }
        if self.unmatched > self.unmatched_logged {
            info!(
                datagrams = self.unmatched - self.unmatched_logged,
                "IKE: datagrams that fit no tunnel dropped in the last {}s",
                SUMMARY_EVERY.as_secs()
            );
            self.unmatched_logged = self.unmatched;
        }
        if self.inject_failed > self.inject_failed_logged {
            warn!(
                datagrams = self.inject_failed - self.inject_failed_logged,
                "IKE: datagrams not sent (transmit queue full) in the last {}s",
                SUMMARY_EVERY.as_secs()
            );
            self.inject_failed_logged = self.inject_failed;
        }
    }

    pub(super) fn publish(&self, now: Instant) {
        let sa_infos = |t: &TunnelIke| -> Vec<IkeSaInfo> {
            let established: Vec<(u64, u64)> = t.ike.ike_sas();
            t.ike_sas
                .iter()
                .filter(|s| established.contains(&(s.spi_i, s.spi_r)))
                .map(|s| {
                    let age = now.saturating_duration_since(s.at);
                    IkeSaInfo {
                        spi_i: format!("{:016x}", s.spi_i),
                        spi_r: format!("{:016x}", s.spi_r),
                        algorithms: s.algorithms.clone(),
                        nat: s.nat,
                        age_secs: age.as_secs(),
                        rekey_in_secs: t.ike_rekey.map(|r| r.saturating_sub(age).as_secs()),
                    }
                })
                .collect()
        };
        let v: Vec<IkeTunnelInfo> = self
            .tunnels
            .iter()
            .filter(|t| !t.ike.is_retired())
            .map(|t| {
                let c = t.ike.config();
                let init = t.ike.init_stats();
                // Its own IKE SAs, then those of siblings carrying its children.
                let mut ike_sas = sa_infos(t);
                let mut vias: Vec<u32> = t
                    .children
                    .iter()
                    .map(|ch| ch.via)
                    .filter(|v| *v != t.id)
                    .collect();
                vias.sort_unstable();
                vias.dedup();
                for v in vias {
                    if let Some(o) = self.tunnels.iter().find(|o| o.id == v) {
                        ike_sas.extend(sa_infos(o));
                    }
                }
                IkeTunnelInfo {
                    tunnel: t.name.clone(),
                    local: c.local_addr.ip().to_string(),
                    remote: c.remote_addr.ip().to_string(),
                    initiator: c.initiate,
                    state: t.state.to_string(),
                    last_error: t.last_error.clone(),
                    ike_sas,
                    child_sas: t
                        .children
                        .iter()
                        .map(|ch| {
                            let age = now.saturating_duration_since(ch.at);
                            let mut m = ch.keys_meta.clone();
                            m.age_secs = age.as_secs();
                            m.rekey_in_secs =
                                t.child_rekey.map(|r| r.saturating_sub(age).as_secs());
                            m
                        })
                        .collect(),
                    ike_rekeys: t.ike_rekeys,
                    child_rekeys: t.child_rekeys,
                    half_open: init.half_open as u64,
                    inits_received: init.received,
                    cookies_sent: init.cookies_sent,
                    inits_refused: init.refused,
                    inits_dropped: InitDrop::ALL
                        .iter()
                        .map(|r| IkeDropCount {
                            reason: r.name().to_owned(),
                            count: init.dropped_for(*r),
                        })
                        .collect(),
                    auths_refused: t
                        .ike
                        .auth_refusals()
                        .iter()
                        .map(|(r, n)| IkeDropCount {
                            reason: (*r).to_owned(),
                            count: *n,
                        })
                        .collect(),
                    admission: IkeAdmission {
                        cookie_threshold: c.cookie_threshold as u64,
                        cookie_threshold_per_source: c.cookie_threshold_ip as u64,
                        cookie_rate: u64::from(c.cookie_rate),
                        half_open_per_source: c.half_open_per_source as u64,
                        max_half_open: c.max_half_open as u64,
                    },
                    auth: super::certs::auth_info(&t.ike),
                    local_cert: super::certs::local_cert_info(c),
                }
            })
            .collect();
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = v;
    }
}

/// A traffic selector as strongSwan prints it: `10.1.0.0/24` when it is a
/// prefix, else `first..last`; protocol and ports only when restricted.
pub(super) fn ts_text(s: &vecgate_ike::payload::TrafficSelector) -> String {
    // The prefix length of [a, b] in a `bits`-wide space, if it is one.
    let prefix = |a: u128, b: u128, bits: u32| -> Option<u32> {
        let span = a ^ b;
        let len = bits - (128 - span.leading_zeros());
        let host = if len == bits {
            0
        } else {
            u128::MAX >> (128 - (bits - len))
        };
        (span == host && a & host == 0).then_some(len)
    };
    let range = match (s.start, s.end) {
        (IpAddr::V4(a), IpAddr::V4(b)) => prefix(u32::from(a).into(), u32::from(b).into(), 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => prefix(a.into(), b.into(), 128),
        _ => None,
    }
    .map(|len| format!("{}/{len}", s.start))
    .unwrap_or_else(|| format!("{}..{}", s.start, s.end));
    let ports = if (s.start_port, s.end_port) == (0, 65535) {
        String::new()
    } else {
        format!(" ports {}-{}", s.start_port, s.end_port)
    };
    if s.ip_proto == 0 {
        format!("{range}{ports}")
    } else {
        format!("{range} proto {}{ports}", s.ip_proto)
    }
}

/// `vecgate show ike` as a table.
pub fn show_table(v: &[IkeTunnelInfo]) -> String {
    let mut s = String::new();
    for t in v {
        s.push_str(&format!(
            "{:<12} {} -> {} {} state {}{} ike-rekeys {} child-rekeys {}\n",
            t.tunnel,
            t.local,
            t.remote,
            if t.initiator {
                "initiator"
            } else {
                "responder"
            },
            t.state,
            t.last_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default(),
            t.ike_rekeys,
            t.child_rekeys
        ));
        let a = &t.admission;
        s.push_str(&format!(
            "  admission cookies at {} half-open ({} per source) or {} inits/s, half-open max {} ({} per source)\n",
            a.cookie_threshold,
            a.cookie_threshold_per_source,
            a.cookie_rate,
            a.max_half_open,
            a.half_open_per_source
        ));
        if t.inits_received > 0 {
            let dropped: Vec<String> = t
                .inits_dropped
                .iter()
                .filter(|d| d.count > 0)
                .map(|d| format!("{} {}", d.reason, d.count))
                .collect();
            s.push_str(&format!(
                "  inits {} cookies-sent {} refused {} dropped {}{} half-open {}\n",
                t.inits_received,
                t.cookies_sent,
                t.inits_refused,
                t.inits_dropped.iter().map(|d| d.count).sum::<u64>(),
                if dropped.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", dropped.join(", "))
                },
                t.half_open
            ));
        }
        if !t.auths_refused.is_empty() {
            let r: Vec<String> = t
                .auths_refused
                .iter()
                .map(|d| format!("{} {}", d.reason, d.count))
                .collect();
            s.push_str(&format!("  auths refused {}\n", r.join(", ")));
        }
        s.push_str(&super::certs::show_lines(t));
        for i in &t.ike_sas {
            s.push_str(&format!(
                "  ike   {}/{} {} nat {} age {}s{}\n",
                i.spi_i,
                i.spi_r,
                i.algorithms,
                i.nat,
                i.age_secs,
                i.rekey_in_secs
                    .map(|r| format!(" rekey in {r}s"))
                    .unwrap_or_default()
            ));
        }
        for c in &t.child_sas {
            s.push_str(&format!(
                "  child in {} out {} {} udp-encap {} age {}s{}\n",
                c.spi_in,
                c.spi_out,
                c.algorithm,
                c.udp_encap,
                c.age_secs,
                c.rekey_in_secs
                    .map(|r| format!(" rekey in {r}s"))
                    .unwrap_or_default()
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_print_as_prefixes_or_ranges() {
        use vecgate_ike::payload::TrafficSelector;
        let p = |a: &str, l: u8| ts_text(&TrafficSelector::from_prefix(a.parse().unwrap(), l));
        assert_eq!(p("10.1.0.0", 24), "10.1.0.0/24");
        assert_eq!(p("0.0.0.0", 0), "0.0.0.0/0");
        assert_eq!(p("10.1.0.7", 32), "10.1.0.7/32");
        assert_eq!(p("fd01::", 64), "fd01::/64");
        assert_eq!(p("::", 0), "::/0");
        let mut t = TrafficSelector::from_prefix("10.1.0.0".parse().unwrap(), 24);
        t.end = "10.1.0.9".parse().unwrap();
        t.ip_proto = 6;
        t.start_port = 80;
        t.end_port = 80;
        assert_eq!(ts_text(&t), "10.1.0.0..10.1.0.9 proto 6 ports 80-80");
    }

    #[test]
    fn show_ike_prints_the_admission_limits_in_force() {
        let t = IkeTunnelInfo {
            tunnel: "t".into(),
            admission: IkeAdmission {
                cookie_threshold: 16,
                cookie_threshold_per_source: 3,
                cookie_rate: 20,
                half_open_per_source: 5,
                max_half_open: 64,
            },
            ..Default::default()
        };
        let out = show_table(&[t]);
        assert!(
            out.contains(
                "admission cookies at 16 half-open (3 per source) or 20 inits/s, half-open max 64 (5 per source)"
            ),
            "{out}"
        );
    }
}
