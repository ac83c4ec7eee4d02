//! What a pool member reads back from etcd: its keys, every JSON record,
//! the view fed any key and value, the sealed state blobs and the
//! snapshot inside them. Nothing panics; a blob opens only if it was
//! sealed for that pool and connection under that key, and a parsed
//! snapshot survives emit, seal and open unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vecgate_pool::keys::Keys;
use vecgate_pool::records::{
    decode, AuditRecord, DrainRecord, MemberRecord, PlacementRecord, RebalanceRecord, StatusRecord,
};
use vecgate_pool::seal::{self, Info, PoolKey};
use vecgate_pool::snapshot::Snapshot;
use vecgate_pool::view::{Kv, View};
use vecgate_pool::Connection;

fuzz_target!(|data: &[u8]| {
    let keys = Keys::new("p");
    let _ = keys.parse(data);
    let _ = decode::<MemberRecord>(data);
    let _ = decode::<PlacementRecord>(data);
    let _ = decode::<StatusRecord>(data);
    let _ = decode::<AuditRecord>(data);
    let _ = decode::<DrainRecord>(data);
    let _ = decode::<RebalanceRecord>(data);
    let _ = decode::<Connection>(data);
    // The view: split the input into a key suffix and a value.
    let cut = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut key = keys.root().as_bytes().to_vec();
    key.extend_from_slice(&data[..cut]);
    let mut v = View::default();
    v.apply(
        &keys,
        Kv::Put {
            key: key.clone(),
            value: data[cut..].to_vec(),
            create_rev: 1,
            mod_rev: 1,
            lease: 1,
        },
        0,
    );
    v.apply(&keys, Kv::Delete { key, mod_rev: 2 }, 0);
    let _ = (v.leader(), v.placed(), v.placement_members(), v.placement_conns());
    // Sealed blobs: any bytes fail to open; a snapshot that parses
    // re-emits into one that parses the same, and round-trips through a
    // seal bound to its pool and connection.
    let k = PoolKey::new(&[7; 32]).unwrap();
    assert!(seal::open(&k, "p", "c", data).is_err());
    let _ = seal::peek(data);
    if let Ok(s) = Snapshot::parse(data, "c") {
        if let Ok(b) = s.emit("c", 5) {
            assert_eq!(Snapshot::parse(&b, "c").as_ref(), Ok(&s));
            let info = Info { epoch: 1, written_ms: 5, generation: 1 };
            let blob = seal::seal(&k, "p", "c", info, &b).unwrap();
            let (i, body) = seal::open(&k, "p", "c", &blob).unwrap();
            assert_eq!(i, info);
            assert_eq!(Snapshot::parse(&body, "c"), Ok(s));
            assert!(seal::open(&k, "p", "d", &blob).is_err());
        }
    }
});
