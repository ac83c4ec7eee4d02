//! Why an ESP operation refused a packet.

/// A drop reason. Each variant has a stable name ([`EspError::as_str`]) that
/// the graph uses as a counter/drop-reason label, so the names must not
/// change once published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum EspError {
    /// Shorter than header + IV + trailer + ICV (+ one block for CBC).
    #[error("truncated ESP packet")]
    Truncated,
    /// A CBC ciphertext that is not a whole number of cipher blocks.
    #[error("ciphertext not a multiple of the block size")]
    BadLength,
    /// The SPI is not the one of this SA (or unknown to the SAD).
    #[error("unknown or wrong SPI")]
    BadSpi,
    /// Sequence number already seen (RFC 4303 §3.4.3).
    #[error("replayed sequence number")]
    Replay,
    /// Sequence number left of the anti-replay window (RFC 4303 §3.4.3).
    #[error("sequence number older than the replay window")]
    TooOld,
    /// Integrity check failed: forged, corrupted or wrong key.
    #[error("ICV verification failed")]
    IcvFail,
    /// Decrypted padding is not 1, 2, 3, ... or the pad length overruns.
    #[error("bad ESP padding")]
    BadPadding,
    /// Next header is neither IPv4 (4) nor IPv6 (41) in tunnel mode.
    #[error("unexpected next header")]
    BadNextHeader,
    /// A dummy packet (next header 59, RFC 4303 §2.6): to be dropped silently.
    #[error("dummy packet")]
    Dummy,
    /// The sequence number space is used up (RFC 4303 §3.3.3: never cycle).
    #[error("sequence numbers exhausted, SA must be rekeyed")]
    SeqExhausted,
    /// The SA was marked expired (sequence exhaustion or hard lifetime).
    #[error("SA expired")]
    SaExpired,
    /// The hard lifetime (bytes, packets or seconds) was reached.
    #[error("hard lifetime reached")]
    LifetimeHard,
    /// Not enough head- or tailroom in the buffer for ESP and outer headers.
    #[error("no room in buffer for ESP encapsulation")]
    NoRoom,
    /// Inner packet is not IPv4/IPv6 or too large for the outer IP header.
    #[error("bad inner packet")]
    BadInner,
    /// SA configuration rejected: key length, SPI, endpoints.
    #[error("invalid SA configuration")]
    BadConfig,
    /// The crypto library reported an internal failure.
    #[error("crypto failure")]
    Crypto,
    /// The tunnel has no outbound SA yet (IKEv2 has not negotiated a child
    /// SA, or it was deleted): nothing may leave unprotected.
    #[error("no SA negotiated")]
    NoSa,
}

impl EspError {
    /// Stable, short name used as a drop reason / counter label.
    pub const fn as_str(&self) -> &'static str {
        match self {
            EspError::Truncated => "truncated",
            EspError::BadLength => "bad-length",
            EspError::BadSpi => "bad-spi",
            EspError::Replay => "replay",
            EspError::TooOld => "too-old",
            EspError::IcvFail => "icv-fail",
            EspError::BadPadding => "bad-padding",
            EspError::BadNextHeader => "bad-next-header",
            EspError::Dummy => "dummy",
            EspError::SeqExhausted => "seq-exhausted",
            EspError::SaExpired => "sa-expired",
            EspError::LifetimeHard => "lifetime-hard",
            EspError::NoRoom => "no-room",
            EspError::BadInner => "bad-inner",
            EspError::BadConfig => "bad-config",
            EspError::Crypto => "crypto",
            EspError::NoSa => "no-sa",
        }
    }

    /// Every variant, in declaration order (for counter tables).
    pub const ALL: [EspError; 17] = [
        EspError::Truncated,
        EspError::BadLength,
        EspError::BadSpi,
        EspError::Replay,
        EspError::TooOld,
        EspError::IcvFail,
        EspError::BadPadding,
        EspError::BadNextHeader,
        EspError::Dummy,
        EspError::SeqExhausted,
        EspError::SaExpired,
        EspError::LifetimeHard,
        EspError::NoRoom,
        EspError::BadInner,
        EspError::BadConfig,
        EspError::Crypto,
        EspError::NoSa,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_stable() {
        let mut names: Vec<_> = EspError::ALL.iter().map(|e| e.as_str()).collect();
        assert_eq!(EspError::IcvFail.as_str(), "icv-fail");
        assert_eq!(EspError::LifetimeHard.as_str(), "lifetime-hard");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EspError::ALL.len());
    }
}
