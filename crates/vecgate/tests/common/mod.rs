//! Test topologies: network namespaces joined by veth pairs, and a vecgate
//! daemon running in one of them. Everything is removed on drop, also when a
//! test fails, and names are unique per process and call so tests run in
//! parallel.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod ha_pair;
pub mod pki;
pub mod sites;
pub mod wire_judge;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A unique short tag for names (netns names are free-length, but ifnames are
/// at most 15 bytes, and files under /tmp should not collide).
pub fn unique(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("vg{}{}{}", std::process::id() % 100_000, tag, n)
}

/// Writes a secret file (key, PSK, API token) readable by its owner only:
/// vecgate refuses secret files that group or others may read.
pub fn write_secret(path: &std::path::Path, text: impl AsRef<[u8]>) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write secret file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .expect("chmod 600 secret file");
}

/// Files a test wrote (secret files: keys, PSKs), removed when it ends.
#[derive(Default)]
pub struct TempFiles(pub Vec<PathBuf>);

impl TempFiles {
    /// Writes `text` to a new file in the temporary directory, named
    /// after `tag`; its path.
    pub fn write(&mut self, tag: &str, text: impl AsRef<[u8]>) -> String {
        let p = std::env::temp_dir().join(unique(tag));
        std::fs::write(&p, text).expect("write temporary file");
        self.0.push(p.clone());
        p.display().to_string()
    }

    /// Writes `text` to a new secret file (see [`write_secret`]) in the
    /// temporary directory, named after `tag`; its path.
    pub fn secret(&mut self, tag: &str, text: impl AsRef<[u8]>) -> String {
        let p = std::env::temp_dir().join(unique(tag));
        write_secret(&p, text);
        self.0.push(p.clone());
        p.display().to_string()
    }
}

impl Drop for TempFiles {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// A self-signed TLS certificate for the API (EC P-256, names 127.0.0.1,
/// ::1 and localhost; not a CA, as a server certificate must be) and its
/// private key (0600), written by openssl into `dir`: (cert, key).
pub fn tls_cert(dir: &std::path::Path) -> (PathBuf, PathBuf) {
    let cnf = dir.join("tls.cnf");
    std::fs::write(
        &cnf,
        "[req]\ndistinguished_name = dn\nx509_extensions = ext\nprompt = no\n\
         [dn]\nCN = vecgate-api-test\n\
         [ext]\nbasicConstraints = critical,CA:FALSE\n\
         subjectAltName = IP:127.0.0.1,IP:::1,DNS:localhost\n\
         extendedKeyUsage = serverAuth\nkeyUsage = critical,digitalSignature\n",
    )
    .expect("write openssl config");
    let (cert, key) = (dir.join("api-cert.pem"), dir.join("api-key.pem"));
    sh(&format!(
        "umask 077 && openssl req -x509 -config {} -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
         -nodes -keyout {} -out {} -days 2 2>&1",
        cnf.display(),
        key.display(),
        cert.display()
    ));
    (cert, key)
}

/// Runs a shell command on the host and returns its output; panics with the
/// command's stderr if it fails.
pub fn sh(cmd: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("spawn sh");
    if !out.status.success() {
        panic!(
            "command failed ({}): {}\nstdout: {}\nstderr: {}",
            out.status,
            cmd,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace, deleted (with everything in it) on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = unique(tag);
        sh(&format!("ip netns add {name}"));
        let ns = Netns { name };
        ns.sh("ip link set lo up");
        ns
    }

    /// Runs a shell command inside the namespace; panics on failure.
    pub fn sh(&self, cmd: &str) -> String {
        sh(&format!(
            "ip netns exec {} sh -c '{}'",
            self.name,
            cmd.replace('\'', "'\\''")
        ))
    }

    /// Runs a shell command inside the namespace and returns its raw output.
    pub fn try_sh(&self, cmd: &str) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name, "sh", "-c", cmd])
            .output()
            .expect("spawn ip netns exec")
    }

    /// Starts a long-running command inside the namespace.
    pub fn spawn(&self, cmd: &str) -> Child {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.name,
                "sh",
                "-c",
                &format!("exec {cmd}"),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn in netns")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Kill whatever still runs in it, then delete it.
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ip netns pids {0} 2>/dev/null | xargs -r kill -9; ip netns del {0}",
                self.name
            ))
            .status();
    }
}

/// How many ingress guards (tcx programs named `vecgate_guard`) are
/// attached at netdev `dev`'s tcx ingress hook in `ns`; 0 when there is no
/// such netdev. Read with `BPF_PROG_QUERY` from a thread inside the
/// namespace (`vecgate_io::netdev::tcx_ingress_programs`): Debian 12's
/// bpftool does not know tcx.
pub fn tcx_guards(ns: &Netns, dev: &str) -> usize {
    let path = PathBuf::from(format!("/run/netns/{}", ns.name));
    let dev = dev.to_string();
    std::thread::spawn(move || {
        vecgate_io::netdev::enter_netns(&path).expect("setns");
        match vecgate_io::netdev::tcx_ingress_programs(&dev) {
            Ok(v) => v
                .iter()
                .filter(|p| p.name == vecgate_io::netdev::GUARD_PROGRAM_NAME)
                .count(),
            Err(vecgate_io::IoError::NoSuchDevice(_)) => 0,
            Err(e) => panic!("tcx programs on {dev}: {e}"),
        }
    })
    .join()
    .expect("tcx query thread")
}

/// The nftables tables named `vecgate_*` in `ns` (the ingress guard's
/// fallback, and of vecgate before tcx).
pub fn nft_guard_tables(ns: &Netns) -> Vec<String> {
    ns.sh("nft list tables")
        .lines()
        .filter(|l| l.contains("vecgate_"))
        .map(str::to_string)
        .collect()
}

/// Creates a veth pair directly inside two namespaces (names are local to
/// each namespace, so they need not be globally unique).
pub fn veth(a: &Netns, a_if: &str, b: &Netns, b_if: &str) {
    sh(&format!(
        "ip link add {a_if} netns {} type veth peer name {b_if} netns {}",
        a.name, b.name
    ));
    a.sh(&format!("ip link set {a_if} up"));
    b.sh(&format!("ip link set {b_if} up"));
}

/// Path of the release or debug vecgate binary built by cargo for this test.
/// `VECGATE_BIN` overrides it (to measure an older build with the same
/// test, e.g. a reproduction run on the build before a fix).
pub fn vecgate_bin() -> PathBuf {
    std::env::var_os("VECGATE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_vecgate")))
}

/// A vecgate daemon running in a namespace; SIGTERM on drop. Its log is kept
/// and printed when the test fails.
pub struct Gateway {
    child: Option<Child>,
    pub log: Arc<Mutex<Vec<String>>>,
    pub config: PathBuf,
    pub ns: String,
    /// The state directory [`with_state_dir`] made up, if it did.
    state: Option<PathBuf>,
}

impl Gateway {
    /// Writes `config` to a file and starts `vecgate run` in `ns`, waiting
    /// (up to 20 s) for the "ready" log line.
    pub fn start(ns: &Netns, config: &str) -> Gateway {
        Self::start_env(ns, config, &[])
    }

    /// [`Gateway::start`] with these environment variables added.
    pub fn start_env(ns: &Netns, config: &str, env: &[(&str, &str)]) -> Gateway {
        let path = std::env::temp_dir().join(format!("{}.toml", unique("cfg")));
        let (text, state) = with_state_dir(config);
        std::fs::write(&path, text).expect("write config");
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .arg(vecgate_bin())
            .args(["run", "--config"])
            .arg(&path)
            .args(["--log-level", "debug"])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn vecgate");
        let log = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    log.lock().unwrap().push(line);
                }
            });
        }
        let mut gw = Gateway {
            child: Some(child),
            log,
            config: path,
            ns: ns.name.clone(),
            state,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if gw.log_contains("ready") {
                break;
            }
            if let Some(status) = gw.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("vecgate exited early ({status}):\n{}", gw.log_text());
            }
            if Instant::now() > deadline {
                panic!("vecgate not ready after 20 s:\n{}", gw.log_text());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        gw
    }

    /// Rewrites the gateway's configuration file with `config` (e.g. before
    /// a SIGHUP), keeping the `state_dir` [`with_state_dir`] gave it at
    /// start: a reload refuses a changed state directory (restart only).
    pub fn rewrite_config(&self, config: &str) {
        let text = match &self.state {
            Some(d) if !config.contains("state_dir") => config.replacen(
                "[gateway]\n",
                &format!("[gateway]\nstate_dir = \"{}\"\n", d.display()),
                1,
            ),
            _ => config.to_string(),
        };
        std::fs::write(&self.config, text).expect("write config");
    }

    /// Rewrites the file with `text` ([`Gateway::rewrite_config`]) and runs
    /// `vecgate reload --config` on it: (success, stdout and stderr).
    pub fn reload(&self, text: &str) -> (bool, String) {
        self.rewrite_config(text);
        let out = Command::new(vecgate_bin())
            .args(["reload", "--config"])
            .arg(&self.config)
            .output()
            .expect("vecgate reload");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    pub fn log_text(&self) -> String {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .join("\n")
    }

    pub fn log_contains(&self, needle: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(needle))
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Sends SIGKILL and reaps the process: when this returns it is gone
    /// and the kernel has closed every descriptor it held.
    pub fn kill9(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("already stopped");
        let _ = child.kill();
        child.wait().unwrap()
    }

    /// Sends SIGTERM and waits for a clean exit; returns the exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("already stopped");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(c.id().to_string())
                .status();
            std::thread::sleep(Duration::from_millis(200));
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            // Not eprintln!: a closed stderr (a test run piped into
            // `head`) would panic while panicking, aborting the process
            // before the namespaces' and other daemons' guards run.
            let _ = writeln!(
                std::io::stderr(),
                "---- vecgate log ({}) ----\n{}",
                self.ns,
                self.log_text()
            );
        }
        let _ = std::fs::remove_file(&self.config);
        if let Some(d) = &self.state {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// `config` with a `state_dir` of its own under /tmp unless it names one:
/// tests run in parallel with the same gateway names, and the default
/// (/var/lib/vecgate/NAME) would be shared (and is locked per gateway).
/// Returns the text and the directory it added (removed with the gateway).
pub fn with_state_dir(config: &str) -> (String, Option<PathBuf>) {
    if config.contains("state_dir")
        || !config.contains("[gateway]\n")
        || std::env::var_os("VECGATE_BIN").is_some()
    {
        return (config.to_string(), None);
    }
    let dir = std::env::temp_dir().join(format!("{}.state", unique("st")));
    let text = config.replacen(
        "[gateway]\n",
        &format!("[gateway]\nstate_dir = \"{}\"\n", dir.display()),
        1,
    );
    (text, Some(dir))
}

/// Polls `f` every 100 ms until it returns true or `secs` pass.
pub fn wait_until(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Receiver script: `python3 SCRIPT ADDR PORT` prints "sha256 bytes".
pub const TCP_RX: &str = r#"
import socket, hashlib, sys
addr, port = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = socket.socket(fam)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", port))
s.listen(1)
s.settimeout(60)
c, _ = s.accept()
c.settimeout(60)
h = hashlib.sha256()
n = 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    h.update(b)
    n += len(b)
print(h.hexdigest(), n)
"#;

/// A slow TCP transfer (about `secs` seconds of 16 KiB writes) and its
/// receiver; both print "sha256 bytes".
pub const SLOW_TX: &str = r#"
import socket, hashlib, os, sys, time
addr, port, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
for i in range(150):
    try:
        s = socket.create_connection((addr, port), timeout=30)
        break
    except OSError:
        time.sleep(0.1)
s.settimeout(60)
h = hashlib.sha256()
n = 0
end = time.time() + secs
while time.time() < end:
    d = os.urandom(16384)
    s.sendall(d)
    h.update(d)
    n += len(d)
    time.sleep(0.01)
s.close()
print(h.hexdigest(), n)
"#;

/// CPU time (user + system, clock ticks of 10 ms) of `pid`'s thread
/// named `name` (the IKE thread is "vg-ike").
pub fn thread_ticks(pid: u32, name: &str) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    for t in dir.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesized name: state is field 3, utime 14.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        return f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    }
    0
}

/// Resident memory of `pid`, KiB (VmRSS).
pub fn vm_rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

const TCP_TX: &str = r#"
import socket, hashlib, os, sys, time
addr, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = os.urandom(n)
for i in range(150):
    try:
        s = socket.create_connection((addr, port), timeout=30)
        break
    except (ConnectionRefusedError, OSError):
        time.sleep(0.1)
# A deadline per MiB (the socket timeout bounds each sendall as a whole),
# not for the whole transfer: a loaded machine may be slow, but a transfer
# that stops moving still fails.
s.settimeout(60)
for off in range(0, len(d), 1 << 20):
    s.sendall(d[off:off + (1 << 20)])
s.close()
print(hashlib.sha256(d).hexdigest(), len(d))
"#;

/// Sends `bytes` random bytes over TCP from `from` to `to_addr`:`port`
/// (a listener in `to`) and asserts the receiver's SHA-256 and byte count
/// equal the sender's: the transfer is byte-exact.
pub fn tcp_transfer_port(from: &Netns, to: &Netns, to_addr: &str, port: u16, bytes: usize) {
    let dir = std::env::temp_dir();
    let rxs = dir.join(format!("{}.py", unique("rx")));
    let txs = dir.join(format!("{}.py", unique("tx")));
    std::fs::write(&rxs, TCP_RX).unwrap();
    std::fs::write(&txs, TCP_TX).unwrap();
    let rx = to.spawn(&format!("python3 {} {to_addr} {port}", rxs.display()));
    let sent = from.sh(&format!(
        "python3 {} {to_addr} {port} {bytes}",
        txs.display()
    ));
    let out = rx.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&rxs);
    let _ = std::fs::remove_file(&txs);
    let got = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        got.trim(),
        sent.trim(),
        "receiver saw different bytes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// [`tcp_transfer_port`] on port 7000.
pub fn tcp_transfer(from: &Netns, to: &Netns, to_addr: &str, bytes: usize) {
    tcp_transfer_port(from, to, to_addr, 7000, bytes)
}

/// The non-zero drop/event counters of a running gateway, as
/// `(node, reason, count)`, read with `vecgate show errors`.
pub fn show_errors(api: &str) -> Vec<(String, String, u64)> {
    let out = Command::new(vecgate_bin())
        .args(["show", "errors", "--api", api])
        .output()
        .expect("vecgate show errors");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 3 {
                return None;
            }
            Some((f[1].to_string(), f[2].to_string(), f[0].parse().ok()?))
        })
        .collect()
}

/// One counter of [`show_errors`] (0 when absent).
pub fn counter(api: &str, node: &str, reason: &str) -> u64 {
    show_errors(api)
        .into_iter()
        .find(|(n, r, _)| n == node && r == reason)
        .map_or(0, |(_, _, c)| c)
}

// ---- Interop-test helpers (kernel VXLAN, OVS GRE, NVGRE/scapy) ----

/// A tcpdump on `ifname` in `ns`, stopped by its own pid (never by name:
/// other tests run their own captures at the same time).
///
/// Neither end relies on timing: [`Capture::start`] returns once tcpdump
/// says it is listening (its socket is bound, so every later frame is
/// captured), and [`Capture::stop`] stops it only once it has written
/// every frame the kernel handed it (its own counters, asked for with
/// SIGUSR1, balance), however slowly a loaded machine schedules it.
pub struct Capture {
    child: Option<Child>,
    file: PathBuf,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Capture {
    /// Captures the first 256 bytes of every frame.
    pub fn start(ns: &Netns, ifname: &str) -> Capture {
        Capture::spawn(ns, ifname, "-s 256", "")
    }

    /// Captures the frames matching the pcap `filter`, whole.
    pub fn start_filtered(ns: &Netns, ifname: &str, filter: &str) -> Capture {
        Capture::spawn(ns, ifname, "", filter)
    }

    /// Captures the frames matching the pcap `filter` with tcpdump options
    /// `opts` (e.g. "-s 200").
    pub fn start_with(ns: &Netns, ifname: &str, opts: &str, filter: &str) -> Capture {
        Capture::spawn(ns, ifname, opts, filter)
    }

    fn spawn(ns: &Netns, ifname: &str, opts: &str, filter: &str) -> Capture {
        let file = std::env::temp_dir().join(format!("{}.pcap", unique("cap")));
        let mut child = ns.spawn(&format!(
            "tcpdump -n -i {ifname} -U --immediate-mode {opts} -w {} {filter}",
            file.display()
        ));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let err = child.stderr.take().expect("tcpdump stderr");
        let lines = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let mut cap = Capture {
            child: Some(child),
            file,
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cap.stderr_text().contains("listening on") {
            let exited = cap.child.as_mut().unwrap().try_wait().unwrap();
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "tcpdump on {ifname} did not start ({exited:?}): {}",
                cap.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        cap
    }

    fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// tcpdump's latest (captured, received by filter, dropped by kernel).
    fn stats(&self) -> Option<(u64, u64, u64)> {
        let lines = self.stderr.lock().unwrap();
        let line = lines
            .iter()
            .rev()
            .find(|l| l.contains("packets captured") && l.contains("received by filter"))?;
        let num = |what: &str| -> Option<u64> {
            let at = line.find(what)?;
            line[..at].split_whitespace().next_back()?.parse().ok()
        };
        Some((
            num(" packets captured")?,
            num(" packets received by filter")?,
            num(" packets dropped by kernel")?,
        ))
    }

    /// Frames the kernel dropped before tcpdump read them, as tcpdump
    /// last reported (after [`Capture::stop`]: for the whole capture).
    pub fn dropped(&self) -> Option<u64> {
        self.stats().map(|(_, _, d)| d)
    }

    /// Waits until tcpdump has written every frame it was handed (or 10 s
    /// pass: the caller's assertions then judge what it has), stops it and
    /// returns the file.
    pub fn stop(&mut self) -> &Path {
        // Frames of the traffic just finished may still be on their way
        // through the kernel to the capture socket.
        std::thread::sleep(Duration::from_millis(300));
        if let Some(mut c) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut asked = 0;
            while Instant::now() < deadline && c.try_wait().unwrap().is_none() {
                let answers = |cap: &Capture| {
                    cap.stderr
                        .lock()
                        .unwrap()
                        .iter()
                        .filter(|l| l.contains("received by filter"))
                        .count()
                };
                // `ip netns exec … sh -c "exec tcpdump"`: the pid is tcpdump's.
                let _ = sh(&format!("kill -USR1 {} 2>/dev/null || true", c.id()));
                asked += 1;
                if !wait_until(5, || answers(self) >= asked) {
                    break;
                }
                match self.stats() {
                    Some((captured, received, dropped)) if captured + dropped >= received => break,
                    _ => std::thread::sleep(Duration::from_millis(100)),
                }
            }
            let _ = sh(&format!("kill -INT {} 2>/dev/null || true", c.id()));
            let _ = c.wait();
        }
        &self.file
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.file);
    }
}

/// tshark over a capture: one line per packet matching the display
/// `filter`, with `fields` (`-e …` options), empty lines dropped.
pub fn tshark(file: &Path, filter: &str, fields: &str) -> Vec<String> {
    sh(&format!(
        "tshark -r {} -Y '{filter}' -T fields {fields} 2>/dev/null",
        file.display()
    ))
    .lines()
    .filter(|l| !l.is_empty())
    .map(str::to_owned)
    .collect()
}

/// How many of the echo requests with sequence numbers 1..=`n` got a reply,
/// from ping's per-reply lines (`64 bytes from …: icmp_seq=K …`).
///
/// Meant for `ping -c N -w DEADLINE`: with a deadline, ping does not give
/// up on a slow reply after twice the largest round trip seen (which a
/// loaded machine easily exceeds) but keeps going until N replies are in
/// or the deadline passes. It then also sends more than N; those are
/// ignored here. One path delivers the replies in order, so a request
/// among the first N still unanswered when ping stops was lost: either a
/// later one came back before it, or the deadline passed.
pub fn answered(ping_output: &str, n: u64) -> u64 {
    let mut seen = std::collections::BTreeSet::new();
    for l in ping_output.lines().filter(|l| l.contains(" bytes from ")) {
        let seq = l
            .split_whitespace()
            .find_map(|w| w.strip_prefix("icmp_seq="))
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(k) = seq.filter(|k| (1..=n).contains(k)) {
            seen.insert(k);
        }
    }
    seen.len() as u64
}

/// Sends `n` echo requests (`ping -c n -w deadline ARGS`) in `ns` and
/// returns how many of them were answered (see [`answered`]) and ping's
/// output.
pub fn ping_count(ns: &Netns, n: u64, deadline: u64, args: &str) -> (u64, String) {
    let out = ns.try_sh(&format!("ping -c {n} -w {deadline} {args}"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (answered(&text, n), text)
}

/// Waits (up to 30 s) until `ping -c 1 -W 2 {args}` in `ns` is answered.
/// The first packets after gateways start wait for neighbour resolution
/// on every hop, which a loaded machine can stretch past one ping's wait.
/// Only for reaching that state: what a test asserts after it (loss, TTL,
/// bytes) is checked as before, on a path that is known to work.
pub fn warm_up(ns: &Netns, args: &str) {
    assert!(
        wait_until(30, || ping_ok(ns, &format!("-c 1 -W 2 {args}"))),
        "no answer to `ping {args}` within 30 s"
    );
}

/// Whether `ping {args}` succeeds in `ns`.
pub fn ping_ok(ns: &Netns, args: &str) -> bool {
    ns.try_sh(&format!("ping {args}")).status.success()
}

/// No TCP/UDP checksum errors counted by the stack in `ns`.
pub fn no_csum_errors(ns: &Netns, who: &str) {
    for l in ns.sh("nstat -az | grep -i csum || true").lines() {
        let n: u64 = l
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert_eq!(n, 0, "{who}: {l}");
    }
}

/// Fails the test with what to install unless Debian's /usr/bin/python3
/// imports `modules` (scapy is a Debian package; a pyenv python3 lacks it).
pub fn require_python3(modules: &str, packages: &str) {
    let ok = std::process::Command::new("/usr/bin/python3")
        .args(["-c", &format!("import {modules}")])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "{modules} required: apt-get install {packages} (imported by /usr/bin/python3)"
    );
}
