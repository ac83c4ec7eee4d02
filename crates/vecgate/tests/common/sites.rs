//! The two sites most tunnel tests join, each host behind its gateway:
//!
//!   h1 10.1.0.2 ── a-lan [ga] a-wan ══ b-wan [gb] b-lan ── h2 10.2.0.2
//!
//! or, for NAT traversal (RFC 3948), with a namespace that masquerades
//! (nftables) between the gateways:
//!
//!   [ga] a-wan ── n-in 10.99.0.1 [nat] 192.0.2.254 n-out ── b-wan [gb]
//!
//! or with a transparent wire between them: a bridge in a namespace of its
//! own, whose port facing gwA sees at its ingress every frame gwA sent
//! (where the wire judge mirrors them, out of the peer's way):
//!
//!   [ga] a-wan ── w-a [wire: bridge] w-b ── b-wan [gb]
//!
//! The hosts' default routes lead to 10.1.0.1 and 10.2.0.1, the gateways'
//! LAN addresses, which each test gives its gateways.

use super::{veth, Netns};

pub struct Sites {
    pub h1: Netns,
    pub h2: Netns,
    pub ga: Netns,
    pub gb: Netns,
    /// The masquerading namespace between the gateways, if any.
    pub nat: Option<Netns>,
    /// The bridging namespace between the gateways, if any.
    pub wire: Option<Netns>,
}

impl Sites {
    /// The gateways' WAN ends joined directly.
    pub fn new() -> Sites {
        Sites::build(false, false)
    }

    /// The gateways' WAN ends joined through the masquerading `nat`.
    pub fn behind_nat() -> Sites {
        Sites::build(true, false)
    }

    /// The gateways' WAN ends joined through the bridge in `wire`.
    pub fn with_wire() -> Sites {
        Sites::build(false, true)
    }

    fn build(nat: bool, wire: bool) -> Sites {
        let h1 = Netns::new("h1");
        let h2 = Netns::new("h2");
        let ga = Netns::new("ga");
        let gb = Netns::new("gb");
        veth(&h1, "eth0", &ga, "a-lan");
        let nat = if nat {
            let n = Netns::new("nat");
            veth(&ga, "a-wan", &n, "n-in");
            veth(&n, "n-out", &gb, "b-wan");
            n.sh("ip addr add 10.99.0.1/24 dev n-in && ip addr add 192.0.2.254/24 dev n-out");
            n.sh("sysctl -qw net.ipv4.ip_forward=1");
            n.sh("nft add table ip nat && nft 'add chain ip nat post { type nat hook postrouting priority 100 ; }' && nft add rule ip nat post oifname n-out masquerade");
            Some(n)
        } else {
            None
        };
        let wire = if wire {
            let w = Netns::new("wire");
            veth(&ga, "a-wan", &w, "w-a");
            veth(&w, "w-b", &gb, "b-wan");
            w.sh("ip link add br0 type bridge && ip link set w-a master br0 && ip link set w-b master br0 && ip link set br0 up");
            Some(w)
        } else {
            if nat.is_none() {
                veth(&ga, "a-wan", &gb, "b-wan");
            }
            None
        };
        veth(&h2, "eth0", &gb, "b-lan");
        h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
        h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
        Sites {
            h1,
            h2,
            ga,
            gb,
            nat,
            wire,
        }
    }
}
