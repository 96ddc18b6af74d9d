#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser tests (tests/dashboard/).
# Idempotent: does nothing when /usr/bin/chromium is already there. Never downloads
# a browser build of its own (no `playwright install`): Playwright for Python
# drives this system chromium through executable_path.
set -euo pipefail

bash "$(dirname "$0")/apt-install.sh" install-browser /usr/bin/chromium chromium fonts-dejavu-core
