//! `[[interface]]`s: netdevs, VRFs, MTUs, and addresses that do not
//! overlap within a VRF.

use super::{at_line, check_host, check_mtu, check_name, nth, unicast, At, Pos, V};
use super::{MIN_MTU_V4, MIN_MTU_V6};
use crate::model::*;
use std::collections::HashMap;
use std::net::IpAddr;

pub(super) fn check(v: &mut V<'_>) {
    let mut hosts: HashMap<&str, (&str, Pos)> = HashMap::new();
    let mut nets: Vec<Net<'_>> = Vec::new();
    for (i, ifc) in v.cfg.interfaces.iter().enumerate() {
        let p = nth(&v.pos.interfaces, "interface", i);
        let label = format!("[[interface]] \"{}\"", ifc.name);
        if let Some(m) = check_host(&ifc.host) {
            v.err(p.key("host"), &label, m);
        } else if let Some((other, first)) = hosts.get(ifc.host.as_str()) {
            let m = format!(
                "host \"{}\" is already attached by interface \"{other}\"{}",
                ifc.host,
                at_line(*first)
            );
            v.err(p.key("host"), &label, m);
        } else {
            hosts.insert(&ifc.host, (&ifc.name, p.table));
        }
        if let Some(m) = check_name("vrf", &ifc.vrf) {
            v.err(p.key("vrf"), &label, m);
        }
        let has_v6 = ifc.addresses.iter().any(|a| a.addr.is_ipv6());
        let (min, why) = if has_v6 {
            (
                MIN_MTU_V6,
                ": the interface has IPv6 addresses, RFC 8200 §5",
            )
        } else {
            (MIN_MTU_V4, "")
        };
        check_mtu(v, &label, &p, ifc.mtu, min, why);
        for (j, a) in ifc.addresses.iter().enumerate() {
            let at = p.item(j, "addresses");
            if a.prefix_len > if a.addr.is_ipv4() { 32 } else { 128 } {
                v.err(at, &label, format!("address {a}: prefix length too long"));
                continue;
            }
            if !unicast(a.addr) {
                v.err(at, &label, format!("address {a} is not a unicast address"));
                continue;
            }
            nets.push(Net {
                vrf: &ifc.vrf,
                addr: *a,
                range: range(a.network()),
                owner: &ifc.name,
                at,
                order: nets.len(),
            });
        }
    }
    overlaps(v, nets);
}

/// An interface subnet for the overlap check.
struct Net<'a> {
    vrf: &'a str,
    addr: IfAddr,
    /// Family, first and last address of the subnet.
    range: (bool, u128, u128),
    owner: &'a str,
    at: At,
    /// Position in file order, to report a clash on the later address.
    order: usize,
}

fn range(p: Prefix) -> (bool, u128, u128) {
    match p.addr {
        IpAddr::V4(a) => {
            let host = u32::MAX.checked_shr(u32::from(p.len)).unwrap_or(0);
            let start = u32::from(a) & !host;
            (false, u128::from(start), u128::from(start | host))
        }
        IpAddr::V6(a) => {
            let host = u128::MAX.checked_shr(u32::from(p.len)).unwrap_or(0);
            let start = u128::from(a) & !host;
            (true, start, start | host)
        }
    }
}

/// Connected subnets may not overlap within a VRF: the FIB could not tell
/// which interface a neighbour is on. Sorted sweep, O(n log n): prefixes
/// either nest or are disjoint, so a subnet overlaps an earlier-starting one
/// exactly when it starts before the widest one seen so far ends.
fn overlaps(v: &mut V<'_>, mut nets: Vec<Net<'_>>) {
    nets.sort_by_key(|n| (n.vrf, n.range.0, n.range.1, std::cmp::Reverse(n.range.2)));
    let mut cover: Option<usize> = None;
    for i in 0..nets.len() {
        let Some(c) = cover.filter(|c| {
            let (a, b) = (&nets[*c], &nets[i]);
            a.vrf == b.vrf && a.range.0 == b.range.0 && b.range.1 <= a.range.2
        }) else {
            cover = Some(i);
            continue;
        };
        let (first, later) = if nets[c].order < nets[i].order {
            (&nets[c], &nets[i])
        } else {
            (&nets[i], &nets[c])
        };
        let m = format!(
            "address {} overlaps {} of interface \"{}\"{} in VRF \"{}\"",
            later.addr,
            first.addr.network(),
            first.owner,
            at_line(first.at.pos),
            later.vrf
        );
        let label = format!("[[interface]] \"{}\"", later.owner);
        let at = later.at.clone();
        v.err(at, &label, m);
    }
}
