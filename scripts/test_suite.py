#!/usr/bin/env python3
"""Runs the workspace's tests: builds every test binary once, then runs them
in parallel (independent binaries: each test makes its own uniquely named
namespaces, sockets and files), prints each binary's time and result as it
finishes, and ends with a table, the wall time against the budget, and one
closing line `tests: N passed, M failed`.

    scripts/test_suite.py [--jobs N] [--stress] [--budget-min M] [FILTER...]

--stress runs one busy loop per core beside the tests for the whole run (the
suite must pass on a loaded machine: no test may judge by how fast anything
ran). FILTER keeps only binaries whose name contains one of the words.
Environment: VECGATE_TEST_JOBS, VECGATE_TEST_STRESS=1, VECGATE_TEST_BUDGET_MIN.
Logs: target/test-logs/<binary>.log; times of the last run:
target/test-logs/times.tsv (used to start the longest binaries first).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "target" / "test-logs"
TIMES = LOGS / "times.tsv"
RESULT = re.compile(r"^test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored")


def build():
    """`cargo test --no-run` for the whole workspace; returns the test
    binaries as (display name, executable, package dir)."""
    cmd = ["cargo", "test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"]
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"test-suite: build failed ({' '.join(cmd)})")
    bins = []
    for line in p.stdout.splitlines():
        try:
            m = json.loads(line)
        except json.JSONDecodeError:
            continue
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if not m.get("profile", {}).get("test"):
            continue
        t = m["target"]
        pkg_dir = str(Path(m["manifest_path"]).parent)
        pkg = Path(pkg_dir).name
        kind = t["kind"][0]
        name = f"{pkg}::{t['name']}" if kind in ("test", "bench") else f"{pkg}::{kind}:{t['name']}"
        bins.append((name, m["executable"], pkg_dir, m["package_id"]))
    return bins


def last_times():
    try:
        return {l.split("\t")[0]: float(l.split("\t")[1]) for l in TIMES.read_text().splitlines() if "\t" in l}
    except (OSError, ValueError, IndexError):
        return {}


def busy_loops(n):
    """One spinning process per core, at normal priority: the tests share
    the CPUs with them as they would with any other load."""
    code = "while True: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


class Runner:
    def __init__(self, jobs):
        self.jobs = jobs
        self.lock = threading.Lock()
        self.results = []

    def run_one(self, name, exe, cwd, pkg_id):
        log = LOGS / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".log")
        env = dict(os.environ)
        env["CARGO_MANIFEST_DIR"] = cwd
        env["CARGO_PKG_NAME"] = Path(cwd).name
        env.setdefault("RUST_BACKTRACE", "1")
        t0 = time.monotonic()
        with open(log, "w") as f:
            rc = subprocess.run([exe], cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
        secs = time.monotonic() - t0
        text = log.read_text(errors="replace")
        passed = failed = ignored = 0
        for l in text.splitlines():
            m = RESULT.match(l)
            if m:
                passed += int(m.group(2))
                failed += int(m.group(3))
                ignored += int(m.group(4))
        if rc != 0 and failed == 0:
            failed = 1  # crashed or exited non-zero without a libtest summary
        with self.lock:
            self.results.append((name, secs, passed, failed, ignored, rc, log))
            status = "ok  " if rc == 0 else "FAIL"
            print(f"  {status} {name:<44} {secs:7.1f} s  {passed} passed"
                  + (f", {failed} failed" if failed else "")
                  + (f", {ignored} ignored" if ignored else ""), flush=True)
            if rc != 0:
                tail = text.splitlines()[-80:]
                print(f"---- {name} (exit {rc}), last lines of {log}:", flush=True)
                print("\n".join(tail), flush=True)
                print(f"---- end of {name}", flush=True)

    def run(self, bins):
        queue = list(bins)
        qlock = threading.Lock()

        def worker():
            while True:
                with qlock:
                    if not queue:
                        return
                    item = queue.pop(0)
                self.run_one(*item)

        threads = [threading.Thread(target=worker) for _ in range(self.jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("VECGATE_TEST_JOBS", "2")))
    ap.add_argument("--stress", action="store_true", default=os.environ.get("VECGATE_TEST_STRESS") == "1")
    ap.add_argument("--budget-min", type=float, default=float(os.environ.get("VECGATE_TEST_BUDGET_MIN", "45")))
    ap.add_argument("filter", nargs="*")
    a = ap.parse_args()

    t_start = time.monotonic()
    LOGS.mkdir(parents=True, exist_ok=True)
    print("test-suite: building the test binaries", flush=True)
    bins = build()
    if a.filter:
        bins = [b for b in bins if any(w in b[0] for w in a.filter)]
    # Longest first (from the last run), so the pool ends together.
    prev = last_times()
    bins.sort(key=lambda b: -prev.get(b[0], 1e9 if "vecgate::" in b[0] else 0))
    t_build = time.monotonic() - t_start

    loops = []
    if a.stress:
        n = os.cpu_count() or 1
        loops = busy_loops(n)
        print(f"test-suite: stress mode, {n} busy loop(s) beside the tests", flush=True)
    print(f"test-suite: {len(bins)} test binaries, {a.jobs} at a time", flush=True)
    r = Runner(max(1, a.jobs))
    try:
        r.run(bins)
        doc_t0 = time.monotonic()
        if not a.filter:
            print("test-suite: doc tests", flush=True)
            p = subprocess.run(["cargo", "test", "--workspace", "--doc"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            passed = failed = 0
            for l in p.stdout.splitlines():
                m = RESULT.match(l)
                if m:
                    passed += int(m.group(2))
                    failed += int(m.group(3))
            if p.returncode != 0:
                failed = max(failed, 1)
                print(p.stdout[-6000:], flush=True)
            r.results.append(("doc tests", time.monotonic() - doc_t0, passed, failed, 0, p.returncode, None))
    finally:
        for l in loops:
            l.kill()
            l.wait()

    wall = time.monotonic() - t_start
    with open(TIMES, "w") as f:
        for name, secs, *_ in r.results:
            f.write(f"{name}\t{secs:.1f}\n")
    print("\ntest-suite: time per test binary (longest first)")
    print(f"  {'binary':<44} {'time':>8}  {'passed':>6} {'failed':>6}")
    for name, secs, passed, failed, ignored, rc, _ in sorted(r.results, key=lambda x: -x[1]):
        print(f"  {name:<44} {secs:7.1f}s  {passed:>6} {failed:>6}")
    total_p = sum(x[2] for x in r.results)
    total_f = sum(x[3] for x in r.results)
    bad = [x[0] for x in r.results if x[5] != 0]
    print(f"\ntest-suite: build {t_build / 60:.1f} min, whole run {wall / 60:.1f} min "
          f"(budget {a.budget_min:.0f} min){' with busy loops' if a.stress else ''}")
    if wall / 60 > a.budget_min:
        print(f"test-suite: over the {a.budget_min:.0f}-minute budget: make the slow binaries above faster "
              "or run more of them in parallel", flush=True)
    if bad:
        print("test-suite: failed: " + ", ".join(bad))
    print(f"tests: {total_p} passed, {total_f} failed", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
