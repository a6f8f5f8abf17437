"""`gpulab run` on the four-node graph over two .npy inputs, payload trees in turn, with each
run's phases (issue 50's .npy uploads across revisions).

    PYTHONPATH=payload/src python3 payload/benchmarks/npy_phases_ab.py PYTHON LOG2N PAIRS \
        NAME=TREE [NAME=TREE ...]

Writes x.npy and y.npy of 2^LOG2N float32 (end_to_end.py's inputs) to /tmp/npy-ab-LOG2N, then
runs `gpulab run g.json --backend vulkan` with PYTHON as a new process per run, PYTHONPATH
each TREE in turn, one round of warm-up and PAIRS rounds measured; prints per tree the median
wall ms and the medians of timing's upload_ms, inputs_ms, record_ms and open_ms, the staging
ring (ms allocating it, ms importing it, MiB) and the upload paths of the last run, and every
upload_ms.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from end_to_end import four_nodes, write_npy_inputs

PHASES = ("upload_ms", "inputs_ms", "record_ms", "open_ms")


def run_once(python: str, tree: str, work: Path, name: str) -> dict[str, Any]:
    start = time.perf_counter()
    subprocess.run(
        [python, "-m", "gpulab", "run", "g.json", "--backend", "vulkan", "-o", f"r-{name}.json"],
        cwd=work,
        env=dict(os.environ, PYTHONPATH=tree),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall_ms = (time.perf_counter() - start) * 1e3
    result = json.loads((work / f"r-{name}.json").read_text())
    transfers = (result.get("memory") or {}).get("transfers") or {}
    return {
        "wall_ms": wall_ms,
        **{phase: result["timing"].get(phase, 0.0) for phase in PHASES},
        "staging_alloc_ms": transfers.get("staging_alloc_ms"),
        "staging_import_ms": transfers.get("staging_import_ms"),
        "staging_mib": (transfers.get("staging_bytes") or 0) / (1 << 20),
        "paths": {k: v for k, v in transfers.get("transfers", {}).get("upload", {}).items() if v},
    }


def main() -> None:
    python, log2n, pairs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    trees = dict(pair.split("=", 1) for pair in sys.argv[4:])
    work = Path(f"/tmp/npy-ab-{log2n}")
    work.mkdir(exist_ok=True)
    files = write_npy_inputs(1 << log2n, work)
    (work / "g.json").write_text(json.dumps(four_nodes(1 << log2n, files)))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for rep in range(pairs + 1):
        for name, tree in trees.items():
            run = run_once(python, tree, work, name)
            if rep:
                runs[name].append(run)
    for name, done in runs.items():
        medians = {key: statistics.median(r[key] for r in done) for key in ("wall_ms", *PHASES)}
        last = done[-1]
        print(
            f"2^{log2n} {name}: "
            + ", ".join(f"{key} {value:.1f}" for key, value in medians.items())
            + f"; staging {last['staging_alloc_ms']} ms (imports {last['staging_import_ms']} ms)"
            f" {last['staging_mib']} MiB,"
            f" paths {last['paths']}; upload_ms {[round(r['upload_ms'], 1) for r in done]}",
            flush=True,
        )
    print(f"bytes {2 * 4 << log2n}")


if __name__ == "__main__":
    main()
