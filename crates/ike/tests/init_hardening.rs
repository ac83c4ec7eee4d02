//! An unauthenticated IKE_SA_INIT must be cheap to refuse and must not
//! touch any tunnel's state (RFC 7296 §2.6): the peer's KE is validated
//! before we generate a key pair, INITs count as half-open (for cookies)
//! before any DH, and an unacceptable proposal is a counter, not a
//! failure of the tunnel.

use std::net::SocketAddr;
use std::time::{Duration, Instant};
use vecgate_ike::crypto::dh_keys_generated;
use vecgate_ike::message::Message;
use vecgate_ike::payload::{notify, Payload};
use vecgate_ike::{Action, Ike, IkeConfig, InitDrop};

const A: &str = "192.0.2.1:500";
const B: &str = "192.0.2.2:500";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn cfg(local: &str, remote: &str, ike: &str) -> IkeConfig {
    let mut c = IkeConfig::new(addr(local), addr(remote), b"psk");
    c.ike_proposals = IkeConfig::parse_ike_proposals(&[ike]).unwrap();
    c.esp_proposals = IkeConfig::parse_esp_proposals(&["aes128gcm16"]).unwrap();
    c.local_ts = vec!["10.1.0.0/16".parse().unwrap()];
    c.remote_ts = vec!["10.2.0.0/16".parse().unwrap()];
    c
}

/// A fresh initiator's IKE_SA_INIT request.
fn init(ike: &str) -> Vec<u8> {
    let mut a = Ike::new(cfg(A, B, ike)).unwrap();
    a.initiate(Instant::now()).unwrap();
    match a.poll_action() {
        Some(Action::Send { data, .. }) => data,
        other => panic!("no INIT: {other:?}"),
    }
}

/// `init` with its KE data replaced.
fn with_ke(msg: &[u8], ke: Vec<u8>) -> Vec<u8> {
    let mut m = Message::parse_plain(msg).unwrap();
    for p in &mut m.payloads {
        if let Payload::Ke { data, .. } = p {
            *data = ke.clone();
        }
    }
    m.build_plain().unwrap()
}

fn actions(ike: &mut Ike) -> Vec<Action> {
    std::iter::from_fn(|| ike.poll_action()).collect()
}

/// The MODP-2048 prime minus one (RFC 3526 §3), a forbidden public value.
fn modp_p_minus_1() -> Vec<u8> {
    let hex = "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF";
    let mut p: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    p[255] -= 1;
    p
}

#[test]
fn an_invalid_ke_is_refused_before_any_key_pair_is_generated() {
    let mut one = vec![0u8; 256];
    one[255] = 1;
    let mut low_order = [0u8; 32];
    low_order[0] = 1;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("aes128-sha256-modp2048", one),
        ("aes128-sha256-modp2048", modp_p_minus_1()),
        ("aes128-sha256-modp2048", vec![0xff; 256]),
        ("aes128-sha256-modp2048", vec![7; 255]),
        ("aes128-sha256-x25519", vec![0; 32]),
        ("aes128-sha256-x25519", low_order.to_vec()),
        ("aes128-sha256-x25519", vec![9; 31]),
    ];
    for (suite, ke) in cases {
        let mut b = Ike::new(cfg(B, A, suite)).unwrap();
        let msg = with_ke(&init(suite), ke.clone());
        let before = dh_keys_generated();
        b.handle_datagram(&msg, addr(B), addr(A), Instant::now());
        assert_eq!(
            dh_keys_generated(),
            before,
            "{suite} KE {ke:02x?}: a key pair was generated"
        );
        assert!(!b.has_sa(), "{suite}: half-open SA for an invalid KE");
        assert!(
            actions(&mut b).is_empty(),
            "{suite}: answered an invalid KE"
        );
        assert_eq!(b.dropped().0, 1);
    }
    // A valid one still costs exactly one key pair and gets its answer.
    let mut b = Ike::new(cfg(B, A, "aes128-sha256-modp2048")).unwrap();
    let msg = init("aes128-sha256-modp2048");
    let before = dh_keys_generated();
    b.handle_datagram(&msg, addr(B), addr(A), Instant::now());
    assert_eq!(dh_keys_generated(), before + 1);
    assert!(b.has_sa());
}

#[test]
fn inits_with_an_invalid_ke_count_as_half_open_for_cookies() {
    let suite = "aes128-sha256-x25519";
    let mut c = cfg(B, A, suite);
    c.cookie_threshold = 2;
    let mut b = Ike::new(c).unwrap();
    let now = Instant::now();
    // Two spoofed INITs whose KE is invalid: no SA, but they were let
    // through the cookie check and count as half-open.
    for _ in 0..2 {
        b.handle_datagram(&with_ke(&init(suite), vec![0; 32]), addr(B), addr(A), now);
    }
    assert!(!b.has_sa());
    // The next INIT, valid but without a cookie, is asked for one.
    b.handle_datagram(&init(suite), addr(B), addr(A), now);
    let sent: Vec<Message> = actions(&mut b)
        .into_iter()
        .filter_map(|a| match a {
            Action::Send { data, .. } => Message::parse_plain(&data).ok(),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].notify(notify::COOKIE).is_some(), "{:?}", sent[0]);
    assert!(!b.has_sa());
}

#[test]
fn an_unacceptable_proposal_is_counted_not_a_tunnel_failure() {
    let mut b = Ike::new(cfg(B, A, "aes256gcm16-prfsha256-x25519")).unwrap();
    for n in 1..=3 {
        b.handle_datagram(
            &init("aes128-sha1-modp2048"),
            addr(B),
            addr(A),
            Instant::now(),
        );
        let acts = actions(&mut b);
        assert!(
            acts.iter().all(|a| matches!(a, Action::Send { .. })),
            "state or events changed by an unauthenticated INIT: {acts:?}"
        );
        let Some(Action::Send { data, .. }) = acts.first() else {
            panic!("no answer");
        };
        let m = Message::parse_plain(data).unwrap();
        assert!(m.notify(notify::NO_PROPOSAL_CHOSEN).is_some());
        assert_eq!(b.refused_inits(), n);
        assert!(!b.has_sa());
    }
}

/// `msg` (an INIT request) sent again with `cookie` as its first payload,
/// as RFC 7296 §2.6 has the initiator do.
fn with_cookie(msg: &[u8], cookie: &[u8]) -> Vec<u8> {
    let mut m = Message::parse_plain(msg).unwrap();
    m.payloads.insert(
        0,
        Payload::Notify(vecgate_ike::payload::Notify::new(
            notify::COOKIE,
            cookie.to_vec(),
        )),
    );
    m.build_plain().unwrap()
}

/// The messages `ike` sent, parsed.
fn sent(ike: &mut Ike) -> Vec<Message> {
    actions(ike)
        .into_iter()
        .filter_map(|a| match a {
            Action::Send { data, .. } => Message::parse_plain(&data).ok(),
            _ => None,
        })
        .collect()
}

fn cookie_of(m: &Message) -> Option<Vec<u8>> {
    m.notify(notify::COOKIE).map(|n| n.data.clone())
}

const SUITE: &str = "aes128-sha256-x25519";

#[test]
fn inits_from_anyone_but_the_configured_peer_cost_nothing() {
    let mut b = Ike::new(cfg(B, A, SUITE)).unwrap();
    let msgs: Vec<Vec<u8>> = (0..50).map(|_| init(SUITE)).collect();
    let before = dh_keys_generated();
    for (i, m) in msgs.iter().enumerate() {
        let from = addr(&format!("203.0.113.{i}:500"));
        b.handle_datagram(m, addr(B), from, Instant::now());
    }
    assert_eq!(dh_keys_generated(), before, "DH for a stranger");
    assert!(actions(&mut b).is_empty(), "answered a stranger");
    assert!(!b.has_sa());
    let s = b.init_stats();
    assert_eq!(s.dropped_for(InitDrop::UnknownPeer), 50);
    assert_eq!((s.received, s.cookies_sent, s.half_open), (50, 0, 0));
    // The configured peer is served.
    b.handle_datagram(&init(SUITE), addr(B), addr(A), Instant::now());
    assert!(b.has_sa());
    assert_eq!(b.init_stats().half_open, 1);
}

#[test]
fn cookies_start_when_inits_come_too_fast() {
    let mut c = cfg(B, "0.0.0.0:500", SUITE);
    c.cookie_threshold = 1000;
    c.cookie_threshold_ip = 1000;
    c.half_open_per_source = 1000;
    c.cookie_rate = 5;
    let mut b = Ike::new(c).unwrap();
    let t0 = Instant::now();
    let from = |i: u32| addr(&format!("198.51.100.{}:500", i % 250 + 1));
    // Five within a second: served.
    for i in 0..5 {
        b.handle_datagram(&init(SUITE), addr(B), from(i), t0);
        let out = sent(&mut b);
        assert_eq!(out.len(), 1);
        assert!(cookie_of(&out[0]).is_none(), "cookie below the rate");
    }
    assert_eq!(b.init_stats().half_open, 5);
    // The sixth within the same second is asked for a cookie; no state.
    let msg = init(SUITE);
    b.handle_datagram(&msg, addr(B), from(5), t0);
    let out = sent(&mut b);
    let cookie = cookie_of(&out[0]).expect("no cookie above the rate");
    assert_eq!(b.init_stats().half_open, 5);
    assert_eq!(b.init_stats().cookies_sent, 1);
    // Returning the cookie proves the address: state is spent.
    b.handle_datagram(&with_cookie(&msg, &cookie), addr(B), from(5), t0);
    assert!(cookie_of(&sent(&mut b)[0]).is_none());
    assert_eq!(b.init_stats().half_open, 6);
    // A second later the rate is back under the limit.
    let t1 = t0 + std::time::Duration::from_millis(1100);
    b.handle_datagram(&init(SUITE), addr(B), from(6), t1);
    assert!(cookie_of(&sent(&mut b)[0]).is_none());
}

#[test]
fn one_source_gets_cookies_then_is_limited_others_are_not() {
    let mut c = cfg(B, "0.0.0.0:500", SUITE);
    c.cookie_threshold_ip = 2;
    c.half_open_per_source = 3;
    let mut b = Ike::new(c).unwrap();
    let now = Instant::now();
    let src = addr("198.51.100.7:500");
    for _ in 0..2 {
        b.handle_datagram(&init(SUITE), addr(B), src, now);
        assert!(cookie_of(&sent(&mut b)[0]).is_none());
    }
    // Third from that address: cookie first; with it, served (3 of 3).
    let msg = init(SUITE);
    b.handle_datagram(&msg, addr(B), src, now);
    let cookie = cookie_of(&sent(&mut b)[0]).expect("per-source cookie");
    b.handle_datagram(&with_cookie(&msg, &cookie), addr(B), src, now);
    assert!(cookie_of(&sent(&mut b)[0]).is_none());
    assert_eq!(b.init_stats().half_open, 3);
    // Fourth, even with its cookie: the per-source limit drops it.
    let msg = init(SUITE);
    b.handle_datagram(&msg, addr(B), src, now);
    let cookie = cookie_of(&sent(&mut b)[0]).expect("per-source cookie");
    let again = with_cookie(&msg, &cookie);
    let before = dh_keys_generated();
    b.handle_datagram(&again, addr(B), src, now);
    assert!(sent(&mut b).is_empty());
    assert_eq!(dh_keys_generated(), before);
    assert_eq!(b.init_stats().dropped_for(InitDrop::SourceLimit), 1);
    // Another address is not affected.
    b.handle_datagram(&init(SUITE), addr(B), addr("198.51.100.8:500"), now);
    assert!(cookie_of(&sent(&mut b)[0]).is_none());
    assert_eq!(b.init_stats().half_open, 4);
    // Half-open SAs expire (30 s): the source is served again.
    let later = now + std::time::Duration::from_secs(31);
    b.handle_timeout(later);
    b.handle_datagram(&init(SUITE), addr(B), src, later);
    assert!(cookie_of(&sent(&mut b)[0]).is_none());
    assert_eq!(b.init_stats().half_open, 1);
}

/// Delivers every datagram between `a` and `b` until both are quiet.
fn pump(a: &mut Ike, b: &mut Ike, now: Instant) -> Vec<vecgate_ike::Event> {
    let mut events = Vec::new();
    for _ in 0..100 {
        let mut moved = false;
        for a_to_b in [true, false] {
            let (src, dst) = if a_to_b {
                (&mut *a, &mut *b)
            } else {
                (&mut *b, &mut *a)
            };
            while let Some(act) = src.poll_action() {
                moved = true;
                match act {
                    Action::Send {
                        local,
                        remote,
                        data,
                    } => dst.handle_datagram(&data, remote, local, now),
                    Action::Event(e) => events.push(e),
                    _ => {}
                }
            }
        }
        if !moved {
            return events;
        }
    }
    panic!("no quiescence");
}

#[test]
fn half_open_sas_have_their_own_account_and_never_block_a_rekey() {
    // B serves any peer and asks no cookies, so a flood of INITs from
    // many addresses fills its half-open account.
    let mut cb = cfg(B, "0.0.0.0:500", SUITE);
    cb.cookie_threshold = usize::MAX;
    cb.cookie_threshold_ip = usize::MAX;
    cb.cookie_rate = u32::MAX;
    cb.remote_id = vecgate_ike::Identity::from_text("192.0.2.1");
    let mut b = Ike::new(cb).unwrap();
    let mut ca = cfg(A, B, SUITE);
    ca.initiate = true;
    let mut a = Ike::new(ca).unwrap();
    let now = Instant::now();
    a.initiate(now).unwrap();
    pump(&mut a, &mut b, now);
    assert!(a.is_established() && b.is_established());
    let mut n = 0u32;
    while b.init_stats().dropped_for(InitDrop::HalfOpenFull) == 0 {
        let from = addr(&format!("198.51.{}.{}:500", n / 250, n % 250 + 1));
        b.handle_datagram(&init(SUITE), addr(B), from, now);
        let _ = actions(&mut b);
        n += 1;
        assert!(n < 1000, "the half-open account never filled");
    }
    assert_eq!(b.init_stats().half_open, vecgate_ike::MAX_HALF_OPEN);
    assert_eq!(n as usize, vecgate_ike::MAX_HALF_OPEN + 1);
    // Rekeys by either side go through, twice each.
    for round in 0..2 {
        a.rekey_ike(now);
        let ev = pump(&mut a, &mut b, now);
        assert!(
            ev.iter()
                .any(|e| matches!(e, vecgate_ike::Event::IkeRekeyed { .. })),
            "round {round}: A's rekey failed: {ev:?}"
        );
        b.rekey_ike(now);
        let ev = pump(&mut b, &mut a, now);
        assert!(
            ev.iter()
                .any(|e| matches!(e, vecgate_ike::Event::IkeRekeyed { .. })),
            "round {round}: B's rekey failed: {ev:?}"
        );
        assert!(a.is_established() && b.is_established());
    }
    // The half-open account is still full and still refuses.
    let from = addr("203.0.113.200:500");
    b.handle_datagram(&init(SUITE), addr(B), from, now);
    assert!(actions(&mut b).is_empty());
    assert_eq!(b.init_stats().dropped_for(InitDrop::HalfOpenFull), 2);
    // A new IKE SA of A's own is not refused either.
    a.initiate(now).unwrap();
}

/// Sends `b` INITs from `from` until its half-open table refuses one.
fn fill_half_open(b: &mut Ike, from: SocketAddr, now: Instant) {
    let mut n = 0;
    while b.init_stats().dropped_for(InitDrop::HalfOpenFull) == 0 {
        b.handle_datagram(&init(SUITE), addr(B), from, now);
        let _ = actions(b);
        n += 1;
        assert!(n < 1000, "the half-open table never filled");
    }
}

/// B with cookies and the per-source limit out of the way, so that INITs
/// from the peer's address fill its half-open table.
fn open_cfg(local: &str, remote: &str) -> IkeConfig {
    let mut c = cfg(local, remote, SUITE);
    c.cookie_threshold = usize::MAX;
    c.cookie_threshold_ip = usize::MAX;
    c.cookie_rate = u32::MAX;
    c.half_open_per_source = usize::MAX;
    c
}

#[test]
fn a_full_half_open_table_holds_no_reconnection_back() {
    // B initiates and reconnects 1 s after it lost its IKE SA; INITs
    // spoofed as A (its configured peer) fill B's half-open table.
    let mut cb = open_cfg(B, A);
    cb.initiate = true;
    cb.reconnect_delay = Some(Duration::from_secs(1));
    let mut b = Ike::new(cb).unwrap();
    let mut a = Ike::new(cfg(A, B, SUITE)).unwrap();
    let now = Instant::now();
    b.initiate(now).unwrap();
    pump(&mut b, &mut a, now);
    assert!(a.is_established() && b.is_established());
    fill_half_open(&mut b, addr(A), now);
    assert_eq!(b.init_stats().half_open, vecgate_ike::MAX_HALF_OPEN);
    // A deletes the IKE SA (as it does when it stops).
    a.delete_ike(now);
    pump(&mut a, &mut b, now);
    assert!(!b.is_established());
    // B reconnects after its delay, long before the half-open SAs expire.
    let t = now + Duration::from_millis(1100);
    assert!(
        b.next_timeout().is_some_and(|x| x <= t),
        "no reconnection scheduled: {:?}",
        b.next_timeout().map(|x| x - now)
    );
    b.handle_timeout(t);
    let out = sent(&mut b);
    assert!(
        out.iter()
            .any(|m| m.header.exchange == 34 && !m.header.is_response()),
        "no new IKE_SA_INIT: {out:?}"
    );
    assert_eq!(b.init_stats().half_open, vecgate_ike::MAX_HALF_OPEN);
}

#[test]
fn a_full_half_open_table_refuses_inits_only() {
    // The table (here 4) full of the peer's spoofed INITs: a new INIT is
    // dropped, while B's own initiation, A's IKE_SA_INIT answered before
    // the flood and its IKE_AUTH all go through.
    let mut cb = open_cfg(B, A);
    cb.max_half_open = 4;
    let mut b = Ike::new(cb).unwrap();
    let mut a = Ike::new(cfg(A, B, SUITE)).unwrap();
    let now = Instant::now();
    a.initiate(now).unwrap();
    let Some(Action::Send { data, .. }) = a.poll_action() else {
        panic!("no INIT");
    };
    b.handle_datagram(&data, addr(B), addr(A), now);
    let answer = actions(&mut b);
    fill_half_open(&mut b, addr(A), now);
    assert_eq!(b.init_stats().half_open, 4);
    // A tampered IKE_AUTH for the first SA leaves it half-open.
    for act in answer {
        if let Action::Send { data, .. } = act {
            a.handle_datagram(&data, addr(A), addr(B), now);
        }
    }
    let Some(Action::Send { data: auth, .. }) = a.poll_action() else {
        panic!("no IKE_AUTH");
    };
    let mut bad = auth.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    b.handle_datagram(&bad, addr(B), addr(A), now);
    assert!(actions(&mut b).is_empty());
    assert_eq!(b.init_stats().half_open, 4);
    assert!(!b.is_established());
    // The genuine one establishes it: it leaves the half-open table.
    b.handle_datagram(&auth, addr(B), addr(A), now);
    pump(&mut b, &mut a, now);
    assert!(a.is_established() && b.is_established());
    assert_eq!(b.init_stats().half_open, 3);
    b.initiate(now).unwrap();
    a.rekey_ike(now);
    let ev = pump(&mut a, &mut b, now);
    assert!(
        ev.iter()
            .any(|e| matches!(e, vecgate_ike::Event::IkeRekeyed { .. })),
        "{ev:?}"
    );
}
