//! An ipsec tunnel through the real table builder: its port, MTU, SPD
//! routes and ESP tunnel come from the registry; a tunnel the registry
//! does not know fails the build.

use super::EspTables;
use dataplane::tables::{Adj, Tables};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use vecgate_config::Config;
use vecgate_control::build::{Inputs, IpsecTables, Ports};
use vecgate_control::NetdevFacts;
use vecgate_ipsec::{Algorithm, EspRegistry, Lifetime, OutboundSa, SaConfig, TunnelEndpoints};

const CFG: &str = r#"
[gateway]
name = "gw"

[[interface]]
name = "wan0"
host = "veth0"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[[tunnel]]
name = "t0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.2"
traffic = ["10.2.0.0/24"]

[[tunnel.sa]]
direction = "out"
spi = 0x1001
algorithm = "aes128gcm16"
key_file = "/k/1001.hex"

[[tunnel.sa]]
direction = "in"
spi = 0x2001
algorithm = "aes128gcm16"
key_file = "/k/2001.hex"
"#;

const UNDERLAY_MTU: u32 = 1500;

fn outbound() -> OutboundSa {
    OutboundSa::new(SaConfig {
        spi: 0x1001,
        algorithm: Algorithm::AesGcm128,
        key: zeroize::Zeroizing::new(vec![7; Algorithm::AesGcm128.key_len()]),
        esn: true,
        replay_window: 64,
        lifetime: Lifetime::default(),
        tunnel: TunnelEndpoints {
            local: Ipv4Addr::new(192, 0, 2, 1).into(),
            remote: Ipv4Addr::new(192, 0, 2, 2).into(),
        },
        encap: None,
        df: true,
    })
    .unwrap()
}

fn build(cfg: &Config, ipsec: &dyn IpsecTables) -> Result<(Tables, u16), String> {
    let netdevs: HashMap<String, NetdevFacts> = [(
        "wan0".to_owned(),
        NetdevFacts {
            mac: [2, 0, 0, 0, 0, 1],
            mtu: UNDERLAY_MTU,
            offloads: false,
        },
    )]
    .into();
    let mut ports = Ports::new(cfg);
    let inputs = Inputs {
        netdevs: &netdevs,
        learned: &Default::default(),
        held: &HashMap::new(),
        ipsec: Some(ipsec),
    };
    let t = ports.tables(cfg, &inputs)?;
    let port = t
        .interfaces
        .iter()
        .flatten()
        .find(|i| i.name == "t0")
        .map(|i| i.port)
        .ok_or("no interface t0")?;
    Ok((t, port))
}

#[test]
fn an_ipsec_tunnel_gets_its_port_mtu_routes_and_sas_from_the_registry() {
    let cfg = vecgate_config::parse(CFG).unwrap();
    let reg = EspRegistry::new();
    let tx = reg.add_tunnel(0, "t0", outbound()).unwrap();
    let (t, port) = build(&cfg, &EspTables(&reg)).unwrap();
    let ifc = t.iface(port).unwrap();
    assert_eq!(ifc.mtu, UNDERLAY_MTU - tx.overhead() as u32);
    assert!(ifc.mtu < UNDERLAY_MTU);
    // The traffic selector routes into the tunnel's port; other
    // destinations do not.
    let vrf = t.vrf_index(0).unwrap();
    let adj = t.lookup4(vrf, Ipv4Addr::new(10, 2, 0, 9)).map(|a| t.adj(a));
    assert!(
        matches!(adj, Some(Adj::Port { port: p }) if p == port),
        "{adj:?}"
    );
    let other = t.lookup4(vrf, Ipv4Addr::new(10, 3, 0, 9)).map(|a| t.adj(a));
    assert!(!matches!(other, Some(Adj::Port { port: p }) if p == port));
    // The ESP tunnel: the registry's id and transmit object, the
    // configured endpoints, and the SAD.
    let esp = t.esp.at_port(port).unwrap();
    assert_eq!(esp.def.id, 0);
    assert!(std::sync::Arc::ptr_eq(&esp.def.tx, &tx));
    assert_eq!(esp.def.local, IpAddr::from(Ipv4Addr::new(192, 0, 2, 1)));
    assert_eq!(esp.def.remote, IpAddr::from(Ipv4Addr::new(192, 0, 2, 2)));
    assert!(!esp.def.nat_t);
    assert!(t.esp.any());
}

#[test]
fn a_tunnel_the_registry_does_not_know_fails_the_build() {
    let cfg = vecgate_config::parse(CFG).unwrap();
    let reg = EspRegistry::new();
    let err = build(&cfg, &EspTables(&reg)).unwrap_err();
    assert!(err.contains("tunnel t0: not in the SA registry"), "{err}");
}
