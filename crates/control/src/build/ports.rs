//! Port numbers of interfaces and tunnels, stable for their life.

use std::collections::HashMap;
use vecgate_config::Config;

/// Port numbers of interfaces and tunnels, kept stable across live
/// changes: an interface or tunnel keeps its port for its whole life, so
/// adding or deleting one never renumbers another (its neighbour entries,
/// counters and in-flight packets stay its own). At startup interface `i`
/// gets port `i` and tunnel `j` port `interfaces + j`; what is added
/// later gets a free port of the range above the startup interfaces
/// ([`dataplane::graph::MAX_VIRTUAL_PORTS`] of them, which every worker
/// counts from the start), round robin, so a deleted one's port is not
/// handed out again until the allocator has gone round (packets still
/// carrying it are dropped as `interface-down` / `no-interface`, counted,
/// instead of reaching another interface or tunnel).
#[derive(Clone, Debug)]
pub struct Ports {
    first: usize,
    ifaces: HashMap<String, u16>,
    tunnels: HashMap<String, u16>,
    /// Where the next search for a free port starts (round robin).
    cursor: usize,
}

impl Ports {
    /// An allocator for a gateway started with `cfg`'s interfaces.
    pub fn new(cfg: &Config) -> Self {
        Ports {
            first: cfg.interfaces.len(),
            ifaces: cfg
                .interfaces
                .iter()
                .enumerate()
                .map(|(i, ifc)| (ifc.name.clone(), i as u16))
                .collect(),
            tunnels: HashMap::new(),
            cursor: 0,
        }
    }

    /// Ports for `cfg`'s interfaces and tunnels: existing names keep
    /// theirs, new ones get free ports. Nothing changes until
    /// [`Ports::commit`].
    pub fn assign(&self, cfg: &Config) -> Result<Assignment, String> {
        let max = dataplane::graph::MAX_VIRTUAL_PORTS;
        let mut ifaces: HashMap<String, u16> = HashMap::new();
        let mut tunnels: HashMap<String, u16> = HashMap::new();
        for i in &cfg.interfaces {
            if let Some(p) = self.ifaces.get(&i.name) {
                ifaces.insert(i.name.clone(), *p);
            }
        }
        for t in &cfg.tunnels {
            if let Some(p) = self.tunnels.get(&t.name) {
                tunnels.insert(t.name.clone(), *p);
            }
        }
        let mut cursor = self.cursor;
        let new_ifaces = cfg.interfaces.iter().map(|i| (true, &i.name));
        let new_tunnels = cfg.tunnels.iter().map(|t| (false, &t.name));
        for (is_iface, name) in new_ifaces.chain(new_tunnels) {
            let known = if is_iface { &ifaces } else { &tunnels };
            if known.contains_key(name) {
                continue;
            }
            let used = |p: u16| ifaces.values().chain(tunnels.values()).any(|v| *v == p);
            let mut found = None;
            for k in 0..max {
                let slot = (cursor + k) % max;
                let port = u16::try_from(self.first + slot)
                    .map_err(|_| "too many interfaces for the port numbers".to_string())?;
                if !used(port) {
                    found = Some((slot, port));
                    break;
                }
            }
            let (slot, port) = found.ok_or_else(|| {
                format!("{name}: no free port (at most {max} tunnels and interfaces added live)")
            })?;
            cursor = (slot + 1) % max;
            if is_iface {
                ifaces.insert(name.clone(), port);
            } else {
                tunnels.insert(name.clone(), port);
            }
        }
        Ok(Assignment {
            ifaces,
            ports: tunnels,
            cursor,
        })
    }

    /// Makes `a` (from [`Ports::assign`]) the current assignment.
    pub fn commit(&mut self, a: Assignment) {
        self.ifaces = a.ifaces;
        self.tunnels = a.ports;
        self.cursor = a.cursor;
    }
}

/// Interface and tunnel names → ports, as [`Ports::assign`] proposes them.
#[derive(Clone, Debug, Default)]
pub struct Assignment {
    pub ifaces: HashMap<String, u16>,
    /// Tunnels' virtual ports.
    pub ports: HashMap<String, u16>,
    cursor: usize,
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A gateway with interface "wan" and a GRE tunnel per name.
    pub(crate) fn cfg(names: &[&str]) -> Config {
        let mut text = String::from(
            "[gateway]\nname = \"g\"\n[[interface]]\nname = \"wan\"\nhost = \"veth0\"\ndriver = \"af_packet\"\naddresses = [\"192.0.2.1/24\"]\n",
        );
        for (i, n) in names.iter().enumerate() {
            text.push_str(&format!(
                "[[tunnel]]\nname = \"{n}\"\nkind = \"gre\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.{}\"\n",
                i + 10
            ));
        }
        vecgate_config::parse(&text).expect("test config parses")
    }

    #[test]
    fn tunnel_ports_are_stable_and_not_reused_at_once() {
        let mut tp = Ports::new(&cfg(&[]));
        let a = tp.assign(&cfg(&["a", "b", "c"])).unwrap();
        assert_eq!(
            (a.ports["a"], a.ports["b"], a.ports["c"]),
            (1, 2, 3),
            "startup order"
        );
        tp.commit(a);
        // Deleting "a" renumbers nobody.
        let b = tp.assign(&cfg(&["b", "c"])).unwrap();
        assert_eq!((b.ports["b"], b.ports["c"]), (2, 3));
        tp.commit(b);
        // A new tunnel does not get the freed port 1.
        let c = tp.assign(&cfg(&["b", "c", "d"])).unwrap();
        assert_eq!(c.ports["d"], 4);
        tp.commit(c);
        let d = tp.assign(&cfg(&["b", "c", "d", "e"])).unwrap();
        assert_eq!(d.ports["e"], 5);
        assert_eq!(d.ifaces["wan"], 0);
    }

    /// An interface added live takes the next free port of the shared
    /// range; removing an interface renumbers nothing, and its port is
    /// not handed out at once.
    #[test]
    fn interfaces_added_live_share_the_range_with_tunnels() {
        let mut tp = Ports::new(&cfg(&[]));
        let a = tp.assign(&cfg(&["a"])).unwrap();
        assert_eq!((a.ifaces["wan"], a.ports["a"]), (0, 1));
        tp.commit(a);
        let mut two = cfg(&["a"]);
        let mut lan = two.interfaces[0].clone();
        lan.name = "lan".into();
        lan.host = "veth1".into();
        lan.addresses.clear();
        two.interfaces.push(lan);
        let b = tp.assign(&two).unwrap();
        assert_eq!((b.ifaces["wan"], b.ifaces["lan"], b.ports["a"]), (0, 2, 1));
        tp.commit(b);
        // lan leaves, a tunnel comes: not on lan's port.
        let c = tp.assign(&cfg(&["a", "b"])).unwrap();
        assert_eq!(c.ports["b"], 3);
        assert!(!c.ifaces.contains_key("lan"));
    }
}
