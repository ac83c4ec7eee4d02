//! ipsec tunnels created and deleted live on gateways that started with
//! none (the ESP registry, the punt path and the IKE thread are always
//! there):
//!
//!   h1 10.1.0.2 / 10.11.0.2 ── a-lan [gwA] a-wan 192.0.2.1 ══ 192.0.2.2 b-wan [gwB] b-lan ── h2 10.2.0.2 / 10.22.0.2
//!
//! 10.11/16 ↔ 10.22/16 is a plain routed flow over the same underlay that
//! must never be interrupted; 10.1 ↔ 10.2 crosses only through the ESP
//! tunnel while it exists. Judged by ping, a byte-exact TCP transfer and
//! tshark's ESP dissector on the underlay; the IKE case by strongSwan.
//! Needs root, tcpdump, tshark, curl and (IKE) strongSwan; fails, never
//! skips, when one is missing.

#[path = "common/charon.rs"]
mod charon;
mod common;

use charon::{ike_state, wait_established, Charon, CharonCfg};
use common::{tcp_transfer, tshark, unique, veth, wait_until, Capture, Gateway, Netns, TempFiles};
use std::process::Command;
use std::sync::Mutex;

/// Two cores for everyone: one topology at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Inline test keys (fixtures, not secrets): A→B and B→A, AES-128-GCM
/// key ‖ salt. They must never come back from the API or reach the log.
const KEY_AB: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2c3d4";
const KEY_BA: &str = "112233445566778899aabbccddeeff0001020304";
const SPI_AB: u32 = 0x1001;
const SPI_BA: u32 = 0x2001;

struct Topo {
    h1: Netns,
    h2: Netns,
    ga: Netns,
    gb: Netns,
}

fn topo() -> Topo {
    let t = Topo {
        h1: Netns::new("h1"),
        h2: Netns::new("h2"),
        ga: Netns::new("ga"),
        gb: Netns::new("gb"),
    };
    veth(&t.h1, "eth0", &t.ga, "a-lan");
    veth(&t.ga, "a-wan", &t.gb, "b-wan");
    veth(&t.h2, "eth0", &t.gb, "b-lan");
    t.h1.sh("ip addr add 10.1.0.2/24 dev eth0 && ip addr add 10.11.0.2/24 dev eth0 && ip route add default via 10.1.0.1");
    t.h2.sh("ip addr add 10.2.0.2/24 dev eth0 && ip addr add 10.22.0.2/24 dev eth0 && ip route add default via 10.2.0.1");
    t
}

/// A gateway with no tunnel: its LAN's two subnets, the WAN, and a plain
/// route to the far side's second subnet.
fn gw_cfg(files: &mut TempFiles, side: usize) -> (String, String) {
    let sock = std::env::temp_dir().join(format!("{}.sock", unique("live")));
    files.0.push(sock.clone());
    let (lan, lan4, lan4b, wan, me, peer, far) = if side == 0 {
        (
            "a-lan",
            "10.1.0.1/24",
            "10.11.0.1/24",
            "a-wan",
            "192.0.2.1",
            "192.0.2.2",
            "10.22.0.0/24",
        )
    } else {
        (
            "b-lan",
            "10.2.0.1/24",
            "10.22.0.1/24",
            "b-wan",
            "192.0.2.2",
            "192.0.2.1",
            "10.11.0.0/24",
        )
    };
    let text = format!(
        r#"[gateway]
name = "live{side}"
workers = 2
api = "unix:{sock}"

[[interface]]
name = "lan"
host = "{lan}"
driver = "af_packet"
addresses = ["{lan4}", "{lan4b}"]

[[interface]]
name = "wan"
host = "{wan}"
driver = "af_packet"
addresses = ["{me}/24"]

[[route]]
prefix = "{far}"
via = "{peer}"
"#,
        sock = sock.display()
    );
    (text, sock.display().to_string())
}

/// `curl` on the unix socket: (HTTP status, body).
fn api(sock: &str, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut c = Command::new("curl");
    c.args([
        "-s",
        "-w",
        "\n%{http_code}",
        "--unix-socket",
        sock,
        "-X",
        method,
    ]);
    if let Some(b) = body {
        c.args(["-H", "content-type: application/json", "--data-binary", b]);
    }
    c.arg(format!("http://vecgate{path}"));
    let out = c.output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// Frames the gateways' interfaces lost (ring full, transmit refused),
/// summed over the gateways behind `socks`: a ping of the plain flow may
/// be lost only when such a loss was counted.
fn port_drops(socks: &[&str]) -> u64 {
    socks
        .iter()
        .map(|s| {
            let (st, body) = api(s, "GET", "/counters", None);
            assert_eq!(st, 200, "{body}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            v["interfaces"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| i["drops"].as_u64().expect("drops"))
                .sum::<u64>()
        })
        .sum()
}

/// Asserts the plain flow lost no ping that the gateways did not count as
/// an interface drop (counts are polled by the workers: waited for).
fn assert_plain_flow(plain: Background, socks: &[&str], drops0: u64) {
    let (sent, got, text) = plain.finish();
    assert!(sent >= 20, "{text}");
    // Every batch waited for its replies: none was in flight at the end.
    let lost = sent - got.min(sent);
    let mut counted = 0;
    wait_until(5, || {
        counted = port_drops(socks) - drops0;
        counted >= lost
    });
    assert!(
        lost <= counted,
        "plain flow interrupted: {lost} lost, {counted} interface drops counted:\n{text}"
    );
}

/// `vecgate ARGS --api unix:SOCK`; panics with its stderr on failure.
fn cli(sock: &str, args: &[&str]) -> String {
    let out = Command::new(common::vecgate_bin())
        .args(args)
        .args(["--api", &format!("unix:{sock}")])
        .output()
        .expect("vecgate cli");
    assert!(
        out.status.success(),
        "vecgate {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Pings that run in the background for the whole test: the plain flow.
/// They run in batches of `ping -c 20 -w 20`, each of which waits for the
/// replies to its 20 requests (up to 20 s, see [`common::answered`]): when
/// the test finishes, no echo is left in flight, so every unanswered one
/// is a lost one, however slowly a loaded machine forwards them.
struct Background {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<(u64, u64, String)>>,
}

impl Background {
    fn ping(ns: &Netns, args: &str) -> Background {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, ns, args) = (stop.clone(), ns.name.clone(), args.to_owned());
        let thread = std::thread::spawn(move || {
            let (mut sent, mut got, mut text) = (0, 0, String::new());
            loop {
                let out = Command::new("ip")
                    .args(["netns", "exec", &ns, "sh", "-c"])
                    .arg(format!("ping -c 20 -w 20 {args}"))
                    .output()
                    .expect("ping");
                let batch = String::from_utf8_lossy(&out.stdout).into_owned();
                let Some(line) = batch.lines().find(|l| l.contains("packets transmitted")) else {
                    text += &batch;
                    text += &String::from_utf8_lossy(&out.stderr);
                    break;
                };
                let answered = common::answered(&batch, 20);
                sent += 20;
                got += answered;
                text += &format!("{answered} of the first 20 answered; {line}\n");
                if flag.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
            }
            (sent, got, text)
        });
        Background {
            stop,
            thread: Some(thread),
        }
    }

    /// Lets the running batch finish (all its replies in) and returns
    /// (sent, received, the batches' summaries).
    fn finish(mut self) -> (u64, u64, String) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // A failed test: the running batch ends on its own.
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// At least one of 3 echoes answered (each given 3 s: a loaded machine
/// may be slow, and a path that must not answer gets as long to do so).
fn ping_ok(ns: &Netns, to: &str) -> bool {
    ns.try_sh(&format!("ping -c 3 -i 0.2 -W 3 {to}"))
        .status
        .success()
}

#[test]
fn static_ipsec_tunnel_added_and_deleted_live_through_api_and_cli() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = topo();
    let mut files = TempFiles::default();
    let (ca, sa) = gw_cfg(&mut files, 0);
    let (cb, sb) = gw_cfg(&mut files, 1);
    let ga = Gateway::start(&t.ga, &ca);
    let gb = Gateway::start(&t.gb, &cb);
    // The plain flow works, the tunnelled one has no route yet.
    assert!(
        wait_until(10, || ping_ok(&t.h1, "-I 10.11.0.2 10.22.0.2")),
        "plain flow: {}",
        ga.log_text()
    );
    assert!(
        !ping_ok(&t.h1, "10.2.0.2"),
        "10.2 reachable before the tunnel"
    );
    // 20 pings a second across every change below.
    let drops0 = port_drops(&[&sa, &sb]);
    let plain = Background::ping(&t.h1, "-I 10.11.0.2 -i 0.05 -W 1 10.22.0.2");

    // gwA through the CLI with key files (recorded as paths)...
    let kab = files.secret("kab", format!("{KEY_AB}\n"));
    let kba = files.secret("kba", format!("{KEY_BA}\n"));
    let add_esp0_on_a = || {
        cli(
            &sa,
            &[
                "tunnel",
                "add",
                "esp0",
                "ipsec",
                "192.0.2.1",
                "192.0.2.2",
                "--traffic",
                "10.2.0.0/24",
                "--sa-out",
                &format!("{SPI_AB:#x}:aes128gcm16:{kab}"),
                "--sa-in",
                &format!("{SPI_BA:#x}:aes128gcm16:{kba}"),
            ],
        )
    };
    let out = add_esp0_on_a();
    assert!(out.contains("esp0"), "{out}");
    // ... gwB through the API with inline keys (never echoed).
    let body = format!(
        r#"{{"name":"esp0","kind":"ipsec","local":"192.0.2.2","remote":"192.0.2.1",
            "traffic":["10.1.0.0/24"],
            "sa":[{{"direction":"out","spi":{SPI_BA},"algorithm":"aes128gcm16","key":"{KEY_BA}"}},
                  {{"direction":"in","spi":"{SPI_AB:#x}","algorithm":"aes128gcm16","key":"{KEY_AB}"}}]}}"#
    );
    // A wrong key length first: 400 naming the SA's key, no echo.
    let short = body.replace(KEY_BA, "00112233");
    let (st, b) = api(&sb, "POST", "/tunnels", Some(&short));
    assert_eq!(st, 400, "{b}");
    assert!(
        b.contains("\"sa[0].key\"") && !b.contains("00112233"),
        "{b}"
    );
    let (st, b) = api(&sb, "POST", "/tunnels", Some(&body));
    assert_eq!(st, 201, "{b}");
    assert!(!b.contains(KEY_AB) && !b.contains(KEY_BA), "{b}");
    let (st, sas) = api(&sb, "GET", "/sas", None);
    assert_eq!(st, 200);
    assert!(
        sas.contains(&format!("{SPI_BA:#010x}")) && sas.contains(&format!("{SPI_AB:#010x}")),
        "{sas}"
    );
    // Duplicate name: 409.
    let (st, b) = api(&sb, "POST", "/tunnels", Some(&body));
    assert_eq!(st, 409, "{b}");

    // A route into the tunnel (besides its selector route) on gwA.
    cli(
        &sa,
        &["route", "add", "default", "10.2.0.0/25", "via", "esp0"],
    );

    // Each gateway's capture sees what it receives (its own sends bypass
    // the taps): gwB's shows A→B, gwA's B→A.
    let mut cap_a = Capture::start(&t.ga, "a-wan");
    let mut cap_b = Capture::start(&t.gb, "b-wan");
    assert!(
        wait_until(10, || ping_ok(&t.h1, "10.2.0.2")),
        "no ping through the live tunnel\n---- gwA ----\n{}\n---- gwB ----\n{}",
        ga.log_text(),
        gb.log_text()
    );
    tcp_transfer(&t.h1, &t.h2, "10.2.0.2", 1 << 20);
    for (cap, spi, n) in [(&mut cap_b, SPI_AB, 500), (&mut cap_a, SPI_BA, 10)] {
        let pcap = cap.stop().to_path_buf();
        let spis = tshark(&pcap, "esp", "-e esp.spi");
        let want = format!("{spi:#010x}");
        let hits = spis.iter().filter(|s| s.trim() == want).count();
        assert!(hits >= n, "{hits} ESP packets with SPI {want}: {spis:?}");
        // The tunnelled traffic never crossed in clear.
        let clear = tshark(&pcap, "ip.addr == 10.2.0.2 && !esp", "-e ip.src");
        assert!(clear.is_empty(), "cleartext on the underlay: {clear:?}");
    }

    // The running configurations: key file paths on gwA, no key anywhere.
    let conf_a = cli(&sa, &["show", "config"]);
    assert!(
        conf_a.contains(&kab) && conf_a.contains("[[tunnel.sa]]"),
        "{conf_a}"
    );
    let (_, conf_b) = api(&sb, "GET", "/config", None);
    assert!(conf_b.contains("name = \"esp0\""), "{conf_b}");
    for text in [&conf_a, &conf_b, &ga.log_text(), &gb.log_text()] {
        assert!(
            !text.contains(KEY_AB) && !text.contains(KEY_BA),
            "key leaked: {text}"
        );
    }

    // Deleting while routed: 409, and the tunnel keeps working.
    let (st, b) = api(&sa, "DELETE", "/tunnels/esp0", None);
    assert_eq!(st, 409, "{b}");
    assert!(ping_ok(&t.h1, "10.2.0.2"));
    cli(&sa, &["route", "del", "default", "10.2.0.0/25"]);
    // Still crossing on the selector route.
    assert!(ping_ok(&t.h1, "10.2.0.2"));
    let out = cli(&sa, &["tunnel", "del", "esp0"]);
    assert!(out.contains("deleted"), "{out}");
    let (st, _) = api(&sb, "DELETE", "/tunnels/esp0", None);
    assert_eq!(st, 204);
    // Gone: no SAs, no traffic.
    for s in [&sa, &sb] {
        let (_, sas) = api(s, "GET", "/sas", None);
        assert_eq!(sas.trim(), "[]", "{sas}");
    }
    assert!(!ping_ok(&t.h1, "10.2.0.2"), "10.2 still reachable");

    // The name and the SPIs can be used again.
    let out = add_esp0_on_a();
    assert!(out.contains("esp0"), "{out}");
    let (st, b) = api(&sb, "POST", "/tunnels", Some(&body));
    assert_eq!(st, 201, "{b}");
    assert!(
        wait_until(10, || ping_ok(&t.h1, "10.2.0.2")),
        "re-created tunnel carries nothing"
    );

    // The plain flow lost nothing through all of it.
    assert_plain_flow(plain, &[&sa, &sb], drops0);
}

#[test]
fn ike_tunnel_added_live_against_charon_and_deleted_with_ike_delete() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = topo();
    let mut files = TempFiles::default();
    // gwB is a kernel router in front of charon.
    charon::router(
        &t.gb,
        &t.h2,
        "ip addr add 10.22.0.1/24 dev b-lan && ip route add 10.11.0.0/24 via 192.0.2.1",
        &[],
    );
    let psk = "live-ike-psk-0123456789";
    let psk_file = files.secret("psk", format!("{psk}\n"));
    let ch = Charon::start(
        &t.gb,
        &CharonCfg {
            local: "192.0.2.2",
            remote: "192.0.2.1",
            local_id: "gw-b.example.net",
            remote_id: "192.0.2.1",
            local_ts: "10.2.0.0/24",
            remote_ts: "10.1.0.0/24",
            ike: "aes256-sha256-modp2048",
            esp: "aes128gcm16",
            psk,
            initiate: false,
        },
    );
    let (ca, sa) = gw_cfg(&mut files, 0);
    let ga = Gateway::start(&t.ga, &ca);
    let api_a = format!("unix:{sa}");
    assert!(
        wait_until(10, || ping_ok(&t.h1, "-I 10.11.0.2 10.22.0.2")),
        "plain flow: {}",
        ga.log_text()
    );
    let drops0 = port_drops(&[&sa]);
    let plain = Background::ping(&t.h1, "-I 10.11.0.2 -i 0.05 -W 1 10.22.0.2");

    // A wrong PSK path: 400 naming it, nothing registered.
    let bad = r#"{"name":"ike0","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.2",
                  "ike":{"psk_file":"/nonexistent/psk"}}"#;
    let (st, b) = api(&sa, "POST", "/tunnels", Some(bad));
    assert_eq!(st, 400, "{b}");
    assert!(b.contains("\"ike.psk_file\""), "{b}");

    let out = cli(
        &sa,
        &[
            "tunnel",
            "add",
            "ike0",
            "ipsec",
            "192.0.2.1",
            "192.0.2.2",
            "--traffic",
            "10.2.0.0/24",
            "--ike-psk-file",
            &psk_file,
            "--ike-remote-id",
            "gw-b.example.net",
            "--ike-proposal",
            "aes256-sha256-modp2048",
            "--esp-proposal",
            "aes128gcm16",
            "--local-traffic",
            "10.1.0.0/24",
        ],
    );
    assert!(out.contains("ike0"), "{out}");
    // Negotiates at once (initiator) and carries a ping.
    let st = wait_established(&api_a, &ga, 30);
    assert_eq!(st["tunnel"], "ike0");
    let sas = ch.wait_sas("INSTALLED", 20);
    assert!(sas.contains("ESTABLISHED"), "{sas}");
    let spi_in = st["child_sas"][0]["spi_in"].as_str().unwrap().to_owned();
    assert!(
        sas.contains(spi_in.trim_start_matches("0x")),
        "{sas}\n{st:#}"
    );
    assert!(
        wait_until(10, || ping_ok(&t.h1, "10.2.0.2")),
        "no ping through the IKE tunnel: {}",
        ga.log_text()
    );
    let conf = cli(&sa, &["show", "config"]);
    assert!(
        conf.contains("[tunnel.ike]") && conf.contains(&psk_file),
        "{conf}"
    );
    assert!(
        !conf.contains(psk) && !ga.log_text().contains(psk),
        "PSK leaked"
    );

    // Delete: IKE DELETE to charon, whose SAs go away without waiting for
    // a DPD; our SAs and the route go too.
    cli(&sa, &["tunnel", "del", "ike0"]);
    assert!(
        wait_until(10, || {
            let s = ch.swanctl(&["--list-sas"]);
            !s.contains("ESTABLISHED") && !s.contains("INSTALLED")
        }),
        "charon kept its SAs:\n{}\n---- charon log ----\n{}",
        ch.swanctl(&["--list-sas"]),
        ch.log()
    );
    assert!(
        ch.log().contains("received DELETE for IKE_SA") || ch.log().contains("deleting IKE_SA"),
        "charon was not told: {}",
        ch.log()
    );
    assert!(ga.log_contains("IKE: tunnel removed"), "{}", ga.log_text());
    let (_, sas) = api(&sa, "GET", "/sas", None);
    assert_eq!(sas.trim(), "[]", "{sas}");
    assert!(ike_state(&api_a).is_null(), "{}", ike_state(&api_a));
    assert!(!ping_ok(&t.h1, "10.2.0.2"), "10.2 still reachable");

    assert_plain_flow(plain, &[&sa], drops0);
}
