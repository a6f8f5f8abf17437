"""Security: the munge key stays secret, credentials and daemons keep their owners, the share
is closed to the world and to root, and jobs run unprivileged.

Secrets never leave their node for a check that can run there: the node's own key is read
by a scanner on that node, which reports where it found key fragments, never the text.
Assertion messages name files and lines only, so a failure does not print a secret either.
"""

from __future__ import annotations

import base64
import inspect
import ipaddress
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import GANESHA_EXPORT, Cluster
from testinfra.host import Host

KEY = "/etc/munge/munge.key"


def key_fragments(key: bytes) -> list[str]:
    """Fragments of a secret that survive base64 line wrapping (76 characters, RFC 2045) and
    hex dumps: 32 characters from the start of each wrapped line, and each 16-byte row in hex."""
    b64, hexed = base64.b64encode(key).decode(), key.hex()
    pieces = {b64[i : i + 32] for i in range(0, len(b64) - 31, 76)}
    return sorted(pieces | {hexed[i : i + 32] for i in range(0, len(hexed) - 31, 32)})


# Runs on a node: where its munge key appears in the journal or in text under the given
# directories. Prints JSON [["journal" or a path, line number], ...], never the text.
SCANNER = (
    "import base64, json, os, subprocess, sys\n"
    + inspect.getsource(key_fragments)
    + """
key_path = sys.argv[1]
found = set(key_fragments(open(key_path, "rb").read()))
hits = []
def scan(name, lines):
    for number, line in enumerate(lines, 1):
        if any(n in line for n in found):
            hits.append([name, number])
journal = subprocess.run(["journalctl", "--no-pager", "-o", "cat"], capture_output=True)
scan("journal", journal.stdout.decode("utf-8", "replace").splitlines())
for top in sys.argv[2:]:
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if os.path.join(root, d) != "/var/log/journal"]
        for name in files:
            path = os.path.join(root, name)
            if path == key_path or not os.path.isfile(path) or os.path.getsize(path) > 8 << 20:
                continue
            with open(path, "rb") as f:
                scan(path, f.read().decode("utf-8", "replace").splitlines())
print(json.dumps(hits))
"""
)
# Besides these, the jobs' directory on the shared storage.
SCANNED_DIRS = ["/var/log", "/etc", "/tmp", "/var/tmp", "/root", "/home"]


def _read_key(node: Host) -> bytes:
    return base64.b64decode(node.check_output("base64 -w0 %s", KEY))


def _leaks(text: str, needles: list[str]) -> list[int]:
    """Line numbers of `text` holding any fragment; never the text itself."""
    return [n for n, line in enumerate(text.splitlines(), 1) if any(x in line for x in needles)]


# --- The munge key -----------------------------------------------------------------------


def test_munge_key_is_0400_munge_in_a_private_directory(cluster: Cluster, hostname: str) -> None:
    node = cluster.node(hostname)
    key, directory = node.file(KEY), node.file("/etc/munge")
    assert (key.mode, key.user, key.group) == (0o400, "munge", "munge"), hostname
    assert directory.user == "munge" and directory.mode & 0o077 == 0, (
        f"{hostname}: /etc/munge is {oct(directory.mode)} {directory.user}"
    )


def test_munge_key_appears_in_no_log_on_any_node(cluster: Cluster, hostname: str) -> None:
    node = cluster.node(hostname)
    dirs = [*SCANNED_DIRS, f"{cluster.var('payload_shared_dir')}/jobs"]
    script = f"python3 -c {_quote(SCANNER)} {KEY} {' '.join(dirs)}"
    hits = json.loads(node.check_output(script))
    assert hits == [], f"{hostname}: munge key fragments at {hits}"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _play_log() -> Path | None:
    """The Ansible log of this molecule run (molecule.yml sets log_path), or GPULAB_PLAY_LOG."""
    given = os.environ.get("GPULAB_PLAY_LOG")
    if given:
        return Path(given)
    ephemeral = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY")
    return Path(ephemeral) / "ansible.log" if ephemeral else None


def _play_records(log: str) -> str:
    """The log records of processes that ran plays. ansible-inventory --list (which the test
    fixtures run) also logs there and prints every inventory variable, as it is asked to."""
    records = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ p=)", log)
    pid = re.compile(r"^\S+ \S+ p=(\d+) ")
    players = {m.group(1) for r in records if (m := pid.match(r)) and "| PLAY [" in r}
    return "\n".join(r for r in records if (m := pid.match(r)) and m.group(1) in players)


def test_secrets_appear_in_no_play_output(cluster: Cluster, controller: Host) -> None:
    """This run's plays (create, prepare, converge, idempotence, side effect): the munge key
    is in no record of the log, the database password in no record of a play."""
    log = _play_log()
    if log is None or not log.is_file():
        pytest.skip("no play log: run under molecule, or set GPULAB_PLAY_LOG")
    text = log.read_text(encoding="utf-8", errors="replace")
    plays = _play_records(text)
    assert "munge : Write the cluster key" in plays, f"{log} holds no converge of the munge role"
    assert _leaks(text, key_fragments(_read_key(controller))) == [], f"{log}: munge key lines"
    password = str(cluster.var("slurm_dbd_db_password", "") or "")
    if password:
        assert _leaks(plays, [password]) == [], f"{log}: database password in play records"


def test_rewriting_the_key_verbosely_shows_neither_key(
    cluster: Cluster, controller: Host, tmp_path: Path
) -> None:
    """A worker with another key, healed by the munge role at -vvv --diff: the output shows
    neither the cluster key nor the worker's old key, and every node ends with the same key."""
    worker = cluster.node(cluster.workers[-1])
    worker.check_output("head -c 1024 /dev/urandom > %s", KEY)
    stray = _read_key(worker)
    playbook = tmp_path / "munge.yml"
    playbook.write_text(
        "- name: The munge role, verbosely\n"
        "  hosts: all\n  become: true\n  gather_facts: true\n  gather_subset: [min]\n"
        "  roles: [{role: munge}]\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GPULAB_TIMINGS_FILE"}
    run = subprocess.run(
        ["ansible-playbook", "-i", cluster.inventory, "-vvv", "--diff", str(playbook)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"munge role failed: {output[-3000:]}"
    assert re.search(r"changed: \[" + re.escape(cluster.workers[-1]), output), "no key rewritten"
    fragments = key_fragments(_read_key(controller)) + key_fragments(stray)
    assert _leaks(output, fragments) == [], "key fragments in the -vvv --diff output, lines above"
    sums = {name: cluster.node(name).file(KEY).sha256sum for name in cluster.hosts}
    assert len(set(sums.values())) == 1, f"keys differ after the heal: {sorted(sums)}"


# --- Slurm's credentials -----------------------------------------------------------------


def test_slurmdbd_conf_is_0600_slurm(cluster: Cluster, controller: Host) -> None:
    if not cluster.var("slurm_accounting_enabled", False):
        pytest.skip("slurm_accounting_enabled is false: no slurmdbd.conf")
    conf = controller.file("/etc/slurm/slurmdbd.conf")
    assert (conf.mode, conf.user, conf.group) == (0o600, "slurm", "slurm")


def test_db_password_only_in_slurmdbd_conf(cluster: Cluster, hostname: str) -> None:
    """The other Slurm files are world-readable: the password must be in none of them."""
    password = str(cluster.var("slurm_dbd_db_password", "") or "")
    if not password:
        pytest.skip("no slurm_dbd_db_password")
    node = cluster.node(hostname)
    paths = node.check_output("find /etc/slurm -type f").split()
    holding = [p for p in paths if password in node.file(p).content_string]
    assert set(holding) <= {"/etc/slurm/slurmdbd.conf"}, f"{hostname}: password in {holding}"


# --- The shared storage ------------------------------------------------------------------


def _storage(cluster: Cluster) -> Host:
    return cluster.node(cluster.groups["storage"][0])


def _network(node: Host) -> ipaddress.IPv4Network:
    """The storage node's own network: the address and prefix of its default route's device."""
    device = node.check_output("ip -o -4 route show default").split(" dev ")[1].split()[0]
    cidr = node.check_output("ip -o -4 addr show dev %s", device).split(" inet ")[1].split()[0]
    return ipaddress.ip_interface(cidr).network


def _export_clients(conf: str, kernel: bool) -> tuple[list[str], str]:
    """The client list and the squash setting of the gpulab export."""
    if kernel:
        entries = re.findall(r"(\S+)\(([^)]*)\)", conf)
        options = {o for _, opts in entries for o in opts.split(",")}
        squash = "no_root_squash" if "no_root_squash" in options else "root_squash"
        return [client for client, _ in entries], squash
    block = conf.split("CLIENT", 1)[1]
    clients = block.split("Clients =", 1)[1].split(";", 1)[0]
    squash = re.search(r"Squash\s*=\s*(\w+)\s*;", conf)
    return [c.strip() for c in clients.split(",")], squash.group(1) if squash else "none"


def test_export_is_limited_to_the_cluster_network_with_root_squash(cluster: Cluster) -> None:
    server = _storage(cluster)
    kernel = server.file("/etc/exports.d/gpulab.exports").exists
    path = "/etc/exports.d/gpulab.exports" if kernel else GANESHA_EXPORT
    conf = server.file(path).content_string
    clients, squash = _export_clients(conf, kernel)
    network = _network(server)
    outside = [c for c in clients if not ipaddress.ip_network(c, strict=False).subnet_of(network)]
    assert clients and not outside, f"{path}: clients {outside} are outside {network}"
    assert squash in ("root_squash", "all_squash"), f"{path}: squash is {squash}"
    assert "no_root_squash" not in conf
    if not kernel:
        # Everyone not listed gets nothing.
        assert re.search(r"EXPORT\s*{[^}]*Access_Type\s*=\s*None;", conf), path


def test_no_world_writable_directory_without_sticky_bit_on_the_share(cluster: Cluster) -> None:
    root = cluster.var("nfs_server_export_path")
    found = _storage(cluster).check_output(
        "find %s -xdev -type d -perm -0002 ! -perm -1000 -print", root
    )
    assert found == "", f"world-writable without the sticky bit: {found.split()}"


# --- Jobs and daemons --------------------------------------------------------------------


def _job_user(cluster: Cluster) -> dict[str, object]:
    users = cluster.var("identity_users", [])
    if not users:
        pytest.skip("no identity_users: no job account")
    return dict(users[0])


def test_jobs_run_as_the_unprivileged_job_user(
    cluster: Cluster, controller: Host, worker: str
) -> None:
    user = _job_user(cluster)
    out = controller.check_output(
        "runuser -u %s -- srun --nodes=1 --nodelist=%s sh -c %s",
        user["name"],
        cluster.node_name(worker),
        "id -u; id -Gn; sudo -n true 2>&1 || true",
    )
    uid, groups, sudo = [*out.splitlines(), "", "", ""][:3]
    assert int(uid) == user["uid"] != 0, f"job on {worker} ran as uid {uid}"
    privileged = {"root", "sudo", "adm", "munge", "slurm", "disk", "shadow"} & set(groups.split())
    assert not privileged, f"job user on {worker} is in {privileged}"
    assert sudo != "", f"job user on {worker} may sudo without a password"


def test_validation_results_on_the_share_belong_to_the_job_user(cluster: Cluster) -> None:
    user = _job_user(cluster)
    root = cluster.var("nfs_server_export_path")
    server = _storage(cluster)
    if not server.file(f"{root}/jobs/validate").is_directory:
        pytest.skip("no validation run on the share (molecule's side effect runs one)")
    others = server.check_output(
        "find %s/jobs/validate -mindepth 1 ! -uid %s -printf '%%p %%u\\n'", root, str(user["uid"])
    )
    assert others == "", f"not written by {user['name']}: {others.splitlines()[:10]}"


# slurmd stays root by Slurm's design: it starts each job step as the job's own user
# (setuid), which needs root. nfs-ganesha runs as root in Debian's unit: its VFS backend
# opens files by handle (CAP_DAC_READ_SEARCH) and it has no option to drop to a user.
DAEMON_USERS = {
    "munged": ("munge", lambda c, h: True),
    "slurmctld": ("slurm", lambda c, h: h in c.groups["controller"]),
    "slurmdbd": (
        "slurm",
        lambda c, h: h == c.controller and bool(c.var("slurm_accounting_enabled", False)),
    ),
    "mariadbd": (
        "mysql",
        lambda c, h: h == c.controller and bool(c.var("slurm_accounting_enabled", False)),
    ),
    "slurmd": ("root", lambda c, h: h in c.workers),
    "ganesha.nfsd": ("root", lambda c, h: h in c.groups["storage"]),
}


def test_services_run_as_their_own_users(cluster: Cluster, hostname: str) -> None:
    node = cluster.node(hostname)
    wrong = {}
    for daemon, (user, runs_here) in DAEMON_USERS.items():
        if not runs_here(cluster, hostname):
            continue
        owners = set(node.run("ps -o user= -C %s", daemon).stdout.split())
        if owners != {user}:
            wrong[daemon] = sorted(owners) or "not running"
    expected = {daemon: user for daemon, (user, _) in DAEMON_USERS.items()}
    assert wrong == {}, f"{hostname}: daemons as the wrong user {wrong}, expected {expected}"


def test_no_sshd_listens_or_takes_passwords(cluster: Cluster, hostname: str) -> None:
    # Ansible reaches the nodes through gpulab-lab-sshd (one sshd per connection, over podman
    # exec): nothing listens on port 22, and an sshd started on a node (the submit tests' and
    # the fault drills' do, and stop it again) takes keys only.
    node = cluster.node(hostname)
    assert node.check_output("ss -Hltn 'sport = :22'") == "", f"{hostname}: sshd listens"
    effective = node.check_output("sshd -T -C user=gpulab,host=x,addr=10.0.0.1").splitlines()
    assert "passwordauthentication no" in effective, f"{hostname}: sshd takes passwords"
    assert "kbdinteractiveauthentication no" in effective, f"{hostname}: keyboard-interactive"


def test_another_users_jobs_are_private(cluster: Cluster, controller: Host) -> None:
    # slurm_private_data [jobs, usage] (PrivateData): the job user sees its own jobs only;
    # root sees everyone's.
    if "jobs" not in cluster.var("slurm_private_data", ["jobs", "usage"]):
        pytest.skip("slurm_private_data leaves jobs public")
    user = cluster.var("identity_users")[0]["name"]
    job_id = controller.check_output(
        "sbatch --parsable --job-name=gpulab-private-test --output=/dev/null --wrap='sleep 60'"
    ).split(";")[0]
    try:
        assert job_id in controller.check_output("squeue --noheader --all --format=%%i").split()
        seen = controller.check_output(
            "runuser -u %s -- squeue --noheader --all --format=%%i", user
        ).split()
        assert job_id not in seen, f"{user} sees root's job {job_id}"
        shown = controller.run("runuser -u %s -- scontrol show job %s", user, job_id)
        assert "gpulab-private-test" not in shown.stdout, shown.stdout
    finally:
        controller.run("scancel %s", job_id)
