//! UDP workers: senders push `io_size` datagrams over connected sockets with
//! `sendmmsg` (optionally paced to a rate); receivers count datagrams from
//! the sender with `recvmmsg`. All buffers are allocated before the loop.

use crate::os::Mmsg;
use crate::shared::{Shared, STOP};
use crate::tcp::{is_timeout, WorkerOut};
use std::io;
use std::net::{IpAddr, UdpSocket};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Datagrams per system call when not paced.
const BATCH: usize = 32;
/// Receive memory per worker is capped at this (batch × slot).
const RECV_MEM: usize = 2 << 20;

/// Batch size for a paced sender: about 1 ms of traffic, so pacing stays
/// smooth at low rates and syscall-efficient at high ones.
pub fn paced_batch(rate_bps: Option<f64>, io_size: usize) -> usize {
    match rate_bps {
        None => BATCH,
        Some(r) => {
            let per_ms = r / 8.0 / 1000.0 / io_size.max(1) as f64;
            (per_ms as usize).clamp(1, BATCH)
        }
    }
}

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
    let batch = paced_batch(rate_bps, io_size);
    let mut mm = Mmsg::for_send(batch, &vec![0x5au8; io_size]);
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
            match mm.send(s, batch) {
                Ok(n) => {
                    dgrams += n as u64;
                    bytes += (n * io_size) as u64;
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
/// The socket must have a read timeout so STOP is noticed.
pub fn receive(
    sock: UdpSocket,
    io_size: usize,
    from: IpAddr,
    shared: Arc<Shared>,
    idx: usize,
) -> WorkerOut {
    let stats = &shared.workers[idx];
    let slot = io_size.max(1);
    let mut mm = Mmsg::for_recv((RECV_MEM / slot).clamp(1, BATCH * 2), slot);
    let (mut bytes, mut dgrams) = (0u64, 0u64);
    let mut out = WorkerOut::default();
    loop {
        let r = mm.recv(&sock, |len, ip| {
            if ip == Some(from) {
                bytes += len as u64;
                dgrams += 1;
            }
        });
        match r {
            Ok(_) => {
                stats.bytes.store(bytes, Relaxed);
                stats.datagrams.store(dgrams, Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches() {
        assert_eq!(paced_batch(None, 1472), BATCH);
        // 100 Mbit/s of 1250-byte datagrams: 10 per ms.
        assert_eq!(paced_batch(Some(1e8), 1250), 10);
        assert_eq!(paced_batch(Some(1e3), 1472), 1);
        assert_eq!(paced_batch(Some(1e12), 64), BATCH);
    }

    #[test]
    fn loopback_counts_match() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let rs = Arc::new(Shared::new(1));
        let ts = Arc::new(Shared::new(1));
        let (r2, t2) = (rs.clone(), ts.clone());
        let rh = std::thread::spawn(move || receive(rx, 1000, "127.0.0.1".parse().unwrap(), r2, 0));
        // 8 Mbit/s: slow enough that loopback loses nothing.
        let th = std::thread::spawn(move || send(vec![tx], 1000, Some(8e6), t2, 0));
        // Counts, not times: stop the sender after 120 datagrams (their
        // ~210 KB of skbs fit the receive buffer even if the receiver is
        // starved), and the receiver once it has them all (or gives up
        // after 20 s).
        let until = |what: &dyn Fn() -> bool| {
            let t = std::time::Instant::now();
            while !what() && t.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        until(&|| ts.totals().datagrams >= 120);
        ts.set_phase(STOP);
        th.join().unwrap();
        until(&|| rs.totals().datagrams >= ts.totals().datagrams);
        rs.set_phase(STOP);
        rh.join().unwrap();
        let (s, r) = (ts.totals(), rs.totals());
        assert!(s.datagrams >= 120, "{s:?}");
        assert_eq!(s.datagrams, r.datagrams);
        assert_eq!(r.bytes, r.datagrams * 1000);
    }
}
