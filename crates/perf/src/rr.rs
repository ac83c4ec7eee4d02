//! Request/response workers: the sender writes one `io_size` request on each
//! of its connections, then reads each response, timing every transaction;
//! the receiver echoes. Latencies inside the window go into a preallocated
//! HDR histogram (no allocation per record).

use crate::shared::{PhaseWatch, Shared, MEASURE, STOP};
use crate::tcp::{is_timeout, WorkerOut};
use hdrhistogram::Histogram;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// Latency range kept: 1 ns .. 60 s, 3 significant digits.
pub fn new_histogram() -> Option<Histogram<u64>> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).ok()
}

/// Fills `buf` from `c`, tolerating read timeouts unless the run stopped.
/// `Ok(false)` on EOF at the start of a message.
fn read_full(mut c: &TcpStream, buf: &mut [u8], shared: &Shared) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match c.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                if shared.phase() == STOP {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

pub fn send(conns: Vec<TcpStream>, io_size: usize, shared: Arc<Shared>, idx: usize) -> WorkerOut {
    let stats = &shared.workers[idx];
    let req = vec![0x5au8; io_size];
    let mut resp = vec![0u8; io_size];
    let mut sent_at = vec![Instant::now(); conns.len()];
    let mut hist = new_histogram();
    let (mut bytes, mut txns) = (0u64, 0u64);
    let mut out = WorkerOut::default();
    let mut watch = PhaseWatch::new();
    'run: loop {
        let (phase, _) = watch.poll(&shared);
        if phase == STOP {
            break;
        }
        for (c, t) in conns.iter().zip(sent_at.iter_mut()) {
            *t = Instant::now();
            if let Err(e) = (&*c).write_all(&req) {
                out.error = Some(format!("request: {e}"));
                break 'run;
            }
        }
        for (c, t) in conns.iter().zip(&sent_at) {
            match read_full(c, &mut resp, &shared) {
                Ok(true) => {}
                Ok(false) => {
                    out.error = Some("response: connection closed".into());
                    break 'run;
                }
                Err(e) => {
                    if shared.phase() != STOP {
                        out.error = Some(format!("response: {e}"));
                    }
                    break 'run;
                }
            }
            let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
            if phase == MEASURE {
                if let Some(h) = hist.as_mut() {
                    h.saturating_record(ns.max(1));
                }
            }
            bytes += 2 * io_size as u64;
            txns += 1;
            stats.bytes.store(bytes, Relaxed);
            stats.transactions.store(txns, Relaxed);
        }
    }
    if out.error.is_some() {
        stats.errors.fetch_add(1, Relaxed);
    }
    for c in &conns {
        let _ = c.shutdown(Shutdown::Write);
    }
    out.hist = hist;
    out
}

/// Echoes `io_size` messages on one connection until EOF.
pub fn receive(conn: TcpStream, io_size: usize, shared: Arc<Shared>, idx: usize) -> WorkerOut {
    let stats = &shared.workers[idx];
    let mut buf = vec![0u8; io_size];
    let (mut bytes, mut txns) = (0u64, 0u64);
    let mut out = WorkerOut::default();
    loop {
        match read_full(&conn, &mut buf, &shared) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                if shared.phase() != STOP {
                    stats.errors.fetch_add(1, Relaxed);
                    out.error = Some(format!("request: {e}"));
                }
                break;
            }
        }
        if let Err(e) = (&conn).write_all(&buf) {
            stats.errors.fetch_add(1, Relaxed);
            out.error = Some(format!("response: {e}"));
            break;
        }
        bytes += 2 * io_size as u64;
        txns += 1;
        stats.bytes.store(bytes, Relaxed);
        stats.transactions.store(txns, Relaxed);
    }
    out
}
