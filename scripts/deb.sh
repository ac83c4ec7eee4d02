#!/usr/bin/env bash
# Builds the Debian package (cargo-deb, metadata in crates/vecgate/Cargo.toml)
# from an already built vecgate binary, with the man pages and shell
# completions that binary generates from its own CLI definitions.
#
#   scripts/deb.sh [BINARY] [OUTDIR]   # defaults: target/release/vecgate target/debian
#
# `make deb` passes the release binary; the package test passes the debug
# one (same metadata, no second build inside the test suite).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/vecgate}")
OUT=$(realpath -m "${2:-target/debian}")
[ -x "$BIN" ] || { echo "deb: $BIN missing (make release)" >&2; exit 1; }
command -v cargo-deb >/dev/null || { echo "deb: cargo-deb missing (make deps)" >&2; exit 1; }
# cargo-deb reads the binary and generated files from "target/release/":
# a staging target directory makes that the binary given.
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/vecgate-deb.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/release" "$OUT"
cp "$BIN" "$STAGE/release/vecgate"
"$BIN" gen-man "$STAGE/release/deb-gen/man"
gzip -9n "$STAGE"/release/deb-gen/man/*.1
"$BIN" gen-completions "$STAGE/release/deb-gen/completions"
# DEB_FAST=1: gzip instead of xz (the test suite, not for shipping).
CARGO_TARGET_DIR="$STAGE" cargo deb -p vecgate --no-build --strip ${DEB_FAST:+--fast} -o "$OUT"
