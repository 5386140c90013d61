#!/usr/bin/env bash
# Prepare rootful Podman's Docker-compatible API for the docker provider's tests. Idempotent: every
# step checks first. Run after .ci/docker-setup.sh (it reuses that script's cached base rootfs).
#
#   1. install Debian's podman and catatonit (the init binary behind the provider's `init: True`), and curl;
#   2. write this service's containers.conf (under /var/cache/openenv/podman, never /etc): Podman
#      asks runc for RLIMIT_NOFILE/RLIMIT_NPROC ceilings above this machine's hard limits, which a
#      root without CAP_SYS_RESOURCE (a container, as CI here) may not raise, so no container
#      starts ("error setting rlimit type 7/6: operation not permitted"). The defaults are set to
#      the current hard nofile limit and at most 32768 processes (measured: higher nproc values
#      are refused here even below the shell's hard limit);
#   3. start `podman system service --time=0` on a Unix socket only (no TCP listener), unless it
#      already answers, and wait (bounded) until it does;
#   4. import the base image openenv-base:bookworm into Podman from the rootfs tarball that
#      .ci/docker-setup.sh cached (nothing can be pulled here).
#
# Environment: OPENENV_PODMAN_SOCKET (default /run/podman/podman.sock), OPENENV_PODMAN_WAIT_S
# (default 60), OPENENV_BASE_IMAGE (default openenv-base:bookworm).
# Then: DOCKER_HOST=unix://$OPENENV_PODMAN_SOCKET.
set -euo pipefail

SOCKET="${OPENENV_PODMAN_SOCKET:-/run/podman/podman.sock}"
WAIT_S="${OPENENV_PODMAN_WAIT_S:-60}"
BASE_IMAGE="${OPENENV_BASE_IMAGE:-openenv-base:bookworm}"
CACHE_DIR="/var/cache/openenv"
ROOTFS_TAR="$CACHE_DIR/bookworm-minbase-python3.tar"
CONF_DIR="$CACHE_DIR/podman"
LOG="/tmp/openenv-podman.log"

log() { printf '[podman-setup] %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# -- 1. packages ---------------------------------------------------------------------------------
need_pkgs=()
command -v podman >/dev/null 2>&1 || need_pkgs+=(podman)
command -v catatonit >/dev/null 2>&1 || need_pkgs+=(catatonit)
command -v curl >/dev/null 2>&1 || need_pkgs+=(curl)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
    log "installing ${need_pkgs[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi
log "podman: $(podman --version)"

# -- 2. containers.conf for this service -----------------------------------------------------------
nofile="$(ulimit -Hn)"
nproc="$(ulimit -Hu)"
[ "$nofile" = "unlimited" ] && nofile=1048576
if [ "$nproc" = "unlimited" ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
as_root mkdir -p "$CONF_DIR"
printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\ninit_path = "%s"\n' \
    "$nofile" "$nofile" "$nproc" "$nproc" "$(command -v catatonit)" | as_root tee "$CONF_DIR/containers.conf" >/dev/null
export CONTAINERS_CONF="$CONF_DIR/containers.conf"

# -- 3. the API service ----------------------------------------------------------------------------
api_up() { curl -sf --max-time 5 --unix-socket "$SOCKET" http://podman/_ping >/dev/null 2>&1; }

# The pid of the process serving the socket (ss shows the listener's owner).
service_pid() { ss -xlpn 2>/dev/null | awk -v s="$SOCKET" '$5 == s' | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2; }

# A service left by an earlier run whose working directory has since been deleted (a CI checkout
# removed after its run) answers pings but cannot start any container: conmon inherits the cwd,
# fails "Failed to get working directory", and every start ends "write child: broken pipe". Such a
# service is stopped here and started again below, from /.
if api_up; then
    pid="$(service_pid)"
    if [ -n "$pid" ] && readlink "/proc/$pid/cwd" 2>/dev/null | grep -q ' (deleted)$'; then
        log "the running podman service (pid $pid) works in a deleted folder: restarting it"
        as_root kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    fi
fi

if ! api_up; then
    as_root mkdir -p "$(dirname "$SOCKET")"
    as_root rm -f "$SOCKET"  # a socket file left by a killed service refuses the new bind
    log "starting podman system service on unix://$SOCKET (log: $LOG)"
    # setsid + nohup: the service must outlive this script and the CI shell that ran it; started
    # from / so that its working directory (inherited by every conmon) outlives the checkout.
    # (exec: no subshell lingers beside the service.)
    sudo_if=(); [ "$(id -u)" -eq 0 ] || sudo_if=(sudo)
    (cd / && exec "${sudo_if[@]}" env CONTAINERS_CONF="$CONTAINERS_CONF" setsid nohup podman system service \
        --time=0 "unix://$SOCKET" >>"$LOG" 2>&1 </dev/null) &
    deadline=$((SECONDS + WAIT_S))
    until api_up; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "the podman service did not answer within ${WAIT_S}s; last log lines:"
            tail -n 30 "$LOG" >&2 || true
            exit 1
        fi
        sleep 0.5
    done
fi
log "API up: $(curl -sf --max-time 5 --unix-socket "$SOCKET" http://podman/version | python3 -c 'import json,sys; print(json.load(sys.stdin)["Version"])')"

# -- 4. base image -------------------------------------------------------------------------------
if ! podman image exists "$BASE_IMAGE"; then
    if [ ! -s "$ROOTFS_TAR" ]; then
        log "no cached rootfs $ROOTFS_TAR: run .ci/docker-setup.sh first (it debootstraps it)"
        exit 1
    fi
    log "importing $BASE_IMAGE into podman"
    podman import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' "$ROOTFS_TAR" "$BASE_IMAGE" >/dev/null
fi
log "base image: $BASE_IMAGE ($(podman image inspect -f '{{.Id}}' "$BASE_IMAGE" | cut -c1-12))"
# A container must start under this configuration, or every test after this fails less clearly.
if ! out="$(timeout 60 podman run --rm --network none "$BASE_IMAGE" true 2>&1)"; then
    log "a container does not start under podman here: $out"
    exit 1
fi
log "ready: DOCKER_HOST=unix://$SOCKET"
