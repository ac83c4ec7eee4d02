# vecgate — the two entry points of the README, and the pieces they are made of.
# Run as root (network namespaces, AF_PACKET): `sudo make demo`, `sudo make test`.

CARGO ?= cargo
FUZZ_SECONDS ?= 10

.PHONY: all deps build release demo test lint unit fuzz-smoke bench clean

all: build

deps:
	bash scripts/install-deps.sh

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p vecgate

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

unit:
	$(CARGO) test --workspace --no-fail-fast

fuzz-smoke:
	bash scripts/fuzz.sh run $(FUZZ_SECONDS)

bench: deps release
	bash bench/run.sh

clean:
	$(CARGO) clean
