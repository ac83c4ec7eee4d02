//! strongSwan's charon (kernel-libipsec: ESP in userspace over a TUN
//! device) in a test namespace, configured through swanctl. Adapted from
//! crates/ike/tests/strongswan.rs. Debian 12's 5.9.8 libipsec always
//! encapsulates ESP in UDP 4500 (see /work/shared/notes/peers.md).
#![allow(dead_code)]

use super::Netns;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The receive buffer charon's IKE/NAT-T sockets get (8 MiB: a few
/// thousand ESP packets of headroom).
pub const CHARON_RCVBUF: usize = 8 << 20;

/// What charon's swanctl.conf says.
pub struct CharonCfg<'a> {
    pub local: &'a str,
    pub remote: &'a str,
    pub local_id: &'a str,
    pub remote_id: &'a str,
    pub local_ts: &'a str,
    pub remote_ts: &'a str,
    pub ike: &'a str,
    pub esp: &'a str,
    pub psk: &'a str,
    /// Start the connection when loaded (otherwise charon responds).
    pub initiate: bool,
}

/// How charon authenticates (default: both ways with the PSK).
#[derive(Default)]
pub struct Auth<'a> {
    /// The `local { }` block's auth lines (e.g. `auth = pubkey` and
    /// `certs = b.pem`).
    pub local: Option<&'a str>,
    /// The `remote { }` block's.
    pub remote: Option<&'a str>,
    /// Files written into its SWANCTL_DIR before it starts (`x509/`,
    /// `x509ca/`, `x509crl/`, `pkcs8/`).
    pub files: &'a [(&'a str, &'a [u8])],
    /// The IKE SA's keys in charon's log (`ike = 4`; [`Charon::ike_keys`]),
    /// so that tshark decrypts its exchanges. Test keys only.
    pub ike_keys_logged: bool,
}

/// A running charon; killed (by its pid) and its directory removed on drop.
pub struct Charon {
    pub dir: PathBuf,
    ns: String,
    child: Option<Child>,
}

impl Charon {
    /// Starts charon in `ns` and loads the connection `vg` (child `net`).
    pub fn start(ns: &Netns, c: &CharonCfg<'_>) -> Charon {
        Charon::start_ext(ns, c, "", "")
    }

    /// As [`Charon::start`], with extra settings in the connection block
    /// (`conn_extra`, e.g. `dpd_delay = 2s`) and in the child block.
    pub fn start_ext(ns: &Netns, c: &CharonCfg<'_>, conn_extra: &str, child_extra: &str) -> Charon {
        Charon::start_with(ns, c, conn_extra, child_extra, 2, &Auth::default())
    }

    /// As [`Charon::start_ext`], authenticating with `auth` (certificates:
    /// its files go into charon's SWANCTL_DIR).
    pub fn start_auth(ns: &Netns, c: &CharonCfg<'_>, conn_extra: &str, auth: &Auth<'_>) -> Charon {
        Charon::start_with(ns, c, conn_extra, "", 2, auth)
    }

    /// As [`Charon::start`], with the child SAs' keys in charon's log
    /// (`chd = 4`; [`Charon::child_key`]): a test may craft ESP as the
    /// peer would. Test keys only.
    pub fn start_keys_logged(ns: &Netns, c: &CharonCfg<'_>) -> Charon {
        Charon::start_with(ns, c, "", "", 4, &Auth::default())
    }

    /// The keys charon logged for its IKE SAs (with
    /// [`Auth::ike_keys_logged`]): `(SK_ei, SK_er)` in the order of
    /// their negotiation.
    pub fn ike_keys(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        // `Sk_ei secret => 36 bytes @ 0x...`, then rows of 16 bytes.
        let secret = |at: usize| {
            let n: usize = lines[at]
                .split("=> ")
                .nth(1)
                .and_then(|x| x.split(' ').next())
                .and_then(|x| x.parse().ok())
                .unwrap_or(0);
            let mut key = Vec::new();
            for l in &lines[at + 1..] {
                let Some((_, rest)) = l.split_once("[IKE]") else {
                    break;
                };
                let Some((off, bytes)) = rest.trim_start().split_once(": ") else {
                    break;
                };
                if off.parse::<usize>().is_err() {
                    break;
                }
                key.extend(
                    bytes
                        .split_whitespace()
                        .take(16)
                        .map_while(|b| u8::from_str_radix(b, 16).ok()),
                );
            }
            key.truncate(n);
            key
        };
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            if l.contains("Sk_ei secret =>") {
                if let Some(j) = lines[i..]
                    .iter()
                    .position(|l| l.contains("Sk_er secret =>"))
                {
                    out.push((secret(i), secret(i + j)));
                }
            }
        }
        out
    }

    /// The last child SA key charon logged as `what` ("encryption
    /// initiator key": initiator to responder; an AEAD key with its
    /// salt), from the hex dump of [`Charon::start_keys_logged`]'s log.
    pub fn child_key(&self, what: &str) -> Option<Vec<u8>> {
        let log = self.log();
        let mut lines = log.lines();
        let mut found = None;
        while let Some(l) = lines.next() {
            let Some(rest) = l.split(&format!("{what} => ")).nth(1) else {
                continue;
            };
            let n: usize = rest.split_whitespace().next()?.parse().ok()?;
            let mut key = Vec::with_capacity(n);
            for l in lines.by_ref() {
                // "14[CHD]   16: 3B 75 04 A7      ;u.."
                let Some((_, dump)) = l.split_once("]").and_then(|(_, r)| r.split_once(": "))
                else {
                    break;
                };
                for b in dump.split_whitespace().take(16) {
                    if key.len() < n {
                        if let Ok(x) = u8::from_str_radix(b, 16) {
                            key.push(x);
                        }
                    }
                }
                if key.len() >= n {
                    break;
                }
            }
            if key.len() == n {
                found = Some(key);
            }
        }
        found
    }

    fn start_with(
        ns: &Netns,
        c: &CharonCfg<'_>,
        conn_extra: &str,
        child_extra: &str,
        chd_level: u8,
        auth: &Auth<'_>,
    ) -> Charon {
        assert!(
            std::path::Path::new("/usr/lib/ipsec/charon").exists(),
            "strongSwan charon is not installed (strongswan-charon strongswan-swanctl libcharon-extra-plugins libstrongswan-standard-plugins)"
        );
        let dir = std::env::temp_dir().join(super::unique("charon"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("run")).unwrap();
        for (name, data) in auth.files {
            let p = dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, data).unwrap();
        }
        let d = dir.display().to_string();
        let ike_level = if auth.ike_keys_logged { 4 } else { 2 };
        std::fs::write(
            dir.join("strongswan.conf"),
            format!(
                "charon {{
  load = random nonce openssl kdf pem pkcs1 pkcs8 x509 revocation constraints pubkey kernel-libipsec kernel-netlink socket-default vici updown
  install_routes = yes
  retransmit_timeout = 1.0
  retransmit_tries = 4
  plugins {{
    vici {{ socket = unix://{d}/charon.vici }}
  }}
  filelog {{
    log {{
      path = {d}/charon.log
      default = 1
      ike = {ike_level}
      chd = {chd_level}
      cfg = 2
      esp = 1
      net = 1
      flush_line = yes
    }}
  }}
}}
"
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("swanctl.conf"),
            format!(
                "connections {{
  vg {{
    version = 2
    local_addrs = {local}
    remote_addrs = {remote}
    proposals = {ike}
    rekey_time = 0
    dpd_delay = 0
    {conn_extra}
    local {{
      {local_auth}
      id = {local_id}
    }}
    remote {{
      {remote_auth}
      id = {remote_id}
    }}
    children {{
      net {{
        local_ts = {local_ts}
        remote_ts = {remote_ts}
        esp_proposals = {esp}
        rekey_time = 0
        start_action = {start}
        {child_extra}
      }}
    }}
  }}
}}
secrets {{
  ike-1 {{
    id-1 = {local_id}
    id-2 = {remote_id}
    secret = \"{psk}\"
  }}
}}
",
                local = c.local,
                remote = c.remote,
                ike = c.ike,
                esp = c.esp,
                local_id = c.local_id,
                remote_id = c.remote_id,
                local_ts = c.local_ts,
                remote_ts = c.remote_ts,
                psk = c.psk,
                start = if c.initiate { "start" } else { "none" },
                conn_extra = conn_extra,
                child_extra = child_extra,
                local_auth = auth.local.unwrap_or("auth = psk"),
                remote_auth = auth.remote.unwrap_or("auth = psk"),
            ),
        )
        .unwrap();
        let out = std::fs::File::create(dir.join("charon.out")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name, "sh", "-c"])
            .arg(format!(
                "mount --bind {d}/run /run && exec /usr/lib/ipsec/charon"
            ))
            .env("STRONGSWAN_CONF", dir.join("strongswan.conf"))
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let ch = Charon {
            dir,
            ns: ns.name.clone(),
            child: Some(child),
        };
        let t0 = Instant::now();
        while !ch.dir.join("charon.vici").exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "charon did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // charon's default 208 KiB socket buffer overflows while its one
        // thread decrypts a transfer of a few MB: a larger buffer keeps
        // its own drops (counted in its namespace) out of the transfers'
        // retransmits. Its sockets are open once vici listens.
        let pid = ch.child.as_ref().map_or(0, |c| c.id());
        let bufs =
            super::common::wire_judge::enlarge_receive_buffers(pid, &[500, 4500], CHARON_RCVBUF);
        assert!(
            !bufs.is_empty() && bufs.iter().all(|b| *b >= CHARON_RCVBUF as u64),
            "charon's UDP sockets (pid {pid}) kept their buffers: {bufs:?}"
        );
        let conf = format!("{d}/swanctl.conf");
        let out = ch.swanctl(&["--load-all", "--file", &conf]);
        assert!(out.contains("successfully loaded 1 connections"), "{out}");
        ch
    }

    pub fn swanctl(&self, args: &[&str]) -> String {
        let vici = format!("unix://{}/charon.vici", self.dir.display());
        let o = Command::new("ip")
            .args(["netns", "exec", &self.ns, "swanctl"])
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

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("charon.log")).unwrap_or_default()
    }

    /// `swanctl --list-sas` once it contains `what` (or panics after `secs`).
    pub fn wait_sas(&self, what: &str, secs: u64) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.swanctl(&["--list-sas"]);
            if s.contains(what) {
                return s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(secs),
                "charon SAs: wanted {what:?}, got:\n{s}\n---- charon log ----\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Charon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            // Not eprintln! (see the Gateway's drop in common/mod.rs).
            let _ = writeln!(std::io::stderr(), "---- charon log ----\n{}", self.log());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// gwB (`gb`) as a kernel router in front of charon: 192.0.2.2/24 on
/// b-wan, 10.2.0.1/24 on b-lan, IPv4 forwarding, then `extra` (more
/// addresses, routes); no segmentation offloads on b-lan, b-wan and the
/// host `h2`'s eth0, nor on the further `no_offload` devices: libipsec's
/// TUN path wants MTU-sized segments (segments must fit the tunnel).
pub fn router(gb: &Netns, h2: &Netns, extra: &str, no_offload: &[(&Netns, &str)]) {
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(" && {extra}")
    };
    gb.sh(&format!(
        "ip addr add 192.0.2.2/24 dev b-wan && ip addr add 10.2.0.1/24 dev b-lan && sysctl -qw net.ipv4.ip_forward=1{extra}"
    ));
    let std = [(gb, "b-lan"), (h2, "eth0"), (gb, "b-wan")];
    for (ns, dev) in std.iter().chain(no_offload) {
        let _ = ns.try_sh(&format!("ethtool -K {dev} tso off gso off gro off"));
    }
}

// vecgate's side of an IKE test: its `show ike` through the CLI.

pub fn cli_json(api: &str, what: &str) -> serde_json::Value {
    let out = Command::new(super::common::vecgate_bin())
        .args(["show", what, "--json", "--api", api])
        .output()
        .expect("vecgate show");
    assert!(
        out.status.success(),
        "vecgate show {what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "show {what} --json: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

pub fn ike_state(api: &str) -> serde_json::Value {
    cli_json(api, "ike")[0].clone()
}

/// Waits until `show ike` says established with a child SA.
pub fn wait_established(api: &str, gw: &super::Gateway, secs: u64) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    let ok = super::wait_until(secs, || {
        last = ike_state(api);
        last["state"] == "established"
            && last["child_sas"].as_array().is_some_and(|c| !c.is_empty())
    });
    assert!(
        ok,
        "vecgate did not establish: {last:#}\n---- log ----\n{}",
        gw.log_text()
    );
    last
}
