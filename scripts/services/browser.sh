#!/usr/bin/env bash
# Headless browser for tests/browser: Debian's chromium, driven by playwright (pip, test extra)
# through executable_path, so no browser build is ever downloaded. Idempotent: does nothing when a
# working chromium is on PATH; runs apt-get update only when the package index lacks the package.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && chromium --headless --no-sandbox --version >/dev/null 2>&1; then
  echo "chromium present: $(command -v chromium) ($(chromium --headless --no-sandbox --version 2>/dev/null | head -n 1))"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if ! apt-cache policy chromium 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
chromium --headless --no-sandbox --version
