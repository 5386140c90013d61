#!/usr/bin/env bash
# A real one-node Slurm cluster on 127.0.0.1 for the slurm-marked tests (plugins/provider-slurm)
# and bench/hpc_providers.py, from Debian's packages (slurmctld, slurmd, munge, slurm-client).
#
#   .ci/slurm-setup.sh [start]   install what is missing, write the config, start munged,
#                                slurmctld and slurmd, wait until the node is idle
#   .ci/slurm-setup.sh stop      stop the three daemons (by their pid files)
#   .ci/slurm-setup.sh status    say whether the cluster answers (exit 1 if not)
#
# Idempotent: a running, answering cluster is left alone. Everything it writes (state, spool, logs,
# pid files) is under /tmp/openenv-slurm; apt keeps the packages cached outside the repo. Jobs
# run as the calling user (root in CI: SlurmdUser=root). Every wait is bounded.
set -euo pipefail

DIR=/tmp/openenv-slurm
CONF=/etc/slurm/slurm.conf
log() { printf '[slurm-setup] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

answers() { timeout 10 sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; }

stop_pidfile() {
    local file=$1
    [ -s "$file" ] || return 0
    local pid; pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        as_root kill "$pid" || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && as_root kill -9 "$pid" || true
    fi
    as_root rm -f "$file"
}

case "${1:-start}" in
status)
    if answers; then log "up: $(sinfo -h -o '%N %T %c CPUs %m MB')"; exit 0; fi
    log "down (no answer from slurmctld)"; exit 1 ;;
stop)
    stop_pidfile "$DIR/slurmd.pid"; stop_pidfile "$DIR/slurmctld.pid"; stop_pidfile "$DIR/munged.pid"
    log "stopped"; exit 0 ;;
start) ;;
*) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac

if command -v sinfo >/dev/null && answers; then
    log "already up: $(sinfo -h -o '%N %T')"; exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
        || ! command -v sbatch >/dev/null; then
    log "installing Debian's slurmctld slurmd munge slurm-client"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq
    as_root apt-get install -y -qq --no-install-recommends slurmctld slurmd munge slurm-client >/dev/null
fi

as_root mkdir -p "$DIR/state" "$DIR/spool" /etc/slurm /etc/munge /run/munge /var/lib/munge /var/log/munge
as_root chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
if [ ! -s /etc/munge/munge.key ]; then
    log "creating a munge key"
    as_root dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
as_root chown munge:munge /etc/munge/munge.key 2>/dev/null || true
as_root chmod 400 /etc/munge/munge.key

# The node as slurmd sees it (CPUs, memory), named `localhost` at 127.0.0.1; a little memory is
# kept back for the daemons.
read -r cpus mem < <(slurmd -C | awk '/^NodeName/ { for (i = 1; i <= NF; i++) { split($i, kv, "=");
    if (kv[1] == "CPUs") c = kv[2]; if (kv[1] == "RealMemory") m = kv[2] } print c, m }')
mem=$(( mem > 2048 ? mem - 1024 : mem ))
as_root tee "$CONF" >/dev/null <<EOF
# Written by .ci/slurm-setup.sh: a one-node test cluster on 127.0.0.1.
ClusterName=openenv
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=30
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF

if ! pgrep -x munged >/dev/null; then
    log "starting munged"
    as_root runuser -u munge -- /usr/sbin/munged --pid-file="$DIR/munged.pid" 2>>"$DIR/munged.err" \
        || as_root /usr/sbin/munged --force --pid-file="$DIR/munged.pid"
fi
for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.1; done
munge -n </dev/null | unmunge >/dev/null || { log "munge does not work (see $DIR/munged.err)"; exit 1; }

stop_pidfile "$DIR/slurmd.pid"; stop_pidfile "$DIR/slurmctld.pid"
log "starting slurmctld and slurmd (logs in $DIR)"
as_root slurmctld -c -i
as_root slurmd -N localhost

for _ in $(seq 120); do
    if answers; then log "up: $(sinfo -h -o '%N %T %c CPUs %m MB')"; exit 0; fi
    # A node left DOWN/DRAIN by an earlier run is put back to service.
    timeout 5 scontrol update NodeName=localhost State=RESUME >/dev/null 2>&1 || true
    sleep 0.5
done
log "the cluster did not come up within 60s; last lines of the logs:"
tail -n 20 "$DIR/slurmctld.log" "$DIR/slurmd.log" >&2 || true
exit 1
