#!/usr/bin/env bash
# Prepare a real Docker engine for the docker-marked tests. Idempotent: every step checks first.
#
#   1. install Debian's docker.io and debootstrap if missing;
#   2. start dockerd in the background (log: /tmp/openenv-dockerd.log) unless a daemon answers, with
#      --ip 127.0.0.1 so that every published port without an explicit address (Swarm host-mode
#      ports have none) binds to loopback only;
#   3. wait (bounded) until the socket answers;
#   4. create the base image openenv-base:bookworm offline (no registry can be pulled from here):
#      debootstrap a minimal bookworm with python3 + venv, cached as a tarball under
#      /var/cache/openenv/ so later runs on the same machine skip the 2-3 minute debootstrap;
#   5. make this engine a one-node Swarm manager (advertised on 127.0.0.1 only);
#   6. make openenv-base:bookworm-git, the base plus Debian's git, for envs whose commands need it (the
#      shell env), cached as an image tarball under /var/cache/openenv/ too.
#
# gVisor, opt-in (OPENENV_DOCKER_GVISOR=1): install Debian's runsc and have a dockerd started here
# register it as the runtime "runsc", so that envs whose manifest declares sandbox.gvisor (coding,
# shell) run under it. Off by default: Debian bookworm's runsc (20221219) needs --network=host on
# current kernels (its netstack refuses to start) and lets every uid read /proc/<pid>/environ, so
# the env's token is readable by sandboxed code there (measured; /metadata says so). An engine that
# is already running is left as it is.
#
# Environment: OPENENV_BASE_IMAGE (default openenv-base:bookworm), OPENENV_GIT_BASE_IMAGE (default
# openenv-base:bookworm-git), OPENENV_DOCKERD_WAIT_S (default 60), OPENENV_DOCKER_GVISOR (default 0).
set -euo pipefail

BASE_IMAGE="${OPENENV_BASE_IMAGE:-openenv-base:bookworm}"
GIT_BASE_IMAGE="${OPENENV_GIT_BASE_IMAGE:-openenv-base:bookworm-git}"
CACHE_DIR="/var/cache/openenv"
ROOTFS_TAR="$CACHE_DIR/bookworm-minbase-python3.tar"
GIT_BASE_TAR="$CACHE_DIR/bookworm-minbase-python3-git.image.tar"
DOCKERD_LOG="/tmp/openenv-dockerd.log"
WAIT_S="${OPENENV_DOCKERD_WAIT_S:-60}"

log() { printf '[docker-setup] %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# -- 1. packages ---------------------------------------------------------------------------------
need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
if [ "${OPENENV_DOCKER_GVISOR:-0}" = "1" ]; then
    command -v runsc >/dev/null 2>&1 || need_pkgs+=(runsc)
fi
if [ "${#need_pkgs[@]}" -gt 0 ]; then
    log "installing ${need_pkgs[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi
command -v docker >/dev/null 2>&1 || { log "no docker CLI after install"; exit 1; }

# -- 2./3. daemon --------------------------------------------------------------------------------
engine_up() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if ! engine_up; then
    if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST}" != "unix:///var/run/docker.sock" ]; then
        log "DOCKER_HOST=${DOCKER_HOST} does not answer; not starting a local dockerd for it"
        exit 1
    fi
    # A daemon killed earlier (CI ends everything a session left running) leaves pid files behind;
    # dockerd refuses to start, or waits for a "running" containerd, if they name a dead process.
    for pidfile in /var/run/docker.pid /var/run/docker/containerd/containerd.pid; do
        [ -f "$pidfile" ] || continue
        pid="$(cat "$pidfile" 2>/dev/null || true)"
        state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
        if [ -z "$pid" ] || [ -z "$state" ] || [ "$state" = "Z" ]; then
            as_root rm -f "$pidfile"
        fi
    done
    runtimes=()
    if [ "${OPENENV_DOCKER_GVISOR:-0}" = "1" ] && command -v runsc >/dev/null 2>&1; then
        # dockerd's --add-runtime takes no arguments: a wrapper adds --network=host (see above).
        as_root mkdir -p "$CACHE_DIR"
        printf '#!/bin/sh\nexec %s --network=host "$@"\n' "$(command -v runsc)" | as_root tee "$CACHE_DIR/runsc" >/dev/null
        as_root chmod 0755 "$CACHE_DIR/runsc"
        runtimes=(--add-runtime "runsc=$CACHE_DIR/runsc")
    fi
    log "starting dockerd (log: $DOCKERD_LOG)${runtimes:+ with the runsc runtime (gVisor)}"
    # setsid + nohup: the daemon must outlive this script and the CI shell that ran it.
    # From /, so that its working directory outlives the checkout that started it.
    sudo_if=(); [ "$(id -u)" -eq 0 ] || sudo_if=(sudo)
    (cd / && exec "${sudo_if[@]}" setsid nohup dockerd --ip 127.0.0.1 "${runtimes[@]}" >>"$DOCKERD_LOG" 2>&1 </dev/null) &
    deadline=$((SECONDS + WAIT_S))
    until engine_up; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "dockerd did not answer within ${WAIT_S}s; last log lines:"
            tail -n 30 "$DOCKERD_LOG" >&2 || true
            exit 1
        fi
        sleep 0.5
    done
fi
log "engine up: $(docker version --format '{{.Server.Version}}')"

# -- 4. base image -------------------------------------------------------------------------------
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    if [ ! -s "$ROOTFS_TAR" ]; then
        log "debootstrapping a minimal bookworm with python3 (2-3 minutes, cached afterwards)"
        as_root mkdir -p "$CACHE_DIR"
        rootfs="$(mktemp -d /tmp/openenv-rootfs.XXXXXX)"
        trap 'as_root rm -rf "$rootfs"' EXIT
        as_root debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
            bookworm "$rootfs" >/tmp/openenv-debootstrap.log 2>&1 || {
            log "debootstrap failed; see /tmp/openenv-debootstrap.log"; tail -n 20 /tmp/openenv-debootstrap.log >&2; exit 1; }
        # Trim what an env server never needs (apt lists, docs, caches) to keep the image small.
        as_root rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
            "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
        # Write to a temporary name first so an interrupted run never leaves a truncated cache.
        as_root tar -C "$rootfs" -cf "$ROOTFS_TAR.partial" .
        as_root mv "$ROOTFS_TAR.partial" "$ROOTFS_TAR"
        as_root rm -rf "$rootfs"
        trap - EXIT
    else
        log "using cached rootfs $ROOTFS_TAR"
    fi
    log "importing $BASE_IMAGE"
    docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' "$ROOTFS_TAR" "$BASE_IMAGE" >/dev/null
fi
log "base image: $BASE_IMAGE ($(docker image inspect -f '{{.Id}}' "$BASE_IMAGE" | cut -c1-19))"

# -- 5. swarm ------------------------------------------------------------------------------------
# Swarm tasks on overlay networks publish host-mode ports through docker_gwbridge, which ignores
# dockerd's --ip. Docker lets this bridge be created by hand before `swarm init`; ours binds
# published ports to 127.0.0.1 and gives tasks no NAT to the outside (like the docker provider's
# isolated network). It can only be replaced while the node is outside a swarm.
GWBRIDGE_OPTS=(
    --opt com.docker.network.bridge.name=docker_gwbridge
    --opt com.docker.network.bridge.enable_icc=false
    --opt com.docker.network.bridge.enable_ip_masquerade=false
    --opt com.docker.network.bridge.host_binding_ipv4=127.0.0.1
)
gwbridge_ok() {
    docker network inspect docker_gwbridge \
        --format '{{index .Options "com.docker.network.bridge.host_binding_ipv4"}}' 2>/dev/null \
        | grep -qx 127.0.0.1
}
swarm_state() { docker info --format '{{.Swarm.LocalNodeState}}/{{.Swarm.ControlAvailable}}' 2>/dev/null || echo unknown; }

state="$(swarm_state)"
if [ "${state%%/*}" = "active" ] && ! gwbridge_ok; then
    if [ "$(docker service ls -q | wc -l)" -eq 0 ] && [ "$state" = "active/true" ] \
        && [ "$(docker node ls -q | wc -l)" -eq 1 ]; then
        log "re-creating this one-node, empty swarm with a loopback-only docker_gwbridge"
        docker swarm leave --force >/dev/null
        state="inactive/false"
    else
        log "warning: docker_gwbridge publishes Swarm ports on every interface and this swarm is in use;"
        log "         not touching it (see plugins/provider-swarm/README.md, 'Keeping ports on loopback')"
    fi
fi
if [ "${state%%/*}" != "active" ]; then
    if ! gwbridge_ok; then
        docker network rm docker_gwbridge >/dev/null 2>&1 || true
        docker network create "${GWBRIDGE_OPTS[@]}" docker_gwbridge >/dev/null
    fi
    log "initialising a one-node swarm on 127.0.0.1"
    docker swarm init --advertise-addr 127.0.0.1 --listen-addr 127.0.0.1:2377 >/dev/null
elif [ "$state" != "active/true" ]; then
    log "this engine is in a swarm but not a manager ($state); swarm tests will skip"
fi
log "swarm: $(docker info --format '{{.Swarm.LocalNodeState}}')"

# -- 6. base image with git ----------------------------------------------------------------------
# Built once from the base with Debian's git (network to the Debian mirror, like debootstrap), then
# saved: later runs on this machine load the tarball instead, offline.
if ! docker image inspect "$GIT_BASE_IMAGE" >/dev/null 2>&1; then
    if [ -s "$GIT_BASE_TAR" ]; then
        log "loading cached $GIT_BASE_IMAGE"
        docker load -i "$GIT_BASE_TAR" >/dev/null
    else
        log "making $GIT_BASE_IMAGE ($BASE_IMAGE plus git; about a minute, cached afterwards)"
        ctx="$(mktemp -d /tmp/openenv-git-base.XXXXXX)"
        printf '%s\n' "FROM $BASE_IMAGE" \
            "RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git >/dev/null && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/*" \
            >"$ctx/Dockerfile"
        docker build -q -t "$GIT_BASE_IMAGE" "$ctx" >/dev/null
        rm -rf "$ctx"
        as_root mkdir -p "$CACHE_DIR"
        docker save -o "$GIT_BASE_TAR.partial" "$GIT_BASE_IMAGE" && as_root mv "$GIT_BASE_TAR.partial" "$GIT_BASE_TAR"
    fi
fi
log "git base image: $GIT_BASE_IMAGE ($(docker image inspect -f '{{.Id}}' "$GIT_BASE_IMAGE" | cut -c1-19))"
log "runtimes: $(docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}')"
log "ready"
