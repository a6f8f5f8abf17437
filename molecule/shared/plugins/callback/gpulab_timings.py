"""Appends each playbook's name and wall-clock duration to $GPULAB_TIMINGS_FILE.

lab/molecule-test.sh reads the file to print the converge timings; without the
variable the callback does nothing.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: gpulab_timings
type: aggregate
short_description: record playbook durations for the gpulab harness
description:
  - Appends one JSON line (playbook, seconds) per playbook run to the file named by
    the environment variable GPULAB_TIMINGS_FILE.
requirements:
  - enable in configuration
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpulab_timings"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._playbook = ""
        self._start = time.monotonic()

    def v2_playbook_on_start(self, playbook) -> None:  # type: ignore[no-untyped-def]
        self._playbook = os.path.basename(playbook._file_name)
        self._start = time.monotonic()

    def v2_playbook_on_stats(self, stats) -> None:  # type: ignore[no-untyped-def]
        path = os.environ.get("GPULAB_TIMINGS_FILE")
        if not path:
            return
        record = {"playbook": self._playbook, "seconds": round(time.monotonic() - self._start, 1)}
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
