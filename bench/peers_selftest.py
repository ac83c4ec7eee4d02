#!/usr/bin/python3
"""Self-test of bench/peers.py: builds each peer topology in turn, sends one
TCP stream with `vecgate perf` from h1 to h2 for a few seconds, prints
Gbit/s and the gateways' CPU seconds, and exits non-zero if any topology
fails to build or to carry traffic. Figures are rough (one short run on a
shared machine); the benchmark suite proper takes medians.

Usage: bench/peers_selftest.py [--duration S] [--only KEY,KEY]
"""
import argparse
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import peers  # noqa: E402


def run_once(topo, duration, port=5301):
    rx = topo.h2.popen([bench.VECGATE, "perf", "receive", "-p", str(port), "--json", "-q", "--timeout", "20"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        c0 = peers.gateways_cpu_seconds(topo)
        tx = topo.h1.popen([bench.VECGATE, "perf", "send", topo.dst, "-p", str(port), "-t", "1",
                            "-d", str(duration), "--warmup", "1", "--json", "-q", "--timeout", "20"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        txo, txe = tx.communicate(timeout=duration + 60)
        rxo, rxe = rx.communicate(timeout=30)
        c1 = peers.gateways_cpu_seconds(topo)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    if tx.returncode != 0 or rx.returncode != 0:
        raise RuntimeError(f"perf failed: send rc={tx.returncode} {txe}\nreceive rc={rx.returncode} {rxe}")
    r, s = json.loads(rxo), json.loads(txo)
    total = s.get("total_bytes") or r["bytes"]
    gw_s = c1 - c0
    return {"gbps": r["throughput_gbps"], "bytes": r["bytes"], "gw_cpu_s": gw_s,
            "gw_cpb": gw_s * bench.tsc_hz() / max(total, 1) if topo.gateway_pids() else None,
            "path_cpb": r.get("cycles_per_byte_system"), "retrans": s.get("tcp_retrans")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=3)
    ap.add_argument("--only", default="", help="comma-separated keys of peers.PEERS")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("peers_selftest: needs root (network namespaces)")
    if not os.path.exists(bench.VECGATE):
        subprocess.run(["cargo", "build", "--release", "-p", "vecgate"], cwd=bench.ROOT, check=True)
    os.makedirs(bench.OUT, exist_ok=True)
    only = [k for k in args.only.split(",") if k]
    failures, rows = [], []
    for key, cls, kw in peers.PEERS:
        if only and key not in only:
            continue
        bench.log(f"[peers] {key}: setting up")
        topo = None
        try:
            t0 = time.time()
            topo = cls(**kw)
            bench.log(f"[peers] {key}: up in {time.time() - t0:.1f} s, gateway pids {topo.gateway_pids()}")
            res = run_once(topo, args.duration)
            if res["bytes"] <= 0 or res["gbps"] <= 0:
                raise RuntimeError(f"no traffic carried: {res}")
            rows.append((key, res))
            bench.log(f"[peers] {key}: {res['gbps']:.2f} Gbit/s, gateways {res['gw_cpu_s']:.2f} CPU s")
        except Exception as e:
            failures.append((key, str(e)))
            bench.log(f"[peers] {key}: FAILED\n{traceback.format_exc()}")
        finally:
            if topo is not None:
                topo.close()
    print(f"| peer | Gbit/s (1 TCP stream, {args.duration:g} s) | gateways' CPU s | gateway cycles/byte "
          "| path cycles/byte | TCP retransmits |")
    print("|---|---|---|---|---|---|")
    for key, r in rows:
        cpb = "—" if r["gw_cpb"] is None else f"{r['gw_cpb']:.1f}"
        pcpb = "—" if r["path_cpb"] is None else f"{r['path_cpb']:.2f}"
        print(f"| {key} | {r['gbps']:.2f} | {r['gw_cpu_s']:.2f} | {cpb} | {pcpb} | {r['retrans']} |")
    for key, why in failures:
        print(f"| {key} | FAILED: {why.splitlines()[0] if why else '?'} | | | | |")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
