//! IKEv2 state machines driven through whole exchanges: an initiator and
//! a responder talk to each other (IKE_SA_INIT, IKE_AUTH, CREATE_CHILD_SA
//! for new and rekeyed children and the IKE rekey, INFORMATIONAL deletes
//! and liveness checks, RFC 7383 fragments) while the fuzzer's bytes pick
//! what happens to each datagram in flight: delivered, dropped, replayed,
//! reordered, truncated, bit-flipped, or opened with the receiver's keys,
//! edited and resealed with the sender's, so that mutated content gets
//! past the integrity check into the exchange handlers. Keys are known
//! because `cfg(fuzzing)` makes the library's randomness a seeded
//! generator (`crypto::fuzz_reseed`). One variant authenticates both
//! sides with certificates (Ed25519, an openssl-made CA and CRL), so the
//! CERT/CERTREQ payloads and signatures of IKE_AUTH are mutated too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use vecgate_ike::message::{Header, HEADER_LEN};
use vecgate_ike::payload::kind;
use vecgate_ike::pki::{LocalCert, SigningKey, TrustStore};
use vecgate_ike::{Action, Identity, Ike, IkeConfig, LocalAuth, RemoteAuth};

const PKI: [&[u8]; 6] = [
    include_bytes!("../../crates/ike/tests/data/pki/fuzz_a.crt"),
    include_bytes!("../../crates/ike/tests/data/pki/fuzz_a.key"),
    include_bytes!("../../crates/ike/tests/data/pki/fuzz_b.crt"),
    include_bytes!("../../crates/ike/tests/data/pki/fuzz_b.key"),
    include_bytes!("../../crates/ike/tests/data/pki/fuzz_ca.crt"),
    include_bytes!("../../crates/ike/tests/data/pki/fuzz_ca.crl"),
];

/// Certificate authentication for side `a` (else b) of the variant.
fn certificates(c: &mut IkeConfig, a: bool) {
    let (me, peer, (cert, key)) = if a {
        ("a.vecgate.test", "b.vecgate.test", (PKI[0], PKI[1]))
    } else {
        ("b.vecgate.test", "a.vecgate.test", (PKI[2], PKI[3]))
    };
    let key = SigningKey::from_bytes(key).expect("fuzz key");
    c.local_auth = LocalAuth::Cert(Arc::new(LocalCert::new(cert, key).expect("fuzz cert")));
    let mut t = TrustStore::default();
    t.add_anchors(PKI[4]).expect("fuzz CA");
    t.add_crls(PKI[5]).expect("fuzz CRL");
    c.remote_auth = RemoteAuth::Cert(Arc::new(t));
    c.local_id = Identity::from_text(me);
    c.remote_id = Identity::from_text(peer);
}

/// Upper bound on steps per input (each step is one datagram or timer).
const MAX_STEPS: usize = 128;

struct Datagram {
    /// Sent by the initiator (else by the responder).
    from_a: bool,
    local: SocketAddr,
    remote: SocketAddr,
    data: Vec<u8>,
}

struct Input<'a>(std::slice::Iter<'a, u8>);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        self.0.next().copied()
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte().unwrap_or(0), self.byte().unwrap_or(0)])
    }
}

fn config(a: bool, variant: u8) -> IkeConfig {
    let (me, peer) = ("192.0.2.1:500", "192.0.2.2:500");
    let (local, remote) = if a { (me, peer) } else { (peer, me) };
    let mut c = IkeConfig::new(local.parse().unwrap(), remote.parse().unwrap(), b"fuzz-psk");
    let (ike, esp): (&[&str], &[&str]) = match variant % 4 {
        0 => (&["aes128gcm16-prfsha256-x25519"], &["aes128gcm16"]),
        1 => (&["aes256-sha256-ecp256"], &["aes256-sha256-ecp256"]),
        2 => (&["aes128-sha1-x25519", "aes256gcm16-prfsha384-x25519"], &["aes128gcm16-x25519", "aes256-sha1"]),
        // No MODP: a 2048-bit exponentiation under ASan costs a good part
        // of a second, which would starve every other input.
        _ => (&["aes256gcm16-prfsha512-x25519"], &["aes256gcm16-x25519"]),
    };
    c.ike_proposals = IkeConfig::parse_ike_proposals(ike).unwrap();
    c.esp_proposals = IkeConfig::parse_esp_proposals(esp).unwrap();
    let (l, r) = if a { ("10.1.0.0/16", "10.2.0.0/16") } else { ("10.2.0.0/16", "10.1.0.0/16") };
    c.local_ts = vec![l.parse().unwrap()];
    c.remote_ts = vec![r.parse().unwrap()];
    c.initiate = a;
    if variant & 4 != 0 {
        // Small fragments: IKE_AUTH and CREATE_CHILD_SA are cut up.
        c.fragment_size = Some(200);
    }
    if variant & 8 != 0 {
        c.force_encap = true;
    }
    if variant & 16 != 0 {
        c.cookie_threshold = 0;
    }
    if variant & 32 != 0 {
        certificates(&mut c, a);
    }
    c.dpd_interval = Some(Duration::from_secs(10));
    c.dpd_timeout = Some(Duration::from_secs(30));
    c.reconnect_delay = Some(Duration::from_secs(3));
    c.child_rekey_time = Some(Duration::from_secs(60));
    c.ike_rekey_time = Some(Duration::from_secs(120));
    c.child_life_time = Some(Duration::from_secs(90));
    c.ike_life_time = Some(Duration::from_secs(180));
    c
}

fn collect(ike: &mut Ike, from_a: bool, flight: &mut VecDeque<Datagram>) {
    while let Some(a) = ike.poll_action() {
        if let Action::Send { local, remote, data } = a {
            if flight.len() < 64 {
                flight.push_back(Datagram { from_a, local, remote, data });
            }
        }
    }
}

/// Opens `d` with the receiver's keys, applies the input's edits to the
/// SK/SKF generic header and the plaintext, and reseals it with the
/// sender's keys. None when either side has no keys for it yet.
fn reseal(d: &Datagram, a: &Ike, b: &Ike, input: &mut Input) -> Option<Vec<u8>> {
    let marker = if d.local.port() == 4500 { 4 } else { 0 };
    let msg = d.data.get(marker..)?;
    let h = Header::parse(msg).ok()?;
    let iv_off = match h.next {
        kind::SK => HEADER_LEN + 4,
        kind::SKF => HEADER_LEN + 8,
        _ => return None,
    };
    let (tx, rx) = if d.from_a { (a, b) } else { (b, a) };
    let tx = tx.fuzz_sk_keys(h.spi_i, h.spi_r)?;
    let rx = rx.fuzz_sk_keys(h.spi_i, h.spi_r)?;
    let mut plain = rx.open(msg, iv_off).ok()?.to_vec();
    let mut prefix = msg.get(..iv_off)?.to_vec();
    let edits = input.byte().unwrap_or(0) % 8;
    for _ in 0..edits {
        let at = usize::from(input.u16());
        let v = input.byte().unwrap_or(0);
        let head = iv_off - HEADER_LEN;
        match at % (head + plain.len().max(1) + 2) {
            x if x < head => prefix[HEADER_LEN + x] = v,
            x if x < head + plain.len() => plain[x - head] ^= v,
            x if x == head + plain.len() => plain.truncate(usize::from(v) % (plain.len() + 1)),
            _ => plain.extend(std::iter::repeat_n(v, usize::from(v % 32))),
        }
    }
    let mut out = prefix;
    tx.seal(&mut out, plain, HEADER_LEN, &h).ok()?;
    let mut wire = d.data[..marker].to_vec();
    wire.extend_from_slice(&out);
    Some(wire)
}

fn deliver(d: &Datagram, data: &[u8], a: &mut Ike, b: &mut Ike, now: Instant) {
    let to = if d.from_a { b } else { a };
    to.handle_datagram(data, d.remote, d.local, now);
}

fn api(ike: &mut Ike, which: u8, now: Instant) {
    let child = ike.child_sas().first().map(|c| c.0);
    match which % 6 {
        0 => ike.create_child(now),
        1 => ike.rekey_ike(now),
        2 => {
            if let Some(c) = child {
                ike.rekey_child(c, now)
            }
        }
        3 => {
            if let Some(c) = child {
                ike.delete_child(c, now)
            }
        }
        4 => ike.delete_ike(now),
        _ => {
            let _ = ike.initiate(now);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data.iter());
    let variant = input.byte().unwrap_or(0);
    vecgate_ike::crypto::fuzz_reseed(u64::from(variant));
    let (Ok(mut a), Ok(mut b)) = (Ike::new(config(true, variant)), Ike::new(config(false, variant)))
    else {
        return;
    };
    let mut now = Instant::now();
    let mut flight = VecDeque::new();
    let mut replay: Vec<Datagram> = Vec::new();
    let _ = a.initiate(now);
    collect(&mut a, true, &mut flight);
    for _ in 0..MAX_STEPS {
        // Once the input is used up, everything is delivered as sent, so
        // short inputs still reach the later exchanges.
        let op = input.byte().unwrap_or(0);
        match op % 12 {
            0 | 1 => {
                if let Some(d) = flight.pop_front() {
                    deliver(&d, &d.data, &mut a, &mut b, now);
                    if replay.len() < 16 {
                        replay.push(d);
                    }
                } else {
                    // Nothing in flight: on to the next timer (rekeys,
                    // liveness checks, expiry, retransmissions).
                    match a.next_timeout().into_iter().chain(b.next_timeout()).min() {
                        Some(t) if t > now => now = t,
                        _ => now += Duration::from_secs(1),
                    }
                    a.handle_timeout(now);
                    b.handle_timeout(now);
                }
            }
            2 => {
                flight.pop_front();
            }
            3 => {
                if !replay.is_empty() {
                    let i = usize::from(input.byte().unwrap_or(0)) % replay.len();
                    let d = &replay[i];
                    deliver(d, &d.data, &mut a, &mut b, now);
                }
            }
            4 => {
                if let Some(d) = flight.pop_front() {
                    let n = usize::from(input.u16()) % (d.data.len() + 1);
                    deliver(&d, &d.data[..n], &mut a, &mut b, now);
                }
            }
            5 => {
                if let Some(d) = flight.pop_front() {
                    let mut m = d.data.clone();
                    let at = usize::from(input.u16());
                    if !m.is_empty() {
                        let l = m.len();
                        m[at % l] ^= input.byte().unwrap_or(1) | 1;
                    }
                    deliver(&d, &m, &mut a, &mut b, now);
                }
            }
            6 | 7 => {
                if let Some(d) = flight.pop_front() {
                    let m = reseal(&d, &a, &b, &mut input).unwrap_or_else(|| d.data.clone());
                    deliver(&d, &m, &mut a, &mut b, now);
                }
            }
            8 => {
                now += Duration::from_millis(u64::from(input.u16()) * 10);
                a.handle_timeout(now);
                b.handle_timeout(now);
            }
            9 => {
                let w = input.byte().unwrap_or(0);
                api(if w & 0x80 != 0 { &mut b } else { &mut a }, w, now);
            }
            10 => flight.rotate_left(1.min(flight.len())),
            _ => {
                // A raw datagram from the input to either side.
                let n = usize::from(input.byte().unwrap_or(0));
                let raw: Vec<u8> = (0..n).map_while(|_| input.byte()).collect();
                let (l, r): (SocketAddr, SocketAddr) =
                    ("192.0.2.2:500".parse().unwrap(), "192.0.2.1:500".parse().unwrap());
                if n & 1 == 0 {
                    a.handle_datagram(&raw, r, l, now);
                } else {
                    b.handle_datagram(&raw, l, r, now);
                }
            }
        }
        collect(&mut a, true, &mut flight);
        collect(&mut b, false, &mut flight);
        let _ = (a.next_timeout(), b.next_timeout());
    }
});
