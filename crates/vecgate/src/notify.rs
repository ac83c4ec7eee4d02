//! systemd's notify protocol (sd_notify(3)) for `Type=notify` units:
//! `READY=1` once the gateway forwards and its API answers, `RELOADING=1`
//! with `MONOTONIC_USEC=` when a live reload starts and `READY=1` again
//! when it has ended (the `Type=notify-reload` protocol, which a
//! `Type=notify` unit's manager understands too), `STOPPING=1` on
//! shutdown, `STATUS=` lines, and `WATCHDOG=1` every half `WATCHDOG_USEC`
//! while every worker's loop is seen turning — so systemd restarts a
//! gateway with a wedged worker (`WatchdogSec=`, `Restart=on-failure`).
//!
//! Without `NOTIFY_SOCKET` (not started by systemd) everything here is a
//! no-op. The socket may be a path or an abstract address (`@name`).

use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::warn;

/// Where the service manager listens, if it does.
pub struct Notifier {
    sock: UnixDatagram,
    addr: std::os::unix::net::SocketAddr,
}

impl Notifier {
    /// From `NOTIFY_SOCKET`; `None` when unset, empty or unusable (logged).
    pub fn from_env() -> Option<Notifier> {
        let path = std::env::var_os("NOTIFY_SOCKET")?;
        Notifier::new(path.to_str()?)
    }

    /// To `path`: a socket file, or `@name` for an abstract address.
    pub fn new(path: &str) -> Option<Notifier> {
        if path.is_empty() {
            return None;
        }
        let addr = if let Some(name) = path.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
        } else {
            std::os::unix::net::SocketAddr::from_pathname(path)
        };
        match (addr, UnixDatagram::unbound()) {
            (Ok(addr), Ok(sock)) => Some(Notifier { sock, addr }),
            (Err(e), _) | (_, Err(e)) => {
                warn!(socket = %path, "NOTIFY_SOCKET unusable: {e}");
                None
            }
        }
    }

    /// Sends one message (newline-separated `KEY=value` lines); a failure
    /// is logged, never fatal: the gateway runs on without its manager.
    pub fn send(&self, msg: &str) {
        if let Err(e) = self.sock.send_to_addr(msg.as_bytes(), &self.addr) {
            warn!("sd_notify: {e}");
        }
    }
}

/// `RELOADING=1` and the CLOCK_MONOTONIC time in µs, which systemd
/// needs with it to tell this reload from an earlier one (sd_notify(3)).
pub fn reloading_message() -> String {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let usec = (t.tv_sec as u64)
        .saturating_mul(1_000_000)
        .saturating_add(t.tv_nsec as u64 / 1000);
    format!("RELOADING=1\nMONOTONIC_USEC={usec}\nSTATUS=reloading the configuration")
}

/// `WATCHDOG=1` pacing: every half of `WATCHDOG_USEC`, and only when each
/// worker's heartbeat moved since the previous ping.
pub struct Watchdog {
    every: Duration,
    next: Instant,
    beats: Vec<Arc<AtomicU64>>,
    seen: Vec<u64>,
    stalled: bool,
}

impl Watchdog {
    /// From `WATCHDOG_USEC` (and `WATCHDOG_PID`, which must be ours when
    /// set); `None` when no watchdog is asked for.
    pub fn from_env(beats: Vec<Arc<AtomicU64>>) -> Option<Watchdog> {
        if let Some(pid) = std::env::var_os("WATCHDOG_PID") {
            if pid.to_str().and_then(|p| p.parse::<u32>().ok()) != Some(std::process::id()) {
                return None;
            }
        }
        let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
        if usec == 0 {
            return None;
        }
        let every = Duration::from_micros(usec / 2);
        let seen = beats.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        Some(Watchdog {
            every,
            next: Instant::now() + every,
            beats,
            seen,
            stalled: false,
        })
    }

    /// Called often (the main loop's tick): pings when due and healthy.
    pub fn tick(&mut self, n: &Notifier) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + self.every;
        let stuck: Vec<usize> = self
            .beats
            .iter()
            .zip(self.seen.iter_mut())
            .enumerate()
            .filter_map(|(w, (b, seen))| {
                let v = b.load(Ordering::Relaxed);
                let moved = v != *seen;
                *seen = v;
                (!moved).then_some(w)
            })
            .collect();
        if stuck.is_empty() {
            if self.stalled {
                n.send("STATUS=forwarding");
                self.stalled = false;
            }
            n.send("WATCHDOG=1");
        } else if !self.stalled {
            self.stalled = true;
            warn!(workers = ?stuck, "worker loop stalled: withholding the systemd watchdog ping");
            n.send(&format!("STATUS=worker(s) {stuck:?} stalled"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(listener: &UnixDatagram, to: &str) {
        let n = Notifier::new(to).expect("notifier");
        n.send("READY=1\nSTATUS=up");
        let mut buf = [0u8; 64];
        let len = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=up");
    }

    #[test]
    fn sends_to_a_path_and_to_an_abstract_address() {
        let dir = std::env::temp_dir().join(format!("vg-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("n.sock");
        let l = UnixDatagram::bind(&path).unwrap();
        roundtrip(&l, path.to_str().unwrap());
        let _ = std::fs::remove_dir_all(&dir);

        use std::os::linux::net::SocketAddrExt;
        let name = format!("vg-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = UnixDatagram::bind_addr(&addr).unwrap();
        roundtrip(&l, &format!("@{name}"));
        assert!(Notifier::new("").is_none());
    }
}
