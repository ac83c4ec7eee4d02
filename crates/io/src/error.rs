//! Errors of the I/O backends, phrased for the operator.

use std::io;

/// Why opening or driving a port failed.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The named netdev does not exist (in this network namespace).
    #[error("no such network interface '{0}'")]
    NoSuchDevice(String),
    /// Raw sockets / TUN need privileges.
    #[error("{what}: needs CAP_NET_RAW/CAP_NET_ADMIN (run as root)")]
    PermissionDenied { what: String },
    /// An interface name longer than IFNAMSIZ-1 or with a NUL byte.
    #[error("invalid interface name '{0}'")]
    InvalidName(String),
    /// The driver string is not known.
    #[error("unknown I/O driver '{0}' (expected af_packet | tap | af_xdp)")]
    UnknownDriver(String),
    /// A known feature that is not implemented yet.
    #[error("{0}: not implemented yet")]
    NotImplemented(&'static str),
    /// The netdev went away or down underneath an open port; re-open it later.
    #[error("network interface '{0}' is gone or down")]
    DeviceGone(String),
    /// AF_XDP needs one receive queue per worker on the netdev.
    #[error("network interface '{ifname}' has {queues} receive queue(s) but the af_xdp driver needs {needed} (one per worker): recreate a veth with `ip link add NAME numrxqueues {needed} numtxqueues {needed} type veth peer ...`, give a NIC more channels with `ethtool -L {ifname} combined {needed}`, or lower `workers`")]
    TooFewQueues {
        ifname: String,
        queues: u32,
        needed: u32,
    },
    /// AF_XDP cannot be set up on this netdev, and why (for the operator).
    #[error("af_xdp on '{ifname}': {why}")]
    Xdp { ifname: String, why: String },
    /// The netdev's MTU needs frames longer than one UMEM frame, and the
    /// AF_XDP socket cannot take them (no multi-buffer).
    #[error("af_xdp on '{ifname}': MTU {mtu} needs frames longer than one 4 KiB UMEM frame holds, but {why}: without multi-buffer the af_xdp driver serves MTUs up to {max} (`ip link set dev {ifname} mtu {max}`), or use `driver = \"af_packet\"`")]
    XdpMtu {
        ifname: String,
        mtu: u32,
        max: u32,
        why: &'static str,
    },
    /// The nftables ingress guard could not be set up or removed.
    #[error("nft failed: {0}")]
    Nft(String),
    /// The ingress guard could not be installed (tcx and/or nftables), or
    /// `VECGATE_INGRESS_GUARD` is not understood.
    #[error("ingress guard: {0}")]
    Guard(String),
    /// Another running vecgate holds the netdev's lock.
    #[error("network interface '{ifname}' is already attached by {holder} (lock {})", lock.display())]
    InUse {
        ifname: String,
        holder: String,
        lock: std::path::PathBuf,
    },
    /// Any other failing syscall, with the step that failed.
    #[error("{op}: {source}")]
    Sys {
        op: &'static str,
        #[source]
        source: io::Error,
    },
}

impl IoError {
    /// Maps a syscall error of step `op` on interface `ifname` to the clearest
    /// variant.
    pub(crate) fn sys(op: &'static str, ifname: &str, e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) => IoError::NoSuchDevice(ifname.to_string()),
            Some(libc::EPERM) | Some(libc::EACCES) => IoError::PermissionDenied {
                what: format!("{op} on '{ifname}'"),
            },
            _ => IoError::Sys { op, source: e },
        }
    }
}

/// Whether an error from `rx_burst`/`tx_burst` means the netdev disappeared
/// or went down: the worker should drop the port and re-open it later.
pub fn is_device_gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENXIO) | Some(libc::ENODEV) | Some(libc::ENETDOWN)
    )
}
