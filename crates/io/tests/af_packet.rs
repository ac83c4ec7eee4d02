//! AF_PACKET port on one end of a veth pair between two namespaces (needs
//! root). Each test builds its own uniquely named namespaces.

mod common;

use common::*;
use packet::{Gso, Offload, Pool, Port};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;
use vecgate_io::{AfPacketOpts, AfPacketPort, GuardMechanism, IngressGuard, IoError};

fn open_a(t: &VethPair, opts: AfPacketOpts) -> AfPacketPort {
    let va = t.va.clone();
    t.a.run_in(move || AfPacketPort::open(&va, opts).expect("open af_packet"))
}

#[test]
fn rx_receives_frames_from_peer() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfPacketOpts::default());
    let mut pool = Pool::new(64);
    assert_eq!(port.mtu(), 1500);
    assert!(port.offloads());
    assert!(port.is_alive());
    let p = t.ghost_ping(&mut port, &mut pool);
    assert_eq!(p.meta.offload.gso, Gso::None);
    assert!(port.stats().rx_packets >= 1);
}

/// The receive ring is laid out in multi-frame blocks (15 frames of 17
/// pages per 1 MiB block): reading on past a block boundary, and round the
/// ring several times, yields every frame once and in order.
#[test]
fn rx_ring_wraps_across_blocks_in_order() {
    let t = VethPair::new();
    let opts = AfPacketOpts {
        frames: 30,
        slot_size: vecgate_io::af_packet::SLOT_MAX,
        ..AfPacketOpts::default()
    };
    let mut port = open_a(&t, opts);
    let mut pool = Pool::new(64);
    let g = t.ghost(port.mac());
    let mut sender = Command::new("ip")
        .args([
            "netns", "exec", &t.b.name, "ping", "-c", "100", "-i", "0.005",
        ])
        .args(["-W", "1", "-s", "64", &g])
        .stdout(Stdio::null())
        .spawn()
        .expect("ping");
    let mut seqs = Vec::new();
    recv_for(&mut port, &mut pool, Duration::from_secs(4), |p| {
        if is_icmp(p.data(), 8, None) {
            let f = p.data();
            seqs.push(u16::from_be_bytes([f[40], f[41]]));
        }
    });
    let _ = sender.wait();
    // In order and never twice. A starved test thread (a loaded machine)
    // may let the 30-slot ring fill at 200 frames/s: then the kernel drops
    // and counts, so each missing request must be matched by such a count,
    // and the ring must still have been gone round (more than 30 read).
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]) && seqs.iter().all(|s| (1..=100).contains(s)),
        "every echo request at most once, in order: {seqs:?}"
    );
    let missing = 100 - seqs.len() as u64;
    let ring_full = port.take_drops().rx_ring_full;
    assert!(
        missing <= ring_full && seqs.len() > 30,
        "{missing} echo requests missing, {ring_full} counted as ring drops: {seqs:?}"
    );
}

#[test]
fn tx_reaches_peer_and_reply_comes_back() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfPacketOpts::default());
    let mut pool = Pool::new(64);
    let mac_a = port.mac();
    let mac_b = t.mac_b();
    let g = t.ghost(mac_a);
    let mut v = Vec::new();
    let mut p = pool.alloc().unwrap();
    let frame = icmp_echo(mac_b, mac_a, ip4(&g), ip4(&t.ip_b), 0x4242, 7, &[0x5a; 64]);
    assert!(p.set_data(&frame));
    v.push(p);
    assert_eq!(port.tx_burst(&mut v, &mut pool).unwrap().packets, 1);
    assert!(v.is_empty());
    assert_eq!(pool.available(), 64);
    let r = recv_until(&mut port, &mut pool, Duration::from_secs(3), |p| {
        is_icmp(p.data(), 0, Some(0x4242))
    })
    .expect("echo reply from B's kernel");
    let f = r.data();
    assert_eq!(&f[30..34], &ip4(&g));
    assert_eq!(&f[26..30], &ip4(&t.ip_b));
    assert_eq!(&f[42..], &[0x5a; 64]);
    // Our own transmission is not looped back (PACKET_IGNORE_OUTGOING).
    let mut own = 0;
    recv_for(&mut port, &mut pool, Duration::from_millis(100), |p| {
        own += usize::from(is_icmp(p.data(), 8, Some(0x4242)));
    });
    assert_eq!(own, 0);
    assert_eq!(port.stats().tx_packets, 1);
}

/// The virtio-net header travels in each packet's headroom (one iovec per
/// packet); a burst with a packet that has no room in front of its frame
/// is sent with the header in its own iovec instead. Both kinds reach B's
/// kernel (echo replies for each), byte counters count frames only.
#[test]
fn tx_with_and_without_headroom_for_the_vnet_header() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfPacketOpts::default());
    let mut pool = Pool::new(64);
    let (mac_a, mac_b) = (port.mac(), t.mac_b());
    let g = t.ghost(mac_a);
    let mut sent_bytes = 0;
    for (round, squeeze) in [(1u16, false), (2, true)] {
        let mut v = Vec::new();
        for k in 0..3u16 {
            let mut p = pool.alloc().unwrap();
            let frame = icmp_echo(
                mac_b,
                mac_a,
                ip4(&g),
                ip4(&t.ip_b),
                0x4300 + round,
                k,
                &[0x5a; 64],
            );
            assert!(p.set_data(&frame));
            if squeeze && k == 1 {
                // The same frame with only 4 bytes left in front of it.
                p.push_front(p.headroom() - 4).unwrap();
                p.data_mut()[..frame.len()].copy_from_slice(&frame);
                p.truncate(frame.len());
                assert_eq!((p.headroom(), p.data()), (4, &frame[..]));
            }
            sent_bytes += frame.len() as u64;
            v.push(p);
        }
        assert_eq!(port.tx_burst(&mut v, &mut pool).unwrap().packets, 3);
        let mut replies = std::collections::BTreeSet::new();
        let t0 = std::time::Instant::now();
        while replies.len() < 3 && t0.elapsed() < Duration::from_secs(5) {
            recv_for(&mut port, &mut pool, Duration::from_millis(100), |p| {
                if is_icmp(p.data(), 0, Some(0x4300 + round)) {
                    replies.insert(u16::from_be_bytes([p.data()[40], p.data()[41]]));
                }
            });
        }
        assert_eq!(
            replies.len(),
            3,
            "round {round}: an echo reply for each request"
        );
    }
    assert_eq!(port.stats().tx_packets, 6);
    assert_eq!(
        port.stats().tx_bytes,
        sent_bytes,
        "frames only, not headers"
    );
}

/// With TSO on B's veth, a TCP bulk transfer from B to A's kernel reaches the
/// AF_PACKET socket as unsegmented super-packets with a virtio-net header.
#[test]
fn rx_tcp_super_packets_with_vnet_header() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfPacketOpts::default());
    let mut pool = Pool::new(256);
    let port_no = "5301";
    let mut server = Command::new("ip")
        .args([
            "netns", "exec", &t.a.name, "iperf3", "-s", "-1", "-p", port_no,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Listening before the client starts (a fixed sleep is too short on a
    // loaded machine).
    let listening = || {
        let out = Command::new("ip")
            .args(["netns", "exec", &t.a.name, "ss", "-ltnH"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains(&format!(":{port_no}"))
    };
    let t0 = std::time::Instant::now();
    while !listening() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "iperf3 -s not listening"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let b = t.b.name.clone();
    let ip_a = t.ip_a.clone();
    let client = std::thread::spawn(move || {
        Command::new("ip")
            .args([
                "netns", "exec", &b, "iperf3", "-c", &ip_a, "-p", port_no, "-n", "16M",
            ])
            .output()
            .unwrap()
    });
    let mut max_len = 0;
    let mut gso_seen: Option<(usize, Offload)> = None;
    // Until a super-packet was seen or the transfer ended (not a fixed
    // 2 s: a loaded machine may start the client late).
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        let done = client.is_finished();
        recv_for(&mut port, &mut pool, Duration::from_millis(200), |p| {
            max_len = max_len.max(p.len());
            if p.len() > 1514 && gso_seen.is_none() {
                gso_seen = Some((p.len(), p.meta.offload));
            }
        });
        if done || (gso_seen.is_some() && max_len > 16_000) {
            break;
        }
    }
    let out = client.join().unwrap();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "iperf3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (len, o) = gso_seen.expect("a frame larger than 1514 bytes");
    assert!(max_len > 16_000, "largest frame {max_len}");
    assert_eq!(o.gso, Gso::TcpV4, "{o:?}");
    assert!(o.needs_csum);
    assert_eq!(o.csum_start, 34, "csum_start relative to the frame start");
    assert_eq!(o.csum_offset, 16, "TCP checksum field");
    assert!((500..=1460).contains(&o.gso_size), "{o:?}");
    assert!(
        o.hdr_len as usize >= 54 && (o.hdr_len as usize) < len,
        "{o:?}"
    );
    assert_eq!(port.stats().rx_bad_vnet, 0);
}

/// A hand-built UDP super-packet (GSO UDP_L4, 10 × 1000 bytes) sent with
/// tx_burst arrives at B's UDP socket as 10 datagrams of 1000 bytes.
#[test]
fn tx_udp_super_packet_is_segmented_for_peer() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfPacketOpts::default());
    let mut pool = Pool::new(8);
    let mac_a = port.mac();
    let mac_b = t.mac_b();
    let g = t.ghost(mac_a);
    let script = format!(
        "import socket\n\
         s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
         s.bind(('{}',5400)); s.settimeout(3)\n\
         print('ready',flush=True)\n\
         n=0; sizes=set(); total=0\n\
         try:\n\
         \x20   while n<10:\n\
         \x20       d=s.recv(70000); n+=1; sizes.add(len(d)); total+=len(d)\n\
         except socket.timeout: pass\n\
         print(n,total,sorted(sizes),flush=True)\n",
        t.ip_b
    );
    let mut rx = Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.b.name,
            "/usr/bin/python3",
            "-c",
            &script,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(rx.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    let seg = 1000usize;
    let payload: Vec<u8> = (0..10 * seg).map(|i| (i / seg) as u8 + 1).collect();
    let mut f = eth_ipv4(mac_b, mac_a, ip4(&g), ip4(&t.ip_b), 17, 8 + payload.len());
    let udp_len = (8 + payload.len()) as u16;
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&5400u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    // CHECKSUM_PARTIAL: the field holds the pseudo-header sum (RFC 768),
    // the kernel completes it per segment.
    let mut ph = Vec::new();
    ph.extend_from_slice(&ip4(&g));
    ph.extend_from_slice(&ip4(&t.ip_b));
    ph.extend_from_slice(&[0, 17]);
    ph.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&csum_fold(0, &ph).to_be_bytes());
    f.extend_from_slice(&payload);
    let mut p = pool.alloc().unwrap();
    assert!(p.set_data(&f));
    p.meta.offload = Offload {
        needs_csum: true,
        csum_valid: false,
        csum_start: 34,
        csum_offset: 6,
        gso: Gso::UdpL4,
        gso_size: seg as u16,
        hdr_len: 42,
    };
    let mut v = vec![p];
    assert_eq!(port.tx_burst(&mut v, &mut pool).unwrap().packets, 1);
    let mut res = String::new();
    out.read_to_string(&mut res).unwrap();
    let _ = rx.wait();
    assert_eq!(res.trim(), "10 10000 [1000]", "datagrams received by B");
}

/// Ethernet + IPv4 + UDP (4000 → `dport`) from the ghost `g` to B, `payload`
/// bytes of `seg`-sized segments marked as one UDP GSO frame with the
/// checksum partial (the pseudo-header sum in the field, RFC 768).
fn udp_gso_frame(
    t: &VethPair,
    mac_a: [u8; 6],
    g: &str,
    dport: u16,
    payload: usize,
    seg: u16,
) -> (Vec<u8>, Offload) {
    let mut f = eth_ipv4(t.mac_b(), mac_a, ip4(g), ip4(&t.ip_b), 17, 8 + payload);
    let udp_len = (8 + payload) as u16;
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    let mut ph = Vec::new();
    ph.extend_from_slice(&ip4(g));
    ph.extend_from_slice(&ip4(&t.ip_b));
    ph.extend_from_slice(&[0, 17]);
    ph.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&csum_fold(0, &ph).to_be_bytes());
    f.extend((0..payload).map(|i| (i / usize::from(seg)) as u8));
    let o = Offload {
        needs_csum: true,
        csum_valid: false,
        csum_start: 34,
        csum_offset: 6,
        gso: Gso::UdpL4,
        gso_size: seg,
        hdr_len: 42,
    };
    (f, o)
}

/// The veth's kernel counter `what` (statistics/…) in namespace `ns`.
fn link_stat(ns: &Netns, dev: &str, what: &str) -> u64 {
    let out = ns.exec(&["cat", &format!("/sys/class/net/{dev}/statistics/{what}")]);
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// The size rule (`packet::gso_limit`) against this kernel: a UDP GSO frame
/// of 65 535 bytes crosses whole and reaches B's socket as its 46
/// datagrams; one byte longer, the kernel drops it on the direct transmit
/// path (PACKET_QDISC_BYPASS: a raw socket's send fails with ENOBUFS and the
/// veth counts it in `tx_dropped`). The port never counts such a frame as
/// sent: in a debug build it refuses it itself (the transmit invariant) and
/// the kernel never sees it.
#[test]
fn tx_udp_gso_frame_at_the_kernel_limit_crosses_and_one_byte_more_is_not_sent() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfPacketOpts::default());
    assert!(port.udp_gso(), "veth takes UDP GSO frames");
    let mut pool = Pool::new(8);
    let mac_a = port.mac();
    let g = t.ghost(mac_a);
    let script = format!(
        "import socket\n\
         s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
         s.setsockopt(socket.SOL_SOCKET,socket.SO_RCVBUF,1<<22)\n\
         s.bind(('{}',5401)); s.settimeout(2)\n\
         print('ready',flush=True)\n\
         n=0; sizes=set(); total=0\n\
         try:\n\
         \x20   while True:\n\
         \x20       d=s.recv(70000); n+=1; sizes.add(len(d)); total+=len(d)\n\
         except socket.timeout: pass\n\
         print(n,total,sorted(sizes),flush=True)\n",
        t.ip_b
    );
    let mut rx = Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.b.name,
            "/usr/bin/python3",
            "-c",
            &script,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(rx.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    // The last frame the kernel takes whole.
    let (f, o) = udp_gso_frame(&t, mac_a, &g, 5401, 65_535 - 42, 1424);
    assert_eq!(f.len(), packet::gso_limit::MAX_GSO_FRAME);
    let mut p = pool.alloc().unwrap();
    assert!(p.set_data(&f));
    p.meta.offload = o;
    let mut v = vec![p];
    let sent = port.tx_burst(&mut v, &mut pool).unwrap();
    assert_eq!((sent.packets, sent.bytes), (1, 65_535));

    // One byte more: the kernel's own verdict, from a raw socket as the
    // port's (virtio-net header, qdisc bypass).
    let (f2, _) = udp_gso_frame(&t, mac_a, &g, 5401, 65_536 - 42, 1424);
    let file = std::env::temp_dir().join(unique("gso"));
    std::fs::write(&file, &f2).unwrap();
    let raw = format!(
        "import socket,struct\n\
         s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,0)\n\
         s.setsockopt(263,15,1); s.setsockopt(263,20,1); s.bind(('{}',0))\n\
         h=struct.pack('=BBHHHH',1,5,42,1424,34,6)\n\
         try:\n\
         \x20   s.send(h+open('{}','rb').read()); print('sent')\n\
         except OSError as e: print(e.errno)\n",
        t.va,
        file.display()
    );
    let dropped0 = link_stat(&t.a, &t.va, "tx_dropped");
    let res = t.a.exec(&["/usr/bin/python3", "-c", &raw]);
    let _ = std::fs::remove_file(&file);
    let verdict = String::from_utf8_lossy(&res.stdout).trim().to_string();
    assert_eq!(
        verdict,
        libc::ENOBUFS.to_string(),
        "the kernel refuses 65 536 bytes"
    );
    assert_eq!(link_stat(&t.a, &t.va, "tx_dropped"), dropped0 + 1);

    // The port: not sent, not counted as sent, counted as not sent.
    let before = port.stats();
    let mut p = pool.alloc().unwrap();
    assert!(p.set_data(&f2));
    p.meta.offload = o;
    let mut v = vec![p];
    let sent = port.tx_burst(&mut v, &mut pool).unwrap();
    assert_eq!((sent.packets, sent.bytes), (0, 0));
    let after = port.stats();
    assert_eq!(after.tx_packets, before.tx_packets);
    assert_eq!(after.tx_bytes, before.tx_bytes);
    if packet::tx_check::ENABLED {
        assert_eq!(after.tx_invalid, before.tx_invalid + 1);
        assert_eq!(
            link_stat(&t.a, &t.va, "tx_dropped"),
            dropped0 + 1,
            "never handed over"
        );
    } else {
        assert_eq!(after.tx_dropped, before.tx_dropped + 1);
    }
    assert_eq!(pool.available(), 8);

    let mut res = String::new();
    out.read_to_string(&mut res).unwrap();
    let _ = rx.wait();
    assert_eq!(
        res.trim(),
        format!("46 {} [1413, 1424]", 65_535 - 42),
        "B got the first frame's datagrams, nothing of the second"
    );
}

/// The ingress guard keeps A's kernel from answering B's ping while the
/// AF_PACKET socket still receives the requests; removed on drop.
#[test]
fn ingress_guard_silences_kernel_but_not_af_packet() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfPacketOpts::default());
    let mut pool = Pool::new(64);
    let mac_a = port.mac();
    t.b.exec(&[
        "ip",
        "neigh",
        "replace",
        &t.ip_a,
        "lladdr",
        &mac_str(mac_a),
        "dev",
        &t.vb,
    ]);
    assert!(
        t.b.try_exec(&["ping", "-c", "1", "-W", "5", &t.ip_a]),
        "control: kernel answers"
    );
    let va = t.va.clone();
    let guard =
        t.a.run_in(move || IngressGuard::install(&va).expect("install guard"));
    // This kernel (>= 6.6) takes the tcx program: no nftables table.
    assert_eq!(guard.mechanism(), GuardMechanism::Tcx);
    assert_eq!(guard_programs(&t.a, &t.va).len(), 1);
    let tables = String::from_utf8(t.a.exec(&["nft", "list", "tables"]).stdout).unwrap();
    assert!(!tables.contains("vecgate_"), "{tables}");
    // Discard what arrived so far.
    recv_for(&mut port, &mut pool, Duration::from_millis(50), |_| {});
    assert!(
        !t.b.try_exec(&["ping", "-c", "2", "-i", "0.2", "-W", "3", &t.ip_a]),
        "kernel must not answer behind the guard"
    );
    // No reply was sent (the ping failed); the requests still reached us.
    let mut requests = 0;
    recv_for(&mut port, &mut pool, Duration::from_millis(100), |p| {
        requests += usize::from(is_icmp(p.data(), 8, None));
    });
    assert!(
        requests >= 2,
        "AF_PACKET still sees the requests: {requests}"
    );
    drop(guard); // dropped on this thread, outside A: must still be removed
    assert!(guard_programs(&t.a, &t.va).is_empty());
    let tables = String::from_utf8(t.a.exec(&["nft", "list", "tables"]).stdout).unwrap();
    assert!(!tables.contains("vecgate_"), "{tables}");
    assert!(
        t.b.try_exec(&["ping", "-c", "1", "-W", "5", &t.ip_a]),
        "answers again"
    );
}

/// Two sockets in one fanout group share the flows between them.
#[test]
fn fanout_spreads_flows() {
    let t = VethPair::new();
    let opts = AfPacketOpts {
        fanout: Some(4242),
        ..AfPacketOpts::default()
    };
    let mut p1 = open_a(&t, opts.clone());
    let mut p2 = open_a(&t, opts);
    let mut pool = Pool::new(512);
    let g = t.ghost(p1.mac());
    // 64 flows (source ports), one datagram each.
    let script = format!(
        "import socket\n\
         for i in range(64):\n\
         \x20   s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
         \x20   s.bind(('{}',20000+i)); s.sendto(b'x'*32,('{g}',9999)); s.close()\n",
        t.ip_b
    );
    t.b.exec(&["/usr/bin/python3", "-c", &script]);
    let is_ours = |f: &[u8]| {
        f.len() >= 42 && f[12..14] == [8, 0] && f[23] == 17 && f[36..38] == 9999u16.to_be_bytes()
    };
    let (mut n1, mut n2) = (0, 0);
    for _ in 0..2 {
        recv_for(&mut p1, &mut pool, Duration::from_millis(100), |p| {
            n1 += usize::from(is_ours(p.data()))
        });
        recv_for(&mut p2, &mut pool, Duration::from_millis(100), |p| {
            n2 += usize::from(is_ours(p.data()))
        });
    }
    assert_eq!(
        n1 + n2,
        64,
        "each frame to exactly one socket ({n1} + {n2})"
    );
    assert!(n1 > 0 && n2 > 0, "both sockets get flows ({n1} + {n2})");
}

#[test]
fn missing_netdev_and_removal_are_reported() {
    let t = VethPair::new();
    let e =
        t.a.run_in(|| AfPacketPort::open("vgnosuchdev0", AfPacketOpts::default()).err());
    let e = e.expect("open must fail");
    assert!(matches!(e, IoError::NoSuchDevice(_)));
    assert_eq!(e.to_string(), "no such network interface 'vgnosuchdev0'");

    let mut port = open_a(&t, AfPacketOpts::default());
    let mut pool = Pool::new(4);
    assert!(port.is_alive());
    t.a.exec(&["ip", "link", "del", &t.va]);
    assert!(!port.is_alive());
    let mut v = vec![pool.alloc().unwrap()];
    assert!(v[0].set_data(&[0u8; 60]));
    let err = port.tx_burst(&mut v, &mut pool).unwrap_err();
    assert!(vecgate_io::is_device_gone(&err), "{err}");
    assert!(v.is_empty());
    assert_eq!(pool.available(), 4);
    // Frames that arrived before the removal may still be in the ring;
    // receiving them must work, nothing else.
    let mut out = Vec::new();
    port.rx_burst(&mut pool, &mut out, 32).unwrap();
    pool.free_all(&mut out);
    assert_eq!(pool.available(), 4);
}

/// The kernel moves a received VLAN tag out of the frame before AF_PACKET
/// sees it (`skb_vlan_untag` in `__netif_receive_skb_core`); the port puts it
/// back (TP_STATUS_VLAN_VALID) so the frame is as it was on the wire.
#[test]
fn rx_reinserts_vlan_tag() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfPacketOpts::default());
    let mut pool = Pool::new(64);
    let mac_b = t.mac_b();
    let inner = icmp_echo(
        port.mac(),
        mac_b,
        [10, 97, 0, 2],
        [10, 97, 0, 9],
        0x0707,
        1,
        &[9; 40],
    );
    let mut tagged = inner[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x20, 0x07]); // PCP 1, VID 7
    tagged.extend_from_slice(&inner[12..]);
    let hex: String = tagged.iter().map(|b| format!("{b:02x}")).collect();
    t.b.exec(&[
        "/usr/bin/python3",
        "-c",
        &format!(
            "import socket\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
             s.bind(('{}',0))\ns.send(bytes.fromhex('{hex}'))\n",
            t.vb
        ),
    ]);
    let p = recv_until(&mut port, &mut pool, Duration::from_secs(3), |p| {
        p.data().len() > 18 && p.data()[12..14] == [0x81, 0x00]
    })
    .expect("tagged frame");
    assert_eq!(p.data(), &tagged[..]);
}

/// Frames larger than a ring slot (here 2 KiB slots on a 9000-byte link)
/// take the copy path: the kernel queues them whole on the socket and the
/// port reads them straight into a buffer. Mixed with frames that fit, all
/// arrive whole, byte-exact and in the order sent, and a VLAN tag the kernel
/// took out of a large frame is put back as for a small one.
#[test]
fn rx_frames_larger_than_a_slot_arrive_whole_and_in_order() {
    let t = VethPair::new();
    t.a.exec(&["ip", "link", "set", &t.va, "mtu", "9000"]);
    t.b.exec(&["ip", "link", "set", &t.vb, "mtu", "9000"]);
    let opts = AfPacketOpts {
        slot_size: 2048,
        ..AfPacketOpts::default()
    };
    let mut port = open_a(&t, opts);
    let mut pool = Pool::new(64);
    let (dst, src) = (port.mac(), t.mac_b());
    // Frame i: EtherType 0x88b5 (local experimental), i in the first two
    // payload bytes, then a pattern; sizes 100 / 6000 alternating, the last
    // one VLAN-tagged (VID 9).
    let frame = |i: u16, len: usize, tagged: bool| {
        let mut f = dst.to_vec();
        f.extend_from_slice(&src);
        if tagged {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x09]);
        }
        f.extend_from_slice(&[0x88, 0xb5]);
        f.extend_from_slice(&i.to_be_bytes());
        while f.len() < len {
            f.push((f.len() as u16 ^ i) as u8);
        }
        f
    };
    let sent: Vec<Vec<u8>> = (0..20u16)
        .map(|i| frame(i, if i % 2 == 0 { 100 } else { 6000 }, i == 19))
        .collect();
    let hex: Vec<String> = sent
        .iter()
        .map(|f| f.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    t.b.exec(&[
        "/usr/bin/python3",
        "-c",
        &format!(
            "import socket\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
             s.bind(('{}',0))\nfor h in {:?}:\n    s.send(bytes.fromhex(h))\n",
            t.vb, hex
        ),
    ]);
    let mut got = Vec::new();
    let t0 = std::time::Instant::now();
    while got.len() < sent.len() && t0.elapsed() < Duration::from_secs(10) {
        recv_for(&mut port, &mut pool, Duration::from_millis(100), |p| {
            let d = p.data();
            let et = if d.len() > 16 && d[12..14] == [0x81, 0x00] {
                &d[16..18]
            } else {
                &d[12..14.min(d.len())]
            };
            if et == [0x88, 0xb5] {
                got.push(d.to_vec());
            }
        });
    }
    assert_eq!(got.len(), sent.len(), "every frame once");
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert!(
            g == s,
            "frame {i}: {} bytes received, {} sent",
            g.len(),
            s.len()
        );
    }
    assert_eq!(
        port.stats().rx_copied,
        10,
        "the 6000-byte frames took the copy path"
    );
    assert_eq!(port.stats().rx_bad + port.stats().rx_copy_full, 0);
}
