//! ESP judged on the wire ([`common::wire_judge`]): a TCP transfer from
//! one vecgate to another, statically keyed, each judged on the wire:
//! vecgate's counters against the kernel's and the bridge port's, every
//! ESP packet captured once after segmentation and dissected by tshark
//! (decrypted with the SA's key), its sequence numbers consecutive, TCP
//! retransmits against a control transfer in the same run.
//!
//!   h1 10.1.0.2 ── [ga: vecgate] a-wan ── [wire: bridge] ── b-wan [gb: vecgate] ── h2
//!
//! "Offloads off" is `offloads = false` on vecgate's WAN interface: the
//! LAN still hands over TCP super-packets, which esp-encrypt seals into
//! UDP GSO datagrams that interface-output then cuts in software.
//! Needs root and tshark; fails (never skips) without them.

mod common;

use common::sites::Sites;
use common::wire_judge::{End, EspKey, Tunnel, Wire, WireJudge};
use common::{tcp_transfer, unique, warm_up, Gateway, TempFiles};
use std::sync::Mutex;
use std::time::Instant;

/// Two cores for everyone: one topology at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Bytes per judged transfer: a few MB, a few seconds even when loaded.
const BYTES: usize = 3 << 20;

/// h1 as the sender that once lost 40 % of its packets: TCP segments of
/// 1 390 bytes (1 338 of data behind timestamps), which AES-GCM and
/// ChaCha20-Poly1305 seal into 1 424-byte ESP packets, handed over in
/// super-packets of up to 64 KB whatever the rate (`tcp_min_tso_segs`;
/// a debug build's pace would otherwise keep them small). 46 such ESP
/// packets in one UDP GSO datagram made 65 546 bytes with their headers,
/// more than the kernel sends whole.
fn big_super_packets_of_1390(h1: &common::Netns) {
    h1.sh("ip route change default via 10.1.0.1 dev eth0 mtu 1390 && sysctl -qw net.ipv4.tcp_min_tso_segs=64");
}

fn sock(tag: &str) -> String {
    std::env::temp_dir()
        .join(format!("{}.sock", unique(tag)))
        .display()
        .to_string()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A deterministic test key for `spi` (a fixture, not a secret).
fn test_key(len: usize, spi: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29) ^ ((spi >> 8) as u8).wrapping_mul(11) ^ 0x3c)
        .collect()
}

/// A statically keyed gateway of the vecgate pair: `side` 0 is gwA.
fn static_config(
    files: &mut TempFiles,
    sock: &str,
    side: usize,
    esp: &str,
    key_len: usize,
    nat_t: bool,
    offloads: bool,
) -> String {
    let (lan_if, lan, wan_if, me, peer, traffic) = if side == 0 {
        (
            "a-lan",
            "10.1.0.1/24",
            "a-wan",
            "192.0.2.1",
            "192.0.2.2",
            "10.2.0.0/24",
        )
    } else {
        (
            "b-lan",
            "10.2.0.1/24",
            "b-wan",
            "192.0.2.2",
            "192.0.2.1",
            "10.1.0.0/24",
        )
    };
    let (out, inb) = if side == 0 {
        (0x5001u32, 0x6001u32)
    } else {
        (0x6001, 0x5001)
    };
    let mut key_file = |spi: u32| files.secret("k", format!("{}\n", hex(&test_key(key_len, spi))));
    let (ko, ki) = (key_file(out), key_file(inb));
    format!(
        r#"[gateway]
name = "wv{side}"
api = "unix:{sock}"

[[interface]]
name = "lan"
host = "{lan_if}"
driver = "af_packet"
addresses = ["{lan}"]
vrf = "blue"

[[interface]]
name = "wan"
host = "{wan_if}"
driver = "af_packet"
addresses = ["{me}/24"]
offloads = {offloads}

[[tunnel]]
name = "esp0"
kind = "ipsec"
local = "{me}"
remote = "{peer}"
vrf = "blue"
nat_t = {nat_t}
traffic = ["{traffic}"]

[[tunnel.sa]]
direction = "out"
spi = {out:#x}
algorithm = "{esp}"
key_file = "{ko}"

[[tunnel.sa]]
direction = "in"
spi = {inb:#x}
algorithm = "{esp}"
key_file = "{ki}"
"#
    )
}

/// ESP (plain, or in UDP with `nat_t`) from one vecgate to another for
/// `esp`, offloads on then off, judged at the bridge between them.
fn between_vecgates(esp: &str, key_len: usize, nat_t: bool) {
    let Sites {
        h1,
        h2,
        ga,
        gb,
        wire,
        ..
    } = Sites::with_wire();
    let wire = wire.expect("a bridge between the gateways");
    big_super_packets_of_1390(&h1);
    for offloads in [true, false] {
        let mut files = TempFiles::default();
        let (sa, sb) = (sock("wva"), sock("wvb"));
        let _b = Gateway::start(
            &gb,
            &static_config(&mut files, &sb, 1, esp, key_len, nat_t, offloads),
        );
        let _a = Gateway::start(
            &ga,
            &static_config(&mut files, &sa, 0, esp, key_len, nat_t, offloads),
        );
        warm_up(&h1, "10.2.0.2");
        let api = format!("unix:{sa}");
        let judge = WireJudge::start(
            Wire {
                tunnel: if nat_t { Tunnel::EspInUdp } else { Tunnel::Esp },
                api: &api,
                port: "wan",
                gw: End {
                    ns: &ga,
                    dev: "a-wan",
                },
                peer: End {
                    ns: &wire,
                    dev: "w-a",
                },
                sender: &h1,
                peer_socket: None,
                esp_keys: vec![EspKey {
                    spi: 0x5001,
                    alg: esp.to_string(),
                    key: test_key(key_len, 0x5001),
                }],
            },
            BYTES,
        );
        let t0 = Instant::now();
        tcp_transfer(&h1, &h2, "10.2.0.2", BYTES);
        let took = t0.elapsed();
        let r = judge.finish();
        eprintln!(
            "ESP{} vecgate to vecgate, {esp}, offloads {offloads}: {:.1} Mbit/s, {:.3} % retransmitted, {} ESP packets on the wire of {} counted",
            if nat_t { " in UDP" } else { "" },
            BYTES as f64 * 8.0 / took.as_secs_f64() / 1e6,
            r.retransmit_pct(),
            r.captured,
            r.vecgate.tunnel_packets
        );
    }
}

/// ESP in UDP between two vecgates (AES-GCM, whose packets once made
/// datagrams the kernel refused whole).
#[test]
fn esp_in_udp_between_vecgates_judged_on_the_wire() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    between_vecgates("aes128gcm16", 20, true);
}
