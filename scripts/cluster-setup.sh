#!/usr/bin/env bash
# Installs the Debian packages the cluster (make cluster, tests/cluster/) needs beyond
# PostgreSQL 15 and Redis: nftables (the partitions), faketime (the skewed clock, also
# tests/test_clock.py), iproute2 (ip netns); with --guides also nginx, with --cpu-hog
# stress-ng (below). Run by
# `make test` (make test-packages), .ci/run and make cluster. Idempotent: does nothing when
# they are all there. Needs root (the cluster itself does too); as another user, or
# without apt-get, it says so and exits 0, and the tests that need them then skip (or fail
# under CI) naming what is missing.
set -euo pipefail

missing=()
command -v nft >/dev/null 2>&1 || missing+=(nftables)
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ] || command -v faketime >/dev/null 2>&1 || missing+=(faketime)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# --guides (make guides): nginx and its stream module, which docs/deploy.md installs on the
# web hosts and the balancer (Debian's policy-rc.d, or no systemd, keeps it from starting here).
# --cpu-hog (make cluster CLUSTER_ARGS=--cpu-hog): stress-ng, the spinning neighbours of
# `python -m cluster --cpu-hog`.
for option in "$@"; do
    case "$option" in
    --guides)
        command -v nginx >/dev/null 2>&1 || missing+=(nginx)
        [ -e /usr/lib/nginx/modules/ngx_stream_module.so ] || missing+=(libnginx-mod-stream)
        ;;
    --cpu-hog)
        command -v stress-ng >/dev/null 2>&1 || missing+=(stress-ng)
        ;;
    *)
        echo "cluster-setup: unknown option $option (known: --guides, --cpu-hog)" >&2
        exit 2
        ;;
    esac
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "cluster-setup: ${missing[*]} missing and this user cannot run apt-get" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "cluster-setup: ${missing[*]} missing and apt-get is not here" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "cluster-setup: installed ${missing[*]}"
