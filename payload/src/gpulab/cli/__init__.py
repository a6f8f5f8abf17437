"""The `gpulab` command-line tool (entry point: gpulab.cli.main:entry)."""
