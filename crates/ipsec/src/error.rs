//! Why an ESP operation refused a packet.

/// Defines [`EspError`] from one list: variant, stable name, message. The
/// name is the drop-reason / counter label the graph publishes, so it must
/// not change once published; the esp nodes' error tables are derived from
/// [`EspError::NAMES`] ([`EspError::names_then`]).
macro_rules! esp_errors {
    ($( $(#[doc = $doc:literal])* $var:ident = $name:literal, $msg:literal; )*) => {
        /// Why an ESP operation refused a packet.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
        #[repr(u8)]
        pub enum EspError {
            $( $(#[doc = $doc])* #[error($msg)] $var, )*
        }

        impl EspError {
            /// Every variant, in declaration order (for counter tables).
            pub const ALL: [EspError; [$($name),*].len()] = [$(EspError::$var),*];
            /// Each variant's name, in the order of [`EspError::ALL`].
            pub const NAMES: [&'static str; [$($name),*].len()] = [$($name),*];
        }
    };
}

esp_errors! {
    /// Shorter than header + IV + trailer + ICV (+ one block for CBC).
    Truncated = "truncated", "truncated ESP packet";
    /// A CBC ciphertext that is not a whole number of cipher blocks.
    BadLength = "bad-length", "ciphertext not a multiple of the block size";
    /// The SPI is not the one of this SA (or unknown to the SAD).
    BadSpi = "bad-spi", "unknown or wrong SPI";
    /// Sequence number already seen (RFC 4303 §3.4.3).
    Replay = "replay", "replayed sequence number";
    /// Sequence number left of the anti-replay window (RFC 4303 §3.4.3).
    TooOld = "too-old", "sequence number older than the replay window";
    /// Integrity check failed: forged, corrupted or wrong key.
    IcvFail = "icv-fail", "ICV verification failed";
    /// Decrypted padding is not 1, 2, 3, ... or the pad length overruns.
    BadPadding = "bad-padding", "bad ESP padding";
    /// Next header is neither IPv4 (4) nor IPv6 (41) in tunnel mode.
    BadNextHeader = "bad-next-header", "unexpected next header";
    /// A dummy packet (next header 59, RFC 4303 §2.6): to be dropped silently.
    Dummy = "dummy", "dummy packet";
    /// The sequence number space is used up (RFC 4303 §3.3.3: never cycle).
    SeqExhausted = "seq-exhausted", "sequence numbers exhausted, SA must be rekeyed";
    /// The SA was marked expired (sequence exhaustion or hard lifetime).
    SaExpired = "sa-expired", "SA expired";
    /// The hard lifetime (bytes, packets or seconds) was reached.
    LifetimeHard = "lifetime-hard", "hard lifetime reached";
    /// Not enough head- or tailroom in the buffer for ESP and outer headers.
    NoRoom = "no-room", "no room in buffer for ESP encapsulation";
    /// Inner packet is not IPv4/IPv6 or too large for the outer IP header.
    BadInner = "bad-inner", "bad inner packet";
    /// SA configuration rejected: key length, SPI, endpoints.
    BadConfig = "bad-config", "invalid SA configuration";
    /// The crypto library reported an internal failure.
    Crypto = "crypto", "crypto failure";
    /// The tunnel has no outbound SA yet (IKEv2 has not negotiated a child
    /// SA, or it was deleted): nothing may leave unprotected.
    NoSa = "no-sa", "no SA negotiated";
    /// The next sequence numbers are not yet durably reserved (a static
    /// SA's key outlives the process: [`crate::seqstore`]); the packet is
    /// dropped rather than sent with a number a restart could repeat.
    SeqNotDurable = "seq-not-durable", "sequence numbers not yet durably reserved";
    /// The sequence number is above the replay window's durable ceiling:
    /// accepting it could let a restart accept it again.
    ReplayNotDurable = "replay-not-durable", "replay window ceiling not yet durable";
    /// A known SPI that arrived outside its tunnel's underlay (another
    /// VRF, another of our addresses, or, without NAT-T, from another
    /// source): a tenant must not reach the underlay's SAs.
    WrongUnderlay = "wrong-underlay", "ESP outside its tunnel's underlay VRF or addresses";
    /// The inner packet lies outside the SA's selectors (RFC 4301 §5.2):
    /// inbound after decryption (the tunnel's configured `traffic`, or the
    /// selectors the peer negotiated: source, destination, protocol,
    /// ports), outbound before encryption.
    PolicyMismatch = "policy-mismatch", "inner packet outside the SA's traffic selectors";
    /// An HA takeover could not bound the old active's sequence numbers
    /// below the end of the space (the sync link was down too long): any
    /// number could repeat a (key, nonce) pair, so the static SA sends
    /// nothing until it is given a new key.
    SeqUnsafeAfterTakeover = "seq-unsafe-after-takeover", "sequence numbers unsafe after an HA takeover, re-key the SA";
}

impl EspError {
    /// Number of reasons.
    pub const COUNT: usize = Self::ALL.len();

    /// Stable, short name used as a drop reason / counter label.
    pub const fn as_str(&self) -> &'static str {
        Self::NAMES[*self as usize]
    }

    /// Position in [`EspError::ALL`] / [`EspError::NAMES`]: a node's counter
    /// index when its error table starts with them.
    #[inline]
    pub const fn index(self) -> u16 {
        self as u16
    }

    /// A node's error table: [`EspError::NAMES`] followed by the node's own
    /// names. `N` must be `COUNT + M` (checked at compile time).
    pub const fn names_then<const M: usize, const N: usize>(
        own: [&'static str; M],
    ) -> [&'static str; N] {
        assert!(N == Self::COUNT + M, "N must be EspError::COUNT + M");
        let mut out = [""; N];
        let mut i = 0;
        while i < N {
            out[i] = if i < Self::COUNT {
                Self::NAMES[i]
            } else {
                own[i - Self::COUNT]
            };
            i += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_stable() {
        let mut names: Vec<_> = EspError::ALL.iter().map(|e| e.as_str()).collect();
        for (i, e) in EspError::ALL.iter().enumerate() {
            assert_eq!(usize::from(e.index()), i);
        }
        assert_eq!(EspError::IcvFail.as_str(), "icv-fail");
        assert_eq!(EspError::LifetimeHard.as_str(), "lifetime-hard");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EspError::ALL.len());
    }

    #[test]
    fn node_tables_start_with_the_reasons() {
        const T: [&str; EspError::COUNT + 2] = EspError::names_then(["own-a", "own-b"]);
        assert_eq!(&T[..EspError::COUNT], &EspError::NAMES[..]);
        assert_eq!(&T[EspError::COUNT..], &["own-a", "own-b"]);
    }
}
