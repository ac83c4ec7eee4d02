//! Interop against strongSwan's charon (kernel-libipsec) in network
//! namespaces. Needs root and the Debian packages strongswan-charon,
//! strongswan-swanctl, libcharon-extra-plugins,
//! libstrongswan-standard-plugins (scripts/install-deps.sh).
//!
//! Layout: netns A runs `vecgate-ike-peer` (our driver), netns B runs
//! charon; a veth pair joins them (10.77.0.1 / 10.77.0.2). Child keys are
//! compared byte for byte with what charon logs at `chd = 4`.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static COUNTER: AtomicUsize = AtomicUsize::new(0);
/// Two cores for everyone: one lab at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const A_IP: &str = "10.77.0.1";
const B_IP: &str = "10.77.0.2";
const PSK: &str = "interop-test-psk-0123";

fn sh(args: &[&str]) -> (bool, String) {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("running {args:?}: {e}"));
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&o.stderr));
    (o.status.success(), s)
}

fn must(args: &[&str]) -> String {
    let (ok, out) = sh(args);
    assert!(ok, "{args:?} failed: {out}");
    out
}

struct Lab {
    a: String,
    b: String,
    a_ip: String,
    b_ip: String,
    a_ts: String,
    b_ts: String,
    dir: PathBuf,
    charon: Option<Child>,
}

#[derive(Default)]
struct LabCfg<'a> {
    ike: &'a str,
    esp: &'a str,
    charon_psk: &'a str,
    /// Extra `charon { }` settings.
    charon_extra: &'a str,
    /// IPv6 outer addresses and IPv6 traffic selectors.
    v6: bool,
    /// Identities (default: the outer addresses).
    a_id: &'a str,
    b_id: &'a str,
    /// charon's `local { }` and `remote { }` auth lines (default: PSK).
    charon_local: &'a str,
    charon_remote: &'a str,
    /// Files written into the lab directory before charon starts (its
    /// SWANCTL_DIR: x509/, x509ca/, x509crl/, pkcs8/).
    files: &'a [(&'a str, &'a [u8])],
}

impl Lab {
    fn new(c: &LabCfg) -> Lab {
        assert!(
            std::path::Path::new("/usr/lib/ipsec/charon").exists(),
            "strongSwan charon is not installed (scripts/install-deps.sh)"
        );
        let id = format!(
            "{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let dir = std::env::temp_dir().join(format!("vgike-{id}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("run")).unwrap();
        for (name, data) in c.files {
            let p = dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, data).unwrap();
        }
        let (a_ip, b_ip, plen, a_ts, b_ts, b_lo) = if c.v6 {
            (
                "fd77::1",
                "fd77::2",
                64,
                "fd01::/64",
                "fd02::/64",
                "fd02::1/64",
            )
        } else {
            (A_IP, B_IP, 24, "10.1.0.0/16", "10.2.0.0/16", "10.2.0.1/16")
        };
        let mut lab = Lab {
            a: format!("vgike-a-{id}"),
            b: format!("vgike-b-{id}"),
            a_ip: a_ip.into(),
            b_ip: b_ip.into(),
            a_ts: a_ts.into(),
            b_ts: b_ts.into(),
            dir,
            charon: None,
        };
        let a_id = if c.a_id.is_empty() { a_ip } else { c.a_id };
        let b_id = if c.b_id.is_empty() { b_ip } else { c.b_id };
        must(&["ip", "netns", "add", &lab.a]);
        must(&["ip", "netns", "add", &lab.b]);
        must(&[
            "ip", "-n", &lab.a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns",
            &lab.b,
        ]);
        must(&[
            "ip",
            "-n",
            &lab.a,
            "addr",
            "add",
            &format!("{a_ip}/{plen}"),
            "dev",
            "va",
            "nodad",
        ]);
        must(&[
            "ip",
            "-n",
            &lab.b,
            "addr",
            "add",
            &format!("{b_ip}/{plen}"),
            "dev",
            "vb",
            "nodad",
        ]);
        // charon installs a route with a source inside its local_ts.
        must(&["ip", "-n", &lab.b, "addr", "add", b_lo, "dev", "lo"]);
        for (ns, dev) in [
            (&lab.a, "va"),
            (&lab.b, "vb"),
            (&lab.a, "lo"),
            (&lab.b, "lo"),
        ] {
            must(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
        let d = lab.dir.display().to_string();
        std::fs::write(
            lab.dir.join("strongswan.conf"),
            format!(
                "charon {{
  load = random nonce openssl kdf pem pkcs1 pkcs8 x509 revocation constraints pubkey kernel-libipsec kernel-netlink socket-default vici updown
  install_routes = yes
  # Quick retransmissions: charon occasionally loses the request it sends
  # right after an INVALID_KE_PAYLOAD/COOKIE round trip.
  retransmit_timeout = 1.0
  retransmit_tries = 3
  {extra}
  plugins {{
    vici {{ socket = unix://{d}/charon.vici }}
  }}
  filelog {{
    log {{
      path = {d}/charon.log
      default = 1
      ike = 4
      chd = 4
      cfg = 2
      esp = 1
      net = 1
      flush_line = yes
    }}
  }}
}}
",
                extra = c.charon_extra
            ),
        )
        .unwrap();
        std::fs::write(
            lab.dir.join("swanctl.conf"),
            format!(
                "connections {{
  vg {{
    version = 2
    local_addrs = {b_ip}
    remote_addrs = {a_ip}
    proposals = {ike}
    rekey_time = 0
    local {{
      {local}
      id = {b_id}
    }}
    remote {{
      {remote}
      id = {a_id}
    }}
    children {{
      net {{
        local_ts = {b_ts}
        remote_ts = {a_ts}
        esp_proposals = {esp}
        rekey_time = 0
      }}
    }}
  }}
}}
secrets {{
  ike-1 {{
    id-1 = {a_id}
    id-2 = {b_id}
    secret = \"{psk}\"
  }}
}}
",
                ike = c.ike,
                esp = c.esp,
                psk = c.charon_psk,
                local = if c.charon_local.is_empty() {
                    "auth = psk"
                } else {
                    c.charon_local
                },
                remote = if c.charon_remote.is_empty() {
                    "auth = psk"
                } else {
                    c.charon_remote
                },
            ),
        )
        .unwrap();
        std::fs::write(lab.dir.join("psk"), PSK).unwrap();
        let out = std::fs::File::create(lab.dir.join("charon.out")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &lab.b, "sh", "-c"])
            .arg(format!(
                "mount --bind {d}/run /run && exec /usr/lib/ipsec/charon"
            ))
            .env("STRONGSWAN_CONF", lab.dir.join("strongswan.conf"))
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        lab.charon = Some(child);
        let t0 = Instant::now();
        while !lab.dir.join("charon.vici").exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "charon did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let conf = format!("{d}/swanctl.conf");
        let out = lab.swanctl(&["--load-all", "--file", &conf]);
        assert!(out.contains("successfully loaded 1 connections"), "{out}");
        lab
    }

    fn swanctl(&self, args: &[&str]) -> String {
        let vici = format!("unix://{}/charon.vici", self.dir.display());
        let o = Command::new("ip")
            .args(["netns", "exec", &self.b, "swanctl"])
            .args(args)
            .args(["--uri", &vici])
            .env("STRONGSWAN_CONF", self.dir.join("strongswan.conf"))
            .env("SWANCTL_DIR", &self.dir)
            .output()
            .unwrap();
        let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
        s.push_str(&String::from_utf8_lossy(&o.stderr));
        s
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("charon.log")).unwrap_or_default()
    }

    fn wait_sas(&self, what: &str, present: bool) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.swanctl(&["--list-sas"]);
            if s.contains(what) == present {
                return s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "charon SAs: wanted {what:?} present={present}, got:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn peer(&self, initiate: bool, ike: &str, esp: &str) -> Peer {
        self.peer_with(initiate, ike, esp, &[])
    }

    fn peer_with(&self, initiate: bool, ike: &str, esp: &str, extra: &[&str]) -> Peer {
        let mut cmd = Command::new("ip");
        cmd.args([
            "netns",
            "exec",
            &self.a,
            env!("CARGO_BIN_EXE_vecgate-ike-peer"),
        ])
        .args(["--local", &self.a_ip, "--remote", &self.b_ip])
        .arg("--psk-file")
        .arg(self.dir.join("psk"))
        .args(["--ike", ike, "--esp", esp])
        .args([
            "--local-ts",
            &self.a_ts,
            "--remote-ts",
            &self.b_ts,
            "--print-keys",
        ]);
        if initiate {
            cmd.arg("--initiate");
        }
        cmd.args(extra);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Peer {
            child,
            stdin,
            lines: rx,
            seen: Vec::new(),
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.charon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.a, &self.b] {
            let (_, pids) = sh(&["ip", "netns", "pids", ns]);
            for p in pids.split_whitespace() {
                let _ = sh(&["kill", "-9", p]);
            }
            let _ = sh(&["ip", "netns", "del", ns]);
        }
        if std::thread::panicking() || std::env::var_os("VGIKE_KEEP").is_some() {
            eprintln!("charon log kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Peer {
    /// Wait for a new output line matching `pred`.
    fn wait(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let left = Duration::from_secs(20).saturating_sub(t0.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if pred(&l) {
                        return l;
                    }
                }
                Err(_) => panic!(
                    "vecgate peer: no {what}; output so far:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    fn cmd(&mut self, c: &str) {
        writeln!(self.stdin, "{c}").unwrap();
        self.stdin.flush().unwrap();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Installed {
    spi_in: String,
    spi_out: String,
    enc_in: Vec<u8>,
    enc_out: Vec<u8>,
    integ_in: Vec<u8>,
    integ_out: Vec<u8>,
    udp: bool,
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn parse_install(l: &str) -> Installed {
    let f = |k: &str| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")).map(str::to_string))
            .unwrap_or_default()
    };
    Installed {
        spi_in: f("spi_in"),
        spi_out: f("spi_out"),
        enc_in: unhex(&f("enc_in")),
        enc_out: unhex(&f("enc_out")),
        integ_in: unhex(&f("integ_in")),
        integ_out: unhex(&f("integ_out")),
        udp: f("udp") == "true",
    }
}

/// Keys charon hex-dumped: ("encryption initiator", bytes), ... in order.
fn charon_keys(log: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut lines = log.lines();
    while let Some(l) = lines.next() {
        let Some(pos) = l.find(" key => ") else {
            continue;
        };
        let head = &l[..pos];
        let Some(kind) = [
            "encryption initiator",
            "encryption responder",
            "integrity initiator",
            "integrity responder",
        ]
        .iter()
        .find(|k| head.ends_with(*k)) else {
            continue;
        };
        let n: usize = l[pos + 8..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let mut bytes = Vec::new();
        while bytes.len() < n {
            let Some(h) = lines.next() else { break };
            let Some(colon) = h.find(": ") else { break };
            let want = (n - bytes.len()).min(16);
            bytes.extend(
                h[colon + 2..]
                    .split_whitespace()
                    .take(want)
                    .map(|t| u8::from_str_radix(t, 16).unwrap()),
            );
        }
        out.push((kind.to_string(), bytes));
    }
    out
}

/// Our keys must equal charon's; `we_initiated` says who began the
/// exchange that created the child (its "initiator" keys protect
/// initiator → responder traffic).
fn assert_keys_match(lab: &Lab, k: &Installed, we_initiated: bool) {
    let keys = charon_keys(&lab.log());
    let has = |kind: &str, v: &[u8]| keys.iter().any(|(k2, b)| k2 == kind && b == v);
    let (ei, er) = if we_initiated {
        (&k.enc_out, &k.enc_in)
    } else {
        (&k.enc_in, &k.enc_out)
    };
    assert!(!ei.is_empty() && ei != er);
    assert!(
        has("encryption initiator", ei),
        "initiator key not in charon's log"
    );
    assert!(
        has("encryption responder", er),
        "responder key not in charon's log"
    );
    if !k.integ_in.is_empty() {
        let (ii, ir) = if we_initiated {
            (&k.integ_out, &k.integ_in)
        } else {
            (&k.integ_in, &k.integ_out)
        };
        assert!(
            has("integrity initiator", ii),
            "integrity initiator key mismatch"
        );
        assert!(
            has("integrity responder", ir),
            "integrity responder key mismatch"
        );
    }
    // Debian's kernel-libipsec fakes a NAT: ESP must go in UDP.
    assert!(k.udp);
}

fn is_install(l: &str) -> bool {
    l.starts_with("INSTALL ")
}

#[test]
fn vecgate_initiates_groups_14_19_31_and_esp_suites() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (ike, esp) in [
        ("aes256-sha256-modp2048", "aes128gcm16"),
        ("aes256-sha256-ecp256", "aes256gcm16"),
        ("aes256-sha256-x25519", "aes128-sha1"),
        ("aes128gcm16-prfsha256-x25519", "aes256-sha256"),
    ] {
        let lab = Lab::new(&LabCfg {
            ike,
            esp,
            charon_psk: PSK,
            charon_extra: "",
            ..Default::default()
        });
        let mut p = lab.peer(true, ike, esp);
        let l = p.wait("child install", is_install);
        p.wait("IKE established event", |l| l.contains("ChildEstablished"));
        let k = parse_install(&l);
        let sas = lab.wait_sas("INSTALLED", true);
        assert!(sas.contains("ESTABLISHED"), "{sas}");
        assert!(sas.contains(&format!("in  {}", k.spi_out)), "{sas}");
        assert!(sas.contains(&format!("out {}", k.spi_in)), "{sas}");
        assert!(p.seen.iter().any(|l| l.contains("IkeEstablished")));
        assert_keys_match(&lab, &k, true);
        p.cmd("delete-ike");
        p.wait("IKE deletion", |l| l.contains("IkeDeleted"));
        lab.wait_sas("ESTABLISHED", false);
    }
}

#[test]
fn charon_initiates_and_rekeys() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (ike, esp, full) in [
        ("aes256-sha256-modp2048", "aes256-sha256", false),
        ("aes256-sha256-ecp256", "aes128-sha1", false),
        ("aes256-sha256-x25519", "aes128gcm16-x25519", true),
    ] {
        let lab = Lab::new(&LabCfg {
            ike,
            esp,
            charon_psk: PSK,
            charon_extra: "",
            ..Default::default()
        });
        let mut p = lab.peer(false, ike, esp);
        std::thread::sleep(Duration::from_millis(300));
        let out = lab.swanctl(&["--initiate", "--child", "net", "--timeout", "20"]);
        assert!(out.contains("initiate completed successfully"), "{out}");
        let k = parse_install(&p.wait("child install", is_install));
        assert_keys_match(&lab, &k, false);
        lab.wait_sas("INSTALLED", true);
        if !full {
            continue;
        }
        // charon rekeys the child (with PFS, x25519): new SA, old one
        // removed, keys match.
        let out = lab.swanctl(&["--rekey", "--child", "net"]);
        assert!(out.contains("rekey completed successfully"), "{out}");
        let k2 = parse_install(&p.wait("rekeyed child", is_install));
        p.wait("old child removal", |l| {
            l.starts_with(&format!("REMOVE spi_in={}", k.spi_in))
        });
        assert_keys_match(&lab, &k2, false);
        // charon rekeys the IKE SA, then a child rekey runs over the new SA.
        let out = lab.swanctl(&["--rekey", "--ike", "vg"]);
        assert!(out.contains("rekey completed successfully"), "{out}");
        p.wait("IKE rekey", |l| l.contains("IkeRekeyed"));
        p.wait("old IKE SA deletion", |l| l.contains("IkeDeleted"));
        let out = lab.swanctl(&["--rekey", "--child", "net"]);
        assert!(out.contains("rekey completed successfully"), "{out}");
        let k3 = parse_install(&p.wait("child rekeyed over new IKE SA", is_install));
        assert_keys_match(&lab, &k3, false);
        let out = lab.swanctl(&["--terminate", "--ike", "vg", "--timeout", "10"]);
        assert!(out.contains("terminate completed successfully"), "{out}");
        // Children go first, then the IKE SA.
        p.wait("child removal", |l| {
            l.starts_with(&format!("REMOVE spi_in={}", k3.spi_in))
        });
        p.wait("IKE deletion", |l| l.contains("IkeDeleted"));
    }
}

#[test]
fn vecgate_rekeys_child_and_ike_then_deletes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (ike, esp) = ("aes256-sha256-ecp256", "aes256gcm16-ecp256");
    let lab = Lab::new(&LabCfg {
        ike,
        esp,
        charon_psk: PSK,
        charon_extra: "",
        ..Default::default()
    });
    let mut p = lab.peer_with(true, ike, esp, &["--dpd", "1"]);
    let k = parse_install(&p.wait("child install", is_install));
    lab.wait_sas("INSTALLED", true);
    // Our liveness check (empty INFORMATIONAL) reaches charon and is answered.
    let t0 = Instant::now();
    while !lab.log().contains("parsed INFORMATIONAL request 2 [ ]") {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no DPD from vecgate"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    p.cmd("rekey-child");
    // PFS (ecp256) on CREATE_CHILD_SA.
    let k2 = parse_install(&p.wait("rekeyed child", is_install));
    p.wait("old child removal", |l| {
        l.starts_with(&format!("REMOVE spi_in={}", k.spi_in))
    });
    assert_keys_match(&lab, &k2, true);
    let sas = lab.wait_sas(&format!("out {}", k2.spi_in), true);
    assert!(sas.contains("INSTALLED"), "{sas}");
    assert!(lab.log().contains("DH group ECP_256") || lab.log().contains("ECP_256"));
    p.cmd("rekey-ike");
    let l = p.wait("IKE rekey", |l| l.contains("IkeRekeyed"));
    p.wait("old IKE SA deletion", |l| l.contains("IkeDeleted"));
    let new_spi_i: u64 = l
        .split("new: (")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap();
    lab.wait_sas(&format!("{new_spi_i:016x}_i"), true);
    // Child rekey over the rekeyed IKE SA.
    p.cmd("rekey-child");
    let k3 = parse_install(&p.wait("child rekeyed over new IKE SA", is_install));
    assert_keys_match(&lab, &k3, true);
    p.cmd("delete-child");
    p.wait("child delete", |l| {
        l.starts_with(&format!("REMOVE spi_in={}", k3.spi_in))
    });
    lab.wait_sas("INSTALLED", false);
    p.cmd("delete-ike");
    p.wait("IKE deletion", |l| l.contains("IkeDeleted"));
    lab.wait_sas("ESTABLISHED", false);
}

#[test]
fn wrong_psk_fails_clearly_on_both_sides() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (ike, esp) = ("aes256-sha256-x25519", "aes128gcm16");
    // vecgate initiates.
    let lab = Lab::new(&LabCfg {
        ike,
        esp,
        charon_psk: "some-other-psk",
        charon_extra: "",
        ..Default::default()
    });
    let mut p = lab.peer(true, ike, esp);
    p.wait("authentication failure", |l| {
        l.contains("Failed { reason: AuthenticationFailed")
    });
    assert!(!p.seen.iter().any(|l| is_install(l)));
    let log = lab.log();
    assert!(
        log.contains("MAC mismatched") || log.contains("AUTHENTICATION_FAILED"),
        "charon did not report the failure"
    );
    assert!(!lab.swanctl(&["--list-sas"]).contains("INSTALLED"));
    drop(p);
    // charon initiates.
    let mut p = lab.peer(false, ike, esp);
    std::thread::sleep(Duration::from_millis(300));
    let out = lab.swanctl(&["--initiate", "--child", "net", "--timeout", "15"]);
    assert!(!out.contains("completed successfully"), "{out}");
    p.wait("authentication failure", |l| {
        l.contains("Failed { reason: AuthenticationFailed")
    });
    assert!(!p.seen.iter().any(|l| is_install(l)));
    assert!(lab.log().contains("AUTHENTICATION_FAILED"));
}

#[test]
fn fragmentation_both_ways_rfc7383() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (ike, esp) = (
        "aes256-sha256-modp2048",
        "aes128gcm16,aes256gcm16,aes128-sha1,aes256-sha256",
    );
    let lab = Lab::new(&LabCfg {
        ike,
        esp: "aes256-sha256",
        charon_psk: PSK,
        charon_extra: "fragment_size = 200",
        ..Default::default()
    });
    let mut p = lab.peer_with(true, ike, esp, &["--fragment-size", "200"]);
    let k = parse_install(&p.wait("child install", is_install));
    assert_keys_match(&lab, &k, true);
    lab.wait_sas("INSTALLED", true);
    let log = lab.log();
    // charon reassembled ours and fragmented its own.
    assert!(
        log.contains("IKE_AUTH request 1 [ EF"),
        "our IKE_AUTH was not fragmented"
    );
    assert!(
        log.contains("received fragment #"),
        "charon saw no fragments"
    );
    assert!(
        log.contains("splitting IKE message"),
        "charon did not fragment"
    );
    p.cmd("rekey-child");
    let k2 = parse_install(&p.wait("rekeyed child", is_install));
    assert_keys_match(&lab, &k2, true);
    p.cmd("delete-ike");
    p.wait("IKE deletion", |l| l.contains("IkeDeleted"));
}

#[test]
fn negotiation_edge_cases() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab_for = |ike| {
        Lab::new(&LabCfg {
            ike,
            esp: "aes128gcm16",
            charon_psk: PSK,
            charon_extra: "",
            ..Default::default()
        })
    };
    // vecgate's first KE group (x25519) is not charon's: INVALID_KE_PAYLOAD,
    // retry with modp2048.
    {
        let lab = lab_for("aes256-sha256-modp2048");
        let mut p = lab.peer(true, "aes256-sha256-x25519-modp2048", "aes128gcm16");
        let k = parse_install(&p.wait("child install", is_install));
        assert!(
            p.seen.iter().any(|l| l.contains("dh: Modp2048")),
            "{:?}",
            p.seen
        );
        assert_keys_match(&lab, &k, true);
    }
    // charon's KE group (ecp256) is not ours: we answer INVALID_KE_PAYLOAD
    // and charon retries with x25519. Our cookie threshold 0 makes charon
    // go through a COOKIE round trip as well (RFC 7296 §2.6).
    {
        let lab = lab_for("aes256-sha256-ecp256-x25519");
        let mut p = lab.peer_with(
            false,
            "aes256-sha256-x25519",
            "aes128gcm16",
            &["--cookie-threshold", "0"],
        );
        std::thread::sleep(Duration::from_millis(300));
        let out = lab.swanctl(&["--initiate", "--child", "net", "--timeout", "20"]);
        let k = parse_install(&p.wait("child install", is_install));
        assert!(out.contains("initiate completed successfully"), "{out}");
        assert_keys_match(&lab, &k, false);
        let log = lab.log();
        assert!(
            log.contains("N(INVAL_KE)"),
            "no INVALID_KE_PAYLOAD seen by charon"
        );
        assert!(log.contains("N(COOKIE)"), "no COOKIE seen by charon");
    }
    // No common IKE proposal.
    {
        let lab = lab_for("aes256gcm16-prfsha256-x25519");
        let mut p = lab.peer(true, "aes128-sha1-modp2048", "aes128gcm16");
        p.wait("proposal failure", |l| {
            l.contains("Failed { reason: NoProposalChosen, child: false }")
        });
        assert!(lab.log().contains("received proposals unacceptable"));
    }
    // Traffic selectors that do not match charon's: the IKE SA stands, the
    // child fails with TS_UNACCEPTABLE and nothing is installed.
    {
        let lab = lab_for("aes256-sha256-x25519");
        let mut p = lab.peer_with(
            true,
            "aes256-sha256-x25519",
            "aes128gcm16",
            &["--remote-ts", "10.99.0.0/16"],
        );
        p.wait("TS failure", |l| {
            l.contains("Failed { reason: TsUnacceptable, child: true }")
        });
        assert!(p.seen.iter().any(|l| l.contains("IkeEstablished")));
        assert!(!p.seen.iter().any(|l| is_install(l)));
        let sas = lab.wait_sas("ESTABLISHED", true);
        assert!(!sas.contains("INSTALLED"), "{sas}");
    }
}

#[test]
fn ipv6_with_fqdn_and_key_id_identities() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (ike, esp) = ("aes256gcm16-prfsha256-ecp256", "aes256gcm16");
    let lab = Lab::new(&LabCfg {
        ike,
        esp,
        charon_psk: PSK,
        v6: true,
        a_id: "vecgate.example",
        b_id: "keyid:charon01",
        ..Default::default()
    });
    let mut p = lab.peer_with(
        true,
        ike,
        esp,
        &[
            "--local-id",
            "vecgate.example",
            "--remote-id",
            "keyid:charon01",
        ],
    );
    let k = parse_install(&p.wait("child install", is_install));
    assert_keys_match(&lab, &k, true);
    let sas = lab.wait_sas("INSTALLED", true);
    assert!(sas.contains("'vecgate.example' @ fd77::1"), "{sas}");
    assert!(sas.contains("fd01::/64"), "{sas}");
    p.cmd("rekey-ike");
    p.wait("IKE rekey", |l| l.contains("IkeRekeyed"));
    p.cmd("delete-ike");
    p.wait("IKE deletion", |l| l.contains("IkeDeleted"));
}

#[path = "support/pki.rs"]
mod pki;

/// A PKI for a certificate lab: root and intermediate CA, charon's end
/// entity (b.vecgate.test) and ours (a.vecgate.test).
struct Pki {
    root: pki::Ca,
    inter: pki::Ca,
    a: pki::Leaf,
    b: pki::Leaf,
}

impl Pki {
    fn new(alg: pki::Alg) -> Pki {
        let root = pki::Ca::root("Interop Root", alg);
        let inter = root.intermediate("Interop Intermediate", alg);
        let a = inter.issue(&pki::Spec::new("gw-a", &["a.vecgate.test"], alg));
        let b = inter.issue(&pki::Spec::new("gw-b", &["b.vecgate.test"], alg));
        Pki { root, inter, a, b }
    }

    /// charon's credentials, in its SWANCTL_DIR layout, and ours.
    fn files(&self) -> Vec<(&'static str, Vec<u8>)> {
        vec![
            ("x509ca/root.pem", self.root.pem.clone().into_bytes()),
            ("x509ca/inter.pem", self.inter.pem.clone().into_bytes()),
            ("x509/b.pem", self.b.pem.clone().into_bytes()),
            ("pkcs8/b.key", self.b.key_pem.clone().into_bytes()),
            (
                "ours/chain.pem",
                pki::chain_pem(&self.a, &[&self.inter]).into_bytes(),
            ),
            ("ours/a.key", self.a.key_pem.clone().into_bytes()),
            ("ours/root.pem", self.root.pem.clone().into_bytes()),
        ]
    }
}

const CHARON_PUBKEY: &str = "auth = pubkey\n      certs = b.pem";

fn cert_lab<'a>(files: &'a [(&'a str, &'a [u8])], local: &'a str, extra: &'a str) -> Lab {
    Lab::new(&LabCfg {
        ike: "aes256gcm16-prfsha256-x25519",
        esp: "aes256gcm16",
        charon_psk: PSK,
        charon_extra: extra,
        a_id: "a.vecgate.test",
        b_id: "b.vecgate.test",
        charon_local: local,
        charon_remote: "auth = pubkey",
        files,
        ..Default::default()
    })
}

fn cert_args(lab: &Lab) -> Vec<String> {
    let f = |n: &str| lab.dir.join("ours").join(n).display().to_string();
    vec![
        "--cert".into(),
        f("chain.pem"),
        "--key".into(),
        f("a.key"),
        "--ca".into(),
        f("root.pem"),
        "--local-id".into(),
        "a.vecgate.test".into(),
        "--remote-id".into(),
        "b.vecgate.test".into(),
    ]
}

/// charon logged that it authenticated us.
fn charon_authenticated_us(lab: &Lab) -> bool {
    let t0 = Instant::now();
    loop {
        let log = lab.log();
        if log.lines().any(|l| {
            l.contains("authentication of 'a.vecgate.test' with") && l.contains("successful")
        }) {
            return true;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            eprintln!("{log}");
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn certificates_both_ways_every_key_type() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // (key type, charon's strongswan.conf extra, extra args of ours,
    // the scheme both sides sign with).
    for (alg, charon_extra, ours, want) in [
        (pki::Alg::P256, "", &[][..], "ecdsa-sha256"),
        (pki::Alg::P384, "", &[][..], "ecdsa-sha384"),
        (pki::Alg::Ed25519, "", &[][..], "ed25519"),
        (pki::Alg::Rsa, "", &["--pkcs1"][..], "rsa-pkcs1-sha256"),
        (pki::Alg::Rsa, "rsa_pss = yes", &[][..], "rsa-pss-sha256"),
    ] {
        let pki = Pki::new(alg);
        let files = pki.files();
        let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, d)| (*n, d.as_slice())).collect();
        for we_initiate in [true, false] {
            let lab = cert_lab(&refs, CHARON_PUBKEY, charon_extra);
            let mut args = cert_args(&lab);
            args.extend(ours.iter().map(|s| s.to_string()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut p = lab.peer_with(we_initiate, lab_ike(), "aes256gcm16", &args);
            if !we_initiate {
                std::thread::sleep(Duration::from_millis(300));
                let out = lab.swanctl(&["--initiate", "--child", "net", "--timeout", "20"]);
                assert!(out.contains("completed successfully"), "{alg:?}: {out}");
            }
            p.wait("child install", is_install);
            let auth = p.wait("AUTH line", |l| l.starts_with("AUTH "));
            assert!(
                auth.contains(&format!("local={want} remote={want}"))
                    && auth.contains("subject=\"C=CH, O=vecgate test, CN=gw-b\""),
                "{alg:?} initiate={we_initiate}: {auth}"
            );
            assert!(
                charon_authenticated_us(&lab),
                "{alg:?} initiate={we_initiate}"
            );
            let sas = lab.wait_sas("INSTALLED", true);
            assert!(sas.contains("ESTABLISHED"), "{sas}");
        }
    }
}

fn lab_ike() -> &'static str {
    "aes256gcm16-prfsha256-x25519"
}

#[test]
fn classic_ecdsa_methods_with_a_peer_without_rfc7427() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (alg, want) in [
        (pki::Alg::P256, "ecdsa-256 (classic)"),
        (pki::Alg::P384, "ecdsa-384 (classic)"),
    ] {
        let pki = Pki::new(alg);
        let files = pki.files();
        let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, d)| (*n, d.as_slice())).collect();
        let lab = cert_lab(&refs, CHARON_PUBKEY, "signature_authentication = no");
        let args = cert_args(&lab);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut p = lab.peer_with(true, lab_ike(), "aes256gcm16", &args);
        p.wait("child install", is_install);
        let auth = p.wait("AUTH line", |l| l.starts_with("AUTH "));
        assert!(
            auth.contains(&format!("local={want} remote={want}")),
            "{alg:?}: {auth}"
        );
        assert!(charon_authenticated_us(&lab));
    }
}

#[test]
fn certificate_refusals_both_ways() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pki = Pki::new(pki::Alg::P256);
    let files = pki.files();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, d)| (*n, d.as_slice())).collect();
    // We trust another root: charon's certificate is refused by us.
    let other = pki::Ca::root("Other Root", pki::Alg::P256);
    let lab = cert_lab(&refs, CHARON_PUBKEY, "");
    let other_pem = lab.dir.join("ours/other.pem");
    std::fs::write(&other_pem, &other.pem).unwrap();
    let mut args = cert_args(&lab);
    args[5] = other_pem.display().to_string();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut p = lab.peer_with(true, lab_ike(), "aes256gcm16", &args);
    let l = p.wait("refusal", |l| l.contains("Failed {"));
    assert!(l.contains("PeerAuth(UnknownCa"), "{l}");
    assert!(!p.seen.iter().any(|l| is_install(l)));
    drop(p);
    // Our certificate expired: charon refuses it and says so.
    let old = pki.inter.issue(&pki::Spec {
        until: (2021, 1, 1),
        ..pki::Spec::new("gw-a", &["a.vecgate.test"], pki::Alg::P256)
    });
    std::fs::write(
        lab.dir.join("ours/chain.pem"),
        pki::chain_pem(&old, &[&pki.inter]),
    )
    .unwrap();
    std::fs::write(lab.dir.join("ours/a.key"), &old.key_pem).unwrap();
    let args = cert_args(&lab);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut p = lab.peer_with(true, lab_ike(), "aes256gcm16", &args);
    let l = p.wait("refusal", |l| l.contains("Failed {"));
    assert!(l.contains("AuthenticationFailed"), "{l}");
    assert!(!p.seen.iter().any(|l| is_install(l)));
    assert!(
        lab.log()
            .contains("subject certificate invalid (valid from"),
        "charon did not say why"
    );
}
