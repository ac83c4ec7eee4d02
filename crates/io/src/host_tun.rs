//! The host side of a VRF's control plane: an L3 TUN device (IFF_TUN,
//! IFF_NO_PI: whole IP packets, no link layer, no ARP) through which the
//! host's stack (bgpd, bfdd) exchanges the packets the dataplane punts to
//! it and sends its own (`dataplane::punt::host`). No virtio-net header:
//! the kernel completes checksums and segments what it sends here.

use crate::error::IoError;
use crate::sys;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

const IFF_TUN: i16 = 0x0001;

/// One TUN device.
#[derive(Debug)]
pub struct HostTun {
    name: String,
    fd: OwnedFd,
}

impl HostTun {
    /// Creates the TUN `name` (or attaches to the persistent one), in the
    /// calling thread's network namespace, non-blocking.
    pub fn create(name: &str) -> Result<Self, IoError> {
        if sys::Ifreq::new(name).is_none() {
            return Err(IoError::InvalidName(name.to_string()));
        }
        let fd = sys::open(c"/dev/net/tun", libc::O_RDWR).map_err(|e| IoError::Sys {
            op: "open /dev/net/tun",
            source: e,
        })?;
        let name = sys::tun_set_iff(&fd, name, IFF_TUN | sys::IFF_NO_PI)
            .map_err(|e| IoError::sys("TUNSETIFF", name, e))?;
        sys::set_nonblocking(&fd).map_err(|e| IoError::sys("O_NONBLOCK", &name, e))?;
        Ok(HostTun { name, fd })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// One packet the host sent, into `buf`; `WouldBlock` when none.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        sys::readv2(self.fd.as_raw_fd(), &mut [], buf)
    }

    /// Hands one IP packet to the host's stack.
    pub fn write(&self, ip: &[u8]) -> io::Result<usize> {
        sys::writev2(self.fd.as_raw_fd(), &[], ip)
    }

    /// The descriptor, for `poll(2)`.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}
