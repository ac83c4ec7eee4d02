//! Known-answer test from a strongSwan 5.9.8 charon debug log (`ike = 4`,
//! `chd = 4`) captured from an exchange with vecgate: charon as responder,
//! IKE aes256-sha256-x25519, ESP aes128-sha1, PSK. From charon's own
//! dumps (DH secret, the AUTH octets that embed both IKE_SA_INIT messages)
//! we recompute SKEYSEED, every SK_*, both AUTH values and the child keys,
//! and compare byte for byte with what charon derived. No root needed.

use vecgate_ike::crypto::{child_keymat, psk_auth, DhGroup, Encr, IkeKeys, IkeSuite, Integ, Prf};
use vecgate_ike::message::Message;
use vecgate_ike::payload::Payload;

const LOG: &str = include_str!("data/charon_x25519_psk.log");
const PSK: &[u8] = b"interop-test-psk-0123";

/// Every hex dump in the log: (label, bytes), in order.
fn dumps() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut lines = LOG.lines();
    while let Some(l) = lines.next() {
        let Some(pos) = l.find(" => ") else { continue };
        let label = l[..pos]
            .split_once("] ")
            .map_or("", |x| x.1)
            .trim()
            .to_string();
        let mut rest = l[pos + 4..].split_whitespace();
        let (Some(Ok(n)), Some("bytes")) = (rest.next().map(str::parse::<usize>), rest.next())
        else {
            continue;
        };
        let mut bytes = Vec::new();
        while bytes.len() < n {
            let h = lines.next().expect("dump continues");
            let colon = h.find(": ").expect("hex line");
            let want = (n - bytes.len()).min(16);
            bytes.extend(
                h[colon + 2..]
                    .split_whitespace()
                    .take(want)
                    .map(|t| u8::from_str_radix(t, 16).unwrap()),
            );
        }
        out.push((label, bytes));
    }
    out
}

fn get<'a>(d: &'a [(String, Vec<u8>)], label: &str, nth: usize) -> &'a [u8] {
    &d.iter()
        .filter(|(l, _)| l == label)
        .nth(nth)
        .unwrap_or_else(|| panic!("no {label} #{nth}"))
        .1
}

fn nonce_of(m: &Message) -> Vec<u8> {
    m.payloads
        .iter()
        .find_map(|p| {
            if let Payload::Nonce(n) = p {
                Some(n.clone())
            } else {
                None
            }
        })
        .unwrap()
}

#[test]
fn ike_and_child_keys_match_charon() {
    let d = dumps();
    let octets = "octets = message + nonce + prf(Sk_px, IDx')";
    let auth = "AUTH = prf(prf(secret, keypad), octets)";
    // AUTH octets (RFC 7296 §2.15): RealMessage | Nonce | prf(SK_p, IDx').
    let split = |o: &[u8]| {
        let len = u32::from_be_bytes([o[24], o[25], o[26], o[27]]) as usize;
        (
            o[..len].to_vec(),
            o[len..o.len() - 32].to_vec(),
            o[o.len() - 32..].to_vec(),
        )
    };
    // First: verifying our (initiator) AUTH: our IKE_SA_INIT request + Nr.
    let (msg1, nr_in_octets, maced_i) = split(get(&d, octets, 0));
    // Second: charon's own AUTH: its IKE_SA_INIT response + Ni.
    let (msg2, ni_in_octets, maced_r) = split(get(&d, octets, 1));
    let m1 = Message::parse_plain(&msg1).unwrap();
    let m2 = Message::parse_plain(&msg2).unwrap();
    let (ni, nr) = (nonce_of(&m1), nonce_of(&m2));
    assert_eq!(ni, ni_in_octets);
    assert_eq!(nr, nr_in_octets);
    let (spi_i, spi_r) = (m2.header.spi_i, m2.header.spi_r);
    assert_eq!(m1.header.spi_i, spi_i);

    let suite = IkeSuite {
        encr: Encr::AesCbc(32),
        prf: Prf::HmacSha256,
        integ: Some(Integ::HmacSha256_128),
        dh: DhGroup::Curve25519,
    };
    let shared = get(&d, "shared Diffie Hellman secret", 0);
    let skeyseed = suite.prf.prf(&[ni.as_slice(), &nr].concat(), &[shared]);
    assert_eq!(&skeyseed[..], get(&d, "SKEYSEED", 0));
    let k = IkeKeys::initial(&suite, shared, &ni, &nr, spi_i, spi_r).unwrap();
    for (label, ours) in [
        ("Sk_d secret", &k.sk_d),
        ("Sk_ai secret", &k.sk_ai),
        ("Sk_ar secret", &k.sk_ar),
        ("Sk_ei secret", &k.sk_ei),
        ("Sk_er secret", &k.sk_er),
        ("Sk_pi secret", &k.sk_pi),
        ("Sk_pr secret", &k.sk_pr),
    ] {
        assert_eq!(&ours[..], get(&d, label, 0), "{label}");
    }

    // AUTH both ways (shared key MIC).
    let idi = get(&d, "IDx'", 0);
    let idr = get(&d, "IDx'", 1);
    assert_eq!(suite.prf.prf(&k.sk_pi, &[idi]).to_vec(), maced_i);
    assert_eq!(suite.prf.prf(&k.sk_pr, &[idr]).to_vec(), maced_r);
    assert_eq!(get(&d, "secret", 0), PSK);
    assert_eq!(
        psk_auth(suite.prf, PSK, &msg1, &nr, &k.sk_pi, idi),
        get(&d, auth, 0)
    );
    assert_eq!(
        psk_auth(suite.prf, PSK, &msg2, &ni, &k.sk_pr, idr),
        get(&d, auth, 1)
    );

    // First child SA (RFC 7296 §2.17): KEYMAT = prf+(SK_d, Ni | Nr).
    assert_eq!(get(&d, "seed", 0), [ni.as_slice(), &nr].concat());
    let [ei, ai, er, ar] = child_keymat(suite.prf, &k.sk_d, None, &ni, &nr, 16, 20).unwrap();
    assert_eq!(&ei[..], get(&d, "encryption initiator key", 0));
    assert_eq!(&er[..], get(&d, "encryption responder key", 0));
    assert_eq!(&ai[..], get(&d, "integrity initiator key", 0));
    assert_eq!(&ar[..], get(&d, "integrity responder key", 0));
}
