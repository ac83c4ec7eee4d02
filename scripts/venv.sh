#!/bin/sh
# Project-local Python tools in .venv (schemathesis for the API tests).
# Usage: scripts/venv.sh   (idempotent; prints the venv's bin directory)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV="$ROOT/.venv"
SCHEMATHESIS_VERSION=4.32.5
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/st" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
  "$VENV/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi
echo "$VENV/bin"
