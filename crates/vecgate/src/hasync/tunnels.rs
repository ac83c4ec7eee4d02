//! Tunnels follow the active (issue 16), as static routes do: the active
//! sends its running configuration's tunnels (those added or removed
//! through the API included) as `POST /tunnels` specs — non-secret: key
//! and PSK files are named by path and must exist on both gateways — and
//! the standby adds, replaces and removes its own through the API's own
//! calls until they are the active's.

use std::collections::HashMap;

use serde_json::{json, Value};
use vecgate_config::{Tunnel, TunnelKind};

/// The chunks of one set (routes or tunnels) being gathered: a newer
/// generation starts over; complete once every chunk is here.
pub(super) struct Gather<T> {
    generation: u64,
    chunks: HashMap<u16, Vec<T>>,
}

impl<T> Gather<T> {
    pub(super) fn new() -> Self {
        Gather {
            generation: 0,
            chunks: HashMap::new(),
        }
    }

    /// Keeps chunk `chunk` of `chunks` of `generation`; the whole set once
    /// it is complete.
    pub(super) fn add(
        &mut self,
        generation: u64,
        chunk: u16,
        chunks: u16,
        items: Vec<T>,
    ) -> Option<Vec<T>> {
        if self.generation != generation {
            self.generation = generation;
            self.chunks.clear();
        }
        self.chunks.insert(chunk, items);
        (self.chunks.len() == usize::from(chunks)).then(|| {
            let mut all = Vec::new();
            for i in 0..chunks {
                all.extend(self.chunks.remove(&i).unwrap_or_default());
            }
            all
        })
    }
}

/// `t` as `POST /tunnels` takes it, without secrets (files by path).
/// Keys that only some kinds take are given for those kinds alone.
pub fn spec_of(t: &Tunnel) -> Value {
    let mut v = json!({
        "name": t.name,
        "kind": t.kind.as_str(),
        "local": t.local.to_string(),
        "remote": t.remote.to_string(),
        "vrf": t.vrf,
        "underlay_vrf": t.underlay_vrf,
    });
    let o = v.as_object_mut().expect("an object");
    if let Some(k) = t.key {
        o.insert("key".into(), k.into());
    }
    if let Some(m) = t.mtu {
        o.insert("mtu".into(), m.into());
    }
    if t.kind == TunnelKind::Gre {
        o.insert("checksum".into(), t.checksum.into());
        o.insert("sequence".into(), t.sequence.into());
        o.insert("inner".into(), t.inner.as_str().into());
    }
    if t.kind == TunnelKind::Vxlan {
        o.insert("port".into(), t.port.into());
    }
    if !t.addresses.is_empty() {
        let a: Vec<String> = t.addresses.iter().map(|a| a.to_string()).collect();
        o.insert("addresses".into(), a.into());
    }
    if let Some(x) = &t.ipsec {
        o.insert("nat_t".into(), x.nat_t.into());
        let tr: Vec<String> = x.traffic.iter().map(|p| p.to_string()).collect();
        o.insert("traffic".into(), tr.into());
        if let Some(ike) = &x.ike {
            o.insert(
                "ike".into(),
                serde_json::to_value(ike).unwrap_or(Value::Null),
            );
        } else {
            let sas: Vec<Value> = x
                .sas
                .iter()
                .map(|s| {
                    let mut sa = json!({
                        "direction": s.direction.as_str(),
                        "spi": s.spi,
                        "algorithm": s.algorithm.as_str(),
                        "key_file": s.key_file.display().to_string(),
                        "esn": s.esn,
                    });
                    let m = sa.as_object_mut().expect("an object");
                    if s.direction == vecgate_config::ipsec::SaDirection::In {
                        m.insert("replay_window".into(), s.replay_window.into());
                    }
                    for (k, l) in [
                        ("lifetime_bytes", s.lifetime_bytes),
                        ("lifetime_packets", s.lifetime_packets),
                        ("lifetime_seconds", s.lifetime_seconds),
                    ] {
                        if let Some(l) = l {
                            m.insert(k.into(), l.into());
                        }
                    }
                    sa
                })
                .collect();
            o.insert("sa".into(), sas.into());
        }
    }
    v
}

/// The name a spec carries (`None`: not a spec).
pub fn name_of(spec: &str) -> Option<String> {
    serde_json::from_str::<Value>(spec)
        .ok()?
        .get("name")?
        .as_str()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tunnel of a configuration round-trips through its spec: the
    /// API parses it back into the same `[[tunnel]]` (no field lost, none
    /// refused), so the standby builds what the active runs.
    #[test]
    fn specs_parse_back_into_the_same_tunnels() {
        let cfg = vecgate_config::parse(
            r#"
[gateway]
name = "t"

[[interface]]
name = "wan0"
host = "wan0"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[[tunnel]]
name = "g0"
kind = "gre"
local = "192.0.2.1"
remote = "192.0.2.9"
key = 7
checksum = true
mtu = 1400

[[tunnel]]
name = "x0"
kind = "vxlan"
local = "192.0.2.1"
remote = "192.0.2.8"
key = 5000
port = 4790
addresses = ["10.9.0.1/24"]

[[tunnel]]
name = "e0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.7"
traffic = ["10.2.0.0/24"]

[[tunnel.sa]]
direction = "out"
spi = 0x1001
algorithm = "aes128gcm16"
key_file = "/k/1001.hex"
lifetime_seconds = 3600

[[tunnel.sa]]
direction = "in"
spi = 0x2001
algorithm = "aes128gcm16"
key_file = "/k/2001.hex"
replay_window = 128

[[tunnel]]
name = "ike0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.6"
traffic = ["10.3.0.0/24"]

[tunnel.ike]
psk_file = "/k/psk"
remote_id = "gw-b.example.net"
ike_proposals = ["aes256gcm16-prfsha256-x25519"]
esp_proposals = ["aes128gcm16"]
initiate = true
"#,
        )
        .unwrap();
        assert_eq!(cfg.tunnels.len(), 4);
        for t in &cfg.tunnels {
            let spec = spec_of(t);
            let text = spec.to_string();
            assert_eq!(name_of(&text).as_deref(), Some(t.name.as_str()));
            let parsed: vecgate_control::model::TunnelSpec =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let mut back = parsed
                .to_tunnel()
                .unwrap_or_else(|e| panic!("{text}: {e:?}"));
            if let (Some(b), Some(o)) = (back.ipsec.as_mut(), t.ipsec.as_ref()) {
                // The API builds static SAs itself (it reads the keys).
                b.sas = o.sas.clone();
            }
            assert_eq!(&back, t, "{text}");
            // The standby compares specs as text: the same tunnel, the
            // same text.
            assert_eq!(spec_of(&back).to_string(), text);
            assert!(
                !text.contains("\"key\":\"") && !text.contains("\"psk\":"),
                "{text}"
            );
        }
    }

    #[test]
    fn gather_completes_and_restarts_on_a_new_generation() {
        let mut g = Gather::new();
        assert_eq!(g.add(1, 0, 2, vec![1]), None);
        assert_eq!(
            g.add(2, 1, 2, vec![4]),
            None,
            "a new generation starts over"
        );
        assert_eq!(g.add(2, 0, 2, vec![3]), Some(vec![3, 4]));
        assert_eq!(g.add(3, 0, 1, Vec::<u8>::new()), Some(vec![]));
    }
}
