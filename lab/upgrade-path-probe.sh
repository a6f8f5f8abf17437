#!/usr/bin/env bash
# The Slurm part of the Debian 12 -> 13 upgrade (docs/operations.md), by hand on one throwaway
# container: Slurm 22.05 with accounting, jobs running and waiting, then 23.11, then 24.11, each
# step in Slurm's order (back up the database; slurmdbd, which converts it; slurmctld, which
# reads the saved state; slurmd), and after each step the jobs, `sacct` and a new job.
#
# What stands in for what: the node is a Debian 13 container from the lab's trixie image
# (make image-trixie) that holds Debian 12's Slurm 22.05 and MariaDB 10.11 (apt pinning to
# bookworm), which is the state a host is in after its distribution upgrade with Slurm held;
# the distribution upgrade itself is not run. 23.11, the release between, is Ubuntu 24.04's
# build (archive.ubuntu.com), as no Debian build of 23.x exists; it needs glibc 2.38, so it only
# installs on Debian 13. 24.11 is Debian 13's. All daemons on one node, started by hand (no
# systemd): it proves the packages, the database conversions and the state, not the roles.
# Usage: lab/upgrade-path-probe.sh   (about 3-5 minutes; removes its container at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
image=localhost/gpulab-trixie-amd64:latest
name=gpulab-upgrade-probe
work=$(mktemp -d)
trap 'podman rm -f "$name" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
step() { printf '==> [upgrade-probe] %s\n' "$*"; }

podman image exists "$image" || { echo "no $image: run make image-trixie first" >&2; exit 2; }

step "downloading Ubuntu 24.04's Slurm 23.11 and its MySQL client library"
mkdir -p "$work/lists/partial" "$work/cache" "$work/debs"
cat >"$work/sources.list" <<'EOF'
deb [trusted=yes] http://archive.ubuntu.com/ubuntu noble main universe
deb [trusted=yes] http://archive.ubuntu.com/ubuntu noble-updates main universe
EOF
apt_noble=(-oDir::Etc::SourceList="$work/sources.list" -oDir::Etc::SourceParts=/dev/null
  -oDir::State::Lists="$work/lists" -oDir::Cache="$work/cache" -oAPT::Architecture=amd64
  -oAPT::Architectures=amd64 -oAcquire::AllowInsecureRepositories=true)
apt-get "${apt_noble[@]}" update -qq >/dev/null 2>&1 || true
(cd "$work/debs" && apt-get "${apt_noble[@]}" download slurmdbd slurm-wlm-mysql-plugin slurmctld \
  slurmd slurm-client slurm-wlm-basic-plugins libmysqlclient21 mysql-common >/dev/null 2>&1)

step "node: Debian 13 holding Debian 12's Slurm 22.05 and MariaDB 10.11"
podman run -d --name "$name" --hostname probe "$image" sleep infinity >/dev/null
podman exec "$name" mkdir -p /tmp/u2311
for deb in "$work"/debs/*.deb; do podman cp "$deb" "$name:/tmp/u2311/"; done

# Each stage runs inside the container; the daemons are started by hand.
run() { podman exec -i "$name" bash -euo pipefail; }

run <<'EOS'
export DEBIAN_FRONTEND=noninteractive
cat >/etc/apt/sources.list.d/bookworm.sources <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
# slurmdbd 22.05 stops at MariaDB 11.8's answer to its concat check
# (_check_mysql_concat_is_sane): the database server stays at Debian 12's 10.11 until 24.11.
cat >/etc/apt/preferences.d/held <<EOF
Package: slurm* libslurm* mariadb* libmariadb* mysql-common galera*
Pin: release n=bookworm
Pin-Priority: 1001
EOF
apt-get update -qq
apt-get install -y -qq --no-install-recommends mariadb-server munge slurmdbd slurmctld slurmd \
  slurm-client slurm-wlm-mysql-plugin >/dev/null 2>&1
mkdir -p /run/munge /run/mysqld /var/log/slurm /var/spool/slurmctld /var/spool/slurmd
chown munge:munge /run/munge; chown mysql:mysql /run/mysqld; chown slurm:slurm /var/log/slurm /var/spool/slurmctld
dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
su -s /bin/sh munge -c /usr/sbin/munged
(mysqld_safe >/dev/null 2>&1 &)
for _ in $(seq 30); do mysqladmin ping >/dev/null 2>&1 && break; sleep 1; done
mysql -e 'CREATE USER slurm@localhost IDENTIFIED BY "probe"; GRANT ALL ON slurm_acct_db.* TO slurm@localhost;'
cat >/etc/slurm/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageUser=slurm
StoragePass=probe
StorageLoc=slurm_acct_db
EOF
chown slurm:slurm /etc/slurm/slurmdbd.conf; chmod 600 /etc/slurm/slurmdbd.conf
cat >/etc/slurm/slurm.conf <<EOF
ClusterName=probe
SlurmctldHost=probe
SlurmUser=slurm
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
SelectType=select/cons_tres
NodeName=probe CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=main Nodes=probe Default=YES MaxTime=INFINITE State=UP
EOF
/usr/sbin/slurmdbd; sleep 5
sacctmgr -i add cluster probe >/dev/null
/usr/sbin/slurmctld; sleep 3; /usr/sbin/slurmd; sleep 5
# Done, running, and waiting (two held back an hour): the node's other CPU stays free for new jobs.
sbatch -o /dev/null --mem=10 --wrap true >/dev/null
sbatch -o /dev/null -c 1 --mem=100 --wrap 'sleep 900' >/dev/null
for _ in 1 2; do sbatch -o /dev/null -c 1 --mem=100 --begin=now+3600 --wrap true >/dev/null; done
sleep 8
EOS

# One step of Slurm's order: back up the database, then slurmdbd, slurmctld, slurmd.
upgrade() {
  local label=$1 install=$2
  step "$label"
  run <<EOS
export DEBIAN_FRONTEND=noninteractive
mysqldump --single-transaction slurm_acct_db >/root/slurm_acct_db-\$(slurmdbd -V | awk '{print \$2}').sql
pkill -x slurmdbd; pkill -x slurmctld; sleep 3
$install
: >/var/log/slurm/slurmdbd.log
/usr/sbin/slurmdbd; sleep 8
grep -E 'Conversion done|fatal' /var/log/slurm/slurmdbd.log | sed 's/^/    slurmdbd: /' || true
/usr/sbin/slurmctld; sleep 5
pkill -x slurmd; sleep 2; /usr/sbin/slurmd; sleep 6
EOS
}
report() {
  run <<'EOS'
echo "    versions: $(slurmdbd -V) / $(slurmctld -V) / $(slurmd -V); $(mysql -N -e 'select version()')"
echo "    jobs: $(squeue -h -o '%i %T' | sort -n | xargs)"
echo "    sacct: $(sacct -X -n -o JobID,State -S 2026-01-01 | awk '{print $1, $2}' | xargs)"
id=$(sbatch --parsable -o /dev/null -c 1 --mem=10 --wrap true); sleep 5
echo "    a new job: $id $(sacct -X -n -j "$id" -o State | xargs)"
EOS
}

step "Slurm 22.05: one job done, one running, two waiting (--begin in an hour)"
report
upgrade "to 23.11 (Ubuntu 24.04's build)" \
  "rm -f /etc/apt/preferences.d/held; printf 'Package: mariadb* libmariadb* mysql-common galera*\nPin: release n=bookworm\nPin-Priority: 1001\n' >/etc/apt/preferences.d/held
apt-get install -y -qq --no-install-recommends --allow-downgrades -o Dpkg::Options::=--force-confold /tmp/u2311/*.deb >/dev/null 2>&1"
report
upgrade "to 24.11 (Debian 13's)" \
  "apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold slurmdbd slurm-wlm-mysql-plugin slurmctld slurmd slurm-client >/dev/null 2>&1"
report
step "MariaDB to Debian 13's 11.8 under Slurm 24.11"
run <<'EOS'
export DEBIAN_FRONTEND=noninteractive
pkill -x slurmdbd; mysqladmin shutdown; sleep 3
rm -f /etc/apt/preferences.d/held
apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold mariadb-server >/dev/null 2>&1
(mysqld_safe >/dev/null 2>&1 &)
for _ in $(seq 30); do mysqladmin ping >/dev/null 2>&1 && break; sleep 1; done
mariadb-upgrade >/dev/null 2>&1 || true
/usr/sbin/slurmdbd; sleep 6
EOS
report
