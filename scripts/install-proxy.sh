#!/usr/bin/env bash
# Installs Debian's tinyproxy for the egress-proxy tests (tests/test_egress_proxy.py,
# tests/fault/test_proxy_outage.py): a real CONNECT proxy that each test starts on
# loopback with its own configuration. Only the binary package (tinyproxy-bin): no
# service is enabled or started. Idempotent: does nothing when tinyproxy is there. When it
# cannot install it says so and exits 0: those tests then skip, and fail under CI.
set -euo pipefail

bash "$(dirname "$0")/apt-install.sh" install-proxy tinyproxy tinyproxy-bin
