//! [`SaSnapshot::encode`] / [`SaSnapshot::decode`]: the snapshot as
//! bytes for the sync link, every length checked on the way in.

use super::{ChildSnapshot, InFlight, PendingSnapshot, SaSnapshot};
use crate::crypto::{DhGroup, Encr, IkeKeys, IkeSuite, Integ, Prf, Secret};
use crate::error::{Error, Result};
use crate::payload::Identity;
use crate::payload::TrafficSelector;
use crate::pki::{AuthMethod, PeerCert};
use crate::state::{AuthInfo, ChildSaKeys};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;
use zeroize::Zeroizing;

/// Format version of [`SaSnapshot::encode`].
const VERSION: u8 = 1;
/// Bounds on decoded input: children per IKE SA (the state machine's own
/// cap), selectors per side, fragments of a request in flight.
const MAX_CHILDREN: usize = 64;
const MAX_TS: usize = 16;
const MAX_FRAGS: usize = 16;

/// Appends big-endian fields.
struct W(Secret);

impl W {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    /// Length-prefixed bytes; longer than 64 KiB cannot be encoded.
    fn bytes(&mut self, b: &[u8]) -> Result<()> {
        self.u16(u16::try_from(b.len()).map_err(|_| Error::TooLong)?);
        self.0.extend_from_slice(b);
        Ok(())
    }
    fn ip(&mut self, a: IpAddr) {
        match a {
            IpAddr::V4(a) => {
                self.u8(4);
                self.0.extend_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                self.u8(6);
                self.0.extend_from_slice(&a.octets());
            }
        }
    }
    fn addr(&mut self, a: SocketAddr) {
        self.ip(a.ip());
        self.u16(a.port());
    }
    /// Milliseconds, saturating below u32::MAX, which is "none".
    fn life(&mut self, d: Option<Duration>) {
        let ms = d.map_or(u32::MAX, |d| {
            u32::try_from(d.as_millis()).map_or(u32::MAX - 1, |m| m.min(u32::MAX - 1))
        });
        self.u32(ms);
    }
    fn ts(&mut self, v: &[TrafficSelector]) -> Result<()> {
        self.u8(u8::try_from(v.len()).map_err(|_| Error::TooMany("selectors"))?);
        for t in v {
            self.u8(t.ip_proto);
            self.u16(t.start_port);
            self.u16(t.end_port);
            self.ip(t.start);
            self.ip(t.end);
        }
        Ok(())
    }
}

/// Reads big-endian fields; every read is checked.
struct R<'a>(&'a [u8]);

impl<'a> R<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(Error::Truncated("SA snapshot"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_be_bytes(a))
    }
    fn u64(&mut self) -> Result<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = usize::from(self.u16()?);
        self.take(n)
    }
    fn secret(&mut self) -> Result<Secret> {
        Ok(Zeroizing::new(self.bytes()?.to_vec()))
    }
    fn ip(&mut self) -> Result<IpAddr> {
        match self.u8()? {
            4 => {
                let mut a = [0u8; 4];
                a.copy_from_slice(self.take(4)?);
                Ok(IpAddr::V4(Ipv4Addr::from(a)))
            }
            6 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(self.take(16)?);
                Ok(IpAddr::V6(Ipv6Addr::from(a)))
            }
            _ => Err(Error::Malformed("snapshot address family")),
        }
    }
    fn addr(&mut self) -> Result<SocketAddr> {
        let ip = self.ip()?;
        Ok(SocketAddr::new(ip, self.u16()?))
    }
    fn life(&mut self) -> Result<Option<Duration>> {
        let ms = self.u32()?;
        Ok((ms != u32::MAX).then(|| Duration::from_millis(u64::from(ms))))
    }
    fn ts(&mut self) -> Result<Vec<TrafficSelector>> {
        let n = usize::from(self.u8()?);
        if n > MAX_TS {
            return Err(Error::TooMany("selectors"));
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let ip_proto = self.u8()?;
            let start_port = self.u16()?;
            let end_port = self.u16()?;
            let start = self.ip()?;
            let end = self.ip()?;
            if start.is_ipv4() != end.is_ipv4() {
                return Err(Error::Malformed("selector families"));
            }
            v.push(TrafficSelector {
                ip_proto,
                start_port,
                end_port,
                start,
                end,
            });
        }
        Ok(v)
    }
}

/// Flag bits of the IKE SA record.
const F_INITIATOR: u8 = 1;
const F_NATT: u8 = 2;
const F_FRAG: u8 = 4;
const F_PENDING: u8 = 8;
/// An authentication record follows the children.
const F_AUTH: u8 = 16;
const F_ALL: u8 = F_INITIATOR | F_NATT | F_FRAG | F_PENDING | F_AUTH;
/// Certificates of a synced peer chain, at most.
const MAX_CERTS: usize = 8;
/// Flag bits of a child record.
const C_UDP: u8 = 1;
const C_ESN: u8 = 2;
const C_POLICY: u8 = 4;
const C_ALL: u8 = C_UDP | C_ESN | C_POLICY;

impl SaSnapshot {
    /// The snapshot as bytes (keys included: seal before sending).
    pub fn encode(&self) -> Result<Secret> {
        let mut w = W(Zeroizing::new(Vec::with_capacity(512)));
        w.u8(VERSION);
        w.u64(self.spi_i);
        w.u64(self.spi_r);
        let mut f = 0;
        if self.initiator {
            f |= F_INITIATOR;
        }
        if self.natt {
            f |= F_NATT;
        }
        if self.frag_size.is_some() {
            f |= F_FRAG;
        }
        if self.pending.is_some() {
            f |= F_PENDING;
        }
        if self.auth.is_some() {
            f |= F_AUTH;
        }
        w.u8(f);
        w.u16(self.suite.encr.id());
        w.u16(self.suite.encr.key_bits());
        w.u16(self.suite.prf.id());
        w.u16(self.suite.integ.map_or(0, Integ::id));
        w.u16(self.suite.dh.id());
        w.u32(self.next_req);
        w.u32(self.peer_next);
        w.addr(self.local);
        w.addr(self.remote);
        w.u16(self.frag_size.unwrap_or(0));
        w.life(self.rekey_in);
        w.life(self.expire_in);
        let k = &self.keys;
        for s in [
            &k.sk_d, &k.sk_ai, &k.sk_ar, &k.sk_ei, &k.sk_er, &k.sk_pi, &k.sk_pr,
        ] {
            w.bytes(s)?;
        }
        if let Some(p) = &self.pending {
            w.u32(p.msg_id);
            let (kind, spi) = match p.kind {
                InFlight::Dpd => (1, 0),
                InFlight::DeleteIke => (2, 0),
                InFlight::DeleteChild(s) => (3, s),
                InFlight::Other => (0, 0),
            };
            w.u8(kind);
            w.u32(spi);
            w.u8(u8::try_from(p.data.len()).map_err(|_| Error::TooMany("fragments"))?);
            for d in &p.data {
                w.bytes(d)?;
            }
        }
        w.u8(u8::try_from(self.children.len()).map_err(|_| Error::TooMany("children"))?);
        for c in &self.children {
            let k = &c.keys;
            w.u32(k.spi_in);
            w.u32(k.spi_out);
            let mut f = 0;
            if k.udp_encap {
                f |= C_UDP;
            }
            if k.esn {
                f |= C_ESN;
            }
            if k.policy.is_some() {
                f |= C_POLICY;
            }
            w.u8(f);
            w.u32(k.policy.unwrap_or(0));
            w.life(c.rekey_in);
            w.life(c.expire_in);
            w.bytes(k.algorithm.as_bytes())?;
            for s in [
                &k.enc_key_in,
                &k.enc_key_out,
                &k.integ_key_in,
                &k.integ_key_out,
            ] {
                w.bytes(s)?;
            }
            w.ts(&k.local_ts)?;
            w.ts(&k.remote_ts)?;
            w.addr(k.local);
            w.addr(k.remote);
        }
        if let Some(a) = &self.auth {
            w.0.extend_from_slice(&a.local.to_code());
            w.0.extend_from_slice(&a.remote.to_code());
            w.bytes(&a.peer_id.to_body())?;
            let chain = a.peer_cert.as_ref().map_or(&[][..], |c| c.chain.as_slice());
            w.u8(u8::try_from(chain.len()).map_err(|_| Error::TooMany("certificates"))?);
            for c in chain {
                w.bytes(c)?;
            }
        }
        Ok(w.0)
    }

    /// Parses [`SaSnapshot::encode`]'s bytes; any input gives Ok or Err,
    /// never a panic, and allocates no more than its own length. Only the
    /// canonical encoding is taken (unknown flags and unused fields zero),
    /// so what parses encodes back to the same bytes.
    pub fn decode(b: &[u8]) -> Result<SaSnapshot> {
        let mut r = R(b);
        if r.u8()? != VERSION {
            return Err(Error::Unsupported("SA snapshot version"));
        }
        let spi_i = r.u64()?;
        let spi_r = r.u64()?;
        let f = r.u8()?;
        if f & !F_ALL != 0 {
            return Err(Error::Malformed("snapshot flags"));
        }
        let encr = Encr::from_transform(r.u16()?, Some(r.u16()?))
            .ok_or(Error::Unsupported("snapshot encryption"))?;
        let prf = Prf::from_id(r.u16()?).ok_or(Error::Unsupported("snapshot PRF"))?;
        let integ = match r.u16()? {
            0 => None,
            id => Some(Integ::from_id(id).ok_or(Error::Unsupported("snapshot integrity"))?),
        };
        let dh = DhGroup::from_id(r.u16()?).ok_or(Error::Unsupported("snapshot DH group"))?;
        if encr.is_aead() != integ.is_none() {
            return Err(Error::Malformed("snapshot suite"));
        }
        let suite = IkeSuite {
            encr,
            prf,
            integ,
            dh,
        };
        let next_req = r.u32()?;
        let peer_next = r.u32()?;
        let local = r.addr()?;
        let remote = r.addr()?;
        let frag = r.u16()?;
        if f & F_FRAG == 0 && frag != 0 {
            return Err(Error::Malformed("snapshot fragment size"));
        }
        let rekey_in = r.life()?;
        let expire_in = r.life()?;
        let keys = IkeKeys {
            sk_d: r.secret()?,
            sk_ai: r.secret()?,
            sk_ar: r.secret()?,
            sk_ei: r.secret()?,
            sk_er: r.secret()?,
            sk_pi: r.secret()?,
            sk_pr: r.secret()?,
        };
        let integ_len = integ.map_or(0, Integ::key_len);
        let lens_ok = keys.sk_d.len() == prf.out_len()
            && keys.sk_pi.len() == prf.out_len()
            && keys.sk_pr.len() == prf.out_len()
            && keys.sk_ai.len() == integ_len
            && keys.sk_ar.len() == integ_len
            && keys.sk_ei.len() == encr.keymat_len()
            && keys.sk_er.len() == encr.keymat_len();
        if !lens_ok {
            return Err(Error::Malformed("snapshot key lengths"));
        }
        let pending = if f & F_PENDING != 0 {
            let msg_id = r.u32()?;
            let kind = r.u8()?;
            let spi = r.u32()?;
            let kind = match kind {
                0 => InFlight::Other,
                1 => InFlight::Dpd,
                2 => InFlight::DeleteIke,
                3 => InFlight::DeleteChild(spi),
                _ => return Err(Error::Malformed("snapshot request kind")),
            };
            if spi != 0 && !matches!(kind, InFlight::DeleteChild(_)) {
                return Err(Error::Malformed("snapshot request SPI"));
            }
            let n = usize::from(r.u8()?);
            if n == 0 || n > MAX_FRAGS {
                return Err(Error::TooMany("fragments"));
            }
            let mut data = Vec::with_capacity(n);
            for _ in 0..n {
                data.push(r.bytes()?.to_vec());
            }
            Some(PendingSnapshot { msg_id, kind, data })
        } else {
            None
        };
        let n = usize::from(r.u8()?);
        if n > MAX_CHILDREN {
            return Err(Error::TooMany("children"));
        }
        let mut children = Vec::with_capacity(n);
        for _ in 0..n {
            let spi_in = r.u32()?;
            let spi_out = r.u32()?;
            let cf = r.u8()?;
            let policy = r.u32()?;
            if cf & !C_ALL != 0 || (cf & C_POLICY == 0 && policy != 0) {
                return Err(Error::Malformed("snapshot child flags"));
            }
            let rekey_in = r.life()?;
            let expire_in = r.life()?;
            let algorithm = std::str::from_utf8(r.bytes()?)
                .map_err(|_| Error::Malformed("snapshot algorithm"))?
                .to_owned();
            let enc_key_in = r.secret()?;
            let enc_key_out = r.secret()?;
            let integ_key_in = r.secret()?;
            let integ_key_out = r.secret()?;
            let local_ts = r.ts()?;
            let remote_ts = r.ts()?;
            let local = r.addr()?;
            let remote = r.addr()?;
            children.push(ChildSnapshot {
                keys: ChildSaKeys {
                    spi_in,
                    spi_out,
                    algorithm,
                    enc_key_in,
                    enc_key_out,
                    integ_key_in,
                    integ_key_out,
                    local_ts,
                    remote_ts,
                    udp_encap: cf & C_UDP != 0,
                    esn: cf & C_ESN != 0,
                    local,
                    remote,
                    policy: (cf & C_POLICY != 0).then_some(policy),
                },
                rekey_in,
                expire_in,
            });
        }
        let auth = if f & F_AUTH != 0 {
            let method = |r: &mut R| -> Result<AuthMethod> {
                let c = [r.u8()?, r.u8()?];
                AuthMethod::from_code(c).ok_or(Error::Malformed("snapshot auth method"))
            };
            let local = method(&mut r)?;
            let remote = method(&mut r)?;
            let id = r.bytes()?;
            let peer_id = Identity::parse(id)?;
            if peer_id.to_body() != id {
                return Err(Error::Malformed("snapshot identity"));
            }
            let n = usize::from(r.u8()?);
            if n > MAX_CERTS {
                return Err(Error::TooMany("certificates"));
            }
            let mut chain = Vec::with_capacity(n);
            for _ in 0..n {
                chain.push(r.bytes()?.to_vec());
            }
            let peer_cert = match chain.is_empty() {
                true => None,
                false => Some(
                    PeerCert::from_chain(chain)
                        .map_err(|_| Error::Malformed("snapshot certificate"))?,
                ),
            };
            Some(AuthInfo {
                local,
                remote,
                peer_id,
                peer_cert,
            })
        } else {
            None
        };
        if !r.0.is_empty() {
            return Err(Error::BadLength("SA snapshot"));
        }
        Ok(SaSnapshot {
            spi_i,
            spi_r,
            initiator: f & F_INITIATOR != 0,
            suite,
            keys,
            next_req,
            peer_next,
            local,
            remote,
            natt: f & F_NATT != 0,
            frag_size: (f & F_FRAG != 0).then_some(frag),
            rekey_in,
            expire_in,
            pending,
            children,
            auth,
        })
    }

    /// The encoding with the lifetimes left out: equal for two snapshots
    /// of an SA in which nothing but time moved, so a sender can tell a
    /// change (new message ID, rekey, delete, request in flight) from the
    /// clock running.
    pub fn change_key(&self) -> Result<Secret> {
        let mut s = self.clone();
        s.rekey_in = None;
        s.expire_in = None;
        for c in &mut s.children {
            c.rekey_in = None;
            c.expire_in = None;
        }
        s.encode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(n: usize, b: u8) -> Secret {
        Zeroizing::new(vec![b; n])
    }

    fn sample(spi: u64, ids: (u32, u32), v6: bool, child_spi: u32) -> SaSnapshot {
        let ip: IpAddr = if v6 {
            "2001:db8::1".parse().unwrap()
        } else {
            "192.0.2.1".parse().unwrap()
        };
        let suite = IkeSuite {
            encr: Encr::AesGcm16(32),
            prf: Prf::from_id(5).unwrap(),
            integ: None,
            dh: DhGroup::Curve25519,
        };
        let p = suite.prf.out_len();
        let e = suite.encr.keymat_len();
        let ts = TrafficSelector::from_prefix(ip, 24);
        SaSnapshot {
            spi_i: spi,
            spi_r: !spi,
            initiator: spi & 1 == 0,
            suite,
            keys: IkeKeys {
                sk_d: key(p, 1),
                sk_ai: key(0, 2),
                sk_ar: key(0, 3),
                sk_ei: key(e, 4),
                sk_er: key(e, 5),
                sk_pi: key(p, 6),
                sk_pr: key(p, 7),
            },
            next_req: ids.0,
            peer_next: ids.1,
            local: SocketAddr::new(ip, 4500),
            remote: SocketAddr::new(ip, 500),
            natt: v6,
            frag_size: v6.then_some(1280),
            rekey_in: Some(Duration::from_millis(u64::from(ids.0))),
            expire_in: None,
            pending: Some(PendingSnapshot {
                msg_id: ids.0,
                kind: InFlight::DeleteChild(child_spi),
                data: vec![vec![9; 60]],
            }),
            children: vec![ChildSnapshot {
                keys: ChildSaKeys {
                    spi_in: child_spi,
                    spi_out: !child_spi,
                    algorithm: "aes128gcm16".into(),
                    enc_key_in: key(20, 8),
                    enc_key_out: key(20, 9),
                    integ_key_in: key(0, 0),
                    integ_key_out: key(0, 0),
                    local_ts: vec![ts],
                    remote_ts: vec![ts, ts],
                    udp_encap: v6,
                    esn: !v6,
                    local: SocketAddr::new(ip, 4500),
                    remote: SocketAddr::new(ip, 4500),
                    policy: v6.then_some(7),
                },
                rekey_in: None,
                expire_in: Some(Duration::from_secs(3600)),
            }],
            auth: v6.then(|| AuthInfo {
                local: AuthMethod::Psk,
                remote: AuthMethod::Signature(crate::pki::scheme::Scheme::Ed25519),
                peer_id: Identity::Fqdn("peer.example".into()),
                peer_cert: None,
            }),
        }
    }

    proptest! {
        #[test]
        fn round_trip(spi in any::<u64>(), a in any::<u32>(), b in any::<u32>(),
                      v6 in any::<bool>(), c in any::<u32>()) {
            let s = sample(spi, (a, b), v6, c);
            let bytes = s.encode().unwrap();
            let d = SaSnapshot::decode(&bytes).unwrap();
            prop_assert_eq!(&*d.encode().unwrap(), &*bytes);
            prop_assert_eq!((d.spi_i, d.spi_r, d.next_req, d.peer_next), (spi, !spi, a, b));
            prop_assert_eq!(d.children[0].keys.policy, v6.then_some(7));
            prop_assert_eq!(d.pending.unwrap().kind, InFlight::DeleteChild(c));
            prop_assert_eq!(d.auth, s.auth);
        }

        #[test]
        fn any_bytes_decode_without_panic(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(s) = SaSnapshot::decode(&b) {
                prop_assert_eq!(&*s.encode().unwrap(), &b[..]);
            }
        }

        #[test]
        fn truncated_or_flipped_encodings_never_panic(cut in 0usize..400, at in 0usize..400, x in 1u8..) {
            let mut bytes = sample(1, (2, 3), true, 300).encode().unwrap().to_vec();
            if at < bytes.len() {
                bytes[at] ^= x;
            }
            bytes.truncate(cut);
            prop_assert!(SaSnapshot::decode(&bytes).is_err() || cut >= bytes.len());
        }
    }

    #[test]
    fn debug_redacts_keys() {
        let s = sample(1, (2, 3), false, 300);
        let d = format!("{s:?}");
        assert!(d.contains("redacted") && !d.contains("[1, 1"));
    }
}
