//! A gateway's attached netdevs (`vecgate_io::Attached`) on one end of a
//! veth pair (needs root): attached with one AF_PACKET queue per worker
//! and its ingress guard, refused to a second gateway, re-opened for a
//! worker, released (guard gone, another gateway may claim it), and a
//! failed attach leaves its netdev unclaimed. Referees: the kernel's
//! answers to B's pings (silent behind the guard) and the tcx programs or
//! nftables tables on the netdev.

mod common;

use common::*;
use std::sync::Arc;
use vecgate_io::Attached;

/// Runs `f` with `a` inside namespace `ns`.
fn within<T: Send + 'static>(
    ns: &Netns,
    a: &Arc<Attached>,
    f: impl FnOnce(&Attached) -> T + Send + 'static,
) -> T {
    let a = a.clone();
    ns.run_in(move || f(&a))
}

/// Whether A's kernel answers one of B's pings within 3 s.
fn answers(t: &VethPair) -> bool {
    t.b.try_exec(&["ping", "-c", "1", "-W", "3", &t.ip_a])
}

/// Whether an ingress guard of this process sits on A's end.
fn guarded(t: &VethPair) -> bool {
    !guard_programs(&t.a, &t.va).is_empty() || guard_tables(&t.a).iter().any(|l| l.contains(&t.va))
}

#[test]
fn attach_refuse_reopen_release() {
    let t = VethPair::new();
    assert!(answers(&t), "control: A's kernel answers before the attach");
    let gw1 = Arc::new(Attached::new("gw1", 2));
    let gw2 = Arc::new(Attached::new("gw2", 1));

    let va = t.va.clone();
    let queues = within(&t.a, &gw1, move |a| a.attach("x", &va, "af_packet")).unwrap();
    assert_eq!(queues.len(), 2, "one queue per worker");
    assert!(queues.iter().all(|q| q.name() == t.va));
    assert!(guarded(&t), "the AF_PACKET ingress guard is installed");
    assert!(!answers(&t), "behind the guard A's kernel is silent");

    // One gateway per netdev: the holder is named.
    let va = t.va.clone();
    let err = within(&t.a, &gw2, move |a| a.attach("y", &va, "af_packet").err()).unwrap();
    assert!(err.contains("already attached by gateway gw1"), "{err}");

    // A worker's queue opened again, as it was first opened.
    let va = t.va.clone();
    let again = within(&t.a, &gw1, move |a| {
        a.reopen(&va, 1).map(|p| p.name().to_owned())
    });
    assert_eq!(again.unwrap(), t.va);
    let unknown = within(&t.a, &gw1, |a| a.reopen("nosuchdev0", 0).err()).unwrap();
    assert!(unknown.to_string().contains("is not attached"), "{unknown}");
    drop(queues);

    // Released: the guard goes, its queues are not re-opened any more,
    // another gateway may claim the netdev.
    assert_eq!(within(&t.a, &gw1, |a| a.release("x")), Some(t.va.clone()));
    assert_eq!(within(&t.a, &gw1, |a| a.release("x")), None);
    assert!(!guarded(&t), "the guard is removed with the interface");
    assert!(answers(&t), "A's kernel answers again");
    let va = t.va.clone();
    assert!(within(&t.a, &gw1, move |a| a.reopen(&va, 0).is_err()));
    let va = t.va.clone();
    let q = within(&t.a, &gw2, move |a| {
        a.attach("y", &va, "af_packet").map(|q| q.len())
    });
    assert_eq!(q, Ok(1), "the netdev is free for another gateway");
    assert!(guarded(&t));
    within(&t.a, &gw2, |a| a.release_all());
    assert!(!guarded(&t), "release_all removes the guards");
}

#[test]
fn a_failed_attach_leaves_the_netdev_unclaimed() {
    let ns = Netns::new("vgC");
    let gw1 = Arc::new(Attached::new("gw1", 1));
    let gw2 = Arc::new(Attached::new("gw2", 1));
    let err = within(&ns, &gw1, |a| {
        a.attach("x", "nosuchdev0", "af_packet").err()
    })
    .unwrap();
    assert!(err.contains("nosuchdev0"), "{err}");
    assert!(within(&ns, &gw1, |a| a.reopen("nosuchdev0", 0).is_err()));
    assert!(
        within(&ns, &gw2, |a| a.claim("x", "nosuchdev0")).is_ok(),
        "gw1 holds no lock on it"
    );
    // A driver that does not exist is refused the same way.
    let err = within(&ns, &gw1, |a| a.attach("z", "lo", "dpdk").err()).unwrap();
    assert!(err.contains("unknown I/O driver"), "{err}");
    assert!(within(&ns, &gw1, |a| a.claim("z", "lo")).is_ok());
}
