//! An active/standby pair of vecgates sharing VRRP virtual addresses
//! in front of a single gateway across an underlay:
//!
//! ```text
//!            LAN 10.1.0.0/24, fd01::/64          underlay 192.0.2.0/24
//!  h1 .2 ── [br0 in sw] ── lan0 [a1 .11] wan0 ── [br1 in sw] ── wan0 [gb .2] lan0 ── h2
//!                     └─── lan0 [a2 .12] wan0 ───┘                       10.2.0.1   10.2.0.2
//!        VIP 10.1.0.1 (fd01::1)            VIP 192.0.2.1
//! ```
//!
//! Both members of the pair hold the same configuration but their priority:
//! one VRRP group on the LAN (h1's default routes lead to its virtual
//! addresses) and one on the underlay, whose virtual address is the local
//! end of the pair's tunnel and the remote end of gb's. What the tunnel is
//! (GRE, static ESP, ...) is the caller's: [`HaPair::start`] takes, per
//! member, the `[[tunnel]]`/`[[route]]` text ([`gre`] is the GRE one).
//! The bridges live in a namespace of their own (`sw`), so a capture on
//! `br0`/`br1` sees every member's frames.

use super::{sh, unique, vecgate_bin, veth, wait_until, Gateway, Netns, TempFiles, TCP_RX};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command};

/// LAN virtual addresses (h1's default routes).
pub const LAN_VIP: &str = "10.1.0.1";
pub const LAN_VIP6: &str = "fd01::1";
/// Underlay virtual address: the pair's tunnel end.
pub const WAN_VIP: &str = "192.0.2.1";
/// gb's underlay address.
pub const GB_WAN: &str = "192.0.2.2";
pub const H1: &str = "10.1.0.2";
pub const H1_6: &str = "fd01::2";
pub const H2: &str = "10.2.0.2";
pub const H2_6: &str = "fd02::2";
/// VRIDs of the LAN groups (one per family) and of the underlay group.
pub const LAN_VRID: u8 = 10;
pub const WAN_VRID: u8 = 20;

/// A gateway of the topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member {
    /// The pair's first member (the higher priority by default).
    A1,
    A2,
    /// The single gateway on the far side.
    B,
}

impl Member {
    /// The last octet of the member's own addresses (LAN and underlay).
    pub fn octet(self) -> u8 {
        match self {
            Member::A1 => 11,
            Member::A2 => 12,
            Member::B => 2,
        }
    }
}

/// What the pair's `[ha]` says.
#[derive(Clone, Debug)]
pub struct HaOpts {
    pub priority_a1: u8,
    pub priority_a2: u8,
    pub preempt: bool,
    pub interval_cs: u16,
    /// An IPv6 group on the LAN too (fd01::1; h1's IPv6 default route).
    pub ipv6: bool,
}

impl Default for HaOpts {
    /// a1 (150) over a2 (100), preemption on, adverts every 500 ms: a
    /// backup declares the master dead after 3 × 500 ms + skew (§6.1),
    /// long enough that a loaded machine's scheduler rarely starves the
    /// master's adverts that long (at 100 and 200 ms it did: a backup
    /// took over for a moment; tests treat such a blip as legitimate, see
    /// ha_failover's `silent_as_backup`). The gap is the benchmark's.
    fn default() -> Self {
        HaOpts {
            priority_a1: 150,
            priority_a2: 100,
            preempt: true,
            interval_cs: 50,
            ipv6: false,
        }
    }
}

/// The GRE tunnel text for `m`: the pair's local end is the underlay
/// virtual address, gb's remote end too.
pub fn gre(m: Member) -> String {
    let (local, remote, far4, far6) = match m {
        Member::B => (GB_WAN, WAN_VIP, "10.1.0.0/24", "fd01::/64"),
        _ => (WAN_VIP, GB_WAN, "10.2.0.0/24", "fd02::/64"),
    };
    format!(
        r#"
[[tunnel]]
name = "t0"
kind = "gre"
local = "{local}"
remote = "{remote}"

[[route]]
prefix = "{far4}"
via = "t0"

[[route]]
prefix = "{far6}"
via = "t0"
"#
    )
}

pub struct HaPair {
    pub h1: Netns,
    pub h2: Netns,
    pub a1: Netns,
    pub a2: Netns,
    pub gb: Netns,
    /// The bridges: `br0` (LAN: h1, a1, a2) and `br1` (underlay: a1, a2, gb).
    pub sw: Netns,
    pub opts: HaOpts,
    /// Where the API sockets are (removed on drop).
    pub dir: PathBuf,
    tunnel: Box<dyn Fn(Member) -> String>,
    /// More `[ha]` keys per member of the pair (the state sync's).
    ha_keys: Box<dyn Fn(Member) -> String>,
    gws: [Option<Gateway>; 3],
    /// Killed members: their logs are printed if the test fails.
    dead: Vec<Gateway>,
}

fn idx(m: Member) -> usize {
    match m {
        Member::A1 => 0,
        Member::A2 => 1,
        Member::B => 2,
    }
}

impl HaPair {
    /// Builds the namespaces, links and hosts; no gateway runs yet.
    /// `tunnel` gives each member's `[[tunnel]]` and `[[route]]` text
    /// (e.g. [`gre`]).
    pub fn new(opts: HaOpts, tunnel: impl Fn(Member) -> String + 'static) -> HaPair {
        sweep_orphans();
        let sw = Netns::new("hp-sw");
        let h1 = Netns::new("hp-h1");
        let h2 = Netns::new("hp-h2");
        let a1 = Netns::new("hp-a1");
        let a2 = Netns::new("hp-a2");
        let gb = Netns::new("hp-gb");
        // No snooping: VRRP's groups (224.0.0.18, ff02::12) and the NAs are
        // flooded to every port whoever joined what.
        for br in ["br0", "br1"] {
            sw.sh(&format!(
                "ip link add {br} type bridge mcast_snooping 0 && ip link set {br} up"
            ));
        }
        for (ns, port, local, br) in [
            (&h1, "ph1", "eth0", "br0"),
            (&a1, "pa1l", "lan0", "br0"),
            (&a2, "pa2l", "lan0", "br0"),
            (&a1, "pa1w", "wan0", "br1"),
            (&a2, "pa2w", "wan0", "br1"),
            (&gb, "pgbw", "wan0", "br1"),
        ] {
            veth(&sw, port, ns, local);
            sw.sh(&format!("ip link set {port} master {br}"));
        }
        veth(&h2, "eth0", &gb, "lan0");
        h1.sh(&format!(
            "ip addr add {H1}/24 dev eth0 && ip route add default via {LAN_VIP}"
        ));
        h2.sh(&format!(
            "ip addr add {H2}/24 dev eth0 && ip route add default via 10.2.0.1"
        ));
        // nodad: the addresses are usable at once.
        h1.sh(&format!(
            "ip -6 addr add {H1_6}/64 dev eth0 nodad && ip -6 route add default via {LAN_VIP6}"
        ));
        h2.sh(&format!(
            "ip -6 addr add {H2_6}/64 dev eth0 nodad && ip -6 route add default via fd02::1"
        ));
        let dir = std::env::temp_dir().join(unique("hp"));
        std::fs::create_dir_all(&dir).expect("create the pair's directory");
        HaPair {
            h1,
            h2,
            a1,
            a2,
            gb,
            sw,
            opts,
            dir,
            tunnel: Box::new(tunnel),
            ha_keys: Box::new(|_| String::new()),
            gws: [None, None, None],
            dead: Vec::new(),
        }
    }

    /// Adds `keys(member)` to each pair member's `[ha]` table (e.g. the
    /// state sync's `sync_*` keys), for gateways started from now on.
    pub fn set_ha_keys(&mut self, keys: impl Fn(Member) -> String + 'static) {
        self.ha_keys = Box::new(keys);
    }

    pub fn ns(&self, m: Member) -> &Netns {
        match m {
            Member::A1 => &self.a1,
            Member::A2 => &self.a2,
            Member::B => &self.gb,
        }
    }

    /// The member's API (`unix:PATH`), for `vecgate … --api`.
    pub fn api(&self, m: Member) -> String {
        format!("unix:{}", self.sock(m))
    }

    /// The member's API socket path (for curl --unix-socket).
    pub fn sock(&self, m: Member) -> String {
        self.dir
            .join(format!("{m:?}.sock").to_lowercase())
            .display()
            .to_string()
    }

    /// The MAC of the member's `ifname` (`lan0` or `wan0`).
    pub fn mac(&self, m: Member, ifname: &str) -> String {
        self.ns(m)
            .sh(&format!("cat /sys/class/net/{ifname}/address"))
            .trim()
            .to_owned()
    }

    /// The member's whole configuration.
    pub fn config(&self, m: Member) -> String {
        let o = m.octet();
        let name = unique(&format!("{m:?}").to_lowercase());
        let sock = self.sock(m);
        let mut c = match m {
            Member::B => format!(
                r#"[gateway]
name = "{name}"
api = "unix:{sock}"

[[interface]]
name = "lan0"
host = "lan0"
driver = "af_packet"
addresses = ["10.2.0.1/24", "fd02::1/64"]

[[interface]]
name = "wan0"
host = "wan0"
driver = "af_packet"
addresses = ["{GB_WAN}/24"]
"#
            ),
            _ => {
                let h = &self.opts;
                let priority = if m == Member::A1 {
                    h.priority_a1
                } else {
                    h.priority_a2
                };
                let mut c = format!(
                    r#"[gateway]
name = "{name}"
api = "unix:{sock}"

[[interface]]
name = "lan0"
host = "lan0"
driver = "af_packet"
addresses = ["10.1.0.{o}/24", "fd01::{o}/64"]

[[interface]]
name = "wan0"
host = "wan0"
driver = "af_packet"
addresses = ["192.0.2.{o}/24"]

[ha]
priority = {priority}
interval_cs = {}
preempt = {}
{}
[[ha.group]]
vrid = {LAN_VRID}
interface = "lan0"
addresses = ["{LAN_VIP}"]

[[ha.group]]
vrid = {WAN_VRID}
interface = "wan0"
addresses = ["{WAN_VIP}"]
"#,
                    h.interval_cs,
                    h.preempt,
                    (self.ha_keys)(m)
                );
                if h.ipv6 {
                    c += &format!(
                        "\n[[ha.group]]\nvrid = {LAN_VRID}\ninterface = \"lan0\"\naddresses = [\"{LAN_VIP6}\"]\n"
                    );
                }
                c
            }
        };
        c += &(self.tunnel)(m);
        c
    }

    /// Starts (or restarts) the member's vecgate, waiting for "ready".
    pub fn start(&mut self, m: Member) {
        let cfg = self.config(m);
        let gw = Gateway::start(self.ns(m), &cfg);
        self.gws[idx(m)] = Some(gw);
    }

    /// Starts gb, a1 and a2 in that order.
    pub fn start_all(&mut self) {
        for m in [Member::B, Member::A1, Member::A2] {
            self.start(m);
        }
    }

    pub fn gw(&self, m: Member) -> &Gateway {
        self.gws[idx(m)].as_ref().expect("member not running")
    }

    pub fn gw_mut(&mut self, m: Member) -> &mut Gateway {
        self.gws[idx(m)].as_mut().expect("member not running")
    }

    /// `kill -9` of the member; returns once the process is reaped.
    pub fn kill9(&mut self, m: Member) {
        let mut gw = self.gws[idx(m)].take().expect("member not running");
        gw.kill9();
        self.dead.push(gw);
    }

    /// The member's VRRP groups as `vecgate show ha --json` prints them
    /// (Null if the CLI fails, e.g. while the member starts).
    pub fn show_ha(&self, m: Member) -> Value {
        let out = Command::new(vecgate_bin())
            .args(["show", "ha", "--json", "--api", &self.api(m)])
            .output()
            .expect("vecgate show ha");
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// How often the member's groups became master, summed (its own
    /// counters: `became_master` per group).
    pub fn became_master(&self, m: Member) -> u64 {
        self.show_ha(m).as_array().map_or(0, |v| {
            v.iter().filter_map(|g| g["became_master"].as_u64()).sum()
        })
    }

    /// A planned switchover from `from` to `to` loses at most one
    /// ping. Judged only when the members' own counters show the
    /// switchover was the window's only transition (`to` became master
    /// once per group since `to_before`, `from` never since `from_before`):
    /// a starved pair's flap from late adverts is a VRRP timer event, not
    /// the switchover, and is reported instead.
    pub fn assert_switchover_loss(
        &self,
        (from, from_before): (Member, u64),
        (to, to_before): (Member, u64),
        lost: u64,
        pings: &str,
    ) {
        let groups = self.show_ha(to).as_array().map_or(0, |v| v.len()) as u64;
        let (to_took, from_took) = (
            self.became_master(to).saturating_sub(to_before),
            self.became_master(from).saturating_sub(from_before),
        );
        if to_took == groups && from_took == 0 {
            assert!(
                lost <= 1,
                "the switchover lost {lost} pings (at most 1 at 100 pps):\n{pings}"
            );
        } else {
            eprintln!(
                "switchover loss not judged: {to:?} became master {to_took}x for {groups} groups, {from:?} {from_took}x (a flap in the window)"
            );
        }
    }

    /// The states of the member's groups, in configuration order.
    pub fn states(&self, m: Member) -> Vec<String> {
        match self.show_ha(m) {
            Value::Array(v) => v
                .iter()
                .map(|g| g["state"].as_str().unwrap_or("?").to_owned())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether every group of the member is in `state` ("master", "backup").
    pub fn all_in(&self, m: Member, state: &str) -> bool {
        let s = self.states(m);
        !s.is_empty() && s.iter().all(|x| x == state)
    }

    /// Waits (up to `secs`) until every group of `master` is master and
    /// every group of `backup` (if running) backup; panics with both
    /// members' `show ha` otherwise.
    pub fn wait_roles(&self, master: Member, backup: Option<Member>, secs: u64) {
        let ok = wait_until(secs, || {
            self.all_in(master, "master") && backup.is_none_or(|b| self.all_in(b, "backup"))
        });
        assert!(
            ok,
            "{master:?} not master (or {backup:?} not backup) within {secs} s:\n{master:?}: {}\n{backup:?}: {}",
            self.show_ha(master),
            backup.map_or(Value::Null, |b| self.show_ha(b))
        );
    }

    /// The member's `/metrics`.
    pub fn metrics(&self, m: Member) -> String {
        sh(&format!(
            "curl -s --unix-socket {} http://vecgate/metrics",
            self.sock(m)
        ))
    }
}

/// Removes the pair namespaces (and what runs in them) of test processes
/// that died without their guards running (killed by a timeout or a
/// signal: no `Drop` runs then). A name is `vg<pid % 100000>hp-…`
/// ([`unique`]); it is an orphan only if no live process has that pid
/// remainder, so a running test's namespaces are never touched.
fn sweep_orphans() {
    let live: std::collections::HashSet<u32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .map(|pid| pid % 100_000)
                .collect()
        })
        .unwrap_or_default();
    if live.is_empty() {
        return;
    }
    let list = Command::new("ip").args(["netns", "list"]).output();
    let Ok(list) = list else { return };
    for l in String::from_utf8_lossy(&list.stdout).lines() {
        let Some(name) = l.split_whitespace().next() else {
            continue;
        };
        let Some(rest) = name.strip_prefix("vg") else {
            continue;
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let orphan = rest[digits.len()..].starts_with("hp-")
            && digits.parse::<u32>().is_ok_and(|p| !live.contains(&p));
        if orphan {
            let _ = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "ip netns pids {name} 2>/dev/null | xargs -r kill -9; ip netns del {name}"
                ))
                .status();
        }
    }
}

impl Drop for HaPair {
    fn drop(&mut self) {
        // The daemons first (SIGTERM, then their logs if the test failed),
        // then the namespaces (fields, dropped after this).
        for g in &mut self.gws {
            drop(g.take());
        }
        self.dead.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sends `n` random bytes over one TCP connection, paced to take `secs`
/// seconds, then prints "sha256 bytes".
pub const PACED_TX: &str = r#"
import socket, hashlib, os, sys, time
addr, port, n, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
d = os.urandom(n)
for i in range(300):
    try:
        s = socket.create_connection((addr, port), timeout=30)
        break
    except (ConnectionRefusedError, OSError):
        time.sleep(0.1)
# A stalled connection fails within 60 s; a slow one goes on.
s.settimeout(60)
t0 = time.monotonic()
step = 1 << 16
for off in range(0, n, step):
    due = t0 + secs * off / n
    now = time.monotonic()
    if due > now:
        time.sleep(due - now)
    s.sendall(d[off:off + step])
s.close()
print(hashlib.sha256(d).hexdigest(), n)
"#;

/// A paced transfer h1 → h2 running in the background.
pub struct Transfer {
    rx: Child,
    tx: Child,
    files: TempFiles,
}

impl Transfer {
    /// `bytes` over `secs` seconds from h1 to `to_addr` (h2) port `port`.
    pub fn start(p: &HaPair, to_addr: &str, port: u16, bytes: usize, secs: u64) -> Transfer {
        let mut files = TempFiles::default();
        let rxs = files.write("rx.py", TCP_RX);
        let txs = files.write("tx.py", PACED_TX);
        let rx = p.h2.spawn(&format!("python3 {rxs} {to_addr} {port}"));
        let tx =
            p.h1.spawn(&format!("python3 {txs} {to_addr} {port} {bytes} {secs}"));
        Transfer { rx, tx, files }
    }

    /// Waits for both ends; asserts the receiver got exactly what was sent
    /// on its one connection.
    pub fn check(self) {
        let sent = self.tx.wait_with_output().expect("sender");
        let got = self.rx.wait_with_output().expect("receiver");
        let (s, g) = (
            String::from_utf8_lossy(&sent.stdout),
            String::from_utf8_lossy(&got.stdout),
        );
        assert!(
            sent.status.success() && !s.trim().is_empty(),
            "the sender failed (connection lost?): {}",
            String::from_utf8_lossy(&sent.stderr)
        );
        assert_eq!(
            g.trim(),
            s.trim(),
            "the receiver saw other bytes: {}",
            String::from_utf8_lossy(&got.stderr)
        );
        drop(self.files);
    }
}
