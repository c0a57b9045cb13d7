#!/usr/bin/env bash
# What drydock's tests need beyond Rust and a Docker engine, installed once
# and checked before the tests run (the tests themselves only check, and
# name this script when something is missing):
#   - docker-compose (Debian's), for the deploy tests;
#   - ip and nsenter (iproute2, util-linux), for the second engine of the
#     Swarm and many-hosts tests, in a network namespace of its own;
#   - chromium and chromium-driver (Debian's), for the console test;
#   - python3 with venv, and two virtualenvs under target/: the `mcp` SDK
#     (the MCP test's client) and schemathesis (the API fuzz test);
#   - docker-registry (Debian's), a real registry on loopback.
# Each is skipped when present. Installing from Debian's packages needs
# root (CI runs as root); without it, the script says what to install.
# Usage: scripts/test-env.sh [--check]   (--check installs nothing)
set -euo pipefail
cd "$(dirname "$0")/.."

# The Python clients' versions; the tests read the same pins from here.
MCP_REQUIREMENT='mcp>=2.3,<3'
SCHEMATHESIS_REQUIREMENT='schemathesis>=4,<5'

check_only=false
[ "${1:-}" = "--check" ] && check_only=true

missing_packages=()
need_package() { # need_package PACKAGE COMMAND-THAT-SHOWS-IT
  if ! eval "$2" >/dev/null 2>&1; then missing_packages+=("$1"); fi
}
need_package docker-compose 'command -v docker-compose'
need_package iproute2 'command -v ip'
need_package util-linux 'command -v nsenter'
need_package openssh-client 'command -v ssh-agent && command -v ssh-keygen'
need_package chromium 'test -x /usr/bin/chromium'
need_package chromium-driver 'command -v chromedriver'
need_package python3-venv 'python3 -c "import ensurepip, venv"'
need_package docker-registry 'test -x /usr/bin/docker-registry'

if [ ${#missing_packages[@]} -gt 0 ]; then
  if $check_only; then
    echo "test-env: missing ${missing_packages[*]}: run scripts/test-env.sh (as root)" >&2
    exit 1
  fi
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "test-env: missing ${missing_packages[*]}; install them (Debian: sudo apt-get install ${missing_packages[*]}) or run this script as root" >&2
    exit 1
  fi
  echo "test-env: installing ${missing_packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing_packages[@]}" >/dev/null
  # Debian's docker-registry package starts a registry on port 5000 as a
  # service; the tests start their own on a free port, so stop that one.
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now docker-registry >/dev/null 2>&1 || true
  fi
fi

venv() { # venv NAME REQUIREMENT MODULE
  local dir="target/$1"
  if "$dir/bin/python" -c "import $3" >/dev/null 2>&1; then return 0; fi
  if $check_only; then
    echo "test-env: no $dir with $2: run scripts/test-env.sh" >&2
    exit 1
  fi
  echo "test-env: making $dir with $2"
  python3 -m venv "$dir"
  "$dir/bin/python" -m pip install -q "$2"
  "$dir/bin/python" -c "import $3"
}
mkdir -p target
venv mcp-venv "$MCP_REQUIREMENT" mcp
venv api-venv "$SCHEMATHESIS_REQUIREMENT" schemathesis

echo "test-env: ready"
