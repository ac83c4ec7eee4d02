//! Packet buffers and the preallocated pool they come from.
//!
//! Every buffer is allocated once, when a worker starts, and recycled through
//! its [`Pool`]: the fast path never allocates. A buffer has [`HEADROOM`]
//! bytes in front of the received frame so encapsulation (GRE, VXLAN, ESP, an
//! outer IP header) is a `push_front`, not a copy, and [`TAILROOM`] behind
//! it for an ESP trailer.
//!
//! Buffers come in two sizes, so each holds what it carries: large ones
//! ([`BUF_SIZE`]) with room for a 64 KB super-packet (a GSO frame handed
//! over with a virtio-net header), and small ones ([`SMALL_BUF_SIZE`], one
//! page) for a wire-sized frame — a 1500-byte frame or a segment cut from a
//! super-packet does not pull a 66 KB buffer through the cache and the TLB.
//! Whoever knows the size before filling a buffer asks for it
//! ([`Pool::alloc_for`]); whoever grows a packet past its buffer (receive
//! coalescing, UDP GSO joining) moves it into a large one first
//! ([`Pool::grow`]).

/// Bytes reserved in front of the frame for encapsulation headers.
pub const HEADROOM: usize = 256;
/// Largest frame a buffer holds: a 64 KB IP super-packet plus its L2 header.
pub const MAX_FRAME: usize = 65_536 + 64;
/// Bytes reserved behind the frame (ESP padding, trailer and ICV).
pub const TAILROOM: usize = 128;
/// Size of a large buffer.
pub const BUF_SIZE: usize = HEADROOM + MAX_FRAME + TAILROOM;
/// Size of a small buffer: one page.
pub const SMALL_BUF_SIZE: usize = 4096;
/// Largest frame a small buffer holds (3712 bytes: a 1500-byte MTU's frame
/// with any tunnel's headers in front).
pub const SMALL_MAX_FRAME: usize = SMALL_BUF_SIZE - HEADROOM - TAILROOM;
/// Most packets a vector carries through the graph at once (as VPP's frame).
pub const VECTOR_SIZE: usize = 256;

/// Offload state of a packet, in the terms of the Linux virtio-net header
/// (`struct virtio_net_hdr`), which the AF_PACKET and TAP backends exchange
/// with the kernel. Offsets are relative to the start of [`Packet::data`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offload {
    /// The L4 checksum still has to be computed from `csum_start`, and the
    /// result stored at `csum_start + csum_offset` (VIRTIO_NET_HDR_F_NEEDS_CSUM).
    pub needs_csum: bool,
    /// The checksum was verified by whoever handed the packet over
    /// (VIRTIO_NET_HDR_F_DATA_VALID).
    pub csum_valid: bool,
    pub csum_start: u16,
    pub csum_offset: u16,
    /// What kind of super-packet this is; `None` for a plain packet.
    pub gso: Gso,
    /// Payload bytes per segment once segmented (the MSS for TCP).
    pub gso_size: u16,
    /// Length of all headers up to and including the L4 header, as far as
    /// vecgate sets it. On receive it is the kernel's `hdr_len`, only a hint
    /// (`skb_headlen()`, may cover payload): read the headers from the packet
    /// (`offload::tso::segment_hdr_len`) when their length matters.
    pub hdr_len: u16,
}

/// Segmentation kind of a super-packet (`VIRTIO_NET_HDR_GSO_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Gso {
    #[default]
    None,
    TcpV4,
    TcpV6,
    /// UDP segmentation (`VIRTIO_NET_HDR_GSO_UDP_L4`).
    UdpL4,
}

/// Per-packet metadata carried through the graph alongside the bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Meta {
    /// Port (interface index in the dataplane) the packet came in on.
    pub rx_port: u16,
    /// Port the packet leaves on, set by the lookup node.
    pub tx_port: u16,
    /// VRF the packet is routed in.
    pub vrf: u16,
    /// Offset of the L3 header from the start of the data.
    pub l3_offset: u16,
    /// Flow hash (inner headers), used for entropy and worker spreading.
    pub flow_hash: u32,
    /// Adjacency (neighbour / rewrite) index chosen by the lookup.
    pub adj: u32,
    pub offload: Offload,
    /// Record this packet's path in the trace buffer.
    pub trace: bool,
    /// Graph flags (`dataplane::graph::flags`), e.g. "locally originated".
    pub flags: u16,
    /// Scratch word handed from a node to its next node (e.g. which ICMP
    /// error icmp-error must send, and the MTU it carries).
    pub aux: u32,
}

/// One packet: a pool buffer plus the window of it that holds the frame.
pub struct Packet {
    buf: Box<[u8]>,
    head: usize,
    len: usize,
    pub meta: Meta,
}

impl Packet {
    /// The frame bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf[self.head..self.head + self.len]
    }

    /// The frame bytes, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.head..self.head + self.len]
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes free in front of the frame.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.head
    }

    /// How many wire-sized packets this one may become: a GSO super-packet
    /// counts as the segments of `offload.gso_size` its payload makes (the
    /// nodes that cut it need a buffer for each), anything else as one.
    /// Receive bursts are budgeted in these units ([`crate::Port::rx_burst`]).
    #[inline]
    pub fn wire_segments(&self) -> usize {
        let o = &self.meta.offload;
        if o.gso == Gso::None || o.gso_size == 0 {
            return 1;
        }
        self.len
            .saturating_sub(usize::from(o.hdr_len))
            .div_ceil(usize::from(o.gso_size))
            .max(1)
    }

    /// Whether the packet lies in a small buffer ([`SMALL_MAX_FRAME`]).
    #[inline]
    pub fn is_small(&self) -> bool {
        self.buf.len() < BUF_SIZE
    }

    /// Bytes free behind the frame.
    #[inline]
    pub fn tailroom(&self) -> usize {
        self.buf.len() - self.head - self.len
    }

    /// Grows the frame by `n` bytes at the front (for a new header) and returns
    /// them; `None` if the headroom is exhausted.
    #[inline]
    pub fn push_front(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.head {
            return None;
        }
        self.head -= n;
        self.len += n;
        Some(&mut self.buf[self.head..self.head + n])
    }

    /// Removes `n` bytes from the front (a decapsulated header); `false` if the
    /// frame is shorter than that.
    #[inline]
    pub fn pull_front(&mut self, n: usize) -> bool {
        if n > self.len {
            return false;
        }
        self.head += n;
        self.len -= n;
        true
    }

    /// Grows the frame by `n` bytes at the back and returns them.
    #[inline]
    pub fn push_back(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.tailroom() {
            return None;
        }
        let start = self.head + self.len;
        self.len += n;
        Some(&mut self.buf[start..start + n])
    }

    /// Grows the frame by `n` bytes at its end and returns them to be
    /// filled; `None` (frame unchanged) if the buffer has no room.
    #[inline]
    pub fn extend(&mut self, n: usize) -> Option<&mut [u8]> {
        let start = self.head + self.len;
        let end = start.checked_add(n)?;
        if end > self.buf.len() - TAILROOM {
            return None;
        }
        self.len += n;
        Some(&mut self.buf[start..end])
    }

    /// Shortens the frame to `len` bytes (no-op if already shorter).
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len {
            self.len = len;
        }
    }

    /// Resets the window to the standard headroom and returns the whole
    /// receive area, for a backend to copy a frame into; follow with
    /// [`Packet::set_len`].
    #[inline]
    pub fn rx_area(&mut self) -> &mut [u8] {
        self.head = HEADROOM;
        self.len = 0;
        let end = self.buf.len() - TAILROOM;
        &mut self.buf[HEADROOM..end]
    }

    /// Sets the frame length after the receive area was filled.
    #[inline]
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(self.buf.len() - self.head);
    }

    /// Replaces the frame with `bytes` at the standard headroom (tests, ICMP
    /// generation); `false` if they do not fit.
    pub fn set_data(&mut self, bytes: &[u8]) -> bool {
        let area = self.rx_area();
        if bytes.len() > area.len() {
            return false;
        }
        area[..bytes.len()].copy_from_slice(bytes);
        self.len = bytes.len();
        true
    }
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packet")
            .field("len", &self.len)
            .field("headroom", &self.head)
            .field("meta", &self.meta)
            .finish()
    }
}

/// A per-worker pool of preallocated buffers, large and small. Not shared
/// between threads, so taking and returning a buffer is a `Vec` pop/push:
/// no lock, no allocation.
pub struct Pool {
    free: Vec<Box<[u8]>>,
    small: Vec<Box<[u8]>>,
    capacity: usize,
}

impl Pool {
    /// Allocates `capacity` large buffers ([`BUF_SIZE`] bytes) and as many
    /// small ones ([`SMALL_BUF_SIZE`]) up front.
    pub fn new(capacity: usize) -> Self {
        let mut free = Vec::with_capacity(capacity);
        let mut small = Vec::with_capacity(capacity);
        for _ in 0..capacity {
            free.push(vec![0u8; BUF_SIZE].into_boxed_slice());
            small.push(vec![0u8; SMALL_BUF_SIZE].into_boxed_slice());
        }
        Pool {
            free,
            small,
            capacity,
        }
    }

    fn packet(buf: Box<[u8]>) -> Packet {
        Packet {
            buf,
            head: HEADROOM,
            len: 0,
            meta: Meta::default(),
        }
    }

    /// Takes a large buffer (any frame fits) with an empty frame at the
    /// standard headroom, or `None` when the pool is exhausted (the caller
    /// counts a drop).
    #[inline]
    pub fn alloc(&mut self) -> Option<Packet> {
        self.free.pop().map(Self::packet)
    }

    /// Takes a buffer for a frame of `len` bytes: a small one when it fits
    /// ([`SMALL_MAX_FRAME`]) and one is left, else a large one.
    #[inline]
    pub fn alloc_for(&mut self, len: usize) -> Option<Packet> {
        if len <= SMALL_MAX_FRAME {
            if let Some(b) = self.small.pop() {
                return Some(Self::packet(b));
            }
        }
        self.alloc()
    }

    /// Buffers [`Pool::alloc_for`] can hand out now for frames of `len`
    /// bytes.
    #[inline]
    pub fn available_for(&self, len: usize) -> usize {
        if len <= SMALL_MAX_FRAME {
            self.free.len() + self.small.len()
        } else {
            self.free.len()
        }
    }

    /// Moves a packet held in a small buffer into a large one (same frame,
    /// headroom and metadata), so it can grow to a super-packet; `true` if
    /// it is in a large buffer now, `false` (unchanged) if none is left.
    pub fn grow(&mut self, p: &mut Packet) -> bool {
        if !p.is_small() {
            return true;
        }
        let Some(mut big) = self.free.pop() else {
            return false;
        };
        let (h, n) = (p.head, p.len);
        big[h..h + n].copy_from_slice(&p.buf[h..h + n]);
        let small = std::mem::replace(&mut p.buf, big);
        if self.small.len() < self.capacity {
            self.small.push(small);
        }
        true
    }

    /// Returns a packet's buffer to the pool.
    #[inline]
    pub fn free(&mut self, pkt: Packet) {
        let list = if pkt.buf.len() == BUF_SIZE {
            &mut self.free
        } else if pkt.buf.len() == SMALL_BUF_SIZE {
            &mut self.small
        } else {
            return;
        };
        if list.len() < self.capacity {
            list.push(pkt.buf);
        }
    }

    /// Returns every packet of a vector to the pool, leaving it empty.
    #[inline]
    pub fn free_all(&mut self, pkts: &mut Vec<Packet>) {
        for p in pkts.drain(..) {
            self.free(p);
        }
    }

    /// Large buffers currently available.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Small buffers currently available.
    pub fn available_small(&self) -> usize {
        self.small.len()
    }

    /// Buffers of each size the pool was created with.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether every buffer of both sizes is back (no packet leaked).
    pub fn is_full(&self) -> bool {
        self.free.len() == self.capacity && self.small.len() == self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_and_pull_headers() {
        let mut pool = Pool::new(2);
        let mut p = pool.alloc().unwrap();
        assert!(p.set_data(&[1, 2, 3, 4]));
        p.push_front(2).unwrap().copy_from_slice(&[9, 8]);
        assert_eq!(p.data(), &[9, 8, 1, 2, 3, 4]);
        assert!(p.pull_front(3));
        assert_eq!(p.data(), &[2, 3, 4]);
        assert!(!p.pull_front(4));
        p.push_back(1).unwrap()[0] = 7;
        assert_eq!(p.data(), &[2, 3, 4, 7]);
        assert!(p.push_front(HEADROOM + 10).is_none());
        pool.free(p);
        assert_eq!(pool.available(), 2);
    }

    #[test]
    fn pool_exhaustion_is_reported_not_grown() {
        let mut pool = Pool::new(1);
        let a = pool.alloc().unwrap();
        assert!(pool.alloc().is_none());
        pool.free(a);
        assert!(pool.alloc().is_some());
    }

    #[test]
    fn small_buffers_for_small_frames_and_growing_into_a_large_one() {
        let mut pool = Pool::new(2);
        let mut p = pool.alloc_for(1514).unwrap();
        assert!(p.is_small());
        assert_eq!(p.rx_area().len(), SMALL_MAX_FRAME);
        assert!(p.set_data(&[7u8; 1514]));
        p.push_front(20).unwrap().fill(1);
        p.meta.vrf = 9;
        assert!(
            p.extend(SMALL_MAX_FRAME).is_none(),
            "no room in a small buffer"
        );
        assert!(pool.grow(&mut p));
        assert!(!p.is_small());
        assert_eq!(p.headroom(), HEADROOM - 20);
        assert_eq!(&p.data()[..20], &[1u8; 20]);
        assert_eq!(&p.data()[20..], &[7u8; 1514][..]);
        assert_eq!(p.meta.vrf, 9);
        assert!(p.extend(SMALL_MAX_FRAME).is_some(), "room once large");
        assert_eq!((pool.available(), pool.available_small()), (1, 2));
        let big = pool.alloc_for(SMALL_MAX_FRAME + 1).unwrap();
        assert!(!big.is_small());
        assert!(
            pool.alloc_for(SMALL_MAX_FRAME + 1).is_none(),
            "large ones gone"
        );
        let mut q = pool.alloc_for(60).unwrap();
        assert!(q.is_small());
        assert!(!pool.grow(&mut q), "no large buffer left to grow into");
        assert!(q.is_small());
        pool.free(p);
        pool.free(big);
        pool.free(q);
        assert!(pool.is_full());
        // Small ones run out: large ones serve small frames too.
        let a = pool.alloc_for(10).unwrap();
        let b = pool.alloc_for(10).unwrap();
        let c = pool.alloc_for(10).unwrap();
        assert!(a.is_small() && b.is_small() && !c.is_small());
        assert_eq!(pool.available_for(10), 1);
        assert_eq!(pool.available_for(5000), 1);
    }

    #[test]
    fn super_packet_fits() {
        let mut pool = Pool::new(1);
        let mut p = pool.alloc().unwrap();
        assert!(p.rx_area().len() >= MAX_FRAME);
        assert!(p.set_data(&vec![0u8; 65_550]));
        assert!(p.push_front(HEADROOM).is_some());
        assert!(p.push_back(TAILROOM).is_some());
    }
}
