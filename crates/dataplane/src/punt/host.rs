//! Host punt: the gateway's control-plane sessions (BGP, BFD) run in the
//! host's own stack, the way VPP's linux-cp plugin hands them over. vecgate
//! owns its netdevs (AF_PACKET behind an ingress guard), so a host socket on
//! TCP 179 never sees a packet arriving there; instead:
//!
//! * **punt** — ip-local copies a packet addressed to one of the gateway's
//!   addresses that [`HostPunt::wants`] (TCP to or from port 179, BGP,
//!   RFC 4271 §8.2.1; UDP to 3784/3785/4784, BFD, RFC 5881 §4, RFC 5883
//!   §5) whole into a preallocated slot, checksum completed, with the VRF
//!   it arrived in. The [`relay`] writes it to that VRF's TUN device on
//!   the host.
//! * **inject** — what the host sends on that TUN (its replies, its own
//!   connects) comes back whole through [`HostPunt::inject`]; every worker
//!   drains the queue once per loop and routes the packets in their VRF
//!   through ip4/ip6-lookup, as if the gateway had originated them.
//!
//! Fixed slots, bounded queues ([`crate::punt::slot_queue`]), each direction
//! with its own slots: a full queue drops and counts (TCP and BFD
//! recover); no allocation, no lock, no blocking in a worker.

pub mod relay;

use crate::graph::flags;
use crate::punt::slot_queue::{PushError, Slot, SlotQueue};
use packet::buffer::{Packet, Pool};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wire::checksum;

/// BGP (RFC 4271 §8.2.1).
pub const BGP_PORT: u16 = 179;
/// BFD single-hop control and echo (RFC 5881 §4), multihop (RFC 5883 §5).
pub const BFD_PORTS: [u16; 3] = [3784, 3785, 4784];
/// Largest packet carried: a receive-offloaded TCP super-packet fits.
pub const SLOT_SIZE: usize = 65536;
/// Slots by default, half to each direction (4 MiB in all).
pub const DEFAULT_SLOTS: usize = 64;

/// The VRF a packet belongs to.
#[derive(Debug, Clone, Copy)]
pub struct FrameMeta {
    /// Index of the VRF in the tables (`Meta::vrf`).
    pub vrf: u16,
}

/// One whole IP packet (`data()`) and its VRF index (`vrf`).
pub type Frame = Slot<FrameMeta>;

/// Counters of the host punt path (`/metrics`).
#[derive(Debug, Default)]
pub struct HostPuntCounters {
    pub punted: AtomicU64,
    /// Dropped: no free slot or queue full (either direction).
    pub full: AtomicU64,
    pub injected: AtomicU64,
    /// Dropped by a worker: no packet buffer, or too large for one.
    pub inject_no_buffer: AtomicU64,
}

/// The punt / inject queues shared by the workers and the binary's host
/// thread.
pub struct HostPunt {
    /// Towards the host.
    up: SlotQueue<FrameMeta>,
    /// From the host (a punt flood never takes its slots).
    down: SlotQueue<FrameMeta>,
    pub counters: HostPuntCounters,
}

impl std::fmt::Debug for HostPunt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostPunt")
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl HostPunt {
    /// Preallocates `slots` slots, half for each direction (the only
    /// allocation of this path).
    pub fn new(slots: usize) -> Arc<HostPunt> {
        let half = slots.div_ceil(2);
        Arc::new(HostPunt {
            up: SlotQueue::new(half, SLOT_SIZE),
            down: SlotQueue::new(half, SLOT_SIZE),
            counters: HostPuntCounters::default(),
        })
    }

    /// Whether ip-local hands a packet of IP protocol `proto` between
    /// `sport` and `dport` to the host.
    #[inline]
    pub fn wants(proto: u8, sport: u16, dport: u16) -> bool {
        match proto {
            6 => dport == BGP_PORT || sport == BGP_PORT,
            17 => BFD_PORTS.contains(&dport),
            _ => false,
        }
    }

    /// Queues a copy of the IP packet `ip` (its L4 header at `l4`, of
    /// protocol `proto`) for the host (worker side); `complete_csum`: the
    /// L4 checksum is still partial (a local sender's offload) and is
    /// computed here, as the host's TUN takes no offload metadata.
    /// `false` when dropped (counted when the queue was full).
    pub fn punt(&self, ip: &[u8], l4: usize, proto: u8, complete_csum: bool, vrf: u16) -> bool {
        let r = self.up.push_with(ip.len(), FrameMeta { vrf }, |slot| {
            slot.copy_from_slice(ip);
            !complete_csum || complete_l4_checksum(slot, l4, proto)
        });
        match r {
            Ok(()) => {
                self.counters.punted.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(PushError::Refused) => false,
            Err(PushError::TooLarge | PushError::Full) => {
                self.counters.full.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Waits up to `timeout` for a punted packet (host side); give it back
    /// with [`HostPunt::release`].
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Frame> {
        self.up.pop_timeout(timeout)
    }

    pub fn release(&self, f: Frame) {
        self.up.release(f);
    }

    /// Returns an unused slot from [`HostPunt::slot`].
    pub fn give_back(&self, b: Box<[u8]>) {
        self.down.give_back(b);
    }

    /// A free slot for the host side to read a packet into (then
    /// [`HostPunt::inject`] it); `None` when every slot is in use.
    pub fn slot(&self) -> Option<Box<[u8]>> {
        self.down.slot()
    }

    /// Queues the first `len` bytes of `buf` (a slot from
    /// [`HostPunt::slot`]), an IP packet from the host, to be routed in VRF
    /// index `vrf`. `false` when the queue is full (the slot is returned).
    pub fn inject(&self, buf: Box<[u8]>, len: usize, vrf: u16) -> bool {
        match self.down.push(buf, len, FrameMeta { vrf }) {
            Ok(()) => true,
            Err(_) => {
                self.counters.full.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Copies up to `max` injected packets into buffers of `pool`, appended
    /// to `v4` / `v6` for ip4-lookup / ip6-lookup (worker side).
    pub fn drain_inject(
        &self,
        pool: &mut Pool,
        v4: &mut Vec<Packet>,
        v6: &mut Vec<Packet>,
        max: usize,
    ) {
        for _ in 0..max {
            let Some(f) = self.down.try_pop() else {
                return;
            };
            let d = f.data();
            let v = d.first().map(|b| b >> 4);
            match pool.alloc() {
                Some(mut p) if matches!(v, Some(4 | 6)) => match p.push_back(d.len()) {
                    Some(area) => {
                        area.copy_from_slice(d);
                        p.meta.vrf = f.vrf;
                        p.meta.flags = flags::LOCAL;
                        p.meta.l3_offset = 0;
                        p.meta.aux = 0;
                        p.meta.offload = Default::default();
                        self.counters.injected.fetch_add(1, Ordering::Relaxed);
                        if v == Some(4) {
                            v4.push(p);
                        } else {
                            v6.push(p);
                        }
                    }
                    None => {
                        pool.free(p);
                        self.counters
                            .inject_no_buffer
                            .fetch_add(1, Ordering::Relaxed);
                    }
                },
                Some(p) => pool.free(p),
                None => {
                    self.counters
                        .inject_no_buffer
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            self.down.release(f);
        }
    }
}

/// Computes the TCP/UDP checksum of the IP packet `ip` (L4 at `l4`) in
/// full (RFC 793 §3.1, RFC 768, RFC 8200 §8.1). `false` if it does not
/// parse.
fn complete_l4_checksum(ip: &mut [u8], l4: usize, proto: u8) -> bool {
    let at = match proto {
        6 => 16,
        17 => 6,
        _ => return true,
    };
    let Some(l4len) = ip.len().checked_sub(l4) else {
        return false;
    };
    if l4len < at + 2 {
        return false;
    }
    let ph = match ip.first().map(|b| b >> 4) {
        Some(4) => {
            let (Ok(s), Ok(d)) = (
                <[u8; 4]>::try_from(&ip[12..16]),
                <[u8; 4]>::try_from(&ip[16..20]),
            ) else {
                return false;
            };
            let Ok(n) = u16::try_from(l4len) else {
                return false;
            };
            checksum::pseudo_header_v4(&Ipv4Addr::from(s), &Ipv4Addr::from(d), proto, n)
        }
        Some(6) => {
            let (Ok(s), Ok(d)) = (
                <[u8; 16]>::try_from(&ip[8..24]),
                <[u8; 16]>::try_from(&ip[24..40]),
            ) else {
                return false;
            };
            checksum::pseudo_header_v6(&Ipv6Addr::from(s), &Ipv6Addr::from(d), proto, l4len as u32)
        }
        _ => return false,
    };
    let seg = &mut ip[l4..];
    seg[at..at + 2].copy_from_slice(&[0, 0]);
    let mut c = !checksum::combine(&[ph, checksum::data(seg)]);
    if proto == 17 && c == 0 {
        c = 0xffff;
    }
    seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}
