"""`python -m gpulab`: the same as the `gpulab` command."""

from gpulab.cli.entry import entry

entry()
