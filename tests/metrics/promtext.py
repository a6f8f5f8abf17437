"""Read the text format back with prometheus_client's parser (a test-only dependency): what
Prometheus would scrape, as {name: {frozenset(labels): value}} plus each family's type."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[str, dict[frozenset[tuple[str, str]], float]]


def parse(text: str) -> tuple[Samples, dict[str, str]]:
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return samples, types


def labels(**pairs: str) -> frozenset[tuple[str, str]]:
    return frozenset(pairs.items())
