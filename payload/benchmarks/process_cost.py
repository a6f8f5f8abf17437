"""Where a whole `gpulab run` process spends its time: the interpreter's start, the imports, the
run (gpulab's own `timing` phases inside it) and the process's end, per backend (issue 50).

    PYTHONPATH=payload/src python3 payload/benchmarks/process_cost.py \
        [--log2n 10 26] [--repeats 3] [--python PYTHON] [--json OUT.json]

Each run is a new process of `--python` (default: this one) running the graph of
`end_to_end.py` through `gpulab.cli.main.main`, as `python -m gpulab run` does, wrapped so that
it stamps the wall clock when the interpreter is ready, after the imports and after the run;
the parent stamps the spawn and the exit. So: start = ready - spawn, imports, run, end = exit -
after the run (the interpreter's finalization, the Vulkan objects' destruction and the
driver's teardown). The same wrapper with `os._exit` right after the run shows how much of the
end is Python's own. Also prints `python -c pass` and `python -c "import numpy"` as new
processes. Medians of `--repeats` after one warm-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from end_to_end import four_nodes

WRAPPER = """
import os, sys, time
ready = time.time()
from gpulab.cli.main import main
imported = time.time()
rc = main(sys.argv[2:])
ran = time.time()
sys.stdout.flush()
os.write(2, ("STAMPS %r %r %r\\n" % (ready, imported, ran)).encode())
if sys.argv[1] == "os_exit":
    os._exit(rc or 0)
sys.exit(rc)
"""


def stamped(argv: list[str]) -> dict[str, float]:
    """One process: its start, imports, run and end in ms."""
    spawn = time.time()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    ended = time.time()
    if done.returncode != 0:
        raise SystemExit(f"{argv[-4:]} exited {done.returncode}: {done.stderr[-2000:]}")
    line = next(x for x in done.stderr.splitlines() if x.startswith("STAMPS "))
    ready, imported, ran = (float(v) for v in line.split()[1:])
    ms = 1000.0
    return {
        "wall": (ended - spawn) * ms,
        "start": (ready - spawn) * ms,
        "imports": (imported - ready) * ms,
        "run": (ran - imported) * ms,
        "end": (ended - ran) * ms,
    }


def plain(argv: list[str]) -> float:
    spawn = time.time()
    subprocess.run(argv, check=True, capture_output=True)
    return (time.time() - spawn) * 1000.0


def measure(
    python: str, n: int, backend: str, *, exit_mode: str, repeats: int, folder: Path
) -> dict[str, Any]:
    graph = folder / f"graph-{n}.json"
    graph.write_text(json.dumps(four_nodes(n)))
    result = folder / f"result-{n}-{backend}.json"
    argv = [python, "-c", WRAPPER, exit_mode, "run", str(graph), "--backend", backend]
    argv += ["--out", str(result)]
    stamped(argv)  # warm-up
    runs = [stamped(argv) for _ in range(repeats)]
    row: dict[str, Any] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    timing = json.loads(result.read_text()).get("timing", {})
    row["phases"] = {k: round(v, 1) for k, v in timing.items() if k.endswith("_ms")}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, nargs="+", default=[10, 26])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--backends", nargs="+", default=["cpu", "vulkan"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {
        "python": args.python,
        "python -c pass": statistics.median(
            plain([args.python, "-c", "pass"]) for _ in range(args.repeats + 1)
        ),
        "import numpy": statistics.median(
            plain([args.python, "-c", "import numpy"]) for _ in range(args.repeats + 1)
        ),
        "rows": [],
    }
    print(
        f"{args.python}: python -c pass {report['python -c pass']:.0f} ms, "
        f"import numpy {report['import numpy']:.0f} ms"
    )
    print(
        f"{'n':>6} {'backend':<8} {'exit':<8} {'wall':>7} {'start':>6} {'imports':>8} "
        f"{'run':>7} {'end':>6}  phases (ms)"
    )
    with tempfile.TemporaryDirectory() as name:
        for k in args.log2n:
            for backend in args.backends:
                for exit_mode in ("normal", "os_exit"):
                    row = measure(
                        args.python,
                        1 << k,
                        backend,
                        exit_mode=exit_mode,
                        repeats=args.repeats,
                        folder=Path(name),
                    )
                    row |= {"n": 1 << k, "backend": backend, "exit": exit_mode}
                    report["rows"].append(row)
                    print(
                        f"  2^{k:<3} {backend:<8} {exit_mode:<8} {row['wall']:7.0f} "
                        f"{row['start']:6.0f} {row['imports']:8.0f} {row['run']:7.0f} "
                        f"{row['end']:6.0f}  {row['phases']}",
                        flush=True,
                    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
