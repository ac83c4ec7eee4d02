//! Test tool: floods an IKEv2 responder with IKE_AUTH requests carrying
//! oversized certificate sets, past IKE_SA_INIT and its cookie. Each
//! source address runs the `vecgate_ike` initiator (the state machine
//! vecgate runs): it answers COOKIE notifies, completes the DH exchange,
//! then sends IKE_AUTH with every certificate of its set (RFC 7383
//! fragments) and starts over at once without waiting for an answer.
//! Sources take turns between the certificate sets.
//!
//! ```text
//! vecgate-ike-auth-flood --target IP --sources IP,.. --sets FILE,.. --key FILE
//!                        [--ike PROPOSAL] --secs N --max N
//! ```
//!
//! Prints `auths N datagrams N inits N` at the end: IKE_AUTH requests
//! sent whole, their datagrams, and IKE_SA_INITs started.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vecgate_ike::pki::{LocalCert, SigningKey};
use vecgate_ike::{Action, Ike, IkeConfig, LocalAuth};

/// IKE_AUTH is exchange type 35 (RFC 7296 §3.1), at offset 18.
const IKE_AUTH: u8 = 35;
/// An initiator that has not sent its IKE_AUTH by then (its INIT was
/// dropped by the responder's admission) is replaced.
const ATTEMPT: Duration = Duration::from_secs(2);

fn fail(msg: &str) -> ! {
    eprintln!("vecgate-ike-auth-flood: {msg}");
    std::process::exit(2)
}

struct Source {
    sock: UdpSocket,
    local: SocketAddr,
    ike: Option<(Ike, Instant)>,
    turn: usize,
}

fn main() {
    let mut opt = std::collections::HashMap::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args
            .next()
            .unwrap_or_else(|| fail(&format!("{a} needs a value")));
        opt.insert(a, v);
    }
    let get = |k: &str| {
        opt.get(k)
            .cloned()
            .unwrap_or_else(|| fail(&format!("{k} missing")))
    };
    let target: IpAddr = get("--target")
        .parse()
        .unwrap_or_else(|_| fail("bad --target"));
    let secs: u64 = get("--secs").parse().unwrap_or_else(|_| fail("bad --secs"));
    let max: u64 = get("--max").parse().unwrap_or_else(|_| fail("bad --max"));
    let read = |f: &str| std::fs::read(f).unwrap_or_else(|e| fail(&format!("{f}: {e}")));
    let key = read(&get("--key"));
    let sets: Vec<Arc<LocalCert>> = get("--sets")
        .split(',')
        .map(|f| {
            let k = SigningKey::from_bytes(&key).unwrap_or_else(|e| fail(&e));
            Arc::new(LocalCert::new(&read(f), k).unwrap_or_else(|e| fail(&format!("{f}: {e}"))))
        })
        .collect();
    let proposals = opt
        .get("--ike")
        .map(|p| {
            let l: Vec<&str> = p.split(',').collect();
            IkeConfig::parse_ike_proposals(&l).unwrap_or_else(|e| fail(&e.to_string()))
        })
        .unwrap_or_default();
    // Any free port: the responder answers the port a request came from,
    // and the NAT detection hashes say that port, so no NAT is seen.
    let mut sources: Vec<Source> = get("--sources")
        .split(',')
        .enumerate()
        .map(|(i, s)| {
            let ip: IpAddr = s.parse().unwrap_or_else(|_| fail("bad --sources"));
            let sock = UdpSocket::bind((ip, 0)).unwrap_or_else(|e| fail(&format!("{ip}: {e}")));
            sock.set_nonblocking(true)
                .unwrap_or_else(|e| fail(&e.to_string()));
            let local = sock.local_addr().unwrap_or_else(|e| fail(&e.to_string()));
            Source {
                sock,
                local,
                ike: None,
                turn: i,
            }
        })
        .collect();
    let (mut auths, mut datagrams, mut inits) = (0u64, 0u64, 0u64);
    let end = Instant::now() + Duration::from_secs(secs);
    let mut buf = vec![0u8; 65_535];
    while Instant::now() < end && auths < max {
        let mut busy = false;
        for s in &mut sources {
            let now = Instant::now();
            if s.ike.as_ref().is_none_or(|(_, t)| now > *t + ATTEMPT) {
                let set = sets[s.turn % sets.len()].clone();
                s.turn += 1;
                let mut c = IkeConfig::new(s.local, SocketAddr::new(target, 500), b"unused");
                c.natt_port = s.local.port().wrapping_add(1);
                c.local_id = set.subject_id();
                c.local_auth = LocalAuth::Cert(set);
                if !proposals.is_empty() {
                    c.ike_proposals = proposals.clone();
                }
                c.initiate = true;
                let mut ike = Ike::new(c).unwrap_or_else(|e| fail(&e.to_string()));
                if ike.initiate(now).is_ok() {
                    inits += 1;
                }
                s.ike = Some((ike, now));
            }
            let Some((ike, _)) = s.ike.as_mut() else {
                continue;
            };
            while let Ok((n, from)) = s.sock.recv_from(&mut buf) {
                ike.handle_datagram(&buf[..n], s.local, from, Instant::now());
                busy = true;
            }
            ike.handle_timeout(Instant::now());
            let mut sent_auth = false;
            while let Some(a) = ike.poll_action() {
                if let Action::Send { remote, data, .. } = a {
                    let _ = s.sock.send_to(&data, remote);
                    if data.get(18) == Some(&IKE_AUTH) {
                        datagrams += 1;
                        sent_auth = true;
                    }
                    busy = true;
                }
            }
            if sent_auth {
                auths += 1;
                s.ike = None;
            }
        }
        if !busy {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    println!("auths {auths} datagrams {datagrams} inits {inits}");
}
