//! The host side of the host punt: one host interface per VRF (a TUN the
//! binary made, [`HostIf`]) and the thread that moves packets between it
//! and the [`HostPunt`] queues — punted packets into the TUN of the VRF
//! they arrived in, what the host sends on a TUN back to be routed in that
//! TUN's VRF. VRFs are looked up by name in the current tables every
//! round, so a VRF renumbered by a rebuild keeps its TUN.

use super::HostPunt;
use crate::tables::SharedTables;
use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tracing::warn;

/// How long a round waits for a punted packet before reading the host
/// interfaces again (the host's own packets wait at most this long).
pub const WAIT: Duration = Duration::from_millis(2);
/// Packets moved per interface and direction before looking at the others.
pub const BURST: usize = 64;

/// A host interface carrying one VRF's packets: whole IP packets, read
/// and written without blocking (`WouldBlock` when there is nothing).
pub trait HostIf: Send {
    fn name(&self) -> &str;
    fn read(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn write(&self, ip: &[u8]) -> io::Result<usize>;
}

/// Every punt VRF's host interface, by VRF name.
pub struct Relay {
    ifs: Vec<(String, Box<dyn HostIf>)>,
}

impl Relay {
    pub fn new(ifs: Vec<(String, Box<dyn HostIf>)>) -> Self {
        Relay { ifs }
    }

    /// Moves packets until `stop`.
    pub fn run(&self, host: &HostPunt, tables: &SharedTables, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            self.round(host, tables, WAIT);
        }
    }

    /// One round: punted packets into their VRF's interface (waiting up to
    /// `wait` for the first; one for a VRF without an interface is
    /// dropped), then up to [`BURST`] packets from each interface back to
    /// the workers, routed in its VRF.
    pub fn round(&self, host: &HostPunt, tables: &SharedTables, wait: Duration) {
        let mut wait = wait;
        for _ in 0..BURST * self.ifs.len().max(1) {
            let Some(f) = host.recv_timeout(wait) else {
                break;
            };
            wait = Duration::ZERO;
            let t = tables.load();
            let name = t.vrfs.get(usize::from(f.vrf)).map(|v| v.name.as_str());
            if let Some((_, tun)) = self.ifs.iter().find(|(v, _)| Some(v.as_str()) == name) {
                if let Err(e) = tun.write(f.data()) {
                    if e.kind() != ErrorKind::WouldBlock {
                        warn!(tap = %tun.name(), "host punt: write: {e}");
                    }
                }
            }
            host.release(f);
        }
        let t = tables.load();
        for (vrf_name, tun) in &self.ifs {
            let Some(vrf) = t.vrfs.iter().position(|v| &v.name == vrf_name) else {
                continue;
            };
            for _ in 0..BURST {
                let Some(mut slot) = host.slot() else {
                    break;
                };
                match tun.read(&mut slot) {
                    Ok(n) if n > 0 => {
                        host.inject(slot, n, vrf as u16);
                    }
                    Ok(_) => {
                        host.give_back(slot);
                        break;
                    }
                    Err(e) => {
                        host.give_back(slot);
                        if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) {
                            warn!(tap = %tun.name(), "host punt: read: {e}");
                        }
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::TablesBuilder;
    use packet::buffer::Pool;
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    /// A host interface in memory: what the host "sends" is queued in
    /// `inbox`, what the relay writes lands in `sent`.
    #[derive(Clone, Default)]
    struct Fake {
        inbox: Arc<Mutex<VecDeque<Vec<u8>>>>,
        sent: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl HostIf for Fake {
        fn name(&self) -> &str {
            "fake"
        }
        fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
            let p = self.inbox.lock().unwrap().pop_front();
            let p = p.ok_or(ErrorKind::WouldBlock)?;
            buf[..p.len()].copy_from_slice(&p);
            Ok(p.len())
        }
        fn write(&self, ip: &[u8]) -> io::Result<usize> {
            self.sent.lock().unwrap().push(ip.to_vec());
            Ok(ip.len())
        }
    }

    /// An IPv4 UDP packet to BFD's port, `tag` in its payload.
    fn bfd(tag: u8) -> Vec<u8> {
        let mut p = vec![0u8; 28 + 4];
        p[0] = 0x45;
        p[9] = 17;
        p[22..24].copy_from_slice(&3784u16.to_be_bytes());
        p[28] = tag;
        p
    }

    fn tables() -> Arc<SharedTables> {
        let mut b = TablesBuilder::new();
        b.add_vrf(7, "red");
        SharedTables::new(b.build().unwrap())
    }

    #[test]
    fn packets_cross_between_the_queues_and_their_vrfs_interface() {
        let tables = tables();
        let red = tables.load().vrf_index(7).unwrap();
        let default = tables.load().vrf_index(0).unwrap();
        let (fr, fb) = (Fake::default(), Fake::default());
        let relay = Relay::new(vec![
            ("red".to_owned(), Box::new(fr.clone())),
            // A VRF the tables do not have (yet): its interface is not read.
            ("blue".to_owned(), Box::new(fb.clone())),
        ]);
        let host = HostPunt::new(8);

        // Worker → host: into the TUN of the packet's VRF only; a packet
        // of a VRF without one is dropped and its slot comes back.
        assert!(host.punt(&bfd(1), 20, 17, false, red));
        assert!(host.punt(&bfd(2), 20, 17, false, default));
        relay.round(&host, &tables, Duration::ZERO);
        assert_eq!(*fr.sent.lock().unwrap(), vec![bfd(1)]);
        assert!(fb.sent.lock().unwrap().is_empty());
        for i in 0..8 {
            assert!(host.punt(&bfd(i), 20, 17, false, default), "slot {i} free");
            relay.round(&host, &tables, Duration::ZERO);
        }

        // Host → workers: routed in the interface's VRF.
        fr.inbox.lock().unwrap().push_back(bfd(3));
        fb.inbox.lock().unwrap().push_back(bfd(4));
        relay.round(&host, &tables, Duration::ZERO);
        let mut pool = Pool::new(4);
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        host.drain_inject(&mut pool, &mut v4, &mut v6, 8);
        assert_eq!(v4.len(), 1);
        assert!(v6.is_empty());
        assert_eq!(v4[0].data(), &bfd(3)[..]);
        assert_eq!(v4[0].meta.vrf, red);
        assert_eq!(fb.inbox.lock().unwrap().len(), 1, "blue is not read");
        pool.free_all(&mut v4);
    }
}
