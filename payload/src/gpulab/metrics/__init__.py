"""gpulab's metrics for Prometheus: Slurm's view of the cluster and each GPU's health and speed,
written for node_exporter's textfile collector (`gpulab metrics`; docs/monitoring.md).

Layer: beside gpulab.diagnostics (whose health check it runs), above gpulab.submit, below the
CLI (it never imports gpulab.cli).
"""

from __future__ import annotations

from pathlib import Path

from gpulab.metrics import slurm as slurm_metrics
from gpulab.metrics.exposition import Family, Sample, render, write_textfile
from gpulab.submit.local import LocalTransport

__all__ = ["Family", "Sample", "collect", "render", "write", "write_textfile"]


def collect(
    *, slurm: bool, gpu: bool, devices: int | None = None, bench_elements: int = 0
) -> list[Family]:
    """The metrics asked for; the GPU part loads Vulkan, the Slurm part only runs commands."""
    families: list[Family] = []
    if slurm:
        families += slurm_metrics.collect(LocalTransport().run)
    if gpu:
        # Imported only here: numpy and Vulkan are not needed for Slurm's metrics.
        from gpulab.metrics import gpu as gpu_metrics  # noqa: PLC0415

        families += gpu_metrics.collect(devices, bench_elements)
    return families


def write(families: list[Family], textfile: Path | None) -> str:
    """Render the families; write them atomically to `textfile` when given. Returns the text."""
    text = render(families)
    if textfile is not None:
        write_textfile(textfile, text)
    return text
