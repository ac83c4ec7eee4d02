//! The control connection: one TCP connection from sender to receiver that
//! carries the test configuration, the window edges and the final counts, as
//! JSON lines. Data connections then arrive on the same port and identify
//! themselves with an 8-byte hello (`VGP1` + the session token), so stray
//! connections are refused rather than measured.
//!
//! Sequence: sender `hello{config}` → receiver `ready{udp_port}` (or
//! `refused{reason}`); sender opens the data connections; receiver `go` once
//! it accepted them all; sender `begin` / `end` at the window edges (both
//! sides snapshot on them, so both measure the same window); sender
//! `stop{totals}` after its workers finished; receiver `final{totals}` after
//! it drained the data.

use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub const VERSION: u32 = 1;
/// Magic that opens every data connection.
pub const DATA_MAGIC: [u8; 4] = *b"VGP1";
/// No control message is anywhere near this; longer lines are an error.
const MAX_LINE: u64 = 64 * 1024;

/// Upper bounds the receiver enforces on a sender's request, so a bad or
/// hostile sender cannot make it allocate or spawn without limit.
pub const MAX_THREADS: u32 = 64;
pub const MAX_CONNECTIONS: u32 = 64;
pub const MAX_WORKERS: u32 = 256;
pub const MAX_IO_SIZE: u32 = 16 << 20;
pub const MAX_UDP_PAYLOAD: u32 = 65507;
const MAX_PHASE_MS: u64 = 24 * 3600 * 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Tcp,
    Udp,
    Rr,
}

/// What the sender asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestConfig {
    pub mode: Mode,
    pub threads: u32,
    pub connections: u32,
    pub io_size: u32,
    pub duration_ms: u64,
    pub warmup_ms: u64,
    pub cooldown_ms: u64,
    pub token: u32,
}

impl TestConfig {
    /// Checks the bounds; the reason is sent back to the sender.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return Err(format!("threads must be 1..={MAX_THREADS}"));
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.connections) {
            return Err(format!("connections must be 1..={MAX_CONNECTIONS}"));
        }
        if self.threads * self.connections > MAX_WORKERS {
            return Err(format!("threads × connections must be ≤ {MAX_WORKERS}"));
        }
        let max_io = if self.mode == Mode::Udp {
            MAX_UDP_PAYLOAD
        } else {
            MAX_IO_SIZE
        };
        if !(1..=max_io).contains(&self.io_size) {
            return Err(format!("io size must be 1..={max_io} bytes for this mode"));
        }
        if self.duration_ms == 0 {
            return Err("duration must be > 0".into());
        }
        if [self.duration_ms, self.warmup_ms, self.cooldown_ms]
            .iter()
            .any(|&m| m > MAX_PHASE_MS)
        {
            return Err("durations must be ≤ 1 day".into());
        }
        Ok(())
    }
}

/// Final per-side counts over the whole run (all phases).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunTotals {
    pub bytes: u64,
    pub datagrams: u64,
    pub transactions: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum Ctl {
    Hello { version: u32, config: TestConfig },
    Ready { udp_port: u16 },
    Refused { reason: String },
    Go,
    Begin,
    End,
    Stop { totals: RunTotals },
    Final { totals: RunTotals },
}

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("control connection: {0}")]
    Io(#[from] io::Error),
    #[error("control connection closed by the peer")]
    Closed,
    #[error("control connection: timed out waiting for the peer")]
    Timeout,
    #[error("control connection: malformed message: {0}")]
    Malformed(String),
}

pub struct Control {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    line: String,
}

impl Control {
    pub fn new(stream: TcpStream) -> io::Result<Control> {
        stream.set_nodelay(true)?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Control {
            writer: stream,
            reader,
            line: String::with_capacity(256),
        })
    }

    pub fn send(&mut self, msg: &Ctl) -> Result<(), CtlError> {
        let mut s = serde_json::to_string(msg).map_err(|e| CtlError::Malformed(e.to_string()))?;
        s.push('\n');
        self.writer.write_all(s.as_bytes())?;
        Ok(())
    }

    /// Next message; `None` timeout blocks.
    pub fn recv(&mut self, timeout: Option<Duration>) -> Result<Ctl, CtlError> {
        self.reader
            .get_ref()
            .set_read_timeout(timeout.filter(|t| !t.is_zero()))?;
        self.line.clear();
        let n = match (&mut self.reader).take(MAX_LINE).read_line(&mut self.line) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(CtlError::Timeout)
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Err(CtlError::Malformed("not UTF-8".into()))
            }
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Err(CtlError::Closed);
        }
        if !self.line.ends_with('\n') {
            return Err(CtlError::Malformed("line too long or truncated".into()));
        }
        serde_json::from_str(self.line.trim_end()).map_err(|e| CtlError::Malformed(e.to_string()))
    }
}

/// The 8 bytes a data connection starts with.
pub fn data_hello(token: u32) -> [u8; 8] {
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&DATA_MAGIC);
    h[4..].copy_from_slice(&token.to_be_bytes());
    h
}

/// Whether `h` is a data hello for this session.
pub fn check_data_hello(h: &[u8; 8], token: u32) -> bool {
    h[..4] == DATA_MAGIC && h[4..] == token.to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn cfg() -> TestConfig {
        TestConfig {
            mode: Mode::Tcp,
            threads: 2,
            connections: 2,
            io_size: 65536,
            duration_ms: 1000,
            warmup_ms: 0,
            cooldown_ms: 0,
            token: 7,
        }
    }

    #[test]
    fn validation() {
        assert!(cfg().validate().is_ok());
        let mut c = cfg();
        c.threads = 0;
        assert!(c.validate().is_err());
        c = cfg();
        c.threads = 64;
        c.connections = 64;
        assert!(c.validate().is_err());
        c = cfg();
        c.mode = Mode::Udp;
        assert!(c.validate().is_err(), "64K datagram payload is too big");
        c.io_size = 65507;
        assert!(c.validate().is_ok());
        c = cfg();
        c.io_size = MAX_IO_SIZE + 1;
        assert!(c.validate().is_err());
        c = cfg();
        c.duration_ms = 0;
        assert!(c.validate().is_err());
    }

    #[test]
    fn hello_bytes() {
        let h = data_hello(0x01020304);
        assert_eq!(&h, b"VGP1\x01\x02\x03\x04");
        assert!(check_data_hello(&h, 0x01020304));
        assert!(!check_data_hello(&h, 0x01020305));
        assert!(!check_data_hello(b"GET / HT", 0x01020304));
    }

    #[test]
    fn round_trip_and_errors() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = Control::new(TcpStream::connect(l.local_addr().unwrap()).unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let mut raw = s.try_clone().unwrap();
        let mut b = Control::new(s).unwrap();
        let hello = Ctl::Hello {
            version: VERSION,
            config: cfg(),
        };
        a.send(&hello).unwrap();
        a.send(&Ctl::Stop {
            totals: RunTotals {
                bytes: 1,
                datagrams: 2,
                transactions: 3,
            },
        })
        .unwrap();
        assert_eq!(b.recv(None).unwrap(), hello);
        assert!(matches!(b.recv(None).unwrap(), Ctl::Stop { totals } if totals.transactions == 3));
        assert!(matches!(
            b.recv(Some(Duration::from_millis(50))),
            Err(CtlError::Timeout)
        ));
        raw.write_all(b"{\"msg\":\"nope\"}\n").unwrap();
        assert!(matches!(a.recv(None), Err(CtlError::Malformed(_))));
        let long = vec![b'x'; 70 * 1024];
        raw.write_all(&long).unwrap();
        assert!(matches!(a.recv(None), Err(CtlError::Malformed(_))));
        drop(raw);
        drop(b);
    }
}
