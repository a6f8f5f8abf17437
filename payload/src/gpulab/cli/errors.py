"""Errors of the command-line tool that map to the contract's exit codes."""

from __future__ import annotations

EXIT_OK = 0
EXIT_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_RUNTIME = 4
