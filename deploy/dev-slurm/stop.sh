#!/usr/bin/env bash
# Stops the single-node dev Slurm cluster started by deploy/dev-slurm/start.sh: cancels its
# jobs, stops slurmd and slurmctld. munged is left running (other tools may use it).
# Idempotent: stopping a stopped cluster is fine. Pass --purge to delete its state directory.
set -euo pipefail

DIR=${TAILOR_SLURM_DIR:-/tmp/tailor-dev-slurm}
CONF="$DIR/etc/slurm.conf"

# True when the pid file names a live process (the file may vanish while a daemon exits).
running() {
  local pid
  pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

if [ -f "$CONF" ] && running "$DIR/run/slurmctld.pid"; then
  SLURM_CONF="$CONF" scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
  SLURM_CONF="$CONF" scancel --full --quiet 2>/dev/null || true
fi
for p in slurmd slurmctld; do
  if running "$DIR/run/$p.pid"; then
    echo "dev-slurm: stopping $p"
    kill "$(cat "$DIR/run/$p.pid" 2>/dev/null)" || true
  fi
done
for _ in $(seq 100); do
  running "$DIR/run/slurmctld.pid" || running "$DIR/run/slurmd.pid" || break
  sleep 0.1
done
for p in slurmd slurmctld; do
  if running "$DIR/run/$p.pid"; then kill -9 "$(cat "$DIR/run/$p.pid" 2>/dev/null)" || true; fi
  rm -f "$DIR/run/$p.pid"
done
if [ "$(readlink /etc/slurm/slurm.conf 2>/dev/null)" = "$CONF" ]; then
  rm -f /etc/slurm/slurm.conf /etc/slurm/gres.conf
fi
if [ "${1:-}" = "--purge" ]; then rm -rf "$DIR"; fi
echo "dev-slurm: stopped"
