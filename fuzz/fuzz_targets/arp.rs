//! ARP view and repr round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::arp::{ArpRepr, Packet};
use wire::ethernet::MacAddr;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.hardware_type(),
        p.protocol_type(),
        p.hardware_len(),
        p.protocol_len(),
        p.operation(),
        p.source_hardware_addr(),
        p.source_protocol_addr(),
        p.target_hardware_addr(),
        p.target_protocol_addr(),
    );
    let Ok(r) = ArpRepr::parse(&p) else {
        return;
    };
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut Packet::new_unchecked(&mut buf[..]));
    let q = Packet::new_checked(&buf[..]).expect("emitted ARP checks");
    assert_eq!(ArpRepr::parse(&q), Ok(r));
    let _ = r.reply(MacAddr([2, 0, 0, 0, 0, 1]));
});
