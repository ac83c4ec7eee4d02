//! ESP header, IV/ICV split, trailer parse/emit, padding and RFC 3948
//! classification.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::esp::{padding_len, Esp, EspRepr, EspTrailer, UdpEncap};

fuzz_target!(|data: &[u8]| {
    // UDP-encap classification never panics and agrees with the ESP view.
    let class = UdpEncap::classify(data);
    let _ = class.offset();
    if class == UdpEncap::Esp {
        assert!(Esp::new_checked(data).is_ok());
    }

    // The first two bytes pick IV/ICV lengths and a block size.
    let (iv_len, icv_len, bs) = match data {
        [a, b, ..] => (
            usize::from(a & 0x1f),
            usize::from(b & 0x1f),
            usize::from(b >> 3),
        ),
        _ => (8, 12, 16),
    };
    let pad = padding_len(data.len(), bs);
    if bs <= 256 {
        assert!(pad < 256);
        let total = data.len() + pad + 2;
        assert_eq!(total % 4, 0);
        if bs > 1 {
            assert_eq!(total % bs, 0);
        }
    }

    if let Ok(p) = Esp::new_checked(data) {
        let _ = (p.spi(), p.sequence_number(), p.payload(), p.iv(iv_len));
        if let Ok((iv, ct, icv)) = p.split(iv_len, icv_len) {
            assert_eq!(iv.len() + ct.len() + icv.len(), p.payload().len());
            assert_eq!(p.ciphertext(iv_len, icv_len), Ok(ct));
            assert_eq!(p.icv(iv_len, icv_len), Ok(icv));
        }
        let r = EspRepr::parse(&p).expect("checked view parses");
        let mut buf = data.to_vec();
        r.emit(&mut Esp::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, data);
    }

    // Treat the input as decrypted plaintext too.
    if let Ok((t, payload_len)) = EspTrailer::parse(data) {
        assert_eq!(payload_len + t.len(), data.len());
        let _ = t.is_dummy();
        let mut buf = data.to_vec();
        t.emit(&mut buf[payload_len..]).unwrap();
        assert_eq!(buf, data);
    }
});
