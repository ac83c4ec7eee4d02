//! A bounded queue of preallocated byte slots between threads: the one
//! shape of every punt path ([`crate::punt::ike`], [`crate::punt::host`]).
//! A fixed set of slots circulates through a free list and a queue, both
//! bounded channels: the producer takes a free slot, fills it and queues
//! it; the consumer takes it and gives it back. No allocation after
//! [`SlotQueue::new`], no lock, no blocking on the producer's side: when
//! no slot is free or the queue is full the item is refused, and the
//! caller counts the drop.

use crossbeam_channel::{bounded, Receiver, Sender};
use std::time::Duration;

/// A filled slot and what travels with it (addresses, VRF).
pub struct Slot<M> {
    buf: Box<[u8]>,
    len: usize,
    /// What the producer attached.
    pub meta: M,
}

impl<M> Slot<M> {
    /// The bytes the producer put in.
    pub fn data(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

impl<M> std::ops::Deref for Slot<M> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.meta
    }
}

impl<M: std::fmt::Debug> std::fmt::Debug for Slot<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("len", &self.len)
            .field("meta", &self.meta)
            .finish()
    }
}

/// Why [`SlotQueue::push_with`] refused an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// Larger than a slot.
    TooLarge,
    /// No free slot, or the queue is full.
    Full,
    /// The fill function refused it.
    Refused,
}

/// `slots` slots of `slot_size` bytes, a free list and a queue.
pub struct SlotQueue<M> {
    free_tx: Sender<Box<[u8]>>,
    free_rx: Receiver<Box<[u8]>>,
    tx: Sender<Slot<M>>,
    rx: Receiver<Slot<M>>,
    slot_size: usize,
}

impl<M> std::fmt::Debug for SlotQueue<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotQueue")
            .field("free", &self.free_rx.len())
            .field("queued", &self.rx.len())
            .finish()
    }
}

impl<M> SlotQueue<M> {
    /// Preallocates `slots` (at least one) slots of `slot_size` bytes.
    pub fn new(slots: usize, slot_size: usize) -> SlotQueue<M> {
        let slots = slots.max(1);
        let (free_tx, free_rx) = bounded(slots);
        for _ in 0..slots {
            let _ = free_tx.try_send(vec![0u8; slot_size].into_boxed_slice());
        }
        let (tx, rx) = bounded(slots);
        SlotQueue {
            free_tx,
            free_rx,
            tx,
            rx,
            slot_size,
        }
    }

    /// A free slot to fill and [`SlotQueue::push`]; None when all are
    /// in use.
    pub fn slot(&self) -> Option<Box<[u8]>> {
        self.free_rx.try_recv().ok()
    }

    /// Returns a slot taken with [`SlotQueue::slot`] unused.
    pub fn give_back(&self, buf: Box<[u8]>) {
        let _ = self.free_tx.try_send(buf);
    }

    /// Queues the first `len` bytes of `buf` (a slot from
    /// [`SlotQueue::slot`]); the slot goes back to the free list when the
    /// queue is full.
    pub fn push(&self, buf: Box<[u8]>, len: usize, meta: M) -> Result<(), PushError> {
        let len = len.min(buf.len());
        self.tx.try_send(Slot { buf, len, meta }).map_err(|e| {
            self.release(e.into_inner());
            PushError::Full
        })
    }

    /// Takes a free slot, lets `fill` write `len` bytes into it (false:
    /// refused, the slot goes back) and queues it.
    pub fn push_with(
        &self,
        len: usize,
        meta: M,
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result<(), PushError> {
        if len > self.slot_size {
            return Err(PushError::TooLarge);
        }
        let mut buf = self.slot().ok_or(PushError::Full)?;
        let filled = buf.get_mut(..len).is_some_and(fill);
        if !filled {
            self.give_back(buf);
            return Err(PushError::Refused);
        }
        self.push(buf, len, meta)
    }

    /// Queues a copy of `data`.
    pub fn push_copy(&self, data: &[u8], meta: M) -> Result<(), PushError> {
        self.push_with(data.len(), meta, |s| {
            s.copy_from_slice(data);
            true
        })
    }

    /// The next queued slot, if any.
    pub fn try_pop(&self) -> Option<Slot<M>> {
        self.rx.try_recv().ok()
    }

    /// Waits up to `timeout` for a queued slot.
    pub fn pop_timeout(&self, timeout: Duration) -> Option<Slot<M>> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// The consumer's end, to wait on several queues at once
    /// (`crossbeam_channel::select!`); give what it yields back with
    /// [`SlotQueue::release`].
    pub fn receiver(&self) -> &Receiver<Slot<M>> {
        &self.rx
    }

    /// Returns a consumed slot to the free list.
    pub fn release(&self, s: Slot<M>) {
        self.give_back(s.buf);
    }

    /// Slots free now.
    pub fn free(&self) -> usize {
        self.free_rx.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_recycled() {
        let q: SlotQueue<u8> = SlotQueue::new(2, 4);
        assert_eq!(q.push_copy(b"12345", 0), Err(PushError::TooLarge));
        q.push_copy(b"ab", 1).unwrap();
        q.push_copy(b"cd", 2).unwrap();
        assert_eq!(q.push_copy(b"ef", 3), Err(PushError::Full));
        assert_eq!(q.push_with(1, 3, |_| false), Err(PushError::Full));
        let s = q.try_pop().unwrap();
        assert_eq!((s.data(), *s), (&b"ab"[..], 1));
        q.release(s);
        assert_eq!(q.push_with(1, 4, |_| false), Err(PushError::Refused));
        assert_eq!(q.free(), 1, "a refused fill gives its slot back");
        let b = q.slot().unwrap();
        q.push(b, 9, 5).unwrap();
        assert_eq!(q.try_pop().unwrap().data(), b"cd");
        let s = q.pop_timeout(Duration::ZERO).unwrap();
        assert_eq!(
            (s.data().len(), s.meta),
            (4, 5),
            "len is capped at the slot"
        );
        assert!(q.try_pop().is_none());
    }
}
