#!/usr/bin/python3
"""Self-test of the DPDK testpmd contender (bench/testpmd.py): builds the
one-hop router with testpmd io-forwarding in the middle, checks that a ping
crosses it and that it holds the XDP programs on both veths (so nothing
else could have forwarded), then sends 60-byte frames with testpmd txonly
from h1 (and with `vecgate-floor generate` if built) and exits non-zero
unless h2's veth counts them arriving. Rates are printed, not judged (one
short run on a shared machine); `make bench` takes medians.

Usage: bench/testpmd_selftest.py [--duration S] [--workers N]
"""
import argparse
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import floor_topo  # noqa: E402
import testpmd  # noqa: E402


def xdp_attached(ns, dev):
    link = json.loads(ns.sh(f"ip -j link show dev {dev}"))[0]
    return "xdp" in link


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=2)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("testpmd_selftest: needs root (network namespaces)")
    if not testpmd.available():
        sys.exit(f"testpmd_selftest: {testpmd.TESTPMD} missing: run scripts/install-deps.sh")
    os.makedirs(bench.OUT, exist_ok=True)
    failures = []
    topo = None
    try:
        topo = bench.Router("testpmd", workers=args.workers, driver="af_xdp")
        bench.log(f"[testpmd] io forwarding up (pid {topo.gateway_pid()}), ping h1 -> h2 crosses it")
        for dev in ("r-h1", "r-h2"):
            if not xdp_attached(topo.r, dev):
                failures.append(f"no XDP program on {dev}: testpmd does not own it")
        bench.udp_sink(topo)
        gens = ["testpmd"] + (["floor"] if os.path.exists(floor_topo.FLOOR) else [])
        for gen in gens:
            res = bench.pps_run(topo, 60, args.duration, generator=gen)
            got = res["pps"] * args.duration
            bench.log(f"[testpmd] {gen} generator: {res['sent_pps']:.0f} frames/s sent, {res['pps']:.0f}/s "
                      f"crossed testpmd, testpmd {res['gw_cpp'] or 0:.0f} cycles/frame")
            if got < 1000:
                failures.append(f"{gen} generator: only {got:.0f} frames crossed testpmd in {args.duration} s")
    except Exception as e:
        failures.append(str(e))
        bench.log(traceback.format_exc())
    finally:
        if topo is not None:
            topo.close()
    for f in failures:
        print(f"testpmd_selftest: FAILED: {f}")
    if not failures:
        print("testpmd_selftest: ok")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
