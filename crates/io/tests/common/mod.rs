//! Test fixtures: uniquely named network namespaces and veth pairs, removed
//! on drop (even when the test fails), plus packet crafting helpers.
#![allow(dead_code)]

use packet::{Packet, Pool, Port};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A name unique to this process and call: `<prefix><pid><n>`, at most 15
/// characters (Linux ifname limit).
pub fn unique(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = format!("{prefix}{}x{n}", std::process::id());
    assert!(name.len() <= 15, "name too long: {name}");
    name
}

/// Runs a command, panicking with its stderr on failure.
pub fn run(args: &[&str]) -> Output {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A named network namespace (`ip netns add`), deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(prefix: &str) -> Self {
        let name = unique(prefix);
        run(&["ip", "netns", "add", &name]);
        let ns = Netns { name };
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        ns
    }

    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.name))
    }

    /// Runs a command inside the namespace; panics on failure.
    pub fn exec(&self, args: &[&str]) -> Output {
        let mut v = vec!["ip", "netns", "exec", &self.name];
        v.extend_from_slice(args);
        run(&v)
    }

    /// Runs a command inside the namespace and returns whether it succeeded.
    pub fn try_exec(&self, args: &[&str]) -> bool {
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    /// Runs `f` on a thread inside this namespace (sockets and taps created
    /// there stay in it) and returns its result.
    pub fn run_in<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = self.path();
        std::thread::spawn(move || {
            vecgate_io::netdev::enter_netns(&path).expect("setns");
            f()
        })
        .join()
        .expect("thread in netns panicked")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Two namespaces joined by a veth pair: `va` in `a` (10.99.X.1/24), `vb` in
/// `b` (10.99.X.2/24). Dropping it deletes both namespaces and the veths.
pub struct VethPair {
    pub b: Netns,
    pub a: Netns,
    pub va: String,
    pub vb: String,
    pub ip_a: String,
    pub ip_b: String,
    pub subnet: u8,
}

impl VethPair {
    pub fn new() -> Self {
        let a = Netns::new("vgA");
        let b = Netns::new("vgB");
        let va = unique("va");
        let vb = unique("vb");
        // Created in a namespace, never in the root one: nothing to leak if
        // the test dies between steps (the namespaces own the devices).
        a.exec(&[
            "ip", "link", "add", &va, "type", "veth", "peer", "name", &vb,
        ]);
        a.exec(&["ip", "link", "set", &vb, "netns", &b.name]);
        let subnet =
            (std::process::id() % 200 + COUNTER.fetch_add(1, Ordering::Relaxed) % 50) as u8;
        let ip_a = format!("10.99.{subnet}.1");
        let ip_b = format!("10.99.{subnet}.2");
        a.exec(&["ip", "addr", "add", &format!("{ip_a}/24"), "dev", &va]);
        b.exec(&["ip", "addr", "add", &format!("{ip_b}/24"), "dev", &vb]);
        a.exec(&["ip", "link", "set", &va, "up"]);
        b.exec(&["ip", "link", "set", &vb, "up"]);
        VethPair {
            b,
            a,
            va,
            vb,
            ip_a,
            ip_b,
            subnet,
        }
    }

    /// MAC address of `vb`, read inside `b`.
    pub fn mac_b(&self) -> [u8; 6] {
        let vb = self.vb.clone();
        self.b.run_in(move || vecgate_io::netdev::mac(&vb).unwrap())
    }

    /// An address in the subnet that nobody owns; B reaches it via
    /// `mac_a` (the MAC of the port on A's end).
    pub fn ghost(&self, mac_a: [u8; 6]) -> String {
        let ghost = format!("10.99.{}.9", self.subnet);
        self.b.exec(&[
            "ip",
            "neigh",
            "replace",
            &ghost,
            "lladdr",
            &mac_str(mac_a),
            "dev",
            &self.vb,
        ]);
        ghost
    }

    /// B pings the ghost address behind `port` (A's end) with 100 bytes of
    /// 0xa5; the echo request `port` received, checked byte by byte: MACs,
    /// addresses, both checksums, the pattern.
    pub fn ghost_ping(&self, port: &mut dyn Port, pool: &mut Pool) -> Packet {
        let (mac_a, mac_b) = (port.mac(), self.mac_b());
        let g = self.ghost(mac_a);
        // No one answers: ping fails, the requests are what we look for.
        self.b.try_exec(&[
            "ping", "-c", "2", "-i", "0.2", "-W", "1", "-s", "100", "-p", "a5", &g,
        ]);
        let p = recv_until(port, pool, Duration::from_secs(3), |p| {
            is_icmp(p.data(), 8, None)
        })
        .expect("echo request received");
        let f = p.data();
        assert_eq!(f.len(), 14 + 20 + 8 + 100);
        assert_eq!(&f[0..6], &mac_a);
        assert_eq!(&f[6..12], &mac_b);
        assert_eq!(&f[26..30], &ip4(&self.ip_b));
        assert_eq!(&f[30..34], &ip4(&g));
        assert_eq!(checksum(&f[14..34]), 0, "IPv4 header checksum");
        assert_eq!(checksum(&f[34..]), 0, "ICMP checksum");
        assert!(f[34 + 8 + 16..].iter().all(|&b| b == 0xa5), "ping pattern");
        p
    }
}

/// The ingress guards' tcx programs attached on `dev` in `ns`.
pub fn guard_programs(ns: &Netns, dev: &str) -> Vec<vecgate_io::netdev::TcxProgram> {
    let dev = dev.to_string();
    ns.run_in(move || vecgate_io::netdev::tcx_ingress_programs(&dev).expect("tcx query"))
        .into_iter()
        .filter(|p| p.name == vecgate_io::netdev::GUARD_PROGRAM_NAME)
        .collect()
}

/// The nftables tables named `vecgate_*` in `ns` (`nft list tables`).
pub fn guard_tables(ns: &Netns) -> Vec<String> {
    String::from_utf8(ns.exec(&["nft", "list", "tables"]).stdout)
        .unwrap()
        .lines()
        .filter(|l| l.contains("vecgate_"))
        .map(str::to_string)
        .collect()
}

pub fn mac_str(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

pub fn ip4(s: &str) -> [u8; 4] {
    let v: Vec<u8> = s.split('.').map(|p| p.parse().unwrap()).collect();
    [v[0], v[1], v[2], v[3]]
}

/// Receives until `pred` holds for a packet (returning it) or `timeout`.
pub fn recv_until(
    port: &mut dyn Port,
    pool: &mut Pool,
    timeout: Duration,
    mut pred: impl FnMut(&Packet) -> bool,
) -> Option<Packet> {
    let deadline = Instant::now() + timeout;
    let mut v = Vec::new();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        port.rx_burst(pool, &mut v, 64).expect("rx_burst");
        let mut found = None;
        for p in v.drain(..) {
            if found.is_none() && pred(&p) {
                found = Some(p);
            } else {
                pool.free(p);
            }
        }
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Receives everything for `dur`, calling `f` on each packet.
pub fn recv_for(port: &mut dyn Port, pool: &mut Pool, dur: Duration, mut f: impl FnMut(&Packet)) {
    let deadline = Instant::now() + dur;
    let mut v = Vec::new();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
        port.rx_burst(pool, &mut v, 64).expect("rx_burst");
        for p in v.drain(..) {
            f(&p);
            pool.free(p);
        }
    }
}

/// Receives while `more()` holds (at most 20 s: the expected frames may
/// come late on a loaded machine, but not never), then 300 ms more (what
/// should not come, e.g. a duplicate, has time to show), calling `f` on
/// each packet.
pub fn recv_while(
    port: &mut dyn Port,
    pool: &mut Pool,
    mut more: impl FnMut() -> bool,
    mut f: impl FnMut(&Packet),
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while more() && Instant::now() < deadline {
        recv_for(port, pool, Duration::from_millis(50), &mut f);
    }
    recv_for(port, pool, Duration::from_millis(300), f);
}

/// RFC 1071 one's-complement sum folded to 16 bits (not complemented).
pub fn csum_fold(mut sum: u32, data: &[u8]) -> u16 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        sum += u32::from(*b) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

pub fn checksum(data: &[u8]) -> u16 {
    !csum_fold(0, data)
}

/// Ethernet + IPv4 header (20 bytes, DF, TTL 64) for `proto` with `l4_len`
/// bytes behind it; returns 34 bytes.
pub fn eth_ipv4(
    dst: [u8; 6],
    src: [u8; 6],
    sip: [u8; 4],
    dip: [u8; 4],
    proto: u8,
    l4_len: usize,
) -> Vec<u8> {
    let mut f = Vec::with_capacity(34 + l4_len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let tot = (20 + l4_len) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&tot.to_be_bytes());
    ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    ip[6] = 0x40;
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&sip);
    ip[16..20].copy_from_slice(&dip);
    let c = checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f
}

/// A complete ICMP echo request frame.
pub fn icmp_echo(
    dst: [u8; 6],
    src: [u8; 6],
    sip: [u8; 4],
    dip: [u8; 4],
    id: u16,
    seq: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = eth_ipv4(dst, src, sip, dip, 1, 8 + payload.len());
    let mut icmp = vec![8u8, 0, 0, 0];
    icmp.extend_from_slice(&id.to_be_bytes());
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(payload);
    let c = checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&icmp);
    f
}

/// Whether `f` is an IPv4 ICMP frame of `icmp_type` with `id`.
pub fn is_icmp(f: &[u8], icmp_type: u8, id: Option<u16>) -> bool {
    f.len() >= 42
        && f[12..14] == [0x08, 0x00]
        && f[23] == 1
        && f[34] == icmp_type
        && id.is_none_or(|id| f[38..40] == id.to_be_bytes())
}
