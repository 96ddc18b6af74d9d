#!/usr/bin/env bash
# Installs Debian's tinyproxy for the egress-proxy tests (tests/test_egress_proxy.py,
# tests/fault/test_proxy_outage.py): a real CONNECT proxy that each test starts on
# loopback with its own configuration. Only the binary package (tinyproxy-bin): no
# service is enabled or started. Idempotent: does nothing when tinyproxy is there.
set -euo pipefail

if command -v tinyproxy >/dev/null 2>&1; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-proxy: tinyproxy is missing and this user cannot run apt-get" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# Another apt-get may hold the lock for a moment: wait for it rather than fail.
for try in 1 2 3 4 5 6; do
    if $SUDO apt-get update -qq && \
       $SUDO apt-get install -y -qq --no-install-recommends tinyproxy-bin >/dev/null; then
        break
    fi
    echo "install-proxy: apt-get failed (try $try of 6), retrying in 10 s" >&2
    sleep 10
done
command -v tinyproxy >/dev/null
echo "install-proxy: $(tinyproxy -v 2>/dev/null || echo tinyproxy installed)"
