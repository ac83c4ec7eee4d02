//! The pool member (`[pool]`): its fence, the leader, and where the
//! pool's connections are placed, as this member sees them.

use super::Labels;
use crate::state::Control;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

pub(super) fn pool(ctl: &Control, reg: &mut Registry) {
    let Ok(p) = ctl.pool() else {
        return;
    };
    let l = vec![("pool".to_owned(), p.pool.clone())];
    let one = |name: &str, help: &str, v: bool, reg: &mut Registry| {
        let g = Family::<Labels, Gauge>::default();
        reg.register(name, help, g.clone());
        g.get_or_create(&l).set(i64::from(v));
    };
    one(
        "vecgate_pool_serving",
        "1 while this member's fence lets it serve its connections",
        p.fence.serving,
        reg,
    );
    one(
        "vecgate_pool_holding",
        "1 while this member serves past its lease's deadline because etcd has no quorum",
        p.fence.holding,
        reg,
    );
    one(
        "vecgate_pool_leader",
        "1 while this member is the pool's leader",
        p.leader.as_deref() == Some(p.member.as_str()),
        reg,
    );
    one(
        "vecgate_pool_etcd_up",
        "1 while etcd answers this member (no error since the last answer)",
        p.etcd_error.is_none(),
        reg,
    );
    let members = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_pool_members",
        "Members registered in the pool",
        members.clone(),
    );
    members.get_or_create(&l).set(p.members.len() as i64);
    let placed = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_pool_connections",
        "Connections placed on each member of the pool",
        placed.clone(),
    );
    for m in &p.members {
        let mut ml = l.clone();
        ml.push(("member".to_owned(), m.name.clone()));
        placed.get_or_create(&ml).set(i64::from(m.tunnels));
    }
    // The last move of each connection: seconds from its detection to
    // each later step (only the steps done so far).
    let moves = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    reg.register(
        "vecgate_pool_move_seconds",
        "Seconds from the detection of a connection's last move (a lease gone, a drain asked for) to each step: decide (the leader placed it), program (the new owner programmed it), first_packet (it forwarded into it)",
        moves.clone(),
    );
    for c in &p.connections {
        let Some(m) = &c.last_move else { continue };
        let steps = [
            ("decide", Some(m.decide_ms)),
            ("program", m.program_ms),
            ("first_packet", m.first_packet_ms),
        ];
        for (step, at) in steps {
            let Some(at) = at else { continue };
            let mut ml = l.clone();
            ml.push(("connection".to_owned(), c.id.clone()));
            ml.push(("step".to_owned(), step.to_owned()));
            moves
                .get_or_create(&ml)
                .set(at.saturating_sub(m.detect_ms) as f64 / 1000.0);
        }
    }
}
