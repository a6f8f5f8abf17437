"""The `gpulab` command-line tool (entry point: gpulab.cli.launch:entry)."""
