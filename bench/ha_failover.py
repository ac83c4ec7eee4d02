#!/usr/bin/python3
"""HA failover benchmark (issue 16): the gap h1's pings to h2 see when the
active gateway of a pair dies (`kill -9`) and when it hands over on purpose
(planned switchover), for

- vecgate (GRE): two vecgates sharing VRRP virtual addresses on the LAN
  and the underlay, a GRE tunnel from the underlay address to a third
  vecgate;
- vecgate (static ESP): the same with a static-key ESP tunnel
  (aes128gcm16) and the state sync on a veth between a1 and a2 (the new
  active jumps past the old one's sequence numbers, so the far end's
  replay window drops nothing);
- vecgate (IKE ESP, charon peer): the pair's tunnel is IKEv2-keyed
  (PSK, aes256gcm16-prfsha256-x25519 / aes128gcm16) towards strongSwan
  charon with kernel-libipsec (ESP in UDP 4500) in gb, a1 initiating and
  the state sync carrying the IKE SA and the child's sequence ceilings to
  a2. The row's point: whether the far end renegotiated. charon's IKE and
  child SA SPIs (`swanctl --list-sas`) are compared before and after the
  event and its log's new IKE_SA_INIT requests counted; "renegotiated: no"
  only when the SPIs are the same and no IKE_SA_INIT came;
- kernel: two Linux routers (kernel forwarding) with keepalived 2.2.7
  VRRPv3 on the same addresses, routing (no tunnel, no state to carry) to
  a third Linux router;

in one run, the same topology and DEFAULT timers: vecgate's `[ha]` sets no
`interval_cs` (its default, 20 cs) nor `sync_interval_ms`; keepalived gets
the same advertisement interval (`advert_int 0.2`; its own default is 1 s),
so Master_Down_Interval = 600 ms + Skew_Time (RFC 5798 §6.1) on both:

    h1 ── br0 ── {a1 (150), a2 (100)} ── br1 ── gb ── h2

- kill: vecgate gets `kill -9` (its dataplane dies with it). keepalived's
  SIGKILL leaves the address on the dead router's interface, where the
  kernel goes on answering for it, so the kernel router's death is its two
  bridge ports set down, then all its keepalived processes SIGKILLed.
- switchover: `vecgate ha switchover` (priority 0, RFC 5798 §6.4.3) on one
  side, SIGTERM to the master's keepalived (it sends priority 0) on the
  other.

The gap: ping -D -i 0.01 from h1; the time between the replies either
side of the longest run of lost sequence numbers (0 if none was lost), and
the number lost. A TCP connection from h1 to h2 echoes 64 bytes every
20 ms across the event: it "survived" when every byte came back on the
same connection. Medians of ROUNDS rounds, contenders interleaved per
round. Prints a markdown table. The kernel has no xfrm here, so there is
no kernel IPsec counterpart of the ESP rows: the keepalived row routes.

    python3 bench/ha_failover.py [--rounds 5] [--only LABEL-PART]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

LAN_VIP, WAN_VIP, GB_WAN, H2 = "10.1.0.1", "192.0.2.1", "192.0.2.2", "10.2.0.2"
# vecgate's default (`[ha] interval_cs` unset); keepalived is given the same.
INTERVAL_CS = 20
PINGS = 500  # 5 s at 10 ms


def wait(pred, secs, what):
    deadline = time.time() + secs
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out: {what}")


class Pair:
    """The namespaces and links; gateways are started per round."""

    def __init__(self):
        self.sw, self.h1, self.h2 = bench.NS("sw"), bench.NS("h1"), bench.NS("h2")
        self.a = {"a1": bench.NS("a1"), "a2": bench.NS("a2")}
        self.gb = bench.NS("gb")
        self.nss = [self.sw, self.h1, self.h2, self.a["a1"], self.a["a2"], self.gb]
        self.dir = tempfile.mkdtemp(prefix="vghab")
        for br in ("br0", "br1"):
            self.sw.sh(f"ip link add {br} type bridge mcast_snooping 0 && ip link set {br} up")
        for ns, port, local, br in [
            (self.h1, "ph1", "eth0", "br0"),
            (self.a["a1"], "pa1l", "lan0", "br0"),
            (self.a["a2"], "pa2l", "lan0", "br0"),
            (self.a["a1"], "pa1w", "wan0", "br1"),
            (self.a["a2"], "pa2w", "wan0", "br1"),
            (self.gb, "pgbw", "wan0", "br1"),
        ]:
            bench.veth(self.sw, port, ns, local)
            self.sw.sh(f"ip link set {port} master {br}")
        # The state sync's link (static ESP): a veth between a1 and a2.
        bench.veth(self.a["a1"], "sync0", self.a["a2"], "sync0")
        self.a["a1"].sh("ip addr add 10.250.0.1/30 dev sync0")
        self.a["a2"].sh("ip addr add 10.250.0.2/30 dev sync0")
        bench.veth(self.h2, "eth0", self.gb, "lan0")
        self.h1.sh(f"ip addr add 10.1.0.2/24 dev eth0 && ip route add default via {LAN_VIP}")
        self.h2.sh(f"ip addr add {H2}/24 dev eth0 && ip route add default via 10.2.0.1")
        self.procs = {}

    def close(self):
        self.stop_all()
        for ns in self.nss:
            ns.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        self.procs = {}

    def ports(self, who, state):
        """Set the bridge ports of a1/a2 up or down (the kernel router's
        death and return)."""
        n = who[1]
        for port in (f"pa{n}l", f"pa{n}w"):
            self.sw.sh(f"ip link set {port} {state}")

    def ping(self):
        return self.h1.popen(["ping", "-D", "-n", "-i", "0.01", "-c", str(PINGS), "-w", "60", H2],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def warm(self):
        # Every round starts from empty neighbour tables on the hosts and
        # the far router (the previous round's master may still be there).
        for ns in (self.h1, self.h2, self.gb):
            ns.sh("ip neigh flush all", check=False)
        wait(lambda: subprocess.run(["ip", "netns", "exec", self.h1.name, "ping", "-c", "1", "-W", "1", H2],
                                    capture_output=True).returncode == 0, 30, "h1 reaches h2")


# A TCP echo across the event (h2 serves, h1 sends 64 bytes every 20 ms
# for TCP_SECS and waits for each echo; 30 s socket timeouts, so a failover
# gap TCP retransmits through counts as survived).
TCP_PORT, TCP_SECS = 7400, 6
TCP_SERVER = f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{H2}", {TCP_PORT})); s.listen(1); s.settimeout(60)
c, _ = s.accept(); c.settimeout(60); n = 0
while True:
    b = c.recv(4096)
    if not b:
        break
    c.sendall(b); n += len(b)
print("echoed", n)
"""
TCP_CLIENT = f"""
import socket, time
t = time.time()
while True:
    try:
        c = socket.create_connection(("{H2}", {TCP_PORT}), timeout=2); break
    except OSError:
        if time.time() - t > 20: raise
        time.sleep(0.1)
c.settimeout(30); n = 0; end = time.time() + {TCP_SECS}
while time.time() < end:
    m = bytes([n % 251]) * 64
    c.sendall(m); got = b""
    while len(got) < 64:
        b = c.recv(64 - len(got))
        if not b:
            raise SystemExit("closed")
        got += b
    if got != m:
        raise SystemExit("corrupt")
    n += 64
    time.sleep(0.02)
c.shutdown(socket.SHUT_WR); c.recv(1)
print("ok", n)
"""


def gap(out):
    """(lost, gap ms) of ping -D output."""
    at = {}
    for line in out.splitlines():
        if " bytes from " not in line:
            continue
        try:
            ts = float(line[1:line.index("]")])
            seq = int(line.split("icmp_seq=")[1].split()[0])
        except (ValueError, IndexError):
            continue
        if 1 <= seq <= PINGS:
            at[seq] = ts
    seqs = sorted(at)
    if not seqs or seqs[-1] < PINGS:
        # No recovery before the pings ended: an unbounded gap.
        return PINGS - len(at), float("inf")
    best = (0, 0.0)
    for a, b in zip(seqs, seqs[1:]):
        if b - a - 1 > best[0]:
            best = (b - a - 1, (at[b] - at[a]) * 1000)
    return PINGS - len(at), best[1]


class Vecgate:
    label = "vecgate (GRE)"

    def __init__(self, pair):
        self.p = pair

    def tunnel(self, who):
        """The [[tunnel]] t0 of `who` (gb or a pair member)."""
        local, remote = (GB_WAN, WAN_VIP) if who == "gb" else (WAN_VIP, GB_WAN)
        return f"""
[[tunnel]]
name = "t0"
kind = "gre"
local = "{local}"
remote = "{remote}"
"""

    def ha_extra(self, who):
        """More `[ha]` keys of a pair member (the state sync)."""
        return ""

    def sock(self, who):
        return os.path.join(self.p.dir, f"{who}.sock")

    def config(self, who):
        sock = self.sock(who)
        state = os.path.join(self.p.dir, f"{who}.state")
        head = f'[gateway]\nname = "hab{who}"\napi = "unix:{sock}"\nstate_dir = "{state}"\n'
        if who == "gb":
            return head + f"""
[[interface]]
name = "lan0"
host = "lan0"
driver = "af_packet"
addresses = ["10.2.0.1/24"]

[[interface]]
name = "wan0"
host = "wan0"
driver = "af_packet"
addresses = ["{GB_WAN}/24"]

{self.tunnel("gb")}
[[route]]
prefix = "10.1.0.0/24"
via = "t0"
"""
        o = 11 if who == "a1" else 12
        prio = 150 if who == "a1" else 100
        return head + f"""
[[interface]]
name = "lan0"
host = "lan0"
driver = "af_packet"
addresses = ["10.1.0.{o}/24"]

[[interface]]
name = "wan0"
host = "wan0"
driver = "af_packet"
addresses = ["192.0.2.{o}/24"]

[ha]
priority = {prio}
preempt = false
{self.ha_extra(who)}
[[ha.group]]
vrid = 10
interface = "lan0"
addresses = ["{LAN_VIP}"]

[[ha.group]]
vrid = 20
interface = "wan0"
addresses = ["{WAN_VIP}"]

{self.tunnel(who)}
[[route]]
prefix = "10.2.0.0/24"
via = "t0"
"""

    def start(self, who):
        ns = self.p.gb if who == "gb" else self.p.a[who]
        path = os.path.join(self.p.dir, f"{who}.toml")
        with open(path, "w") as f:
            f.write(self.config(who))
        log = open(os.path.join(self.p.dir, f"{who}.log"), "w")
        self.p.procs[who] = ns.popen([bench.GATEWAY, "run", "--config", path],
                                     stdout=log, stderr=subprocess.STDOUT)
        wait(lambda: os.path.exists(self.sock(who)), 30, f"{who} API")

    def states(self, who):
        r = subprocess.run([bench.VECGATE, "show", "ha", "--json", "--api", f"unix:{self.sock(who)}"],
                           capture_output=True, text=True)
        try:
            return [g["state"] for g in json.loads(r.stdout)]
        except (ValueError, KeyError, TypeError):
            return []

    def master(self, who):
        s = self.states(who)
        return bool(s) and all(x == "master" for x in s)

    def setup(self):
        # A fresh state directory and no stale socket per start.
        for f in os.listdir(self.p.dir):
            path = os.path.join(self.p.dir, f)
            if f.endswith(".state"):
                shutil.rmtree(path, ignore_errors=True)
            elif f.endswith(".sock"):
                os.unlink(path)
        self.start("gb")
        self.start("a1")
        wait(lambda: self.master("a1"), 30, "a1 master")
        self.start("a2")
        wait(lambda: self.states("a2") and all(x == "backup" for x in self.states("a2")), 30, "a2 backup")
        self.p.warm()

    def roles_ok(self):
        b = self.states("a2")
        return self.master("a1") and bool(b) and all(x == "backup" for x in b)

    def kill(self):
        self.p.procs["a1"].send_signal(signal.SIGKILL)
        self.p.procs["a1"].wait()

    def switchover(self):
        subprocess.run([bench.VECGATE, "ha", "switchover", "--api", f"unix:{self.sock('a1')}"],
                       check=True, capture_output=True)

    def teardown(self):
        self.p.stop_all()

    def far_sas(self):
        """The far end's view of the keys before the event (IKE rows)."""
        return None

    def renegotiated(self, before):
        """None: no IKE, nothing to renegotiate."""
        return None


class VecgateEsp(Vecgate):
    """Static-key ESP through the pair, with the state sync (default
    `sync_interval_ms` and `max_sa_pps`)."""

    label = "vecgate (static ESP)"
    SPI_AB, SPI_BA = 0x1001, 0x2001

    def __init__(self, pair):
        super().__init__(pair)
        for spi in (self.SPI_AB, self.SPI_BA):
            self.secret(f"{spi:x}.hex", os.urandom(20).hex())
        self.secret("sync.key", os.urandom(32).hex())

    def secret(self, name, text):
        path = os.path.join(self.p.dir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)

    def tunnel(self, who):
        if who == "gb":
            local, remote, far, out, inn = GB_WAN, WAN_VIP, "10.1.0.0/24", self.SPI_BA, self.SPI_AB
        else:
            local, remote, far, out, inn = WAN_VIP, GB_WAN, "10.2.0.0/24", self.SPI_AB, self.SPI_BA
        d = self.p.dir
        return f"""
[[tunnel]]
name = "t0"
kind = "ipsec"
local = "{local}"
remote = "{remote}"
traffic = ["{far}"]

[[tunnel.sa]]
direction = "out"
spi = {out:#x}
algorithm = "aes128gcm16"
key_file = "{d}/{out:x}.hex"

[[tunnel.sa]]
direction = "in"
spi = {inn:#x}
algorithm = "aes128gcm16"
key_file = "{d}/{inn:x}.hex"
"""

    def ha_extra(self, who):
        me, peer = ("10.250.0.1", "10.250.0.2") if who == "a1" else ("10.250.0.2", "10.250.0.1")
        return (f'sync_local = "{me}:4790"\nsync_peer = "{peer}:4790"\n'
                f'sync_key_file = "{self.p.dir}/sync.key"\n')

    def setup(self):
        super().setup()
        # a2 holds a1's SA state before the event (the sync is up).
        def synced():
            r = subprocess.run([bench.VECGATE, "show", "ha", "--json", "--api", f"unix:{self.sock('a2')}"],
                               capture_output=True, text=True)
            try:
                y = json.loads(r.stdout)[0]["sync"]
                return y["state"] == "up" and y["synced_outbound_sas"] == 1
            except (ValueError, KeyError, TypeError, IndexError):
                return False
        wait(synced, 30, "a2 synced")


class VecgateIke(VecgateEsp):
    """The pair's tunnel keyed by IKEv2 towards strongSwan charon (kernel-
    libipsec, ESP in UDP 4500) in gb, a kernel router there; a1 initiates,
    the state sync carries the IKE SA and the child's ceilings to a2 (the
    recipe of crates/vecgate/tests/ha_ike_sync.rs)."""

    label = "vecgate (IKE ESP, charon peer)"
    PSK = "ha-bench-ike-psk-0123456789"
    IKE, ESP = "aes256gcm16-prfsha256-x25519", "aes128gcm16"

    def __init__(self, pair):
        super().__init__(pair)
        self.secret("ike.psk", self.PSK + "\n")
        self.cdir = os.path.join(self.p.dir, "charon")
        self.charon = None

    def tunnel(self, who):
        return f"""
[[tunnel]]
name = "t0"
kind = "ipsec"
local = "{WAN_VIP}"
remote = "{GB_WAN}"
traffic = ["10.2.0.0/24"]

[tunnel.ike]
psk_file = "{self.p.dir}/ike.psk"
remote_id = "gw-b.example.net"
ike_proposals = ["{self.IKE}"]
esp_proposals = ["{self.ESP}"]
initiate = true
"""

    def swanctl(self, args):
        d = self.cdir
        return self.p.gb.sh(f"STRONGSWAN_CONF={d}/strongswan.conf swanctl {args} --uri unix://{d}/charon.vici 2>&1",
                            check=False)

    def start_charon(self):
        d = self.cdir
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(os.path.join(d, "run"))
        with open(os.path.join(d, "strongswan.conf"), "w") as f:
            f.write(f"""charon {{
  load = random nonce openssl kdf pem pkcs1 x509 kernel-libipsec kernel-netlink socket-default vici updown
  install_routes = yes
  retransmit_timeout = 1.0
  retransmit_tries = 4
  plugins {{
    vici {{ socket = unix://{d}/charon.vici }}
  }}
  filelog {{
    log {{
      path = {d}/charon.log
      default = 1
      ike = 2
      chd = 2
      cfg = 1
      esp = 1
      net = 1
      flush_line = yes
    }}
  }}
}}
""")
        # charon's liveness checks every 2 s cross the event.
        fd = os.open(os.path.join(d, "swanctl.conf"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"""connections {{
  vg {{
    version = 2
    local_addrs = {GB_WAN}
    remote_addrs = {WAN_VIP}
    proposals = {self.IKE}
    rekey_time = 0
    dpd_delay = 2s
    local {{
      auth = psk
      id = gw-b.example.net
    }}
    remote {{
      auth = psk
      id = {WAN_VIP}
    }}
    children {{
      net {{
        local_ts = 10.2.0.0/24
        remote_ts = 10.1.0.0/24
        esp_proposals = {self.ESP}
        rekey_time = 0
        start_action = none
      }}
    }}
  }}
}}
secrets {{
  ike-1 {{
    id-1 = gw-b.example.net
    id-2 = {WAN_VIP}
    secret = "{self.PSK}"
  }}
}}
""")
        env = dict(os.environ, STRONGSWAN_CONF=os.path.join(d, "strongswan.conf"))
        self.charon = self.p.gb.popen(["sh", "-c", f"mount --bind {d}/run /run && exec /usr/lib/ipsec/charon"],
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait(lambda: os.path.exists(f"{d}/charon.vici"), 15, "charon's vici socket")
        out = self.swanctl(f"--load-all --file {d}/swanctl.conf")
        if "successfully loaded 1 connections" not in out:
            raise RuntimeError(f"swanctl --load-all: {out}")

    def charon_log(self):
        try:
            with open(os.path.join(self.cdir, "charon.log")) as f:
                return f.read()
        except OSError:
            return ""

    def setup(self):
        if not os.path.exists("/usr/lib/ipsec/charon"):
            raise RuntimeError("strongSwan charon is not installed (scripts/install-deps.sh)")
        p = self.p
        for f in os.listdir(p.dir):
            path = os.path.join(p.dir, f)
            if f.endswith(".state"):
                shutil.rmtree(path, ignore_errors=True)
            elif f.endswith(".sock"):
                os.unlink(path)
        # gb: a kernel router in front of charon (libipsec wants MTU-sized
        # segments: no offloads on its path).
        p.gb.sh(f"ip addr flush dev lan0; ip addr flush dev wan0; ip addr add {GB_WAN}/24 dev wan0; "
                "ip addr add 10.2.0.1/24 dev lan0; sysctl -qw net.ipv4.ip_forward=1")
        for ns, dev in ((p.gb, "lan0"), (p.gb, "wan0"), (p.h2, "eth0")):
            ns.sh(f"ethtool -K {dev} tso off gso off gro off", check=False)
        self.start_charon()
        self.start("a1")
        wait(lambda: self.master("a1"), 30, "a1 master")

        def established():
            r = subprocess.run([bench.VECGATE, "show", "ike", "--json", "--api", f"unix:{self.sock('a1')}"],
                               capture_output=True, text=True)
            try:
                st = json.loads(r.stdout)[0]
                return st["state"] == "established" and bool(st["child_sas"])
            except (ValueError, KeyError, TypeError, IndexError):
                return False
        wait(established, 60, "a1 established with charon")
        self.start("a2")
        wait(lambda: self.states("a2") and all(x == "backup" for x in self.states("a2")), 30, "a2 backup")

        def synced():
            r = subprocess.run([bench.VECGATE, "show", "ha", "--json", "--api", f"unix:{self.sock('a2')}"],
                               capture_output=True, text=True)
            try:
                y = json.loads(r.stdout)[0]["sync"]
                return (y["state"] == "up" and y["synced_ike_sas"] == 1
                        and y["synced_outbound_sas"] >= 1)
            except (ValueError, KeyError, TypeError, IndexError):
                return False
        wait(synced, 30, "a2 synced the IKE SA")
        wait(lambda: "INSTALLED" in self.swanctl("--list-sas"), 20, "charon's child SA installed")
        p.warm()

    def far_sas(self):
        """charon's (IKE SPI pairs, child SPI pairs) and IKE_SA_INITs so far."""
        return (charon_sas(self.swanctl("--list-sas")), self.charon_log().count("parsed IKE_SA_INIT request"))

    def renegotiated(self, before):
        # The far end's liveness checks (every 2 s) run into the new
        # active: give them time to fail and charon time to start over.
        time.sleep(3)
        sas, inits = before
        now, inits_now = self.far_sas()
        new_inits = inits_now - inits
        same = now == sas and len(sas[0]) == 1 and len(sas[1]) == 1
        if not same or new_inits:
            bench.log(f"{self.label}: charon's SAs before {sas}, after {now}; {new_inits} new IKE_SA_INIT")
        return (not same) or new_inits > 0

    def teardown(self):
        super().teardown()
        if self.charon is not None and self.charon.poll() is None:
            self.charon.terminate()
            try:
                self.charon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.charon.kill()
                self.charon.wait()
        self.charon = None
        for ns, dev in ((self.p.gb, "lan0"), (self.p.gb, "wan0"), (self.p.h2, "eth0")):
            ns.sh(f"ethtool -K {dev} tso on gso on gro on", check=False)
        self.p.gb.sh("ip addr flush dev lan0; ip addr flush dev wan0; ip rule del table 220", check=False)


def charon_sas(text):
    """charon's SAs as `swanctl --list-sas` prints them: the IKE SAs'
    (SPIi, SPIr) and the child SAs' (in, out) SPIs."""
    ike, children, spi_in = [], [], None
    for line in text.splitlines():
        w = line.split()
        # "vg: #1, ESTABLISHED, IKEv2, 1a2b3c4d5e6f7a8b_i* 0102030405060708_r"
        if "IKEv2," in w:
            i = next((t.rstrip("*")[:-2] for t in w if t.rstrip("*").endswith("_i")), None)
            r = next((t.rstrip("*")[:-2] for t in w if t.rstrip("*").endswith("_r")), None)
            if i and r:
                ike.append((i, r))
        # "    in  c1234567,  1234 bytes, ..." / "    out c7654321, ..."
        if len(w) >= 2 and w[0] == "in":
            spi_in = w[1].rstrip(",")
        elif len(w) >= 2 and w[0] == "out" and spi_in is not None:
            children.append((spi_in, w[1].rstrip(",")))
            spi_in = None
    return (ike, children)


class Kernel:
    label = "Linux routers + keepalived"

    def __init__(self, pair):
        self.p = pair

    def far_sas(self):
        return None

    def renegotiated(self, before):
        return None

    def setup(self):
        p = self.p
        p.gb.sh("ip addr flush dev lan0; ip addr flush dev wan0; "
                f"ip addr add 10.2.0.1/24 dev lan0; ip addr add {GB_WAN}/24 dev wan0; "
                f"sysctl -qw net.ipv4.ip_forward=1; ip route replace 10.1.0.0/24 via {WAN_VIP}")
        for who, o, prio in (("a1", 11, 150), ("a2", 12, 100)):
            ns = p.a[who]
            ns.sh(f"ip addr flush dev lan0; ip addr flush dev wan0; "
                  f"ip addr add 10.1.0.{o}/24 dev lan0; ip addr add 192.0.2.{o}/24 dev wan0; "
                  f"sysctl -qw net.ipv4.ip_forward=1; ip route replace 10.2.0.0/24 via {GB_WAN}")
            conf = os.path.join(p.dir, f"k{who}.conf")
            inst = ""
            for name, ifn, vrid, vip in (("L", "lan0", 10, LAN_VIP), ("W", "wan0", 20, WAN_VIP)):
                inst += (f"vrrp_instance {name} {{\n state BACKUP\n interface {ifn}\n virtual_router_id {vrid}\n"
                         f" priority {prio}\n advert_int {INTERVAL_CS / 100}\n nopreempt\n"
                         f" virtual_ipaddress {{ {vip}/24 }}\n}}\n")
            with open(conf, "w") as f:
                f.write("global_defs { vrrp_version 3\n vrrp_garp_master_delay 0 }\n"
                        "vrrp_sync_group G { group { L W } }\n" + inst)
            d = p.dir
            p.procs[who] = ns.popen(["keepalived", "-n", "-l", "-D", "-P", "-f", conf,
                                     "-p", f"{d}/k{who}.pid", "-r", f"{d}/k{who}v.pid"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if who == "a1":
                wait(lambda: self.holds("a1"), 30, "a1 keepalived master")
        time.sleep(1)
        p.warm()

    def roles_ok(self):
        return self.holds("a1") and not self.holds_any("a2")

    def holds_any(self, who):
        out = self.p.a[who].sh("ip -4 addr show", check=False)
        return f"inet {LAN_VIP}/" in out or f"inet {WAN_VIP}/" in out

    def holds(self, who):
        out = self.p.a[who].sh("ip -4 addr show", check=False)
        return f"inet {LAN_VIP}/" in out and f"inet {WAN_VIP}/" in out

    def kill(self):
        # Off the wire first, then every keepalived process SIGKILLed: the
        # VRRP child gets SIGTERM when its parent dies (PR_SET_PDEATHSIG)
        # and would send priority 0, a clean stop, not a crash.
        self.p.ports("a1", "down")
        bench.sh(f"ip netns pids {self.p.a['a1'].name} | xargs -r kill -9", check=False)
        self.p.procs["a1"].wait()

    def switchover(self):
        self.p.procs["a1"].send_signal(signal.SIGTERM)

    def teardown(self):
        # Every keepalived process (parent and VRRP child), so the next
        # round's does not find a live pid file and exit.
        for who in ("a1", "a2"):
            bench.sh(f"ip netns pids {self.p.a[who].name} | xargs -r kill -9", check=False)
        self.p.stop_all()
        for f in os.listdir(self.p.dir):
            if f.endswith(".pid"):
                os.unlink(os.path.join(self.p.dir, f))
        self.p.ports("a1", "up")
        for who in ("a1", "a2"):
            self.p.a[who].sh("ip addr flush dev lan0; ip addr flush dev wan0", check=False)
        self.p.gb.sh("ip addr flush dev lan0; ip addr flush dev wan0", check=False)


# Rows, in order.
CONTENDERS = [Vecgate, VecgateEsp, VecgateIke, Kernel]


def round_(contender, event):
    """(lost, gap ms, TCP survived, renegotiated or None) of one event."""
    p = contender.p
    contender.setup()
    srv = cli = None
    try:
        srv = p.h2.popen(["/usr/bin/python3", "-c", TCP_SERVER], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        cli = p.h1.popen(["/usr/bin/python3", "-c", TCP_CLIENT], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        ping = p.ping()
        time.sleep(1.5)
        if not contender.roles_ok():
            # a1 must be the one master when the event hits it.
            ping.kill()
            ping.communicate()
            return None
        before = contender.far_sas()
        getattr(contender, event)()
        out, _ = ping.communicate(timeout=120)
        try:
            cout, cerr = cli.communicate(timeout=90)
            sout, _ = srv.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            cout, cerr, sout = "", "timed out", ""
        sent = cout.split()[1] if cout.startswith("ok ") else None
        survived = cli.returncode == 0 and sent is not None and f"echoed {sent}" in sout
        if not survived:
            bench.log(f"{contender.label} {event}: TCP: client {cout.strip()!r} {cerr.strip()[-200:]!r},"
                      f" server {sout.strip()!r}")
        reneg = contender.renegotiated(before)
        return gap(out) + (survived, reneg)
    finally:
        for x in (cli, srv):
            if x is not None and x.poll() is None:
                x.kill()
                x.communicate()
        contender.teardown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", help="only the rows whose label contains this (e.g. IKE); the report is left alone")
    ap.add_argument("--doc", default=os.path.join(bench.ROOT, "docs", "benchmarks.md"),
                    help="the report whose HA table is refreshed in place ('' for none)")
    args = ap.parse_args()
    pair = Pair()
    rows = {}
    try:
        # A contender class has setup/roles_ok/kill/switchover/teardown,
        # far_sas/renegotiated and a label.
        contenders = [c(pair) for c in CONTENDERS if not args.only or args.only in c.label]
        for r in range(args.rounds):
            for c in contenders:
                for event in ("kill", "switchover"):
                    got = round_(c, event)
                    if got is None:
                        bench.log(f"round {r + 1}: {c.label} {event}: a1 not the one master, round skipped")
                        continue
                    lost, ms, tcp, reneg = got
                    bench.log(f"round {r + 1}: {c.label} {event}: {lost} lost, gap {ms:.0f} ms, TCP survived"
                              f" {tcp}, renegotiated {reneg}")
                    rows.setdefault((c.label, event), []).append(got)
    finally:
        pair.close()
    load = os.getloadavg()
    bench.log(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs")
    lines = [f"Default timers: advertisement interval {INTERVAL_CS * 10} ms (vecgate's default; keepalived"
             f" advert_int {INTERVAL_CS / 100}), state sync every 100 ms (default), pings every 10 ms,"
             f" medians of {args.rounds}. The kernel has no xfrm here: the keepalived pair routes, there is no"
             " kernel IPsec row.", "",
             "| pair | event | gap (ms) | pings lost | per round (ms) | TCP survived | IKE renegotiated |",
             "|---|---|---:|---:|---|---|---|"]
    for (label, event), v in rows.items():
        ms = statistics.median(x[1] for x in v)  # inf: no recovery
        lost = statistics.median(x[0] for x in v)
        each = ", ".join(f"{x[1]:.0f}" for x in v)
        tcp = sum(1 for x in v if x[2])
        tcp = "yes" if tcp == len(v) else "no" if tcp == 0 else f"{tcp}/{len(v)} rounds"
        ren = [x[3] for x in v]
        if any(x is None for x in ren):
            ren = "n/a"
        else:
            n = sum(1 for x in ren if x)
            ren = "no (same SPIs, no IKE_SA_INIT)" if n == 0 else f"yes, {n}/{len(v)} rounds"
        lines.append(f"| {label} | {'kill -9' if event == 'kill' else 'planned switchover'} | {ms:.0f} | {lost:g} |"
                     f" {each} | {tcp} | {ren} |")
    print("\n".join(lines))
    if args.doc and not args.only:
        import report
        report.update(args.doc, {"ha": "\n".join(lines)})
        bench.log(f"ha_failover: refreshed the HA table of {args.doc}")

if __name__ == "__main__":
    main()
