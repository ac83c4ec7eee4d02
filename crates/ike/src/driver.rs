//! A thin UDP loop around [`Ike`]: sockets on the IKE port (500) and the
//! NAT-T port (4500), one reader thread each feeding a channel (no unsafe,
//! no polling of sockets from the state machine). ESP-in-UDP datagrams on
//! the NAT-T port are handed to `on_esp` untouched.

use crate::state::{Action, Ike};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const MAX_DATAGRAM: usize = 65_535;

struct Incoming {
    data: Vec<u8>,
    local: SocketAddr,
    remote: SocketAddr,
}

/// Sockets + reader threads + the state machine.
pub struct Driver {
    ike: Ike,
    socks: Vec<(SocketAddr, Arc<UdpSocket>)>,
    rx: Receiver<Incoming>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("ike", &self.ike)
            .field("socks", &self.socks.iter().map(|s| s.0).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// Bind the IKE and NAT-T ports of `ike.config().local_addr`.
    pub fn bind(ike: Ike) -> io::Result<Driver> {
        let base = ike.config().local_addr;
        let mut natt = base;
        natt.set_port(ike.config().natt_port);
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let mut socks = Vec::new();
        let mut threads = Vec::new();
        for addr in [base, natt] {
            let s = Arc::new(UdpSocket::bind(addr)?);
            s.set_read_timeout(Some(Duration::from_millis(100)))?;
            let local = s.local_addr()?;
            socks.push((local, s.clone()));
            let tx = tx.clone();
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; MAX_DATAGRAM];
                while !stop.load(Ordering::Relaxed) {
                    match s.recv_from(&mut buf) {
                        Ok((n, remote)) => {
                            let msg = Incoming {
                                data: buf[..n].to_vec(),
                                local,
                                remote,
                            };
                            if tx.send(msg).is_err() {
                                return;
                            }
                        }
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                            ) => {}
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            }));
        }
        Ok(Driver {
            ike,
            socks,
            rx,
            stop,
            threads,
        })
    }

    /// The state machine (to start exchanges).
    pub fn ike_mut(&mut self) -> &mut Ike {
        &mut self.ike
    }

    /// Wait up to `max_wait` for a datagram or a timer, process it, send
    /// what must be sent, and report every action (sends included) to `on`.
    pub fn step(
        &mut self,
        max_wait: Duration,
        on: &mut dyn FnMut(&Action),
        on_esp: &mut dyn FnMut(&[u8], SocketAddr, SocketAddr),
    ) -> io::Result<()> {
        let now = Instant::now();
        let wait = self
            .ike
            .next_timeout()
            .map_or(max_wait, |t| t.saturating_duration_since(now).min(max_wait));
        match self.rx.recv_timeout(wait) {
            Ok(m) => {
                let natt = m.local.port() == self.ike.config().natt_port;
                if natt && crate::state::strip_marker(&m.data).is_none() {
                    on_esp(&m.data, m.local, m.remote);
                } else {
                    self.ike
                        .handle_datagram(&m.data, m.local, m.remote, Instant::now());
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(io::Error::other("reader threads ended"))
            }
        }
        self.ike.handle_timeout(Instant::now());
        self.flush(on)
    }

    /// Execute pending actions without waiting.
    pub fn flush(&mut self, on: &mut dyn FnMut(&Action)) -> io::Result<()> {
        while let Some(a) = self.ike.poll_action() {
            if let Action::Send {
                local,
                remote,
                data,
            } = &a
            {
                let sock = self
                    .socks
                    .iter()
                    .find(|s| s.0.port() == local.port())
                    .or(self.socks.first())
                    .map(|s| s.1.clone());
                if let Some(s) = sock {
                    // A lost datagram is recovered by retransmission.
                    let _ = s.send_to(data, remote);
                }
            }
            on(&a);
        }
        Ok(())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
