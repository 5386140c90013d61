#!/usr/bin/env bash
# Debian's bubblewrap for the bwrap provider's tests (plugins/provider-bwrap) and bench/hpc_providers.py.
# Idempotent: nothing is installed when a test sandbox already starts. Exits 1 with the reason
# when the kernel refuses unprivileged user namespaces (the provider cannot work then).
set -euo pipefail

log() { printf '[bwrap-setup] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
probe() { timeout 20 bwrap --unshare-user --unshare-pid --unshare-net --ro-bind / / --proc /proc --dev /dev -- true; }

if ! command -v bwrap >/dev/null; then
    log "installing Debian's bubblewrap"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq
    as_root apt-get install -y -qq --no-install-recommends bubblewrap util-linux >/dev/null
fi
if ! probe; then
    log "bwrap cannot create user namespaces here: enable them (sysctl kernel.unprivileged_userns_clone=1 or user.max_user_namespaces)"
    exit 1
fi
log "bubblewrap ready: $(bwrap --version)"
