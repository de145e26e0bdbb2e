#!/usr/bin/env bash
# Local single-node Slurm (slurmctld + slurmd + slurmdbd on MariaDB, munge) and the OpenSSH
# server binary, for the tests marked `slurm` (tests/slurm/). Run as root, without systemd.
#
# Contract:
#   - idempotent: safe to run again; daemons already answering are left alone;
#   - every wait is bounded; on failure it prints what failed plus the daemon log tail, exits 1;
#   - on success: `sinfo` shows node $(hostname -s) idle in partition `debug`, `sacct` works,
#     and the unprivileged job user `rlhtest` (the SSH login user of the tests) exists.
# The tests start their own sshd (own port, own host key, own config) from tests/slurm/conftest.py;
# this script only installs it.
set -euo pipefail

JOB_USER=${RLHEALTH_SLURM_USER:-rlhtest}
CLUSTER=rlhealth
NODE=$(hostname -s)
DB_PASS=rlhealth-test-only
LOG_DIR=/var/log/slurm
STATE_DIR=/var/lib/slurm

say() { echo "[slurm.sh] $*"; }
die() {
  echo "[slurm.sh] FAILED: $*" >&2
  for f in "$LOG_DIR"/slurmctld.log "$LOG_DIR"/slurmd.log "$LOG_DIR"/slurmdbd.log /var/log/munge/munged.log /var/log/rlhealth-mariadb.log; do
    if [ -s "$f" ]; then echo "---- tail $f" >&2; tail -n 30 "$f" >&2; fi
  done
  exit 1
}
# wait_until SECONDS DESCRIPTION COMMAND...: poll COMMAND every second, bounded.
wait_until() {
  local limit=$1 what=$2; shift 2
  local i
  for ((i = 0; i < limit; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  die "timed out after ${limit}s waiting for: $what"
}

[ "$(id -u)" = 0 ] || die "must run as root (installs packages and starts daemons)"

# ---- packages -------------------------------------------------------------------------------
PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server mariadb-client openssh-server openssh-client procps)
need_install=0
for bin in slurmctld slurmd slurmdbd sbatch sacct munged mariadbd sshd ps; do
  if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ]; then need_install=1; fi
done
if [ "$need_install" = 1 ]; then
  say "installing: ${PACKAGES[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # No init system here: keep package maintainer scripts from trying to start daemons.
  created_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    created_policy=1
  fi
  apt_ok=1
  timeout 600 apt-get update -q || apt_ok=0
  if [ "$apt_ok" = 1 ]; then
    timeout 900 apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" || apt_ok=0
  fi
  if [ "$created_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
  [ "$apt_ok" = 1 ] || die "apt-get update/install of ${PACKAGES[*]} failed"
fi
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

# ---- the job / SSH user ----------------------------------------------------------------------
if ! id "$JOB_USER" >/dev/null 2>&1; then
  say "creating user $JOB_USER"
  useradd --create-home --shell /bin/bash "$JOB_USER"
fi
# no password, but not "locked" either: sshd (UsePAM no) refuses even key logins to a locked
# account ('!' in the shadow password field)
if getent shadow "$JOB_USER" | cut -d: -f2 | grep -q '^!'; then usermod -p '*' "$JOB_USER"; fi

# ---- munge -----------------------------------------------------------------------------------
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  say "creating munge key"
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
chmod 0700 /etc/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  say "starting munged"
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged || die "munged did not start"
  wait_until 20 "munge round trip" sh -c 'munge -n | unmunge'
fi

# ---- MariaDB ---------------------------------------------------------------------------------
mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
if [ ! -d /var/lib/mysql/mysql ]; then
  say "initialising MariaDB data directory"
  mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/var/log/rlhealth-mariadb-init.log 2>&1 \
    || die "mariadb-install-db failed (see /var/log/rlhealth-mariadb-init.log)"
fi
if ! mariadb-admin ping >/dev/null 2>&1; then
  say "starting mariadbd"
  nohup mariadbd --user=mysql --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
    --bind-address=127.0.0.1 --log-error=/var/log/rlhealth-mariadb.log >/dev/null 2>&1 &
  wait_until 60 "mariadbd answering ping" mariadb-admin ping
fi
# a slurm user left by an earlier setup may have another password (slurmdbd then fails with
# "Access denied"): ALTER USER resets it to this script's
mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
  ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;" \
  || die "could not create the slurm accounting database"

# ---- Slurm configuration ---------------------------------------------------------------------
mkdir -p /etc/slurm "$LOG_DIR" "$STATE_DIR/slurmctld" "$STATE_DIR/slurmd" /run/slurm
chown -R slurm:slurm "$LOG_DIR" "$STATE_DIR" /run/slurm
# Node size comes from slurm.conf (SlurmdParameters=config_overrides), so a 2-CPU test machine can
# run several small test jobs at once; memory is not a consumable resource here (CR_Core).
cat > /etc/slurm/slurm.conf.new <<EOF
# written by rlhealth scripts/services/slurm.sh (test-only single-node cluster)
ClusterName=$CLUSTER
SlurmctldHost=$NODE
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=$STATE_DIR/slurmctld
SlurmdSpoolDir=$STATE_DIR/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# test speed: a timed-out job is signalled promptly and keeps its record for scontrol for 30 min
KillWait=5
OverTimeLimit=0
MinJobAge=1800
InactiveLimit=0
Waittime=0
MessageTimeout=20
NodeName=$NODE CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
cat > /etc/slurm/slurmdbd.conf.new <<EOF
# written by rlhealth scripts/services/slurm.sh (test-only)
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
LogFile=$LOG_DIR/slurmdbd.log
PidFile=/run/slurm/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
config_changed=0
for f in slurm.conf slurmdbd.conf; do
  if ! cmp -s "/etc/slurm/$f.new" "/etc/slurm/$f"; then
    mv "/etc/slurm/$f.new" "/etc/slurm/$f"; config_changed=1
  else
    rm -f "/etc/slurm/$f.new"
  fi
done
chown slurm:slurm /etc/slurm/slurmdbd.conf && chmod 0600 /etc/slurm/slurmdbd.conf
chmod 0644 /etc/slurm/slurm.conf

# pid_alive PIDFILE: the daemon recorded in PIDFILE is running
pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop_pidfile() {
  if pid_alive "$1"; then
    local pid; pid=$(cat "$1"); kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
  fi
}
if [ "$config_changed" = 1 ]; then
  say "configuration changed: restarting any running Slurm daemons"
  stop_pidfile /run/slurm/slurmd.pid; stop_pidfile /run/slurm/slurmctld.pid; stop_pidfile /run/slurm/slurmdbd.pid
fi

# ---- daemons ---------------------------------------------------------------------------------
if ! pid_alive /run/slurm/slurmdbd.pid; then
  say "starting slurmdbd"
  slurmdbd || die "slurmdbd did not start"
  wait_until 60 "slurmdbd answering sacctmgr" sacctmgr -n list cluster
fi
if ! sacctmgr -n -P list cluster format=Cluster | grep -qx "$CLUSTER"; then
  say "registering cluster $CLUSTER"
  sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster failed"
fi
if ! pid_alive /run/slurm/slurmctld.pid; then
  say "starting slurmctld"
  slurmctld || die "slurmctld did not start"
  wait_until 60 "slurmctld answering scontrol ping" sh -c 'scontrol ping | grep -q UP'
fi
if ! pid_alive /run/slurm/slurmd.pid; then
  say "starting slurmd"
  slurmd || die "slurmd did not start"
fi
node_idle() {
  local st; st=$(sinfo -h -N -n "$NODE" -o %T 2>/dev/null | head -n 1)
  case "$st" in
    idle|mixed|allocated) return 0 ;;
    down*|drain*) scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true; return 1 ;;
    *) return 1 ;;
  esac
}
wait_until 90 "node $NODE idle in sinfo" node_idle
wait_until 60 "sacct answering" sacct -n -X -S now-1hours
say "ready: $(sinfo -h -N -o '%N %T %P') ; sacct OK ; job user $JOB_USER"
