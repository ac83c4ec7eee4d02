//! Typed errors: every malformed input maps to one of these, never a panic.

/// Why an IKE message or operation was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Fewer bytes than a header or a declared length requires.
    #[error("truncated {0}")]
    Truncated(&'static str),
    /// A length field disagrees with the bytes present.
    #[error("bad length in {0}")]
    BadLength(&'static str),
    /// Message larger than [`crate::message::MAX_MESSAGE_LEN`].
    #[error("message too long")]
    TooLong,
    /// Major version other than 2 (RFC 7296 §3.1).
    #[error("unsupported IKE major version {0}")]
    BadVersion(u8),
    /// More payloads/proposals/transforms/selectors than our bounds allow.
    #[error("too many {0}")]
    TooMany(&'static str),
    /// A critical payload we do not understand (RFC 7296 §2.5).
    #[error("unsupported critical payload type {0}")]
    UnsupportedCritical(u8),
    /// Semantically invalid field.
    #[error("malformed {0}")]
    Malformed(&'static str),
    /// ICV/HMAC verification failed or decryption failed.
    #[error("integrity check failed")]
    Integrity,
    /// A crypto primitive refused its input (bad public value, key length).
    #[error("crypto: {0}")]
    Crypto(&'static str),
    /// Algorithm or feature we do not implement.
    #[error("unsupported {0}")]
    Unsupported(&'static str),
    /// Configuration string could not be parsed.
    #[error("config: {0}")]
    Config(String),
}

/// Result alias for this crate.
pub type Result<T> = core::result::Result<T, Error>;
