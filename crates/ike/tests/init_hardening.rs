//! An unauthenticated IKE_SA_INIT must be cheap to refuse and must not
//! touch any tunnel's state (RFC 7296 §2.6): the peer's KE is validated
//! before we generate a key pair, INITs count as half-open (for cookies)
//! before any DH, and an unacceptable proposal is a counter, not a
//! failure of the tunnel.

use std::net::SocketAddr;
use std::time::Instant;
use vecgate_ike::crypto::dh_keys_generated;
use vecgate_ike::message::Message;
use vecgate_ike::payload::{notify, Payload};
use vecgate_ike::{Action, Ike, IkeConfig};

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
