//! Two `Ike` instances talking through an in-memory network with a fake
//! clock: the harness the state-machine tests share.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};
use vecgate_ike::{Action, ChildSaKeys, Event, FailReason, Ike, IkeConfig};

pub struct Peer {
    pub ike: Ike,
    pub events: Vec<Event>,
    pub installed: Vec<ChildSaKeys>,
    pub removed: Vec<(u32, u32)>,
}

pub struct Net {
    pub a: Peer,
    pub b: Peer,
    pub now: Instant,
    /// Drop datagrams for which this returns true (from_a, index).
    pub drop: Box<dyn FnMut(bool, usize) -> bool>,
    pub sent: usize,
    pub wire: Vec<(bool, Vec<u8>, SocketAddr, SocketAddr)>,
}

pub fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

pub fn cfg(local: &str, remote: &str, psk: &[u8]) -> IkeConfig {
    let mut c = IkeConfig::new(addr(local), addr(remote), psk);
    c.local_ts = vec!["10.1.0.0/16".parse().unwrap()];
    c.remote_ts = vec!["10.2.0.0/16".parse().unwrap()];
    c
}

pub fn pair(f: impl FnOnce(&mut IkeConfig, &mut IkeConfig)) -> Net {
    let mut a = cfg("192.0.2.1:500", "192.0.2.2:500", b"secret-psk");
    let mut b = cfg("192.0.2.2:500", "192.0.2.1:500", b"secret-psk");
    b.local_ts = a.remote_ts.clone();
    b.remote_ts = a.local_ts.clone();
    a.initiate = true;
    f(&mut a, &mut b);
    let peer = |c| Peer {
        ike: Ike::new(c).unwrap(),
        events: vec![],
        installed: vec![],
        removed: vec![],
    };
    Net {
        a: peer(a),
        b: peer(b),
        now: Instant::now(),
        drop: Box::new(|_, _| false),
        sent: 0,
        wire: vec![],
    }
}

impl Net {
    /// Deliver until quiet.
    pub fn run(&mut self) {
        for _ in 0..1000 {
            let mut moved = false;
            for from_a in [true, false] {
                let (src, dst) = if from_a {
                    (&mut self.a, &mut self.b)
                } else {
                    (&mut self.b, &mut self.a)
                };
                while let Some(act) = src.ike.poll_action() {
                    moved = true;
                    match act {
                        Action::Send {
                            local,
                            remote,
                            data,
                        } => {
                            self.sent += 1;
                            self.wire.push((from_a, data.clone(), local, remote));
                            if !(self.drop)(from_a, self.sent) {
                                dst.ike.handle_datagram(&data, remote, local, self.now);
                            }
                        }
                        Action::InstallChild(k) => src.installed.push(k),
                        Action::RemoveChild { spi_in, spi_out } => {
                            src.removed.push((spi_in, spi_out))
                        }
                        Action::Event(e) => src.events.push(e),
                    }
                }
            }
            if !moved {
                return;
            }
        }
        panic!("no quiescence");
    }

    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            let next = [self.a.ike.next_timeout(), self.b.ike.next_timeout()]
                .into_iter()
                .flatten()
                .filter(|t| *t <= end)
                .min();
            match next {
                Some(t) => {
                    self.now = self.now.max(t);
                    self.a.ike.handle_timeout(self.now);
                    self.b.ike.handle_timeout(self.now);
                    self.run();
                }
                None => break,
            }
        }
        self.now = end;
    }

    pub fn establish(&mut self) {
        self.a.ike.initiate(self.now).unwrap();
        self.run();
    }
}

pub fn assert_pair(a: &ChildSaKeys, b: &ChildSaKeys) {
    assert_eq!(a.spi_in, b.spi_out);
    assert_eq!(a.spi_out, b.spi_in);
    assert_eq!(a.algorithm, b.algorithm);
    assert_eq!(*a.enc_key_out, *b.enc_key_in);
    assert_eq!(*a.enc_key_in, *b.enc_key_out);
    assert_eq!(*a.integ_key_out, *b.integ_key_in);
    assert_eq!(*a.integ_key_in, *b.integ_key_out);
    assert_ne!(*a.enc_key_in, *a.enc_key_out);
    assert_eq!(a.local_ts, b.remote_ts);
    assert_eq!(a.remote_ts, b.local_ts);
}

pub fn established(p: &Peer) -> bool {
    p.events
        .iter()
        .any(|e| matches!(e, Event::IkeEstablished { .. }))
}

pub fn failed(p: &Peer) -> Vec<(FailReason, bool)> {
    p.events
        .iter()
        .filter_map(|e| match e {
            Event::Failed { reason, child } => Some((reason.clone(), *child)),
            _ => None,
        })
        .collect()
}
