"""The contract's ops, one entry each, grouped by family (gpulab.ops.registry lists them)."""
