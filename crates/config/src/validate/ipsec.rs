//! Semantic checks of `kind = "ipsec"` tunnels (a child of `validate`).

use super::{at_line, nth, ObjPos, Pos, V};
use crate::ipsec::{IkeAuth, IkeSettings, SaDirection, MAX_REPLAY_WINDOW, PROPOSAL_TOKENS};
use crate::model::TunnelKind;
use std::collections::HashMap;

pub(super) fn check(v: &mut V<'_>) {
    // Inbound SPIs identify the SA on receipt: unique per gateway
    // (RFC 4301 §4.1).
    let mut spis: HashMap<u32, (String, Pos)> = HashMap::new();
    for (i, t) in v.cfg.tunnels.iter().enumerate() {
        let p = nth(&v.pos.tunnels, "tunnel", i);
        let label = format!("[[tunnel]] \"{}\"", t.name);
        let Some(x) = &t.ipsec else {
            continue;
        };
        if t.kind != TunnelKind::Ipsec {
            for k in ["nat_t", "traffic", "sa", "ike"] {
                if p.keys.iter().any(|(key, _)| *key == k) || p.line_zero_has(k, x) {
                    v.err(
                        p.key(k),
                        &label,
                        format!("{k} applies to kind = \"ipsec\" only"),
                    );
                }
            }
            continue;
        }
        for pre in &x.traffic {
            if pre.len > if pre.addr.is_ipv4() { 32 } else { 128 } {
                v.err(
                    p.key("traffic"),
                    &label,
                    format!("traffic {pre}: prefix length too long"),
                );
            } else if pre.masked() != *pre {
                v.err(
                    p.key("traffic"),
                    &label,
                    format!(
                        "traffic {pre}: host bits set (did you mean {}?)",
                        pre.masked()
                    ),
                );
            }
        }
        if let Some(ike) = &x.ike {
            if !x.sas.is_empty() {
                v.err(
                    p.key("ike"),
                    &label,
                    "[tunnel.ike] and [[tunnel.sa]] are mutually exclusive: keys come either from IKEv2 or from files".to_owned(),
                );
            }
            let ip = p.sub(x.sas.len(), "ike");
            check_ike(v, &ip, &format!("{label} [tunnel.ike]"), ike);
        }
        let outs = x
            .sas
            .iter()
            .filter(|s| s.direction == SaDirection::Out)
            .count();
        if !x.sas.is_empty() && outs != 1 {
            v.err(
                p.key("sa"),
                &label,
                format!("needs exactly one [[tunnel.sa]] with direction = \"out\" (found {outs})"),
            );
        }
        if !x.sas.is_empty() && x.inbound().next().is_none() {
            v.err(
                p.key("sa"),
                &label,
                "needs at least one [[tunnel.sa]] with direction = \"in\"".to_owned(),
            );
        }
        for (j, sa) in x.sas.iter().enumerate() {
            let sp = p.sub(j, &format!("sa[{j}]"));
            let sl = format!("{label} [[tunnel.sa]] #{} (spi {:#x})", j + 1, sa.spi);
            if sa.spi < 256 {
                v.err(
                    sp.key("spi"),
                    &sl,
                    format!("spi = {} is reserved (0-255, RFC 4303 §2.1)", sa.spi),
                );
            }
            if sa.replay_window > MAX_REPLAY_WINDOW {
                v.err(
                    sp.key("replay_window"),
                    &sl,
                    format!(
                        "replay_window = {} is larger than {MAX_REPLAY_WINDOW}",
                        sa.replay_window
                    ),
                );
            }
            for (k, val) in [
                ("lifetime_bytes", sa.lifetime_bytes),
                ("lifetime_packets", sa.lifetime_packets),
                ("lifetime_seconds", sa.lifetime_seconds),
            ] {
                if val == Some(0) {
                    v.err(
                        sp.key(k),
                        &sl,
                        format!("{k} = 0: leave the key out for no limit"),
                    );
                }
            }
            if sa.key_file.as_os_str().is_empty() {
                v.err(sp.key("key_file"), &sl, "key_file is empty".to_owned());
            }
            if sa.direction == SaDirection::In {
                if let Some((other, first)) = spis.get(&sa.spi) {
                    let m = format!(
                        "inbound spi {:#x} is also used by tunnel \"{other}\"{}: inbound SPIs must be unique (RFC 4301 §4.1)",
                        sa.spi,
                        at_line(*first)
                    );
                    v.err(sp.key("spi"), &sl, m);
                } else {
                    spis.insert(sa.spi, (t.name.clone(), sp.key_pos("spi")));
                }
            }
        }
    }
}

/// `[tunnel.ike]`: what can be checked without the IKE library (the
/// proposals' full grammar is checked when the gateway starts).
fn check_ike(v: &mut V<'_>, p: &ObjPos, label: &str, ike: &IkeSettings) {
    check_ike_auth(v, p, label, ike);
    for (k, id) in [("local_id", &ike.local_id), ("remote_id", &ike.remote_id)] {
        if id.as_deref().is_some_and(|s| s.trim().is_empty()) {
            v.err(p.key(k), label, format!("{k} is empty"));
        }
    }
    for (k, list) in [
        ("ike_proposals", &ike.ike_proposals),
        ("esp_proposals", &ike.esp_proposals),
    ] {
        for prop in list {
            if let Some(t) = prop.split('-').find(|t| !PROPOSAL_TOKENS.contains(t)) {
                v.err(
                    p.key(k),
                    label,
                    format!("{k}: \"{prop}\": unknown algorithm \"{t}\" (expected e.g. aes256-sha256-modp2048, aes128gcm16-prfsha256-ecp256, aes128-sha1-x25519)"),
                );
            }
        }
    }
    for (k, val) in [
        ("dpd_interval", ike.dpd_interval),
        ("ike_lifetime", ike.ike_lifetime),
        ("child_lifetime", ike.child_lifetime),
        ("child_lifetime_packets", ike.child_lifetime_packets),
        ("child_lifetime_bytes", ike.child_lifetime_bytes),
    ] {
        if val == Some(0) {
            // Lifetimes have defaults (strongSwan's); liveness checks none.
            let what = if k == "dpd_interval" {
                "to disable"
            } else {
                "for the default"
            };
            v.err(
                p.key(k),
                label,
                format!("{k} = 0: leave the key out {what}"),
            );
        }
    }
    // A cookie threshold above the limit it precedes never starts cookies
    // (RFC 8019 §4.1: cookies first, then the limit).
    let a = ike.admission();
    let set = ike.admission_keys();
    for (t, lim) in [(0, 4), (1, 3), (3, 4)] {
        let ((tk, tv), (lk, lv)) = (a[t], a[lim]);
        if tv > lv {
            let at = if set[t].1.is_some() { tk } else { lk };
            let what = if t == 3 {
                "one source could hold more half-open SAs than the gateway"
            } else {
                "cookies would never be demanded by that count"
            };
            v.err(
                p.key(at),
                label,
                format!("{tk} = {tv} is above {lk} = {lv}: {what}"),
            );
        }
    }
    for pre in &ike.local_traffic {
        if pre.len > if pre.addr.is_ipv4() { 32 } else { 128 } || pre.masked() != *pre {
            v.err(
                p.key("local_traffic"),
                label,
                format!(
                    "local_traffic {pre}: not a network prefix (did you mean {}?)",
                    pre.masked()
                ),
            );
        }
    }
}

impl ObjPos {
    /// For configurations built in code (no positions): whether the IPsec
    /// key `k` carries a non-default value.
    fn line_zero_has(&self, k: &str, x: &crate::ipsec::Ipsec) -> bool {
        self.keys.is_empty()
            && match k {
                "nat_t" => x.nat_t,
                "traffic" => !x.traffic.is_empty(),
                "ike" => x.ike.is_some(),
                _ => !x.sas.is_empty(),
            }
    }
}

/// The authentication keys of `[tunnel.ike]`: each file the methods in
/// use need, and none they do not (a key that would be ignored is a
/// mistake worth saying).
fn check_ike_auth(v: &mut V<'_>, p: &ObjPos, label: &str, ike: &IkeSettings) {
    let has = |k: &str| p.keys.iter().any(|(key, _)| *key == k);
    let (ours, peer) = (ike.auth, ike.peer_auth());
    let methods = match ike.remote_auth {
        Some(r) if r != ike.auth => format!("auth = \"{ours}\", remote_auth = \"{r}\""),
        _ => format!("auth = \"{ours}\""),
    };
    if ike.uses_psk() {
        if ike.psk_file.as_os_str().is_empty() {
            let m = if has("psk_file") {
                "psk_file is empty".to_owned()
            } else {
                format!("missing required key \"psk_file\" (with {methods})")
            };
            v.err(p.key("psk_file"), label, m);
        }
    } else if has("psk_file") {
        v.err(
            p.key("psk_file"),
            label,
            format!("psk_file is not used with {methods}: leave it out"),
        );
    }
    let files = [
        ("cert_file", ike.cert_file.as_deref(), ours),
        ("key_file", ike.key_file.as_deref(), ours),
        ("remote_cert_file", ike.remote_cert_file.as_deref(), peer),
    ];
    for (k, f, side) in files {
        let needed = side == IkeAuth::Pubkey && k != "remote_cert_file";
        match f {
            None if needed => v.err(
                p.key(k),
                label,
                format!("missing required key \"{k}\" (with {methods})"),
            ),
            Some(f) if f.as_os_str().is_empty() => v.err(p.key(k), label, format!("{k} is empty")),
            Some(_) if side != IkeAuth::Pubkey => v.err(
                p.key(k),
                label,
                format!("{k} is not used with {methods}: leave it out"),
            ),
            _ => {}
        }
    }
    for (k, list) in [("ca_files", &ike.ca_files), ("crl_files", &ike.crl_files)] {
        if !list.is_empty() && peer != IkeAuth::Pubkey {
            v.err(
                p.key(k),
                label,
                format!("{k} is not used with {methods}: leave it out"),
            );
        } else if list.iter().any(|f| f.as_os_str().is_empty()) {
            v.err(p.key(k), label, format!("{k} holds an empty path"));
        }
    }
    if peer == IkeAuth::Pubkey {
        if ike.ca_files.is_empty() && ike.remote_cert_file.is_none() {
            v.err(
                p.key("ca_files"),
                label,
                "the peer's certificate needs ca_files (or remote_cert_file) to be trusted"
                    .to_owned(),
            );
        }
        if !ike.crl_files.is_empty() && ike.ca_files.is_empty() {
            v.err(
                p.key("crl_files"),
                label,
                "crl_files needs ca_files (a CRL is checked along a chain to a CA)".to_owned(),
            );
        }
    }
}
