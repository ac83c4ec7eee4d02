//! systemd's notify protocol, observed from the manager's side: the test
//! plays systemd, hands `vecgate run` a `NOTIFY_SOCKET` of its own and a
//! 1 s `WATCHDOG_USEC`, and reads what arrives:
//! - `READY=1` only once the API answers (a CLI call right after succeeds
//!   at once) and the interfaces forward (a ping through the gateway);
//! - `WATCHDOG=1` every half `WATCHDOG_USEC`: never faster than promised,
//!   and steadily (a count in a long window, generous lower bound);
//! - none once a worker thread is wedged — stopped from outside with
//!   ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT stop that one thread, the rest
//!   of the process runs on), and pings again once it is let go;
//! - a live reload (`vecgate reload`, as the unit's ExecReload= runs it,
//!   then SIGHUP) is framed as systemd's `Type=notify-reload` protocol
//!   wants: `RELOADING=1` with a `MONOTONIC_USEC=` read from
//!   CLOCK_MONOTONIC while the reload ran, then `READY=1`, in that order;
//!   a dry run sends neither;
//! - `STOPPING=1` on SIGTERM, then a clean exit.
//!
//! The gateway runs as the packaged unit confines it: only the
//! capabilities of its `CapabilityBoundingSet=` (read from
//! crates/vecgate/debian/vecgate@.service) and `NoNewPrivileges=yes`,
//! applied with setpriv — so the test also shows those are enough to
//! attach, guard and forward.
//!
//! No systemd runs as PID 1 here: this proves the protocol, not systemd's
//! reaction to it (restart on a missed ping is systemd's documented
//! `WatchdogSec=` behaviour).
//!
//!   h1 (10.1.0.2) ── gw-h1 [vecgate, 2 workers]

mod common;

use common::{unique, veth, wait_until, Netns};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WATCHDOG_USEC: u64 = 1_000_000;
const PING: Duration = Duration::from_micros(WATCHDOG_USEC / 2);

/// Stops one thread of a process with ptrace until stdin closes (the tracer
/// exiting detaches it, and it runs on).
const WEDGE: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_SEIZE, PTRACE_INTERRUPT, WALL = 0x4206, 0x4207, 0x40000000
tid = int(sys.argv[1])
if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0 or libc.ptrace(PTRACE_INTERRUPT, tid, None, None) != 0:
    sys.exit("ptrace: " + os.strerror(ctypes.get_errno()))
os.waitpid(tid, WALL)
print("stopped", flush=True)
sys.stdin.read()
"#;

/// setpriv's arguments for the unit's capability bounding set and
/// NoNewPrivileges (`CAP_NET_ADMIN CAP_NET_RAW` → `+net_admin,+net_raw`).
fn unit_confinement() -> Vec<String> {
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("debian/vecgate@.service"),
    )
    .unwrap();
    let caps: Vec<String> = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the unit bounds capabilities")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    assert!(unit.lines().any(|l| l == "NoNewPrivileges=yes"));
    vec![
        "setpriv".into(),
        "--no-new-privs".into(),
        "--inh-caps=-all".into(),
        format!("--bounding-set=-all,{}", caps.join(",")),
        "--".into(),
    ]
}

/// Messages received on the socket, with their arrival time.
type Inbox = Arc<Mutex<Vec<(Instant, String)>>>;

fn listen(sock: UnixDatagram) -> Inbox {
    let inbox: Inbox = Arc::default();
    let i = inbox.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = sock.recv(&mut buf) {
            let m = String::from_utf8_lossy(&buf[..n]).into_owned();
            i.lock().unwrap().push((Instant::now(), m));
        }
    });
    inbox
}

fn has(m: &str, line: &str) -> bool {
    m.lines().any(|l| l == line)
}

/// WATCHDOG=1 messages that arrived in [from, to).
fn pings(inbox: &Inbox, from: Instant, to: Instant) -> Vec<Instant> {
    inbox
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, m)| *t >= from && *t < to && has(m, "WATCHDOG=1"))
        .map(|(t, _)| *t)
        .collect()
}

struct Daemon(Child, Arc<Mutex<Vec<String>>>);

impl Daemon {
    fn log(&self) -> String {
        self.1.lock().unwrap().join("\n")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        if std::thread::panicking() {
            eprintln!("---- vecgate log ----\n{}", self.log());
        }
    }
}

/// The thread id of the thread named `name` in process `pid`.
fn thread_id(pid: u32, name: &str) -> u32 {
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let e = e.unwrap();
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            return e.file_name().to_str().unwrap().parse().unwrap();
        }
    }
    panic!("no thread {name} in {pid}");
}

#[test]
fn ready_watchdog_stopping() {
    let h1 = Netns::new("h1");
    let gw = Netns::new("gw");
    veth(&h1, "eth0", &gw, "gw-h1");
    h1.sh("ip addr add 10.1.0.2/24 dev eth0");
    let dir = std::env::temp_dir().join(unique("notify"));
    std::fs::create_dir_all(&dir).unwrap();
    let api = dir.join("api.sock");
    let notify = dir.join("notify.sock");
    let cfg = dir.join("gw.toml");
    std::fs::write(
        &cfg,
        format!(
            "[gateway]\nname = \"notify\"\nworkers = 2\napi = \"unix:{}\"\n\n[[interface]]\nname = \"lan\"\nhost = \"gw-h1\"\ndriver = \"af_packet\"\naddresses = [\"10.1.0.1/24\"]\n",
            api.display()
        ),
    )
    .unwrap();
    let sock = UnixDatagram::bind(&notify).unwrap();
    let inbox = listen(sock);

    let mut child = Command::new("ip")
        .args(["netns", "exec", &gw.name])
        .args(unit_confinement())
        .arg(common::vecgate_bin())
        .args(["run", "--config"])
        .arg(&cfg)
        .env("NOTIFY_SOCKET", &notify)
        .env("WATCHDOG_USEC", WATCHDOG_USEC.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let l = log.clone();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            l.lock().unwrap().push(line);
        }
    });
    let mut d = Daemon(child, log);
    let pid = d.0.id();

    // READY=1, and at that moment the API answers on the first try.
    assert!(
        wait_until(30, || inbox
            .lock()
            .unwrap()
            .iter()
            .any(|(_, m)| has(m, "READY=1"))),
        "no READY=1: {:?}",
        inbox.lock().unwrap()
    );
    let out = Command::new(common::vecgate_bin())
        .args(["show", "interfaces", "--api"])
        .arg(format!("unix:{}", api.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("gw-h1"),
        "API not answering right after READY=1: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    {
        let msgs = inbox.lock().unwrap();
        let ready = msgs.iter().find(|(_, m)| has(m, "READY=1")).unwrap();
        assert!(ready.1.contains("STATUS="), "{:?}", ready.1);
        assert!(
            !msgs
                .iter()
                .any(|(t, m)| *t < ready.0 && has(m, "WATCHDOG=1")),
            "WATCHDOG=1 before READY=1"
        );
    }
    // The interface forwards: the gateway answers on it, with no more
    // than the unit's capabilities.
    common::warm_up(&h1, "10.1.0.1");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
            .unwrap()
    };
    // CAP_NET_ADMIN 12, CAP_NET_RAW 13, CAP_IPC_LOCK 14, CAP_BPF 39.
    let allowed = (1u64 << 12) | (1 << 13) | (1 << 14) | (1 << 39);
    assert_eq!(field("CapBnd:") & !allowed, 0, "{status}");
    assert_eq!(field("CapEff:") & !allowed, 0, "{status}");
    assert_eq!(field("NoNewPrivs:"), 1, "{status}");

    // WATCHDOG=1 at the promised pace over a 10 s window: never more than
    // one per half WATCHDOG_USEC (+1 for the window's edges), and at least
    // a quarter of that even on a loaded machine.
    let window = Duration::from_secs(10);
    let from = Instant::now();
    std::thread::sleep(window);
    let n = pings(&inbox, from, from + window).len() as u64;
    let promised = window.as_micros() as u64 / PING.as_micros() as u64;
    assert!(
        n <= promised + 1 && n >= promised / 4,
        "{n} WATCHDOG=1 in {window:?}, promised one every {PING:?} ({promised})"
    );

    // Reloads: RELOADING=1 + MONOTONIC_USEC, then READY=1, in order.
    let reload_frames = |from: usize| -> Vec<String> {
        inbox
            .lock()
            .unwrap()
            .iter()
            .skip(from)
            .map(|(_, m)| m.clone())
            .filter(|m| has(m, "RELOADING=1") || has(m, "READY=1"))
            .collect()
    };
    let mono_usec = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000
    };
    let usec_of = |m: &str| -> u64 {
        m.lines()
            .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
            .unwrap_or_else(|| panic!("RELOADING=1 without MONOTONIC_USEC: {m:?}"))
            .parse()
            .unwrap()
    };
    let base = std::fs::read_to_string(&cfg).unwrap();
    let reload_cli = |extra: &str| {
        Command::new(common::vecgate_bin())
            .args(["reload", "--config"])
            .arg(&cfg)
            .args(extra.split_whitespace())
            .output()
            .unwrap()
    };
    std::fs::write(
        &cfg,
        format!("{base}\n[[route]]\nprefix = \"10.9.0.0/24\"\nvia = \"10.1.0.2\"\n"),
    )
    .unwrap();
    let seen = inbox.lock().unwrap().len();
    let out = reload_cli("--dry-run");
    assert!(out.status.success(), "{out:?}");
    assert!(
        reload_frames(seen).is_empty(),
        "a dry run notified: {:?}",
        reload_frames(seen)
    );
    let before = mono_usec();
    let out = reload_cli("");
    let after = mono_usec();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("+ route"),
        "{out:?}"
    );
    assert!(
        wait_until(30, || reload_frames(seen).len() >= 2),
        "reload not framed: {:?}",
        inbox.lock().unwrap()
    );
    let f = reload_frames(seen);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(has(&f[0], "RELOADING=1") && has(&f[1], "READY=1"), "{f:?}");
    let u1 = usec_of(&f[0]);
    assert!(before <= u1 && u1 <= after, "{before} <= {u1} <= {after}");
    // SIGHUP (a removed route) is framed the same way, with a later time.
    std::fs::write(&cfg, &base).unwrap();
    let seen = inbox.lock().unwrap().len();
    Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(
        wait_until(30, || reload_frames(seen).len() >= 2),
        "SIGHUP reload not framed: {:?}",
        inbox.lock().unwrap()
    );
    let f = reload_frames(seen);
    assert!(has(&f[0], "RELOADING=1") && has(&f[1], "READY=1"), "{f:?}");
    assert!(usec_of(&f[0]) > u1, "{f:?}");
    assert!(
        wait_until(30, || d.log().contains("reloaded")),
        "SIGHUP reload not logged:\n{}",
        d.log()
    );

    // Wedge worker 1: the pings stop (one already due may still arrive
    // within one interval), and STATUS says why.
    let tid = thread_id(pid, "vg-worker-1");
    let script = dir.join("wedge.py");
    std::fs::write(&script, WEDGE).unwrap();
    let mut tracer = Command::new("python3")
        .arg(&script)
        .arg(tid.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(tracer.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "stopped", "could not wedge the worker thread");
    let wedged = Instant::now();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap();
    assert!(stat.contains(") t "), "worker thread not stopped: {stat}");
    assert!(
        wait_until(30, || inbox
            .lock()
            .unwrap()
            .iter()
            .any(|(t, m)| *t > wedged
                && m.contains("STATUS=")
                && m.contains("stalled"))),
        "no STATUS about the stalled worker"
    );
    let quiet_from = wedged + 2 * PING + Duration::from_millis(100);
    let quiet = Duration::from_secs(6);
    if Instant::now() < quiet_from + quiet {
        std::thread::sleep(quiet_from + quiet - Instant::now());
    }
    let late = pings(&inbox, quiet_from, quiet_from + quiet);
    assert!(
        late.is_empty(),
        "{} WATCHDOG=1 while worker 1 was stopped",
        late.len()
    );
    assert!(
        d.0.try_wait().unwrap().is_none(),
        "gateway died while a worker was stopped"
    );

    // Let it go (the tracer's exit detaches): pings come back.
    let _ = tracer.stdin.take().unwrap().write_all(b"");
    let _ = tracer.wait();
    let released = Instant::now();
    assert!(
        wait_until(30, || !pings(&inbox, released, Instant::now()).is_empty()),
        "no WATCHDOG=1 after the worker was released"
    );

    // SIGTERM: STOPPING=1, then exit 0.
    let stop_sent = Instant::now();
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let mut status = None;
    assert!(
        wait_until(30, || {
            status = d.0.try_wait().unwrap();
            status.is_some()
        }),
        "vecgate did not exit on SIGTERM"
    );
    assert!(status.unwrap().success(), "exit status {status:?}");
    assert!(
        inbox
            .lock()
            .unwrap()
            .iter()
            .any(|(t, m)| *t >= stop_sent && has(m, "STOPPING=1")),
        "no STOPPING=1 after SIGTERM: {:?}",
        inbox.lock().unwrap()
    );
    drop(d);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The unit's capabilities also carry the AF_XDP driver: the XDP program
/// loaded and attached, the XSK sockets bound (CAP_BPF, CAP_NET_ADMIN,
/// CAP_NET_RAW), and forwarding between two hosts through it.
///
///   h1 (10.1.0.2) ── gw-h1 [vecgate af_xdp, confined] gw-h2 ── h2 (10.2.0.2)
#[test]
fn unit_capabilities_suffice_for_af_xdp() {
    let h1 = Netns::new("h1");
    let h2 = Netns::new("h2");
    let gw = Netns::new("gw");
    veth(&h1, "eth0", &gw, "gw-h1");
    veth(&h2, "eth0", &gw, "gw-h2");
    h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    let dir = std::env::temp_dir().join(unique("notx"));
    std::fs::create_dir_all(&dir).unwrap();
    let notify = dir.join("notify.sock");
    let cfg = dir.join("gw.toml");
    std::fs::write(
        &cfg,
        format!(
            "[gateway]\nname = \"notx\"\napi = \"unix:{}\"\n\n[[interface]]\nname = \"lan\"\nhost = \"gw-h1\"\ndriver = \"af_xdp\"\naddresses = [\"10.1.0.1/24\"]\n\n[[interface]]\nname = \"wan\"\nhost = \"gw-h2\"\ndriver = \"af_xdp\"\naddresses = [\"10.2.0.1/24\"]\n",
            dir.join("api.sock").display()
        ),
    )
    .unwrap();
    let inbox = listen(UnixDatagram::bind(&notify).unwrap());
    let mut child = Command::new("ip")
        .args(["netns", "exec", &gw.name])
        .args(unit_confinement())
        .arg(common::vecgate_bin())
        .args(["run", "--config"])
        .arg(&cfg)
        .env("NOTIFY_SOCKET", &notify)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let l = log.clone();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            l.lock().unwrap().push(line);
        }
    });
    let mut d = Daemon(child, log);
    assert!(
        wait_until(30, || inbox
            .lock()
            .unwrap()
            .iter()
            .any(|(_, m)| has(m, "READY=1"))
            || d.0.try_wait().unwrap().is_some()),
        "neither READY=1 nor an exit"
    );
    assert!(
        d.0.try_wait().unwrap().is_none(),
        "vecgate exited under the unit's capabilities:\n{}",
        d.log()
    );
    assert!(
        gw.sh("ip -d link show gw-h1").contains("xdp"),
        "no XDP program on gw-h1"
    );
    common::warm_up(&h1, "10.2.0.2");
    let (answered, out) = common::ping_count(&h1, 3, 10, "-i 0.2 10.2.0.2");
    assert_eq!(answered, 3, "{out}");
    Command::new("kill")
        .args(["-TERM", &d.0.id().to_string()])
        .status()
        .unwrap();
    let mut status = None;
    assert!(wait_until(30, || {
        status = d.0.try_wait().unwrap();
        status.is_some()
    }));
    assert!(status.unwrap().success(), "{status:?}\n{}", d.log());
    let _ = std::fs::remove_dir_all(&dir);
}
