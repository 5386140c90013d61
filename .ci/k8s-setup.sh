#!/usr/bin/env bash
# Build (once) and start a real one-node Kubernetes control plane on 127.0.0.1 for the
# kubernetes-marked tests. Idempotent: every step checks first; binaries and the source tree are
# cached outside the repository under /var/cache/openenv/k8s/.
#
#   1. add a deb-src entry for bookworm, install golang-go rsync jq etcd-server (and openssl);
#   2. `apt-get source kubernetes` (Debian's 1.20.2, vendored Go dependencies, builds offline);
#   3. `make WHAT=cmd/<component>` for kube-apiserver, kube-controller-manager, kube-scheduler,
#      kubelet; copy the binaries into /var/cache/openenv/k8s/bin (skipped when they exist);
#   4. (`start`) generate a CA, serving and admin client certificates and service-account keys,
#      start etcd, the API server, the controller manager and the scheduler (all on 127.0.0.1),
#      write an admin kubeconfig to /var/cache/openenv/k8s/kubeconfig, wait (bounded) for /readyz;
#   5. start a real kubelet on the local Docker engine (dockershim; pause image compiled from the
#      source tree's build/pause and `docker import`-ed), node name 127.0.0.1; wait until Ready.
#
# Usage: .ci/k8s-setup.sh [build|start|control-plane|stop|status]   (default: build then start)
# Logs: /tmp/openenv-k8s-<component>.log. PIDs: /var/cache/openenv/k8s/run/pids (one "name pid" a line).
set -euo pipefail

K8S_DIR="${OPENENV_K8S_DIR:-/var/cache/openenv/k8s}"
SRC_DIR="$K8S_DIR/src"
BIN_DIR="$K8S_DIR/bin"
RUN_DIR="$K8S_DIR/run"
PKI_DIR="$K8S_DIR/pki"
PID_FILE="$RUN_DIR/pids"
KUBECONFIG_OUT="$K8S_DIR/kubeconfig"
API_PORT="${OPENENV_K8S_API_PORT:-16443}"
ETCD_CLIENT_PORT="${OPENENV_K8S_ETCD_PORT:-12379}"
ETCD_PEER_PORT="$((ETCD_CLIENT_PORT + 1))"
WAIT_S="${OPENENV_K8S_WAIT_S:-90}"
COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet)

log() { printf '[k8s-setup] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# -- 1. packages ---------------------------------------------------------------------------------
install_packages() {
    local sources=/etc/apt/sources.list.d/debian.sources
    local srcfile=/etc/apt/sources.list.d/openenv-debian-src.sources
    if [ ! -f "$srcfile" ] && ! grep -q '^Types:.*deb-src' "$sources" 2>/dev/null; then
        log "adding a deb-src entry for bookworm ($srcfile)"
        # The first stanza of debian.sources is the main archive; copy it with Types: deb-src.
        awk 'BEGIN{RS=""; ORS="\n\n"} NR==1{sub(/Types: deb/, "Types: deb-src"); print}' "$sources" \
            | as_root tee "$srcfile" >/dev/null
        as_root apt-get update -qq
    fi
    local need=()
    command -v go >/dev/null 2>&1 || need+=(golang-go)
    command -v rsync >/dev/null 2>&1 || need+=(rsync)
    command -v jq >/dev/null 2>&1 || need+=(jq)
    command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
    command -v openssl >/dev/null 2>&1 || need+=(openssl)
    command -v dpkg-source >/dev/null 2>&1 || need+=(dpkg-dev)
    # The kubelet's dockershim port-forward runs `nsenter ... socat` in the Pod's network namespace.
    command -v socat >/dev/null 2>&1 || need+=(socat)
    command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
    command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
    if [ "${#need[@]}" -gt 0 ]; then
        log "installing ${need[*]}"
        as_root apt-get update -qq
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends \
            "${need[@]}" >/tmp/openenv-k8s-apt.log 2>&1 || {
            log "apt-get install failed; see /tmp/openenv-k8s-apt.log"; tail -n 20 /tmp/openenv-k8s-apt.log >&2; exit 1; }
    fi
}

# -- 2./3. source and binaries -------------------------------------------------------------------
# Bump when the build changes (binaries cached by an older build of this script are rebuilt).
BUILD_STAMP="$BIN_DIR/.built-with-reflect2-1.0.2"
KUBELET_STAMP="$BIN_DIR/.kubelet-sandbox-oom-adj-0"

have_binaries() {
    local c
    [ -f "$BUILD_STAMP" ] && [ -f "$KUBELET_STAMP" ] || return 1
    for c in "${COMPONENTS[@]}"; do [ -x "$BIN_DIR/$c" ] || return 1; done
}

# Kubernetes 1.20 vendors github.com/modern-go/reflect2 v1.0.1, whose unsafe map iteration does not
# match the runtime of Go >= 1.18 (bookworm has 1.19): the API server dies within minutes with
# "fatal error: fault ... aeshashbody ... runtime.mapiternext". reflect2 v1.0.2 fixed exactly that,
# and Debian packages it (golang-github-modern-go-reflect2-dev): its sources replace the vendored
# copy (the same API; go.mod/modules.txt keep naming v1.0.1, which -mod=vendor accepts).
patch_tree() {
    local tree="$1" stamp="$1/.openenv-reflect2-1.0.2"
    [ -f "$stamp" ] && return 0
    local debian_src=/usr/share/gocode/src/github.com/modern-go/reflect2
    if [ ! -f "$debian_src/go_above_118.go" ]; then
        log "installing golang-github-modern-go-reflect2-dev (reflect2 1.0.2, for Go >= 1.18)"
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends \
            golang-github-modern-go-reflect2-dev >>/tmp/openenv-k8s-apt.log 2>&1
    fi
    log "replacing the vendored reflect2 v1.0.1 with Debian's 1.0.2 in $tree"
    rm -rf "$tree/vendor/github.com/modern-go/reflect2"
    mkdir -p "$tree/vendor/github.com/modern-go/reflect2"
    find "$debian_src" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' -o -name LICENSE \) ! -name '*_test.go' \
        -exec cp {} "$tree/vendor/github.com/modern-go/reflect2/" \;
    touch "$stamp"
}

# dockershim gives every Pod sandbox (pause container) oom_score_adj -998, and this machine's
# container runtime may not lower a score below its own (0): runc then fails with "can't get final
# child's PID from pipe: EOF" and no Pod ever starts. Where lowering is refused (probed with a
# tiny container), the sandbox keeps the default score 0 instead. (Guaranteed-QoS containers,
# -997, would fail the same way; the provider's defaults make Burstable Pods.)
patch_sandbox_oom() {
    local tree="$1" stamp="$1/.openenv-sandbox-oom-adj-0"
    [ -f "$stamp" ] && return 0
    pause_image
    local probe
    probe="$(docker create --oom-score-adj=-998 "$PAUSE_IMAGE")"
    if docker start "$probe" >/dev/null 2>&1; then
        docker rm -f "$probe" >/dev/null
        touch "$stamp"; return 0  # lowering works here: keep upstream's value
    fi
    docker rm -f "$probe" >/dev/null
    log "this runtime refuses a negative oom_score_adj: Pod sandboxes get 0 (patching dockershim)"
    sed -i 's/defaultSandboxOOMAdj int = -998/defaultSandboxOOMAdj int = 0/' \
        "$tree/pkg/kubelet/dockershim/docker_sandbox.go"
    grep -q 'defaultSandboxOOMAdj int = 0' "$tree/pkg/kubelet/dockershim/docker_sandbox.go" || {
        log "could not patch pkg/kubelet/dockershim/docker_sandbox.go"; exit 1; }
    touch "$stamp"
}

build() {
    if have_binaries; then
        log "binaries cached in $BIN_DIR"
        return 0
    fi
    install_packages
    as_root mkdir -p "$SRC_DIR" "$BIN_DIR"
    local tree
    tree="$(find "$SRC_DIR" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes-*' | head -n 1)"
    if [ -z "$tree" ]; then
        log "fetching Debian's kubernetes source package into $SRC_DIR"
        (cd "$SRC_DIR" && apt-get source -qq kubernetes >/tmp/openenv-k8s-source.log 2>&1) || {
            log "apt-get source failed; see /tmp/openenv-k8s-source.log"; tail -n 20 /tmp/openenv-k8s-source.log >&2; exit 1; }
        tree="$(find "$SRC_DIR" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes-*' | head -n 1)"
    fi
    patch_tree "$tree"
    patch_sandbox_oom "$tree"
    [ -f "$BUILD_STAMP" ] || rm -f "$BIN_DIR"/kube*
    [ -f "$KUBELET_STAMP" ] || rm -f "$BIN_DIR/kubelet"
    local c out what=()
    for c in "${COMPONENTS[@]}"; do [ -x "$BIN_DIR/$c" ] || what+=("cmd/$c"); done
    log "building ${what[*]} in $tree (log: /tmp/openenv-k8s-build.log; ~10 min for the API server on 2 cores)"
    # The Debian tree vendors every dependency: nothing is downloaded (GOPROXY=off, -mod=vendor).
    (cd "$tree" && GOFLAGS=-mod=vendor GO111MODULE=on GOPROXY=off KUBE_BUILD_PLATFORMS=linux/amd64 \
        make WHAT="${what[*]}" >/tmp/openenv-k8s-build.log 2>&1) || {
        log "the build failed; see /tmp/openenv-k8s-build.log"; tail -n 30 /tmp/openenv-k8s-build.log >&2; exit 1; }
    for c in "${COMPONENTS[@]}"; do
        [ -x "$BIN_DIR/$c" ] && continue
        out="$tree/_output/local/bin/linux/amd64/$c"
        [ -x "$out" ] || out="$(find "$tree/_output" -type f -name "$c" -perm -u+x | head -n 1)"
        [ -n "$out" ] || { log "make succeeded but no $c binary under $tree/_output"; exit 1; }
        install -m 0755 "$out" "$BIN_DIR/$c.partial" && mv "$BIN_DIR/$c.partial" "$BIN_DIR/$c"
    done
    touch "$BUILD_STAMP" "$KUBELET_STAMP"
    log "binaries: $(ls "$BIN_DIR" | tr '\n' ' ')"
}

# -- 4. control plane ----------------------------------------------------------------------------
source_tree() { find "$SRC_DIR" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes-*' | head -n 1; }

# openssl helpers: one CA signs everything (serving certs, client certs); keys stay in $PKI_DIR (0700).
pki_cert() {  # name subject [san]
    local name="$1" subject="$2" san="${3:-}"
    [ -s "$PKI_DIR/$name.crt" ] && return 0
    openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI_DIR/$name.key" -subj "$subject" \
        -out "$PKI_DIR/$name.csr" 2>/dev/null
    local ext="$PKI_DIR/$name.ext"
    if [ -n "$san" ]; then
        printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$ext"
    else
        printf 'extendedKeyUsage=clientAuth\n' >"$ext"
    fi
    openssl x509 -req -in "$PKI_DIR/$name.csr" -CA "$PKI_DIR/ca.crt" -CAkey "$PKI_DIR/ca.key" \
        -CAcreateserial -days 3650 -extfile "$ext" -out "$PKI_DIR/$name.crt" 2>/dev/null
    rm -f "$PKI_DIR/$name.csr" "$ext"
}

make_pki() {
    mkdir -p "$PKI_DIR" && chmod 0700 "$PKI_DIR"
    if [ ! -s "$PKI_DIR/ca.crt" ]; then
        log "generating a CA, certificates and service-account keys in $PKI_DIR"
        openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$PKI_DIR/ca.key" -days 3650 \
            -subj "/CN=openenv-test-ca" -out "$PKI_DIR/ca.crt" 2>/dev/null
    fi
    pki_cert apiserver "/CN=kube-apiserver" \
        "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
    pki_cert admin "/O=system:masters/CN=openenv-admin"
    pki_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
    pki_cert kubelet "/O=system:nodes/CN=system:node:127.0.0.1" "IP:127.0.0.1,DNS:localhost"
    # A user with no role at all: the tests check that a refused request names the missing rule.
    pki_cert limited "/CN=openenv-limited"
    [ -s "$PKI_DIR/sa.key" ] || openssl genrsa -out "$PKI_DIR/sa.key" 2048 2>/dev/null
    [ -s "$PKI_DIR/sa.pub" ] || openssl rsa -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub" 2>/dev/null
}

write_kubeconfig() {  # file user
    local file="$1" user="$2"
    cat >"$file.partial" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: openenv-test
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 "$PKI_DIR/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$PKI_DIR/$user.crt")
    client-key-data: $(base64 -w0 "$PKI_DIR/$user.key")
contexts:
- name: openenv-test
  context: {cluster: openenv-test, user: $user, namespace: default}
current-context: openenv-test
KCFG
    chmod 0600 "$file.partial" && mv "$file.partial" "$file"
}

pid_of() { awk -v n="$1" '$1 == n {print $2}' "$PID_FILE" 2>/dev/null | tail -n 1; }
# Alive: the process exists and is not a zombie (a killed daemon nobody reaped yet still answers kill -0).
alive() {
    local pid state
    pid="$(pid_of "$1")"
    [ -n "$pid" ] || return 1
    state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
    [ -n "$state" ] && [ "$state" != Z ]
}

launch() {  # name command...
    local name="$1"; shift
    if alive "$name"; then return 0; fi
    log "starting $name (log: /tmp/openenv-k8s-$name.log)"
    # From / (exec keeps $! the daemon's pid): its working directory must outlive the checkout.
    (cd / && exec setsid nohup "$@" >>"/tmp/openenv-k8s-$name.log" 2>&1 </dev/null) &
    local pid=$!
    { grep -v "^$name " "$PID_FILE" 2>/dev/null || true; echo "$name $pid"; } >"$PID_FILE.partial"
    mv "$PID_FILE.partial" "$PID_FILE"
}

api_get() {  # path -> body (admin client cert)
    curl -sS --max-time 5 --cacert "$PKI_DIR/ca.crt" --cert "$PKI_DIR/admin.crt" --key "$PKI_DIR/admin.key" \
        "https://127.0.0.1:$API_PORT$1"
}

wait_for() {  # what command... (bounded by WAIT_S)
    local what="$1"; shift
    local deadline=$((SECONDS + WAIT_S))
    until "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "$what not ready within ${WAIT_S}s"; return 1
        fi
        sleep 0.5
    done
}

start_control_plane() {
    local c
    for c in kube-apiserver kube-controller-manager kube-scheduler; do
        [ -x "$BIN_DIR/$c" ] || { log "no $BIN_DIR/$c: run '$0 build' first"; exit 1; }
    done
    command -v curl >/dev/null 2>&1 || { log "curl is needed"; exit 1; }
    mkdir -p "$RUN_DIR"
    make_pki
    write_kubeconfig "$KUBECONFIG_OUT" admin
    write_kubeconfig "$K8S_DIR/kubeconfig-limited" limited
    write_kubeconfig "$RUN_DIR/kubelet.kubeconfig" kubelet
    launch etcd etcd --name openenv-test --data-dir "$RUN_DIR/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
        --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "openenv-test=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls ""
    wait_for etcd curl -sf --max-time 2 "http://127.0.0.1:$ETCD_CLIENT_PORT/health" || {
        tail -n 20 /tmp/openenv-k8s-etcd.log >&2; exit 1; }
    launch kube-apiserver "$BIN_DIR/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" --insecure-port 0 \
        --tls-cert-file "$PKI_DIR/apiserver.crt" --tls-private-key-file "$PKI_DIR/apiserver.key" \
        --client-ca-file "$PKI_DIR/ca.crt" \
        --service-account-key-file "$PKI_DIR/sa.pub" --service-account-signing-key-file "$PKI_DIR/sa.key" \
        --service-account-issuer https://kubernetes.default.svc --api-audiences https://kubernetes.default.svc \
        --service-cluster-ip-range 10.96.0.0/24 --authorization-mode Node,RBAC \
        --enable-admission-plugins NodeRestriction,ResourceQuota,LimitRanger \
        --kubelet-client-certificate "$PKI_DIR/apiserver-kubelet-client.crt" \
        --kubelet-client-key "$PKI_DIR/apiserver-kubelet-client.key" \
        --kubelet-preferred-address-types Hostname --endpoint-reconciler-type none --allow-privileged=false \
        --profiling=false
    wait_for "the API server (/readyz)" sh -c "curl -sf --max-time 2 --cacert '$PKI_DIR/ca.crt' \
        --cert '$PKI_DIR/admin.crt' --key '$PKI_DIR/admin.key' https://127.0.0.1:$API_PORT/readyz" || {
        tail -n 30 /tmp/openenv-k8s-kube-apiserver.log >&2; exit 1; }
    log "API server ready on https://127.0.0.1:$API_PORT (kubeconfig: $KUBECONFIG_OUT)"
    launch kube-controller-manager "$BIN_DIR/kube-controller-manager" \
        --kubeconfig "$KUBECONFIG_OUT" --bind-address 127.0.0.1 --port 0 --secure-port 0 \
        --service-account-private-key-file "$PKI_DIR/sa.key" --root-ca-file "$PKI_DIR/ca.crt" \
        --use-service-account-credentials=false --leader-elect=false --profiling=false
    launch kube-scheduler "$BIN_DIR/kube-scheduler" \
        --kubeconfig "$KUBECONFIG_OUT" --bind-address 127.0.0.1 --port 0 --secure-port 0 \
        --leader-elect=false --profiling=false
}

# -- 5. the node ---------------------------------------------------------------------------------
PAUSE_IMAGE="openenv-pause:3.4"

pause_image() {
    docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1 && return 0
    local tree dir
    tree="$(source_tree)"
    dir="$(mktemp -d /tmp/openenv-pause.XXXXXX)"
    log "building $PAUSE_IMAGE from $tree/build/pause (static C binary, docker import)"
    gcc -Os -Wall -static -DVERSION=v3.4-openenv -o "$dir/pause" "$tree/build/pause/linux/pause.c"
    tar -C "$dir" -cf "$dir/pause.tar" pause
    docker import --change 'ENTRYPOINT ["/pause"]' "$dir/pause.tar" "$PAUSE_IMAGE" >/dev/null
    rm -rf "$dir"
}

node_ready() {
    api_get /api/v1/nodes/127.0.0.1 | jq -e '.status.conditions[] | select(.type=="Ready") | .status=="True"' \
        | grep -qx true
}

# The kubelet refuses a loopback node IP ("nodeIP can't be loopback address"), so the node's
# InternalIP is whatever it detects; its *name* is 127.0.0.1 and the API server reaches it by name
# (--kubelet-preferred-address-types Hostname), i.e. on 127.0.0.1:10250, where alone it listens.
start_kubelet() {
    [ -x "$BIN_DIR/kubelet" ] || { log "no $BIN_DIR/kubelet: run '$0 build' first"; return 1; }
    pause_image
    mkdir -p "$RUN_DIR/kubelet"
    launch kubelet "$BIN_DIR/kubelet" \
        --kubeconfig "$RUN_DIR/kubelet.kubeconfig" --hostname-override 127.0.0.1 \
        --address 127.0.0.1 --port 10250 --read-only-port 0 --healthz-bind-address 127.0.0.1 \
        --tls-cert-file "$PKI_DIR/kubelet.crt" --tls-private-key-file "$PKI_DIR/kubelet.key" \
        --client-ca-file "$PKI_DIR/ca.crt" --anonymous-auth=false --authorization-mode AlwaysAllow \
        --container-runtime docker --docker-endpoint unix:///var/run/docker.sock \
        --pod-infra-container-image "$PAUSE_IMAGE" --cgroup-driver cgroupfs \
        --cgroups-per-qos=false --enforce-node-allocatable "" --fail-swap-on=false \
        --root-dir "$RUN_DIR/kubelet" --cert-dir "$RUN_DIR/kubelet/pki" \
        --eviction-hard "" --image-gc-high-threshold 100 --image-gc-low-threshold 99 \
        --serialize-image-pulls=false --register-node=true
    if wait_for "the kubelet's node 127.0.0.1" node_ready; then
        log "node 127.0.0.1 Ready (real kubelet on the local Docker engine)"
        return 0
    fi
    log "the kubelet did not register a Ready node; its last log lines:"
    tail -n 15 "/tmp/openenv-k8s-kubelet.log" >&2 || true
    return 1
}

start_node() {
    start_kubelet && return 0
    log "no Ready node: see /tmp/openenv-k8s-kubelet.log (the README of plugins/provider-kubernetes"
    log "lists what this sandbox needed: reflect2 1.0.2, sandbox oom_score_adj 0, node reached by name)"
    exit 1
}

stop_all() {
    local name pid
    for name in kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do
        pid="$(pid_of "$name")"
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then log "stopping $name ($pid)"; kill "$pid"; fi
    done
    rm -f "$PID_FILE"
}

case "${1:-all}" in
    build) build ;;
    start) start_control_plane; start_node ;;
    control-plane) start_control_plane ;;
    stop) stop_all ;;
    status) cat "$PID_FILE" 2>/dev/null || true; api_get /readyz; echo ;;
    all) build; start_control_plane; start_node ;;
    *) log "usage: $0 [build|start|stop|status]"; exit 2 ;;
esac
log "done"
