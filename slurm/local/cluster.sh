#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for CI and for trying the
# slurm profile without a cluster: Debian's slurm-wlm + munge, no systemd, no
# cgroups, a partition "local" and N fake GPUs declared as generic resources so
# GPU rules are scheduled exactly as on a GPU cluster.
#
#   slurm/local/cluster.sh start   # install if missing, write the config, start munged, slurmctld, slurmd
#   slurm/local/cluster.sh stop    # stop the daemons it started, by PID
#
# Then: UNSURE_SLURM_PARTITION=local snakemake --profile slurm --slurm-status-command squeue ...
# (without slurmdbd `sacct` cannot answer, so job status comes from squeue).
# Node CPUs and memory are declared at least as large as the profile asks
# (SlurmdParameters=config_overrides), so the profile runs unchanged.
set -euo pipefail

STATE=${UNSURE_SLURM_STATE:-/tmp/unsure-slurm}
GPUS=${UNSURE_SLURM_GPUS:-2}
CPUS=${UNSURE_SLURM_CPUS:-16}
MEM_MB=${UNSURE_SLURM_MEM_MB:-131072}
HOST=$(hostname -s)

start() {
  stop  # a cluster this script started earlier (a previous run) is replaced
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null 2>&1 \
      || { apt-get update >/dev/null && apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null; }
  fi
  mkdir -p "$STATE"/{spool,ctld,log,fakegpu} /run/munge /etc/slurm
  chown munge:munge /run/munge
  [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none; }
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  for ((i = 0; i < GPUS; i++)); do
    ln -sfn /dev/null "$STATE/fakegpu/gpu$i"  # distinct paths: slurmd rejects one file listed twice
  done
  cat >/etc/slurm/slurm.conf <<CONF
ClusterName=unsure
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
DefMemPerCPU=1000
GresTypes=gpu
ReturnToService=2
MinJobAge=300
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=1
# no cgroups here: memory limits are enforced by polling (a job over its --mem is killed)
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/none
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:fake:$GPUS State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  printf 'AutoDetect=off\nNodeName=%s Name=gpu Type=fake File=%s/fakegpu/gpu[0-%d]\n' "$HOST" "$STATE" $((GPUS - 1)) \
    >/etc/slurm/gres.conf
  /usr/sbin/munged --force --pid-file="$STATE/munged.pid" 2>/dev/null
  slurmctld -c
  slurmd
  for _ in $(seq 60); do
    if sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
      echo "SLURM up: partition local, node $HOST, $CPUS CPUs, ${MEM_MB} MB, $GPUS fake GPUs (state in $STATE)"
      return 0
    fi
    sleep 0.5
  done
  echo "SLURM did not come up; logs in $STATE/log" >&2
  sinfo -N -l >&2 || true
  return 1
}

stop() {
  for name in slurmd slurmctld munged; do
    local pidfile="$STATE/$name.pid"
    [ -s "$pidfile" ] || continue
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    rm -f "$pidfile"
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
