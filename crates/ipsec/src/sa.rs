//! Security associations: configuration, algorithms, keys and the per-SA
//! outer header template.

use crate::selectors::Selectors;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use zeroize::Zeroizing;

use crate::engine::Engine;
use crate::lifetime::{Lifetime, LifetimeState};
use crate::replay::ReplayWindow;
use crate::seqstore::SeqCounter;
use crate::transform::Transform;
use crate::EspError;

/// ESP transforms vecgate implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// AES-128-GCM with a 16-byte ICV (RFC 4106).
    AesGcm128,
    /// AES-256-GCM with a 16-byte ICV (RFC 4106).
    AesGcm256,
    /// AES-128-CBC (RFC 3602) with HMAC-SHA1-96 (RFC 2404).
    AesCbc128HmacSha1_96,
    /// AES-256-CBC (RFC 3602) with HMAC-SHA-256-128 (RFC 4868).
    AesCbc256HmacSha256_128,
    /// ChaCha20-Poly1305 (RFC 7634).
    ChaCha20Poly1305,
}

impl Algorithm {
    /// Every algorithm, for tests and listings.
    pub const ALL: [Algorithm; 5] = [
        Algorithm::AesGcm128,
        Algorithm::AesGcm256,
        Algorithm::AesCbc128HmacSha1_96,
        Algorithm::AesCbc256HmacSha256_128,
        Algorithm::ChaCha20Poly1305,
    ];

    /// True for the combined-mode (AEAD) transforms.
    pub const fn is_aead(self) -> bool {
        matches!(
            self,
            Algorithm::AesGcm128 | Algorithm::AesGcm256 | Algorithm::ChaCha20Poly1305
        )
    }

    /// Cipher key bytes (without salt).
    pub const fn enc_key_len(self) -> usize {
        match self {
            Algorithm::AesGcm128 | Algorithm::AesCbc128HmacSha1_96 => 16,
            _ => 32,
        }
    }

    /// Salt bytes at the end of the key: 4 for GCM (RFC 4106 §8.1) and
    /// ChaCha20-Poly1305 (RFC 7634 §2), 0 otherwise.
    pub const fn salt_len(self) -> usize {
        if self.is_aead() {
            4
        } else {
            0
        }
    }

    /// Integrity key bytes: 20 for HMAC-SHA1 (RFC 2404 §3), 32 for
    /// HMAC-SHA-256 (RFC 4868 §2.1.1), 0 for AEADs.
    pub const fn auth_key_len(self) -> usize {
        match self {
            Algorithm::AesCbc128HmacSha1_96 => 20,
            Algorithm::AesCbc256HmacSha256_128 => 32,
            _ => 0,
        }
    }

    /// Length of [`SaConfig::key`]: cipher key ‖ salt for AEADs, cipher key
    /// ‖ integrity key for CBC+HMAC.
    pub const fn key_len(self) -> usize {
        self.enc_key_len() + self.salt_len() + self.auth_key_len()
    }

    /// Bytes of IV on the wire: 8 for GCM/ChaCha (explicit part of the
    /// nonce), 16 for CBC.
    pub const fn iv_len(self) -> usize {
        if self.is_aead() {
            8
        } else {
            16
        }
    }

    /// ICV bytes: 16 for the AEADs and HMAC-SHA-256-128, 12 for
    /// HMAC-SHA1-96.
    pub const fn icv_len(self) -> usize {
        match self {
            Algorithm::AesCbc128HmacSha1_96 => 12,
            _ => 16,
        }
    }

    /// Cipher block size that padding aligns to; 1 for stream-like AEADs
    /// (which only need the 4-byte alignment of RFC 4303 §2.4).
    pub const fn block_size(self) -> usize {
        if self.is_aead() {
            1
        } else {
            16
        }
    }

    /// The proposal keyword strongSwan uses (and vecgate's config accepts).
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::AesGcm128 => "aes128gcm16",
            Algorithm::AesGcm256 => "aes256gcm16",
            Algorithm::AesCbc128HmacSha1_96 => "aes128-sha1",
            Algorithm::AesCbc256HmacSha256_128 => "aes256-sha256",
            Algorithm::ChaCha20Poly1305 => "chacha20poly1305",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = EspError;

    /// Parses strongSwan proposal keywords (case-insensitive), with the
    /// common aliases ("aes128gcm128", "aes128-sha1_96", "aes256-sha2_256").
    fn from_str(s: &str) -> Result<Self, EspError> {
        let l = s.trim().to_ascii_lowercase();
        Ok(match l.as_str() {
            "aes128gcm16" | "aes128gcm128" | "aes-gcm-128" => Algorithm::AesGcm128,
            "aes256gcm16" | "aes256gcm128" | "aes-gcm-256" => Algorithm::AesGcm256,
            "aes128-sha1" | "aes128-sha1_96" | "aes128-sha" => Algorithm::AesCbc128HmacSha1_96,
            "aes256-sha256" | "aes256-sha2_256" | "aes256-sha2_256_128" => {
                Algorithm::AesCbc256HmacSha256_128
            }
            "chacha20poly1305" | "chacha20-poly1305" => Algorithm::ChaCha20Poly1305,
            _ => return Err(EspError::BadConfig),
        })
    }
}

/// Tunnel endpoints of an SA: the outer source and destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunnelEndpoints {
    pub local: IpAddr,
    pub remote: IpAddr,
}

/// UDP encapsulation for NAT traversal (RFC 3948): outer UDP ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpEncap {
    pub sport: u16,
    pub dport: u16,
}

/// Everything needed to create one SA (one direction).
pub struct SaConfig {
    /// SPI; 0-255 are reserved (RFC 4303 §2.1) and refused.
    pub spi: u32,
    pub algorithm: Algorithm,
    /// Key material, [`Algorithm::key_len`] bytes: cipher key ‖ 4-byte salt
    /// for GCM (RFC 4106 §8.1) and ChaCha20-Poly1305 (RFC 7634 §2), or
    /// cipher key ‖ integrity key for CBC+HMAC. Zeroized on drop.
    pub key: Zeroizing<Vec<u8>>,
    /// 64-bit extended sequence numbers (RFC 4303 §2.2.1).
    pub esn: bool,
    /// Anti-replay window in packets (inbound only; 0 = off).
    pub replay_window: u32,
    pub lifetime: Lifetime,
    pub tunnel: TunnelEndpoints,
    /// Outer UDP header (NAT-T), `None` for plain ESP (IP protocol 50).
    pub encap: Option<UdpEncap>,
    /// Set DF on an outer IPv4 header.
    pub df: bool,
}

impl fmt::Debug for SaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaConfig")
            .field("spi", &format_args!("{:#010x}", self.spi))
            .field("algorithm", &self.algorithm)
            .field("esn", &self.esn)
            .field("replay_window", &self.replay_window)
            .field("tunnel", &self.tunnel)
            .field("encap", &self.encap)
            .finish_non_exhaustive()
    }
}

/// Longest outer header: IPv6 (40) + UDP (8).
pub(crate) const MAX_OUTER: usize = 48;

/// Outer IP (+ UDP) header built once per SA; per packet only lengths, the
/// IPv4 ID and checksum change (the checksum from a precomputed partial sum).
#[derive(Clone)]
pub(crate) struct OuterTemplate {
    pub(crate) bytes: [u8; MAX_OUTER],
    pub(crate) len: usize,
    pub(crate) v6: bool,
    pub(crate) udp: bool,
    /// One's-complement sum of the IPv4 header with length, ID and checksum
    /// zero.
    pub(crate) v4_sum: u32,
    /// Partial sum of the IPv6 UDP pseudo-header without the length.
    pub(crate) v6_pseudo: u32,
}

impl OuterTemplate {
    fn new(t: &TunnelEndpoints, encap: Option<UdpEncap>, df: bool) -> Result<Self, EspError> {
        let mut b = [0u8; MAX_OUTER];
        let proto = if encap.is_some() {
            17
        } else {
            wire::esp::IP_PROTOCOL
        };
        let (len, v6, v4_sum, v6_pseudo) = match (t.local, t.remote) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                b[0] = 0x45;
                if df {
                    b[6] = 0x40;
                }
                b[8] = 64;
                b[9] = proto;
                b[12..16].copy_from_slice(&src.octets());
                b[16..20].copy_from_slice(&dst.octets());
                (20, false, sum_words(&b[..20]), 0)
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                b[0] = 0x60;
                b[6] = proto;
                b[7] = 64;
                b[8..24].copy_from_slice(&src.octets());
                b[24..40].copy_from_slice(&dst.octets());
                // Pseudo-header (RFC 8200 §8.1) without the length.
                let pseudo = sum_words(&b[8..40]) + 17;
                (40, true, 0, pseudo)
            }
            _ => return Err(EspError::BadConfig),
        };
        let mut tl = OuterTemplate {
            bytes: b,
            len,
            v6,
            udp: encap.is_some(),
            v4_sum,
            v6_pseudo,
        };
        if let Some(u) = encap {
            tl.bytes[len..len + 2].copy_from_slice(&u.sport.to_be_bytes());
            tl.bytes[len + 2..len + 4].copy_from_slice(&u.dport.to_be_bytes());
            tl.len += 8;
        }
        Ok(tl)
    }
}

/// Sum of big-endian 16-bit words (unfolded).
#[inline]
pub(crate) fn sum_words(b: &[u8]) -> u32 {
    let mut s = 0u32;
    let mut it = b.chunks_exact(2);
    for w in &mut it {
        s += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [x] = it.remainder() {
        s += u32::from(*x) << 8;
    }
    s
}

fn check_common(cfg: &SaConfig) -> Result<(), EspError> {
    if wire::esp::spi_is_reserved(cfg.spi) || cfg.key.len() != cfg.algorithm.key_len() {
        return Err(EspError::BadConfig);
    }
    Ok(())
}

/// An outbound SA: encrypts with sequence numbers handed out by
/// [`OutboundSa::reserve`]; shareable between workers (`Sync`).
pub struct OutboundSa {
    pub(crate) spi: u32,
    pub(crate) alg: Algorithm,
    pub(crate) esn: bool,
    pub(crate) transform: Transform,
    pub(crate) template: OuterTemplate,
    /// Sequence numbers (the first packet is 1, §3.3.3), under a durable
    /// ceiling for keys that outlive the process ([`crate::seqstore`]).
    pub(crate) seq: Arc<SeqCounter>,
    /// Set when the sequence space ran out: no more reservations, but
    /// numbers already handed out may still be used.
    pub(crate) exhausted: AtomicBool,
    pub(crate) lifetime: LifetimeState,
    pub(crate) tunnel: TunnelEndpoints,
    pub(crate) encap: Option<UdpEncap>,
    /// What the peer agreed this SA carries; `None`: whatever the tunnel
    /// routes into it (static SAs).
    pub(crate) selectors: Option<Selectors>,
}

impl OutboundSa {
    /// Keys the SA and builds its header template. [`EspError::BadConfig`]
    /// for a reserved SPI, a key of the wrong length or endpoints of
    /// different families. The cipher runs on the fastest engine of this
    /// CPU ([`Engine::best`]).
    pub fn new(cfg: SaConfig) -> Result<Self, EspError> {
        let engine = Engine::best(cfg.algorithm);
        Self::with_engine(cfg, engine)
    }

    /// [`OutboundSa::new`] on the given engine (aws-lc where it cannot run
    /// the algorithm): benchmarks and the tests that compare engines.
    pub fn with_engine(cfg: SaConfig, engine: Engine) -> Result<Self, EspError> {
        check_common(&cfg)?;
        Ok(OutboundSa {
            spi: cfg.spi,
            alg: cfg.algorithm,
            esn: cfg.esn,
            transform: Transform::new(cfg.algorithm, cfg.spi, cfg.esn, &cfg.key, true, engine)?,
            template: OuterTemplate::new(&cfg.tunnel, cfg.encap, cfg.df)?,
            seq: Arc::new(SeqCounter::unbounded(cfg.esn)),
            exhausted: AtomicBool::new(false),
            lifetime: LifetimeState::new(cfg.lifetime),
            tunnel: cfg.tunnel,
            encap: cfg.encap,
            selectors: None,
        })
    }

    /// Restricts the SA to the selectors negotiated for it: a packet
    /// outside them is refused as `policy-mismatch` before encryption.
    pub fn with_selectors(mut self, s: Selectors) -> Self {
        self.selectors = Some(s);
        self
    }

    pub fn selectors(&self) -> Option<&Selectors> {
        self.selectors.as_ref()
    }

    pub fn spi(&self) -> u32 {
        self.spi
    }

    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }

    /// The engine that runs this SA's cipher.
    pub fn engine(&self) -> Engine {
        self.transform.engine()
    }

    pub fn esn(&self) -> bool {
        self.esn
    }

    pub fn tunnel(&self) -> TunnelEndpoints {
        self.tunnel
    }

    pub fn encap(&self) -> Option<UdpEncap> {
        self.encap
    }

    pub fn lifetime(&self) -> &LifetimeState {
        &self.lifetime
    }

    /// The sequence counter, shared with whoever keeps its ceiling durable.
    pub fn seq_counter(&self) -> &Arc<SeqCounter> {
        &self.seq
    }

    /// Before the SA is shared: resume above `durable` (the key's durable
    /// ceiling, 0 for a key never used) and hand out nothing until a
    /// ceiling is published ([`SeqCounter::publish`]).
    pub fn resume_seq(&mut self, durable: u64) {
        self.seq = Arc::new(SeqCounter::resume(durable, self.esn));
    }

    /// Bytes ESP adds in front of the inner packet: outer headers, ESP
    /// header and IV.
    pub fn overhead_front(&self) -> usize {
        self.template.len + wire::esp::HEADER_LEN + self.alg.iv_len()
    }

    /// Most bytes ESP adds behind the inner packet: padding, trailer, ICV.
    pub fn overhead_back_max(&self) -> usize {
        self.alg.block_size().max(4) - 1 + wire::esp::TRAILER_LEN + self.alg.icv_len()
    }
}

impl fmt::Debug for OutboundSa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboundSa")
            .field("spi", &format_args!("{:#010x}", self.spi))
            .field("algorithm", &self.alg)
            .finish_non_exhaustive()
    }
}

/// An inbound SA: verifies, replay-checks and decrypts; shareable between
/// workers (`Sync`, the replay window behind a per-batch lock).
pub struct InboundSa {
    pub(crate) spi: u32,
    pub(crate) alg: Algorithm,
    pub(crate) esn: bool,
    pub(crate) transform: Transform,
    /// Shared with whoever keeps its ceiling durable ([`crate::seqstore`]).
    pub(crate) replay: Arc<Mutex<ReplayWindow>>,
    pub(crate) lifetime: LifetimeState,
    pub(crate) tunnel: TunnelEndpoints,
    pub(crate) encap: Option<UdpEncap>,
    /// What the peer agreed to send under this SA; `None`: the tunnel's
    /// configured `traffic` only (static SAs).
    pub(crate) selectors: Option<Selectors>,
}

impl InboundSa {
    /// Keys the SA and allocates its replay window; the cipher runs on
    /// the fastest engine of this CPU ([`Engine::best`]).
    pub fn new(cfg: SaConfig) -> Result<Self, EspError> {
        let engine = Engine::best(cfg.algorithm);
        Self::with_engine(cfg, engine)
    }

    /// [`InboundSa::new`] on the given engine (aws-lc where it cannot run
    /// the algorithm).
    pub fn with_engine(cfg: SaConfig, engine: Engine) -> Result<Self, EspError> {
        check_common(&cfg)?;
        if cfg.tunnel.local.is_ipv4() != cfg.tunnel.remote.is_ipv4() {
            return Err(EspError::BadConfig);
        }
        Ok(InboundSa {
            spi: cfg.spi,
            alg: cfg.algorithm,
            esn: cfg.esn,
            transform: Transform::new(cfg.algorithm, cfg.spi, cfg.esn, &cfg.key, false, engine)?,
            replay: Arc::new(Mutex::new(ReplayWindow::new(cfg.replay_window, cfg.esn)?)),
            lifetime: LifetimeState::new(cfg.lifetime),
            tunnel: cfg.tunnel,
            encap: cfg.encap,
            selectors: None,
        })
    }

    /// Restricts the SA to the selectors negotiated for it: a decrypted
    /// packet outside them is dropped as `policy-mismatch` (RFC 4301 §5.2).
    pub fn with_selectors(mut self, s: Selectors) -> Self {
        self.selectors = Some(s);
        self
    }

    pub fn selectors(&self) -> Option<&Selectors> {
        self.selectors.as_ref()
    }

    pub fn spi(&self) -> u32 {
        self.spi
    }

    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }

    /// The engine that runs this SA's cipher.
    pub fn engine(&self) -> Engine {
        self.transform.engine()
    }

    pub fn esn(&self) -> bool {
        self.esn
    }

    /// Outer endpoints as configured (local = our address); the caller may
    /// check a packet's outer addresses against them.
    pub fn tunnel(&self) -> TunnelEndpoints {
        self.tunnel
    }

    pub fn encap(&self) -> Option<UdpEncap> {
        self.encap
    }

    pub fn lifetime(&self) -> &LifetimeState {
        &self.lifetime
    }

    /// Highest sequence number authenticated so far.
    pub fn replay_top(&self) -> u64 {
        self.replay.lock().map(|w| w.top()).unwrap_or(0)
    }

    /// The replay window, shared with whoever keeps its ceiling durable.
    pub fn replay_handle(&self) -> Arc<Mutex<ReplayWindow>> {
        self.replay.clone()
    }

    /// Moves the replay window's right edge to `top` (state carried over
    /// from another instance, and tests of ESN epochs).
    pub fn set_replay_top(&self, top: u64) {
        if let Ok(mut w) = self.replay.lock() {
            w.set_top(top);
        }
    }
}

impl fmt::Debug for InboundSa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboundSa")
            .field("spi", &format_args!("{:#010x}", self.spi))
            .field("algorithm", &self.alg)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn cfg(alg: Algorithm, key: Vec<u8>) -> SaConfig {
        SaConfig {
            spi: 0x1234_5678,
            algorithm: alg,
            key: Zeroizing::new(key),
            esn: false,
            replay_window: 64,
            lifetime: Lifetime::default(),
            tunnel: TunnelEndpoints {
                local: Ipv4Addr::new(10, 0, 0, 1).into(),
                remote: Ipv4Addr::new(10, 0, 0, 2).into(),
            },
            encap: None,
            df: false,
        }
    }

    #[test]
    fn names_round_trip() {
        for a in Algorithm::ALL {
            assert_eq!(a.name().parse::<Algorithm>().unwrap(), a);
            assert_eq!(a.to_string(), a.name());
        }
        assert_eq!(
            "AES256-SHA2_256".parse::<Algorithm>().unwrap(),
            Algorithm::AesCbc256HmacSha256_128
        );
        assert_eq!("3des-md5".parse::<Algorithm>(), Err(EspError::BadConfig));
    }

    #[test]
    fn lengths() {
        use Algorithm::*;
        assert_eq!(AesGcm128.key_len(), 20);
        assert_eq!(AesGcm256.key_len(), 36);
        assert_eq!(ChaCha20Poly1305.key_len(), 36);
        assert_eq!(AesCbc128HmacSha1_96.key_len(), 36);
        assert_eq!(AesCbc256HmacSha256_128.key_len(), 64);
        assert_eq!(AesCbc128HmacSha1_96.icv_len(), 12);
        assert_eq!(AesGcm128.iv_len(), 8);
        assert_eq!(AesCbc256HmacSha256_128.iv_len(), 16);
        assert_eq!(AesCbc256HmacSha256_128.block_size(), 16);
    }

    #[test]
    fn debug_never_prints_keys() {
        for a in Algorithm::ALL {
            // A key whose bytes would be recognisable in any rendering.
            let key = vec![0xa7u8; a.key_len()];
            let out = OutboundSa::new(cfg(a, key.clone())).unwrap();
            let inb = InboundSa::new(cfg(a, key)).unwrap();
            for s in [format!("{out:?}"), format!("{inb:?}"), format!("{out:#?}")] {
                assert!(s.contains("0x12345678"), "{s}");
                assert!(s.contains(&format!("{a:?}")), "{s}");
                for pat in ["a7", "A7", "167", "key", "salt"] {
                    assert!(!s.contains(pat), "{pat} in {s}");
                }
            }
            let c = cfg(a, vec![0xa7u8; a.key_len()]);
            let s = format!("{c:?}");
            assert!(!s.contains("167") && !s.contains("a7"), "{s}");
        }
    }

    #[test]
    fn bad_configs() {
        let a = Algorithm::AesGcm128;
        assert_eq!(
            OutboundSa::new(cfg(a, vec![0; 16])).err(),
            Some(EspError::BadConfig)
        );
        let mut c = cfg(a, vec![0; 20]);
        c.spi = 255;
        assert_eq!(OutboundSa::new(c).err(), Some(EspError::BadConfig));
        let mut c = cfg(a, vec![0; 20]);
        c.tunnel.remote = "::1".parse().unwrap();
        assert_eq!(OutboundSa::new(c).err(), Some(EspError::BadConfig));
        let mut c = cfg(a, vec![0; 20]);
        c.replay_window = u32::MAX;
        assert_eq!(InboundSa::new(c).err(), Some(EspError::BadConfig));
    }
}
