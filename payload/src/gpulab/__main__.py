"""`python -m gpulab`: the same as the `gpulab` command."""

from gpulab.cli.launch import entry

entry()
