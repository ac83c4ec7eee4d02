//! [`Kind::IkeSas`](super::Kind::IkeSas): one tunnel's established IKE
//! SAs, with their child SAs, keys and message IDs, so a standby can take
//! them over without renegotiating. Each SA's state is the IKE
//! crate's encoding (`vecgate_ike::SaSnapshot::encode`), opaque here; the
//! body names the tunnel and says whether it holds the tunnel's whole set
//! (then the standby forgets the tunnel's SAs it does not list):
//!
//! ```text
//! body: sent ms (8) | role (1) | flags (1) | SA count (2) | name len (1) | 0 (1)
//!       | tunnel name | SAs
//! sa:   SPIi (8) | SPIr (8) | state len (2) | state
//! flags: 1 = the tunnel's whole set
//! ```
//!
//! Keys travel inside: the bytes are sealed like every sync message, and
//! the reprs hold them in zeroizing buffers.

use super::{be64, Reject, MAX_DATAGRAM};
use std::fmt;
use zeroize::Zeroizing;

pub const IKE_HEADER_LEN: usize = 14;
const SA_HEADER_LEN: usize = 18;
const FULL_SET: u8 = 1;

/// An opened [`Kind::IkeSas`](super::Kind::IkeSas) body.
#[derive(Debug, Clone, Copy)]
pub struct IkeSasBody<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> IkeSasBody<T> {
    /// Checks the reserved bits, the name (UTF-8) and that the SAs exactly
    /// fill the body.
    pub fn new_checked(buf: T) -> Result<Self, Reject> {
        let b = buf.as_ref();
        if b.len() < IKE_HEADER_LEN
            || b.len() > MAX_DATAGRAM
            || b[8] > 1
            || b[9] & !FULL_SET != 0
            || b[13] != 0
        {
            return Err(Reject::Malformed);
        }
        let name_end = IKE_HEADER_LEN + usize::from(b[12]);
        let name = b.get(IKE_HEADER_LEN..name_end).ok_or(Reject::Malformed)?;
        std::str::from_utf8(name).map_err(|_| Reject::Malformed)?;
        let count = usize::from(u16::from_be_bytes([b[10], b[11]]));
        let mut at = name_end;
        for _ in 0..count {
            let h = b.get(at..at + SA_HEADER_LEN).ok_or(Reject::Malformed)?;
            let len = usize::from(u16::from_be_bytes([h[16], h[17]]));
            at += SA_HEADER_LEN;
            b.get(at..at + len).ok_or(Reject::Malformed)?;
            at += len;
        }
        if at != b.len() {
            return Err(Reject::Malformed);
        }
        Ok(IkeSasBody(buf))
    }
    pub fn sent_ms(&self) -> u64 {
        be64(self.0.as_ref())
    }
    pub fn master(&self) -> bool {
        self.0.as_ref()[8] == 1
    }
    pub fn full_set(&self) -> bool {
        self.0.as_ref()[9] & FULL_SET != 0
    }
    pub fn count(&self) -> u16 {
        let b = self.0.as_ref();
        u16::from_be_bytes([b[10], b[11]])
    }
    pub fn tunnel(&self) -> &str {
        let b = self.0.as_ref();
        let end = IKE_HEADER_LEN + usize::from(b[12]);
        b.get(IKE_HEADER_LEN..end)
            .and_then(|n| std::str::from_utf8(n).ok())
            .unwrap_or("")
    }
    /// (SPIi, SPIr, state) of each SA.
    pub fn sas(&self) -> impl Iterator<Item = (u64, u64, &[u8])> + '_ {
        let b = self.0.as_ref();
        let mut at = IKE_HEADER_LEN + usize::from(b[12]);
        std::iter::from_fn(move || {
            let h = b.get(at..at + SA_HEADER_LEN)?;
            let len = usize::from(u16::from_be_bytes([h[16], h[17]]));
            let state = b.get(at + SA_HEADER_LEN..at + SA_HEADER_LEN + len)?;
            at += SA_HEADER_LEN + len;
            Some((be64(&h[..8]), be64(&h[8..16]), state))
        })
    }
}

/// One IKE SA's state as carried.
#[derive(Clone, PartialEq, Eq)]
pub struct IkeSaRepr {
    pub spi_i: u64,
    pub spi_r: u64,
    /// The IKE crate's encoding, keys included.
    pub state: Zeroizing<Vec<u8>>,
}

impl fmt::Debug for IkeSaRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IkeSaRepr")
            .field("spi_i", &format_args!("{:016x}", self.spi_i))
            .field("spi_r", &format_args!("{:016x}", self.spi_r))
            .field("state", &format_args!("<{} bytes>", self.state.len()))
            .finish()
    }
}

/// A body as the control plane builds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IkeSasRepr {
    pub sent_ms: u64,
    pub master: bool,
    pub full_set: bool,
    /// At most 255 bytes of UTF-8 (longer names are not sent).
    pub tunnel: String,
    pub sas: Vec<IkeSaRepr>,
}

impl IkeSasRepr {
    pub fn parse<T: AsRef<[u8]>>(b: &IkeSasBody<T>) -> IkeSasRepr {
        IkeSasRepr {
            sent_ms: b.sent_ms(),
            master: b.master(),
            full_set: b.full_set(),
            tunnel: b.tunnel().to_owned(),
            sas: b
                .sas()
                .map(|(spi_i, spi_r, s)| IkeSaRepr {
                    spi_i,
                    spi_r,
                    state: Zeroizing::new(s.to_vec()),
                })
                .collect(),
        }
    }

    pub fn buffer_len(&self) -> usize {
        IKE_HEADER_LEN
            + self.tunnel.len()
            + self
                .sas
                .iter()
                .map(|s| SA_HEADER_LEN + s.state.len())
                .sum::<usize>()
    }

    /// The body's bytes (zeroizing: they hold keys); None when the name
    /// or a state is too long for its length field, or there are more
    /// than `u16::MAX` SAs.
    pub fn emit(&self) -> Option<Zeroizing<Vec<u8>>> {
        let name = u8::try_from(self.tunnel.len()).ok()?;
        let count = u16::try_from(self.sas.len()).ok()?;
        let mut out = Zeroizing::new(Vec::with_capacity(self.buffer_len()));
        out.extend_from_slice(&self.sent_ms.to_be_bytes());
        out.push(u8::from(self.master));
        out.push(if self.full_set { FULL_SET } else { 0 });
        out.extend_from_slice(&count.to_be_bytes());
        out.push(name);
        out.push(0);
        out.extend_from_slice(self.tunnel.as_bytes());
        for s in &self.sas {
            let len = u16::try_from(s.state.len()).ok()?;
            out.extend_from_slice(&s.spi_i.to_be_bytes());
            out.extend_from_slice(&s.spi_r.to_be_bytes());
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&s.state);
        }
        Some(out)
    }
}

/// One tunnel's SAs as bodies that each seal into at most
/// [`MAX_DATAGRAM`](super::MAX_DATAGRAM) bytes: one body holding the
/// whole set when it fits (the usual case: an SA with a child is a few
/// hundred bytes), else one body per SA, none marked as the whole set (a
/// standby then only replaces what it hears; SAs that went away leave its
/// shadow when the set fits again or it expires them). An SA too large
/// for a datagram on its own is left out. No SA: one empty whole set.
pub fn pack_ike(sent_ms: u64, master: bool, tunnel: &str, sas: Vec<IkeSaRepr>) -> Vec<IkeSasRepr> {
    let room = MAX_DATAGRAM - super::HEADER_LEN - super::TAG_LEN;
    let whole = IkeSasRepr {
        sent_ms,
        master,
        full_set: true,
        tunnel: tunnel.to_owned(),
        sas,
    };
    if whole.buffer_len() <= room {
        return vec![whole];
    }
    whole
        .sas
        .into_iter()
        .map(|s| IkeSasRepr {
            sent_ms,
            master,
            full_set: false,
            tunnel: tunnel.to_owned(),
            sas: vec![s],
        })
        .filter(|r| r.buffer_len() <= room)
        .collect()
}
