//! UDP workers: senders push `io_size` datagrams over connected sockets
//! (optionally paced to a rate); receivers count datagrams from the sender.

use crate::shared::{Shared, STOP};
use crate::tcp::{is_timeout, WorkerOut};
use std::io;
use std::net::{IpAddr, UdpSocket};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sends until STOP. `rate_bps` (bits/s for this worker) paces with sleeps:
/// the worker stays on the line `bytes × 8 / rate` from its start.
pub fn send(
    socks: Vec<UdpSocket>,
    io_size: usize,
    rate_bps: Option<f64>,
    shared: Arc<Shared>,
    idx: usize,
) -> WorkerOut {
    let stats = &shared.workers[idx];
    let buf = vec![0x5au8; io_size];
    let (mut bytes, mut dgrams) = (0u64, 0u64);
    let mut out = WorkerOut::default();
    let start = Instant::now();
    'run: loop {
        for s in &socks {
            if shared.phase() == STOP {
                break 'run;
            }
            if let Some(rate) = rate_bps {
                let due = Duration::from_secs_f64(bytes as f64 * 8.0 / rate);
                let now = start.elapsed();
                if due > now + Duration::from_micros(200) {
                    std::thread::sleep(due - now);
                }
            }
            match s.send(&buf) {
                Ok(n) => {
                    bytes += n as u64;
                    dgrams += 1;
                    stats.bytes.store(bytes, Relaxed);
                    stats.datagrams.store(dgrams, Relaxed);
                }
                // ICMP unreachable (ECONNREFUSED) and a full qdisc (ENOBUFS)
                // are transient for a load generator: count and keep going.
                Err(e) => {
                    stats.errors.fetch_add(1, Relaxed);
                    if out.error.is_none() && !is_timeout(&e) {
                        out.error = Some(format!("send: {e}"));
                    }
                    if e.raw_os_error() == Some(libc::ENOBUFS) {
                        std::thread::yield_now();
                    }
                }
            }
        }
    }
    out
}

/// Receives until STOP; counts only datagrams from `from` (the sender).
pub fn receive(sock: UdpSocket, from: IpAddr, shared: Arc<Shared>, idx: usize) -> WorkerOut {
    let stats = &shared.workers[idx];
    let mut buf = vec![0u8; 65536];
    let (mut bytes, mut dgrams) = (0u64, 0u64);
    let mut out = WorkerOut::default();
    loop {
        match sock.recv_from(&mut buf) {
            Ok((n, peer)) => {
                if peer.ip() == from {
                    bytes += n as u64;
                    dgrams += 1;
                    stats.bytes.store(bytes, Relaxed);
                    stats.datagrams.store(dgrams, Relaxed);
                }
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                stats.errors.fetch_add(1, Relaxed);
                out.error.get_or_insert_with(|| format!("receive: {e}"));
            }
        }
        if shared.phase() == STOP {
            break;
        }
    }
    out
}
