//! The XSK socket of one queue: created, its UMEM registered, its four
//! rings mapped and the receive frames given to the fill ring, bound
//! (multi-buffer when the kernel has it), registered in the netdev's
//! XSKMAP; and the kernel kicked to transmit.

use super::attach::Attachment;
use super::{
    AfXdpOpts, AfXdpPort, KernelStats, XdpPortStats, FRAME_SIZE, KERNEL_TX_BATCH, RX_FRAME_ROOM,
    SINGLE_BUFFER_MAX_MTU,
};
use crate::error::IoError;
use crate::netdev;
use crate::xdp_sys::{self, Ring, Side, Umem};
use rustix::net::sockopt;
use rustix::net::xdp::{
    SocketAddrXdp, SocketAddrXdpFlags, XdpDesc, XdpOptionsFlags, XdpUmemReg, XdpUmemRegFlags,
    XDP_PGOFF_RX_RING, XDP_PGOFF_TX_RING, XDP_UMEM_PGOFF_COMPLETION_RING, XDP_UMEM_PGOFF_FILL_RING,
};
use std::io;
use std::os::fd::AsRawFd;

impl AfXdpPort {
    /// Opens queue `opts.queue` of `ifname` (in the calling thread's network
    /// namespace), attaching the XDP program if this is the netdev's first
    /// port in the process.
    pub fn open(ifname: &str, opts: AfXdpOpts) -> Result<Self, IoError> {
        let ifindex = netdev::ifindex(ifname)?;
        let ctl = netdev::ctl_socket()?;
        let xdp_err = |why: String| IoError::Xdp {
            ifname: ifname.to_string(),
            why,
        };
        let flags = xdp_sys::if_flags(ctl.as_raw_fd(), ifname)
            .map_err(|e| IoError::sys("SIOCGIFFLAGS", ifname, e))?;
        if flags & libc::IFF_LOOPBACK != 0 {
            // Every local connection of the namespace crosses lo: redirecting
            // it to vecgate would cut them all.
            return Err(xdp_err("loopback devices are not supported".into()));
        }
        let mac = netdev::mac(ifname)?;
        let mtu = netdev::mtu(ifname)?;
        let workers = opts.workers.max(1).max(opts.queue + 1);
        let queues = xdp_sys::rx_queues(ctl.as_raw_fd(), ifname);
        if let Some(q) = queues {
            if q < workers {
                return Err(IoError::TooFewQueues {
                    ifname: ifname.to_string(),
                    queues: q,
                    needed: workers,
                });
            }
            if q > workers && opts.queue == 0 {
                tracing::warn!(netdev = ifname, queues = q, workers,
                    "more receive queues than workers: frames arriving on queues without a worker are dropped");
            }
        }
        // Frames over one UMEM frame would be dropped by the kernel
        // (rx_dropped), silently for the operator: a port that cannot take
        // its MTU's frames is refused instead, before anything is attached
        // (and, when known now, before the queue is bound: the kernel
        // frees a closed socket's queue asynchronously).
        let mtu_err = |why| IoError::XdpMtu {
            ifname: ifname.to_string(),
            mtu,
            max: SINGLE_BUFFER_MAX_MTU,
            why,
        };
        if !opts.multi_buffer && mtu > SINGLE_BUFFER_MAX_MTU {
            return Err(mtu_err("multi-buffer is turned off for this port"));
        }
        let frames = opts.frames.clamp(64, 32768).next_power_of_two();
        let half = frames / 2;
        let sys = |op: &'static str| move |e: rustix::io::Errno| IoError::sys(op, ifname, e.into());

        let fd = rustix::net::socket_with(
            rustix::net::AddressFamily::XDP,
            rustix::net::SocketType::RAW,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| match e {
            rustix::io::Errno::AFNOSUPPORT => xdp_err("the kernel has no AF_XDP".into()),
            rustix::io::Errno::PERM | rustix::io::Errno::ACCESS => IoError::PermissionDenied {
                what: format!("AF_XDP socket for '{ifname}'"),
            },
            e => IoError::Sys {
                op: "socket(AF_XDP)",
                source: e.into(),
            },
        })?;
        let umem = Umem::new(frames as usize * FRAME_SIZE)
            .map_err(|e| IoError::sys("mmap UMEM", ifname, e))?;
        sockopt::set_xdp_umem_reg(
            &fd,
            XdpUmemReg {
                addr: umem.addr(),
                len: umem.len() as u64,
                chunk_size: FRAME_SIZE as u32,
                headroom: 0,
                flags: XdpUmemRegFlags::empty(),
                tx_metadata_len: 0,
            },
        )
        .map_err(sys("XDP_UMEM_REG"))?;
        sockopt::set_xdp_umem_fill_ring_size(&fd, half).map_err(sys("XDP_UMEM_FILL_RING"))?;
        sockopt::set_xdp_umem_completion_ring_size(&fd, half)
            .map_err(sys("XDP_UMEM_COMPLETION_RING"))?;
        sockopt::set_xdp_rx_ring_size(&fd, half).map_err(sys("XDP_RX_RING"))?;
        sockopt::set_xdp_tx_ring_size(&fd, half).map_err(sys("XDP_TX_RING"))?;
        let off = sockopt::xdp_mmap_offsets(&fd).map_err(sys("XDP_MMAP_OFFSETS"))?;
        let desc = std::mem::size_of::<XdpDesc>();
        let map = |pg, o, elem, side| {
            Ring::map(&fd, pg, o, half, elem, side)
                .map_err(|e| IoError::sys("mmap XSK ring", ifname, e))
        };
        let rx = map(XDP_PGOFF_RX_RING, &off.rx, desc, Side::Consumer)?;
        let tx = map(XDP_PGOFF_TX_RING, &off.tx, desc, Side::Producer)?;
        let mut fill = map(XDP_UMEM_PGOFF_FILL_RING, &off.fr, 8, Side::Producer)?;
        let comp = map(XDP_UMEM_PGOFF_COMPLETION_RING, &off.cr, 8, Side::Consumer)?;

        // Every receive frame starts in the fill ring.
        let n = fill.free(half);
        for i in 0..n {
            fill.write_addr(i, u64::from(i) * FRAME_SIZE as u64);
        }
        fill.submit(n);
        let tx_base = u64::from(half) * FRAME_SIZE as u64;
        let tx_free: Vec<u64> = (0..u64::from(half))
            .rev()
            .map(|i| tx_base + i * FRAME_SIZE as u64)
            .collect();

        let mut bind_flags = SocketAddrXdpFlags::XDP_USE_NEED_WAKEUP;
        if opts.force_copy {
            bind_flags |= SocketAddrXdpFlags::XDP_COPY;
        }
        let bind =
            |flags| rustix::net::bind(&fd, &SocketAddrXdp::new(flags, ifindex as u32, opts.queue));
        let mut multi_buf = opts.multi_buffer;
        let mut bound = if multi_buf {
            bind(bind_flags | SocketAddrXdpFlags::XDP_USE_SG)
        } else {
            bind(bind_flags)
        };
        if multi_buf && bound == Err(rustix::io::Errno::INVAL) {
            // Kernels before 6.6 refuse the flag (before anything else in
            // bind, so the socket can be bound again). A zero-copy driver
            // without multi-buffer does not get here: without XDP_ZEROCOPY
            // the kernel falls back to copy mode, which has it.
            let retry = bind(bind_flags);
            if retry.is_ok() {
                multi_buf = false;
                tracing::warn!(
                    netdev = ifname,
                    queue = opts.queue,
                    max_mtu = SINGLE_BUFFER_MAX_MTU,
                    "the kernel refuses multi-buffer AF_XDP (XDP_USE_SG, Linux 6.6): \
                     frames up to one UMEM frame ({RX_FRAME_ROOM} bytes)"
                );
            }
            bound = retry;
        }
        bound.map_err(|e| match e {
            rustix::io::Errno::BUSY => xdp_err(format!(
                "queue {} is already used by another AF_XDP socket",
                opts.queue
            )),
            rustix::io::Errno::INVAL if queues.is_none() => IoError::TooFewQueues {
                ifname: ifname.to_string(),
                queues: opts.queue,
                needed: workers,
            },
            e => IoError::sys("bind(AF_XDP)", ifname, e.into()),
        })?;
        let zero_copy = sockopt::xdp_options(&fd)
            .map(|o| o.contains(XdpOptionsFlags::XDP_OPTIONS_ZEROCOPY))
            .unwrap_or(false);
        if !multi_buf && mtu > SINGLE_BUFFER_MAX_MTU {
            return Err(mtu_err(
                "this kernel has no multi-buffer AF_XDP (XDP_USE_SG needs Linux 6.6)",
            ));
        }

        let max_entries = queues.unwrap_or(256).max(workers);
        let attach = Attachment::get_or_create(ifname, ifindex, max_entries, opts.mode, multi_buf)?;
        xdp_sys::xskmap_set(&attach.map, opts.queue, &fd).map_err(|e| {
            xdp_err(format!(
                "registering queue {} in the XSKMAP: {e}",
                opts.queue
            ))
        })?;
        tracing::debug!(
            netdev = ifname,
            queue = opts.queue,
            zero_copy,
            native = attach.native,
            multi_buffer = multi_buf,
            frags = attach.frags,
            "AF_XDP socket bound"
        );
        Ok(AfXdpPort {
            name: ifname.to_string(),
            ifindex,
            queue: opts.queue,
            rx,
            tx,
            fill,
            comp,
            fd,
            ctl,
            umem,
            tx_free,
            tx_base,
            mac,
            mtu,
            zero_copy,
            multi_buf,
            scratch: Vec::new(),
            tx_pending: false,
            dead: false,
            stats: XdpPortStats::default(),
            reported: XdpPortStats::default(),
            kernel: KernelStats::default(),
            attach,
        })
    }

    /// Wakes the kernel's transmit when the ring asks for it. Copy mode
    /// sends 32 frames per call and says EAGAIN while more remain.
    pub(super) fn kick(&mut self) -> io::Result<()> {
        if !self.tx.needs_wakeup() {
            self.tx_pending = false;
            return Ok(());
        }
        let tries = self.tx.outstanding() / KERNEL_TX_BATCH + 2;
        for _ in 0..tries {
            match rustix::net::send(&self.fd, &[], rustix::net::SendFlags::DONTWAIT) {
                Ok(_) => {
                    self.tx_pending = false;
                    return Ok(());
                }
                Err(rustix::io::Errno::AGAIN)
                | Err(rustix::io::Errno::BUSY)
                | Err(rustix::io::Errno::NOBUFS)
                | Err(rustix::io::Errno::INTR) => self.reap(),
                Err(e @ (rustix::io::Errno::NETDOWN | rustix::io::Errno::NXIO)) => {
                    if e == rustix::io::Errno::NXIO {
                        self.dead = true;
                    }
                    return Err(e.into());
                }
                Err(_) => {
                    self.stats.tx_kick_errors += 1;
                    return Ok(());
                }
            }
        }
        self.tx_pending = self.tx.outstanding() > 0;
        Ok(())
    }
}
