#!/usr/bin/env bash
# Starts a real single-node Slurm cluster on this machine (munge, slurmctld, slurmd) with fake
# typed GPUs, for trying `tailor-coordinator --launcher slurm` and for the Slurm e2e tests.
#
#   deploy/dev-slurm/start.sh          start (or check) the cluster; prints how to use it
#   deploy/dev-slurm/stop.sh           stop it
#
# Idempotent: a running, healthy cluster is left alone. Needs root (slurmd runs jobs as the
# submitting user) and Debian's `slurm-wlm munge` packages (installed here when missing).
#
# Environment:
#   TAILOR_SLURM_DIR   state, spool, logs and config (default /tmp/tailor-dev-slurm)
#   TAILOR_SLURM_CPUS  CPUs the node advertises (default 64; more than the machine has is
#                      fine: jobs of the dev cluster are mostly idle waits, and advertising more
#                      lets many of them run side by side)
#   TAILOR_SLURM_GPUS  GRES of the node (default gpu:h100:2; typed fake GPUs, see below)
#
# GPUs are faked the way Slurm allows without hardware: gres.conf with AutoDetect=off and
# File= pointing at character devices made by `mknod PATH c 1 3` (the same device numbers as
# /dev/null). A job with --gres=gpu:h100:1 gets CUDA_VISIBLE_DEVICES; a request for a type the
# node lacks (gpu:gb200) is refused at submission, as on a real cluster.
#
# Accounting is off (no slurmdbd): `sacct` answers "accounting storage is disabled", which is
# exactly the case tailor's documented fallback covers.
set -euo pipefail

DIR=${TAILOR_SLURM_DIR:-/tmp/tailor-dev-slurm}
CPUS=${TAILOR_SLURM_CPUS:-64}
GPUS=${TAILOR_SLURM_GPUS:-gpu:h100:2}
HOST=$(hostname -s)
CONF="$DIR/etc/slurm.conf"

log() { echo "dev-slurm: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  log "must run as root (slurmd starts jobs as the submitting user)"
  exit 1
fi

# Concurrent starts (parallel tests) serialise here; the second one finds the cluster running.
mkdir -p "$DIR"
exec 9>"$DIR/.start.lock"
flock -w 120 9 || { log "another start.sh has held $DIR/.start.lock for 2 minutes"; exit 1; }
# Daemons started below must not inherit the lock (it would stay held while they run).

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  log "installing slurm-wlm and munge from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null 2>&1 || {
    apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm munge
  }
fi

# --- munge -------------------------------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "starting munged"
  rm -f /run/munge/munge.socket.2 /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged 9>&-
  for _ in $(seq 50); do
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
    sleep 0.1
  done
  munge -n | unmunge >/dev/null || { log "munged does not answer"; exit 1; }
fi

# --- configuration -------------------------------------------------------------------------
mkdir -p "$DIR"/{etc,state,spool,log,run,dev}
GPU_COUNT=${GPUS##*:}
GPU_TYPE=$(echo "$GPUS" | awk -F: 'NF==3 {print $2}')
for i in $(seq 0 $((GPU_COUNT - 1))); do
  [ -e "$DIR/dev/fakegpu$i" ] || mknod "$DIR/dev/fakegpu$i" c 1 3
done
{
  echo "AutoDetect=off"
  echo "NodeName=$HOST Name=gpu${GPU_TYPE:+ Type=$GPU_TYPE} File=$DIR/dev/fakegpu[0-$((GPU_COUNT - 1))]"
} >"$DIR/etc/gres.conf.new"
cat >"$DIR/etc/slurm.conf.new" <<EOF
# Written by tailor deploy/dev-slurm/start.sh: one node, fake typed GPUs, no accounting.
ClusterName=tailor-dev
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldPort=${TAILOR_SLURMCTLD_PORT:-6817}
SlurmdPort=${TAILOR_SLURMD_PORT:-6818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
# Quick scheduling and a short memory of finished jobs keep the dev cluster snappy; tailor
# handles jobs that leave the queue (sacct, or the fallback when accounting is off).
SchedulerParameters=sched_interval=2
MinJobAge=120
KillWait=5
InactiveLimit=0
GresTypes=gpu
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=65536 Gres=$GPUS State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
changed=0
for f in slurm.conf gres.conf; do
  if ! cmp -s "$DIR/etc/$f.new" "$DIR/etc/$f"; then
    mv "$DIR/etc/$f.new" "$DIR/etc/$f"
    changed=1
  else
    rm -f "$DIR/etc/$f.new"
  fi
done
# Plain `sbatch`/`squeue` (and the coordinator) read /etc/slurm/slurm.conf unless SLURM_CONF
# says otherwise: point it at this cluster when the machine has no Slurm config of its own.
mkdir -p /etc/slurm
if [ ! -e /etc/slurm/slurm.conf ] || [ "$(readlink /etc/slurm/slurm.conf)" = "$CONF" ]; then
  ln -sfn "$CONF" /etc/slurm/slurm.conf
  ln -sfn "$DIR/etc/gres.conf" /etc/slurm/gres.conf
  DEFAULT_CONF=1
else
  DEFAULT_CONF=0
fi
export SLURM_CONF="$CONF"

# True when the pid file names a live process (the file may vanish while a daemon exits).
running() {
  local pid
  pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

if [ "$changed" = 1 ] && { running "$DIR/run/slurmctld.pid" || running "$DIR/run/slurmd.pid"; }; then
  log "configuration changed: restarting the daemons"
  for p in slurmd slurmctld; do
    running "$DIR/run/$p.pid" && kill "$(cat "$DIR/run/$p.pid" 2>/dev/null)" || true
  done
  for _ in $(seq 100); do
    running "$DIR/run/slurmctld.pid" || running "$DIR/run/slurmd.pid" || break
    sleep 0.1
  done
fi

if ! running "$DIR/run/slurmctld.pid"; then
  log "starting slurmctld"
  # -c: a clean start; old jobs of a previous dev cluster are not wanted.
  slurmctld -c -f "$CONF" 9>&-
fi
if ! running "$DIR/run/slurmd.pid"; then
  log "starting slurmd"
  slurmd -f "$CONF" 9>&-
fi

# Ready when the node accepts work.
ready=0
for _ in $(seq 150); do
  state=$(sinfo -h -n "$HOST" -o '%T' 2>/dev/null | head -n1 || true)
  case "$state" in
    idle|mixed|allocated|completing) ready=1; break ;;
    down*|drain*) scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 0.2
done
if [ "$ready" != 1 ]; then
  log "node $HOST did not become ready (state '${state:-none}'); logs under $DIR/log"
  tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
  exit 1
fi

cat <<EOF
dev-slurm: running - node $HOST, $CPUS CPUs, GRES $GPUS, partition debug, accounting off
  config:  $CONF$([ "$DEFAULT_CONF" = 1 ] && echo " (linked from /etc/slurm/slurm.conf)")
  logs:    $DIR/log/{slurmctld,slurmd}.log
  try:     $([ "$DEFAULT_CONF" = 0 ] && echo "export SLURM_CONF=$CONF; ")sinfo; sbatch --wrap 'hostname'; squeue
  tailor:  tailor-coordinator --launcher slurm --slurm-partition debug \\
             --isolate-measurements on   # the jobs share this host's CPUs with the agents
           (tailor-worker is taken from next to tailor-coordinator; --slurm-worker-bin overrides)
  stop:    deploy/dev-slurm/stop.sh
EOF
