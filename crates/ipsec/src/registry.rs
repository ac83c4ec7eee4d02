//! Every ESP tunnel's SAs as the graph uses them, and the runtime interface
//! that changes them.
//!
//! The tables of the dataplane hold an `Arc<`[`TunnelTx`]`>` per tunnel (its
//! current outbound SA) and one `Arc<`[`InboundSad`]`>` (inbound SAs by
//! SPI); the esp-encrypt / esp-decrypt nodes call them once per run of
//! packets. [`EspRegistry`] owns them for the life of the process: table
//! rebuilds reuse the same objects, and the key manager (static
//! configuration, IKEv2, the REST API) installs, switches and removes SAs
//! through it without touching the tables. The SAs themselves are shared by
//! every worker: sequence numbers are reserved per vector with an atomic
//! add and the replay window is locked once per run of one SA, so one
//! tunnel spreads over several cores.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::{ArcSwap, ArcSwapOption};
use packet::Packet;

use crate::tunnel_mode::SliceSealer;
use crate::{Algorithm, Decrypted, EspError, InboundSa, Lifetime, LifetimeEvent, OutboundSa};

thread_local! {
    // Per-worker scratch for the SAs' per-packet results: reused, so the
    // fast path does not allocate once a worker has seen its largest
    // vector.
    static RX_STATUS: RefCell<Vec<Result<Decrypted, EspError>>> = const { RefCell::new(Vec::new()) };
}

/// Worst-case bytes ESP adds when no SA is known yet (an IKEv2 tunnel
/// before its first child SA): outer IPv6 (40), UDP for NAT-T (8), ESP
/// header (8), IV (16), padding (15), trailer (2) and ICV (16), rounded
/// up. The tunnel MTU is derived from it when the tables are built, before
/// any negotiation, so it must cover every algorithm IKEv2 may pick.
pub const PENDING_OVERHEAD: usize = 112;

/// The outbound side of one tunnel: the SA currently in use, switchable.
/// Empty while an IKEv2 tunnel waits for its first child SA (packets are
/// then dropped as `no-sa`).
#[derive(Debug)]
pub struct TunnelTx {
    sa: ArcSwapOption<OutboundSa>,
}

impl TunnelTx {
    pub fn new(sa: OutboundSa) -> Self {
        TunnelTx {
            sa: ArcSwapOption::from_pointee(sa),
        }
    }

    /// A tunnel without an outbound SA yet.
    pub fn pending() -> Self {
        TunnelTx {
            sa: ArcSwapOption::empty(),
        }
    }

    /// The current outbound SA.
    pub fn current(&self) -> Option<Arc<OutboundSa>> {
        self.sa.load_full()
    }
}

impl TunnelTx {
    /// Encrypts a vector in place. Each packet holds an inner IPv4/IPv6
    /// packet (data at the IP header, checksums complete, no GSO) and
    /// leaves as outer IP (+ UDP for NAT-T) + ESP. `status[i]` receives the
    /// result of `pkts[i]`; `Err` means the SA refused the whole vector
    /// (none yet, expired, sequence numbers exhausted) and nothing was
    /// encrypted.
    pub fn encrypt(
        &self,
        pkts: &mut [Packet],
        status: &mut [Result<(), EspError>],
    ) -> Result<(), EspError> {
        let sa = self.sa.load();
        let Some(sa) = sa.as_ref() else {
            return Err(EspError::NoSa);
        };
        let n = pkts.len().min(status.len());
        sa.encrypt_batch(&mut pkts[..n], &mut status[..n])
            .map(|_| ())
    }

    /// A sealer for the ESP-in-UDP packets of one super-packet laid out as
    /// a UDP GSO datagram ([`SliceSealer`]); `inner` is the super-packet
    /// from its IP header. `Err` as [`TunnelTx::encrypt`] refuses a vector,
    /// or `policy-mismatch` for a flow outside the SA's selectors.
    pub fn sealer(&self, inner: &[u8]) -> Result<SliceSealer, EspError> {
        let Some(sa) = self.sa.load_full() else {
            return Err(EspError::NoSa);
        };
        SliceSealer::new(sa, inner)
    }

    /// Most bytes encryption adds to a packet (outer headers, ESP header,
    /// IV, padding, trailer, ICV): the tunnel MTU is the underlay MTU
    /// minus this.
    pub fn overhead(&self) -> usize {
        self.sa.load().as_ref().map_or(PENDING_OVERHEAD, |sa| {
            sa.overhead_front() + sa.overhead_back_max()
        })
    }

    /// The current outbound SPI (for traces), 0 while pending.
    pub fn spi(&self) -> u32 {
        self.sa.load().as_ref().map_or(0, |sa| sa.spi())
    }
}

/// What esp-decrypt learns about an authentic packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxOk {
    /// Id of the tunnel the SA belongs to (the registry's tunnel id).
    pub tunnel: u32,
    /// The inner packet is IPv6.
    pub inner_v6: bool,
}

/// An inbound SA with the tunnel it belongs to.
#[derive(Debug, Clone)]
pub struct InboundEntry {
    pub sa: Arc<InboundSa>,
    pub tunnel: u32,
    /// Packets this SA refused, by [`EspError`] (index in
    /// [`EspError::ALL`]); shared by every worker, touched only on a
    /// refusal, never on the good path.
    pub drops: Arc<SaDrops>,
}

/// Per-SA refusal counters, by reason.
#[derive(Debug, Default)]
pub struct SaDrops([std::sync::atomic::AtomicU64; EspError::ALL.len()]);

impl SaDrops {
    #[inline]
    fn add(&self, e: EspError, n: u64) {
        if let Some(c) = self.0.get(usize::from(e.index())) {
            c.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The non-zero counters as (reason, count).
    pub fn list(&self) -> Vec<(&'static str, u64)> {
        EspError::ALL
            .iter()
            .zip(self.0.iter())
            .map(|(e, c)| (e.as_str(), c.load(std::sync::atomic::Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// The inbound SAD: SPI → SA, read-copy-update (workers load one snapshot
/// per vector, the control plane copies the map on change).
#[derive(Debug, Default)]
pub struct InboundSad {
    map: ArcSwap<HashMap<u32, InboundEntry>>,
}

#[inline]
fn spi_of(p: &Packet) -> Option<u32> {
    let d = p.data().get(..4)?;
    Some(u32::from_be_bytes([d[0], d[1], d[2], d[3]]))
}

impl InboundSad {
    /// Decrypts a vector in place; each packet's data starts at the ESP
    /// header (outer IP and UDP already pulled). `out[i]` receives the
    /// result of `pkts[i]`; on success the data is the inner IP packet.
    /// Packets with an unknown SPI get `bad-spi`.
    pub fn decrypt(&self, pkts: &mut [Packet], out: &mut [Result<RxOk, EspError>]) {
        self.decrypt_admitted(pkts, out, |_, _| true);
    }

    /// [`InboundSad::decrypt`], but packet `i` is decrypted only if
    /// `admit(i, tunnel)` holds for the tunnel its SPI names; otherwise it
    /// gets `wrong-underlay` before any crypto is spent on it (the caller
    /// checks where it arrived: an SPI alone proves nothing).
    pub fn decrypt_admitted(
        &self,
        pkts: &mut [Packet],
        out: &mut [Result<RxOk, EspError>],
        mut admit: impl FnMut(usize, u32) -> bool,
    ) {
        let map = self.map.load();
        let n = pkts.len().min(out.len());
        RX_STATUS.with(|s| {
            let mut s = s.borrow_mut();
            let mut i = 0;
            while i < n {
                let Some(spi) = spi_of(&pkts[i]) else {
                    out[i] = Err(EspError::Truncated);
                    i += 1;
                    continue;
                };
                let Some(e) = map.get(&spi) else {
                    out[i] = Err(EspError::BadSpi);
                    i += 1;
                    continue;
                };
                if !admit(i, e.tunnel) {
                    e.drops.add(EspError::WrongUnderlay, 1);
                    out[i] = Err(EspError::WrongUnderlay);
                    i += 1;
                    continue;
                }
                // A run of one SPI, each admitted, is decrypted as one batch.
                let mut j = i + 1;
                while j < n && spi_of(&pkts[j]) == Some(spi) && admit(j, e.tunnel) {
                    j += 1;
                }
                s.clear();
                s.resize(j - i, Err(EspError::Crypto));
                match e.sa.decrypt_batch(&mut pkts[i..j], &mut s) {
                    Err(err) => {
                        e.drops.add(err, (j - i) as u64);
                        out[i..j].fill(Err(err));
                    }
                    Ok(_) => {
                        for ((o, r), p) in out[i..j].iter_mut().zip(s.iter()).zip(&pkts[i..j]) {
                            *o = match r {
                                // RFC 4301 §5.2: the inner packet must
                                // match the SA's negotiated selectors.
                                Ok(_)
                                    if e.sa
                                        .selectors()
                                        .is_some_and(|s| !s.allows_inbound(p.data())) =>
                                {
                                    e.drops.add(EspError::PolicyMismatch, 1);
                                    Err(EspError::PolicyMismatch)
                                }
                                Ok(d) => Ok(RxOk {
                                    tunnel: e.tunnel,
                                    inner_v6: d.inner_v6,
                                }),
                                Err(err) => {
                                    e.drops.add(*err, 1);
                                    Err(*err)
                                }
                            };
                        }
                    }
                }
                i = j;
            }
        });
    }
}

impl InboundSad {
    /// Opens the ESP packets that lie in `buf` at `esp[i]` — the slices of
    /// one UDP GSO datagram (RFC 3948), which share their outer headers —
    /// each where it lies ([`InboundSa::open_slices`]). The SA is the one
    /// the first slice's SPI names, admitted once by `admit(tunnel)` (it
    /// checks where the datagram arrived); a slice under another SPI gets
    /// `bad-spi`. `out[i]` receives slice `i`'s result: its inner packet
    /// is then `buf[inner]`. Same checks and counters as
    /// [`InboundSad::decrypt_admitted`].
    pub fn open_slices(
        &self,
        buf: &mut [u8],
        esp: &[Range<usize>],
        out: &mut [Result<RxSlice, EspError>],
        admit: impl FnOnce(u32) -> bool,
    ) {
        let n = esp.len().min(out.len());
        let (esp, out) = (&esp[..n], &mut out[..n]);
        let spi = esp
            .first()
            .and_then(|r| buf.get(r.start..r.start.checked_add(4)?))
            .map(|d| u32::from_be_bytes([d[0], d[1], d[2], d[3]]));
        let Some(spi) = spi else {
            out.fill(Err(EspError::Truncated));
            return;
        };
        let map = self.map.load();
        let Some(e) = map.get(&spi) else {
            out.fill(Err(EspError::BadSpi));
            return;
        };
        if !admit(e.tunnel) {
            e.drops.add(EspError::WrongUnderlay, n as u64);
            out.fill(Err(EspError::WrongUnderlay));
            return;
        }
        RX_STATUS.with(|s| {
            let mut s = s.borrow_mut();
            s.clear();
            s.resize(n, Err(EspError::Crypto));
            if let Err(err) = e.sa.open_slices(buf, esp, &mut s) {
                e.drops.add(err, n as u64);
                out.fill(Err(err));
                return;
            }
            let front = e.sa.esp_front();
            for ((o, r), range) in out.iter_mut().zip(s.iter()).zip(esp) {
                *o = match r {
                    Ok(d) => {
                        let at = range.start + front;
                        let inner = at..at + d.inner_len;
                        // RFC 4301 §5.2: the inner packet must match the
                        // SA's negotiated selectors.
                        if e.sa.selectors().is_some_and(|sel| {
                            !sel.allows_inbound(buf.get(inner.clone()).unwrap_or(&[]))
                        }) {
                            e.drops.add(EspError::PolicyMismatch, 1);
                            Err(EspError::PolicyMismatch)
                        } else {
                            Ok(RxSlice {
                                tunnel: e.tunnel,
                                inner_v6: d.inner_v6,
                                inner,
                            })
                        }
                    }
                    Err(err) => {
                        e.drops.add(*err, 1);
                        Err(*err)
                    }
                };
            }
        });
    }
}

/// What esp-decrypt learns about one authentic slice of a datagram
/// ([`InboundSad::open_slices`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxSlice {
    pub tunnel: u32,
    pub inner_v6: bool,
    /// Where its inner packet lies in the datagram's buffer.
    pub inner: Range<usize>,
}

/// Why a registry operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("no ESP tunnel with id {0}")]
    NoTunnel(u32),
    #[error("ESP tunnel id {0} exists")]
    TunnelExists(u32),
    #[error("inbound SPI {0:#010x} is in use")]
    SpiInUse(u32),
    #[error("no inbound SA with SPI {0:#010x}")]
    NoSa(u32),
    #[error("ESP tunnel {0} had no outbound SA")]
    NoOutbound(u32),
}

/// What `show` prints about an SA: never keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaInfo {
    pub tunnel: u32,
    pub tunnel_name: String,
    pub outbound: bool,
    pub spi: u32,
    pub algorithm: Algorithm,
    /// The code that runs its cipher ([`crate::Engine`]).
    pub engine: crate::Engine,
    pub esn: bool,
    pub nat_t: bool,
    pub packets: u64,
    pub bytes: u64,
    /// Refusals by reason (inbound SAs: replay, integrity, …); outbound
    /// refusals are counted by esp-encrypt's node counters.
    pub drops: Vec<(&'static str, u64)>,
}

/// A lifetime event collected by [`EspRegistry::poll_events`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaEvent {
    pub tunnel: u32,
    pub outbound: bool,
    pub spi: u32,
    pub event: LifetimeEvent,
    /// The SA's traffic when the event was collected, and its limits.
    pub packets: u64,
    pub bytes: u64,
    pub limits: Lifetime,
}

#[derive(Debug)]
struct TunnelEntry {
    name: String,
    tx: Arc<TunnelTx>,
}

/// Every ESP tunnel's SAs: what the tables point at, and what the key
/// manager changes. Make-before-break rekey (RFC 7296 §2.8):
/// [`EspRegistry::install_inbound`] the new inbound SA, then
/// [`EspRegistry::switch_outbound`] once the peer has the matching one,
/// and [`EspRegistry::remove_inbound`] the old inbound SA when its
/// stragglers are done.
#[derive(Debug, Default)]
pub struct EspRegistry {
    sad: Arc<InboundSad>,
    tunnels: Mutex<HashMap<u32, TunnelEntry>>,
}

impl EspRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    fn tunnels(&self) -> MutexGuard<'_, HashMap<u32, TunnelEntry>> {
        self.tunnels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The SAD, for `TablesBuilder::set_esp_sad`.
    pub fn sad(&self) -> Arc<InboundSad> {
        self.sad.clone()
    }

    /// Registers tunnel `id` with its first outbound SA; returns the object
    /// for `EspTunnelDef::tx`.
    pub fn add_tunnel(
        &self,
        id: u32,
        name: &str,
        outbound: OutboundSa,
    ) -> Result<Arc<TunnelTx>, RegistryError> {
        let mut t = self.tunnels();
        if t.contains_key(&id) {
            return Err(RegistryError::TunnelExists(id));
        }
        let tx = Arc::new(TunnelTx::new(outbound));
        t.insert(
            id,
            TunnelEntry {
                name: name.to_string(),
                tx: tx.clone(),
            },
        );
        Ok(tx)
    }

    /// Registers tunnel `id` without an outbound SA (keyed later by IKEv2
    /// through [`EspRegistry::set_outbound`]); until then its packets are
    /// dropped as `no-sa`.
    pub fn add_pending_tunnel(&self, id: u32, name: &str) -> Result<Arc<TunnelTx>, RegistryError> {
        let mut t = self.tunnels();
        if t.contains_key(&id) {
            return Err(RegistryError::TunnelExists(id));
        }
        let tx = Arc::new(TunnelTx::pending());
        t.insert(
            id,
            TunnelEntry {
                name: name.to_string(),
                tx: tx.clone(),
            },
        );
        Ok(tx)
    }

    /// Removes tunnel `id` and every inbound SA it owns (a tunnel deleted
    /// live); returns the inbound SPIs removed. Vectors that loaded them
    /// finish with them; tables still pointing at its outbound object keep
    /// it alive until they are replaced.
    pub fn remove_tunnel(&self, id: u32) -> Result<Vec<u32>, RegistryError> {
        let mut t = self.tunnels();
        t.remove(&id).ok_or(RegistryError::NoTunnel(id))?;
        let mut spis = Vec::new();
        self.sad.map.rcu(|cur| {
            spis = cur
                .iter()
                .filter(|(_, e)| e.tunnel == id)
                .map(|(s, _)| *s)
                .collect();
            if spis.is_empty() {
                return Arc::clone(cur);
            }
            let mut m = HashMap::clone(cur);
            m.retain(|_, e| e.tunnel != id);
            Arc::new(m)
        });
        spis.sort_unstable();
        Ok(spis)
    }

    /// Sets (first child SA) or replaces (rekey) the outbound SA of tunnel
    /// `tunnel`; `None` clears it (child SA deleted: traffic stops as
    /// `no-sa`). Returns the previous SA.
    pub fn set_outbound(
        &self,
        tunnel: u32,
        sa: Option<OutboundSa>,
    ) -> Result<Option<Arc<OutboundSa>>, RegistryError> {
        let t = self.tunnels();
        let e = t.get(&tunnel).ok_or(RegistryError::NoTunnel(tunnel))?;
        Ok(e.tx.sa.swap(sa.map(Arc::new)))
    }

    /// The outbound object of tunnel `id` (for a table rebuild).
    pub fn tunnel_tx(&self, id: u32) -> Option<Arc<TunnelTx>> {
        self.tunnels().get(&id).map(|e| e.tx.clone())
    }

    /// The name of tunnel `id`.
    pub fn tunnel_name(&self, id: u32) -> Option<String> {
        self.tunnels().get(&id).map(|e| e.name.clone())
    }

    /// The id of the tunnel called `name`.
    pub fn tunnel_id(&self, name: &str) -> Option<u32> {
        self.tunnels()
            .iter()
            .find(|(_, e)| e.name == name)
            .map(|(id, _)| *id)
    }

    /// Adds an inbound SA for tunnel `tunnel`. SPIs are unique per
    /// receiver (RFC 4301 §4.1).
    pub fn install_inbound(&self, tunnel: u32, sa: InboundSa) -> Result<(), RegistryError> {
        if !self.tunnels().contains_key(&tunnel) {
            return Err(RegistryError::NoTunnel(tunnel));
        }
        let spi = sa.spi();
        let entry = InboundEntry {
            sa: Arc::new(sa),
            tunnel,
            drops: Arc::default(),
        };
        let mut result = Ok(());
        self.sad.map.rcu(|cur| {
            if cur.contains_key(&spi) {
                result = Err(RegistryError::SpiInUse(spi));
                return Arc::clone(cur);
            }
            result = Ok(());
            let mut m = HashMap::clone(cur);
            m.insert(spi, entry.clone());
            Arc::new(m)
        });
        result
    }

    /// Removes an inbound SA; batches already holding it finish with it.
    pub fn remove_inbound(&self, spi: u32) -> Result<Arc<InboundSa>, RegistryError> {
        let mut removed = None;
        self.sad.map.rcu(|cur| {
            removed = cur.get(&spi).map(|e| e.sa.clone());
            if removed.is_none() {
                return Arc::clone(cur);
            }
            let mut m = HashMap::clone(cur);
            m.remove(&spi);
            Arc::new(m)
        });
        removed.ok_or(RegistryError::NoSa(spi))
    }

    /// Switches tunnel `tunnel` to a new outbound SA; returns the old one.
    /// Vectors that loaded the old SA finish with it.
    pub fn switch_outbound(
        &self,
        tunnel: u32,
        sa: OutboundSa,
    ) -> Result<Arc<OutboundSa>, RegistryError> {
        let t = self.tunnels();
        let e = t.get(&tunnel).ok_or(RegistryError::NoTunnel(tunnel))?;
        e.tx.sa
            .swap(Some(Arc::new(sa)))
            .ok_or(RegistryError::NoOutbound(tunnel))
    }

    /// Every SA (outbound current, inbound all), sorted by tunnel and SPI.
    pub fn list(&self) -> Vec<SaInfo> {
        let t = self.tunnels();
        let mut v = Vec::new();
        for (id, e) in t.iter() {
            let Some(sa) = e.tx.current() else { continue };
            v.push(SaInfo {
                tunnel: *id,
                tunnel_name: e.name.clone(),
                outbound: true,
                spi: sa.spi(),
                algorithm: sa.algorithm(),
                engine: sa.engine(),
                esn: sa.esn(),
                nat_t: sa.encap().is_some(),
                packets: sa.lifetime().packets(),
                bytes: sa.lifetime().bytes(),
                drops: Vec::new(),
            });
        }
        for (spi, e) in self.sad.map.load().iter() {
            v.push(SaInfo {
                tunnel: e.tunnel,
                tunnel_name: t.get(&e.tunnel).map(|x| x.name.clone()).unwrap_or_default(),
                outbound: false,
                spi: *spi,
                algorithm: e.sa.algorithm(),
                engine: e.sa.engine(),
                esn: e.sa.esn(),
                nat_t: e.sa.encap().is_some(),
                packets: e.sa.lifetime().packets(),
                bytes: e.sa.lifetime().bytes(),
                drops: e.drops.list(),
            });
        }
        v.sort_by_key(|s| (s.tunnel, !s.outbound, s.spi));
        v
    }

    /// SPIs and algorithms of every SA, one line each (never keys).
    pub fn show(&self) -> String {
        let mut s = String::new();
        for i in self.list() {
            s.push_str(&format!(
                "{:<12} {:<3} spi {:#010x} {:<16} engine {} esn {} nat-t {} packets {} bytes {}\n",
                i.tunnel_name,
                if i.outbound { "out" } else { "in" },
                i.spi,
                i.algorithm,
                i.engine,
                i.esn,
                i.nat_t,
                i.packets,
                i.bytes
            ));
        }
        s
    }

    /// Collects lifetime events (for a control thread that polls). A hard
    /// event on an inbound SA removes it from the SAD (RFC 4301 §4.4.2.1);
    /// an expired outbound SA refuses traffic until it is switched.
    pub fn poll_events(&self) -> Vec<SaEvent> {
        let mut ev = Vec::new();
        for (id, e) in self.tunnels().iter() {
            let Some(sa) = e.tx.current() else { continue };
            let l = sa.lifetime();
            if let Some(x) = l.take_event() {
                ev.push(SaEvent {
                    tunnel: *id,
                    outbound: true,
                    spi: sa.spi(),
                    event: x,
                    packets: l.packets(),
                    bytes: l.bytes(),
                    limits: *l.limits(),
                });
            }
        }
        for (spi, e) in self.sad.map.load().iter() {
            let l = e.sa.lifetime();
            if let Some(x) = l.take_event() {
                ev.push(SaEvent {
                    tunnel: e.tunnel,
                    outbound: false,
                    spi: *spi,
                    event: x,
                    packets: l.packets(),
                    bytes: l.bytes(),
                    limits: *l.limits(),
                });
            }
        }
        for x in &ev {
            if !x.outbound && x.event == LifetimeEvent::Hard {
                let _ = self.remove_inbound(x.spi);
            }
        }
        ev
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_tunnel_drops_as_no_sa() {
        let reg = EspRegistry::new();
        let tx = reg.add_pending_tunnel(3, "ike").unwrap();
        assert!(reg.add_pending_tunnel(3, "again").is_err());
        assert_eq!(reg.tunnel_id("ike"), Some(3));
        assert_eq!(tx.overhead(), PENDING_OVERHEAD);
        assert_eq!(tx.spi(), 0);
        let mut pool = packet::Pool::new(1);
        let mut pkts = vec![pool.alloc().unwrap()];
        let mut st = [Ok(())];
        assert_eq!(tx.encrypt(&mut pkts, &mut st), Err(EspError::NoSa));
        assert!(reg.list().is_empty(), "nothing to show before a child SA");
        assert_eq!(reg.set_outbound(3, None).map(|o| o.is_none()), Ok(true));
        assert_eq!(
            reg.set_outbound(9, None).err(),
            Some(RegistryError::NoTunnel(9))
        );
    }

    /// An AES-GCM-128 SA of the test tunnel 10.0.0.1 → 10.0.0.2.
    fn cfg(spi: u32) -> crate::SaConfig {
        crate::SaConfig {
            spi,
            algorithm: Algorithm::AesGcm128,
            key: zeroize::Zeroizing::new(vec![7; 20]),
            esn: false,
            replay_window: 64,
            lifetime: crate::Lifetime::default(),
            tunnel: crate::TunnelEndpoints {
                local: std::net::Ipv4Addr::new(10, 0, 0, 1).into(),
                remote: std::net::Ipv4Addr::new(10, 0, 0, 2).into(),
            },
            encap: None,
            df: false,
        }
    }

    #[test]
    fn removing_a_tunnel_takes_its_inbound_sas_only() {
        let reg = EspRegistry::new();
        reg.add_tunnel(1, "a", OutboundSa::new(cfg(0x2000)).unwrap())
            .unwrap();
        reg.add_tunnel(2, "b", OutboundSa::new(cfg(0x2001)).unwrap())
            .unwrap();
        for (t, spi) in [(1, 0x1000), (1, 0x1001), (2, 0x1002)] {
            reg.install_inbound(t, InboundSa::new(cfg(spi)).unwrap())
                .unwrap();
        }
        assert_eq!(reg.remove_tunnel(1), Ok(vec![0x1000, 0x1001]));
        assert_eq!(reg.tunnel_id("a"), None);
        assert_eq!(reg.tunnel_id("b"), Some(2));
        let left: Vec<(u32, bool)> = reg.list().iter().map(|i| (i.spi, i.outbound)).collect();
        assert_eq!(left, vec![(0x2001, true), (0x1002, false)]);
        assert_eq!(reg.remove_tunnel(1), Err(RegistryError::NoTunnel(1)));
        // The name and id can be used again.
        reg.add_pending_tunnel(1, "a").unwrap();
    }

    #[test]
    fn inbound_refusals_are_counted_per_sa() {
        let reg = EspRegistry::new();
        reg.add_tunnel(1, "t", OutboundSa::new(cfg(0x2000)).unwrap())
            .unwrap();
        reg.install_inbound(1, InboundSa::new(cfg(0x1000)).unwrap())
            .unwrap();
        let mut pool = packet::Pool::new(4);
        let mut pkts = Vec::new();
        for _ in 0..3 {
            let mut p = pool.alloc().unwrap();
            // SPI 0x1000, sequence 1, then bytes that fail the ICV.
            let mut b = vec![0, 0, 0x10, 0, 0, 0, 0, 1];
            b.extend_from_slice(&[0x33; 64]);
            assert!(p.set_data(&b));
            pkts.push(p);
        }
        let mut out = vec![Err(EspError::Crypto); 3];
        reg.sad().decrypt(&mut pkts, &mut out);
        assert!(out.iter().all(|r| r.is_err()));
        let inb = reg.list().into_iter().find(|i| !i.outbound).unwrap();
        let total: u64 = inb.drops.iter().map(|(_, n)| n).sum();
        assert_eq!(total, 3, "{:?}", inb.drops);
        let out_sa = reg.list().into_iter().find(|i| i.outbound).unwrap();
        assert!(out_sa.drops.is_empty());
    }
}
