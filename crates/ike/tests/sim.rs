//! Two `Ike` instances talking through an in-memory network with a fake
//! clock: establishment, rekeying, deletion, liveness, loss, failures.

#[path = "support/net.rs"]
mod net;

use net::*;
use std::time::Duration;
use vecgate_ike::{Action, Event, FailReason, Ike, IkeConfig};

#[test]
fn establish_default_and_every_proposal() {
    for (ike, esp) in [
        ("aes256gcm16-prfsha256-x25519", "aes256gcm16"),
        ("aes256-sha256-modp2048", "aes128-sha1"),
        ("aes128-sha1-ecp256", "aes256-sha256"),
        ("aes128gcm16-prfsha256-ecp256", "aes128gcm16"),
    ] {
        let mut n = pair(|a, b| {
            for c in [a, b] {
                c.ike_proposals = vec![ike.parse().unwrap()];
                c.esp_proposals = vec![esp.parse().unwrap()];
            }
        });
        n.establish();
        assert!(established(&n.a) && established(&n.b), "{ike}");
        assert_eq!(n.a.installed.len(), 1);
        assert_eq!(n.b.installed.len(), 1);
        assert_pair(&n.a.installed[0], &n.b.installed[0]);
        assert_eq!(n.a.installed[0].algorithm, esp);
        assert!(!n.a.installed[0].udp_encap);
        assert_eq!(
            n.a.installed[0].local_ts[0].start,
            "10.1.0.0".parse::<std::net::IpAddr>().unwrap()
        );
        assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
        assert_eq!(n.a.ike.ike_sas(), n.b.ike.ike_sas());
    }
}

#[test]
fn rekey_child_make_before_break() {
    let mut n = pair(|_, _| {});
    n.establish();
    let old = n.a.installed[0].spi_in;
    n.a.ike.rekey_child(old, n.now);
    n.run();
    assert_eq!(n.a.installed.len(), 2);
    assert_eq!(n.b.installed.len(), 2);
    assert_pair(&n.a.installed[1], &n.b.installed[1]);
    assert_ne!(*n.a.installed[1].enc_key_out, *n.a.installed[0].enc_key_out);
    assert_eq!(n.a.removed, vec![(old, n.a.installed[0].spi_out)]);
    assert_eq!(n.b.removed, vec![(n.b.installed[0].spi_in, old)]);
    assert!(n
        .a
        .events
        .iter()
        .any(|e| matches!(e, Event::ChildRekeyed { old_spi_in, .. } if *old_spi_in == old)));
    assert!(n
        .b
        .events
        .iter()
        .any(|e| matches!(e, Event::ChildRekeyed { .. })));
    assert_eq!(n.a.ike.child_sas().len(), 1);
    assert_eq!(n.b.ike.child_sas().len(), 1);
}

#[test]
fn rekey_child_with_pfs_by_responder() {
    let mut n = pair(|a, b| {
        for c in [a, b] {
            c.esp_proposals = vec!["aes128-sha1-modp2048".parse().unwrap()];
        }
    });
    n.establish();
    let old_b = n.b.installed[0].spi_in;
    n.b.ike.rekey_child(old_b, n.now);
    n.run();
    assert_eq!(n.b.installed.len(), 2);
    assert_pair(&n.a.installed[1], &n.b.installed[1]);
    assert_eq!(n.a.ike.child_sas().len(), 1);
}

#[test]
fn rekey_ike_moves_children() {
    let mut n = pair(|_, _| {});
    n.establish();
    let before = n.a.ike.ike_sas();
    n.a.ike.rekey_ike(n.now);
    n.run();
    let after_a = n.a.ike.ike_sas();
    assert_eq!(after_a.len(), 1);
    assert_ne!(after_a, before);
    assert_eq!(after_a, n.b.ike.ike_sas());
    assert!(n.a.removed.is_empty() && n.b.removed.is_empty());
    assert_eq!(n.a.ike.child_sas().len(), 1);
    // The new IKE SA works: rekey a child over it, initiated by B.
    let spi = n.b.installed[0].spi_in;
    n.b.ike.rekey_child(spi, n.now);
    n.run();
    assert_pair(&n.a.installed[1], &n.b.installed[1]);
    // And B can rekey the IKE SA again.
    n.b.ike.rekey_ike(n.now);
    n.run();
    assert_eq!(n.a.ike.ike_sas(), n.b.ike.ike_sas());
    assert_ne!(n.a.ike.ike_sas(), after_a);
    assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
}

#[test]
fn delete_child_then_ike() {
    let mut n = pair(|_, _| {});
    n.establish();
    n.a.ike.create_child(n.now);
    n.run();
    assert_eq!(n.a.ike.child_sas().len(), 2);
    let spi = n.a.installed[0].spi_in;
    n.a.ike.delete_child(spi, n.now);
    n.run();
    assert_eq!(n.a.removed.len(), 1);
    assert_eq!(n.b.removed.len(), 1);
    n.b.ike.delete_ike(n.now);
    n.run();
    assert!(n.a.ike.ike_sas().is_empty() && n.b.ike.ike_sas().is_empty());
    assert_eq!(n.a.removed.len(), 2);
    assert_eq!(n.b.removed.len(), 2);
    assert!(n
        .a
        .events
        .iter()
        .any(|e| matches!(e, Event::IkeDeleted { .. })));
}

#[test]
fn retransmission_recovers_from_loss() {
    let mut n = pair(|_, _| {});
    // Lose the first IKE_SA_INIT request and the first IKE_AUTH response.
    n.drop = Box::new(|from_a, i| (from_a && i == 1) || (!from_a && i == 4));
    n.establish();
    assert!(!established(&n.a));
    n.advance(Duration::from_secs(10));
    assert!(established(&n.a) && established(&n.b));
    assert_eq!(n.a.installed.len(), 1);
    // B answered the duplicate IKE_AUTH from its cache: one child only.
    assert_eq!(n.b.installed.len(), 1);
    assert_pair(&n.a.installed[0], &n.b.installed[0]);
}

#[test]
fn retransmission_backs_off_and_gives_up() {
    let mut n = pair(|a, _| {
        a.retransmit_tries = 3;
    });
    n.drop = Box::new(|_, _| true);
    n.establish();
    n.advance(Duration::from_secs(60));
    let times: Vec<_> = n
        .wire
        .iter()
        .filter(|w| w.0)
        .count()
        .to_string()
        .chars()
        .collect();
    assert_eq!(times, vec!['4']); // 1 + 3 retransmissions
    assert_eq!(failed(&n.a), vec![(FailReason::Timeout, false)]);
    assert!(n.a.ike.next_timeout().is_none());
}

#[test]
fn dpd_detects_dead_peer() {
    let mut n = pair(|a, _| {
        a.dpd_interval = Some(Duration::from_secs(30));
        a.retransmit_tries = 2;
    });
    n.establish();
    n.advance(Duration::from_secs(31));
    // A liveness check went out and was answered.
    assert!(failed(&n.a).is_empty());
    assert!(n.a.ike.is_established());
    n.drop = Box::new(|_, _| true);
    n.advance(Duration::from_secs(60));
    assert_eq!(failed(&n.a), vec![(FailReason::Timeout, false)]);
    assert_eq!(n.a.removed.len(), 1);
    assert!(!n.a.ike.is_established());
}

/// `dpd_timeout` cuts the liveness check short of the (long, doubling)
/// retransmission schedule: a dead peer is declared within it.
#[test]
fn dpd_timeout_bounds_the_liveness_check() {
    let mut n = pair(|a, _| {
        a.dpd_interval = Some(Duration::from_secs(2));
        a.dpd_timeout = Some(Duration::from_secs(6));
    });
    n.establish();
    n.advance(Duration::from_secs(5));
    assert!(n.a.ike.is_established());
    n.drop = Box::new(|_, _| true);
    // Checks answered at 2 s and 4 s; the one at 6 s is not: given up at
    // 12 s instead of after a minute of retransmissions.
    n.advance(Duration::from_secs(6));
    assert!(failed(&n.a).is_empty(), "gave up too early");
    n.advance(Duration::from_secs(2));
    assert_eq!(failed(&n.a), vec![(FailReason::Timeout, false)]);
    assert!(!n.a.ike.is_established());
}

#[test]
fn wrong_psk_fails_both_sides_installs_nothing() {
    let mut n = pair(|_, b| b.psk = zeroize::Zeroizing::new(b"other".to_vec()));
    n.establish();
    assert_eq!(
        failed(&n.a),
        vec![(FailReason::AuthenticationFailed, false)]
    );
    assert_eq!(
        failed(&n.b),
        vec![(FailReason::AuthenticationFailed, false)]
    );
    assert!(n.a.installed.is_empty() && n.b.installed.is_empty());
    assert!(!established(&n.a) && !established(&n.b));
}

#[test]
fn wrong_identity_fails() {
    let mut n = pair(|a, _| a.remote_id = vecgate_ike::Identity::Fqdn("nobody".into()));
    n.establish();
    assert_eq!(
        failed(&n.a),
        vec![(FailReason::AuthenticationFailed, false)]
    );
    // B authenticated A fine, then hears A's AUTHENTICATION_FAILED.
    assert!(failed(&n.b).contains(&(FailReason::AuthenticationFailed, false)));
    assert!(n.a.installed.is_empty());
    assert!(!n.b.ike.is_established());
}

#[test]
fn no_common_proposal() {
    let mut n = pair(|a, b| {
        a.ike_proposals = vec!["aes128-sha1-modp2048".parse().unwrap()];
        b.ike_proposals = vec!["aes256gcm16-prfsha256-x25519".parse().unwrap()];
    });
    n.establish();
    assert_eq!(failed(&n.a), vec![(FailReason::NoProposalChosen, false)]);
    // The responder's side is an unauthenticated INIT: counted, not a
    // failure of its tunnel (anyone could send it).
    assert_eq!(failed(&n.b), vec![]);
    assert_eq!(n.b.ike.refused_inits(), 1);
    assert!(n.a.ike.next_timeout().is_none());
}

#[test]
fn no_common_esp_proposal_keeps_ike_sa() {
    let mut n = pair(|a, b| {
        a.esp_proposals = vec!["aes128-sha1".parse().unwrap()];
        b.esp_proposals = vec!["aes256gcm16".parse().unwrap()];
    });
    n.establish();
    assert!(established(&n.a) && established(&n.b));
    assert_eq!(failed(&n.a), vec![(FailReason::NoProposalChosen, true)]);
    assert_eq!(failed(&n.b), vec![(FailReason::NoProposalChosen, true)]);
    assert!(n.a.installed.is_empty() && n.b.installed.is_empty());
}

#[test]
fn ts_mismatch() {
    let mut n = pair(|_, b| b.remote_ts = vec!["172.16.0.0/12".parse().unwrap()]);
    n.establish();
    assert_eq!(failed(&n.a), vec![(FailReason::TsUnacceptable, true)]);
    assert_eq!(failed(&n.b), vec![(FailReason::TsUnacceptable, true)]);
    assert!(n.a.installed.is_empty() && n.b.installed.is_empty());
}

#[test]
fn ts_narrowing() {
    let mut n = pair(|a, b| {
        a.local_ts = vec!["10.0.0.0/8".parse().unwrap()];
        b.remote_ts = vec!["10.1.2.0/24".parse().unwrap()];
    });
    n.establish();
    let want = vecgate_ike::payload::TrafficSelector::from_prefix("10.1.2.0".parse().unwrap(), 24);
    assert_eq!(n.a.installed[0].local_ts, vec![want]);
    assert_eq!(n.b.installed[0].remote_ts, vec![want]);
}

#[test]
fn invalid_ke_retry_with_the_right_group() {
    let mut n = pair(|a, b| {
        a.ike_proposals = vec!["aes128gcm16-prfsha256-x25519-ecp256".parse().unwrap()];
        b.ike_proposals = vec!["aes128gcm16-prfsha256-ecp256".parse().unwrap()];
    });
    n.establish();
    assert!(established(&n.a) && established(&n.b));
    let suite = n.a.events.iter().find_map(|e| match e {
        Event::IkeEstablished { suite, .. } => Some(*suite),
        _ => None,
    });
    assert_eq!(suite.unwrap().name(), "aes128gcm16-prfsha256-ecp256");
}

#[test]
fn cookie_challenge() {
    let mut n = pair(|_, b| b.cookie_threshold = 0);
    n.establish();
    assert!(established(&n.a) && established(&n.b));
    // INIT, COOKIE reply, INIT with cookie, INIT reply, AUTH, AUTH reply.
    assert_eq!(n.wire.len(), 6);
}

#[test]
fn forced_encapsulation_floats_to_natt() {
    let mut n = pair(|a, _| a.force_encap = true);
    n.establish();
    assert!(established(&n.a) && established(&n.b));
    assert!(n.a.installed[0].udp_encap && n.b.installed[0].udp_encap);
    assert_eq!(n.a.installed[0].remote.port(), 4500);
    assert_eq!(n.b.installed[0].remote.port(), 4500);
    let auth = &n.wire[2];
    assert_eq!(auth.2.port(), 4500);
    assert_eq!(&auth.1[..4], &[0, 0, 0, 0]);
    // ESP on the NAT-T port (no marker) is not for IKE: ignored.
    n.b.ike.handle_datagram(
        &[1, 2, 3, 4, 5, 6, 7, 8],
        addr("192.0.2.2:4500"),
        addr("192.0.2.1:4500"),
        n.now,
    );
    assert!(n.b.ike.poll_action().is_none());
}

#[test]
fn garbage_never_panics_or_replies() {
    let mut n = pair(|_, _| {});
    n.establish();
    for w in n.wire.clone() {
        for cut in [0, 1, 27, 28, 40, w.1.len() / 2, w.1.len() - 1] {
            n.b.ike
                .handle_datagram(&w.1[..cut.min(w.1.len())], w.3, w.2, n.now);
        }
        let mut flipped = w.1.clone();
        let l = flipped.len();
        flipped[l - 1] ^= 1;
        n.b.ike.handle_datagram(&flipped, w.3, w.2, n.now);
    }
    while let Some(a) = n.b.ike.poll_action() {
        // Only retransmitted responses to the exact duplicates are allowed.
        assert!(
            matches!(a, Action::Send { .. } | Action::Event(Event::Failed { .. })),
            "{a:?}"
        );
    }
    assert!(n.b.ike.is_established());
    assert!(n.b.ike.dropped().0 > 0);
}

fn skf_count(n: &Net) -> usize {
    n.wire
        .iter()
        .filter(|w| {
            let d = if w.1.starts_with(&[0, 0, 0, 0]) {
                &w.1[4..]
            } else {
                &w.1[..]
            };
            d.len() > 16 && d[16] == 53
        })
        .count()
}

#[test]
fn fragmentation_rfc7383() {
    let mut n = pair(|a, b| {
        a.fragment_size = Some(200);
        b.fragment_size = Some(200);
        a.esp_proposals = ["aes128gcm16", "aes256gcm16", "aes128-sha1", "aes256-sha256"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
    });
    // Lose the second fragment of the first IKE_AUTH request once.
    n.drop = Box::new(|from_a, i| from_a && i == 3);
    n.establish();
    n.advance(Duration::from_secs(5));
    assert!(established(&n.a) && established(&n.b));
    assert_pair(&n.a.installed[0], &n.b.installed[0]);
    assert!(skf_count(&n) >= 3, "IKE_AUTH was not fragmented");
    // Encrypted messages fit the fragment size (IKE_SA_INIT cannot be
    // fragmented, RFC 7383 §2.5).
    assert!(n
        .wire
        .iter()
        .filter(|w| w.1.len() > 28 && w.1[18] != 34)
        .all(|w| w.1.len() <= 200));
    // Rekeys still work fragmented.
    n.a.ike.rekey_ike(n.now);
    n.run();
    assert_eq!(n.a.ike.ike_sas(), n.b.ike.ike_sas());
    let spi = n.a.installed[0].spi_in;
    n.a.ike.rekey_child(spi, n.now);
    n.run();
    assert_pair(&n.a.installed[1], &n.b.installed[1]);
}

#[test]
fn no_fragmentation_unless_both_support_it() {
    let mut n = pair(|a, b| {
        a.fragment_size = Some(200);
        b.fragment_size = None;
    });
    n.establish();
    assert!(established(&n.a) && established(&n.b));
    assert_eq!(skf_count(&n), 0);
}

#[test]
fn simultaneous_rekeys_resolve() {
    let mut n = pair(|_, _| {});
    n.establish();
    let (a_in, b_in) = (n.a.installed[0].spi_in, n.b.installed[0].spi_in);
    // Both queue a rekey of the same child before either sees the other's.
    n.a.ike.rekey_child(a_in, n.now);
    n.b.ike.rekey_child(b_in, n.now);
    n.run();
    n.advance(Duration::from_secs(20));
    assert_eq!(n.a.ike.child_sas().len(), 1, "{:?}", n.a.events);
    assert_eq!(n.b.ike.child_sas().len(), 1);
    let (a_new, b_new) = (n.a.installed.last().unwrap(), n.b.installed.last().unwrap());
    assert_pair(a_new, b_new);
    assert_ne!(a_new.spi_in, a_in);
    assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
    // Same for the IKE SA.
    n.a.ike.rekey_ike(n.now);
    n.b.ike.rekey_ike(n.now);
    n.run();
    n.advance(Duration::from_secs(20));
    assert_eq!(n.a.ike.ike_sas().len(), 1, "{:?}", n.a.events);
    assert_eq!(n.a.ike.ike_sas(), n.b.ike.ike_sas());
    assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
}

#[test]
fn child_keys_debug_is_redacted() {
    let mut n = pair(|_, _| {});
    n.establish();
    let k = &n.a.installed[0];
    let hex: String = k.enc_key_out.iter().map(|b| format!("{b:02x}")).collect();
    let dbg = format!("{k:?}");
    assert!(dbg.contains("redacted"));
    assert!(!dbg.contains(&hex[..8]));
    assert!(!dbg.contains(&format!("{:?}", &k.enc_key_out[..4])));
}

#[test]
fn reconnects_after_deletion_and_failure() {
    let mut n = pair(|a, _| {
        a.reconnect_delay = Some(Duration::from_secs(5));
        a.retransmit_tries = 1;
    });
    n.establish();
    n.b.ike.delete_ike(n.now);
    n.run();
    assert!(!n.a.ike.is_established());
    n.advance(Duration::from_secs(6));
    assert!(n.a.ike.is_established() && n.b.ike.is_established());
    assert_eq!(n.a.installed.len(), 2);
    assert_pair(&n.a.installed[1], &n.b.installed[1]);
    // While the peer is unreachable, A keeps trying every few seconds.
    n.drop = Box::new(|_, _| true);
    n.a.ike.delete_ike(n.now);
    n.run();
    let sent = n.wire.len();
    n.advance(Duration::from_secs(60));
    assert!(n.wire.len() > sent + 5);
    n.drop = Box::new(|_, _| false);
    n.advance(Duration::from_secs(30));
    assert!(n.a.ike.is_established());
}

#[test]
fn hard_lifetimes_delete_unrekeyed_sas() {
    let mut n = pair(|a, _| {
        a.child_life_time = Some(Duration::from_secs(60));
        a.ike_life_time = Some(Duration::from_secs(120));
    });
    n.establish();
    n.advance(Duration::from_secs(61));
    assert_eq!(n.a.removed.len(), 1);
    assert_eq!(n.b.removed.len(), 1);
    assert!(n.a.ike.is_established());
    n.advance(Duration::from_secs(60));
    assert!(!n.a.ike.is_established() && !n.b.ike.is_established());
}

#[test]
fn periodic_rekeying_from_config() {
    let mut n = pair(|a, _| {
        a.child_rekey_time = Some(Duration::from_secs(100));
        a.ike_rekey_time = Some(Duration::from_secs(250));
    });
    n.establish();
    n.advance(Duration::from_secs(301));
    // Children rekeyed at 100, 200, 300; IKE SA at 250.
    assert_eq!(n.a.installed.len(), 4);
    assert_eq!(n.b.installed.len(), 4);
    assert_pair(&n.a.installed[3], &n.b.installed[3]);
    assert_eq!(n.a.ike.child_sas().len(), 1);
    assert!(n
        .a
        .events
        .iter()
        .any(|e| matches!(e, Event::IkeRekeyed { .. })));
    assert_eq!(n.a.ike.ike_sas(), n.b.ike.ike_sas());
    assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
}

// Several tunnels towards one peer (RFC 7296 §1.3, §2.9): child SAs of
// other tunnels' selectors inside one IKE SA, bound by their selectors.

fn policy(tag: u32, local: &str, remote: &str) -> vecgate_ike::ChildPolicy {
    vecgate_ike::ChildPolicy {
        tag,
        local_ts: vec![local.parse().unwrap()],
        remote_ts: vec![remote.parse().unwrap()],
        esp_proposals: vec![],
    }
}

fn ts_rejected(p: &Peer) -> usize {
    p.events
        .iter()
        .filter(|e| matches!(e, Event::TsRejected { .. }))
        .count()
}

/// Tenant 1 is each side's own selectors, tenant 2 a policy (a: tag 2,
/// b: tag 5).
fn two_tenants() -> Net {
    let mut n = pair(|_, _| {});
    n.a.ike
        .set_policies(vec![policy(2, "10.11.0.0/16", "10.22.0.0/16")]);
    n.b.ike
        .set_policies(vec![policy(5, "10.22.0.0/16", "10.11.0.0/16")]);
    n
}

#[test]
fn child_for_another_tunnel_in_a_reused_ike_sa_is_bound_by_its_selectors() {
    let mut n = two_tenants();
    n.establish();
    n.a.ike.create_child_for(2, n.now);
    n.run();
    assert_eq!(n.a.ike.ike_sas().len(), 1, "one IKE SA carries both");
    assert_eq!(n.a.installed.len(), 2);
    assert_eq!(n.b.installed.len(), 2);
    assert_pair(&n.a.installed[1], &n.b.installed[1]);
    assert_eq!(n.a.installed[0].policy, None);
    assert_eq!(n.b.installed[0].policy, None);
    assert_eq!(n.a.installed[1].policy, Some(2));
    assert_eq!(n.b.installed[1].policy, Some(5));
    assert_eq!(
        n.b.installed[1].local_ts,
        vec![vecgate_ike::payload::TrafficSelector::from_prefix(
            "10.22.0.0".parse().unwrap(),
            16
        )]
    );
    // A rekey (by either side) keeps the tunnel; so does an IKE rekey.
    let old = n.b.installed[1].spi_in;
    n.b.ike.rekey_child(old, n.now);
    n.run();
    assert_eq!(n.b.installed.len(), 3);
    assert_eq!(n.b.installed[2].policy, Some(5));
    assert_eq!(n.a.installed[2].policy, Some(2));
    let old = n.a.installed[0].spi_in;
    n.a.ike.rekey_child(old, n.now);
    n.run();
    assert_eq!(n.b.installed[3].policy, None);
    assert_eq!(n.a.installed[3].policy, None);
    n.a.ike.rekey_ike(n.now);
    n.run();
    let mut tags: Vec<_> = n.b.ike.child_policies().into_iter().map(|x| x.1).collect();
    tags.sort();
    assert_eq!(tags, vec![None, Some(5)]);
    assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
    assert_eq!(ts_rejected(&n.b), 0);
}

#[test]
fn ike_auth_child_is_bound_to_the_tunnel_its_selectors_fit() {
    // b's own selectors are tenant 2: tenant 1's IKE_AUTH lands on it
    // (IKE_SA_INIT cannot tell tunnels apart) and binds to policy 9.
    let mut n = pair(|_, b| {
        b.local_ts = vec!["10.22.0.0/16".parse().unwrap()];
        b.remote_ts = vec!["10.11.0.0/16".parse().unwrap()];
    });
    n.b.ike
        .set_policies(vec![policy(9, "10.2.0.0/16", "10.1.0.0/16")]);
    n.establish();
    assert_eq!(n.b.installed.len(), 1);
    assert_eq!(n.b.installed[0].policy, Some(9));
    assert_pair(&n.a.installed[0], &n.b.installed[0]);
}

#[test]
fn whole_fit_beats_overlap() {
    // b's own selectors are a part of what a asks (it would narrow);
    // policy 3 takes a's request whole.
    let mut n = pair(|_, b| {
        b.local_ts = vec!["10.2.0.0/24".parse().unwrap()];
        b.remote_ts = vec!["10.1.0.0/24".parse().unwrap()];
    });
    n.b.ike
        .set_policies(vec![policy(3, "10.2.0.0/16", "10.1.0.0/16")]);
    n.establish();
    assert_eq!(n.b.installed[0].policy, Some(3));
}

#[test]
fn child_fitting_no_tunnel_is_ts_unacceptable_and_keeps_the_ike_sa() {
    let mut n = pair(|_, _| {});
    n.a.ike
        .set_policies(vec![policy(2, "10.11.0.0/16", "10.22.0.0/16")]);
    n.establish();
    n.a.ike.create_child_for(2, n.now);
    n.run();
    assert_eq!(failed(&n.b), vec![(FailReason::TsUnacceptable, true)]);
    assert_eq!(failed(&n.a), vec![(FailReason::TsUnacceptable, true)]);
    assert_eq!(ts_rejected(&n.a), 1);
    let offered = n.b.events.iter().find_map(|e| match e {
        Event::TsRejected {
            by_peer: false,
            tsi,
            tsr,
        } => Some((tsi.clone(), tsr.clone())),
        _ => None,
    });
    let (tsi, tsr) = offered.expect("b reports the selectors it refused");
    assert_eq!(
        tsi[0].start,
        "10.11.0.0".parse::<std::net::IpAddr>().unwrap()
    );
    assert_eq!(
        tsr[0].start,
        "10.22.0.0".parse::<std::net::IpAddr>().unwrap()
    );
    assert_eq!(n.a.installed.len(), 1);
    assert_eq!(n.b.installed.len(), 1);
    assert_eq!(n.a.ike.ike_sas().len(), 1);
    assert!(n.b.ike.is_established());
}

#[test]
fn retired_selectors_take_no_new_child_but_the_others_do() {
    let mut n = two_tenants();
    n.establish();
    n.b.ike.retire();
    n.a.ike.create_child(n.now);
    n.run();
    assert_eq!(failed(&n.b), vec![(FailReason::TsUnacceptable, true)]);
    n.a.ike.create_child_for(2, n.now);
    n.run();
    assert_eq!(n.b.installed.last().unwrap().policy, Some(5));
    assert!(n.b.ike.is_retired());
}

/// HA failover: A's IKE SA moves to a fresh instance A2 as
/// bytes (export, encode, decode, import); A2 then answers B's liveness
/// checks, rekeys and deletes over it: no IKE_SA_INIT after the move.
fn hand_over(n: &mut Net, cfg_a: IkeConfig) {
    let snaps = n.a.ike.export(n.now);
    hand_over_from(n, cfg_a, snaps);
}

fn hand_over_from(n: &mut Net, cfg_a: IkeConfig, snaps: Vec<vecgate_ike::SaSnapshot>) {
    assert_eq!(snaps.len(), 1);
    let mut a2 = Ike::new(cfg_a).unwrap();
    for s in snaps {
        let bytes = s.encode().unwrap();
        let back = vecgate_ike::SaSnapshot::decode(&bytes).unwrap();
        assert_eq!(*back.encode().unwrap(), *bytes);
        assert!(!format!("{back:?}").contains(&format!("{:?}", &back.keys.sk_d[..4])));
        a2.import(back, n.now);
    }
    n.a = Peer {
        ike: a2,
        events: vec![],
        installed: vec![],
        removed: vec![],
    };
}

fn ike_inits(n: &Net) -> usize {
    // IKE_SA_INIT is exchange type 34 (RFC 7296 §3.1), at offset 18.
    n.wire.iter().filter(|w| w.1.get(18) == Some(&34)).count()
}

fn handover_pair() -> (Net, IkeConfig) {
    let mut n = pair(|a, b| {
        a.dpd_interval = Some(Duration::from_secs(30));
        b.dpd_interval = Some(Duration::from_secs(20));
    });
    let mut cfg_a = cfg("192.0.2.1:500", "192.0.2.2:500", b"secret-psk");
    cfg_a.initiate = true;
    cfg_a.dpd_interval = Some(Duration::from_secs(30));
    n.establish();
    (n, cfg_a)
}

#[test]
fn handover_keeps_ike_and_child_sas() {
    let (mut n, cfg_a) = handover_pair();
    let old_children = n.a.installed.clone();
    let sas = n.b.ike.ike_sas();
    hand_over(&mut n, cfg_a);
    n.run();
    // The adopted child is handed to the dataplane with the same keys.
    assert_eq!(n.a.installed.len(), 1);
    assert_eq!(n.a.installed[0].spi_in, old_children[0].spi_in);
    assert_eq!(*n.a.installed[0].enc_key_out, *old_children[0].enc_key_out);
    assert_pair(&n.a.installed[0], &n.b.installed[0]);
    assert!(n
        .a
        .events
        .iter()
        .any(|e| matches!(e, Event::IkeAdopted { .. })));
    let inits = ike_inits(&n);
    // B's liveness checks are answered; A2's own ones too.
    n.advance(Duration::from_secs(65));
    assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
    assert_eq!(n.a.ike.ike_sas(), sas);
    // Both sides rekey the child over the adopted IKE SA.
    let spi = n.a.installed[0].spi_in;
    n.a.ike.rekey_child(spi, n.now);
    n.run();
    assert_pair(&n.a.installed[1], &n.b.installed[1]);
    let spi = n.b.installed[1].spi_in;
    n.b.ike.rekey_child(spi, n.now);
    n.run();
    assert_pair(&n.a.installed[2], &n.b.installed[2]);
    // And the IKE SA itself, then a delete.
    n.a.ike.rekey_ike(n.now);
    n.run();
    assert_eq!(n.a.ike.ike_sas(), n.b.ike.ike_sas());
    assert_ne!(n.a.ike.ike_sas(), sas);
    assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
    assert_eq!(ike_inits(&n), inits, "no IKE_SA_INIT after the handover");
    n.a.ike.delete_ike(n.now);
    n.run();
    assert!(!n.b.ike.is_established());
}

/// A's liveness check was in flight when it died: A2 retransmits the same
/// bytes under the same message ID, and B's answer completes it.
#[test]
fn handover_retransmits_a_request_in_flight() {
    let (mut n, cfg_a) = handover_pair();
    n.drop = Box::new(|from_a, _| from_a);
    for _ in 0..120 {
        if n.a.ike.export(n.now)[0].pending.is_some() {
            break;
        }
        n.advance(Duration::from_secs(1));
    }
    let in_flight = n.a.ike.export(n.now)[0].pending.clone().unwrap();
    let sent = n.wire.iter().filter(|w| w.0).count();
    hand_over(&mut n, cfg_a);
    n.drop = Box::new(|_, _| false);
    n.advance(Duration::from_secs(2));
    let resent: Vec<_> = n.wire.iter().filter(|w| w.0).skip(sent).collect();
    assert!(!resent.is_empty());
    assert!(resent.iter().any(|w| w.1 == in_flight.data[0]));
    assert!(n.a.ike.export(n.now)[0].pending.is_none());
    n.advance(Duration::from_secs(40));
    assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
}

/// A answered B's liveness check but the answer was lost; B repeats it to
/// A2, which has no cached answer and answers it afresh (RFC 7296 §2.2).
#[test]
fn handover_answers_a_repeated_liveness_check_afresh() {
    let (mut n, cfg_a) = handover_pair();
    n.drop = Box::new(|from_a, _| from_a);
    n.advance(Duration::from_secs(21));
    hand_over(&mut n, cfg_a);
    n.drop = Box::new(|_, _| false);
    let before = n.wire.len();
    n.advance(Duration::from_secs(5));
    // A2 sent a response (flags byte 19, RESPONSE 0x20) to B's request.
    assert!(n.wire[before..]
        .iter()
        .any(|w| w.0 && w.1.get(19).is_some_and(|f| f & 0x20 != 0)));
    n.advance(Duration::from_secs(60));
    assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
    assert!(n.b.ike.is_established());
}

/// The sync lagged: A answered B's liveness check after its last export.
/// A2's synced ID is one behind; B's next request (one ahead of it) is
/// still taken, as the first authenticated request of an adopted SA.
#[test]
fn handover_with_a_stale_message_id_takes_the_peers_next_request() {
    let (mut n, cfg_a) = handover_pair();
    let stale = n.a.ike.export(n.now);
    let peer_next = stale[0].peer_next;
    n.advance(Duration::from_secs(21));
    assert_eq!(n.a.ike.export(n.now)[0].peer_next, peer_next + 1);
    hand_over_from(&mut n, cfg_a, stale);
    n.run();
    n.advance(Duration::from_secs(25));
    assert_eq!(n.a.ike.export(n.now)[0].peer_next, peer_next + 2);
    n.advance(Duration::from_secs(60));
    assert!(failed(&n.a).is_empty() && failed(&n.b).is_empty());
    assert!(n.b.ike.is_established() && n.a.ike.is_established());
}
