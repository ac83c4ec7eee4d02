//! AF_XDP port on one end of a veth pair between two namespaces (needs
//! root). Each test builds its own uniquely named namespaces and veths,
//! removed on drop.

mod common;

use common::*;
use packet::{Pool, Port};
use std::process::{Command, Stdio};
use std::time::Duration;
use vecgate_io::{AfXdpOpts, AfXdpPort, IoError, XdpMode};

fn open_a(t: &VethPair, opts: AfXdpOpts) -> Result<AfXdpPort, IoError> {
    let va = t.va.clone();
    t.a.run_in(move || AfXdpPort::open(&va, opts))
}

/// `ip -d link show` of `va` in `a`.
fn link_show(t: &VethPair) -> String {
    String::from_utf8_lossy(&t.a.exec(&["ip", "-d", "link", "show", "dev", &t.va]).stdout)
        .into_owned()
}

/// The one's-complement L4 checksum over the IPv4 pseudo header and the
/// segment: 0 when the checksum field is complete and right.
fn l4_csum_v4(f: &[u8]) -> u16 {
    let ihl = usize::from(f[14] & 0xf) * 4;
    let tot = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let l4 = &f[14 + ihl..14 + tot];
    let mut ph = Vec::new();
    ph.extend_from_slice(&f[26..34]);
    ph.extend_from_slice(&[0, f[23]]);
    ph.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    let s = u32::from(csum_fold(0, &ph));
    !csum_fold(s, l4)
}

#[test]
fn rx_receives_frames_from_peer() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfXdpOpts::default()).expect("open af_xdp");
    let mut pool = Pool::new(64);
    assert_eq!(port.mtu(), 1500);
    assert!(!port.offloads());
    assert!(port.is_alive());
    assert!(!port.zero_copy(), "veth has no zero-copy");
    assert!(port.native(), "veth has native XDP");
    assert!(link_show(&t).contains("xdp"), "{}", link_show(&t));
    let _echo = t.ghost_ping(&mut port, &mut pool);
    assert!(port.stats().rx_packets >= 1);
    assert_eq!(port.stats().rx_bad, 0);
}

/// The kernel of A never sees redirected frames (nor frames of queues
/// without a socket): A's address does not answer ping while the port is
/// open, and answers again once it is dropped — and the program is gone.
#[test]
fn host_stack_is_silent_and_drop_detaches() {
    let t = VethPair::new();
    assert!(t.b.try_exec(&["ping", "-c", "1", "-W", "5", &t.ip_a]));
    let port = open_a(&t, AfXdpOpts::default()).expect("open af_xdp");
    assert!(link_show(&t).contains("prog/xdp"), "{}", link_show(&t));
    assert!(!t
        .b
        .try_exec(&["ping", "-c", "2", "-i", "0.2", "-W", "3", &t.ip_a]));
    drop(port);
    assert!(
        detached(|| link_show(&t)),
        "program still attached: {}",
        link_show(&t)
    );
    assert!(t
        .b
        .try_exec(&["ping", "-c", "2", "-i", "0.2", "-W", "5", &t.ip_a]));
}

#[test]
fn tx_reaches_peer_and_reply_comes_back() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfXdpOpts::default()).expect("open af_xdp");
    let mut pool = Pool::new(64);
    let mac_a = port.mac();
    let mac_b = t.mac_b();
    let g = t.ghost(mac_a);
    let mut v = Vec::new();
    for seq in 0..3 {
        let mut p = pool.alloc().unwrap();
        let frame = icmp_echo(
            mac_b,
            mac_a,
            ip4(&g),
            ip4(&t.ip_b),
            0x4242,
            seq,
            &[0x5a; 64],
        );
        assert!(p.set_data(&frame));
        v.push(p);
    }
    assert_eq!(port.tx_burst(&mut v, &mut pool).unwrap().packets, 3);
    assert!(v.is_empty());
    assert_eq!(pool.available(), 64);
    let replies = std::cell::Cell::new(0);
    recv_while(
        &mut port,
        &mut pool,
        || replies.get() < 3,
        |p| {
            if is_icmp(p.data(), 0, Some(0x4242)) {
                let f = p.data();
                assert_eq!(&f[30..34], &ip4(&g));
                assert_eq!(&f[42..], &[0x5a; 64]);
                replies.set(replies.get() + 1);
            }
        },
    );
    assert_eq!(replies.get(), 3, "one reply per echo request sent");
    assert_eq!(port.stats().tx_packets, 3);
}

/// Many frames in one burst (more than the kernel's 32 per kick) all leave.
#[test]
fn tx_large_burst_is_drained() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfXdpOpts::default()).expect("open af_xdp");
    let mut pool = Pool::new(512);
    let mac_a = port.mac();
    let mac_b = t.mac_b();
    let g = t.ghost(mac_a);
    let mut v = Vec::new();
    for seq in 0..200 {
        let mut p = pool.alloc().unwrap();
        let frame = icmp_echo(mac_b, mac_a, ip4(&g), ip4(&t.ip_b), 0x77, seq, &[1; 32]);
        assert!(p.set_data(&frame));
        v.push(p);
    }
    assert_eq!(port.tx_burst(&mut v, &mut pool).unwrap().packets, 200);
    let mut replies = std::collections::BTreeSet::new();
    let n = std::cell::Cell::new(0);
    recv_while(
        &mut port,
        &mut pool,
        || n.get() < 200,
        |p| {
            if is_icmp(p.data(), 0, Some(0x77)) {
                replies.insert(u16::from_be_bytes([p.data()[40], p.data()[41]]));
                n.set(n.get() + 1);
            }
        },
    );
    assert_eq!(replies.len(), 200, "every request answered");
    let d = port.take_drops();
    assert_eq!(d.tx_full + d.tx_rejected + d.rx_bad, 0, "{d:?}");
}

/// TCP from B's kernel (tx checksum offload on its veth: the segments are
/// CHECKSUM_PARTIAL) arrives with a complete, correct TCP checksum.
#[test]
fn rx_tcp_from_peer_has_complete_checksum() {
    let t = VethPair::new();
    let mut port = open_a(&t, AfXdpOpts::default()).expect("open af_xdp");
    let mut pool = Pool::new(64);
    let g = t.ghost(port.mac());
    let b = t.b.name.clone();
    let g2 = g.clone();
    let client = std::thread::spawn(move || {
        let script = format!(
            "import socket\ns=socket.socket()\ns.settimeout(1.5)\n\
             try: s.connect(('{g2}',5555))\nexcept Exception: pass\n\
             u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
             u.sendto(b'x'*300,('{g2}',5556))\n"
        );
        Command::new("ip")
            .args(["netns", "exec", &b, "/usr/bin/python3", "-c", &script])
            .stdout(Stdio::null())
            .status()
            .unwrap()
    });
    // Until the client is done and both frames are in (however late a
    // loaded machine runs it), then 300 ms for a duplicate to show.
    let (tcp, udp) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    let more = || !client.is_finished() || tcp.get() == 0 || udp.get() == 0;
    recv_while(&mut port, &mut pool, more, |p| {
        let f = p.data();
        if f.len() > 34 && f[12..14] == [8, 0] && f[30..34] == ip4(&g) {
            match f[23] {
                6 => {
                    assert_eq!(l4_csum_v4(f), 0, "TCP checksum of {f:02x?}");
                    tcp.set(tcp.get() + 1);
                }
                17 => {
                    assert_eq!(l4_csum_v4(f), 0, "UDP checksum of {f:02x?}");
                    udp.set(udp.get() + 1);
                }
                _ => {}
            }
        }
    });
    client.join().unwrap();
    assert!(tcp.get() >= 1, "no SYN seen");
    assert_eq!(udp.get(), 1);
}

/// A veth has one receive queue by default: a second worker's port is
/// refused with the queue count and the fix; a second socket on a queue
/// already taken is refused too.
#[test]
fn too_few_queues_and_busy_queue_fail_clearly() {
    let t = VethPair::new();
    let e = open_a(
        &t,
        AfXdpOpts {
            queue: 1,
            workers: 2,
            ..AfXdpOpts::default()
        },
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            IoError::TooFewQueues {
                queues: 1,
                needed: 2,
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.contains(&t.va) && msg.contains("numrxqueues 2"),
        "{msg}"
    );
    // Nothing attached by the failed open.
    assert!(!link_show(&t).contains("xdp"));
    let _p = open_a(&t, AfXdpOpts::default()).expect("open af_xdp");
    let e = open_a(&t, AfXdpOpts::default()).unwrap_err();
    assert!(e.to_string().contains("queue 0 is already used"), "{e}");
}

/// Two queues, two sockets, one program: each socket gets the frames of
/// its queue, and the program stays until the last socket is dropped.
#[test]
fn two_queues_share_one_program() {
    let a = Netns::new("vgA");
    let b = Netns::new("vgB");
    let va = unique("va");
    let vb = unique("vb");
    a.exec(&[
        "ip",
        "link",
        "add",
        &va,
        "numrxqueues",
        "2",
        "numtxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        &vb,
        "numrxqueues",
        "2",
        "numtxqueues",
        "2",
    ]);
    a.exec(&["ip", "link", "set", &vb, "netns", &b.name]);
    a.exec(&["ip", "link", "set", &va, "up"]);
    b.exec(&["ip", "addr", "add", "10.98.0.2/24", "dev", &vb]);
    b.exec(&["ip", "link", "set", &vb, "up"]);
    let open = |q: u32| {
        let va = va.clone();
        a.run_in(move || {
            AfXdpPort::open(
                &va,
                AfXdpOpts {
                    queue: q,
                    workers: 2,
                    ..AfXdpOpts::default()
                },
            )
        })
        .expect("open af_xdp")
    };
    let mut p0 = open(0);
    let mut p1 = open(1);
    let mac = mac_str(p0.mac());
    b.exec(&[
        "ip",
        "neigh",
        "replace",
        "10.98.0.9",
        "lladdr",
        &mac,
        "dev",
        &vb,
    ]);
    // Many UDP flows from B: its XPS/hash spreads them over both tx queues,
    // which land on the matching rx queues of A.
    let script = "import socket\n\
        for p in range(64):\n\
        \x20   u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
        \x20   u.sendto(b'y'*64,('10.98.0.9',6000+p))\n";
    b.exec(&["/usr/bin/python3", "-c", script]);
    let mut pool = Pool::new(256);
    let count = |p: &mut AfXdpPort, pool: &mut Pool| {
        let mut n = 0;
        recv_for(p, pool, Duration::from_millis(100), |f| {
            let d = f.data();
            n += usize::from(d.len() > 34 && d[23] == 17 && d[30..34] == [10, 98, 0, 9]);
        });
        n
    };
    // Until all 64 arrived (XDP runs in softirq, which a loaded machine
    // may defer to ksoftirqd) or 20 s, then the counts are judged.
    let (mut n0, mut n1) = (0, 0);
    let t0 = std::time::Instant::now();
    while n0 + n1 < 64 && t0.elapsed() < Duration::from_secs(20) {
        n0 += count(&mut p0, &mut pool);
        n1 += count(&mut p1, &mut pool);
    }
    n0 += count(&mut p0, &mut pool);
    n1 += count(&mut p1, &mut pool);
    assert_eq!(n0 + n1, 64, "queue 0: {n0}, queue 1: {n1}");
    assert!(n0 > 0 && n1 > 0, "queue 0: {n0}, queue 1: {n1}");
    let show = || {
        String::from_utf8_lossy(&a.exec(&["ip", "link", "show", "dev", &va]).stdout).into_owned()
    };
    drop(p0);
    assert!(show().contains("xdp"), "detached while queue 1 is open");
    drop(p1);
    assert!(detached(show), "{}", show());
}

/// Waits (up to 5 s) until `show()` lists no XDP program. Closing the last
/// link fd detaches it, but a child that another test thread is forking at
/// that moment holds a copy of the fd until its exec (O_CLOEXEC), which a
/// loaded machine can stretch; a program that stays attached still fails.
fn detached(show: impl Fn() -> String) -> bool {
    let t0 = std::time::Instant::now();
    while show().contains("xdp") {
        if t0.elapsed() > Duration::from_secs(5) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

// ---- multi-buffer (frames larger than one 4 KiB UMEM frame) ----

/// Sets the MTU of both ends of the pair.
fn set_mtu(t: &VethPair, mtu: u32) {
    let m = mtu.to_string();
    t.a.exec(&["ip", "link", "set", &t.va, "mtu", &m]);
    t.b.exec(&["ip", "link", "set", &t.vb, "mtu", &m]);
}

/// Frame `i` of `len` bytes: EtherType 0x88b5 (local experimental), `i` in
/// the first two payload bytes, then a pattern that differs per frame.
fn exp_frame(dst: [u8; 6], src: [u8; 6], i: u16, len: usize) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend_from_slice(&i.to_be_bytes());
    while f.len() < len {
        f.push((f.len() as u16).wrapping_mul(7) as u8 ^ i as u8);
    }
    f
}

fn hex(f: &[u8]) -> String {
    f.iter().map(|b| format!("{b:02x}")).collect()
}

/// Sends `frames` in order from `vb` through an AF_PACKET socket in `b`
/// (in hex on the script's stdin: too long for an argument).
fn peer_send(t: &VethPair, frames: &[Vec<u8>]) {
    use std::io::Write;
    let script = format!(
        "import socket,sys\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
         s.bind(('{}',0))\nfor h in sys.stdin:\n    s.send(bytes.fromhex(h.strip()))\n",
        t.vb
    );
    let mut py = Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.b.name,
            "/usr/bin/python3",
            "-c",
            &script,
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = py.stdin.take().unwrap();
    for f in frames {
        writeln!(stdin, "{}", hex(f)).unwrap();
    }
    drop(stdin);
    assert!(py.wait().unwrap().success(), "sending from the peer");
}

/// The EtherType 0x88b5 frames the port receives, until `n` arrived (at
/// most 20 s), then 300 ms more for anything that should not come.
fn recv_exp(port: &mut AfXdpPort, pool: &mut Pool, n: usize) -> Vec<Vec<u8>> {
    let got = std::cell::RefCell::new(Vec::new());
    recv_while(
        port,
        pool,
        || got.borrow().len() < n,
        |p| {
            let d = p.data();
            if d.len() >= 14 && d[12..14] == [0x88, 0xb5] {
                got.borrow_mut().push(d.to_vec());
            }
        },
    );
    got.into_inner()
}

/// Sizes of the multi-buffer tests: one UMEM frame, a frame one byte over
/// what one receive frame holds (3840), two and three frames, and the
/// largest frame of a 9000-byte MTU.
const JUMBO_SIZES: [usize; 6] = [100, 3840, 3841, 5000, 8900, 9014];

fn jumbo_rx(mode: XdpMode) {
    let t = VethPair::new();
    set_mtu(&t, 9000);
    let mut port = open_a(
        &t,
        AfXdpOpts {
            mode,
            ..AfXdpOpts::default()
        },
    )
    .expect("open af_xdp on a 9000-byte veth");
    assert_eq!(port.mtu(), 9000);
    assert!(port.multi_buffer(), "kernel 6.6+: multi-buffer AF_XDP");
    assert_eq!(port.native(), mode != XdpMode::Generic, "{mode:?}");
    let mut pool = Pool::new(256);
    let (dst, src) = (port.mac(), t.mac_b());
    // Each size three times, interleaved: order across sizes is checked.
    let sent: Vec<Vec<u8>> = (0..3 * JUMBO_SIZES.len())
        .map(|i| exp_frame(dst, src, i as u16, JUMBO_SIZES[i % JUMBO_SIZES.len()]))
        .collect();
    peer_send(&t, &sent);
    let got = recv_exp(&mut port, &mut pool, sent.len());
    assert_eq!(
        got.iter().map(Vec::len).collect::<Vec<_>>(),
        sent.iter().map(Vec::len).collect::<Vec<_>>(),
        "every frame once, whole, in order"
    );
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert!(g == s, "frame {i} ({} bytes) differs", s.len());
    }
    let s = port.stats();
    // 3841, 5000, 8900 and 9014 take several receive frames.
    assert_eq!(s.rx_multi, 3 * 4, "{s:?}");
    assert_eq!(s.rx_bad, 0, "{s:?}");
    let d = port.take_drops();
    assert_eq!(d.rx_ring_full + d.rx_bad, 0, "{d:?}");
}

/// On a 9000-byte veth the program stays in native mode (the veth takes a
/// multi-buffer program above 3506 bytes of MTU) and frames of up to 9014
/// bytes from the peer arrive whole, byte-exact and in order. Before
/// multi-buffer the attach fell back to generic mode and every frame over
/// 3840 bytes was dropped by the kernel (XDP_STATISTICS rx_dropped).
#[test]
fn jumbo_frames_from_peer_arrive_whole_and_in_order() {
    jumbo_rx(XdpMode::Auto);
}

/// The same in generic (SKB) mode: the kernel splits the frame over UMEM
/// frames there too.
#[test]
fn jumbo_frames_arrive_whole_in_generic_mode() {
    jumbo_rx(XdpMode::Generic);
}

/// Packets longer than a UMEM frame leave as descriptor chains: an
/// AF_PACKET socket on the peer gets each one whole, byte-exact and in
/// order, and the peer's kernel answers 8900-byte pings (its replies come
/// back as chains too).
#[test]
fn jumbo_tx_reaches_peer_whole_and_big_pings_are_answered() {
    let t = VethPair::new();
    set_mtu(&t, 9000);
    let mut port = open_a(&t, AfXdpOpts::default()).expect("open af_xdp");
    assert!(port.multi_buffer());
    let mut pool = Pool::new(256);
    let (mac_a, mac_b) = (port.mac(), t.mac_b());
    let sizes = [100, 4096, 4097, 5000, 8900, 9014, 1514, 8192, 8193];
    let frames: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| exp_frame(mac_b, mac_a, i as u16, n))
        .collect();

    // The capture on B: ready once bound, then every 0x88b5 frame in hex.
    let script = format!(
        "import socket,sys\n\
         s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x88b5))\n\
         s.bind(('{vb}',0x88b5))\ns.settimeout(20)\nprint('ready',flush=True)\n\
         for _ in range({n}):\n    print(s.recv(65536).hex(),flush=True)\n",
        vb = t.vb,
        n = frames.len()
    );
    let mut cap = Command::new("ip")
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
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(cap.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let mut v = Vec::new();
    for f in &frames {
        let mut p = pool.alloc().unwrap();
        assert!(p.set_data(f));
        v.push(p);
    }
    assert_eq!(
        port.tx_burst(&mut v, &mut pool).unwrap().packets,
        frames.len(),
        "{:?}",
        port.stats()
    );
    assert_eq!(pool.available(), 256);
    let got: Vec<String> = lines.map_while(Result::ok).collect();
    let _ = cap.wait();
    assert_eq!(
        got.iter().map(|h| h.len() / 2).collect::<Vec<_>>(),
        sizes.to_vec(),
        "every frame once, whole, in order"
    );
    for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
        assert!(*g == hex(f), "frame {i} ({} bytes) differs", f.len());
    }
    let s = port.stats();
    // 4097, 5000, 8900, 9014, 8192 and 8193 bytes take several frames.
    assert_eq!(s.tx_multi, 6, "{s:?}");
    assert_eq!(s.tx_too_big + s.tx_full, 0, "{s:?}");

    // Big pings: B's kernel checks the ICMP checksum over the whole frame
    // and answers with as many bytes.
    let g = t.ghost(mac_a);
    let payloads = [8900 - 28, 5000 - 28, 100];
    let mut v = Vec::new();
    for (seq, &n) in payloads.iter().enumerate() {
        let payload: Vec<u8> = (0..n).map(|j| (j * 13 + seq) as u8).collect();
        let mut p = pool.alloc().unwrap();
        let f = icmp_echo(
            mac_b,
            mac_a,
            ip4(&g),
            ip4(&t.ip_b),
            0x9000,
            seq as u16,
            &payload,
        );
        assert!(p.set_data(&f));
        v.push(p);
    }
    assert_eq!(
        port.tx_burst(&mut v, &mut pool).unwrap().packets,
        payloads.len()
    );
    let replies = std::cell::RefCell::new(std::collections::BTreeMap::new());
    recv_while(
        &mut port,
        &mut pool,
        || replies.borrow().len() < payloads.len(),
        |p| {
            let f = p.data();
            if is_icmp(f, 0, Some(0x9000)) {
                let seq = usize::from(u16::from_be_bytes([f[40], f[41]]));
                assert_eq!(checksum(&f[14..34]), 0, "IPv4 header checksum");
                assert_eq!(checksum(&f[34..]), 0, "ICMP checksum");
                let want: Vec<u8> = (0..payloads[seq]).map(|j| (j * 13 + seq) as u8).collect();
                assert!(f[42..] == want[..], "reply {seq} payload");
                replies.borrow_mut().insert(seq, f.len());
            }
        },
    );
    assert_eq!(
        replies.into_inner().into_values().collect::<Vec<_>>(),
        vec![8900 + 14, 5000 + 14, 100 + 42],
        "one whole reply per request"
    );
    let d = port.take_drops();
    assert_eq!(
        d.tx_full + d.tx_rejected + d.rx_bad + d.rx_ring_full,
        0,
        "{d:?}"
    );
}

/// A 4088-byte MTU (frames of 4102 bytes: just over one page) keeps native
/// XDP and its largest frames arrive whole; the single-buffer limits hold
/// on either side of it.
#[test]
fn mtu_4088_frames_just_over_a_page() {
    let t = VethPair::new();
    set_mtu(&t, 4088);
    let mut port = open_a(&t, AfXdpOpts::default()).expect("open af_xdp");
    assert!(port.native() && port.multi_buffer());
    let mut pool = Pool::new(64);
    let sent: Vec<Vec<u8>> = [4102, 60, 3841]
        .iter()
        .enumerate()
        .map(|(i, &n)| exp_frame(port.mac(), t.mac_b(), i as u16, n))
        .collect();
    peer_send(&t, &sent);
    assert_eq!(recv_exp(&mut port, &mut pool, sent.len()), sent);
}

/// Without multi-buffer (as on kernels before 6.6) a port whose MTU needs
/// frames over one UMEM frame is refused with the limit and the fix, and
/// nothing is left attached; at the limit it opens, and packets longer than
/// a UMEM frame are counted (as invalid or too big) instead of sent.
#[test]
fn single_buffer_refuses_an_mtu_it_cannot_serve() {
    let t = VethPair::new();
    set_mtu(&t, 9000);
    let single = AfXdpOpts {
        multi_buffer: false,
        ..AfXdpOpts::default()
    };
    let e = open_a(&t, single.clone()).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            IoError::XdpMtu {
                mtu: 9000,
                max: 3826,
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.contains(&t.va) && msg.contains("mtu 3826") && msg.contains("af_packet"),
        "{msg}"
    );
    assert!(!link_show(&t).contains("xdp"), "{}", link_show(&t));

    set_mtu(&t, 3826);
    let mut port = open_a(&t, single).expect("open at the single-buffer limit");
    assert!(!port.multi_buffer());
    let mut pool = Pool::new(64);
    let (mac_a, mac_b) = (port.mac(), t.mac_b());
    // The largest frame one receive frame holds still arrives.
    let f = exp_frame(mac_a, mac_b, 1, 3840);
    peer_send(&t, std::slice::from_ref(&f));
    assert_eq!(recv_exp(&mut port, &mut pool, 1), vec![f]);
    let mut v = vec![pool.alloc().unwrap()];
    assert!(v[0].set_data(&exp_frame(mac_b, mac_a, 2, 5000)));
    assert_eq!(port.tx_burst(&mut v, &mut pool).unwrap().packets, 0);
    // Debug builds check every frame against the MTU before the backend
    // sees it (packet::tx_check): there the frame is refused as invalid;
    // release builds count it where the UMEM cannot hold it.
    let s = port.stats();
    if packet::tx_check::ENABLED {
        assert_eq!((s.tx_invalid, s.tx_too_big), (1, 0));
    } else {
        assert_eq!((s.tx_invalid, s.tx_too_big), (0, 1));
    }
}

/// A 65535-byte MTU: the largest frame a pool buffer holds (65549 bytes)
/// crosses both ways — 18 receive descriptors of 3840 bytes, 17 transmit
/// ones of 4096 (the copy mode takes up to 18) — and the peer's kernel
/// answers a 65535-byte ping.
#[test]
fn largest_frames_of_a_64k_mtu_cross_both_ways() {
    let t = VethPair::new();
    set_mtu(&t, 65535);
    let mut port = open_a(&t, AfXdpOpts::default()).expect("open af_xdp");
    assert!(port.native() && port.multi_buffer());
    let mut pool = Pool::new(64);
    let (mac_a, mac_b) = (port.mac(), t.mac_b());
    let sent: Vec<Vec<u8>> = [65549, 60, 40000]
        .iter()
        .enumerate()
        .map(|(i, &n)| exp_frame(mac_a, mac_b, i as u16, n))
        .collect();
    peer_send(&t, &sent);
    assert!(recv_exp(&mut port, &mut pool, sent.len()) == sent);
    let g = t.ghost(mac_a);
    let payload: Vec<u8> = (0..65535 - 28).map(|j| (j % 253) as u8).collect();
    let f = icmp_echo(mac_b, mac_a, ip4(&g), ip4(&t.ip_b), 0x64, 1, &payload);
    let mut v = vec![pool.alloc().unwrap()];
    assert!(v[0].set_data(&f));
    assert_eq!(port.tx_burst(&mut v, &mut pool).unwrap().packets, 1);
    let r = recv_until(&mut port, &mut pool, Duration::from_secs(10), |p| {
        is_icmp(p.data(), 0, Some(0x64))
    })
    .expect("echo reply");
    assert_eq!(r.data().len(), 65549);
    assert!(r.data()[42..] == payload[..], "reply payload");
    assert_eq!(checksum(&r.data()[34..]), 0, "ICMP checksum");
    let s = port.stats();
    assert_eq!((s.tx_multi, s.rx_bad, s.tx_too_big), (1, 0, 0), "{s:?}");
}
