#!/usr/bin/env bash
# Install Debian's `docker-registry` (the CNCF distribution registry) for the push tests.
# Idempotent: does nothing when the binary is already there. The tests start their own registry
# on 127.0.0.1 with a config file they write; the package's system service is never enabled.
set -euo pipefail

log() { printf '[registry-setup] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if command -v docker-registry >/dev/null 2>&1; then
    log "docker-registry present: $(command -v docker-registry)"
    exit 0
fi
log "installing docker-registry"
as_root apt-get update -qq
# policy-rc.d 101: the package's post-install must not start a registry listening on :5000.
policy=/usr/sbin/policy-rc.d
created=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
    as_root chmod +x "$policy"
    created=1
fi
DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
[ "$created" -eq 1 ] && as_root rm -f "$policy"
command -v docker-registry >/dev/null 2>&1 || { log "no docker-registry binary after install"; exit 1; }
log "ready: $(command -v docker-registry)"
