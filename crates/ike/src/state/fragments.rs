//! IKE fragmentation (RFC 7383): outgoing protected messages are cut into
//! SKF fragments when the peer announced support and the message would
//! exceed the fragment size; incoming fragments, each verified on its
//! own, are collected until the message is whole.

use super::table::IkeSa;
use super::Ike;
use crate::crypto::Secret;
use crate::error::{Error, Result};
use crate::message::{Fragment, Message, MAX_FRAGMENTS, MAX_MESSAGE_LEN};
use crate::payload::Payload;
use zeroize::Zeroizing;

/// Fragments of one message being reassembled (RFC 7383 §2.6).
pub(super) struct Reassembly {
    msg_id: u32,
    response: bool,
    first: u8,
    parts: Vec<Option<Secret>>,
    bytes: usize,
}

impl IkeSa {
    /// Encrypt a message; fragment it (RFC 7383) when the peer supports
    /// fragmentation and it would exceed the fragment size.
    pub(super) fn protect(
        &self,
        exch: u8,
        msg_id: u32,
        response: bool,
        payloads: Vec<Payload>,
    ) -> Result<Vec<Vec<u8>>> {
        let sk = self.sk.as_ref().ok_or(Error::Malformed("no keys"))?;
        let m = Message {
            header: self.header(exch, msg_id, response),
            payloads,
        };
        let whole = m.build_protected(sk)?;
        match self.frag_size {
            Some(max) if whole.len() + if self.natt { 4 } else { 0 } > max => {
                m.build_fragments(sk, max - if self.natt { 4 } else { 0 })
            }
            _ => Ok(vec![whole]),
        }
    }
}

impl Ike {
    /// Collect a verified fragment; the whole message once complete.
    pub(super) fn reassemble(&mut self, idx: usize, f: Fragment) -> Result<Option<Message>> {
        let sa = &mut self.sas[idx];
        let total = usize::from(f.info.total);
        if total > MAX_FRAGMENTS {
            return Err(Error::TooMany("fragments"));
        }
        let response = f.header.is_response();
        let fresh = sa.reasm.as_ref().is_none_or(|r| {
            r.msg_id != f.header.msg_id || r.response != response || r.parts.len() != total
        });
        if fresh {
            sa.reasm = Some(Reassembly {
                msg_id: f.header.msg_id,
                response,
                first: 0,
                parts: (0..total).map(|_| None).collect(),
                bytes: 0,
            });
        }
        let Some(r) = sa.reasm.as_mut() else {
            return Ok(None);
        };
        let slot = usize::from(f.info.number) - 1;
        if r.parts[slot].is_some() {
            return Ok(None);
        }
        r.bytes += f.plain.len();
        if r.bytes > MAX_MESSAGE_LEN {
            sa.reasm = None;
            return Err(Error::TooLong);
        }
        if slot == 0 {
            r.first = f.next;
        }
        r.parts[slot] = Some(f.plain);
        if r.parts.iter().any(Option::is_none) {
            return Ok(None);
        }
        let mut whole = Zeroizing::new(Vec::with_capacity(r.bytes));
        for p in r.parts.iter().flatten() {
            whole.extend_from_slice(p);
        }
        let first = r.first;
        sa.reasm = None;
        let payloads = crate::payload::decode_chain(first, &whole)?;
        Ok(Some(Message {
            header: f.header,
            payloads,
        }))
    }
}
