//! Classic libpcap capture files: a writer over [`std::io::Write`] (for
//! `vecgate capture` and the dissector tests) and a small zero-copy reader.
//!
//! Format (libpcap "tcpdump" format, as documented in
//! draft-ietf-opsawg-pcap): a 24-byte global header (magic, version 2.4,
//! reserved zone/sigfigs, snaplen, link type), then per packet a 16-byte
//! record header (seconds, microseconds, captured length, original length)
//! followed by the captured bytes. The writer uses host byte order, as
//! libpcap does; the reader accepts both orders and nanosecond files.

use std::io::{self, Write};
use std::time::Duration;

use crate::{Error, Result};

/// Global header length.
pub const GLOBAL_HEADER_LEN: usize = 24;
/// Per-record header length.
pub const RECORD_HEADER_LEN: usize = 16;
/// Magic number of a microsecond-resolution file.
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Magic number of a nanosecond-resolution file.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Default snapshot length (what tcpdump uses).
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Link-layer header type of the packets in a file (tcpdump.org
/// linktypes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// LINKTYPE_ETHERNET: Ethernet II frames without FCS.
    Ethernet,
    /// LINKTYPE_RAW: bare IPv4 or IPv6 packets (as read from a TUN device).
    Raw,
    /// Anything else, kept verbatim by the reader.
    Unknown(u32),
}

impl From<LinkType> for u32 {
    fn from(l: LinkType) -> u32 {
        match l {
            LinkType::Ethernet => 1,
            LinkType::Raw => 101,
            LinkType::Unknown(v) => v,
        }
    }
}

impl From<u32> for LinkType {
    fn from(v: u32) -> LinkType {
        match v {
            1 => LinkType::Ethernet,
            101 => LinkType::Raw,
            other => LinkType::Unknown(other),
        }
    }
}

/// Writes a pcap stream. Each record costs one `write_all` of the header
/// and one of the data; wrap the sink in a `BufWriter` for files.
#[derive(Debug)]
pub struct Writer<W: Write> {
    sink: W,
    snaplen: u32,
}

impl<W: Write> Writer<W> {
    /// Writes the global header (microsecond timestamps) and returns the
    /// writer. Packets longer than `snaplen` are truncated to it.
    pub fn new(mut sink: W, link: LinkType, snaplen: u32) -> io::Result<Self> {
        let mut h = [0u8; GLOBAL_HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC_MICROS.to_ne_bytes());
        h[4..6].copy_from_slice(&2u16.to_ne_bytes());
        h[6..8].copy_from_slice(&4u16.to_ne_bytes());
        // thiszone and sigfigs stay 0.
        h[16..20].copy_from_slice(&snaplen.to_ne_bytes());
        h[20..24].copy_from_slice(&u32::from(link).to_ne_bytes());
        sink.write_all(&h)?;
        Ok(Writer { sink, snaplen })
    }

    /// Appends one packet with timestamp `ts` (time since the Unix epoch).
    ///
    /// Fails with `InvalidInput` if the packet length or the seconds do not
    /// fit the format's 32-bit fields.
    pub fn write_packet(&mut self, ts: Duration, data: &[u8]) -> io::Result<()> {
        let orig = u32::try_from(data.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "packet over 4 GiB"))?;
        let secs = u32::try_from(ts.as_secs())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "timestamp past 2106"))?;
        let incl = orig.min(self.snaplen);
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&secs.to_ne_bytes());
        h[4..8].copy_from_slice(&ts.subsec_micros().to_ne_bytes());
        h[8..12].copy_from_slice(&incl.to_ne_bytes());
        h[12..16].copy_from_slice(&orig.to_ne_bytes());
        self.sink.write_all(&h)?;
        // incl <= data.len() by construction.
        self.sink.write_all(&data[..incl as usize])
    }

    /// Flushes the sink.
    pub fn flush(&mut self) -> io::Result<()> {
        self.sink.flush()
    }

    /// Gives the sink back (not flushed).
    pub fn into_inner(self) -> W {
        self.sink
    }
}

/// One packet read from a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Time since the Unix epoch.
    pub ts: Duration,
    /// Length of the packet on the wire (may exceed `data.len()`).
    pub orig_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
}

/// Reads a whole capture held in memory.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    rest: &'a [u8],
    swapped: bool,
    nanos: bool,
    link: LinkType,
    snaplen: u32,
}

impl<'a> Reader<'a> {
    /// Parses the global header. [`Error::Truncated`] for fewer than 24
    /// bytes, [`Error::Malformed`] for an unknown magic,
    /// [`Error::BadVersion`] for a major version other than 2.
    pub fn new(file: &'a [u8]) -> Result<Self> {
        let h = file.get(..GLOBAL_HEADER_LEN).ok_or(Error::Truncated)?;
        let magic = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]);
        let (swapped, nanos) = match magic {
            MAGIC_MICROS => (false, false),
            MAGIC_NANOS => (false, true),
            m if m.swap_bytes() == MAGIC_MICROS => (true, false),
            m if m.swap_bytes() == MAGIC_NANOS => (true, true),
            _ => return Err(Error::Malformed),
        };
        let mut r = Reader {
            rest: &file[GLOBAL_HEADER_LEN..],
            swapped,
            nanos,
            link: LinkType::Ethernet,
            snaplen: 0,
        };
        let major = u16::from_ne_bytes([h[4], h[5]]);
        let major = if swapped { major.swap_bytes() } else { major };
        if major != 2 {
            return Err(Error::BadVersion);
        }
        r.snaplen = r.u32_at(h, 16);
        r.link = LinkType::from(r.u32_at(h, 20));
        Ok(r)
    }

    fn u32_at(&self, b: &[u8], o: usize) -> u32 {
        let v = u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        if self.swapped {
            v.swap_bytes()
        } else {
            v
        }
    }

    /// Link type from the global header.
    pub fn link_type(&self) -> LinkType {
        self.link
    }

    /// Snapshot length from the global header.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// True when timestamps have nanosecond resolution.
    pub fn is_nanos(&self) -> bool {
        self.nanos
    }

    /// The next record, `Ok(None)` at a clean end of file,
    /// [`Error::Truncated`] for a cut record, [`Error::BadLength`] when the
    /// captured length exceeds the original length.
    pub fn next_record(&mut self) -> Result<Option<Record<'a>>> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let h = self.rest.get(..RECORD_HEADER_LEN).ok_or(Error::Truncated)?;
        let secs = self.u32_at(h, 0);
        let frac = self.u32_at(h, 4);
        let incl = self.u32_at(h, 8) as usize;
        let orig_len = self.u32_at(h, 12);
        if incl > orig_len as usize {
            return Err(Error::BadLength);
        }
        let body = &self.rest[RECORD_HEADER_LEN..];
        let data = body.get(..incl).ok_or(Error::Truncated)?;
        self.rest = &body[incl..];
        let sub = if self.nanos {
            Duration::from_nanos(u64::from(frac))
        } else {
            Duration::from_micros(u64::from(frac))
        };
        Ok(Some(Record {
            ts: Duration::from_secs(u64::from(secs)) + sub,
            orig_len,
            data,
        }))
    }
}

impl<'a> Iterator for Reader<'a> {
    type Item = Result<Record<'a>>;

    /// Yields records until the end, or one error and then nothing.
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_record() {
            Ok(r) => r.map(Ok),
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), LinkType::Ethernet, 8).unwrap();
        w.write_packet(Duration::new(1_700_000_000, 123_456_789), b"abcd")
            .unwrap();
        w.write_packet(Duration::from_secs(5), b"0123456789")
            .unwrap();
        w.into_inner()
    }

    #[test]
    fn write_layout() {
        let f = sample();
        assert_eq!(f.len(), 24 + 16 + 4 + 16 + 8);
        assert_eq!(
            u32::from_ne_bytes(f[0..4].try_into().unwrap()),
            MAGIC_MICROS
        );
        assert_eq!(u16::from_ne_bytes([f[4], f[5]]), 2);
        assert_eq!(u16::from_ne_bytes([f[6], f[7]]), 4);
        assert_eq!(u32::from_ne_bytes(f[16..20].try_into().unwrap()), 8);
        assert_eq!(u32::from_ne_bytes(f[20..24].try_into().unwrap()), 1);
        // First record: microseconds truncated from nanoseconds.
        assert_eq!(u32::from_ne_bytes(f[28..32].try_into().unwrap()), 123_456);
        assert_eq!(&f[40..44], b"abcd");
        // Second record: snapped to 8 bytes, original length 10.
        assert_eq!(u32::from_ne_bytes(f[52..56].try_into().unwrap()), 8);
        assert_eq!(u32::from_ne_bytes(f[56..60].try_into().unwrap()), 10);
        assert_eq!(&f[60..], b"01234567");
    }

    #[test]
    fn read_back() {
        let f = sample();
        let mut r = Reader::new(&f).unwrap();
        assert_eq!(r.link_type(), LinkType::Ethernet);
        assert_eq!(r.snaplen(), 8);
        assert!(!r.is_nanos());
        let a = r.next_record().unwrap().unwrap();
        assert_eq!(a.ts, Duration::new(1_700_000_000, 123_456_000));
        assert_eq!(a.data, b"abcd");
        assert_eq!(a.orig_len, 4);
        let b = r.next_record().unwrap().unwrap();
        assert_eq!(b.data, b"01234567");
        assert_eq!(b.orig_len, 10);
        assert_eq!(r.next_record(), Ok(None));
    }

    #[test]
    fn read_swapped_nanos() {
        let mut f = Vec::new();
        f.extend_from_slice(&MAGIC_NANOS.swap_bytes().to_ne_bytes());
        f.extend_from_slice(&2u16.swap_bytes().to_ne_bytes());
        f.extend_from_slice(&4u16.swap_bytes().to_ne_bytes());
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&65535u32.swap_bytes().to_ne_bytes());
        f.extend_from_slice(&101u32.swap_bytes().to_ne_bytes());
        for v in [7u32, 999_999_999, 1, 1] {
            f.extend_from_slice(&v.swap_bytes().to_ne_bytes());
        }
        f.push(0x45);
        let r = Reader::new(&f).unwrap();
        assert_eq!(r.link_type(), LinkType::Raw);
        assert!(r.is_nanos());
        let recs: Vec<_> = r.collect::<Result<_>>().unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].ts, Duration::new(7, 999_999_999));
        assert_eq!(recs[0].data, &[0x45]);
    }

    #[test]
    fn read_errors() {
        let f = sample();
        for n in 0..24 {
            assert_eq!(Reader::new(&f[..n]).err(), Some(Error::Truncated));
        }
        // Every cut inside a record is an error, every cut between records
        // is a clean end.
        for n in 24..f.len() {
            let res: Result<Vec<_>> = Reader::new(&f[..n]).unwrap().collect();
            if n == 24 || n == 44 {
                assert_eq!(res.map(|v| v.len()), Ok(if n == 24 { 0 } else { 1 }));
            } else {
                assert_eq!(res.err(), Some(Error::Truncated), "cut at {n}");
            }
        }
        let mut bad = f.clone();
        bad[0] ^= 0xff;
        assert_eq!(Reader::new(&bad).err(), Some(Error::Malformed));
        let mut bad = f.clone();
        bad[4..6].copy_from_slice(&1u16.to_ne_bytes());
        assert_eq!(Reader::new(&bad).err(), Some(Error::BadVersion));
        let mut bad = f.clone();
        bad[32..36].copy_from_slice(&5u32.to_ne_bytes()); // incl 5 > orig 4
        let mut r = Reader::new(&bad).unwrap();
        assert_eq!(r.next(), Some(Err(Error::BadLength)));
        assert_eq!(r.next(), None);
    }

    #[test]
    fn write_rejects_huge_timestamp() {
        let mut w = Writer::new(Vec::new(), LinkType::Raw, DEFAULT_SNAPLEN).unwrap();
        let e = w
            .write_packet(Duration::from_secs(u64::from(u32::MAX) + 1), b"x")
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
