//! The FPM connection: framing (FRR `doc/developer/fpm.rst`: u8 version
//! 1, u8 type 1 = netlink, u16 big-endian length including this 4-byte
//! header) over one zebra's TCP stream, bounded by its fixed buffer.

use super::netlink::apply_netlink;
use super::rib::Rib;
use super::stats::{Failure, FpmStats, Limited};
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Instant;

pub(super) const FPM_VERSION: u8 = 1;
pub(super) const FPM_NETLINK: u8 = 1;
/// Receive buffer: a few frames of the largest size.
pub(super) const BUF: usize = 256 << 10;

pub(super) struct Session {
    pub(super) stream: TcpStream,
    pub(super) peer: SocketAddr,
    pub(super) buf: Vec<u8>,
    pub(super) have: usize,
    pub(super) started: Instant,
    pub(super) last_msg: Instant,
    pub(super) replaying: bool,
}

/// Reads what is there and applies every complete frame; returns how many
/// frames were applied, or why the session is over.
pub(super) fn read_frames(
    s: &mut Session,
    rib: &mut Rib,
    stats: &FpmStats,
    log: &mut Limited,
) -> Result<usize, String> {
    let mut frames = 0;
    // Several reads per tick while data flows, bounded so publishes and
    // accepts still happen.
    for _ in 0..64 {
        let Some(room) = s.buf.get_mut(s.have..) else {
            return Err("receive buffer overrun".into());
        };
        match s.stream.read(room) {
            Ok(0) => return Err("zebra closed the connection".into()),
            Ok(n) => s.have += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Ok(frames)
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        }
        let mut off = 0;
        while let Some(h) = s.buf.get(off..off + 4).filter(|_| off + 4 <= s.have) {
            let (version, kind) = (h[0], h[1]);
            let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            if version != FPM_VERSION || len < 4 {
                stats.fail(Failure::Malformed);
                return Err(format!("bad FPM header (version {version}, length {len})"));
            }
            if off + len > s.have {
                break;
            }
            stats.frames.fetch_add(1, Ordering::Relaxed);
            if kind == FPM_NETLINK {
                apply_netlink(
                    s.buf.get(off + 4..off + len).unwrap_or(&[]),
                    rib,
                    stats,
                    log,
                );
            } else {
                stats.ignored.fetch_add(1, Ordering::Relaxed);
            }
            frames += 1;
            off += len;
        }
        s.buf.copy_within(off..s.have, 0);
        s.have -= off;
    }
    Ok(frames)
}

/// Applies every whole frame of `frames` (a capture of a stream) to `rib`.
pub(super) fn apply_frames(frames: &[u8], rib: &mut Rib, stats: &FpmStats, log: &mut Limited) {
    let mut off = 0;
    while let Some(h) = frames.get(off..off + 4) {
        let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        if h[0] != FPM_VERSION || len < 4 {
            break;
        }
        let Some(f) = frames.get(off + 4..off + len) else {
            break;
        };
        if h[1] == FPM_NETLINK {
            apply_netlink(f, rib, stats, log);
        }
        off += len;
    }
}
