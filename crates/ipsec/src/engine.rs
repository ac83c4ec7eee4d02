//! Which code runs an SA's cipher, chosen when the SA is keyed and named
//! by `show sa` and the `vecgate_sa_engine` metric.
//!
//! The AEADs (AES-GCM, ChaCha20-Poly1305) are aws-lc's, one packet at a
//! time: its AES-GCM already interleaves blocks within a packet. AES-CBC
//! with HMAC is ESP's encrypt-then-MAC (RFC 4303 §3.3.2: the ICV covers
//! header, IV and ciphertext), and one packet at a time it is two serial
//! passes: CBC encryption chains every block on the previous one, so the
//! AES unit idles between rounds, and the hash follows. On x86-64 with
//! AES-NI it runs instead on intel-ipsec-mb's multi-buffer engine: the
//! packets of a vector side by side, one per vector lane, CBC first and
//! then HMAC-SHA-1/SHA-256 (with SHA-NI where the CPU has it). aws-lc's
//! "stitched" AES-CBC-HMAC-SHA1 cannot serve ESP: it is TLS's
//! MAC-then-encrypt and hashes the plaintext.
//!
//! Where the library cannot run (another architecture, no AES-NI, a
//! manager that failed to allocate) the same SA falls back to aws-lc: the
//! bytes on the wire are the same either way.

use crate::Algorithm;

/// The implementation behind an SA's transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// aws-lc, one packet at a time.
    AwsLc,
    /// intel-ipsec-mb's multi-buffer managers, a vector side by side.
    #[cfg(target_arch = "x86_64")]
    IpsecMb(ipsec_mb::Choice),
}

impl Engine {
    /// The fastest engine this CPU has for `alg`.
    pub fn best(alg: Algorithm) -> Engine {
        if alg.is_aead() {
            return Engine::AwsLc;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(c) = ipsec_mb::Choice::detect() {
            return Engine::IpsecMb(c);
        }
        Engine::AwsLc
    }

    /// As `show sa` prints it: `aws-lc`, `ipsec-mb avx2+sha-ni`, ...
    pub fn name(self) -> &'static str {
        match self {
            Engine::AwsLc => "aws-lc",
            #[cfg(target_arch = "x86_64")]
            Engine::IpsecMb(c) => c.name(),
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The multi-buffer engine's per-thread state and per-SA keys.
#[cfg(target_arch = "x86_64")]
pub(crate) mod mb {
    use std::cell::RefCell;

    use ipsec_mb::{AesKey, Choice, Hash, HmacKey, Mgr};

    use crate::{Algorithm, EspError};

    thread_local! {
        // The library's managers are per thread; each worker allocates
        // its own on its first CBC batch and keeps it.
        static MGR: RefCell<Option<Mgr>> = const { RefCell::new(None) };
    }

    /// Runs `f` with this thread's managers for `choice`; `None` when
    /// they cannot be had (allocation refused, or re-entered), and the
    /// caller falls back to aws-lc.
    pub(crate) fn with<R>(choice: Choice, f: impl FnOnce(&mut Mgr) -> R) -> Option<R> {
        MGR.with(|m| {
            let mut m = m.try_borrow_mut().ok()?;
            if m.as_ref().map(Mgr::choice) != Some(choice) {
                *m = Mgr::new(choice);
            }
            m.as_mut().map(f)
        })
    }

    /// An SA's keys expanded for the library (zeroized on drop by their
    /// types).
    pub(crate) struct Keys {
        pub(crate) choice: Choice,
        pub(crate) aes: AesKey,
        pub(crate) mac: HmacKey,
    }

    impl Keys {
        pub(crate) fn new(
            choice: Choice,
            alg: Algorithm,
            enc: &[u8],
            auth: &[u8],
        ) -> Result<Keys, EspError> {
            let hash = match alg {
                Algorithm::AesCbc128HmacSha1_96 => Hash::Sha1,
                _ => Hash::Sha256,
            };
            Ok(Keys {
                choice,
                aes: AesKey::new(enc).map_err(|_| EspError::BadConfig)?,
                mac: HmacKey::new(hash, auth).map_err(|_| EspError::BadConfig)?,
            })
        }
    }
}
