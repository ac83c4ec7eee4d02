#!/usr/bin/env bash
# Installs everything vecgate's build, tests, demo and benchmarks need on a
# fresh Debian 12 machine. Idempotent: re-running only checks.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

PKGS=(iproute2 iputils-ping ethtool tcpdump tshark iperf3 nftables
      python3-scapy python3-cryptography python3-matplotlib
      openvswitch-switch strongswan-charon strongswan-swanctl
      libcharon-extra-plugins libstrongswan-standard-plugins
      linux-perf cmake clang pkg-config
      lintian prometheus systemd man-db procps frr keepalived)

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
# Python tools (schemathesis) in the project-local .venv.
"$(dirname "$0")/venv.sh" >/dev/null
echo "install-deps: ok"
