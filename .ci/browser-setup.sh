#!/usr/bin/env bash
# Install Debian's Chromium for the browser-marked tests (plugins/web) and bench/web.py.
# Idempotent: nothing is installed when /usr/bin/chromium already runs. Playwright drives this
# system browser; it never downloads one of its own (no `playwright install`).
set -euo pipefail

log() { printf '[browser-setup] %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if [ -x /usr/bin/chromium ] && /usr/bin/chromium --headless --no-sandbox --version >/dev/null 2>&1; then
    log "chromium present: $(/usr/bin/chromium --version 2>/dev/null)"
    exit 0
fi

log "installing Debian's chromium"
export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -qq
as_root apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
/usr/bin/chromium --headless --no-sandbox --version >/dev/null 2>&1 || {
    log "chromium was installed but does not start"; exit 1; }
log "chromium ready: $(/usr/bin/chromium --version 2>/dev/null)"
