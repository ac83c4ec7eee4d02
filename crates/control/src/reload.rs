//! Live reload (`vecgate reload`, SIGHUP, `POST /config`): the difference
//! between the running configuration and a new one, as a plan of
//! per-object changes (`+` added, `-` removed, `~` changed, like
//! `terraform plan`), each marked when only a restart can apply it.
//! Computing the plan is pure and tested as such; [`crate::Control::reload`]
//! (in `reload/execute.rs`) carries it out through the live API's own
//! steps.

use serde_json::Value;
use std::collections::BTreeSet;
use vecgate_config::{
    Config, Gateway, Interface, Route, Routing, SaDirection, StaticSa, Tunnel, TunnelKind,
};

/// What a change does to its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Add,
    Remove,
    Change,
}

impl Op {
    pub fn sign(self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Remove => "-",
            Op::Change => "~",
        }
    }
}

/// The object a change carries (the new one for `+` and `~`, the old one
/// for `-`), so a plan can be replayed onto a configuration ([`replay`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Gateway(Box<Gateway>),
    Routing(Box<Routing>),
    Ha(Option<Box<vecgate_config::Ha>>),
    Interface(Box<Interface>),
    /// A VRF comes and goes with the interfaces and tunnels in it: shown,
    /// nothing to do of its own.
    Vrf,
    Tunnel(Box<Tunnel>),
    Route(Box<Route>),
    Sa {
        tunnel: String,
        sa: Box<StaticSa>,
    },
}

/// One line of the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub op: Op,
    pub item: Item,
    /// The object's name: interface or tunnel name, `VRF PREFIX`,
    /// `TUNNEL in|out SPI`, or the section.
    pub name: String,
    /// What changes (`mtu: 1500 → 1400`), or what is added or removed.
    pub detail: String,
    /// Why only a restart can apply it (`None`: applied live).
    pub restart: Option<String>,
}

impl Change {
    /// The object's kind as the plan prints it.
    pub fn object(&self) -> &'static str {
        match self.item {
            Item::Gateway(_) => "gateway",
            Item::Routing(_) => "routing",
            Item::Ha(_) => "ha",
            Item::Interface(_) => "interface",
            Item::Vrf => "vrf",
            Item::Tunnel(_) => "tunnel",
            Item::Route(_) => "route",
            Item::Sa { .. } => "sa",
        }
    }

    /// `~ interface lan0: mtu: 1500 → 1400`
    pub fn line(&self) -> String {
        let mut s = format!("{} {} {}", self.op.sign(), self.object(), self.name);
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        if let Some(r) = &self.restart {
            s.push_str(&format!(" (needs a restart: {r})"));
        }
        s
    }
}

/// `key: old → new` for every top-level field that differs (both sides
/// serialized as the API shows them; configurations hold key file paths,
/// never keys). `skip` fields are left out.
fn fields_changed<T: serde::Serialize>(a: &T, b: &T, skip: &[&str]) -> Vec<String> {
    let (Ok(Value::Object(a)), Ok(Value::Object(b))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return vec!["changed".into()];
    };
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| !skip.contains(&k.as_str()))
        .filter_map(|k| {
            let (x, y) = (
                a.get(k).unwrap_or(&Value::Null),
                b.get(k).unwrap_or(&Value::Null),
            );
            (x != y).then(|| format!("{k}: {} → {}", short(x), short(y)))
        })
        .collect()
}

fn short(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn sa_name(tunnel: &str, sa: &StaticSa) -> String {
    let dir = match sa.direction {
        SaDirection::In => "in",
        SaDirection::Out => "out",
    };
    format!("{tunnel} {dir} {:#010x}", sa.spi)
}

fn route_name(r: &Route) -> String {
    format!("{} {}", r.vrf, r.prefix)
}

fn tunnel_summary(t: &Tunnel) -> String {
    let mut s = format!("{} {} → {}", t.kind, t.local, t.remote);
    if let Some(k) = t.key {
        s.push_str(&format!(" key {k}"));
    }
    if t.vrf != vecgate_config::DEFAULT_VRF {
        s.push_str(&format!(" vrf {}", t.vrf));
    }
    if t.ipsec.as_ref().is_some_and(|x| x.ike.is_some()) {
        s.push_str(" (IKEv2)");
    }
    s
}

/// `t` without its static SAs (those are diffed one by one).
fn without_sas(t: &Tunnel) -> Tunnel {
    let mut t = t.clone();
    if let Some(x) = t.ipsec.as_mut() {
        x.sas.clear();
    }
    t
}

fn sas(t: &Tunnel) -> &[StaticSa] {
    t.ipsec.as_ref().map_or(&[][..], |x| &x.sas[..])
}

/// Whether changing tunnel `a` into `b` re-registers it with the SA
/// registry (removed and added again, its SAs with it): a change of
/// kind, endpoints, underlay, NAT-T or IKE settings changes what the SAs
/// are bound to (RFC 4301 §4.4.2: an SA belongs to its peer and
/// selectors). Other changes (overlay VRF, addresses, MTU, traffic
/// selectors' routes, static SAs) are applied in place.
pub fn rekeys(a: &Tunnel, b: &Tunnel) -> bool {
    let ipsec = |t: &Tunnel| t.kind == TunnelKind::Ipsec;
    if !ipsec(a) && !ipsec(b) {
        return false;
    }
    let core = |t: &Tunnel| {
        (
            t.kind,
            t.local,
            t.remote,
            t.underlay_vrf.clone(),
            t.ipsec.as_ref().map(|x| (x.nat_t, x.ike.clone())),
        )
    };
    core(a) != core(b)
}

/// The plan that takes running configuration `a` to `b`: gateway-wide
/// sections, interfaces, VRFs, tunnels, their static SAs, routes, in that
/// order. Empty when `a == b`.
pub fn plan(a: &Config, b: &Config) -> Vec<Change> {
    let mut out = Vec::new();
    if a.gateway != b.gateway {
        out.push(Change {
            op: Op::Change,
            item: Item::Gateway(Box::new(b.gateway.clone())),
            name: "[gateway]".into(),
            detail: fields_changed(&a.gateway, &b.gateway, &[]).join(", "),
            restart: Some(
                "the gateway's name, workers, API, state directory and polling are set up at start"
                    .into(),
            ),
        });
    }
    if a.routing != b.routing {
        out.push(Change {
            op: Op::Change,
            item: Item::Routing(Box::new(b.routing.clone())),
            name: "[routing]".into(),
            detail: fields_changed(&a.routing, &b.routing, &[]).join(", "),
            restart: Some("the FPM server is set up at start".into()),
        });
    }
    if a.ha != b.ha {
        let op = match (&a.ha, &b.ha) {
            (None, Some(_)) => Op::Add,
            (Some(_), None) => Op::Remove,
            _ => Op::Change,
        };
        out.push(Change {
            op,
            item: Item::Ha(b.ha.clone().map(Box::new)),
            name: "[ha]".into(),
            detail: String::new(),
            restart: Some("the VRRP speaker is set up at start".into()),
        });
    }
    interfaces(a, b, &mut out);
    vrfs(a, b, &mut out);
    tunnels(a, b, &mut out);
    routes(a, b, &mut out);
    out
}

/// Interfaces added or removed are attached or released live (their
/// netdev claimed, one queue per worker, [`crate::Control::apply`]); a
/// changed netdev or driver is a restart. Ports belong to names, so the
/// order of the interfaces in the file means nothing.
fn interfaces(a: &Config, b: &Config, out: &mut Vec<Change>) {
    for i in &a.interfaces {
        if b.interface(&i.name).is_none() {
            out.push(Change {
                op: Op::Remove,
                item: Item::Interface(Box::new(i.clone())),
                name: i.name.clone(),
                detail: format!("netdev {} released", i.host),
                restart: None,
            });
        }
    }
    for j in &b.interfaces {
        match a.interface(&j.name) {
            None => out.push(Change {
                op: Op::Add,
                item: Item::Interface(Box::new(j.clone())),
                name: j.name.clone(),
                detail: iface_summary(j),
                restart: None,
            }),
            Some(i) if i != j => {
                let restart = (i.host != j.host || i.driver != j.driver).then(|| {
                    "its netdev's queues are opened with its netdev and driver: remove the \
                     interface and add it under another name, or restart"
                        .to_string()
                });
                out.push(Change {
                    op: Op::Change,
                    item: Item::Interface(Box::new(j.clone())),
                    name: j.name.clone(),
                    detail: fields_changed(i, j, &[]).join(", "),
                    restart,
                });
            }
            Some(_) => {}
        }
    }
}

/// `netdev veth3 (af_packet) 10.5.0.1/24 vrf blue`
fn iface_summary(i: &Interface) -> String {
    let mut s = format!("netdev {} ({})", i.host, i.driver);
    for a in &i.addresses {
        s.push_str(&format!(" {a}"));
    }
    if i.vrf != vecgate_config::DEFAULT_VRF {
        s.push_str(&format!(" vrf {}", i.vrf));
    }
    s
}

fn vrfs(a: &Config, b: &Config, out: &mut Vec<Change>) {
    let (va, vb) = (a.vrfs(), b.vrfs());
    for v in va.iter().filter(|v| !vb.contains(v)) {
        out.push(Change {
            op: Op::Remove,
            item: Item::Vrf,
            name: v.clone(),
            detail: String::new(),
            restart: None,
        });
    }
    for v in vb.iter().filter(|v| !va.contains(v)) {
        out.push(Change {
            op: Op::Add,
            item: Item::Vrf,
            name: v.clone(),
            detail: String::new(),
            restart: None,
        });
    }
}

fn tunnels(a: &Config, b: &Config, out: &mut Vec<Change>) {
    for t in &a.tunnels {
        if b.tunnel(&t.name).is_none() {
            out.push(Change {
                op: Op::Remove,
                item: Item::Tunnel(Box::new(t.clone())),
                name: t.name.clone(),
                detail: tunnel_summary(t),
                restart: None,
            });
        }
    }
    for u in &b.tunnels {
        let Some(t) = a.tunnel(&u.name) else {
            out.push(Change {
                op: Op::Add,
                item: Item::Tunnel(Box::new(u.clone())),
                name: u.name.clone(),
                detail: tunnel_summary(u),
                restart: None,
            });
            continue;
        };
        let (ct, cu) = (without_sas(t), without_sas(u));
        if ct != cu {
            let mut d = fields_changed(&ct, &cu, &["ipsec"]);
            if let (Some(x), Some(y)) = (&ct.ipsec, &cu.ipsec) {
                d.extend(fields_changed(x, y, &["sas", "ike"]));
                match (&x.ike, &y.ike) {
                    (Some(i), Some(j)) => d.extend(
                        fields_changed(i, j, &[])
                            .into_iter()
                            .map(|f| format!("ike.{f}")),
                    ),
                    (None, Some(_)) => d.push("ike: added".into()),
                    (Some(_), None) => d.push("ike: removed".into()),
                    (None, None) => {}
                }
            } else if ct.ipsec != cu.ipsec {
                d.push("ipsec settings".into());
            }
            if rekeys(t, u) {
                d.push("its SAs are registered anew".into());
            }
            out.push(Change {
                op: Op::Change,
                item: Item::Tunnel(Box::new(u.clone())),
                name: u.name.clone(),
                detail: d.join(", "),
                restart: None,
            });
        }
        let key = |s: &StaticSa| (s.direction == SaDirection::Out, s.spi);
        for s in sas(t) {
            if !sas(u).iter().any(|x| key(x) == key(s)) {
                out.push(sa_change(Op::Remove, &t.name, s, None));
            }
        }
        for s in sas(u) {
            match sas(t).iter().find(|x| key(x) == key(s)) {
                None => out.push(sa_change(Op::Add, &u.name, s, None)),
                Some(x) if x != s => out.push(sa_change(
                    Op::Change,
                    &u.name,
                    s,
                    Some(fields_changed(x, s, &[]).join(", ")),
                )),
                Some(_) => {}
            }
        }
    }
}

fn sa_change(op: Op, tunnel: &str, s: &StaticSa, changed: Option<String>) -> Change {
    let restart = changed.as_ref().map(|_| {
        "an SPI names one SA with one key and its settings (RFC 4303 §2.1): give the changed SA a new SPI".into()
    });
    Change {
        op,
        item: Item::Sa {
            tunnel: tunnel.to_owned(),
            sa: Box::new(s.clone()),
        },
        name: sa_name(tunnel, s),
        detail: changed
            .unwrap_or_else(|| format!("{}, key file {}", s.algorithm, s.key_file.display())),
        restart,
    }
}

fn routes(a: &Config, b: &Config, out: &mut Vec<Change>) {
    let find = |c: &Config, r: &Route| {
        c.routes
            .iter()
            .find(|x| x.vrf == r.vrf && x.prefix == r.prefix)
            .cloned()
    };
    for r in &a.routes {
        if find(b, r).is_none() {
            out.push(Change {
                op: Op::Remove,
                item: Item::Route(Box::new(r.clone())),
                name: route_name(r),
                detail: format!("via {}", r.via),
                restart: None,
            });
        }
    }
    for r in &b.routes {
        match find(a, r) {
            None => out.push(Change {
                op: Op::Add,
                item: Item::Route(Box::new(r.clone())),
                name: route_name(r),
                detail: format!("via {}", r.via),
                restart: None,
            }),
            Some(x) if x != *r => out.push(Change {
                op: Op::Change,
                item: Item::Route(Box::new(r.clone())),
                name: route_name(r),
                detail: format!("via {} → {}", x.via, r.via),
                restart: None,
            }),
            Some(_) => {}
        }
    }
}

/// Replays `plan` onto `a` object by object (what [`crate::Control::reload`]
/// does to the running state, on the configuration alone). Tunnels and
/// routes added go last, static SAs added last in their tunnel: the
/// result equals the plan's target up to that order ([`canonical`]).
pub fn replay(a: &Config, plan: &[Change]) -> Config {
    let mut c = a.clone();
    for ch in plan {
        match (&ch.item, ch.op) {
            (Item::Gateway(g), _) => c.gateway = (**g).clone(),
            (Item::Routing(r), _) => c.routing = (**r).clone(),
            (Item::Ha(h), _) => c.ha = h.as_deref().cloned(),
            (Item::Vrf, _) => {}
            (Item::Interface(i), Op::Remove) => c.interfaces.retain(|x| x.name != i.name),
            (Item::Interface(i), Op::Add) => c.interfaces.push((**i).clone()),
            (Item::Interface(i), Op::Change) => {
                if let Some(x) = c.interfaces.iter_mut().find(|x| x.name == i.name) {
                    *x = (**i).clone();
                }
            }
            (Item::Tunnel(t), Op::Remove) => c.tunnels.retain(|x| x.name != t.name),
            (Item::Tunnel(t), Op::Add) => c.tunnels.push((**t).clone()),
            (Item::Tunnel(t), Op::Change) => {
                if let Some(x) = c.tunnels.iter_mut().find(|x| x.name == t.name) {
                    // The SAs change by their own lines.
                    let kept = x.ipsec.as_ref().map(|i| i.sas.clone()).unwrap_or_default();
                    *x = (**t).clone();
                    if let Some(i) = x.ipsec.as_mut() {
                        i.sas = kept;
                    }
                }
            }
            (Item::Sa { tunnel, sa }, op) => {
                let Some(x) = c
                    .tunnels
                    .iter_mut()
                    .find(|t| t.name == *tunnel)
                    .and_then(|t| t.ipsec.as_mut())
                else {
                    continue;
                };
                let same = |s: &StaticSa| s.direction == sa.direction && s.spi == sa.spi;
                match op {
                    Op::Remove => x.sas.retain(|s| !same(s)),
                    Op::Add => x.sas.push((**sa).clone()),
                    Op::Change => {
                        if let Some(s) = x.sas.iter_mut().find(|s| same(s)) {
                            *s = (**sa).clone();
                        }
                    }
                }
            }
            (Item::Route(r), Op::Remove) => c
                .routes
                .retain(|x| !(x.vrf == r.vrf && x.prefix == r.prefix)),
            (Item::Route(r), Op::Add) => c.routes.push((**r).clone()),
            (Item::Route(r), Op::Change) => {
                if let Some(x) = c
                    .routes
                    .iter_mut()
                    .find(|x| x.vrf == r.vrf && x.prefix == r.prefix)
                {
                    *x = (**r).clone();
                }
            }
        }
    }
    c
}

/// `c` with its interfaces, tunnels, routes and SAs in a fixed order (the
/// order of objects in a file carries no meaning).
pub fn canonical(c: &Config) -> Config {
    let mut c = c.clone();
    c.interfaces.sort_by(|a, b| a.name.cmp(&b.name));
    c.tunnels.sort_by(|a, b| a.name.cmp(&b.name));
    for t in &mut c.tunnels {
        if let Some(x) = t.ipsec.as_mut() {
            x.sas
                .sort_by_key(|s| (s.direction == SaDirection::Out, s.spi));
        }
    }
    c.routes
        .sort_by(|a, b| (&a.vrf, a.prefix.to_string()).cmp(&(&b.vrf, b.prefix.to_string())));
    c
}

mod execute;
#[cfg(test)]
mod tests;
