//! [`Kind::SaState`](super::Kind::SaState) and
//! [`Kind::Heartbeat`](super::Kind::Heartbeat) bodies: the role, and the
//! records of the SAs' sequence state (the layout is in the parent's
//! doc).

use super::{
    be64, Reject, BODY_HEADER_LEN, HEADER_LEN, MAX_DATAGRAM, MAX_WINDOW_WORDS, PACK_LEN,
    RECORD_LEN, TAG_LEN,
};

/// Direction of a synced SA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Out,
    In,
}

/// One record of a [`Body`].
#[derive(Debug, Clone, Copy)]
pub struct Record<'a>(&'a [u8]);

impl<'a> Record<'a> {
    pub fn dir(&self) -> Dir {
        if self.0[0] == 2 {
            Dir::In
        } else {
            Dir::Out
        }
    }
    pub fn spi(&self) -> u32 {
        u32::from_be_bytes([self.0[4], self.0[5], self.0[6], self.0[7]])
    }
    pub fn key_id(&self) -> [u8; 32] {
        let mut k = [0u8; 32];
        k.copy_from_slice(&self.0[8..40]);
        k
    }
    /// Outbound: the reserved (durable) ceiling. Inbound: the window's top.
    pub fn ceiling(&self) -> u64 {
        be64(&self.0[40..48])
    }
    /// Outbound: the highest number handed out.
    pub fn used(&self) -> u64 {
        be64(&self.0[48..56])
    }
    /// Inbound: the window's ring of 64-bit blocks.
    pub fn window(&self) -> impl ExactSizeIterator<Item = u64> + 'a {
        self.0[RECORD_LEN..].chunks_exact(8).map(be64)
    }
}

/// An opened body.
#[derive(Debug, Clone, Copy)]
pub struct Body<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> Body<T> {
    /// Checks that the records exactly fill the body.
    pub fn new_checked(buf: T) -> Result<Self, Reject> {
        let b = buf.as_ref();
        if b.len() < BODY_HEADER_LEN || b.len() > MAX_DATAGRAM || b[8] > 1 || b[9] != 0 {
            return Err(Reject::Malformed);
        }
        let count = usize::from(u16::from_be_bytes([b[10], b[11]]));
        let mut at = BODY_HEADER_LEN;
        for _ in 0..count {
            let r = b.get(at..at + RECORD_LEN).ok_or(Reject::Malformed)?;
            let words = usize::from(u16::from_be_bytes([r[2], r[3]]));
            if !(r[0] == 1 || r[0] == 2)
                || r[1] != 0
                || words > MAX_WINDOW_WORDS
                || (r[0] == 1 && words != 0)
            {
                return Err(Reject::Malformed);
            }
            at += RECORD_LEN + words * 8;
        }
        if at != b.len() {
            return Err(Reject::Malformed);
        }
        Ok(Body(buf))
    }
    pub fn sent_ms(&self) -> u64 {
        be64(self.0.as_ref())
    }
    /// Whether the sender is master of its VRRP groups.
    pub fn master(&self) -> bool {
        self.0.as_ref()[8] == 1
    }
    pub fn count(&self) -> u16 {
        let b = self.0.as_ref();
        u16::from_be_bytes([b[10], b[11]])
    }
    pub fn records(&self) -> Records<'_> {
        Records {
            rest: &self.0.as_ref()[BODY_HEADER_LEN..],
        }
    }
}

/// The records of a checked body.
pub struct Records<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;
    fn next(&mut self) -> Option<Record<'a>> {
        let hdr = self.rest.get(..RECORD_LEN)?;
        let words = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
        let len = RECORD_LEN + words * 8;
        let r = self.rest.get(..len)?;
        self.rest = &self.rest[len..];
        Some(Record(r))
    }
}

// ------------------------------------------------------------------- reprs

/// A record as the control plane builds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordRepr {
    pub dir: Dir,
    pub spi: u32,
    pub key_id: [u8; 32],
    pub ceiling: u64,
    pub used: u64,
    pub window: Vec<u64>,
}

impl RecordRepr {
    pub fn parse(r: &Record<'_>) -> RecordRepr {
        RecordRepr {
            dir: r.dir(),
            spi: r.spi(),
            key_id: r.key_id(),
            ceiling: r.ceiling(),
            used: r.used(),
            window: r.window().collect(),
        }
    }
    pub fn buffer_len(&self) -> usize {
        RECORD_LEN + 8 * self.words()
    }
    fn words(&self) -> usize {
        match self.dir {
            Dir::Out => 0,
            Dir::In => self.window.len().min(MAX_WINDOW_WORDS),
        }
    }
    fn emit(&self, out: &mut Vec<u8>) {
        let words = self.words();
        out.push(match self.dir {
            Dir::Out => 1,
            Dir::In => 2,
        });
        out.push(0);
        out.extend_from_slice(&(words as u16).to_be_bytes());
        out.extend_from_slice(&self.spi.to_be_bytes());
        out.extend_from_slice(&self.key_id);
        out.extend_from_slice(&self.ceiling.to_be_bytes());
        out.extend_from_slice(&self.used.to_be_bytes());
        for w in &self.window[..words] {
            out.extend_from_slice(&w.to_be_bytes());
        }
    }
}

/// A body as the control plane builds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyRepr {
    pub sent_ms: u64,
    pub master: bool,
    pub records: Vec<RecordRepr>,
}

impl BodyRepr {
    pub fn parse<T: AsRef<[u8]>>(b: &Body<T>) -> BodyRepr {
        BodyRepr {
            sent_ms: b.sent_ms(),
            master: b.master(),
            records: b.records().map(|r| RecordRepr::parse(&r)).collect(),
        }
    }

    /// The body's bytes (at most `u16::MAX` records: callers pack far
    /// fewer, see [`pack`]).
    pub fn emit(&self) -> Vec<u8> {
        let n = self.records.len().min(usize::from(u16::MAX));
        let mut out = Vec::with_capacity(
            BODY_HEADER_LEN
                + self.records[..n]
                    .iter()
                    .map(RecordRepr::buffer_len)
                    .sum::<usize>(),
        );
        out.extend_from_slice(&self.sent_ms.to_be_bytes());
        out.push(u8::from(self.master));
        out.push(0);
        out.extend_from_slice(&(n as u16).to_be_bytes());
        for r in &self.records[..n] {
            r.emit(&mut out);
        }
        out
    }
}

/// Splits records into bodies that each seal into at most [`PACK_LEN`]
/// bytes (a record larger than that goes alone; at least one body, so a
/// standby with nothing to store still hears the active).
pub fn pack(sent_ms: u64, master: bool, records: &[RecordRepr]) -> Vec<BodyRepr> {
    let room = PACK_LEN - HEADER_LEN - TAG_LEN - BODY_HEADER_LEN;
    let mut out = Vec::new();
    let mut cur: Vec<RecordRepr> = Vec::new();
    let mut used = 0;
    for r in records {
        let l = r.buffer_len();
        if !cur.is_empty() && used + l > room {
            out.push(std::mem::take(&mut cur));
            used = 0;
        }
        used += l;
        cur.push(r.clone());
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    out.into_iter()
        .map(|records| BodyRepr {
            sent_ms,
            master,
            records,
        })
        .collect()
}
