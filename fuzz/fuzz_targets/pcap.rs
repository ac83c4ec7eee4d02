//! pcap reader over arbitrary files; records re-written by the writer read
//! back identically.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::pcap::{Reader, Writer};

fuzz_target!(|data: &[u8]| {
    let Ok(r) = Reader::new(data) else {
        return;
    };
    let (link, snaplen, _) = (r.link_type(), r.snaplen(), r.is_nanos());
    let mut w = Writer::new(Vec::new(), link, u32::MAX).unwrap();
    let mut recs = Vec::new();
    for rec in r.take(64) {
        let Ok(rec) = rec else { break };
        assert!(rec.data.len() <= rec.orig_len as usize);
        // An oversized fraction can push the time past the 32-bit seconds
        // field: the writer refuses that with an error, not a panic.
        if w.write_packet(rec.ts, rec.data).is_ok() {
            recs.push(rec);
        }
    }
    let _ = snaplen;
    let out = w.into_inner();
    let back: Vec<_> = Reader::new(&out).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(back.len(), recs.len());
    for (a, b) in back.iter().zip(&recs) {
        assert_eq!(a.data, b.data);
        // The writer stores microseconds: nanosecond input is truncated.
        assert_eq!(a.ts.as_secs(), b.ts.as_secs());
        assert_eq!(a.ts.subsec_micros(), b.ts.subsec_micros());
    }
});
