//! Thin wrappers over the few system calls std does not offer: socket
//! buffer sizes, `TCP_INFO`, CPU affinity, `getrusage(2)`, `sysconf(3)`.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Which socket buffer to size.
#[derive(Debug, Clone, Copy)]
pub enum Buf {
    Send,
    Recv,
}

/// CLOCK_MONOTONIC in nanoseconds: the clock `Instant` reads on Linux,
/// as a number another process on the host can compare with its own
/// readings (a test samples interface counters against the report's window
/// edges this way).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec; CLOCK_MONOTONIC always exists.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

/// `setsockopt(SO_SNDBUF / SO_RCVBUF)`. The kernel doubles the value and
/// caps it at net.core.{w,r}mem_max (socket(7)).
pub fn set_buf<S: AsRawFd>(sock: &S, which: Buf, bytes: u64) -> io::Result<()> {
    let opt = match which {
        Buf::Send => libc::SO_SNDBUF,
        Buf::Recv => libc::SO_RCVBUF,
    };
    let v: libc::c_int = libc::c_int::try_from(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "buffer size too large"))?;
    // SAFETY: `v` is a live c_int and the length passed is its size; the fd
    // belongs to `sock`, which the caller keeps alive for the call.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The socket's retransmitted-segment total (`tcpi_total_retrans`), per
/// socket so other traffic on this shared machine does not count.
pub fn tcp_total_retrans<S: AsRawFd>(sock: &S) -> Option<u64> {
    // SAFETY: tcp_info is a plain C struct of integers; all-zero is valid.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` and `len` are live and `len` holds the buffer size; the
    // kernel writes at most `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut libc::tcp_info as *mut libc::c_void,
            &mut len,
        )
    };
    // Older kernels return a shorter struct; total_retrans must be inside it.
    let needed = std::mem::offset_of!(libc::tcp_info, tcpi_total_retrans) + 4;
    (rc == 0 && len as usize >= needed).then_some(u64::from(info.tcpi_total_retrans))
}

/// `poll(2)` for writability on `fds` (negative fds are skipped, as
/// poll(2) specifies); returns how many are ready, 0 on timeout.
pub fn poll_writable(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    for p in fds.iter_mut() {
        p.events = libc::POLLOUT;
        p.revents = 0;
    }
    // SAFETY: `fds` is a live, exclusively borrowed slice of pollfd and its
    // exact length is passed; the kernel writes only `revents`.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    usize::try_from(rc).map_err(|_| io::Error::last_os_error())
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "CPU number too large",
        ));
    }
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE was checked, so CPU_SET stays in bounds;
    // sched_setaffinity reads `size_of(set)` bytes from a live set (pid 0 =
    // the calling thread).
    let rc = unsafe {
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// User + system CPU time of the whole process (all threads) so far.
pub fn process_cpu_time() -> Duration {
    // SAFETY: rusage is a plain C struct; all-zero is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is live and writable; RUSAGE_SELF is a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time of the calling thread so far: what a single-threaded
/// measurement cost, however long other processes kept it off the CPU.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec; CLOCK_THREAD_CPUTIME_ID
    // exists on every Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::from_secs(u64::try_from(ts.tv_sec).unwrap_or(0))
        + Duration::from_nanos(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

/// USER_HZ, the unit of `/proc/stat` (100 on every Linux architecture today).
pub fn user_hz() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(v).ok().filter(|&v| v > 0).unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_reports_writable() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut fds = [
            libc::pollfd {
                fd: c.as_raw_fd(),
                events: 0,
                revents: 0,
            },
            libc::pollfd {
                fd: -1,
                events: 0,
                revents: 0,
            },
        ];
        assert_eq!(poll_writable(&mut fds, 100).unwrap(), 1);
        assert_ne!(fds[0].revents & libc::POLLOUT, 0);
        assert_eq!(fds[1].revents, 0);
    }

    #[test]
    fn process_time_advances() {
        // Spin until the process clock moves (it counts in ticks, and a busy
        // machine may give this thread little CPU per wall second), capped.
        let a = process_cpu_time();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while process_cpu_time() == a && t.elapsed() < Duration::from_secs(30) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        assert!(process_cpu_time() > a);
        assert_eq!(user_hz(), 100);
    }

    #[test]
    fn tcp_info_on_loopback() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert_eq!(tcp_total_retrans(&c), Some(0));
        set_buf(&c, Buf::Send, 1 << 20).unwrap();
        set_buf(&c, Buf::Recv, 1 << 20).unwrap();
        assert!(set_buf(&c, Buf::Send, u64::MAX).is_err());
        // Not TCP: no TCP_INFO.
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(tcp_total_retrans(&u), None);
    }
}

/// Batched UDP I/O with `sendmmsg(2)` / `recvmmsg(2)`: one system call moves
/// up to `batch` datagrams, which is what lets a single thread keep up with
/// a gateway at MTU-sized packets. All memory is allocated once, up front.
pub struct Mmsg {
    bufs: Vec<u8>,
    slot: usize,
    iov: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    hdrs: Vec<libc::mmsghdr>,
}

/// The C structs [`Mmsg`] holds: all-zero (null pointers, zero lengths)
/// is a valid value of each.
trait ZeroIsValid {}
impl ZeroIsValid for libc::iovec {}
impl ZeroIsValid for libc::sockaddr_storage {}
impl ZeroIsValid for libc::mmsghdr {}

/// `n` all-zero values; the pointers are filled in before any use.
fn zeroed_c_structs<T: ZeroIsValid>(n: usize) -> Vec<T> {
    (0..n)
        // SAFETY: `T: ZeroIsValid` is only implemented for plain C structs
        // for which all-zero bytes are a valid value.
        .map(|_| unsafe { std::mem::zeroed() })
        .collect()
}

impl Mmsg {
    /// For receiving: `batch` buffers of `slot` bytes, each with an address.
    pub fn for_recv(batch: usize, slot: usize) -> Mmsg {
        let batch = batch.max(1);
        let slot = slot.max(1);
        let mut m = Mmsg {
            bufs: vec![0u8; batch * slot],
            slot,
            iov: zeroed_c_structs(batch),
            addrs: zeroed_c_structs(batch),
            hdrs: zeroed_c_structs(batch),
        };
        for i in 0..batch {
            m.iov[i].iov_base = m.bufs[i * slot..].as_mut_ptr().cast();
            m.iov[i].iov_len = slot;
        }
        m.link(true);
        m
    }

    /// For sending: `batch` headers that all point at one `payload` copy
    /// (the socket is connected, so no per-message address).
    pub fn for_send(batch: usize, payload: &[u8]) -> Mmsg {
        let batch = batch.max(1);
        let mut m = Mmsg {
            bufs: payload.to_vec(),
            slot: payload.len(),
            iov: zeroed_c_structs(batch),
            addrs: Vec::new(),
            hdrs: zeroed_c_structs(batch),
        };
        let base = m.bufs.as_mut_ptr();
        for v in &mut m.iov {
            v.iov_base = base.cast();
            v.iov_len = payload.len();
        }
        m.link(false);
        m
    }

    /// Points every header at its iovec (and address slot when receiving).
    /// The Vecs are never resized afterwards, so the pointers stay valid.
    fn link(&mut self, with_addr: bool) {
        for i in 0..self.hdrs.len() {
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_iov = &mut self.iov[i];
            h.msg_iovlen = 1;
            if with_addr {
                h.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
                h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            }
        }
    }

    pub fn batch(&self) -> usize {
        self.hdrs.len()
    }

    /// Sends up to `n` (≤ batch) datagrams; returns how many left.
    pub fn send<S: AsRawFd>(&mut self, sock: &S, n: usize) -> io::Result<usize> {
        let n = n.min(self.hdrs.len());
        // SAFETY: `hdrs[..n]` are initialised mmsghdrs whose iovecs point
        // into `self.bufs`, alive and unmoved for the call; the kernel reads
        // them and writes only `msg_len` of each header.
        let rc = unsafe {
            libc::sendmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                0,
            )
        };
        usize::try_from(rc).map_err(|_| io::Error::last_os_error())
    }

    /// Receives up to a batch, waiting (up to SO_RCVTIMEO) only for the
    /// first. For each datagram `f(len, sender ip)` is called.
    pub fn recv<S: AsRawFd>(
        &mut self,
        sock: &S,
        mut f: impl FnMut(usize, Option<std::net::IpAddr>),
    ) -> io::Result<usize> {
        for h in &mut self.hdrs {
            h.msg_hdr.msg_namelen =
                std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_len = 0;
        }
        // SAFETY: every header points at its own `slot`-byte region of
        // `self.bufs` and its own sockaddr_storage, all alive and unmoved for
        // the call; the kernel writes at most those sizes. A null timeout
        // means "use the socket's SO_RCVTIMEO".
        let rc = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        let n = usize::try_from(rc).map_err(|_| io::Error::last_os_error())?;
        for i in 0..n.min(self.hdrs.len()) {
            let len = (self.hdrs[i].msg_len as usize).min(self.slot);
            f(len, sockaddr_ip(&self.addrs[i]));
        }
        Ok(n)
    }
}

/// The IP address in a sockaddr the kernel filled in.
fn sockaddr_ip(sa: &libc::sockaddr_storage) -> Option<std::net::IpAddr> {
    match libc::c_int::from(sa.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in, and
            // sockaddr_storage is large and aligned enough for it.
            let sin =
                unsafe { &*(sa as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into())
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 =
                unsafe { &*(sa as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod mmsg_tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn batch_round_trip() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut s = Mmsg::for_send(8, &[7u8; 100]);
        assert_eq!(s.send(&tx, 5).unwrap(), 5);
        let mut r = Mmsg::for_recv(4, 2048);
        let mut got = Vec::new();
        let mut total = 0;
        while total < 5 {
            total += r.recv(&rx, |len, ip| got.push((len, ip))).unwrap();
        }
        assert_eq!(total, 5);
        assert!(got
            .iter()
            .all(|&(l, ip)| l == 100 && ip == Some("127.0.0.1".parse().unwrap())));
        // Nothing more: the receive times out instead of blocking forever.
        let e = r.recv(&rx, |_, _| {}).unwrap_err();
        assert!(matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ));
    }
}
