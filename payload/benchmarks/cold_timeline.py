"""Where one cold `gpulab run` spends its time, thread by thread, over time (issue 50).

    PYTHONPATH=payload/src python3 payload/benchmarks/cold_timeline.py OUT.json \
        run GRAPH.json --backend vulkan -o RESULT.json
    python3 payload/benchmarks/cold_timeline.py --show OUT.json

The first form runs the command as the `gpulab` command does (gpulab.cli.launch.entry: main
with process_ends, then os._exit) while a sampler thread records every other thread's stack
each 0.5 ms, then writes the samples. Each sample is labelled by what the thread was doing:
`import X` (the innermost module being imported, X its package, or gpulab's module), else the
innermost gpulab functions (`vk/_binding:call <- vk/pipeline:__init__ <- ...`: a driver call,
the GIL released), else the innermost frame. `--show` prints, per thread, the time per label
and the runs of one label of 2 ms or more, and the gaps of over 3 ms between samples (the
sampler itself waited for the GIL: some thread held it in C code). process_cost.py gives the
same run's phases; this shows what overlaps what, and where one thread waits for the other (an
import's lock, the device opened ahead).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from typing import Any

T0 = time.perf_counter()
SAMPLE_S = 0.0005
SHOWN_RUN_S = 0.002
GAP_S = 0.003


def label(frames: list[tuple[str, str]]) -> str:
    """What a thread is doing, from its frames (file, function), innermost first."""
    frames = [f for f in frames if not f[0].endswith("cold_timeline.py") and "runpy" not in f[0]]
    for file, function in frames:
        if function != "<module>":
            continue
        if "/gpulab/" in file:
            module = file.split("/gpulab/")[-1].removesuffix(".py").replace("/", ".")
            return "import gpulab." + module
        if "site-packages/" in file:
            return "import " + file.split("site-packages/")[-1].split("/")[0].removesuffix(".py")
        return "import " + file.split("/")[-1].removesuffix(".py")
    ours = [
        f"{file.split('/gpulab/')[-1].removesuffix('.py')}:{function}"
        for file, function in frames
        if "/gpulab/" in file
    ]
    if ours:
        return " <- ".join(ours[:3])
    return f"{frames[0][0].split('/')[-1]}:{frames[0][1]}" if frames else "?"


def show(path: str) -> None:
    data = json.loads(open(path).read())  # noqa: SIM115 - a benchmark's one read
    samples: list[tuple[float, str, str]] = data["samples"]
    print("stamps (s):", {k: round(v, 4) for k, v in data["stamps"].items()})
    times = sorted({t for t, _, _ in samples})
    gaps = [(a, b - a) for a, b in itertools.pairwise(times) if b - a > GAP_S]
    print("sampler gaps (at ms, ms):", [(round(a * 1e3, 1), round(d * 1e3, 1)) for a, d in gaps])
    for thread in sorted({name for _, name, _ in samples}):
        mine = [(t, what) for t, name, what in samples if name == thread]
        print(
            f"\n== {thread}: {len(mine)} samples, {mine[0][0] * 1e3:.1f}-{mine[-1][0] * 1e3:.1f} ms"
        )
        totals: dict[str, float] = {}
        previous = mine[0][0] - SAMPLE_S
        for t, what in mine:
            totals[what] = totals.get(what, 0.0) + min(t - previous, 0.02)
            previous = t
        for what, seconds in sorted(totals.items(), key=lambda item: -item[1])[:25]:
            print(f"  {seconds * 1e3:7.1f} ms  {what}")
        print("  timeline (start ms, +ms):")
        start, current = mine[0]
        for t, what in [*mine[1:], (mine[-1][0] + 1e-9, "")]:
            if what != current:
                if t - start >= SHOWN_RUN_S:
                    print(f"    {start * 1e3:7.1f} +{(t - start) * 1e3:6.1f}  {current}")
                start, current = t, what


def record(out: str, argv: list[str]) -> None:
    samples: list[tuple[float, str, str]] = []
    stop = threading.Event()

    def sampler() -> None:
        me = threading.get_ident()
        names: dict[int | None, str] = {}
        while not stop.is_set():
            now = time.perf_counter() - T0
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                if ident not in names:
                    names = {t.ident: t.name for t in threading.enumerate()}
                frames: list[tuple[str, str]] = []
                walked: Any = frame
                while walked is not None and len(frames) < 80:
                    frames.append((walked.f_code.co_filename, walked.f_code.co_name))
                    walked = walked.f_back
                samples.append((now, names.get(ident, str(ident)), label(frames)))
            time.sleep(SAMPLE_S)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    stamps = {"ready": time.perf_counter() - T0}
    from gpulab.cli import head_start  # noqa: PLC0415 - as gpulab.cli.launch.entry does

    head_start.start(argv)
    from gpulab.cli.main import main  # noqa: PLC0415 - timed as the command's imports

    stamps["imported"] = time.perf_counter() - T0
    code = main(argv, process_ends=True)
    stamps["ran"] = time.perf_counter() - T0
    stop.set()
    thread.join()
    sys.stdout.flush()
    with open(out, "w") as stream:
        json.dump({"argv": argv, "stamps": stamps, "samples": samples}, stream)
    os._exit(code)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--show":
        show(sys.argv[2])
    elif len(sys.argv) > 2:
        record(sys.argv[1], sys.argv[2:])
    else:
        raise SystemExit(__doc__)
