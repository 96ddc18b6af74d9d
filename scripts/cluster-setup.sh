#!/usr/bin/env bash
# Installs the Debian packages the cluster (make cluster, tests/cluster/) needs beyond
# PostgreSQL 15 and Redis: nftables (the partitions), faketime (the skewed clock),
# iproute2 (ip netns), stress-ng (the CPU hog of `python -m cluster --cpu-hog`); with
# --guides also nginx (below). Idempotent: does nothing when
# they are all there. Needs root (the cluster itself does too); as another user it says
# so and exits 0, and the cluster's test then skips (or fails under CI) naming what is missing.
set -euo pipefail

missing=()
command -v nft >/dev/null 2>&1 || missing+=(nftables)
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ] || command -v faketime >/dev/null 2>&1 || missing+=(faketime)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v stress-ng >/dev/null 2>&1 || missing+=(stress-ng)
# --guides (make guides): nginx and its stream module, which docs/deploy.md installs on the
# web hosts and the balancer (Debian's policy-rc.d, or no systemd, keeps it from starting here).
if [ "${1:-}" = --guides ]; then
    command -v nginx >/dev/null 2>&1 || missing+=(nginx)
    [ -e /usr/lib/nginx/modules/ngx_stream_module.so ] || missing+=(libnginx-mod-stream)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "cluster-setup: ${missing[*]} missing and this user cannot run apt-get" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "cluster-setup: installed ${missing[*]}"
