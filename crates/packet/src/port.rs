//! The interface between the graph and an I/O backend.
//!
//! A backend (AF_PACKET, TAP, AF_XDP — in the `vecgate-io` crate) moves whole
//! bursts of packets between the kernel and a worker's vectors. The graph
//! never issues a syscall itself; the worker loop calls `rx_burst` on every
//! port, runs the graph, and hands each port its transmit vector.

use crate::buffer::{Packet, Pool};
use std::io;
use std::os::fd::BorrowedFd;

/// Packets a backend or the kernel lost at a port since the previous
/// [`Port::take_drops`], by reason. They never reached the graph (receive)
/// or never left (transmit), so no node counted them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortDrops {
    /// Frames the kernel dropped because the receive ring (or socket queue)
    /// was full: the worker did not keep up (AF_PACKET `tp_drops`).
    pub rx_ring_full: u64,
    /// Frames received but unusable: truncated, inconsistent ring
    /// descriptor, or a virtio-net header vecgate cannot represent.
    pub rx_bad: u64,
    /// Packets the kernel refused to send as malformed (EINVAL, EMSGSIZE).
    /// Already part of the shortfall of [`Port::tx_burst`]'s return value.
    pub tx_rejected: u64,
    /// Packets not sent because the kernel had no room (EAGAIN, ENOBUFS).
    /// Already part of the shortfall of [`Port::tx_burst`]'s return value.
    pub tx_full: u64,
}

/// What one [`Port::tx_burst`] handed to the kernel: the packets it took
/// and their bytes (frames as handed over, link header included, no
/// virtio-net header). A refused packet is in neither: the port's counters
/// count what left, as the kernel's counters for the netdev do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    pub packets: usize,
    pub bytes: u64,
}

impl Sent {
    /// Adds one packet of `len` bytes.
    #[inline]
    pub fn add(&mut self, len: usize) {
        self.packets += 1;
        self.bytes += len as u64;
    }
}

/// One worker's queue on one network interface.
pub trait Port: Send {
    /// Linux netdev name this port is attached to.
    fn name(&self) -> &str;

    /// Receives packets into `out` (appending), with buffers taken from
    /// `pool`, until `max` wire-sized packets' worth arrived: a super-packet
    /// counts as its segments ([`Packet::wire_segments`](crate::Packet::wire_segments)),
    /// so that a vector cut into wire-sized packets downstream (segmentation,
    /// a UDP GSO datagram split into its ESP packets) fits the pool; 256
    /// super-packets of 44 segments each emptied it and lost whole datagrams.
    /// Offload state from the kernel's virtio-net header is stored in each
    /// packet's `meta.offload`. Never blocks: returns `Ok(0)` when nothing is
    /// pending; returns the number of packets received.
    fn rx_burst(&mut self, pool: &mut Pool, out: &mut Vec<Packet>, max: usize)
        -> io::Result<usize>;

    /// Transmits every packet of `pkts` (leaving it empty) and returns the
    /// buffers to `pool`. Super-packets (`meta.offload.gso != None`) are handed
    /// to the kernel whole with a virtio-net header when the backend supports
    /// it. Returns the packets (and their bytes) accepted by the kernel; the
    /// rest were dropped (ring full, refused) and the caller counts them.
    /// Every frame must keep the transmit invariant
    /// ([`crate::tx_check`]), which backends check in debug builds.
    fn tx_burst(&mut self, pkts: &mut Vec<Packet>, pool: &mut Pool) -> io::Result<Sent>;

    /// File descriptor to wait on (readable = packets to receive).
    /// `None` for a port without one (tests' in-memory ports).
    fn poll_fd(&self) -> Option<BorrowedFd<'_>>;

    /// Hardware address of the interface.
    fn mac(&self) -> [u8; 6];

    /// MTU of the interface (L3 bytes).
    fn mtu(&self) -> u32;

    /// Whether the backend exchanges super-packets (vnet headers) with the kernel.
    fn offloads(&self) -> bool;

    /// Whether UDP GSO super-packets (`Gso::UdpL4`) may be sent as they are;
    /// when false, interface-output cuts them first. Only meaningful with
    /// [`Port::offloads`].
    fn udp_gso(&self) -> bool {
        false
    }

    /// Re-reads netdev settings an operator may change while vecgate runs
    /// (ethtool features behind [`Port::udp_gso`]). The worker calls it
    /// about once a second; syscalls are fine here.
    fn recheck(&mut self) {}

    /// Whether the netdev behind the port still exists. A syscall: the
    /// worker asks after POLLERR on `poll_fd` or an error from a burst, and
    /// when false drops the port and re-opens it later.
    fn is_alive(&self) -> bool {
        true
    }

    /// Drops since the previous call (see [`PortDrops`]). May be a syscall
    /// (AF_PACKET reads and resets the kernel's PACKET_STATISTICS): the
    /// worker polls it from its timers, never per burst. The default is for
    /// backends that know of no drops of their own.
    fn take_drops(&mut self) -> PortDrops {
        PortDrops::default()
    }
}
