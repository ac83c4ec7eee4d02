//! Batched AES-CBC and HMAC-SHA-1 / HMAC-SHA-256 through Intel's
//! multi-buffer crypto library (intel-ipsec-mb), the engine VPP uses for
//! these ciphers.
//!
//! CBC encryption is serial within one buffer (each block chains on the
//! previous ciphertext), so one packet leaves the AES unit idle most of
//! the time; the library runs 4–16 buffers side by side instead, one per
//! vector lane, and does the same for SHA-1 / SHA-256 (with SHA-NI where
//! the CPU has it). A [`Mgr`] does that for one thread; [`AesKey`] and
//! [`HmacKey`] are the expanded keys, shareable between threads.
//!
//! The library is reached through a small C shim (`csrc/shim.c`) so that
//! its structures' layouts come from its own header; every `unsafe` block
//! of the crate is a call into that shim.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fmt;
use std::ptr;

use zeroize::Zeroize;

/// Most jobs the shim takes in one call (its stack array).
const MAX_BURST: usize = 64;

/// Below this many CBC buffers a burst runs on the SSE manager (4 lanes)
/// rather than the AVX2/AVX-512 one (8/16 lanes), where the CPU has both.
const SMALL_BURST: usize = 8;

#[repr(C)]
struct RawMb {
    cipher: *mut c_void,
    hash: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct RawCbc {
    data: *mut u8,
    len: u64,
    iv: *const u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct RawMac {
    msg: *const u8,
    len: u64,
    tag: *mut u8,
}

extern "C" {
    fn vg_cpu_features() -> u64;
    fn vg_version() -> *const c_char;
    fn vg_strerror(e: c_int) -> *const c_char;
    fn vg_mb_init(out: *mut RawMb, cipher_arch: c_int, hash_arch: c_int) -> c_int;
    fn vg_mb_free(mb: *mut RawMb);
    fn vg_aes_keyexp(key: *const u8, key_len: c_uint, enc: *mut u8, dec: *mut u8) -> c_int;
    fn vg_hmac_pads(
        sha256: c_int,
        key: *const u8,
        key_len: c_uint,
        ipad: *mut u8,
        opad: *mut u8,
    ) -> c_int;
    fn vg_mb_cbc(
        mb: *mut RawMb,
        on_hash_mgr: c_int,
        enc: *const u8,
        dec: *const u8,
        key_len: c_uint,
        decrypt: c_int,
        ops: *const RawCbc,
        n: c_uint,
    ) -> c_int;
    fn vg_mb_hmac(
        mb: *mut RawMb,
        sha256: c_int,
        ipad: *const u8,
        opad: *const u8,
        tag_len: c_uint,
        ops: *const RawMac,
        n: c_uint,
    ) -> c_int;
}

// IMB_FEATURE_* of intel-ipsec-mb.h.
const F_SHANI: u64 = 1 << 0;
const F_AESNI: u64 = 1 << 1;
const F_PCLMULQDQ: u64 = 1 << 2;
const F_CMOV: u64 = 1 << 3;
const F_SSE4_2: u64 = 1 << 4;
const F_AVX: u64 = 1 << 5;
const F_AVX2: u64 = 1 << 6;
const F_AVX512_SKX: u64 = (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11);
const F_BMI2: u64 = 1 << 18;
const F_AESNI_EMU: u64 = 1 << 19;

/// The instruction-set flavour of one of the library's managers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    Sse,
    Avx,
    Avx2,
    Avx512,
}

impl Arch {
    /// The CPU flags the library requires for this manager
    /// (IMB_CPUFLAGS_*).
    const fn needs(self) -> u64 {
        let sse = F_SSE4_2 | F_CMOV | F_AESNI | F_PCLMULQDQ;
        match self {
            Arch::Sse => sse,
            Arch::Avx => sse | F_AVX,
            Arch::Avx2 => sse | F_AVX | F_AVX2 | F_BMI2,
            Arch::Avx512 => sse | F_AVX | F_AVX2 | F_BMI2 | F_AVX512_SKX,
        }
    }

    const fn raw(self) -> c_int {
        match self {
            Arch::Sse => 1,
            Arch::Avx => 2,
            Arch::Avx2 => 3,
            Arch::Avx512 => 4,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Arch::Sse => "sse",
            Arch::Avx => "avx",
            Arch::Avx2 => "avx2",
            Arch::Avx512 => "avx512",
        }
    }
}

/// Which managers a CPU gets: AES-CBC on the widest vector unit, the HMACs
/// on the SSE manager where the CPU has SHA-NI (that manager's SHA-1 and
/// SHA-256 use it; in library 1.3 the AVX2 manager's do not, and hash
/// 3–8× slower per packet on a CPU that has it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Choice {
    pub cipher: Arch,
    pub sha_ni: bool,
}

impl Choice {
    /// The best managers for this CPU; `None` without AES-NI, SSE4.2 and
    /// PCLMULQDQ (the library's minimum for AES), or where the library
    /// would emulate AES in software.
    pub fn detect() -> Option<Choice> {
        // SAFETY: no arguments; the library reads CPUID and returns flags.
        let f = unsafe { vg_cpu_features() };
        Self::for_features(f)
    }

    /// [`Choice::detect`] for the given IMB_FEATURE_* flags.
    fn for_features(f: u64) -> Option<Choice> {
        let has = |a: Arch| f & a.needs() == a.needs();
        if f & F_AESNI_EMU != 0 || !has(Arch::Sse) {
            return None;
        }
        let cipher = [Arch::Avx512, Arch::Avx2, Arch::Avx]
            .into_iter()
            .find(|a| has(*a))
            .unwrap_or(Arch::Sse);
        Some(Choice {
            cipher,
            sha_ni: f & F_SHANI != 0,
        })
    }

    /// The manager that runs the HMACs.
    pub const fn hash(self) -> Arch {
        if self.sha_ni {
            Arch::Sse
        } else {
            self.cipher
        }
    }

    /// For show commands and metrics, e.g. `ipsec-mb avx2+sha-ni`.
    pub const fn name(self) -> &'static str {
        match (self.cipher, self.sha_ni) {
            (Arch::Avx512, true) => "ipsec-mb avx512+sha-ni",
            (Arch::Avx2, true) => "ipsec-mb avx2+sha-ni",
            (Arch::Avx, true) => "ipsec-mb avx+sha-ni",
            (Arch::Sse, true) => "ipsec-mb sse+sha-ni",
            (Arch::Avx512, false) => "ipsec-mb avx512",
            (Arch::Avx2, false) => "ipsec-mb avx2",
            (Arch::Avx, false) => "ipsec-mb avx",
            (Arch::Sse, false) => "ipsec-mb sse",
        }
    }
}

/// The library's version, e.g. "1.3.0".
pub fn version() -> &'static str {
    // SAFETY: the library returns a pointer to a static NUL-terminated
    // string (IMB_VERSION_STR), valid for the life of the process.
    let p = unsafe { vg_version() };
    if p.is_null() {
        return "";
    }
    // SAFETY: non-null, NUL-terminated and static, as above.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

/// A refusal by the library (an invalid job) or by this crate (a length
/// the cipher cannot take).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error(i32);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: imb_get_strerror returns a static NUL-terminated string
        // for any number (an "unknown error" text for unknown ones).
        let p = unsafe { vg_strerror(self.0) };
        let msg = if p.is_null() {
            ""
        } else {
            // SAFETY: non-null, static and NUL-terminated, as above.
            unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
        };
        write!(f, "intel-ipsec-mb: {msg} ({})", self.0)
    }
}

impl std::error::Error for Error {}

/// Bad input caught before the library sees it.
const E_INPUT: i32 = -1;

/// An expanded AES key schedule: 15 round keys, 16-byte aligned as the
/// library's assembly loads them.
#[repr(C, align(16))]
struct Schedule([u8; 240]);

/// An AES-128 or AES-256 key expanded for both directions; zeroized on
/// drop.
pub struct AesKey {
    enc: Box<Schedule>,
    dec: Box<Schedule>,
    len: u32,
}

impl AesKey {
    /// `key` is 16 or 32 bytes. Needs AES-NI (only call it when
    /// [`Choice::detect`] returned a choice).
    pub fn new(key: &[u8]) -> Result<AesKey, Error> {
        if key.len() != 16 && key.len() != 32 {
            return Err(Error(E_INPUT));
        }
        let mut k = AesKey {
            enc: Box::new(Schedule([0; 240])),
            dec: Box::new(Schedule([0; 240])),
            len: key.len() as u32,
        };
        // SAFETY: `key` is readable for its 16 or 32 bytes (checked above);
        // both schedules are 240 writable bytes, 16-byte aligned, the most
        // the AES-256 expansion writes.
        let r = unsafe {
            vg_aes_keyexp(
                key.as_ptr(),
                k.len,
                k.enc.0.as_mut_ptr(),
                k.dec.0.as_mut_ptr(),
            )
        };
        if r != 0 {
            return Err(Error(E_INPUT));
        }
        Ok(k)
    }
}

impl Drop for AesKey {
    fn drop(&mut self) {
        self.enc.0.zeroize();
        self.dec.0.zeroize();
    }
}

/// HMAC's hash function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash {
    Sha1,
    Sha256,
}

impl Hash {
    /// Longest tag (the digest).
    pub const fn digest_len(self) -> usize {
        match self {
            Hash::Sha1 => 20,
            Hash::Sha256 => 32,
        }
    }
}

/// An HMAC key as the library takes it: the inner and outer states after
/// the first block (RFC 2104 §4's precomputation); zeroized on drop.
pub struct HmacKey {
    hash: Hash,
    ipad: [u8; 32],
    opad: [u8; 32],
}

impl HmacKey {
    /// `key` at most 64 bytes (one block; ESP's are 20 and 32). Needs
    /// the SSE instructions [`Choice::detect`] requires.
    pub fn new(hash: Hash, key: &[u8]) -> Result<HmacKey, Error> {
        if key.len() > 64 {
            return Err(Error(E_INPUT));
        }
        let mut k = HmacKey {
            hash,
            ipad: [0; 32],
            opad: [0; 32],
        };
        // SAFETY: `key` is readable for `key.len()` (≤ 64) bytes; each
        // state buffer has the 32 bytes a SHA-256 state takes (SHA-1
        // writes 20).
        let r = unsafe {
            vg_hmac_pads(
                c_int::from(hash == Hash::Sha256),
                key.as_ptr(),
                key.len() as c_uint,
                k.ipad.as_mut_ptr(),
                k.opad.as_mut_ptr(),
            )
        };
        if r != 0 {
            return Err(Error(E_INPUT));
        }
        Ok(k)
    }

    pub fn hash(&self) -> Hash {
        self.hash
    }
}

impl Drop for HmacKey {
    fn drop(&mut self) {
        self.ipad.zeroize();
        self.opad.zeroize();
    }
}

/// One buffer to encrypt or decrypt in place with AES-CBC: a multiple of
/// 16 bytes long, not empty.
pub struct CbcJob<'a> {
    pub data: &'a mut [u8],
    pub iv: [u8; 16],
}

/// One message (not empty) to authenticate; the tag (as many bytes as asked) is
/// written to the front of `tag`.
pub struct HmacJob<'a> {
    pub msg: &'a [u8],
    pub tag: &'a mut [u8; 32],
}

/// AES-CBC direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Encrypt,
    Decrypt,
}

/// The library's managers for one thread (the library's state is not
/// shared between threads); allocated once, reused for every batch.
pub struct Mgr {
    raw: RawMb,
    choice: Choice,
}

// SAFETY: the managers are plain heap memory owned by this value, with no
// tie to the thread that allocated them; `&mut self` on every call keeps
// one thread at a time in them.
unsafe impl Send for Mgr {}

impl Mgr {
    /// Allocates and initialises the managers of `choice`; `None` when the
    /// library refuses (out of memory, a CPU without the instructions).
    pub fn new(choice: Choice) -> Option<Mgr> {
        let mut raw = RawMb {
            cipher: ptr::null_mut(),
            hash: ptr::null_mut(),
        };
        // SAFETY: `raw` is a valid place for the two pointers; on failure
        // the shim frees what it allocated and leaves them null.
        let r = unsafe { vg_mb_init(&mut raw, choice.cipher.raw(), choice.hash().raw()) };
        (r == 0).then_some(Mgr { raw, choice })
    }

    pub fn choice(&self) -> Choice {
        self.choice
    }

    /// AES-CBC in place over every job, up to 64 at a time side by side.
    /// A job that is empty or not a multiple of 16 bytes refuses the call
    /// before anything is ciphered; a library refusal leaves the jobs of
    /// its burst in an unspecified state.
    pub fn cbc<'a>(
        &mut self,
        key: &AesKey,
        dir: Direction,
        jobs: impl IntoIterator<Item = CbcJob<'a>>,
    ) -> Result<(), Error> {
        let mut raw = [RawCbc {
            data: ptr::null_mut(),
            len: 0,
            iv: ptr::null(),
        }; MAX_BURST];
        let mut ivs = [[0u8; 16]; MAX_BURST];
        let mut n = 0;
        for j in jobs {
            if j.data.is_empty() || j.data.len() % 16 != 0 {
                return Err(Error(E_INPUT));
            }
            ivs[n] = j.iv;
            raw[n].data = j.data.as_mut_ptr();
            raw[n].len = j.data.len() as u64;
            n += 1;
            if n == MAX_BURST {
                self.cbc_burst(key, dir, &mut raw, &ivs, n)?;
                n = 0;
            }
        }
        self.cbc_burst(key, dir, &mut raw, &ivs, n)
    }

    fn cbc_burst(
        &mut self,
        key: &AesKey,
        dir: Direction,
        raw: &mut [RawCbc; MAX_BURST],
        ivs: &[[u8; 16]; MAX_BURST],
        n: usize,
    ) -> Result<(), Error> {
        if n == 0 {
            return Ok(());
        }
        for (r, iv) in raw.iter_mut().zip(ivs).take(n) {
            r.iv = iv.as_ptr();
        }
        // Fewer buffers than the wide manager's lanes: the SSE manager's
        // four lanes (it is the hash manager when the CPU has SHA-NI) waste
        // less on a chain that runs alone.
        let small =
            n < SMALL_BURST && self.choice.hash() == Arch::Sse && self.choice.cipher != Arch::Sse;
        // SAFETY: the first `n` entries point into buffers the caller lent
        // us exclusively (`&'a mut [u8]` jobs, disjoint as any live
        // mutable borrows are) for at least this call, each `len` bytes;
        // the IVs are 16 readable bytes in `ivs`, alive for the call; the
        // key schedules are 240 aligned bytes; the managers are ours
        // (`&mut self`). The shim refuses n > 64.
        let r = unsafe {
            vg_mb_cbc(
                &mut self.raw,
                c_int::from(small),
                key.enc.0.as_ptr(),
                key.dec.0.as_ptr(),
                key.len,
                c_int::from(dir == Direction::Decrypt),
                raw.as_ptr(),
                n as c_uint,
            )
        };
        if r == n as c_int {
            Ok(())
        } else {
            Err(Error(r))
        }
    }

    /// HMAC of every job's message, up to 64 at a time side by side; each
    /// tag is `tag_len` bytes (12 for HMAC-SHA1-96, 16 for
    /// HMAC-SHA-256-128, at most the digest). The library refuses empty
    /// messages: so does this, before the burst they would be in.
    pub fn hmac<'a>(
        &mut self,
        key: &HmacKey,
        tag_len: usize,
        jobs: impl IntoIterator<Item = HmacJob<'a>>,
    ) -> Result<(), Error> {
        if tag_len == 0 || tag_len > key.hash.digest_len() {
            return Err(Error(E_INPUT));
        }
        let mut raw = [RawMac {
            msg: ptr::null(),
            len: 0,
            tag: ptr::null_mut(),
        }; MAX_BURST];
        let mut n = 0;
        for j in jobs {
            if j.msg.is_empty() {
                return Err(Error(E_INPUT));
            }
            raw[n] = RawMac {
                msg: j.msg.as_ptr(),
                len: j.msg.len() as u64,
                tag: j.tag.as_mut_ptr(),
            };
            n += 1;
            if n == MAX_BURST {
                self.hmac_burst(key, tag_len, &raw, n)?;
                n = 0;
            }
        }
        self.hmac_burst(key, tag_len, &raw, n)
    }

    fn hmac_burst(
        &mut self,
        key: &HmacKey,
        tag_len: usize,
        raw: &[RawMac; MAX_BURST],
        n: usize,
    ) -> Result<(), Error> {
        if n == 0 {
            return Ok(());
        }
        // SAFETY: the first `n` entries point to messages the caller lent
        // us (`&'a [u8]`, readable for `len`) and to 32-byte tag buffers
        // lent exclusively (`&'a mut [u8; 32]`, `tag_len` ≤ 32 written);
        // a tag buffer cannot overlap a message (a live `&mut` excludes
        // any other borrow). The pad states are 32 bytes in `key`; the
        // managers are ours (`&mut self`). The shim refuses n > 64.
        let r = unsafe {
            vg_mb_hmac(
                &mut self.raw,
                c_int::from(key.hash == Hash::Sha256),
                key.ipad.as_ptr(),
                key.opad.as_ptr(),
                tag_len as c_uint,
                raw.as_ptr(),
                n as c_uint,
            )
        };
        if r == n as c_int {
            Ok(())
        } else {
            Err(Error(r))
        }
    }
}

impl Drop for Mgr {
    fn drop(&mut self) {
        // SAFETY: `raw` holds the managers `vg_mb_init` allocated (both
        // non-null, as `new` only builds a Mgr on success); freed once.
        unsafe { vg_mb_free(&mut self.raw) };
    }
}

impl fmt::Debug for Mgr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mgr").field("choice", &self.choice).finish()
    }
}

#[cfg(test)]
mod tests;
