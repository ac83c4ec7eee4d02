//! [`Kind::Routes`](super::Kind::Routes) bodies: one chunk of the
//! active's static routes (the layout is in the parent's doc).

use super::chunked::{self, Head, CHUNKED_HEADER_LEN};
use super::Reject;

pub const ROUTES_HEADER_LEN: usize = CHUNKED_HEADER_LEN;

/// A route as the API names it: VRF, prefix, next hop (interface, tunnel
/// or address), each at most 255 bytes of UTF-8.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteRepr {
    pub vrf: String,
    pub prefix: String,
    pub via: String,
}

impl RouteRepr {
    fn buffer_len(&self) -> usize {
        4 + self.vrf.len() + self.prefix.len() + self.via.len()
    }
    fn fits(&self) -> bool {
        self.vrf.len() <= 255 && self.prefix.len() <= 255 && self.via.len() <= 255
    }
}

/// An opened [`Kind::Routes`] body.
#[derive(Debug, Clone, Copy)]
pub struct RoutesBody<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> RoutesBody<T> {
    /// Checks the chunk numbers, that the routes exactly fill the body and
    /// that every string is UTF-8.
    pub fn new_checked(buf: T) -> Result<Self, Reject> {
        let b = buf.as_ref();
        let count = chunked::check(b)?;
        let mut at = ROUTES_HEADER_LEN;
        for _ in 0..count {
            let h = b.get(at..at + 4).ok_or(Reject::Malformed)?;
            if h[3] != 0 {
                return Err(Reject::Malformed);
            }
            let mut p = at + 4;
            for l in [h[0], h[1], h[2]] {
                let f = b.get(p..p + usize::from(l)).ok_or(Reject::Malformed)?;
                std::str::from_utf8(f).map_err(|_| Reject::Malformed)?;
                p += usize::from(l);
            }
            at = p;
        }
        if at != b.len() {
            return Err(Reject::Malformed);
        }
        Ok(RoutesBody(buf))
    }
    pub fn sent_ms(&self) -> u64 {
        chunked::sent_ms(self.0.as_ref())
    }
    pub fn master(&self) -> bool {
        chunked::master(self.0.as_ref())
    }
    pub fn count(&self) -> u16 {
        chunked::count(self.0.as_ref())
    }
    /// Names the whole route set this chunk belongs to.
    pub fn generation(&self) -> u64 {
        chunked::generation(self.0.as_ref())
    }
    pub fn chunk(&self) -> u16 {
        chunked::chunk(self.0.as_ref())
    }
    pub fn chunks(&self) -> u16 {
        chunked::chunks(self.0.as_ref())
    }
    /// The routes (checked UTF-8: never lossy).
    pub fn routes(&self) -> Vec<RouteRepr> {
        let b = self.0.as_ref();
        let mut out = Vec::new();
        let mut at = ROUTES_HEADER_LEN;
        while let Some(h) = b.get(at..at + 4) {
            let mut p = at + 4;
            let mut f = [String::new(), String::new(), String::new()];
            for (i, l) in [h[0], h[1], h[2]].into_iter().enumerate() {
                let l = usize::from(l);
                f[i] = b
                    .get(p..p + l)
                    .map(|x| String::from_utf8_lossy(x).into_owned())
                    .unwrap_or_default();
                p += l;
            }
            let [vrf, prefix, via] = f;
            out.push(RouteRepr { vrf, prefix, via });
            at = p;
        }
        out
    }
}

/// One chunk of a route set, as the control plane builds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutesRepr {
    pub sent_ms: u64,
    pub master: bool,
    pub generation: u64,
    pub chunk: u16,
    pub chunks: u16,
    pub routes: Vec<RouteRepr>,
}

impl RoutesRepr {
    pub fn parse<T: AsRef<[u8]>>(b: &RoutesBody<T>) -> RoutesRepr {
        RoutesRepr {
            sent_ms: b.sent_ms(),
            master: b.master(),
            generation: b.generation(),
            chunk: b.chunk(),
            chunks: b.chunks(),
            routes: b.routes(),
        }
    }

    /// The body's bytes; routes with a field over 255 bytes are left out
    /// (the API's names and prefixes are far shorter).
    pub fn emit(&self) -> Vec<u8> {
        let rs: Vec<&RouteRepr> = self
            .routes
            .iter()
            .filter(|r| r.fits())
            .take(usize::from(u16::MAX))
            .collect();
        let head = Head {
            sent_ms: self.sent_ms,
            master: self.master,
            generation: self.generation,
            chunk: self.chunk,
            chunks: self.chunks,
        };
        let mut out = head.start(rs.len(), rs.iter().map(|r| r.buffer_len()).sum());
        for r in rs {
            out.extend_from_slice(&[
                r.vrf.len() as u8,
                r.prefix.len() as u8,
                r.via.len() as u8,
                0,
            ]);
            out.extend_from_slice(r.vrf.as_bytes());
            out.extend_from_slice(r.prefix.as_bytes());
            out.extend_from_slice(r.via.as_bytes());
        }
        out
    }
}

/// Splits a route set into chunks ([`chunked::split`]; routes with a
/// field over 255 bytes are left out).
pub fn pack_routes(
    sent_ms: u64,
    master: bool,
    generation: u64,
    routes: &[RouteRepr],
) -> Vec<RoutesRepr> {
    let chunks = chunked::split(routes.iter().filter(|r| r.fits()), RouteRepr::buffer_len);
    let n = chunks.len() as u16;
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, routes)| RoutesRepr {
            sent_ms,
            master,
            generation,
            chunk: i as u16,
            chunks: n,
            routes,
        })
        .collect()
}
