//! Several tunnels' state machines driven by one thread: which of them a
//! datagram belongs to, which may carry each other's child SAs, when an
//! initiator may start, and how a tunnel leaves while its IKE SA still
//! carries other tunnels' children. Sans-IO like [`Ike`]: the caller
//! keeps its tunnels in a slice of [`Member`]s and does the I/O.

use crate::config::{ChildPolicy, IkeConfig};
use crate::state::{strip_marker, Ike};
use std::net::SocketAddr;
use std::time::Instant;

/// Initial exchanges in flight at once towards one peer address (below
/// strongSwan's default per-IP half-open limit of 5).
pub const MAX_HALF_OPEN_PER_PEER: usize = 4;

/// A tunnel as the group sees it: a tag (the tunnel's id, used as its
/// [`ChildPolicy::tag`] in the other members) and its state machine.
pub trait Member {
    /// The tunnel's id.
    fn tag(&self) -> u32;
    /// Its state machine.
    fn ike(&self) -> &Ike;
    /// Its state machine, mutably.
    fn ike_mut(&mut self) -> &mut Ike;
}

/// Whether two tunnels may share IKE SAs: same gateway addresses, same
/// identities and PSK (RFC 7296 §2.15: an IKE SA authenticates the peer,
/// not a tunnel), so one's child SA may arrive in the other's IKE SA.
pub fn siblings(a: &IkeConfig, b: &IkeConfig) -> bool {
    a.local_addr.ip() == b.local_addr.ip()
        && a.remote_addr.ip() == b.remote_addr.ip()
        && a.local_id == b.local_id
        && a.remote_id == b.remote_id
        && a.psk[..] == b.psk[..]
}

/// Tells each member's state machine which other members' selectors its
/// IKE SAs may carry child SAs for: the live members towards the same
/// peer that authenticate alike ([`siblings`]). A responder binds each
/// child to the tunnel its traffic selectors fit (RFC 7296 §2.9), so a
/// peer that reuses one IKE SA for several children (strongSwan's
/// default) or that lands on "the wrong" tunnel at IKE_SA_INIT (which
/// carries nothing that tells tunnels apart) is served.
pub fn refresh_policies<M: Member>(members: &mut [M]) {
    let all: Vec<Vec<ChildPolicy>> = (0..members.len())
        .map(|i| {
            let me = members[i].ike().config();
            members
                .iter()
                .enumerate()
                .filter(|(j, t)| *j != i && !t.ike().is_retired())
                .filter(|(_, t)| siblings(me, t.ike().config()))
                .map(|(_, t)| {
                    let c = t.ike().config();
                    ChildPolicy {
                        tag: t.tag(),
                        local_ts: c.local_ts.clone(),
                        remote_ts: c.remote_ts.clone(),
                        esp_proposals: c.esp_proposals.clone(),
                    }
                })
                .collect()
        })
        .collect();
    for (t, p) in members.iter_mut().zip(all) {
        t.ike_mut().set_policies(p);
    }
}

/// The member a datagram belongs to: the one owning its IKE SPI (several
/// tunnels may join the same two gateways, RFC 7296 §2.6), else (a new
/// IKE_SA_INIT) one whose addresses match — preferably one without an
/// IKE SA yet — else (a NAT'd peer) the only one with our address.
/// `natt_port`: on it IKE follows a 4-byte zero marker (RFC 3948 §2.2).
pub fn owner<M: Member>(
    members: &[M],
    data: &[u8],
    local: SocketAddr,
    remote: SocketAddr,
    natt_port: u16,
) -> Option<usize> {
    let msg = if local.port() == natt_port {
        strip_marker(data).unwrap_or(data)
    } else {
        data
    };
    let spi = |r: std::ops::Range<usize>| {
        msg.get(r)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_be_bytes)
    };
    let (spi_i, spi_r) = (spi(0..8), spi(8..16));
    if let Some(i) = members
        .iter()
        .position(|t| t.ike().owns_spi(spi_i) || t.ike().owns_spi(spi_r))
    {
        return Some(i);
    }
    // A retired tunnel (deleted) takes no new IKE SA.
    let same = |t: &&M| {
        let c = t.ike().config();
        !t.ike().is_retired()
            && c.local_addr.ip() == local.ip()
            && c.remote_addr.ip() == remote.ip()
    };
    let first = members
        .iter()
        .enumerate()
        .find(|(_, t)| same(t))
        .map(|(i, _)| i);
    if let Some(i) = members
        .iter()
        .enumerate()
        .filter(|(_, t)| same(t))
        .find(|(_, t)| !t.ike().has_sa())
        .map(|(i, _)| i)
    {
        return Some(i);
    }
    if first.is_some() {
        return first;
    }
    let mut it = members
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.ike().is_retired() && t.ike().config().local_addr.ip() == local.ip());
    match (it.next(), it.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}

/// Starts initiating members (tags popped from the back of `to_start`)
/// while fewer than [`MAX_HALF_OPEN_PER_PEER`] of ours towards the same
/// peer address are half-open: peers cap half-open SAs per source address
/// (strongSwan's `block_threshold`, 5) and silently drop the rest, which
/// would cost the excess a retransmission schedule each. Those left wait
/// in `to_start`; `failed` hears of the members that could not start.
/// Only our own initiations count ([`Ike::is_connecting`]): half-open
/// SAs of the peer's (or of a flood spoofing its address) hold no start
/// back.
pub fn start_some<M: Member>(
    members: &mut [M],
    to_start: &mut Vec<u32>,
    now: Instant,
    mut failed: impl FnMut(&M, crate::Error),
) {
    let mut skipped = Vec::new();
    while let Some(id) = to_start.pop() {
        let Some(i) = members.iter().position(|t| t.tag() == id) else {
            continue;
        };
        let peer = members[i].ike().config().remote_addr.ip();
        let half_open = members
            .iter()
            .filter(|t| t.ike().config().remote_addr.ip() == peer)
            .filter(|t| t.ike().is_connecting())
            .count();
        if half_open >= MAX_HALF_OPEN_PER_PEER {
            skipped.push(id);
            continue;
        }
        if let Err(e) = members[i].ike_mut().initiate(now) {
            failed(&members[i], e);
        }
    }
    skipped.reverse();
    *to_start = skipped;
}

/// How a member leaves the group ([`remove`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaving {
    /// Its IKE SA carries other members' child SAs: only its own children
    /// go; it is retired and stays (DPD, rekeys) until [`reap`] forgets it.
    Retired,
    /// Its IKE SA is being deleted (if established): forget the member
    /// once [`Ike::is_established`] turns false or a deadline passes.
    Deleting,
}

/// Member `x` is deleted (RFC 7296 §1.4.1). Its child SAs inside
/// siblings' IKE SAs are deleted one by one (the siblings' own stay);
/// then either its IKE SA is deleted, or, when that carries other
/// members' children, the member retires. `carried` are (tag of the
/// member whose IKE SA carries it, inbound SPI) of `x`'s children.
pub fn remove<M: Member>(
    members: &mut [M],
    x: usize,
    carried: &[(u32, u32)],
    now: Instant,
) -> Leaving {
    let id = members[x].tag();
    for &(via, spi) in carried.iter().filter(|(via, _)| *via != id) {
        if let Some(v) = members.iter_mut().find(|t| t.tag() == via) {
            v.ike_mut().delete_child(spi, now);
        }
    }
    let ike = members[x].ike_mut();
    let policies = ike.child_policies();
    let leaving = if policies.iter().any(|(_, p)| p.is_some()) {
        for (spi, p) in policies {
            if p.is_none() {
                ike.delete_child(spi, now);
            }
        }
        ike.retire();
        Leaving::Retired
    } else {
        if ike.is_established() {
            ike.delete_ike(now);
        }
        Leaving::Deleting
    };
    refresh_policies(members);
    leaving
}

/// What [`reap`] did to a retired member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaped {
    /// Its IKE SA carries no child SA any more: its DELETE went out.
    DeleteSent,
    /// Its IKE SA is gone: the caller forgets the member.
    Gone,
}

/// A retired member's IKE SA is deleted once it carries no child SA, and
/// the member is gone once it has no IKE SA. `delete_sent` is the
/// member's own flag, so the DELETE goes out once.
pub fn reap(ike: &mut Ike, delete_sent: &mut bool, now: Instant) -> Option<Reaped> {
    if !ike.is_retired() {
        return None;
    }
    if !ike.has_sa() {
        return Some(Reaped::Gone);
    }
    let carries = ike.child_policies().iter().any(|(_, p)| p.is_some());
    if !carries && !*delete_sent && ike.is_established() {
        *delete_sent = true;
        ike.delete_ike(now);
        return Some(Reaped::DeleteSent);
    }
    None
}

/// The earliest timer of all members ([`Ike::next_timeout`]).
pub fn next_timeout<M: Member>(members: &[M]) -> Option<Instant> {
    members.iter().filter_map(|t| t.ike().next_timeout()).min()
}

/// Runs every member's timers ([`Ike::handle_timeout`]).
pub fn handle_timeout<M: Member>(members: &mut [M], now: Instant) {
    for t in members {
        t.ike_mut().handle_timeout(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T(u32, Ike);
    impl Member for T {
        fn tag(&self) -> u32 {
            self.0
        }
        fn ike(&self) -> &Ike {
            &self.1
        }
        fn ike_mut(&mut self) -> &mut Ike {
            &mut self.1
        }
    }

    fn tunnel(tag: u32, local: &str, remote: &str, psk: &[u8]) -> T {
        let mut c = IkeConfig::new(local.parse().unwrap(), remote.parse().unwrap(), psk);
        c.ike_proposals = IkeConfig::parse_ike_proposals(&["aes128-sha256-x25519"]).unwrap();
        c.esp_proposals = IkeConfig::parse_esp_proposals(&["aes128gcm16"]).unwrap();
        c.local_ts = vec![format!("10.{tag}.0.0/16").parse().unwrap()];
        c.remote_ts = vec![format!("10.{}.0.0/16", tag + 100).parse().unwrap()];
        T(tag, Ike::new(c).unwrap())
    }

    #[test]
    fn a_new_init_goes_to_a_tunnel_of_its_addresses_then_to_the_only_one_of_ours() {
        let now = Instant::now();
        let mut g = vec![
            tunnel(1, "192.0.2.1:500", "192.0.2.2:500", b"a"),
            tunnel(2, "192.0.2.1:500", "192.0.2.2:500", b"a"),
            tunnel(3, "192.0.2.1:500", "192.0.2.3:500", b"b"),
        ];
        refresh_policies(&mut g);
        // 1 and 2 authenticate alike towards the same peer: siblings.
        assert_eq!(g[0].ike().policies().len(), 1);
        assert_eq!(g[0].ike().policies()[0].tag, 2);
        assert!(g[2].ike().policies().is_empty());
        let init = [0u8; 28];
        let ours: SocketAddr = "192.0.2.1:500".parse().unwrap();
        let from = |g: &[T], r: &str| owner(g, &init, ours, r.parse().unwrap(), 4500);
        assert_eq!(from(&g, "192.0.2.2:500"), Some(0));
        assert_eq!(from(&g, "192.0.2.3:500"), Some(2));
        // A NAT'd peer: no tunnel of its address, several of ours.
        assert_eq!(from(&g, "198.51.100.7:1024"), None);
        // Once tunnel 1 has an IKE SA, a new INIT goes to 2, and the SPI
        // of 1's SA leads back to 1.
        g[0].ike_mut().initiate(now).unwrap();
        let Some(crate::Action::Send { data, .. }) = g[0].ike_mut().poll_action() else {
            panic!("no INIT sent");
        };
        assert_eq!(from(&g, "192.0.2.2:500"), Some(1));
        let mut reply = data.clone();
        reply[19] |= crate::message::flags::RESPONSE;
        assert_eq!(from(&g, "192.0.2.2:500"), Some(1));
        assert_eq!(
            owner(
                &g,
                &reply,
                "192.0.2.1:500".parse().unwrap(),
                "192.0.2.2:500".parse().unwrap(),
                4500
            ),
            Some(0)
        );
    }

    #[test]
    fn half_open_sas_of_the_peer_hold_no_initiation_back() {
        // A flood spoofing the peer's address leaves a half-open SA in
        // every tunnel towards it: ours still start, as only our own
        // initiations are paced.
        let now = Instant::now();
        let n = MAX_HALF_OPEN_PER_PEER as u32 + 1;
        let mut g: Vec<T> = (1..=n)
            .map(|i| tunnel(i, "192.0.2.1:500", "192.0.2.2:500", b"a"))
            .collect();
        let ours: SocketAddr = "192.0.2.1:500".parse().unwrap();
        let peer: SocketAddr = "192.0.2.2:500".parse().unwrap();
        for t in &mut g {
            let mut p = tunnel(99, "192.0.2.2:500", "192.0.2.1:500", b"a");
            p.1.initiate(now).unwrap();
            let Some(crate::Action::Send { data, .. }) = p.1.poll_action() else {
                panic!("no INIT sent");
            };
            t.ike_mut().handle_datagram(&data, ours, peer, now);
            assert!(t.ike().has_sa() && !t.ike().is_established());
            assert!(!t.ike().is_connecting());
        }
        let mut to_start: Vec<u32> = vec![1];
        start_some(&mut g, &mut to_start, now, |_, e| panic!("{e}"));
        assert!(to_start.is_empty(), "the peer's half-open SAs held it back");
        assert!(g[0].ike().is_connecting());
    }

    #[test]
    fn initiators_are_paced_per_peer() {
        let now = Instant::now();
        let mut g: Vec<T> = (1..=6)
            .map(|i| tunnel(i, "192.0.2.1:500", "192.0.2.2:500", b"a"))
            .collect();
        let mut to_start: Vec<u32> = (1..=6).rev().collect();
        start_some(&mut g, &mut to_start, now, |_, e| panic!("{e}"));
        assert_eq!(to_start, vec![6, 5]);
        assert_eq!(
            g.iter().filter(|t| t.ike().has_sa()).count(),
            MAX_HALF_OPEN_PER_PEER
        );
    }
}
