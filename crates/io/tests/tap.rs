//! TAP port in its own namespace (needs root).

mod common;

use common::*;
use packet::{Gso, Pool, Port};
use std::process::{Command, Stdio};
use std::time::Duration;
use vecgate_io::{IoError, TapOpts, TapPort};

struct TapNs {
    ns: Netns,
    tap: String,
    ip_k: String,
    ip_v: String,
}

/// A namespace with a tap: kernel end 10.98.0.1/24, vecgate "owns"
/// 10.98.0.2 (static neighbour entry to the port's MAC).
fn setup(opts: TapOpts) -> (TapNs, TapPort) {
    let ns = Netns::new("vgT");
    let tap = unique("vgt");
    let name = tap.clone();
    let port = ns.run_in(move || TapPort::create(&name, opts).expect("create tap"));
    assert_eq!(port.name(), tap);
    let (ip_k, ip_v) = ("10.98.0.1".to_string(), "10.98.0.2".to_string());
    ns.exec(&["ip", "addr", "add", "10.98.0.1/24", "dev", &tap]);
    ns.exec(&["ip", "link", "set", &tap, "up"]);
    ns.exec(&[
        "ip",
        "neigh",
        "add",
        &ip_v,
        "lladdr",
        &mac_str(port.mac()),
        "dev",
        &tap,
    ]);
    (
        TapNs {
            ns,
            tap,
            ip_k,
            ip_v,
        },
        port,
    )
}

#[test]
fn tap_rx_and_tx() {
    let (t, mut port) = setup(TapOpts::default());
    assert!(port.offloads());
    assert!(
        port.offload_flags() & 0x07 == 0x07,
        "CSUM|TSO4|TSO6 accepted"
    );
    assert!(port.is_alive());
    assert_eq!(port.mtu(), 1500);
    let mut pool = Pool::new(64);
    let kmac = t.ns.run_in({
        let tap = t.tap.clone();
        move || vecgate_io::netdev::mac(&tap).unwrap()
    });
    assert_ne!(kmac, port.mac());

    // Kernel -> vecgate.
    t.ns.try_exec(&["ping", "-c", "1", "-W", "1", "-s", "200", &t.ip_v]);
    let p = recv_until(&mut port, &mut pool, Duration::from_secs(3), |p| {
        is_icmp(p.data(), 8, None)
    })
    .expect("echo request from the kernel side");
    assert_eq!(p.len(), 14 + 20 + 8 + 200);
    assert_eq!(&p.data()[0..6], &port.mac());
    assert_eq!(&p.data()[6..12], &kmac);
    assert_eq!(&p.data()[30..34], &ip4(&t.ip_v));
    pool.free(p);

    // vecgate -> kernel: the kernel answers our echo request.
    let f = icmp_echo(
        kmac,
        port.mac(),
        ip4(&t.ip_v),
        ip4(&t.ip_k),
        0x7777,
        1,
        &[3; 32],
    );
    let mut pkt = pool.alloc().unwrap();
    assert!(pkt.set_data(&f));
    let mut v = vec![pkt];
    assert_eq!(port.tx_burst(&mut v, &mut pool).unwrap().packets, 1);
    let r = recv_until(&mut port, &mut pool, Duration::from_secs(3), |p| {
        is_icmp(p.data(), 0, Some(0x7777))
    })
    .expect("echo reply from the kernel");
    assert_eq!(&r.data()[42..], &[3; 32]);
    let rxp = t.ns.exec(&[
        "cat",
        &format!("/sys/class/net/{}/statistics/rx_packets", t.tap),
    ]);
    assert!(
        String::from_utf8_lossy(&rxp.stdout)
            .trim()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert_eq!(port.stats().tx_packets, 1);
}

/// TSO/checksum offload is advertised on the tap, and a TCP SYN from the
/// kernel arrives with its checksum left to us (NEEDS_CSUM).
#[test]
fn tap_offload_features_and_csum_partial() {
    let (t, mut port) = setup(TapOpts::default());
    let mut pool = Pool::new(64);
    let feats = t.ns.run_in({
        let tap = t.tap.clone();
        move || vecgate_io::netdev::offload_report(&tap).unwrap()
    });
    assert!(feats.tso && feats.tx_csum, "{feats:?}");
    // A TCP SYN from the kernel arrives with the checksum left to us.
    let ip_v = t.ip_v.clone();
    let ns = t.ns.name.clone();
    let mut c = Command::new("ip")
        .args(["netns", "exec", &ns, "/usr/bin/python3", "-c"])
        .arg(format!(
            "import socket\ns=socket.socket(); s.settimeout(1)\ntry: s.connect(('{ip_v}', 5555))\nexcept Exception: pass\n"
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let syn = recv_until(&mut port, &mut pool, Duration::from_secs(3), |p| {
        let f = p.data();
        f.len() >= 54 && f[12..14] == [8, 0] && f[23] == 6 && f[36..38] == 5555u16.to_be_bytes()
    })
    .expect("TCP SYN");
    let _ = c.wait();
    let o = syn.meta.offload;
    assert_eq!(o.gso, Gso::None);
    assert!(o.needs_csum, "{o:?}");
    assert_eq!(o.csum_start, 34);
    assert_eq!(o.csum_offset, 16);
}

#[test]
fn tap_invalid_name_and_missing_driver() {
    let e = TapPort::create("this-name-is-far-too-long", TapOpts::default()).unwrap_err();
    assert!(matches!(e, IoError::InvalidName(_)), "{e}");
}

/// UDP segmentation both ways: a UDP_SEGMENT send in the kernel reaches
/// rx_burst as one UDP_L4 super-packet (USO accepted), and a super-packet
/// written with tx_burst reaches a kernel UDP socket as 10 datagrams.
#[test]
fn tap_udp_super_packets_both_ways() {
    let (t, mut port) = setup(TapOpts::default());
    let mut pool = Pool::new(64);
    assert!(
        port.offload_flags() & 0x60 == 0x60,
        "USO4|USO6 accepted on 6.18"
    );
    // Kernel -> vecgate: 10 x 1000 bytes in one sendto with UDP_SEGMENT.
    t.ns.exec(&[
        "/usr/bin/python3",
        "-c",
        &format!(
            "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
             s.setsockopt(17,103,1000)\ns.sendto(b'q'*10000,('{}',6000))\n",
            t.ip_v
        ),
    ]);
    let p = recv_until(&mut port, &mut pool, Duration::from_secs(3), |p| {
        let f = p.data();
        f.len() > 42 && f[23] == 17 && f[36..38] == 6000u16.to_be_bytes()
    })
    .expect("UDP super-packet");
    assert_eq!(p.len(), 14 + 20 + 8 + 10_000);
    let o = p.meta.offload;
    assert_eq!(o.gso, Gso::UdpL4, "{o:?}");
    assert_eq!(o.gso_size, 1000);
    assert!(
        o.needs_csum && o.csum_start == 34 && o.csum_offset == 6,
        "{o:?}"
    );

    // vecgate -> kernel: turn it around (swap addresses and ports) and send.
    let mut f = p.data().to_vec();
    pool.free(p);
    let (src_mac, dst_mac) = (f[0..6].to_vec(), f[6..12].to_vec());
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&src_mac);
    let (sip, dip) = (f[26..30].to_vec(), f[30..34].to_vec());
    f[26..30].copy_from_slice(&dip);
    f[30..34].copy_from_slice(&sip);
    let (sp, dp) = (f[34..36].to_vec(), f[36..38].to_vec());
    f[34..36].copy_from_slice(&dp);
    f[36..38].copy_from_slice(&sp);
    // Swapping both addresses keeps the IPv4 and pseudo-header sums.
    let mut rx = Command::new("ip")
        .args(["netns", "exec", &t.ns.name, "/usr/bin/python3", "-c"])
        .arg(format!(
            "import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
             s.bind(('{}',{})); s.settimeout(3)\nprint('ready',flush=True)\nn=0;t=0\n\
             try:\n    while n<10:\n        d=s.recv(70000); n+=1; t+=len(d)\nexcept Exception: pass\n\
             print(n,t,flush=True)\n",
            t.ip_k,
            u16::from_be_bytes([sp[0], sp[1]])
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::{BufRead, BufReader, Read};
    let mut out = BufReader::new(rx.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let mut pkt = pool.alloc().unwrap();
    assert!(pkt.set_data(&f));
    pkt.meta.offload = o;
    let mut v = vec![pkt];
    assert_eq!(port.tx_burst(&mut v, &mut pool).unwrap().packets, 1);
    let mut res = String::new();
    out.read_to_string(&mut res).unwrap();
    let _ = rx.wait();
    assert_eq!(res.trim(), "10 10000");
}
