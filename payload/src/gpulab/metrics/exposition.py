"""Prometheus' text exposition format, and the atomic write node_exporter's textfile reader needs.

node_exporter reads every `*.prom` file of its textfile directory at each scrape: a file
written in place could be read half-written, so `write_textfile` writes a hidden temporary file
in the same directory and renames it over the old one (a rename within one file system is
atomic).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

MetricType = Literal["gauge", "counter", "untyped"]
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass(frozen=True)
class Sample:
    """One value of a metric with its labels."""

    labels: Mapping[str, str]
    value: float


@dataclass
class Family:
    """One metric: name, help text, type and its samples (one per label set)."""

    name: str
    help: str
    type: MetricType = "gauge"
    samples: list[Sample] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"not a Prometheus metric name: {self.name!r}")

    def add(self, value: float, **labels: str) -> Family:
        """Add one sample; labels are keyword arguments (`device="0"`)."""
        bad = [name for name in labels if not _LABEL.match(name) or name.startswith("__")]
        if bad:
            raise ValueError(f"{self.name}: not a Prometheus label name: {bad[0]!r}")
        self.samples.append(Sample(dict(labels), float(value)))
        return self


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def _line(name: str, sample: Sample) -> str:
    if not sample.labels:
        return f"{name} {_value(sample.value)}"
    labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(sample.labels.items()))
    return f"{name}{{{labels}}} {_value(sample.value)}"


def render(families: Iterable[Family]) -> str:
    """The families in the text format, each with its HELP and TYPE lines; families without
    samples are left out (a metric nothing measured this time is absent, not 0)."""
    lines: list[str] = []
    seen: set[str] = set()
    for family in families:
        if family.name in seen:
            raise ValueError(f"metric {family.name} given twice")
        seen.add(family.name)
        if not family.samples:
            continue
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.type}")
        lines.extend(_line(family.name, sample) for sample in family.samples)
    return "".join(line + "\n" for line in lines)


def write_textfile(path: Path, text: str) -> None:
    """Replace `path` (a `*.prom` file) with `text` atomically, readable by node_exporter."""
    if path.suffix != ".prom":
        raise ValueError(f"{path}: node_exporter's textfile collector reads only *.prom files")
    # Hidden and not ending in .prom: node_exporter never reads the temporary file.
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
