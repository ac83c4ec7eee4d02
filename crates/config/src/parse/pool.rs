//! Shape phase of `[pool]` and `[pool.capacity]` (a child of `parse`,
//! using its `Reader`).

use super::ipsec::read_strings;
use super::{find, top_table, Reader, Source};
use crate::ha::{DEFAULT_MAX_SA_PPS, MAX_MAX_SA_PPS, MIN_MAX_SA_PPS};
use crate::pool::{
    Pool, PoolCapacity, DEFAULT_LEASE_TTL, DEFAULT_REDUNDANT, MAX_ENDPOINTS, MAX_LEASE_TTL,
};
use crate::position::{ObjPos, Positions};
use crate::Diagnostic;
use toml::de::{DeTable, DeValue};

const POOL_KEYS: &[&str] = &[
    "name",
    "member",
    "etcd",
    "etcd_ca_file",
    "etcd_cert_file",
    "etcd_key_file",
    "lease_ttl",
    "pool_key_file",
    "redundant",
    "max_sa_pps",
    "capacity",
];
const CAPACITY_KEYS: &[&str] = &["ipsec_mbps", "gre_mbps", "tunnels"];

/// Reads `[pool]` when present; `ObjPos::subs[0]` is `[pool.capacity]`.
pub(super) fn read(
    src: &Source,
    doc: &DeTable<'_>,
    diags: &mut Vec<Diagnostic>,
) -> (Option<Pool>, ObjPos) {
    let Some(mut r) = top_table(src, doc, "pool", POOL_KEYS, diags) else {
        return (None, Positions::default().pool);
    };
    let name = r.string("name", true);
    let member = r.string("member", false);
    let etcd = read_strings(&mut r, "etcd");
    if r.get("etcd").is_none() {
        r.missing("etcd");
    } else if etcd.is_empty() || etcd.len() > MAX_ENDPOINTS {
        let at = r.at("etcd");
        r.err(
            at,
            format!(
                "etcd lists {} endpoint(s): give 1 to {MAX_ENDPOINTS} (every member of the etcd cluster)",
                etcd.len()
            ),
        );
        r.broken = true;
    }
    let file = |r: &mut Reader<'_, '_, '_>, key| r.string(key, false).map(Into::into);
    let etcd_ca_file = file(&mut r, "etcd_ca_file");
    let etcd_cert_file = file(&mut r, "etcd_cert_file");
    let etcd_key_file = file(&mut r, "etcd_key_file");
    let lease_ttl = r
        .int(
            "lease_ttl",
            1..i128::from(MAX_LEASE_TTL) + 1,
            "1..=60 seconds",
        )
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(DEFAULT_LEASE_TTL);
    let pool_key_file = r.string("pool_key_file", true);
    let redundant = r
        .int("redundant", 0..17, "0..=16 members")
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(DEFAULT_REDUNDANT);
    let max_sa_pps = r
        .int(
            "max_sa_pps",
            MIN_MAX_SA_PPS as i128..MAX_MAX_SA_PPS as i128 + 1,
            "1000..=1073741824 packets per second per SA",
        )
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(DEFAULT_MAX_SA_PPS);
    let (capacity, cap_pos) = read_capacity(&mut r);
    r.pos.subs.push(cap_pos);
    let (pos, broken) = (r.pos, r.broken);
    match (name, pool_key_file, capacity, broken) {
        (Some(name), Some(pool_key_file), Some(capacity), false) => (
            Some(Pool {
                name,
                member,
                etcd,
                etcd_ca_file,
                etcd_cert_file,
                etcd_key_file,
                lease_ttl,
                pool_key_file: pool_key_file.into(),
                redundant,
                max_sa_pps,
                capacity,
            }),
            pos,
        ),
        _ => (None, pos),
    }
}

/// `[pool.capacity]`: required, every key required (a member that
/// carries nothing of a class says 0).
fn read_capacity(r: &mut Reader<'_, '_, '_>) -> (Option<PoolCapacity>, ObjPos) {
    let table = r.pos.table;
    let none = || ObjPos::new("pool.capacity".to_owned(), table);
    let Some(v) = r.get("capacity") else {
        let pos = none();
        r.missing("capacity");
        return (None, pos);
    };
    let DeValue::Table(t) = v.get_ref() else {
        let pos = none();
        r.wrong_type("capacity", "a table ([pool.capacity])", v.get_ref());
        return (None, pos);
    };
    let (label, path) = ("[pool.capacity]".to_owned(), "pool.capacity".to_owned());
    let at = r.src.span(v.span());
    let mut c = Reader::new(r.src, t, label, path, at, r.diags);
    c.unknown_keys(CAPACITY_KEYS);
    let need = |c: &mut Reader<'_, '_, '_>, key: &'static str, max: i128, expect: &str| {
        if find(c.table, key).is_none() {
            c.missing(key);
            return None;
        }
        c.int(key, 0..max + 1, expect)
    };
    let ipsec = need(&mut c, "ipsec_mbps", 10_000_000, "0..=10000000 Mbit/s");
    let gre = need(&mut c, "gre_mbps", 10_000_000, "0..=10000000 Mbit/s");
    let tunnels = need(&mut c, "tunnels", 1_000_000, "0..=1000000");
    let (pos, broken) = (c.pos, c.broken);
    if broken {
        r.broken = true;
    }
    match (ipsec, gre, tunnels) {
        (Some(i), Some(g), Some(t)) if !broken => (
            Some(PoolCapacity {
                ipsec_mbps: i as u64,
                gre_mbps: g as u64,
                tunnels: t as u32,
            }),
            pos,
        ),
        _ => (None, pos),
    }
}
