//! SK payload protection (RFC 7296 §3.14): AES-CBC + HMAC, or AES-GCM
//! (RFC 5282).

use super::*;

/// Keys protecting SK payloads in one direction pair.
#[derive(Clone)]
pub struct SkKeys {
    pub(super) encr: Encr,
    pub(super) integ: Option<Integ>,
    pub(super) enc_out: Secret,
    pub(super) integ_out: Secret,
    pub(super) enc_in: Secret,
    pub(super) integ_in: Secret,
}

impl fmt::Debug for SkKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkKeys")
            .field("encr", &self.encr)
            .field("integ", &self.integ)
            .finish_non_exhaustive()
    }
}

fn gcm_key(key: &[u8]) -> Result<(aead::LessSafeKey, [u8; 4])> {
    let klen = key.len().checked_sub(4).ok_or(Error::Crypto("GCM key"))?;
    let alg = if klen == 16 {
        &aead::AES_128_GCM
    } else {
        &aead::AES_256_GCM
    };
    let k = aead::UnboundKey::new(alg, &key[..klen]).map_err(|_| Error::Crypto("GCM key"))?;
    let mut salt = [0u8; 4];
    salt.copy_from_slice(&key[klen..]);
    Ok((aead::LessSafeKey::new(k), salt))
}

fn cbc_alg(key: &[u8]) -> Result<&'static cipher::Algorithm> {
    Ok(match key.len() {
        16 => &cipher::AES_128,
        32 => &cipher::AES_256,
        _ => return Err(Error::Unsupported("AES-CBC key size")),
    })
}

impl SkKeys {
    /// Bytes of overhead an SK payload adds to its plaintext, at most.
    pub fn overhead(&self) -> usize {
        match self.encr {
            Encr::AesGcm16(_) => 4 + 8 + 1 + 16,
            Encr::AesCbc(_) => 4 + 16 + 16 + self.integ.map_or(0, Integ::icv_len),
        }
    }

    /// Encrypt `plain` into `out`, which holds the 28 header bytes
    /// (placeholder) and the SK/SKF generic header (plus SKF numbering)
    /// starting at `sk_off`. Sets lengths, writes the header, appends
    /// IV, ciphertext and ICV.
    pub fn seal(
        &self,
        out: &mut Vec<u8>,
        plain: Vec<u8>,
        sk_off: usize,
        header: &Header,
    ) -> Result<()> {
        let mut plain = Zeroizing::new(plain);
        match self.encr {
            Encr::AesGcm16(_) => {
                plain.push(0); // pad length 0 (RFC 5282 §3: no block alignment)
                let total = out.len() + 8 + plain.len() + 16;
                self.finish_header(out, total, sk_off, header)?;
                let mut iv = [0u8; 8];
                random(&mut iv)?;
                let (key, salt) = gcm_key(&self.enc_out)?;
                let mut nonce = [0u8; 12];
                nonce[..4].copy_from_slice(&salt);
                nonce[4..].copy_from_slice(&iv);
                let mut buf = plain.to_vec();
                key.seal_in_place_append_tag(
                    aead::Nonce::assume_unique_for_key(nonce),
                    aead::Aad::from(&out[..]),
                    &mut buf,
                )
                .map_err(|_| Error::Crypto("GCM seal"))?;
                out.extend_from_slice(&iv);
                out.extend_from_slice(&buf);
            }
            Encr::AesCbc(_) => {
                let integ = self.integ.ok_or(Error::Crypto("CBC without integrity"))?;
                let pad = (16 - (plain.len() + 1) % 16) % 16;
                let n = plain.len() + pad;
                plain.resize(n, 0);
                plain.push(pad as u8);
                let total = out.len() + 16 + plain.len() + integ.icv_len();
                self.finish_header(out, total, sk_off, header)?;
                let mut iv = [0u8; 16];
                random(&mut iv)?;
                let k = cipher::UnboundCipherKey::new(cbc_alg(&self.enc_out)?, &self.enc_out)
                    .map_err(|_| Error::Crypto("CBC key"))?;
                let ek = cipher::EncryptingKey::cbc(k).map_err(|_| Error::Crypto("CBC key"))?;
                let mut buf = plain.to_vec();
                ek.less_safe_encrypt(&mut buf, cipher::EncryptionContext::Iv128(iv.into()))
                    .map_err(|_| Error::Crypto("CBC encrypt"))?;
                out.extend_from_slice(&iv);
                out.extend_from_slice(&buf);
                let icv = integ.mac(&self.integ_out, out);
                out.extend_from_slice(&icv);
            }
        }
        Ok(())
    }

    fn finish_header(
        &self,
        out: &mut [u8],
        total: usize,
        sk_off: usize,
        header: &Header,
    ) -> Result<()> {
        if total > MAX_MESSAGE_LEN {
            return Err(Error::TooLong);
        }
        let mut h = *header;
        h.length = total as u32;
        h.emit(&mut out[..HEADER_LEN]);
        let plen = (total - sk_off) as u16;
        out[sk_off + 2..sk_off + 4].copy_from_slice(&plen.to_be_bytes());
        Ok(())
    }

    /// Verify and decrypt; `iv_off` is where the IV starts in `buf`
    /// (everything before it is authenticated data). Returns the inner
    /// payload chain without padding.
    pub fn open(&self, buf: &[u8], iv_off: usize) -> Result<Secret> {
        match self.encr {
            Encr::AesGcm16(_) => {
                if buf.len() < iv_off + 8 + 1 + 16 {
                    return Err(Error::Truncated("SK payload"));
                }
                let (key, salt) = gcm_key(&self.enc_in)?;
                let mut nonce = [0u8; 12];
                nonce[..4].copy_from_slice(&salt);
                nonce[4..].copy_from_slice(&buf[iv_off..iv_off + 8]);
                let mut ct = Zeroizing::new(buf[iv_off + 8..].to_vec());
                let pt = key
                    .open_in_place(
                        aead::Nonce::assume_unique_for_key(nonce),
                        aead::Aad::from(&buf[..iv_off]),
                        &mut ct,
                    )
                    .map_err(|_| Error::Integrity)?;
                strip_padding(pt)
            }
            Encr::AesCbc(_) => {
                let integ = self.integ.ok_or(Error::Crypto("CBC without integrity"))?;
                let icv = integ.icv_len();
                if buf.len() < iv_off + 16 + 16 + icv {
                    return Err(Error::Truncated("SK payload"));
                }
                let mac_end = buf.len() - icv;
                let want = integ.mac(&self.integ_in, &buf[..mac_end]);
                if !ct_eq(&want, &buf[mac_end..]) {
                    return Err(Error::Integrity);
                }
                let ct = &buf[iv_off + 16..mac_end];
                if ct.len() & 15 != 0 {
                    return Err(Error::BadLength("CBC ciphertext"));
                }
                let mut iv = [0u8; 16];
                iv.copy_from_slice(&buf[iv_off..iv_off + 16]);
                let k = cipher::UnboundCipherKey::new(cbc_alg(&self.enc_in)?, &self.enc_in)
                    .map_err(|_| Error::Crypto("CBC key"))?;
                let dk = cipher::DecryptingKey::cbc(k).map_err(|_| Error::Crypto("CBC key"))?;
                let mut pt = Zeroizing::new(ct.to_vec());
                let plain = dk
                    .decrypt(&mut pt, cipher::DecryptionContext::Iv128(iv.into()))
                    .map_err(|_| Error::Integrity)?;
                strip_padding(plain)
            }
        }
    }
}

fn strip_padding(pt: &[u8]) -> Result<Secret> {
    let (&pad, body) = pt.split_last().ok_or(Error::Malformed("SK padding"))?;
    let keep = body
        .len()
        .checked_sub(usize::from(pad))
        .ok_or(Error::Malformed("SK padding"))?;
    Ok(Zeroizing::new(body[..keep].to_vec()))
}
