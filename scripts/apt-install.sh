#!/usr/bin/env bash
# apt-install.sh NAME PROGRAM PACKAGE...: installs the Debian PACKAGEs unless PROGRAM (a
# command, or the path of an executable) is already there; NAME starts its messages. Used by
# the install-*.sh scripts that `make test` (make test-packages) and .ci/run call.
# Idempotent. When it cannot install (not root and no passwordless sudo, no apt-get,
# apt-get failing) it says so and exits 0: the tests that need PROGRAM then skip naming
# what is missing, and fail under CI.
set -euo pipefail

name=$1
program=$2
shift 2

present() { command -v "$program" >/dev/null 2>&1; }

if present; then
    exit 0
fi

cannot() {
    echo "$name: $program is missing and $1; the tests that need it will skip" \
         "(run as root: bash scripts/$name.sh)" >&2
    exit 0
}

command -v apt-get >/dev/null 2>&1 || cannot "apt-get is not here (install $* by hand)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        cannot "this user cannot run apt-get"
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing or stale on a fresh machine, and another apt-get may
# hold the lock for a moment: wait for it rather than fail at once.
for try in 1 2 3 4 5 6; do
    if $SUDO apt-get update -qq && \
       $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
        break
    fi
    [ "$try" -lt 6 ] || cannot "apt-get install $* failed"
    echo "$name: apt-get failed (try $try of 6), retrying in 10 s" >&2
    sleep 10
done
present || cannot "apt-get install $* did not bring it"
echo "$name: installed $*"
