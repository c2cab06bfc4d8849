#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, to run genobird's pipelines through
# `snakemake --profile pipelines/profiles/slurm` as a cluster would: Debian's slurm-wlm
# (slurmctld and slurmd) with munge, and slurmdbd over MariaDB for accounting (the
# Snakemake SLURM executor asks sacct for its jobs' states).
#
# Usage (as root): scripts/slurm_cluster.sh start|stop|status
#
# start installs what is missing (Debian: slurm-wlm slurmdbd munge mariadb-server),
# writes /etc/slurm/slurm.conf and slurmdbd.conf for this host (partitions `cpu` and
# `gpu`, as the profile names them; the node declares SLURM_CPUS CPUs (16 or the machine's,
# the more) and SLURM_MEMORY_MB of memory (65536), so that the profile's requests schedule
# on a small machine), registers the
# cluster `genobird` and the account SLURM_ACCOUNT (genobird), starts the daemons and waits
# until the node is idle. It is idempotent: a running cluster is left as it is.
set -euo pipefail
# the daemons and Debian's tools live in sbin, which a non-login shell's PATH may lack
export PATH="/usr/local/sbin:/usr/sbin:/sbin:$PATH"

cluster="genobird"
account="${SLURM_ACCOUNT:-genobird}"
memory_mb="${SLURM_MEMORY_MB:-65536}"
host="$(hostname -s)"
# the node's declared CPUs: the pipelines' rules ask for up to 16 threads (a real node's
# cores), which a smaller machine runs oversubscribed
cpus="${SLURM_CPUS:-$(( $(nproc) > 16 ? $(nproc) : 16 ))}"
state=/var/spool/slurmctld
spool=/var/spool/slurmd
logs=/var/log/slurm

say() { echo "[slurm] $*"; }
fail() { echo "[slurm] error: $*" >&2; exit 1; }
running() { pgrep -x "$1" >/dev/null 2>&1; }

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurm-wlm)
    command -v slurmdbd >/dev/null || missing+=(slurmdbd)
    command -v munged >/dev/null || missing+=(munge)
    command -v mariadbd >/dev/null || missing+=(mariadb-server)
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || fail "install ${missing[*]} (Debian/Ubuntu packages) first"
    say "installing ${missing[*]}"
    apt-get update -qq >/dev/null
    # the packages' own service starts are refused in a container; this script starts them
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 \
        || fail "apt-get install ${missing[*]} failed"
}

start_munge() {
    running munged && return 0
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
    chmod 400 /etc/munge/munge.key
    chmod 755 /run/munge
    runuser -u munge -- /usr/sbin/munged
    munge -n | unmunge >/dev/null || fail "munge does not decode its own credential"
}

start_mariadb() {
    if ! mysqladmin ping --silent >/dev/null 2>&1; then
        mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
        [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql >/dev/null
        (mariadbd-safe --user=mysql >/dev/null 2>&1 &)
        for _ in $(seq 60); do mysqladmin ping --silent >/dev/null 2>&1 && break; sleep 1; done
        mysqladmin ping --silent >/dev/null 2>&1 || fail "MariaDB did not start"
    fi
    mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
        CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
}

write_configs() {
    mkdir -p /etc/slurm "$state" "$spool" "$logs"
    cat >/etc/slurm/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
LogFile=$logs/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
    chmod 600 /etc/slurm/slurmdbd.conf
    cat >/etc/slurm/slurm.conf <<EOF
# written by genobird's scripts/slurm_cluster.sh: one node, this host
ClusterName=$cluster
# addresses given, so that no name lookup of this host is needed
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$state
SlurmdSpoolDir=$spool
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd.log
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# the node's declared CPUs and memory stand even where the machine has fewer
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP
EOF
}

start_slurm() {
    running slurmdbd || /usr/sbin/slurmdbd
    for _ in $(seq 30); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 1; done
    sacctmgr -n list cluster >/dev/null 2>&1 || fail "slurmdbd does not answer ($logs/slurmdbd.log)"
    sacctmgr -i -Q add cluster "$cluster" >/dev/null 2>&1 || true
    sacctmgr -i -Q add account "$account" cluster="$cluster" >/dev/null 2>&1 || true
    sacctmgr -i -Q add user root account="$account" cluster="$cluster" >/dev/null 2>&1 || true
    running slurmctld || /usr/sbin/slurmctld
    running slurmd || /usr/sbin/slurmd
    for _ in $(seq 60); do
        case "$(sinfo -h -n "$host" -o %t 2>/dev/null | head -1)" in
            idle*|mix*|alloc*) say "cluster $cluster up: node $host ($cpus CPUs), partitions cpu, gpu; account $account"; return 0 ;;
            drain*|down*) scontrol update nodename="$host" state=resume 2>/dev/null || true ;;
        esac
        sleep 1
    done
    fail "the node did not become idle: $(sinfo -h -N -o '%N %t %E' 2>&1)"
}

case "${1:-}" in
    start)
        [ "$(id -u)" = "0" ] || fail "run as root: it installs packages and starts daemons"
        install_packages
        start_munge
        start_mariadb
        write_configs
        start_slurm
        ;;
    stop)
        for daemon in slurmd slurmctld slurmdbd; do pkill -x "$daemon" 2>/dev/null || true; done
        say "stopped slurmd, slurmctld, slurmdbd (munged and MariaDB left running)"
        ;;
    status)
        sinfo && squeue
        ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
