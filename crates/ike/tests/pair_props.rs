//! Random sequences of events through an initiator–responder pair
//! (proptest): datagrams delivered, dropped, replayed, reordered,
//! truncated or bit-flipped, timers advanced, exchanges requested. After
//! every step: no panic, each side's message IDs only grow per IKE SA and
//! direction (RFC 7296 §2.2), and input that failed authentication
//! (truncated, flipped) or was already processed (a replay) changed no
//! IKE or child SA and installed or removed nothing.

use proptest::prelude::*;
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use vecgate_ike::message::Header;
use vecgate_ike::{Action, Event, Ike, IkeConfig};

#[derive(Debug, Clone)]
enum Ev {
    Deliver,
    Drop,
    /// Deliver again the n-th datagram delivered so far.
    Replay(usize),
    Reorder,
    Truncate(usize),
    Flip(usize, u8),
    Advance(u64),
    Api(bool, u8),
}

fn ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        6 => Just(Ev::Deliver),
        1 => Just(Ev::Drop),
        2 => any::<usize>().prop_map(Ev::Replay),
        1 => Just(Ev::Reorder),
        1 => any::<usize>().prop_map(Ev::Truncate),
        2 => (any::<usize>(), 1u8..).prop_map(|(a, b)| Ev::Flip(a, b)),
        2 => (0u64..40_000).prop_map(Ev::Advance),
        2 => (any::<bool>(), any::<u8>()).prop_map(|(a, b)| Ev::Api(a, b)),
    ]
}

struct Datagram {
    from_a: bool,
    local: SocketAddr,
    remote: SocketAddr,
    data: Vec<u8>,
}

fn config(a: bool, frag: bool) -> IkeConfig {
    let (me, peer) = ("192.0.2.1:500", "192.0.2.2:500");
    let (l, r) = if a { (me, peer) } else { (peer, me) };
    let mut c = IkeConfig::new(l.parse().unwrap(), r.parse().unwrap(), b"prop-psk");
    c.ike_proposals = IkeConfig::parse_ike_proposals(&["aes128gcm16-prfsha256-x25519"]).unwrap();
    c.esp_proposals = IkeConfig::parse_esp_proposals(&["aes128gcm16-x25519"]).unwrap();
    let (lt, rt) = if a {
        ("10.1.0.0/16", "10.2.0.0/16")
    } else {
        ("10.2.0.0/16", "10.1.0.0/16")
    };
    c.local_ts = vec![lt.parse().unwrap()];
    c.remote_ts = vec![rt.parse().unwrap()];
    c.initiate = a;
    c.fragment_size = frag.then_some(200);
    c.dpd_interval = Some(Duration::from_secs(10));
    c.dpd_timeout = Some(Duration::from_secs(30));
    c.reconnect_delay = Some(Duration::from_secs(3));
    c.child_rekey_time = Some(Duration::from_secs(60));
    c.ike_rekey_time = Some(Duration::from_secs(120));
    c
}

/// Established IKE SAs (SPIi, SPIr) and children (SPI in, SPI out).
type Snapshot = (Vec<(u64, u64)>, Vec<(u32, u32)>);

/// What authenticated input may change: established IKE SAs, children.
fn snapshot(ike: &Ike) -> Snapshot {
    (ike.ike_sas(), ike.child_sas())
}

struct Side {
    ike: Ike,
    /// Highest message ID sent per (SPIi, SPIr, response).
    ids: HashMap<(u64, u64, bool), u32>,
    installed: HashSet<u32>,
}

impl Side {
    /// Drains actions into `flight`; fails on a message ID going back or
    /// a child SPI installed twice. Returns whether any SA-changing
    /// action came out.
    fn drain(&mut self, from_a: bool, flight: &mut VecDeque<Datagram>) -> Result<bool, String> {
        let mut changed = false;
        while let Some(a) = self.ike.poll_action() {
            match a {
                Action::Send {
                    local,
                    remote,
                    data,
                } => {
                    // RFC 3948 §2.2: on the NAT-T port after a marker.
                    let msg = if local.port() == 4500 {
                        vecgate_ike::state::strip_marker(&data).ok_or("ESP sent by IKE")?
                    } else {
                        &data[..]
                    };
                    let h = Header::parse(msg).map_err(|e| format!("we sent junk: {e}"))?;
                    let key = (h.spi_i, h.spi_r, h.is_response());
                    let last = self.ids.entry(key).or_insert(h.msg_id);
                    if h.msg_id < *last {
                        return Err(format!("message ID went back: {} after {last}", h.msg_id));
                    }
                    *last = h.msg_id;
                    if flight.len() < 64 {
                        flight.push_back(Datagram {
                            from_a,
                            local,
                            remote,
                            data,
                        });
                    }
                }
                Action::InstallChild(k) => {
                    changed = true;
                    if !self.installed.insert(k.spi_in) {
                        return Err(format!("child {:08x} installed twice", k.spi_in));
                    }
                }
                Action::RemoveChild { .. } => changed = true,
                Action::Event(
                    Event::IkeEstablished { .. }
                    | Event::ChildEstablished { .. }
                    | Event::ChildRekeyed { .. }
                    | Event::IkeRekeyed { .. },
                ) => changed = true,
                Action::Event(_) => {}
            }
        }
        Ok(changed)
    }
}

/// Runs `events`; returns whether each side ended with an IKE SA and a
/// child SA.
fn run(events: &[Ev], frag: bool) -> Result<(bool, bool), String> {
    let mk = |a| Side {
        ike: Ike::new(config(a, frag)).unwrap(),
        ids: HashMap::new(),
        installed: HashSet::new(),
    };
    let (mut a, mut b) = (mk(true), mk(false));
    let mut now = Instant::now();
    let mut flight = VecDeque::new();
    let mut delivered: Vec<Datagram> = Vec::new();
    a.ike.initiate(now).map_err(|e| e.to_string())?;
    a.drain(true, &mut flight)?;
    for e in events {
        // Deliveries of unauthenticated or already processed input:
        // (receiver is a, data); nothing may change.
        let mut suspect: Option<(bool, Vec<u8>, SocketAddr, SocketAddr)> = None;
        match e {
            Ev::Deliver => {
                if let Some(d) = flight.pop_front() {
                    let to = if d.from_a { &mut b } else { &mut a };
                    to.ike.handle_datagram(&d.data, d.remote, d.local, now);
                    delivered.push(d);
                }
            }
            Ev::Drop => {
                flight.pop_front();
            }
            Ev::Reorder => flight.rotate_left(1.min(flight.len())),
            Ev::Replay(i) if !delivered.is_empty() => {
                let d = &delivered[i % delivered.len()];
                suspect = Some((!d.from_a, d.data.clone(), d.remote, d.local));
            }
            Ev::Replay(_) => {}
            Ev::Truncate(n) => {
                if let Some(d) = flight.pop_front() {
                    let n = n % d.data.len().max(1);
                    suspect = Some((!d.from_a, d.data[..n].to_vec(), d.remote, d.local));
                }
            }
            Ev::Flip(at, x) => {
                if let Some(d) = flight.pop_front() {
                    let mut m = d.data.clone();
                    let l = m.len();
                    if l > 0 {
                        m[at % l] ^= x;
                    }
                    suspect = Some((!d.from_a, m, d.remote, d.local));
                }
            }
            Ev::Advance(ms) => {
                now += Duration::from_millis(*ms);
                a.ike.handle_timeout(now);
                b.ike.handle_timeout(now);
            }
            Ev::Api(on_b, k) => {
                let s = if *on_b { &mut b } else { &mut a };
                let child = s.ike.child_sas().first().map(|c| c.0);
                match (k % 5, child) {
                    (0, _) => s.ike.create_child(now),
                    (1, _) => s.ike.rekey_ike(now),
                    (2, Some(c)) => s.ike.rekey_child(c, now),
                    (3, Some(c)) => s.ike.delete_child(c, now),
                    (4, _) => s.ike.delete_ike(now),
                    _ => {}
                }
            }
        }
        if let Some((to_a, data, local, remote)) = suspect {
            // A replay of a datagram whose first delivery was refused
            // (it came too early) is a first delivery: judged like one.
            let to = if to_a { &mut a } else { &mut b };
            let before = snapshot(&to.ike);
            // Flush what was pending so that only this input is judged.
            let pending_changed = to.drain(!to_a, &mut flight)?;
            to.ike.handle_datagram(&data, local, remote, now);
            let replay = matches!(e, Ev::Replay(_));
            let changed = to.drain(!to_a, &mut flight)?;
            let after = snapshot(&to.ike);
            if !replay && (changed || before != after) && !pending_changed {
                return Err(format!(
                    "{e:?} to {} changed SA state: {before:?} -> {after:?}",
                    if to_a { "initiator" } else { "responder" }
                ));
            }
        }
        a.drain(true, &mut flight)?;
        b.drain(false, &mut flight)?;
        let _ = (a.ike.next_timeout(), b.ike.next_timeout());
    }
    let up = |s: &Side| s.ike.is_established() && !s.ike.child_sas().is_empty();
    Ok((up(&a), up(&b)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_event_sequences_keep_the_invariants(
        events in proptest::collection::vec(ev(), 0..200),
        frag in any::<bool>(),
    ) {
        if let Err(e) = run(&events, frag) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The honest path the random sequences start from really establishes
/// (the invariants are not vacuous).
#[test]
fn delivering_everything_establishes_both_sides() {
    let events = vec![Ev::Deliver; 16];
    assert_eq!(run(&events, false).unwrap(), (true, true));
    assert_eq!(run(&events, true).unwrap(), (true, true));
}
