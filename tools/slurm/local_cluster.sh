#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, for the tests that submit real jobs
# (tests/slurm/, docs/slurm.md):
#   eval "export $(bash tools/slurm/local_cluster.sh start)"   # installs if needed, starts, waits
#   bash tools/slurm/local_cluster.sh status                    # up (0) or not (1), and sinfo
#   bash tools/slurm/local_cluster.sh stop                      # cancels its jobs, stops its daemons
#
# `start` needs root: it installs Debian's slurmctld, slurmd, slurm-client and munge with apt-get
# when they are missing, starts munged (unless a munge daemon already answers), slurmctld and
# slurmd in the background (no systemd), writes slurm.conf (from slurm.conf.in beside this
# script) with gres.conf, state, spool, pid and log files under BUDGETED_SLURM_DIR
# (default /tmp/budgeted-slurm), waits until `sinfo` shows the node idle, and prints one line on
# stdout: SLURM_CONF=<that folder>/slurm.conf (what clients need exported). Everything else it
# says goes to stderr. Starting a cluster that is up changes nothing. `stop` ends only the
# daemons whose pid files it wrote.
#
# Two partitions: `low` (the default; PriorityTier 1, GraceTime 10 s) and `high` (PriorityTier 2):
# a job in `high` preempts a running `low` job, which gets its --signal, then is requeued. The
# node has BUDGETED_SLURM_GPUS (default 2) stand-in GPUs (null devices under the folder): jobs may
# ask --gres=gpu:N as on a real cluster (Slurm sets CUDA_VISIBLE_DEVICES; nothing else changes).
#
# Environment: BUDGETED_SLURM_DIR, BUDGETED_SLURM_GPUS, BUDGETED_SLURM_DEADLINE (seconds to wait
# for the idle node; default 300).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${BUDGETED_SLURM_DIR:-/tmp/budgeted-slurm}
GPUS=${BUDGETED_SLURM_GPUS:-2}
DEADLINE=${BUDGETED_SLURM_DEADLINE:-300}
CONF=$DIR/slurm.conf
PACKAGES=(slurmctld slurmd slurm-client munge)
COMMANDS=(slurmctld slurmd sbatch sinfo scontrol munged munge unmunge)

say() { echo "local_cluster: $*" >&2; }
die() {
  say "$*"
  exit 1
}

# the pid in $DIR/NAME.pid when that process is alive and is NAME
running() {
  local pid
  pid=$(cat "$DIR/$1.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$1" \
    && echo "$pid"
}

missing_commands() {
  local name
  for name in "${COMMANDS[@]}"; do
    command -v "$name" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$name" >/dev/null 2>&1 \
      || echo "$name"
  done
}

install_packages() {
  if [ -z "$(missing_commands)" ]; then
    return
  fi
  command -v apt-get >/dev/null 2>&1 || die "cannot install ${PACKAGES[*]}: no apt-get here"
  say "installing ${PACKAGES[*]} (apt-get)"
  local log=$DIR/log/apt.log
  if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${PACKAGES[@]}"; } >"$log" 2>&1; then
    die "apt-get install ${PACKAGES[*]} failed: $(tail -n 1 "$log") (log: $log)"
  fi
  [ -z "$(missing_commands)" ] || die "installed, yet missing: $(missing_commands | xargs)"
}

munge_answers() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  if munge_answers; then
    return
  fi
  if [ ! -s /etc/munge/munge.key ]; then
    say "creating /etc/munge/munge.key"
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged
  local deadline=$((SECONDS + 30))
  until munge_answers; do
    [ "$SECONDS" -lt "$deadline" ] || die "munged did not answer within 30 s"
    sleep 0.2
  done
  # the daemon we started (munged writes its pid file itself): the one `stop` ends
  cp /run/munge/munged.pid "$DIR/munged.pid" 2>/dev/null || pgrep -n -x munged >"$DIR/munged.pid"
}

write_config() {
  local host node
  host=$(hostname -s)
  # the node line as slurmd measures it (else "Node reconfigured socket/core boundaries")
  node=$(slurmd -C | head -n 1 | sed -e 's/ UpTime=.*//')
  [[ $node == NodeName=* ]] || die "slurmd -C printed no node line: $node"
  sed -e "s|@HOST@|$host|g" -e "s|@DIR@|$DIR|g" -e "s|@NODE@|$node|" -e "s|@GPUS@|$GPUS|" \
    -e "s|@CTLD_PORT@|${BUDGETED_SLURM_CTLD_PORT:-6817}|" \
    -e "s|@SLURMD_PORT@|${BUDGETED_SLURM_SLURMD_PORT:-6818}|" \
    "$HERE/slurm.conf.in" >"$CONF.tmp"
  mv "$CONF.tmp" "$CONF"
  # Slurm drops a GPU without a device file: character devices of their own (null devices)
  local i
  mkdir -p "$DIR/dev"
  for ((i = 0; i < GPUS; i++)); do
    [ -c "$DIR/dev/gpu$i" ] || mknod "$DIR/dev/gpu$i" c 1 3 || die "mknod $DIR/dev/gpu$i failed"
  done
  if [ "$GPUS" -gt 0 ]; then
    echo "Name=gpu File=$DIR/dev/gpu[0-$((GPUS - 1))]" >"$DIR/gres.conf"
  else
    : >"$DIR/gres.conf"
  fi
}

# the node's state as sinfo reports it (idle, mixed, allocated, down, ...), or nothing
node_state() { SLURM_CONF=$CONF sinfo -h -N -o '%T' 2>/dev/null | head -n 1; }

start() {
  [ "$(id -u)" = 0 ] || die "needs root (it installs packages and starts munged, slurmctld and slurmd as root); this user is $(id -un)"
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
  local began=$SECONDS
  install_packages
  if running slurmctld >/dev/null && running slurmd >/dev/null; then
    say "already up ($DIR)"
  else
    start_munge
    if [ ! -f "$CONF" ] || ! running slurmctld >/dev/null; then
      write_config
    fi
    export SLURM_CONF=$CONF
    if ! running slurmctld >/dev/null; then
      # -c: a clean start (no jobs of an earlier cluster); -i: ignore a stale state
      setsid slurmctld -D -c -i -f "$CONF" >>"$DIR/log/slurmctld.out" 2>&1 </dev/null &
      echo $! >"$DIR/slurmctld.pid"
    fi
    if ! running slurmd >/dev/null; then
      setsid slurmd -D -f "$CONF" >>"$DIR/log/slurmd.out" 2>&1 </dev/null &
      echo $! >"$DIR/slurmd.pid"
    fi
  fi
  local deadline=$((SECONDS + DEADLINE)) state=""
  while :; do
    state=$(node_state)
    case $state in idle* | mixed* | allocated*) break ;; esac
    running slurmctld >/dev/null || die "slurmctld exited: $(tail -n 1 "$DIR/log/slurmctld.log" 2>/dev/null)"
    running slurmd >/dev/null || die "slurmd exited: $(tail -n 1 "$DIR/log/slurmd.log" 2>/dev/null)"
    [ "$SECONDS" -lt "$deadline" ] || die "the node is not idle after ${DEADLINE} s (state: ${state:-none}; logs: $DIR/log)"
    sleep 0.5
  done
  say "up in $((SECONDS - began)) s: node $(hostname -s) $state, partitions low (default) and high"
  echo "SLURM_CONF=$CONF"
}

stop() {
  export SLURM_CONF=$CONF
  if running slurmctld >/dev/null; then
    # the cluster's jobs first, so that no job step outlives its daemons
    local jobs deadline=$((SECONDS + 60))
    jobs=$(squeue -h -o '%i' 2>/dev/null | xargs)
    if [ -n "$jobs" ]; then
      say "cancelling jobs $jobs"
      # shellcheck disable=SC2086  # one argument per job id
      scancel $jobs 2>/dev/null || true
      while [ -n "$(squeue -h -o '%i' 2>/dev/null)" ] && [ "$SECONDS" -lt "$deadline" ]; do
        sleep 0.5
      done
    fi
  fi
  local name pid stopped=()
  for name in slurmd slurmctld munged; do
    pid=$(running "$name") || {
      rm -f "$DIR/$name.pid"
      continue
    }
    kill "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    rm -f "$DIR/$name.pid"
    stopped+=("$name")
  done
  say "stopped: ${stopped[*]:-nothing was running}"
}

status() {
  local name pid up=0
  for name in munged slurmctld slurmd; do
    if pid=$(running "$name"); then
      say "$name: running (pid $pid)"
    else
      say "$name: not running"
      [ "$name" = munged ] || up=1
    fi
  done
  if [ "$up" = 0 ]; then
    SLURM_CONF=$CONF sinfo >&2 || up=1
    echo "SLURM_CONF=$CONF"
  fi
  return "$up"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: $0 start|stop|status (got '${1:-}')" ;;
esac
