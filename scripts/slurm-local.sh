#!/usr/bin/env bash
# A one-node Slurm cluster on this machine (Debian's slurm-wlm and munge), for
# the tests and for trying `run --executor slurm` (docs/scale-out.md).
#
#   scripts/slurm-local.sh up      # installs the packages if missing, starts munged, slurmctld, slurmd
#   scripts/slurm-local.sh down    # stops them
#   scripts/slurm-local.sh env     # prints the export line for SLURM_CONF
#
# Runs as root. State, logs and the generated slurm.conf live in
# $ACCELOPT_SLURM_STATE (default /tmp/accelopt-slurm). Exit status 0 once
# `srun hostname` answers; non-zero with the reason otherwise.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE="${ACCELOPT_SLURM_STATE:-/tmp/accelopt-slurm}"
CONF="$STATE/slurm.conf"

die() { echo "slurm-local: $*" >&2; exit 1; }

install_packages() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    [ "$(id -u)" = 0 ] || die "slurm-wlm and munge are missing and this is not root"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null \
      || die "apt-get install slurm-wlm munge failed"
  fi
}

start_munge() {
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
  chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
  if ! munge -n >/dev/null 2>&1; then
    if id munge >/dev/null 2>&1; then
      su -s /bin/sh munge -c "munged" 2>/dev/null || munged --force || die "munged does not start"
    else
      munged --force || die "munged does not start"
    fi
  fi
  for _ in $(seq 50); do munge -n >/dev/null 2>&1 && return 0; sleep 0.1; done
  die "munge does not answer"
}

write_conf() {
  mkdir -p "$STATE/ctld" "$STATE/d"
  local host cpus mem
  host="$(hostname -s)"
  cpus="$(nproc)"
  mem="$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)"
  sed -e "s|@HOST@|$host|g" -e "s|@STATE@|$STATE|g" -e "s|@CPUS@|$cpus|g" -e "s|@MEM_MB@|$mem|g" \
      -e "s|@CTLD_PORT@|${ACCELOPT_SLURMCTLD_PORT:-6917}|g" -e "s|@D_PORT@|${ACCELOPT_SLURMD_PORT:-6918}|g" \
      "$HERE/slurm/slurm.conf.in" > "$CONF"
}

up() {
  [ "$(id -u)" = 0 ] || die "must run as root (slurmctld and slurmd start as root here)"
  install_packages
  start_munge
  write_conf
  export SLURM_CONF="$CONF"
  if ! scontrol ping >/dev/null 2>&1; then
    slurmctld -f "$CONF" || die "slurmctld does not start (see $STATE/slurmctld.log)"
  fi
  if ! pgrep -f "slurmd -f $CONF" >/dev/null; then
    slurmd -f "$CONF" || die "slurmd does not start (see $STATE/slurmd.log)"
  fi
  for _ in $(seq 40); do  # at most ~4 minutes
    if timeout 5 srun --quiet -N1 -n1 hostname >/dev/null 2>&1; then
      echo "export SLURM_CONF=$CONF"
      return 0
    fi
    scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true
    sleep 0.3
  done
  die "srun hostname does not answer (see $STATE/*.log)"
}

down() {
  pkill -f "slurmd -f $CONF" 2>/dev/null || true
  pkill -f "slurmctld -f $CONF" 2>/dev/null || true
  echo "slurm-local: stopped (munged left running)"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
