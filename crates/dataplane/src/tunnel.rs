//! Overlay tunnels (GRE RFC 2784/2890, NVGRE RFC 7637, VXLAN RFC 7348): the
//! per-tunnel state computed at table build time.
//!
//! A tunnel is an interface: it owns a *virtual port* (an index after the
//! physical ports) with its own [`Interface`](crate::tables::Interface)
//! entry in the overlay VRF, so routes, ARP / ND, ICMP errors, MSS clamping
//! and counters work through the ordinary nodes. interface-output hands
//! packets for a virtual port to tunnel-encap, which prepends the outer
//! headers from the tunnel's [`Tunnel::template`] and routes the result in
//! the underlay VRF; gre-input / vxlan-input find the tunnel of a received
//! packet with [`DecapKey`] and hand the inner packet to ethernet-input or
//! ip4/ip6-input as if it had arrived on the virtual port.
//!
//! Entropy for multi-core receive: the peer's AF_PACKET fanout hashes the
//! outer 5-tuple. VXLAN's UDP source port (RFC 7348 §5) and NVGRE's FlowID
//! (RFC 7637 §3.2; only for receivers that hash it) come from the inner
//! flow hash ([`flow_hash`]), so the flows of one VXLAN tunnel spread over
//! the receiver's workers; plain GRE has no such field and one GRE tunnel
//! lands on one worker of the peer.

use crate::fib::FxMap;
use std::net::IpAddr;

/// Encapsulation of a tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    Gre,
    Nvgre,
    Vxlan,
}

/// What the control plane says about a tunnel (see
/// [`TablesBuilder::add_tunnel`](crate::tables::TablesBuilder::add_tunnel)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelDef {
    pub kind: TunnelKind,
    pub local: IpAddr,
    pub remote: IpAddr,
    /// GRE key, NVGRE VSID (24 bits) or VXLAN VNI (24 bits).
    pub key: Option<u32>,
    /// Configuration id of the VRF whose FIB reaches `remote`.
    pub underlay_vrf: u32,
    /// GRE: carries Ethernet (0x6558) instead of IP. NVGRE/VXLAN: always.
    pub ethernet: bool,
    /// GRE checksum (RFC 2784 §2.5).
    pub checksum: bool,
    /// GRE sequence numbers (RFC 2890 §2.2), checked in order on receive.
    pub sequence: bool,
    /// VXLAN UDP destination port.
    pub udp_port: u16,
}

pub const ETHERTYPE_TEB: u16 = 0x6558;
pub const IP_PROTO_GRE: u8 = 47;
pub const IP_PROTO_UDP: u8 = 17;
/// RFC 7348 §5: source ports from the dynamic range 49152-65535.
pub const VXLAN_SPORT_BASE: u16 = 49152;

/// Longest template: IPv6 (40) + GRE with checksum, key and sequence (16).
pub const MAX_TEMPLATE: usize = 56;

/// One tunnel as the workers use it.
#[derive(Clone, Debug)]
pub struct Tunnel {
    /// Its virtual port (index into `Tables::interfaces`).
    pub port: u16,
    pub def: TunnelDef,
    /// Index of the underlay VRF in `Tables::vrfs`.
    pub underlay_vrf: u16,
    /// Outer IP + GRE or UDP + VXLAN, with lengths, IDs, checksums, the
    /// VXLAN source port, the NVGRE FlowID and the GRE sequence number left
    /// zero (filled per packet).
    pub template: [u8; MAX_TEMPLATE],
    pub tpl_len: usize,
    /// Offset of the GRE or UDP header in the template.
    pub l4_off: usize,
    pub v6: bool,
}

impl Tunnel {
    /// Outer header bytes this tunnel adds in front of the inner frame
    /// (without the inner Ethernet header of L2 tunnels).
    pub fn overhead(&self) -> usize {
        self.tpl_len
    }

    /// Bytes the overlay MTU (an L3 MTU) is below the underlay MTU: the
    /// outer headers plus, for L2 tunnels, the inner Ethernet header.
    pub fn mtu_overhead(&self) -> usize {
        self.tpl_len + if self.def.ethernet { 14 } else { 0 }
    }

    /// Offset of the GRE checksum field, if the tunnel sends one.
    pub fn gre_csum_off(&self) -> Option<usize> {
        (self.def.kind == TunnelKind::Gre && self.def.checksum).then_some(self.l4_off + 4)
    }

    /// Offset of the GRE sequence number, if the tunnel sends one.
    pub fn gre_seq_off(&self) -> Option<usize> {
        if self.def.kind != TunnelKind::Gre || !self.def.sequence {
            return None;
        }
        let mut o = self.l4_off + 4;
        if self.def.checksum {
            o += 4;
        }
        if self.def.key.is_some() {
            o += 4;
        }
        Some(o)
    }

    /// Builds the tunnel's template (outer header without per-packet
    /// fields). `None` if `local` and `remote` differ in family.
    pub fn new(port: u16, def: TunnelDef, underlay_vrf: u16) -> Option<Tunnel> {
        let mut t = [0u8; MAX_TEMPLATE];
        let (v6, ip_len, proto) = match (def.local, def.remote) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                t[0] = 0x45;
                t[8] = 64;
                t[12..16].copy_from_slice(&s.octets());
                t[16..20].copy_from_slice(&d.octets());
                (false, 20, 9)
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                t[0] = 0x60;
                t[7] = 64;
                t[8..24].copy_from_slice(&s.octets());
                t[24..40].copy_from_slice(&d.octets());
                (true, 40, 6)
            }
            _ => return None,
        };
        let l4 = ip_len;
        let len = match def.kind {
            TunnelKind::Gre | TunnelKind::Nvgre => {
                t[proto] = IP_PROTO_GRE;
                let nv = def.kind == TunnelKind::Nvgre;
                let mut gre = wire::gre::Gre::new_unchecked(&mut t[l4..]);
                gre.set_flags(def.checksum && !nv, def.key.is_some(), def.sequence && !nv);
                if let Some(k) = def.key {
                    gre.set_key(if nv { crate::nvgre::key_of_vsid(k) } else { k });
                }
                gre.set_protocol_type(if def.ethernet || nv { ETHERTYPE_TEB } else { 0 });
                l4 + gre.header_len()
            }
            TunnelKind::Vxlan => {
                t[proto] = IP_PROTO_UDP;
                wire::udp::Packet::new_unchecked(&mut t[l4..]).set_dst_port(def.udp_port);
                // VXLAN: I flag, VNI (RFC 7348 §5).
                let mut vx = wire::vxlan::Vxlan::new_unchecked(&mut t[l4 + 8..]);
                vx.set_fixed();
                vx.set_vni(def.key.unwrap_or(0) & 0x00ff_ffff);
                l4 + 16
            }
        };
        Some(Tunnel {
            port,
            underlay_vrf,
            template: t,
            tpl_len: len,
            l4_off: l4,
            v6,
            def,
        })
    }
}

/// Decapsulation lookup key: (underlay VRF index, our address, the peer's
/// address, key class) → tunnel index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecapKey {
    pub vrf: u16,
    pub local: IpAddr,
    pub remote: IpAddr,
    pub class: KeyClass,
}

/// What identifies a tunnel between two endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyClass {
    /// GRE (IP or Ethernet inner) with this key or none.
    Gre(Option<u32>),
    /// NVGRE VSID.
    Nvgre(u32),
    /// VXLAN (UDP port, VNI).
    Vxlan(u16, u32),
}

impl KeyClass {
    pub fn of(def: &TunnelDef) -> KeyClass {
        match def.kind {
            TunnelKind::Gre => KeyClass::Gre(def.key),
            TunnelKind::Nvgre => KeyClass::Nvgre(def.key.unwrap_or(0) & 0x00ff_ffff),
            TunnelKind::Vxlan => KeyClass::Vxlan(def.udp_port, def.key.unwrap_or(0) & 0x00ff_ffff),
        }
    }
}

/// The tunnel part of the tables.
#[derive(Clone, Debug, Default)]
pub struct TunnelTable {
    pub tunnels: Vec<Tunnel>,
    /// Per port: index into `tunnels`, or [`NO_TUNNEL`].
    pub by_port: Vec<u32>,
    pub decap: FxMap<DecapKey, u32>,
    /// (underlay VRF, local, remote) pairs of every tunnel: tells an
    /// unknown key from an unknown peer in the drop counters.
    pub peers: FxMap<(u16, IpAddr, IpAddr), ()>,
    /// UDP ports VXLAN tunnels listen on (ip-local dispatch).
    pub vxlan_ports: Vec<u16>,
    /// Any GRE/NVGRE tunnel exists.
    pub any_gre: bool,
}

pub const NO_TUNNEL: u32 = u32::MAX;

impl TunnelTable {
    /// The tunnel behind virtual port `port`.
    #[inline]
    pub fn at_port(&self, port: u16) -> Option<(u32, &Tunnel)> {
        let i = *self.by_port.get(usize::from(port))?;
        self.tunnels.get(i as usize).map(|t| (i, t))
    }

    #[inline]
    pub fn lookup(&self, k: &DecapKey) -> Option<(u32, &Tunnel)> {
        let i = *self.decap.get(k)?;
        self.tunnels.get(i as usize).map(|t| (i, t))
    }

    #[inline]
    pub fn is_peer(&self, vrf: u16, local: IpAddr, remote: IpAddr) -> bool {
        self.peers.contains_key(&(vrf, local, remote))
    }
}

/// Inner flow hash over addresses, protocol and ports of the IP packet at
/// `l3` (0 for anything that is not IP). Symmetric is not needed: it only
/// picks the VXLAN source port / NVGRE FlowID of one direction.
pub fn flow_hash(d: &[u8], l3: usize) -> u32 {
    let Some(first) = d.get(l3) else { return 0 };
    let (addrs, proto, l4) = match first >> 4 {
        4 if d.len() >= l3 + 20 => {
            let ihl = usize::from(first & 0x0f) * 4;
            let frag = wire::ipv4::Packet::new_unchecked(&d[l3..]).is_fragment();
            let l4 = if frag { usize::MAX } else { l3 + ihl };
            (&d[l3 + 12..l3 + 20], d[l3 + 9], l4)
        }
        6 if d.len() >= l3 + 40 => (&d[l3 + 8..l3 + 40], d[l3 + 6], l3 + 40),
        _ => return 0,
    };
    // FNV-1a: cheap, no allocation, good enough spread for port bits.
    let mut h: u32 = 0x811c_9dc5;
    let mut mix = |b: u8| {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    };
    addrs.iter().for_each(|b| mix(*b));
    mix(proto);
    if (proto == 6 || proto == 17) && l4 != usize::MAX && d.len() >= l4 + 4 {
        d[l4..l4 + 4].iter().for_each(|b| mix(*b));
    }
    h ^ (h >> 16)
}

/// A stable, locally administered unicast MAC for a tunnel interface,
/// derived from the gateway's and the tunnel's names (FNV-1a), so the
/// peer's ARP caches survive a restart.
pub fn derived_mac(gateway: &str, tunnel: &str) -> [u8; 6] {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in gateway.bytes().chain([0u8]).chain(tunnel.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let b = h.to_be_bytes();
    // Locally administered (bit 1), unicast (bit 0 clear).
    [(b[0] & 0xfc) | 0x02, b[1], b[2], b[3], b[4], b[5]]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(kind: TunnelKind) -> TunnelDef {
        TunnelDef {
            kind,
            local: "192.0.2.1".parse().unwrap(),
            remote: "192.0.2.2".parse().unwrap(),
            key: Some(0x12345),
            underlay_vrf: 0,
            ethernet: kind != TunnelKind::Gre,
            checksum: false,
            sequence: false,
            udp_port: 4789,
        }
    }

    #[test]
    fn templates() {
        let t = Tunnel::new(3, def(TunnelKind::Vxlan), 0).unwrap();
        assert_eq!(t.tpl_len, 36);
        assert_eq!(t.mtu_overhead(), 50);
        assert_eq!(
            &t.template[20..36],
            &[0, 0, 0x12, 0xb5, 0, 0, 0, 0, 8, 0, 0, 0, 0x01, 0x23, 0x45, 0]
        );
        assert_eq!(t.template[9], 17);
        let t = Tunnel::new(3, def(TunnelKind::Nvgre), 0).unwrap();
        assert_eq!(t.tpl_len, 28);
        assert_eq!(
            &t.template[20..28],
            &[0x20, 0, 0x65, 0x58, 0x01, 0x23, 0x45, 0]
        );
        let mut d = def(TunnelKind::Gre);
        d.checksum = true;
        d.sequence = true;
        d.local = "2001:db8::1".parse().unwrap();
        d.remote = "2001:db8::2".parse().unwrap();
        let t = Tunnel::new(3, d, 0).unwrap();
        assert!(t.v6);
        assert_eq!(t.tpl_len, 56);
        assert_eq!(&t.template[40..44], &[0xb0, 0, 0, 0]);
        assert_eq!(&t.template[48..52], &0x12345u32.to_be_bytes());
        assert_eq!(t.gre_csum_off(), Some(44));
        assert_eq!(t.gre_seq_off(), Some(52));
        let mut d = def(TunnelKind::Gre);
        d.remote = "2001:db8::2".parse().unwrap();
        assert!(Tunnel::new(3, d, 0).is_none());
    }

    #[test]
    fn mac_and_hash() {
        let m = derived_mac("gw-a", "to-b");
        assert_eq!(m[0] & 3, 2);
        assert_eq!(m, derived_mac("gw-a", "to-b"));
        assert_ne!(m, derived_mac("gw-a", "to-c"));
        let mut p = [0u8; 40];
        p[0] = 0x45;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[20..24].copy_from_slice(&[0x30, 0x39, 0, 80]);
        let a = flow_hash(&p, 0);
        p[21] = 0x3a;
        assert_ne!(a, flow_hash(&p, 0));
        assert_eq!(flow_hash(&p[..10], 0), 0);
    }
}
