//! A standalone IKEv2 peer around `vecgate_ike::driver`, for interop tests
//! and manual experiments. Prints one line per action on stdout; reads
//! commands (`rekey-child`, `rekey-ike`, `delete-child`, `delete-ike`,
//! `create-child`, `quit`) from stdin. Child keys are printed only with
//! `--print-keys` (test use).
//!
//! Certificates: `--cert FILE` (PEM, end entity first, then
//! intermediates) with `--key FILE` signs our AUTH; `--ca FILE,..`,
//! `--crl FILE,..` and `--remote-cert FILE` make the peer sign. Without
//! them the PSK of `--psk-file` is used on that side. `--pkcs1` signs
//! RSA with PKCS#1 v1.5 instead of PSS, `--no-send-cert` leaves CERT
//! out, `--wrong-key-for-tests FILE` signs with a key that is not the
//! certificate's (the peer must refuse it).

use std::io::{BufRead, Write};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use vecgate_ike::driver::Driver;
use vecgate_ike::pki::{LocalCert, SigningKey, TrustStore};
use vecgate_ike::{Action, Identity, Ike, IkeConfig, LocalAuth, RemoteAuth};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "error: {msg}\nusage: vecgate-ike-peer --local IP --remote IP [--psk-file FILE] \
         [--cert FILE --key FILE] [--ca FILE,..] [--crl FILE,..] [--remote-cert FILE] [--pkcs1] [--no-send-cert] \
         [--ike P,..] [--esp P,..] [--local-ts PFX,..] [--remote-ts PFX,..] \
         [--local-id ID] [--remote-id ID] [--initiate] [--dpd SECS] [--fragment-size N] [--cookie-threshold N] [--force-encap] [--print-keys]"
    );
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut opt = std::collections::HashMap::new();
    let mut flags = std::collections::HashSet::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--initiate" | "--print-keys" | "--force-encap" | "--pkcs1" | "--no-send-cert" => {
                flags.insert(a);
            }
            _ if a.starts_with("--") => {
                let v = args
                    .next()
                    .unwrap_or_else(|| usage(&format!("{a} needs a value")));
                opt.insert(a, v);
            }
            _ => usage(&format!("unexpected {a}")),
        }
    }
    let get = |k: &str| opt.get(k).cloned();
    let ip = |k: &str| -> std::net::IpAddr {
        get(k)
            .unwrap_or_else(|| usage(&format!("{k} missing")))
            .parse()
            .unwrap_or_else(|_| usage(&format!("{k}: bad address")))
    };
    let (local, remote) = (ip("--local"), ip("--remote"));
    let psk = match get("--psk-file") {
        Some(f) => std::fs::read(f).unwrap_or_else(|e| usage(&format!("psk file: {e}"))),
        None => Vec::new(),
    };
    let psk: Vec<u8> = String::from_utf8_lossy(&psk).trim_end().as_bytes().to_vec();
    let mut cfg = IkeConfig::new((local, 500).into(), (remote, 500).into(), &psk);
    let read = |f: &str| std::fs::read(f).unwrap_or_else(|e| usage(&format!("{f}: {e}")));
    let list = |k: &str| -> Vec<String> {
        get(k)
            .map(|v| v.split(',').map(str::to_string).collect())
            .unwrap_or_default()
    };
    if let Some(v) = get("--ike") {
        let l: Vec<&str> = v.split(',').collect();
        cfg.ike_proposals =
            IkeConfig::parse_ike_proposals(&l).unwrap_or_else(|e| usage(&e.to_string()));
    }
    if let Some(v) = get("--esp") {
        let l: Vec<&str> = v.split(',').collect();
        cfg.esp_proposals =
            IkeConfig::parse_esp_proposals(&l).unwrap_or_else(|e| usage(&e.to_string()));
    }
    cfg.local_ts = list("--local-ts")
        .iter()
        .map(|s| s.parse().unwrap_or_else(|e| usage(&format!("{e}"))))
        .collect();
    cfg.remote_ts = list("--remote-ts")
        .iter()
        .map(|s| s.parse().unwrap_or_else(|e| usage(&format!("{e}"))))
        .collect();
    if let Some(v) = get("--local-id") {
        cfg.local_id = Identity::from_text(&v);
    }
    if let Some(v) = get("--remote-id") {
        cfg.remote_id = Identity::from_text(&v);
    }
    if let Some(v) = get("--dpd") {
        cfg.dpd_interval = v.parse().ok().map(Duration::from_secs);
    }
    if let Some(v) = get("--fragment-size") {
        cfg.fragment_size = Some(v.parse().unwrap_or_else(|_| usage("bad --fragment-size")));
    }
    if let Some(v) = get("--cookie-threshold") {
        cfg.cookie_threshold = v
            .parse()
            .unwrap_or_else(|_| usage("bad --cookie-threshold"));
    }
    if let Some(cert) = get("--cert") {
        let key = get("--wrong-key-for-tests")
            .or_else(|| get("--key"))
            .unwrap_or_else(|| usage("--cert needs --key"));
        let key = SigningKey::from_bytes(&read(&key)).unwrap_or_else(|e| usage(&e));
        let own = SigningKey::from_bytes(&read(&get("--key").unwrap_or_default()))
            .unwrap_or_else(|e| usage(&e));
        let mut l = LocalCert::new(&read(&cert), own).unwrap_or_else(|e| usage(&e));
        if get("--wrong-key-for-tests").is_some() {
            l = l.with_foreign_key_for_tests(key);
        }
        l.rsa_pss = !flags.contains("--pkcs1");
        l.send_certs = !flags.contains("--no-send-cert");
        if get("--local-id").is_none() {
            cfg.local_id = l.subject_id();
        }
        cfg.local_auth = LocalAuth::Cert(Arc::new(l));
    }
    let cas = list("--ca");
    let remote_cert = get("--remote-cert");
    if !cas.is_empty() || remote_cert.is_some() {
        let mut t = TrustStore::default();
        for f in &cas {
            t.add_anchors(&read(f))
                .unwrap_or_else(|e| usage(&format!("{f}: {e}")));
        }
        for f in &list("--crl") {
            t.add_crls(&read(f))
                .unwrap_or_else(|e| usage(&format!("{f}: {e}")));
        }
        if let Some(f) = &remote_cert {
            t.pin_peer(&read(f))
                .unwrap_or_else(|e| usage(&format!("{f}: {e}")));
        }
        cfg.remote_auth = RemoteAuth::Cert(Arc::new(t));
    }
    cfg.initiate = flags.contains("--initiate");
    cfg.force_encap = flags.contains("--force-encap");
    let print_keys = flags.contains("--print-keys");
    let initiate = cfg.initiate;
    let ike = Ike::new(cfg).unwrap_or_else(|e| usage(&e.to_string()));
    let mut d = Driver::bind(ike).unwrap_or_else(|e| usage(&format!("bind: {e}")));

    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(l) = line else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let out = std::io::stdout();
    let mut on = |a: &Action| {
        let mut o = out.lock();
        let _ = match a {
            Action::Send { .. } => Ok(()),
            Action::InstallChild(k) => {
                if print_keys {
                    writeln!(
                        o,
                        "INSTALL spi_in={:08x} spi_out={:08x} alg={} udp={} enc_in={} enc_out={} integ_in={} integ_out={}",
                        k.spi_in, k.spi_out, k.algorithm, k.udp_encap,
                        hex(&k.enc_key_in), hex(&k.enc_key_out), hex(&k.integ_key_in), hex(&k.integ_key_out)
                    )
                } else {
                    writeln!(o, "INSTALL {k:?}")
                }
            }
            Action::RemoveChild { spi_in, spi_out } => {
                writeln!(o, "REMOVE spi_in={spi_in:08x} spi_out={spi_out:08x}")
            }
            Action::Event(e) => writeln!(o, "EVENT {e:?}"),
        };
        let _ = o.flush();
    };
    if initiate {
        if let Err(e) = d.ike_mut().initiate(Instant::now()) {
            usage(&format!("initiate: {e}"));
        }
    }
    let mut dropped = 0;
    let mut last_auth: Option<String> = None;
    loop {
        if d.step(Duration::from_millis(50), &mut on, &mut |_, _, _| {})
            .is_err()
        {
            return;
        }
        if let Some(a) = d.ike_mut().auth_info() {
            let subject = a.peer_cert.as_ref().map(|c| c.info.subject.clone());
            let line = format!(
                "AUTH local={} remote={} peer_id=\"{}\" subject=\"{}\"",
                a.local,
                a.remote,
                a.peer_id,
                subject.unwrap_or_default()
            );
            if last_auth.as_ref() != Some(&line) {
                println!("{line}");
                last_auth = Some(line);
            }
        }
        if let (n, Some(e)) = d.ike_mut().dropped() {
            if n != dropped {
                dropped = n;
                println!("DROPPED {n} {e}");
            }
        }
        let children: Vec<u32> = d.ike_mut().child_sas().iter().map(|c| c.0).collect();
        while let Ok(cmd) = rx.try_recv() {
            let now = Instant::now();
            let ike = d.ike_mut();
            match cmd.trim() {
                "rekey-child" => children.iter().for_each(|s| ike.rekey_child(*s, now)),
                "rekey-ike" => ike.rekey_ike(now),
                "create-child" => ike.create_child(now),
                "delete-child" => children.iter().for_each(|s| ike.delete_child(*s, now)),
                "delete-ike" => ike.delete_ike(now),
                "quit" => return,
                other => eprintln!("unknown command {other:?}"),
            }
            let _ = d.flush(&mut on);
        }
    }
}
