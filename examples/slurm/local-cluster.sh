#!/usr/bin/env bash
# A single-node Slurm on this machine, for trying the recipes and for CI: no systemd, no
# cgroups, every file under one directory. Run as root (it installs packages and starts
# the daemons as root).
#
#   examples/slurm/local-cluster.sh start    install slurm-wlm + munge if needed, write
#                                           slurm.conf, start munged, slurmctld, slurmd
#   examples/slurm/local-cluster.sh status   is it up (sinfo)
#   examples/slurm/local-cluster.sh stop     stop the daemons it started (by pid)
#   eval "$(examples/slurm/local-cluster.sh env)"   point sbatch/squeue at it
#
#   SPADE_SLURM_DIR   where state, spool, logs and slurm.conf go (/tmp/spade-slurm)
#   SPADE_SLURM_PORT  slurmctld's port; slurmd uses the next one (6817)
# Exit codes: 0 up/stopped, 1 could not start (the daemon's log is printed), 4 Slurm
# could not be installed (not root, no apt-get, no network).
set -euo pipefail
dir=${SPADE_SLURM_DIR:-/tmp/spade-slurm}
port=${SPADE_SLURM_PORT:-6817}
conf=$dir/slurm.conf
export SLURM_CONF=$conf

die() { echo "local-cluster: $*" >&2; exit "${2:-1}"; }

install() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
    && command -v sbatch >/dev/null && return 0
  [ "$(id -u)" = 0 ] || die "slurm-wlm and munge are not installed and this is not root" 4
  command -v apt-get >/dev/null || die "slurm-wlm and munge are not installed and there is no apt-get" 4
  echo "local-cluster: installing slurm-wlm and munge" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >"$dir/apt.log" 2>&1 \
    || { apt-get update -qq >>"$dir/apt.log" 2>&1 \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >>"$dir/apt.log" 2>&1; } \
    || { tail -5 "$dir/apt.log" >&2; die "apt-get install slurm-wlm munge failed (log: $dir/apt.log)" 4; }
}

write_conf() {
  local host node cpus mem
  host=$(hostname -s)
  # slurmd -C prints this machine's node line (CPUs, sockets, cores, RealMemory).
  node=$(slurmd -C | head -1)
  cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$node")
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
  mkdir -p "$dir/state" "$dir/spool"
  # Memory per CPU such that every CPU can hold a task: array tasks run side by side.
  cat >"$conf.tmp" <<EOF
# Written by examples/slurm/local-cluster.sh: a one-node cluster under $dir
ClusterName=spade-local
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((mem / cpus))
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
# Finished jobs stay known to scontrol for an hour (there is no accounting database).
MinJobAge=3600
KillWait=5
SchedulerParameters=sched_interval=2
$node
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$conf.tmp" "$conf"
}

start_munge() {
  # An already running munged (the system's) is used as it is.
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi
  [ -s /etc/munge/munge.key ] || { mungekey -c -f 2>/dev/null || create-munge-key -f; }
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge /etc/munge/munge.key
  chmod 0700 /etc/munge /var/log/munge /var/lib/munge
  chmod 0400 /etc/munge/munge.key
  chmod 0755 /run/munge
  # munged runs as the munge user, which cannot reach into $dir when a parent of it is
  # private to root (pytest's /tmp/pytest-of-root is 0700): its pid file goes in
  # /run/munge, and a copy in $dir marks it as ours for stop.
  rm -f /run/munge/munged.pid
  runuser -u munge -- munged --pid-file=/run/munge/munged.pid --force
  for _ in $(seq 50); do
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
      cp /run/munge/munged.pid "$dir/munged.pid"
      return 0
    fi
    sleep 0.1
  done
  die "munged did not start (see /var/log/munge/munged.log)"
}

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

up() { sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; }

start() {
  mkdir -p "$dir"
  if alive "$dir/slurmctld.pid" && alive "$dir/slurmd.pid" && up; then
    echo "local-cluster: already up ($conf)" >&2; return 0
  fi
  install
  write_conf
  start_munge
  alive "$dir/slurmctld.pid" || slurmctld -i -f "$conf" || { tail -20 "$dir/slurmctld.log" >&2; die "slurmctld did not start"; }
  alive "$dir/slurmd.pid" || slurmd -f "$conf" || { tail -20 "$dir/slurmd.log" >&2; die "slurmd did not start"; }
  for _ in $(seq 100); do
    if up; then echo "local-cluster: up; export SLURM_CONF=$conf" >&2; return 0; fi
    sleep 0.2
  done
  tail -20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2
  die "the node did not come up in 20 s"
}

stop() {
  local name pid
  for name in slurmd slurmctld munged; do
    alive "$dir/$name.pid" || continue
    pid=$(cat "$dir/$name.pid")
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    rm -f "$dir/$name.pid"
  done
  echo "local-cluster: stopped" >&2
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if up; then sinfo; else echo "local-cluster: not running" >&2; exit 1; fi ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) die "usage: local-cluster.sh start|stop|status|env" 2 ;;
esac
