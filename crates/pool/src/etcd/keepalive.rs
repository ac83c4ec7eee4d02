//! The lease's keepalives and the fence, in a task of their own: a
//! keepalive every TTL/6, each answer moving the deadline ([`Fence`]),
//! probes of every etcd member while they fail, and the [`Gate`] that
//! senders check moved after each.
//!
//! One keepalive is in flight at a time, on one stream: an answer is
//! attributed to the send it answers. A keepalive that gets no answer in
//! time drops the stream (a late answer on it would otherwise be taken
//! for the next send's, moving the deadline too far).

use super::Etcd;
use crate::fence::{Fence, Gate, Probe};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// What the fence says, for the member's loop and `pool show`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FenceState {
    pub serving: bool,
    /// Serving on only because etcd has no quorum (the fence holds).
    pub holding: bool,
    /// The lease is gone for good.
    pub lost: bool,
    pub deadline: Option<Instant>,
    pub last_probe: Option<Probe>,
    /// Keepalives that failed in a row.
    pub failing: u32,
}

/// A lease as granted.
pub struct Lease {
    pub etcd: Etcd,
    pub id: i64,
    /// When the grant was sent, and the TTL etcd gave.
    pub sent: Instant,
    pub granted: i64,
    /// The TTL asked for (the fence never trusts more).
    pub ttl: Duration,
}

/// Keeps the lease alive until it is lost or `stop` is set.
pub async fn run(
    l: Lease,
    gate: Gate,
    out: watch::Sender<FenceState>,
    mut stop: watch::Receiver<bool>,
) {
    let Lease {
        etcd,
        id: lease,
        sent,
        granted,
        ttl,
    } = l;
    let mut fence = Fence::new(ttl);
    fence.answered(sent, granted);
    let period = (ttl / 6).max(Duration::from_millis(100));
    let mut state = FenceState::default();
    let mut stream = None;
    loop {
        let now = Instant::now();
        if *stop.borrow() {
            return;
        }
        let serving = fence.serving(now);
        gate.set(if serving { fence.deadline() } else { None });
        state.serving = serving;
        state.holding = fence.holding(now);
        state.lost = fence.lost();
        state.deadline = fence.deadline();
        out.send_replace(state);
        if fence.lost() {
            return;
        }
        let sent = Instant::now();
        let answer = tokio::time::timeout(period, async {
            if stream.is_none() {
                let mut c = etcd.client();
                stream = Some(c.lease_keep_alive(lease).await?);
            }
            let Some((keeper, rx)) = stream.as_mut() else {
                return Ok(None);
            };
            keeper.keep_alive().await?;
            rx.message().await
        })
        .await;
        match answer {
            Ok(Ok(Some(r))) => {
                fence.answered(sent, r.ttl());
                state.failing = 0;
            }
            _ => {
                stream = None;
                state.failing = state.failing.saturating_add(1);
                // Is the lease itself gone (etcd answers, without it)? And
                // does etcd have a leader at all? Asked side by side, so
                // that a failing round takes one keepalive period and the
                // probes follow each other well within TTL/2.
                let (gone, p) =
                    tokio::join!(bounded_gone(&etcd, lease, period), etcd.probe(period));
                let now = Instant::now();
                state.last_probe = Some(p);
                if let Ok(true) = gone {
                    fence.answered(sent, 0);
                    continue;
                }
                fence.probe(p, now);
            }
        }
        let next = sent + period;
        tokio::select! {
            _ = tokio::time::sleep_until(next.into()) => {}
            _ = stop.changed() => {}
        }
    }
}

async fn bounded_gone(etcd: &Etcd, lease: i64, t: Duration) -> Result<bool, super::Error> {
    match tokio::time::timeout(t, etcd.lease_gone(lease)).await {
        Ok(r) => r,
        Err(_) => Err(super::Error::Unreachable("lease ttl".into())),
    }
}
