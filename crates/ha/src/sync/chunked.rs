//! What [`Kind::Routes`](super::Kind::Routes) and
//! [`Kind::Tunnels`](super::Kind::Tunnels) bodies share: a set named by its
//! generation and split into chunks that each seal into one datagram, so
//! the standby applies a set only once it holds every chunk of it.
//!
//! ```text
//! sent ms (8) | role (1) | 0 (1) | item count (2) | generation (8)
//! | chunk (2) | chunks (2) | items
//! ```

use super::{be64, Reject, HEADER_LEN, MAX_DATAGRAM, PACK_LEN, TAG_LEN};

pub const CHUNKED_HEADER_LEN: usize = 24;

/// Checks the header of a chunked body (length, role, chunk numbers) and
/// returns how many items it announces; the caller checks the items.
pub(super) fn check(b: &[u8]) -> Result<usize, Reject> {
    if b.len() < CHUNKED_HEADER_LEN || b.len() > MAX_DATAGRAM || b[8] > 1 || b[9] != 0 {
        return Err(Reject::Malformed);
    }
    if chunks(b) == 0 || chunk(b) >= chunks(b) {
        return Err(Reject::Malformed);
    }
    Ok(usize::from(count(b)))
}

// Getters over a body `check` accepted (at least the header's length).
pub(super) fn sent_ms(b: &[u8]) -> u64 {
    be64(b)
}
pub(super) fn master(b: &[u8]) -> bool {
    b[8] == 1
}
pub(super) fn count(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[10], b[11]])
}
pub(super) fn generation(b: &[u8]) -> u64 {
    be64(&b[12..20])
}
pub(super) fn chunk(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[20], b[21]])
}
pub(super) fn chunks(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[22], b[23]])
}

/// The header's fields, as the reprs carry them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Head {
    pub sent_ms: u64,
    pub master: bool,
    pub generation: u64,
    pub chunk: u16,
    pub chunks: u16,
}

impl Head {
    /// A body of `items` bytes holding `count` items, header written.
    pub(super) fn start(&self, count: usize, items: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(CHUNKED_HEADER_LEN + items);
        out.extend_from_slice(&self.sent_ms.to_be_bytes());
        out.push(u8::from(self.master));
        out.push(0);
        out.extend_from_slice(&(count as u16).to_be_bytes());
        out.extend_from_slice(&self.generation.to_be_bytes());
        out.extend_from_slice(&self.chunk.to_be_bytes());
        out.extend_from_slice(&self.chunks.to_be_bytes());
        out
    }
}

/// Splits items into chunks whose bodies each seal into at most
/// [`PACK_LEN`] bytes (an item larger than that travels alone; at least
/// one chunk, so an empty set is sent too; at most `u16::MAX` chunks).
pub(super) fn split<'a, T: Clone + 'a>(
    items: impl Iterator<Item = &'a T>,
    len: impl Fn(&T) -> usize,
) -> Vec<Vec<T>> {
    let room = PACK_LEN - HEADER_LEN - TAG_LEN - CHUNKED_HEADER_LEN;
    let mut chunks: Vec<Vec<T>> = vec![Vec::new()];
    let mut used = 0;
    for item in items {
        let l = len(item);
        if used + l > room && chunks.last().is_some_and(|c| !c.is_empty()) {
            chunks.push(Vec::new());
            used = 0;
        }
        used += l;
        if let Some(c) = chunks.last_mut() {
            c.push(item.clone());
        }
    }
    chunks.truncate(usize::from(u16::MAX));
    chunks
}
