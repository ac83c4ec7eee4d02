//! The VRRP punt: advertisements (IP protocol 112 to 224.0.0.18 /
//! ff02::12, RFC 5798 §5.1) that ip-local accepted, copied for the
//! speaker thread, which runs the state machines. A group lives on one
//! interface, so each advert carries the port it arrived on
//! ([`AdvertFrom`]) besides its addresses.
//!
//! Fixed slots on one bounded queue ([`super::slot_queue`]): a full queue
//! drops and counts (the master advertises again within its interval).

use super::slot_queue::{Slot, SlotQueue};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// Largest advertisement carried: 255 IPv6 addresses (RFC 5798 §5.2.5)
/// and the header.
pub const SLOT_SIZE: usize = 8 + 255 * 16;

/// Where an advertisement was heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdvertFrom {
    /// The port it arrived on (the group's interface).
    pub port: u16,
    /// The sender (its primary address, RFC 5798 §5.1.1.1 / §5.1.2.1).
    pub src: IpAddr,
    /// The group address it was sent to.
    pub dst: IpAddr,
}

/// One advertisement in a slot: `data()` is the VRRP packet, its
/// [`AdvertFrom`] the rest.
pub type Advert = Slot<AdvertFrom>;

/// The queue between the workers and the speaker thread.
pub struct VrrpPunt {
    q: SlotQueue<AdvertFrom>,
}

impl std::fmt::Debug for VrrpPunt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VrrpPunt").field("q", &self.q).finish()
    }
}

impl VrrpPunt {
    /// Preallocates `slots` slots.
    pub fn new(slots: usize) -> Arc<VrrpPunt> {
        Arc::new(VrrpPunt {
            q: SlotQueue::new(slots, SLOT_SIZE),
        })
    }

    /// Queues a copy of `payload` (worker side); `false` when dropped.
    pub fn punt(&self, payload: &[u8], from: AdvertFrom) -> bool {
        self.q.push_copy(payload, from).is_ok()
    }

    /// Waits up to `timeout` for an advertisement; give it back with
    /// [`VrrpPunt::release`].
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Advert> {
        self.q.pop_timeout(timeout)
    }

    /// A queued advertisement, without waiting.
    pub fn try_recv(&self) -> Option<Advert> {
        self.q.try_pop()
    }

    /// Returns an advertisement's slot to the free list.
    pub fn release(&self, a: Advert) {
        self.q.release(a);
    }
}
