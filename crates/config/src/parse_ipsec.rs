//! Shape phase of the IPsec keys of a `[[tunnel]]`: `nat_t`, `traffic` and
//! the `[[tunnel.sa]]` tables (a child of `parse`, using its `Reader`).

use super::{name_label, tables, type_name, Reader};
use crate::ipsec::{EspAlgorithm, Ipsec, SaDirection, StaticSa, DEFAULT_REPLAY_WINDOW};
use crate::model::Prefix;
use crate::validate::ObjPos;
use std::path::PathBuf;
use toml::de::DeValue;

const SA_KEYS: &[&str] = &[
    "direction",
    "spi",
    "algorithm",
    "key_file",
    "esn",
    "replay_window",
    "lifetime_bytes",
    "lifetime_packets",
    "lifetime_seconds",
];

/// Reads the IPsec keys; `Some` when any of them is present (validation
/// reports them on kinds other than ipsec). An ipsec tunnel without them
/// is left for IKEv2 to key.
pub(super) fn read(r: &mut Reader<'_, '_, '_>) -> Option<Ipsec> {
    let present = ["nat_t", "traffic", "sa"]
        .iter()
        .any(|k| super::find(r.table, k).is_some());
    if !present {
        return None;
    }
    let nat_t = r.boolean("nat_t", false);
    let traffic = read_traffic(r);
    let mut sas = Vec::new();
    if let Some((k, v)) = super::find(r.table, "sa") {
        let key_span = k.span();
        r.pos.keys.push(("sa", r.src.span(key_span.clone())));
        let list = tables(r.src, "tunnel.sa", v, key_span, r.diags);
        for (i, (t, at)) in list.into_iter().enumerate() {
            let mut s = Reader {
                src: r.src,
                table: t,
                label: format!("{} {}", r.label, name_label("tunnel.sa", None, i)),
                pos: ObjPos::new(at),
                diags: &mut *r.diags,
                broken: false,
            };
            s.unknown_keys(SA_KEYS);
            let direction = s.parsed::<SaDirection>("direction", true);
            let spi = s
                .int("spi", 0..(1 << 32), "256..=0xffffffff")
                .and_then(|n| u32::try_from(n).ok());
            if spi.is_none() && super::find(t, "spi").is_none() {
                s.missing("spi");
            }
            let algorithm = s.parsed::<EspAlgorithm>("algorithm", true);
            let key_file = s.string("key_file", true).map(PathBuf::from);
            let esn = s.boolean("esn", true);
            let replay_window = s
                .int("replay_window", 0..(1 << 32), "0..=65536")
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(DEFAULT_REPLAY_WINDOW);
            let life = |s: &mut Reader<'_, '_, '_>, k: &'static str| {
                s.int(k, 0..(1 << 64), "1..=18446744073709551615")
                    .and_then(|n| u64::try_from(n).ok())
            };
            let lifetime_bytes = life(&mut s, "lifetime_bytes");
            let lifetime_packets = life(&mut s, "lifetime_packets");
            let lifetime_seconds = life(&mut s, "lifetime_seconds");
            let (pos, broken) = (s.pos, s.broken);
            match (direction, spi, algorithm, key_file, broken) {
                (Some(direction), Some(spi), Some(algorithm), Some(key_file), false) => {
                    r.pos.subs.push(pos);
                    sas.push(StaticSa {
                        direction,
                        spi,
                        algorithm,
                        key_file,
                        esn,
                        replay_window,
                        lifetime_bytes,
                        lifetime_packets,
                        lifetime_seconds,
                    });
                }
                _ => r.broken = true,
            }
        }
    }
    Some(Ipsec {
        nat_t,
        traffic,
        sas,
    })
}

/// `traffic = ["10.2.0.0/24", ...]`.
fn read_traffic(r: &mut Reader<'_, '_, '_>) -> Vec<Prefix> {
    let Some(v) = r.get("traffic") else {
        return Vec::new();
    };
    let DeValue::Array(items) = v.get_ref() else {
        r.wrong_type("traffic", "an array of strings", v.get_ref());
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items.iter() {
        let at = r.src.span(item.span());
        match item.get_ref() {
            DeValue::String(s) => match s.parse::<Prefix>() {
                Ok(p) => out.push(p),
                Err(e) => {
                    r.err(at, format!("traffic: {e}"));
                    r.broken = true;
                }
            },
            other => {
                r.err(
                    at,
                    format!("traffic must hold strings, found {}", type_name(other)),
                );
                r.broken = true;
            }
        }
    }
    out
}
