//! [`Kind::Tunnels`](super::Kind::Tunnels): one chunk of the active's
//! tunnel set (a set is named by its generation and split into chunks, as
//! routes are). Each tunnel is the API's `POST /tunnels` spec as JSON text,
//! opaque here (checked UTF-8 only); it names key and PSK files by path,
//! never carries a key.
//!
//! ```text
//! body:   sent ms (8) | role (1) | 0 (1) | tunnel count (2) | generation (8)
//!         | chunk (2) | chunks (2) | tunnels
//! tunnel: spec len (2) | spec (UTF-8)
//! ```

use super::chunked::{self, Head, CHUNKED_HEADER_LEN};
use super::Reject;

pub const TUNNELS_HEADER_LEN: usize = CHUNKED_HEADER_LEN;
/// The longest spec carried (far above any tunnel's).
pub const MAX_SPEC_LEN: usize = 8 * 1024;

/// An opened tunnels body.
#[derive(Debug, Clone, Copy)]
pub struct TunnelsBody<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> TunnelsBody<T> {
    /// Checks the chunk numbers, that the specs exactly fill the body and
    /// that each is UTF-8.
    pub fn new_checked(buf: T) -> Result<Self, Reject> {
        let b = buf.as_ref();
        let count = chunked::check(b)?;
        let mut at = TUNNELS_HEADER_LEN;
        for _ in 0..count {
            let h = b.get(at..at + 2).ok_or(Reject::Malformed)?;
            let l = usize::from(u16::from_be_bytes([h[0], h[1]]));
            if l > MAX_SPEC_LEN {
                return Err(Reject::Malformed);
            }
            let f = b.get(at + 2..at + 2 + l).ok_or(Reject::Malformed)?;
            std::str::from_utf8(f).map_err(|_| Reject::Malformed)?;
            at += 2 + l;
        }
        if at != b.len() {
            return Err(Reject::Malformed);
        }
        Ok(TunnelsBody(buf))
    }
    pub fn sent_ms(&self) -> u64 {
        chunked::sent_ms(self.0.as_ref())
    }
    pub fn master(&self) -> bool {
        chunked::master(self.0.as_ref())
    }
    pub fn generation(&self) -> u64 {
        chunked::generation(self.0.as_ref())
    }
    pub fn chunk(&self) -> u16 {
        chunked::chunk(self.0.as_ref())
    }
    pub fn chunks(&self) -> u16 {
        chunked::chunks(self.0.as_ref())
    }
    /// The specs (checked UTF-8).
    pub fn specs(&self) -> Vec<String> {
        let b = self.0.as_ref();
        let mut out = Vec::new();
        let mut at = TUNNELS_HEADER_LEN;
        while let Some(h) = b.get(at..at + 2) {
            let l = usize::from(u16::from_be_bytes([h[0], h[1]]));
            let Some(f) = b.get(at + 2..at + 2 + l) else {
                break;
            };
            out.push(String::from_utf8_lossy(f).into_owned());
            at += 2 + l;
        }
        out
    }
}

/// One chunk of a tunnel set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelsRepr {
    pub sent_ms: u64,
    pub master: bool,
    pub generation: u64,
    pub chunk: u16,
    pub chunks: u16,
    pub specs: Vec<String>,
}

impl TunnelsRepr {
    pub fn parse<T: AsRef<[u8]>>(b: &TunnelsBody<T>) -> TunnelsRepr {
        TunnelsRepr {
            sent_ms: b.sent_ms(),
            master: b.master(),
            generation: b.generation(),
            chunk: b.chunk(),
            chunks: b.chunks(),
            specs: b.specs(),
        }
    }

    /// The body's bytes; specs over [`MAX_SPEC_LEN`] are left out.
    pub fn emit(&self) -> Vec<u8> {
        let ss: Vec<&String> = self
            .specs
            .iter()
            .filter(|s| s.len() <= MAX_SPEC_LEN)
            .take(usize::from(u16::MAX))
            .collect();
        let head = Head {
            sent_ms: self.sent_ms,
            master: self.master,
            generation: self.generation,
            chunk: self.chunk,
            chunks: self.chunks,
        };
        let mut out = head.start(ss.len(), ss.iter().map(|s| 2 + s.len()).sum());
        for s in ss {
            out.extend_from_slice(&(s.len() as u16).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        out
    }
}

/// Splits a tunnel set into chunks ([`chunked::split`]; specs over
/// [`MAX_SPEC_LEN`] are left out).
pub fn pack_tunnels(
    sent_ms: u64,
    master: bool,
    generation: u64,
    specs: &[String],
) -> Vec<TunnelsRepr> {
    let chunks = chunked::split(specs.iter().filter(|s| s.len() <= MAX_SPEC_LEN), |s| {
        2 + s.len()
    });
    let n = chunks.len() as u16;
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, specs)| TunnelsRepr {
            sent_ms,
            master,
            generation,
            chunk: i as u16,
            chunks: n,
            specs,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::MAX_DATAGRAM;

    #[test]
    fn round_trip_and_chunks() {
        let specs: Vec<String> = (0..40)
            .map(|i| format!("{{\"name\":\"t{i}\",\"kind\":\"gre\",\"local\":\"192.0.2.1\",\"remote\":\"192.0.2.{i}\"}}"))
            .chain([String::from("é"), "x".repeat(3000)])
            .collect();
        let packed = pack_tunnels(7, true, 99, &specs);
        assert!(packed.len() > 1);
        let mut back = Vec::new();
        for c in &packed {
            let bytes = c.emit();
            assert!(bytes.len() <= MAX_DATAGRAM);
            let b = TunnelsBody::new_checked(&bytes[..]).unwrap();
            let r = TunnelsRepr::parse(&b);
            assert_eq!(&r, c);
            back.extend(r.specs);
        }
        assert_eq!(back, specs);
        let empty = pack_tunnels(1, true, 2, &[]);
        assert_eq!(empty.len(), 1);
        assert!(TunnelsBody::new_checked(&empty[0].emit()[..]).is_ok());
    }

    #[test]
    fn any_bytes_never_panic_and_bad_shapes_are_refused() {
        let good = pack_tunnels(1, true, 2, &["{}".to_string()])[0].emit();
        for cut in 0..good.len() {
            assert!(TunnelsBody::new_checked(&good[..cut]).is_err());
        }
        let mut bad = good.clone();
        bad[TUNNELS_HEADER_LEN + 2] = 0xff; // not UTF-8
        assert!(TunnelsBody::new_checked(&bad[..]).is_err());
        let mut seed = 1u64;
        for _ in 0..5000 {
            let len = (seed % 64) as usize;
            let v: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (seed >> 56) as u8
                })
                .collect();
            if let Ok(b) = TunnelsBody::new_checked(&v[..]) {
                let _ = TunnelsRepr::parse(&b);
            }
        }
    }
}
