"""Hypothesis for every suite: CI draws the same examples each run (a red CI is a change's
fault, never the dice); `GPULAB_HYPOTHESIS_PROFILE=explore` draws new ones each run, to look
for cases the fixed set misses (keep a found one as an `@example`)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    # The suite shares 2 cores with molecule's containers: slow draws there are load, not a bug.
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("GPULAB_HYPOTHESIS_PROFILE", "ci"))
