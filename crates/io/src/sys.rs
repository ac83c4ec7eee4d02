//! Thin, safe wrappers around the syscalls the backends need.
//!
//! Every `unsafe` block of the crate lives here, each one small and
//! commented. The constants and `#[repr(C)]` layouts below are the kernel's
//! stable UAPI (`linux/if_packet.h`, `linux/if_tun.h`, `linux/virtio_net.h`,
//! `linux/sockios.h`); they are spelled out here rather than taken from
//! `libc` because not every libc release exports all of them.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

// linux/if_packet.h
pub const SOL_PACKET: i32 = 263;
pub const PACKET_ADD_MEMBERSHIP: i32 = 1;
pub const PACKET_RX_RING: i32 = 5;
pub const PACKET_STATISTICS: i32 = 6;
pub const PACKET_COPY_THRESH: i32 = 7;
pub const PACKET_VERSION: i32 = 10;
pub const PACKET_VNET_HDR: i32 = 15;
pub const PACKET_FANOUT: i32 = 18;
pub const PACKET_QDISC_BYPASS: i32 = 20;
pub const PACKET_IGNORE_OUTGOING: i32 = 23;
pub const PACKET_MR_PROMISC: u16 = 1;
pub const PACKET_FANOUT_HASH: u32 = 0;
pub const PACKET_FANOUT_FLAG_DEFRAG: u32 = 0x8000;
pub const TPACKET_V2: i32 = 1;
pub const TP_STATUS_KERNEL: u32 = 0;
pub const TP_STATUS_USER: u32 = 1;
pub const TP_STATUS_COPY: u32 = 1 << 1;
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
pub const ETH_P_ALL: u16 = 0x0003;

// linux/if_tun.h
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;
pub const IFF_TAP: i16 = 0x0002;
pub const IFF_NO_PI: i16 = 0x1000;
pub const IFF_VNET_HDR: i16 = 0x4000;
pub const TUN_F_CSUM: u32 = 0x01;
pub const TUN_F_TSO4: u32 = 0x02;
pub const TUN_F_TSO6: u32 = 0x04;
pub const TUN_F_USO4: u32 = 0x20;
pub const TUN_F_USO6: u32 = 0x40;

// linux/ethtool.h (legacy single-value commands, enough to report offloads)
pub const ETHTOOL_GRXCSUM: u32 = 0x14;
pub const ETHTOOL_GTXCSUM: u32 = 0x16;
pub const ETHTOOL_GTSO: u32 = 0x1e;
pub const ETHTOOL_GGSO: u32 = 0x23;
pub const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;

/// `struct tpacket_req3`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TpacketReq3 {
    pub block_size: u32,
    pub block_nr: u32,
    pub frame_size: u32,
    pub frame_nr: u32,
    pub retire_blk_tov: u32,
    pub sizeof_priv: u32,
    pub feature_req_word: u32,
}

/// `struct tpacket_stats` (TPACKET_V1/V2).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TpacketStats {
    pub packets: u32,
    pub drops: u32,
}

/// `struct packet_mreq`.
#[repr(C)]
struct PacketMreq {
    ifindex: i32,
    type_: u16,
    alen: u16,
    address: [u8; 8],
}

/// `struct ifreq` as seen by the ioctls used here: a name and a 24-byte union.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Ifreq {
    pub name: [u8; libc::IFNAMSIZ],
    pub data: [u8; 24],
}

impl Ifreq {
    /// An ifreq for `name`; `None` if the name does not fit IFNAMSIZ - 1.
    pub fn new(name: &str) -> Option<Self> {
        let b = name.as_bytes();
        if b.is_empty() || b.len() >= libc::IFNAMSIZ || b.contains(&0) {
            return None;
        }
        let mut r = Ifreq {
            name: [0; libc::IFNAMSIZ],
            data: [0; 24],
        };
        r.name[..b.len()].copy_from_slice(b);
        Some(r)
    }

    /// The (NUL-terminated) name the kernel wrote back.
    pub fn name(&self) -> String {
        let end = self
            .name
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(self.name.len());
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }

    pub fn i32_at0(&self) -> i32 {
        i32::from_ne_bytes([self.data[0], self.data[1], self.data[2], self.data[3]])
    }

    pub fn i16_at0(&self) -> i16 {
        i16::from_ne_bytes([self.data[0], self.data[1]])
    }

    pub fn set_i16_at0(&mut self, v: i16) {
        self.data[..2].copy_from_slice(&v.to_ne_bytes());
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `socket(2)`, returning an owned descriptor.
pub fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments.
    let fd = cvt(unsafe { libc::socket(domain, ty, proto) })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `open(2)` with O_CLOEXEC added.
pub fn open(path: &CStr, flags: i32) -> io::Result<OwnedFd> {
    // SAFETY: `path` is a valid NUL-terminated string for the call's duration.
    let fd = cvt(unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) })?;
    // SAFETY: `fd` was just returned by open(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(2)` with a plain-old-data value.
pub fn setsockopt<T: Copy>(fd: &OwnedFd, level: i32, name: i32, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to `size_of::<T>()` readable bytes; the kernel
    // only reads them.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// `getsockopt(2)` into a plain-old-data value.
pub fn getsockopt<T: Copy + Default>(fd: RawFd, level: i32, name: i32) -> io::Result<T> {
    let mut val = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is a writable `T` of `len` bytes; the kernel writes at
    // most `len` bytes into it.
    cvt(unsafe { libc::getsockopt(fd, level, name, (&mut val as *mut T).cast(), &mut len) })?;
    Ok(val)
}

/// Joins `ifindex` to promiscuous mode for this socket's lifetime.
pub fn add_promisc_membership(fd: &OwnedFd, ifindex: i32) -> io::Result<()> {
    let mreq = PacketMreq {
        ifindex,
        type_: PACKET_MR_PROMISC,
        alen: 0,
        address: [0; 8],
    };
    // SAFETY: as in `setsockopt`; PacketMreq is repr(C) and fully initialised.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            SOL_PACKET,
            PACKET_ADD_MEMBERSHIP,
            (&mreq as *const PacketMreq).cast(),
            std::mem::size_of::<PacketMreq>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Binds an AF_PACKET socket to `ifindex` for `protocol` (host order).
pub fn bind_packet(fd: &OwnedFd, ifindex: i32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a valid sockaddr_ll and the length matches it.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// An ioctl taking a `struct ifreq`.
pub fn ioctl_ifreq(fd: RawFd, req: libc::c_ulong, ifr: &mut Ifreq) -> io::Result<()> {
    // SAFETY: `ifr` is a writable, 40-byte ifreq as the SIOC*/TUNSETIFF
    // requests used here expect; the kernel reads/writes only within it.
    cvt(unsafe { libc::ioctl(fd, req as _, ifr as *mut Ifreq) }).map(|_| ())
}

/// An ioctl taking an `int` by value.
fn ioctl_int(fd: RawFd, req: libc::c_ulong, val: libc::c_ulong) -> io::Result<()> {
    // SAFETY: the request takes an integer argument, no memory is accessed.
    cvt(unsafe { libc::ioctl(fd, req as _, val) }).map(|_| ())
}

/// An ioctl taking a pointer to an `int`.
fn ioctl_int_ptr(fd: RawFd, req: libc::c_ulong, val: &mut libc::c_int) -> io::Result<()> {
    // SAFETY: `val` is a valid writable int for the call's duration.
    cvt(unsafe { libc::ioctl(fd, req as _, val as *mut libc::c_int) }).map(|_| ())
}

/// One ETHTOOL_G* single-value query (`struct ethtool_value`).
pub fn ethtool_get_value(fd: RawFd, ifname: &str, cmd: u32) -> io::Result<u32> {
    let mut ev = [cmd, 0u32];
    let mut ifr = Ifreq::new(ifname).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let ptr = ev.as_mut_ptr() as usize;
    ifr.data[..8].copy_from_slice(&ptr.to_ne_bytes());
    // SAFETY: ifr_data points to `ev`, an ethtool_value (cmd, data) that lives
    // until the call returns; the kernel writes only its 8 bytes.
    cvt(unsafe { libc::ioctl(fd, libc::SIOCETHTOOL as _, &mut ifr as *mut Ifreq) })?;
    Ok(ev[1])
}

/// One SIOCETHTOOL call with `buf` as the ethtool command structure.
fn ethtool_ioctl(fd: RawFd, ifname: &str, buf: *mut u8) -> io::Result<()> {
    let mut ifr = Ifreq::new(ifname).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    ifr.data[..8].copy_from_slice(&(buf as usize).to_ne_bytes());
    // SAFETY: ifr_data points to the caller's buffer, sized for the command
    // it holds (the callers below size it from the kernel's own count), and
    // alive until the call returns.
    cvt(unsafe { libc::ioctl(fd, libc::SIOCETHTOOL as _, &mut ifr as *mut Ifreq) }).map(|_| ())
}

/// Whether the netdev feature named `feature` (an `ethtool -k` name, e.g.
/// "tx-udp-segmentation") is active on `ifname`; `None` if the kernel does
/// not know the name. Feature bit numbers are the kernel's own, so they are
/// looked up by name (ETHTOOL_GSSET_INFO / GSTRINGS, then GFEATURES).
pub fn ethtool_feature_active(fd: RawFd, ifname: &str, feature: &str) -> io::Result<Option<bool>> {
    #[repr(C)]
    struct SsetInfo {
        cmd: u32,
        reserved: u32,
        sset_mask: u64,
        data: [u32; 1],
    }
    let mut info = SsetInfo {
        cmd: ETHTOOL_GSSET_INFO,
        reserved: 0,
        sset_mask: 1 << ETH_SS_FEATURES,
        data: [0],
    };
    ethtool_ioctl(fd, ifname, (&mut info as *mut SsetInfo).cast())?;
    let count = info.data[0] as usize;
    if count == 0 || count > 4096 {
        return Ok(None);
    }
    // struct ethtool_gstrings: cmd, string_set, len, data[len * 32].
    let mut strings = vec![0u32; 3 + count * ETH_GSTRING_LEN / 4];
    strings[0] = ETHTOOL_GSTRINGS;
    strings[1] = ETH_SS_FEATURES;
    strings[2] = count as u32;
    ethtool_ioctl(fd, ifname, strings.as_mut_ptr().cast())?;
    let names: Vec<u8> = strings[3..].iter().flat_map(|w| w.to_ne_bytes()).collect();
    let Some(bit) = names.chunks(ETH_GSTRING_LEN).position(|n| {
        let end = n.iter().position(|&b| b == 0).unwrap_or(n.len());
        &n[..end] == feature.as_bytes()
    }) else {
        return Ok(None);
    };
    // struct ethtool_gfeatures: cmd, size, then per 32 features
    // {available, requested, active, never_changed}.
    let blocks = count.div_ceil(32);
    let mut feats = vec![0u32; 2 + 4 * blocks];
    feats[0] = ETHTOOL_GFEATURES;
    feats[1] = blocks as u32;
    ethtool_ioctl(fd, ifname, feats.as_mut_ptr().cast())?;
    let active = feats[2 + 4 * (bit / 32) + 2];
    Ok(Some(active & (1 << (bit % 32)) != 0))
}

/// TUNSETIFF; returns the name the kernel chose/confirmed.
pub fn tun_set_iff(fd: &OwnedFd, name: &str, flags: i16) -> io::Result<String> {
    let mut ifr = Ifreq::new(name).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    ifr.set_i16_at0(flags);
    ioctl_ifreq(fd.as_raw_fd(), TUNSETIFF, &mut ifr)?;
    Ok(ifr.name())
}

pub fn tun_set_offload(fd: &OwnedFd, flags: u32) -> io::Result<()> {
    ioctl_int(fd.as_raw_fd(), TUNSETOFFLOAD, flags as libc::c_ulong)
}

pub fn tun_set_vnet_hdr_sz(fd: &OwnedFd, size: i32) -> io::Result<()> {
    let mut v = size;
    ioctl_int_ptr(fd.as_raw_fd(), TUNSETVNETHDRSZ, &mut v)
}

/// Puts a descriptor in non-blocking mode.
pub fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl with F_GETFL/F_SETFL on an owned, open descriptor.
    let fl = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) }).map(|_| ())
}

/// The iovecs of two writable buffers (virtio-net header, frame); they
/// borrow nothing: the caller keeps `a` and `b` borrowed while the kernel
/// may write through them.
fn iov2(a: &mut [u8], b: &mut [u8]) -> [libc::iovec; 2] {
    [
        libc::iovec {
            iov_base: a.as_mut_ptr().cast(),
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        },
    ]
}

/// `readv(2)` of two buffers (virtio-net header, frame).
pub fn readv2(fd: RawFd, a: &mut [u8], b: &mut [u8]) -> io::Result<usize> {
    let iov = iov2(a, b);
    // SAFETY: both iovecs describe live, writable, exclusively borrowed slices.
    cvt_size(unsafe { libc::readv(fd, iov.as_ptr(), 2) })
}

/// `recvmsg(2)` of one datagram into two buffers (virtio-net header,
/// frame), without blocking and with MSG_TRUNC: returns the datagram's
/// whole length (header included), which exceeds `a.len() + b.len()` when
/// it did not fit (the rest is lost).
pub fn recv_trunc2(fd: RawFd, a: &mut [u8], b: &mut [u8]) -> io::Result<usize> {
    let mut iov = iov2(a, b);
    // SAFETY: msghdr is plain data; all-zero (no name, no control) is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = 2;
    // SAFETY: `msg` points to `iov`, whose two entries describe live,
    // writable, exclusively borrowed slices for the duration of the call.
    cvt_size(unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT | libc::MSG_TRUNC) })
}

/// `writev(2)` of two buffers (virtio-net header, frame).
pub fn writev2(fd: RawFd, a: &[u8], b: &[u8]) -> io::Result<usize> {
    let iov = [
        libc::iovec {
            iov_base: a.as_ptr() as *mut libc::c_void,
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        },
    ];
    // SAFETY: both iovecs describe live slices; writev only reads them.
    cvt_size(unsafe { libc::writev(fd, iov.as_ptr(), 2) })
}

/// Most messages one `sendmmsg` call carries.
pub const MMSG_BATCH: usize = 64;

/// Sends `frames` (each prefixed by the matching 10-byte header in `hdrs`)
/// with one `sendmmsg(2)` on a bound packet socket, without blocking.
/// Returns how many were accepted from the front.
/// `hdr_len` is 10 with PACKET_VNET_HDR, 0 without.
pub fn sendmmsg_hdr_frames(
    fd: RawFd,
    hdrs: &[[u8; 10]],
    hdr_len: usize,
    frames: &[&[u8]],
) -> io::Result<usize> {
    let hdr_len = hdr_len.min(10);
    let n = hdrs.len().min(frames.len()).min(MMSG_BATCH);
    let empty = libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    };
    let mut iovs = [[empty, empty]; MMSG_BATCH];
    // SAFETY: mmsghdr is plain data; all-zero (null name/control) is valid.
    let mut msgs: [libc::mmsghdr; MMSG_BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..n {
        iovs[i][0] = libc::iovec {
            iov_base: hdrs[i].as_ptr() as *mut libc::c_void,
            iov_len: hdr_len,
        };
        iovs[i][1] = libc::iovec {
            iov_base: frames[i].as_ptr() as *mut libc::c_void,
            iov_len: frames[i].len(),
        };
    }
    for i in 0..n {
        msgs[i].msg_hdr.msg_iov = iovs[i].as_mut_ptr();
        msgs[i].msg_hdr.msg_iovlen = 2;
    }
    // SAFETY: `msgs[..n]` point to `iovs`, which point to borrowed slices
    // alive for the call; the kernel only reads them (and writes msg_len).
    let r = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), n as u32, libc::MSG_DONTWAIT) };
    cvt(r).map(|r| r as usize)
}

/// Sends each of `frames` as one packet (one iovec each: a virtio-net
/// header, if any, already in front of the frame) with one `sendmmsg(2)`,
/// without blocking. Returns how many were accepted from the front.
pub fn sendmmsg_frames(fd: RawFd, frames: &[&[u8]]) -> io::Result<usize> {
    let n = frames.len().min(MMSG_BATCH);
    let empty = libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    };
    let mut iovs = [empty; MMSG_BATCH];
    // SAFETY: mmsghdr is plain data; all-zero (null name/control) is valid.
    let mut msgs: [libc::mmsghdr; MMSG_BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..n {
        iovs[i] = libc::iovec {
            iov_base: frames[i].as_ptr() as *mut libc::c_void,
            iov_len: frames[i].len(),
        };
    }
    for i in 0..n {
        msgs[i].msg_hdr.msg_iov = &mut iovs[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: `msgs[..n]` point to `iovs`, which point to borrowed slices
    // alive for the call; the kernel only reads them (and writes msg_len).
    let r = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), n as u32, libc::MSG_DONTWAIT) };
    cvt(r).map(|r| r as usize)
}

/// Sends one packet per entry of `msgs`, each the concatenation of its
/// three slices (virtio-net header, a header to prepend, the frame where it
/// lies), with one `sendmmsg(2)`, without blocking: the I/O floor's
/// transmit ([`crate::floor`]). Returns how many were accepted from the
/// front.
pub fn sendmmsg_iov3(fd: RawFd, msgs: &[[&[u8]; 3]]) -> io::Result<usize> {
    let n = msgs.len().min(MMSG_BATCH);
    let empty = libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    };
    let mut iovs = [[empty; 3]; MMSG_BATCH];
    // SAFETY: mmsghdr is plain data; all-zero (null name/control) is valid.
    let mut hdrs: [libc::mmsghdr; MMSG_BATCH] = unsafe { std::mem::zeroed() };
    for (iov, m) in iovs.iter_mut().zip(&msgs[..n]) {
        for (v, s) in iov.iter_mut().zip(m) {
            *v = libc::iovec {
                iov_base: s.as_ptr() as *mut libc::c_void,
                iov_len: s.len(),
            };
        }
    }
    for (h, iov) in hdrs.iter_mut().zip(iovs.iter_mut()).take(n) {
        h.msg_hdr.msg_iov = iov.as_mut_ptr();
        h.msg_hdr.msg_iovlen = 3;
    }
    // SAFETY: `hdrs[..n]` point to `iovs`, which point to slices borrowed
    // for the call; the kernel only reads them (and writes msg_len).
    let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), n as u32, libc::MSG_DONTWAIT) };
    cvt(r).map(|r| r as usize)
}

/// Switches the calling thread into the network namespace `ns_fd` refers to.
pub fn setns_net(ns_fd: RawFd) -> io::Result<()> {
    // SAFETY: plain syscall; only affects the calling thread.
    cvt(unsafe { libc::setns(ns_fd, libc::CLONE_NEWNET) }).map(|_| ())
}

/// A shared memory mapping of a packet socket's ring, unmapped on drop.
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving it to
// another thread moves the only handle the process keeps to it.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` (a packet socket with a ring) read-write.
    pub fn ring(fd: &OwnedFd, len: usize) -> io::Result<Self> {
        // SAFETY: a fresh shared mapping chosen by the kernel; no existing
        // memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from(io::ErrorKind::Other))?;
        Ok(Mmap { ptr, len })
    }

    /// Reads a native-endian u32 at `off` (plain load, for fields the kernel
    /// no longer writes once the block is handed to user space).
    #[inline]
    pub fn u32_at(&self, off: usize) -> Option<u32> {
        let b = self.bytes(off, 4)?;
        Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline]
    pub fn u16_at(&self, off: usize) -> Option<u16> {
        let b = self.bytes(off, 2)?;
        Some(u16::from_ne_bytes([b[0], b[1]]))
    }

    /// The status word at `off` (4-byte aligned, in bounds), shared with the
    /// kernel: accessed atomically.
    #[inline]
    fn status(&self, off: usize) -> Option<&AtomicU32> {
        if off & 3 != 0 || off.checked_add(4)? > self.len {
            return None;
        }
        // SAFETY: in bounds and 4-byte aligned (the mapping is page aligned);
        // the kernel accesses the word concurrently, hence the atomic view.
        Some(unsafe { &*(self.ptr.as_ptr().add(off) as *const AtomicU32) })
    }

    /// Acquire-load of a status word (pairs with the kernel's smp_wmb before
    /// it flips a block to TP_STATUS_USER).
    #[inline]
    pub fn load_status(&self, off: usize) -> u32 {
        self.status(off)
            .map_or(TP_STATUS_KERNEL, |a| a.load(Ordering::Acquire))
    }

    /// Release-store of a status word, handing a block back to the kernel
    /// after every read of it finished.
    #[inline]
    pub fn store_status(&self, off: usize, v: u32) {
        if let Some(a) = self.status(off) {
            a.store(v, Ordering::Release);
        }
    }

    /// `len` bytes at `off`, bounds checked.
    #[inline]
    pub fn bytes(&self, off: usize, len: usize) -> Option<&[u8]> {
        if off.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: the range is inside the mapping. The kernel does not write
        // to a block while user space owns it (TP_STATUS_USER), which is the
        // only time the backends read frame bytes.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping this value owns; no reference
        // into it outlives `self` (all slices borrow `self`).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}
