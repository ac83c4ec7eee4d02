# vecgate — the two entry points of the README, and the pieces they are made of.
# Run as root (network namespaces, AF_PACKET): `sudo make demo`, `sudo make test`.

CARGO ?= cargo
FUZZ_SECONDS ?= 10

.PHONY: all deps build release floor deb demo test test-stress lint unit fuzz-smoke bench bench-ha testpmd-selftest docs reference clean

all: build

deps:
	bash scripts/install-deps.sh

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p vecgate

# The I/O floor the benchmarks measure vecgate against, and the memcpy
# bandwidth they open with (crates/io/src/floor.rs).
floor:
	$(CARGO) build --release -p vecgate-io --bin vecgate-floor

# The Debian package (cargo-deb): target/debian/vecgate_VERSION_ARCH.deb with
# the vecgate@.service unit, /etc/vecgate/vecgate.toml, man pages, completions.
deb: deps release
	bash scripts/deb.sh target/release/vecgate target/debian

# The demo: a real multi-site topology in network namespaces with traffic
# flowing through vecgate, ending with a results table.
demo: deps release
	bash scripts/demo.sh

# The whole test suite: installs what it needs, then lints, unit, property,
# namespace/interop tests, and a short fuzz run of every target.
test: deps lint unit fuzz-smoke

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Every test binary of the workspace (unit, property, namespace and interop
# tests), independent binaries in parallel, each one's time shown, then the
# doc tests; see scripts/test_suite.py.
unit:
	python3 scripts/test_suite.py

# The same tests beside one busy loop per core: a test that fails only on a
# loaded machine is a broken test.
test-stress: deps
	python3 scripts/test_suite.py --stress

fuzz-smoke:
	bash scripts/fuzz.sh run $(FUZZ_SECONDS)

bench: deps release floor
	bash bench/run.sh

# DPDK testpmd, the pps scenario's reference forwarder: fails loudly when
# its setup is broken (no ping through it, no frames crossing it).
testpmd-selftest: deps release floor
	/usr/bin/python3 bench/testpmd_selftest.py

# HA failover gap: vecgate pairs with GRE and with static ESP (state sync)
# next to Linux routers with keepalived, default timers, kill -9 and planned
# switchover, medians of 5 (~6 min).
bench-ha: deps release
	/usr/bin/python3 bench/ha_failover.py

# The user guide, the reference and the benchmark report as a site in
# target/book (mdBook, installed by `make deps`; no network needed).
docs:
	mdbook build

# The reference pages generated from the code (every key, verb, metric and
# REST path); the test suite fails when they differ from what this writes.
reference:
	$(CARGO) run -q -p vecgate -- gen-reference docs/reference

clean:
	$(CARGO) clean
