#!/usr/bin/env bash
# Installs Debian's nodejs for the Node receiver of docs/receivers.md, which
# tests/test_receivers_doc.py runs (node:crypto alone, no npm package).
# Idempotent: does nothing when /usr/bin/node is already there.
set -euo pipefail

if [ -x /usr/bin/node ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-node: /usr/bin/node is missing and this user cannot run apt-get" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing or stale on a fresh machine.
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends nodejs >/dev/null
test -x /usr/bin/node
echo "install-node: node $(/usr/bin/node --version)"
