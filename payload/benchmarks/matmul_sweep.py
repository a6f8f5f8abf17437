"""Every matmul plan candidate at every shape, against cuBLAS SGEMM (torch, TF32 off).

    PYTHONPATH=payload/src python3 payload/benchmarks/matmul_sweep.py \
        --sizes 1024 2048 4096 8192 1000 --shapes 4097x33x4095 --json /tmp/sweep.json

A candidate is a plan as GPULAB_MATMUL_VARIANT spells it (kernels/matmul_tiles.py:
`auto`, a tile such as 16x16x8s, split-K such as 16x16x8+split4, staged stores); `auto` is
what the tree runs by default. Each is timed like `gpulab bench` times an op (GPU timestamps
around as many records as fill about 50 ms, best of three submissions), torch's matmul with
CUDA events when torch sees CUDA (else that column is left out). Per shape the table gives
ms, TFLOP/s and the ratio to cuBLAS (above 1: faster), best first; then the candidate that
wins each regime (the geometric mean of its speed-up over `auto` across the regime's shapes),
spelled as DEVICE_PLANS' entries. `auto (again)`, measured last at each shape, shows how far
the run drifted (the winners count the better of auto's two times); one discarded measurement
warms the GPU up first. --json writes the rows and that choice (the rows so far after each shape).

Before the timing at each shape, every candidate's product of two random matrices is checked
against numpy's (float64, within matmul's tolerance: the dot bound); a candidate that is not
exact there is marked `WRONG`, and never wins (--no-check leaves the check out).

Split-K candidates are skipped for the large and thin_k regimes (many slices of a result that
already fills the device, or of a k of a few panels) unless --all is given. A candidate that
does not fit the device is reported and left out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from gpulab.backends import BackendUnavailable
from gpulab.diagnostics.bench import VulkanBench
from gpulab.diagnostics.bench_compare import Library, load_library
from gpulab.diagnostics.bench_ops import Workload, parse_shape
from gpulab.diagnostics.devices import device_summary
from gpulab.kernels import Kernels
from gpulab.kernels.matmul_tiles import (
    REGIMES,
    TILE_VARIABLE,
    VARIANT_VARIABLE,
    device_class,
    parse_plan,
    regime,
)
from gpulab.ops import reference, tolerance
from gpulab.placement import choose_device

CANDIDATES = (
    "auto",
    "32x16x8s",
    "32x16x8",
    "16x32x8s",
    "16x16x16",
    "16x16x8",
    "16x8x8",
    "8x8x8",
    "32x16x8s+unrolled",
    "16x32x8s+unrolled",
    "16x16x8+unrolled",
    "16x16x8sw",
    "16x16x8w",
    "8x16x8w",
    "32x16x8s+split2",
    "32x16x8s+split3",
    "32x16x8s+split4",
    "16x16x8+split2",
    "16x16x8+split3",
    "16x16x8+split4",
    "16x16x8+split8",
    "16x8x8+split2",
    "16x8x8+split4",
    "8x8x8+split2",
    "16x16x8w+split2",
    "8x16x8w+split2",
    "8x16x8w+split4",
    "staged",
    "32x16x8s+staged",
    "16x16x8+staged",
    "16x8x8+staged",
    "8x8x8+staged",
    "16x16x8+split2+unrolled",
    "16x16x8w+unrolled",
    "16x16x8sw+unrolled",
    "8x16x8w+unrolled",
    "8x16x16w+unrolled",
    "8x16x8w+split2+unrolled",
    "32x16x8+staged+unrolled",
    "16x16x8+staged+unrolled",
    "8x16x8w+staged+unrolled",
)
"""The default candidates: today's tiles and two more shapes (a 256 x 128 block, a 16-deep
panel), tiles unrolled (matmul_unrolled.comp), wide tiles (8 x 16 outputs per invocation:
128 x 256 blocks of 256 invocations, 128 x 128 of 128), split-K for the small and medium
products, staged stores, and the wide, staged and split ones again from
matmul_split_unrolled.comp (`unrolled`)."""
AGAIN = "auto (again)"
"""auto measured once more after the others at each shape: the drift of the run."""
SPLIT_SKIPPED = ("large", "thin_k")


def _kernels_per_candidate(bench: VulkanBench, candidates: list[str]) -> dict[str, Kernels | str]:
    """Kernels made with each candidate as GPULAB_MATMUL_VARIANT, or why it cannot run."""
    made: dict[str, Kernels | str] = {}
    before = os.environ.get(VARIANT_VARIABLE)
    try:
        for candidate in candidates:
            os.environ[VARIANT_VARIABLE] = candidate
            try:
                made[candidate] = Kernels(bench.device)
            except ValueError as exc:
                made[candidate] = str(exc)
    finally:
        if before is None:
            os.environ.pop(VARIANT_VARIABLE, None)
        else:
            os.environ[VARIANT_VARIABLE] = before
    return made


def _skipped(candidate: str, shape_regime: str, everything: bool) -> bool:
    if candidate == AGAIN or everything:
        return False
    return parse_plan(candidate).split > 1 and shape_regime in SPLIT_SKIPPED


def _exact(made: dict[str, Kernels | str], shape: tuple[int, int, int]) -> dict[str, bool]:
    """Whether each candidate's product of two random m x k, k x n matrices is within
    matmul's tolerance of numpy's (float64)."""
    m, k, n = shape
    rng = np.random.default_rng(m * 31 + k * 7 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    inputs = {"A": a, "B": b}
    expected = reference.matmul(a, b)
    allowed = tolerance.bound("matmul", inputs, expected)  # a float64 product: once a shape
    verdicts: dict[str, bool] = {}
    for candidate, kernels in made.items():
        if isinstance(kernels, Kernels):
            got = kernels.run("matmul", **inputs)
            outcome = tolerance.compare("matmul", got, expected, inputs, allowed=allowed)
            verdicts[candidate] = outcome.ok
    return verdicts


def sweep(args: argparse.Namespace) -> dict[str, Any]:
    """Measure every candidate at every shape; the rows, the winners and the device."""
    library: Library | None = None
    if not args.no_torch:
        try:
            library = load_library("torch")
        except BackendUnavailable as exc:
            print(f"({exc}; no cuBLAS column)", file=sys.stderr)
    choice = choose_device(args.device)
    bench = VulkanBench(choice.index)
    own_kernels = bench.kernels
    per_candidate = _kernels_per_candidate(bench, args.candidates)
    for candidate, made in per_candidate.items():
        if isinstance(made, str):
            print(f"{candidate}: left out: {made}", file=sys.stderr)
    shapes = [(n, n, n) for n in args.sizes] + [parse_shape(s) for s in args.shapes]
    rows: list[dict[str, Any]] = []
    try:
        info = bench.device.info
        summary = device_summary(info, full=False) | {"class": device_class(info)}
        warm = per_candidate.get("auto")
        if shapes and isinstance(warm, Kernels):
            bench.kernels = warm
            bench.measure(Workload("matmul", max(shapes[0]), shapes[0]))  # warm-up, not kept
        for m, k, n in shapes:
            workload = Workload("matmul", max(m, k, n), (m, k, n))
            shape_regime = regime(m, k, n)
            exact = _exact(per_candidate, (m, k, n)) if args.check else {}
            torch_ms = None
            if library is not None:
                torch_ms = library.measure(workload)["time_ms"]
            order = [*per_candidate, AGAIN] if "auto" in per_candidate else list(per_candidate)
            for candidate in order:
                made = per_candidate[candidate if candidate != AGAIN else "auto"]
                if isinstance(made, str) or _skipped(candidate, shape_regime, args.all):
                    continue
                bench.kernels = made
                row = bench.measure(workload)
                rows.append(
                    {
                        "shape": workload.label,
                        "regime": shape_regime,
                        "candidate": candidate,
                        "time_ms": row["time_ms"],
                        "tflops": workload.flops / row["time_ms"] / 1e9,
                        "torch_ms": torch_ms,
                        "vs_cublas": torch_ms / row["time_ms"] if torch_ms else None,
                        "exact": exact.get(candidate if candidate != AGAIN else "auto"),
                    }
                )
            _print_shape(rows, workload, shape_regime, torch_ms)
            if args.json is not None:  # what is measured so far, should the run be cut short
                args.json.write_text(json.dumps({"device": summary, "rows": rows}, indent=1))
    finally:
        bench.kernels = own_kernels
        for made in per_candidate.values():
            if isinstance(made, Kernels):
                made.close()
        bench.close()
    plans = _winners(rows)
    print("\nwinners per regime (geometric mean of the speed-up over auto):")
    for name, (candidate, speedup) in plans.items():
        print(f"  {name:<7} {candidate:<22} {speedup:.3f}x auto")
    table = {name: plans[name][0] if name in plans else "auto" for name in REGIMES}
    print(f"DEVICE_PLANS[{summary['class']!r}] = {json.dumps(table)}")
    return {
        "device": summary,
        "library": library.version if library is not None else None,
        "environment": {TILE_VARIABLE: os.environ.get(TILE_VARIABLE)},
        "rows": rows,
        "winners": {
            name: {"candidate": c, "speedup_over_auto": s} for name, (c, s) in plans.items()
        },
        "device_plans": table,
    }


def _print_shape(
    rows: list[dict[str, Any]], workload: Workload, shape_regime: str, torch_ms: float | None
) -> None:
    mine = sorted((r for r in rows if r["shape"] == workload.label), key=lambda r: r["time_ms"])
    flops = workload.flops
    cublas = f", cuBLAS {torch_ms:.4f} ms {flops / torch_ms / 1e9:.1f} TFLOP/s" if torch_ms else ""
    print(f"\n== matmul {workload.label} ({shape_regime}){cublas}")
    print(f"{'candidate':<22} {'ms':>9} {'TFLOP/s':>8} {'x cuBLAS':>9}")
    for row in mine:
        ratio = f"{row['vs_cublas']:.3f}" if row["vs_cublas"] else "-"
        wrong = "  WRONG" if row["exact"] is False else ""
        print(
            f"{row['candidate']:<22} {row['time_ms']:>9.4f} {row['tflops']:>8.2f} {ratio:>9}{wrong}"
        )


def _winners(rows: list[dict[str, Any]]) -> dict[str, tuple[str, float]]:
    """Per regime, the candidate with the best geometric mean of auto's time over its own,
    among those measured (and not found wrong) at every shape of the regime."""
    times: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for row in rows:
        if row["exact"] is False:
            continue
        name = "auto" if row["candidate"] == AGAIN else row["candidate"]
        by = times[row["regime"], row["shape"]]
        by[name] = min(by.get(name, math.inf), row["time_ms"])  # auto: the better of two
    result: dict[str, tuple[str, float]] = {}
    for name in REGIMES:
        shapes = [by for (r, _), by in times.items() if r == name and "auto" in by]
        if not shapes:
            continue
        common = set.intersection(*(set(by) for by in shapes))
        scores = {
            c: math.exp(sum(math.log(by["auto"] / by[c]) for by in shapes) / len(shapes))
            for c in common
        }
        best = max(sorted(scores), key=lambda c: scores[c])
        result[name] = (best, scores[best])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1024, 2048, 4096, 8192, 1000])
    parser.add_argument("--shapes", nargs="*", default=["4097x33x4095"], help="MxKxN products")
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    parser.add_argument("--all", action="store_true", help="split-K at every regime too")
    parser.add_argument("--no-torch", action="store_true", help="leave out the cuBLAS column")
    parser.add_argument("--device", type=int, help="Vulkan device index (default: the chosen)")
    parser.add_argument("--json", type=Path, help="write the rows and winners here")
    parser.add_argument(
        "--no-check",
        dest="check",
        action="store_false",
        help="leave out the check of every candidate's result against numpy",
    )
    args = parser.parse_args()
    for candidate in args.candidates:
        parse_plan(candidate)  # a misspelt candidate fails before anything is measured
    result = sweep(args)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
        print(f"rows in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
