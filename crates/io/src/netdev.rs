//! Queries and changes on Linux netdevs through ioctls (no netlink), and the
//! ingress guard.
//!
//! # What vecgate does to the host
//!
//! When vecgate owns a netdev through AF_PACKET, the kernel stack still sees
//! every frame too and would answer ARP, ping and TCP (with RSTs) for the
//! addresses configured on it. [`IngressGuard`] installs an nftables table
//! `netdev vecgate_<ifname>` whose ingress chain has `policy drop` on that
//! netdev: AF_PACKET taps run before the ingress hook, so vecgate still
//! receives every frame, but the kernel's IP stack gets none. The table is
//! deleted when the guard is dropped, and by the kernel when the process
//! dies (it is owned by the guard's netlink socket, see [`crate::nft`]).
//! Nothing else on the host is changed; in
//! particular the netdev's ethtool offload settings are left alone and only
//! reported ([`offload_report`]).

use crate::error::IoError;
use crate::nft::NftSocket;
use crate::sys;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

pub(crate) fn ctl_socket() -> Result<OwnedFd, IoError> {
    sys::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0).map_err(|e| IoError::Sys {
        op: "socket(AF_INET)",
        source: e,
    })
}

fn ifreq(name: &str) -> Result<sys::Ifreq, IoError> {
    sys::Ifreq::new(name).ok_or_else(|| IoError::InvalidName(name.to_string()))
}

fn query(name: &str, req: libc::c_ulong, op: &'static str) -> Result<sys::Ifreq, IoError> {
    let s = ctl_socket()?;
    query_on(s.as_raw_fd(), name, req, op)
}

/// The ioctl on an existing socket: it answers for the socket's network
/// namespace, whatever namespace the calling thread is in.
fn query_on(
    fd: RawFd,
    name: &str,
    req: libc::c_ulong,
    op: &'static str,
) -> Result<sys::Ifreq, IoError> {
    let mut ifr = ifreq(name)?;
    sys::ioctl_ifreq(fd, req, &mut ifr).map_err(|e| IoError::sys(op, name, e))?;
    Ok(ifr)
}

/// [`ifindex`] in the network namespace of socket `fd`.
pub(crate) fn ifindex_on(fd: RawFd, name: &str) -> Result<i32, IoError> {
    Ok(query_on(fd, name, libc::SIOCGIFINDEX, "SIOCGIFINDEX")?.i32_at0())
}

/// [`link_state`] in the network namespace of socket `fd`.
pub(crate) fn link_state_on(fd: RawFd, name: &str) -> Result<LinkState, IoError> {
    Ok(flags_to_state(
        query_on(fd, name, libc::SIOCGIFFLAGS, "SIOCGIFFLAGS")?.i16_at0(),
    ))
}

/// [`mtu`] in the network namespace of socket `fd`.
pub(crate) fn mtu_on(fd: RawFd, name: &str) -> Result<u32, IoError> {
    let v = query_on(fd, name, libc::SIOCGIFMTU, "SIOCGIFMTU")?.i32_at0();
    Ok(v.max(0) as u32)
}

fn flags_to_state(f: i16) -> LinkState {
    let f = i32::from(f);
    LinkState {
        admin_up: f & libc::IFF_UP != 0,
        running: f & libc::IFF_RUNNING != 0,
    }
}

/// Interface index of `name` in the calling thread's network namespace.
pub fn ifindex(name: &str) -> Result<i32, IoError> {
    Ok(query(name, libc::SIOCGIFINDEX, "SIOCGIFINDEX")?.i32_at0())
}

/// Hardware (MAC) address of `name`.
pub fn mac(name: &str) -> Result<[u8; 6], IoError> {
    let ifr = query(name, libc::SIOCGIFHWADDR, "SIOCGIFHWADDR")?;
    // struct sockaddr: 2 bytes family, then the address.
    let mut m = [0u8; 6];
    m.copy_from_slice(&ifr.data[2..8]);
    Ok(m)
}

/// MTU of `name` (L3 bytes).
pub fn mtu(name: &str) -> Result<u32, IoError> {
    let v = query(name, libc::SIOCGIFMTU, "SIOCGIFMTU")?.i32_at0();
    Ok(v.max(0) as u32)
}

/// Administrative and operational state of a netdev.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkState {
    /// IFF_UP: configured up.
    pub admin_up: bool,
    /// IFF_RUNNING: carrier present (for a veth: the peer is up too).
    pub running: bool,
}

/// Link state of `name` (SIOCGIFFLAGS).
pub fn link_state(name: &str) -> Result<LinkState, IoError> {
    Ok(flags_to_state(
        query(name, libc::SIOCGIFFLAGS, "SIOCGIFFLAGS")?.i16_at0(),
    ))
}

/// Sets `name` administratively up (SIOCSIFFLAGS with IFF_UP).
pub fn set_up(name: &str) -> Result<(), IoError> {
    let s = ctl_socket()?;
    let mut ifr = ifreq(name)?;
    sys::ioctl_ifreq(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr)
        .map_err(|e| IoError::sys("SIOCGIFFLAGS", name, e))?;
    let f = ifr.i16_at0() | libc::IFF_UP as i16;
    ifr.set_i16_at0(f);
    sys::ioctl_ifreq(s.as_raw_fd(), libc::SIOCSIFFLAGS, &mut ifr)
        .map_err(|e| IoError::sys("SIOCSIFFLAGS", name, e))
}

/// Moves the calling thread into the network namespace at `path` (for
/// example `/run/netns/NAME`). Sockets and taps opened afterwards on this
/// thread live in that namespace, and stay there when used from other threads.
pub fn enter_netns(path: &std::path::Path) -> Result<(), IoError> {
    let f = File::open(path).map_err(|e| IoError::Sys {
        op: "open netns",
        source: e,
    })?;
    sys::setns_net(f.as_raw_fd()).map_err(|e| IoError::Sys {
        op: "setns",
        source: e,
    })
}

/// The offload settings of a netdev, as ethtool reports them. vecgate only
/// reports these (super-packets need tx checksum, TSO/GSO on the peer side);
/// it never changes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffloadReport {
    pub rx_csum: bool,
    pub tx_csum: bool,
    pub tso: bool,
    pub gso: bool,
    pub gro: bool,
}

/// Reads the offload settings of `name` (legacy ETHTOOL_G* ioctls).
pub fn offload_report(name: &str) -> Result<OffloadReport, IoError> {
    let s = ctl_socket()?;
    let fd = s.as_raw_fd();
    let get = |cmd| {
        sys::ethtool_get_value(fd, name, cmd)
            .map(|v| v != 0)
            .map_err(|e| IoError::sys("SIOCETHTOOL", name, e))
    };
    Ok(OffloadReport {
        rx_csum: get(sys::ETHTOOL_GRXCSUM)?,
        tx_csum: get(sys::ETHTOOL_GTXCSUM)?,
        tso: get(sys::ETHTOOL_GTSO)?,
        gso: get(sys::ETHTOOL_GGSO)?,
        gro: get(sys::ETHTOOL_GGRO)?,
    })
}

/// Whether `name` takes UDP GSO super-packets as they are
/// (`tx-udp-segmentation`, NETIF_F_GSO_UDP_L4). A socket with
/// PACKET_QDISC_BYPASS cannot leave the segmentation to the kernel: its
/// direct transmit path drops whatever would need software GSO.
pub fn udp_segmentation(name: &str) -> Result<bool, IoError> {
    let s = ctl_socket()?;
    sys::ethtool_feature_active(s.as_raw_fd(), name, "tx-udp-segmentation")
        .map(|v| v.unwrap_or(false))
        .map_err(|e| IoError::sys("SIOCETHTOOL", name, e))
}

/// An nftables `netdev` ingress chain with `policy drop` on one netdev, so
/// the kernel stack neither answers nor forwards what arrives there while
/// AF_PACKET still receives every frame. The table is owned by a netlink
/// socket this guard holds ([`crate::nft`]): removed on drop, and by the
/// kernel when the process dies however it dies.
#[derive(Debug)]
pub struct IngressGuard {
    table: String,
    sock: Option<NftSocket>,
}

impl IngressGuard {
    /// Installs the guard on `ifname` with the table `vecgate_<ifname>`
    /// (replacing a stale one left by an older vecgate).
    pub fn install(ifname: &str) -> Result<Self, IoError> {
        Self::install_named(ifname, &format!("vecgate_{}", sanitize(ifname)))
    }

    /// Installs the guard under an explicit table name (one per
    /// gateway + netdev when several gateways share a namespace), in the
    /// calling thread's network namespace.
    pub fn install_named(ifname: &str, table: &str) -> Result<Self, IoError> {
        if sys::Ifreq::new(ifname).is_none() || ifname.contains('"') {
            return Err(IoError::InvalidName(ifname.to_string()));
        }
        ifindex(ifname)?;
        let table = sanitize(table);
        let errno = |e: i32| std::io::Error::from_raw_os_error(e);
        let mut sock = NftSocket::open()?;
        // A table without the owner flag (a vecgate before owner tables,
        // killed) is stale: replace it. One owned by a live socket is not
        // ours to take (EPERM).
        match sock.delete_table(&table) {
            Ok(()) => tracing::info!(%table, "removed a stale ingress guard table"),
            Err(libc::ENOENT) => {}
            Err(libc::EPERM) => {
                return Err(IoError::Nft(format!(
                    "table netdev {table} is owned by another running process"
                )))
            }
            Err(e) => {
                return Err(IoError::Nft(format!(
                    "deleting stale table {table}: {}",
                    errno(e)
                )))
            }
        }
        sock.add_owned_ingress_drop(&table, ifname).map_err(|e| {
            IoError::Nft(format!(
                "creating table netdev {table} (owner flag, Linux >= 5.12) on {ifname}: {}",
                errno(e)
            ))
        })?;
        Ok(IngressGuard {
            table,
            sock: Some(sock),
        })
    }

    /// The nftables table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Removes the table now, reporting failure (Drop does it silently).
    pub fn remove(mut self) -> Result<(), IoError> {
        self.remove_inner()
    }

    fn remove_inner(&mut self) -> Result<(), IoError> {
        // Deleted through the owning socket (synchronous even while a
        // forked child briefly shares the descriptor), then the socket
        // closes, which would remove it too.
        let Some(mut sock) = self.sock.take() else {
            return Ok(());
        };
        match sock.delete_table(&self.table) {
            Ok(()) | Err(libc::ENOENT) => Ok(()),
            Err(e) => Err(IoError::Nft(format!(
                "deleting table {}: {}",
                self.table,
                std::io::Error::from_raw_os_error(e)
            ))),
        }
    }
}

impl Drop for IngressGuard {
    fn drop(&mut self) {
        if let Err(e) = self.remove_inner() {
            tracing::warn!(table = %self.table, error = %e, "could not remove ingress guard");
        }
    }
}

/// Keeps only characters valid in an nft identifier.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_queries() {
        assert_eq!(mtu("lo").unwrap(), 65536);
        assert_eq!(mac("lo").unwrap(), [0; 6]);
        assert!(ifindex("lo").unwrap() >= 1);
        assert!(link_state("lo").unwrap().admin_up);
    }

    #[test]
    fn missing_device_is_named() {
        let e = ifindex("nosuchdev0").unwrap_err();
        assert_eq!(e.to_string(), "no such network interface 'nosuchdev0'");
        assert!(matches!(
            ifindex("this-name-is-too-long"),
            Err(IoError::InvalidName(_))
        ));
    }

    #[test]
    fn sanitize_table_names() {
        assert_eq!(sanitize("veth-a.1"), "veth_a_1");
    }
}
