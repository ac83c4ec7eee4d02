#!/usr/bin/env bash
# Installs everything vecgate's build, tests, demo and benchmarks need on a
# fresh Debian 12 machine. Idempotent: re-running only checks.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

PKGS=(iproute2 iputils-ping ethtool tcpdump tshark iperf3 nftables
      python3-scapy python3-cryptography python3-matplotlib
      openvswitch-switch strongswan-charon strongswan-swanctl
      libcharon-extra-plugins libstrongswan-standard-plugins
      linux-perf cmake clang pkg-config libipsec-mb-dev
      lintian prometheus systemd man-db procps frr keepalived
      etcd-server etcd-client protobuf-compiler libprotobuf-dev
      dpdk librte-net-af-xdp23 librte-mempool-ring23)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  # wireshark-common asks whether non-root may capture; answer no, we are root.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian starts these services on install; vecgate's tests run their own.
for svc in openvswitch-switch strongswan-starter ipsec prometheus frr; do
  systemctl disable --now "$svc" >/dev/null 2>&1 || true
done

# DPDK's testpmd, the reference forwarder of `make bench`'s pps scenario.
# Debian 12 ships the binary only in dpdk-dev, whose
# dependencies pull udev, rdma-core and a systemd upgrade (213 packages).
# The runtime is installed above (dpdk, the AF_XDP driver, the ring mempool
# testpmd's pools need); the binary and the libraries it links that the
# runtime lacks are unpacked, not installed, into /opt/vecgate-dpdk behind
# /usr/local/bin/dpdk-testpmd.
DPDK_DIR=/opt/vecgate-dpdk
DPDK_LIB="$DPDK_DIR/usr/lib/$(uname -m)-linux-gnu"
testpmd_ok() {
  command -v dpdk-testpmd >/dev/null 2>&1 && [ -x "$DPDK_DIR/usr/bin/dpdk-testpmd" ] &&
    ! LD_LIBRARY_PATH="$DPDK_LIB" ldd "$DPDK_DIR/usr/bin/dpdk-testpmd" | grep -q "not found"
}
unpack_testpmd() {
  local tmp
  tmp=$(mktemp -d)
  chown _apt "$tmp" 2>/dev/null || true
  (cd "$tmp" && apt-get download -qq dpdk-dev libibverbs1 ibverbs-providers libnl-route-3-200 \
     librte-bitratestats23 librte-bpf23 librte-bus-auxiliary23 librte-bus-dpaa23 librte-cmdline23 \
     librte-common-dpaax23 librte-common-iavf23 librte-common-mlx5-23 librte-crypto-scheduler23 \
     librte-cryptodev23 librte-eventdev23 librte-gro23 librte-gso23 librte-hash23 librte-ip-frag23 \
     librte-latencystats23 librte-mempool-dpaa23 librte-metrics23 librte-net-bnxt23 librte-net-bond23 \
     librte-net-dpaa23 librte-net-i40e23 librte-net-ice23 librte-net-ixgbe23 librte-net-mlx5-23 \
     librte-pcapng23 librte-pdump23 librte-rcu23 librte-reorder23 librte-sched23 librte-security23 \
     librte-timer23 >/dev/null 2>&1) || { rm -rf "$tmp"; return 1; }
  for f in "$tmp"/*.deb; do dpkg-deb -x "$f" "$DPDK_DIR" || { rm -rf "$tmp"; return 1; }; done
  rm -rf "$tmp"
  printf '#!/bin/sh\n# dpdk-testpmd unpacked by scripts/install-deps.sh (vecgate)\nLD_LIBRARY_PATH=%s exec %s "$@"\n' \
    "$DPDK_LIB" "$DPDK_DIR/usr/bin/dpdk-testpmd" >/usr/local/bin/dpdk-testpmd
  chmod 755 /usr/local/bin/dpdk-testpmd
  testpmd_ok
}
# Benchmarks only: a failure here leaves the testpmd rows out of `make bench`
# (bench.py says so), it does not stop the build or the tests.
if ! testpmd_ok; then
  echo "install-deps: unpacking dpdk-testpmd into $DPDK_DIR"
  unpack_testpmd || echo "install-deps: warning: dpdk-testpmd not usable (make bench runs without it)" >&2
fi

# Rust: stable with rustfmt and clippy for the product, nightly only for cargo-fuzz.
if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps: no cargo on PATH (rustup expected at ~/.cargo/bin)" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal >/dev/null
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "install-deps: installing cargo-fuzz"
  cargo install cargo-fuzz --locked -q
fi
# The Debian package (make deb, and its test in the suite).
if ! cargo deb --version >/dev/null 2>&1; then
  echo "install-deps: installing cargo-deb"
  cargo install cargo-deb --locked -q
fi
# mdBook for `make docs` (the guide, reference and report, built offline).
MDBOOK_VERSION=0.5.4
if ! mdbook --version 2>/dev/null | grep -qF "v$MDBOOK_VERSION"; then
  echo "install-deps: installing mdbook $MDBOOK_VERSION"
  cargo install mdbook --locked --version "$MDBOOK_VERSION" --no-default-features --features search -q
fi
# Python tools (schemathesis) in the project-local .venv.
"$(dirname "$0")/venv.sh" >/dev/null
echo "install-deps: ok"
