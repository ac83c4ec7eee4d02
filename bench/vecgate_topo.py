"""vecgate's own site-to-site topologies for the benchmark suite: the same
h1 ── gwA ══ underlay ══ gwB ── h2 layout as the peers in peers.py, with a
vecgate in each gateway namespace."""

import os
import time

import peers
from peers import UNDERLAY_A, UNDERLAY_B, _SiteToSite, _wait


def _bench():
    return peers._bench()


ENCAP_FILTER = {
    "esp": "ip proto 50",
    "gre": "ip proto 47",
    "gre-eth": "ip proto 47",
    "nvgre": "ip proto 47",
    "vxlan": "udp port 4789",
}

LABELS = {
    "gre": "vecgate GRE",
    "gre-eth": "vecgate GRE (Ethernet inner)",
    "nvgre": "vecgate NVGRE",
    "vxlan": "vecgate VXLAN",
    "plain": "vecgate, no tunnel",
    "esp": "vecgate ESP",
}


class VecgateTunnel(_SiteToSite):
    """vecgate in both gateways. `kind`: plain (routing only), gre, gre-eth,
    nvgre, vxlan. `tunnels`: how many parallel tunnels (each its own tenant
    VRF, key and host pair is not needed: one host pair, the tunnels carry
    different /32 routes... kept at 1 unless asked)."""

    def __init__(self, kind, workers=1, rsc=True, offloads=True, underlay_mtu=1500, algorithm=None, tunnels=1,
                 underlay_driver="af_packet", nat_t=False, busy_poll=False):
        self.kind = kind
        self.busy_poll = busy_poll
        self.nat_t = nat_t
        self.underlay_driver = underlay_driver
        self.tunnels = tunnels
        self.algorithm = algorithm
        self.underlay_mtu = underlay_mtu
        self.workers = workers
        self.rsc = rsc
        self.offloads = offloads
        self.label = LABELS[kind] + (f" {algorithm}" if algorithm else "") + ("" if rsc else ", RSC off") + (
            f", {round(underlay_mtu / 1024)}K-MTU underlay" if underlay_mtu > 9000 else
            f", {underlay_mtu}-byte underlay" if underlay_mtu != 1500 else "") + (
            ", AF_XDP underlay" if underlay_driver == "af_xdp" else "") + (
            ", NAT-T (ESP in UDP 4500)" if nat_t else "") + (", busy_poll" if busy_poll else "")
        self.encap_filter = "udp port 4500" if nat_t else ENCAP_FILTER.get(kind)
        super().__init__()

    def verify_underlay(self):
        """An AF_XDP underlay redirects frames before any tap sees them, so
        tcpdump cannot judge it: there the ping must cross and gwB's tunnel
        counters (or, for ESP, its decrypted-packet counter) must count it."""
        if self.underlay_driver != "af_xdp":
            return super().verify_underlay()
        import json
        import subprocess
        sock = os.path.join(_bench().OUT, f"{self.gwa.name}-b.sock")

        def crossed():
            if self.kind == "esp":
                out = subprocess.run([_bench().VECGATE, "show", "errors", "--api", sock, "--json"],
                                     capture_output=True, text=True).stdout
                return sum(e.get("count", 0) for e in json.loads(out or "[]")
                           if e.get("node") == "esp-decrypt" and e.get("reason") == "decrypted")
            out = subprocess.run([_bench().VECGATE, "show", "tunnels", "--api", sock, "--json"],
                                 capture_output=True, text=True).stdout
            return sum(t.get("rx_packets", 0) for t in json.loads(out or "[]"))
        before = crossed()
        r = subprocess.run(["ip", "netns", "exec", self.h1.name, "ping", "-c", "5", "-i", "0.2", "-W", "2",
                            "-s", "200", self.dst], capture_output=True, text=True)
        n = crossed() - before
        if r.returncode != 0 or n < 5:
            raise RuntimeError(f"{self.label}: h1 -> h2 does not cross the tunnel (ping rc {r.returncode}, "
                               f"{n} packets counted by gwB)\n" + self.diagnostics())

    def config(self, side):
        a = side == "a"
        me, peer = (UNDERLAY_A, UNDERLAY_B) if a else (UNDERLAY_B, UNDERLAY_A)
        lan_if, wan_if = ("a-h1", "a-u") if a else ("b-h2", "b-u")
        lan = "10.1.0.1/24" if a else "10.2.0.1/24"
        remote_net = "10.2.0.0/24" if a else "10.1.0.0/24"
        out = _bench().OUT
        sock = os.path.join(out, f"{self.gwa.name}-{side}.sock")
        cfg = f"""[gateway]
name = "bench-{side}"
workers = {self.workers}
api = "unix:{sock}"
{"busy_poll = true" if self.busy_poll else ""}
{_bench().GATEWAY_EXTRA}
{self.state_line(side)}
[[interface]]
name = "lan"
host = "{lan_if}"
driver = "af_packet"
addresses = ["{lan}"]
vrf = "{"default" if self.kind == "plain" else "blue"}"
rsc = {str(self.rsc).lower()}
offloads = {str(self.offloads).lower()}

[[interface]]
name = "wan"
host = "{wan_if}"
driver = "{self.underlay_driver}"
addresses = ["{me}/24"]
offloads = {str(self.offloads).lower()}
"""
        if self.kind == "plain":
            return cfg + f"""
[[route]]
prefix = "{remote_net}"
via = "{peer}"
"""
        if self.tunnels > 1:
            return cfg + self.multi_config(a, me, peer)
        if self.kind == "esp":
            out_spi, in_spi = ("0x1001", "0x2001") if a else ("0x2001", "0x1001")
            out_key, in_key = ("ab", "ba") if a else ("ba", "ab")
            return cfg + f"""
[[tunnel]]
name = "to-peer"
kind = "ipsec"
local = "{me}"
remote = "{peer}"
vrf = "blue"
traffic = ["{remote_net}"]
nat_t = {str(self.nat_t).lower()}

[[tunnel.sa]]
direction = "out"
spi = {out_spi}
algorithm = "{self.algorithm}"
key_file = "{self.dir}/{out_key}.hex"

[[tunnel.sa]]
direction = "in"
spi = {in_spi}
algorithm = "{self.algorithm}"
key_file = "{self.dir}/{in_key}.hex"
"""
        kind = {"gre-eth": "gre"}.get(self.kind, self.kind)
        l2 = self.kind in ("gre-eth", "nvgre", "vxlan")
        tun_addr = "10.9.0.1" if a else "10.9.0.2"
        tun_peer = "10.9.0.2" if a else "10.9.0.1"
        cfg += f"""
[[tunnel]]
name = "to-peer"
kind = "{kind}"
local = "{me}"
remote = "{peer}"
key = 5000
vrf = "blue"
"""
        if self.kind == "gre-eth":
            cfg += 'inner = "ethernet"\n'
        if l2:
            cfg += f'addresses = ["{tun_addr}/24"]\n'
        cfg += f"""
[[route]]
vrf = "blue"
prefix = "{remote_net}"
via = "{tun_peer if l2 else "to-peer"}"
"""
        return cfg

    def multi_config(self, a, me, peer):
        """`tunnels` parallel IP tunnels (GRE or ESP) in one VRF: tunnel i
        carries traffic to h2's address 10.2.0.(10+i) (and back to h1's
        10.1.0.(10+i)), so N flows use N tunnels."""
        out = ""
        for i in range(self.tunnels):
            dst = f"10.2.0.{10 + i}/32" if a else f"10.1.0.{10 + i}/32"
            if self.kind == "esp":
                o, n = (0x1100 + i, 0x2100 + i) if a else (0x2100 + i, 0x1100 + i)
                ok, ik = ("ab", "ba") if a else ("ba", "ab")
                out += f"""
[[tunnel]]
name = "t{i}"
kind = "ipsec"
local = "{me}"
remote = "{peer}"
vrf = "blue"
traffic = ["{dst}"]

[[tunnel.sa]]
direction = "out"
spi = {o}
algorithm = "{self.algorithm}"
key_file = "{self.dir}/{ok}.hex"

[[tunnel.sa]]
direction = "in"
spi = {n}
algorithm = "{self.algorithm}"
key_file = "{self.dir}/{ik}.hex"
"""
            else:
                out += f"""
[[tunnel]]
name = "t{i}"
kind = "gre"
local = "{me}"
remote = "{peer}"
key = {100 + i}
vrf = "blue"

[[route]]
vrf = "blue"
prefix = "{dst}"
via = "t{i}"
"""
        return out

    def dsts(self):
        """One destination per tunnel."""
        if self.tunnels == 1:
            return [self.dst]
        return [f"10.2.0.{10 + i}" for i in range(self.tunnels)]

    def build(self):
        self.h1.sh("ip addr add 10.1.0.2/24 dev eth0; ip route add default via 10.1.0.1")
        self.h2.sh("ip addr add 10.2.0.2/24 dev eth0; ip route add default via 10.2.0.1")
        self.dst = "10.2.0.2"
        for i in range(self.tunnels if self.tunnels > 1 else 0):
            # Flow i: 10.1.0.(10+i) -> 10.2.0.(10+i), through tunnel i both ways
            # (the route's source hint picks h1's matching address).
            self.h1.sh(f"ip addr add 10.1.0.{10 + i}/24 dev eth0; "
                       f"ip route add 10.2.0.{10 + i}/32 via 10.1.0.1 src 10.1.0.{10 + i}")
            self.h2.sh(f"ip addr add 10.2.0.{10 + i}/24 dev eth0")
        if self.tunnels > 1:
            self.dst = "10.2.0.10"
        if self.underlay_mtu != 1500:
            self.gwa.sh(f"ip link set a-u mtu {self.underlay_mtu}")
            self.gwb.sh(f"ip link set b-u mtu {self.underlay_mtu}")
        b = _bench()
        if self.kind == "esp":
            klen = {"aes128gcm16": 20, "aes256gcm16": 36, "aes128-sha1": 36, "aes256-sha256": 64,
                    "chacha20poly1305": 36}[self.algorithm]
            for name in ("ab", "ba"):
                kp = os.path.join(self.dir, f"{name}.hex")
                with open(os.open(kp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                    f.write(os.urandom(klen).hex() + "\n")
                os.chmod(kp, 0o600)  # vecgate refuses key files others may read
        self.gw_logs = []
        for side, ns in (("a", self.gwa), ("b", self.gwb)):
            path = os.path.join(self.dir, f"gw-{side}.toml")
            with open(path, "w") as f:
                f.write(self.config(side))
            logname = f"gw-{side}.log"
            self.spawn(ns, [b.GATEWAY, "run", "--config", path], logname, gateway=True)
            self.gw_logs.append(os.path.join(self.dir, logname))
        deadline = time.time() + 20
        for log in self.gw_logs:
            while True:
                with open(log) as f:
                    text = f.read()
                if " ready" in text:
                    break
                if time.time() > deadline or any(p.poll() is not None for p in self.procs):
                    raise RuntimeError(f"{self.label}: vecgate did not start:\n{text}")
                time.sleep(0.05)

    def state_line(self, side):
        """Each topology keeps its SA state in its own directory: contenders
        are set up side by side, and two gateways cannot share (lock) the
        default /var/lib/vecgate/<name>. A gateway built before state_dir
        existed (VECGATE_NO_STATE_DIR=1, for before/after runs) gets none."""
        if os.environ.get("VECGATE_NO_STATE_DIR") == "1":
            return ""
        return f'state_dir = "{self.dir}/state-{side}"\n'

    def diagnostics(self):
        out = []
        for log in getattr(self, "gw_logs", []):
            with open(log) as f:
                out.append(f"--- {log}\n" + "".join(f.readlines()[-30:]))
        return "\n".join(out)


class VecgateCharon(peers.StrongswanEsp):
    """vecgate on site A, strongSwan charon (kernel-libipsec) on site B:
    vecgate initiates IKEv2 with a PSK and seals h1's traffic into ESP with
    the negotiated `proposal`; charon opens it. Debian 12's libipsec always
    encapsulates, so the ESP travels in UDP 4500 (RFC 3948) and vecgate
    follows. Hosts get MTU 1400, charon's ipsec0 MTU. `counters()` reads
    what vecgate counted as sealed next to what reached charon's UDP
    stack, for the counted-vs-wire column."""

    def __init__(self, proposal="aes128gcm16", ike="aes256-sha256-modp2048"):
        super().__init__(proposal=proposal, ike=ike)

    def _label(self):
        return f"vecgate → strongSwan charon ESP in UDP ({self.proposal})"

    def sock(self):
        return os.path.join(_bench().OUT, f"{self.gwa.name}-a.sock")

    def build(self):
        self.label = self._label()
        if not os.path.exists("/usr/lib/ipsec/charon"):
            raise RuntimeError("strongSwan charon is not installed (scripts/install-deps.sh)")
        self.routed_hosts(mtu=self.host_mtu)
        self.gwb.sh(f"ip addr add {UNDERLAY_B}/24 dev b-u")
        self._charon(self.gwb, "b", UNDERLAY_B, UNDERLAY_A, "10.2.0.0/24", "10.1.0.0/24")
        # routed_hosts made gwA a kernel router: vecgate takes its netdevs.
        self.gwa.sh("ip addr flush dev a-h1")
        psk = os.path.join(self.dir, "psk")
        with open(os.open(psk, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(self.PSK + "\n")
        os.chmod(psk, 0o600)
        cfg = f"""[gateway]
name = "bench-charon"
workers = 1
api = "unix:{self.sock()}"
state_dir = "{self.dir}/state-a"
{_bench().GATEWAY_EXTRA}

[[interface]]
name = "lan"
host = "a-h1"
driver = "af_packet"
addresses = ["10.1.0.1/24"]
vrf = "blue"

[[interface]]
name = "wan"
host = "a-u"
driver = "af_packet"
addresses = ["{UNDERLAY_A}/24"]

[[tunnel]]
name = "to-charon"
kind = "ipsec"
local = "{UNDERLAY_A}"
remote = "{UNDERLAY_B}"
vrf = "blue"
traffic = ["10.2.0.0/24"]

[tunnel.ike]
psk_file = "{psk}"
remote_id = "{UNDERLAY_B}"
ike_proposals = ["{self.ike}"]
esp_proposals = ["{self.proposal}"]
initiate = true
"""
        path = os.path.join(self.dir, "gw-a.toml")
        with open(path, "w") as f:
            f.write(cfg)
        self.gw_log = os.path.join(self.dir, "gw-a.log")
        self.spawn(self.gwa, [_bench().GATEWAY, "run", "--config", path], "gw-a.log", gateway=True)
        _wait(lambda: "INSTALLED, TUNNEL" in self.swanctl("b", "--list-sas", check=False), 40,
              f"{self.label}: child SA installed at charon", [self.gw_log, self._log("b")])
        sas = self.swanctl("b", "--list-sas", check=False)
        self.negotiated = next((l.split("ESP:", 1)[1].strip() for l in sas.splitlines() if "ESP:" in l), None)
        _wait(lambda: "ipsec0" in self.gwb.sh("ip route show table 220", check=False), 10,
              f"charon route into ipsec0 (table 220) in {self.gwb.name}", [self._log("b")])

    def counters(self):
        """(ESP packets vecgate sealed, UDP datagrams that reached charon's
        sockets, of which its sockets dropped): cumulative."""
        import json
        import subprocess
        out = subprocess.run([_bench().VECGATE, "show", "errors", "--api", self.sock(), "--json"],
                             capture_output=True, text=True).stdout
        sealed = sum(e.get("count", 0) for e in json.loads(out or "[]")
                     if e.get("node") == "esp-encrypt" and e.get("reason") == "encrypted")
        snmp = self.gwb.sh("cat /proc/net/snmp", check=False).splitlines()
        udp = [l.split()[1:] for l in snmp if l.startswith("Udp:")]
        if len(udp) < 2:
            return sealed, 0, 0
        u = dict(zip(udp[0], (int(x) for x in udp[1])))
        return sealed, u.get("InDatagrams", 0) + u.get("InErrors", 0), u.get("InErrors", 0)

    def diagnostics(self):
        s = super().diagnostics()
        if getattr(self, "gw_log", None) and os.path.exists(self.gw_log):
            with open(self.gw_log) as f:
                s += f"--- {self.gw_log}\n" + "".join(f.readlines()[-30:])
        return s
