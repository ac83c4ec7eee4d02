"""IKEv2 benchmark inputs for bench.py: how long vecgate takes to set up
1 and N tunnels (IKE SA + child SA each) against strongSwan's charon, and
the ESP throughput of a tunnel keyed by IKE next to the same tunnel keyed
statically (they must be equal within noise: IKE only hands the dataplane
its keys).

    measure(n_tunnels) -> dict      # the lead's bench.py calls this
    measure_auth(n_tunnels) -> list # set-up rate by authentication and peer
    python3 bench/ike_bench.py [--tunnels 1,100] [--no-throughput]
                               [--auth psk,ecdsa-p256,rsa-2048 --auth-tunnels 20]

Set-up rate by authentication (`--auth`): the same N tunnels established
with a PSK, ECDSA P-256 certificates and RSA-2048 certificates (both
sides sign; one root CA issues both end entities, whose subjectAltNames
hold every tunnel's ID), against charon and against a second vecgate
(responder in gwB), side by side in one run: `setups_per_s` = N / the
time to all established.

Topology for the set-up time (as peers.py's site-to-site layout):

    gwA: vecgate (N [[tunnel]] sections, each with its own IDs and
         selectors 10.1.i.0/24 <-> 10.2.i.0/24, all initiating)
      ══ 192.0.2.1 ── 192.0.2.2 ══
    gwB: charon (kernel-libipsec), N connections c<i> with matching IDs

Clock: from spawning `vecgate run` to `vecgate show ike` listing every
tunnel established with a child SA (polled every 50 ms through the API);
charon's `swanctl --list-sas` must then agree (N children INSTALLED).

Uses bench.py's helpers the way peers.py does (`peers._bench()`), and
target/release/vecgate (VECGATE overrides it)."""

import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402
from peers import UNDERLAY_A, UNDERLAY_B  # noqa: E402

PSK = "ike-bench-psk-0123456789abcdef"
# openssl -newkey arguments of each certificate authentication.
CERT_KEYS = {"ecdsa-p256": "ec -pkeyopt ec_paramgen_curve:P-256", "rsa-2048": "rsa:2048"}
AUTHS = ("psk",) + tuple(CERT_KEYS)
IKE_PROPOSAL = "aes128gcm16-prfsha256-x25519"
ESP_PROPOSAL = "aes128gcm16"


def _bench():
    return peers._bench()


def _api_json(sock, what):
    b = _bench()
    r = subprocess.run([b.VECGATE, "show", what, "--json", "--api", f"unix:{sock}"],
                       capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def _established(v):
    return v.get("state") == "established" and bool(v.get("child_sas"))


class Charon:
    """charon with kernel-libipsec in `ns`, own vici socket and /run (see
    /work/shared/notes/peers.md); `conns` is the swanctl `connections`
    body."""

    def __init__(self, ns, dirpath, conns, secrets, files=()):
        self.ns = ns
        self.dir = os.path.join(dirpath, "charon")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(os.path.join(self.dir, "run"))
        d = self.dir
        # Certificates and keys: (subdirectory of SWANCTL_DIR, source file).
        for sub, src in files:
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            shutil.copy(src, os.path.join(d, sub))
        with open(os.path.join(d, "strongswan.conf"), "w") as f:
            f.write(f"""charon {{
  load = random nonce openssl kdf pem pkcs1 pkcs8 x509 revocation constraints pubkey kernel-libipsec kernel-netlink socket-default vici updown
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
      ike = 1
      chd = 1
      cfg = 2
      esp = 1
      net = 1
      flush_line = yes
    }}
  }}
}}
""")
        with open(os.path.join(d, "swanctl.conf"), "w") as f:
            f.write(f"connections {{\n{conns}}}\nsecrets {{\n{secrets}}}\n")
        self.env = dict(os.environ, STRONGSWAN_CONF=os.path.join(d, "strongswan.conf"), SWANCTL_DIR=d)
        out = open(os.path.join(d, "charon.out"), "w")
        self.proc = ns.popen(["sh", "-c", f"mount --bind {d}/run /run && exec /usr/lib/ipsec/charon"],
                             stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        out.close()
        peers._wait(lambda: os.path.exists(os.path.join(d, "charon.vici")), 15, "charon start",
                    logs=[os.path.join(d, "charon.out")], proc=self.proc)
        r = self.swanctl(["--load-all", "--file", os.path.join(d, "swanctl.conf")])
        if "successfully loaded" not in r:
            raise RuntimeError(f"swanctl --load-all:\n{r}")

    def swanctl(self, args):
        r = subprocess.run(["ip", "netns", "exec", self.ns.name, "swanctl"] + args
                           + ["--uri", f"unix://{self.dir}/charon.vici"],
                           capture_output=True, text=True, env=self.env, timeout=60)
        return r.stdout + r.stderr

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _pki(d, auth, n):
    """A root CA and end entities `a` (vecgate in gwA) and `b` (gwB) of key
    type `auth`, each naming `a<i>.bench` / `b<i>.bench` for i < n in its
    subjectAltName: root.pem, a.pem, a.key, b.pem, b.key (PKCS#8, 0600)."""
    def ossl(args):
        subprocess.run(f"openssl {args}", shell=True, cwd=d, check=True, capture_output=True)
    newkey = CERT_KEYS[auth]
    ossl(f"req -x509 -newkey {newkey} -nodes -keyout root.key -out root.pem -days 7 "
         "-subj '/O=vecgate bench/CN=Bench Root' -addext basicConstraints=critical,CA:TRUE "
         "-addext keyUsage=critical,keyCertSign,cRLSign")
    for side in "ab":
        sans = ",".join(f"DNS:{side}{i}.bench" for i in range(n))
        with open(os.path.join(d, f"{side}.ext"), "w") as f:
            f.write(f"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nsubjectAltName={sans}\n")
        ossl(f"req -newkey {newkey} -nodes -keyout {side}.key -out {side}.csr -subj '/O=vecgate bench/CN={side}'")
        ossl(f"x509 -req -in {side}.csr -CA root.pem -CAkey root.key -CAcreateserial -out {side}.pem "
             f"-days 7 -extfile {side}.ext")
        os.chmod(os.path.join(d, f"{side}.key"), 0o600)


class IkeSetup:
    """gwA vecgate with `n` IKE tunnels against charon (or, with `peer =
    "vecgate"`, a responding vecgate) in gwB, authenticating with `auth`
    (one of AUTHS)."""

    def __init__(self, n, auth="psk", peer="charon"):
        b = _bench()
        self.n = n
        self.auth = auth
        self.peer = peer
        self.nss = []
        self.procs = []
        self.charon = None
        self.responder = None
        try:
            self.ga, self.gb = b.NS("ika"), b.NS("ikb")
            self.nss = [self.ga, self.gb]
            self.dir = os.path.join(b.OUT, f"ike-{self.ga.name}")
            shutil.rmtree(self.dir, ignore_errors=True)
            os.makedirs(self.dir)
            # gwA's LAN side: a veth whose far end stays in gwA (no hosts
            # are needed to negotiate); gwB a kernel router with charon.
            b.veth(self.ga, "a-lan", self.ga, "a-lanp")
            b.veth(self.ga, "a-u", self.gb, "b-u")
            self.gb.sh(f"ip addr add {UNDERLAY_B}/24 dev b-u")
            # kernel-libipsec routes each child's remote selector through
            # its TUN, sourced from an address inside the local selector:
            # gwB gets 10.2.i.1 on a LAN veth.
            b.veth(self.gb, "b-lan", self.gb, "b-lanp")
            self.gb.sh("; ".join(f"ip addr add 10.2.{i}.1/24 dev b-lan" for i in range(n)))
            self.psk = os.path.join(self.dir, "psk")
            with open(self.psk, "w") as f:
                f.write(PSK + "\n")
            os.chmod(self.psk, 0o600)  # vecgate refuses PSK files others may read
            if auth != "psk":
                _pki(self.dir, auth, n)
            cert = auth != "psk"
            local_auth = "pubkey\n      certs = b.pem" if cert else "psk"
            remote_auth = "pubkey" if cert else "psk"
            conns = "".join(f"""  c{i} {{
    version = 2
    local_addrs = {UNDERLAY_B}
    remote_addrs = {UNDERLAY_A}
    proposals = {IKE_PROPOSAL}
    rekey_time = 0
    local {{
      auth = {local_auth}
      id = b{i}.bench
    }}
    remote {{
      auth = {remote_auth}
      id = a{i}.bench
    }}
    children {{
      net {{
        local_ts = 10.2.{i}.0/24
        remote_ts = 10.1.{i}.0/24
        esp_proposals = {ESP_PROPOSAL}
        rekey_time = 0
      }}
    }}
  }}
""" for i in range(n))
            secrets = f'  ike-all {{\n    secret = "{PSK}"\n  }}\n'
            files = [("x509ca", os.path.join(self.dir, "root.pem")), ("x509", os.path.join(self.dir, "b.pem")),
                     ("pkcs8", os.path.join(self.dir, "b.key"))] if cert else []
            if peer == "charon":
                self.charon = Charon(self.gb, self.dir, conns, secrets, files)
            self.sock = os.path.join(self.dir, "gw-a.sock")
            self.cfg = os.path.join(self.dir, "gw-a.toml")
            with open(self.cfg, "w") as f:
                f.write(self.config())
            if peer == "vecgate":
                self.start_responder()
        except BaseException:
            self.close()
            raise

    def config(self, side="a"):
        """gwA's configuration (initiating), or gwB's (`side = "b"`, the
        responding vecgate: mirrored IDs and selectors, its LAN b-lan)."""
        a = side == "a"
        me, far = ("a", "b") if a else ("b", "a")
        local, remote = (UNDERLAY_A, UNDERLAY_B) if a else (UNDERLAY_B, UNDERLAY_A)
        lan, wan = ("a-lan", "a-u") if a else ("b-lan", "b-u")
        mine, theirs = (1, 2) if a else (2, 1)
        if self.auth == "psk":
            auth = f'psk_file = "{self.psk}"\n'
        else:
            auth = (f'auth = "pubkey"\ncert_file = "{self.dir}/{me}.pem"\nkey_file = "{self.dir}/{me}.key"\n'
                    f'ca_files = ["{self.dir}/root.pem"]\n')
        cfg = f"""[gateway]
name = "ike-bench-{me}"
workers = 1
api = "unix:{self.sock if a else self.sock_b}"

[[interface]]
name = "lan"
host = "{lan}"
driver = "af_packet"
addresses = ["10.{mine}.0.1/16"]
vrf = "blue"

[[interface]]
name = "wan"
host = "{wan}"
driver = "af_packet"
addresses = ["{local}/24"]
"""
        for i in range(self.n):
            cfg += f"""
[[tunnel]]
name = "t{i}"
kind = "ipsec"
local = "{local}"
remote = "{remote}"
vrf = "blue"
traffic = ["10.{theirs}.{i}.0/24"]

[tunnel.ike]
{auth}local_id = "{me}{i}.bench"
remote_id = "{far}{i}.bench"
ike_proposals = ["{IKE_PROPOSAL}"]
esp_proposals = ["{ESP_PROPOSAL}"]
local_traffic = ["10.{mine}.{i}.0/24"]
initiate = {"true" if a else "false"}
"""
        return cfg

    def start_responder(self):
        """The responding vecgate in gwB (its addresses on b-lan move to
        it: the kernel router's are removed), up before the clock starts."""
        b = _bench()
        self.gb.sh("ip addr flush dev b-lan; ip addr flush dev b-u")
        self.sock_b = os.path.join(self.dir, "gw-b.sock")
        cfg_b = os.path.join(self.dir, "gw-b.toml")
        with open(cfg_b, "w") as f:
            f.write(self.config("b"))
        log = open(os.path.join(self.dir, "gw-b.log"), "w")
        p = self.gb.popen([b.VECGATE, "run", "--config", cfg_b], stdin=subprocess.DEVNULL,
                          stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(p)
        peers._wait(lambda: _api_json(self.sock_b, "ike") is not None, 30, "the responding vecgate",
                    logs=[os.path.join(self.dir, "gw-b.log")], proc=p)

    def run(self, timeout=120):
        """Seconds from `vecgate run` to all tunnels established."""
        b = _bench()
        log = open(os.path.join(self.dir, "gw-a.log"), "w")
        t0 = time.monotonic()
        p = self.ga.popen([b.VECGATE, "run", "--config", self.cfg], stdin=subprocess.DEVNULL,
                          stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(p)
        ready = None
        last = None
        while True:
            now = time.monotonic()
            if ready is None and os.path.exists(self.sock):
                ready = now - t0
            v = _api_json(self.sock, "ike") if ready is not None else None
            if v is not None:
                last = v
                if len(v) == self.n and all(_established(x) for x in v):
                    done = time.monotonic() - t0
                    break
            if p.poll() is not None or now - t0 > timeout:
                up = sum(_established(x) for x in (last or []))
                raise RuntimeError(f"{self.n} IKE tunnels: {up} established after {now - t0:.1f} s\n"
                                   + peers._tail(os.path.join(self.dir, "gw-a.log")))
            time.sleep(0.05)
        # The peer agrees: every child installed on its side too.
        deadline = time.monotonic() + 30
        while True:
            if self.charon:
                sas = self.charon.swanctl(["--list-sas"])
                installed = sas.count("INSTALLED")
            else:
                sas = json.dumps(_api_json(self.sock_b, "ike"))
                installed = sum(_established(x) for x in (_api_json(self.sock_b, "ike") or []))
            if installed >= self.n:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.peer}: {installed} of {self.n} children installed\n{sas[-3000:]}")
            time.sleep(0.2)
        algs = sorted({x["ike_sas"][0]["algorithms"] for x in last if x.get("ike_sas")})
        methods = sorted({(x.get("auth") or {}).get("remote_method", "?") for x in last})
        return {"tunnels": self.n, "establish_s": round(done, 3),
                "per_tunnel_ms": round(done * 1000 / self.n, 1),
                "setups_per_s": round(self.n / done, 1) if done else None,
                "api_up_s": round(ready or 0, 3), "charon_installed": installed, "peer_installed": installed,
                "auth": self.auth, "peer": self.peer, "peer_methods": ",".join(methods),
                "ike": ",".join(algs), "esp": ESP_PROPOSAL}

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if self.charon:
            self.charon.close()
        for ns in self.nss:
            ns.close()


def measure(n_tunnels):
    """Time to establish `n_tunnels` IKE SAs + child SAs between vecgate
    (initiator) and charon; a dict with `establish_s` and details."""
    s = IkeSetup(n_tunnels)
    try:
        return s.run(timeout=max(60, 2 * n_tunnels))
    finally:
        s.close()


def measure_auth(n_tunnels, auths=AUTHS, peers_=("charon", "vecgate")):
    """IKE set-ups per second of `n_tunnels` tunnels for each
    authentication and peer, side by side in one run: a list of rows
    (measure()'s dict each, or `skipped` with the reason)."""
    rows = []
    for peer in peers_:
        for auth in auths:
            s = None
            try:
                s = IkeSetup(n_tunnels, auth, peer)
                rows.append(s.run(timeout=max(60, 2 * n_tunnels)))
            except Exception as e:
                rows.append({"tunnels": n_tunnels, "auth": auth, "peer": peer,
                             "skipped": str(e).strip().splitlines()[0][:200]})
            finally:
                if s:
                    s.close()
    return rows


def _ike_topology(algorithm):
    """vecgate <-> vecgate ESP keyed by IKE (vecgate_topo's `esp` with a
    [tunnel.ike] section instead of static SAs)."""
    import vecgate_topo

    class VecgateIke(vecgate_topo.VecgateTunnel):
        def __init__(self):
            super().__init__("esp", algorithm=algorithm)
            self.label = f"vecgate ESP {algorithm}, keyed by IKEv2"

        def config(self, side):
            static = super().config(side)
            head = static.split("\n[[tunnel.sa]]")[0]
            a = side == "a"
            psk = os.path.join(self.dir, "psk")
            if not os.path.exists(psk):
                with open(psk, "w") as f:
                    f.write(PSK + "\n")
                os.chmod(psk, 0o600)
            return head + f"""
[tunnel.ike]
psk_file = "{psk}"
ike_proposals = ["{IKE_PROPOSAL}"]
esp_proposals = ["{algorithm}"]
initiate = {"true" if a else "false"}
"""

        def build(self):
            super().build()
            # Wait for the child SA before warm-up pings.
            socks = [os.path.join(_bench().OUT, f"{self.gwa.name}-{s}.sock") for s in "ab"]
            peers._wait(lambda: all((_api_json(s, "ike") or [{}])[0].get("state") == "established"
                                    and (_api_json(s, "ike") or [{}])[0].get("child_sas") for s in socks),
                        30, "IKE between the vecgates", logs=self.gw_logs)

    return VecgateIke()


def throughput(algorithm=ESP_PROPOSAL, runs=3, duration=3):
    """`vecgate perf`, 1 stream, `duration` s, vecgate <-> vecgate: static
    keys vs keys from IKE, medians of `runs` each (interleaved)."""
    import vecgate_topo
    b = _bench()
    rows = {"static": [], "ike": []}
    for _ in range(runs):
        for kind in ("static", "ike"):
            topo = vecgate_topo.VecgateTunnel("esp", algorithm=algorithm) if kind == "static" \
                else _ike_topology(algorithm)
            try:
                rows[kind].append(b.perf_run(topo, 1, duration)["gbps"])
            finally:
                topo.close()
    med = {k: sorted(v)[len(v) // 2] for k, v in rows.items()}
    return {"algorithm": algorithm, "static_gbps": round(med["static"], 2), "ike_gbps": round(med["ike"], 2),
            "ratio": round(med["ike"] / med["static"], 3) if med["static"] else None,
            "runs": {k: [round(x, 2) for x in v] for k, v in rows.items()}}


def _stale():
    b = _bench()
    root = b.ROOT
    exe = b.VECGATE
    if not os.path.exists(exe):
        return True
    t = os.path.getmtime(exe)
    for d in ("crates",):
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            if any(f.endswith(".rs") and os.path.getmtime(os.path.join(dirpath, f)) > t for f in files):
                return True
    return False


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tunnels", default="1,100", help="comma-separated tunnel counts")
    ap.add_argument("--no-throughput", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--auth", default="", help="set-up rate by authentication: e.g. psk,ecdsa-p256,rsa-2048")
    ap.add_argument("--auth-tunnels", type=int, default=20, help="tunnels per set-up rate run")
    ap.add_argument("--peers", default="charon,vecgate", help="peers of the set-up rate runs")
    args = ap.parse_args()
    b = _bench()
    if _stale():
        b.log("building target/release/vecgate")
        subprocess.run(["cargo", "build", "--release", "-p", "vecgate"], cwd=b.ROOT, check=True)
    os.makedirs(b.OUT, exist_ok=True)
    results = {"setup": [], "throughput": None, "auth": []}
    if args.auth:
        for r in measure_auth(args.auth_tunnels, [a for a in args.auth.split(",") if a],
                              [p for p in args.peers.split(",") if p]):
            b.log(f"{r['peer']} {r['auth']}: " + (f"skipped: {r['skipped']}" if r.get("skipped") else
                  f"{r['tunnels']} tunnels in {r['establish_s']} s ({r['setups_per_s']} set-ups/s)"))
            results["auth"].append(r)
    for n in [int(x) for x in args.tunnels.split(",") if x]:
        r = measure(n)
        b.log(f"{n} tunnel(s): established in {r['establish_s']} s ({r['per_tunnel_ms']} ms per tunnel)")
        results["setup"].append(r)
    if not args.no_throughput:
        r = throughput(runs=args.runs)
        b.log(f"throughput {r['algorithm']}: static {r['static_gbps']} Gbit/s, IKE {r['ike_gbps']} Gbit/s "
              f"(ratio {r['ratio']})")
        results["throughput"] = r
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
