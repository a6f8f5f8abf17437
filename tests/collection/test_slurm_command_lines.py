"""No Slurm command line outside gpulab's one Slurm client (module_utils/slurm_client.py).

Roles and playbooks call gpulab.cluster.slurm_info, slurm_node or slurm_job; the payload and
the lab's scripts call the client (the GPU health check and the lab run it as a program); a job
script's own `srun` and `sbatch` aside (not checked here). This greps every file that a site or
the lab runs, by kind: a YAML argv or shell string, a shell command position, a Python string
that is a program name or a command line. Prose (comments, docstrings, Markdown) is not code.
"""

from __future__ import annotations

import io
import re
import subprocess
import tokenize

import pytest

from tests.in_repo_collection import REPO

COMMANDS = r"(?:sinfo|squeue|scontrol|sacct|scancel)"
CLIENT = "collections/ansible_collections/gpulab/cluster/plugins/module_utils/slurm_client.py"
# The allow-list, and why each may write Slurm command lines of its own.
ALLOWED = {
    # The one client itself (the payload's gpulab/submit/slurm_client.py is a link to it).
    CLIENT: "the client",
    "payload/src/gpulab/submit/slurm_client.py": "a link to the client",
    # The test suites and molecule's scenarios are witnesses: they check the cluster as an
    # operator would, with Slurm's own commands, not through the code under test; unit tests
    # pin the exact argv the client writes.
    "tests/": "tests: independent witnesses and pinned argv",
    "molecule/": "molecule scenarios: independent witnesses of the cluster",
    # A bare Slurm stood up by hand on the GPU host, with neither Ansible nor the collection
    # (docs/hardware.md); its drills act as an operator does there.
    "scripts/gpu-host/": "the GPU host's hand-made Slurm and its drills",
}
# Where Slurm commands could be run from: the collection, the payload, the lab, the scripts.
ROOTS = ("collections", "payload", "lab", "scripts", "playbooks", "inventory", "site.yml")
PROSE = (".md", ".md.j2", ".txt", ".rst")

YAML_ARGV = re.compile(
    rf"\[\s*[\"']?{COMMANDS}[\"']?\s*[,\]]"  # argv: [sinfo, ...]
    rf"|^\s*-\s*[\"']?{COMMANDS}[\"']?\s*$"  # argv: as a block list
    # A shell string; not prose that names a command in parentheses or backquotes, as an
    # ansible-doc C(sinfo -V) or an alert's "(sinfo -R)" does ("$(sinfo ...)" is code).
    rf"|(?<![^$]\()(?<!`)\b{COMMANDS}\s+(?:--?\w|show\s|update\s|ping\b)"
)
SHELL = re.compile(
    rf"(?:^|[|;&(`]|\$\(|\bexec\s+|\btimeout\s+\S+\s+|\bpodman\s+exec\s+(?:-\w+\s+)*\S+\s+)"
    rf"\s*{COMMANDS}\b"
    rf"|\b{COMMANDS}\s+(?:--?\w|show\s|update\s|ping\b)"
)
PYTHON_LINE = re.compile(rf"{COMMANDS}(?:\s+(?:--?\w|show\b|update\b|reconfigure\b|ping\b)|$)")


def _files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", *ROOTS],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(
        path
        for path in listed
        if not path.endswith(PROSE)
        and not any(path == allowed or path.startswith(allowed) for allowed in ALLOWED)
        and (REPO / path).is_file()
        and not (REPO / path).is_symlink()
    )


def _uncommented(text: str) -> list[tuple[int, str]]:
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        code = re.sub(r"(^|\s)#.*$", "", line)
        if code.strip():
            lines.append((number, code))
    return lines


def _python_strings(text: str) -> list[tuple[int, str]]:
    """Each line of every string but docstrings, with its line number."""
    found = []
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    for index, token in enumerate(tokens):
        if token.type != tokenize.STRING:
            continue
        before = tokens[index - 1].type if index else tokenize.NEWLINE
        after = tokens[index + 1].type if index + 1 < len(tokens) else tokenize.NEWLINE
        if before in (tokenize.INDENT, tokenize.NEWLINE, tokenize.DEDENT) and after in (
            tokenize.NEWLINE,
            tokenize.ENDMARKER,
        ):
            continue  # a docstring, or a string standing alone
        body = re.sub(r"^[a-zA-Z]*(\"\"\"|'''|\"|')", "", token.string)
        body = re.sub(r"(\"\"\"|'''|\"|')$", "", body)
        for offset, line in enumerate(body.splitlines()):
            found.append((token.start[0] + offset, line.strip()))
    return found


def command_lines(path: str, text: str) -> list[str]:
    """`PATH:LINE: text` for each Slurm command line the file writes."""
    if path.endswith(".py"):
        hits = [(n, line) for n, line in _python_strings(text) if PYTHON_LINE.match(line)]
    elif path.endswith((".yml", ".yaml")):
        hits = [(n, line) for n, line in _uncommented(text) if YAML_ARGV.search(line)]
    elif path.endswith((".sh", ".bash")) or text.startswith("#!/bin/"):
        hits = [(n, line) for n, line in _uncommented(text) if SHELL.search(line)]
    else:
        hits = []
    return [f"{path}:{number}: {line.strip()}" for number, line in hits]


def test_no_slurm_command_line_outside_the_client() -> None:
    found = [
        hit
        for path in _files()
        for hit in command_lines(path, (REPO / path).read_text(errors="replace"))
    ]
    assert found == [], "call gpulab.cluster.slurm_info/slurm_node/slurm_job or slurm_client"


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("x.yml", "- name: Read\n  ansible.builtin.command:\n    argv: [sinfo, --noheader]\n"),
        ("x.yml", "  argv:\n    - scontrol\n    - reconfigure\n"),
        ("x.yml", "  ansible.builtin.shell: squeue --noheader | wc -l\n"),
        ("x.yml", "  ansible.builtin.shell: n=$(sinfo --noheader | wc -l)\n"),
        ("x.sh", "#!/bin/sh\nstate=$(sinfo --noheader)\n"),
        ("x.sh", "timeout 5 scontrol update nodename=a state=resume\n"),
        ("x.sh", "podman exec -i lab-controller1 scancel 5\n"),
        ("x.j2", "#!/bin/bash\nsacct -j 5\n"),
        ("x.py", 'subprocess.run(["scontrol", "show", "job", job_id])\n'),
        ("x.py", 'os.system("squeue --me")\n'),
    ],
)
def test_the_grep_finds_command_lines(path: str, text: str) -> None:
    assert command_lines(path, text)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("x.yml", "# argv: [sinfo, --noheader]\n"),
        ("x.yml", '    msg: "slurm: scontrol reconfigure: {{ reasons }}"\n'),
        ("x.yml", '  description: "worker1 is drained (sinfo -R)."\n'),
        ("x.yml", "  description: A version or C(sinfo -V) output.\n"),
        ("x.sh", '#!/bin/sh\nlog err "scontrol could not drain $node"\n'),
        ("x.py", 'raise Unreachable(f"sinfo on {where}: {message}")\n'),
        ("x.py", 'def f():\n    """Polls scontrol show job until it ends."""\n'),
        ("x.py", 'say(f"job {job_id} goes on (scancel {job_id} stops it)")\n'),
    ],
)
def test_the_grep_leaves_prose_alone(path: str, text: str) -> None:
    assert command_lines(path, text) == []


def test_the_allow_list_is_small_and_each_entry_exists() -> None:
    assert len(ALLOWED) <= 6
    for path in ALLOWED:
        assert (REPO / path).exists(), path
