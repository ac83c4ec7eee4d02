//! Software offloads: what a NIC would do for the kernel, done in the
//! dataplane so that 64 KB super-packets can travel through the graph.
//!
//! - [`csum`]: complete a partial (CHECKSUM_PARTIAL / NEEDS_CSUM) L4 checksum,
//!   verify a received one.
//! - [`gso`]: cut a TCP/UDP super-packet into MTU-sized segments, also after
//!   it was encapsulated (outer headers act as a template).
//! - [`fragment`]: IPv4 fragmentation (RFC 791).
//! - [`gro`]: receive segment coalescing, the reverse of [`gso`].
//! - [`uso`]: pack an encapsulated TCP super-packet's wire packets into UDP
//!   GSO datagrams, so UDP tunnels leave as ~64 KB sends.
//! - [`tso`]: mark one large TCP packet as a super-packet for a smaller
//!   egress MTU (what a large-MTU tunnel underlay delivers).
//!
//! Known limits: IPv4 "BIG TCP" (total length 0) and IPv6 jumbograms are
//! refused; for IPv6 with a routing header the pseudo-header uses the
//! header's destination, not the final one; GRE sequence numbers cannot be
//! set per segment.
//!
//! Every function is a pure transformation over packets from the caller's
//! [`Pool`](packet::buffer::Pool): no I/O, no heap allocation, and malformed
//! input of any kind yields an [`OffloadError`] instead of a panic.

pub mod csum;
pub mod fragment;
pub mod gro;
pub mod gso;
pub mod tso;
pub mod uso;

pub(crate) mod hdr;

pub use csum::{complete, verify_l4, verify_l4_at};
pub use fragment::fragment_ipv4;
pub use gro::{Coalescer, GroConfig, GroStats, Refusal};
pub use gso::{segment, segment_with, OuterL4, OuterSpec, SegmentSpec};
#[cfg(test)]
mod testutil;

/// Why an offload could not be applied. The caller counts it and drops the
/// packet (or, for [`OffloadError::DontFragment`], answers with ICMP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffloadError {
    /// The frame ends before a header that its own fields announce.
    Truncated,
    /// A header field holds an impossible value (version, lengths).
    Malformed,
    /// Valid but not handled here (IPv6 fragment header, GRE sequence
    /// numbers, an L4 protocol that does not match the GSO kind, ...).
    Unsupported,
    /// `csum_start` / `csum_offset` point outside the frame.
    BadCsumOffsets,
    /// The GSO segment size is zero or leaves no room for payload.
    BadSegmentSize,
    /// The pool ran dry; nothing was emitted (partial output was returned).
    NoBuffers,
    /// A result would not fit a buffer or a 16-bit length field.
    TooBig,
    /// IPv4 packet with DF set is larger than the MTU: the caller sends an
    /// ICMP "fragmentation needed" (RFC 1191) carrying this MTU.
    DontFragment { mtu: u16 },
    /// The MTU is below the 68 bytes every IPv4 link must carry (RFC 791).
    MtuTooSmall,
}

impl std::fmt::Display for OffloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OffloadError::Truncated => f.write_str("truncated header"),
            OffloadError::Malformed => f.write_str("malformed header"),
            OffloadError::Unsupported => f.write_str("unsupported header layout"),
            OffloadError::BadCsumOffsets => f.write_str("checksum offsets outside the frame"),
            OffloadError::BadSegmentSize => f.write_str("bad segment size"),
            OffloadError::NoBuffers => f.write_str("packet pool exhausted"),
            OffloadError::TooBig => f.write_str("result too big"),
            OffloadError::DontFragment { mtu } => {
                write!(f, "DF set and packet exceeds MTU {mtu}")
            }
            OffloadError::MtuTooSmall => f.write_str("MTU below 68"),
        }
    }
}

impl std::error::Error for OffloadError {}
