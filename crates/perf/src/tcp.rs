//! TCP bulk transfer workers: senders write `io_size` buffers round-robin
//! over their connections; receivers read one connection each until EOF.
//! Buffers are allocated once per worker; the loop does no allocation.

use crate::shared::PhaseWatch;
use crate::shared::{Shared, WorkerStats, STOP};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
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
pub fn send(conns: Vec<TcpStream>, io_size: usize, shared: Arc<Shared>, idx: usize) -> WorkerOut {
    let stats = &shared.workers[idx];
    let buf = vec![0x5au8; io_size];
    let mut alive = vec![true; conns.len()];
    let mut live = conns.len();
    let mut bytes = 0u64;
    let mut out = WorkerOut::default();
    let mut watch = PhaseWatch::new();
    'run: while live > 0 {
        for (c, ok) in conns.iter().zip(alive.iter_mut()) {
            let (phase, edges) = watch.poll(&shared);
            note_retrans(stats, &conns, edges.began, edges.ended);
            if phase == STOP {
                break 'run;
            }
            if !*ok {
                continue;
            }
            match (&*c).write(&buf) {
                Ok(n) => {
                    bytes += n as u64;
                    stats.bytes.store(bytes, Relaxed);
                }
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    stats.errors.fetch_add(1, Relaxed);
                    out.error.get_or_insert_with(|| format!("send: {e}"));
                    *ok = false;
                    live -= 1;
                }
            }
        }
    }
    let (_, edges) = watch.poll(&shared);
    note_retrans(stats, &conns, edges.began, edges.ended);
    for c in &conns {
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
