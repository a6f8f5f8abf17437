"""`python -m gpulab`: the same as the `gpulab` command."""

from gpulab.cli.main import entry

entry()
