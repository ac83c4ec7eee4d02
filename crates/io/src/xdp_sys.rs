//! The raw pieces of the AF_XDP backend: the XDP redirect program and its
//! XSKMAP (the `bpf(2)` plumbing is [`crate::bpf_sys`]'s), the UMEM (packet memory shared with the
//! kernel) and the four single-producer/single-consumer rings mapped from an
//! XSK socket. Socket creation, bind and the XDP socket options go through
//! `rustix::net` (typed and already safe); what rustix does not cover lives
//! here, every `unsafe` block small and commented.
//!
//! Layouts follow the kernel's stable UAPI: `linux/bpf.h` (`union bpf_attr`,
//! `struct bpf_insn`), `linux/if_xdp.h` and `linux/ethtool.h`.

use crate::bpf_sys::{bpf, insn, link_create, load_program, name16, owned, BpfInsn, Program};
use rustix::net::xdp::{XdpDesc, XdpDescOptions, XdpRingOffset};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

// linux/bpf.h: commands, types, flags.
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: BPF_XDP.
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `bpf_redirect_map(map, key, flags)`: helper id 51.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `prog_flags` of BPF_PROG_LOAD: the XDP program accepts multi-buffer
/// (fragmented) frames (Linux 5.18, "xdp.frags" in libbpf's section names).
pub const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

// linux/if_link.h: XDP attach flags.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

// The XDP actions (enum xdp_action).
pub const XDP_DROP: i32 = 1;

// linux/ethtool.h
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// `offsetof(struct xdp_md, rx_queue_index)`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// The whole XDP program:
///
/// ```text
/// r2 = *(u32 *)(r1 + offsetof(xdp_md, rx_queue_index))
/// r1 = map_fd ll                       ; the XSKMAP
/// r3 = fallback                        ; action when no socket is at r2
/// call bpf_redirect_map
/// exit
/// ```
///
/// A frame goes to the AF_XDP socket bound to the queue it arrived on, and
/// gets `fallback` when there is none.
pub fn redirect_program(map_fd: RawFd, fallback: i32) -> [BpfInsn; 6] {
    [
        // BPF_LDX | BPF_MEM | BPF_W
        insn(0x61, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        // BPF_LD | BPF_IMM | BPF_DW: two slots, the map fd in the first.
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // BPF_ALU64 | BPF_MOV | BPF_K
        insn(0xb7, 3, 0, 0, fallback),
        // BPF_JMP | BPF_CALL
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // BPF_JMP | BPF_EXIT
        insn(0x95, 0, 0, 0, 0),
    ]
}

/// `union bpf_attr` for BPF_MAP_CREATE (the prefix vecgate fills; the
/// kernel treats the missing tail as zero).
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// `union bpf_attr` for BPF_MAP_*_ELEM.
#[repr(C)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// A BPF_MAP_TYPE_XSKMAP with `max_entries` slots (queue index → socket).
pub fn xskmap_create(max_entries: u32) -> io::Result<OwnedFd> {
    let mut a = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries,
        map_name: name16("vecgate_xsks"),
        ..MapCreateAttr::default()
    };
    owned(bpf(BPF_MAP_CREATE, &mut a)?)
}

/// Stores socket `xsk` at `key` in the XSKMAP `map`.
pub fn xskmap_set(map: &OwnedFd, key: u32, xsk: &OwnedFd) -> io::Result<()> {
    let value: u32 = xsk.as_raw_fd() as u32;
    let mut a = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        flags: 0, // BPF_ANY
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// Loads [`redirect_program`] for `map`, with `prog_flags` (0 or
/// [`BPF_F_XDP_HAS_FRAGS`]). On a verifier rejection the error carries the
/// verifier's log.
pub fn load_redirect_program(map: &OwnedFd, fallback: i32, prog_flags: u32) -> io::Result<OwnedFd> {
    let prog = redirect_program(map.as_raw_fd(), fallback);
    load_program(&Program {
        prog_type: BPF_PROG_TYPE_XDP,
        insns: &prog,
        name: "vecgate_xsk",
        flags: prog_flags,
        attach_type: BPF_XDP,
    })
}

/// Attaches `prog` to `ifindex` (in the calling thread's network namespace)
/// through a BPF link: the program is detached when the returned descriptor
/// is closed (and with it at process exit), so nothing stays on the host.
pub fn link_xdp(prog: &OwnedFd, ifindex: i32, flags: u32) -> io::Result<OwnedFd> {
    link_create(prog, ifindex, BPF_XDP, flags)
}

/// Receive queues of a netdev (ETHTOOL_GCHANNELS: rx + combined), `None`
/// when the driver does not report channels.
pub fn rx_queues(ctl: RawFd, ifname: &str) -> Option<u32> {
    // struct ethtool_channels: cmd, max_rx, max_tx, max_other,
    // max_combined, rx_count, tx_count, other_count, combined_count.
    let mut ch = [0u32; 9];
    ch[0] = ETHTOOL_GCHANNELS;
    let mut ifr = crate::sys::Ifreq::new(ifname)?;
    let ptr = ch.as_mut_ptr() as usize;
    ifr.data[..8].copy_from_slice(&ptr.to_ne_bytes());
    // SAFETY: ifr_data points to `ch`, a 36-byte ethtool_channels alive
    // until the call returns; the kernel writes only within it.
    let r = unsafe {
        libc::ioctl(
            ctl,
            libc::SIOCETHTOOL as _,
            &mut ifr as *mut crate::sys::Ifreq,
        )
    };
    if r < 0 {
        return None;
    }
    Some(ch[5] + ch[8])
}

/// Raw interface flags (SIOCGIFFLAGS) of `ifname`.
pub fn if_flags(ctl: RawFd, ifname: &str) -> io::Result<i32> {
    let mut ifr = crate::sys::Ifreq::new(ifname)
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    crate::sys::ioctl_ifreq(ctl, libc::SIOCGIFFLAGS, &mut ifr)?;
    Ok(i32::from(ifr.i16_at0()) & 0xffff)
}

/// Anonymous, page-aligned, pre-faulted memory: the UMEM of one socket.
/// The kernel reads and writes frames in it while it owns them (fill/tx
/// ring), user space only while it owns them (rx/completion ring).
pub struct Umem {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: plain memory owned by this value; moving it to another thread
// moves the only handle the process keeps to it.
unsafe impl Send for Umem {}

impl Umem {
    pub fn new(len: usize) -> io::Result<Self> {
        // SAFETY: a fresh private anonymous mapping chosen by the kernel; no
        // existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap"))?;
        Ok(Umem { ptr, len })
    }

    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// `len` bytes at `off`, bounds checked. Only for frames user space owns
    /// (taken from the rx ring, not yet given back to the fill ring).
    pub fn bytes(&self, off: u64, len: usize) -> Option<&[u8]> {
        let off = usize::try_from(off).ok()?;
        if off.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: in bounds of the mapping; the kernel does not write a frame
        // user space owns, so the bytes are stable while borrowed.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) })
    }

    /// Writable `len` bytes at `off`, bounds checked. Only for frames user
    /// space owns (free tx frames).
    pub fn bytes_mut(&mut self, off: u64, len: usize) -> Option<&mut [u8]> {
        let off = usize::try_from(off).ok()?;
        if off.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: in bounds; exclusively borrowed through `&mut self`, and the
        // kernel does not touch a frame until it is produced on the tx ring.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(off), len) })
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly this mapping; no borrow of it outlives self.
        // (The kernel keeps its own page references while a socket is open.)
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// One of an XSK socket's rings, mapped from the socket: a producer index,
/// a consumer index, a flags word (need_wakeup) and `size` entries of
/// `elem` bytes (16 for descriptors, 8 for UMEM addresses). Indexes run
/// freely and wrap at 2^32; an entry is at `index & (size - 1)`.
///
/// Each side keeps cached copies of both indexes and touches the shared
/// ones once per burst: an Acquire load of the other side's index before
/// reading entries (or reusing slots), a Release store of its own after
/// writing entries (or reading them) — the kernel's side pairs with these
/// (`xsk_queue.h`).
pub struct Ring {
    map: NonNull<u8>,
    map_len: usize,
    producer: usize,
    consumer: usize,
    flags: Option<usize>,
    desc: usize,
    size: u32,
    elem: usize,
    /// Producer side: our producer; consumer side: the kernel's, last read.
    cached_prod: u32,
    /// Producer side: the kernel's consumer + size, last read; consumer
    /// side: our consumer.
    cached_cons: u32,
}

// SAFETY: the mapping is owned by this value; one thread uses a ring at a
// time (the port's owner), the kernel is the only other party.
unsafe impl Send for Ring {}

/// Which side of a ring user space is on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Fill and tx rings.
    Producer,
    /// Rx and completion rings.
    Consumer,
}

impl Ring {
    /// Maps ring `pgoff` of `fd` with `size` entries of `elem` bytes at the
    /// offsets the kernel reported.
    pub fn map(
        fd: &OwnedFd,
        pgoff: u64,
        off: &XdpRingOffset,
        size: u32,
        elem: usize,
        side: Side,
    ) -> io::Result<Ring> {
        if !size.is_power_of_two() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let to =
            |v: u64| usize::try_from(v).map_err(|_| io::Error::from(io::ErrorKind::InvalidData));
        let desc = to(off.desc)?;
        let map_len = desc + size as usize * elem;
        let producer = to(off.producer)?;
        let consumer = to(off.consumer)?;
        let flags = off.flags.map(to).transpose()?;
        for o in [Some(producer), Some(consumer), flags]
            .into_iter()
            .flatten()
        {
            if o % 4 != 0 || o + 4 > map_len {
                return Err(io::Error::from(io::ErrorKind::InvalidData));
            }
        }
        if desc % 8 != 0 {
            return Err(io::Error::from(io::ErrorKind::InvalidData));
        }
        // SAFETY: maps the socket's ring (the kernel checks pgoff and size);
        // a fresh shared mapping, no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_fd().as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap"))?;
        let mut r = Ring {
            map,
            map_len,
            producer,
            consumer,
            flags,
            desc,
            size,
            elem,
            cached_prod: 0,
            cached_cons: 0,
        };
        r.cached_prod = r.word(r.producer).load(Ordering::Acquire);
        r.cached_cons = r.word(r.consumer).load(Ordering::Acquire);
        if side == Side::Producer {
            r.cached_cons = r.cached_cons.wrapping_add(size);
        }
        Ok(r)
    }

    fn word(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off` was checked in `map` to be 4-byte aligned and inside
        // the mapping (which is page aligned); the kernel updates the word
        // concurrently, hence the atomic view.
        unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU32) }
    }

    fn entry(&self, idx: u32) -> *mut u8 {
        let i = (idx & (self.size - 1)) as usize;
        // SAFETY: i < size, so the entry lies within desc..map_len.
        unsafe { self.map.as_ptr().add(self.desc + i * self.elem) }
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    /// Whether the kernel asks to be woken up (XDP_RING_NEED_WAKEUP); true
    /// on kernels without the flags word.
    pub fn needs_wakeup(&self) -> bool {
        self.flags
            .is_none_or(|f| self.word(f).load(Ordering::Relaxed) & 1 != 0)
    }

    // ---- consumer side (rx, completion) ----

    /// Entries ready to consume (up to `max`), reading the kernel's producer
    /// only when the cached view is empty.
    pub fn peek(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            self.cached_prod = self.word(self.producer).load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        n.min(max).min(self.size)
    }

    /// Entries ready to consume (up to `max`), reading the kernel's producer
    /// every time: a frame's descriptor chain may go on past the cached
    /// view.
    pub fn peek_fresh(&mut self, max: u32) -> u32 {
        self.cached_prod = self.word(self.producer).load(Ordering::Acquire);
        self.cached_prod
            .wrapping_sub(self.cached_cons)
            .min(max)
            .min(self.size)
    }

    /// The `i`-th entry after the consumer, as a descriptor (rx ring).
    pub fn read_desc(&self, i: u32) -> XdpDesc {
        let p = self.entry(self.cached_cons.wrapping_add(i)) as *const [u8; 16];
        // SAFETY: the entry is in the mapping and 8-byte aligned; the kernel
        // published it (Acquire load of its producer in `peek` or
        // `peek_fresh`, which bound `i`) and does not rewrite it until the
        // consumer moves past it.
        let b = unsafe { p.read_volatile() };
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        XdpDesc {
            addr: u64::from_ne_bytes(a),
            len: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
            options: XdpDescOptions::from_bits_retain(u32::from_ne_bytes([
                b[12], b[13], b[14], b[15],
            ])),
        }
    }

    /// The `i`-th entry after the consumer, as an address (completion ring).
    pub fn read_addr(&self, i: u32) -> u64 {
        let p = self.entry(self.cached_cons.wrapping_add(i)) as *const u64;
        // SAFETY: as in `read_desc`, for an 8-byte entry.
        unsafe { p.read_volatile() }
    }

    /// Hands `n` consumed entries back (one Release store, after every read
    /// of the entries and of the frames they point to).
    pub fn release(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.word(self.consumer)
            .store(self.cached_cons, Ordering::Release);
    }

    // ---- producer side (fill, tx) ----

    /// Free slots (up to `max`), reading the kernel's consumer only when the
    /// cached view has fewer than `max`.
    pub fn free(&mut self, max: u32) -> u32 {
        let mut n = self.cached_cons.wrapping_sub(self.cached_prod);
        if n < max {
            self.cached_cons = self
                .word(self.consumer)
                .load(Ordering::Acquire)
                .wrapping_add(self.size);
            n = self.cached_cons.wrapping_sub(self.cached_prod);
        }
        n.min(max).min(self.size)
    }

    /// Writes the `i`-th free slot as a descriptor (tx ring); `i` must be
    /// below what [`Ring::free`] returned.
    pub fn write_desc(&mut self, i: u32, d: &XdpDesc) {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&d.addr.to_ne_bytes());
        b[8..12].copy_from_slice(&d.len.to_ne_bytes());
        b[12..].copy_from_slice(&d.options.bits().to_ne_bytes());
        let p = self.entry(self.cached_prod.wrapping_add(i)) as *mut [u8; 16];
        // SAFETY: in the mapping, aligned; the slot is free (the kernel's
        // consumer passed it, Acquire in `free`) and not yet published.
        unsafe { p.write_volatile(b) }
    }

    /// Writes the `i`-th free slot as an address (fill ring).
    pub fn write_addr(&mut self, i: u32, addr: u64) {
        let p = self.entry(self.cached_prod.wrapping_add(i)) as *mut u64;
        // SAFETY: as in `write_desc`, for an 8-byte entry.
        unsafe { p.write_volatile(addr) }
    }

    /// Publishes `n` written slots (one Release store after the writes of
    /// the entries and of the frames they point to).
    pub fn submit(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.word(self.producer)
            .store(self.cached_prod, Ordering::Release);
    }

    /// Entries produced that the kernel has not consumed yet (tx ring).
    pub fn outstanding(&self) -> u32 {
        let cons = self.word(self.consumer).load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(cons)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly this ring's mapping; nothing borrows it.
        unsafe {
            libc::munmap(self.map.as_ptr().cast(), self.map_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encoding() {
        let p = redirect_program(7, XDP_DROP);
        // r2 = *(u32 *)(r1 + 16): dst 2, src 1.
        assert_eq!(p[0], insn(0x61, 2, 1, 16, 0));
        assert_eq!(p[0].regs, 0x12);
        // ld_imm64 with the pseudo map fd in src.
        assert_eq!(p[1].regs, 0x11);
        assert_eq!(p[1].imm, 7);
        assert_eq!(p[3].imm, XDP_DROP);
        assert_eq!(p[4].imm, 51);
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
    }
}
