//! `/pool` on this gateway: requests turned into the member's commands,
//! the member's status into [`PoolInfo`], and the check every connection
//! passes before it is stored.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use vecgate_config::{Config, FieldError, Route, TunnelKind, Via};
use vecgate_control::model::{
    PoolConnectionInfo, PoolConnectionSpec, PoolDrain, PoolFenceInfo, PoolInfo, PoolMemberInfo,
    PoolMove, PoolMoveInfo, PoolRebalance, PoolRefusedInfo,
};
use vecgate_control::{ApiError, PoolOps};
use vecgate_pool::etcd::member::{Command, CommandError, Status};
use vecgate_pool::{Class, Connection};

/// Longest an API request waits for the member (each etcd request in it
/// is bounded; a connection's admission retries a few times).
const ANSWER_WITHIN: Duration = Duration::from_secs(30);
/// Moves of a rebalance when the request names no bound.
const DEFAULT_MOVES: u32 = 16;
const DEFAULT_INTERVAL_MS: u64 = 1000;

pub(super) struct PoolApi {
    pub pool: String,
    pub rt: tokio::runtime::Handle,
    pub commands: mpsc::Sender<Command>,
    pub status: watch::Receiver<Arc<Status>>,
}

/// Where the gateway's interfaces hold a tunnel's local address: the
/// interface (in the tunnel's underlay VRF) whose subnet holds it.
pub(super) fn underlay_of<'a>(cfg: &'a Config, local: IpAddr, vrf: &str) -> Option<&'a str> {
    cfg.interfaces
        .iter()
        .filter(|i| i.vrf == vrf)
        .find(|i| {
            i.addresses.iter().any(|a| {
                a.addr.is_ipv4() == local.is_ipv4()
                    && a.network()
                        == vecgate_config::IfAddr {
                            addr: local,
                            prefix_len: a.prefix_len,
                        }
                        .network()
            })
        })
        .map(|i| i.name.as_str())
}

/// The gateway's own rules for a pool connection, then the pool's and
/// the configuration's validator ([`Connection::check`]).
pub(super) fn check(base: &Config, c: &Connection) -> Result<(), Vec<FieldError>> {
    let t = &c.tunnel;
    let mut errs = Vec::new();
    if t.kind == TunnelKind::Ipsec && t.ipsec.as_ref().is_none_or(|x| x.ike.is_none()) {
        errs.push(FieldError {
            field: "tunnel.sa".into(),
            message: "a pool connection's ipsec tunnel is keyed by IKEv2 (`ike`): static SAs would need their sequence ceilings carried to the next member, which this build does not do".into(),
        });
    }
    if underlay_of(base, t.local, &t.underlay_vrf).is_none() {
        errs.push(FieldError {
            field: "tunnel.local".into(),
            message: format!(
                "local {} is in no subnet of this member's interfaces in VRF \"{}\": the address moves between members on a shared underlay subnet",
                t.local, t.underlay_vrf
            ),
        });
    }
    if base
        .interfaces
        .iter()
        .any(|i| i.addresses.iter().any(|a| a.addr == t.local))
    {
        errs.push(FieldError {
            field: "tunnel.local".into(),
            message: format!(
                "local {} is this member's own interface address: a connection's address belongs to the connection and moves with it",
                t.local
            ),
        });
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    c.check(base)
}

/// The request as the pool stores it; errors name the request's field.
fn connection(spec: &PoolConnectionSpec) -> Result<Connection, ApiError> {
    if spec.tunnel.sa.is_some() {
        return Err(ApiError::bad(
            "tunnel.sa",
            "a pool connection's ipsec tunnel is keyed by IKEv2 (`ike`), not static SAs",
        ));
    }
    let tunnel = spec
        .tunnel
        .to_tunnel()
        .map_err(|e| ApiError::bad(&format!("tunnel.{}", e.field), e.message))?;
    let mut routes = Vec::with_capacity(spec.routes.len());
    for (i, r) in spec.routes.iter().enumerate() {
        let field = |f: &str| format!("routes[{i}].{f}");
        let prefix = r
            .prefix
            .parse()
            .map_err(|e: String| ApiError::bad(&field("prefix"), e))?;
        let via = if r.via == tunnel.name {
            Via::Tunnel(r.via.clone())
        } else if let Ok(a) = r.via.parse::<IpAddr>() {
            Via::Address(a)
        } else {
            return Err(ApiError::bad(
                &field("via"),
                format!(
                    "via \"{}\" is neither the connection's tunnel \"{}\" nor an address",
                    r.via, tunnel.name
                ),
            ));
        };
        routes.push(Route {
            vrf: r.vrf.clone().unwrap_or_else(|| tunnel.vrf.clone()),
            prefix,
            via,
        });
    }
    Ok(Connection {
        tunnel,
        routes,
        bandwidth_mbps: spec.bandwidth_mbps,
    })
}

fn api_error(e: CommandError) -> ApiError {
    match e {
        CommandError::Invalid(errs) => {
            let first = errs.first().map_or("body".to_owned(), |e| e.field.clone());
            let msg = errs
                .iter()
                .map(|e| e.message.clone())
                .collect::<Vec<_>>()
                .join("; ");
            ApiError::new(400, msg, Some(&first))
        }
        CommandError::Refused(m) => ApiError::new(409, m, None),
        CommandError::Unknown(m) => ApiError::new(404, m, None),
        e @ CommandError::Unavailable(_) => ApiError::new(503, e.to_string(), None),
        CommandError::Other(m) => ApiError::new(500, m, None),
    }
}

impl PoolApi {
    /// Sends a command to the member and waits for its answer.
    fn ask<T: Send + 'static>(
        &self,
        f: impl FnOnce(oneshot::Sender<Result<T, CommandError>>) -> Command,
    ) -> Result<T, ApiError> {
        let (tx, rx) = oneshot::channel();
        let cmd = f(tx);
        let commands = self.commands.clone();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        self.rt.spawn(async move {
            let r = match commands.send(cmd).await {
                Ok(()) => rx.await.ok(),
                Err(_) => None,
            };
            let _ = done_tx.send(r);
        });
        match done_rx.recv_timeout(ANSWER_WITHIN) {
            Ok(Some(r)) => r.map_err(api_error),
            _ => Err(ApiError::new(
                503,
                "the pool member did not answer in time",
                None,
            )),
        }
    }
}

impl PoolOps for PoolApi {
    fn show(&self) -> PoolInfo {
        let st = self.status.borrow().clone();
        info(&self.pool, &st, Instant::now())
    }

    fn add_connection(&self, spec: &PoolConnectionSpec) -> Result<(), ApiError> {
        let c = connection(spec)?;
        self.ask(|r| Command::AddConnection(Box::new(c), r))
    }

    fn del_connection(&self, id: &str) -> Result<(), ApiError> {
        let id = id.to_owned();
        self.ask(|r| Command::DeleteConnection(id, r))
    }

    fn drain(&self, spec: &PoolDrain) -> Result<(), ApiError> {
        let m = spec.member.clone();
        let on = !spec.end;
        self.ask(|r| Command::Drain(m, on, r))
    }

    fn rebalance(&self, spec: &PoolRebalance) -> Result<Vec<PoolMove>, ApiError> {
        let plan = self.ask(|reply| Command::Rebalance {
            dry_run: spec.dry_run,
            max_moves: spec.max_moves.unwrap_or(DEFAULT_MOVES),
            interval_ms: spec.interval_ms.unwrap_or(DEFAULT_INTERVAL_MS),
            reply,
        })?;
        Ok(plan
            .into_iter()
            .map(|d| PoolMove {
                connection: d.conn,
                from: d.from,
                to: d.to,
            })
            .collect())
    }
}

/// The member's status as `GET /pool` shows it.
pub(super) fn info(pool: &str, st: &Status, now: Instant) -> PoolInfo {
    let v = &st.view;
    let leader = v.leader();
    // Load per member and class, from the placement.
    let mut load: BTreeMap<&str, (u64, u64, u32)> = BTreeMap::new();
    for (id, p) in &v.placements {
        let Some(c) = v.conns.get(id) else { continue };
        let e = load.entry(p.value.member.as_str()).or_default();
        match c.value.class() {
            Class::Ipsec => e.0 += c.value.bandwidth_mbps,
            Class::Gre => e.1 += c.value.bandwidth_mbps,
        }
        e.2 += 1;
    }
    let members = v
        .members
        .values()
        .map(|m| {
            let r = &m.value;
            let (li, lg, n) = load.get(r.name.as_str()).copied().unwrap_or_default();
            PoolMemberInfo {
                name: r.name.clone(),
                lease: format!("{:x}", r.lease),
                addresses: r.addresses.iter().map(|a| a.to_string()).collect(),
                draining: v.drains.contains_key(&r.name),
                healthy: r.health.ok,
                capacity_ipsec_mbps: r.capacity.ipsec_mbps,
                capacity_gre_mbps: r.capacity.gre_mbps,
                capacity_tunnels: r.capacity.tunnels,
                load_ipsec_mbps: li,
                load_gre_mbps: lg,
                tunnels: n,
            }
        })
        .collect();
    let connections = v
        .conns
        .iter()
        .map(|(id, c)| {
            let p = v.placements.get(id).map(|p| &p.value);
            let s = v.statuses.get(id).map(|s| &s.value);
            let t = &c.value.tunnel;
            PoolConnectionInfo {
                id: id.clone(),
                tenant: c.value.tenant().to_owned(),
                class: c.value.class().as_str().to_owned(),
                kind: t.kind.as_str().to_owned(),
                local: t.local.to_string(),
                remote: t.remote.to_string(),
                bandwidth_mbps: c.value.bandwidth_mbps,
                member: p.map(|p| p.member.clone()),
                reason: p.map(|p| p.reason.as_str().to_owned()),
                moving_to: p.and_then(|p| p.handover.as_ref().map(|h| h.to.clone())),
                phase: s.map(|s| {
                    serde_json::to_value(s.phase)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                }),
                error: s.and_then(|s| s.error.clone()),
                last_move: p.and_then(|p| last_move(v, p.audit, s)),
            }
        })
        .collect();
    let f = &st.fence;
    PoolInfo {
        pool: pool.to_owned(),
        member: st.member.clone(),
        registered: st.registered,
        lease: format!("{:x}", st.lease),
        leader: leader.as_ref().map(|l| l.member.clone()),
        epoch: leader.as_ref().map_or(0, |l| l.epoch),
        revision: v.rev,
        fence: PoolFenceInfo {
            serving: f.serving,
            holding: f.holding,
            deadline_ms: f
                .deadline
                .filter(|_| f.serving)
                .map_or(0, |d| d.saturating_duration_since(now).as_millis() as u64),
            failing_keepalives: f.failing,
        },
        etcd_error: st.etcd_error.clone(),
        members,
        connections,
        refused: st
            .refused
            .iter()
            .map(|(c, r)| PoolRefusedInfo {
                connection: c.clone(),
                reason: r.clone(),
            })
            .collect(),
        pending_writes: st.pending_writes,
    }
}

/// Move `audit` as the leader recorded it, with the owner's steps when
/// its status is about that move.
fn last_move(
    v: &vecgate_pool::View,
    audit: u64,
    s: Option<&vecgate_pool::records::StatusRecord>,
) -> Option<PoolMoveInfo> {
    let a = v.audits.get(&audit)?;
    let s = s.filter(|s| s.audit == Some(audit));
    Some(PoolMoveInfo {
        audit,
        from: a.from.clone(),
        to: a.to.clone(),
        reason: a.reason.as_str().to_owned(),
        detect_ms: a.detect_ms,
        decide_ms: a.decide_ms,
        program_ms: s.and_then(|s| s.program_ms),
        first_packet_ms: s.and_then(|s| s.first_packet_ms),
    })
}
