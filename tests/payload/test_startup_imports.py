"""What start-up loads: `gpulab --help` and `gpulab validate` import no Vulkan binding, kernel,
memory-layer or native module, and `import gpulab` loads nothing heavy until a name is used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "payload" / "examples" / "saxpy_norm.json"
HEAVY = ("vulkan", "cffi", "numpy", "gpulab.vk", "gpulab.kernels", "gpulab.memory", "gpulab.native")
"""Module prefixes that only running a graph (or a device command) may load."""

# Runs the CLI in a fresh interpreter and prints the modules it loaded as JSON on stderr's last
# line (stdout belongs to the command).
PROBE = """
import json, sys
from gpulab.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def loaded_by(*argv: str) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=False
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], report["modules"]


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(f"{p}.") for p in HEAVY)]


@pytest.mark.parametrize(
    "argv",
    [
        ("--help",),
        ("run", "--help"),
        ("bench", "--help"),
        ("validate", str(EXAMPLE)),
        ("completion", "bash"),
    ],
    ids=["help", "run-help", "bench-help", "validate", "completion"],
)
def test_light_commands_load_no_device_code(argv: tuple[str, ...]) -> None:
    code, modules = loaded_by(*argv)
    assert code == 0
    assert heavy(modules) == []


def test_run_loads_neither_slurm_nor_ssh_nor_openssl() -> None:
    # What only `gpulab submit` needs; `run` pays for its imports at every start.
    code, modules = loaded_by("run", "--help")
    assert code == 0
    assert [m for m in modules if m.startswith("gpulab.submit.")] == ["gpulab.submit.defaults"]
    assert "_hashlib" not in modules


def test_a_named_command_imports_its_own_module_alone() -> None:
    # Only `gpulab --help` (or an unknown command) builds every subcommand's parser.
    from gpulab.cli.main import COMMANDS  # noqa: PLC0415

    modules = {name: f"gpulab.cli.{name}" for name in COMMANDS}
    _, named = loaded_by("validate", str(EXAMPLE))
    # epilog (the top-level help's text) reads run's and submit's variables
    assert sorted(m for m in modules.values() if m in named) == [
        "gpulab.cli.run",
        "gpulab.cli.submit",
        "gpulab.cli.validate",
    ]
    _, everything = loaded_by("--help")
    assert set(modules.values()) <= set(everything)


def test_validate_of_a_file_input_loads_numpy_and_still_no_device_code(tmp_path: Path) -> None:
    numpy = pytest.importorskip("numpy")
    numpy.save(tmp_path / "x.npy", numpy.ones(4, dtype=numpy.float32))
    graph = {
        "version": 1,
        "inputs": {"x": {"type": "vector", "file": "x.npy"}},
        "nodes": [{"id": "s", "op": "sum", "inputs": {"x": "x"}}],
        "outputs": ["s"],
    }
    (tmp_path / "g.json").write_text(json.dumps(graph))
    code, modules = loaded_by("validate", str(tmp_path / "g.json"))
    assert code == 0
    assert "numpy" in modules
    assert [m for m in heavy(modules) if not m.startswith("numpy")] == []


def test_import_gpulab_loads_names_on_first_use() -> None:
    code = (
        "import sys, gpulab; before = sorted(sys.modules); gpulab.Graph; "
        "print(sorted(m for m in before if m.startswith(('gpulab.', 'numpy', 'vulkan'))), "
        "'gpulab.graph' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["['gpulab._lazy',", "'gpulab._version']", "True"]


def test_the_public_names_resolve_to_their_modules() -> None:
    import gpulab  # noqa: PLC0415 - after the subprocess checks, in this process
    from gpulab.running.runner import Runner  # noqa: PLC0415

    assert gpulab.Runner is Runner
    assert set(gpulab.__all__) <= set(dir(gpulab))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = gpulab.nothing  # type: ignore[attr-defined]


def test_a_vulkan_run_of_random_inputs_does_not_import_numpy_random() -> None:
    # The device makes them from PCG64's state, seeded in plain Python (kernels.pcg64).
    code, modules = loaded_by("run", str(EXAMPLE), "--backend", "vulkan", "-o", "-")
    assert code == 0
    assert "gpulab.kernels.generate" in modules
    assert [m for m in modules if m.startswith("numpy.random")] == []


def test_a_run_outside_a_slurm_job_given_gpus_does_not_import_the_slurm_readers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Only a job given GPUs or shards has gres.conf files to read and match (device_choice).
    for name in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_SHARDS_ON_NODE"):
        monkeypatch.delenv(name, raising=False)
    code, modules = loaded_by("run", str(EXAMPLE), "--backend", "vulkan", "-o", "-")
    assert code == 0
    assert "gpulab.placement.device_choice" in modules
    assert [m for m in modules if m.endswith((".slurm_gpus", ".gpu_files"))] == []
