#!/usr/bin/env bash
# Installs Debian's nodejs for the Node receiver of docs/receivers.md, which
# tests/test_receivers_doc.py runs (node:crypto alone, no npm package).
# Idempotent: does nothing when /usr/bin/node is already there.
set -euo pipefail

bash "$(dirname "$0")/apt-install.sh" install-node /usr/bin/node nodejs
