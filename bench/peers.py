"""Third-party peer topologies for vecgate's benchmark suite (issue 7 part 3).

Every class builds the two-gateway site-to-site topology

    h1 --veth-- gwA == underlay veth (192.0.2.1 <-> 192.0.2.2) == gwB --veth-- h2

with a different gateway implementation, and has the interface of bench.py's
`Router`: the constructor builds everything, `.h1`/`.h2` are `NS` objects,
`.dst` is h2's address, `.gateway_pids()` lists the processes whose CPU time
is the gateways' cost (both gateways; [] for kernel datapaths, whose cost is
path - direct), `.close()` removes namespaces, processes and files. A failure
in a constructor tears down what was built and raises RuntimeError with the
relevant logs.

Facts behind the setups are in /work/shared/notes/peers.md.
"""
import os
import shutil
import subprocess
import sys
import time

UNDERLAY_A = "192.0.2.1"
UNDERLAY_B = "192.0.2.2"


def _bench():
    """bench.py's module. When bench.py runs as a script it is `__main__`;
    importing it again as `bench` would make a second copy with its own
    namespace counter (and colliding namespace names), so prefer `__main__`.
    Looked up lazily so that bench.py may import this module at its top."""
    main = sys.modules.get("__main__")
    if main is not None and hasattr(main, "NS") and hasattr(main, "veth") \
            and os.path.basename(getattr(main, "__file__", "") or "") == "bench.py":
        return main
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench
    return bench


def NS(tag):
    return _bench().NS(tag)


def veth(a, aif, b, bif):
    return _bench().veth(a, aif, b, bif)


def sh(cmd, check=True):
    return _bench().sh(cmd, check)


def log(msg):
    return _bench().log(msg)


def out_dir():
    return _bench().OUT


def _tail(path, n=40):
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()
        return f"--- {path} (last {n} lines)\n" + "".join(lines[-n:])
    except OSError as e:
        return f"--- {path}: {e}\n"


def _wait(pred, timeout, what, logs=(), proc=None):
    """Poll `pred()` until true; RuntimeError with the logs' tails on timeout
    or when `proc` exits first."""
    deadline = time.time() + timeout
    while True:
        if pred():
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: process exited with {proc.returncode}\n"
                               + "".join(_tail(p) for p in logs))
        if time.time() > deadline:
            raise RuntimeError(f"{what}: timed out after {timeout} s\n" + "".join(_tail(p) for p in logs))
        time.sleep(0.1)


def gateways_cpu_seconds(topo):
    """Summed CPU seconds (user + system, all threads) of `topo.gateway_pids()`."""
    b = _bench()
    return sum(b.proc_cpu_seconds(p) for p in topo.gateway_pids())


class _SiteToSite:
    """Namespaces and veths common to every peer: h1, gwA, gwB, h2.
    Interfaces: h1 `eth0` <-> gwA `a-h1`; gwA `a-u` <-> gwB `b-u` (underlay);
    gwB `b-h2` <-> h2 `eth0`."""

    label = "?"

    def __init__(self):
        self.procs = []
        self.nss = []
        self.dir = None
        self.failed = False
        try:
            self.h1, self.gwa, self.gwb, self.h2 = NS("h1"), NS("ga"), NS("gb"), NS("h2")
            self.nss = [self.h1, self.gwa, self.gwb, self.h2]
            self.dir = os.path.join(out_dir(), f"peer-{self.gwa.name}")
            shutil.rmtree(self.dir, ignore_errors=True)
            os.makedirs(self.dir)
            veth(self.h1, "eth0", self.gwa, "a-h1")
            veth(self.gwa, "a-u", self.gwb, "b-u")
            veth(self.gwb, "b-h2", self.h2, "eth0")
            rps = _bench().site_rps_mask()
            if rps:
                self.gwb.sh(f"echo {rps} > /sys/class/net/b-u/queues/rx-0/rps_cpus")
            self.build()
            self.warm_up()
            if self.encap_filter:
                self.verify_underlay()
        except BaseException:
            self.failed = True
            self.close()
            raise

    def build(self):
        raise NotImplementedError

    def routed_hosts(self, mtu=None):
        """Hosts in two subnets (10.1.0.0/24, 10.2.0.0/24), gateways .1."""
        for ns in (self.h1, self.h2):
            if mtu:
                ns.sh(f"ip link set eth0 mtu {mtu}")
        self.h1.sh("ip addr add 10.1.0.2/24 dev eth0; ip route add default via 10.1.0.1")
        self.h2.sh("ip addr add 10.2.0.2/24 dev eth0; ip route add default via 10.2.0.1")
        self.gwa.sh("ip addr add 10.1.0.1/24 dev a-h1; sysctl -qw net.ipv4.ip_forward=1")
        self.gwb.sh("ip addr add 10.2.0.1/24 dev b-h2; sysctl -qw net.ipv4.ip_forward=1")
        self.dst = "10.2.0.2"

    def warm_up(self):
        """A few pings: neighbours (and OVS's flow tables) are learnt on the
        first packets, which may be lost."""
        r = subprocess.run(["ip", "netns", "exec", self.h1.name, "ping", "-c", "1", "-W", "5", self.dst],
                           capture_output=True, text=True)
        if r.returncode != 0:
            r = subprocess.run(["ip", "netns", "exec", self.h1.name, "ping", "-c", "5", "-i", "0.3", "-W", "2",
                                self.dst], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{self.label}: h1 cannot ping {self.dst}:\n{r.stdout}{r.stderr}\n"
                               + self.diagnostics())

    # tcpdump filter matching the tunnel's packets on the underlay; None for
    # a topology without a tunnel.
    encap_filter = None

    def verify_underlay(self):
        """Capture gwB's underlay while h1 pings h2: the echo requests and
        replies must cross as tunnel packets (`encap_filter`) and no bare
        ICMP may cross. Fails loudly otherwise: a benchmark of a tunnel that
        is bypassed would measure something else."""
        pcap = os.path.join(self.dir, "underlay.pcap")
        cap = self.gwb.popen(["tcpdump", "-i", "b-u", "-n", "-U", "--immediate-mode", "-w", pcap],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _wait(lambda: os.path.exists(pcap) and os.path.getsize(pcap) > 0, 10, "tcpdump on the underlay",
                  proc=cap)
            time.sleep(0.3)
            r = subprocess.run(["ip", "netns", "exec", self.h1.name, "ping", "-c", "5", "-i", "0.2", "-W", "2",
                                "-s", "200", self.dst], capture_output=True, text=True)
            time.sleep(0.3)
        finally:
            cap.terminate()
            try:
                cap.wait(5)
            except subprocess.TimeoutExpired:
                cap.kill()
                cap.wait()

        def count(flt):
            return len(sh(f"tcpdump -r {pcap} -n \"{flt}\" 2>/dev/null", check=False).splitlines())

        tunnelled, bare = count(self.encap_filter), count("icmp")
        if r.returncode != 0 or bare or tunnelled < 5:
            raise RuntimeError(f"{self.label}: h1 -> h2 does not cross the underlay as `{self.encap_filter}` "
                               f"(ping rc {r.returncode}, {tunnelled} tunnel packets, {bare} bare ICMP):\n"
                               + sh(f"tcpdump -r {pcap} -n 2>/dev/null | tail -30", check=False)
                               + "\n" + self.diagnostics())

    def diagnostics(self):
        return ""

    def gateway_pids(self):
        return [p.pid for p in self.procs if getattr(p, "is_gateway", False) and p.poll() is None]

    def gateway_pid(self):
        """bench.py's `perf_run` accounts one process; a two-gateway peer
        has two, so this returns None: use `gateway_pids()` and sum them."""
        return None

    def spawn(self, ns, args, logname, env=None, gateway=False):
        """Start `args` in `ns` (the Popen pid is the program's: `ip netns
        exec` and `sh -c 'exec …'` both exec)."""
        logf = open(os.path.join(self.dir, logname), "w")
        e = dict(os.environ)
        e.update(env or {})
        if gateway:
            # Every contender's gateways on the same CPUs (bench.PINS and
            # bench.PLACEMENT).
            args = _bench().site_pinned("b" if ns is self.gwb else "a", args)
        p = ns.popen(args, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=e)
        logf.close()
        p.is_gateway = gateway
        self.procs.append(p)
        return p

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.procs = []
        for ns in self.nss:
            ns.close()
        self.nss = []
        if self.dir and not self.failed:
            shutil.rmtree(self.dir, ignore_errors=True)


class KernelPlain(_SiteToSite):
    """Kernel forwarding in both gateways, plain routes, no tunnel: the
    ceiling every tunnel is compared with. Offloads stay on."""

    label = "kernel forwarding (no tunnel)"

    def __init__(self, underlay_mtu=1500):
        """`underlay_mtu`: the ceiling of tunnels over a jumbo underlay
        (the hosts stay at 1500 with TSO, as in the tunnels' rows)."""
        self.underlay_mtu = underlay_mtu
        if underlay_mtu != 1500:
            self.label = f"kernel forwarding (no tunnel), {underlay_mtu}-byte underlay"
        super().__init__()

    def build(self):
        self.routed_hosts()
        self.gwa.sh(f"ip addr add {UNDERLAY_A}/24 dev a-u; ip route add 10.2.0.0/24 via {UNDERLAY_B}")
        self.gwb.sh(f"ip addr add {UNDERLAY_B}/24 dev b-u; ip route add 10.1.0.0/24 via {UNDERLAY_A}")
        if self.underlay_mtu != 1500:
            self.gwa.sh(f"ip link set a-u mtu {self.underlay_mtu}")
            self.gwb.sh(f"ip link set b-u mtu {self.underlay_mtu}")


class KernelVxlan(_SiteToSite):
    """Linux kernel VXLAN (RFC 7348) between the gateways, overlay routed:
    the gateways route the other site's subnet into vx0 (10.9.0.1/24 <->
    10.9.0.2/24). Offloads default (on): GSO super-packets cross the tunnel
    whole. No process: the cost is path - direct. Hosts get MTU 1450 (vx0's
    own MTU, 1500 - 50 bytes of VXLAN/UDP/IP/Ethernet) so no packet waits
    for path MTU discovery."""

    label = "Linux kernel VXLAN"
    encap_filter = "udp port 4789"

    def __init__(self, host_mtu=1450):
        self.host_mtu = host_mtu
        super().__init__()

    def build(self):
        self.routed_hosts(mtu=self.host_mtu)
        for ns, local, remote, ul, ov, other in ((self.gwa, UNDERLAY_A, UNDERLAY_B, "a-u", "10.9.0.1", "10.2.0.0/24"),
                                                 (self.gwb, UNDERLAY_B, UNDERLAY_A, "b-u", "10.9.0.2", "10.1.0.0/24")):
            peer_ov = "10.9.0.2" if ov == "10.9.0.1" else "10.9.0.1"
            ns.sh(f"ip addr add {local}/24 dev {ul}; "
                  f"ip link add vx0 type vxlan id 100 local {local} remote {remote} dstport 4789 dev {ul}; "
                  f"ip addr add {ov}/24 dev vx0; ip link set vx0 up; "
                  f"ip route add {other} via {peer_ov} dev vx0")


class _Ovs(_SiteToSite):
    """Open vSwitch userspace datapath (`datapath_type=netdev`) in gwA and
    gwB, one private ovsdb-server + ovs-vswitchd per gateway namespace.
    `br-phy` holds the underlay veth and carries the underlay IP on its
    internal port (OVS's native tunnelling routes and ARPs through it);
    `br-int` holds the host-facing veth and the tunnel port. It is an L2
    tunnel: h1 10.3.0.1/24 and h2 10.3.0.2/24 share a subnet, with MTU 1450
    (an L2 tunnel with host MTU 1500 over a 1500 underlay black-holes TCP).
    Checksum offload and TSO are off on every veth whose packets reach
    vswitchd: OVS 3.1 drops tunnelled packets with offload flags, and TCP
    then moves nothing though ping works."""

    tunnel_type = None

    def __init__(self, host_mtu=1450):
        self.host_mtu = host_mtu
        self.ovs = {}
        super().__init__()

    def build(self):
        for ns in (self.h1, self.h2):
            ns.sh(f"ip link set eth0 mtu {self.host_mtu}")
        self.h1.sh("ip addr add 10.3.0.1/24 dev eth0")
        self.h2.sh("ip addr add 10.3.0.2/24 dev eth0")
        self.dst = "10.3.0.2"
        for ns, ifs in ((self.h1, ["eth0"]), (self.gwa, ["a-h1", "a-u"]),
                        (self.gwb, ["b-u", "b-h2"]), (self.h2, ["eth0"])):
            for i in ifs:
                ns.sh(f"ethtool -K {i} tx off tso off >/dev/null")
        self._gateway(self.gwa, "a", UNDERLAY_A, UNDERLAY_B, "a-u", "a-h1")
        self._gateway(self.gwb, "b", UNDERLAY_B, UNDERLAY_A, "b-u", "b-h2")

    def _gateway(self, ns, tag, local, remote, underlay_if, host_if):
        d = os.path.join(self.dir, f"ovs-{tag}")
        os.makedirs(d)
        env = {"OVS_RUNDIR": d, "OVS_DBDIR": d, "OVS_LOGDIR": d, "OVS_PKGDATADIR": "/usr/share/openvswitch"}
        db = os.path.join(d, "conf.db")
        sock = os.path.join(d, "db.sock")
        sh(f"ovsdb-tool create {db} /usr/share/openvswitch/vswitch.ovsschema")
        dbp = self.spawn(ns, ["ovsdb-server", db, f"--remote=punix:{sock}",
                              f"--pidfile={d}/ovsdb-server.pid", f"--unixctl={d}/ovsdb-server.ctl",
                              f"--log-file={d}/ovsdb-server.log"], f"ovsdb-server-{tag}.out", env)
        _wait(lambda: os.path.exists(sock), 15, f"ovsdb-server in {ns.name}",
              [os.path.join(self.dir, f"ovsdb-server-{tag}.out"), f"{d}/ovsdb-server.log"], dbp)
        vsctl = f"OVS_RUNDIR={d} ovs-vsctl --db=unix:{sock} --timeout=20"
        self.ovs[tag] = (d, vsctl)
        ns.sh(f"{vsctl} --no-wait init")
        vsw = self.spawn(ns, ["ovs-vswitchd", f"unix:{sock}", f"--pidfile={d}/ovs-vswitchd.pid",
                              f"--log-file={d}/ovs-vswitchd.log"], f"ovs-vswitchd-{tag}.out", env, gateway=True)
        logs = [os.path.join(self.dir, f"ovs-vswitchd-{tag}.out"), f"{d}/ovs-vswitchd.log"]
        _wait(lambda: os.path.exists(f"{d}/ovs-vswitchd.pid"), 15, f"ovs-vswitchd in {ns.name}", logs, vsw)
        tun = f"{self.tunnel_type}0"
        try:
            ns.sh(f"{vsctl} add-br br-phy -- set bridge br-phy datapath_type=netdev "
                  f"-- add-port br-phy {underlay_if} "
                  f"-- add-br br-int -- set bridge br-int datapath_type=netdev "
                  f"-- add-port br-int {host_if} "
                  f"-- add-port br-int {tun} -- set interface {tun} type={self.tunnel_type} "
                  f"options:remote_ip={remote} options:key=100")
            ns.sh(f"ip addr add {local}/24 dev br-phy; ip link set br-phy up; ip link set br-int up")
        except RuntimeError as e:
            raise RuntimeError(f"{e}\n" + "".join(_tail(p) for p in logs))
        for port in (underlay_if, host_if, tun):
            # ofport -1 means the port failed to attach.
            out = ns.sh(f"{vsctl} get interface {port} ofport").strip()
            if out in ("", "-1", "[]"):
                raise RuntimeError(f"OVS in {ns.name}: port {port} not attached (ofport {out})\n"
                                   + ns.sh(f"{vsctl} show", check=False) + "".join(_tail(p) for p in logs))

    def diagnostics(self):
        s = ""
        for tag, (d, vsctl) in self.ovs.items():
            s += _tail(f"{d}/ovs-vswitchd.log", 30)
        return s


class OvsGre(_Ovs):
    """OVS userspace L2 GRE (RFC 2890 key 100, Transparent Ethernet Bridging
    0x6558)."""

    tunnel_type = "gre"
    label = "Open vSwitch userspace GRE"
    encap_filter = "ip proto 47"


class OvsVxlan(_Ovs):
    """OVS userspace VXLAN (RFC 7348, VNI 100, UDP 4789)."""

    tunnel_type = "vxlan"
    label = "Open vSwitch userspace VXLAN"
    encap_filter = "udp port 4789"


class StrongswanEsp(_SiteToSite):
    """strongSwan charon with kernel-libipsec in both gateways: IKEv2 (RFC
    7296) with a PSK, one ESP tunnel-mode child SA (RFC 4303) between
    10.1.0.0/24 and 10.2.0.0/24, gwA initiating. ESP runs inside charon;
    cleartext enters it through the `ipsec0` TUN device, to which charon
    routes the remote subnet in routing table 220 (with a `lookup 220` rule).
    Debian 12's 5.9.8 libipsec always UDP-encapsulates (RFC 3948, port
    4500); setup checks on the underlay that h1 -> h2 traffic is ESP-in-UDP
    and never cleartext. Hosts get MTU 1400, ipsec0's MTU."""

    PSK = "vecgate-bench-psk-0123456789"
    # ESP in UDP (RFC 3948 section 2.2): a non-zero SPI where IKE has its
    # zero non-ESP marker.
    encap_filter = "udp port 4500 and udp[8:4] != 0"

    def __init__(self, proposal="aes128gcm16", ike="aes128gcm16-prfsha256-x25519", host_mtu=1400):
        self.proposal = proposal
        self.ike = ike
        self.host_mtu = host_mtu
        self.label = f"strongSwan kernel-libipsec ESP ({proposal})"
        self.charon = {}
        self.negotiated = None
        super().__init__()

    def build(self):
        if not os.path.exists("/usr/lib/ipsec/charon"):
            raise RuntimeError("strongSwan charon is not installed (scripts/install-deps.sh)")
        self.routed_hosts(mtu=self.host_mtu)
        self.gwa.sh(f"ip addr add {UNDERLAY_A}/24 dev a-u")
        self.gwb.sh(f"ip addr add {UNDERLAY_B}/24 dev b-u")
        self._charon(self.gwa, "a", UNDERLAY_A, UNDERLAY_B, "10.1.0.0/24", "10.2.0.0/24")
        self._charon(self.gwb, "b", UNDERLAY_B, UNDERLAY_A, "10.2.0.0/24", "10.1.0.0/24")
        out = self.swanctl("a", "--initiate --child net --timeout 20", check=False)
        if "successfully" not in out:
            raise RuntimeError(f"{self.label}: IKE/child SA not established:\n{out}\n" + self.diagnostics())
        sas = self.swanctl("a", "--list-sas", check=False)
        if "INSTALLED, TUNNEL" not in sas:
            raise RuntimeError(f"{self.label}: no installed tunnel-mode child SA:\n{sas}\n" + self.diagnostics())
        # What was negotiated, e.g. "AES_GCM_16-128" or
        # "AES_CBC-128/HMAC_SHA1_96", for the benchmark's row label.
        self.negotiated = next((l.split("ESP:", 1)[1].strip() for l in sas.splitlines() if "ESP:" in l), None)
        for tag in ("a", "b"):
            ns = self.gwa if tag == "a" else self.gwb
            _wait(lambda: "ipsec0" in ns.sh("ip route show table 220", check=False), 10,
                  f"charon route into ipsec0 (table 220) in {ns.name}", [self._log(tag)])

    def _log(self, tag):
        return os.path.join(self.dir, f"charon-{tag}", "charon.log")

    def _charon(self, ns, tag, local, remote, local_ts, remote_ts):
        d = os.path.join(self.dir, f"charon-{tag}")
        os.makedirs(os.path.join(d, "run"))
        conf = os.path.join(d, "strongswan.conf")
        with open(conf, "w") as f:
            f.write(f"""charon {{
  load = random nonce openssl kdf pem pkcs1 x509 kernel-libipsec kernel-netlink socket-default vici updown
  install_routes = yes
  retransmit_tries = 3
  plugins {{
    vici {{ socket = unix://{d}/charon.vici }}
  }}
  filelog {{
    log {{
      path = {d}/charon.log
      default = 1
      ike = 1
      chd = 1
      cfg = 1
      knl = 2
      esp = 1
      net = 1
      flush_line = yes
    }}
  }}
}}
""")
        with open(os.path.join(d, "swanctl.conf"), "w") as f:
            f.write(f"""connections {{
  bench {{
    version = 2
    local_addrs = {local}
    remote_addrs = {remote}
    proposals = {self.ike}
    rekey_time = 0
    local {{
      auth = psk
      id = {local}
    }}
    remote {{
      auth = psk
      id = {remote}
    }}
    children {{
      net {{
        local_ts = {local_ts}
        remote_ts = {remote_ts}
        esp_proposals = {self.proposal}
        mode = tunnel
        rekey_time = 0
      }}
    }}
  }}
}}
secrets {{
  ike-1 {{
    id-1 = {local}
    id-2 = {remote}
    secret = "{self.PSK}"
  }}
}}
""")
        # The pid file path (/var/run/charon.pid) is compiled in: give this
        # charon its own /run (`ip netns exec` runs in a private mount ns).
        p = self.spawn(ns, ["sh", "-c", f"mount --bind {d}/run /run && exec /usr/lib/ipsec/charon"],
                       f"charon-{tag}.out", {"STRONGSWAN_CONF": conf}, gateway=True)
        self.charon[tag] = (d, conf, p)
        _wait(lambda: os.path.exists(f"{d}/charon.vici"), 15, f"charon in {ns.name}",
              [os.path.join(self.dir, f"charon-{tag}.out"), f"{d}/charon.log"], p)
        out = self.swanctl(tag, f"--load-all --file {d}/swanctl.conf", check=False)
        if "successfully loaded 1 connections" not in out:
            raise RuntimeError(f"swanctl --load-all in {ns.name}:\n{out}\n" + _tail(f"{d}/charon.log"))

    def swanctl(self, tag, args, check=True):
        d, conf, _ = self.charon[tag]
        ns = self.gwa if tag == "a" else self.gwb
        return ns.sh(f"STRONGSWAN_CONF={conf} swanctl {args} --uri unix://{d}/charon.vici 2>&1", check)

    def diagnostics(self):
        s = ""
        for tag, ns in (("a", self.gwa), ("b", self.gwb)):
            if tag in self.charon:
                s += f"--- {ns.name}: ip rule; table 220\n" + ns.sh("ip rule; ip route show table 220", check=False)
                s += self.swanctl(tag, "--list-sas", check=False)
                s += _tail(self._log(tag), 30)
        return s


# Every peer topology with its constructor arguments, for bench.py and the
# self-test: (key, class, kwargs).
PEERS = [
    ("kernel-plain", KernelPlain, {}),
    ("kernel-vxlan", KernelVxlan, {}),
    ("ovs-gre", OvsGre, {}),
    ("ovs-vxlan", OvsVxlan, {}),
    ("strongswan-aes128gcm16", StrongswanEsp, {"proposal": "aes128gcm16"}),
    ("strongswan-aes256gcm16", StrongswanEsp, {"proposal": "aes256gcm16"}),
    ("strongswan-aes128-sha1", StrongswanEsp, {"proposal": "aes128-sha1"}),
]
