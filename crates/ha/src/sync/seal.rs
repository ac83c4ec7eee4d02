//! Sealing and opening: the per-epoch AEAD key, the counter nonces, and
//! the receiver's checks against replays, stale epochs, skew and
//! reflections (the parent's doc says why).

use super::{
    Body, BodyRepr, Epoch, Header, IkeSasBody, IkeSasRepr, Kind, Reject, RoutesBody, RoutesRepr,
    TunnelsBody, TunnelsRepr, HEADER_LEN, HKDF_INFO, KEY_LEN, MAGIC, MAX_DATAGRAM, MAX_SKEW_MS,
    TAG_LEN, VERSION,
};
use aws_lc_rs::{aead, hkdf};
use std::fmt;
use zeroize::Zeroizing;

/// Why a message could not be sealed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SealError {
    Crypto,
    TooLarge,
    /// 2^64 messages in one epoch: restart.
    Exhausted,
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SealError::Crypto => "the AEAD failed",
            SealError::TooLarge => "message larger than a sync datagram",
            SealError::Exhausted => "message counter exhausted",
        })
    }
}

/// The shared key from the key file (zeroized on drop).
#[derive(Clone)]
pub struct SyncKey(Zeroizing<[u8; KEY_LEN]>);

impl SyncKey {
    pub fn new(bytes: &[u8]) -> Option<SyncKey> {
        let mut k = Zeroizing::new([0u8; KEY_LEN]);
        if bytes.len() != KEY_LEN {
            return None;
        }
        k.copy_from_slice(bytes);
        Some(SyncKey(k))
    }

    /// The AEAD key of `epoch` (RFC 5869: extract with the epoch as salt,
    /// expand with a fixed label).
    fn epoch_key(&self, epoch: &Epoch) -> Result<aead::LessSafeKey, SealError> {
        let salt = hkdf::Salt::new(hkdf::HKDF_SHA256, &epoch.bytes());
        let prk = salt.extract(&self.0[..]);
        let info = [HKDF_INFO];
        let okm = prk
            .expand(&info, &aead::AES_256_GCM)
            .map_err(|_| SealError::Crypto)?;
        Ok(aead::LessSafeKey::new(aead::UnboundKey::from(okm)))
    }
}

impl fmt::Debug for SyncKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SyncKey(..)")
    }
}

fn nonce(counter: u64) -> aead::Nonce {
    let mut n = [0u8; aead::NONCE_LEN];
    n[4..].copy_from_slice(&counter.to_be_bytes());
    aead::Nonce::assume_unique_for_key(n)
}

/// Seals our messages: one epoch per process, counters from 1.
pub struct Sealer {
    epoch: Epoch,
    key: aead::LessSafeKey,
    next: u64,
}

impl Sealer {
    pub fn new(key: &SyncKey, epoch: Epoch) -> Result<Sealer, SealError> {
        Ok(Sealer {
            epoch,
            key: key.epoch_key(&epoch)?,
            next: 1,
        })
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Messages sealed so far.
    pub fn sent(&self) -> u64 {
        self.next - 1
    }

    /// One datagram: header, sealed `body`, tag.
    pub fn seal(&mut self, kind: Kind, body: &[u8]) -> Result<Vec<u8>, SealError> {
        if HEADER_LEN + body.len() + TAG_LEN > MAX_DATAGRAM {
            return Err(SealError::TooLarge);
        }
        if self.next == u64::MAX {
            return Err(SealError::Exhausted);
        }
        let counter = self.next;
        self.next += 1;
        let mut out = Vec::with_capacity(HEADER_LEN + body.len() + TAG_LEN);
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.push(kind.code());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.epoch.bytes());
        out.extend_from_slice(&counter.to_be_bytes());
        // Zeroizing: the plaintext of an IKE SA body holds keys.
        let mut sealed = Zeroizing::new(body.to_vec());
        self.key
            .seal_in_place_append_tag(nonce(counter), aead::Aad::from(&out[..]), &mut *sealed)
            .map_err(|_| SealError::Crypto)?;
        out.extend_from_slice(&sealed);
        Ok(out)
    }
}

/// An authenticated, fresh message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub kind: Kind,
    pub epoch: Epoch,
    pub counter: u64,
    /// A new epoch of the peer (it restarted, or we did).
    pub new_epoch: bool,
    /// Send time, role and (for [`Kind::SaState`]) the SA records.
    pub body: BodyRepr,
    /// [`Kind::Routes`]: the chunk of routes.
    pub routes: Option<RoutesRepr>,
    /// [`Kind::IkeSas`]: one tunnel's IKE SAs.
    pub ike: Option<IkeSasRepr>,
    /// [`Kind::Tunnels`]: the chunk of tunnels.
    pub tunnels: Option<TunnelsRepr>,
}

/// Opens the peer's messages and keeps its epoch and last counter.
pub struct Opener {
    key: SyncKey,
    own: Epoch,
    /// The peer's current epoch, its key, and the last counter accepted.
    current: Option<(Epoch, aead::LessSafeKey, u64)>,
}

impl Opener {
    /// `own` is our sealer's epoch (a datagram carrying it is reflected).
    pub fn new(key: SyncKey, own: Epoch) -> Opener {
        Opener {
            key,
            own,
            current: None,
        }
    }

    /// The peer's current epoch.
    pub fn peer_epoch(&self) -> Option<Epoch> {
        self.current.as_ref().map(|c| c.0)
    }

    /// Opens `datagram` at wall-clock time `now_ms`. Nothing changes unless
    /// it authenticates, parses and is fresh.
    pub fn open(&mut self, datagram: &[u8], now_ms: u64) -> Result<Opened, Reject> {
        let h = Header::new_checked(datagram)?;
        let epoch = h.epoch();
        let counter = h.counter();
        if epoch == self.own {
            return Err(Reject::Reflected);
        }
        let mut fresh = None;
        match &self.current {
            Some((e, _, last)) if *e == epoch => {
                if counter <= *last {
                    return Err(Reject::Replay);
                }
            }
            Some((e, _, _)) if epoch < *e => return Err(Reject::StaleEpoch),
            _ => fresh = Some(self.key.epoch_key(&epoch).map_err(|_| Reject::Auth)?),
        }
        // Zeroizing: an IKE SA body opens into keys.
        let mut buf = Zeroizing::new(h.sealed().to_vec());
        let plain_len = {
            let key = match (&fresh, &self.current) {
                (Some(k), _) => k,
                (None, Some(c)) => &c.1,
                (None, None) => return Err(Reject::Auth),
            };
            key.open_in_place(nonce(counter), aead::Aad::from(h.aad()), &mut buf)
                .map_err(|_| Reject::Auth)?
                .len()
        };
        let plain = &buf[..plain_len];
        let role = |sent_ms, master| BodyRepr {
            sent_ms,
            master,
            records: Vec::new(),
        };
        let mut tunnels = None;
        let (repr, routes, ike) = match h.kind() {
            Kind::Routes => {
                let r = RoutesRepr::parse(&RoutesBody::new_checked(plain)?);
                (role(r.sent_ms, r.master), Some(r), None)
            }
            Kind::IkeSas => {
                let r = IkeSasRepr::parse(&IkeSasBody::new_checked(plain)?);
                (role(r.sent_ms, r.master), None, Some(r))
            }
            Kind::Tunnels => {
                let r = TunnelsRepr::parse(&TunnelsBody::new_checked(plain)?);
                let repr = role(r.sent_ms, r.master);
                tunnels = Some(r);
                (repr, None, None)
            }
            _ => (BodyRepr::parse(&Body::new_checked(plain)?), None, None),
        };
        let new_epoch = fresh.is_some();
        if new_epoch && repr.sent_ms.abs_diff(now_ms) > MAX_SKEW_MS {
            return Err(Reject::Skew);
        }
        match fresh {
            Some(k) => self.current = Some((epoch, k, counter)),
            None => {
                if let Some(c) = &mut self.current {
                    c.2 = counter;
                }
            }
        }
        Ok(Opened {
            kind: h.kind(),
            epoch,
            counter,
            new_epoch,
            body: repr,
            routes,
            ike,
            tunnels,
        })
    }
}
