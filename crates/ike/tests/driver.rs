//! Two drivers over real UDP sockets on loopback (unprivileged ports):
//! establishment, forced NAT-T floating with the non-ESP marker, and ESP
//! datagrams on the NAT-T port handed to the caller untouched.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};
use vecgate_ike::driver::Driver;
use vecgate_ike::{Action, ChildSaKeys, Event, Ike, IkeConfig};

fn cfg(local: &str, remote: &str, port: u16, natt: u16) -> IkeConfig {
    let l: SocketAddr = format!("{local}:{port}").parse().unwrap();
    let r: SocketAddr = format!("{remote}:{port}").parse().unwrap();
    let mut c = IkeConfig::new(l, r, b"driver-test");
    c.natt_port = natt;
    c.local_ts = vec!["10.1.0.0/16".parse().unwrap()];
    c.remote_ts = vec!["10.2.0.0/16".parse().unwrap()];
    c.retransmit_base = Duration::from_millis(200);
    c
}

#[test]
fn drivers_establish_over_udp_and_float_to_natt() {
    // Ports unlikely to be taken; both ends on different loopback IPs.
    let base = 20000 + (std::process::id() % 20000) as u16;
    let (port, natt) = (base, base + 1);
    let mut ca = cfg("127.0.0.1", "127.0.0.2", port, natt);
    ca.force_encap = true;
    let mut cb = cfg("127.0.0.2", "127.0.0.1", port, natt);
    cb.local_ts = ca.remote_ts.clone();
    cb.remote_ts = ca.local_ts.clone();
    let mut a = Driver::bind(Ike::new(ca).unwrap()).unwrap();
    let mut b = Driver::bind(Ike::new(cb).unwrap()).unwrap();
    a.ike_mut().initiate(Instant::now()).unwrap();
    let mut keys_a: Vec<ChildSaKeys> = vec![];
    let mut keys_b: Vec<ChildSaKeys> = vec![];
    let mut esp_seen = vec![];
    let t0 = Instant::now();
    while (keys_a.is_empty() || keys_b.is_empty()) && t0.elapsed() < Duration::from_secs(10) {
        a.step(
            Duration::from_millis(20),
            &mut |act| {
                if let Action::InstallChild(k) = act {
                    keys_a.push(k.clone());
                }
            },
            &mut |_, _, _| {},
        )
        .unwrap();
        b.step(
            Duration::from_millis(20),
            &mut |act| {
                if let Action::InstallChild(k) = act {
                    keys_b.push(k.clone());
                }
                assert!(
                    !matches!(act, Action::Event(Event::Failed { .. })),
                    "{act:?}"
                );
            },
            &mut |_, _, _| {},
        )
        .unwrap();
    }
    assert_eq!(keys_a.len(), 1, "not established in time");
    let (ka, kb) = (&keys_a[0], &keys_b[0]);
    assert_eq!(ka.spi_out, kb.spi_in);
    assert_eq!(*ka.enc_key_out, *kb.enc_key_in);
    assert!(ka.udp_encap && kb.udp_encap);
    assert_eq!(ka.remote.port(), natt);
    assert_eq!(kb.remote, format!("127.0.0.1:{natt}").parse().unwrap());
    // An ESP datagram (non-zero SPI, no marker) to B's NAT-T port goes to
    // the ESP callback, not to IKE.
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut esp = kb.spi_in.to_be_bytes().to_vec();
    esp.extend_from_slice(&[0, 0, 0, 1, 0xaa, 0xbb]);
    s.send_to(&esp, format!("127.0.0.2:{natt}")).unwrap();
    let t0 = Instant::now();
    while esp_seen.is_empty() && t0.elapsed() < Duration::from_secs(5) {
        b.step(
            Duration::from_millis(50),
            &mut |_| {},
            &mut |d, local, _| {
                esp_seen.push((d.to_vec(), local));
            },
        )
        .unwrap();
    }
    assert_eq!(esp_seen.len(), 1);
    assert_eq!(esp_seen[0].0, esp);
    assert_eq!(esp_seen[0].1.port(), natt);
    assert_eq!(b.ike_mut().dropped().0, 0);
}
