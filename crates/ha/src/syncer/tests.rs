//! The sync between two [`Syncer`]s in memory: datagrams are handed from
//! one to the other (or lost, replayed, reflected) by the test, time is
//! the test's, the SA state and the running configuration are stand-ins.
//! No socket, no thread.

use super::*;
use crate::sync::Epoch;
use std::cell::RefCell;
use vecgate_ipsec::sastate::{Bucket, NotDurable, TakenOver};
use vecgate_ipsec::seqstore::SaIdentity;

const A: &str = "192.0.2.1:7000";
const B: &str = "192.0.2.2:7000";
const PPS: u64 = 1 << 21;

fn key() -> SyncKey {
    SyncKey::new(&[7u8; 32]).unwrap()
}

fn syncer(local: &str, peer: &str, epoch: Epoch) -> Syncer {
    Syncer::new(
        SyncConfig {
            local: local.parse().unwrap(),
            peer: peer.parse().unwrap(),
            interval: Duration::from_millis(100),
            max_sa_pps: PPS,
        },
        key(),
        epoch,
    )
    .unwrap()
}

fn epoch(start_ms: u64, random: u64) -> Epoch {
    Epoch { start_ms, random }
}

/// What a book was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Follow(KeyId, u64),
    TakeOver(KeyId, u64),
    Adopt(KeyId, u64),
    MaxPps(u64),
}

/// The SA state: what `snapshot` shows, and every change asked of it.
#[derive(Default)]
struct Book {
    sas: RefCell<Vec<SaSnapshot>>,
    calls: RefCell<Vec<Call>>,
}

impl Book {
    fn calls(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.borrow_mut())
    }
    fn ident(&self, key: &KeyId) -> Option<SaIdentity> {
        let sas = self.sas.borrow();
        let s = sas.iter().find(|s| s.key == *key)?;
        Some(SaIdentity {
            tunnel: "t0".into(),
            outbound: s.outbound,
            spi: s.spi,
        })
    }
}

impl SaBook for Book {
    fn snapshot(&self) -> Vec<SaSnapshot> {
        self.sas.borrow().clone()
    }
    fn follow_outbound(&self, key: &KeyId, to: u64) -> Option<(SaIdentity, u64)> {
        self.calls.borrow_mut().push(Call::Follow(*key, to));
        Some((self.ident(key)?, 1))
    }
    fn take_over_outbound(&self, key: &KeyId, to: u64) -> Result<Option<TakenOver>, NotDurable> {
        self.calls.borrow_mut().push(Call::TakeOver(*key, to));
        Ok(self.ident(key).map(|sa| TakenOver {
            sa,
            next: to,
            retired: to > u64::from(u32::MAX),
        }))
    }
    fn adopt_window(
        &self,
        key: &KeyId,
        top: u64,
        _ring: &[u64],
    ) -> Result<Option<(SaIdentity, u64)>, NotDurable> {
        self.calls.borrow_mut().push(Call::Adopt(*key, top));
        Ok(self.ident(key).map(|sa| (sa, top)))
    }
    fn set_max_pps(&self, pps: u64) {
        self.calls.borrow_mut().push(Call::MaxPps(pps));
    }
}

/// The running configuration: routes, and tunnels whose spec is
/// `name|rest`.
#[derive(Default)]
struct Run {
    routes: Vec<RouteRepr>,
    tunnels: Vec<String>,
}

impl Running for Run {
    fn routes(&self) -> Vec<RouteRepr> {
        self.routes.clone()
    }
    fn tunnels(&self) -> Vec<(String, String)> {
        self.tunnels
            .iter()
            .map(|t| (self.tunnel_name(t).unwrap_or_default(), t.clone()))
            .collect()
    }
    fn tunnel_name(&self, spec: &str) -> Option<String> {
        spec.split_once('|').map(|x| x.0.to_owned())
    }
    fn add_route(&mut self, r: &RouteRepr) -> Result<(), String> {
        self.routes.push(r.clone());
        Ok(())
    }
    fn del_route(&mut self, r: &RouteRepr) -> Result<(), String> {
        self.routes
            .retain(|x| (&x.vrf, &x.prefix) != (&r.vrf, &r.prefix));
        Ok(())
    }
    fn add_tunnel(&mut self, spec: &str) -> Result<(), String> {
        self.tunnels.push(spec.to_owned());
        Ok(())
    }
    fn del_tunnel(&mut self, name: &str) -> Result<(), String> {
        self.tunnels
            .retain(|t| t.split_once('|').map(|x| x.0) != Some(name));
        Ok(())
    }
}

fn sends(actions: &[Action]) -> Vec<Vec<u8>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(d) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

fn taken_over(actions: &[Action]) -> bool {
    actions.iter().any(|a| matches!(a, Action::TakenOver))
}

/// Hands `datagrams` to `to` as coming from `from`.
fn deliver(
    to: &mut Syncer,
    now: Now,
    from: &str,
    datagrams: &[Vec<u8>],
    book: &Book,
    run: &mut Run,
) -> Vec<Action> {
    let from = from.parse().unwrap();
    let mut out = Vec::new();
    for d in datagrams {
        out.extend(to.handle(now, Event::Datagram { data: d, from }, book, run));
    }
    out
}

fn rejected(s: &Syncer, now: Now, why: &str) -> u64 {
    s.status(now.at)
        .rejected
        .iter()
        .find(|r| r.0 == why)
        .map_or(0, |r| r.1)
}

fn out_sa(key: u8, spi: u32, ceiling: u64) -> SaSnapshot {
    SaSnapshot {
        key: KeyId([key; 32]),
        spi,
        outbound: true,
        ceiling,
        used: ceiling / 2,
        window: Vec::new(),
    }
}

fn in_sa(key: u8, spi: u32, top: u64) -> SaSnapshot {
    SaSnapshot {
        key: KeyId([key; 32]),
        spi,
        outbound: false,
        ceiling: top,
        used: 0,
        window: vec![u64::MAX; 2],
    }
}

/// An active that became master on its own (no peer heard within the
/// dead interval), and the time from which its next interval is due.
fn elected_active(t0: Now, book: &Book, run: &mut Run) -> (Syncer, Now) {
    let mut a = syncer(A, B, epoch(t0.wall_ms, 1));
    assert!(a.handle(t0, Event::TakeOver, book, run).is_empty());
    let later = t0.after(a.config().dead_interval());
    let acts = a.poll(later, book, run);
    assert!(taken_over(&acts), "alone, it takes over at the deadline");
    assert!(a.master());
    book.calls();
    let ready = later.after(a.config().interval);
    (a, ready)
}

/// A takeover: the standby follows the active's ceilings as they arrive;
/// made master, it moves each outbound SA to the floor, adopts each
/// inbound window, hands the IKE shadow and the words to the IKE thread,
/// and answers only once the IKE thread keyed the adopted child SAs.
#[test]
fn takeover_starts_past_the_floor_and_waits_for_ike() {
    let (ab, bb) = (Book::default(), Book::default());
    let (mut ar, mut br) = (Run::default(), Run::default());
    let (mut a, t0) = elected_active(Now::read(), &ab, &mut ar);
    let mut b = syncer(B, A, epoch(t0.wall_ms, 2));
    let start = b.start();
    assert!(matches!(
        start.as_slice(),
        [Action::Ike(ToIke::Role {
            may_send: false,
            backup: true
        })]
    ));
    *ab.sas.borrow_mut() = vec![out_sa(1, 0x1001, 5_000), in_sa(2, 0x2001, 700)];
    *bb.sas.borrow_mut() = vec![out_sa(1, 0x1001, 10), in_sa(2, 0x2001, 0)];

    let t1 = t0.after(Duration::from_secs(1));
    let mut d = sends(&a.poll(t1, &ab, &mut ar));
    d.extend(sends(&a.handle(
        t1,
        Event::IkeSas {
            tunnel: "t0".into(),
            sas: vec![IkeSaRepr {
                spi_i: 1,
                spi_r: 2,
                state: Zeroizing::new(vec![9; 40]),
            }],
        },
        &ab,
        &mut ar,
    )));
    deliver(&mut b, t1, A, &d, &bb, &mut br);
    assert_eq!(
        bb.calls(),
        vec![Call::Follow(KeyId([1; 32]), 5_000 + JUMP_MARGIN + 1)],
        "the standby follows the outbound ceiling as it arrives"
    );
    let st = b.status(t1.at);
    assert_eq!((st.synced_out, st.synced_in, st.synced_ike_sas), (1, 1, 1));
    assert!(st.up);

    // Two seconds later VRRP makes b master.
    let t2 = t1.after(Duration::from_secs(2));
    let acts = b.handle(t2, Event::TakeOver, &bb, &mut br);
    let floor = takeover_floor(5_000, PPS, Duration::from_secs(2));
    assert!(floor > 5_000 + JUMP_MARGIN + 2 * PPS);
    let mut calls = bb.calls();
    calls.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(
        calls,
        vec![
            Call::Adopt(KeyId([2; 32]), 700),
            Call::MaxPps(PPS),
            Call::TakeOver(KeyId([1; 32]), floor),
        ]
    );
    let adoption = acts.iter().find_map(|a| match a {
        Action::Ike(ToIke::Adopt(x)) => Some(x),
        _ => None,
    });
    let adoption = adoption.expect("the IKE thread gets the shadow");
    assert_eq!(adoption.shadow["t0"].len(), 1);
    assert_eq!(adoption.words.by_key.len(), 2);
    assert!(acts.iter().any(|a| matches!(
        a,
        Action::Ike(ToIke::Role {
            may_send: true,
            backup: false
        })
    )));
    assert!(
        !taken_over(&acts),
        "the addresses wait for the IKE thread to key the adopted child SAs"
    );
    let acts = b.handle(t2, Event::IkeAdopted, &bb, &mut br);
    assert!(taken_over(&acts));
    let st = b.status(t2.at);
    assert_eq!(st.takeovers, 1);
    assert_eq!(st.last_takeover, Some((t2.wall_ms, 2)));
    assert_eq!((st.adopted_ike_sas, st.synced_ike_sas), (1, 0));

    // A child SA of the adopted IKE SA attaches afterwards: the IKE
    // thread starts it past the floor too.
    let moved = adoption
        .words
        .take_over(&KeyId([1; 32]), &bb, t2.after(Duration::from_millis(1)));
    assert!(matches!(moved, Moved::Moved { next, .. } if next >= floor));
}

/// An IKE thread that never answers does not hold the addresses back
/// longer than [`IKE_ADOPT_WAIT`].
#[test]
fn takeover_does_not_wait_for_ike_forever() {
    let (ab, bb) = (Book::default(), Book::default());
    let (mut ar, mut br) = (Run::default(), Run::default());
    let (mut a, t0) = elected_active(Now::read(), &ab, &mut ar);
    let mut b = syncer(B, A, epoch(t0.wall_ms, 2));
    let d = sends(&a.handle(
        t0,
        Event::IkeSas {
            tunnel: "t0".into(),
            sas: vec![IkeSaRepr {
                spi_i: 1,
                spi_r: 2,
                state: Zeroizing::new(vec![9; 40]),
            }],
        },
        &ab,
        &mut ar,
    ));
    deliver(&mut b, t0, A, &d, &bb, &mut br);
    assert!(!taken_over(&b.handle(t0, Event::TakeOver, &bb, &mut br)));
    assert_eq!(b.next_deadline(), None, "nothing sent yet: poll at once");
    assert!(!taken_over(&b.poll(t0, &bb, &mut br)));
    assert!(b
        .next_deadline()
        .is_some_and(|t| t <= t0.at + IKE_ADOPT_WAIT));
    assert!(taken_over(&b.poll(t0.after(IKE_ADOPT_WAIT), &bb, &mut br)));
}

/// A datagram of an epoch older than the peer's current one (sent before
/// it restarted, delayed or replayed) changes nothing, nor does a
/// datagram replayed within the current epoch.
#[test]
fn a_stale_epoch_and_a_replay_change_nothing() {
    let (ab, bb) = (Book::default(), Book::default());
    let (mut ar, mut br) = (Run::default(), Run::default());
    let (mut old, t0) = elected_active(Now::read(), &ab, &mut ar);
    *ab.sas.borrow_mut() = vec![out_sa(1, 0x1001, 90_000)];
    let stale = sends(&old.poll(t0, &ab, &mut ar));

    // The active restarts: a new epoch, its ceilings from disk.
    let t1 = t0.after(Duration::from_secs(1));
    let mut new = syncer(A, B, epoch(t1.wall_ms, 3));
    assert!(new.handle(t1, Event::TakeOver, &ab, &mut ar).is_empty());
    assert!(taken_over(&new.poll(
        t1.after(new.config().dead_interval()),
        &ab,
        &mut ar
    )));
    *ab.sas.borrow_mut() = vec![out_sa(1, 0x1001, 100_000)];
    let t2 = t1.after(Duration::from_secs(1));
    let fresh = sends(&new.poll(t2, &ab, &mut ar));

    let mut b = syncer(B, A, epoch(t0.wall_ms, 2));
    deliver(&mut b, t2, A, &fresh, &bb, &mut br);
    assert_eq!(
        bb.calls(),
        vec![Call::Follow(KeyId([1; 32]), 100_000 + JUMP_MARGIN + 1)]
    );
    deliver(&mut b, t2, A, &stale, &bb, &mut br);
    assert_eq!(rejected(&b, t2, "stale_epoch"), stale.len() as u64);
    deliver(&mut b, t2, A, &fresh, &bb, &mut br);
    assert_eq!(rejected(&b, t2, "replay"), fresh.len() as u64);
    assert!(bb.calls().is_empty(), "neither moved anything");
    assert_eq!(b.words().by_key[&KeyId([1; 32])].ceiling, 100_000);
    assert_eq!(b.status(t2.at).received, fresh.len() as u64);
}

/// Our own datagram coming back (a loop on the sync link, or an attacker
/// reflecting it) is recognised by its epoch and changes nothing; so is
/// one from anywhere but the peer's address.
#[test]
fn a_reflected_message_changes_nothing() {
    let (ab, bb) = (Book::default(), Book::default());
    let (mut ar, mut br) = (Run::default(), Run::default());
    let (mut a, t0) = elected_active(Now::read(), &ab, &mut ar);
    *ab.sas.borrow_mut() = vec![out_sa(1, 0x1001, 5_000)];
    let own = sends(&a.poll(t0, &ab, &mut ar));
    deliver(&mut a, t0, B, &own, &ab, &mut ar);
    assert_eq!(rejected(&a, t0, "reflected"), own.len() as u64);
    let mut b = syncer(B, A, epoch(t0.wall_ms, 2));
    deliver(&mut b, t0, "192.0.2.9:7000", &own, &bb, &mut br);
    assert_eq!(rejected(&b, t0, REJECT_SOURCE), own.len() as u64);
    assert!(ab.calls().is_empty() && bb.calls().is_empty());
    assert!(!b.status(t0.at).up, "neither counts as the peer's word");
}

/// The message carrying the active's newest ceiling is lost (the active
/// reserved a bucket's worth and more since its last word that arrived,
/// then died): the floor the standby takes over at is still above
/// anything the active could have reserved by then.
#[test]
fn a_lost_message_is_covered_by_the_floor() {
    let (ab, bb) = (Book::default(), Book::default());
    let (mut ar, mut br) = (Run::default(), Run::default());
    let (mut a, t0) = elected_active(Now::read(), &ab, &mut ar);
    let mut b = syncer(B, A, epoch(t0.wall_ms, 2));
    *bb.sas.borrow_mut() = vec![out_sa(1, 0x1001, 10)];
    *ab.sas.borrow_mut() = vec![out_sa(1, 0x1001, 5_000)];
    let d = sends(&a.poll(t0, &ab, &mut ar));
    deliver(&mut b, t0, A, &d, &bb, &mut br);
    // 300 ms later the active reserves all it may: its full bucket plus
    // the rate since. That message is lost.
    let t1 = t0.after(Duration::from_millis(300));
    let c1 = 5_000 + JUMP_MARGIN + PPS * 3 / 10;
    *ab.sas.borrow_mut() = vec![out_sa(1, 0x1001, c1)];
    let lost = sends(&a.handle(t1, Event::Reserved(out_sa(1, 0x1001, c1)), &ab, &mut ar));
    assert_eq!(lost.len(), 1, "sent as soon as it is durable");
    bb.calls();
    // The standby takes over 2 s after the last word it heard.
    let t2 = t0.after(Duration::from_secs(2));
    assert!(taken_over(&b.handle(t2, Event::TakeOver, &bb, &mut br)));
    let to = bb
        .calls()
        .into_iter()
        .find_map(|c| match c {
            Call::TakeOver(_, to) => Some(to),
            _ => None,
        })
        .unwrap();
    let reachable = 5_000 + JUMP_MARGIN + PPS * 2;
    assert!(
        to > reachable && to > c1,
        "floor {to}, the active reached at most {reachable}"
    );
}

/// Static routes and tunnels follow the active's: what the standby lacks
/// is added, what it has beyond the active's is removed, through the
/// running configuration's own calls; an unchanged set is not applied
/// again.
#[test]
fn routes_and_tunnels_follow_the_active() {
    let (ab, bb) = (Book::default(), Book::default());
    let route = |vrf: &str, prefix: &str, via: &str| RouteRepr {
        vrf: vrf.into(),
        prefix: prefix.into(),
        via: via.into(),
    };
    let mut br = Run {
        routes: vec![
            route("default", "10.1.0.0/16", "192.0.2.8"),
            route("default", "10.9.0.0/16", "192.0.2.9"),
        ],
        tunnels: vec!["g0|gre 8".into(), "old|gre 1".into()],
    };
    let mut ar = Run::default();
    let (mut a, t0) = elected_active(Now::read(), &ab, &mut ar);
    // The active's sets change after it started: sent at its next
    // interval.
    ar = Run {
        routes: vec![
            route("default", "10.1.0.0/16", "192.0.2.9"),
            route("t1", "10.2.0.0/16", "g0"),
        ],
        tunnels: vec!["g0|gre 7".into(), "x0|vxlan 5000".into()],
    };
    let mut b = syncer(B, A, epoch(t0.wall_ms, 2));
    let d = sends(&a.poll(t0, &ab, &mut ar));
    deliver(&mut b, t0, A, &d, &bb, &mut br);
    let (mut want, mut have) = (ar.routes.clone(), br.routes.clone());
    want.sort();
    have.sort();
    assert_eq!(have, want);
    let (mut want, mut have) = (ar.tunnels.clone(), br.tunnels.clone());
    want.sort();
    have.sort();
    assert_eq!(have, want);
    let st = b.status(t0.at);
    assert_eq!(
        (st.synced_routes, st.route_changes, st.route_errors),
        (2, 4, 0)
    );
    assert_eq!(
        (st.synced_tunnels, st.tunnel_changes, st.tunnel_errors),
        (2, 4, 0)
    );
    // The active's next interval sends only its SA state; its periodic
    // resend of the sets changes nothing.
    let t1 = t0.after(Duration::from_millis(100));
    let d = sends(&a.poll(t1, &ab, &mut ar));
    assert_eq!(d.len(), 1, "only the SA state: the sets are unchanged");
    let mut resent = false;
    for i in 2..=ROUTES_EVERY {
        let t = t0.after(Duration::from_millis(100) * i);
        let d = sends(&a.poll(t, &ab, &mut ar));
        resent |= d.len() > 1;
        deliver(&mut b, t, A, &d, &bb, &mut br);
    }
    assert!(resent, "the sets are resent every {ROUTES_EVERY} intervals");
    let st = b.status(t1.at);
    assert_eq!((st.route_changes, st.tunnel_changes), (4, 4));
}

/// VRRP steps down: while draining after a switchover the sync still
/// sends; once fully backup it keeps the peer's state, unbounds the SAs
/// and tells the IKE thread the SAs are the active's.
#[test]
fn stepping_down_tells_the_ike_thread() {
    let (ab, mut ar) = (Book::default(), Run::default());
    let (mut a, t0) = elected_active(Now::read(), &ab, &mut ar);
    let acts = a.handle(
        t0,
        Event::Role {
            elected: false,
            draining: true,
        },
        &ab,
        &mut ar,
    );
    assert!(a.master(), "draining still sends");
    assert!(matches!(
        acts.as_slice(),
        [Action::Ike(ToIke::Role {
            may_send: false,
            backup: false
        })]
    ));
    assert!(ab.calls().is_empty());
    let acts = a.handle(
        t0,
        Event::Role {
            elected: false,
            draining: false,
        },
        &ab,
        &mut ar,
    );
    assert!(!a.master());
    assert_eq!(ab.calls(), vec![Call::MaxPps(0)]);
    assert!(matches!(
        acts.as_slice(),
        [Action::Ike(ToIke::Role {
            may_send: false,
            backup: true
        })]
    ));
}

/// A small deterministic generator (no dev-dependency for one test).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below.max(1)
    }
}

/// No overflow at the extremes, never below the bound's terms, monotonic
/// in each argument.
#[test]
fn takeover_floor_bounds_and_monotonic() {
    assert_eq!(
        takeover_floor(u64::MAX, u64::MAX, Duration::MAX / 2),
        u64::MAX
    );
    assert_eq!(
        takeover_floor(0, 0, Duration::ZERO),
        2 * JUMP_MARGIN + 1,
        "no rate: the margins alone"
    );
    // 2^21/s for 1 s of slack + 2 s since.
    assert_eq!(
        takeover_floor(1000, 1 << 21, Duration::from_secs(2)),
        1000 + 2 * JUMP_MARGIN + 3 * (1 << 21) + 1
    );
    let mut g = Lcg(7);
    for _ in 0..20_000 {
        let c = g.next(1 << 40);
        let r = g.next(1 << 31);
        let ms = g.next(1 << 32);
        let f = takeover_floor(c, r, Duration::from_millis(ms));
        let exact = u128::from(c)
            + 2 * u128::from(JUMP_MARGIN)
            + u128::from(r) * u128::from(ms + 1000) / 1000;
        assert!(u128::from(f) > exact.min(u128::from(u64::MAX) - 1));
        assert!(takeover_floor(c + 1, r, Duration::from_millis(ms)) >= f);
        assert!(takeover_floor(c, r + 1, Duration::from_millis(ms)) >= f);
        assert!(takeover_floor(c, r, Duration::from_millis(ms + 1)) >= f);
    }
    // Past 2^32 - 1 (no ESN): a 2^21/s SA silent for 35 minutes.
    assert!(takeover_floor(1 << 20, 1 << 21, Duration::from_secs(35 * 60)) > u64::from(u32::MAX));
}

/// The bucket and the floor together: an active that reserves as fast
/// as its bucket lets it (greedy, random demand and tick lengths) never
/// reaches, by any moment, the floor the standby computes from any
/// ceiling it reported earlier, with the time since then as the standby
/// measures it (here exactly; the slack covers skew).
#[test]
fn bucketed_active_never_reaches_the_standby_floor() {
    let rate = 1u64 << 21;
    let mut g = Lcg(42);
    for run in 0..200 {
        let t0 = Instant::now();
        let mut now = t0;
        // Start full: the worst case of a long-idle SA.
        let mut b = Bucket::empty(t0 - Duration::from_secs(100));
        b.refill(t0, rate);
        let mut ceiling = g.next(1 << 30);
        // (time, ceiling) of every report the standby could hold.
        let mut reports = vec![(t0, ceiling)];
        for _ in 0..(200 + run) {
            now += Duration::from_millis(1 + g.next(300));
            b.refill(now, rate);
            let want = ceiling + g.next(1 << 27);
            if let Some(to) = b.grant(ceiling, want) {
                b.spend(to - ceiling);
                ceiling = to;
            }
            if g.next(4) == 0 {
                reports.push((now, ceiling));
            }
            for &(t, c) in &reports {
                let floor = takeover_floor(c, rate, now - t);
                assert!(
                    floor > ceiling,
                    "run {run}: report {c} at +{:?}, active at {ceiling} at +{:?}, floor {floor}",
                    t - t0,
                    now - t0
                );
            }
        }
    }
}
