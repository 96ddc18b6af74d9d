#!/usr/bin/env bash
# Installs Debian's nodejs for the Node receiver of docs/receivers.md, which
# tests/test_receivers_doc.py runs (node:crypto alone, no npm package); run by `make test`
# (make test-packages) and .ci/run. Idempotent: does nothing when /usr/bin/node is there.
# When it cannot install it says so and exits 0: that test then skips, and fails under CI.
set -euo pipefail

bash "$(dirname "$0")/apt-install.sh" install-node /usr/bin/node nodejs
