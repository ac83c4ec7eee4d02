//! The one error type of every parser in this crate.

use core::fmt;

/// Why a buffer is not a valid packet of the expected kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field says).
    Truncated,
    /// A length field is inconsistent with the header or the buffer.
    BadLength,
    /// A version field is not the one this view parses.
    BadVersion,
    /// A checksum does not verify.
    BadChecksum,
    /// A field holds a value the format forbids.
    Malformed,
    /// A valid packet using a feature vecgate does not handle.
    Unsupported,
}

impl Error {
    /// Short stable name, used as a drop reason in counters.
    pub fn as_str(&self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::BadLength => "bad-length",
            Error::BadVersion => "bad-version",
            Error::BadChecksum => "bad-checksum",
            Error::Malformed => "malformed",
            Error::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for Error {}

/// Result of a parse.
pub type Result<T> = core::result::Result<T, Error>;
