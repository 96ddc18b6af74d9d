#!/usr/bin/env bash
# apt-install.sh NAME PROGRAM PACKAGE...: installs the Debian PACKAGEs unless PROGRAM (a
# command, or the path of an executable) is already there. NAME starts its messages.
# Idempotent; used by the install-*.sh scripts that .ci/run calls before the tests.
set -euo pipefail

name=$1
program=$2
shift 2

present() { command -v "$program" >/dev/null 2>&1; }

if present; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "$name: $program is missing and this user cannot run apt-get" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing or stale on a fresh machine, and another apt-get may
# hold the lock for a moment: wait for it rather than fail.
for try in 1 2 3 4 5 6; do
    if $SUDO apt-get update -qq && \
       $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
        break
    fi
    echo "$name: apt-get failed (try $try of 6), retrying in 10 s" >&2
    sleep 10
done
present || { echo "$name: $program is still missing after apt-get install $*" >&2; exit 1; }
echo "$name: installed $*"
