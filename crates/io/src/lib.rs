//! I/O backends: how packets get between the kernel and a worker's vectors.
//!
//! - [`af_packet`]: an existing netdev (veth, NIC) through an AF_PACKET
//!   socket with a TPACKET_V2 receive ring and virtio-net headers.
//! - [`af_xdp`]: an existing netdev through AF_XDP sockets (one per worker
//!   and queue) fed by a small XDP redirect program: the small-packet path.
//! - [`tap`]: a TAP device vecgate creates (or attaches to).
//! - [`netdev`]: ioctl helpers and the ingress guard (a tcx BPF program, an
//!   nftables table where tcx is unavailable) — the one thing vecgate
//!   changes on the host, see its module docs.
//! - [`floor`]: the I/O floor, the smallest forwarder on the AF_PACKET path
//!   (`vecgate-floor`), what the benchmarks measure vecgate against.
//! - [`netdev_lock`]: one gateway per netdev (a `flock`ed file).
//! - [`attached`]: the netdevs a gateway holds (claimed, one queue per
//!   worker opened, guarded), attached at startup or while running, and
//!   released.
//!
//! `unsafe` lives only in the private `sys`, `bpf_sys`, `tcx_sys` and
//! `xdp_sys` modules.

pub mod af_packet;
pub mod af_xdp;
pub mod attached;
mod bpf_sys;
pub mod error;
pub mod floor;
pub mod host_tun;
pub mod netdev;
pub mod netdev_lock;
mod nft;
mod sys;
pub mod tap;
mod tcx_sys;
pub mod vnet;
mod xdp_sys;

pub use af_packet::{AfPacketOpts, AfPacketPort, PortStats};
pub use af_xdp::{AfXdpOpts, AfXdpPort, XdpMode};
pub use attached::Attached;
pub use error::{is_device_gone, IoError};
pub use netdev::{GuardMechanism, GuardMode, IngressGuard};
pub use netdev_lock::NetdevLock;
pub use tap::{TapOpts, TapPort};

use packet::Port;

/// Opens worker `worker_index`'s (of `nworkers`) queue on `ifname` with
/// `driver` ("af_packet" | "tap" | "af_xdp"). With several workers,
/// AF_PACKET sockets join the fanout group `fanout_id` and TAP queues use
/// IFF_MULTI_QUEUE. AF_XDP binds worker `i` to receive queue `i` (the
/// netdev needs `nworkers` queues) and attaches its XDP program with the
/// first worker's port; it needs no ingress guard (frames redirected to the
/// sockets never reach the host stack).
pub fn open_port(
    driver: &str,
    ifname: &str,
    worker_index: usize,
    nworkers: usize,
    fanout_id: u16,
) -> Result<Box<dyn Port>, IoError> {
    match driver {
        "af_packet" => {
            let opts = AfPacketOpts {
                fanout: (nworkers > 1).then_some(fanout_id),
                ..AfPacketOpts::default()
            };
            Ok(Box::new(AfPacketPort::open(ifname, opts)?))
        }
        "tap" => {
            let opts = TapOpts {
                multi_queue: nworkers > 1,
                ..TapOpts::default()
            };
            Ok(Box::new(TapPort::create(ifname, opts)?))
        }
        "af_xdp" => {
            let opts = AfXdpOpts {
                queue: u32::try_from(worker_index).unwrap_or(u32::MAX),
                workers: u32::try_from(nworkers).unwrap_or(u32::MAX),
                ..AfXdpOpts::default()
            };
            Ok(Box::new(AfXdpPort::open(ifname, opts)?))
        }
        other => Err(IoError::UnknownDriver(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_errors_are_clear() {
        let e = open_port("af_xdp", "lo", 0, 1, 1).err().unwrap();
        assert_eq!(
            e.to_string(),
            "af_xdp on 'lo': loopback devices are not supported"
        );
        let e = open_port("af_xdp", "nosuch0", 0, 1, 1).err().unwrap();
        assert_eq!(e.to_string(), "no such network interface 'nosuch0'");
        let e = open_port("dpdk", "lo", 0, 1, 1).err().unwrap();
        assert!(e.to_string().contains("unknown I/O driver 'dpdk'"));
        let e = open_port("af_packet", "nosuch0", 0, 1, 1).err().unwrap();
        assert_eq!(e.to_string(), "no such network interface 'nosuch0'");
    }
}
