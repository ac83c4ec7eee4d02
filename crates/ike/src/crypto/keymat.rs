//! The negotiated suite and key derivation: SKEYSEED and the seven IKE SA
//! keys (RFC 7296 §2.14, §2.18), child SA keymat (§2.17).

use super::*;

/// Negotiated IKE SA algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IkeSuite {
    /// Encryption.
    pub encr: Encr,
    /// PRF.
    pub prf: Prf,
    /// Integrity (None for AEAD).
    pub integ: Option<Integ>,
    /// DH group.
    pub dh: DhGroup,
}

/// The seven IKE SA keys of RFC 7296 §2.14.
#[derive(Clone)]
pub struct IkeKeys {
    /// Child keymat seed.
    pub sk_d: Secret,
    /// Integrity initiator → responder.
    pub sk_ai: Secret,
    /// Integrity responder → initiator.
    pub sk_ar: Secret,
    /// Encryption initiator → responder.
    pub sk_ei: Secret,
    /// Encryption responder → initiator.
    pub sk_er: Secret,
    /// AUTH payload key, initiator.
    pub sk_pi: Secret,
    /// AUTH payload key, responder.
    pub sk_pr: Secret,
}

impl fmt::Debug for IkeKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IkeKeys(<redacted>)")
    }
}

impl IkeKeys {
    /// Derive from SKEYSEED (RFC 7296 §2.14):
    /// prf+(SKEYSEED, Ni | Nr | SPIi | SPIr).
    pub fn derive(
        suite: &IkeSuite,
        skeyseed: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> Result<IkeKeys> {
        let prf = suite.prf;
        let integ_len = suite.integ.map_or(0, Integ::key_len);
        let enc_len = suite.encr.keymat_len();
        let total = 3 * prf.out_len() + 2 * integ_len + 2 * enc_len;
        let mut seed = Vec::with_capacity(ni.len() + nr.len() + 16);
        seed.extend_from_slice(ni);
        seed.extend_from_slice(nr);
        seed.extend_from_slice(&spi_i.to_be_bytes());
        seed.extend_from_slice(&spi_r.to_be_bytes());
        let km = prf.prf_plus(skeyseed, &seed, total)?;
        let mut at = 0;
        let mut take = |n: usize| {
            let v = Zeroizing::new(km[at..at + n].to_vec());
            at += n;
            v
        };
        Ok(IkeKeys {
            sk_d: take(prf.out_len()),
            sk_ai: take(integ_len),
            sk_ar: take(integ_len),
            sk_ei: take(enc_len),
            sk_er: take(enc_len),
            sk_pi: take(prf.out_len()),
            sk_pr: take(prf.out_len()),
        })
    }

    /// Initial SA: SKEYSEED = prf(Ni | Nr, g^ir) (RFC 7296 §2.14).
    pub fn initial(
        suite: &IkeSuite,
        shared: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> Result<IkeKeys> {
        let mut nonces = Zeroizing::new(Vec::with_capacity(ni.len() + nr.len()));
        nonces.extend_from_slice(ni);
        nonces.extend_from_slice(nr);
        let skeyseed = suite.prf.prf(&nonces, &[shared]);
        Self::derive(suite, &skeyseed, ni, nr, spi_i, spi_r)
    }

    /// Rekeyed SA (RFC 7296 §2.18): SKEYSEED = prf(SK_d(old), g^ir(new) | Ni | Nr),
    /// computed with the old SA's PRF.
    #[allow(clippy::too_many_arguments)]
    pub fn rekeyed(
        old_prf: Prf,
        old_sk_d: &[u8],
        suite: &IkeSuite,
        shared: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> Result<IkeKeys> {
        let skeyseed = old_prf.prf(old_sk_d, &[shared, ni, nr]);
        Self::derive(suite, &skeyseed, ni, nr, spi_i, spi_r)
    }

    /// SK payload keys for one side.
    pub fn sk_keys(&self, suite: &IkeSuite, initiator: bool) -> SkKeys {
        let ((eo, ao), (ei, ai)) = out_in(
            initiator,
            (&self.sk_ei, &self.sk_ai),
            (&self.sk_er, &self.sk_ar),
        );
        SkKeys {
            encr: suite.encr,
            integ: suite.integ,
            enc_out: eo.clone(),
            integ_out: ao.clone(),
            enc_in: ei.clone(),
            integ_in: ai.clone(),
        }
    }
}

/// Keys derived per direction (RFC 7296 §2.14, §2.17) as (outbound,
/// inbound) for one side: the initiator's i→r keys are its outbound ones.
pub fn out_in<T>(initiator: bool, i_to_r: T, r_to_i: T) -> (T, T) {
    if initiator {
        (i_to_r, r_to_i)
    } else {
        (r_to_i, i_to_r)
    }
}

/// Child SA keymat (RFC 7296 §2.17): prf+(SK_d, [g^ir(new) |] Ni | Nr),
/// taken as encr i→r, integ i→r, encr r→i, integ r→i.
pub fn child_keymat(
    prf: Prf,
    sk_d: &[u8],
    shared: Option<&[u8]>,
    ni: &[u8],
    nr: &[u8],
    enc_len: usize,
    integ_len: usize,
) -> Result<[Secret; 4]> {
    let mut seed = Zeroizing::new(Vec::new());
    if let Some(s) = shared {
        seed.extend_from_slice(s);
    }
    seed.extend_from_slice(ni);
    seed.extend_from_slice(nr);
    let km = prf.prf_plus(sk_d, &seed, 2 * (enc_len + integ_len))?;
    let a = enc_len;
    let b = a + integ_len;
    let c = b + enc_len;
    Ok([
        Zeroizing::new(km[..a].to_vec()),
        Zeroizing::new(km[a..b].to_vec()),
        Zeroizing::new(km[b..c].to_vec()),
        Zeroizing::new(km[c..].to_vec()),
    ])
}
