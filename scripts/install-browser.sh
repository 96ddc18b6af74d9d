#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser tests (tests/dashboard/); run by
# `make test` (make test-packages) and .ci/run. Idempotent: does nothing when
# /usr/bin/chromium is already there. Never downloads a browser build of its own (no
# `playwright install`): Playwright for Python drives this system chromium through
# executable_path. When it cannot install (not root and no passwordless sudo, no apt-get,
# apt-get failing) it says so and exits 0: the browser tests then skip naming what is
# missing, and fail under CI.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    exit 0
fi

cannot() {
    echo "install-browser: /usr/bin/chromium is missing and $1; the browser tests will skip" \
         "(run as root: bash scripts/install-browser.sh)" >&2
    exit 0
}

command -v apt-get >/dev/null 2>&1 || cannot "apt-get is not here (install Debian's chromium package, or Chromium at /usr/bin/chromium, by hand)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        cannot "this user cannot run apt-get"
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing or stale on a fresh machine.
$SUDO apt-get update -qq || cannot "apt-get update failed"
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null \
    || cannot "apt-get install failed"
[ -x /usr/bin/chromium ] || cannot "apt-get installed no /usr/bin/chromium"
echo "install-browser: $(/usr/bin/chromium --version 2>/dev/null || echo chromium installed)"
