//! Shape phase of the IPsec keys of a `[[tunnel]]`: `nat_t`, `traffic` and
//! the `[[tunnel.sa]]` tables (a child of `parse`, using its `Reader`).

use super::{name_label, tables, Reader};
use crate::ipsec::{
    EspAlgorithm, IkeAuth, IkeSettings, Ipsec, SaDirection, StaticSa, DEFAULT_REPLAY_WINDOW,
};
use crate::model::Prefix;
use std::path::PathBuf;
use toml::de::DeValue;

/// The keys of a `[[tunnel.sa]]` table.
pub const SA_KEYS: &[&str] = &[
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

/// The keys of a `[tunnel.ike]` table.
pub const IKE_KEYS: &[&str] = &[
    "auth",
    "remote_auth",
    "psk_file",
    "cert_file",
    "key_file",
    "ca_files",
    "crl_files",
    "remote_cert_file",
    "local_id",
    "remote_id",
    "ike_proposals",
    "esp_proposals",
    "initiate",
    "dpd_interval",
    "ike_lifetime",
    "child_lifetime",
    "child_lifetime_packets",
    "child_lifetime_bytes",
    "local_traffic",
    "cookie_threshold",
    "cookie_threshold_per_source",
    "cookie_rate",
    "half_open_per_source",
    "max_half_open",
];

/// Reads the IPsec keys; `Some` when any of them is present (validation
/// reports them on kinds other than ipsec). An ipsec tunnel without them
/// is left for IKEv2 to key.
pub(super) fn read(r: &mut Reader<'_, '_, '_>) -> Option<Ipsec> {
    let present = ["nat_t", "traffic", "sa", "ike"]
        .iter()
        .any(|k| super::find(r.table, k).is_some());
    if !present {
        return None;
    }
    let nat_t = r.boolean("nat_t", false);
    let traffic = read_prefixes(r, "traffic");
    let mut sas = Vec::new();
    if let Some((k, v)) = super::find(r.table, "sa") {
        let key_span = k.span();
        r.pos.keys.push(("sa", r.src.span(key_span.clone())));
        let path = format!("{}.sa", r.pos.path);
        let list = tables(r.src, "tunnel.sa", &path, v, key_span, r.diags);
        for (i, t, at) in list {
            let label = format!("{} {}", r.label, name_label("tunnel.sa", None, i));
            let sub = format!("{path}[{i}]");
            let mut s = Reader::new(r.src, t, label, sub, at, &mut *r.diags);
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
    let ike = read_ike(r);
    Some(Ipsec {
        nat_t,
        traffic,
        sas,
        ike,
    })
}

/// `[tunnel.ike]`; its position goes after the SAs' in `pos.subs`.
fn read_ike(r: &mut Reader<'_, '_, '_>) -> Option<IkeSettings> {
    let (k, v) = super::find(r.table, "ike")?;
    let key_at = r.src.span(k.span());
    r.pos.keys.push(("ike", key_at));
    let DeValue::Table(t) = v.get_ref() else {
        r.wrong_type("ike", "a table ([tunnel.ike])", v.get_ref());
        return None;
    };
    let label = format!("{} [tunnel.ike]", r.label);
    let path = format!("{}.ike", r.pos.path);
    let at = r.src.span(v.span());
    let mut s = Reader::new(r.src, t, label, path, at, &mut *r.diags);
    s.unknown_keys(IKE_KEYS);
    let auth = s.parsed::<IkeAuth>("auth", false).unwrap_or_default();
    let remote_auth = s.parsed::<IkeAuth>("remote_auth", false);
    // Required when either side uses the PSK (checked in validation, which
    // knows both).
    let psk_file = s
        .string("psk_file", false)
        .map(PathBuf::from)
        .unwrap_or_default();
    let path = |s: &mut Reader<'_, '_, '_>, k: &'static str| s.string(k, false).map(PathBuf::from);
    let cert_file = path(&mut s, "cert_file");
    let key_file = path(&mut s, "key_file");
    let remote_cert_file = path(&mut s, "remote_cert_file");
    let ca_files = s.list("ca_files", false, |x| Ok(PathBuf::from(x)));
    let crl_files = s.list("crl_files", false, |x| Ok(PathBuf::from(x)));
    let local_id = s.string("local_id", false);
    let remote_id = s.string("remote_id", false);
    let ike_proposals = read_strings(&mut s, "ike_proposals");
    let esp_proposals = read_strings(&mut s, "esp_proposals");
    let initiate = s.boolean("initiate", true);
    let secs = |s: &mut Reader<'_, '_, '_>, k: &'static str| {
        s.int(k, 0..(1 << 32), "1..=4294967295")
            .and_then(|n| u64::try_from(n).ok())
    };
    let dpd_interval = secs(&mut s, "dpd_interval");
    let ike_lifetime = secs(&mut s, "ike_lifetime");
    let child_lifetime = secs(&mut s, "child_lifetime");
    let volume = |s: &mut Reader<'_, '_, '_>, k: &'static str| {
        s.int(k, 0..(1i128 << 63), "1..=9223372036854775807")
            .and_then(|n| u64::try_from(n).ok())
    };
    let child_lifetime_packets = volume(&mut s, "child_lifetime_packets");
    let child_lifetime_bytes = volume(&mut s, "child_lifetime_bytes");
    let local_traffic = read_prefixes(&mut s, "local_traffic");
    let mut adm = crate::ipsec::ADMISSION_DEFAULTS
        .map(|(k, _, max)| {
            let min = if k == "half_open_per_source" || k == "max_half_open" {
                1
            } else {
                0
            };
            s.int(k, min..i128::from(max) + 1, &format!("{min}..={max}"))
                .and_then(|n| u32::try_from(n).ok())
        })
        .into_iter();
    let mut next = || adm.next().flatten();
    let (cookie_threshold, cookie_threshold_per_source, cookie_rate) = (next(), next(), next());
    let (half_open_per_source, max_half_open) = (next(), next());
    let (pos, broken) = (s.pos, s.broken);
    match broken {
        false => {
            r.pos.subs.push(pos);
            Some(IkeSettings {
                auth,
                remote_auth,
                psk_file,
                cert_file,
                key_file,
                ca_files,
                crl_files,
                remote_cert_file,
                local_id,
                remote_id,
                ike_proposals,
                esp_proposals,
                initiate,
                dpd_interval,
                ike_lifetime,
                child_lifetime,
                child_lifetime_packets,
                child_lifetime_bytes,
                local_traffic,
                cookie_threshold,
                cookie_threshold_per_source,
                cookie_rate,
                half_open_per_source,
                max_half_open,
            })
        }
        true => {
            r.broken = true;
            None
        }
    }
}

/// `key = ["...", ...]` (also read by `[ha]`).
pub(super) fn read_strings(r: &mut Reader<'_, '_, '_>, key: &'static str) -> Vec<String> {
    r.list(key, false, |s| Ok(s.to_owned()))
}

/// `traffic = ["10.2.0.0/24", ...]` (or `local_traffic`).
fn read_prefixes(r: &mut Reader<'_, '_, '_>, key: &'static str) -> Vec<Prefix> {
    r.list(key, false, str::parse)
}
