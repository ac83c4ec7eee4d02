//! IP Encapsulating Security Payload, RFC 4303, and its UDP encapsulation
//! for NAT traversal, RFC 3948.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |               Security Parameters Index (SPI)                 |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                      Sequence Number                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     IV (algorithm-specific) | ciphertext ...                  |
//! |   ... (payload | padding | pad length | next header)          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Integrity Check Value (algorithm-specific length)     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The view knows only the cleartext header; IV and ICV lengths come from
//! the SA, so the accessors that split the rest take them as parameters.
//! [`EspTrailer`] parses the tail of the *decrypted* payload.

use crate::{Error, Result};

/// IP protocol number of ESP (IANA).
pub const IP_PROTOCOL: u8 = 50;
/// SPI + sequence number.
pub const HEADER_LEN: usize = 8;
/// Pad length + next header.
pub const TRAILER_LEN: usize = 2;
/// Next-header value of a dummy packet (IPv6 "No Next Header", §2.6).
pub const NEXT_HEADER_NONE: u8 = 59;

/// UDP port of IKE and UDP-encapsulated ESP (RFC 3948 §2).
pub const NAT_T_PORT: u16 = 4500;
/// The non-ESP marker before an IKE message on port 4500 (RFC 3948 §2.2).
pub const NON_ESP_MARKER: [u8; 4] = [0; 4];
/// The whole payload of a NAT-keepalive packet (RFC 3948 §2.3).
pub const NAT_KEEPALIVE: u8 = 0xff;

mod field {
    pub const SPI: core::ops::Range<usize> = 0..4;
    pub const SEQ: core::ops::Range<usize> = 4..8;
}

/// True for SPIs that must not appear on the wire: 0 is for local use and
/// MUST NOT be sent; 1-255 are reserved by IANA (RFC 4303 §2.1).
#[inline]
pub const fn spi_is_reserved(spi: u32) -> bool {
    spi <= 255
}

/// A read/write view of an ESP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Esp<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Esp<T> {
    /// Wraps a buffer without any check.
    pub const fn new_unchecked(buffer: T) -> Self {
        Esp { buffer }
    }

    /// Wraps a buffer after checking that the header is present
    /// ([`Error::Truncated`]) and that the SPI is not 0-255
    /// ([`Error::Malformed`], RFC 4303 §2.1).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The validation done by [`Esp::new_checked`].
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if spi_is_reserved(self.spi()) {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Security Parameters Index.
    #[inline]
    pub fn spi(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Sequence number (the low 32 bits when ESN is in use, §2.2.1).
    #[inline]
    pub fn sequence_number(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }

    /// Everything after the header: IV, ciphertext and ICV.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Splits the payload into `(iv, ciphertext, icv)` for an SA with the
    /// given IV and ICV lengths. [`Error::Truncated`] when the payload is
    /// shorter than IV + ICV + the 2-byte trailer the ciphertext must hold.
    pub fn split(&self, iv_len: usize, icv_len: usize) -> Result<(&[u8], &[u8], &[u8])> {
        let p = self.payload();
        let min = iv_len
            .checked_add(icv_len)
            .and_then(|n| n.checked_add(TRAILER_LEN))
            .ok_or(Error::BadLength)?;
        if p.len() < min {
            return Err(Error::Truncated);
        }
        let (iv, rest) = p.split_at(iv_len);
        let (ct, icv) = rest.split_at(rest.len() - icv_len);
        Ok((iv, ct, icv))
    }

    /// The IV of an SA with `iv_len`-byte IVs.
    pub fn iv(&self, iv_len: usize) -> Result<&[u8]> {
        self.payload().get(..iv_len).ok_or(Error::Truncated)
    }

    /// The ciphertext between IV and ICV.
    pub fn ciphertext(&self, iv_len: usize, icv_len: usize) -> Result<&[u8]> {
        self.split(iv_len, icv_len).map(|(_, c, _)| c)
    }

    /// The trailing Integrity Check Value.
    pub fn icv(&self, iv_len: usize, icv_len: usize) -> Result<&[u8]> {
        self.split(iv_len, icv_len).map(|(_, _, i)| i)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Esp<T> {
    /// Writes the SPI.
    #[inline]
    pub fn set_spi(&mut self, spi: u32) {
        self.buffer.as_mut()[field::SPI].copy_from_slice(&spi.to_be_bytes());
    }

    /// Writes the sequence number.
    #[inline]
    pub fn set_sequence_number(&mut self, seq: u32) {
        self.buffer.as_mut()[field::SEQ].copy_from_slice(&seq.to_be_bytes());
    }

    /// Everything after the header, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The cleartext ESP header in plain form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EspRepr {
    /// Security Parameters Index (never 0-255).
    pub spi: u32,
    /// Sequence number (low 32 bits).
    pub seq: u32,
}

impl EspRepr {
    /// Parses a view (re-checking it; reserved SPIs are [`Error::Malformed`]).
    pub fn parse<T: AsRef<[u8]>>(p: &Esp<T>) -> Result<Self> {
        p.check_len()?;
        Ok(EspRepr {
            spi: p.spi(),
            seq: p.sequence_number(),
        })
    }

    /// Always [`HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes SPI and sequence number at the front of `p`.
    ///
    /// [`Error::Malformed`] for a reserved SPI (it MUST NOT be sent),
    /// [`Error::Truncated`] for a buffer shorter than the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Esp<T>) -> Result<()> {
        if spi_is_reserved(self.spi) {
            return Err(Error::Malformed);
        }
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        p.set_spi(self.spi);
        p.set_sequence_number(self.seq);
        Ok(())
    }
}

/// Bytes of padding to append to `payload_len` bytes of plaintext so that
/// plaintext + padding + the 2-byte trailer is a multiple of the cipher's
/// block size and ends on a 4-byte boundary (RFC 4303 §2.4). `block_size`
/// 0 or 1 (stream/AEAD ciphers such as GCM) means 4-byte alignment only.
/// Block sizes that are not a multiple of 4 are aligned to the least common
/// multiple with 4. The result is always < 256 for block sizes up to 256
/// (larger values are not cipher block sizes; they give a useless but
/// panic-free answer).
pub const fn padding_len(payload_len: usize, block_size: usize) -> usize {
    let align = if block_size <= 1 {
        4
    } else if block_size & 3 == 0 {
        block_size
    } else if block_size & 1 == 0 {
        block_size.saturating_mul(2)
    } else {
        block_size.saturating_mul(4)
    };
    // Reduced first so no input overflows.
    let used = ((payload_len % align) + TRAILER_LEN) % align;
    if used == 0 {
        0
    } else {
        align - used
    }
}

/// The trailer at the end of a decrypted ESP payload (RFC 4303 §2.4, §2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EspTrailer {
    /// Number of padding bytes before the trailer.
    pub pad_len: u8,
    /// Protocol of the payload (4 IPv4, 41 IPv6, 59 dummy, ...).
    pub next_header: u8,
}

impl EspTrailer {
    /// Parses the trailer at the end of `plaintext` (payload + padding +
    /// pad length + next header) and returns it with the payload length.
    ///
    /// The padding bytes must be the default sequence 1, 2, 3, ... (§2.4:
    /// the receiver SHOULD inspect the padding field; a mismatch here is
    /// [`Error::Malformed`]). [`Error::Truncated`] when the plaintext is
    /// shorter than the trailer, [`Error::BadLength`] when the pad length
    /// points before its start.
    pub fn parse(plaintext: &[u8]) -> Result<(Self, usize)> {
        let n = plaintext.len();
        if n < TRAILER_LEN {
            return Err(Error::Truncated);
        }
        let t = EspTrailer {
            pad_len: plaintext[n - 2],
            next_header: plaintext[n - 1],
        };
        let payload_len = (n - TRAILER_LEN)
            .checked_sub(usize::from(t.pad_len))
            .ok_or(Error::BadLength)?;
        let pad = &plaintext[payload_len..n - TRAILER_LEN];
        // Default padding is 1, 2, 3, ...: byte i holds i + 1 (<= 255).
        if pad.iter().zip(1u8..=255).any(|(&b, want)| b != want) {
            return Err(Error::Malformed);
        }
        Ok((t, payload_len))
    }

    /// True for a dummy packet that must be silently dropped (§2.6).
    pub const fn is_dummy(&self) -> bool {
        self.next_header == NEXT_HEADER_NONE
    }

    /// Padding + pad length + next header.
    pub const fn len(&self) -> usize {
        self.pad_len as usize + TRAILER_LEN
    }

    /// Never empty: the trailer has at least its two fixed bytes.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Writes default padding, pad length and next header into `buf`, which
    /// must be exactly [`EspTrailer::len`] bytes ([`Error::BadLength`]
    /// otherwise).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() != self.len() {
            return Err(Error::BadLength);
        }
        let (pad, tail) = buf.split_at_mut(usize::from(self.pad_len));
        for (b, v) in pad.iter_mut().zip(1u8..=255) {
            *b = v;
        }
        tail[0] = self.pad_len;
        tail[1] = self.next_header;
        Ok(())
    }
}

/// What a UDP datagram to/from port 4500 carries (RFC 3948 §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UdpEncap {
    /// UDP-encapsulated ESP: a non-zero SPI and a sequence number follow.
    Esp,
    /// An IKE message after the 4-byte non-ESP marker (the message starts
    /// at offset 4).
    Ike,
    /// A NAT-keepalive: exactly one 0xFF byte; to be ignored.
    Keepalive,
    /// None of these (shorter than any of them, or a reserved SPI).
    Invalid,
}

impl UdpEncap {
    /// Classifies a UDP payload received on port 4500.
    pub fn classify(payload: &[u8]) -> UdpEncap {
        match payload {
            [NAT_KEEPALIVE] => UdpEncap::Keepalive,
            [0, 0, 0, 0, _, ..] => UdpEncap::Ike,
            [a, b, c, d, _, _, _, _, ..] => {
                if spi_is_reserved(u32::from_be_bytes([*a, *b, *c, *d])) {
                    UdpEncap::Invalid
                } else {
                    UdpEncap::Esp
                }
            }
            _ => UdpEncap::Invalid,
        }
    }

    /// Offset of the ESP packet or IKE message within the UDP payload.
    pub const fn offset(&self) -> usize {
        match self {
            UdpEncap::Ike => NON_ESP_MARKER.len(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPI 0x00001000, seq 5, 8-byte IV, 4 bytes ciphertext, 12-byte ICV.
    static PKT: [u8; 32] = [
        0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x05, // header
        1, 2, 3, 4, 5, 6, 7, 8, // IV
        0xc0, 0xc1, 0xc2, 0xc3, // ciphertext
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, // ICV
    ];

    #[test]
    fn deconstruct() {
        let p = Esp::new_checked(&PKT[..]).unwrap();
        assert_eq!(p.spi(), 0x1000);
        assert_eq!(p.sequence_number(), 5);
        assert_eq!(p.payload().len(), 24);
        let (iv, ct, icv) = p.split(8, 12).unwrap();
        assert_eq!(iv, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(ct, &[0xc0, 0xc1, 0xc2, 0xc3]);
        assert_eq!(icv[0], 0xa0);
        assert_eq!(icv.len(), 12);
        assert_eq!(p.iv(8).unwrap(), iv);
        assert_eq!(p.ciphertext(8, 12).unwrap(), ct);
        assert_eq!(p.icv(8, 12).unwrap(), icv);
        assert_eq!(p.split(8, 15).err(), Some(Error::Truncated));
        assert_eq!(p.split(usize::MAX, 1).err(), Some(Error::BadLength));
        assert_eq!(p.iv(25).err(), Some(Error::Truncated));
        assert_eq!(
            EspRepr::parse(&p).unwrap(),
            EspRepr {
                spi: 0x1000,
                seq: 5
            }
        );
    }

    #[test]
    fn construct() {
        let mut b = PKT;
        b[..8].fill(0xff);
        EspRepr {
            spi: 0x1000,
            seq: 5,
        }
        .emit(&mut Esp::new_unchecked(&mut b[..]))
        .unwrap();
        assert_eq!(b, PKT);
        assert_eq!(
            EspRepr { spi: 255, seq: 5 }.emit(&mut Esp::new_unchecked(&mut b[..])),
            Err(Error::Malformed)
        );
        assert_eq!(
            EspRepr { spi: 256, seq: 5 }.emit(&mut Esp::new_unchecked(&mut b[..7])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn truncations() {
        for n in 0..8 {
            assert_eq!(Esp::new_checked(&PKT[..n]).err(), Some(Error::Truncated));
        }
    }

    #[test]
    fn reserved_spi() {
        for spi in [0u32, 1, 255] {
            let mut b = PKT;
            b[..4].copy_from_slice(&spi.to_be_bytes());
            assert_eq!(Esp::new_checked(&b[..]).err(), Some(Error::Malformed));
        }
        let mut b = PKT;
        b[..4].copy_from_slice(&256u32.to_be_bytes());
        assert!(Esp::new_checked(&b[..]).is_ok());
    }

    #[test]
    fn padding() {
        // AES-CBC: 16-byte blocks. 14 + 0 + 2 = 16.
        assert_eq!(padding_len(14, 16), 0);
        assert_eq!(padding_len(15, 16), 15);
        assert_eq!(padding_len(0, 16), 14);
        // GCM: only 4-byte alignment.
        assert_eq!(padding_len(2, 1), 0);
        assert_eq!(padding_len(3, 1), 3);
        assert_eq!(padding_len(100, 0), 2);
        // 3DES: 8-byte blocks.
        assert_eq!(padding_len(7, 8), 7);
        // Odd block sizes still end up 4-aligned.
        assert_eq!((padding_len(5, 3) + 5 + 2) % 12, 0);
        assert_eq!((padding_len(5, 6) + 5 + 2) % 12, 0);
        for bs in [1usize, 4, 8, 16, 32, 256] {
            for n in 0..300 {
                let p = padding_len(n, bs);
                assert!(p < 256);
                assert_eq!((n + p + 2) % bs.max(4), 0);
            }
        }
    }

    #[test]
    fn trailer_roundtrip() {
        // payload "hi" + 4 bytes padding + trailer = 8.
        let mut b = [0u8; 8];
        b[..2].copy_from_slice(b"hi");
        let t = EspTrailer {
            pad_len: padding_len(2, 8) as u8,
            next_header: 4,
        };
        assert_eq!(t.pad_len, 4);
        t.emit(&mut b[2..]).unwrap();
        assert_eq!(b, [b'h', b'i', 1, 2, 3, 4, 4, 4]);
        assert_eq!(EspTrailer::parse(&b).unwrap(), (t, 2));
        assert!(!t.is_dummy());
        assert_eq!(t.emit(&mut b[1..]), Err(Error::BadLength));
    }

    #[test]
    fn trailer_errors() {
        assert_eq!(EspTrailer::parse(&[]).err(), Some(Error::Truncated));
        assert_eq!(EspTrailer::parse(&[4]).err(), Some(Error::Truncated));
        // Pad length 3 but only 2 bytes before the trailer.
        assert_eq!(
            EspTrailer::parse(&[1, 2, 3, 41]).err(),
            Some(Error::BadLength)
        );
        // Wrong padding content.
        assert_eq!(
            EspTrailer::parse(&[0xaa, 1, 3, 2, 41]).err(),
            Some(Error::Malformed)
        );
        // No padding, dummy packet.
        let (t, n) = EspTrailer::parse(&[9, 9, 0, 59]).unwrap();
        assert!(t.is_dummy());
        assert_eq!(n, 2);
        // Maximum padding.
        let mut b = vec![0u8; 257];
        for (i, x) in b[..255].iter_mut().enumerate() {
            *x = (i + 1) as u8;
        }
        b[255] = 255;
        b[256] = 41;
        assert_eq!(EspTrailer::parse(&b).unwrap().1, 0);
    }

    #[test]
    fn udp_encap() {
        assert_eq!(UdpEncap::classify(&[0xff]), UdpEncap::Keepalive);
        assert_eq!(UdpEncap::classify(&[]), UdpEncap::Invalid);
        assert_eq!(UdpEncap::classify(&[0xfe]), UdpEncap::Invalid);
        assert_eq!(UdpEncap::classify(&[0, 0, 0, 0]), UdpEncap::Invalid);
        assert_eq!(UdpEncap::classify(&[0, 0, 0, 0, 1]), UdpEncap::Ike);
        assert_eq!(UdpEncap::Ike.offset(), 4);
        assert_eq!(UdpEncap::classify(&PKT), UdpEncap::Esp);
        assert_eq!(UdpEncap::Esp.offset(), 0);
        assert_eq!(UdpEncap::classify(&PKT[..7]), UdpEncap::Invalid);
        assert_eq!(
            UdpEncap::classify(&[0, 0, 0, 7, 0, 0, 0, 1]),
            UdpEncap::Invalid
        );
    }
}
