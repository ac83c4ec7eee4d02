"""FPM ingest benchmark (issue 18): vecgate's own cost of taking N routes
over FPM, without BGP or zebra in front of it, next to the Linux kernel
taking the same N routes over netlink, in the same run.

    python3 bench/fpm_ingest.py [--routes 100000] [--rounds 3]

- vecgate: a client plays zebra (dplane_fpm_nl's frames: u8 version 1,
  u8 type 1, u16 big-endian length, then one RTM_NEWROUTE with RTA_DST,
  RTA_GATEWAY, protocol bgp, table 254) and writes all N frames as fast
  as the socket takes them; the clock runs from the first byte to
  `vecgate_learned_routes{state="installed"}` reaching N (polled every
  20 ms), then the same for N RTM_DELROUTE frames down to 0.
- kernel: `ip -batch` with N `route add` lines (then `route del`) in a
  namespace of its own, the same prefixes and gateway, timed to its exit.

Both sides go one after the other in each round (vecgate first, then the
kernel), medians over the rounds. Needs root and target/release/vecgate
(VECGATE overrides it)."""

import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from fpm_bench import _installed, _median, _wait  # noqa: E402

RTM_NEWROUTE, RTM_DELROUTE = 24, 25


def prefixes(n):
    """N distinct /24s from 10.128.0.0 up."""
    return [((10 << 24 | 128 << 16) + i * 256, 24) for i in range(n)]


def frame(kind, dst, plen, gw):
    rt = struct.pack("=BBBBBBBBI", 2, plen, 0, 0, 254, 186, 0, 1, 0)
    attrs = struct.pack("=HH", 8, 1) + struct.pack("!I", dst)          # RTA_DST
    attrs += struct.pack("=HH", 8, 5) + struct.pack("!I", gw)          # RTA_GATEWAY
    attrs += struct.pack("=HHI", 8, 15, 254)                            # RTA_TABLE
    flags = 0x501 if kind == RTM_NEWROUTE else 0x401
    body = rt + attrs
    nl = struct.pack("=IHHII", 16 + len(body), kind, flags, 0, 0) + body
    return struct.pack("!BBH", 1, 1, len(nl) + 4) + nl


def ip4(a):
    return ".".join(str(a >> s & 255) for s in (24, 16, 8, 0))


def measure(n, rounds=3):
    gw, k = bench.NS("igw"), bench.NS("ik")
    proc = None
    api = f"/tmp/vgfpmi{os.getpid()}.sock"
    cfgpath = f"/tmp/vgfpmi{os.getpid()}.toml"
    tmp = tempfile.mkdtemp()
    try:
        bench.veth(gw, "wan", k, "peer")
        k.sh("ip addr add 10.0.1.1/24 dev peer")
        with open(cfgpath, "w") as f:
            f.write(f"""[gateway]
name = "fpmingest"
workers = 1
api = "unix:{api}"

[[interface]]
name = "wan"
host = "wan"
driver = "af_packet"
addresses = ["10.0.1.1/24"]

[routing]
fpm = "127.0.0.1:2620"
""")
        proc = gw.popen([bench.VECGATE, "run", "--config", cfgpath, "--log-level", "warn"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not _wait(lambda: os.path.exists(api) and _installed(api) >= 0, 30):
            raise RuntimeError("vecgate's API did not come up")
        gwaddr = 10 << 24 | 1 << 8 | 2
        ps = prefixes(n)
        adds = b"".join(frame(RTM_NEWROUTE, d, l, gwaddr) for d, l in ps)
        dels = b"".join(frame(RTM_DELROUTE, d, l, gwaddr) for d, l in ps)
        add_batch, del_batch = os.path.join(tmp, "add"), os.path.join(tmp, "del")
        with open(add_batch, "w") as f:
            f.writelines(f"route add {ip4(d)}/{l} via 10.0.1.2 proto bgp\n" for d, l in ps)
        with open(del_batch, "w") as f:
            f.writelines(f"route del {ip4(d)}/{l} via 10.0.1.2 proto bgp\n" for d, l in ps)
        # zebra's side of the connection lives in gw's namespace: a helper
        # process there relays our frames (sockets keep their namespace).
        rows = []
        relay_py = ("import socket,sys,time;s=socket.create_connection(('127.0.0.1',2620));time.sleep(2)\n"
                    "for f in sys.argv[1:]:\n"
                    "    d=open(f,'rb').read();sys.stdout.write('go\\n');sys.stdout.flush();s.sendall(d);sys.stdin.readline()\n"
                    "time.sleep(600)\n")
        add_frames, del_frames = os.path.join(tmp, "add.fpm"), os.path.join(tmp, "del.fpm")
        with open(add_frames, "wb") as f:
            f.write(adds)
        with open(del_frames, "wb") as f:
            f.write(dels)
        for r in range(rounds):
            row = {}
            # One zebra session per round (a new one would sweep what the
            # last left once its replay is over): the adds, then the dels.
            relay = gw.popen([sys.executable, "-c", relay_py, add_frames, del_frames],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for name, want, batch in (("add", n, add_batch), ("del", 0, del_batch)):
                relay.stdout.readline()
                t0 = time.monotonic()
                got = _wait(lambda: _installed(api) == want, 600, 0.02)
                row[f"{name}_vecgate_s"] = time.monotonic() - t0 if got else None
                t1 = time.monotonic()
                k.sh(f"ip -batch {batch}")
                row[f"{name}_kernel_s"] = time.monotonic() - t1
                relay.stdin.write("next\n")
                relay.stdin.flush()
            relay.kill()
            relay.wait()
            rows.append(row)
            print(f"round {r + 1}: {row}", file=sys.stderr)
        res = {"routes": n, "rounds": rounds}
        for key in rows[0]:
            res[key] = _median([row.get(key) for row in rows])
        return res
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        for ns in (gw, k):
            ns.close()
        for p in (api, cfgpath):
            try:
                os.unlink(p)
            except OSError:
                pass
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--routes", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(measure(a.routes, a.rounds))
