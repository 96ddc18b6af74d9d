#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser tests (tests/dashboard/).
# Idempotent: does nothing when /usr/bin/chromium is already there. Never downloads
# a browser build of its own (no `playwright install`): Playwright for Python
# drives this system chromium through executable_path.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-browser: /usr/bin/chromium is missing and this user cannot run apt-get" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing or stale on a fresh machine.
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
test -x /usr/bin/chromium
echo "install-browser: $(/usr/bin/chromium --version 2>/dev/null || echo chromium installed)"
