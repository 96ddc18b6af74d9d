#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser tests (tests/dashboard/); run by
# `make test` (make test-packages) and .ci/run. Idempotent: does nothing when
# /usr/bin/chromium is already there. Never downloads a browser build of its own (no
# `playwright install`): Playwright for Python drives this system chromium through
# executable_path. When it cannot install (not root and no passwordless sudo, no apt-get,
# apt-get failing) it says so and exits 0: the browser tests then skip naming what is
# missing, and fail under CI.
set -euo pipefail

bash "$(dirname "$0")/apt-install.sh" install-browser /usr/bin/chromium chromium fonts-dejavu-core
