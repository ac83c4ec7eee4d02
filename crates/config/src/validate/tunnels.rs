//! `[[tunnel]]`s: endpoints, keys by kind, kind-specific flags, and
//! tunnels a receiver could tell apart.

use super::{at_line, check_mtu, check_name, family, nth, unicast, At, Pos, V};
use super::{MAX_24BIT, MIN_MTU_V4, NVGRE_RESERVED_LOW};
use crate::model::*;
use std::collections::HashMap;
use std::net::IpAddr;

pub(super) fn check(v: &mut V<'_>) {
    type Identity = (TunnelKind, IpAddr, IpAddr, Option<u32>, u16);
    let mut ids: HashMap<Identity, (&str, Pos)> = HashMap::new();
    for (i, t) in v.cfg.tunnels.iter().enumerate() {
        let p = nth(&v.pos.tunnels, "tunnel", i);
        let label = format!("[[tunnel]] \"{}\"", t.name);
        for (key, vrf) in [("vrf", &t.vrf), ("underlay_vrf", &t.underlay_vrf)] {
            if let Some(m) = check_name(key, vrf) {
                v.err(p.key(key), &label, m);
            }
        }
        // A clash of the two ends is shown where it becomes visible (at
        // `remote`) and named by the first end of the pair (`local`).
        let ends = At {
            pos: p.key_pos("remote"),
            field: p.key("local").field,
        };
        if t.local.is_ipv4() != t.remote.is_ipv4() {
            let m = format!(
                "local {} is {} but remote {} is {}: both ends of a tunnel must be the same address family",
                t.local,
                family(t.local),
                t.remote,
                family(t.remote)
            );
            v.err(ends, &label, m);
        } else if t.local == t.remote {
            let m = format!("local and remote are both {}", t.local);
            v.err(ends, &label, m);
        }
        for (key, a) in [("local", t.local), ("remote", t.remote)] {
            if !unicast(a) {
                v.err(
                    p.key(key),
                    &label,
                    format!("{key} {a} is not a unicast address"),
                );
            }
        }
        let kp = p.key("key");
        match (t.kind, t.key) {
            (TunnelKind::Gre, _) => {}
            (TunnelKind::Nvgre, None) => v.err(p.key("key"),
                &label,
                "missing required key \"key\" (the NVGRE VSID, RFC 7637 §3.2)".to_owned(),
            ),
            (TunnelKind::Nvgre, Some(k)) if k <= NVGRE_RESERVED_LOW || k == MAX_24BIT => v.err(
                kp,
                &label,
                format!(
                    "key = {k} is a reserved NVGRE VSID (expected 4096..=16777214; 0-0xFFF and 0xFFFFFF are reserved, RFC 7637 §3.2)"
                ),
            ),
            (TunnelKind::Nvgre, Some(k)) if k > MAX_24BIT => v.err(
                kp,
                &label,
                format!("key = {k} is out of range for an NVGRE VSID (24 bits: 4096..=16777214)"),
            ),
            (TunnelKind::Vxlan, None) => v.err(p.key("key"),
                &label,
                "missing required key \"key\" (the VXLAN VNI, RFC 7348 §5)".to_owned(),
            ),
            (TunnelKind::Vxlan, Some(k)) if k > MAX_24BIT => v.err(
                kp,
                &label,
                format!("key = {k} is out of range for a VXLAN VNI (24 bits: 0..=16777215)"),
            ),
            (TunnelKind::Ipsec, Some(_)) => v.err(
                kp,
                &label,
                "key has no meaning for kind = \"ipsec\" (SPIs are negotiated by IKEv2)".to_owned(),
            ),
            _ => {}
        }
        if t.kind != TunnelKind::Gre {
            let why = if t.kind == TunnelKind::Nvgre {
                "NVGRE requires the C and S bits to be zero, RFC 7637 §3.2"
            } else {
                "it applies to kind = \"gre\" only"
            };
            for (key, on) in [("checksum", t.checksum), ("sequence", t.sequence)] {
                if on {
                    v.err(
                        p.key(key),
                        &label,
                        format!(
                            "{key} = true is not allowed for kind = \"{}\" ({why})",
                            t.kind
                        ),
                    );
                }
            }
        }
        if t.kind == TunnelKind::Vxlan {
            if t.port == 0 {
                v.err(
                    p.key("port"),
                    &label,
                    "port = 0 is not a valid UDP port".to_owned(),
                );
            }
        } else if t.port != VXLAN_PORT {
            let m = format!("port = {} applies to kind = \"vxlan\" only", t.port);
            v.err(p.key("port"), &label, m);
        }
        check_mtu(v, &label, &p, t.mtu, MIN_MTU_V4, "");
        if t.inner == TunnelInner::Ethernet && t.kind == TunnelKind::Ipsec {
            v.err(
                p.key("inner"),
                &label,
                "inner = \"ethernet\" is not allowed for kind = \"ipsec\" (ESP tunnel mode carries IP)".to_owned(),
            );
        }
        for (j, a) in t.addresses.iter().enumerate() {
            let at = p.item(j, "addresses");
            if a.prefix_len > if a.addr.is_ipv4() { 32 } else { 128 } {
                v.err(at, &label, format!("address {a}: prefix length too long"));
            } else if !unicast(a.addr) {
                v.err(at, &label, format!("address {a} is not a unicast address"));
            }
        }
        // ESP tunnels are told apart by their inbound SPIs (checked unique
        // across tunnels by the IPsec validator), not by a key.
        let id = (t.kind, t.local, t.remote, t.key, t.port);
        if t.kind == TunnelKind::Ipsec {
            continue;
        }
        if let Some((other, first)) = ids.get(&id) {
            let m = format!(
                "same kind, local, remote and key as tunnel \"{other}\"{}: the receiver could not tell them apart",
                at_line(*first)
            );
            // The whole table clashes; named by its peer, what usually
            // tells tunnels of one kind and key apart.
            let at = At {
                pos: p.table,
                field: p.key("remote").field,
            };
            v.err(at, &label, m);
        } else {
            ids.insert(id, (&t.name, p.table));
        }
    }
}
