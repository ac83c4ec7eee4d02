//! The management plane as an attacker would try it, against a real
//! gateway in a namespace:
//!
//!   peer (192.0.2.2) ── wan [vecgate gw, ipsec tunnel esp0]
//!
//! Secret files (key, PSK, token) that are not private regular files are
//! refused at once, and the API keeps answering meanwhile; short or
//! world-readable token files are refused by `vecgate check` and `vecgate
//! run`; the TCP API speaks TLS only, and a burst of wrong tokens is
//! throttled (and counted) while a client with the right token goes on.

mod common;

use common::{unique, veth, Gateway, Netns};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A temporary directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(unique(tag));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const KEY_OUT: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20212223";
const KEY_IN: &str = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3";
const KEY_GOOD: &str = "5051525354555657585950515253545556575859505152535455565758595a5b5c5d5e5f";

/// The gateway's configuration: one interface, one static ipsec tunnel.
fn config(dir: &Path, api: &str) -> String {
    let out = dir.join("out.hex");
    let inn = dir.join("in.hex");
    common::write_secret(&out, format!("{KEY_OUT}\n"));
    common::write_secret(&inn, format!("{KEY_IN}\n"));
    format!(
        r#"[gateway]
name = "mgmt"
state_dir = "{}"
{api}

[[interface]]
name = "wan"
host = "wan"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[[tunnel]]
name = "esp0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.2"
traffic = ["10.2.0.0/24"]

[[tunnel.sa]]
direction = "out"
spi = 0x1001
algorithm = "aes256gcm16"
key_file = "{}"

[[tunnel.sa]]
direction = "in"
spi = 0x2001
algorithm = "aes256gcm16"
key_file = "{}"
"#,
        dir.join("state").display(),
        out.display(),
        inn.display()
    )
}

/// One request with curl; returns (HTTP status or 0 without an answer,
/// body, seconds it took). `target` is curl's connection options and URL
/// prefix, e.g. `--unix-socket /x.sock http://gw`.
fn curl(target: &str, method: &str, path: &str, body: Option<&str>) -> (u16, String, f64) {
    let (pre, url) = target.rsplit_once(' ').unwrap_or(("", target));
    let mut cmd = format!("curl -s -m 20 -w '\\n%{{http_code}}' -X {method} {pre} '{url}{path}'");
    if let Some(b) = body {
        cmd.push_str(&format!(
            " -H 'Content-Type: application/json' --data '{b}'"
        ));
    }
    let t0 = Instant::now();
    let out = Command::new("sh").arg("-c").arg(&cmd).output().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (b, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), b.to_owned(), secs)
}

/// Polls `GET /status` in the background, one request at a time (each
/// with a 5 s deadline), recording every outcome.
struct Poller {
    stop: Arc<AtomicBool>,
    codes: Arc<Mutex<Vec<u16>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Poller {
    fn start(target: &str) -> Poller {
        Self::start_with(None, target)
    }

    /// Polls from inside namespace `ns`.
    fn start_in(ns: &str, target: &str) -> Poller {
        Self::start_with(Some(ns.to_owned()), target)
    }

    fn start_with(ns: Option<String>, target: &str) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let codes = Arc::new(Mutex::new(Vec::new()));
        let (s, c, target) = (stop.clone(), codes.clone(), target.to_owned());
        let thread = std::thread::spawn(move || {
            let (pre, url) = target.rsplit_once(' ').unwrap_or(("", &target));
            while !s.load(Ordering::Relaxed) {
                let cmd =
                    format!("curl -s -m 5 -o /dev/null -w '%{{http_code}}' {pre} '{url}/status'");
                let out = match &ns {
                    None => Command::new("sh").arg("-c").arg(cmd).output(),
                    Some(ns) => Command::new("ip")
                        .args(["netns", "exec", ns, "sh", "-c", &cmd])
                        .output(),
                }
                .unwrap();
                let code = String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse()
                    .unwrap_or(0);
                c.lock().unwrap().push(code);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Poller {
            stop,
            codes,
            thread: Some(thread),
        }
    }

    fn count(&self) -> usize {
        self.codes.lock().unwrap().len()
    }

    /// Waits until `n` more polls are done (up to 60 s).
    fn wait_more(&self, n: usize) {
        let want = self.count() + n;
        assert!(
            common::wait_until(60, || self.count() >= want),
            "the poller did not finish {n} more requests within 60 s: {:?}",
            self.codes.lock().unwrap()
        );
    }

    fn finish(mut self) -> Vec<u16> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.codes.lock().unwrap().clone()
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// `key_file = "/dev/zero"` and a FIFO through `POST /sas` (and as a new
/// tunnel's key and PSK files through `POST /tunnels`) are refused with
/// the reason, while a poller's `GET /status` requests all get answers
/// and the gateway's memory does not grow. Before: the request never got
/// an answer, `GET /status` stopped answering, RSS grew by gigabytes (the
/// FIFO blocked the API forever).
#[test]
fn unsafe_key_files_are_refused_while_the_api_keeps_answering() {
    let gw_ns = Netns::new("mg");
    let peer = Netns::new("mp");
    veth(&gw_ns, "wan", &peer, "eth0");
    peer.sh("ip addr add 192.0.2.2/24 dev eth0");
    let dir = Dir::new("mgk");
    let sock = dir.0.join("gw.sock");
    let gw = Gateway::start(
        &gw_ns,
        &config(&dir.0, &format!("api = \"unix:{}\"", sock.display())),
    );
    let target = format!("--unix-socket {} http://gw", sock.display());
    let fifo = dir.0.join("fifo");
    common::sh(&format!("mkfifo -m 600 {}", fifo.display()));
    let open = dir.0.join("open.hex");
    std::fs::write(&open, format!("{KEY_IN}\n")).unwrap();
    common::sh(&format!("chmod 644 {}", open.display()));

    let rss0 = rss_kib(gw.pid());
    let poller = Poller::start(&target);
    poller.wait_more(3);
    let mut timings = Vec::new();
    for (i, (path, why)) in [
        ("/dev/zero".to_owned(), "character device"),
        (fifo.display().to_string(), "FIFO"),
        (open.display().to_string(), "mode 0644"),
        (dir.0.display().to_string(), "directory"),
    ]
    .iter()
    .enumerate()
    {
        let body = format!(
            r#"{{"tunnel":"esp0","spi":{},"algorithm":"aes256gcm16","key_file":"{path}"}}"#,
            0x3001 + i
        );
        let (st, b, secs) = curl(&target, "POST", "/sas", Some(&body));
        assert_eq!(st, 400, "POST /sas key_file {path}: {b}");
        assert!(
            b.contains(why) && b.contains("\"field\":\"key_file\""),
            "{path}: {b}"
        );
        timings.push(format!("/sas {path}: {:.0} ms", secs * 1000.0));
        // As a new tunnel's key file and PSK file.
        let sa = format!(
            r#"{{"direction":"out","spi":{},"algorithm":"aes256gcm16","key_file":"{}"}},{{"direction":"in","spi":{},"algorithm":"aes256gcm16","key_file":"{path}"}}"#,
            0x4001 + i,
            dir.0.join("out.hex").display(),
            0x5001 + i
        );
        let t = format!(
            r#"{{"name":"x{i}","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.3","traffic":["10.3.0.0/24"],"sa":[{sa}]}}"#
        );
        let (st, b, secs) = curl(&target, "POST", "/tunnels", Some(&t));
        assert!(
            st == 400 && b.contains(why) && b.contains("sa[1].key_file"),
            "POST /tunnels key_file {path}: {st} {b}"
        );
        timings.push(format!("/tunnels sa {path}: {:.0} ms", secs * 1000.0));
        let t = format!(
            r#"{{"name":"y{i}","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.4","ike":{{"psk_file":"{path}"}}}}"#
        );
        let (st, b, secs) = curl(&target, "POST", "/tunnels", Some(&t));
        assert!(
            st == 400 && b.contains(why) && b.contains("ike.psk_file"),
            "POST /tunnels psk_file {path}: {st} {b}"
        );
        timings.push(format!("/tunnels ike {path}: {:.0} ms", secs * 1000.0));
    }
    poller.wait_more(3);
    let codes = poller.finish();
    let rss1 = rss_kib(gw.pid());
    eprintln!(
        "refusals: {}; GET /status during them: {} requests, all answered; RSS {} -> {} KiB",
        timings.join(", "),
        codes.len(),
        rss0,
        rss1
    );
    assert!(
        codes.iter().all(|c| *c == 200),
        "every GET /status must be answered: {codes:?}"
    );
    // Nothing was installed or recorded, and the API still works.
    let (st, sas, _) = curl(&target, "GET", "/sas", None);
    assert_eq!(st, 200);
    assert!(
        !sas.contains("0x0000300") && !sas.contains("0x0000400"),
        "{sas}"
    );
    let (_, conf, _) = curl(&target, "GET", "/config", None);
    assert!(
        !conf.contains("/dev/zero") && !conf.contains("fifo"),
        "{conf}"
    );
    // A private regular key file still works (a key of its own: one key,
    // one SA).
    let good = dir.0.join("good.hex");
    common::write_secret(&good, format!("{KEY_GOOD}\n"));
    let (st, b, _) = curl(
        &target,
        "POST",
        "/sas",
        Some(&format!(
            r#"{{"tunnel":"esp0","spi":12289,"algorithm":"aes256gcm16","key_file":"{}"}}"#,
            good.display()
        )),
    );
    assert_eq!(st, 201, "{b}");
    // Bounded memory: no read of /dev/zero (before: gigabytes).
    assert!(
        rss1 < rss0 + 256 * 1024,
        "RSS grew from {rss0} to {rss1} KiB"
    );
}

fn check(config: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(common::vecgate_bin())
        .arg("check")
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `vecgate check` and `vecgate run` refuse a short token, a world-readable
/// token file and a world-readable key file, with the reason; a good token
/// file passes. Before: all were accepted (a 1-byte token worked).
#[test]
fn short_or_exposed_tokens_are_refused_at_check_and_run() {
    let dir = Dir::new("mgt");
    let tok = dir.0.join("token");
    let cfg_path = dir.0.join("gw.toml");
    let api = format!(
        "api = \"tcp:127.0.0.1:9494\"\napi_token_file = \"{}\"\napi_insecure_loopback = true",
        tok.display()
    );
    let cfg = config(&dir.0, &api);
    std::fs::write(&cfg_path, &cfg).unwrap();
    let long = "0123456789abcdef0123456789abcdef0123456789abcdef";

    let cases: [(&str, u32, &str); 3] = [
        ("x\n", 0o600, "at least 32"),
        ("short-token\n", 0o600, "11 bytes"),
        (long, 0o644, "mode 0644"),
    ];
    for (text, mode, why) in cases {
        std::fs::write(&tok, text).unwrap();
        common::sh(&format!("chmod {mode:o} {}", tok.display()));
        let (code, out, err) = check(&cfg_path);
        assert_eq!(code, Some(1), "{text:?} {mode:o}: {out} {err}");
        assert!(
            err.contains("api_token_file") && err.contains(why),
            "{text:?} {mode:o}: {err}"
        );
        // `vecgate run` refuses it too, before attaching anything.
        let ns = Netns::new("mgr");
        let out = ns.try_sh(&format!(
            "timeout 60 {} run --config {}",
            common::vecgate_bin().display(),
            cfg_path.display()
        ));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "run accepted {text:?} {mode:o}");
        assert!(err.contains(why), "run: {err}");
    }
    common::write_secret(&tok, format!("{long}\n"));
    let (code, out, err) = check(&cfg_path);
    assert_eq!(code, Some(0), "{out} {err}");
    // A key file others may read is refused too.
    common::sh(&format!("chmod 644 {}", dir.0.join("in.hex").display()));
    let (code, _, err) = check(&cfg_path);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("key_file") && err.contains("mode 0644"),
        "{err}"
    );
}

/// The value of the metric line starting with `prefix`.
fn metric(text: &str, prefix: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// The TCP API over TLS: curl and the CLI with the right CA and token get
/// answers; plain HTTP to the port and TLS without trusting the
/// certificate get none (the failed handshakes are counted). A burst of
/// wrong tokens from 127.0.0.2 gets 401s, those over budget late (with
/// Retry-After, after at least the throttle delay) and counted in
/// /metrics, while a client with the right token on 127.0.0.1 gets every
/// answer. Before: no TLS at all, every 401 at once, nothing counted.
#[test]
fn tls_api_and_throttled_wrong_tokens() {
    let gw_ns = Netns::new("ml");
    let peer = Netns::new("mq");
    veth(&gw_ns, "wan", &peer, "eth0");
    let dir = Dir::new("mgl");
    let tok = dir.0.join("token");
    let token = "tls-test-token-0123456789abcdef0123456789abcdef";
    common::write_secret(&tok, format!("{token}\n"));
    let (cert, key) = common::tls_cert(&dir.0);
    let api = format!(
        "api = \"tcp:127.0.0.1:9595\"\napi_token_file = \"{}\"\napi_tls_cert_file = \"{}\"\napi_tls_key_file = \"{}\"",
        tok.display(),
        cert.display(),
        key.display()
    );
    let cfg = config(&dir.0, &api);
    let _gw = Gateway::start(&gw_ns, &cfg);
    let ns = gw_ns.name.clone();
    let curl = |args: &str| -> String {
        let out = gw_ns.try_sh(&format!("curl -s -m 20 {args}"));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let good = format!(
        "--cacert {} -H 'Authorization: Bearer {token}'",
        cert.display()
    );
    let code = |args: &str| curl(&format!("-o /dev/null -w '%{{http_code}}' {args}"));

    // TLS with the right CA and token works.
    assert_eq!(
        code(&format!("{good} https://127.0.0.1:9595/status")),
        "200"
    );
    assert_eq!(
        code(&format!(
            "--cacert {} https://127.0.0.1:9595/status",
            cert.display()
        )),
        "401"
    );
    // Plain HTTP to the TLS port gets no HTTP answer; nor does a client
    // that does not trust the certificate.
    assert_eq!(code("http://127.0.0.1:9595/status"), "000");
    assert_eq!(
        code(&format!(
            "-H 'Authorization: Bearer {token}' https://127.0.0.1:9595/status"
        )),
        "000"
    );
    let m = curl(&format!("{good} https://127.0.0.1:9595/metrics"));
    assert!(
        metric(&m, "vecgate_api_tls_handshake_failures_total") >= 2,
        "{m}"
    );
    // The CLI speaks TLS: with --ca-file, and with --config (which trusts
    // the configured certificate).
    let bin = common::vecgate_bin();
    let out = gw_ns.try_sh(&format!(
        "{} show interfaces --api tcp:127.0.0.1:9595 --ca-file {} --token-file {}",
        bin.display(),
        cert.display(),
        tok.display()
    ));
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("wan"),
        "{out:?}"
    );
    let cfg_path = dir.0.join("gw.toml");
    std::fs::write(&cfg_path, &cfg).unwrap();
    let out = gw_ns.try_sh(&format!(
        "{} show tunnels --config {}",
        bin.display(),
        cfg_path.display()
    ));
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("esp0"),
        "{out:?}"
    );
    // Without a CA the CLI speaks plain HTTP, which the TLS port refuses.
    let out = gw_ns.try_sh(&format!(
        "{} show interfaces --api tcp:127.0.0.1:9595 --token-file {}",
        bin.display(),
        tok.display()
    ));
    assert!(!out.status.success(), "{out:?}");

    // A burst of wrong tokens from 127.0.0.2 (60 requests, 20 at a time)
    // while a good client polls from 127.0.0.1.
    let m0 = curl(&format!("{good} https://127.0.0.1:9595/metrics"));
    let failures0 = metric(&m0, "vecgate_api_auth_failures_total");
    let poller = Poller::start_in(
        &ns,
        &format!("{good} --interface 127.0.0.1 https://127.0.0.1:9595"),
    );
    poller.wait_more(2);
    let attack = gw_ns.spawn(&format!(
        "sh -c \"seq 60 | xargs -P 20 -I N curl -s -m 30 -o /dev/null --cacert {} --interface 127.0.0.2 \
         -H 'Authorization: Bearer wrong-token-N-0123456789abcdef0123456789' \
         -w '%{{http_code}} %{{time_total}} %header{{retry-after}}\\n' https://127.0.0.1:9595/routes\"",
        cert.display()
    ));
    let out = attack.wait_with_output().unwrap();
    poller.wait_more(2);
    let codes = poller.finish();
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 60, "{lines:?}");
    let mut throttled = 0;
    for l in &lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(f.first(), Some(&"401"), "{l}");
        let secs: f64 = f.get(1).and_then(|s| s.parse().ok()).unwrap_or(0.0);
        // Every failure waited at least the base delay, a throttled one
        // (Retry-After) at least the throttle delay: timers vecgate set.
        assert!(secs >= 0.19, "401 after {secs} s: {l}");
        if f.len() > 2 {
            throttled += 1;
            assert!(secs >= 0.99, "throttled 401 after {secs} s: {l}");
        }
    }
    let m1 = curl(&format!("{good} https://127.0.0.1:9595/metrics"));
    let failures = metric(&m1, "vecgate_api_auth_failures_total") - failures0;
    let counted = metric(&m1, "vecgate_api_auth_throttled_total");
    eprintln!(
        "60 wrong tokens: {throttled} throttled (Retry-After), /metrics failures +{failures}, throttled {counted}; good client: {} requests, codes {codes:?}",
        codes.len()
    );
    assert!(throttled >= 20, "{throttled} of 60 throttled: {lines:?}");
    assert_eq!(failures, 60, "{m1}");
    assert_eq!(counted, throttled as u64, "{m1}");
    assert!(
        codes.len() >= 4 && codes.iter().all(|c| *c == 200),
        "the good client must get every answer: {codes:?}"
    );
}
