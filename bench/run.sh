#!/usr/bin/env bash
# `make bench`: the whole benchmark suite, written to docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/bench.py "$@"
