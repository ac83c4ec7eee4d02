use super::*;
use proptest::prelude::*;

/// A configuration from the parts chosen: two interfaces (the second's
/// MTU and VRF vary), any subset of five tunnels of every kind (each in one
/// of two variants), static SAs of the ipsec one, routes into what exists.
fn text(g: &Gen) -> String {
    let mut s = format!(
        "[gateway]\nname = \"gw\"\nworkers = {}\n\n\
         [[interface]]\nname = \"lan0\"\nhost = \"veth-l\"\ndriver = \"af_packet\"\naddresses = [\"10.1.0.1/24\"]\nvrf = \"{}\"\n\n\
         [[interface]]\nname = \"wan0\"\nhost = \"veth-w\"\ndriver = \"af_packet\"\naddresses = [\"192.0.2.1/24\"]\n{}\n",
        1 + g.workers as u8,
        if g.vrf { "blue" } else { "default" },
        if g.mtu { "mtu = 1400\n" } else { "" },
    );
    let vrf = if g.vrf { "blue" } else { "default" };
    let tunnels: [(&str, String); 5] = [
        ("gre1", format!("kind = \"gre\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.{}\"\nkey = 7\n", if g.variant[0] { 2 } else { 3 })),
        ("vx1", format!("kind = \"vxlan\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.4\"\nkey = {}\naddresses = [\"10.9.0.1/24\"]\n", if g.variant[1] { 100 } else { 200 })),
        ("nv1", format!("kind = \"nvgre\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.5\"\nkey = 5000\n{}", if g.variant[2] { "mtu = 1300\n" } else { "" })),
        ("gre2", format!("kind = \"gre\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.6\"\ninner = \"{}\"\naddresses = [\"10.8.0.1/24\"]\n", if g.variant[3] { "ethernet" } else { "ip" })),
        ("esp1", {
            let mut t = format!(
                "kind = \"ipsec\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.{}\"\ntraffic = [\"10.2.0.0/24\"]\n",
                if g.variant[4] { 7 } else { 8 }
            );
            t.push_str(&format!(
                "\n[[tunnel.sa]]\ndirection = \"out\"\nspi = {}\nalgorithm = \"aes128gcm16\"\nkey_file = \"/k/out{}\"\n",
                0x1000 + g.out_spi as u32, g.out_spi
            ));
            for i in 0..4u32 {
                if g.in_spis & (1 << i) != 0 {
                    t.push_str(&format!(
                        "\n[[tunnel.sa]]\ndirection = \"in\"\nspi = {}\nalgorithm = \"aes128gcm16\"\nkey_file = \"/k/in{i}\"\n",
                        0x2000 + i
                    ));
                }
            }
            t
        }),
    ];
    let mut present = Vec::new();
    for (i, (name, body)) in tunnels.iter().enumerate() {
        if g.tunnels & (1 << i) != 0 {
            // The ipsec tunnel needs an inbound SA to be useful, not to validate.
            s.push_str(&format!(
                "[[tunnel]]\nname = \"{name}\"\nvrf = \"{vrf}\"\n{body}\n"
            ));
            present.push(*name);
        }
    }
    let mut vias: Vec<String> = vec!["lan0".into(), "10.1.0.9".into()];
    vias.extend(present.iter().map(|s| s.to_string()));
    for i in 0..4usize {
        if g.routes & (1 << i) != 0 {
            let via = &vias[(g.route_via[i] as usize) % vias.len()];
            s.push_str(&format!(
                "[[route]]\nvrf = \"{vrf}\"\nprefix = \"10.{}.0.0/16\"\nvia = \"{via}\"\n\n",
                50 + i
            ));
        }
    }
    s
}

#[derive(Clone, Debug)]
struct Gen {
    workers: bool,
    vrf: bool,
    mtu: bool,
    tunnels: u8,
    variant: [bool; 5],
    out_spi: u8,
    in_spis: u8,
    routes: u8,
    route_via: [u8; 4],
}

fn gen() -> impl Strategy<Value = Gen> {
    (
        any::<[bool; 3]>(),
        0u8..32,
        any::<[bool; 5]>(),
        0u8..3,
        1u8..16,
        0u8..16,
        any::<[u8; 4]>(),
    )
        .prop_map(
            |(b, tunnels, variant, out_spi, in_spis, routes, route_via)| Gen {
                workers: b[0],
                vrf: b[1],
                mtu: b[2],
                tunnels,
                variant,
                out_spi,
                in_spis,
                routes,
                route_via,
            },
        )
}

fn config(g: &Gen) -> Config {
    let t = text(g);
    vecgate_config::parse(&t).unwrap_or_else(|d| panic!("{d:?}\n{t}"))
}

proptest! {
    #[test]
    fn plan_of_a_config_against_itself_is_empty(g in gen()) {
        let a = config(&g);
        prop_assert!(plan(&a, &a).is_empty());
    }

    #[test]
    fn replaying_the_plan_gives_the_target(ga in gen(), gb in gen()) {
        let (a, b) = (config(&ga), config(&gb));
        let p = plan(&a, &b);
        prop_assert_eq!(canonical(&replay(&a, &p)), canonical(&b));
        prop_assert_eq!(p.is_empty(), canonical(&a) == canonical(&b));
        // Only the gateway section (workers) and SA settings need a restart here.
        for c in &p {
            prop_assert_eq!(c.restart.is_some(), matches!(c.item, Item::Gateway(_)), "{}", c.line());
        }
    }
}

fn base() -> Gen {
    Gen {
        workers: false,
        vrf: false,
        mtu: false,
        tunnels: 0b10001,
        variant: [false; 5],
        out_spi: 0,
        in_spis: 1,
        routes: 0,
        route_via: [2, 0, 0, 0],
    }
}

fn lines(a: &Gen, b: &Gen) -> Vec<String> {
    plan(&config(a), &config(b))
        .iter()
        .map(Change::line)
        .collect()
}

#[test]
fn plan_names_each_object() {
    let a = base();
    let mut b = base();
    b.tunnels = 0b10110; // gre1 removed, vx1 and nv1 added
    b.routes = 0b1; // a route via the first tunnel
    b.route_via[0] = 2;
    b.mtu = true;
    b.in_spis = 0b11; // a second inbound SA
    b.out_spi = 1; // outbound switched
    let l = lines(&a, &b);
    assert!(
        l.contains(&"~ interface wan0: mtu: - → 1400".to_string()),
        "{l:#?}"
    );
    assert!(
        l.contains(&"- tunnel gre1: gre 192.0.2.1 → 192.0.2.3 key 7".to_string()),
        "{l:#?}"
    );
    assert!(
        l.iter().any(|x| x.starts_with("+ tunnel vx1: vxlan")),
        "{l:#?}"
    );
    assert!(
        l.iter().any(|x| x.starts_with("+ tunnel nv1: nvgre")),
        "{l:#?}"
    );
    assert!(
        l.iter().any(|x| x.starts_with("+ sa esp1 in 0x00002001")),
        "{l:#?}"
    );
    assert!(
        l.iter().any(|x| x.starts_with("+ sa esp1 out 0x00001001")),
        "{l:#?}"
    );
    assert!(
        l.iter().any(|x| x.starts_with("- sa esp1 out 0x00001000")),
        "{l:#?}"
    );
    assert!(
        l.iter()
            .any(|x| x.starts_with("+ route default 10.50.0.0/16: via vx1")),
        "{l:#?}"
    );
    assert!(l.iter().all(|x| !x.contains("needs a restart")), "{l:#?}");
}

/// Interfaces come and go live, with what hangs on them.
#[test]
fn interfaces_are_added_and_removed_live() {
    let a = config(&base());
    let mut b = a.clone();
    let mut x = b.interfaces[0].clone();
    x.name = "lan1".into();
    x.host = "veth-x".into();
    x.addresses = vec!["10.7.0.1/24".parse().unwrap()];
    b.interfaces.push(x);
    b.interfaces.swap(0, 1); // the order means nothing
    let l: Vec<String> = plan(&a, &b).iter().map(Change::line).collect();
    assert_eq!(
        l,
        vec!["+ interface lan1: netdev veth-x (af_packet) 10.7.0.1/24".to_string()]
    );
    let l: Vec<String> = plan(&b, &a).iter().map(Change::line).collect();
    assert_eq!(
        l,
        vec!["- interface lan1: netdev veth-x released".to_string()]
    );
    assert_eq!(canonical(&replay(&a, &plan(&a, &b))), canonical(&b));
}

#[test]
fn restart_only_changes_are_marked() {
    let a = config(&base());
    let mut b = a.clone();
    b.gateway.workers = 4;
    b.interfaces[0].host = "veth-other".into();
    b.interfaces[1].driver = vecgate_config::Driver::Tap;
    let l: Vec<String> = plan(&a, &b).iter().map(Change::line).collect();
    assert_eq!(l.len(), 3, "{l:#?}");
    assert!(
        l[0].starts_with("~ gateway [gateway]: workers: 1 → 4 (needs a restart:"),
        "{l:#?}"
    );
    assert!(
        l[1].starts_with("~ interface lan0: host: veth-l → veth-other (needs a restart:"),
        "{l:#?}"
    );
    assert!(
        l[2].starts_with("~ interface wan0: driver: af_packet → tap (needs a restart:"),
        "{l:#?}"
    );
    // An SA changed under its SPI is refused: a new SPI is the way.
    let mut c = a.clone();
    c.tunnels[1].ipsec.as_mut().unwrap().sas[0].algorithm =
        vecgate_config::EspAlgorithm::Aes256Gcm16;
    let p = plan(&a, &c);
    assert_eq!(p.len(), 1);
    assert!(
        p[0].line().contains("give the changed SA a new SPI"),
        "{}",
        p[0].line()
    );
}

#[test]
fn endpoint_change_of_an_ipsec_tunnel_rekeys_it() {
    let a = config(&base());
    let mut g = base();
    g.variant[4] = true;
    let b = config(&g);
    let p = plan(&a, &b);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_eq!(
        p[0].line(),
        "~ tunnel esp1: remote: 192.0.2.8 → 192.0.2.7, its SAs are registered anew"
    );
    assert!(rekeys(a.tunnel("esp1").unwrap(), b.tunnel("esp1").unwrap()));
    assert!(!rekeys(
        a.tunnel("gre1").unwrap(),
        a.tunnel("gre1").unwrap()
    ));
}
