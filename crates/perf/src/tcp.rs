//! TCP bulk transfer workers: senders write `io_size` buffers round-robin
//! over their connections; receivers read one connection each until EOF.
//! Buffers are allocated once per worker; the loop does no allocation.

use crate::shared::PhaseWatch;
use crate::shared::{Shared, WorkerStats, STOP};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// How a worker ended, for the report.
#[derive(Debug, Default)]
pub struct WorkerOut {
    /// First error that ended a connection early, if any.
    pub error: Option<String>,
    /// RR latencies (ns) measured inside the window.
    pub hist: Option<hdrhistogram::Histogram<u64>>,
}

pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Records this worker's retransmission totals at the window edges.
fn note_retrans(stats: &WorkerStats, conns: &[TcpStream], began: bool, ended: bool) {
    if !(began || ended) {
        return;
    }
    let r: u64 = conns.iter().filter_map(crate::os::tcp_total_retrans).sum();
    if began {
        stats.retrans_begin.store(r, Relaxed);
    }
    if ended {
        stats.retrans_end.store(r, Relaxed);
    }
}

/// Sends until the phase reaches STOP, then half-closes every connection so
/// the receiver reads to EOF and both sides' totals match exactly.
///
/// The sockets must be non-blocking: the worker writes to every connection
/// that has room and sleeps in `poll(2)` only when none has, so one slow
/// connection does not hold up the others (NTttcp does the same with epoll).
pub fn send(conns: Vec<TcpStream>, io_size: usize, shared: Arc<Shared>, idx: usize) -> WorkerOut {
    let stats = &shared.workers[idx];
    let buf = vec![0x5au8; io_size];
    let mut fds: Vec<libc::pollfd> = conns
        .iter()
        .map(|c| libc::pollfd {
            fd: c.as_raw_fd(),
            events: 0,
            revents: 0,
        })
        .collect();
    let mut live = conns.len();
    let mut bytes = 0u64;
    let mut out = WorkerOut::default();
    let mut watch = PhaseWatch::new();
    while live > 0 {
        let (phase, edges) = watch.poll(&shared);
        note_retrans(stats, &conns, edges.began, edges.ended);
        if phase == STOP {
            break;
        }
        let mut progressed = false;
        for (c, pfd) in conns.iter().zip(fds.iter_mut()) {
            if pfd.fd < 0 {
                continue;
            }
            match (&*c).write(&buf) {
                Ok(n) => {
                    bytes += n as u64;
                    progressed = true;
                }
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    stats.errors.fetch_add(1, Relaxed);
                    out.error.get_or_insert_with(|| format!("send: {e}"));
                    // poll(2) ignores negative descriptors.
                    pfd.fd = -1;
                    live -= 1;
                }
            }
        }
        stats.bytes.store(bytes, Relaxed);
        if !progressed && live > 0 {
            // Bounded wait so a phase change is seen within 100 ms.
            if let Err(e) = crate::os::poll_writable(&mut fds, 100) {
                if e.kind() != io::ErrorKind::Interrupted {
                    out.error.get_or_insert_with(|| format!("poll: {e}"));
                    break;
                }
            }
        }
    }
    let (_, edges) = watch.poll(&shared);
    note_retrans(stats, &conns, edges.began, edges.ended);
    for c in &conns {
        let _ = c.set_nonblocking(false);
        let _ = c.shutdown(Shutdown::Write);
    }
    out
}

/// Reads one connection until EOF (or STOP, when the run is aborted).
pub fn receive(conn: TcpStream, io_size: usize, shared: Arc<Shared>, idx: usize) -> WorkerOut {
    let stats = &shared.workers[idx];
    let mut buf = vec![0u8; io_size.max(64 * 1024)];
    let mut bytes = 0u64;
    let mut out = WorkerOut::default();
    loop {
        match (&conn).read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                bytes += n as u64;
                stats.bytes.store(bytes, Relaxed);
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                if shared.phase() == STOP {
                    break;
                }
            }
            Err(e) => {
                stats.errors.fetch_add(1, Relaxed);
                out.error = Some(format!("receive: {e}"));
                break;
            }
        }
    }
    out
}
