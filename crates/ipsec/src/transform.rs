//! The keyed transform of one SA direction, and the cryptography of a
//! batch of ESP packets under it (RFC 4303 §3.3.2, §3.4.2-§3.4.4):
//! [`Transform::seal`] encrypts and appends the ICV, [`Transform::verify`]
//! checks the ICV (the AEADs decrypt in the same pass),
//! [`Transform::decrypt`] deciphers CBC once the ICV was found good. The
//! framing (trailer, header, outer headers, replay window) is
//! [`crate::tunnel_mode`]'s; which engine runs the cipher is
//! [`crate::engine`]'s choice.

use aws_lc_rs::cipher::{self, DecryptionContext, EncryptionContext};
use aws_lc_rs::iv::FixedLength;
use aws_lc_rs::{aead, constant_time, hmac};
use wire::esp::HEADER_LEN;
use zeroize::Zeroizing;

use crate::engine::Engine;
use crate::{Algorithm, EspError};

/// Packets the multi-buffer engine takes per call; a vector is cut into
/// such chunks (its packets stay in the L2 cache between the CBC and the
/// HMAC pass).
pub(crate) const CHUNK: usize = 64;

/// One ESP packet of a batch, header to ICV, and its full (ESN) sequence
/// number.
pub(crate) struct Unit<'a> {
    pub(crate) esp: &'a mut [u8],
    pub(crate) seq: u64,
}

/// AAD of the AEAD transforms (RFC 4106 §5, RFC 7634 §2.1): SPI ‖ seq (32
/// bit), or SPI ‖ seq-hi ‖ seq-lo with ESN. Returns the buffer and length.
#[inline]
fn aead_aad(spi: u32, seq: u64, esn: bool) -> ([u8; 12], usize) {
    let mut a = [0u8; 12];
    a[..4].copy_from_slice(&spi.to_be_bytes());
    if esn {
        a[4..12].copy_from_slice(&seq.to_be_bytes());
        (a, 12)
    } else {
        a[4..8].copy_from_slice(&(seq as u32).to_be_bytes());
        (a, 8)
    }
}

/// Nonce = 4-byte salt ‖ 8-byte explicit IV (RFC 4106 §4, RFC 7634 §2).
#[inline]
fn aead_nonce(salt: &[u8; 4], iv: &[u8]) -> Result<aead::Nonce, EspError> {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(salt);
    n.get_mut(4..12)
        .ok_or(EspError::Crypto)?
        .copy_from_slice(iv.get(..8).ok_or(EspError::Crypto)?);
    Ok(aead::Nonce::assume_unique_for_key(n))
}

/// The high 32 bits of an ESN sequence number: not sent, but covered by
/// the ICV as if appended to the packet (RFC 4303 §2.2.1, §3.3.2.1).
#[inline]
fn seq_hi(seq: u64) -> [u8; 4] {
    ((seq >> 32) as u32).to_be_bytes()
}

/// HMAC over ESP header ‖ IV ‖ ciphertext (‖ seq-hi with ESN).
#[inline]
fn cbc_mac(key: &hmac::Key, covered: &[u8], seq: u64, esn: bool) -> hmac::Tag {
    let mut ctx = hmac::Context::with_key(key);
    ctx.update(covered);
    if esn {
        ctx.update(&seq_hi(seq));
    }
    ctx.sign()
}

/// An ESP packet cut into header ‖ IV, ciphertext and ICV.
type Parts<'b> = (&'b mut [u8], &'b mut [u8], &'b mut [u8]);

/// Which way [`Transform::aead`] takes a unit.
#[derive(Clone, Copy)]
enum Way {
    Seal,
    Open,
}

/// The keys of one direction.
enum Keys {
    Aead {
        key: aead::LessSafeKey,
        salt: Zeroizing<[u8; 4]>,
    },
    CbcEnc {
        key: cipher::EncryptingKey,
        mac: hmac::Key,
    },
    CbcDec {
        key: cipher::DecryptingKey,
        mac: hmac::Key,
    },
}

/// An SA direction's algorithm, keys and engine.
pub(crate) struct Transform {
    alg: Algorithm,
    spi: u32,
    esn: bool,
    keys: Keys,
    engine: Engine,
    /// The same keys expanded for the multi-buffer engine, when it runs.
    #[cfg(target_arch = "x86_64")]
    mb: Option<crate::engine::mb::Keys>,
}

impl Transform {
    /// Keys `alg` from `key` (cipher key ‖ salt, or cipher key ‖
    /// integrity key) for one direction, on `engine` where it can run
    /// `alg` (else aws-lc).
    pub(crate) fn new(
        alg: Algorithm,
        spi: u32,
        esn: bool,
        key: &[u8],
        outbound: bool,
        engine: Engine,
    ) -> Result<Self, EspError> {
        if key.len() != alg.key_len() {
            return Err(EspError::BadConfig);
        }
        let (k, rest) = key.split_at(alg.enc_key_len());
        let mut t = Transform {
            alg,
            spi,
            esn,
            keys: Self::keys(alg, k, rest, outbound)?,
            engine: Engine::AwsLc,
            #[cfg(target_arch = "x86_64")]
            mb: None,
        };
        #[cfg(target_arch = "x86_64")]
        if let (Engine::IpsecMb(c), false) = (engine, alg.is_aead()) {
            t.mb = Some(crate::engine::mb::Keys::new(c, alg, k, rest)?);
            t.engine = engine;
        }
        let _ = engine;
        Ok(t)
    }

    fn keys(alg: Algorithm, k: &[u8], rest: &[u8], outbound: bool) -> Result<Keys, EspError> {
        if alg.is_aead() {
            let a = match alg {
                Algorithm::AesGcm128 => &aead::AES_128_GCM,
                Algorithm::AesGcm256 => &aead::AES_256_GCM,
                _ => &aead::CHACHA20_POLY1305,
            };
            let unbound = aead::UnboundKey::new(a, k).map_err(|_| EspError::BadConfig)?;
            let mut salt = Zeroizing::new([0u8; 4]);
            salt.copy_from_slice(rest);
            return Ok(Keys::Aead {
                key: aead::LessSafeKey::new(unbound),
                salt,
            });
        }
        let (c, h) = match alg {
            Algorithm::AesCbc128HmacSha1_96 => {
                (&cipher::AES_128, hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY)
            }
            _ => (&cipher::AES_256, hmac::HMAC_SHA256),
        };
        let mac = hmac::Key::new(h, rest);
        let unbound = cipher::UnboundCipherKey::new(c, k).map_err(|_| EspError::BadConfig)?;
        Ok(if outbound {
            Keys::CbcEnc {
                key: cipher::EncryptingKey::cbc(unbound).map_err(|_| EspError::BadConfig)?,
                mac,
            }
        } else {
            Keys::CbcDec {
                key: cipher::DecryptingKey::cbc(unbound).map_err(|_| EspError::BadConfig)?,
                mac,
            }
        })
    }

    /// The engine that runs this transform.
    pub(crate) fn engine(&self) -> Engine {
        self.engine
    }

    /// ESP header and IV: where the ciphertext starts.
    fn front(&self) -> usize {
        HEADER_LEN + self.alg.iv_len()
    }

    /// End of the ciphertext of an ESP packet of `len` bytes, if the packet
    /// has room for header, IV and ICV and (CBC) whole blocks.
    fn ct_end(&self, len: usize) -> Option<usize> {
        let end = len.checked_sub(self.alg.icv_len())?;
        let ct = end.checked_sub(self.front())?;
        let bs = self.alg.block_size();
        (bs == 1 || (ct > 0 && ct % bs == 0)).then_some(end)
    }

    /// Leaves out (as `crypto`) the units whose length cannot be an ESP
    /// packet of this transform: the engines may then slice freely.
    fn only_well_formed(&self, units: &mut [Option<Unit<'_>>], res: &mut [Result<(), EspError>]) {
        for (u, r) in units.iter_mut().zip(res.iter_mut()) {
            if u.as_ref()
                .is_some_and(|u| self.ct_end(u.esp.len()).is_none())
            {
                *u = None;
                *r = Err(EspError::Crypto);
            }
        }
    }

    /// Encrypts every unit where it lies and writes its ICV (RFC 4303
    /// §3.3.2). Each unit is laid out already: header, IV, payload,
    /// padding, trailer, room for the ICV. `res[i]` gets unit `i`'s
    /// failure; a failed unit must not be sent.
    pub(crate) fn seal(&self, units: &mut [Option<Unit<'_>>], res: &mut [Result<(), EspError>]) {
        self.only_well_formed(units, res);
        match &self.keys {
            Keys::Aead { key, salt } => each(units, res, |u| self.aead(Way::Seal, key, salt, u)),
            Keys::CbcEnc { key, mac } => {
                #[cfg(target_arch = "x86_64")]
                if let Some(k) = &self.mb {
                    for (c, r) in units.chunks_mut(CHUNK).zip(res.chunks_mut(CHUNK)) {
                        match crate::engine::mb::with(k.choice, |m| self.seal_mb(m, k, c)) {
                            Some(Ok(())) => {}
                            // Half done (ciphered, no ICV): nothing to send.
                            Some(Err(_)) => each(c, r, |_| Err(EspError::Crypto)),
                            None => each(c, r, |u| self.seal_cbc(key, mac, u)),
                        }
                    }
                    return;
                }
                each(units, res, |u| self.seal_cbc(key, mac, u));
            }
            Keys::CbcDec { .. } => each(units, res, |_| Err(EspError::Crypto)),
        }
    }

    /// Checks every unit's ICV (RFC 4303 §3.4.4); the AEADs decrypt in the
    /// same pass. `res[i]` gets `integrity` for a unit that is not
    /// authentic; its bytes are then not to be trusted.
    pub(crate) fn verify(&self, units: &mut [Option<Unit<'_>>], res: &mut [Result<(), EspError>]) {
        self.only_well_formed(units, res);
        match &self.keys {
            Keys::Aead { key, salt } => each(units, res, |u| self.aead(Way::Open, key, salt, u)),
            Keys::CbcDec { mac, .. } => {
                #[cfg(target_arch = "x86_64")]
                if let Some(k) = &self.mb {
                    for (c, r) in units.chunks_mut(CHUNK).zip(res.chunks_mut(CHUNK)) {
                        let done =
                            crate::engine::mb::with(k.choice, |m| self.verify_mb(m, k, c, r));
                        // Hashing only reads the packets: aws-lc can redo it.
                        if !matches!(done, Some(Ok(()))) {
                            each(c, r, |u| self.verify_cbc(mac, u));
                        }
                    }
                    return;
                }
                each(units, res, |u| self.verify_cbc(mac, u));
            }
            Keys::CbcEnc { .. } => each(units, res, |_| Err(EspError::Crypto)),
        }
    }

    /// Deciphers every (authentic) unit's CBC payload in place (RFC 4303
    /// §3.4.4.1: only after the ICV matched); nothing for the AEADs, which
    /// did it in [`Transform::verify`].
    pub(crate) fn decrypt(&self, units: &mut [Option<Unit<'_>>], res: &mut [Result<(), EspError>]) {
        self.only_well_formed(units, res);
        let Keys::CbcDec { key, .. } = &self.keys else {
            return;
        };
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = &self.mb {
            for (c, r) in units.chunks_mut(CHUNK).zip(res.chunks_mut(CHUNK)) {
                match crate::engine::mb::with(k.choice, |m| self.decrypt_mb(m, k, c)) {
                    Some(Ok(())) => {}
                    Some(Err(_)) => each(c, r, |_| Err(EspError::Crypto)),
                    None => each(c, r, |u| self.decrypt_cbc(key, u)),
                }
            }
            return;
        }
        each(units, res, |u| self.decrypt_cbc(key, u));
    }

    /// Splits a well-formed unit into header ‖ IV, ciphertext and ICV.
    fn parts<'b>(&self, esp: &'b mut [u8]) -> Result<Parts<'b>, EspError> {
        let end = self.ct_end(esp.len()).ok_or(EspError::Crypto)?;
        let (rest, icv) = esp.split_at_mut(end);
        let (head, ct) = rest.split_at_mut(self.front());
        Ok((head, ct, icv))
    }

    /// Seals or opens one unit in place with an AEAD: the nonce is salt ‖
    /// IV (RFC 4106 §4), the AAD SPI ‖ sequence number (§5); a tag that
    /// does not match is an ICV failure.
    fn aead(
        &self,
        way: Way,
        key: &aead::LessSafeKey,
        salt: &[u8; 4],
        u: &mut Unit<'_>,
    ) -> Result<(), EspError> {
        let (head, ct, icv) = self.parts(u.esp)?;
        let nonce = aead_nonce(salt, &head[HEADER_LEN..])?;
        let (aad, alen) = aead_aad(self.spi, u.seq, self.esn);
        let aad = aead::Aad::from(&aad[..alen]);
        match way {
            Way::Seal => {
                let tag = key
                    .seal_in_place_separate_tag(nonce, aad, ct)
                    .map_err(|_| EspError::Crypto)?;
                icv.copy_from_slice(tag.as_ref());
            }
            Way::Open => {
                key.open_in_place_separate_tag(nonce, aad, icv, ct)
                    .map_err(|_| EspError::IcvFail)?;
            }
        }
        Ok(())
    }

    fn iv16(head: &[u8]) -> Result<[u8; 16], EspError> {
        head.get(HEADER_LEN..HEADER_LEN + 16)
            .and_then(|b| b.try_into().ok())
            .ok_or(EspError::Crypto)
    }

    fn seal_cbc(
        &self,
        key: &cipher::EncryptingKey,
        mac: &hmac::Key,
        u: &mut Unit<'_>,
    ) -> Result<(), EspError> {
        let icv_len = self.alg.icv_len();
        let end = self.ct_end(u.esp.len()).ok_or(EspError::Crypto)?;
        let (covered, icv) = u.esp.split_at_mut(end);
        let (head, ct) = covered.split_at_mut(self.front());
        let iv = Self::iv16(head)?;
        key.less_safe_encrypt(ct, EncryptionContext::Iv128(FixedLength::from(iv)))
            .map_err(|_| EspError::Crypto)?;
        let tag = cbc_mac(mac, covered, u.seq, self.esn);
        icv.copy_from_slice(tag.as_ref().get(..icv_len).ok_or(EspError::Crypto)?);
        Ok(())
    }

    fn verify_cbc(&self, mac: &hmac::Key, u: &mut Unit<'_>) -> Result<(), EspError> {
        let end = self.ct_end(u.esp.len()).ok_or(EspError::Crypto)?;
        let (covered, icv) = u.esp.split_at(end);
        let tag = cbc_mac(mac, covered, u.seq, self.esn);
        constant_time::verify_slices_are_equal(tag.as_ref().get(..icv.len()).unwrap_or(&[]), icv)
            .map_err(|_| EspError::IcvFail)
    }

    fn decrypt_cbc(&self, key: &cipher::DecryptingKey, u: &mut Unit<'_>) -> Result<(), EspError> {
        let (head, ct, _) = self.parts(u.esp)?;
        let iv = Self::iv16(head)?;
        key.decrypt(ct, DecryptionContext::Iv128(FixedLength::from(iv)))
            .map_err(|_| EspError::Crypto)?;
        Ok(())
    }
}

/// Runs `f` on every present unit, recording its failure.
fn each(
    units: &mut [Option<Unit<'_>>],
    res: &mut [Result<(), EspError>],
    mut f: impl FnMut(&mut Unit<'_>) -> Result<(), EspError>,
) {
    for (u, r) in units.iter_mut().zip(res.iter_mut()) {
        if let Some(u) = u {
            if let Err(e) = f(u) {
                *r = Err(e);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod mb_batch {
    //! The multi-buffer engine over one chunk (at most [`CHUNK`] units,
    //! all well-formed: [`Transform::only_well_formed`] ran).

    use ipsec_mb::{CbcJob, Direction, HmacJob, Mgr};
    use wire::esp::HEADER_LEN;

    use super::{seq_hi, Transform, Unit, CHUNK};
    use crate::engine::mb::Keys;
    use crate::EspError;

    impl Transform {
        /// Bytes the ICV covers: up to the ciphertext's end, plus the 4
        /// bytes of seq-hi written over the ICV's start with ESN.
        fn covered(&self, len: usize) -> usize {
            len - self.alg.icv_len() + if self.esn { 4 } else { 0 }
        }

        fn cbc_jobs<'b, 'u: 'b>(
            &self,
            units: &'b mut [Option<Unit<'u>>],
        ) -> impl Iterator<Item = CbcJob<'b>> + use<'b, 'u> {
            let (front, icv) = (self.front(), self.alg.icv_len());
            units.iter_mut().flatten().map(move |u| {
                let end = u.esp.len() - icv;
                let (head, rest) = u.esp.split_at_mut(front);
                let mut iv = [0u8; 16];
                iv.copy_from_slice(&head[HEADER_LEN..HEADER_LEN + 16]);
                CbcJob {
                    data: &mut rest[..end - front],
                    iv,
                }
            })
        }

        /// Writes seq-hi where the ICV starts (ESN), so that one
        /// contiguous hash covers it; returns nothing else.
        fn put_seq_hi(&self, units: &mut [Option<Unit<'_>>]) {
            if !self.esn {
                return;
            }
            let icv = self.alg.icv_len();
            for u in units.iter_mut().flatten() {
                let end = u.esp.len() - icv;
                u.esp[end..end + 4].copy_from_slice(&seq_hi(u.seq));
            }
        }

        pub(super) fn seal_mb(
            &self,
            m: &mut Mgr,
            k: &Keys,
            units: &mut [Option<Unit<'_>>],
        ) -> Result<(), ipsec_mb::Error> {
            let icv = self.alg.icv_len();
            m.cbc(&k.aes, Direction::Encrypt, self.cbc_jobs(units))?;
            self.put_seq_hi(units);
            let mut tags = [[0u8; 32]; CHUNK];
            m.hmac(
                &k.mac,
                icv,
                units
                    .iter()
                    .flatten()
                    .zip(tags.iter_mut())
                    .map(|(u, tag)| HmacJob {
                        msg: &u.esp[..self.covered(u.esp.len())],
                        tag,
                    }),
            )?;
            for (u, t) in units.iter_mut().flatten().zip(&tags) {
                let end = u.esp.len() - icv;
                u.esp[end..].copy_from_slice(&t[..icv]);
            }
            Ok(())
        }

        pub(super) fn verify_mb(
            &self,
            m: &mut Mgr,
            k: &Keys,
            units: &mut [Option<Unit<'_>>],
            res: &mut [Result<(), EspError>],
        ) -> Result<(), ipsec_mb::Error> {
            let icv = self.alg.icv_len();
            // The received ICVs, put back after hashing (seq-hi lay there).
            let mut got = [[0u8; 16]; CHUNK];
            for (u, g) in units.iter().flatten().zip(got.iter_mut()) {
                g[..icv].copy_from_slice(&u.esp[u.esp.len() - icv..]);
            }
            self.put_seq_hi(units);
            let mut tags = [[0u8; 32]; CHUNK];
            let r = m.hmac(
                &k.mac,
                icv,
                units
                    .iter()
                    .flatten()
                    .zip(tags.iter_mut())
                    .map(|(u, tag)| HmacJob {
                        msg: &u.esp[..self.covered(u.esp.len())],
                        tag,
                    }),
            );
            for (u, g) in units.iter_mut().flatten().zip(&got) {
                let end = u.esp.len() - icv;
                u.esp[end..].copy_from_slice(&g[..icv]);
            }
            r?;
            let mut k = 0;
            for (u, r) in units.iter().zip(res.iter_mut()) {
                if u.is_some() {
                    if aws_lc_rs::constant_time::verify_slices_are_equal(
                        &tags[k][..icv],
                        &got[k][..icv],
                    )
                    .is_err()
                    {
                        *r = Err(EspError::IcvFail);
                    }
                    k += 1;
                }
            }
            Ok(())
        }

        pub(super) fn decrypt_mb(
            &self,
            m: &mut Mgr,
            k: &Keys,
            units: &mut [Option<Unit<'_>>],
        ) -> Result<(), ipsec_mb::Error> {
            m.cbc(&k.aes, Direction::Decrypt, self.cbc_jobs(units))
        }
    }
}

#[cfg(test)]
mod tests;
