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
    fn process_time_advances() {
        let a = process_cpu_time();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_add(1));
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
